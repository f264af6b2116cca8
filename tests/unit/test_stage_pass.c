/* The stage model's pass inside estimate, on a simulated 7x7 plate of
 * 128-px tiles, overlap 24, jitter 6 (a good part of the overlap: every
 * pair is redone, and some are replaced), 10% blank:
 * - it reports progress through the caller's callback, as the first pass
 *   does: "reregister" events counting up to its total, after the
 *   "register" ones (it reported none);
 * - the shifts file is the same bytes on 1 and 2 threads, and with a
 *   cache too small to keep the plate's tiles for the pass (it then reads
 *   them again through a cache of its own);
 * - with the default cache the first pass keeps its tiles for the pass:
 *   no tile is decoded twice (tile_reads counts both passes), but for the
 *   content check of the tiles without a pair (content_reads);
 * - on a plate with little jitter, where most pairs are confident, the
 *   first pass keeps only the tiles of the pairs the pass may redo
 *   (ts_stage_may_redo): the cache's peak stays under the whole plate, and
 *   the file is the same bytes as when nothing is kept;
 * - the overlap probes (a wrong --overlap) keep nothing: their cache's
 *   peak and reads are the same as without the stage model;
 * - ts_tile_cache_add_uses: a use added keeps an idle tile, one given
 *   back drops it;
 * - under 2 ranks (threads, thread_ranks.h) each pair is redone by the rank
 *   that registered it in the first pass (ts_stage_pair.rank, whose tiles
 *   it kept): with every pair to redo in rank 0's share, rank 1 reads no
 *   tile (an even split of the jobs had it read half of them), and both
 *   ranks end with one process's results;
 * - a weak pair outside the window that the window search cannot replace
 *   (its tile blank) is refused: unmatched, confidence 0, counted; so is a
 *   confident one far outside it that no loop of pairs runs through; a
 *   slipped tile's confident pairs, which close their loops, stay, and so
 *   does a weak pair inside the window. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/fs.h"
#include "common/pool.h"
#include "register/register.h"
#include "register/stage_model.h"
#include "register/tile_cache.h"
#include "scratch_dir.h"
#include "tessera/tessera.h"
#include "thread_ranks.h"

static char plate[600], calm[600];

/* A grid x grid plate of tile-px tiles. */
static ts_status simulate_plate(const char *out, int grid, int tile, int overlap, int jitter, double blank,
                                uint64_t seed) {
    ts_simulate_options so;
    ts_simulate_options_init(&so);
    so.output = out;
    so.grid_cols = so.grid_rows = grid;
    so.tile_h = so.tile_w = tile;
    so.overlap = overlap;
    so.jitter = jitter;
    so.blank_fraction = blank;
    so.seed = seed;
    so.threads = 2;
    ts_error err;
    return ts_simulate(&so, &err);
}

static int setup(void **state) {
    (void)state;
    if (scratch_setup("test_stage_pass")) return -1;
    snprintf(plate, sizeof plate, "%s/plate.zarr", scratch_dir);
    snprintf(calm, sizeof calm, "%s/calm.zarr", scratch_dir);
    return simulate_plate(plate, 7, 128, 24, 6, 0.1, 6) == TS_OK && simulate_plate(calm, 8, 128, 24, 1, 0.1, 3) == TS_OK
               ? 0
               : -1;
}

static int teardown(void **state) {
    (void)state;
    scratch_teardown();
    return 0;
}

typedef struct events {
    int64_t reg, rereg;           /* events seen */
    int64_t rereg_last, rereg_total;
    bool rereg_before_reg, monotonic;
} events;

static void on_progress(void *user, const char *stage, int64_t done, int64_t total) {
    events *e = user;
    if (!strcmp(stage, "register")) {
        e->reg++;
        if (e->rereg) e->rereg_before_reg = true;
    } else if (!strcmp(stage, "reregister")) {
        if (done <= e->rereg_last || (e->rereg && total != e->rereg_total)) e->monotonic = false;
        e->rereg++;
        e->rereg_last = done;
        e->rereg_total = total;
    }
}

/* One estimate: its plate and the options the tests vary (cache 0: the
 * default). */
typedef struct run {
    const char *input;
    int overlap, threads;
    size_t cache;
    bool no_stage_model;
    events *ev;
} run;

/* Estimates into scratch_dir/name; returns the file's bytes (malloc'd), *n
 * their count. */
