/* Portable C fusion kernels. The inner loops are branch-free over contiguous
 * rows (selects instead of ifs, unconditional loads) so that gcc vectorises
 * them; docs/fuse.md records the -fopt-info-vec check. */
#include "fuse/kernels.h"

/* RelWithDebInfo builds at -O2, where gcc 12 only vectorises loops that need
 * no runtime checks; these rows do (trip count), so ask for -O3 here. */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC optimize("O3")
#endif

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

static void accumulate_cpu(float *restrict num, float *restrict den, const float *restrict v,
                           const float *restrict w, int64_t n) {
    for (int64_t i = 0; i < n; i++) {
        float vi = v[i], wi = w[i];       /* unconditional loads: if-convertible */
        wi = vi != 0.0f ? wi : 0.0f;
        num[i] += wi * vi;
        den[i] += wi;
    }
}

static void accumulate_u16_cpu(float *restrict num, float *restrict den,
                               const uint16_t *restrict v, const float *restrict w, int64_t n) {
    for (int64_t i = 0; i < n; i++) {
        float vi = (float)v[i], wi = w[i];
        wi = vi != 0.0f ? wi : 0.0f;
        num[i] += wi * vi;
        den[i] += wi;
    }
}

static void normalise_u16_cpu(uint16_t *restrict out, const float *restrict num,
                              const float *restrict den, int64_t n) {
    for (int64_t i = 0; i < n; i++) {
        /* den == 0 implies num == 0, so 0 / FLT_MIN gives the 0 of
         * uncovered pixels without a branch. */
        float q = num[i] / at_least_min(den[i]);
        q = q + 0.5f;                       /* round to nearest (half up) */
        q = q >= 0.0f ? q : 0.0f;           /* written so that a NaN becomes 0: */
        q = q <= 65535.0f ? q : 65535.0f;   /* converting NaN to an integer is UB */
        out[i] = (uint16_t)(int32_t)q;
    }
}

static void normalise_f32_cpu(float *restrict out, const float *restrict num,
                              const float *restrict den, int64_t n) {
    for (int64_t i = 0; i < n; i++) {
        out[i] = num[i] / at_least_min(den[i]);
    }
}

static void downsample_u16_cpu(uint16_t *dst, int64_t dst_stride, const uint16_t *src,
                               int64_t stride, int64_t h, int64_t w) {
    int64_t oh = (h + 1) / 2, ow = (w + 1) / 2;
    for (int64_t y = 0; y < oh; y++) {
        const uint16_t *r0 = src + 2 * y * stride;
        const uint16_t *r1 = 2 * y + 1 < h ? r0 + stride : r0;
        uint32_t ny = 2 * y + 1 < h ? 2 : 1;
        uint16_t *d = dst + y * dst_stride;
        int64_t full = w / 2;
        if (ny == 2) {
            for (int64_t x = 0; x < full; x++)
                d[x] = (uint16_t)(((uint32_t)r0[2 * x] + r0[2 * x + 1] + r1[2 * x] + r1[2 * x + 1] + 2) / 4);
        } else {
            for (int64_t x = 0; x < full; x++)
                d[x] = (uint16_t)(((uint32_t)r0[2 * x] + r0[2 * x + 1] + 1) / 2);
        }
        if (ow > full) { /* odd width: the last column has one source column */
            uint32_t s = r0[w - 1] + (ny == 2 ? r1[w - 1] : 0u);
            d[full] = (uint16_t)((s + ny / 2) / ny);
        }
    }
}

static void downsample_f32_cpu(float *dst, int64_t dst_stride, const float *src, int64_t stride,
                               int64_t h, int64_t w) {
    int64_t oh = (h + 1) / 2, ow = (w + 1) / 2;
    for (int64_t y = 0; y < oh; y++) {
        const float *r0 = src + 2 * y * stride;
        bool two = 2 * y + 1 < h;
        const float *r1 = two ? r0 + stride : r0;
        float *d = dst + y * dst_stride;
        int64_t full = w / 2;
        if (two) {
            for (int64_t x = 0; x < full; x++)
                d[x] = (r0[2 * x] + r0[2 * x + 1] + r1[2 * x] + r1[2 * x + 1]) * 0.25f;
        } else {
            for (int64_t x = 0; x < full; x++) d[x] = (r0[2 * x] + r0[2 * x + 1]) * 0.5f;
        }
        if (ow > full) d[full] = two ? (r0[w - 1] + r1[w - 1]) * 0.5f : r0[w - 1];
    }
}

static void label_u16_cpu(float *restrict best, uint32_t *restrict lab, const uint16_t *restrict v,
                          const float *restrict w, int64_t n) {
    for (int64_t i = 0; i < n; i++) {
        bool take = w[i] > best[i];
        best[i] = take ? w[i] : best[i];
        lab[i] = take ? (uint32_t)v[i] : lab[i];
    }
}

static void label_u32_cpu(float *restrict best, uint32_t *restrict lab, const uint32_t *restrict v,
                          const float *restrict w, int64_t n) {
    for (int64_t i = 0; i < n; i++) {
        bool take = w[i] > best[i];
        best[i] = take ? w[i] : best[i];
        lab[i] = take ? v[i] : lab[i];
    }
}

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

static const ts_fuse_kernels CPU_KERNELS = {
    .weights = weights_cpu,
    .accumulate = accumulate_cpu,
    .accumulate_u16 = accumulate_u16_cpu,
    .normalise_u16 = normalise_u16_cpu,
    .normalise_f32 = normalise_f32_cpu,
    .downsample_u16 = downsample_u16_cpu,
    .downsample_f32 = downsample_f32_cpu,
    .label_u16 = label_u16_cpu,
    .label_u32 = label_u32_cpu,
    .downsample_label = downsample_label_cpu,
};

const ts_fuse_kernels *ts_fuse_cpu_kernels(void) { return &CPU_KERNELS; }
