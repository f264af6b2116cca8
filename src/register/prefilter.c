/* Pre-filters applied to overlap strips before phase correlation. */
#include "register/register.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/error.h"
#include "register/vec.h"

/* Mirror an index into [0, n) (reflect without repeating the edge pixel, as
 * scipy's "mirror" mode; n == 1 maps everything to 0). */
static inline int mirror(int i, int n) {
    if (n == 1) return 0;
    int period = 2 * (n - 1);
    i %= period;
    if (i < 0) i += period;
    return i < n ? i : period - i;
}

/* The blur's two passes with a normalised kernel of 2 radius + 1 taps,
 * compiled for SSE2 and AVX2 below (the same bits: each output is the
 * same sum in the same order whatever the vector width). */
__attribute__((always_inline)) static inline void gaussian_passes(float *img, int h, int w, const float *kernel,
                                                                  int radius, float *tmp) {
    /* Rows into tmp. Inside the row, eight outputs at a time: each is the
     * same sum in the same order as one at a time (same bits). */
    for (int y = 0; y < h; y++) {
        const float *row = img + (size_t)y * (size_t)w;
        float *out = tmp + (size_t)y * (size_t)w;
        int x = 0;
        for (; x < w && (x < radius || x + radius >= w); x++) {
            float acc = 0;
            for (int k = -radius; k <= radius; k++) acc += kernel[k + radius] * row[mirror(x + k, w)];
            out[x] = acc;
        }
        for (; x + 8 + radius <= w; x += 8) {
            ts_v8f acc = {0};
            for (int k = -radius; k <= radius; k++) {
                const float kv = kernel[k + radius];
                ts_v8f v;
                memcpy(&v, row + x + k, sizeof v);
                acc += (ts_v8f){kv, kv, kv, kv, kv, kv, kv, kv} * v;
            }
            memcpy(out + x, &acc, sizeof acc);
        }
        for (; x < w; x++) {
            float acc = 0;
            if (x >= radius && x + radius < w) {
                for (int k = -radius; k <= radius; k++) acc += kernel[k + radius] * row[x + k];
            } else {
                for (int k = -radius; k <= radius; k++) acc += kernel[k + radius] * row[mirror(x + k, w)];
            }
            out[x] = acc;
        }
    }
    /* Columns back into img, a row at a time for cache friendliness. */
    for (int y = 0; y < h; y++) {
        float *out = img + (size_t)y * (size_t)w;
        for (int x = 0; x < w; x++) out[x] = 0;
        for (int k = -radius; k <= radius; k++) {
            const float *src = tmp + (size_t)mirror(y + k, h) * (size_t)w;
            float kv = kernel[k + radius];
            const ts_v8f kv8 = {kv, kv, kv, kv, kv, kv, kv, kv};
            int x = 0;
            for (; x + 8 <= w; x += 8) {
                ts_v8f o, v;
                memcpy(&o, out + x, sizeof o), memcpy(&v, src + x, sizeof v);
                o += kv8 * v;
                memcpy(out + x, &o, sizeof o);
            }
            for (; x < w; x++) out[x] += kv * src[x];
        }
    }
}

static void gaussian_sse2(float *img, int h, int w, const float *kernel, int radius, float *tmp) {
    gaussian_passes(img, h, w, kernel, radius, tmp);
}

#ifdef TS_ISA_X86
TS_TARGET_AVX2 static void gaussian_avx2(float *img, int h, int w, const float *kernel, int radius, float *tmp) {
    gaussian_passes(img, h, w, kernel, radius, tmp);
}
#endif

