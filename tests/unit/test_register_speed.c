/* The registration's fast paths against their plain definitions: the
 * lane-wise overlap NCC against a double-precision NCC, the correlation
 * surface's highest local maxima (found eight values at a time) against
 * a plain scan, and the per-pair
 * memo of scored shifts (same results with and without it, and fewer NCCs
 * computed with it). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "xorshift.h"
#include "register/register.h"

static uint64_t rng = 88172645463325252ull;
static double urand(void) { return xorshift_u01(&rng); }

/* The definition: means, variances and covariance of the overlap in double,
 * two passes. */
static double ncc_reference(const float *a, const float *b, int h, int w, int sy, int sx) {
    int y0 = sy < 0 ? -sy : 0, y1 = sy > 0 ? h - sy : h;
    int x0 = sx < 0 ? -sx : 0, x1 = sx > 0 ? w - sx : w;
    double n = (double)(y1 - y0) * (double)(x1 - x0), ma = 0, mb = 0;
    for (int y = y0; y < y1; y++)
        for (int x = x0; x < x1; x++) {
            ma += a[(size_t)(y + sy) * (size_t)w + (size_t)(x + sx)];
            mb += b[(size_t)y * (size_t)w + (size_t)x];
        }
    ma /= n, mb /= n;
    double va = 0, vb = 0, cov = 0;
    for (int y = y0; y < y1; y++)
        for (int x = x0; x < x1; x++) {
            double da = a[(size_t)(y + sy) * (size_t)w + (size_t)(x + sx)] - ma;
            double db = b[(size_t)y * (size_t)w + (size_t)x] - mb;
            va += da * da, vb += db * db, cov += da * db;
        }
    return cov / sqrt(va * vb);
}

/* Odd sizes (tails of every length after the 8-wide lanes, flushes after
 * one and after many rows), shifts of both signs; b is a noisy shifted copy
 * of a, so the NCC ranges from ~0 (wrong shifts) to ~0.9 (the right one). */
static void test_ncc_matches_double(void **state) {
    (void)state;
    static const int sizes[][2] = {{37, 53}, {129, 7}, {301, 263}, {64, 1031}, {2049, 41}, {5, 5}};
    double worst = 0;
    int checked = 0;
    for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
        int h = sizes[k][0], w = sizes[k][1];
        size_t n = (size_t)h * (size_t)w;
        float *a = malloc(n * sizeof *a), *b = malloc(n * sizeof *b);
        for (size_t i = 0; i < n; i++) a[i] = (float)(200.0 * (urand() - 0.5));
        const int ty = h / 7, tx = -(w / 5); /* b[y][x] ~ a[y + ty][x + tx] */
        for (int y = 0; y < h; y++)
            for (int x = 0; x < w; x++) {
                int ya = y + ty, xa = x + tx;
                float v = ya >= 0 && ya < h && xa >= 0 && xa < w ? a[(size_t)ya * (size_t)w + (size_t)xa] : 0;
                b[(size_t)y * (size_t)w + (size_t)x] = v + (float)(60.0 * (urand() - 0.5)) + 3.0f;
            }
        const int shifts[][2] = {{0, 0}, {ty, tx}, {-ty, -tx}, {1, -1}, {h / 3, w / 4}, {-(h / 2), w / 2},
                                 {h - 2, 0}, {0, -(w - 2)}};
        for (size_t s = 0; s < sizeof shifts / sizeof shifts[0]; s++) {
            int sy = shifts[s][0], sx = shifts[s][1];
            if (abs(sy) >= h - 1 || abs(sx) >= w - 1) continue;
            double got = ts_overlap_ncc(a, b, h, w, sy, sx), want = ncc_reference(a, b, h, w, sy, sx);
            double d = fabs(got - want);
            if (d > worst) worst = d;
            if (d > 3e-7) print_message("%dx%d shift (%d, %d): %.2e\n", h, w, sy, sx, d);
            if (d > 1e-6)
                print_error("%dx%d shift (%d, %d): lanes %.9f, double %.9f\n", h, w, sy, sx, got, want);
            assert_true(d <= 1e-6);
            /* the same bits every time (no state, no thread dependence) */
            double again = ts_overlap_ncc(a, b, h, w, sy, sx);
            assert_memory_equal(&got, &again, sizeof got);
            checked++;
        }
        /* the true shift scores high */
        assert_true(ts_overlap_ncc(a, b, h, w, ty, tx) > 0.8);
        free(a), free(b);
    }
    print_message("%d shifts: worst |lanes - double| = %.2e\n", checked, worst);
    /* empty and constant overlaps */
    float c[16];
    for (int i = 0; i < 16; i++) c[i] = 5;
    assert_true(ts_overlap_ncc(c, c, 4, 4, 0, 0) == 0);
    assert_true(ts_overlap_ncc(c, c, 4, 4, 4, 0) == 0);
}

