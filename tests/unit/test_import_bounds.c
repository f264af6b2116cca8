/* TIFF import is bounded by what the image can legitimately need, not by
 * what a file declares (issue 8, items 9, 11, 13): crafted headers asking
 * for a 4 GiB tile buffer in a 146-byte file, 8192x8192 deflate tiles for
 * a 24x20 image (inflated whole before), a 100000x100000 plane in a
 * 139-byte file, a 4294967295x4294967295 image (libtiff refuses it without
 * a reason), and a tile path that is a FIFO. Each import runs in a child
 * process, whose peak virtual and resident sizes start at its size at the
 * fork: their rise is the import's. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <tiffio.h>
#include <unistd.h>
#include <zlib.h>

#include "common/error.h"
#include "common/fs.h"
#include "tessera/tessera.h"
#include "bombs.h"
#include "scratch_dir.h"

/* The most an import of these small images may raise the peaks by (the
 * worker thread's stack and the zstd/libtiff contexts are in it). */
#define VM_SLACK_KB (256 * 1024)
#define RSS_SLACK_KB (48 * 1024)

SCRATCH_FIXTURES("test_import_bounds")

/* ------------------------------------------------- hand-made TIFF files */

typedef struct tag { uint16_t tag, type; uint32_t value; } tag;
#define DATA_AT 0xDDDDDDDDu /* replaced by the offset of the data after the IFD */

static int cmp_tag(const void *a, const void *b) {
    return (int)((const tag *)a)->tag - (int)((const tag *)b)->tag;
}

static void put16(unsigned char *p, uint32_t v) { p[0] = (unsigned char)v, p[1] = (unsigned char)(v >> 8); }
static void put32(unsigned char *p, uint32_t v) { for (int i = 0; i < 4; i++) p[i] = (unsigned char)(v >> (8 * i)); }

/* A little-endian classic TIFF: the header, one IFD of single-valued SHORT
 * (3) or LONG (4) entries, then data. */
static void write_tiff(const char *path, tag *tags, int n, const void *data, size_t ndata) {
    qsort(tags, (size_t)n, sizeof *tags, cmp_tag);
    size_t head = 8 + 2 + 12 * (size_t)n + 4;
    unsigned char *b = calloc(1, head + ndata);
    assert_non_null(b);
    memcpy(b, "II*\0", 4);
    put32(b + 4, 8);
    put16(b + 8, (uint32_t)n);
    for (int i = 0; i < n; i++) {
        unsigned char *e = b + 10 + 12 * i;
        put16(e, tags[i].tag);
        put16(e + 2, tags[i].type);
        put32(e + 4, 1);
        uint32_t v = tags[i].value == DATA_AT ? (uint32_t)head : tags[i].value;
        if (tags[i].type == 3) put16(e + 8, v);
        else put32(e + 8, v);
    }
    if (ndata) memcpy(b + head, data, ndata);
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(b, 1, head + ndata, f), head + ndata);
    assert_int_equal(fclose(f), 0);
    free(b);
}

/* 16-bit greyscale, deflate (8) or none (1), strips (tile_w 0) or tiles. */
static void craft(const char *path, uint32_t w, uint32_t h, uint16_t compression, uint32_t tile_w,
                  uint32_t tile_h, const void *data, size_t ndata) {
    tag t[10] = {{256, 4, w}, {257, 4, h}, {258, 3, 16}, {259, 3, compression}, {262, 3, 1}, {277, 3, 1}};
    int n = 6;
    if (tile_w) {
        t[n++] = (tag){322, 4, tile_w};
        t[n++] = (tag){323, 4, tile_h};
        t[n++] = (tag){324, 4, DATA_AT};
        t[n++] = (tag){325, 4, (uint32_t)ndata};
    } else {
        t[n++] = (tag){273, 4, DATA_AT};
        t[n++] = (tag){278, 4, h};
        t[n++] = (tag){279, 4, (uint32_t)ndata};
    }
    write_tiff(path, t, n, data, ndata);
}

/* --------------------------------------------------------------- import */

typedef struct outcome {
    int status;
    long vm_kb, rss_kb; /* rise of the peaks */
    char message[1024];
} outcome;

/* Imports folder `name` (one tile 0.tif) in a child; a hang is ended by an
 * alarm and reported as status -1. */
