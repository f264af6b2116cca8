/* The loop check of the global solve (src/solve/loops.c): wrong pairs at
 * full confidence that L1 alone follows are found by the loops of the grid
 * and down-weighted; no right pair is; pairs without a complete loop keep
 * their weight; the answer does not depend on the pair order or direction
 * nor on the thread count; --loop-check off is the solve without it. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "shifts/shifts.h"
#include "solve/loops.h"
#include "solve/solve.h"

enum { COLS = 20, ROWS = 20, N = COLS * ROWS };

typedef struct plate {
    int gx[N], gy[N];
    double truth[N][2];
    ts_shift_pair pairs[2 * N];
    bool wrong[2 * N];
    int npairs;
} plate;

static uint64_t rng_state;
static double urand(void) { /* xorshift64*, deterministic */
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return (double)((rng_state * 2685821657736338717ull) >> 11) / 9007199254740992.0;
}
static double nrand(void) { return sqrt(-2 * log(urand() + 1e-12)) * cos(2 * M_PI * urand()); }

static int tile(int x, int y) { return y * COLS + x; }

/* Exact pairs (noise 0) or noisy ones, every confidence 0.9. */
static void make_plate(plate *p, double noise, uint64_t seed) {
    memset(p, 0, sizeof *p);
    rng_state = seed * 0x9E3779B97F4A7C15ull + 1;
    for (int y = 0; y < ROWS; y++)
        for (int x = 0; x < COLS; x++) {
            int i = tile(x, y);
            p->gx[i] = x, p->gy[i] = y;
            p->truth[i][0] = 900.0 * y + 25 * (2 * urand() - 1);
            p->truth[i][1] = 1100.0 * x + 25 * (2 * urand() - 1);
        }
    for (int y = 0; y < ROWS; y++)
        for (int x = 0; x < COLS; x++)
            for (int right = 1; right >= 0; right--) {
                if (right ? x + 1 >= COLS : y + 1 >= ROWS) continue;
                int a = tile(x, y), b = right ? tile(x + 1, y) : tile(x, y + 1);
                ts_shift_pair q = {.a = a, .b = b, .confidence = 0.9, .ry = NAN, .rx = NAN};
                q.dy = p->truth[b][0] - p->truth[a][0] + noise * nrand();
                q.dx = p->truth[b][1] - p->truth[a][1] + noise * nrand();
                p->pairs[p->npairs++] = q;
            }
}

static int find_pair(const plate *p, int a, int b) {
    for (int e = 0; e < p->npairs; e++)
        if (p->pairs[e].a == a && p->pairs[e].b == b) return e;
    fail_msg("no pair %d -> %d", a, b);
    return -1;
}

/* Makes the pair from (x, y) to its right (right) or lower neighbour wrong
 * by (ey, ex) px, at full confidence. */
static void spoil(plate *p, int x, int y, bool right, double ey, double ex) {
    int e = find_pair(p, tile(x, y), right ? tile(x + 1, y) : tile(x, y + 1));
    p->pairs[e].dy += ey;
    p->pairs[e].dx += ex;
    p->wrong[e] = true;
}

/* Wrong pairs that plain L1 follows: around the block of tiles (10, 10)
 * and (11, 10) four of its six pairs are wrong in about the same direction
 * (the block looks 50-80 px down-right); on the top border the two lower
 * pairs of (5, 0) and (6, 0) with their left and right pairs right; and a
 * few lone wrong pairs. */
static void spoil_plate(plate *p) {
    spoil(p, 10, 9, false, 60, 40);
    spoil(p, 11, 9, false, 80, 10);
    spoil(p, 10, 10, false, -70, -30);
    spoil(p, 11, 10, false, -50, -45);
    spoil(p, 5, 0, false, 90, -60);
    spoil(p, 6, 0, false, -40, 120);
    spoil(p, 3, 15, true, 55, 75);
    spoil(p, 16, 4, false, -120, 20);
    spoil(p, 15, 15, true, 30, -90);
    spoil(p, 15, 15, false, 100, 60);
}

static ts_solve_problem problem(const plate *p) {
    return (ts_solve_problem){.ntiles = N, .gx = p->gx, .gy = p->gy, .pitch_y = 900, .pitch_x = 1100,
                              .npairs = p->npairs, .pairs = p->pairs};
}

static void solve_ok(const ts_solve_problem *pr, const ts_solve_options *o, ts_solve_result *r) {
    ts_error err = {0};
    if (ts_solve_positions(pr, o, r, &err) != TS_OK) fail_msg("solve failed: %s", err.message);
}