bool ts_gaussian_blur_isa(const char *isa, float *img, int h, int w, double sigma, float *tmp) {
    const int pick = ts_isa_pick(isa);
    if (pick < 0) return false;
    const bool wide = pick == 1;
    if (!(sigma > 0)) return true;
    int radius = (int)ceil(3.0 * sigma);
    if (radius > 64) radius = 64;
    float kernel[129];
    double sum = 0;
    for (int i = -radius; i <= radius; i++) {
        kernel[i + radius] = (float)exp(-0.5 * (double)(i * i) / (sigma * sigma));
        sum += kernel[i + radius];
    }
    for (int i = 0; i <= 2 * radius; i++) kernel[i] = (float)(kernel[i] / sum);
#ifdef TS_ISA_X86
    if (wide) {
        gaussian_avx2(img, h, w, kernel, radius, tmp);
        return true;
    }
#endif
    gaussian_sse2(img, h, w, kernel, radius, tmp);
    return true;
}

void ts_gaussian_blur(float *img, int h, int w, double sigma, float *tmp) {
    (void)ts_gaussian_blur_isa(NULL, img, h, w, sigma, tmp); /* NULL: always a variant */
}

void ts_sobel_magnitude(const float *src, float *dst, int h, int w) {
    for (int y = 0; y < h; y++) {
        const float *up = src + (size_t)(y > 0 ? y - 1 : 0) * (size_t)w;
        const float *mid = src + (size_t)y * (size_t)w;
        const float *dn = src + (size_t)(y + 1 < h ? y + 1 : h - 1) * (size_t)w;
        for (int x = 0; x < w; x++) {
            int l = x > 0 ? x - 1 : 0, r = x + 1 < w ? x + 1 : w - 1;
            float gx = (up[r] + 2 * mid[r] + dn[r]) - (up[l] + 2 * mid[l] + dn[l]);
            float gy = (dn[l] + 2 * dn[x] + dn[r]) - (up[l] + 2 * up[x] + up[r]);
            dst[(size_t)y * (size_t)w + (size_t)x] = sqrtf(gx * gx + gy * gy);
        }
    }
}

static inline int mirror_fast(int i, int n) { return i >= 0 && i < n ? i : mirror(i, n); }

/* Running-sum box filter of half-width r along each row, src to dst. A
 * row's running sum is one chain of dependent adds (float differences
 * added in double): four rows advance together so that their chains
 * overlap (each row's arithmetic, and so its result, is the same as
 * alone). For the rows box_rows_body leaves. */
static void box_rows_scalar(const float *src, float *dst, int h, int w, int r) {
    float norm = 1.0f / (float)(2 * r + 1);
    int y = 0;
    for (; y + 4 <= h; y += 4) {
        const float *s0 = src + (size_t)y * (size_t)w, *s1 = s0 + w, *s2 = s1 + w, *s3 = s2 + w;
        float *d0 = dst + (size_t)y * (size_t)w, *d1 = d0 + w, *d2 = d1 + w, *d3 = d2 + w;
        double u0 = 0, u1 = 0, u2 = 0, u3 = 0;
        for (int k = -r; k <= r; k++) {
            int m = mirror_fast(k, w);
            u0 += s0[m], u1 += s1[m], u2 += s2[m], u3 += s3[m];
        }
        for (int x = 0; x < w; x++) {
            int add = mirror_fast(x + r + 1, w), sub = mirror_fast(x - r, w);
            d0[x] = (float)u0 * norm, d1[x] = (float)u1 * norm, d2[x] = (float)u2 * norm, d3[x] = (float)u3 * norm;
            u0 += s0[add] - s0[sub];
            u1 += s1[add] - s1[sub];
            u2 += s2[add] - s2[sub];
            u3 += s3[add] - s3[sub];
        }
    }
    for (; y < h; y++) {
        const float *s = src + (size_t)y * (size_t)w;
        float *d = dst + (size_t)y * (size_t)w;
        double sum = 0;
        for (int k = -r; k <= r; k++) sum += s[mirror_fast(k, w)];
        for (int x = 0; x < w; x++) {
            d[x] = (float)sum * norm;
            sum += s[mirror_fast(x + r + 1, w)] - s[mirror_fast(x - r, w)];
        }
    }
}

