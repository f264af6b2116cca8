/* The CUDA backend against the CPU kernels, byte for byte (docs/gpu.md):
 * the row kernels on random rows, and whole blocks (strips of both dtypes,
 * a flipped one, a tile with fewer channels, blocks cut by the canvas,
 * every pyramid level) against process_block's loop written out with the
 * CPU kernels. Needs a CUDA device: without one (or in a build without the
 * backend) it prints why and exits 77, which ctest counts as skipped. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>
#include <fftw3.h>
#include <float.h>
#include <math.h>

#include "xorshift.h"
#include "fuse/kernels.h"
#include "gpu/gpu.h"

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;
static uint32_t rnd(void) { return (uint32_t)(xorshift64(&rng_state) >> 16); }
/* Values with zeros (padding), small and large ones. */
static uint16_t rnd_u16(void) {
    uint32_t r = rnd() % 8;
    return r == 0 ? 0 : r == 1 ? 65535 : (uint16_t)rnd();
}
static float rnd_f32(void) {
    uint32_t r = rnd() % 8;
    if (r == 0) return 0.0f;
    if (r == 1) return -(float)(rnd() % 1000) / 7.0f;
    return (float)rnd() / 977.0f;
}

static const char *const ISAS[] = {"sse2", "avx2", "avx512"};

static void test_rows(void **state) {
    (void)state;
    ts_error err;
    for (int trial = 0; trial < 20; trial++) {
        int64_t n = 1 + rnd() % 3000;
        float *num = malloc((size_t)n * 4), *den = malloc((size_t)n * 4), *w = malloc((size_t)n * 4);
        float *gnum = malloc((size_t)n * 4), *gden = malloc((size_t)n * 4), *vf = malloc((size_t)n * 4);
        uint16_t *vu = malloc((size_t)n * 2);
        for (int64_t i = 0; i < n; i++) {
            num[i] = rnd_f32() * 100.0f, den[i] = (float)(rnd() % 100) / 3.0f;
            w[i] = (float)rnd() / 4294967296.0f * 50.0f;
            vf[i] = rnd_f32(), vu[i] = rnd_u16();
        }
        for (int u16 = 0; u16 < 2; u16++) {
            memcpy(gnum, num, (size_t)n * 4);
            memcpy(gden, den, (size_t)n * 4);
            assert_int_equal(ts_gpu_test_accumulate(gnum, gden, u16 ? (const void *)vu : vf, u16, w, n, &err), TS_OK);
            for (int k = 0; k < 3; k++) {
                const ts_fuse_kernels *K = ts_fuse_cpu_kernels_isa(ISAS[k]);
                if (!K) continue;
                float *cnum = malloc((size_t)n * 4), *cden = malloc((size_t)n * 4);
                memcpy(cnum, num, (size_t)n * 4);
                memcpy(cden, den, (size_t)n * 4);
                if (u16) K->accumulate_u16(cnum, cden, vu, w, n);
                else K->accumulate(cnum, cden, vf, w, n);
                assert_memory_equal(cnum, gnum, (size_t)n * 4);
                assert_memory_equal(cden, gden, (size_t)n * 4);
                free(cnum);
                free(cden);
            }
        }
        /* Normalisation: den 0, NaN, quotients beyond uint16. */
        for (int64_t i = 0; i < n; i++) {
            uint32_t r = rnd() % 10;
            if (r == 0) num[i] = 0, den[i] = 0;
            else if (r == 1) num[i] = 0.0f / 0.0f;
            else if (r == 2) num[i] = 1e9f, den[i] = 1.0f;
            else if (r == 3) num[i] = -5.0f;
        }
        for (int f32 = 0; f32 < 2; f32++) {
            size_t ob = (size_t)n * (f32 ? 4 : 2);
            void *g = malloc(ob), *c = malloc(ob);
            assert_int_equal(ts_gpu_test_normalise(g, f32, num, den, n, &err), TS_OK);
            for (int k = 0; k < 3; k++) {
                const ts_fuse_kernels *K = ts_fuse_cpu_kernels_isa(ISAS[k]);
                if (!K) continue;
                if (f32) K->normalise_f32(c, num, den, n);
                else K->normalise_u16(c, num, den, n);
                assert_memory_equal(c, g, ob);
            }
            free(g);
            free(c);
        }
        free(num), free(den), free(w), free(gnum), free(gden), free(vf), free(vu);
    }
}

