/* The distribution layer without MPI: the serial ts_dist (NULL) and the
 * contiguous shares. (A pipeline over a range of bands: test_fuse_plan;
 * under MPI: tests/interop/test_mpi.sh.) */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "common/error.h"
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
    const ts_dist_op op[2] = {TS_DIST_SUM, TS_DIST_MAX};
    assert_int_equal(ts_dist_reduce(NULL, v, op, 2, &err), TS_OK);
    assert_int_equal(v[0], 5);
    assert_int_equal(v[1], -7);
    assert_int_equal(ts_dist_bcast(NULL, v, sizeof v, 0, &err), TS_OK);
    ts_dist_free(NULL);
    ts_dist *d = NULL;
    if (!ts_dist_mpi_available()) {
        assert_int_equal(ts_dist_mpi_create(&d, &d, &err), TS_ERR_UNSUPPORTED);
        assert_null(d);
    }
}

/* Shares of every rank: in order, contiguous, covering [0, n), sizes
 * within one of each other. */
static void check_shares(int64_t n, int size) {
    int64_t next = 0, least = INT64_MAX, most = 0;
    for (int r = 0; r < size; r++) {
        int64_t lo, hi;
        ts_dist_share(n, r, size, &lo, &hi);
        assert_int_equal(lo, next);
        assert_true(hi >= lo && hi <= n);
        if (hi - lo < least) least = hi - lo;
        if (hi - lo > most) most = hi - lo;
        next = hi;
    }
    assert_int_equal(next, n);
    assert_true(most - least <= 1);
    /* The inverse: every item's rank is the one whose share holds it. */
    const int64_t step = n > 5000 ? n / 997 : 1;
    int64_t lo, hi;
    for (int64_t i = 0; i < n; i += step) {
        int r = ts_dist_share_rank(n, size, i);
        assert_true(r >= 0 && r < size);
        ts_dist_share(n, r, size, &lo, &hi);
        assert_true(i >= lo && i < hi);
    }
    if (n > 0) {
        int r = ts_dist_share_rank(n, size, n - 1);
        ts_dist_share(n, r, size, &lo, &hi);
        assert_int_equal(hi, n);
    }
}

static void test_shares(void **state) {
    (void)state;
    for (int size = 1; size <= 12; size++) {
        check_shares(10, size);
        check_shares(0, size);
        check_shares(1000003, size);
        check_shares((int64_t)340000 * 1024, size); /* no overflow at plate scale */
    }
    /* 2 ranks, 4 items: 2 each; more ranks than items: some ranks idle. */
    int64_t lo, hi;
    ts_dist_share(4, 1, 2, &lo, &hi);
    assert_int_equal(lo, 2);
    assert_int_equal(hi, 4);
    ts_dist_share(2, 0, 5, &lo, &hi);
    assert_int_equal(hi - lo, 0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_serial_dist),
        cmocka_unit_test(test_shares),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
