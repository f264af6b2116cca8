/* Bench driver for the zarr layer (built by bench/zarr_read.sh):
 *   zarr_read gen DIR        write a 2048x2048 uint16 tile as v2 zstd (one
 *                            chunk), v2 blosc-lz4, v3 zstd sharded (inner 512)
 *   zarr_read time DIR REPS  per layout: tz_array_read of the whole tile and of
 *                            a 2048x256 overlap strip, beside the baseline of
 *                            reading the chunk file and one ZSTD_decompress /
 *                            blosc_decompress_ctx of it; peak RSS
 *   zarr_read write DIR REPS tz_array_write_block of the tile as one zstd shard
 *                            (inner 512 and 128) beside the baseline of the
 *                            same inner chunks through one reused ZSTD_CCtx
 *                            and one file write */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include <blosc.h>
#include <zstd.h>

#include "common/fs.h"
#include "zarr/zarr.h"

#define N 2048

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static void die(const ts_error *err) {
    fprintf(stderr, "zarr_read: %s\n", err->message);
    exit(1);
}

static uint16_t *gen_tile(void) {
    uint16_t *img = malloc(sizeof(uint16_t) * N * N);
    uint64_t st = 12345;
    for (int y = 0; y < N; y++)
        for (int x = 0; x < N; x++) {
            st = st * 6364136223846793005ull + 1442695040888963407ull;
            /* smooth background, blobs, sensor noise: compresses like a real tile */
            int v = 800 + (int)(300.0 * ((x * 7 + y * 3) % 512) / 512.0) + (int)((st >> 59) & 31);
            if (((x / 40) + (y / 40)) % 7 == 0) v += 2000;
            img[(size_t)y * N + x] = (uint16_t)v;
        }
    return img;
}

static void time_write(const char *dir, int inner, int reps) {
    char path[1024], base_file[1100];
    snprintf(path, sizeof path, "%s/w%d", dir, inner);
    snprintf(base_file, sizeof base_file, "%s/w%d.baseline", dir, inner);
    uint16_t *img = gen_tile();
    tz_array_meta m;
    tz_array_meta_init(&m, 3);
    m.ndim = 2;
    m.shape[0] = m.shape[1] = m.chunk[0] = m.chunk[1] = N;
    m.dtype = TS_UINT16;
    m.sharded = true;
    m.sharding.inner_chunk[0] = m.sharding.inner_chunk[1] = inner;
    tz_meta_set_codec(&m, TS_CODEC_ZSTD);
    tz_array *a;
    ts_error err;
    if (tz_array_create(path, &m, &a, &err)) die(&err);
    size_t ib = sizeof(uint16_t) * (size_t)inner * inner, cap = ZSTD_compressBound(ib);
    int per = N / inner;
    uint16_t *chunk = malloc(ib);
    unsigned char *out = malloc(cap * (size_t)per * per);
    ZSTD_CCtx *cc = ZSTD_createCCtx();
    ZSTD_CCtx_setParameter(cc, ZSTD_c_compressionLevel, 3);
    int64_t idx[2] = {0, 0};
    double tess = 1e9, base = 1e9;
    for (int r = 0; r < reps; r++) {
        double t0 = now();
        if (tz_array_write_block(a, idx, img, &err)) die(&err);
        double t1 = now();
        size_t pos = 0;
        for (int cy = 0; cy < per; cy++)
            for (int cx = 0; cx < per; cx++) {
                for (int y = 0; y < inner; y++)
                    memcpy(chunk + (size_t)y * inner, img + (size_t)(cy * inner + y) * N + (size_t)cx * inner,
                           sizeof(uint16_t) * (size_t)inner);
                pos += ZSTD_compress2(cc, out + pos, cap, chunk, ib);
            }
        if (ts_write_file_atomic(base_file, out, pos, &err)) die(&err);
        double t2 = now();
        tess = t1 - t0 < tess ? t1 - t0 : tess;
        base = t2 - t1 < base ? t2 - t1 : base;
    }
    printf("write shard 2048x2048, inner %3d: tessera %7.2f ms | baseline reused ZSTD_CCtx + one write %7.2f ms "
           "(tessera/baseline %.2f)\n", inner, tess * 1e3, base * 1e3, tess / base);
    ZSTD_freeCCtx(cc);
    free(out);
    free(chunk);
    free(img);
    tz_array_close(a);
}

