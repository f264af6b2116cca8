/* The two-view Butterworth low-pass (src/register/lowpass.c): its output
 * against a direct evaluation of the DCT-II and its inverse written here
 * (sums of cosines, nothing shared with FFTW), a constant kept, and the
 * cut-off it measures on textures whose detail ends at a known frequency
 * under independent noise in the two views. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>

#include "register/lowpass.h"
#include "xorshift.h"

static uint64_t rng_state = 0x2545F4914F6CDD1Dull;
static ts_lowpass_plans *plans;
static double nrand(void) { return xorshift_normal(&rng_state); }
static double urand(void) { return xorshift_u01(&rng_state); }

/* The DCT-II coefficient (ky, kx) of img, orthonormal. */
static double dct2(const double *img, int h, int w, int ky, int kx) {
    double s = 0;
    for (int y = 0; y < h; y++)
        for (int x = 0; x < w; x++)
            s += img[y * w + x] * cos(M_PI * ky * (y + 0.5) / h) * cos(M_PI * kx * (x + 0.5) / w);
    return s * sqrt((ky ? 2.0 : 1.0) / h) * sqrt((kx ? 2.0 : 1.0) / w);
}

/* The image at (y, x) from orthonormal coefficients c. */
static double idct2(const double *c, int h, int w, int y, int x) {
    double s = 0;
    for (int ky = 0; ky < h; ky++)
        for (int kx = 0; kx < w; kx++)
            s += c[ky * w + kx] * sqrt((ky ? 2.0 : 1.0) / h) * sqrt((kx ? 2.0 : 1.0) / w) *
                 cos(M_PI * ky * (y + 0.5) / h) * cos(M_PI * kx * (x + 0.5) / w);
    return s;
}

/* Shapes wide and tall, prime and one row thin: the transform runs one
 * axis at a time, the columns through a transpose. */
static void test_against_direct_dct(void **state) {
    (void)state;
    const int shapes[][2] = {{7, 12}, {13, 5}, {1, 9}, {17, 23}};
    for (size_t k = 0; k < sizeof shapes / sizeof *shapes; k++) {
    const int h = shapes[k][0], w = shapes[k][1], order = 6;
    float a[17 * 23], b[17 * 23];
    double da[17 * 23], db[17 * 23], ca[17 * 23], cb[17 * 23];
    for (int i = 0; i < h * w; i++) {
        da[i] = a[i] = (float)(100 + 10 * nrand());
        db[i] = b[i] = (float)(100 + 10 * nrand());
    }
    double cutoff = 0;
    assert_true(ts_lowpass_pair(plans, a, b, h, w, order, 0.4, 1.6, &cutoff));
    assert_true(cutoff >= 0.4 && cutoff <= 1.6);
    for (int ky = 0; ky < h; ky++)
        for (int kx = 0; kx < w; kx++) {
            const double r = M_PI * hypot((double)ky / h, (double)kx / w) / cutoff;
            const double g = 1.0 / (1.0 + pow(r, order));
            ca[ky * w + kx] = g * dct2(da, h, w, ky, kx);
            cb[ky * w + kx] = g * dct2(db, h, w, ky, kx);
        }
    double worst = 0;
    for (int y = 0; y < h; y++)
        for (int x = 0; x < w; x++) {
            worst = fmax(worst, fabs(idct2(ca, h, w, y, x) - a[y * w + x]));
            worst = fmax(worst, fabs(idct2(cb, h, w, y, x) - b[y * w + x]));
        }
    printf("%dx%d: cut-off %.2f rad/px, worst difference from the direct DCT %.2e\n", h, w, cutoff, worst);
    assert_true(worst < 1e-3);
    }
}

/* The plans are shared by every plans object alive and made again after
 * the last is freed; threads using them at once get what one alone gets. */
typedef struct lowpass_job {
    ts_lowpass_plans *plans;
    int first;
    float out[8][2][19 * 21];
    bool ok;
} lowpass_job;

static void job_pair(ts_lowpass_plans *p, int k, float *a, float *b, bool *ok) {
    const int h = 11 + k, w = 21 - k;
    for (int i = 0; i < h * w; i++) a[i] = (float)(100 + 10 * sin(0.37 * i + k)), b[i] = a[i] + (float)(i % 7);
    double cutoff;
    *ok = *ok && ts_lowpass_pair(p, a, b, h, w, 6, 0.4, 1.6, &cutoff);
}

static void *lowpass_thread(void *arg) {
    lowpass_job *j = arg;
    for (int n = 0; n < 8; n++) {
        const int k = (j->first + n) % 8; /* the threads take the sizes in different orders */
        job_pair(j->plans, k, j->out[k][0], j->out[k][1], &j->ok);
    }
    return NULL;
}

