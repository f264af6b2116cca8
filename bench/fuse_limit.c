/* The physical limit of fusion on this machine, measured in the same run on
 * the run's own data, with the codec libraries called directly (not through
 * tessera's zarr layer, which would hide its own costs):
 *   - decode: every input tile plane compressed with the input codec (the
 *     plate's, as tessera writes it), then timed decompressing;
 *   - encode: the fused mosaic cut into its inner chunks (chunk x chunk),
 *     timed compressing with each candidate codec (also its ratio: the
 *     default codec is chosen from this table, docs/fuse.md);
 *   - blend: the memory traffic a blend cannot avoid (each input pixel read
 *     once with its weight, each canvas pixel's accumulators written and
 *     read, the output written) at the bandwidth of a STREAM triad;
 *   - write: the encoded bytes written with write(2) to a file beside the
 *     mosaic (page cache, as tessera writes).
 * All single-threaded: the limit of one core, to compare with
 * `tessera fuse --threads 1`.
 *   fuse_limit PLATE MOSAIC_ARRAY IN_CODEC OUT_CODEC CHUNK
 * prints one "key=value ..." line per codec ("codec=NAME encode_mbs=...
 * ratio=...") and a final "limit ..." line for OUT_CODEC. */
#include <blosc.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>
#include <zlib.h>
#include <zstd.h>

#include "ome/ome.h"
#include "zarr/zarr.h"

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static void die(const char *what) {
    fprintf(stderr, "fuse_limit: %s\n", what);
    exit(1);
}

/* The codecs as tessera configures them (src/zarr/meta.c): zstd level 3 no
 * shuffle; blosc level 5 byte shuffle, typesize 2; gzip level 5. */
typedef struct {
    const char *name;
    int kind; /* 0 zstd, 1 blosc, 2 gzip, 3 none */
    int level;
    const char *blosc_cname;
} codec;

static const codec CODECS[] = {
    {"zstd", 0, 3, NULL},           {"blosc-lz4", 1, 5, "lz4"}, {"blosc-zstd", 1, 5, "zstd"},
    {"blosc-zstd:3", 1, 3, "zstd"}, {"gzip", 2, 5, NULL},        {"none", 3, 0, NULL}};
#define NCODECS (sizeof CODECS / sizeof *CODECS)

static const codec *codec_named(const char *name) {
    for (size_t i = 0; i < NCODECS; i++)
        if (!strcmp(CODECS[i].name, name)) return &CODECS[i];
    die("unknown codec name");
    return NULL;
}

static size_t encode(const codec *c, const void *in, size_t n, void *out, size_t cap) {
    switch (c->kind) {
    case 0: {
        size_t r = ZSTD_compress(out, cap, in, n, c->level);
        if (ZSTD_isError(r)) die("zstd");
        return r;
    }
    case 1: {
        int r = blosc_compress_ctx(c->level, BLOSC_SHUFFLE, 2, n, in, out, cap, c->blosc_cname, 0, 1);
        if (r <= 0) die("blosc");
        return (size_t)r;
    }
    case 2: {
        uLongf dl = (uLongf)cap;
        if (compress2(out, &dl, in, (uLong)n, c->level) != Z_OK) die("zlib");
        return (size_t)dl;
    }
    default: memcpy(out, in, n); return n;
    }
}

static void decode(const codec *c, const void *in, size_t n, void *out, size_t raw) {
    switch (c->kind) {
    case 0:
        if (ZSTD_decompress(out, raw, in, n) != raw) die("zstd decode");
        return;
    case 1:
        if (blosc_decompress_ctx(in, out, raw, 1) != (int)raw) die("blosc decode");
        return;
    case 2: {
        uLongf dl = (uLongf)raw;
        if (uncompress(out, &dl, in, (uLong)n) != Z_OK || dl != raw) die("zlib decode");
        return;
    }
    default: memcpy(out, in, n);
    }
}

static size_t bound(size_t n) { return n + n / 2 + 4096 + ZSTD_compressBound(n); }

/* STREAM triad a = b + s*c over arrays far larger than the caches, best
 * of 5: bytes moved per second (3 arrays x 8 bytes per element). */