static void make(const char *dir, const char *name, int format, ts_codec codec, bool sharded, const uint16_t *img) {
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    tz_array_meta m;
    tz_array_meta_init(&m, format);
    m.ndim = 2;
    m.shape[0] = m.shape[1] = N;
    m.chunk[0] = m.chunk[1] = N;
    m.dtype = TS_UINT16;
    if (sharded) {
        m.sharded = true;
        m.sharding.inner_chunk[0] = m.sharding.inner_chunk[1] = 512;
    }
    tz_meta_set_codec(&m, codec);
    tz_array *a;
    ts_error err;
    if (tz_array_create(path, &m, &a, &err)) die(&err);
    int64_t idx[2] = {0, 0};
    if (tz_array_write_block(a, idx, img, &err)) die(&err);
    tz_array_close(a);
}

static void time_one(const char *dir, const char *name, const char *chunk_file, int baseline, int reps) {
    char path[1024], file[1100];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    snprintf(file, sizeof file, "%s/%s", path, chunk_file);
    tz_array *a;
    ts_error err;
    if (tz_array_open(path, &a, &err)) die(&err);
    uint16_t *buf = malloc(sizeof(uint16_t) * N * N);
    int64_t s[2] = {0, 0}, c[2] = {N, N}, ss[2] = {0, N - 256}, sc[2] = {N, 256};
    if (tz_array_read(a, s, c, buf, &err)) die(&err); /* warm the page cache */
    /* Minimum over reps: the machine is shared, the minimum is the cost. */
    double whole = 1e9, strip = 1e9, base = 1e9;
    for (int r = 0; r < reps; r++) {
        double t0 = now();
        if (tz_array_read(a, s, c, buf, &err)) die(&err);
        double t1 = now();
        if (tz_array_read(a, ss, sc, buf, &err)) die(&err);
        double t2 = now();
        whole = t1 - t0 < whole ? t1 - t0 : whole;
        strip = t2 - t1 < strip ? t2 - t1 : strip;
        if (baseline) {
            void *data;
            size_t n;
            t0 = now();
            if (ts_read_file(file, &data, &n, &err)) die(&err);
            if (baseline == 1) {
                size_t got = ZSTD_decompress(buf, sizeof(uint16_t) * N * N, data, n);
                if (ZSTD_isError(got)) { fprintf(stderr, "zstd baseline failed\n"); exit(1); }
            } else if (blosc_decompress_ctx(data, buf, sizeof(uint16_t) * N * N, 1) <= 0) {
                fprintf(stderr, "blosc baseline failed\n");
                exit(1);
            }
            free(data);
            t1 = now();
            base = t1 - t0 < base ? t1 - t0 : base;
        }
    }
    printf("%-22s tessera whole tile %7.2f ms, 2048x256 strip %7.2f ms", name, whole * 1e3, strip * 1e3);
    if (baseline) printf(" | baseline read+%s %7.2f ms (tessera/baseline %.2f)", baseline == 1 ? "ZSTD_decompress" : "blosc_decompress",
                         base * 1e3, whole / base);
    printf("\n");
    free(buf);
    tz_array_close(a);
}

int main(int argc, char **argv) {
    if (argc == 3 && strcmp(argv[1], "gen") == 0) {
        uint16_t *img = gen_tile();
        make(argv[2], "v2_zstd", 2, TS_CODEC_ZSTD, false, img);
        make(argv[2], "v2_blosc_lz4", 2, TS_CODEC_BLOSC_LZ4, false, img);
        make(argv[2], "v3_zstd_sharded512", 3, TS_CODEC_ZSTD, true, img);
        free(img);
        return 0;
    }
    if (argc == 4 && strcmp(argv[1], "time") == 0) {
        int reps = atoi(argv[3]);
        time_one(argv[2], "v2_zstd", "0.0", 1, reps);
        time_one(argv[2], "v2_blosc_lz4", "0.0", 2, reps);
        time_one(argv[2], "v3_zstd_sharded512", "c/0/0", 0, reps);
        struct rusage ru;
        getrusage(RUSAGE_SELF, &ru);
        printf("peak_rss_mb=%.1f\n", ru.ru_maxrss / 1024.0);
        return 0;
    }
    if (argc == 4 && strcmp(argv[1], "write") == 0) {
        time_write(argv[2], 512, atoi(argv[3]));
        time_write(argv[2], 128, atoi(argv[3]));
        return 0;
    }
    fprintf(stderr, "usage: zarr_read gen DIR | zarr_read time DIR REPS | zarr_read write DIR REPS\n");
    return 2;
}
