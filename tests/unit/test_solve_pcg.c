/* The fast paths of the weighted Laplacian solve (src/solve/laplacian.c) on
 * a random weighted grid large enough to take them (> 20000 unknowns), cut
 * into groups (each with its anchor fixed), some tiles fixed at given
 * positions:
 *   - the factorisation on two threads (rows of disjoint elimination
 *     subtrees at once) gives the same bytes as cholmod_factorize, first
 *     factorisation and refactorisation alike;
 *   - CG preconditioned by the previous factorisation (a few weights
 *     changed) equals a direct solve with the new weights to TOL_PX;
 *   - IRLS' scheme (AMD first, then the nested dissection computed on the
 *     second thread) equals direct solves (nested dissection) to TOL_PX.
 * TOL_PX is 1e-12 of the plate's extent (170 x 1000 px): two direct solves
 * that differ only in the ordering already differ by ~3e-8 px here. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/error.h"
#include "solve/laplacian.h"

#define COLS 170
#define ROWS 150 /* 25500 tiles */
#define TOL_PX (1e-12 * COLS * 1000.0)

static uint64_t rng_state = 12345;
static double urand(void) { /* xorshift64*, deterministic */
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return (double)((rng_state * 2685821657736338717ull) >> 11) / 9007199254740992.0;
}

typedef struct grid {
    int n, m;
    int *a, *b, *unknown;
    unsigned char *usable;
    double (*d)[2], (*fixed)[2], *w;
} grid;

/* Right and lower neighbour pairs; a vertical cut at column COLS/3 and a
 * horizontal one at row ROWS/2 (right half only) split the grid into three
 * groups, whose first tiles are fixed (the anchors), at random positions. */
static grid make_grid(void) {
    grid g = {.n = COLS * ROWS};
    g.a = malloc(sizeof(int) * 2 * g.n);
    g.b = malloc(sizeof(int) * 2 * g.n);
    g.usable = malloc(2 * (size_t)g.n);
    g.d = malloc(sizeof *g.d * 2 * g.n);
    g.w = malloc(sizeof(double) * 2 * g.n);
    g.unknown = malloc(sizeof(int) * g.n);
    g.fixed = calloc((size_t)g.n, sizeof *g.fixed);
    for (int y = 0; y < ROWS; y++)
        for (int x = 0; x < COLS; x++)
            for (int right = 1; right >= 0; right--) {
                int i = y * COLS + x;
                if (right ? x + 1 >= COLS || x + 1 == COLS / 3 : y + 1 >= ROWS || (y + 1 == ROWS / 2 && x >= COLS / 3))
                    continue;
                g.a[g.m] = i;
                g.b[g.m] = right ? i + 1 : i + COLS;
                g.usable[g.m] = 1;
                g.d[g.m][0] = right ? 20 * (urand() - 0.5) : 1000 + 20 * (urand() - 0.5);
                g.d[g.m][1] = right ? 1000 + 20 * (urand() - 0.5) : 20 * (urand() - 0.5);
                g.w[g.m] = urand() < 0.02 ? 0.001 + 0.01 * urand() : 0.05 + urand(); /* a few near the floor */
                g.m++;
            }
    const int anchors[3] = {0, COLS / 3, (ROWS / 2) * COLS + COLS / 3};
    int k = 0;
    for (int i = 0; i < g.n; i++) {
        bool anchor = i == anchors[0] || i == anchors[1] || i == anchors[2];
        g.unknown[i] = anchor ? -1 : k++;
        if (anchor) g.fixed[i][0] = 5000 * urand(), g.fixed[i][1] = 5000 * urand();
    }
    return g;
}

static void free_grid(grid *g) {
    free(g->a);
    free(g->b);
    free(g->usable);
    free(g->d);
    free(g->w);
    free(g->unknown);
    free(g->fixed);
}

/* A direct solve with weights w on a fresh system (nested dissection,
 * cholmod_factorize). */
static void direct(const grid *g, const double *w, double (*pos)[2]) {
    ts_laplacian *lap;
    ts_error err;
    assert_int_equal(ts_laplacian_create(g->n, g->unknown, g->m, g->a, g->b, g->usable, &lap, &err), TS_OK);
    ts_laplacian_set_no_split(lap, true);
    assert_int_equal(ts_laplacian_solve(lap, w, (const double(*)[2])g->d, (const double(*)[2])g->fixed, pos, false,
                                        NULL, &err),
                     TS_OK);
    ts_laplacian_free(lap);
}

static double max_diff(const double (*x)[2], const double (*y)[2], int n) {
    double m = 0;
    for (int i = 0; i < n; i++) m = fmax(m, fmax(fabs(x[i][0] - y[i][0]), fabs(x[i][1] - y[i][1])));
    return m;
}

/* Weights w with a fraction of them scaled by a random factor in [1/s, s]. */
static double *perturbed(const grid *g, const double *w, double fraction, double s) {
    double *v = malloc(sizeof(double) * g->m);
    for (int e = 0; e < g->m; e++) v[e] = urand() < fraction ? w[e] * exp(log(s) * (2 * urand() - 1)) : w[e];
    return v;
}

