/* Reading is bounded by the chunk, not by what a stored file claims (issue
 * 8, items 7, 8, 11): decompression bombs at every step of a codec chain
 * (transpose + zstd, v2 filters + compressor, blosc, shard inner chains), a
 * zstd frame claiming 2^60 bytes, chunk and shard files far larger than any
 * encoding of their chunks (sparse files), metadata documents over 64 MiB,
 * and chunk or metadata paths that are FIFOs or devices. The bombs are built here with the real libzstd,
 * zlib and c-blosc; peak memory is measured around each read (VmHWM after
 * resetting it through /proc/self/clear_refs). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <blosc.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zlib.h>
#include <zstd.h>

#include "common/error.h"
#include "common/fs.h"
#include "zarr/zarr.h"
#include "zarr/zarr_internal.h"
#include "bombs.h"
#include "scratch_dir.h"

/* A bomb must not raise the peak resident size by more than this (the
 * chunks here are 8 KiB, the bombs 96 MiB to 1 GiB). */
#define RSS_SLACK_KB (24 * 1024)

SCRATCH_FIXTURES("test_zarr_bounds")

/* Resets the peak resident size (Linux 4.0+); returns the current one. */
static long reset_peak_kb(void) {
    FILE *f = fopen("/proc/self/clear_refs", "w");
    assert_non_null(f);
    assert_true(fputs("5", f) >= 0);
    assert_int_equal(fclose(f), 0);
    long kb = status_kb("VmRSS");
    assert_true(kb >= 0);
    return kb;
}

static void write_bytes(const char *path, const void *data, size_t n) {
    char dir[1200];
    snprintf(dir, sizeof dir, "%s", path);
    *strrchr(dir, '/') = '\0';
    assert_int_equal(ts_mkdirs(dir, NULL), TS_OK);
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(data, 1, n, f), n);
    assert_int_equal(fclose(f), 0);
}

/* (a static buffer: valid until the next call) */
static const char *array_dir(const char *name) {
    static char buf[1100];
    snprintf(buf, sizeof buf, "%s/%s", scratch_dir, name);
    return buf;
}

/* A 64x64 uint16 array (one 8 KiB chunk): v3 with the given codecs list, or
 * v2 with the given compressor and filters. */
static void v3_array(const char *dir, const char *codecs) {
    char doc[2048], path[1200];
    snprintf(doc, sizeof doc,
             "{\"zarr_format\":3,\"node_type\":\"array\",\"shape\":[64,64],\"data_type\":\"uint16\","
             "\"chunk_grid\":{\"name\":\"regular\",\"configuration\":{\"chunk_shape\":[64,64]}},"
             "\"chunk_key_encoding\":{\"name\":\"default\"},\"fill_value\":0,\"codecs\":%s}", codecs);
    snprintf(path, sizeof path, "%s/zarr.json", dir);
    write_bytes(path, doc, strlen(doc));
}

static void v2_array(const char *dir, const char *compressor, const char *filters) {
    char doc[2048], path[1200];
    snprintf(doc, sizeof doc,
             "{\"zarr_format\":2,\"shape\":[64,64],\"chunks\":[64,64],\"dtype\":\"<u2\",\"order\":\"C\","
             "\"fill_value\":0,\"compressor\":%s,\"filters\":%s}", compressor, filters);
    snprintf(path, sizeof path, "%s/.zarray", dir);
    write_bytes(path, doc, strlen(doc));
}

#define TRANSPOSE_BYTES "{\"name\":\"transpose\",\"configuration\":{\"order\":[1,0]}},{\"name\":\"bytes\",\"configuration\":{\"endian\":\"little\"}}"
#define ZSTD "{\"name\":\"zstd\",\"configuration\":{\"level\":1,\"checksum\":false}}"


/* total zero bytes as one zstd frame from libzstd's streaming encoder, with
 * its content size in the header when pledged. */
