/* The fuse planner and pipeline: band alignment asserts, block sizing,
 * which tiles each band and block sees, and the scheduler's guarantees
 * (every strip loaded once per band, every block once, no stall under a
 * tiny budget, whatever the thread count). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/pool.h"
#include "fuse/pipeline.h"
#include "fuse/plan.h"

static fuse_layout layout(int64_t h, int64_t w, int chunk, int shard) {
    fuse_sizing s = {.canvas_h = h, .canvas_w = w, .C = 1, .tile_h = 100, .tile_w = 100,
                     .out_elem = 2, .chunk = chunk, .shard = shard,
                     .memory = (size_t)1 << 30};
    fuse_layout L;
    ts_error err;
    assert_int_equal(fuse_layout_init(&L, &s, &err), TS_OK);
    return L;
}

static void test_band_alignment_asserts(void **state) {
    (void)state;
    fuse_layout L = layout(1000, 700, 64, 4); /* block 256: bands 0,256,512,768 */
    assert_int_equal(L.block, 256);
    assert_int_equal(L.nbands, 4);
    ts_error err;
    assert_int_equal(fuse_check_band(&L, 0, 256, &err), TS_OK);
    assert_int_equal(fuse_check_band(&L, 768, 1000, &err), TS_OK); /* last, shorter */
    /* misaligned start: two writers would share a shard */
    assert_int_not_equal(fuse_check_band(&L, 100, 356, &err), TS_OK);
    assert_non_null(strstr(err.message, "shard boundary"));
    /* spans two shard rows */
    assert_int_not_equal(fuse_check_band(&L, 0, 512, &err), TS_OK);
    assert_non_null(strstr(err.message, "exactly one shard row"));
    /* shorter than a shard row but not at the canvas edge */
    assert_int_not_equal(fuse_check_band(&L, 256, 300, &err), TS_OK);
    /* beyond the canvas */
    assert_int_not_equal(fuse_check_band(&L, 768, 1024, &err), TS_OK);
}

static void test_block_sizing(void **state) {
    (void)state;
    /* small canvas: never more chunks than it needs, and enough blocks to
     * keep the threads busy */
    fuse_layout L = layout(300, 1000, 512, 0);
    assert_int_equal(L.block, 512);
    L = layout(3000, 3000, 512, 0); /* 6 chunks a side would be one block */
    assert_true(L.block <= 6 * 512 && L.nbands * L.nbx >= 4);
    /* large canvas, ample memory: blocks of FUSE_AUTO_BLOCK_PX (a block
     * that grew with the canvas made peak RSS grow with it) */
    fuse_sizing s = {.canvas_h = 200000, .canvas_w = 200000, .C = 1, .tile_h = 2048, .tile_w = 2048,
                     .out_elem = 2, .chunk = 512, .memory = (size_t)64 << 30};
    ts_error err;
    assert_int_equal(fuse_layout_init(&L, &s, &err), TS_OK);
    assert_int_equal(L.block, FUSE_AUTO_BLOCK_PX);
    /* the memory bound shrinks it */
    s.memory = (size_t)256 << 20;
    assert_int_equal(fuse_layout_init(&L, &s, &err), TS_OK);
    assert_true(L.block < FUSE_AUTO_BLOCK_PX && L.block % 512 == 0);
    assert_true(FUSE_LAYOUT_BLOCKS * fuse_block_bytes(&s, L.block) + 2 * fuse_strip_bytes(&s, L.block) <= s.memory);
    /* ... and a run blends as many blocks at once as that memory holds */
    int n = fuse_blocks_in_flight(&s, L.block, s.memory);
    assert_true(n >= FUSE_LAYOUT_BLOCKS);
    assert_true((size_t)n * fuse_block_bytes(&s, L.block) + 2 * fuse_strip_bytes(&s, L.block) <= s.memory);
    assert_int_equal(fuse_blocks_in_flight(&s, L.block, 1), 1); /* never 0 */
    /* pyramid levels need blocks divisible by 2^levels */
    s.chunk = 100, s.levels = 3, s.memory = (size_t)1 << 30;
    assert_int_equal(fuse_layout_init(&L, &s, &err), TS_OK);
    assert_int_equal(L.block % 8, 0);
    s.shard = 3; /* 300 px is not divisible by 8 */
    assert_int_not_equal(fuse_layout_init(&L, &s, &err), TS_OK);
}