static void test_split_factorisation_same_bytes(void **state) {
    (void)state;
    grid g = make_grid();
    double(*p_split)[2] = malloc(sizeof *p_split * g.n), (*p_one)[2] = malloc(sizeof *p_one * g.n);
    ts_laplacian *split, *one;
    ts_error err;
    assert_int_equal(ts_laplacian_create(g.n, g.unknown, g.m, g.a, g.b, g.usable, &split, &err), TS_OK);
    assert_int_equal(ts_laplacian_create(g.n, g.unknown, g.m, g.a, g.b, g.usable, &one, &err), TS_OK);
    ts_laplacian_set_no_split(one, true);
    double *w2 = perturbed(&g, g.w, 0.5, 5);
    const double *ws[2] = {g.w, w2};
    for (int round = 0; round < 2; round++) { /* first factorisation, then a refactorisation */
        bool f1, f2;
        assert_int_equal(ts_laplacian_solve(split, ws[round], (const double(*)[2])g.d, (const double(*)[2])g.fixed,
                                            p_split, false, &f1, &err),
                         TS_OK);
        assert_int_equal(ts_laplacian_solve(one, ws[round], (const double(*)[2])g.d, (const double(*)[2])g.fixed,
                                            p_one, false, &f2, &err),
                         TS_OK);
        assert_true(f1 && f2);
        assert_memory_equal(p_split, p_one, sizeof *p_one * g.n);
        /* the comparison means something only if the split path ran */
        assert_int_equal(ts_laplacian_split_factorisations(split), round + 1);
        assert_int_equal(ts_laplacian_split_factorisations(one), 0);
        /* and it solves the system: anchors where they were put */
        assert_true(p_split[0][0] == g.fixed[0][0] && p_split[0][1] == g.fixed[0][1]);
    }
    ts_laplacian_free(split);
    ts_laplacian_free(one);
    free(w2);
    free(p_split);
    free(p_one);
    free_grid(&g);
}

static void test_pcg_equals_direct(void **state) {
    (void)state;
    grid g = make_grid();
    double(*p_cg)[2] = malloc(sizeof *p_cg * g.n), (*p_direct)[2] = malloc(sizeof *p_direct * g.n);
    ts_laplacian *lap;
    ts_error err;
    assert_int_equal(ts_laplacian_create(g.n, g.unknown, g.m, g.a, g.b, g.usable, &lap, &err), TS_OK);
    bool factorised;
    assert_int_equal(ts_laplacian_solve(lap, g.w, (const double(*)[2])g.d, (const double(*)[2])g.fixed, p_cg, false,
                                        &factorised, &err),
                     TS_OK);
    assert_true(factorised);
    for (int step = 0; step < 3; step++) { /* a few weights off those factorised, as late in IRLS */
        double *v = perturbed(&g, g.w, 0.001, 1.5);
        assert_int_equal(ts_laplacian_solve(lap, v, (const double(*)[2])g.d, (const double(*)[2])g.fixed, p_cg, true,
                                            &factorised, &err),
                         TS_OK);
        assert_false(factorised); /* the CG path */
        direct(&g, v, p_direct);
        double diff = max_diff((const double(*)[2])p_cg, (const double(*)[2])p_direct, g.n);
        print_message("CG step %d: max |CG - direct| = %.2e px\n", step, diff);
        assert_true(diff < TOL_PX);
        free(v);
    }
    ts_laplacian_free(lap);
    free(p_cg);
    free(p_direct);
    free_grid(&g);
}

static void test_nested_dissection_refactorisation(void **state) {
    (void)state;
    grid g = make_grid();
    double(*p)[2] = malloc(sizeof *p * g.n), (*p_direct)[2] = malloc(sizeof *p_direct * g.n);
    ts_laplacian *lap;
    ts_error err;
    assert_int_equal(ts_laplacian_create(g.n, g.unknown, g.m, g.a, g.b, g.usable, &lap, &err), TS_OK);
    ts_laplacian_prepare_refactor(lap);
    bool factorised;
    assert_int_equal(ts_laplacian_solve(lap, g.w, (const double(*)[2])g.d, (const double(*)[2])g.fixed, p, false,
                                        &factorised, &err),
                     TS_OK);
    direct(&g, g.w, p_direct);
    assert_true(max_diff((const double(*)[2])p, (const double(*)[2])p_direct, g.n) < TOL_PX);
    /* many weights changed: reuse asked for, but CG is not tried; the
     * refactorisation takes the nested dissection */
    double *v = perturbed(&g, g.w, 0.5, 5);
    assert_int_equal(ts_laplacian_solve(lap, v, (const double(*)[2])g.d, (const double(*)[2])g.fixed, p, true,
                                        &factorised, &err),
                     TS_OK);
    assert_true(factorised);
    direct(&g, v, p_direct);
    double diff = max_diff((const double(*)[2])p, (const double(*)[2])p_direct, g.n);
    print_message("nested dissection refactorisation: max |diff| = %.2e px\n", diff);
    assert_true(diff < TOL_PX);
    free(v);
    ts_laplacian_free(lap);
    free(p);
    free(p_direct);
    free_grid(&g);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_split_factorisation_same_bytes),
        cmocka_unit_test(test_pcg_equals_direct),
        cmocka_unit_test(test_nested_dissection_refactorisation),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