/* The largest error of a tile against the truth, the common translation
 * (the gauge) removed; *worst: that tile. */
static double max_error(const plate *p, const ts_solve_result *r, int *worst) {
    double my = 0, mx = 0, max = 0;
    for (int i = 0; i < N; i++) my += r->position[i][0] - p->truth[i][0], mx += r->position[i][1] - p->truth[i][1];
    my /= N, mx /= N;
    for (int i = 0; i < N; i++) {
        double e = hypot(r->position[i][0] - p->truth[i][0] - my, r->position[i][1] - p->truth[i][1] - mx);
        if (e > max) max = e, *worst = i;
    }
    return max;
}

/* Of the pairs the last condemned() condemned, those the stage model chose. */
static int last_by_stage;

/* Which pairs the loop check condemns with weights w (copied). */
static int condemned_w(const plate *p, const double *w_in, bool *out) {
    int a[2 * N], b[2 * N];
    double d[2 * N][2], w[2 * N];
    unsigned char usable[2 * N];
    for (int e = 0; e < p->npairs; e++) {
        a[e] = p->pairs[e].a, b[e] = p->pairs[e].b;
        d[e][0] = p->pairs[e].dy, d[e][1] = p->pairs[e].dx;
        usable[e] = 1;
        w[e] = w_in[e];
    }
    int n = ts_solve_loop_check(N, p->gx, p->gy, p->npairs, a, b, usable, (const double(*)[2])d, w, &last_by_stage);
    for (int e = 0; e < p->npairs; e++) {
        out[e] = w[e] < w_in[e];
        if (out[e]) assert_true(w[e] == w_in[e] * TS_LOOP_FACTOR); /* down-weighted, never 0 */
    }
    return n;
}

/* Which pairs ts_solve_loop_check condemns (w < 1 of w = 1). */
static int condemned(const plate *p, bool *out) {
    double w[2 * N];
    for (int e = 0; e < p->npairs; e++) w[e] = 1.0;
    return condemned_w(p, w, out);
}

/* Exact pairs and wrong ones at full confidence: with the loop check every
 * tile is exact, without it L1 follows the wrong pairs around the block. */
static void test_loops_find_wrong_pairs(void **state) {
    (void)state;
    static plate p;
    make_plate(&p, 0, 1);
    spoil_plate(&p);
    ts_solve_problem pr = problem(&p);
    for (int s = 0; s < 2; s++) {
        ts_solve_options o;
        ts_solve_options_init(&o);
        assert_true(o.loop_check); /* the default */
        o.solver = s ? TS_SOLVER_L2 : TS_SOLVER_L1;
        ts_solve_result on, off;
        solve_ok(&pr, &o, &on);
        o.loop_check = false;
        solve_ok(&pr, &o, &off);
        int worst_on = 0, worst_off = 0;
        double e_on = max_error(&p, &on, &worst_on), e_off = max_error(&p, &off, &worst_off);
        print_message("%s: worst tile %.2g px with the loop check (%d pairs down-weighted), %.3g px (tile %d, %d) "
                      "without\n",
                      s ? "l2" : "l1", e_on, on.loop_downweighted, e_off, p.gx[worst_off], p.gy[worst_off]);
        assert_int_equal(on.loop_downweighted, 10);
        assert_int_equal(off.loop_downweighted, 0);
        /* The down-weighted pairs still pull, with a millionth of their
         * weight: under L1 a force of 1e-6 w per pair against the right
         * pairs' Huber stiffness w / 0.5 px (the block's four wrong pairs
         * against its two right ones: 1.4e-6 px); under L2 in proportion
         * to their errors of 50-140 px. */
        if (e_on > (s ? 1e-3 : 1e-5)) fail_msg("with the loop check a tile is %g px off", e_on);
        if (e_off < 5) fail_msg("without the loop check the worst tile is only %g px off", e_off);
        /* The wrong pairs are the outliers, and only they. */
        for (int e = 0; e < p.npairs; e++)
            if (on.outlier[e] != p.wrong[e]) fail_msg("pair %d: outlier %d, wrong %d", e, on.outlier[e], p.wrong[e]);
        ts_solve_result_free(&on);
        ts_solve_result_free(&off);
    }
    bool c[2 * N];
    assert_int_equal(condemned(&p, c), 10);
    for (int e = 0; e < p.npairs; e++)
        if (c[e] != p.wrong[e]) fail_msg("pair %d: condemned %d, wrong %d", e, c[e], p.wrong[e]);
}

/* Noisy pairs (0.3 px), no wrong ones: nothing is down-weighted, and the
 * answer is the one without the check, byte for byte. With wrong pairs the
 * loops' tolerance follows the noise: they are found, right ones are not. */
