/* The global solve: exact recovery, `none` weighting unchanged, robustness to
 * wrong edges, disconnected groups, isolated tiles, outliers, errors, and the
 * shifts-file round trip of ts_solve_file. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/error.h"
#include "shifts/shifts.h"
#include "solve/solve.h"

typedef struct grid_case {
    int cols, rows, n, npairs;
    int *gx, *gy;
    double (*truth)[2];
    ts_shift_pair *pairs;
    bool *wrong; /* injected wrong edge */
    double pitch_y, pitch_x;
} grid_case;

static uint64_t rng_state;
static double urand(void) { /* xorshift64*, deterministic */
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return (double)((rng_state * 2685821657736338717ull) >> 11) / 9007199254740992.0;
}
static double nrand(void) {
    double u = urand() + 1e-12, v = urand();
    return sqrt(-2 * log(u)) * cos(2 * M_PI * v);
}

/* A cols x rows grid, true origins = grid x pitch + jitter, pairs to the
 * right and lower neighbour = exact differences + noise; a fraction of the
 * pairs made wrong by 50-200 px with low confidence. skip(x, y, right) drops
 * pairs. */
static grid_case make_grid(int cols, int rows, double jitter, double noise, double wrong_fraction, uint64_t seed,
                           bool (*drop)(int x, int y, bool right)) {
    grid_case g = {.cols = cols, .rows = rows, .n = cols * rows, .pitch_y = 900, .pitch_x = 1100};
    rng_state = seed * 0x9E3779B97F4A7C15ull + 1;
    g.gx = malloc(sizeof(int) * g.n);
    g.gy = malloc(sizeof(int) * g.n);
    g.truth = malloc(sizeof *g.truth * g.n);
    g.pairs = malloc(sizeof *g.pairs * 2 * g.n);
    g.wrong = calloc(2 * g.n, sizeof(bool));
    for (int y = 0; y < rows; y++)
        for (int x = 0; x < cols; x++) {
            int i = y * cols + x;
            g.gx[i] = x;
            g.gy[i] = y;
            g.truth[i][0] = y * g.pitch_y + jitter * (2 * urand() - 1);
            g.truth[i][1] = x * g.pitch_x + jitter * (2 * urand() - 1);
        }
    for (int y = 0; y < rows; y++)
        for (int x = 0; x < cols; x++)
            for (int right = 1; right >= 0; right--) {
                int i = y * cols + x;
                if (right ? x + 1 >= cols : y + 1 >= rows) continue;
                if (drop && drop(x, y, right)) continue;
                int j = right ? i + 1 : i + cols;
                ts_shift_pair p = {.a = i, .b = j, .ry = NAN, .rx = NAN};
                p.dy = g.truth[j][0] - g.truth[i][0] + noise * nrand();
                p.dx = g.truth[j][1] - g.truth[i][1] + noise * nrand();
                p.confidence = 0.7 + 0.3 * urand();
                if (urand() < wrong_fraction) {
                    double mag = 50 + 150 * urand(), ang = 2 * M_PI * urand();
                    p.dy += mag * sin(ang);
                    p.dx += mag * cos(ang);
                    p.confidence = 0.02 + 0.1 * urand();
                    g.wrong[g.npairs] = true;
                }
                g.pairs[g.npairs++] = p;
            }
    return g;
}

static void free_grid(grid_case *g) {
    free(g->gx);
    free(g->gy);
    free(g->truth);
    free(g->pairs);
    free(g->wrong);
}

static ts_solve_problem problem_of(const grid_case *g) {
    return (ts_solve_problem){.ntiles = g->n, .gx = g->gx, .gy = g->gy, .pitch_y = g->pitch_y,
                              .pitch_x = g->pitch_x, .npairs = g->npairs, .pairs = g->pairs};
}

static void solve_ok(const ts_solve_problem *p, const ts_solve_options *o, ts_solve_result *r) {
    ts_error err = {0};
    if (ts_solve_positions(p, o, r, &err) != TS_OK) fail_msg("solve failed: %s", err.message);
}

/* Errors against the truth after removing the common translation. */
static void errors(const grid_case *g, const ts_solve_result *r, double *median, double *max) {
    double my = 0, mx = 0;
    for (int i = 0; i < g->n; i++) my += r->position[i][0] - g->truth[i][0], mx += r->position[i][1] - g->truth[i][1];
    my /= g->n;
    mx /= g->n;
    double *e = malloc(sizeof(double) * g->n);
    *max = 0;
    for (int i = 0; i < g->n; i++) {
        double dy = r->position[i][0] - g->truth[i][0] - my, dx = r->position[i][1] - g->truth[i][1] - mx;
        e[i] = sqrt(dy * dy + dx * dx);
        if (e[i] > *max) *max = e[i];
    }
    for (int i = 1; i < g->n; i++) /* insertion sort: small n */
        for (int j = i; j > 0 && e[j - 1] > e[j]; j--) {
            double t = e[j];
            e[j] = e[j - 1];
            e[j - 1] = t;
        }
    *median = e[g->n / 2];
    free(e);
}

