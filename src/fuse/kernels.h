/*
 * Fusion kernels: the arithmetic of blending, apart from planning and I/O.
 *
 * Everything works on contiguous rows (float32, or uint16 tile rows) so that gcc -O2/-O3
 * vectorises the loops (see docs/fuse.md). The pipeline only calls them
 * through ts_fuse_kernels, so another backend (GPU, hand-written SIMD) can
 * replace the whole set without touching the planner or the pipeline.
 */
#ifndef TS_FUSE_KERNELS_H
#define TS_FUSE_KERNELS_H

#include <stddef.h>
#include <stdint.h>

#include "tessera/tessera.h"

typedef struct ts_fuse_kernels {
    /* Weight image of an h x w oriented tile: edt: w = (d + 1e-6)^exponent
     * with d = min(y, x, h-1-y, w-1-x); average: w = 1. out holds h*w. */
    void (*weights)(float *out, int64_t h, int64_t w, ts_blend blend, double exponent);
    /* One row segment of a tile over one row of a block:
     * num += w*v, den += w where v != 0 (zero pixels are padding; the tile
     * reader turns NaN, no data in a float tile, into 0 before this). */
    void (*accumulate)(float *restrict num, float *restrict den, const float *restrict v,
                       const float *restrict w, int64_t n);
    /* The same over a uint16 row, converted on the fly: uint16 tiles (the
     * usual case) are blended straight from the decoded chunk, without a
     * float32 copy of every strip (writing that copy cost more than the
     * blending, mostly in first-touch page faults). */
    void (*accumulate_u16)(float *restrict num, float *restrict den, const uint16_t *restrict v,
                           const float *restrict w, int64_t n);
    /* out = num/den, 0 where den == 0; rounded to nearest and clamped (a NaN
     * quotient gives 0). */
    void (*normalise_u16)(uint16_t *restrict out, const float *restrict num,
                          const float *restrict den, int64_t n);
    void (*normalise_f32)(float *restrict out, const float *restrict num,
                          const float *restrict den, int64_t n);
    /* 2x mean downsampling of an h x w region (row stride `stride` elements)
     * into ceil(h/2) x ceil(w/2) (row stride dst_stride); edge pixels average
     * the source pixels that exist. uint16 rounds half up. */
    void (*downsample_u16)(uint16_t *dst, int64_t dst_stride, const uint16_t *src,
                           int64_t stride, int64_t h, int64_t w);
    void (*downsample_f32)(float *dst, int64_t dst_stride, const float *src, int64_t stride,
                           int64_t h, int64_t w);
    /* Label images (--blend label, src/fuse/label.c): no blending. best
     * (the weight of the pixel's tile so far) and lab (its label, as 32
     * bits) start at 0; each tile row takes the pixels where its weight is
     * greater than best (strictly: of equal weights the tile blended first,
     * the lowest tile index, keeps the pixel), its 0 (background) included:
     * a tile that covers a pixel says what is there. */
    void (*label_u16)(float *restrict best, uint32_t *restrict lab, const uint16_t *restrict v,
                      const float *restrict w, int64_t n);
    void (*label_u32)(float *restrict best, uint32_t *restrict lab, const uint32_t *restrict v,
                      const float *restrict w, int64_t n);
    /* 2x downsampling of a label image of elem (1, 2 or 4) byte integers:
     * each pixel the most frequent value of the source pixels that exist
     * (2x2, fewer at odd edges), 0 included; a tie goes to the first in
     * raster order (top-left, top-right, bottom-left, bottom-right). Never
     * a value that is not in the source (a mean would invent labels). */
    void (*downsample_label)(void *dst, int64_t dst_stride, const void *src, int64_t stride,
                             int64_t h, int64_t w, size_t elem);
} ts_fuse_kernels;

/* The C kernels for the widest instruction set this CPU has. */
const ts_fuse_kernels *ts_fuse_cpu_kernels(void);
/* The C kernels for one instruction set: "sse2" (always), "avx2",
 * "avx512" (x86-64 CPUs that have them); NULL when this CPU or build lacks
 * it. Every set writes the same bytes (tests/unit/test_fuse_kernels.c). */
const ts_fuse_kernels *ts_fuse_cpu_kernels_isa(const char *isa);
/* The set ts_fuse_cpu_kernels returns: "avx512", "avx2" or "sse2". */
const char *ts_fuse_cpu_isa(void);

#endif
