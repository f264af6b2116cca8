/* Bench driver (bench/verify.sh): the plain decode floor of `tessera verify`
 * on zstd stores. Reads every chunk/shard file of the given arrays and
 * ZSTD_decompresses every chunk (every non-empty inner chunk of a shard,
 * found through its index and read with pread) into a reused buffer on
 * THREADS threads: no CRC, no range or size checks, no problem bookkeeping. The metadata come from
 * tz_array_open; the decoding does not go through the zarr layer.
 *   verify_floor THREADS ARRAY_DIR...
 * prints: seconds, chunks, bytes read, bytes decoded, MB/s decoded. */
#include <fcntl.h>
#include <stdbool.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <zstd.h>

#include "zarr/zarr.h"

typedef struct {
    tz_array **arrs;
    int narrs;
    int64_t *first;   /* first item of each array; items = blocks */
    int64_t nitems;
    atomic_llong next, chunks, bytes_read, bytes_decoded;
} job;

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* The whole file into *buf (grown, reused across files like verify's). */
static bool read_all(const char *file, unsigned char **buf, size_t *cap, size_t *n) {
    int fd = open(file, O_RDONLY);
    if (fd < 0) return false;
    struct stat sb;
    fstat(fd, &sb);
    *n = (size_t)sb.st_size;
    if (*cap < *n) *buf = realloc(*buf, *cap = *n);
    size_t got = 0;
    while (got < *n) {
        ssize_t r = read(fd, *buf + got, *n - got);
        if (r <= 0) break;
        got += (size_t)r;
    }
    close(fd);
    return true;
}

static void *worker(void *user) {
    job *J = user;
    ZSTD_DCtx *dc = ZSTD_createDCtx();
    unsigned char *out = NULL, *b = NULL, *ix = NULL;
    size_t cap = 0, bcap = 0, icap = 0;
    for (;;) {
        int64_t i = atomic_fetch_add(&J->next, 1);
        if (i >= J->nitems) break;
        int a = 0;
        while (a + 1 < J->narrs && J->first[a + 1] <= i) a++;
        const tz_array *arr = J->arrs[a];
        const tz_array_meta *m = tz_array_get_meta(arr);
        int64_t grid[TZ_MAX_DIM], idx[TZ_MAX_DIM], rest = i - J->first[a];
        tz_array_grid(arr, grid);
        for (int d = m->ndim - 1; d >= 0; d--) idx[d] = rest % grid[d], rest /= grid[d];
        char key[256], file[4600];
        tz_chunk_key(m, idx, key, sizeof key);
        snprintf(file, sizeof file, "%s/%s", tz_array_path(arr), key);
        size_t raw = tz_stored_chunk_bytes(arr);
        if (cap < raw) out = realloc(out, cap = raw);
        if (!m->sharded) {
            size_t n;
            if (!read_all(file, &b, &bcap, &n)) continue;
            atomic_fetch_add(&J->bytes_read, (long long)n);
            if (!ZSTD_isError(ZSTD_decompressDCtx(dc, out, raw, b, n))) {
                atomic_fetch_add(&J->chunks, 1);
                atomic_fetch_add(&J->bytes_decoded, (long long)raw);
            }
            continue;
        }
        /* a shard: pread the index at the end, then each inner chunk (the
         * encoded bytes stay in cache for their decompression) */
        int fd = open(file, O_RDONLY);
        if (fd < 0) continue;
        struct stat sb;
        fstat(fd, &sb);
        const uint64_t fsize = (uint64_t)sb.st_size;
        const int64_t ni = tz_shard_inner_count(arr);
        const size_t ib = tz_shard_index_size(arr);
        if (fsize >= ib) {
            if (icap < ib) ix = realloc(ix, icap = ib);
            if (pread(fd, ix, ib, (off_t)(fsize - ib)) == (ssize_t)ib) {
                atomic_fetch_add(&J->bytes_read, (long long)ib);
                for (int64_t k = 0; k < ni; k++) {
                    uint64_t off, nb;
                    memcpy(&off, ix + 16 * k, 8); /* little-endian host */
                    memcpy(&nb, ix + 16 * k + 8, 8);
                    if (off == UINT64_MAX || off + nb > fsize) continue;
                    if (bcap < nb) b = realloc(b, bcap = nb);
                    if (pread(fd, b, nb, (off_t)off) != (ssize_t)nb) continue;
                    atomic_fetch_add(&J->bytes_read, (long long)nb);
                    if (!ZSTD_isError(ZSTD_decompressDCtx(dc, out, raw, b, nb))) {
                        atomic_fetch_add(&J->chunks, 1);
                        atomic_fetch_add(&J->bytes_decoded, (long long)raw);
                    }
                }
            }
        }
        close(fd);
    }
    free(b);
    free(ix);
    free(out);
    ZSTD_freeDCtx(dc);
    return NULL;
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: verify_floor THREADS ARRAY_DIR...\n");
        return 2;
    }
    int threads = atoi(argv[1]);
    if (threads < 1) threads = (int)sysconf(_SC_NPROCESSORS_ONLN);
    job J = {.narrs = argc - 2};
    J.arrs = calloc((size_t)J.narrs, sizeof *J.arrs);
    J.first = calloc((size_t)J.narrs, sizeof *J.first);
    for (int a = 0; a < J.narrs; a++) {
        ts_error err = {0};
        if (tz_array_open(argv[a + 2], &J.arrs[a], &err)) {
            fprintf(stderr, "verify_floor: %s\n", err.message);
            return 1;
        }
        int64_t grid[TZ_MAX_DIM], nb = 1;
        tz_array_grid(J.arrs[a], grid);
        for (int d = 0; d < tz_array_get_meta(J.arrs[a])->ndim; d++) nb *= grid[d];
        J.first[a] = J.nitems;
        J.nitems += nb;
    }
    double t0 = now();
    pthread_t *th = calloc((size_t)threads, sizeof *th);
    for (int t = 0; t < threads; t++) pthread_create(&th[t], NULL, worker, &J);
    for (int t = 0; t < threads; t++) pthread_join(th[t], NULL);
    double s = now() - t0;
    printf("seconds=%.3f chunks=%lld bytes_read=%lld bytes_decoded=%lld MB/s=%.0f\n", s, (long long)J.chunks,
           (long long)J.bytes_read, (long long)J.bytes_decoded, (double)J.bytes_decoded / 1e6 / s);
    for (int a = 0; a < J.narrs; a++) tz_array_close(J.arrs[a]);
    free(J.arrs);
    free(J.first);
    free(th);
    return 0;
}
