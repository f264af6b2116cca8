/* Output arrays of a well (levels 0..N) and the writing of one block: the
 * level-0 block, then each pyramid level downsampled from the one before,
 * all from the same worker's buffers, so the pyramid streams with the
 * mosaic and no level ever needs a second pass. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/fs.h"
#include "fuse/fuse_internal.h"

/* Shape of level k along one axis: halved (rounded up) k times. */
static int64_t level_extent(int64_t n, int k) {
    for (int i = 0; i < k; i++) n = (n + 1) / 2;
    return n;
}

void fuse_block_extent(const fuse_layout *L, int k, int64_t band, int64_t bx, int64_t *h, int64_t *w) {
    const int64_t Bk = L->block >> k;
    *h = level_extent(L->canvas_h, k) - band * Bk;
    *w = level_extent(L->canvas_w, k) - bx * Bk;
    if (*h > Bk) *h = Bk;
    if (*w > Bk) *w = Bk;
}

static void level_meta(const fuse_well *W, int k, tz_array_meta *m) {
    const fuse_layout *L = &W->L;
    bool v3 = W->format != TS_OME_04;
    tz_array_meta_init(m, v3 ? 3 : 2);
    m->ndim = 5;
    m->shape[0] = L->T;
    m->shape[1] = L->C;
    m->shape[2] = L->Z;
    m->shape[3] = level_extent(L->canvas_h, k);
    m->shape[4] = level_extent(L->canvas_w, k);
    m->dtype = W->out_dtype;
    m->fill_value = 0;
    int64_t Bk = L->block >> k, ck = L->level_chunk[k];
    if (v3) {
        m->sharded = true;
        int64_t shard[5] = {1, L->C, 1, Bk, Bk}, inner[5] = {1, 1, 1, ck, ck};
        memcpy(m->chunk, shard, sizeof shard);
        memcpy(m->sharding.inner_chunk, inner, sizeof inner);
        const char *names[5] = {"t", "c", "z", "y", "x"};
        for (int d = 0; d < 5; d++) snprintf(m->dimension_names[d], sizeof m->dimension_names[d], "%s", names[d]);
    } else {
        int64_t chunk[5] = {1, 1, 1, ck, ck};
        memcpy(m->chunk, chunk, sizeof chunk);
        m->separator = '/';
    }
    tz_meta_set_codec_level(m, W->opt->codec, W->opt->codec_level);
}

ts_status fuse_output_open(fuse_well *W, const char *image_path, bool create, ts_error *err) {
    for (int k = 0; k <= W->L.levels; k++) {
        char path[4200];
        snprintf(path, sizeof path, "%s/%d", image_path, k);
        ts_status st;
        if (!create) {
            /* Another rank created (or checked) it. */
            if ((st = tz_array_open(path, &W->out[k], err)) != TS_OK) return st;
            continue;
        }
        tz_array_meta want;
        level_meta(W, k, &want);
        if (W->opt->t_out >= 0 && ts_is_dir(path)) {
            /* Writing one timepoint into an existing mosaic: its layout rules. */
            st = tz_array_open(path, &W->out[k], err);
            if (st) return st;
            const tz_array_meta *m = tz_array_get_meta(W->out[k]);
            bool same = m->ndim == 5 && m->dtype == want.dtype && m->sharded == want.sharded;
            for (int d = 1; same && d < 5; d++) same = m->shape[d] == want.shape[d] && m->chunk[d] == want.chunk[d];
            if (!same)
                return ts_fail(err, TS_ERR_ARG,
                               "%s: existing array does not match this run (dtype %s, shape "
                               "[%lld,%lld,%lld,%lld,%lld], block [%lld,%lld]; want %s, "
                               "[_,%lld,%lld,%lld,%lld], block [%lld,%lld])",
                               path, ts_dtype_name(m->dtype), (long long)m->shape[0], (long long)m->shape[1],
                               (long long)m->shape[2], (long long)m->shape[3], (long long)m->shape[4],
                               (long long)m->chunk[3], (long long)m->chunk[4], ts_dtype_name(want.dtype),
                               (long long)want.shape[1], (long long)want.shape[2], (long long)want.shape[3],
                               (long long)want.shape[4], (long long)want.chunk[3], (long long)want.chunk[4]);
            if (m->shape[0] <= W->opt->t_out)
                return ts_fail(err, TS_ERR_ARG, "%s: --t-out %d is beyond its %lld timepoints", path,
                               W->opt->t_out, (long long)m->shape[0]);
        } else {
            st = tz_array_create(path, &want, &W->out[k], err);
            if (st) return st;
        }
    }
    return TS_OK;
}

void fuse_output_close(fuse_well *W) {
    for (int k = 0; k < FUSE_MAX_LEVELS; k++) {
        if (W->out[k]) tz_array_close(W->out[k]);
        W->out[k] = NULL;
    }
}

/* One level of one block, written as its 0.4 chunks by whichever pipeline
 * workers are free (fuse_pipeline_share): item i is chunk (c, cy, cx) of
 * the ny x nx chunks of the block that lie in the array. */