static void test_exact_recovery(void **state) {
    (void)state;
    grid_case g = make_grid(13, 9, 25, 0, 0, 1, NULL);
    ts_solve_problem p = problem_of(&g);
    for (int s = 0; s < 2; s++) {
        ts_solve_options o;
        ts_solve_options_init(&o);
        o.solver = s ? TS_SOLVER_L1 : TS_SOLVER_L2;
        ts_solve_result r;
        solve_ok(&p, &o, &r);
        double med, max;
        errors(&g, &r, &med, &max);
        if (max > 1e-6) fail_msg("solver %d: max error %g px on noise-free data", s, max);
        assert_int_equal(r.components, 1);
        assert_int_equal(r.isolated, 0);
        assert_int_equal(r.noutliers, 0);
        assert_true(r.converged);
        assert_true(r.max_residual < 1e-6);
        /* Well frame: min 0 per axis, origins the rounded positions. */
        double miny = 1e300, minx = 1e300;
        for (int i = 0; i < g.n; i++) {
            miny = fmin(miny, r.position[i][0]);
            minx = fmin(minx, r.position[i][1]);
            assert_int_equal(r.origin[i][0], llround(r.position[i][0]));
            assert_int_equal(r.origin[i][1], llround(r.position[i][1]));
            assert_true(r.origin[i][0] >= 0 && r.origin[i][1] >= 0);
        }
        assert_true(miny == 0.0 && minx == 0.0);
        ts_solve_result_free(&r);
    }
    free_grid(&g);
}

/* `none` ignores the confidence: bit-identical to equal confidences, and to
 * linear weighting when every confidence is 1. */
static void test_none_is_unweighted(void **state) {
    (void)state;
    grid_case g = make_grid(12, 10, 20, 0.5, 0.05, 2, NULL);
    ts_solve_problem p = problem_of(&g);
    ts_shift_pair *ones = malloc(sizeof *ones * g.npairs);
    memcpy(ones, g.pairs, sizeof *ones * g.npairs);
    for (int e = 0; e < g.npairs; e++) ones[e].confidence = 1.0;
    ts_solve_problem p1 = p;
    p1.pairs = ones;
    for (int s = 0; s < 2; s++) {
        ts_solve_options o;
        ts_solve_options_init(&o);
        o.solver = s ? TS_SOLVER_L1 : TS_SOLVER_L2;
        o.edge_weights = TS_EDGE_WEIGHTS_NONE; /* chosen explicitly: the seed's answer */
        ts_solve_result a, b, c;
        solve_ok(&p, &o, &a);
        solve_ok(&p1, &o, &b);
        ts_solve_options lin = o;
        lin.edge_weights = TS_EDGE_WEIGHTS_LINEAR;
        solve_ok(&p1, &lin, &c);
        assert_memory_equal(a.position, b.position, sizeof *a.position * g.n);
        assert_memory_equal(a.position, c.position, sizeof *a.position * g.n);
        assert_memory_equal(a.residual, c.residual, sizeof *a.residual * g.npairs);
        assert_int_equal(a.iterations, c.iterations);
        if (s) assert_true(a.iterations > 2); /* IRLS really iterated */
        ts_solve_result_free(&a);
        ts_solve_result_free(&b);
        ts_solve_result_free(&c);
    }
    free(ones);
    free_grid(&g);
}

