/* The distribution layer without MPI: the serial ts_dist (NULL), the
 * contiguous weighted shares, and fuse's renumbering of a rank's units
 * into the whole plan's. (Under MPI: tests/interop/test_mpi.sh.) */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "common/error.h"
#include "fuse/ranks.h"
#include "mpi/dist.h"

static void test_serial_dist(void **state) {
    (void)state;
    assert_int_equal(ts_dist_rank(NULL), 0);
    assert_int_equal(ts_dist_size(NULL), 1);
    ts_error err;
    ts_error_clear(&err);
    assert_int_equal(ts_dist_agree(NULL, TS_OK, &err), TS_OK);
    ts_fail(&err, TS_ERR_IO, "cannot write 'x'");
    /* One process: its own status and message, unchanged. */
    assert_int_equal(ts_dist_agree(NULL, TS_ERR_IO, &err), TS_ERR_IO);
    assert_string_equal(err.message, "cannot write 'x'");

    const char mine[] = "abc";
    void *all = NULL;
    uint64_t *counts = NULL;
    assert_int_equal(ts_dist_allgatherv(NULL, mine, 3, &all, &counts, &err), TS_OK);
    assert_memory_equal(all, "abc", 3);
    assert_int_equal(counts[0], 3);
    free(all);
    free(counts);
    assert_int_equal(ts_dist_allgatherv(NULL, NULL, 0, &all, NULL, &err), TS_OK);
    free(all);

    int64_t v[2] = {5, -7};
    uint64_t m = 9;
    assert_int_equal(ts_dist_sum_i64(NULL, v, 2, &err), TS_OK);
    assert_int_equal(ts_dist_max_u64(NULL, &m, 1, &err), TS_OK);
    assert_int_equal(v[0], 5);
    assert_int_equal(v[1], -7);
    assert_int_equal(m, 9);
    assert_int_equal(ts_dist_bcast(NULL, v, sizeof v, 0, &err), TS_OK);
    ts_dist_free(NULL);
    ts_dist *d = NULL;
    if (!ts_dist_mpi_available()) {
        assert_int_equal(ts_dist_mpi_create(&d, &d, &err), TS_ERR_UNSUPPORTED);
        assert_null(d);
    }
}

/* Shares of every rank: in order, contiguous, covering [0, n); each share
 * within one item's weight of total/size. */
static void check_shares(int64_t n, const int64_t *w, int size) {
    int64_t total = 0, wmax = 0;
    for (int64_t i = 0; i < n; i++) {
        int64_t wi = w ? w[i] : 1;
        total += wi;
        if (wi > wmax) wmax = wi;
    }
    int64_t next = 0;
    for (int r = 0; r < size; r++) {
        int64_t lo, hi;
        ts_dist_share(n, w, r, size, &lo, &hi);
        assert_int_equal(lo, next);
        assert_true(hi >= lo && hi <= n);
        int64_t got = 0;
        for (int64_t i = lo; i < hi; i++) got += w ? w[i] : 1;
        if (total > 0) assert_true(llabs(got * size - total) <= wmax * size);
        next = hi;
    }
    assert_int_equal(next, n);
}

static void test_shares(void **state) {
    (void)state;
    /* Bands of 64 rows and a thin last one, as a canvas of 596 rows. */
    int64_t rows[10] = {64, 64, 64, 64, 64, 64, 64, 64, 64, 20};
    for (int size = 1; size <= 12; size++) {
        check_shares(10, rows, size);
        check_shares(10, NULL, size);
        check_shares(0, NULL, size);
        check_shares(1000003, NULL, size);
    }
    int64_t zero[4] = {0, 0, 0, 0};
    for (int size = 1; size <= 5; size++) check_shares(4, zero, size);
    /* 2 ranks, 4 equal bands: 2 each; 3 ranks, 10 bands: 3, 4, 3 rows by middles. */
    int64_t lo, hi;
    ts_dist_share(4, NULL, 1, 2, &lo, &hi);
    assert_int_equal(lo, 2);
    assert_int_equal(hi, 4);
    ts_dist_share(10, NULL, 0, 3, &lo, &hi);
    assert_int_equal(lo, 0);
    assert_int_equal(hi, 3);
    ts_dist_share(10, NULL, 1, 3, &lo, &hi);
    assert_int_equal(lo, 3);
    assert_int_equal(hi, 7);
    /* More ranks than items: each item once, some ranks idle. */
    ts_dist_share(2, NULL, 0, 5, &lo, &hi);
    assert_int_equal(hi - lo, 0);
}