typedef struct chunk_job {
    fuse_well *W;
    int k;
    int64_t t, z, band, bx;
    const unsigned char *block;  /* the level's block buffer, C x Bk x Bk */
    int64_t ny, nx;
} chunk_job;

/* (An all-zero chunk is not stored: the zarr layer skips all-fill blocks.) */
static ts_status write_chunk(void *user, int64_t i, int worker, ts_error *err) {
    const chunk_job *J = user;
    fuse_well *W = J->W;
    tz_array *arr = W->out[J->k];
    int64_t Bk = W->L.block >> J->k, ck = W->L.level_chunk[J->k];
    int64_t cx = i % J->nx, cy = i / J->nx % J->ny, c = i / (J->nx * J->ny);
    size_t es = W->out_elem;
    const unsigned char *plane = J->block + (size_t)(c * Bk * Bk) * es;
    unsigned char *dst = W->scratch[worker].chunk;
    for (int64_t r = 0; r < ck; r++)
        memcpy(dst + (size_t)(r * ck) * es, plane + (size_t)((cy * ck + r) * Bk + cx * ck) * es, (size_t)ck * es);
    int64_t per = Bk / ck;
    int64_t idx[5] = {J->t, c, J->z, J->band * per + cy, J->bx * per + cx};
    return tz_array_write_block(arr, idx, dst, err);
}

/* 0.4: the block's (1,1,1,ck,ck) chunks, one file each; sc is the calling
 * worker's scratch (its index is the worker's). */
static ts_status write_chunks(fuse_well *W, fuse_scratch *sc, int worker, int k, int64_t t, int64_t z,
                              int64_t band, int64_t bx, ts_error *err) {
    const tz_array_meta *m = tz_array_get_meta(W->out[k]);
    int64_t Bk = W->L.block >> k, ck = W->L.level_chunk[k], per = Bk / ck;
    /* Chunks of this block inside the array along y and x. */
    int64_t ny = (m->shape[3] - band * Bk + ck - 1) / ck, nx = (m->shape[4] - bx * Bk + ck - 1) / ck;
    if (ny > per) ny = per;
    if (nx > per) nx = per;
    chunk_job J = {W, k, t, z, band, bx, sc->level[k], ny, nx};
    return fuse_pipeline_share(W->L.C * ny * nx, write_chunk, &J, worker, err);
}

/* 0.5: the zarr layer encodes a shard's inner chunks as items that every
 * free pipeline worker may take (one thread per shard left the others idle
 * at a band's end and on small canvases). */
typedef struct shard_share {
    int worker;
} shard_share;

static ts_status run_shared(void *user, int64_t n, tz_item_fn fn, void *fn_user, ts_error *err) {
    const shard_share *s = user;
    return fuse_pipeline_share(n, fn, fn_user, s->worker, err);
}

ts_status fuse_write_block(fuse_well *W, fuse_scratch *sc, int64_t t, int64_t z, int64_t band,
                           int64_t bx, ts_error *err) {
    const fuse_layout *L = &W->L;
    for (int k = 0; k <= L->levels; k++) {
        int64_t Bk = L->block >> k;
        if (k > 0 && !W->gpu) { /* the GPU wrote every level (gpu_block.c) */
            /* Valid extent of this block at level k-1, then 2x mean. */
            int64_t Bp = L->block >> (k - 1), hp, wp;
            fuse_block_extent(L, k - 1, band, bx, &hp, &wp);
            memset(sc->level[k], 0, (size_t)(L->C * Bk * Bk) * W->out_elem);
            for (int64_t c = 0; c < L->C; c++) {
                if (W->label) /* the 2x2 mode: a mean would invent labels */
                    W->K->downsample_label((unsigned char *)sc->level[k] + (size_t)(c * Bk * Bk) * W->out_elem, Bk,
                                           (const unsigned char *)sc->level[k - 1] + (size_t)(c * Bp * Bp) * W->out_elem,
                                           Bp, hp, wp, W->out_elem);
                else if (W->out_dtype == TS_FLOAT32)
                    W->K->downsample_f32((float *)sc->level[k] + c * Bk * Bk, Bk,
                                         (const float *)sc->level[k - 1] + c * Bp * Bp, Bp, hp, wp);
                else
                    W->K->downsample_u16((uint16_t *)sc->level[k] + c * Bk * Bk, Bk,
                                         (const uint16_t *)sc->level[k - 1] + c * Bp * Bp, Bp, hp, wp);
            }
        }
        ts_status st;
        if (tz_array_get_meta(W->out[k])->sharded) {
            int64_t idx[5] = {t, 0, z, band, bx};
            shard_share share = {(int)(sc - W->scratch)};
            const tz_parallel par = {W->nworkers, run_shared, &share};
            st = tz_array_write_block_parallel(W->out[k], idx, sc->level[k], &par, err);
        } else {
            st = write_chunks(W, sc, (int)(sc - W->scratch), k, t, z, band, bx, err);
        }
        if (st) return st;
    }
    return TS_OK;
}