static void test_downsample(void **state) {
    (void)state;
    ts_error err;
    const ts_fuse_kernels *K = ts_fuse_cpu_kernels();
    for (int trial = 0; trial < 30; trial++) {
        int64_t h = 1 + rnd() % 70, w = 1 + rnd() % 70, stride = w + rnd() % 5, ds = (w + 1) / 2 + rnd() % 3;
        for (int f32 = 0; f32 < 2; f32++) {
            size_t es = f32 ? 4 : 2, sb = (size_t)(h * stride) * es, db = (size_t)((h + 1) / 2 * ds) * es;
            unsigned char *src = malloc(sb), *c = calloc(1, db), *g = calloc(1, db);
            for (size_t i = 0; i < sb / es; i++) {
                if (f32) ((float *)src)[i] = rnd_f32();
                else ((uint16_t *)src)[i] = rnd_u16();
            }
            assert_int_equal(ts_gpu_test_downsample(g, ds, src, stride, h, w, f32, &err), TS_OK);
            if (f32) K->downsample_f32((float *)c, ds, (const float *)src, stride, h, w);
            else K->downsample_u16((uint16_t *)c, ds, (const uint16_t *)src, stride, h, w);
            assert_memory_equal(c, g, db);
            free(src), free(c), free(g);
        }
    }
}

/* process_block (blend.c) and fuse_write_block's downsampling (output.c)
 * for one block, written out with the CPU kernels. */
static void cpu_block(const ts_fuse_kernels *K, const ts_gpu_fuse_config *cfg, const ts_gpu_block *blk,
                      const ts_gpu_strip *s, int n, void **level) {
    const int64_t B = cfg->block, C = cfg->C;
    const size_t es = cfg->f32 ? 4 : 2;
    float *num = calloc((size_t)(B * B), 4), *den = calloc((size_t)(B * B), 4);
    for (int64_t c = 0; c < C; c++) {
        memset(num, 0, (size_t)(B * B) * 4);
        memset(den, 0, (size_t)(B * B) * 4);
        for (int k = 0; k < n; k++) {
            if (c >= s[k].nc) continue;
            int64_t ya = blk->y0 > s[k].oy + s[k].r0 ? blk->y0 : s[k].oy + s[k].r0;
            int64_t yb = blk->y1 < s[k].oy + s[k].r1 ? blk->y1 : s[k].oy + s[k].r1;
            int64_t xa = blk->x0 > s[k].ox ? blk->x0 : s[k].ox;
            int64_t xb = blk->x1 < s[k].ox + s[k].w ? blk->x1 : s[k].ox + s[k].w;
            if (ya >= yb || xa >= xb) continue;
            const float *wimg = cfg->weights[s[k].shape];
            for (int64_t y = ya; y < yb; y++) {
                int64_t ty = y - s[k].oy, off = (y - blk->y0) * B + (xa - blk->x0);
                int64_t at = s[k].origin + c * s[k].plane + (ty - s[k].r0) * s[k].row_step + (xa - s[k].ox);
                const float *wrow = wimg + ty * s[k].w + (xa - s[k].ox);
                if (s[k].u16) K->accumulate_u16(num + off, den + off, (const uint16_t *)s[k].data + at, wrow, xb - xa);
                else K->accumulate(num + off, den + off, (const float *)s[k].data + at, wrow, xb - xa);
            }
        }
        unsigned char *out = (unsigned char *)level[0] + (size_t)(c * B * B) * es;
        memset(out, 0, (size_t)(B * B) * es);
        for (int64_t y = blk->y0; y < blk->y1; y++) {
            int64_t r = y - blk->y0, vw = blk->x1 - blk->x0;
            if (cfg->f32) K->normalise_f32((float *)out + r * B, num + r * B, den + r * B, vw);
            else K->normalise_u16((uint16_t *)out + r * B, num + r * B, den + r * B, vw);
        }
    }
    for (int k = 1; k <= cfg->levels; k++) {
        int64_t Bk = B >> k, Bp = B >> (k - 1);
        memset(level[k], 0, (size_t)(C * Bk * Bk) * es);
        for (int64_t c = 0; c < C; c++) {
            if (cfg->f32)
                K->downsample_f32((float *)level[k] + c * Bk * Bk, Bk, (const float *)level[k - 1] + c * Bp * Bp, Bp,
                                  blk->hp[k], blk->wp[k]);
            else
                K->downsample_u16((uint16_t *)level[k] + c * Bk * Bk, Bk,
                                  (const uint16_t *)level[k - 1] + c * Bp * Bp, Bp, blk->hp[k], blk->wp[k]);
        }
    }
    free(num);
    free(den);
}