static void test_loops_noise(void **state) {
    (void)state;
    static plate p;
    make_plate(&p, 0.3, 2);
    ts_solve_problem pr = problem(&p);
    ts_solve_options o;
    ts_solve_options_init(&o);
    ts_solve_result on, off;
    solve_ok(&pr, &o, &on);
    o.loop_check = false;
    solve_ok(&pr, &o, &off);
    assert_int_equal(on.loop_downweighted, 0);
    assert_memory_equal(on.position, off.position, sizeof *on.position * N);
    assert_int_equal(on.iterations, off.iterations);
    ts_solve_result_free(&on);
    ts_solve_result_free(&off);

    spoil_plate(&p);
    bool c[2 * N];
    assert_int_equal(condemned(&p, c), 10);
    for (int e = 0; e < p.npairs; e++)
        if (c[e] != p.wrong[e]) fail_msg("noisy: pair %d: condemned %d, wrong %d", e, c[e], p.wrong[e]);
}

/* Leaves out every pair of tile (x, y) (a blank tile: unmatched). */
static void blank_tile(plate *p, int x, int y) {
    int t = tile(x, y), m = 0;
    for (int e = 0; e < p->npairs; e++)
        if (p->pairs[e].a != t && p->pairs[e].b != t) p->wrong[m] = p->wrong[e], p->pairs[m++] = p->pairs[e];
    p->npairs = m;
}

/* Loops are the faces of the pair graph: a cell with its four pairs, or
 * the ring of pairs around a blank tile (its cells joined through its
 * unmatched pairs); a face that reaches past the plate is none, and a pair
 * in no loop gives no information. */
static void test_loops_missing_pairs(void **state) {
    (void)state;
    static plate p;
    bool c[2 * N];
    make_plate(&p, 0, 3);
    /* (8, 8) blank: (8, 7) -> (9, 7) keeps one complete cell, (8, 6),
     * whose other pairs each close another loop: it is found. */
    blank_tile(&p, 8, 8);
    spoil(&p, 8, 7, true, 70, 70);
    assert_int_equal(condemned(&p, c), 1);
    for (int e = 0; e < p.npairs; e++)
        if (c[e] != p.wrong[e]) fail_msg("pair %d: condemned %d, wrong %d", e, c[e], p.wrong[e]);
    /* (8, 6) blank as well: both cells of (8, 7) -> (9, 7) go through a
     * blank tile, and the rings of eight pairs around the two are its loops
     * now: both imply its error, and it is found (before faces it was not
     * judged). */
    blank_tile(&p, 8, 6);
    assert_int_equal(condemned(&p, c), 1);
    for (int e = 0; e < p.npairs; e++)
        if (c[e] != p.wrong[e]) fail_msg("two blank tiles: pair %d: condemned %d, wrong %d", e, c[e], p.wrong[e]);
    /* The corner pair (0, 0) -> (1, 0) with (0, 1) blank: its one cell is
     * joined through (0, 1)'s pairs to the outside of the plate, so it is
     * in no loop. Not judged: its weight is kept, and the solve is the one
     * without the check, byte for byte. */
    make_plate(&p, 0, 3);
    blank_tile(&p, 0, 1);
    spoil(&p, 0, 0, true, 70, 70);
    assert_int_equal(condemned(&p, c), 0);
    ts_solve_problem pr = problem(&p);
    ts_solve_options o;
    ts_solve_options_init(&o);
    ts_solve_result on, off;
    solve_ok(&pr, &o, &on);
    o.loop_check = false;
    solve_ok(&pr, &o, &off);
    assert_int_equal(on.loop_downweighted, 0);
    assert_memory_equal(on.position, off.position, sizeof *on.position * N);
    ts_solve_result_free(&on);
    ts_solve_result_free(&off);
}

/* What neither the loops nor the stage model can tell: a tile three of
 * whose four pairs are wrong (any of the four may be the right one: each
 * explains the loops as well) by less than the stage scatters (pair offsets
 * here vary by +-50 px, the errors are 15 px) keeps all four weights; two
 * pairs wrong by the same vector at one tile cancel in the cell they share,
 * which then vouches for them. Right pairs are never condemned in these
 * cases. */
