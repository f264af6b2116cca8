/* Portable C fusion kernels. The inner loops are branch-free over contiguous
 * rows (selects instead of ifs, unconditional loads) so that gcc vectorises
 * them; docs/fuse.md records the -fopt-info-vec check. The row kernels are
 * compiled for SSE2 (the x86-64 baseline), AVX2 and AVX-512 and the widest
 * the CPU has is chosen at run time (same bytes from each). */
#include "fuse/kernels.h"

#include "common/isa.h"

/* Built at -O3 and without fused multiply-add (CMakeLists.txt, the
 * per-pixel loops): at RelWithDebInfo's -O2 gcc 12 vectorised none of these
 * rows (their trip counts need runtime checks), and clang, which contracts
 * by default, wrote other bytes from its AVX-512 set (AVX-512F brings FMA;
 * test_fuse_isa: num += w * v rounded once, 0x26 for 0x27). */

#include <float.h>
#include <math.h>
#include <stdbool.h>
#include <string.h>

/* max(d, FLT_MIN) written as a select, which maps onto maxps (fmaxf's NaN
 * rules keep gcc from vectorising it). */
static inline float at_least_min(float d) { return d > FLT_MIN ? d : FLT_MIN; }

static void weights_cpu(float *out, int64_t h, int64_t w, ts_blend blend, double exponent) {
    if (blend == TS_BLEND_AVERAGE) {
        for (int64_t i = 0; i < h * w; i++) out[i] = 1.0f;
        return;
    }
    /* The weight depends only on d = min(dy, dx): one pow per distinct d. */
    int64_t dmax = (h < w ? h : w) / 2 + 1;
    float lut[dmax > 0 ? dmax : 1];
    for (int64_t d = 0; d < dmax; d++) lut[d] = (float)pow((double)d + 1e-6, exponent);
    for (int64_t y = 0; y < h; y++) {
        int64_t dy = y < h - 1 - y ? y : h - 1 - y;
        float *row = out + y * w;
        for (int64_t x = 0; x < w; x++) {
            int64_t dx = x < w - 1 - x ? x : w - 1 - x;
            row[x] = lut[dx < dy ? dx : dy];
        }
    }
}

/* The row kernels, once per instruction set (kernels_body.h). */
#define KFN(name) name##_sse2
#include "fuse/kernels_body.h"
#undef KFN

#ifdef TS_ISA_X86
#if defined(__clang__)
#pragma clang attribute push(__attribute__((target("avx2"))), apply_to = function)
#else
#pragma GCC push_options
#pragma GCC target("avx2")
#endif
#define KFN(name) name##_avx2
#include "fuse/kernels_body.h"
#undef KFN
#if defined(__clang__)
#pragma clang attribute pop
#pragma clang attribute push(__attribute__((target("avx512f,avx512bw"))), apply_to = function)
#else
#pragma GCC pop_options
#pragma GCC push_options
#pragma GCC target("avx512f,avx512bw")
#endif
#define KFN(name) name##_avx512
#include "fuse/kernels_body.h"
#undef KFN
#if defined(__clang__)
#pragma clang attribute pop
#else
#pragma GCC pop_options
#endif
#endif

static uint32_t label_load(const unsigned char *p, size_t elem) {
    if (elem == 1) return *p;
    if (elem == 2) { uint16_t v; memcpy(&v, p, 2); return v; }
    uint32_t v;
    memcpy(&v, p, 4);
    return v;
}

static void label_store(unsigned char *p, size_t elem, uint32_t v) {
    if (elem == 1) *p = (unsigned char)v;
    else if (elem == 2) { uint16_t u = (uint16_t)v; memcpy(p, &u, 2); }
    else memcpy(p, &v, 4);
}

/* The most frequent of v[0..n), ties to the earliest. */
static uint32_t label_mode(const uint32_t *v, int n) {
    uint32_t pick = v[0];
    int most = 0;
    for (int i = 0; i < n; i++) {
        int count = 0;
        for (int j = 0; j < n; j++) count += v[j] == v[i];
        if (count > most) most = count, pick = v[i];
    }
    return pick;
}

static void downsample_label_cpu(void *dst, int64_t dst_stride, const void *src, int64_t stride,
                                 int64_t h, int64_t w, size_t elem) {
    int64_t oh = (h + 1) / 2, ow = (w + 1) / 2;
    const unsigned char *s = src;
    unsigned char *d = dst;
    for (int64_t y = 0; y < oh; y++)
        for (int64_t x = 0; x < ow; x++) {
            uint32_t v[4];
            int n = 0;
            for (int64_t dy = 0; dy < 2; dy++)
                for (int64_t dx = 0; dx < 2; dx++) {
                    int64_t sy = 2 * y + dy, sx = 2 * x + dx;
                    if (sy < h && sx < w) v[n++] = label_load(s + (size_t)(sy * stride + sx) * elem, elem);
                }
            label_store(d + (size_t)(y * dst_stride + x) * elem, elem, label_mode(v, n));
        }
}

#define KERNEL_SET(isa)                                                                                       \
    {                                                                                                         \
        .weights = weights_cpu, .accumulate = accumulate_##isa, .accumulate_u16 = accumulate_u16_##isa,       \
        .normalise_u16 = normalise_u16_##isa, .normalise_f32 = normalise_f32_##isa,                           \
        .downsample_u16 = downsample_u16_##isa, .downsample_f32 = downsample_f32_##isa,                       \
        .label_u16 = label_u16_##isa, .label_u32 = label_u32_##isa, .downsample_label = downsample_label_cpu, \
    }

static const ts_fuse_kernels KERNELS_SSE2 = KERNEL_SET(sse2);
#ifdef TS_ISA_X86
static const ts_fuse_kernels KERNELS_AVX2 = KERNEL_SET(avx2);
static const ts_fuse_kernels KERNELS_AVX512 = KERNEL_SET(avx512);
#endif

const ts_fuse_kernels *ts_fuse_cpu_kernels_isa(const char *isa) {
    if (!ts_isa_available(isa)) return NULL;
    if (!strcmp(isa, "sse2")) return &KERNELS_SSE2;
#ifdef TS_ISA_X86
    if (!strcmp(isa, "avx2")) return &KERNELS_AVX2;
    if (!strcmp(isa, "avx512")) return &KERNELS_AVX512;
#endif
    return NULL;
}

/* The widest set this CPU runs (common/isa.h). */
const char *ts_fuse_cpu_isa(void) {
    static const char *const order[] = {"avx512", "avx2", "sse2"};
    for (int i = 0; i < 3; i++)
        if (ts_fuse_cpu_kernels_isa(order[i])) return order[i];
    return "sse2";
}

const ts_fuse_kernels *ts_fuse_cpu_kernels(void) { return ts_fuse_cpu_kernels_isa(ts_fuse_cpu_isa()); }