static void test_canvas(void **state) {
    (void)state;
    fuse_tile t[2] = {{.oy = 0, .ox = 5, .h = 10, .w = 20}, {.oy = 7, .ox = 0, .h = 10, .w = 4}};
    int64_t h, w;
    ts_error err;
    assert_int_equal(fuse_canvas(t, 2, &h, &w, &err), TS_OK);
    assert_int_equal(h, 17);
    assert_int_equal(w, 25);
    t[1].oy = -1;
    assert_int_equal(fuse_canvas(t, 2, &h, &w, &err), TS_ERR_NUMERIC);
}

/* A 3 x 3 grid of 100 px tiles, pitch 90, on blocks of 64 px. */
static void grid_tiles(fuse_tile *t) {
    for (int i = 0; i < 9; i++) {
        memset(&t[i], 0, sizeof t[i]);
        t[i].oy = (i / 3) * 90 + (i == 4);
        t[i].ox = (i % 3) * 90;
        t[i].h = t[i].w = 100;
        t[i].C = 1;
    }
}

/* The plan of grid_tiles' canvas in 16 px chunks, `shard` chunks a block. */
static fuse_plan *grid_plan(fuse_tile t[9], int shard, fuse_layout *L) {
    grid_tiles(t);
    int64_t h, w;
    ts_error err;
    assert_int_equal(fuse_canvas(t, 9, &h, &w, &err), TS_OK);
    *L = layout(h, w, 16, shard);
    fuse_plan *p;
    assert_int_equal(fuse_plan_build(L, t, 9, &p, &err), TS_OK);
    return p;
}

static void test_plan_covers_every_row_once(void **state) {
    (void)state;
    fuse_tile t[9];
    fuse_layout L;
    fuse_plan *p = grid_plan(t, 4, &L);
    int64_t rows[9] = {0};
    for (int b = 0; b < p->nbands; b++) {
        const fuse_band *band = &p->bands[b];
        for (int s = 0; s < band->nslots; s++) {
            const fuse_slot *sl = &band->slots[s];
            rows[sl->tile] += sl->r1 - sl->r0;
            assert_true(t[sl->tile].oy + sl->r0 >= band->y0 && t[sl->tile].oy + sl->r1 <= band->y1);
            if (s > 0) assert_true(band->slots[s - 1].bx0 <= sl->bx0); /* load order */
        }
        for (int64_t bx = 0; bx < L.nbx; bx++) {
            int prev = -1;
            for (int k = band->block_start[bx]; k < band->block_start[bx + 1]; k++) {
                const fuse_slot *sl = &band->slots[band->block_slots[k]];
                assert_true(sl->tile > prev); /* fixed blending order */
                prev = sl->tile;
                assert_true(bx >= sl->bx0 && bx <= sl->bx1);
            }
        }
    }
    for (int i = 0; i < 9; i++) assert_int_equal(rows[i], 100);
    fuse_plan_free(p);
}

/* A fake pipeline: counts loads and blocks, checks strips are in. */
typedef struct fake {
    const fuse_plan *plan;
    pthread_mutex_t mu;
    int *loads;   /* per (unit, slot) */
    int *blocks;  /* per (unit, bx) */
    int maxslots;
    int running, most_running; /* blocks in process_block at once */
    /* Runs of all bands: how far past the earliest unfinished block (the
     * plan's block numbering, unit * nbx + bx) a strip was loaded for, at
     * most. A strip loaded for a block further ahead stays held until that
     * block is done, so this is what the strips held come to. */
    bool check_ahead;
    int64_t most_ahead;
} fake;

static size_t fake_estimate(void *user, int64_t unit, const fuse_slot *slot) {
    (void)user, (void)unit;
    return (size_t)(slot->r1 - slot->r0) * 100 * 4;
}

static ts_status fake_load(void *user, int64_t unit, const fuse_slot *slot, fuse_strip *strip,
                           ts_error *err) {
    (void)err;
    fake *F = user;
    const fuse_band *band = &F->plan->bands[unit % F->plan->nbands];
    int s = (int)(slot - band->slots);
    strip->r0 = slot->r0, strip->r1 = slot->r1, strip->w = 100, strip->nc = 1;
    strip->bytes = fake_estimate(user, unit, slot);
    strip->data = malloc(strip->bytes);
    strip->dtype = TS_FLOAT32;
    ((float *)strip->data)[0] = (float)slot->tile;
    pthread_mutex_lock(&F->mu);
    F->loads[unit * F->maxslots + s]++;
    if (F->check_ahead) {
        /* A block counts as done here before the pipeline hears of it, so
         * this earliest is never behind the pipeline's. */
        int64_t first = 0;
        while (F->blocks[first]) first++;
        const int64_t ahead = unit * F->plan->L.nbx + slot->bx0 - first;
        if (ahead > F->most_ahead) F->most_ahead = ahead;
    }
    pthread_mutex_unlock(&F->mu);
    return TS_OK;
}

