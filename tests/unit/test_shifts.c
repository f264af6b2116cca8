/* The shifts file: round trip, files of the old tool, key order, errors. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/error.h"
#include "common/fs.h"
#include "shifts/shifts.h"

static void tmp_path(char *out, size_t n, const char *name) {
    snprintf(out, n, "%s/test_shifts_%s", TESSERA_TEST_TMP, name);
}

static void write_text(const char *path, const char *text) {
    ts_error err;
    assert_int_equal(ts_write_file_atomic(path, text, strlen(text), &err), TS_OK);
}

static ts_shifts *make_sample(void) {
    ts_shifts *s = ts_shifts_new();
    s->has_tile_shape = true;
    s->tile_shape[0] = 2048;
    s->tile_shape[1] = 1024;
    s->has_orientation = true;
    s->orientation = (ts_orientation){.flipud = false, .fliplr = true, .rot90 = 1};
    int w = ts_shifts_add_well(s, "A/1");
    assert_int_equal(w, 0);
    const char *names[] = {"000000", "001000", "000001", "001001", "002000"};
    for (int i = 0; i < 5; i++) assert_int_equal(ts_shifts_add_tile(s, w, names[i]), i);
    assert_true(ts_shifts_ensure_positions(s, w));
    for (int i = 0; i < 4; i++) { /* tile 4 has no origin and no position */
        s->wells[w].origin[i][0] = 100 * i;
        s->wells[w].origin[i][1] = 7 * i + 1;
        s->wells[w].has_origin[i] = true;
        s->wells[w].position[i][0] = 100 * i + 0.1;
        s->wells[w].position[i][1] = 7 * i + 1.0 / 3.0;
    }
    assert_int_equal(ts_shifts_add_pair(s, w, 0, 1, 0.4, 1898.2, 0.93), 0);
    assert_int_equal(ts_shifts_add_pair(s, w, 0, 2, 1900.25, -1.5e-7, 0.5), 1);
    assert_int_equal(ts_shifts_add_pair(s, w, 1, 3, 1899, 2.0, 0.0), 2);
    s->wells[w].pairs[1].outlier = true;
    s->wells[w].pairs[0].ry = 0.01;
    s->wells[w].pairs[0].rx = -0.2;
    s->wells[w].pairs[1].ry = 12.5;
    s->wells[w].pairs[1].rx = 1e-12;
    int w2 = ts_shifts_add_well(s, "B/12");
    assert_int_equal(w2, 1);
    assert_int_equal(ts_shifts_add_tile(s, w2, "000000"), 0);
    s->wells[w2].has_origin[0] = true;
    /* Names YAML could read as something else must come back as written. */
    int w3 = ts_shifts_add_well(s, "1/2");
    const char *odd[] = {"it's: odd", "true", "0x1F", "1e3", "- a", "#x"};
    for (int i = 0; i < 6; i++) {
        int t = ts_shifts_add_tile(s, w3, odd[i]);
        s->wells[w3].origin[t][0] = i;
        s->wells[w3].has_origin[t] = true;
    }
    ts_shifts_add_pair(s, w3, 0, 1, 1.0, 2.0, 0.5);
    return s;
}