static int64_t halved(int64_t n, int k) {
    for (int i = 0; i < k; i++) n = (n + 1) / 2;
    return n;
}

static void test_blocks(void **state) {
    (void)state;
    ts_error err;
    const ts_fuse_kernels *K = ts_fuse_cpu_kernels();
    enum { NSHAPES = 3, NSTRIPS = 6, LEVELS = 3 };
    const int64_t shapes[NSHAPES][2] = {{40, 50}, {37, 64}, {80, 33}};
    float *weights[NSHAPES];
    for (int f32 = 0; f32 < 2; f32++)
        for (int trial = 0; trial < 6; trial++) {
            const double exponent = trial % 3 == 0 ? 1.0 : 2.5;
            for (int k = 0; k < NSHAPES; k++) {
                weights[k] = malloc((size_t)(shapes[k][0] * shapes[k][1]) * 4);
                K->weights(weights[k], shapes[k][0], shapes[k][1], trial == 5 ? TS_BLEND_AVERAGE : TS_BLEND_EDT,
                           exponent);
            }
            ts_gpu_fuse_config cfg = {.block = 64, .levels = LEVELS, .C = 2, .f32 = f32, .nworkers = 2,
                                      .nshapes = NSHAPES, .shapes = shapes, .weights = (const float *const *)weights};
            ts_gpu_fuse *g = NULL;
            assert_int_equal(ts_gpu_fuse_create(&cfg, &g, &err), TS_OK);
            /* A canvas of 150 x 114 px, blocks of 64: block (band 1, bx 1)
             * is cut on both axes. */
            const int64_t canvas_h = 150, canvas_w = 114;
            ts_gpu_strip s[NSTRIPS];
            void *data[NSTRIPS];
            for (int k = 0; k < NSTRIPS; k++) {
                int shape = k % NSHAPES;
                int64_t h = shapes[shape][0], w = shapes[shape][1];
                int64_t r0 = rnd() % (h / 2), r1 = r0 + 1 + rnd() % (h - r0);
                int nc = k == 2 ? 1 : 2;  /* a tile with one channel of two */
                bool u16 = (k + trial) % 3 != 0;
                size_t es = u16 ? 2 : 4, elems = (size_t)(nc * h * w);
                data[k] = malloc(elems * es);
                for (size_t i = 0; i < elems; i++) {
                    if (u16) ((uint16_t *)data[k])[i] = rnd_u16();
                    else ((float *)data[k])[i] = rnd_f32();
                }
                /* k == 1: rows upside down (negative row step into the
                 * plane), as a view into a flipped kept plane. */
                bool flip = k == 1;
                s[k] = (ts_gpu_strip){.key = &s[k], .data = data[k], .u16 = u16, .nc = nc,
                                      .origin = flip ? (h - 1 - r0) * w : r0 * w, .plane = h * w,
                                      .row_step = flip ? -w : w, .r0 = r0, .r1 = r1, .w = w,
                                      .oy = 40 + (int64_t)(rnd() % 60) - r0, .ox = 40 + (int64_t)(rnd() % 60),
                                      .shape = shape};
            }
            const int64_t B = cfg.block;
            for (int64_t band = 0; band < 3; band++)
                for (int64_t bx = 0; bx < 2; bx++) {
                    ts_gpu_block blk = {.y0 = band * B, .x0 = bx * B};
                    blk.y1 = blk.y0 + B < canvas_h ? blk.y0 + B : canvas_h;
                    blk.x1 = blk.x0 + B < canvas_w ? blk.x0 + B : canvas_w;
                    for (int k = 1; k <= LEVELS; k++) {
                        int64_t Bp = B >> (k - 1);
                        blk.hp[k] = halved(canvas_h, k - 1) - band * Bp;
                        blk.wp[k] = halved(canvas_w, k - 1) - bx * Bp;
                        if (blk.hp[k] > Bp) blk.hp[k] = Bp;
                        if (blk.wp[k] > Bp) blk.wp[k] = Bp;
                    }
                    void *cl[LEVELS + 1], *gl[LEVELS + 1];
                    for (int k = 0; k <= LEVELS; k++) {
                        size_t bytes = (size_t)(cfg.C * (B >> k) * (B >> k)) * (f32 ? 4 : 2);
                        cl[k] = malloc(bytes);
                        gl[k] = malloc(bytes);
                        memset(gl[k], 0xAB, bytes);  /* every byte must be written */
                    }
                    cpu_block(K, &cfg, &blk, s, NSTRIPS, cl);
                    /* Both workers (streams), the second time from the
                     * strips already uploaded. */
                    for (int worker = 0; worker < 2; worker++) {
                        assert_int_equal(ts_gpu_fuse_block(g, worker, &blk, s, NSTRIPS, gl, &err), TS_OK);
                        for (int k = 0; k <= LEVELS; k++)
                            assert_memory_equal(cl[k], gl[k], (size_t)(cfg.C * (B >> k) * (B >> k)) * (f32 ? 4 : 2));
                    }
                    for (int k = 0; k <= LEVELS; k++) free(cl[k]), free(gl[k]);
                }
            for (int k = 0; k < NSTRIPS; k++) {
                ts_gpu_fuse_forget(g, &s[k]);
                free(data[k]);
            }
            ts_gpu_fuse_destroy(g);
            for (int k = 0; k < NSHAPES; k++) free(weights[k]);
        }
}

