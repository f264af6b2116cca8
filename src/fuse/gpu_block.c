/* The GPU seam of the fuse pipeline (docs/gpu.md): with --device gpu (or
 * auto, on a machine with a device) a well's blocks are blended,
 * normalised and downsampled by the CUDA backend (src/gpu/fuse.cu) instead
 * of process_block's loop and fuse_write_block's downsampling; encoding
 * and writing stay on the CPU. The same bytes either way. Label images
 * always run on the CPU (their kernels have no GPU version yet). */
#include <stdio.h>

#include "common/error.h"
#include "fuse/fuse_internal.h"
#include "gpu/gpu.h"

ts_status fuse_gpu_start(fuse_well *W, ts_error *err) {
    W->gpu = NULL;
    if (W->opt->device == TS_DEVICE_CPU || W->label) return TS_OK;
    if (W->opt->device == TS_DEVICE_AUTO && ts_gpu_devices(NULL, 0) <= 0) return TS_OK;
    const ts_gpu_fuse_config cfg = {
        .block = W->L.block,
        .levels = W->L.levels,
        .C = W->L.C,
        .f32 = W->out_dtype == TS_FLOAT32,
        .nworkers = W->nworkers,
        .nshapes = W->nshapes,
        .shapes = (const int64_t(*)[2])W->shapes,
        .weights = (const float *const *)W->weights,
    };
    ts_status st = ts_gpu_fuse_create(&cfg, &W->gpu, err);
    if (st) {
        ts_gpu_fuse_destroy(W->gpu);
        W->gpu = NULL;
        /* auto: a device that cannot be set up is no device (--json then
         * says cpu); gpu: the run fails saying why. */
        if (W->opt->device == TS_DEVICE_AUTO) {
            ts_error_clear(err);
            return TS_OK;
        }
    }
    return st;
}

void fuse_gpu_stop(fuse_well *W) {
    ts_gpu_fuse_destroy(W->gpu);
    W->gpu = NULL;
}

ts_status fuse_gpu_block(fuse_well *W, fuse_scratch *sc, int worker, int64_t band_index, int64_t bx,
                         const fuse_strip *const *strips, int nstrips, ts_error *err) {
    const fuse_layout *L = &W->L;
    const fuse_band *band = &W->plan->bands[band_index];
    const int64_t B = L->block;
    ts_gpu_block blk = {.y0 = band->y0, .x0 = bx * B, .y1 = band->y1};
    blk.x1 = blk.x0 + B < L->canvas_w ? blk.x0 + B : L->canvas_w;
    for (int k = 1; k <= L->levels; k++) /* what level k downsamples, as fuse_write_block */
        fuse_block_extent(L, k - 1, band_index, bx, &blk.hp[k], &blk.wp[k]);
    ts_gpu_strip gs[nstrips > 0 ? nstrips : 1];
    const int *slot_of = band->block_slots + band->block_start[bx];
    for (int k = 0; k < nstrips; k++) {
        const fuse_strip *s = strips[k];
        const fuse_tile *t = &W->tiles[band->slots[slot_of[k]].tile];
        gs[k] = (ts_gpu_strip){
            .key = s, .data = s->data, .u16 = s->dtype == TS_UINT16,
            .nc = s->nc < L->C ? s->nc : (int)L->C,
            .origin = s->origin, .plane = s->plane, .row_step = s->row_step,
            .r0 = s->r0, .r1 = s->r1, .w = t->w, .oy = t->oy, .ox = t->ox, .shape = t->shape_id,
        };
    }
    return ts_gpu_fuse_block(W->gpu, worker, &blk, gs, nstrips, sc->level, err);
}