static outcome import_dir(const char *name) {
    char in[1100], out[1100];
    snprintf(in, sizeof in, "%s/%s", scratch_dir, name);
    snprintf(out, sizeof out, "%s/%s.zarr", scratch_dir, name);
    int p[2];
    assert_int_equal(pipe(p), 0);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        close(p[0]);
        alarm(20);
        outcome o;
        memset(&o, 0, sizeof o);
        long vm0 = status_kb("VmPeak"), rss0 = status_kb("VmHWM");
        ts_import_options opt;
        ts_import_options_init(&opt);
        opt.input = in;
        opt.output = out;
        opt.pattern = "{index}.tif";
        opt.grid_cols = opt.grid_rows = 1;
        opt.threads = 1;
        ts_error err;
        ts_error_clear(&err);
        o.status = ts_import(&opt, NULL, &err);
        o.vm_kb = status_kb("VmPeak") - vm0;
        o.rss_kb = status_kb("VmHWM") - rss0;
        snprintf(o.message, sizeof o.message, "%s", err.message);
        ssize_t w = write(p[1], &o, sizeof o);
        _exit(w == (ssize_t)sizeof o ? 0 : 1);
    }
    close(p[1]);
    outcome o;
    memset(&o, 0, sizeof o);
    ssize_t r = read(p[0], &o, sizeof o);
    close(p[0]);
    int ws = 0;
    assert_int_equal(waitpid(pid, &ws, 0), pid);
    if (r != (ssize_t)sizeof o || !WIFEXITED(ws)) {
        o.status = -1;
        snprintf(o.message, sizeof o.message, "the import did not finish (%s %d)",
                 WIFSIGNALED(ws) ? "signal" : "exit", WIFSIGNALED(ws) ? WTERMSIG(ws) : WEXITSTATUS(ws));
    }
    print_message("%s: status %d, peak rise %ld KiB virtual, %ld KiB resident: %s\n", name, o.status, o.vm_kb,
                  o.rss_kb, o.message);
    return o;
}

static const char *tile_file(const char *name) {
    static char path[1200];
    char dir[1100];
    snprintf(dir, sizeof dir, "%s/%s", scratch_dir, name);
    assert_int_equal(ts_mkdirs(dir, NULL), TS_OK);
    snprintf(path, sizeof path, "%s/0.tif", dir);
    return path;
}

static void expect_refused(const char *name, ts_status code, const char *why) {
    outcome o = import_dir(name);
    assert_true(o.vm_kb < VM_SLACK_KB);
    assert_true(o.rss_kb < RSS_SLACK_KB);
    assert_int_equal(o.status, code);
    assert_non_null(strstr(o.message, tile_file(name)));
    assert_non_null(strstr(o.message, why));
}

/* A 146-byte file declaring 65536x32768 tiles for a 24x20 image: the tile
 * buffer was allocated from the tag (4 GiB; 22 GB in fuzzed files). */
static void test_huge_declared_tile(void **state) {
    (void)state;
    unsigned char z[64];
    uLongf n = sizeof z;
    static const unsigned char some[100];
    assert_int_equal(compress(z, &n, some, sizeof some), Z_OK);
    craft(tile_file("bigtile"), 24, 20, 8, 65536, 32768, z, n);
    expect_refused("bigtile", TS_ERR_FORMAT, "65536x32768 tiles (TileWidth 65536, TileLength 32768) for a 24x20 image");
}

/* 8192x8192 deflate tiles for a 24x20 image, the tile's stream inflating to
 * all 128 MiB of it: imported (exit 0) after inflating it whole. */
static void test_deflate_tile_bomb(void **state) {
    (void)state;
    size_t n;
    unsigned char *z = deflate_zeros((size_t)8192 * 8192 * 2, 1, &n);
    craft(tile_file("tilebomb"), 24, 20, 8, 8192, 8192, z, n);
    free(z);
    expect_refused("tilebomb", TS_ERR_FORMAT, "(TileWidth 8192, TileLength 8192) for a 24x20 image");
}

/* A 100000x100000 deflate plane in a 139-byte file: the 20 GB plane buffer
 * was allocated before its strip failed to decode. */
static void test_absurd_image_size(void **state) {
    (void)state;
    unsigned char z[64];
    uLongf n = sizeof z;
    static const unsigned char some[1000];
    assert_int_equal(compress2(z, &n, some, sizeof some, 9), Z_OK);
    craft(tile_file("bigplane"), 100000, 100000, 8, 0, 0, z, n);
    expect_refused("bigplane", TS_ERR_FORMAT, "declares 100000x100000 16-bit pixels (ImageWidth 100000, ImageLength 100000)");
    /* uncompressed: the file must hold the plane */
    static const unsigned char raw[64];
    craft(tile_file("short"), 4000, 3000, 1, 0, 0, raw, sizeof raw);
    expect_refused("short", TS_ERR_FORMAT, "24000000 bytes uncompressed, but the file is");
}