/* The same, eight rows at a time in vector lanes: the block transposed
 * into t (w x 8 floats), so that a column of the eight rows is one
 * ts_v8f, and its outputs transposed back. Each lane does its row's
 * arithmetic in the same order (float difference, added in double), so
 * the bits are box_rows_scalar's; the chains of eight rows overlap where
 * four did, and the lanes replace scalar loads (AVX2: 1.6-2.1x faster on
 * 80x512 to 256x40 strips, a loop beside the scalar form). */
__attribute__((always_inline)) static inline void box_rows_body(const float *src, float *dst, int h, int w, int r,
                                                                float *t) {
    const float norm = 1.0f / (float)(2 * r + 1);
    const ts_v8f N = {norm, norm, norm, norm, norm, norm, norm, norm};
    int y = 0;
    for (; y + 8 <= h; y += 8) {
        const float *s = src + (size_t)y * (size_t)w;
        for (int x = 0; x < w; x++)
            for (int k = 0; k < 8; k++) t[(size_t)x * 8 + (size_t)k] = s[(size_t)k * (size_t)w + (size_t)x];
        ts_v4d lo = {0}, hi = {0};
        for (int k = -r; k <= r; k++) {
            ts_v8f v;
            memcpy(&v, t + (size_t)mirror_fast(k, w) * 8, sizeof v);
            lo += __builtin_convertvector(((ts_v4f){v[0], v[1], v[2], v[3]}), ts_v4d);
            hi += __builtin_convertvector(((ts_v4f){v[4], v[5], v[6], v[7]}), ts_v4d);
        }
        float *d = dst + (size_t)y * (size_t)w;
        for (int x = 0; x < w; x++) {
            const int add = mirror_fast(x + r + 1, w), sub = mirror_fast(x - r, w);
            const ts_v4f fl = __builtin_convertvector(lo, ts_v4f), fh = __builtin_convertvector(hi, ts_v4f);
            const ts_v8f o = (ts_v8f){fl[0], fl[1], fl[2], fl[3], fh[0], fh[1], fh[2], fh[3]} * N;
            ts_v8f va, vs;
            memcpy(&va, t + (size_t)add * 8, sizeof va), memcpy(&vs, t + (size_t)sub * 8, sizeof vs);
            const ts_v8f df = va - vs;
            lo += __builtin_convertvector(((ts_v4f){df[0], df[1], df[2], df[3]}), ts_v4d);
            hi += __builtin_convertvector(((ts_v4f){df[4], df[5], df[6], df[7]}), ts_v4d);
            for (int k = 0; k < 8; k++) d[(size_t)k * (size_t)w + (size_t)x] = o[k];
        }
    }
    if (y < h) box_rows_scalar(src + (size_t)y * (size_t)w, dst + (size_t)y * (size_t)w, h - y, w, r);
}

static void box_rows_sse2(const float *src, float *dst, int h, int w, int r, float *t) {
    box_rows_body(src, dst, h, w, r, t);
}

#ifdef TS_ISA_X86
TS_TARGET_AVX2 static void box_rows_avx2(const float *src, float *dst, int h, int w, int r, float *t) {
    box_rows_body(src, dst, h, w, r, t);
}
#endif

static void box_rows(const float *src, float *dst, int h, int w, int r, float *t, bool wide) {
#ifdef TS_ISA_X86
    if (wide) {
        box_rows_avx2(src, dst, h, w, r, t);
        return;
    }
#else
    (void)wide;
#endif
    box_rows_sse2(src, dst, h, w, r, t);
}

/* The same down the columns, a whole row of running sums at a time (cache
 * friendly; four columns per vector, the same arithmetic as one at a
 * time). sum: w doubles. Compiled for SSE2 and AVX2 below. */