static void *zstd_zeros(size_t total, bool pledge, size_t *n) {
    ZSTD_CCtx *cc = ZSTD_createCCtx();
    assert_non_null(cc);
    ZSTD_CCtx_setParameter(cc, ZSTD_c_compressionLevel, 1);
    if (pledge) ZSTD_CCtx_setPledgedSrcSize(cc, total);
    size_t cap = total / 1000 + (1 << 20);
    unsigned char *out = malloc(cap);
    assert_non_null(out);
    ZSTD_outBuffer ob = {out, cap, 0};
    for (size_t left = total; left > 0;) {
        size_t k = left < sizeof bomb_zeros ? left : sizeof bomb_zeros;
        left -= k;
        ZSTD_inBuffer ib = {bomb_zeros, k, 0};
        size_t r;
        do {
            r = ZSTD_compressStream2(cc, &ob, &ib, left ? ZSTD_e_continue : ZSTD_e_end);
            assert_false(ZSTD_isError(r));
        } while (ib.pos < ib.size || (!left && r != 0));
    }
    ZSTD_freeCCtx(cc);
    *n = ob.pos;
    return out;
}

static ts_status read_all(const char *dir, ts_error *err, long *rss_kb) {
    tz_array *a = NULL;
    ts_status st = tz_array_open(dir, &a, err);
    if (st) return st;
    static uint16_t buf[64 * 64];
    int64_t start[2] = {0, 0}, count[2] = {64, 64};
    long base = reset_peak_kb();
    st = tz_array_read(a, start, count, buf, err);
    *rss_kb = status_kb("VmHWM") - base;
    tz_array_close(a);
    return st;
}

/* A corrupt chunk's refusal: TS_ERR_CORRUPT naming the array and the key,
 * saying what went past which bound, at no more memory than a chunk. */
static void expect_refused(const char *dir, const char *key, const char *why) {
    ts_error err;
    long rss = 0;
    ts_status st = read_all(dir, &err, &rss);
    print_message("%s: %s (peak rise %ld KiB)\n", dir, err.message, rss);
    assert_true(rss < RSS_SLACK_KB);
    assert_int_equal(st, TS_ERR_CORRUPT);
    assert_non_null(strstr(err.message, dir));
    assert_non_null(strstr(err.message, key));
    assert_non_null(strstr(err.message, why));
}

/* Encoded chunk below the file-size bound: the decoder's own bounds are
 * what is tested, not the size check before reading. */
static void below_file_bound(const char *dir, size_t n) {
    tz_array *a = NULL;
    ts_error err;
    assert_int_equal(tz_array_open(dir, &a, &err), TS_OK);
    assert_true(n <= tz_chain_max_encoded(&tz_array_get_meta(a)->codecs, 64 * 64 * 2));
    tz_array_close(a);
}

/* transpose + zstd: the zstd step's output was malloc'd at whatever the
 * frame said (512 MiB here, 1.44 GB in the issue) before the size check;
 * with and without the content size in the frame header. */
static void test_transpose_zstd_bomb(void **state) {
    (void)state;
    for (int pledge = 0; pledge < 2; pledge++) {
        const char *dir = array_dir(pledge ? "tz_sized" : "tz_unsized");
        v3_array(dir, "[" TRANSPOSE_BYTES "," ZSTD "]");
        size_t n;
        void *bomb = zstd_zeros((size_t)512 << 20, pledge, &n);
        char file[1200];
        snprintf(file, sizeof file, "%s/c/0/0", dir);
        write_bytes(file, bomb, n);
        free(bomb);
        below_file_bound(dir, n);
        expect_refused(dir, "c/0/0", pledge ? "zstd frame claims 536870912 bytes" : "zstd data decodes to more than");
    }
}

/* A zstd frame header claiming 2^60 bytes in a step whose output was
 * allocated from it: malloc(2^60) failed and was reported as out of memory. */