/* The batched surfaces against FFTW computing phasecorr.c's formula:
 * the same peak, and values within a relative 1e-4 of the surface's
 * largest (cuFFT and FFTW round differently: not bytes). */
static void fftw_surface(const float *a, const float *b, const float *g, int h, int w, float *surf) {
    int wc = w / 2 + 1, nc = h * wc;
    float *real = fftwf_malloc(sizeof(float) * (size_t)(h * w));
    fftwf_complex *A = fftwf_malloc(sizeof(fftwf_complex) * (size_t)nc);
    fftwf_complex *B = fftwf_malloc(sizeof(fftwf_complex) * (size_t)nc);
    float *mag = malloc(sizeof(float) * (size_t)nc);
    fftwf_plan fa = fftwf_plan_dft_r2c_2d(h, w, real, A, FFTW_ESTIMATE);
    fftwf_plan fb = fftwf_plan_dft_r2c_2d(h, w, real, B, FFTW_ESTIMATE);
    fftwf_plan iv = fftwf_plan_dft_c2r_2d(h, w, B, real, FFTW_ESTIMATE);
    memcpy(real, a, sizeof(float) * (size_t)(h * w));
    fftwf_execute(fa);
    memcpy(real, b, sizeof(float) * (size_t)(h * w));
    fftwf_execute(fb);
    double sum = 0;
    for (int i = 0; i < nc; i++) {
        float re = A[i][0] * B[i][0] + A[i][1] * B[i][1], im = A[i][1] * B[i][0] - A[i][0] * B[i][1];
        B[i][0] = re, B[i][1] = im;
        mag[i] = (float)sqrt((double)re * re + (double)im * im);
        sum += mag[i];
    }
    float eps = (float)(1e-6 * sum / nc) + FLT_MIN;
    for (int i = 0; i < nc; i++) {
        float s = g[i] / (mag[i] + eps);
        B[i][0] *= s, B[i][1] *= s;
    }
    B[0][0] = B[0][1] = 0;
    fftwf_execute(iv);
    memcpy(surf, real, sizeof(float) * (size_t)(h * w));
    fftwf_destroy_plan(fa), fftwf_destroy_plan(fb), fftwf_destroy_plan(iv);
    fftwf_free(real), fftwf_free(A), fftwf_free(B), free(mag);
}