static void test_wrong_edges(void **state) {
    (void)state;
    grid_case g = make_grid(30, 30, 20, 0.3, 0.05, 3, NULL);
    ts_solve_problem p = problem_of(&g);
    int nwrong = 0;
    for (int e = 0; e < g.npairs; e++) nwrong += g.wrong[e];
    assert_true(nwrong > 40);
    struct { ts_solver s; ts_edge_weighting w; const char *name; double med, max; } runs[] = {
        {TS_SOLVER_L2, TS_EDGE_WEIGHTS_NONE, "l2", 0, 0},
        {TS_SOLVER_L2, TS_EDGE_WEIGHTS_LINEAR, "l2+linear", 0, 0},
        {TS_SOLVER_L2, TS_EDGE_WEIGHTS_SQUARED, "l2+squared", 0, 0},
        {TS_SOLVER_L2, TS_EDGE_WEIGHTS_THRESHOLD, "l2+threshold:0.5", 0, 0},
        {TS_SOLVER_L1, TS_EDGE_WEIGHTS_NONE, "l1", 0, 0},
        {TS_SOLVER_L1, TS_EDGE_WEIGHTS_LINEAR, "l1+linear", 0, 0},
    };
    for (size_t k = 0; k < sizeof runs / sizeof runs[0]; k++) {
        ts_solve_options o;
        ts_solve_options_init(&o);
        o.solver = runs[k].s;
        o.edge_weights = runs[k].w;
        /* The weights and L1 on their own: the loop check (its stage
         * model included) takes out every wrong edge of this grid, which
         * leaves them nothing to tell apart (test_solve_loops.c). */
        o.loop_check = false;
        ts_solve_result r;
        solve_ok(&p, &o, &r);
        errors(&g, &r, &runs[k].med, &runs[k].max);
        print_message("%-18s median error %.3f px, max %.3f px, %d iterations, %d outliers\n", runs[k].name,
                      runs[k].med, runs[k].max, r.iterations, r.noutliers);
        if (runs[k].s == TS_SOLVER_L1) {
            /* The wrong edges are the ones reported. */
            int hit = 0, false_pos = 0;
            for (int e = 0; e < g.npairs; e++) {
                if (r.outlier[e] && g.wrong[e]) hit++;
                if (r.outlier[e] && !g.wrong[e]) false_pos++;
            }
            print_message("%-18s %d of %d wrong edges reported, %d good ones\n", runs[k].name, hit, nwrong,
                          false_pos);
            /* Plain L1 cannot tell which of the two edges of a corner tile
             * (a tie of the L1 cost) is wrong: allow a few misses there. */
            assert_true(hit >= nwrong * 9 / 10);
            assert_true(false_pos <= g.npairs / 100);
            if (runs[k].w != TS_EDGE_WEIGHTS_NONE) {
                assert_int_equal(hit, nwrong);
                assert_int_equal(false_pos, 0);
            }
        }
        ts_solve_result_free(&r);
    }
    for (size_t k = 1; k < sizeof runs / sizeof runs[0]; k++) {
        if (!(runs[k].max < runs[0].max && runs[k].med < runs[0].med))
            fail_msg("%s (median %g, max %g) is not better than plain l2 (median %g, max %g)", runs[k].name,
                     runs[k].med, runs[k].max, runs[0].med, runs[0].max);
    }
    /* L1 brings the typical error to the noise level, L1 with confidence
     * weighting every tile. */
    assert_true(runs[4].med < 1.0);
    assert_true(runs[5].max < 1.5);
    assert_true(runs[1].max < 0.5 * runs[0].max);
    free_grid(&g);
}

/* The L1 answer (reached through CG steps and local steps) is a fixed point
 * of IRLS: a direct weighted L2 solve with the IRLS weights of the final
 * residuals reproduces it. */
static void test_l1_fixed_point(void **state) {
    (void)state;
    grid_case g = make_grid(40, 30, 20, 0.3, 0.04, 9, NULL);
    ts_solve_problem p = problem_of(&g);
    ts_solve_options o;
    ts_solve_options_init(&o);
    o.edge_weights = TS_EDGE_WEIGHTS_LINEAR;
    o.tolerance = 1e-6;
    o.cost_tolerance = 0; /* to the fixed point, however slowly */
    o.max_iterations = 500;
    ts_solve_result r;
    solve_ok(&p, &o, &r);
    assert_true(r.converged);
    print_message("l1 40x30: %d iterations, %d factorisations, %d local steps\n", r.iterations, r.factorisations,
                  r.local_steps);
    ts_shift_pair *q = malloc(sizeof *q * g.npairs);
    memcpy(q, g.pairs, sizeof *q * g.npairs);
    for (int e = 0; e < g.npairs; e++) {
        double res = hypot(r.residual[e][0], r.residual[e][1]);
        double w = fmax(g.pairs[e].confidence, o.weight_floor) / fmax(res, 0.5);
        q[e].confidence = w / 2; /* <= 1 */
        assert_true(q[e].confidence > 1e-9);
    }
    ts_solve_problem p2 = p;
    p2.pairs = q;
    ts_solve_options o2 = o;
    o2.solver = TS_SOLVER_L2;
    o2.weight_floor = 1e-9; /* every weight above it: w = c exactly */
    ts_solve_result r2;
    solve_ok(&p2, &o2, &r2);
    double worst = 0;
    for (int i = 0; i < g.n; i++)
        for (int k = 0; k < 2; k++) worst = fmax(worst, fabs(r.position[i][k] - r2.position[i][k]));
    if (worst > 1e-4) fail_msg("L1 result is not an IRLS fixed point: %g px", worst);
    ts_solve_result_free(&r);
    ts_solve_result_free(&r2);
    free(q);
    free_grid(&g);
}