static void test_zstd_frame_claims_2p60(void **state) {
    (void)state;
    const char *dir = array_dir("claim2p60");
    v3_array(dir, "[" TRANSPOSE_BYTES "," ZSTD "]");
    /* magic, descriptor (8-byte content size, window byte), window 1 MiB,
     * content size 2^60, one last RLE block of 8192 zeros. */
    unsigned char frame[18] = {0x28, 0xb5, 0x2f, 0xfd, 0xc0, 10 << 3};
    uint64_t claim = (uint64_t)1 << 60;
    for (int i = 0; i < 8; i++) frame[6 + i] = (unsigned char)(claim >> (8 * i));
    uint32_t block = 1u | (1u << 1) | (8192u << 3);
    for (int i = 0; i < 3; i++) frame[14 + i] = (unsigned char)(block >> (8 * i));
    frame[17] = 0;
    char file[1200];
    snprintf(file, sizeof file, "%s/c/0/0", dir);
    write_bytes(file, frame, sizeof frame);
    expect_refused(dir, "c/0/0", "zstd frame claims 1152921504606846976 bytes, more than the chunk's 8192 bytes");
}

/* v2 filters [zlib] + compressor zlib: the compressor's inflate grew its
 * buffer to whatever the stream held (96 MiB here, 964 MB in the issue). */
static void test_v2_zlib_filter_bomb(void **state) {
    (void)state;
    const char *dir = array_dir("v2zlib");
    v2_array(dir, "{\"id\":\"zlib\",\"level\":1}", "[{\"id\":\"zlib\",\"level\":1}]");
    size_t n;
    void *bomb = deflate_zeros((size_t)96 << 20, 6, &n);
    char file[1200];
    snprintf(file, sizeof file, "%s/0.0", dir);
    write_bytes(file, bomb, n);
    free(bomb);
    below_file_bound(dir, n);
    expect_refused(dir, "0.0", "zlib/gzip data inflates to more than");
}

/* blosc (zstd inside) after a transpose: the buffer was allocated from the
 * header's size and filled; now the header is checked first. */
static void test_blosc_bomb(void **state) {
    (void)state;
    const char *dir = array_dir("tblosc");
    v3_array(dir, "[" TRANSPOSE_BYTES ",{\"name\":\"blosc\",\"configuration\":{\"cname\":\"zstd\",\"clevel\":5,"
                  "\"shuffle\":\"noshuffle\",\"typesize\":2,\"blocksize\":0}}]");
    size_t total = (size_t)256 << 20;
    unsigned char *src = calloc(1, total), *enc = malloc(total / 100);
    assert_non_null(src);
    assert_non_null(enc);
    int n = blosc_compress_ctx(5, BLOSC_NOSHUFFLE, 2, total, src, enc, total / 100, "zstd", 0, 1);
    free(src);
    assert_true(n > 0);
    char file[1200];
    snprintf(file, sizeof file, "%s/c/0/0", dir);
    write_bytes(file, enc, (size_t)n);
    free(enc);
    below_file_bound(dir, (size_t)n);
    expect_refused(dir, "c/0/0", "blosc header claims 268435456 bytes");
}

/* The same bomb as an inner chunk of a shard. */
static void test_shard_inner_bomb(void **state) {
    (void)state;
    const char *dir = array_dir("shardbomb");
    v3_array(dir, "[{\"name\":\"sharding_indexed\",\"configuration\":{\"chunk_shape\":[32,32],\"codecs\":["
                  TRANSPOSE_BYTES "," ZSTD "],\"index_codecs\":[{\"name\":\"bytes\",\"configuration\":"
                  "{\"endian\":\"little\"}},{\"name\":\"crc32c\"}],\"index_location\":\"end\"}}]");
    size_t n;
    unsigned char *bomb = zstd_zeros((size_t)512 << 20, true, &n);
    uint64_t idx[8] = {0, n, UINT64_MAX, UINT64_MAX, UINT64_MAX, UINT64_MAX, UINT64_MAX, UINT64_MAX};
    unsigned char *file = malloc(n + 68);
    assert_non_null(file);
    memcpy(file, bomb, n);
    memcpy(file + n, idx, 64); /* little-endian host */
    uint32_t crc = tz_crc32c(0, idx, 64);
    memcpy(file + n + 64, &crc, 4);
    char path[1200];
    snprintf(path, sizeof path, "%s/c/0/0", dir);
    write_bytes(path, file, n + 68);
    free(bomb);
    free(file);
    expect_refused(dir, "inner chunk 0", "zstd frame claims 536870912 bytes, more than the chunk's 2048 bytes");
}