static void test_plans_shared(void **state) {
    (void)state;
    static lowpass_job alone, both[2];
    ts_lowpass_plans *p = ts_lowpass_plans_create();
    assert_non_null(p);
    alone = (lowpass_job){.plans = p, .ok = true};
    lowpass_thread(&alone);
    assert_true(alone.ok);
    ts_lowpass_plans_free(p);
    /* plans is still alive (main's): the table stays; two more objects in two threads */
    pthread_t t[2];
    for (int i = 0; i < 2; i++) {
        both[i] = (lowpass_job){.plans = ts_lowpass_plans_create(), .first = 3 * i, .ok = true};
        assert_non_null(both[i].plans);
        assert_int_equal(pthread_create(&t[i], NULL, lowpass_thread, &both[i]), 0);
    }
    for (int i = 0; i < 2; i++) {
        pthread_join(t[i], NULL);
        assert_true(both[i].ok);
        assert_memory_equal(both[i].out, alone.out, sizeof alone.out);
        ts_lowpass_plans_free(both[i].plans);
    }
}

static void test_constant_kept(void **state) {
    (void)state;
    const int h = 9, w = 40;
    float a[9 * 40], b[9 * 40];
    for (int i = 0; i < h * w; i++) a[i] = b[i] = 1000.0f;
    double cutoff;
    assert_true(ts_lowpass_pair(plans, a, b, h, w, 6, 0.4, 1.6, &cutoff));
    for (int i = 0; i < h * w; i++) assert_true(fabs(a[i] - 1000.0) < 1e-2 && fabs(b[i] - 1000.0) < 1e-2);
}

/* Two views of plane waves of random direction with radial frequencies
 * below fmax (rad/px), contrast `amp`, each with its own white noise sd 1.5. */
static double measured_cutoff(double fmax, double amp) {
    const int h = 120, w = 16, waves = 60;
    float *a = malloc(sizeof(float) * h * w), *b = malloc(sizeof(float) * h * w);
    double u[60], v[60], ph[60];
    for (int k = 0; k < waves; k++) {
        const double f = fmax * sqrt(urand()), th = 2 * M_PI * urand(); /* uniform over the disc */
        u[k] = f * sin(th), v[k] = f * cos(th), ph[k] = 2 * M_PI * urand();
    }
    for (int y = 0; y < h; y++)
        for (int x = 0; x < w; x++) {
            double s = 1000;
            for (int k = 0; k < waves; k++) s += amp * cos(u[k] * y + v[k] * x + ph[k]);
            a[y * w + x] = (float)(s + 1.5 * nrand());
            b[y * w + x] = (float)(s + 1.5 * nrand());
        }
    double cutoff = 0;
    assert_true(ts_lowpass_pair(plans, a, b, h, w, 6, 0.4, 1.6, &cutoff));
    free(a), free(b);
    return cutoff;
}

/* Detail up to 1.3 rad/px: cut at 1.1 or beyond; up to 0.7: lower (not
 * at 0.7 itself: strong waves cut off by the window leak common power
 * past their frequency, 1.45 here); none (amplitude 0, independent noise
 * only): the lowest cut-off allowed. */
static void test_cutoff_follows_the_detail(void **state) {
    (void)state;
    const double c07 = measured_cutoff(0.7, 1.0), c13 = measured_cutoff(1.3, 1.0), c0 = measured_cutoff(1.0, 0.0);
    printf("detail to 0.7: cut-off %.2f; to 1.3: %.2f; noise only: %.2f\n", c07, c13, c0);
    assert_true(c07 >= 0.6 && c07 < c13);
    assert_true(c13 >= 1.1);
    assert_true(c0 <= 0.5);
}

/* The same plans serve one size again (from the cache) and a new one. */
static void test_plans_reused(void **state) {
    (void)state;
    float a[5 * 6], b[5 * 6], c[5 * 6], d[5 * 6], e[6 * 5], f[6 * 5];
    for (int i = 0; i < 30; i++) a[i] = c[i] = e[i] = (float)(100 + 10 * nrand()), b[i] = d[i] = f[i] = a[i] + 1;
    double k1, k2, k3;
    assert_true(ts_lowpass_pair(plans, a, b, 5, 6, 6, 0.4, 1.6, &k1));
    assert_true(ts_lowpass_pair(plans, e, f, 6, 5, 6, 0.4, 1.6, &k3));
    assert_true(ts_lowpass_pair(plans, c, d, 5, 6, 6, 0.4, 1.6, &k2));
    assert_true(k1 == k2);
    for (int i = 0; i < 30; i++) assert_true(a[i] == c[i] && b[i] == d[i]);
}

int main(void) {
    plans = ts_lowpass_plans_create();
    assert_non_null(plans);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_plans_reused),
        cmocka_unit_test(test_plans_shared),
        cmocka_unit_test(test_against_direct_dct),
        cmocka_unit_test(test_constant_kept),
        cmocka_unit_test(test_cutoff_follows_the_detail),
    };
    int failed = cmocka_run_group_tests(tests, NULL, NULL);
    ts_lowpass_plans_free(plans);
    return failed;
}