/* Plain L1 on a plate with ties (tiles with as many wrong pairs as right
 * ones): IRLS creeps along the flat L1 cost there and used to run into
 * max_iterations, unconverged. The cost rule stops it once a step no longer
 * lowers the cost, with the same answer where there is one. */
static void test_l1_ties_converge(void **state) {
    (void)state;
    grid_case g = make_grid(60, 60, 20, 0.3, 0.03, 17, NULL);
    ts_solve_problem p = problem_of(&g);
    ts_solve_options o;
    ts_solve_options_init(&o);
    ts_solve_result r, slow;
    solve_ok(&p, &o, &r);
    o.cost_tolerance = 0;
    o.max_iterations = 300;
    solve_ok(&p, &o, &slow);
    print_message("l1 60x60 with ties: %d iterations (converged %d); without the cost rule %d (converged %d)\n",
                  r.iterations, r.converged, slow.iterations, slow.converged);
    assert_true(r.converged);
    assert_true(r.iterations < 50);
    double med, max, med_slow, max_slow;
    errors(&g, &r, &med, &max);
    errors(&g, &slow, &med_slow, &max_slow);
    print_message("error median %.4f / %.4f px (cost rule / none)\n", med, med_slow);
    assert_true(fabs(med - med_slow) < 0.01);
    assert_true(med < 1.0);
    ts_solve_result_free(&r);
    ts_solve_result_free(&slow);
    free_grid(&g);
}

static bool cut_column(int x, int y, bool right) { (void)y; return right && x == 2; }

static void test_disconnected_groups(void **state) {
    (void)state;
    grid_case g = make_grid(6, 4, 30, 0, 0, 4, cut_column);
    ts_solve_problem p = problem_of(&g);
    ts_solve_options o;
    ts_solve_options_init(&o);
    ts_solve_result r;
    solve_ok(&p, &o, &r);
    assert_int_equal(r.components, 2);
    assert_int_equal(r.isolated, 0);
    /* Each group's mean position sits at its mean grid position (up to the
     * common well-frame translation), and inside a group the solution is exact. */
    double mean[2][2] = {{0}}, gmean[2][2] = {{0}};
    int cnt[2] = {0};
    for (int i = 0; i < g.n; i++) {
        int c = g.gx[i] >= 3;
        mean[c][0] += r.position[i][0], mean[c][1] += r.position[i][1];
        gmean[c][0] += g.gy[i] * g.pitch_y, gmean[c][1] += g.gx[i] * g.pitch_x;
        cnt[c]++;
    }
    for (int k = 0; k < 2; k++) {
        double got = mean[1][k] / cnt[1] - mean[0][k] / cnt[0];
        double want = gmean[1][k] / cnt[1] - gmean[0][k] / cnt[0];
        assert_true(fabs(got - want) < 1e-6);
    }
    for (int i = 0; i < g.n; i++)
        for (int j = 0; j < g.n; j++) {
            if ((g.gx[i] >= 3) != (g.gx[j] >= 3)) continue;
            assert_true(fabs((r.position[j][0] - r.position[i][0]) - (g.truth[j][0] - g.truth[i][0])) < 1e-6);
            assert_true(fabs((r.position[j][1] - r.position[i][1]) - (g.truth[j][1] - g.truth[i][1])) < 1e-6);
        }
    ts_solve_result_free(&r);
    free_grid(&g);
}

static bool isolate_corner(int x, int y, bool right) {
    /* tile (4, 3) of a 5x4 grid loses both its pairs; (0,0) keeps its own */
    return (right && x == 3 && y == 3) || (!right && x == 4 && y == 2);
}

