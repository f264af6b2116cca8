/* ts_solve_pitch_from_pairs takes the median of the pairs' shifts by
 * selection, not by sorting (ts_median_double, the loop check's stage model
 * uses it too): the same value a sort gives, for odd and even counts,
 * duplicates, negatives and sorted or reversed input. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "shifts/shifts.h"
#include "solve/solve.h"

static int cmp_double(const void *x, const void *y) {
    double a = *(const double *)x, b = *(const double *)y;
    return (a > b) - (a < b);
}

static double sorted_median(const double *v, int n) {
    double *c = malloc((size_t)n * sizeof *c);
    assert_non_null(c);
    memcpy(c, v, (size_t)n * sizeof *c);
    qsort(c, (size_t)n, sizeof *c, cmp_double);
    double m = n % 2 ? c[n / 2] : 0.5 * (c[n / 2 - 1] + c[n / 2]);
    free(c);
    return m;
}

/* A well whose left/right pairs measure dx[0, n) and top/bottom pairs
 * dy[0, n): rows of up to 900 pairs, one tile more per row. */
static ts_shifts *well_with(const double *dx, const double *dy, int n) {
    ts_shifts *s = ts_shifts_new();
    int w = ts_shifts_add_well(s, "A/1");
    char name[16];
    for (int k = 0; k < n; k++) {
        int row = k / 900, col = k % 900;
        snprintf(name, sizeof name, "%03d%03d", col, 2 * row);
        int a = ts_shifts_add_tile(s, w, name);
        snprintf(name, sizeof name, "%03d%03d", col + 1, 2 * row);
        int b = ts_shifts_add_tile(s, w, name);
        snprintf(name, sizeof name, "%03d%03d", col, 2 * row + 1);
        int c = ts_shifts_add_tile(s, w, name);
        assert_true(a >= 0 && b >= 0 && c >= 0);
        assert_true(ts_shifts_add_pair(s, w, a, b, 0.0, dx[k], 1.0) >= 0);
        assert_true(ts_shifts_add_pair(s, w, a, c, dy[k], 0.0, 1.0) >= 0);
    }
    return s;
}

static void check(const double *dx, const double *dy, int n) {
    ts_shifts *s = well_with(dx, dy, n);
    double py, px;
    ts_solve_pitch_from_pairs(&s->wells[0], false, &py, &px);
    double ex = sorted_median(dx, n), ey = sorted_median(dy, n);
    assert_memory_equal(&px, &ex, sizeof px);
    assert_memory_equal(&py, &ey, sizeof py);
    ts_shifts_free(s);
}

static void test_median_matches_sort(void **state) {
    (void)state;
    enum { MAX = 2701 };
    double *dx = malloc(MAX * sizeof *dx), *dy = malloc(MAX * sizeof *dy);
    assert_non_null(dx);
    assert_non_null(dy);
    unsigned seed = 12345;
    const int sizes[] = {1, 2, 3, 4, 5, 8, 17, 64, 101, 500, 999, 1000, 2700, 2701};
    for (size_t si = 0; si < sizeof sizes / sizeof sizes[0]; si++) {
        int n = sizes[si];
        for (int kind = 0; kind < 5; kind++) {
            for (int k = 0; k < n; k++) {
                seed = seed * 1103515245u + 12345u;
                double r = (double)(seed >> 8) / (double)(1u << 24);
                switch (kind) {
                case 0: dx[k] = 1800.0 + 40.0 * r, dy[k] = -1750.0 - 30.0 * r; break; /* distinct */
                case 1: dx[k] = (double)(int)(5 * r), dy[k] = (double)(int)(3 * r) - 1; break; /* few values */
                case 2: dx[k] = k, dy[k] = -k; break; /* sorted, reversed */
                case 3: dx[k] = 7.5, dy[k] = k % 2 ? 1.0 : 2.0; break; /* constant, two values */
                default: dx[k] = (k * 7919) % n, dy[k] = r < 0.5 ? 1e6 * r : -1e-6 * r; break;
                }
            }
            check(dx, dy, n);
        }
    }
    free(dx);
    free(dy);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_median_matches_sort),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
