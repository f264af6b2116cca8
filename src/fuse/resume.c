/* fuse --resume: which blocks an interrupted run left complete. A block is
 * kept only when it is checked, not assumed: at every pyramid level each of
 * its stored pieces (the shard in 0.5, its chunks in 0.4) exists and the
 * whole block decodes (shard index CRC32C, every chunk through its codec
 * chain, sizes). A block with a piece absent is blended again: tessera
 * stores no all-fill piece, so an absent one may be fill or not yet
 * written, and only the blend can tell. Pieces are written whole (temporary
 * + rename), so a present piece is one a run finished; the run's identity
 * (options, inputs, layouts) was checked against the interrupted one's
 * before (fuse.c), so it is the piece this run would write, byte for byte.
 *
 * The strips only skipped blocks need are not read either, so a resumed run
 * costs the check of what is done (a decode) plus the work left. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "common/error.h"
#include "fuse/fuse_internal.h"

typedef struct scan_job {
    fuse_well *W;
    int64_t g0, nb;          /* this process's blocks [g0, g0 + nb) of each (t, z) */
    int64_t ntz;
    void **buf;              /* per worker: one block of level 0 */
} scan_job;

static bool piece_present(const tz_array *arr, const int64_t *idx) {
    char key[256], file[4700];
    tz_chunk_key(tz_array_get_meta(arr), idx, key, sizeof key);
    snprintf(file, sizeof file, "%s/%s", tz_array_path(arr), key);
    struct stat sb;
    return stat(file, &sb) == 0 && S_ISREG(sb.st_mode);
}

/* Block (t, z, band, bx) at every level: present and decoding. A piece
 * that fails to decode is not an error of the run: it is written again. */
static bool block_complete(fuse_well *W, int64_t t, int64_t z, int64_t band, int64_t bx, void *buf) {
    const fuse_layout *L = &W->L;
    for (int k = 0; k <= L->levels; k++) {
        const tz_array *arr = W->out[k];
        const tz_array_meta *m = tz_array_get_meta(arr);
        const int64_t Bk = L->block >> k;
        const int64_t y0 = band * Bk, x0 = bx * Bk;
        if (y0 >= m->shape[3] || x0 >= m->shape[4]) continue;
        const int64_t h = y0 + Bk <= m->shape[3] ? Bk : m->shape[3] - y0;
        const int64_t w = x0 + Bk <= m->shape[4] ? Bk : m->shape[4] - x0;
        if (m->sharded) {
            int64_t idx[5] = {t, 0, z, band, bx};
            if (!piece_present(arr, idx)) return false;
        } else {
            const int64_t ck = L->level_chunk[k], per = Bk / ck;
            for (int64_t c = 0; c < L->C; c++)
                for (int64_t cy = 0; cy * ck < h; cy++)
                    for (int64_t cx = 0; cx * ck < w; cx++) {
                        int64_t idx[5] = {t, c, z, band * per + cy, bx * per + cx};
                        if (!piece_present(arr, idx)) return false;
                    }
        }
        int64_t start[5] = {t, 0, z, y0, x0}, count[5] = {1, L->C, 1, h, w};
        ts_error ignored;
        if (tz_array_read(arr, start, count, buf, &ignored) != TS_OK) return false;
    }
    return true;
}

static ts_status scan_block(void *user, int64_t i, int worker, ts_error *err) {
    scan_job *J = user;
    fuse_well *W = J->W;
    const int64_t nbx = W->L.nbx;
    const int64_t g = J->g0 + i % J->nb, tz = i / J->nb, bx = g % nbx, band = g / nbx;
    if (!J->buf[worker]) {
        J->buf[worker] = malloc((size_t)(W->L.C * W->L.block * W->L.block) * W->out_elem);
        if (!J->buf[worker]) return ts_fail(err, TS_ERR_NOMEM, "--resume: a block buffer");
    }
    const int64_t ti = tz / W->L.Z, z = tz % W->L.Z;
    const int64_t unit = tz * W->plan->nbands + band;
    W->resume_done[unit * nbx + bx] = block_complete(W, W->t_out0 + ti, z, band, bx, J->buf[worker]);
    return TS_OK;
}

ts_status fuse_resume_scan(fuse_well *W, ts_pool *pool, ts_error *err) {
    const int64_t g0 = W->block_begin, g1 = W->block_end;
    const fuse_plan *P = W->plan;
    const int64_t ntz = W->nt * W->L.Z, nbx = W->L.nbx, nunits = ntz * P->nbands;
    W->resume_done = calloc((size_t)(nunits * nbx) + 1, 1);
    W->resume_slot_off = calloc((size_t)P->nbands + 1, sizeof *W->resume_slot_off);
    if (!W->resume_done || !W->resume_slot_off) return ts_fail(err, TS_ERR_NOMEM, "--resume: block map");
    for (int b = 0; b < P->nbands; b++) W->resume_slot_off[b + 1] = W->resume_slot_off[b] + P->bands[b].nslots;
    const int64_t nslots = W->resume_slot_off[P->nbands];
    W->resume_needed = calloc((size_t)(ntz * nslots) + 1, 1);
    if (!W->resume_needed) return ts_fail(err, TS_ERR_NOMEM, "--resume: strip map");
    scan_job J = {W, g0, g1 - g0, ntz, calloc((size_t)ts_pool_size(pool), sizeof(void *))};
    if (!J.buf) return ts_fail(err, TS_ERR_NOMEM, "--resume: block buffers");
    ts_status st = g1 > g0 ? ts_pool_run(pool, ntz * (g1 - g0), scan_block, &J, err) : TS_OK;
    for (int i = 0; i < ts_pool_size(pool); i++) free(J.buf[i]);
    free(J.buf);
    if (st) return st;
    /* A strip is read when a block left to blend uses it. */
    for (int64_t tz = 0; tz < ntz; tz++)
        for (int64_t g = g0; g < g1; g++) {
            const int64_t b = g / nbx, bx = g % nbx;
            const fuse_band *band = &P->bands[b];
            const int64_t unit = tz * P->nbands + b;
            if (W->resume_done[unit * nbx + bx]) {
                W->resume_blocks_kept++;
                continue;
            }
            for (int k = band->block_start[bx]; k < band->block_start[bx + 1]; k++)
                W->resume_needed[tz * nslots + W->resume_slot_off[b] + band->block_slots[k]] = 1;
        }
    return TS_OK;
}

bool fuse_resume_block_done(const fuse_well *W, int64_t unit, int64_t bx) {
    return W->resume_done && W->resume_done[unit * W->L.nbx + bx];
}

bool fuse_resume_strip_needed(const fuse_well *W, int64_t unit, const fuse_slot *slot) {
    if (!W->resume_needed) return true;
    const int64_t nb = W->plan->nbands, band = unit % nb, tz = unit / nb;
    const int64_t nslots = W->resume_slot_off[nb];
    const int64_t s = slot - W->plan->bands[band].slots;
    return W->resume_needed[tz * nslots + W->resume_slot_off[band] + s];
}

void fuse_resume_free(fuse_well *W) {
    free(W->resume_done);
    free(W->resume_needed);
    free(W->resume_slot_off);
    W->resume_done = W->resume_needed = NULL;
    W->resume_slot_off = NULL;
}
