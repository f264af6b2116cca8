/* The I/O floor of fusion: decode every input chunk once, then encode and
 * write every output block of a given mosaic, with no blending; the same
 * thread pool and zarr layer as tessera fuse. What fuse cannot beat.
 *   fuse_iofloor PLATE MOSAIC_ARRAY OUT_ARRAY THREADS
 * prints "decode_s=... encode_write_s=... mpix=... peak_rss_mb=..." */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "common/fs.h"
#include "common/pool.h"
#include "ome/ome.h"
#include "zarr/zarr.h"

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

typedef struct {
    ts_plate *plate;
    int (*pos)[2];
    tz_array *out;
    void **blocks;
    int64_t grid[TZ_MAX_DIM];
} job;

static int read_tile(void *user, int64_t i, int worker) {
    (void)worker;
    job *J = user;
    tz_array *a;
    ts_error err;
    if (ts_plate_open_array(J->plate, J->pos[i][0], J->pos[i][1], 0, NULL, &a, &err)) { fprintf(stderr, "%s\n", err.message); return 1; }
    const tz_array_meta *m = tz_array_get_meta(a);
    int64_t start[TZ_MAX_DIM] = {0};
    size_t n = ts_dtype_size(m->dtype);
    for (int d = 0; d < m->ndim; d++) n *= (size_t)m->shape[d];
    void *buf = malloc(n);
    int rc = tz_array_read(a, start, m->shape, buf, &err) != TS_OK;
    if (rc) fprintf(stderr, "%s\n", err.message);
    free(buf);
    tz_array_close(a);
    return rc;
}

static void block_idx(const job *J, int64_t i, int64_t *idx, int ndim) {
    for (int d = ndim - 1; d >= 0; d--) {
        idx[d] = i % J->grid[d];
        i /= J->grid[d];
    }
}

static int write_block(void *user, int64_t i, int worker) {
    (void)worker;
    job *J = user;
    int64_t idx[TZ_MAX_DIM];
    block_idx(J, i, idx, tz_array_get_meta(J->out)->ndim);
    ts_error err;
    if (tz_array_write_block(J->out, idx, J->blocks[i], &err)) { fprintf(stderr, "%s\n", err.message); return 1; }
    return 0;
}

int main(int argc, char **argv) {
    if (argc != 5) {
        fprintf(stderr, "usage: fuse_iofloor PLATE MOSAIC_ARRAY OUT_ARRAY THREADS\n");
        return 2;
    }
    ts_error err;
    job J = {0};
    if (ts_plate_open(argv[1], &J.plate, &err)) { fprintf(stderr, "%s\n", err.message); return 1; }
    int64_t ntiles = 0;
    for (int w = 0; w < J.plate->nwells; w++) ntiles += J.plate->wells[w].npositions;
    J.pos = calloc((size_t)ntiles, sizeof *J.pos);
    ntiles = 0;
    for (int w = 0; w < J.plate->nwells; w++)
        for (int p = 0; p < J.plate->wells[w].npositions; p++) J.pos[ntiles][0] = w, J.pos[ntiles++][1] = p;
    ts_pool *pool = ts_pool_create(atoi(argv[4]));

    double t0 = now();
    if (ts_pool_for(pool, ntiles, read_tile, &J)) return 1;
    double t_decode = now() - t0;

    /* The mosaic's blocks, read (untimed) into memory at full block shape. */
    tz_array *src;
    if (tz_array_open(argv[2], &src, &err)) { fprintf(stderr, "%s\n", err.message); return 1; }
    tz_array_meta m = *tz_array_get_meta(src);
    m.attributes_json = NULL;
    tz_array_grid(src, J.grid);
    int64_t nblocks = 1;
    size_t bbytes = ts_dtype_size(m.dtype);
    for (int d = 0; d < m.ndim; d++) nblocks *= J.grid[d], bbytes *= (size_t)m.chunk[d];
    J.blocks = calloc((size_t)nblocks, sizeof *J.blocks);
    for (int64_t i = 0; i < nblocks; i++) {
        int64_t idx[TZ_MAX_DIM], start[TZ_MAX_DIM], count[TZ_MAX_DIM];
        block_idx(&J, i, idx, m.ndim);
        J.blocks[i] = calloc(1, bbytes);
        /* read the in-array part into the top-left of a full block */
        size_t es = ts_dtype_size(m.dtype);
        int64_t n = 1;
        for (int d = 0; d < m.ndim; d++) {
            start[d] = idx[d] * m.chunk[d];
            count[d] = start[d] + m.chunk[d] <= m.shape[d] ? m.chunk[d] : m.shape[d] - start[d];
            n *= count[d];
        }
        void *tmp = malloc((size_t)n * es);
        if (tz_array_read(src, start, count, tmp, &err)) { fprintf(stderr, "%s\n", err.message); return 1; }
        /* scatter rows (last axis contiguous) into the padded block */
        int64_t rows = n / count[m.ndim - 1], pos[TZ_MAX_DIM] = {0};
        for (int64_t r = 0; r < rows; r++) {
            int64_t off = 0;
            for (int d = 0; d < m.ndim - 1; d++) off = off * m.chunk[d] + pos[d];
            off *= m.chunk[m.ndim - 1];
            memcpy((char *)J.blocks[i] + (size_t)off * es, (char *)tmp + (size_t)(r * count[m.ndim - 1]) * es,
                   (size_t)count[m.ndim - 1] * es);
            for (int d = m.ndim - 2; d >= 0; d--) {
                if (++pos[d] < count[d]) break;
                pos[d] = 0;
            }
        }
        free(tmp);
    }
    ts_remove_tree(argv[3], &err);
    if (tz_array_create(argv[3], &m, &J.out, &err)) { fprintf(stderr, "%s\n", err.message); return 1; }
    t0 = now();
    if (ts_pool_for(pool, nblocks, write_block, &J)) return 1;
    double t_write = now() - t0;
    double mpix = (double)(m.shape[m.ndim - 1] * m.shape[m.ndim - 2]) / 1e6;
    for (int d = 0; d < m.ndim - 2; d++) mpix *= (double)m.shape[d];
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    printf("decode_s=%.3f encode_write_s=%.3f mpix=%.2f tiles=%lld blocks=%lld peak_rss_mb=%.1f\n", t_decode,
           t_write, mpix, (long long)ntiles, (long long)nblocks, ru.ru_maxrss / 1024.0);
    return 0;
}