static ts_status fake_process(void *user, int worker, int64_t unit, int64_t bx,
                              const fuse_strip *const *strips, int n, ts_error *err) {
    (void)worker, (void)err;
    fake *F = user;
    pthread_mutex_lock(&F->mu);
    if (++F->running > F->most_running) F->most_running = F->running;
    pthread_mutex_unlock(&F->mu);
    const fuse_band *band = &F->plan->bands[unit % F->plan->nbands];
    for (int k = 0; k < n; k++) {
        const fuse_slot *sl = &band->slots[band->block_slots[band->block_start[bx] + k]];
        if (!strips[k]->data || ((const float *)strips[k]->data)[0] != (float)sl->tile) return TS_ERR_INTERNAL;
    }
    usleep(200); /* long enough for other workers to start blocks */
    pthread_mutex_lock(&F->mu);
    F->blocks[unit * F->plan->L.nbx + bx]++;
    F->running--;
    pthread_mutex_unlock(&F->mu);
    return TS_OK;
}

/* Runs bands [b0, b1) (b1 < 0: to the end) of 3 (t, z) planes. */
static void run_fake(int threads, size_t budget, int max_blocks, int64_t b0, int64_t b1) {
    fuse_tile t[9];
    ts_error err;
    fuse_layout L;
    fuse_plan *p = grid_plan(t, 2, &L);
    const int64_t nunits = 3 * p->nbands; /* e.g. 3 timepoints; the plan's numbering */
    if (b1 < 0) b1 = p->nbands;
    fake F = {.plan = p, .maxslots = 9};
    pthread_mutex_init(&F.mu, NULL);
    F.loads = calloc((size_t)(nunits * 9), sizeof(int));
    F.blocks = calloc((size_t)(nunits * L.nbx), sizeof(int));
    fuse_stage_fns fns = {.strip_estimate = fake_estimate, .load = fake_load, .process = fake_process, .user = &F};
    ts_pool *pool = ts_pool_create(threads);
    fuse_pipeline_stats st;
    assert_int_equal(fuse_pipeline_run_blocks(p, 3, b0 * L.nbx, b1 * L.nbx, &fns, pool, budget, max_blocks, NULL,
                                              NULL, "t", &st, &err),
                     TS_OK);
    /* The stage functions see the plan's unit numbers: each unit of the
     * bands run is loaded and processed once, no other unit at all. */
    for (int64_t u = 0; u < nunits; u++) {
        const fuse_band *band = &p->bands[u % p->nbands];
        const int in = u % p->nbands >= b0 && u % p->nbands < b1;
        for (int s = 0; s < 9; s++) assert_int_equal(F.loads[u * 9 + s], in && s < band->nslots ? 1 : 0);
        for (int64_t bx = 0; bx < L.nbx; bx++) assert_int_equal(F.blocks[u * L.nbx + bx], in);
    }
    assert_int_equal(st.blocks_done, 3 * (b1 - b0) * L.nbx);
    /* never more blocks at once than allowed (their buffers are what
     * --memory holds) */
    assert_true(F.most_running <= max_blocks && (F.most_running >= 1) == (b1 > b0));
    ts_pool_destroy(pool);
    free(F.loads);
    free(F.blocks);
    pthread_mutex_destroy(&F.mu);
    fuse_plan_free(p);
}

static void test_pipeline_loads_once_and_never_stalls(void **state) {
    (void)state;
    run_fake(1, (size_t)1 << 30, 1, 0, -1);
    run_fake(4, (size_t)1 << 30, 4, 0, -1);
    run_fake(4, (size_t)1 << 30, 2, 0, -1); /* more threads than blocks the memory holds */
    run_fake(4, (size_t)1 << 30, 1, 0, -1);
    run_fake(1, 1, 1, 0, -1); /* a budget smaller than any strip: still completes */
    run_fake(3, 1, 3, 0, -1);
    run_fake(2, (size_t)1 << 30, 2, 1, -1); /* an MPI rank's bands: from 1 on */
    run_fake(2, 1, 2, 1, 2);                /* one band in the middle */
    run_fake(2, (size_t)1 << 30, 2, 2, 2);  /* no band: nothing runs */
}