static void *estimate(const run *x, const char *name, ts_estimate_result *r, size_t *n) {
    char out[700];
    snprintf(out, sizeof out, "%s/%s", scratch_dir, name);
    ts_estimate_options eo;
    ts_estimate_options_init(&eo);
    eo.input = x->input;
    eo.output = out;
    eo.overlap_x = eo.overlap_y = x->overlap;
    eo.threads = x->threads;
    eo.accept_poor = true;
    eo.no_stage_model = x->no_stage_model;
    if (x->cache) eo.cache_bytes = x->cache;
    eo.progress = x->ev ? on_progress : NULL;
    eo.progress_user = x->ev;
    ts_error err;
    assert_int_equal(ts_estimate_run(&eo, r, &err), TS_OK);
    void *bytes = NULL;
    assert_int_equal(ts_read_file(out, &bytes, n, &err), TS_OK);
    return bytes;
}

static void test_pass(void **state) {
    (void)state;
    events ev = {0, 0, 0, 0, false, true};
    ts_estimate_result r1, r2, r3;
    size_t n1, n2, n3;
    void *one = estimate(&(run){plate, 24, 1, 0, false, &ev}, "s1.yaml", &r1, &n1);
    assert_true(r1.reregistered_pairs > 0); /* the pass changed something */
    assert_true(ev.reg > 0);
    assert_true(ev.rereg > 0);
    assert_true(ev.monotonic);
    assert_false(ev.rereg_before_reg);
    assert_int_equal(ev.rereg_last, ev.rereg_total); /* counted to its end */
    assert_int_equal(ev.rereg, ev.rereg_total);
    /* kept: none decoded again, not even for the content check
     * (content.h), which takes the tiles without a pair from the first
     * pass's cache */
    assert_int_equal(r1.tile_reads, r1.tiles);
    assert_int_equal(r1.content_reads, 0);

    void *two = estimate(&(run){plate, 24, 2, 0, false, NULL}, "s2.yaml", &r2, &n2);
    assert_int_equal(n1, n2);
    assert_memory_equal(one, two, n1);
    /* 8 uint16 tiles of 32 KB (held as stored): the plate's 49 do not
     * fit, the pass reads again. */
    void *small = estimate(&(run){plate, 24, 1, (size_t)8 * 128 * 128 * sizeof(uint16_t), false, NULL}, "s3.yaml", &r3, &n3);
    assert_int_equal(n1, n3);
    assert_memory_equal(one, small, n1);
    assert_true(r3.tile_reads > r3.tiles);
    /* nothing kept: the content check decodes the tiles it tests, the
     * isolated ones among them */
    assert_true(r3.content_reads >= r3.isolated_tiles && r3.isolated_tiles > 0);
    free(one), free(two), free(small);
    ts_estimate_result_free(&r1), ts_estimate_result_free(&r2), ts_estimate_result_free(&r3);
}

static void test_keeps_only_may_redo(void **state) {
    (void)state;
    ts_estimate_result r1, r2;
    size_t n1, n2;
    void *kept = estimate(&(run){calm, 24, 1, 0, false, NULL}, "calm1.yaml", &r1, &n1);
    void *reread = estimate(&(run){calm, 24, 1, (size_t)8 * 128 * 128 * sizeof(uint16_t), false, NULL}, "calm2.yaml", &r2, &n2);
    const size_t tile = (size_t)128 * 128 * sizeof(uint16_t); /* uint16 tiles, held as stored */
    /* Every tile kept would leave all 64 in the cache at the end of the
     * first pass (the peak the previous rule reached). */
    assert_true(r1.peak_cache_bytes > 0);
    assert_true((size_t)r1.peak_cache_bytes < (size_t)r1.tiles * tile);
    assert_true(r1.tile_reads >= r1.tiles);
    assert_int_equal(n1, n2);
    assert_memory_equal(kept, reread, n1);
    free(kept), free(reread);
    ts_estimate_result_free(&r1), ts_estimate_result_free(&r2);
}

/* A wrong --overlap (12 on a plate of 32-px tiles overlapping by 16) fails
 * the check, so the overlap probes register every pair again through
 * caches of their own, after the stage pass: they keep nothing for it, so
 * their cache (the one the result reports then) holds and reads the same
 * whether the first pass kept tiles or not. With the first pass's kept[] left
 * set, a probe pair that may_redo took one use more of its tiles in the
 * probe's cache, never given back: 19 tiles at the peak against 9. */