/* The NCC as compiled for SSE2 and for AVX2 (what ts_overlap_ncc takes
 * where the CPU has it): the same bits on odd sizes and shifts of both
 * signs, tails of every length, flushes after one row and after many. */
static void test_ncc_isas_same_bits(void **state) {
    (void)state;
    double probe;
    float one[16] = {0};
    if (!ts_overlap_ncc_isa("avx2", one, one, 4, 4, 0, 0, &probe)) {
        print_message("no AVX2 here: nothing to compare\n");
        skip();
    }
    static const int sizes[][2] = {{37, 53}, {129, 7}, {301, 263}, {64, 1031}, {2049, 41}, {9, 16}};
    int compared = 0;
    for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
        const int h = sizes[k][0], w = sizes[k][1];
        const size_t n = (size_t)h * (size_t)w;
        float *a = malloc(n * sizeof *a), *b = malloc(n * sizeof *b);
        for (size_t i = 0; i < n; i++) {
            a[i] = (float)(1000.0 * urand() - 300.0);
            b[i] = 0.5f * a[(i * 7919) % n] + (float)(40.0 * urand());
        }
        for (int sy = -(h - 2); sy <= h - 2; sy += h / 5 + 1)
            for (int sx = -(w - 2); sx <= w - 2; sx += w / 6 + 1) {
                double narrow, wide;
                assert_true(ts_overlap_ncc_isa("sse2", a, b, h, w, sy, sx, &narrow));
                assert_true(ts_overlap_ncc_isa("avx2", a, b, h, w, sy, sx, &wide));
                assert_memory_equal(&narrow, &wide, sizeof narrow);
                const double chosen = ts_overlap_ncc(a, b, h, w, sy, sx);
                assert_memory_equal(&chosen, &wide, sizeof chosen);
                compared++;
            }
        free(a), free(b);
    }
    assert_false(ts_overlap_ncc_isa("avx9", one, one, 4, 4, 0, 0, &probe));
    print_message("%d shifts: SSE2 and AVX2 the same bits\n", compared);
}

/* The Gaussian blur and the background subtraction as compiled for SSE2
 * and for AVX2 (which ts_gaussian_blur and ts_subtract_background take
 * where the CPU has it): the same bits on odd sizes (tails of every length
 * after the 8- and 4-wide steps, rows shorter than the kernel). */
static void test_prefilter_isas_same_bits(void **state) {
    (void)state;
    float one[64] = {0}, scratch[128];
    double rs[8];
    (void)rs;
    if (!ts_gaussian_blur_isa("avx2", one, 8, 8, 1.0, scratch)) {
        print_message("no AVX2 here: nothing to compare\n");
        skip();
    }
    static const int sizes[][2] = {{37, 53}, {129, 7}, {301, 263}, {64, 1031}, {2049, 41}, {9, 16}, {5, 3}};
    static const double sigmas[] = {0.5, 1.0, 2.5};
    static const int boxes[] = {32, 8, 3};
    int compared = 0;
    for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
        const int h = sizes[k][0], w = sizes[k][1];
        const size_t n = (size_t)h * (size_t)w;
        float *src = malloc(n * sizeof *src), *a = malloc(n * sizeof *a), *b = malloc(n * sizeof *b);
        float *tmp = malloc(2 * n * sizeof *tmp);
        double *sum = malloc(TS_BACKGROUND_SCRATCH(w) * sizeof *sum);
        for (size_t i = 0; i < n; i++) src[i] = (float)(1000.0 * urand() + 0.01 * (double)i);
        for (int f = 0; f < 6; f++) {
            const bool background = f >= 3;
            const double param = background ? boxes[f - 3] : sigmas[f];
            memcpy(a, src, n * sizeof *a), memcpy(b, src, n * sizeof *b);
            if (background) {
                assert_true(ts_subtract_background_isa("sse2", a, h, w, (int)param, tmp, sum));
                assert_true(ts_subtract_background_isa("avx2", b, h, w, (int)param, tmp, sum));
            } else {
                assert_true(ts_gaussian_blur_isa("sse2", a, h, w, param, tmp));
                assert_true(ts_gaussian_blur_isa("avx2", b, h, w, param, tmp));
            }
            assert_memory_equal(a, b, n * sizeof *a);
            memcpy(b, src, n * sizeof *b);
            if (background) ts_subtract_background(b, h, w, (int)param, tmp, sum);
            else ts_gaussian_blur(b, h, w, param, tmp);
            assert_memory_equal(a, b, n * sizeof *a);
            compared++;
        }
        free(src), free(a), free(b), free(tmp), free(sum);
    }
    assert_false(ts_gaussian_blur_isa("avx9", one, 8, 8, 1.0, scratch));
    assert_false(ts_subtract_background_isa("avx512", one, 8, 8, 4, scratch, rs)); /* none built here */
    print_message("%d filterings: SSE2 and AVX2 the same bits\n", compared);
}