static void assert_same(const ts_shifts *a, const ts_shifts *b) {
    assert_int_equal(a->nwells, b->nwells);
    assert_int_equal(a->has_tile_shape, b->has_tile_shape);
    assert_int_equal(a->tile_shape[0], b->tile_shape[0]);
    assert_int_equal(a->tile_shape[1], b->tile_shape[1]);
    assert_int_equal(a->has_orientation, b->has_orientation);
    assert_int_equal(a->orientation.flipud, b->orientation.flipud);
    assert_int_equal(a->orientation.fliplr, b->orientation.fliplr);
    assert_int_equal(a->orientation.rot90, b->orientation.rot90);
    assert_int_equal(a->names_yx, b->names_yx);
    for (int w = 0; w < a->nwells; w++) {
        const ts_well_shifts *x = &a->wells[w], *y = &b->wells[w];
        assert_string_equal(x->well, y->well);
        assert_int_equal(x->ntiles, y->ntiles);
        for (int t = 0; t < x->ntiles; t++) {
            assert_string_equal(x->tiles[t], y->tiles[t]);
            assert_int_equal(x->has_origin[t], y->has_origin[t]);
            if (x->has_origin[t]) {
                assert_int_equal(x->origin[t][0], y->origin[t][0]);
                assert_int_equal(x->origin[t][1], y->origin[t][1]);
            }
            assert_int_equal(x->position != NULL, y->position != NULL);
            if (x->position)
                for (int k = 0; k < 2; k++) {
                    assert_int_equal(isnan(x->position[t][k]), isnan(y->position[t][k]));
                    /* derived values are written to 1e-6 px */
                    if (!isnan(x->position[t][k])) assert_true(fabs(x->position[t][k] - y->position[t][k]) <= 5e-7);
                }
        }
        assert_int_equal(x->npairs, y->npairs);
        for (int i = 0; i < x->npairs; i++) {
            const ts_shift_pair *p = &x->pairs[i], *q = &y->pairs[i];
            assert_int_equal(p->a, q->a);
            assert_int_equal(p->b, q->b);
            assert_true(p->dy == q->dy);
            assert_true(p->dx == q->dx);
            assert_true(p->confidence == q->confidence);
            assert_int_equal(p->outlier, q->outlier);
            assert_int_equal(isnan(p->ry), isnan(q->ry));
            if (!isnan(p->ry)) assert_true(fabs(p->ry - q->ry) <= 5e-7 && fabs(p->rx - q->rx) <= 5e-7);
        }
    }
}

static void test_round_trip(void **state) {
    (void)state;
    char path[512];
    tmp_path(path, sizeof path, "roundtrip.yaml");
    ts_shifts *s = make_sample();
    ts_error err;
    assert_int_equal(ts_shifts_write(path, s, &err), TS_OK);
    ts_shifts *r = NULL;
    if (ts_shifts_read(path, &r, &err) != TS_OK) fail_msg("%s", err.message);
    assert_same(s, r);
    /* Written twice: same bytes (deterministic output). */
    char path2[512];
    tmp_path(path2, sizeof path2, "roundtrip2.yaml");
    assert_int_equal(ts_shifts_write(path2, r, &err), TS_OK);
    void *d1, *d2;
    size_t n1, n2;
    assert_int_equal(ts_read_file(path, &d1, &n1, &err), TS_OK);
    assert_int_equal(ts_read_file(path2, &d2, &n2, &err), TS_OK);
    assert_int_equal(n1, n2);
    assert_memory_equal(d1, d2, n1);
    free(d1);
    free(d2);
    ts_shifts_free(s);
    ts_shifts_free(r);
}

/* What the old tool wrote (yaml.safe_dump): only total_translation and
 * confidence; keys plain or quoted, lists in flow or block style, float
 * origins, integer confidence ids. */
