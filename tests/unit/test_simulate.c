/* The simulator: the specimen is a function of global position (so
 * overlapping tiles see the same thing), options are checked, and a small
 * plate reads back through the OME layer with the expected layout. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/fs.h"
#include "ome/ome.h"
#include "shifts/shifts.h"
#include "simulate/specimen.h"

static char tmpdir[4096];

/* A window rendered on its own equals the same window cut from a larger
 * render: bit for bit, also at fractional origins. */
static void test_specimen_is_a_function_of_position(void **state) {
    (void)state;
    sim_plane pl = {.seed = 99, .channel = 0, .t = 0, .nt = 1, .z = 0, .nz = 1};
    const int H = 150, W = 170;
    float *big = malloc(sizeof(float) * H * W);
    float *small = malloc(sizeof(float) * 60 * 50);
    for (int ch = 0; ch < 3; ch++) {
        pl.channel = ch;
        sim_render(&pl, -20.25, 1000.5, H, W, big);
        sim_render(&pl, -20.25 + 37, 1000.5 + 101, 60, 50, small);
        for (int r = 0; r < 60; r++)
            for (int c = 0; c < 50; c++)
                if (small[r * 50 + c] != big[(r + 37) * W + c + 101])
                    fail_msg("channel %d pixel (%d, %d): %g != %g", ch, r, c, small[r * 50 + c],
                             big[(r + 37) * W + c + 101]);
    }
    /* not flat: structure with contrast, and channels differ */
    double mean = 0, var = 0;
    for (int i = 0; i < H * W; i++) mean += big[i];
    mean /= H * W;
    for (int i = 0; i < H * W; i++) var += (big[i] - mean) * (big[i] - mean);
    assert_true(sqrt(var / (H * W)) > 100);
    /* another seed, another specimen: most pixels of the same region differ */
    pl.channel = 0;
    float *other = malloc(60 * 50 * sizeof(float));
    sim_render(&pl, 0, 0, 60, 50, small);
    pl.seed = 100;
    sim_render(&pl, 0, 0, 60, 50, other);
    int same = 0;
    for (int i = 0; i < 60 * 50; i++) same += small[i] == other[i];
    assert_true(same < 60 * 50 / 10);
    free(other);
    free(big);
    free(small);
}

static void test_options_checked(void **state) {
    (void)state;
    ts_simulate_options o;
    ts_simulate_options_init(&o);
    ts_error err = {0};
    assert_int_equal(ts_simulate(&o, &err), TS_ERR_ARG); /* no output */
    char out[4200];
    snprintf(out, sizeof out, "%s/opt.zarr", tmpdir);
    o.output = out;
    o.tile_h = o.tile_w = 64;
    o.overlap = 64;
    assert_int_equal(ts_simulate(&o, &err), TS_ERR_ARG);
    assert_non_null(strstr(err.message, "overlap"));
    o.overlap = 8;
    o.wells = "A1";
    assert_int_equal(ts_simulate(&o, &err), TS_ERR_ARG);
    assert_non_null(strstr(err.message, "A1"));
    o.wells = "A/1,A/1";
    assert_int_equal(ts_simulate(&o, &err), TS_ERR_ARG);
    o.wells = "A/1";
    o.jitter = 1e300; /* was accepted: float -> int64 overflow in the specimen */
    assert_int_equal(ts_simulate(&o, &err), TS_ERR_ARG);
    assert_non_null(strstr(err.message, "jitter"));
    o.jitter = INFINITY;
    assert_int_equal(ts_simulate(&o, &err), TS_ERR_ARG);
    o.jitter = 3;
    o.noise = NAN;
    assert_int_equal(ts_simulate(&o, &err), TS_ERR_ARG);
    o.noise = 0;
    o.missing_fraction = 1.0;
    assert_int_equal(ts_simulate(&o, &err), TS_ERR_ARG);
    o.missing_fraction = 0;
    o.pixel_size_um = INFINITY; /* was written: a scale list of 3 entries for 5 axes */
    assert_int_equal(ts_simulate(&o, &err), TS_ERR_ARG);
    assert_non_null(strstr(err.message, "pixel size"));
    o.pixel_size_um = 0.65;
    assert_false(ts_path_exists(out)); /* nothing written on refusal */
    /* a non-store directory at the output is not replaced (an empty one
     * is written into) */
    char dir[4200], mine[4300];
    snprintf(dir, sizeof dir, "%s/not_a_store", tmpdir);
    assert_int_equal(ts_mkdirs(dir, &err), TS_OK);
    snprintf(mine, sizeof mine, "%s/mine.txt", dir);
    assert_int_equal(ts_write_file_atomic(mine, "x", 1, &err), TS_OK);
    o.missing_fraction = 0;
    o.output = dir;
    assert_int_equal(ts_simulate(&o, &err), TS_ERR_IO);
    assert_non_null(strstr(err.message, "not a zarr store"));
    assert_true(ts_path_exists(mine));
}