static void test_isolated_tiles(void **state) {
    (void)state;
    grid_case g = make_grid(5, 4, 10, 0, 0, 5, isolate_corner);
    ts_solve_problem p = problem_of(&g);
    ts_solve_options o;
    ts_solve_options_init(&o);
    ts_solve_result r;
    solve_ok(&p, &o, &r);
    assert_int_equal(r.components, 2);
    assert_int_equal(r.isolated, 1);
    /* The isolated tile sits at its grid position relative to the group's
     * grid frame: its offset from the group mean equals the grid offset. */
    int iso = 3 * 5 + 4;
    double my = 0, mx = 0, gy = 0, gxm = 0;
    for (int i = 0; i < g.n; i++) {
        if (i == iso) continue;
        my += r.position[i][0], mx += r.position[i][1];
        gy += g.gy[i] * g.pitch_y, gxm += g.gx[i] * g.pitch_x;
    }
    my /= g.n - 1, mx /= g.n - 1, gy /= g.n - 1, gxm /= g.n - 1;
    assert_true(fabs((r.position[iso][0] - my) - (3 * g.pitch_y - gy)) < 1e-6);
    assert_true(fabs((r.position[iso][1] - mx) - (4 * g.pitch_x - gxm)) < 1e-6);
    ts_solve_result_free(&r);

    /* No pairs at all: every tile at grid x pitch (or its initial guess). */
    ts_solve_problem none = p;
    none.npairs = 0;
    solve_ok(&none, &o, &r);
    assert_int_equal(r.isolated, g.n);
    for (int i = 0; i < g.n; i++) {
        assert_true(r.position[i][0] == g.gy[i] * g.pitch_y);
        assert_true(r.position[i][1] == g.gx[i] * g.pitch_x);
    }
    ts_solve_result_free(&r);
    double(*init)[2] = malloc(sizeof *init * g.n);
    for (int i = 0; i < g.n; i++) init[i][0] = 100 + 2.0 * i, init[i][1] = 50 + 3.0 * i;
    none.initial = (const double(*)[2])init;
    solve_ok(&none, &o, &r);
    for (int i = 0; i < g.n; i++) {
        assert_true(fabs(r.position[i][0] - 2.0 * i) < 1e-9);
        assert_true(fabs(r.position[i][1] - 3.0 * i) < 1e-9);
    }
    ts_solve_result_free(&r);
    free(init);
    free_grid(&g);
}

static void test_outliers_reported(void **state) {
    (void)state;
    grid_case g = make_grid(8, 8, 10, 0.1, 0, 6, NULL);
    g.pairs[17].dx += 40; /* one bad measurement */
    ts_solve_problem p = problem_of(&g);
    ts_solve_options o;
    ts_solve_options_init(&o);
    ts_solve_result r;
    solve_ok(&p, &o, &r);
    assert_int_equal(r.noutliers, 1);
    assert_true(r.outlier[17]);
    assert_true(fabs(r.residual[17][1] + 40) < 1.0); /* the solve disagrees by the 40 px */
    ts_solve_result_free(&r);
    /* With L2 the error is spread over the neighbours; a large threshold
     * keeps it from being reported. */
    o.solver = TS_SOLVER_L2;
    o.outlier_px = 50;
    solve_ok(&p, &o, &r);
    assert_int_equal(r.noutliers, 0);
    ts_solve_result_free(&r);
    free_grid(&g);
}

/* A pair listed the other way round (b -> a, negated shift), and a pair
 * listed twice, are the same equations: same solution. */
static void test_pair_direction(void **state) {
    (void)state;
    grid_case g = make_grid(9, 7, 20, 0.4, 0.0, 10, NULL);
    ts_solve_problem p = problem_of(&g);
    ts_shift_pair *q = malloc(sizeof *q * 2 * g.npairs);
    for (int e = 0; e < g.npairs; e++) {
        q[e] = g.pairs[e];
        if (e % 3 == 0) {
            q[e].a = g.pairs[e].b;
            q[e].b = g.pairs[e].a;
            q[e].dy = -g.pairs[e].dy;
            q[e].dx = -g.pairs[e].dx;
        }
    }
    ts_solve_problem p2 = p;
    p2.pairs = q;
    ts_solve_options o;
    ts_solve_options_init(&o);
    o.solver = TS_SOLVER_L2;
    ts_solve_result r1, r2, r3;
    solve_ok(&p, &o, &r1);
    solve_ok(&p2, &o, &r2);
    memcpy(q + g.npairs, q, sizeof *q * g.npairs); /* every pair twice */
    p2.npairs = 2 * g.npairs;
    solve_ok(&p2, &o, &r3);
    for (int i = 0; i < g.n; i++)
        for (int k = 0; k < 2; k++) {
            assert_true(fabs(r1.position[i][k] - r2.position[i][k]) < 1e-8);
            assert_true(fabs(r1.position[i][k] - r3.position[i][k]) < 1e-8);
        }
    ts_solve_result_free(&r1);
    ts_solve_result_free(&r2);
    ts_solve_result_free(&r3);
    free(q);
    free_grid(&g);
}

static void test_errors(void **state) {
    (void)state;
    grid_case g = make_grid(3, 3, 5, 0, 0, 7, NULL);
    ts_solve_options o;
    ts_solve_options_init(&o);
    ts_solve_result r;
    ts_error err = {0};
    g.pairs[3].dy = NAN;
    ts_solve_problem p = problem_of(&g);
    assert_int_equal(ts_solve_positions(&p, &o, &r, &err), TS_ERR_NUMERIC);
    assert_non_null(strstr(err.message, "pair 3"));
    /* an absurd shift is refused as such, not reported by CHOLMOD as a
     * singular system */
    g.pairs[3].dy = 1e300;
    assert_int_equal(ts_solve_positions(&p, &o, &r, &err), TS_ERR_NUMERIC);
    if (!strstr(err.message, "pair 3") || !strstr(err.message, "absurd shift")) fail_msg("%s", err.message);
    g.pairs[3].dy = 1;
    g.pairs[2].b = 99;
    assert_int_equal(ts_solve_positions(&p, &o, &r, &err), TS_ERR_ARG);
    assert_non_null(strstr(err.message, "pair 2"));
    g.pairs[2].b = 1;
    o.weight_floor = 0;
    assert_int_equal(ts_solve_positions(&p, &o, &r, &err), TS_ERR_ARG);
    free_grid(&g);
}