static void test_old_tool_file(void **state) {
    (void)state;
    char path[512];
    tmp_path(path, sizeof path, "old.yaml");
    write_text(path,
               "confidence:\n"
               "  A/1:\n"
               "    '0':\n"
               "    - - 0\n"
               "      - 0\n"
               "    - - 1\n"
               "      - 0\n"
               "    - 0.93\n"
               "    1: !!python/tuple [[0, 0], [0, 1], 0.5]\n" /* yaml.dump of a tuple */
               "total_translation:\n"
               "  A/1/000000:\n"
               "  - 0\n"
               "  - 12\n"
               "  'A/1/001000': [3.0, 1890.0]\n"
               "  \"A/1/000001\": [1901, 0]\n"
               "  B/2/000000: [0, 0]\n"
               /* biahub's StitchSettings: [z, y, x] with z = 0, floats, block lists */
               "  B/2/001000:\n"
               "  - 0.0\n"
               "  - 4.6\n"
               "  - 1843.4\n"
               "channels: null\n"
               "affine_transform: null\n");
    ts_shifts *s = NULL;
    ts_error err;
    if (ts_shifts_read(path, &s, &err) != TS_OK) fail_msg("%s", err.message);
    assert_int_equal(s->nwells, 2);
    int a1 = ts_shifts_find_well(s, "A/1");
    assert_true(a1 >= 0);
    const ts_well_shifts *w = &s->wells[a1];
    assert_int_equal(w->ntiles, 3);
    int t = ts_shifts_find_tile(s, a1, "001000");
    assert_true(t >= 0);
    assert_true(w->has_origin[t]);
    assert_int_equal(w->origin[t][0], 3);
    assert_int_equal(w->origin[t][1], 1890);
    t = ts_shifts_find_tile(s, a1, "000000");
    assert_int_equal(w->origin[t][1], 12);
    t = ts_shifts_find_tile(s, a1, "000001");
    assert_int_equal(w->origin[t][0], 1901);
    assert_int_equal(w->npairs, 0);
    assert_int_equal(w->nedges, 2);
    assert_int_equal(w->edges[0].xb, 1);
    assert_int_equal(w->edges[0].yb, 0);
    assert_true(w->edges[0].confidence == 0.93);
    assert_int_equal(w->edges[1].yb, 1);
    assert_null(w->position);
    assert_false(s->has_tile_shape);
    int b2 = ts_shifts_find_well(s, "B/2");
    assert_int_equal(ts_shifts_find_tile(s, b2, "000000"), 0);
    t = ts_shifts_find_tile(s, b2, "001000");
    assert_int_equal(s->wells[b2].origin[t][0], 5);
    assert_int_equal(s->wells[b2].origin[t][1], 1843);
    /* And it is written back with both keys the old readers need. */
    char out[512];
    tmp_path(out, sizeof out, "old_rewritten.yaml");
    assert_int_equal(ts_shifts_write(out, s, &err), TS_OK);
    ts_shifts *r = NULL;
    if (ts_shifts_read(out, &r, &err) != TS_OK) fail_msg("%s", err.message);
    assert_same(s, r);
    assert_int_equal(r->wells[a1].nedges, 2);
    ts_shifts_free(r);
    ts_shifts_free(s);
}

/* PyYAML sorts keys: outliers and pairs come before tiles and
 * total_translation; the order of `tiles` is still restored. */
static void test_sorted_keys(void **state) {
    (void)state;
    char path[512];
    tmp_path(path, sizeof path, "sorted.yaml");
    write_text(path,
               "outliers:\n  A/1: [1]\n"
               "pairs:\n  A/1:\n  - [A/1/001000, A/1/002000, 0.5, 900.5, 0.8]\n"
               "  - [A/1/000000, A/1/001000, -0.5, 901, 0.9]\n"
               "tile_shape: [1024, 1024]\n"
               "tiles:\n  A/1: ['000000', '001000', '002000', '003000']\n"
               "total_translation:\n  A/1/002000: [1, 1801]\n  A/1/000000: [0, 0]\n  A/1/001000: [0, 901]\n");
    ts_shifts *s = NULL;
    ts_error err;
    if (ts_shifts_read(path, &s, &err) != TS_OK) fail_msg("%s", err.message);
    const ts_well_shifts *w = &s->wells[0];
    assert_int_equal(w->ntiles, 4);
    assert_string_equal(w->tiles[0], "000000");
    assert_string_equal(w->tiles[2], "002000");
    assert_string_equal(w->tiles[3], "003000");
    assert_false(w->has_origin[3]);
    assert_int_equal(w->origin[2][1], 1801);
    assert_int_equal(w->pairs[0].a, 1);
    assert_int_equal(w->pairs[0].b, 2);
    assert_int_equal(w->pairs[1].a, 0);
    assert_true(w->pairs[1].outlier);
    assert_false(w->pairs[0].outlier);
    assert_int_equal(ts_shifts_find_tile(s, 0, "003000"), 3);
    assert_int_equal(ts_shifts_find_tile(s, 0, "001000"), 1);
    ts_shifts_free(s);
}