static void test_probes_keep_nothing(void **state) {
    (void)state;
    char wrong[600];
    snprintf(wrong, sizeof wrong, "%s/wrong.zarr", scratch_dir);
    assert_int_equal(simulate_plate(wrong, 8, 32, 16, 1, 0, 0), TS_OK);
    ts_estimate_result r[2];
    for (int k = 0; k < 2; k++) {
        size_t n;
        free(estimate(&(run){wrong, 12, 1, 0, k == 1, NULL}, "wrong.yaml", &r[k], &n));
        assert_int_not_equal(r[k].verdict, TS_VERDICT_OK); /* so the probes ran */
    }
    assert_true(r[0].peak_cache_bytes > 0);
    assert_int_equal(r[0].peak_cache_bytes, r[1].peak_cache_bytes);
    /* (less the content check's: the stage pass matched some of the
     * pairs, which leaves fewer tiles without one) */
    assert_int_equal(r[0].tile_reads - r[0].content_reads, r[1].tile_reads - r[1].content_reads);
    ts_estimate_result_free(&r[0]), ts_estimate_result_free(&r[1]);
}

static int loads;
static ts_status count_load(void *user, int64_t id, void **data, ts_dtype *dtype, size_t *bytes, ts_error *err) {
    *dtype = TS_FLOAT32;
    (void)user, (void)id, (void)err;
    loads++;
    *data = calloc(16, sizeof(float));
    *bytes = 16 * sizeof(float);
    return TS_OK;
}

static void test_add_uses(void **state) {
    (void)state;
    const int uses[2] = {1, 1};
    ts_tile_cache *c = ts_tile_cache_create(2, uses, 1 << 20, count_load, NULL);
    assert_non_null(c);
    ts_samples d;
    loads = 0;
    /* Tile 0: a use added before its last release keeps it. */
    assert_int_equal(ts_tile_cache_get(c, 0, &d, NULL), TS_OK);
    ts_tile_cache_add_uses(c, 0, 1);
    ts_tile_cache_release(c, 0);
    assert_int_equal(ts_tile_cache_get(c, 0, &d, NULL), TS_OK);
    assert_int_equal(loads, 1);
    /* ... and one more given back while idle drops it. */
    ts_tile_cache_add_uses(c, 0, 1);
    ts_tile_cache_release(c, 0);
    ts_tile_cache_add_uses(c, 0, -1);
    assert_int_equal(ts_tile_cache_get(c, 0, &d, NULL), TS_OK);
    assert_int_equal(loads, 2);
    ts_tile_cache_release(c, 0);
    /* Tile 1 without: dropped at its last use, read again. */
    assert_int_equal(ts_tile_cache_get(c, 1, &d, NULL), TS_OK);
    ts_tile_cache_release(c, 1);
    ts_tile_cache_add_uses(c, 1, 1);
    assert_int_equal(ts_tile_cache_get(c, 1, &d, NULL), TS_OK);
    ts_tile_cache_release(c, 1);
    assert_int_equal(loads, 4);
    ts_tile_cache_destroy(c);
}

/* A 5 x 4 grid of H x W tiles cut from one smooth random image at a pitch
 * of W - 24 / H - 24 px, read through ranks_load (which counts, per rank,
 * the tiles it was asked for). */
enum { RG_COLS = 5, RG_ROWS = 4, RG_H = 96, RG_W = 128, RG_OV = 24 };
static float *rg_tiles[RG_COLS * RG_ROWS];
typedef struct rank_reads {
    int tiles[RG_COLS * RG_ROWS];
} rank_reads;

static ts_status ranks_load(void *user, int64_t id, void **data, ts_dtype *dtype, size_t *bytes, ts_error *err) {
    *dtype = TS_FLOAT32;
    (void)err;
    ((rank_reads *)user)->tiles[id]++;
    *bytes = (size_t)RG_H * RG_W * sizeof(float);
    *data = malloc(*bytes);
    if (!*data) return TS_ERR_NOMEM;
    memcpy(*data, rg_tiles[id], *bytes);
    return TS_OK;
}