static void test_weights_and_parse(void **state) {
    (void)state;
    ts_solve_options o;
    ts_solve_options_init(&o);
    assert_int_equal(o.solver, TS_SOLVER_L1);
    /* The default weighs by confidence (docs/solve.md: the fewest tiles
     * off on the simulated and real-image plates); `none` is equal weights. */
    assert_int_equal(o.edge_weights, TS_EDGE_WEIGHTS_LINEAR);
    assert_true(ts_solve_edge_weight(&o, 0.0) == o.weight_floor);
    assert_true(ts_solve_edge_weight(&o, NAN) == o.weight_floor);
    o.edge_weights = TS_EDGE_WEIGHTS_NONE;
    assert_true(ts_solve_edge_weight(&o, 0.2) == 1.0);
    assert_true(ts_solve_edge_weight(&o, NAN) == 1.0);
    double cut = 0;
    assert_int_equal(ts_edge_weighting_parse("linear", &o.edge_weights, &cut), 0);
    assert_true(ts_solve_edge_weight(&o, 0.25) == 0.25);
    assert_true(ts_solve_edge_weight(&o, 0.0) == o.weight_floor);
    assert_int_equal(ts_edge_weighting_parse("squared", &o.edge_weights, &cut), 0);
    assert_true(ts_solve_edge_weight(&o, 0.5) == 0.25);
    assert_true(ts_solve_edge_weight(&o, 0.01) == o.weight_floor);
    assert_int_equal(ts_edge_weighting_parse("threshold:0.4", &o.edge_weights, &o.threshold), 0);
    assert_true(o.threshold == 0.4);
    assert_true(ts_solve_edge_weight(&o, 0.4) == 1.0);
    assert_true(ts_solve_edge_weight(&o, 0.39) == o.weight_floor);
    assert_int_equal(ts_edge_weighting_parse("none", &o.edge_weights, &cut), 0);
    assert_int_equal(o.edge_weights, TS_EDGE_WEIGHTS_NONE);
    assert_int_equal(ts_edge_weighting_parse("threshold", &o.edge_weights, &cut), -1);
    assert_int_equal(ts_edge_weighting_parse("threshold:x", &o.edge_weights, &cut), -1);
    assert_int_equal(ts_edge_weighting_parse("cubic", &o.edge_weights, &cut), -1);
}

/* Pairs the registration rated worthless (confidence 0) never move a tile
 * whose other pairs agree: on a 3x3 grid the centre tile's left and upper
 * pairs are right (confidence 0.8), its right and lower pairs confidence 0
 * and 15 px off in x. With the default weights every tile stays within
 * 0.05 px of the truth, under L1 and L2 (with equal weights, `none`, the
 * centre is a tie: L1 moved a tile 3.75 px, L2 moves the centre half-way). */