static void expect_error(const char *name, const char *text, ts_status code, const char *needle1, const char *needle2) {
    char path[512];
    tmp_path(path, sizeof path, name);
    write_text(path, text);
    ts_shifts *s = NULL;
    ts_error err;
    ts_error_clear(&err);
    ts_status st = ts_shifts_read(path, &s, &err);
    if (st != code) fail_msg("%s: expected status %d, got %d (%s)", name, code, st, err.message);
    assert_null(s);
    if (!strstr(err.message, path)) fail_msg("message does not name the file: %s", err.message);
    if (needle1 && !strstr(err.message, needle1)) fail_msg("'%s' not in: %s", needle1, err.message);
    if (needle2 && !strstr(err.message, needle2)) fail_msg("'%s' not in: %s", needle2, err.message);
}

static void test_errors(void **state) {
    (void)state;
    /* Broken syntax: line and column. */
    expect_error("bad_syntax.yaml", "total_translation:\n  A/1/000000: [0, 0]\n  A/1/001000: [0, 1]]\n",
                 TS_ERR_FORMAT, ":3:", "malformed");
    /* An unclosed list swallows the next line as text: a number error. */
    expect_error("unclosed.yaml", "total_translation:\n  A/1/000000: [0, 0\n  A/1/001000: [0, 1]\n", TS_ERR_FORMAT,
                 "A/1/000000", ":2:");
    expect_error("bad_indent.yaml", "total_translation:\n  A/1/000000: [0, 0]\n bad: [1\n", TS_ERR_FORMAT, ":3:", NULL);
    /* NaN and non-numeric shifts: the key is named. */
    expect_error("nan.yaml", "total_translation:\n  A/1/000000: [0, 0]\n  A/1/001000: [.nan, 5]\n", TS_ERR_FORMAT,
                 "A/1/001000", "NaN");
    expect_error("nan2.yaml", "total_translation:\n  A/1/001000: [nan, 5]\n", TS_ERR_FORMAT, "A/1/001000", "NaN");
    expect_error("text.yaml", "total_translation:\n  A/1/000000: [0, zero]\n", TS_ERR_FORMAT, "A/1/000000", "zero");
    expect_error("short.yaml", "total_translation:\n  A/1/000000: [0]\n", TS_ERR_FORMAT, "A/1/000000", ":2:");
    expect_error("long.yaml", "total_translation:\n  A/1/000000: [0, 1, 2, 3]\n", TS_ERR_FORMAT, "A/1/000000", NULL);
    expect_error("zshift.yaml", "total_translation:\n  A/1/000000: [2.0, 1, 2]\n", TS_ERR_FORMAT, "A/1/000000", "z");
    expect_error("nokey.yaml", "confidence: {}\n", TS_ERR_FORMAT, "total_translation", NULL);
    expect_error("empty.yaml", "", TS_ERR_FORMAT, "empty", NULL);
    expect_error("list.yaml", "- 1\n- 2\n", TS_ERR_FORMAT, "total_translation", NULL);
    expect_error("nowell.yaml", "total_translation:\n  000000: [0, 0]\n", TS_ERR_FORMAT, "000000", NULL);
    expect_error("pairnan.yaml",
                 "total_translation: {}\npairs:\n  A/1:\n  - [A/1/000000, A/1/001000, 1.0, .NaN, 0.9]\n",
                 TS_ERR_FORMAT, "A/1", "001000");
    expect_error("pairwell.yaml", "total_translation: {}\npairs:\n  A/1:\n  - [B/1/000000, A/1/001000, 1, 2, 0.9]\n",
                 TS_ERR_FORMAT, "B/1/000000", NULL);
    expect_error("outlier.yaml", "total_translation: {}\noutliers:\n  A/1: [4]\n", TS_ERR_FORMAT, "outliers", "4");
    /* Old-tool confidence entries: grid coordinates must be grid
     * coordinates (a huge value was cast to int: undefined). */
    expect_error("confhuge.yaml", "total_translation: {}\nconfidence:\n  A/1:\n    '0': [[1e300, 0], [1, 0], 0.9]\n",
                 TS_ERR_FORMAT, "confidence A/1 '0'", ":4:12:");
    expect_error("confhalf.yaml", "total_translation: {}\nconfidence:\n  A/1:\n    '0': [[0, 0], [1.5, 0], 0.9]\n",
                 TS_ERR_FORMAT, "confidence A/1 '0'", "1.5");
    /* A '/' in a position name would come back as part of the well. */
    expect_error("slashtile.yaml", "total_translation: {}\ntiles:\n  A/1: ['000000', '0/1']\n", TS_ERR_FORMAT,
                 "tiles A/1", "0/1");
    expect_error("rot.yaml", "total_translation: {}\norientation: {flipud: maybe}\n", TS_ERR_FORMAT, "flipud", NULL);
    expect_error("rot5.yaml", "total_translation: {}\norientation: {rot90: 5}\n", TS_ERR_FORMAT, "rot90", ":2:22:");
    char missing[512];
    tmp_path(missing, sizeof missing, "does_not_exist.yaml");
    ts_shifts *s = NULL;
    ts_error err;
    assert_int_equal(ts_shifts_read(missing, &s, &err), TS_ERR_IO);
    assert_non_null(strstr(err.message, missing));
}