/* A chunk file far larger than any encoding of its chunk (1 GiB, sparse) is
 * refused by its size; it was read whole. */
static void test_sparse_chunk_file(void **state) {
    (void)state;
    const char *dir = array_dir("sparse");
    v2_array(dir, "{\"id\":\"zstd\",\"level\":1}", "null");
    char file[1200];
    snprintf(file, sizeof file, "%s/0.0", dir);
    write_bytes(file, "x", 1);
    assert_int_equal(truncate(file, (off_t)1 << 30), 0);
    expect_refused(dir, "0.0", "is 1073741824 bytes, more than the");
}

/* A sparse 1 GiB shard, and a shard whose index gives an inner chunk more
 * bytes than any encoding of it can have (it was malloc'd and read). */
static void test_sparse_shard_file(void **state) {
    (void)state;
    const char *dir = array_dir("sparseshard");
    v3_array(dir, "[{\"name\":\"sharding_indexed\",\"configuration\":{\"chunk_shape\":[32,32],\"codecs\":["
                  "{\"name\":\"bytes\",\"configuration\":{\"endian\":\"little\"}}," ZSTD "],\"index_codecs\":"
                  "[{\"name\":\"bytes\",\"configuration\":{\"endian\":\"little\"}},{\"name\":\"crc32c\"}],"
                  "\"index_location\":\"end\"}}]");
    char path[1200];
    snprintf(path, sizeof path, "%s/c/0/0", dir);
    tz_array *a = NULL;
    ts_error err;
    assert_int_equal(tz_array_open(dir, &a, &err), TS_OK);
    const uint64_t inner_max = tz_chain_max_encoded(&tz_array_get_meta(a)->sharding.codecs, 32 * 32 * 2);
    tz_array_close(a);
    for (int k = 0; k < 2; k++) {
        /* k = 0: the whole file too big; 1: the file fits 4 inner chunks,
         * but the index gives chunk 0 all of it. */
        uint64_t total = k == 0 ? (uint64_t)1 << 30 : 3 * inner_max;
        uint64_t idx[8] = {0, total - 68, UINT64_MAX, UINT64_MAX, UINT64_MAX, UINT64_MAX, UINT64_MAX, UINT64_MAX};
        unsigned char tail[68];
        memcpy(tail, idx, 64);
        uint32_t crc = tz_crc32c(0, idx, 64);
        memcpy(tail + 64, &crc, 4);
        write_bytes(path, "x", 1);
        int fd = open(path, O_WRONLY);
        assert_true(fd >= 0);
        assert_int_equal(pwrite(fd, tail, 68, (off_t)(total - 68)), 68);
        close(fd);
        expect_refused(dir, "shard 'c/0/0'", k == 0 ? "is 1073741824 bytes, more than the" : "inner chunk 0 is");
    }
}

/* An index entry that reaches into the index itself (found by tessera
 * verify: it read back without error, the index bytes decoded as pixels),
 * and half an empty sentinel: refused by the reader as by verify
 * (tz_shard_entry_check is the one rule). */