static void test_confidence_zero_pairs(void **state) {
    (void)state;
    enum { N = 9 };
    int gx[N], gy[N];
    double truth[N][2];
    for (int i = 0; i < N; i++) {
        gx[i] = i % 3, gy[i] = i / 3;
        truth[i][0] = 100.0 * gy[i] + (i % 2 ? 1.25 : -0.5);
        truth[i][1] = 120.0 * gx[i] + (i % 3 ? 0.75 : -1.0);
    }
    ts_shift_pair pairs[12];
    int m = 0;
    for (int i = 0; i < N; i++) {
        int nb[2] = {gx[i] < 2 ? i + 1 : -1, gy[i] < 2 ? i + 3 : -1};
        for (int k = 0; k < 2; k++) {
            if (nb[k] < 0) continue;
            ts_shift_pair q = {.a = i, .b = nb[k], .confidence = 0.8};
            q.dy = truth[nb[k]][0] - truth[i][0];
            q.dx = truth[nb[k]][1] - truth[i][1];
            if (i == 4) { /* the centre's right and lower pairs */
                q.confidence = 0.0;
                q.dx -= 15.0; /* both say the centre is 15 px further right */
            }
            pairs[m++] = q;
        }
    }
    assert_int_equal(m, 12);
    ts_solve_problem p = {.ntiles = N, .gx = gx, .gy = gy, .pitch_y = 100, .pitch_x = 120, .npairs = m,
                          .pairs = pairs};
    ts_error err;
    for (int solver = 0; solver < 2; solver++) {
        ts_solve_options o;
        ts_solve_options_init(&o);
        o.solver = solver ? TS_SOLVER_L2 : TS_SOLVER_L1;
        ts_solve_result r;
        assert_int_equal(ts_solve_positions(&p, &o, &r, &err), TS_OK);
        for (int i = 0; i < N; i++) {
            double ey = r.position[i][0] - r.position[0][0] - (truth[i][0] - truth[0][0]);
            double ex = r.position[i][1] - r.position[0][1] - (truth[i][1] - truth[0][1]);
            if (fabs(ey) > 0.05 || fabs(ex) > 0.05)
                fail_msg("%s: tile %d is (%.3f, %.3f) px off", solver ? "l2" : "l1", i, ey, ex);
        }
        ts_solve_result_free(&r);
        /* With equal weights (`none`, which test_none_is_unweighted pins to
         * the seed's answer) L2 splits the tie: the centre moves. */
        if (solver) {
            o.edge_weights = TS_EDGE_WEIGHTS_NONE;
            assert_int_equal(ts_solve_positions(&p, &o, &r, &err), TS_OK);
            assert_true(fabs(r.position[4][1] - r.position[3][1] - (truth[4][1] - truth[3][1])) > 3.0);
            ts_solve_result_free(&r);
        }
    }
}

/* ts_solve_file: pairs written by the shifts writer, solved, read back. */
static void test_solve_file(void **state) {
    (void)state;
    grid_case g = make_grid(7, 5, 15, 0, 0, 8, NULL);
    ts_shifts *s = ts_shifts_new();
    s->has_tile_shape = true;
    s->tile_shape[0] = 1000;
    s->tile_shape[1] = 1200;
    s->has_orientation = true;
    s->orientation.rot90 = 1;
    int w = ts_shifts_add_well(s, "B/3");
    char name[16];
    for (int i = 0; i < g.n; i++) {
        snprintf(name, sizeof name, "%03d%03d", g.gx[i], g.gy[i]);
        assert_int_equal(ts_shifts_add_tile(s, w, name), i);
    }
    snprintf(name, sizeof name, "%03d%03d", 9, 9); /* a listed tile without pairs */
    int lonely = ts_shifts_add_tile(s, w, name);
    for (int e = 0; e < g.npairs; e++)
        ts_shifts_add_pair(s, w, g.pairs[e].a, g.pairs[e].b, g.pairs[e].dy, g.pairs[e].dx, g.pairs[e].confidence);
    char in[512], out[512];
    snprintf(in, sizeof in, "%s/test_solve_pairs.yaml", TESSERA_TEST_TMP);
    snprintf(out, sizeof out, "%s/test_solve_out.yaml", TESSERA_TEST_TMP);
    ts_error err = {0};
    assert_int_equal(ts_shifts_write(in, s, &err), TS_OK);
    ts_solve_options o;
    ts_solve_options_init(&o);
    ts_solve_summary sum;
    if (ts_solve_file_ex(in, out, &o, 0, 0, 2, &sum, &err) != TS_OK) fail_msg("%s", err.message);
    assert_int_equal(sum.wells, 1);
    assert_int_equal(sum.tiles, g.n + 1);
    assert_int_equal(sum.isolated, 1);
    ts_shifts *r = NULL;
    if (ts_shifts_read(out, &r, &err) != TS_OK) fail_msg("%s", err.message);
    const ts_well_shifts *rw = &r->wells[0];
    assert_int_equal(rw->npairs, g.npairs);
    assert_true(r->has_orientation && r->orientation.rot90 == 1);
    assert_true(r->has_tile_shape && r->tile_shape[1] == 1200);
    assert_non_null(rw->position);
    for (int i = 0; i < g.n; i++) {
        assert_true(rw->has_origin[i]);
        for (int k = 0; k < 2; k++) {
            double want = g.truth[i][k] - g.truth[0][k], got = rw->position[i][k] - rw->position[0][k];
            assert_true(fabs(want - got) < 1e-6);
        }
    }
    /* The lonely tile: placed by the pitch measured from the pairs (the
     * median pitch, close to 900 x 1100 given the +-15 px jitter). */
    assert_true(rw->has_origin[lonely]);
    double py, px;
    ts_solve_pitch_from_pairs(&s->wells[w], false, &py, &px);
    assert_true(fabs(py - 900) < 30 && fabs(px - 1100) < 30);
    ts_shifts_free(r);

    /* A file without pairs cannot be re-solved. */
    ts_shifts_free(s);
    s = ts_shifts_new();
    w = ts_shifts_add_well(s, "A/1");
    ts_shifts_add_tile(s, w, "000000");
    s->wells[w].has_origin[0] = true;
    assert_int_equal(ts_shifts_write(in, s, &err), TS_OK);
    assert_int_equal(ts_solve_file(in, out, &o, &err), TS_ERR_FORMAT);
    assert_non_null(strstr(err.message, "no pairs"));
    ts_shifts_free(s);
    free_grid(&g);
}