static double triad_bandwidth(void) {
    const size_t n = (size_t)32 << 20; /* 3 x 256 MiB */
    double *a = malloc(n * sizeof *a), *b = malloc(n * sizeof *b), *c = malloc(n * sizeof *c);
    if (!a || !b || !c) die("out of memory (triad)");
    for (size_t i = 0; i < n; i++) a[i] = 0, b[i] = 1.0, c[i] = 2.0;
    double best = 1e30;
    for (int r = 0; r < 5; r++) {
        double t0 = now();
        for (size_t i = 0; i < n; i++) a[i] = b[i] + 3.0 * c[i];
        double t = now() - t0;
        if (t < best) best = t;
    }
    volatile double sink = a[n / 2];
    (void)sink;
    free(a), free(b), free(c);
    return 3.0 * 8.0 * (double)n / best;
}

int main(int argc, char **argv) {
    if (argc != 6) die("usage: fuse_limit PLATE MOSAIC_ARRAY IN_CODEC OUT_CODEC CHUNK");
    const codec *cin = codec_named(argv[3]), *cout = codec_named(argv[4]);
    const int64_t chunk = atoll(argv[5]);
    if (chunk <= 0) die("bad CHUNK");
    blosc_init();
    ts_error err;

    /* Input: every tile plane, compressed with the input codec (untimed),
     * then decoded (timed). */
    ts_plate *plate;
    if (ts_plate_open(argv[1], &plate, &err)) die(err.message);
    double t_decode = 0, in_pixels = 0;
    size_t in_enc = 0;
    for (int w = 0; w < plate->nwells; w++)
        for (int p = 0; p < plate->wells[w].npositions; p++) {
            tz_array *a;
            if (ts_plate_open_array(plate, w, p, 0, NULL, &a, &err)) die(err.message);
            const tz_array_meta *m = tz_array_get_meta(a);
            int64_t start[TZ_MAX_DIM] = {0};
            size_t n = ts_dtype_size(m->dtype);
            for (int d = 0; d < m->ndim; d++) n *= (size_t)m->shape[d];
            void *raw = malloc(n), *enc = malloc(bound(n)), *back = malloc(n);
            if (!raw || !enc || !back) die("out of memory");
            if (tz_array_read(a, start, m->shape, raw, &err)) die(err.message);
            size_t e = encode(cin, raw, n, enc, bound(n));
            double t0 = now();
            decode(cin, enc, e, back, n);
            t_decode += now() - t0;
            if (memcmp(raw, back, n)) die("decode differs");
            in_pixels += (double)n / (double)ts_dtype_size(m->dtype);
            in_enc += e;
            free(raw), free(enc), free(back);
            tz_array_close(a);
        }

    /* Output: the mosaic's level 0 (C, Y, X planes after the leading axes)
     * cut into chunk x chunk pieces (edge pieces zero-padded, as zarr). */
    tz_array *mos;
    if (tz_array_open(argv[2], &mos, &err)) die(err.message);
    const tz_array_meta *m = tz_array_get_meta(mos);
    const int nd = m->ndim;
    const int64_t H = m->shape[nd - 2], W = m->shape[nd - 1];
    int64_t planes = 1;
    for (int d = 0; d < nd - 2; d++) planes *= m->shape[d];
    size_t es = ts_dtype_size(m->dtype);
    int64_t start[TZ_MAX_DIM] = {0};
    void *canvas = malloc((size_t)(planes * H * W) * es);
    if (!canvas) die("out of memory (canvas)");
    if (tz_array_read(mos, start, m->shape, canvas, &err)) die(err.message);
    const int64_t gy = (H + chunk - 1) / chunk, gx = (W + chunk - 1) / chunk;
    const int64_t nchunks = planes * gy * gx;
    const size_t cbytes = (size_t)(chunk * chunk) * es;
    char *pieces = calloc((size_t)nchunks, cbytes);
    if (!pieces) die("out of memory (chunks)");
    for (int64_t pl = 0; pl < planes; pl++)
        for (int64_t cy = 0; cy < gy; cy++)
            for (int64_t cx = 0; cx < gx; cx++) {
                char *dst = pieces + (size_t)((pl * gy + cy) * gx + cx) * cbytes;
                for (int64_t y = 0; y < chunk && cy * chunk + y < H; y++) {
                    int64_t x0 = cx * chunk, nx = x0 + chunk <= W ? chunk : W - x0;
                    memcpy(dst + (size_t)(y * chunk) * es,
                           (char *)canvas + (size_t)((pl * H + cy * chunk + y) * W + x0) * es, (size_t)nx * es);
                }
            }
    const double out_pixels = (double)(planes * H * W);
    const size_t raw_total = (size_t)nchunks * cbytes;
    char *enc = malloc(bound(cbytes) * (size_t)nchunks);
    if (!enc) die("out of memory (encoded)");
    double t_encode_out = 0;
    size_t enc_out = 0;
    for (size_t c = 0; c < NCODECS; c++) {
        double best = 1e30;
        size_t total = 0;
        for (int r = 0; r < 3; r++) { /* best of 3: the machine is shared */
            total = 0;
            double t0 = now();
            for (int64_t i = 0; i < nchunks; i++)
                total += encode(&CODECS[c], pieces + (size_t)i * cbytes, cbytes, enc + (size_t)i * bound(cbytes),
                                bound(cbytes));
            double t = now() - t0;
            if (t < best) best = t;
        }
        /* Decoding what was just encoded (what a reader pays). */
        double dbest = 1e30;
        char *back = malloc(cbytes);
        if (!back) die("out of memory");
        size_t sizes_ok = 0;
        for (int r = 0; r < 3; r++) {
            double t0 = now();
            for (int64_t i = 0; i < nchunks; i++) {
                const char *e = enc + (size_t)i * bound(cbytes);
                /* the encoded length: re-encode size is not kept per chunk,
                 * so decode from the codec's own framing */
                size_t elen = CODECS[c].kind == 0   ? ZSTD_findFrameCompressedSize(e, bound(cbytes))
                              : CODECS[c].kind == 1 ? (size_t)((const uint32_t *)e)[3]
                                                    : 0;
                if (CODECS[c].kind >= 2) break; /* gzip/none: no length in the frame; not timed */
                decode(&CODECS[c], e, elen, back, cbytes);
                sizes_ok++;
            }
            double t = now() - t0;
            if (t < dbest) dbest = t;
        }
        free(back);
        if (sizes_ok)
            printf("codec=%s encode_mbs=%.1f decode_mbs=%.1f ratio=%.3f encoded_mb=%.1f\n", CODECS[c].name,
                   (double)raw_total / best / 1e6, (double)raw_total / dbest / 1e6, (double)raw_total / (double)total,
                   (double)total / 1e6);
        else
            printf("codec=%s encode_mbs=%.1f decode_mbs=nan ratio=%.3f encoded_mb=%.1f\n", CODECS[c].name,
                   (double)raw_total / best / 1e6, (double)raw_total / (double)total, (double)total / 1e6);
        if (&CODECS[c] == cout) t_encode_out = best, enc_out = total;
    }

    /* Writing the output's encoded bytes (page cache, as tessera). */
    char tmp[4096];
    snprintf(tmp, sizeof tmp, "%s.limit-write.tmp", argv[2]);
    for (int64_t i = 0; i < nchunks; i++) /* the chosen codec's bytes, back in enc */
        encode(cout, pieces + (size_t)i * cbytes, cbytes, enc + (size_t)i * bound(cbytes), bound(cbytes));
    double t0 = now();
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0) die("cannot create the write-test file");
    size_t left = enc_out;
    while (left) {
        size_t n = left < ((size_t)8 << 20) ? left : ((size_t)8 << 20);
        if (write(fd, enc, n) != (ssize_t)n) die("write");
        left -= n;
    }
    close(fd);
    double t_write = now() - t0;
    unlink(tmp);

    /* Blend traffic: each input pixel (2 bytes) with its weight (4) read;
     * each canvas pixel's numerator and denominator (2 x 4 bytes) written
     * once and read once per covering tile after the first and in the
     * normalisation (counted once: a lower bound), the output written. */
    const double bw = triad_bandwidth();
    const double blend_bytes = in_pixels * (2.0 + 4.0) + out_pixels * (8.0 * 2.0 + (double)es);
    const double t_blend = blend_bytes / bw;
    const double limit = t_decode + t_blend + t_encode_out + t_write;
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    printf("limit codec_in=%s codec_out=%s decode_s=%.3f blend_s=%.3f encode_s=%.3f write_s=%.3f limit_s=%.3f "
           "triad_gbs=%.2f in_mpix=%.2f out_mpix=%.2f in_encoded_mb=%.1f out_encoded_mb=%.1f peak_rss_mb=%.1f\n",
           cin->name, cout->name, t_decode, t_blend, t_encode_out, t_write, limit, bw / 1e9, in_pixels / 1e6,
           out_pixels / 1e6, (double)in_enc / 1e6, (double)enc_out / 1e6, ru.ru_maxrss / 1024.0);
    free(canvas), free(pieces), free(enc);
    tz_array_close(mos);
    return 0;
}