/* Reading runs at most `threads - 1` blocks ahead of the earliest
 * unfinished one (a window of one block per thread), whatever the budget:
 * it used to be threads + 2, and at 2048 px blocks of 256 px tiles each
 * block further held ~10 MB of strips, so the peak RSS at the default
 * --memory grew with the canvas until the window was full (issue 12). */
static void test_pipeline_reads_ahead_threads_blocks(void **state) {
    (void)state;
    fuse_tile t[9];
    ts_error err;
    fuse_layout L;
    fuse_plan *p = grid_plan(t, 2, &L);
    assert_true(p->nbands * L.nbx >= 16); /* room to read far ahead */
    for (int threads = 1; threads <= 3; threads++) {
        const int64_t nunits = 3 * p->nbands;
        fake F = {.plan = p, .maxslots = 9, .check_ahead = true};
        pthread_mutex_init(&F.mu, NULL);
        F.loads = calloc((size_t)(nunits * 9), sizeof(int));
        F.blocks = calloc((size_t)(nunits * L.nbx) + 1, sizeof(int));
        fuse_stage_fns fns = {.strip_estimate = fake_estimate, .load = fake_load, .process = fake_process, .user = &F};
        ts_pool *pool = ts_pool_create(threads);
        assert_int_equal(fuse_pipeline_run_blocks(p, 3, 0, p->nbands * L.nbx, &fns, pool, (size_t)1 << 30, threads, NULL,
                                                  NULL, "t", NULL, &err),
                         TS_OK);
        assert_true(F.most_ahead <= threads - 1);
        /* and with more threads it does read ahead */
        if (threads > 1) assert_true(F.most_ahead >= 1);
        ts_pool_destroy(pool);
        free(F.loads);
        free(F.blocks);
        pthread_mutex_destroy(&F.mu);
    }
    fuse_plan_free(p);
}

static ts_status failing_process(void *user, int worker, int64_t unit, int64_t bx,
                                 const fuse_strip *const *strips, int n, ts_error *err) {
    (void)user, (void)worker, (void)strips, (void)n;
    if (unit == 1 && bx == 1) {
        err->code = TS_ERR_IO;
        strcpy(err->message, "disk full at block 1");
        return TS_ERR_IO;
    }
    return TS_OK;
}

static void test_pipeline_reports_first_error(void **state) {
    (void)state;
    fuse_tile t[9];
    ts_error err;
    fuse_layout L;
    fuse_plan *p = grid_plan(t, 2, &L);
    fake F = {.plan = p, .maxslots = 9};
    pthread_mutex_init(&F.mu, NULL);
    F.loads = calloc((size_t)(p->nbands * 9), sizeof(int));
    fuse_stage_fns fns = {.strip_estimate = fake_estimate, .load = fake_load, .process = failing_process, .user = &F};
    ts_pool *pool = ts_pool_create(2);
    assert_int_equal(
        fuse_pipeline_run_blocks(p, 1, 0, p->nbands * p->L.nbx, &fns, pool, 1 << 20, 2, NULL, NULL, "t", NULL, &err),
        TS_ERR_IO);
    assert_string_equal(err.message, "disk full at block 1");
    ts_pool_destroy(pool);
    free(F.loads);
    pthread_mutex_destroy(&F.mu);
    fuse_plan_free(p);
}

/* Between a block's process stage (the blend) and its write stage (encode
 * and write) the strips no later block uses are freed, and only those, each
 * once. Held through the encode and write (most of a block's time), the
 * strips of two blocks were at the peak RSS at the default --memory
 * (issue 12). */
typedef struct early {
    const fuse_plan *plan;
    pthread_mutex_t mu;
    int64_t loads, frees, frees_at_blend;
    bool *freed;          /* per (unit, slot) */
    int threads;
    int bad;              /* checks failed (counted, asserted at the end) */
} early;

enum { EARLY_SLOTS = 16 };

static ts_status early_load(void *user, int64_t unit, const fuse_slot *slot, fuse_strip *strip, ts_error *err) {
    (void)err;
    early *E = user;
    const fuse_band *band = &E->plan->bands[unit % E->plan->nbands];
    strip->r0 = slot->r0, strip->r1 = slot->r1, strip->w = 100, strip->nc = 1, strip->dtype = TS_FLOAT32;
    strip->bytes = fake_estimate(user, unit, slot);
    strip->data = malloc(strip->bytes);
    strip->origin = unit * EARLY_SLOTS + (slot - band->slots); /* which strip, for early_free */
    ((float *)strip->data)[0] = (float)slot->tile;
    pthread_mutex_lock(&E->mu);
    E->loads++;
    pthread_mutex_unlock(&E->mu);
    return TS_OK;
}