/* A plate with an odd rot90 and non-square tiles: the stored arrays are
 * W x H, the truth's tile_shape is H x W after orientation, names follow
 * YYYXXX, missing tiles are absent from listing and truth alike. */
static void test_plate_layout(void **state) {
    (void)state;
    ts_simulate_options o;
    ts_simulate_options_init(&o);
    char out[4200], truth[4200];
    snprintf(out, sizeof out, "%s/layout.zarr", tmpdir);
    snprintf(truth, sizeof truth, "%s/layout.yaml", tmpdir);
    o.output = out;
    o.truth = truth;
    o.wells = "B/2,A/10";
    o.grid_cols = 4, o.grid_rows = 3;
    o.tile_h = 40, o.tile_w = 64;
    o.overlap = 10;
    o.acquisition.rot90 = 1;
    o.names_yx = true;
    o.missing_fraction = 0.25;
    o.channels = 2;
    o.z = 3;
    o.format = TS_OME_04;
    o.threads = 2;
    ts_error err = {0};
    assert_int_equal(ts_simulate(&o, &err), TS_OK);

    ts_plate *p = NULL;
    assert_int_equal(ts_plate_open(out, &p, &err), TS_OK);
    assert_int_equal(p->version, TS_OME_04);
    assert_int_equal(p->nwells, 2);
    ts_shifts *s = NULL;
    assert_int_equal(ts_shifts_read(truth, &s, &err), TS_OK);
    assert_true(s->has_tile_shape);
    assert_int_equal(s->tile_shape[0], 64); /* after rot90: W x H of the stored tile */
    assert_int_equal(s->tile_shape[1], 40);
    assert_true(s->has_orientation && s->orientation.rot90 == 1);
    int total = 0;
    for (int w = 0; w < p->nwells; w++) {
        int sw = ts_shifts_find_well(s, p->wells[w].path);
        assert_true(sw >= 0);
        assert_int_equal(s->wells[sw].ntiles, p->wells[w].npositions);
        assert_true(p->wells[w].npositions < 12);
        total += p->wells[w].npositions;
        int64_t miny = INT64_MAX, minx = INT64_MAX;
        for (int t = 0; t < s->wells[sw].ntiles; t++) {
            int gx, gy;
            assert_true(ts_position_grid(s->wells[sw].tiles[t], true, &gx, &gy));
            assert_true(gx < 4 && gy < 3);
            /* origin near grid * pitch (pitch = oriented size - overlap) */
            assert_true(llabs(s->wells[sw].origin[t][1] - gx * 30) <= 8);
            assert_true(llabs(s->wells[sw].origin[t][0] - gy * 54) <= 8);
            if (s->wells[sw].origin[t][0] < miny) miny = s->wells[sw].origin[t][0];
            if (s->wells[sw].origin[t][1] < minx) minx = s->wells[sw].origin[t][1];
        }
        assert_true(miny == 0 && minx == 0);
    }
    assert_true(total > 6);
    tz_array *arr = NULL;
    assert_int_equal(ts_plate_open_array(p, 0, 0, 0, NULL, &arr, &err), TS_OK);
    const tz_array_meta *m = tz_array_get_meta(arr);
    int64_t want[5] = {1, 2, 3, 40, 64};
    for (int d = 0; d < 5; d++) assert_int_equal(m->shape[d], want[d]);
    assert_int_equal(m->chunk[3], 40);
    assert_int_equal(m->dtype, TS_UINT16);
    tz_array_close(arr);
    ts_image_meta im;
    assert_int_equal(ts_plate_image_meta(p, 0, 0, &im, &err), TS_OK);
    assert_int_equal(im.nchannels, 2);
    assert_true(fabs(im.scale[4] - 0.65) < 1e-12);
    ts_shifts_free(s);
    ts_plate_close(p);
}

int main(void) {
    snprintf(tmpdir, sizeof tmpdir, "%s/simulate", TESSERA_TEST_TMP);
    ts_error err = {0};
    ts_remove_tree(tmpdir, &err);
    ts_mkdirs(tmpdir, &err);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_specimen_is_a_function_of_position),
        cmocka_unit_test(test_options_checked),
        cmocka_unit_test(test_plate_layout),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
