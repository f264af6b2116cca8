/*
 * The CUDA backend (docs/gpu.md), seen from C.
 *
 * Fusion: one call per output block (the seam is the pipeline's process
 * stage, blend.c): the block's covering tile strips, uploaded once per band
 * and kept on the device until the pipeline frees them, are gathered per
 * output pixel in the CPU's tile order, normalised and downsampled to every
 * pyramid level on the device, and the levels copied back into the caller's
 * buffers. The bytes equal the CPU kernels' (kernels_body.h): same float
 * operations in the same order, no fused multiply-add, IEEE division.
 *
 * Registration: batched phase-correlation surfaces (cuFFT) of many strip
 * pairs at once (phasecorr.cu); not yet called by estimate.
 *
 * A build without CUDA links gpu_none.c instead: every entry point answers
 * that no GPU backend was built. Plain C types only: included from C and
 * from the .cu files.
 */
#ifndef TS_GPU_GPU_H
#define TS_GPU_GPU_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tessera/tessera.h"

#ifdef __cplusplus
extern "C" {
#endif

#define TS_GPU_MAX_LEVELS 17

/* Whether this build has the CUDA backend. */
bool ts_gpu_built(void);
/* Usable CUDA devices (0 when none, or no backend); why (may be NULL)
 * says what the runtime answered when there are none, or names the device. */
int ts_gpu_devices(char *why, size_t n);

typedef struct ts_gpu_fuse ts_gpu_fuse;

typedef struct ts_gpu_fuse_config {
    int64_t block;               /* block side B (level 0), a power-of-two multiple of 2^levels */
    int levels;                  /* extra pyramid levels written from each block */
    int64_t C;                   /* channels */
    bool f32;                    /* output float32 (else uint16) */
    int nworkers;                /* pipeline workers: one stream and buffer set each */
    int nshapes;                 /* distinct oriented tile shapes */
    const int64_t (*shapes)[2];  /* (h, w) of each */
    const float *const *weights; /* the CPU's weight image of each (h*w), uploaded once */
} ts_gpu_fuse_config;

/* One strip of a block, as the pipeline holds it (fuse_strip + its tile). */
typedef struct ts_gpu_strip {
    const void *key;    /* identity of the host strip until ts_gpu_fuse_forget */
    const void *data;   /* host elements */
    bool u16;           /* uint16 elements, else float32 */
    int nc;             /* channels held (0: none) */
    int64_t origin, plane, row_step; /* element of row i, channel c: origin + c*plane + (i-r0)*row_step */
    int64_t r0, r1, w;  /* oriented tile rows held, tile width */
    int64_t oy, ox;     /* tile origin on the canvas */
    int shape;          /* index into the config's weight images */
} ts_gpu_strip;

typedef struct ts_gpu_block {
    int64_t y0, x0;     /* block origin on the canvas */
    int64_t y1, x1;     /* end of the canvas part of level 0 (exclusive) */
    /* Valid extent of level k-1 that level k is downsampled from
     * (output.c's hp, wp), k = 1..levels. */
    int64_t hp[TS_GPU_MAX_LEVELS], wp[TS_GPU_MAX_LEVELS];
} ts_gpu_block;

ts_status ts_gpu_fuse_create(const ts_gpu_fuse_config *cfg, ts_gpu_fuse **out, ts_error *err);
/* Waits for every stream, frees everything. NULL is a no-op. */
void ts_gpu_fuse_destroy(ts_gpu_fuse *g);
/* Blends block blk from strips[0..n) (in the CPU's order) on worker's
 * stream and writes level k (C x (B>>k)^2 of the output dtype) to
 * level_out[k], k = 0..levels, as fuse_write_block's downsampling would.
 * Returns when the copies have landed. Thread-safe across workers. */
ts_status ts_gpu_fuse_block(ts_gpu_fuse *g, int worker, const ts_gpu_block *blk, const ts_gpu_strip *strips,
                            int n, void *const *level_out, ts_error *err);
/* The host strip `key` is about to be freed: drop its device copy (after
 * the uploads and kernels that use it have finished). */
void ts_gpu_fuse_forget(ts_gpu_fuse *g, const void *key);

/* The row kernels alone, for tests/unit/test_gpu.c: each runs the GPU
 * version of the ts_fuse_kernels function of the same name over host
 * arrays (copied in and out, synchronously). TS_ERR_UNSUPPORTED without a
 * device. */
ts_status ts_gpu_test_accumulate(float *num, float *den, const void *v, bool u16, const float *w, int64_t n,
                                 ts_error *err);
ts_status ts_gpu_test_normalise(void *out, bool f32, const float *num, const float *den, int64_t n,
                                ts_error *err);
ts_status ts_gpu_test_downsample(void *dst, int64_t dst_stride, const void *src, int64_t stride, int64_t h,
                                 int64_t w, bool f32, ts_error *err);

/* Registration: the phase-correlation surfaces of n pairs of h x w real
 * float strips, already mean-free and apodised as phasecorr.c's
 * spectrum() leaves them (pair i: a + i*h*w, b + i*h*w), each written to
 * surf + i*h*w as phasecorr.c computes it: the cross-power spectrum
 * A conj(B) scaled by g / (|A conj(B)| + eps), eps = 1e-6 x the pair's
 * mean magnitude + FLT_MIN, g the spectral weight gspec (h x (w/2+1);
 * NULL: 1), the DC term zeroed, inverse-transformed unscaled (FFTW's
 * r2c/c2r layout and signs). One batched cuFFT plan per call. Not
 * bit-identical to FFTW (different FFT algorithms): docs/gpu.md gives the
 * tolerance. TS_ERR_UNSUPPORTED without a device. */
ts_status ts_gpu_phasecorr_batch(const float *a, const float *b, int64_t n, int64_t h, int64_t w,
                                 const float *gspec, float *surf, ts_error *err);

#ifdef __cplusplus
}
#endif

#endif