static void test_shard_entry_over_index(void **state) {
    (void)state;
    const char *dir = array_dir("overindex");
    v3_array(dir, "[{\"name\":\"sharding_indexed\",\"configuration\":{\"chunk_shape\":[32,32],\"codecs\":["
                  "{\"name\":\"bytes\",\"configuration\":{\"endian\":\"little\"}}],\"index_codecs\":"
                  "[{\"name\":\"bytes\",\"configuration\":{\"endian\":\"little\"}},{\"name\":\"crc32c\"}],"
                  "\"index_location\":\"end\"}}]");
    char path[1200];
    snprintf(path, sizeof path, "%s/c/0/0", dir);
    const uint64_t raw = 32 * 32 * 2;
    for (int k = 0; k < 2; k++) {
        /* k = 0: chunk 0 starts 50 bytes late, its last 50 bytes the
         * index; 1: chunk 1 is (offset, UINT64_MAX), half a sentinel. */
        uint64_t idx[8] = {k == 0 ? 50 : 0, raw, UINT64_MAX, UINT64_MAX, UINT64_MAX, UINT64_MAX, UINT64_MAX,
                           UINT64_MAX};
        if (k == 1) idx[2] = 0;
        unsigned char *file = calloc(1, raw + 68);
        assert_non_null(file);
        memcpy(file + raw, idx, 64);
        uint32_t crc = tz_crc32c(0, idx, 64);
        memcpy(file + raw + 64, &crc, 4);
        write_bytes(path, file, raw + 68);
        free(file);
        expect_refused(dir, k == 0 ? "inner chunk 0" : "inner chunk 1", k == 0 ? "over the index" : "half an empty sentinel");
    }
}

/* A 1 GiB (sparse) zarr.json was read whole and handed to the JSON parser;
 * metadata documents are capped at 64 MiB. */
static void test_sparse_metadata_file(void **state) {
    (void)state;
    const char *dir = array_dir("sparsemeta");
    v3_array(dir, "[{\"name\":\"bytes\",\"configuration\":{\"endian\":\"little\"}}]");
    char file[1200];
    snprintf(file, sizeof file, "%s/zarr.json", dir);
    assert_int_equal(truncate(file, (off_t)1 << 30), 0);
    tz_array *a = NULL;
    ts_error err;
    long base = reset_peak_kb();
    ts_status st = tz_array_open(dir, &a, &err);
    long rss = status_kb("VmHWM") - base;
    print_message("%s (peak rise %ld KiB)\n", err.message, rss);
    assert_true(rss < RSS_SLACK_KB);
    assert_int_equal(st, TS_ERR_FORMAT);
    assert_non_null(strstr(err.message, file));
    assert_non_null(strstr(err.message, "is 1073741824 bytes, more than the 67108864 bytes it can be"));
}

/* Reading a FIFO blocked forever (open waits for a writer); a device was
 * read as data. Each read runs in a child that an alarm ends, so the test
 * fails instead of hanging. */
static void expect_not_regular(const char *dir, const char *path, const char *what, bool at_open) {
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        alarm(5);
        tz_array *a = NULL;
        ts_error err;
        ts_status st = tz_array_open(dir, &a, &err);
        if (!st) {
            static uint16_t buf[64 * 64];
            int64_t start[2] = {0, 0}, count[2] = {64, 64};
            st = tz_array_read(a, start, count, buf, &err);
            tz_array_close(a);
        } else if (!at_open) {
            _exit(3);
        }
        _exit(st == TS_ERR_IO && strstr(err.message, path) && strstr(err.message, what) ? 0 : 1);
    }
    int ws = 0;
    assert_int_equal(waitpid(pid, &ws, 0), pid);
    if (WIFSIGNALED(ws)) fail_msg("reading %s: killed by signal %d (blocked)", path, WTERMSIG(ws));
    assert_int_equal(WEXITSTATUS(ws), 0);
}

