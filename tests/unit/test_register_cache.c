/* The estimate tile cache: each tile loaded once when the budget allows,
 * dropped after its last use, bounded by the budget (plus tiles in use),
 * a tile being loaded waited for rather than loaded twice, load errors
 * passed on. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "common/error.h"
#include "common/pool.h"
#include "register/tile_cache.h"

#define TILE_FLOATS 1024
#define TILE_BYTES (TILE_FLOATS * sizeof(float))

typedef struct loader {
    atomic_int loads[64];
    int fail_id; /* -1: none */
} loader;

/* The cache's tile as the floats these tests load. */
static ts_status get_f(ts_tile_cache *c, int64_t id, const float **t, ts_error *err) {
    ts_samples v = {NULL, TS_FLOAT32};
    ts_status st = ts_tile_cache_get(c, id, &v, err);
    assert_int_equal(v.dtype, TS_FLOAT32); /* as the loaders said */
    *t = v.p;
    return st;
}

static ts_status load(void *user, int64_t id, void **data, ts_dtype *dtype, size_t *bytes, ts_error *err) {
    *dtype = TS_FLOAT32;
    loader *l = user;
    if (id == l->fail_id) return ts_fail(err, TS_ERR_IO, "tile %lld unreadable", (long long)id);
    atomic_fetch_add(&l->loads[id], 1);
    float *t = malloc(TILE_BYTES);
    for (int i = 0; i < TILE_FLOATS; i++) t[i] = (float)id;
    *data = t;
    *bytes = TILE_BYTES;
    return TS_OK;
}

static void test_loads_once_and_drops(void **state) {
    (void)state;
    loader l = {.fail_id = -1};
    int uses[4] = {2, 2, 1, 1};
    ts_tile_cache *c = ts_tile_cache_create(4, uses, 100 * TILE_BYTES, load, &l);
    ts_error err;
    const float *t;
    /* a tile used twice is loaded once */
    for (int rep = 0; rep < 2; rep++)
        for (int id = 0; id < 2; id++) {
            assert_int_equal(get_f(c, id, &t, &err), TS_OK);
            assert_true(t[0] == (float)id);
            ts_tile_cache_release(c, id);
        }
    assert_int_equal(atomic_load(&l.loads[0]), 1);
    assert_int_equal(atomic_load(&l.loads[1]), 1);
    ts_tile_cache_stats s = ts_tile_cache_get_stats(c);
    assert_int_equal(s.loads, 2);
    assert_int_equal(s.hits, 2);
    ts_tile_cache_destroy(c);
}

/* A release function set on the cache gets every buffer it drops (after a
 * tile's last use, and at destroy), instead of free: estimate's kept tiles
 * live in one mapping. */
static float pool_buf[4][TILE_FLOATS];
static int released[4];
static ts_status load_pooled(void *user, int64_t id, void **data, ts_dtype *dtype, size_t *bytes, ts_error *err) {
    *dtype = TS_FLOAT32;
    (void)user, (void)err;
    *data = pool_buf[id];
    *bytes = TILE_BYTES;
    return TS_OK;
}
static void release_pooled(void *user, int64_t id, void *data) {
    (void)user;
    assert_ptr_equal(data, pool_buf[id]);
    released[id]++;
}
/* The dtype the loader gives is what every get returns, loaded or hit
 * (estimate holds uint16 tiles as such). */
static uint16_t u16_buf[2][TILE_FLOATS];
static ts_status load_u16(void *user, int64_t id, void **data, ts_dtype *dtype, size_t *bytes, ts_error *err) {
    (void)user, (void)err;
    *dtype = TS_UINT16;
    *data = u16_buf[id];
    *bytes = sizeof u16_buf[id];
    return TS_OK;
}
static void release_none(void *user, int64_t id, void *data) { (void)user, (void)id, (void)data; }
static void test_dtype_from_loader(void **state) {
    (void)state;
    int uses[2] = {2, 1};
    ts_tile_cache *c = ts_tile_cache_create(2, uses, 100 * TILE_BYTES, load_u16, NULL);
    ts_tile_cache_set_release(c, release_none);
    for (int rep = 0; rep < 2; rep++) { /* loaded, then a hit */
        ts_samples t = {NULL, TS_FLOAT32};
        assert_int_equal(ts_tile_cache_get(c, 0, &t, NULL), TS_OK);
        assert_int_equal(t.dtype, TS_UINT16);
        assert_ptr_equal(t.p, u16_buf[0]);
        ts_tile_cache_release(c, 0);
    }
    ts_tile_cache_destroy(c);
}