__attribute__((always_inline)) static inline void box_cols_body(const float *src, float *dst, int h, int w, int r,
                                                                double *sum) {
    float norm = 1.0f / (float)(2 * r + 1);
    for (int x = 0; x < w; x++) sum[x] = 0;
    for (int k = -r; k <= r; k++) {
        const float *s = src + (size_t)mirror_fast(k, h) * (size_t)w;
        for (int x = 0; x < w; x++) sum[x] += s[x];
    }
    for (int y = 0; y < h; y++) {
        float *d = dst + (size_t)y * (size_t)w;
        const float *add = src + (size_t)mirror_fast(y + r + 1, h) * (size_t)w;
        const float *sub = src + (size_t)mirror_fast(y - r, h) * (size_t)w;
        int x = 0;
        for (; x + 4 <= w; x += 4) {
            ts_v4d u;
            ts_v4f a4, s4;
            memcpy(&u, sum + x, sizeof u), memcpy(&a4, add + x, sizeof a4), memcpy(&s4, sub + x, sizeof s4);
            ts_v4f f = __builtin_convertvector(u, ts_v4f) * ts_v4f_splat(norm);
            memcpy(d + x, &f, sizeof f);
            u += __builtin_convertvector(a4, ts_v4d) - __builtin_convertvector(s4, ts_v4d);
            memcpy(sum + x, &u, sizeof u);
        }
        for (; x < w; x++) {
            d[x] = (float)sum[x] * norm;
            sum[x] += (double)add[x] - (double)sub[x];
        }
    }
}

static void box_cols_sse2(const float *src, float *dst, int h, int w, int r, double *sum) {
    box_cols_body(src, dst, h, w, r, sum);
}

#ifdef TS_ISA_X86
TS_TARGET_AVX2 static void box_cols_avx2(const float *src, float *dst, int h, int w, int r, double *sum) {
    box_cols_body(src, dst, h, w, r, sum);
}
#endif

static void box_cols(const float *src, float *dst, int h, int w, int r, double *sum, bool wide) {
#ifdef TS_ISA_X86
    if (wide) {
        box_cols_avx2(src, dst, h, w, r, sum);
        return;
    }
#else
    (void)wide;
#endif
    box_cols_sse2(src, dst, h, w, r, sum);
}

bool ts_subtract_background_isa(const char *isa, float *img, int h, int w, int size, float *tmp, double *sum) {
    const int pick = ts_isa_pick(isa);
    if (pick < 0) return false;
    const bool wide = pick == 1;
    int r = size / 2;
    if (r < 1) return true;
    float *t1 = tmp, *t2 = tmp + (size_t)h * (size_t)w;
    /* A box blur applied twice (a triangle kernel): shift invariant, so both
     * strips of a pair lose the same background. */
    /* (sum: TS_BACKGROUND_SCRATCH(w) doubles, the rows' transposed block
     * or the columns' running sums) */
    float *t = (float *)(void *)sum;
    box_rows(img, t1, h, w, r, t, wide);
    box_cols(t1, t2, h, w, r, sum, wide);
    box_rows(t2, t1, h, w, r, t, wide);
    box_cols(t1, t2, h, w, r, sum, wide);
    for (size_t i = 0; i < (size_t)h * (size_t)w; i++) img[i] -= t2[i];
    return true;
}

void ts_subtract_background(float *img, int h, int w, int size, float *tmp, double *sum) {
    (void)ts_subtract_background_isa(NULL, img, h, w, size, tmp, sum); /* NULL: always a variant */
}

/* CLAHE (Zuiderveld): the image is split into contextual regions; each gets
 * a clipped, redistributed histogram whose CDF is its grey-level mapping;
 * every pixel interpolates bilinearly between the mappings of the four
 * nearest region centres. */
#define CLAHE_BINS 256

