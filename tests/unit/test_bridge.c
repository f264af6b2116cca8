/* Diagonal bridges (register/bridge.h), on a synthetic plate of 5 x 4
 * tiles of 64 px (overlap 16, jitter +-2) cut from one textured specimen:
 * - the grid neighbours of tile (2, 3) (bottom row) hold unrelated
 *   content of the same texture (harder than a blank tile's noise: its
 *   corners correlate by chance), and so do three tiles at each top
 *   corner: the lone tile's two diagonal neighbours are tried and
 *   accepted, within 0.3 px of the true offsets; the two corner tiles
 *   (no grid neighbour in the main group) are tried with their diagonal
 *   one and never accepted over 20 draws of their content; the unrelated
 *   tiles beside the main group are not tried;
 * - the same pairs and results with one worker and with three;
 * - a plate whose tiles are all in one group tries nothing and reads no
 *   tile;
 * - a model without one of its directions tries nothing. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "register/bridge.h"

enum { T = 64, OVERLAP = 16, PITCH = T - OVERLAP, COLS = 5, ROWS = 4, N = COLS * ROWS, JITTER = 2 };

typedef struct plate {
    float *tile[N];
    double origin[N][2];
    bool blank[N];
    int loads;
} plate;

static unsigned lcg(unsigned *s) { return *s = *s * 1664525u + 1013904223u; }

static double uniform(unsigned *s) { return (double)(lcg(s) >> 8) / (double)(1u << 24); }

/* A specimen with detail at several scales (blurred noise), grey level
 * around 100; tiles cut at jittered grid origins; tile id = row * COLS + col. */
static void make_plate(plate *p, const bool *blank, unsigned noise_seed) {
    const int ih = ROWS * PITCH + OVERLAP + 2 * JITTER + 2, iw = COLS * PITCH + OVERLAP + 2 * JITTER + 2;
    float *img = malloc((size_t)ih * (size_t)iw * sizeof *img), *tmp = malloc((size_t)ih * (size_t)iw * sizeof *tmp);
    unsigned s = 12345u;
    for (int i = 0; i < ih * iw; i++) img[i] = (float)uniform(&s);
    ts_gaussian_blur(img, ih, iw, 1.5, tmp);
    for (int i = 0; i < ih * iw; i++) img[i] = 100.0f + 400.0f * (img[i] - 0.5f);
    unsigned js = 777u, ns = noise_seed;
    memset(p, 0, sizeof *p);
    for (int r = 0; r < ROWS; r++)
        for (int c = 0; c < COLS; c++) {
            const int id = r * COLS + c;
            const int oy = JITTER + r * PITCH + (int)(lcg(&js) % (2 * JITTER + 1)) - JITTER;
            const int ox = JITTER + c * PITCH + (int)(lcg(&js) % (2 * JITTER + 1)) - JITTER;
            p->origin[id][0] = oy, p->origin[id][1] = ox;
            p->blank[id] = blank[id];
            float *t = p->tile[id] = malloc((size_t)T * T * sizeof *t);
            if (blank[id]) { /* unrelated content of the same texture */
                float *u = malloc((size_t)T * T * sizeof *u);
                for (int i = 0; i < T * T; i++) t[i] = (float)uniform(&ns);
                ts_gaussian_blur(t, T, T, 1.5, u);
                for (int i = 0; i < T * T; i++) t[i] = 100.0f + 400.0f * (t[i] - 0.5f);
                free(u);
                continue;
            }
            for (int y = 0; y < T; y++)
                for (int x = 0; x < T; x++) t[y * T + x] = img[(size_t)(oy + y) * (size_t)iw + (size_t)(ox + x)];
        }
    free(img), free(tmp);
}

static void free_plate(plate *p) {
    for (int i = 0; i < N; i++) free(p->tile[i]);
}

static ts_status load(void *user, int64_t id, void **data, ts_dtype *dtype, size_t *bytes, ts_error *err) {
    *dtype = TS_FLOAT32;
    (void)err;
    plate *p = user;
    *bytes = (size_t)T * T * sizeof(float);
    *data = malloc(*bytes);
    memcpy(*data, p->tile[id], *bytes);
    p->loads++;
    return TS_OK;
}

/* The model the stage pass would fit to this grid. */
static ts_stage_model model(void) {
    ts_stage_model m;
    memset(&m, 0, sizeof m);
    for (int d = 0; d < 2; d++) {
        ts_stage_dir *md = &m.dir[d];
        md->valid = true;
        md->trusted = md->inliers = 12;
        md->offset[0] = d ? PITCH : 0, md->offset[1] = d ? 0 : PITCH;
        md->spread[0] = md->spread[1] = 1.5;
        md->radius[0] = md->radius[1] = 4;
        md->overlap = OVERLAP;
    }
    return m;
}

/* Runs the pass with the grid pairs between tiles that are not blank
 * trusted; returns the pairs tried (*n). */