static void test_write_rejects_nan(void **state) {
    (void)state;
    ts_shifts *s = make_sample();
    s->wells[0].pairs[2].dx = NAN;
    char path[512];
    tmp_path(path, sizeof path, "nan_written.yaml");
    remove(path);
    ts_error err;
    assert_int_equal(ts_shifts_write(path, s, &err), TS_ERR_NUMERIC);
    assert_non_null(strstr(err.message, "001001"));
    assert_false(ts_path_exists(path));
    ts_shifts_free(s);
}

static void test_many_tiles_index(void **state) {
    (void)state;
    ts_shifts *s = ts_shifts_new();
    int w = ts_shifts_add_well(s, "C/7");
    char name[16];
    for (int i = 0; i < 200 * 200; i++) {
        snprintf(name, sizeof name, "%03d%03d", i % 200, i / 200);
        assert_int_equal(ts_shifts_add_tile(s, w, name), i);
    }
    for (int i = 0; i < 200 * 200; i += 7) {
        snprintf(name, sizeof name, "%03d%03d", i % 200, i / 200);
        assert_int_equal(ts_shifts_find_tile(s, w, name), i);
        assert_int_equal(ts_shifts_add_tile(s, w, name), i); /* finds, does not duplicate */
    }
    assert_int_equal(ts_shifts_find_tile(s, w, "999999"), -1);
    assert_int_equal(s->wells[w].ntiles, 200 * 200);
    int gx, gy;
    assert_true(ts_position_grid("012034", false, &gx, &gy));
    assert_int_equal(gx, 12);
    assert_int_equal(gy, 34);
    assert_true(ts_position_grid("012034", true, &gx, &gy));
    assert_int_equal(gx, 34);
    assert_false(ts_position_grid("01203", false, &gx, &gy));
    assert_false(ts_position_grid("01203a", false, &gx, &gy));
    ts_shifts_free(s);
}

/* A mapping key given twice, at any level (a second total_translation, a
 * tile, a well, a confidence id, an orientation flag, a key of an unknown
 * section that is only skipped) is refused naming the key and both lines:
 * the later one won silently. */