ts_status ts_clahe(float *img, int h, int w, int tiles, double clip, ts_error *err) {
    if (tiles < 1) tiles = 1;
    size_t n = (size_t)h * (size_t)w;
    float lo = img[0], hi = img[0];
    for (size_t i = 1; i < n; i++) {
        if (img[i] < lo) lo = img[i];
        if (img[i] > hi) hi = img[i];
    }
    if (!(hi > lo)) {
        for (size_t i = 0; i < n; i++) img[i] = 0;
        return TS_OK;
    }
    /* Regions are roughly square: `tiles` along the longer side. */
    int longer = h > w ? h : w;
    int rsize = (longer + tiles - 1) / tiles;
    if (rsize < 8) rsize = 8;
    int ny = (h + rsize - 1) / rsize, nx = (w + rsize - 1) / rsize;
    int ry = (h + ny - 1) / ny, rx = (w + nx - 1) / nx; /* region size */
    float *maps = malloc((size_t)ny * (size_t)nx * CLAHE_BINS * sizeof *maps);
    if (!maps) return ts_fail(err, TS_ERR_NOMEM, "CLAHE: out of memory for %dx%d regions", ny, nx);
    float scale = (float)(CLAHE_BINS - 1) / (hi - lo);
    for (int ty = 0; ty < ny; ty++) {
        for (int tx = 0; tx < nx; tx++) {
            int y0 = ty * ry, y1 = y0 + ry < h ? y0 + ry : h;
            int x0 = tx * rx, x1 = x0 + rx < w ? x0 + rx : w;
            double hist[CLAHE_BINS] = {0};
            for (int y = y0; y < y1; y++)
                for (int x = x0; x < x1; x++) {
                    int b = (int)((img[(size_t)y * (size_t)w + (size_t)x] - lo) * scale);
                    hist[b < 0 ? 0 : b >= CLAHE_BINS ? CLAHE_BINS - 1 : b] += 1;
                }
            double npix = (double)(y1 - y0) * (double)(x1 - x0);
            double limit = clip * npix;
            if (limit < npix / CLAHE_BINS) limit = npix / CLAHE_BINS;
            double excess = 0;
            for (int b = 0; b < CLAHE_BINS; b++)
                if (hist[b] > limit) excess += hist[b] - limit, hist[b] = limit;
            double add = excess / CLAHE_BINS, cdf = 0;
            float *map = maps + ((size_t)ty * (size_t)nx + (size_t)tx) * CLAHE_BINS;
            for (int b = 0; b < CLAHE_BINS; b++) {
                cdf += hist[b] + add;
                map[b] = (float)(cdf / npix);
            }
        }
    }
    for (int y = 0; y < h; y++) {
        /* Position relative to region centres. */
        double fy = ((double)y + 0.5) / ry - 0.5;
        int t0 = (int)floor(fy);
        double wy = fy - t0;
        int ta = t0 < 0 ? 0 : t0 >= ny ? ny - 1 : t0;
        int tb = t0 + 1 < 0 ? 0 : t0 + 1 >= ny ? ny - 1 : t0 + 1;
        for (int x = 0; x < w; x++) {
            double fx = ((double)x + 0.5) / rx - 0.5;
            int s0 = (int)floor(fx);
            double wx = fx - s0;
            int sa = s0 < 0 ? 0 : s0 >= nx ? nx - 1 : s0;
            int sb = s0 + 1 < 0 ? 0 : s0 + 1 >= nx ? nx - 1 : s0 + 1;
            float *p = img + (size_t)y * (size_t)w + (size_t)x;
            int b = (int)((*p - lo) * scale);
            b = b < 0 ? 0 : b >= CLAHE_BINS ? CLAHE_BINS - 1 : b;
            double m00 = maps[((size_t)ta * (size_t)nx + (size_t)sa) * CLAHE_BINS + (size_t)b];
            double m01 = maps[((size_t)ta * (size_t)nx + (size_t)sb) * CLAHE_BINS + (size_t)b];
            double m10 = maps[((size_t)tb * (size_t)nx + (size_t)sa) * CLAHE_BINS + (size_t)b];
            double m11 = maps[((size_t)tb * (size_t)nx + (size_t)sb) * CLAHE_BINS + (size_t)b];
            *p = (float)((1 - wy) * ((1 - wx) * m00 + wx * m01) + wy * ((1 - wx) * m10 + wx * m11));
        }
    }
    free(maps);
    return TS_OK;
}