static ts_bridge *run(plate *p, int threads, const ts_stage_model *m, int64_t *n, int64_t *reads) {
    static int cell[N][2];
    static int64_t pairs[2 * N][2];
    static bool trusted[2 * N];
    int np = 0;
    for (int r = 0; r < ROWS; r++)
        for (int c = 0; c < COLS; c++) {
            const int id = r * COLS + c;
            cell[id][0] = c, cell[id][1] = r;
            const int nb[2] = {c + 1 < COLS ? id + 1 : -1, r + 1 < ROWS ? id + COLS : -1};
            for (int k = 0; k < 2; k++)
                if (nb[k] >= 0) {
                    pairs[np][0] = id, pairs[np][1] = nb[k];
                    trusted[np++] = !p->blank[id] && !p->blank[nb[k]];
                }
        }
    ts_register_options reg;
    ts_register_options_init(&reg);
    ts_pool *pool = ts_pool_create(threads);
    const int64_t base = 0;
    const ts_bridge_pass bp = {T, T, &reg, m, pool, 1, &base, N, (const int(*)[2])cell, NULL,
                               (const int64_t(*)[2])pairs, trusted, np, NULL, (size_t)1 << 26, load, NULL, p};
    ts_bridge *out = NULL;
    ts_error err;
    assert_int_equal(ts_bridge_tiles(&bp, &out, n, reads, &err), TS_OK);
    ts_pool_destroy(pool);
    return out;
}

/* Tiles of unrelated content: the lone tile (2, 3)'s grid neighbours,
 * and three at each top corner, whose corner tile has no grid neighbour
 * in the main group but a diagonal one, (1, 1) and (3, 1). */
static bool is_unrelated(int id) {
    static const int u[] = {3 * COLS + 1, 3 * COLS + 3, 2 * COLS + 2, 0, 1, COLS, 4, 3, COLS + 4};
    for (size_t k = 0; k < sizeof u / sizeof *u; k++)
        if (id == u[k]) return true;
    return false;
}

static void test_isolated_tile_bridged(void **state) {
    (void)state;
    bool blank[N] = {false};
    for (int i = 0; i < N; i++) blank[i] = is_unrelated(i);
    const int lonely = 3 * COLS + 2;
    int accepted_blank = 0;
    for (unsigned draw = 0; draw < 20; draw++) {
        plate p;
        make_plate(&p, blank, 99u + draw);
        const ts_stage_model m = model();
        int64_t n1, n3, reads;
        ts_bridge *b1 = run(&p, 1, &m, &n1, &reads);
        ts_bridge *b3 = run(&p, 3, &m, &n3, &reads);
        /* The lone tile's two diagonals and the top corner tiles' one
         * each: a tile with a grid neighbour in the main group is not
         * tried (its pairs with it failed: blank, or bad overlaps). */
        assert_int_equal(n1, 4);
        assert_int_equal(n1, n3);
        assert_memory_equal(b1, b3, (size_t)n1 * sizeof *b1);
        int lonely_ok = 0;
        for (int64_t i = 0; i < n1; i++) {
            const ts_bridge *q = &b1[i];
            assert_true(p.origin[q->a][0] < p.origin[q->b][0]); /* a is the upper tile */
            if (p.blank[q->a] || p.blank[q->b]) {
                accepted_blank += q->res.matched;
                continue;
            }
            assert_true(q->a == lonely || q->b == lonely);
            assert_true(q->res.matched);
            const double ey = p.origin[q->b][0] - p.origin[q->a][0], ex = p.origin[q->b][1] - p.origin[q->a][1];
            assert_true(fabs(q->res.dy - ey) < 0.3);
            assert_true(fabs(q->res.dx - ex) < 0.3);
            lonely_ok++;
        }
        assert_int_equal(lonely_ok, 2);
        free(b1), free(b3);
        free_plate(&p);
    }
    assert_int_equal(accepted_blank, 0);
}

static void test_one_group_tries_nothing(void **state) {
    (void)state;
    bool blank[N] = {false};
    plate p;
    make_plate(&p, blank, 1u);
    const ts_stage_model m = model();
    int64_t n, reads;
    ts_bridge *b = run(&p, 2, &m, &n, &reads);
    assert_int_equal(n, 0);
    assert_int_equal(reads, 0);
    assert_int_equal(p.loads, 0);
    free(b);
    free_plate(&p);
}

static void test_no_model_tries_nothing(void **state) {
    (void)state;
    bool blank[N] = {false};
    for (int i = 0; i < N; i++) blank[i] = is_unrelated(i);
    plate p;
    make_plate(&p, blank, 1u);
    ts_stage_model m = model();
    m.dir[TS_PAIR_BELOW].valid = false;
    int64_t n, reads;
    ts_bridge *b = run(&p, 2, &m, &n, &reads);
    assert_int_equal(n, 0);
    assert_int_equal(p.loads, 0);
    free(b);
    free_plate(&p);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_isolated_tile_bridged),
        cmocka_unit_test(test_one_group_tries_nothing),
        cmocka_unit_test(test_no_model_tries_nothing),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