static void make_grid_tiles(void) {
    const int ih = (RG_ROWS - 1) * (RG_H - RG_OV) + RG_H, iw = (RG_COLS - 1) * (RG_W - RG_OV) + RG_W;
    float *img = malloc((size_t)ih * (size_t)iw * sizeof *img);
    unsigned seed = 12345u;
    for (int i = 0; i < ih * iw; i++) {
        seed = seed * 1664525u + 1013904223u;
        img[i] = (float)(seed >> 8) / (float)(1u << 24) * 200.0f;
    }
    for (int y = 1; y < ih; y++) /* a little smoothing: texture over a few px */
        for (int x = 1; x < iw; x++)
            img[(size_t)y * iw + x] = 0.5f * img[(size_t)y * iw + x] +
                                      0.25f * (img[(size_t)(y - 1) * iw + x] + img[(size_t)y * iw + x - 1]);
    for (int gy = 0; gy < RG_ROWS; gy++)
        for (int gx = 0; gx < RG_COLS; gx++) {
            float *t = rg_tiles[gy * RG_COLS + gx] = malloc((size_t)RG_H * RG_W * sizeof *t);
            for (int y = 0; y < RG_H; y++)
                memcpy(t + (size_t)y * RG_W, img + (size_t)(gy * (RG_H - RG_OV) + y) * iw + gx * (RG_W - RG_OV),
                       RG_W * sizeof *t);
        }
    free(img);
}

/* The grid's pairs in canonical order (row by row; right, then below),
 * each matched at its true offset except the right pairs of row 0
 * (unmatched: the pass redoes them); the first half are rank 0's. */
static int64_t grid_pairs(ts_stage_pair *p) {
    int64_t n = 0;
    for (int gy = 0; gy < RG_ROWS; gy++)
        for (int gx = 0; gx < RG_COLS; gx++)
            for (int dir = 0; dir < 2; dir++) {
                if (dir == TS_PAIR_RIGHT ? gx + 1 >= RG_COLS : gy + 1 >= RG_ROWS) continue;
                ts_stage_pair *q = &p[n++];
                memset(q, 0, sizeof *q);
                q->dir = dir;
                q->line = dir == TS_PAIR_RIGHT ? gy : gx;
                q->ta = gy * RG_COLS + gx;
                q->tb = dir == TS_PAIR_RIGHT ? q->ta + 1 : q->ta + RG_COLS;
                q->res.dy = dir == TS_PAIR_RIGHT ? 0 : RG_H - RG_OV;
                q->res.dx = dir == TS_PAIR_RIGHT ? RG_W - RG_OV : 0;
                q->res.confidence = 0.8;
                q->res.ncc = 0.9;
                q->res.matched = !(dir == TS_PAIR_RIGHT && gy == 0);
                if (!q->res.matched) q->res.confidence = 0, q->res.ncc = 0;
            }
    return n;
}

/* Whether grid_pairs made q matched (all but row 0's right pairs). */
static bool grid_pairs_matched(const ts_stage_pair *q) { return !(q->dir == TS_PAIR_RIGHT && q->ta < RG_COLS); }

typedef struct rank_job {
    const ts_dist *dist;
    ts_stage_pair p[64];
    int64_t n;
    rank_reads reads;
    ts_stage_summary sum;
    ts_status st;
    const bool *blank; /* ts_stage_pass's */
} rank_job;

static void *redo_as_rank(void *user) {
    rank_job *j = user;
    ts_register_options reg;
    ts_register_options_init(&reg);
    ts_pool *pool = ts_pool_create(1);
    const ts_stage_pass ps = {RG_H, RG_W, &reg, pool, RG_COLS * RG_ROWS, NULL, 64u << 20, ranks_load, NULL, &j->reads,
                              j->dist, NULL, NULL, j->blank};
    ts_error err;
    j->st = ts_stage_reregister(&ps, j->p, j->n, &j->sum, &err);
    ts_pool_destroy(pool);
    return NULL;
}