/* 4294967295 x 4294967295 pixels: libtiff refuses the file without a word
 * (its strip size overflows); the import said "cannot open as a TIFF". */
static void test_4294967295_square_says_why(void **state) {
    (void)state;
    static const unsigned char raw[64];
    craft(tile_file("huge"), 4294967295u, 4294967295u, 1, 0, 0, raw, sizeof raw);
    expect_refused("huge", TS_ERR_FORMAT, "declares 4294967295x4294967295 pixels (ImageWidth 4294967295, "
                   "ImageLength 4294967295)");
}

/* A tile that is a FIFO: libtiff's open waited for a writer forever. */
static void test_fifo_tile(void **state) {
    (void)state;
    assert_int_equal(mkfifo(tile_file("fifo"), 0600), 0);
    expect_refused("fifo", TS_ERR_IO, "a FIFO, not a regular file");
}

/* What real writers make still imports: fixed 256x256 and 1024x1024 tiles
 * for a small image, deflate strips, an uncompressed file exactly the
 * plane's size. libtiff writes these. */
static void write_libtiff(const char *path, uint32_t w, uint32_t h, uint16_t compression, uint32_t tile) {
    TIFF *t = TIFFOpen(path, "w");
    assert_non_null(t);
    TIFFSetField(t, TIFFTAG_IMAGEWIDTH, w);
    TIFFSetField(t, TIFFTAG_IMAGELENGTH, h);
    TIFFSetField(t, TIFFTAG_BITSPERSAMPLE, 16);
    TIFFSetField(t, TIFFTAG_SAMPLESPERPIXEL, 1);
    TIFFSetField(t, TIFFTAG_PHOTOMETRIC, PHOTOMETRIC_MINISBLACK);
    TIFFSetField(t, TIFFTAG_COMPRESSION, compression);
    TIFFSetField(t, TIFFTAG_PLANARCONFIG, PLANARCONFIG_CONTIG);
    if (tile) {
        TIFFSetField(t, TIFFTAG_TILEWIDTH, tile);
        TIFFSetField(t, TIFFTAG_TILELENGTH, tile);
        uint16_t *buf = calloc((size_t)tile * tile, 2);
        assert_non_null(buf);
        for (uint32_t y = 0; y < h; y += tile)
            for (uint32_t x = 0; x < w; x += tile) {
                for (uint32_t i = 0; i < tile * tile; i++) buf[i] = (uint16_t)(x + y + i);
                assert_true(TIFFWriteTile(t, buf, x, y, 0, 0) > 0);
            }
        free(buf);
    } else {
        TIFFSetField(t, TIFFTAG_ROWSPERSTRIP, 7);
        uint16_t *row = calloc(w, 2);
        assert_non_null(row);
        for (uint32_t y = 0; y < h; y++) {
            for (uint32_t x = 0; x < w; x++) row[x] = (uint16_t)(x * y);
            assert_int_equal(TIFFWriteScanline(t, row, y, 0), 1);
        }
        free(row);
    }
    TIFFClose(t);
}

static void test_real_files_still_import(void **state) {
    (void)state;
    struct { const char *name; uint32_t w, h; uint16_t comp; uint32_t tile; } cases[] = {
        {"fixed256", 24, 20, COMPRESSION_ADOBE_DEFLATE, 256},
        {"fixed1024", 40, 30, COMPRESSION_NONE, 1024},
        {"strips", 300, 200, COMPRESSION_ADOBE_DEFLATE, 0},
        {"raw", 300, 200, COMPRESSION_NONE, 0},
        {"lzw", 700, 500, COMPRESSION_LZW, 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        write_libtiff(tile_file(cases[i].name), cases[i].w, cases[i].h, cases[i].comp, cases[i].tile);
        outcome o = import_dir(cases[i].name);
        if (o.status != TS_OK) fail_msg("%s: %s", cases[i].name, o.message);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_huge_declared_tile),
        cmocka_unit_test(test_deflate_tile_bomb),
        cmocka_unit_test(test_absurd_image_size),
        cmocka_unit_test(test_4294967295_square_says_why),
        cmocka_unit_test(test_fifo_tile),
        cmocka_unit_test(test_real_files_still_import),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