static void early_free(void *user, fuse_strip *strip) {
    early *E = user;
    pthread_mutex_lock(&E->mu);
    if (E->freed[strip->origin]) E->bad++; /* twice */
    E->freed[strip->origin] = true;
    E->frees++;
    pthread_mutex_unlock(&E->mu);
    free(strip->data);
}

static ts_status early_process(void *user, int worker, int64_t unit, int64_t bx, const fuse_strip *const *strips,
                               int n, ts_error *err) {
    (void)worker, (void)err;
    early *E = user;
    const fuse_band *band = &E->plan->bands[unit % E->plan->nbands];
    const int *slot_of = band->block_slots + band->block_start[bx];
    pthread_mutex_lock(&E->mu);
    for (int k = 0; k < n; k++) /* all in while it blends */
        if (E->freed[unit * EARLY_SLOTS + slot_of[k]] ||
            ((const float *)strips[k]->data)[0] != (float)band->slots[slot_of[k]].tile)
            E->bad++;
    E->frees_at_blend = E->frees;
    pthread_mutex_unlock(&E->mu);
    return TS_OK;
}

static ts_status early_write(void *user, int worker, int64_t unit, int64_t bx, ts_error *err) {
    (void)worker, (void)err;
    early *E = user;
    const fuse_band *band = &E->plan->bands[unit % E->plan->nbands];
    const int *slot_of = band->block_slots + band->block_start[bx];
    const int n = band->block_start[bx + 1] - band->block_start[bx];
    pthread_mutex_lock(&E->mu);
    if (E->threads == 1) {
        /* Blocks run in order: what went since this block's blend is
         * exactly the strips whose last block it is. */
        int64_t last = 0;
        for (int k = 0; k < n; k++) {
            const bool is_last = band->slots[slot_of[k]].bx1 == bx;
            last += is_last;
            if (E->freed[unit * EARLY_SLOTS + slot_of[k]] != is_last) E->bad++;
        }
        if (E->frees - E->frees_at_blend != last) E->bad++;
    }
    pthread_mutex_unlock(&E->mu);
    usleep(300); /* the encode and write */
    return TS_OK;
}

static void test_pipeline_frees_strips_before_the_write(void **state) {
    (void)state;
    fuse_tile t[9];
    ts_error err;
    fuse_layout L;
    fuse_plan *p = grid_plan(t, 2, &L);
    for (int b = 0; b < p->nbands; b++) assert_true(p->bands[b].nslots <= EARLY_SLOTS);
    bool shared = false; /* a strip two blocks use: not freed by the first */
    for (int b = 0; b < p->nbands; b++)
        for (int s = 0; s < p->bands[b].nslots; s++) shared |= p->bands[b].slots[s].bx1 > p->bands[b].slots[s].bx0;
    assert_true(shared);
    for (int threads = 1; threads <= 3; threads++) {
        const int64_t nunits = 2 * p->nbands;
        early E = {.plan = p, .threads = threads};
        pthread_mutex_init(&E.mu, NULL);
        E.freed = calloc((size_t)(nunits * EARLY_SLOTS), sizeof *E.freed);
        fuse_stage_fns fns = {.strip_estimate = fake_estimate, .load = early_load, .process = early_process, .write = early_write,
                              .user = &E, .free_strip = early_free};
        ts_pool *pool = ts_pool_create(threads);
        assert_int_equal(fuse_pipeline_run_blocks(p, 2, 0, p->nbands * L.nbx, &fns, pool, (size_t)1 << 30, threads,
                                                  NULL, NULL, "t", NULL, &err),
                         TS_OK);
        assert_int_equal(E.bad, 0);
        assert_true(E.loads > 0);
        assert_int_equal(E.frees, E.loads); /* each strip freed once */
        ts_pool_destroy(pool);
        free(E.freed);
        pthread_mutex_destroy(&E.mu);
    }
    fuse_plan_free(p);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_band_alignment_asserts),
        cmocka_unit_test(test_block_sizing),
        cmocka_unit_test(test_canvas),
        cmocka_unit_test(test_plan_covers_every_row_once),
        cmocka_unit_test(test_pipeline_loads_once_and_never_stalls),
        cmocka_unit_test(test_pipeline_reads_ahead_threads_blocks),
        cmocka_unit_test(test_pipeline_reports_first_error),
        cmocka_unit_test(test_pipeline_frees_strips_before_the_write),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
