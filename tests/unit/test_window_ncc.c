/* The window NCC by FFT (src/register/window_ncc.c) equals a two-pass
 * double-precision NCC (to 1e-9; the first pass's ts_overlap_ncc, in float
 * lanes, to 1e-4) at every shift of a window, on random strips of odd and even sizes with a large offset (the
 * mean is taken out before the FFT), both signs of shift, with the scratch
 * reused across shapes; -2 where the overlap is thinner than min_side; 0
 * for a constant strip. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "register/register.h"
#include "register/window_ncc.h"

static uint64_t rng = 12345;
static float next(void) {
    rng = rng * 6364136223846793005ull + 1442695040888963407ull;
    return (float)((rng >> 33) % 4096) / 16.0f;
}

/* Two-pass NCC in double over the overlap: the reference. */
static double ncc_ref(const float *a, const float *b, int h, int w, int sy, int sx) {
    int y0 = sy < 0 ? -sy : 0, y1 = sy > 0 ? h - sy : h, x0 = sx < 0 ? -sx : 0, x1 = sx > 0 ? w - sx : w;
    double ma = 0, mb = 0, n = (double)(y1 - y0) * (x1 - x0);
    for (int y = y0; y < y1; y++)
        for (int x = x0; x < x1; x++) ma += a[(y + sy) * w + x + sx], mb += b[y * w + x];
    ma /= n, mb /= n;
    double saa = 0, sbb = 0, sab = 0;
    for (int y = y0; y < y1; y++)
        for (int x = x0; x < x1; x++) {
            double da = a[(y + sy) * w + x + sx] - ma, db = b[y * w + x] - mb;
            saa += da * da, sbb += db * db, sab += da * db;
        }
    return sab / sqrt(saa * sbb);
}

static void compare(int h, int w, int cy, int cx, int ny, int nx, ts_window_scratch **ws) {
    float *a = malloc((size_t)h * w * sizeof *a), *b = malloc((size_t)h * w * sizeof *b);
    double *out = malloc((size_t)ny * nx * sizeof *out);
    assert_non_null(a), assert_non_null(b), assert_non_null(out);
    /* smooth-ish content on a big offset: b is a shifted a plus noise */
    for (int i = 0; i < h * w; i++) a[i] = 1000.0f + next() + (float)(i % w) * 0.5f;
    for (int y = 0; y < h; y++)
        for (int x = 0; x < w; x++) {
            int ys = (y + 3) % h, xs = (x + 2) % w;
            b[y * w + x] = a[ys * w + xs] + 0.25f * next();
        }
    ts_error err;
    assert_int_equal(ts_window_ncc(a, b, h, w, cy, cx, ny, nx, 4, out, ws, &err), TS_OK);
    double worst = 0, worst_lanes = 0;
    for (int i = 0; i < ny; i++)
        for (int j = 0; j < nx; j++) {
            int sy = cy + i - ny / 2, sx = cx + j - nx / 2;
            int oh = h - abs(sy), ow = w - abs(sx);
            double got = out[i * nx + j];
            if (oh < 4 || ow < 4) {
                assert_true(got == -2);
                continue;
            }
            double want = ncc_ref(a, b, h, w, sy, sx);
            double d = fabs(got - want), dl = fabs(ts_overlap_ncc(a, b, h, w, sy, sx) - want);
            if (d > worst) worst = d;
            if (dl > worst_lanes) worst_lanes = dl;
        }
    printf("%dx%d, window %dx%d at (%d, %d): worst |FFT - two-pass double| %.3g (ts_overlap_ncc's float lanes: "
           "%.3g)\n", h, w, ny, nx, cy, cx, worst, worst_lanes);
    assert_true(worst < 1e-9);
    assert_true(worst_lanes < 1e-4); /* the scores the first pass compares the window's with */
    free(a), free(b), free(out);
}

static void test_equals_shift_by_shift(void **state) {
    (void)state;
    ts_window_scratch *ws = NULL;
    compare(37, 23, 0, 0, 9, 7, &ws);
    compare(37, 23, 3, -2, 11, 11, &ws);   /* same shape: scratch reused */
    compare(64, 18, -5, 10, 21, 15, &ws);  /* new shape: scratch remade */
    compare(15, 40, 12, -37, 9, 9, &ws);   /* shifts leaving < 4 px: -2 */
    compare(31, 29, 0, 0, 5, 5, NULL);     /* no scratch */
    /* Transforms padded to the window's reach: 36 + 12 = 48 and 44 + 4 = 48
     * are sizes as they are, the widest shifts at the edge of wrapping. */
    compare(36, 44, 0, 0, 25, 9, &ws);
    compare(36, 44, -3, 2, 19, 5, &ws);    /* another size: both kept */
    compare(36, 44, 0, 0, 25, 9, &ws);
    compare(36, 44, 20, -30, 7, 7, &ws);   /* far off centre */
    ts_window_scratch_free(ws);
}

static void test_constant_strip_scores_zero(void **state) {
    (void)state;
    enum { H = 20, W = 16 };
    float a[H * W], b[H * W];
    for (int i = 0; i < H * W; i++) a[i] = 7.0f, b[i] = next();
    double out[9];
    ts_error err;
    assert_int_equal(ts_window_ncc(a, b, H, W, 0, 0, 3, 3, 4, out, NULL, &err), TS_OK);
    for (int k = 0; k < 9; k++) assert_true(out[k] == 0.0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_equals_shift_by_shift),
        cmocka_unit_test(test_constant_strip_scores_zero),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
