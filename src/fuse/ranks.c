/* Fuse over MPI ranks (see ranks.h). */
#include "fuse/ranks.h"

#include <stdio.h>
#include <stdlib.h>

void fuse_rank_bands(const fuse_plan *plan, int rank, int size, int64_t *b0, int64_t *b1) {
    /* By count: every band is one block row high but the last, so this is
     * balanced by rows within one band, and it needs nothing that could
     * fail on one rank and not another (a split by rows that fell back to
     * counting when its allocation failed gave that rank other bands). */
    ts_dist_share(plan->nbands, NULL, rank, size, b0, b1);
}

static int64_t global_unit(const fuse_rank_fns *R, int64_t u) {
    return (u / R->nlocal) * R->nbands + R->b0 + u % R->nlocal;
}

static size_t rank_strip_estimate(void *user, int64_t unit, const fuse_slot *slot) {
    const fuse_rank_fns *R = user;
    return R->inner.strip_estimate(R->inner.user, global_unit(R, unit), slot);
}

static ts_status rank_load(void *user, int64_t unit, const fuse_slot *slot, fuse_strip *strip, ts_error *err) {
    const fuse_rank_fns *R = user;
    return R->inner.load(R->inner.user, global_unit(R, unit), slot, strip, err);
}

static ts_status rank_process(void *user, int worker, int64_t unit, int64_t bx,
                              const fuse_strip *const *strips, int nstrips, ts_error *err) {
    const fuse_rank_fns *R = user;
    return R->inner.process(R->inner.user, worker, global_unit(R, unit), bx, strips, nstrips, err);
}

static void rank_free_strip(void *user, fuse_strip *strip) {
    const fuse_rank_fns *R = user;
    R->inner.free_strip(R->inner.user, strip);
}

int64_t fuse_rank_pipeline(const fuse_plan *plan, int64_t ntz, int64_t b0, int64_t b1,
                           const fuse_stage_fns *inner, fuse_rank_fns *R, fuse_plan *view,
                           fuse_stage_fns *fns) {
    *view = *plan;
    view->nbands = (int)(b1 - b0);
    view->bands = plan->bands + b0;
    R->inner = *inner;
    R->b0 = b0;
    R->nlocal = b1 - b0;
    R->nbands = plan->nbands;
    /* Every callback of fuse_stage_fns takes the user pointer, so every one
     * is wrapped here: a callback added to pipeline.h needs its wrapper too
     * (test_dist checks the renumbering). */
    *fns = *inner;
    fns->user = R;
    fns->strip_estimate = inner->strip_estimate ? rank_strip_estimate : NULL;
    fns->load = rank_load;
    fns->process = rank_process;
    fns->free_strip = inner->free_strip ? rank_free_strip : NULL;
    return R->nlocal > 0 ? ntz * R->nlocal : 0;
}

static int64_t gcd64(int64_t a, int64_t b) {
    while (b) { int64_t t = a % b; a = b; b = t; }
    return a;
}

ts_status fuse_output_attach(fuse_well *W, const char *image_path, ts_error *err) {
    for (int k = 0; k <= W->L.levels; k++) {
        char path[4200];
        snprintf(path, sizeof path, "%s/%d", image_path, k);
        /* As fuse_output_open: a level's chunk divides its block. */
        W->chunk_k[k] = gcd64(W->L.chunk, W->L.block >> k);
        ts_status st = tz_array_open(path, &W->out[k], err);
        if (st) return st;
    }
    return TS_OK;
}
