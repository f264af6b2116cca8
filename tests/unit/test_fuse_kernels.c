/* Fusion kernels: the weights formula, zero pixels, rounding/clamping,
 * uncovered pixels, 2x mean downsampling. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdlib.h>

#include "fuse/kernels.h"

static const ts_fuse_kernels *K;

static void check_weights(int64_t h, int64_t w, double e) {
    float *out = malloc((size_t)(h * w) * sizeof *out);
    K->weights(out, h, w, TS_BLEND_EDT, e);
    for (int64_t y = 0; y < h; y++)
        for (int64_t x = 0; x < w; x++) {
            int64_t d = y;
            if (x < d) d = x;
            if (h - 1 - y < d) d = h - 1 - y;
            if (w - 1 - x < d) d = w - 1 - x;
            double want = pow((double)d + 1e-6, e);
            assert_true(fabs(out[y * w + x] - want) <= 1e-6 * want + 1e-30);
        }
    K->weights(out, h, w, TS_BLEND_AVERAGE, e);
    for (int64_t i = 0; i < h * w; i++) assert_true(out[i] == 1.0f);
    free(out);
}

static void test_weights_formula(void **state) {
    (void)state;
    check_weights(1, 1, 1.0);
    check_weights(2, 5, 1.0);
    check_weights(7, 7, 2.0);
    check_weights(48, 64, 1.0);
    check_weights(33, 20, 0.5);
    /* The outer ring keeps a tiny positive weight (it counts where nothing
     * else covers), the centre of a 7x7 tile is 3 away from the ring. */
    float w[49];
    K->weights(w, 7, 7, TS_BLEND_EDT, 1.0);
    assert_true(w[0] > 0 && w[0] < 1e-5f);
    assert_true(fabsf(w[3 * 7 + 3] - 3.0f) < 1e-5f);
}

static void test_zero_pixels_carry_no_weight(void **state) {
    (void)state;
    enum { N = 13 }; /* not a multiple of the vector width */
    float num[N] = {0}, den[N] = {0}, v[N], w[N];
    for (int i = 0; i < N; i++) {
        v[i] = (i % 3 == 0) ? 0.0f : (float)(10 * i);
        w[i] = (float)(i + 1);
    }
    K->accumulate(num, den, v, w, N);
    K->accumulate(num, den, v, w, N); /* twice: sums */
    for (int i = 0; i < N; i++) {
        if (i % 3 == 0) {
            assert_true(num[i] == 0.0f && den[i] == 0.0f);
        } else {
            assert_true(num[i] == 2.0f * w[i] * v[i]);
            assert_true(den[i] == 2.0f * w[i]);
        }
    }
}

/* A NaN quotient (e.g. +inf and -inf pixels blended) clamps to 0: converting
 * NaN to an integer is undefined behaviour. */
static void test_normalise_nan_gives_zero(void **state) {
    (void)state;
    float qn[3] = {NAN, 5.0f, -NAN}, qd[3] = {1.0f, 1.0f, 2.0f};
    uint16_t o2[3];
    K->normalise_u16(o2, qn, qd, 3);
    assert_int_equal(o2[0], 0);
    assert_int_equal(o2[1], 5);
    assert_int_equal(o2[2], 0);
}

static void test_normalise_rounds_clamps_and_leaves_uncovered_zero(void **state) {
    (void)state;
    float num[9] = {5.0f, 4.98f, -10.0f, 1e9f, 0.0f, 7.0f, 3.0f, 65535.4f, 2e-6f};
    float den[9] = {2.0f, 2.0f, 1.0f, 1.0f, 0.0f, 1.0f, 2.0f, 1.0f, 1e-6f};
    uint16_t out[9];
    K->normalise_u16(out, num, den, 9);
    assert_int_equal(out[0], 3);     /* 2.5 rounds to nearest (half up) */
    assert_int_equal(out[1], 2);     /* 2.49 */
    assert_int_equal(out[2], 0);     /* negative clamps to 0 */
    assert_int_equal(out[3], 65535); /* clamps to the type */
    assert_int_equal(out[4], 0);     /* uncovered */
    assert_int_equal(out[5], 7);
    assert_int_equal(out[6], 2);     /* 1.5 -> 2 */
    assert_int_equal(out[7], 65535);
    assert_int_equal(out[8], 2);     /* tiny weights still normalise */
    float f[9];
    K->normalise_f32(f, num, den, 9);
    assert_true(f[0] == 2.5f && f[4] == 0.0f && f[2] == -10.0f);
    assert_true(fabsf(f[8] - 2.0f) < 1e-5f);
}