static void test_repeated_keys(void **state) {
    (void)state;
    expect_error("dup_top.yaml", "total_translation:\n  A/1/000000: [0, 0]\ntotal_translation:\n  A/1/000000: [5, 5]\n",
                 TS_ERR_FORMAT, "key 'total_translation' is repeated (first at line 1)", ":3:1:");
    expect_error("dup_tile.yaml", "total_translation:\n  A/1/000000: [0, 0]\n  A/1/001000: [0, 9]\n  A/1/000000: [5, 5]\n",
                 TS_ERR_FORMAT, "key 'A/1/000000' is repeated (first at line 2)", ":4:3:");
    expect_error("dup_well.yaml",
                 "total_translation: {A/1/000000: [0, 0]}\ntiles:\n  A/1: ['000000']\n  A/1: ['000000']\n",
                 TS_ERR_FORMAT, "key 'A/1' is repeated (first at line 3)", ":4:");
    expect_error("dup_conf.yaml",
                 "total_translation: {}\nconfidence:\n  A/1:\n    '0': [[0, 0], [1, 0], 0.9]\n    '0': [[0, 0], [0, 1], 0.8]\n",
                 TS_ERR_FORMAT, "key '0' is repeated (first at line 4)", ":5:");
    expect_error("dup_orient.yaml", "total_translation: {}\norientation: {flipud: false, rot90: 1, flipud: true}\n",
                 TS_ERR_FORMAT, "key 'flipud' is repeated", ":2:");
    expect_error("dup_skipped.yaml", "total_translation: {}\nextra:\n  a: 1\n  b: {c: 2, c: 3}\n", TS_ERR_FORMAT,
                 "key 'c' is repeated", ":4:");
    expect_error("dup_quoted.yaml", "total_translation:\n  A/1/000000: [0, 0]\n  'A/1/000000': [1, 1]\n",
                 TS_ERR_FORMAT, "key 'A/1/000000' is repeated", ":3:");
    expect_error("complex_key.yaml", "total_translation: {}\n? [a, b]\n: 1\n", TS_ERR_FORMAT, "mapping key", ":2:");
    /* The same key in two different mappings is fine. */
    char path[512];
    tmp_path(path, sizeof path, "same_key_two_maps.yaml");
    write_text(path, "total_translation:\n  A/1/000000: [0, 0]\n  B/1/000000: [0, 0]\n"
                     "tiles:\n  A/1: ['000000']\n  B/1: ['000000']\n"
                     "orientation: {flipud: false}\nextra: {flipud: true}\n");
    ts_shifts *s = NULL;
    ts_error err;
    if (ts_shifts_read(path, &s, &err) != TS_OK) fail_msg("%s", err.message);
    assert_int_equal(s->nwells, 2);
    ts_shifts_free(s);
}

/* The format nests 5 deep; a file nested far deeper is refused at the 33rd
 * level with its line, in bounded time (libyaml is quadratic in the depth:
 * 400 KB of '[' took over a minute). */