static void test_loops_ambiguous(void **state) {
    (void)state;
    static plate p;
    make_plate(&p, 0, 5);
    spoil(&p, 6, 6, true, 0, 15);    /* (6, 6): right, */
    spoil(&p, 6, 6, false, 12, -9);  /* lower */
    spoil(&p, 5, 6, true, -14, 6);   /* and left pair wrong */
    spoil(&p, 14, 12, true, 0, -40); /* (14, 12)'s right and lower pairs */
    spoil(&p, 14, 12, false, 0, -40);
    bool c[2 * N];
    int n = condemned(&p, c);
    for (int e = 0; e < p.npairs; e++)
        if (c[e] && !p.wrong[e]) fail_msg("right pair %d condemned", e);
    assert_int_equal(n, 0);
}

/* Where the loops are ambiguous and the wrong pairs are gross, the stage
 * model decides (docs/solve.md, "Loop check"): a tile three of whose four
 * pairs are wrong, a border tile with two of its three, a corner tile with
 * one of its two. Each explanation of the loops implies offsets for the
 * tile's pairs; only the right one puts them all near their row's or
 * column's median. Every wrong pair is condemned, no right one, and the
 * solve is exact. Without the model none of the six was (the loops alone:
 * any of them may be the right one). */
static void test_loops_stage_model(void **state) {
    (void)state;
    static plate p;
    make_plate(&p, 0, 5);
    spoil(&p, 6, 6, true, 50, 80);    /* (6, 6): right, */
    spoil(&p, 6, 6, false, -90, 40);  /* lower */
    spoil(&p, 5, 6, true, 70, -60);   /* and left pair wrong */
    spoil(&p, 11, 0, true, -60, 45);  /* (11, 0) on the top border: left */
    spoil(&p, 12, 0, false, 85, 30);  /* (12, 0): and lower of three */
    spoil(&p, 0, 18, false, -40, -75); /* corner (0, 19): upper of two */
    bool c[2 * N];
    int n = condemned(&p, c);
    for (int e = 0; e < p.npairs; e++)
        if (c[e] != p.wrong[e]) fail_msg("pair %d: condemned %d, wrong %d", e, c[e], p.wrong[e]);
    assert_int_equal(n, 6);
    assert_int_equal(last_by_stage, 6);
    ts_solve_problem pr = problem(&p);
    for (int s = 0; s < 2; s++) {
        ts_solve_options o;
        ts_solve_options_init(&o);
        o.solver = s ? TS_SOLVER_L2 : TS_SOLVER_L1;
        ts_solve_result r;
        solve_ok(&pr, &o, &r);
        int worst = 0;
        double e = max_error(&p, &r, &worst);
        assert_int_equal(r.loop_downweighted, 6);
        assert_int_equal(r.stage_downweighted, 6);
        if (e > (s ? 1e-3 : 1e-5)) fail_msg("%s: tile (%d, %d) %g px off", s ? "l2" : "l1", p.gx[worst], p.gy[worst], e);
        ts_solve_result_free(&r);
    }
}

/* The corner tile (19, 19) 150 px right of where its row and column put
 * it (the plate's stage scatters by +-25 px), its right pair from (18, 19)
 * wrong by -150 px (it says the tile is where the stage model expects
 * it): the corner cell's two outer pairs each have that one loop, and
 * either explains it. The stage model picks the right lower pair (off its
 * column by 150 px); where the wrong pair
 * weighs a tenth or less of the right one (estimate's unfitted match), the
 * evidence decides first: the wrong one is condemned, not by the model. */
static void test_loops_weak_evidence(void **state) {
    (void)state;
    static plate p;
    make_plate(&p, 0, 5);
    const int t = tile(19, 19);
    p.truth[t][1] += 150;
    const int left = find_pair(&p, tile(18, 19), t), up = find_pair(&p, tile(19, 18), t);
    p.pairs[left].dx += 150, p.pairs[up].dx += 150; /* the truth */
    spoil(&p, 18, 19, true, 0, -150);
    double w[2 * N];
    bool c[2 * N];
    for (int e = 0; e < p.npairs; e++) w[e] = 1.0;
    assert_int_equal(condemned_w(&p, w, c), 1);
    assert_true(c[up] && !c[left]); /* the model's pick: the right pair */
    assert_int_equal(last_by_stage, 1);
    w[left] = 0.1;
    assert_int_equal(condemned_w(&p, w, c), 1);
    assert_true(c[left] && !c[up]);
    assert_int_equal(last_by_stage, 0);
    /* Within a factor of 5 the evidence does not decide. */
    w[left] = 0.3;
    condemned_w(&p, w, c);
    assert_true(c[up] && !c[left]);
}

/* A slipped row (row 12 150 px to the right of its neighbours: its right
 * pairs agree with each other, its upper and lower pairs are 150 px off
 * their columns' medians, all of them right) is not the stage model's to
 * judge: no pair of it is condemned, and a tile three of whose four pairs
 * are wrong there keeps all four weights (the right explanation puts its
 * vertical pairs as far off the columns as the slip). */