static void test_downsample_odd_edges(void **state) {
    (void)state;
    /* 3 x 5 region in a buffer of stride 6 -> 2 x 3 */
    uint16_t src[3 * 6] = {1, 2, 3, 4, 5, 99,
                           3, 4, 5, 6, 7, 99,
                           10, 20, 30, 40, 50, 99};
    uint16_t dst[2 * 4] = {0};
    K->downsample_u16(dst, 4, src, 6, 3, 5);
    assert_int_equal(dst[0], 3);  /* (1+2+3+4+2)/4 = 2.5 -> 3 */
    assert_int_equal(dst[1], 5);  /* (3+4+5+6)/4 = 4.5 -> 5 */
    assert_int_equal(dst[2], 6);  /* (5+7)/2 = 6 */
    assert_int_equal(dst[4], 15); /* (10+20)/2 */
    assert_int_equal(dst[5], 35);
    assert_int_equal(dst[6], 50); /* the corner has one source pixel */
    assert_int_equal(dst[3], 0);  /* untouched beyond the output width */
    float fs[3 * 6], fd[2 * 4] = {0};
    for (int i = 0; i < 18; i++) fs[i] = (float)src[i];
    K->downsample_f32(fd, 4, fs, 6, 3, 5);
    assert_true(fd[0] == 2.5f && fd[2] == 6.0f && fd[6] == 50.0f && fd[4] == 15.0f);
}

/* Labels: the tile of the largest weight takes the pixel, its 0 included;
 * equal weights keep the tile blended first; labels above 2^24 (not exact
 * in float32) and all 32 bits pass through. */
static void test_label_largest_weight_wins(void **state) {
    (void)state;
    enum { N = 7 };
    float best[N] = {0};
    uint32_t lab[N] = {0};
    const uint16_t a[N] = {5, 5, 0, 5, 5, 5, 5};
    const float wa[N] = {1, 3, 3, 2, 1e-6f, 2, 0.5f};
    K->label_u16(best, lab, a, wa, N);
    const uint32_t b[N] = {16777217u, 7, 7, 0, 4294967295u, 7, 7};
    const float wb[N] = {2, 1, 1, 3, 1e-6f, 2, 0.25f};
    K->label_u32(best, lab, b, wb, N);
    assert_int_equal(lab[0], 16777217u); /* b's weight larger; exact beyond float32's integers */
    assert_int_equal(lab[1], 5);         /* a's weight larger */
    assert_int_equal(lab[2], 0);         /* a covers with 0 and weighs more: background */
    assert_int_equal(lab[3], 0);         /* b's 0 weighs more: background over a's 5 */
    assert_int_equal(lab[4], 5);         /* tie (ring weights): the first tile keeps it */
    assert_int_equal(lab[5], 5);         /* tie */
    assert_int_equal(lab[6], 5);
    assert_true(best[0] == 2.0f && best[3] == 3.0f && best[4] == 1e-6f);
    /* A pixel no tile covers stays 0 with weight 0. */
    float b2[2] = {0};
    uint32_t l2[2] = {0};
    const uint32_t v2[2] = {9, 9};
    const float w2[2] = {0, 0};
    K->label_u32(b2, l2, v2, w2, 2);
    assert_int_equal(l2[0], 0);
}

static void test_label_downsample_mode(void **state) {
    (void)state;
    /* 3 x 5 of uint32 in stride 6 -> 2 x 3: mode of each 2x2, zero counts,
     * ties to the first in raster order, odd edges over what exists. */
    const uint32_t src[3 * 6] = {7, 9, 4, 4, 3, 99,
                                 9, 9, 5, 6, 0, 99,
                                 2, 0, 0, 8, 1, 99};
    uint32_t dst[2 * 4] = {0};
    K->downsample_label(dst, 4, src, 6, 3, 5, 4);
    assert_int_equal(dst[0], 9);  /* 7 9 / 9 9 */
    assert_int_equal(dst[1], 4);  /* 4 4 / 5 6 */
    assert_int_equal(dst[2], 3);  /* 3 / 0: a tie, the first */
    assert_int_equal(dst[4], 2);  /* 2 0: a tie */
    assert_int_equal(dst[5], 0);  /* 0 8 */
    assert_int_equal(dst[6], 1);  /* the corner's one pixel */
    assert_int_equal(dst[3], 0);  /* untouched beyond the output width */
    /* Never a value that is not in the source, for 1 and 2 byte labels too
     * (a mean of 2, 2, 4, 4 would be 3). */
    const uint16_t s16[4] = {2, 4, 4, 2};
    uint16_t d16 = 0;
    K->downsample_label(&d16, 1, s16, 2, 2, 2, 2);
    assert_int_equal(d16, 2);
    const uint8_t s8[4] = {0, 200, 200, 0};
    uint8_t d8 = 1;
    K->downsample_label(&d8, 1, s8, 2, 2, 2, 1);
    assert_int_equal(d8, 0);
}

int main(void) {
    K = ts_fuse_cpu_kernels();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_weights_formula),
        cmocka_unit_test(test_zero_pixels_carry_no_weight),
        cmocka_unit_test(test_normalise_nan_gives_zero),
        cmocka_unit_test(test_normalise_rounds_clamps_and_leaves_uncovered_zero),
        cmocka_unit_test(test_downsample_odd_edges),
        cmocka_unit_test(test_label_largest_weight_wins),
        cmocka_unit_test(test_label_downsample_mode),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
