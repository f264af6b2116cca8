/* The row kernels of kernels.c, compiled once per instruction set: this
 * file is included by kernels.c with KFN(name) naming the functions of one
 * set (name_sse2, name_avx2, ...) under that set's target. Every set runs
 * the same element-wise arithmetic in the same order (no reductions, no
 * fused multiply-add: gcc's C17 mode keeps -ffp-contract=off, and
 * kernels.c turns clang's contraction off), so all of them
 * write the same bytes; wider vectors only do more elements at once. */
/* No include guard: included once per instruction set. */

static void KFN(accumulate)(float *restrict num, float *restrict den, const float *restrict v,
                           const float *restrict w, int64_t n) {
    for (int64_t i = 0; i < n; i++) {
        float vi = v[i], wi = w[i];       /* unconditional loads: if-convertible */
        wi = vi != 0.0f ? wi : 0.0f;
        num[i] += wi * vi;
        den[i] += wi;
    }
}

static void KFN(accumulate_u16)(float *restrict num, float *restrict den,
                               const uint16_t *restrict v, const float *restrict w, int64_t n) {
    for (int64_t i = 0; i < n; i++) {
        float vi = (float)v[i], wi = w[i];
        wi = vi != 0.0f ? wi : 0.0f;
        num[i] += wi * vi;
        den[i] += wi;
    }
}

static void KFN(normalise_u16)(uint16_t *restrict out, const float *restrict num,
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

static void KFN(normalise_f32)(float *restrict out, const float *restrict num,
                              const float *restrict den, int64_t n) {
    for (int64_t i = 0; i < n; i++) {
        out[i] = num[i] / at_least_min(den[i]);
    }
}

static void KFN(downsample_u16)(uint16_t *dst, int64_t dst_stride, const uint16_t *src,
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

static void KFN(downsample_f32)(float *dst, int64_t dst_stride, const float *src, int64_t stride,
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

static void KFN(label_u16)(float *restrict best, uint32_t *restrict lab, const uint16_t *restrict v,
                          const float *restrict w, int64_t n) {
    for (int64_t i = 0; i < n; i++) {
        bool take = w[i] > best[i];
        best[i] = take ? w[i] : best[i];
        lab[i] = take ? (uint32_t)v[i] : lab[i];
    }
}

static void KFN(label_u32)(float *restrict best, uint32_t *restrict lab, const uint32_t *restrict v,
                          const float *restrict w, int64_t n) {
    for (int64_t i = 0; i < n; i++) {
        bool take = w[i] > best[i];
        best[i] = take ? w[i] : best[i];
        lab[i] = take ? v[i] : lab[i];
    }
}

