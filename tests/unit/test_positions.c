/* Stage positions (estimate --positions): the neighbour pairs built from the
 * tiles' expected origins (register/graph.c) and Fiji's TileConfiguration
 * reader (register/tile_config.c). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/fs.h"
#include "register/estimate_internal.h"
#include "register/tile_config.h"
#include "scratch_dir.h"

SCRATCH_FIXTURES("test_positions")

enum { COLS = 4, ROWS = 3, H = 100, W = 120, PY = 88, PX = 100 };

static char names[COLS * ROWS][32];

static ts_status pairs_of(const double (*o)[2], int n, ts_tile_pair **p, int64_t *np, ts_error *err) {
    for (int i = 0; i < n; i++) snprintf(names[i], sizeof names[i], "t%d", i);
    return ts_pairs_from_positions(o, n, H, W, PY, PX, "A/1", (const char(*)[32])names, p, np, err);
}

/* A jittered grid, tile i at cell cell_of[i]: the pairs are exactly the
 * right and lower grid neighbours, row by row, right before lower. */
static void check_grid(const int (*cell_of)[2]) {
    double o[COLS * ROWS][2];
    int tile_at[ROWS][COLS];
    for (int i = 0; i < COLS * ROWS; i++) {
        int gx = cell_of[i][0], gy = cell_of[i][1];
        tile_at[gy][gx] = i;
        o[i][0] = gy * PY + ((i * 7) % 9 - 4); /* up to 4 px of jitter */
        o[i][1] = gx * PX + ((i * 5) % 9 - 4) + 1000;
    }
    ts_tile_pair *p;
    int64_t np;
    ts_error err;
    assert_int_equal(pairs_of((const double(*)[2])o, COLS * ROWS, &p, &np, &err), TS_OK);
    int64_t k = 0;
    for (int gy = 0; gy < ROWS; gy++)
        for (int gx = 0; gx < COLS; gx++) {
            if (gx + 1 < COLS) {
                assert_true(k < np);
                assert_int_equal(p[k].a, tile_at[gy][gx]);
                assert_int_equal(p[k].b, tile_at[gy][gx + 1]);
                assert_int_equal(p[k].dir, 0);
                assert_int_equal(p[k].gx, gx + 10); /* x is 1000 px off the frame */
                assert_int_equal(p[k].gy, gy);
                k++;
            }
            if (gy + 1 < ROWS) {
                assert_true(k < np);
                assert_int_equal(p[k].a, tile_at[gy][gx]);
                assert_int_equal(p[k].b, tile_at[gy + 1][gx]);
                assert_int_equal(p[k].dir, 1);
                k++;
            }
        }
    assert_int_equal(np, k);
    free(p);
}

static void test_grid_row_major(void **state) {
    (void)state;
    int cell_of[COLS * ROWS][2];
    for (int i = 0; i < COLS * ROWS; i++) cell_of[i][0] = i % COLS, cell_of[i][1] = i / COLS;
    check_grid((const int(*)[2])cell_of);
}

/* Tiles numbered in acquisition order along a serpentine: the same pairs. */
static void test_grid_serpentine(void **state) {
    (void)state;
    int cell_of[COLS * ROWS][2];
    for (int i = 0; i < COLS * ROWS; i++) {
        int gy = i / COLS, k = i % COLS;
        cell_of[i][0] = gy % 2 ? COLS - 1 - k : k;
        cell_of[i][1] = gy;
    }
    check_grid((const int(*)[2])cell_of);
}

static int64_t one_pair(double dy, double dx, ts_tile_pair *out) {
    double o[2][2] = {{500, 500}, {500 + dy, 500 + dx}};
    ts_tile_pair *p;
    int64_t np;
    ts_error err;
    assert_int_equal(pairs_of((const double(*)[2])o, 2, &p, &np, &err), TS_OK);
    if (np == 1) *out = p[0];
    free(p);
    return np;
}

static void test_classify(void **state) {
    (void)state;
    ts_tile_pair p;
    /* The left (upper) tile is a, whatever the order. */
    assert_int_equal(one_pair(3, -100, &p), 1);
    assert_int_equal(p.a, 1), assert_int_equal(p.b, 0), assert_int_equal(p.dir, 0);
    assert_int_equal(one_pair(-88, 2, &p), 1);
    assert_int_equal(p.a, 1), assert_int_equal(p.b, 0), assert_int_equal(p.dir, 1);
    /* Overlapping much on both axes: the larger offset relative to the
     * tile decides (30/120 < 40/100). */
    assert_int_equal(one_pair(40, 30, &p), 1);
    assert_int_equal(p.dir, 1);
    assert_int_equal(one_pair(20, 30, &p), 1);
    assert_int_equal(p.dir, 0);
    /* Diagonal grid neighbours share a corner only: no pair. */
    assert_int_equal(one_pair(88, 100, &p), 0);
    /* Along the axis: at least 4 px (2% of 120 is 2.4). */
    assert_int_equal(one_pair(0, 116, &p), 1);
    assert_int_equal(one_pair(0, 116.5, &p), 0);
    assert_int_equal(one_pair(0, 130, &p), 0);
    /* Across it: at least half the tile. */
    assert_int_equal(one_pair(50, 100, &p), 1);
    assert_int_equal(one_pair(50.5, 100, &p), 0);
}