static void test_loops_stage_slipped_row(void **state) {
    (void)state;
    static plate p;
    make_plate(&p, 0, 6);
    for (int e = 0; e < p.npairs; e++) {
        int ya = p.gy[p.pairs[e].a], yb = p.gy[p.pairs[e].b];
        p.pairs[e].dx += (yb == 12) * 150.0 - (ya == 12) * 150.0;
    }
    for (int x = 0; x < COLS; x++) p.truth[tile(x, 12)][1] += 150;
    bool c[2 * N];
    assert_int_equal(condemned(&p, c), 0);
    spoil(&p, 10, 12, true, 60, -70);  /* (10, 12): right, */
    spoil(&p, 10, 12, false, -80, 50); /* lower */
    spoil(&p, 9, 12, true, 55, 90);    /* and left pair wrong */
    condemned(&p, c);
    for (int e = 0; e < p.npairs; e++)
        if (c[e] && !p.wrong[e]) fail_msg("right pair %d (%d -> %d) condemned", e, p.pairs[e].a, p.pairs[e].b);
    assert_int_equal(last_by_stage, 0);
}

/* The same answer whatever the order and direction of the pairs. */
static void test_loops_order(void **state) {
    (void)state;
    static plate p, q;
    make_plate(&p, 0.2, 6);
    spoil_plate(&p);
    q = p;
    /* Reversed order; every third pair listed from b to a. */
    for (int e = 0; e < p.npairs; e++) {
        ts_shift_pair s = p.pairs[p.npairs - 1 - e];
        q.wrong[e] = p.wrong[p.npairs - 1 - e];
        if (e % 3 == 0) {
            int t = s.a;
            s.a = s.b, s.b = t;
            s.dy = -s.dy, s.dx = -s.dx;
        }
        q.pairs[e] = s;
    }
    bool cp[2 * N], cq[2 * N];
    assert_int_equal(condemned(&p, cp), 10);
    assert_int_equal(condemned(&q, cq), 10);
    for (int e = 0; e < p.npairs; e++) {
        assert_int_equal(cp[p.npairs - 1 - e], cq[e]);
        assert_int_equal(cq[e], q.wrong[e]);
    }
}

/* Wells solved one at a time or three at once: the same bytes and counts. */
static ts_shifts *three_wells(void) {
    ts_shifts *s = ts_shifts_new();
    static plate p;
    for (int k = 0; k < 3; k++) {
        char name[8];
        snprintf(name, sizeof name, "A/%d", k + 1);
        int w = ts_shifts_add_well(s, name);
        make_plate(&p, 0.3, 10 + (uint64_t)k);
        spoil_plate(&p);
        for (int i = 0; i < N; i++) {
            char pos[16];
            snprintf(pos, sizeof pos, "%03d%03d", p.gx[i], p.gy[i]);
            ts_shifts_add_tile(s, w, pos);
        }
        for (int e = 0; e < p.npairs; e++)
            ts_shifts_add_pair(s, w, p.pairs[e].a, p.pairs[e].b, p.pairs[e].dy, p.pairs[e].dx,
                               p.pairs[e].confidence);
    }
    return s;
}

static void test_loops_threads(void **state) {
    (void)state;
    ts_shifts *a = three_wells(), *b = three_wells();
    ts_solve_options o;
    ts_solve_options_init(&o);
    ts_solve_summary sa, sb;
    ts_error err = {0};
    assert_int_equal(ts_solve_wells(a, 900, 1100, NULL, &o, 1, &sa, &err), TS_OK);
    assert_int_equal(ts_solve_wells(b, 900, 1100, NULL, &o, 3, &sb, &err), TS_OK);
    assert_int_equal(sa.loop_downweighted, 30);
    assert_int_equal(sb.loop_downweighted, 30);
    for (int w = 0; w < 3; w++)
        assert_memory_equal(a->wells[w].position, b->wells[w].position, sizeof(double) * 2 * a->wells[w].ntiles);
    ts_shifts_free(a);
    ts_shifts_free(b);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_loops_find_wrong_pairs), cmocka_unit_test(test_loops_noise),
        cmocka_unit_test(test_loops_missing_pairs),    cmocka_unit_test(test_loops_ambiguous),
        cmocka_unit_test(test_loops_order),            cmocka_unit_test(test_loops_threads),
        cmocka_unit_test(test_loops_stage_model),      cmocka_unit_test(test_loops_stage_slipped_row),
        cmocka_unit_test(test_loops_weak_evidence),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