static void test_fifo_and_device_paths(void **state) {
    (void)state;
    char path[1200];
    /* v2 chunk */
    const char *dir = array_dir("fifo2");
    v2_array(dir, "null", "null");
    snprintf(path, sizeof path, "%s/0.0", dir);
    assert_int_equal(mkfifo(path, 0600), 0);
    expect_not_regular(dir, path, "a FIFO, not a regular file", false);
    /* v3 shard */
    dir = array_dir("fifo3");
    v3_array(dir, "[{\"name\":\"sharding_indexed\",\"configuration\":{\"chunk_shape\":[32,32],\"codecs\":["
                  "{\"name\":\"bytes\",\"configuration\":{\"endian\":\"little\"}}],\"index_codecs\":"
                  "[{\"name\":\"bytes\",\"configuration\":{\"endian\":\"little\"}},{\"name\":\"crc32c\"}]}}]");
    snprintf(path, sizeof path, "%s/c/0", dir);
    assert_int_equal(ts_mkdirs(path, NULL), TS_OK);
    snprintf(path, sizeof path, "%s/c/0/0", dir);
    assert_int_equal(mkfifo(path, 0600), 0);
    expect_not_regular(dir, path, "a FIFO, not a regular file", false);
    /* metadata */
    dir = array_dir("fifometa");
    assert_int_equal(ts_mkdirs(dir, NULL), TS_OK);
    snprintf(path, sizeof path, "%s/zarr.json", dir);
    assert_int_equal(mkfifo(path, 0600), 0);
    expect_not_regular(dir, path, "a FIFO, not a regular file", true);
    /* a chunk that is a character device */
    dir = array_dir("chardev");
    v2_array(dir, "{\"id\":\"zstd\",\"level\":1}", "null");
    snprintf(path, sizeof path, "%s/0.0", dir);
    assert_int_equal(symlink("/dev/zero", path), 0);
    expect_not_regular(dir, path, "a character device, not a regular file", false);
}

/* Valid chunks through the same chains still decode, from tessera's own
 * encoder: the bounds leave room for every real encoding. */
static void test_valid_chains_still_decode(void **state) {
    (void)state;
    const char *chains[] = {
        "[" TRANSPOSE_BYTES "," ZSTD "]",
        "[" TRANSPOSE_BYTES ",{\"name\":\"blosc\",\"configuration\":{\"cname\":\"lz4\",\"clevel\":5,"
        "\"shuffle\":\"shuffle\",\"typesize\":2,\"blocksize\":0}}]",
        "[{\"name\":\"bytes\",\"configuration\":{\"endian\":\"big\"}},{\"name\":\"gzip\",\"configuration\":"
        "{\"level\":5}}," ZSTD ",{\"name\":\"crc32c\"}]",
    };
    static uint16_t in[64 * 64], out[64 * 64];
    uint64_t s = 12345;
    for (int i = 0; i < 64 * 64; i++) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        in[i] = (uint16_t)(s >> 48); /* incompressible: the largest encodings */
    }
    for (size_t c = 0; c < sizeof chains / sizeof chains[0]; c++) {
        char name[32];
        snprintf(name, sizeof name, "valid%zu", c);
        const char *dir = array_dir(name);
        v3_array(dir, chains[c]);
        tz_array *a = NULL;
        ts_error err;
        assert_int_equal(tz_array_open(dir, &a, &err), TS_OK);
        int64_t idx[2] = {0, 0}, start[2] = {0, 0}, count[2] = {64, 64};
        if (tz_array_write_block(a, idx, in, &err)) fail_msg("%s", err.message);
        if (tz_array_read(a, start, count, out, &err)) fail_msg("%s", err.message);
        assert_memory_equal(in, out, sizeof in);
        tz_array_close(a);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_transpose_zstd_bomb),
        cmocka_unit_test(test_zstd_frame_claims_2p60),
        cmocka_unit_test(test_v2_zlib_filter_bomb),
        cmocka_unit_test(test_blosc_bomb),
        cmocka_unit_test(test_shard_inner_bomb),
        cmocka_unit_test(test_sparse_chunk_file),
        cmocka_unit_test(test_sparse_shard_file),
        cmocka_unit_test(test_sparse_metadata_file),
        cmocka_unit_test(test_shard_entry_over_index),
        cmocka_unit_test(test_fifo_and_device_paths),
        cmocka_unit_test(test_valid_chains_still_decode),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