static void test_coincident(void **state) {
    (void)state;
    double o[3][2] = {{0, 0}, {0, 100}, {0.4, 99.6}};
    ts_tile_pair *p = NULL;
    int64_t np;
    ts_error err;
    assert_int_equal(pairs_of((const double(*)[2])o, 3, &p, &np, &err), TS_ERR_FORMAT);
    assert_non_null(strstr(err.message, "A/1/t1"));
    assert_non_null(strstr(err.message, "A/1/t2"));
    assert_null(p);
}

static const char *write_text(const char *name, const char *text) {
    const char *path = tmp_path(name);
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    fputs(text, f);
    fclose(f);
    return path;
}

static void test_tile_config(void **state) {
    (void)state;
    const char *path = write_text("tc.txt", "# Define the number of dimensions we are working on\r\n"
                                            "dim = 2\r\n\r\n# Define the image coordinates\r\n"
                                            "1.tif; ; (0.0, 0.0)\r\n"
                                            "  sub/2.ome.tif ; ; (298.5, -1.25)\r\n"
                                            "C:\\scan\\tile_x003.tif; 3; (-1e3, 7)\r\n");
    ts_tile_config *tc;
    ts_error err;
    assert_int_equal(ts_tile_config_read(path, &tc, &err), TS_OK);
    assert_int_equal(tc->n, 3);
    assert_string_equal(tc->e[0].stem, "1");
    assert_string_equal(tc->e[1].stem, "2");
    assert_string_equal(tc->e[1].name, "sub/2.ome.tif");
    assert_true(tc->e[1].x == 298.5 && tc->e[1].y == -1.25);
    assert_string_equal(tc->e[2].stem, "tile_x003");
    assert_true(tc->e[2].x == -1000 && tc->e[2].y == 7);
    assert_int_equal(tc->e[0].line, 5);
    assert_int_equal(tc->e[2].line, 7);
    ts_tile_config_free(tc);
}

/* A UTF-8 byte-order mark before Fiji's first comment (a file saved by a
 * Windows editor) was refused as a malformed line 1. */
static void test_tile_config_bom(void **state) {
    (void)state;
    const char *path = write_text("bom.txt", "\xef\xbb\xbf# Define the number of dimensions we are working on\r\n"
                                             "dim = 2\r\n000000.tif; ; (1.5, 2)\r\n");
    ts_tile_config *tc;
    ts_error err = {0};
    if (ts_tile_config_read(path, &tc, &err) != TS_OK) fail_msg("%s", err.message);
    assert_int_equal(tc->n, 1);
    assert_string_equal(tc->e[0].stem, "000000");
    assert_true(tc->e[0].x == 1.5 && tc->e[0].y == 2 && tc->e[0].line == 3);
    ts_tile_config_free(tc);
}

static void expect_error(const char *text, ts_status code, const char *where) {
    const char *path = write_text("bad.txt", text);
    ts_tile_config *tc = (ts_tile_config *)1;
    ts_error err;
    assert_int_equal(ts_tile_config_read(path, &tc, &err), code);
    assert_null(tc);
    char want[1200];
    snprintf(want, sizeof want, "%s%s", path, where);
    if (!strstr(err.message, want)) fail_msg("'%s' does not name '%s'", err.message, want);
}

static void test_tile_config_errors(void **state) {
    (void)state;
    expect_error("a.tif; ; (1, 2)\n", TS_ERR_FORMAT, ":1: tile coordinates before");
    expect_error("dim = 3\na.tif; ; (1, 2, 3)\n", TS_ERR_UNSUPPORTED, ":1: 'dim = 3'");
    expect_error("dim = 2\na.tif; ; (1, 2)\nb.tif; ; (1, 2, 3)\n", TS_ERR_FORMAT, ":3: coordinates");
    expect_error("dim = 2\na.tif; ; (1, nan)\n", TS_ERR_FORMAT, ":2: coordinates");
    expect_error("dim = 2\na.tif; ; (1, 2e300)\n", TS_ERR_FORMAT, ":2: coordinates");
    expect_error("dim = 2\na.tif (1, 2)\n", TS_ERR_FORMAT, ":2: 'a.tif (1, 2)' is not");
    expect_error("dim = 2\n; ; (1, 2)\n", TS_ERR_FORMAT, ":2: no image name");
    expect_error("# nothing\ndim = 2\n", TS_ERR_FORMAT, ": no tile coordinates");
    /* A directory is no file to read (and is not waited on). */
    ts_tile_config *tc;
    ts_error err;
    assert_int_not_equal(ts_tile_config_read(scratch_dir, &tc, &err), TS_OK);
    assert_non_null(strstr(err.message, scratch_dir));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_grid_row_major), cmocka_unit_test(test_grid_serpentine),
        cmocka_unit_test(test_classify),       cmocka_unit_test(test_coincident),
        cmocka_unit_test(test_tile_config),    cmocka_unit_test(test_tile_config_errors),
        cmocka_unit_test(test_tile_config_bom),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