/* Stage functions that record the units they were called with. */
typedef struct recorder {
    int64_t units[64];
    int n;
} recorder;

static ts_status record_load(void *user, int64_t unit, const fuse_slot *slot, fuse_strip *strip, ts_error *err) {
    (void)slot, (void)strip, (void)err;
    recorder *r = user;
    r->units[r->n++] = unit;
    return TS_OK;
}

static ts_status record_process(void *user, int worker, int64_t unit, int64_t bx,
                                const fuse_strip *const *strips, int nstrips, ts_error *err) {
    (void)worker, (void)bx, (void)strips, (void)nstrips, (void)err;
    recorder *r = user;
    r->units[r->n++] = unit;
    return TS_OK;
}

static void test_rank_units(void **state) {
    (void)state;
    fuse_band bands[5];
    memset(bands, 0, sizeof bands);
    for (int b = 0; b < 5; b++) bands[b].y0 = 64 * b, bands[b].y1 = 64 * (b + 1);
    fuse_plan plan;
    memset(&plan, 0, sizeof plan);
    plan.nbands = 5;
    plan.bands = bands;
    recorder rec = {.n = 0};
    fuse_stage_fns inner = {0};
    inner.load = record_load;
    inner.process = record_process;
    inner.user = &rec;
    fuse_rank_fns R;
    fuse_plan view;
    fuse_stage_fns fns;
    /* Bands 1 and 2 of 3 (t, z) pairs: 6 units. */
    int64_t n = fuse_rank_pipeline(&plan, 3, 1, 3, &inner, &R, &view, &fns);
    assert_int_equal(n, 6);
    assert_int_equal(view.nbands, 2);
    assert_ptr_equal(view.bands, &bands[1]);
    assert_null(fns.free_strip);
    assert_null(fns.strip_estimate);
    for (int64_t u = 0; u < n; u++) {
        /* The pipeline's band u % view.nbands is the plan's band of the
         * renumbered unit: what blend.c indexes by. */
        assert_int_equal(fns.load(fns.user, u, NULL, NULL, NULL), TS_OK);
        int64_t g = rec.units[rec.n - 1];
        assert_ptr_equal(&plan.bands[g % plan.nbands], &view.bands[u % view.nbands]);
        assert_int_equal(g / plan.nbands, u / view.nbands); /* same (t, z) */
    }
    const int64_t want[6] = {1, 2, 6, 7, 11, 12};
    assert_memory_equal(rec.units, want, sizeof want);
    assert_int_equal(fns.process(fns.user, 0, 5, 0, NULL, 0, NULL), TS_OK);
    assert_int_equal(rec.units[rec.n - 1], 12);
    /* A rank with no bands runs nothing. */
    assert_int_equal(fuse_rank_pipeline(&plan, 3, 5, 5, &inner, &R, &view, &fns), 0);

    /* Split among ranks by fuse_rank_bands: whole bands, in order, all. */
    for (int size = 1; size <= 7; size++) {
        int64_t next = 0;
        for (int r = 0; r < size; r++) {
            int64_t b0, b1;
            fuse_rank_bands(&plan, r, size, &b0, &b1);
            assert_int_equal(b0, next);
            next = b1;
        }
        assert_int_equal(next, 5);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_serial_dist),
        cmocka_unit_test(test_shares),
        cmocka_unit_test(test_rank_units),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