/* A well that cannot be placed (two groups, no pitch along y, no
 * tile_shape) fails with TS_ERR_ARG also when the caller passes no
 * ts_error (the hint used to be built from err->message: a NULL deref). */
static void test_well_error_without_ts_error(void **state) {
    (void)state;
    ts_shifts *s = ts_shifts_new();
    int w = ts_shifts_add_well(s, "A/1");
    ts_shifts_add_tile(s, w, "000000");
    ts_shifts_add_tile(s, w, "001000");
    ts_shifts_add_tile(s, w, "000005");
    ts_shifts_add_pair(s, w, 0, 1, 0.5, 1000.0, 0.9);
    ts_solve_options o;
    ts_solve_options_init(&o);
    assert_int_equal(ts_solve_well_guess(s, w, 0, 0, NULL, &o, NULL, NULL), TS_ERR_ARG);
    ts_error err = {0};
    assert_int_equal(ts_solve_well_guess(s, w, 0, 0, NULL, &o, NULL, &err), TS_ERR_ARG);
    assert_non_null(strstr(err.message, "tile_shape"));
    ts_shifts_free(s);
}

/* Wells solved in parallel give the same bytes as one at a time. */
static ts_shifts *two_wells(void) {
    ts_shifts *s = ts_shifts_new();
    for (int k = 0; k < 3; k++) {
        grid_case g = make_grid(12 + k, 9, 15, 0.3, 0.05, 20 + (uint64_t)k, NULL);
        char well[8], name[16];
        snprintf(well, sizeof well, "A/%d", k + 1);
        int w = ts_shifts_add_well(s, well);
        for (int i = 0; i < g.n; i++) {
            snprintf(name, sizeof name, "%03d%03d", g.gx[i], g.gy[i]);
            ts_shifts_add_tile(s, w, name);
        }
        for (int e = 0; e < g.npairs; e++)
            ts_shifts_add_pair(s, w, g.pairs[e].a, g.pairs[e].b, g.pairs[e].dy, g.pairs[e].dx, g.pairs[e].confidence);
        free_grid(&g);
    }
    return s;
}

static void test_wells_parallel(void **state) {
    (void)state;
    ts_shifts *a = two_wells(), *b = two_wells();
    ts_solve_options o;
    ts_solve_options_init(&o);
    ts_solve_summary sa, sb;
    ts_error err = {0};
    assert_int_equal(ts_solve_wells(a, 0, 0, NULL, &o, 1, &sa, &err), TS_OK);
    assert_int_equal(ts_solve_wells(b, 0, 0, NULL, &o, 3, &sb, &err), TS_OK);
    assert_int_equal(sa.wells, 3);
    assert_int_equal(sa.tiles, sb.tiles);
    assert_int_equal(sa.outliers, sb.outliers);
    for (int w = 0; w < 3; w++) {
        assert_memory_equal(a->wells[w].position, b->wells[w].position, sizeof(double) * 2 * a->wells[w].ntiles);
        assert_memory_equal(a->wells[w].origin, b->wells[w].origin, sizeof(int64_t) * 2 * a->wells[w].ntiles);
    }
    /* A failing well is reported by name. */
    a->wells[1].pairs[4].dx = NAN;
    assert_int_equal(ts_solve_wells(a, 0, 0, NULL, &o, 3, NULL, &err), TS_ERR_NUMERIC);
    assert_non_null(strstr(err.message, "A/2"));
    ts_shifts_free(a);
    ts_shifts_free(b);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_exact_recovery),     cmocka_unit_test(test_none_is_unweighted),
        cmocka_unit_test(test_wrong_edges),        cmocka_unit_test(test_l1_fixed_point),
        cmocka_unit_test(test_l1_ties_converge),
        cmocka_unit_test(test_disconnected_groups),
        cmocka_unit_test(test_isolated_tiles),     cmocka_unit_test(test_outliers_reported),
        cmocka_unit_test(test_pair_direction),     cmocka_unit_test(test_errors),             cmocka_unit_test(test_weights_and_parse),
        cmocka_unit_test(test_solve_file),         cmocka_unit_test(test_wells_parallel),
        cmocka_unit_test(test_confidence_zero_pairs),
        cmocka_unit_test(test_well_error_without_ts_error),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