static void test_release_function(void **state) {
    (void)state;
    int uses[4] = {1, 2, 0, 0};
    ts_tile_cache *c = ts_tile_cache_create(4, uses, 100 * TILE_BYTES, load_pooled, NULL);
    ts_tile_cache_set_release(c, release_pooled);
    const float *t;
    assert_int_equal(get_f(c, 0, &t, NULL), TS_OK);
    ts_tile_cache_release(c, 0); /* its last use: dropped */
    assert_int_equal(released[0], 1);
    assert_int_equal(get_f(c, 1, &t, NULL), TS_OK);
    ts_tile_cache_release(c, 1); /* one use to come: kept */
    assert_int_equal(released[1], 0);
    ts_tile_cache_destroy(c);
    assert_int_equal(released[0], 1);
    assert_int_equal(released[1], 1);
    assert_int_equal(released[2] + released[3], 0);
}

static void test_budget_evicts_lru(void **state) {
    (void)state;
    loader l = {.fail_id = -1};
    int uses[8];
    for (int i = 0; i < 8; i++) uses[i] = 3;
    ts_tile_cache *c = ts_tile_cache_create(8, uses, 2 * TILE_BYTES, load, &l);
    ts_error err;
    const float *t;
    for (int rep = 0; rep < 3; rep++)
        for (int id = 0; id < 8; id++) {
            assert_int_equal(get_f(c, id, &t, &err), TS_OK);
            assert_true(t[5] == (float)id);
            ts_tile_cache_release(c, id);
        }
    ts_tile_cache_stats s = ts_tile_cache_get_stats(c);
    assert_true(s.peak_bytes <= 2 * TILE_BYTES); /* one at a time in use: within budget */
    /* Cyclic access beats LRU: every get reloads, except in the last round,
     * where tiles are dropped after their last use, so tile 7 (kept since
     * round two) survives until it is asked for: 24 - 1 loads. */
    assert_int_equal(s.loads, 23);
    ts_tile_cache_destroy(c);
}

static void test_load_error(void **state) {
    (void)state;
    loader l = {.fail_id = 1};
    int uses[2] = {1, 1};
    ts_tile_cache *c = ts_tile_cache_create(2, uses, 10 * TILE_BYTES, load, &l);
    ts_error err;
    const float *t;
    assert_int_equal(get_f(c, 1, &t, &err), TS_ERR_IO);
    assert_non_null(strstr(err.message, "tile 1"));
    assert_int_equal(get_f(c, 0, &t, &err), TS_OK);
    ts_tile_cache_release(c, 0);
    ts_tile_cache_destroy(c);
}

/* Many workers on overlapping tiles: every get returns the right tile, and
 * with a large budget each tile is loaded exactly once. */
typedef struct hammer { ts_tile_cache *c; int ntiles; atomic_int bad; } hammer;

static int hammer_item(void *user, int64_t i, int worker) {
    (void)worker;
    hammer *h = user;
    int64_t a = i % h->ntiles, b = (i * 7 + 3) % h->ntiles;
    if (a == b) b = (b + 1) % h->ntiles;
    const float *ta, *tb;
    ts_error err;
    if (get_f(h->c, a, &ta, &err) != TS_OK) return 1;
    if (get_f(h->c, b, &tb, &err) != TS_OK) return 1;
    if (ta[TILE_FLOATS - 1] != (float)a || tb[0] != (float)b) atomic_fetch_add(&h->bad, 1);
    ts_tile_cache_release(h->c, b);
    ts_tile_cache_release(h->c, a);
    return 0;
}

static void test_concurrent(void **state) {
    (void)state;
    enum { NT = 40, NITEMS = 400 };
    int uses[NT] = {0};
    for (int64_t i = 0; i < NITEMS; i++) {
        int64_t a = i % NT, b = (i * 7 + 3) % NT;
        if (a == b) b = (b + 1) % NT;
        uses[a]++, uses[b]++;
    }
    for (int big = 0; big < 2; big++) {
        loader l = {.fail_id = -1};
        hammer h = {ts_tile_cache_create(NT, uses, big ? 1000 * TILE_BYTES : 3 * TILE_BYTES, load, &l), NT, 0};
        ts_pool *pool = ts_pool_create(4);
        assert_int_equal(ts_pool_for(pool, NITEMS, hammer_item, &h), 0);
        ts_pool_destroy(pool);
        assert_int_equal(atomic_load(&h.bad), 0);
        if (big)
            for (int i = 0; i < NT; i++) assert_int_equal(atomic_load(&l.loads[i]), 1);
        ts_tile_cache_destroy(h.c);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_loads_once_and_drops),
        cmocka_unit_test(test_release_function),
        cmocka_unit_test(test_dtype_from_loader),
        cmocka_unit_test(test_budget_evicts_lru),
        cmocka_unit_test(test_load_error),
        cmocka_unit_test(test_concurrent),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