/* A periodic-ish textured pair (many candidates and rivals, so climbs
 * revisit shifts): the memo changes nothing but the number of NCCs
 * computed. */
static void register_with(bool memo, int h, int w, double ty, double tx, ts_register_result *res,
                          long long *requested, long long *scored) {
    int H = h + 64, W = w + 64;
    float *scene = malloc((size_t)H * (size_t)W * sizeof *scene);
    uint64_t keep = rng;
    rng = 1234567;
    for (int y = 0; y < H; y++)
        for (int x = 0; x < W; x++)
            scene[(size_t)y * (size_t)W + (size_t)x] =
                (float)(100 + 40 * sin(0.35 * y) * cos(0.29 * x) + 25 * urand() + 0.05 * (x + y));
    rng = keep;
    float *a = malloc((size_t)h * (size_t)w * sizeof *a), *b = malloc((size_t)h * (size_t)w * sizeof *b);
    int oy = (int)ty, ox = (int)tx;
    for (int y = 0; y < h; y++)
        for (int x = 0; x < w; x++) {
            a[(size_t)y * (size_t)w + (size_t)x] = scene[(size_t)(y + 32) * (size_t)W + (size_t)(x + 32)];
            b[(size_t)y * (size_t)w + (size_t)x] = scene[(size_t)(y + 32 - oy) * (size_t)W + (size_t)(x + 32 - ox)];
        }
    ts_register_options opt;
    ts_register_options_init(&opt);
    ts_registrar *r;
    ts_error err;
    assert_int_equal(ts_registrar_create(h, w, &opt, &r, &err), TS_OK);
    ts_registrar_set_memo(r, memo);
    /* twice: the memo of the first pair must not leak into the second */
    for (int i = 0; i < 2; i++) assert_int_equal(ts_register_strips(r, ts_f32(a), (size_t)w, ts_f32(b), (size_t)w, 0, 0, res, &err), TS_OK);
    ts_registrar_ncc_counts(r, requested, scored);
    ts_registrar_free(r);
    free(scene), free(a), free(b);
}

/* The definition: every value whose eight periodic neighbours are below
 * it (those before it in scan order) or at most it (those after), in scan
 * order, then sorted by value, highest first, ties keeping scan order. */
static int local_maxima_reference(const float *s, int h, int w, int k, int *ys, int *xs, float *vs) {
    int n = 0, cap = h * w;
    int *my = malloc(sizeof(int) * (size_t)cap), *mx = malloc(sizeof(int) * (size_t)cap);
    float *mv = malloc(sizeof(float) * (size_t)cap);
    assert_non_null(my), assert_non_null(mx), assert_non_null(mv);
    for (int y = 0; y < h; y++)
        for (int x = 0; x < w; x++) {
            const float v = s[y * w + x];
            bool max = !isnan(v);
            for (int dy = -1; dy <= 1 && max; dy++)
                for (int dx = -1; dx <= 1 && max; dx++) {
                    if (!dy && !dx) continue;
                    const float u = s[((y + dy + h) % h) * w + (x + dx + w) % w];
                    const bool before = dy < 0 || (dy == 0 && dx < 0);
                    max = before ? u < v : u <= v;
                }
            if (max) my[n] = y, mx[n] = x, mv[n] = v, n++;
        }
    for (int i = 1; i < n; i++) /* insertion sort: stable */
        for (int j = i; j > 0 && mv[j - 1] < mv[j]; j--) {
            int ty = my[j], tx = mx[j];
            float tv = mv[j];
            my[j] = my[j - 1], mx[j] = mx[j - 1], mv[j] = mv[j - 1];
            my[j - 1] = ty, mx[j - 1] = tx, mv[j - 1] = tv;
        }
    if (n > k) n = k;
    for (int i = 0; i < n; i++) ys[i] = my[i], xs[i] = mx[i], vs[i] = mv[i];
    free(my), free(mx), free(mv);
    return n;
}

/* Smooth surfaces (box-blurred noise, as the spectrum's Gaussian weight
 * makes them), their values rounded so that neighbours tie, with NaNs and
 * infinities here and there, at the strips' shapes and at the small sizes
 * where every value is at an edge. */