static void test_ranks_redo_their_own_pairs(void **state) {
    (void)state;
    make_grid_tiles();
    /* One process: the reference. */
    static rank_job one, two[2];
    one.n = grid_pairs(one.p);
    redo_as_rank(&one);
    assert_int_equal(one.st, TS_OK);
    assert_int_equal(one.sum.redone, RG_COLS - 1);
    assert_true(one.sum.replaced >= 1); /* the row-0 pairs found again */
    /* Two ranks, the pairs to redo all in rank 0's half. */
    thread_ranks w;
    thread_ranks_init(&w, 2);
    pthread_t th[2];
    for (int r = 0; r < 2; r++) {
        two[r].dist = thread_ranks_dist(&w, r);
        two[r].n = grid_pairs(two[r].p);
        for (int64_t i = 0; i < two[r].n; i++) two[r].p[i].rank = i < two[r].n / 2 ? 0 : 1;
        assert_int_equal(pthread_create(&th[r], NULL, redo_as_rank, &two[r]), 0);
    }
    for (int r = 0; r < 2; r++) pthread_join(th[r], NULL);
    thread_ranks_free(&w);
    int reads[2] = {0, 0};
    for (int r = 0; r < 2; r++) {
        assert_int_equal(two[r].st, TS_OK);
        for (int t = 0; t < RG_COLS * RG_ROWS; t++) reads[r] += two[r].reads.tiles[t];
        /* every rank has every result, one process's */
        for (int64_t i = 0; i < one.n; i++) {
            assert_memory_equal(&two[r].p[i].res, &one.p[i].res, sizeof one.p[i].res);
            assert_int_equal(two[r].p[i].replaced, one.p[i].replaced);
        }
        assert_int_equal(two[r].sum.replaced, one.sum.replaced);
    }
    print_message("tiles read: one process %d, rank 0 %d, rank 1 %d\n", RG_COLS, reads[0], reads[1]);
    assert_int_equal(reads[0], RG_COLS); /* row 0's tiles, once each */
    assert_int_equal(reads[1], 0);
    for (int t = 0; t < RG_COLS * RG_ROWS; t++) free(rg_tiles[t]);
}

/* A tile the content check found blank (ts_stage_pass.blank): none of its
 * pairs is searched again, and it is never read; the others are redone as
 * before. Row 0's four right pairs are unmatched; tile 2 takes two. */
static void test_blank_tiles_not_redone(void **state) {
    (void)state;
    make_grid_tiles();
    static rank_job all, skip;
    all.n = grid_pairs(all.p);
    redo_as_rank(&all);
    bool blank[RG_COLS * RG_ROWS] = {false};
    blank[2] = true;
    skip.n = grid_pairs(skip.p);
    skip.blank = blank;
    redo_as_rank(&skip);
    assert_int_equal(all.st, TS_OK);
    assert_int_equal(skip.st, TS_OK);
    assert_int_equal(all.sum.redone, RG_COLS - 1);
    assert_int_equal(skip.sum.redone, RG_COLS - 3);
    assert_int_equal(skip.reads.tiles[2], 0);
    assert_true(all.reads.tiles[2] > 0);
    for (int64_t i = 0; i < skip.n; i++) {
        const ts_stage_pair *q = &skip.p[i];
        if (q->ta == 2 || q->tb == 2) {
            assert_false(q->replaced);
            assert_int_equal(q->res.matched, grid_pairs_matched(q));
        } else {
            assert_memory_equal(&q->res, &all.p[i].res, sizeof q->res);
            assert_int_equal(q->replaced, all.p[i].replaced);
        }
    }
    assert_true(skip.sum.replaced >= 1);
    for (int t = 0; t < RG_COLS * RG_ROWS; t++) free(rg_tiles[t]);
}

/* The grid with two blank tiles, which the window search cannot place:
 * the last, whose right pair (from the left) measured 60 px off at
 * confidence 0.3 and whose lower pair (from above) 60 px off at 0.8; and
 * tile 7 (inside the grid), slipped: its four pairs 60 px off in y, all
 * at 0.8, agreeing with each other. One weak pair elsewhere is 1 px off
 * (inside the window). */