static void test_nesting_depth(void **state) {
    (void)state;
    enum { N = 400000 };
    const char *shapes[][2] = {{"[", "]"}, {"{a: ", "}"}};
    for (int k = 0; k < 2; k++) {
        size_t lo = strlen(shapes[k][0]), lc = strlen(shapes[k][1]);
        char *text = malloc(64 + (size_t)N * (lo + lc));
        size_t n = (size_t)sprintf(text, "total_translation: {}\nx: ");
        for (int i = 0; i < N; i++) memcpy(text + n, shapes[k][0], lo), n += lo;
        text[n++] = '1';
        for (int i = 0; i < N; i++) memcpy(text + n, shapes[k][1], lc), n += lc;
        text[n] = '\0';
        struct timespec t0, t1;
        clock_gettime(CLOCK_MONOTONIC, &t0);
        expect_error(k ? "deep_map.yaml" : "deep_list.yaml", text, TS_ERR_FORMAT, "nested more than 32 levels", ":2:");
        clock_gettime(CLOCK_MONOTONIC, &t1);
        double secs = (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
        if (secs > 2.0) fail_msg("refusing %zu bytes of nesting took %.1f s", n, secs);
        free(text);
    }
    /* Block style nests by indentation: the same cap. */
    char block[8192];
    size_t n = (size_t)sprintf(block, "total_translation: {}\nx:\n");
    for (int i = 0; i < 40; i++) n += (size_t)sprintf(block + n, "%*sk%d:\n", 2 * (i + 1), "", i);
    sprintf(block + n, "%*s1\n", 2 * 41, "");
    expect_error("deep_block.yaml", block, TS_ERR_FORMAT, "nested more than 32 levels", ":34:");
    /* 32 levels are allowed. */
    char path[512];
    tmp_path(path, sizeof path, "depth32.yaml");
    n = (size_t)sprintf(block, "total_translation: {}\nx: ");
    for (int i = 0; i < 31; i++) block[n++] = '[';
    for (int i = 0; i < 31; i++) block[n++] = ']';
    block[n++] = '\n';
    block[n] = '\0';
    write_text(path, block);
    ts_shifts *s = NULL;
    ts_error err;
    if (ts_shifts_read(path, &s, &err) != TS_OK) fail_msg("%s", err.message);
    ts_shifts_free(s);
}

/* Shifts and coordinates that cannot be a scan are refused on read, naming
 * the pair or key and the value's line and column (1e300 reached the solve
 * as "the tile system is singular"). */
static void test_absurd_values(void **state) {
    (void)state;
    const char *head = "total_translation: {}\npairs:\n  A/1:\n  - [A/1/000000, A/1/001000, 1.5, 9.0, 0.9]\n";
    char text[512];
    snprintf(text, sizeof text, "%s  - [A/1/000000, A/1/000001, 1e300, 2.0, 0.9]\n", head);
    expect_error("pair_huge.yaml", text, TS_ERR_FORMAT, "pairs A/1 [1] (000000 -> 000001): dy 1e+300 px is absurd",
                 ":5:30:");
    snprintf(text, sizeof text, "%s  - [A/1/000000, A/1/000001, 3, -2e9, 0.9]\n", head);
    expect_error("pair_huge_dx.yaml", text, TS_ERR_FORMAT, "(000000 -> 000001): dx -2e+09 px is absurd", ":5:33:");
    snprintf(text, sizeof text, "%s  - [A/1/000000, A/1/000001, .inf, 2.0, 0.9]\n", head);
    expect_error("pair_inf.yaml", text, TS_ERR_FORMAT, "(000000 -> 000001)", "infinite");
    snprintf(text, sizeof text, "%s  - [A/1/000000, A/1/000001, 1e400, 2.0, 0.9]\n", head);
    expect_error("pair_overflow.yaml", text, TS_ERR_FORMAT, "(000000 -> 000001)", "not finite");
    snprintf(text, sizeof text, "%s  - [A/1/000000, A/1/000001, 1, 2.0, -0.5]\n", head);
    expect_error("pair_conf.yaml", text, TS_ERR_FORMAT, "confidence -0.5 is not in [0, 1]", ":5:38:");
    snprintf(text, sizeof text, "%s  - [A/1/000001, A/1/000001, 1, 2.0, 0.5]\n", head);
    expect_error("pair_self.yaml", text, TS_ERR_FORMAT, "(000001 -> 000001): a pair joins a tile to itself", ":5:");
    expect_error("origin_huge.yaml", "total_translation:\n  A/1/000000: [0, 0]\n  A/1/001000: [3, 1e12]\n",
                 TS_ERR_FORMAT, "total_translation A/1/001000: coordinate 1e+12 px is absurd", ":3:19:");
    expect_error("position_huge.yaml", "total_translation: {}\npositions:\n  A/1/000000: [-5e9, 0]\n",
                 TS_ERR_FORMAT, "positions A/1/000000: coordinate -5e+09 px is absurd", ":3:16:");
    expect_error("residual_huge.yaml",
                 "total_translation: {}\npairs:\n  A/1:\n  - [A/1/000000, A/1/001000, 1, 2, 0.9]\n"
                 "residuals:\n  A/1: [[0.5, 1e30]]\n",
                 TS_ERR_FORMAT, "residuals A/1: x 1e+30 px is absurd", ":6:15:");
}

/* `tiles` lists: an empty list is a well without tiles (restore_order
 * called memcpy on NULL arrays: UBSan), a position listed twice is refused. */
static void test_tiles_lists(void **state) {
    (void)state;
    char path[512];
    tmp_path(path, sizeof path, "empty_tiles.yaml");
    write_text(path, "total_translation:\n  B/1/000000: [0, 0]\ntiles:\n  A/1: []\n  B/1: ['000000']\n");
    ts_shifts *s = NULL;
    ts_error err;
    if (ts_shifts_read(path, &s, &err) != TS_OK) fail_msg("%s", err.message);
    int w = ts_shifts_find_well(s, "A/1");
    assert_true(w >= 0);
    assert_int_equal(s->wells[w].ntiles, 0);
    assert_int_equal(s->wells[ts_shifts_find_well(s, "B/1")].ntiles, 1);
    ts_shifts_free(s);
    expect_error("twice_tiles.yaml", "total_translation: {}\ntiles:\n  A/1: ['000000', '001000', '000000']\n",
                 TS_ERR_FORMAT, "tiles A/1: position '000000' is listed twice", NULL);
}

/* nominal_pitch (what estimate solved with, for tessera solve): written
 * when set, read back exactly, absent from files without it, a pitch of 0
 * or less refused at its line. */
static void test_nominal_pitch(void **state) {
    (void)state;
    char path[512];
    tmp_path(path, sizeof path, "pitch.yaml");
    ts_shifts *s = make_sample(), *back = NULL;
    ts_error err;
    assert_false(s->has_nominal_pitch);
    s->has_nominal_pitch = true;
    s->nominal_pitch[0] = 1843.5;
    s->nominal_pitch[1] = 922;
    assert_int_equal(ts_shifts_write(path, s, &err), TS_OK);
    if (ts_shifts_read(path, &back, &err) != TS_OK) fail_msg("%s", err.message);
    assert_true(back->has_nominal_pitch);
    assert_true(back->nominal_pitch[0] == 1843.5 && back->nominal_pitch[1] == 922.0);
    ts_shifts_free(back);
    s->has_nominal_pitch = false;
    assert_int_equal(ts_shifts_write(path, s, &err), TS_OK);
    if (ts_shifts_read(path, &back, &err) != TS_OK) fail_msg("%s", err.message);
    assert_false(back->has_nominal_pitch);
    ts_shifts_free(back);
    ts_shifts_free(s);
    expect_error("pitch_zero.yaml", "total_translation: {}\nnominal_pitch: [0, 100]\n", TS_ERR_FORMAT,
                 "nominal_pitch: [0, 100] is not a positive pitch", ":2:");
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_nominal_pitch),
        cmocka_unit_test(test_round_trip),     cmocka_unit_test(test_old_tool_file),
        cmocka_unit_test(test_sorted_keys),    cmocka_unit_test(test_errors),
        cmocka_unit_test(test_write_rejects_nan), cmocka_unit_test(test_many_tiles_index),
        cmocka_unit_test(test_repeated_keys),  cmocka_unit_test(test_nesting_depth),
        cmocka_unit_test(test_absurd_values),  cmocka_unit_test(test_tiles_lists),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