static void test_phasecorr(void **state) {
    (void)state;
    ts_error err;
    const int n = 7, h = 48, w = 90, wc = w / 2 + 1;
    float *a = malloc(sizeof(float) * (size_t)(n * h * w)), *b = malloc(sizeof(float) * (size_t)(n * h * w));
    float *g = malloc(sizeof(float) * (size_t)(h * wc)), *surf = malloc(sizeof(float) * (size_t)(n * h * w));
    float *ref = malloc(sizeof(float) * (size_t)(h * w));
    for (int y = 0; y < h; y++)
        for (int x = 0; x < wc; x++) g[y * wc + x] = (float)exp(-(double)(y * y + x * x) / 2000.0);
    int sy[7], sx[7];
    for (int i = 0; i < n; i++) {
        sy[i] = (int)(rnd() % h), sx[i] = (int)(rnd() % w);
        float *ai = a + i * h * w, *bi = b + i * h * w;
        for (int k = 0; k < h * w; k++) ai[k] = (float)rnd() / 4294967296.0f - 0.5f;
        /* b is a shifted circularly by (sy, sx), plus a little noise. */
        for (int y = 0; y < h; y++)
            for (int x = 0; x < w; x++)
                bi[y * w + x] = ai[((y + sy[i]) % h) * w + (x + sx[i]) % w] + ((float)rnd() / 4294967296.0f - 0.5f) * 0.05f;
    }
    assert_int_equal(ts_gpu_phasecorr_batch(a, b, n, h, w, g, surf, &err), TS_OK);
    for (int i = 0; i < n; i++) {
        fftw_surface(a + i * h * w, b + i * h * w, g, h, w, ref);
        const float *s = surf + i * h * w;
        int pg = 0, pc = 0;
        float top = 0, diff = 0;
        for (int k = 0; k < h * w; k++) {
            if (s[k] > s[pg]) pg = k;
            if (ref[k] > ref[pc]) pc = k;
            if (fabsf(ref[k]) > top) top = fabsf(ref[k]);
            if (fabsf(s[k] - ref[k]) > diff) diff = fabsf(s[k] - ref[k]);
        }
        assert_int_equal(pg, pc);
        assert_true(diff <= 1e-4f * top);
    }
    free(a), free(b), free(g), free(surf), free(ref);
}

int main(void) {
    char why[512];
    if (ts_gpu_devices(why, sizeof why) <= 0) {
        printf("skip: no CUDA device (%s)\n", why);
        return 77;
    }
    printf("# %s\n", why);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_rows),
        cmocka_unit_test(test_downsample),
        cmocka_unit_test(test_blocks),
        cmocka_unit_test(test_phasecorr),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