static void test_refuses_outlying(void **state) {
    (void)state;
    make_grid_tiles();
    const int last = RG_COLS * RG_ROWS - 1, slipped = 7;
    for (int i = 0; i < RG_H * RG_W; i++) rg_tiles[last][i] = rg_tiles[slipped][i] = 100.0f;
    static rank_job j;
    memset(&j, 0, sizeof j);
    j.n = grid_pairs(j.p);
    int weak = -1, lone = -1, inside = -1;
    for (int64_t i = 0; i < j.n; i++) {
        ts_stage_pair *q = &j.p[i];
        q->res.matched = true, q->res.confidence = 0.8, q->res.ncc = 0.9; /* row 0 matched too */
        if (q->tb == last && q->dir == TS_PAIR_RIGHT) weak = (int)i;
        if (q->tb == last && q->dir == TS_PAIR_BELOW) lone = (int)i;
        if (q->ta == 11 && q->dir == TS_PAIR_RIGHT) inside = (int)i;
        if (q->tb == slipped) q->res.dy += 60;
        if (q->ta == slipped) q->res.dy -= 60;
    }
    assert_true(weak >= 0 && lone >= 0 && inside >= 0);
    j.p[weak].res.dx += 60, j.p[weak].res.confidence = 0.3, j.p[weak].res.ncc = 0.4;
    j.p[lone].res.dy += 60;
    j.p[inside].res.dx += 1, j.p[inside].res.confidence = 0.3;
    ts_stage_pair before[64];
    memcpy(before, j.p, sizeof before);
    redo_as_rank(&j);
    assert_int_equal(j.st, TS_OK);
    /* the weak one, and the confident one its refusal leaves alone */
    for (int k = 0; k < 2; k++) {
        const ts_stage_pair *q = &j.p[k ? lone : weak];
        assert_true(q->refused);
        assert_false(q->res.matched);
        assert_true(q->res.confidence == 0);
    }
    assert_int_equal(j.sum.refused, 2);
    /* the slipped tile's pairs (loops through them close) and the weak one
     * inside the window stay as they were */
    for (int64_t i = 0; i < j.n; i++) {
        if (i == weak || i == lone) continue;
        assert_false(j.p[i].refused);
        assert_true(j.p[i].res.matched);
        if (j.p[i].ta == slipped || j.p[i].tb == slipped)
            assert_memory_equal(&j.p[i].res, &before[i].res, sizeof before[i].res);
    }
    for (int t = 0; t < RG_COLS * RG_ROWS; t++) free(rg_tiles[t]);
}

/* The grid with tile 13's pixels replaced by unrelated content of the
 * same texture: its left pair, weak (0.3) at 3 px from where the stage put
 * it (inside the window), is redone, its first result is no match in the
 * window's strips, and nothing better is found there: refused
 * (redo_one: ts_reregister_supports). The tile's other pairs are confident (not
 * redone) and stay. */
static void test_refuses_unsupported(void **state) {
    (void)state;
    make_grid_tiles();
    const int other = 13;
    unsigned seed = 777u;
    float *t = rg_tiles[other];
    for (int i = 0; i < RG_H * RG_W; i++) {
        seed = seed * 1664525u + 1013904223u;
        t[i] = (float)(seed >> 8) / (float)(1u << 24) * 200.0f;
    }
    for (int y = 1; y < RG_H; y++)
        for (int x = 1; x < RG_W; x++)
            t[y * RG_W + x] = 0.5f * t[y * RG_W + x] + 0.25f * (t[(y - 1) * RG_W + x] + t[y * RG_W + x - 1]);
    static rank_job j;
    memset(&j, 0, sizeof j);
    j.n = grid_pairs(j.p);
    int weak = -1;
    for (int64_t i = 0; i < j.n; i++) {
        ts_stage_pair *q = &j.p[i];
        q->res.matched = true, q->res.confidence = 0.8, q->res.ncc = 0.9;
        if (q->tb == other && q->dir == TS_PAIR_RIGHT) weak = (int)i;
    }
    assert_true(weak >= 0);
    j.p[weak].res.dx += 3, j.p[weak].res.confidence = 0.3, j.p[weak].res.ncc = 0.3;
    redo_as_rank(&j);
    assert_int_equal(j.st, TS_OK);
    assert_int_equal(j.sum.redone, 1);
    assert_true(j.p[weak].refused);
    assert_false(j.p[weak].res.matched);
    assert_int_equal(j.sum.refused, 1);
    for (int64_t i = 0; i < j.n; i++)
        if (i != weak) assert_true(j.p[i].res.matched && !j.p[i].refused);
    for (int k = 0; k < RG_COLS * RG_ROWS; k++) free(rg_tiles[k]);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_pass),
        cmocka_unit_test(test_keeps_only_may_redo),
        cmocka_unit_test(test_probes_keep_nothing),
        cmocka_unit_test(test_add_uses),
        cmocka_unit_test(test_ranks_redo_their_own_pairs),
        cmocka_unit_test(test_blank_tiles_not_redone),
        cmocka_unit_test(test_refuses_outlying),
        cmocka_unit_test(test_refuses_unsupported),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