static void test_local_maxima_top(void **state) {
    (void)state;
    const int shapes[][2] = {{1, 1}, {1, 7}, {2, 2}, {3, 3}, {3, 11}, {5, 17}, {9, 9}, {17, 33},
                             {40, 256}, {256, 40}, {80, 512}, {23, 10}};
    const int ks[] = {1, 5, 12, 13, 33};
    int checked = 0, ties = 0;
    for (size_t si = 0; si < sizeof shapes / sizeof *shapes; si++) {
        const int h = shapes[si][0], w = shapes[si][1];
        float *noise = malloc(sizeof(float) * (size_t)(h * w)), *s = malloc(sizeof(float) * (size_t)(h * w));
        assert_non_null(noise), assert_non_null(s);
        for (int round = 0; round < 6; round++) {
            for (int i = 0; i < h * w; i++) noise[i] = (float)urand();
            const int radius = round % 3; /* 0: noise itself */
            const float step = round < 3 ? 0.0f : 0.05f;
            for (int y = 0; y < h; y++)
                for (int x = 0; x < w; x++) {
                    float sum = 0;
                    for (int dy = -radius; dy <= radius; dy++)
                        for (int dx = -radius; dx <= radius; dx++)
                            sum += noise[((y + dy + h) % h) * w + (x + dx + w) % w];
                    s[y * w + x] = step > 0 ? step * roundf(sum / step) : sum;
                }
            if (round == 5) {
                s[(h * w) / 2] = NAN;
                s[(h * w) / 3] = INFINITY;
                s[(h * w) / 5] = -INFINITY;
            }
            for (int i = 0; i + 1 < h * w; i++) ties += s[i] == s[i + 1];
            for (size_t ki = 0; ki < sizeof ks / sizeof *ks; ki++) {
                int ry[33], rx[33], gy[33], gx[33];
                float rv[33], gv[33];
                const int want = local_maxima_reference(s, h, w, ks[ki], ry, rx, rv);
                const int got = ts_local_maxima_top(s, h, w, ks[ki], gy, gx, gv);
                if (got != want) print_message("%dx%d round %d k %d: %d maxima, the definition %d\n", h, w, round, ks[ki], got, want);
                assert_int_equal(got, want);
                for (int i = 0; i < got; i++) {
                    assert_int_equal(gy[i], ry[i]);
                    assert_int_equal(gx[i], rx[i]);
                    assert_memory_equal(&gv[i], &rv[i], sizeof(float));
                }
                checked += got;
            }
        }
        free(noise), free(s);
    }
    print_message("%d maxima compared, %d neighbouring values tied\n", checked, ties);
    assert_true(checked > 1000); /* maxima were found and compared */
    assert_true(ties > 100);     /* and the rounding made ties to break */
}

static void test_memo_same_results(void **state) {
    (void)state;
    static const int shapes[][2] = {{64, 200}, {256, 40}, {120, 120}};
    for (size_t k = 0; k < 3; k++) {
        ts_register_result on, off;
        long long req_on, sc_on, req_off, sc_off;
        register_with(true, shapes[k][0], shapes[k][1], 3, -5, &on, &req_on, &sc_on);
        register_with(false, shapes[k][0], shapes[k][1], 3, -5, &off, &req_off, &sc_off);
        print_message("%dx%d: shift (%.3f, %.3f) ncc %.3f conf %.3f; NCCs asked %lld, computed %lld with the "
                      "memo, %lld without\n", shapes[k][0], shapes[k][1], on.dy, on.dx, on.ncc, on.confidence,
                      req_on, sc_on, sc_off);
        assert_memory_equal(&on.dy, &off.dy, sizeof on.dy);
        assert_memory_equal(&on.dx, &off.dx, sizeof on.dx);
        assert_memory_equal(&on.ncc, &off.ncc, sizeof on.ncc);
        assert_memory_equal(&on.confidence, &off.confidence, sizeof on.confidence);
        assert_memory_equal(&on.ncc_second, &off.ncc_second, sizeof on.ncc_second);
        assert_int_equal(on.matched, off.matched);
        assert_int_equal(req_on, req_off);
        assert_int_equal(sc_off, req_off); /* without the memo every request is computed */
        assert_true(sc_on < sc_off);       /* the climbs ask again for shifts already scored */
        assert_true(fabs(on.dy + 3) < 0.5 && fabs(on.dx - 5) < 0.5); /* b = a moved by (3, -5) */
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_ncc_matches_double),
        cmocka_unit_test(test_ncc_isas_same_bits),
        cmocka_unit_test(test_prefilter_isas_same_bits),
        cmocka_unit_test(test_local_maxima_top),
        cmocka_unit_test(test_memo_same_results),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
