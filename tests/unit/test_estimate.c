/* Estimate orchestration on a small simulated plate: errors raised inside
 * the registration workers reach the caller. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "common/fs.h"
#include "tessera/tessera.h"
#include "scratch_dir.h"

static char plate[600], shifts[700];

static int setup(void **state) {
    (void)state;
    if (scratch_setup("test_estimate")) return -1;
    snprintf(plate, sizeof plate, "%s/plate.zarr", scratch_dir);
    snprintf(shifts, sizeof shifts, "%s/shifts.yaml", scratch_dir);
    ts_simulate_options so;
    ts_simulate_options_init(&so);
    so.output = plate;
    so.grid_cols = 2;
    so.grid_rows = 1;
    so.tile_h = so.tile_w = 64;
    so.overlap = 16;
    so.threads = 2;
    ts_error err;
    return ts_simulate(&so, &err) == TS_OK ? 0 : -1;
}

static int teardown(void **state) {
    (void)state;
    scratch_teardown();
    return 0;
}

/* A tile that fails to load in a worker (its array metadata is damaged; the
 * first tile, probed up front, is intact) fails the run with the worker's
 * error, also for a caller that passes no ts_error (it used to be copied
 * into *err unconditionally). */
static void test_worker_error_reaches_caller(void **state) {
    (void)state;
    char meta[800];
    snprintf(meta, sizeof meta, "%s/A/1/001000/0/zarr.json", plate);
    assert_true(ts_path_exists(meta));
    ts_error err;
    assert_int_equal(ts_write_file_atomic(meta, "{not json", 9, &err), TS_OK);
    ts_estimate_options eo;
    ts_estimate_options_init(&eo);
    eo.input = plate;
    eo.output = shifts;
    eo.overlap_x = eo.overlap_y = 16;
    eo.threads = 2;
    assert_int_equal(ts_estimate(&eo, &err), TS_ERR_FORMAT);
    assert_non_null(strstr(err.message, "001000"));
    assert_int_equal(ts_estimate(&eo, NULL), TS_ERR_FORMAT);
    assert_false(ts_path_exists(shifts));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_worker_error_reaches_caller),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
