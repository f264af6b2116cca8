/* The two-part read of large shifts files (shifts_read.c, yaml_split.c):
 * at every split point the model is the one a single parser builds, and
 * files that cannot be split safely are read by one parser, with the same
 * result or the same error (line and column included). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/error.h"
#include "common/fs.h"
#include "shifts/shifts.h"
#include "shifts/shifts_internal.h"
#include "shifts/yaml_split.h"

static void tmp_path(char *out, size_t n, const char *name) {
    snprintf(out, n, "%s/test_shifts_split_%s", TESSERA_TEST_TMP, name);
}

static void write_text(const char *path, const char *text) {
    ts_error err;
    assert_int_equal(ts_write_file_atomic(path, text, strlen(text), &err), TS_OK);
}

static char *read_text(const char *path, size_t *len) {
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    fseek(f, 0, SEEK_END);
    long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    char *b = malloc((size_t)n + 1);
    assert_non_null(b);
    assert_int_equal(fread(b, 1, (size_t)n, f), (size_t)n);
    b[n] = '\0';
    fclose(f);
    *len = (size_t)n;
    return b;
}

/* One parser, whatever the size. */
static ts_status read_single(const char *path, ts_shifts **s, ts_error *err) {
    ts_shifts_read_opts o = {.split_min_bytes = SIZE_MAX, .split_target = -1};
    ts_status st = ts_shifts_read_ex(path, &o, s, err);
    assert_int_equal(o.parts, 1);
    return st;
}

/* Split (if it can be) from byte target, whatever the size. */
static ts_status read_split_at(const char *path, long long target, int *parts, ts_shifts **s, ts_error *err) {
    ts_shifts_read_opts o = {.split_min_bytes = 1, .split_target = target};
    ts_status st = ts_shifts_read_ex(path, &o, s, err);
    *parts = o.parts;
    return st;
}

static bool same_double(double a, double b) { return memcmp(&a, &b, sizeof a) == 0 || (isnan(a) && isnan(b)); }

/* Everything the reader fills in, in order. */
static void assert_same_model(const ts_shifts *a, const ts_shifts *b) {
    assert_int_equal(a->nwells, b->nwells);
    assert_int_equal(a->has_tile_shape, b->has_tile_shape);
    assert_memory_equal(a->tile_shape, b->tile_shape, sizeof a->tile_shape);
    assert_int_equal(a->has_orientation, b->has_orientation);
    assert_int_equal(a->orientation.flipud, b->orientation.flipud);
    assert_int_equal(a->orientation.fliplr, b->orientation.fliplr);
    assert_int_equal(a->orientation.rot90, b->orientation.rot90);
    assert_int_equal(a->names_yx, b->names_yx);
    assert_int_equal(a->has_nominal_pitch, b->has_nominal_pitch);
    assert_true(same_double(a->nominal_pitch[0], b->nominal_pitch[0]));
    assert_true(same_double(a->nominal_pitch[1], b->nominal_pitch[1]));
    for (int wi = 0; wi < a->nwells; wi++) {
        const ts_well_shifts *x = &a->wells[wi], *y = &b->wells[wi];
        assert_string_equal(x->well, y->well);
        assert_int_equal(x->ntiles, y->ntiles);
        assert_int_equal(x->npairs, y->npairs);
        assert_int_equal(x->nedges, y->nedges);
        assert_int_equal(x->position != NULL, y->position != NULL);
        for (int t = 0; t < x->ntiles; t++) {
            assert_string_equal(x->tiles[t], y->tiles[t]);
            assert_int_equal(x->has_origin[t], y->has_origin[t]);
            assert_int_equal(x->origin[t][0], y->origin[t][0]);
            assert_int_equal(x->origin[t][1], y->origin[t][1]);
            if (x->position) {
                assert_true(same_double(x->position[t][0], y->position[t][0]));
                assert_true(same_double(x->position[t][1], y->position[t][1]));
            }
            /* The name index was rebuilt or merged: it finds every tile. */
            assert_int_equal(ts_shifts_find_tile(b, wi, y->tiles[t]), t);
        }
        for (int i = 0; i < x->npairs; i++) {
            const ts_shift_pair *p = &x->pairs[i], *q = &y->pairs[i];
            assert_int_equal(p->a, q->a);
            assert_int_equal(p->b, q->b);
            assert_true(same_double(p->dy, q->dy));
            assert_true(same_double(p->dx, q->dx));
            assert_true(same_double(p->confidence, q->confidence));
            assert_int_equal(p->outlier, q->outlier);
            assert_true(same_double(p->ry, q->ry));
            assert_true(same_double(p->rx, q->rx));
        }
        for (int i = 0; i < x->nedges; i++) assert_memory_equal(&x->edges[i], &y->edges[i], sizeof x->edges[i]);
    }
}

static char tile_name_buf[8];
static const char *grid_name(int gx, int gy) {
    snprintf(tile_name_buf, sizeof tile_name_buf, "%03d%03d", gx, gy);
    return tile_name_buf;
}

/* Three wells of grid tiles, each with pairs, solved values, outliers; the
 * tile order of `tiles` differs from the order the pairs name them in. */
static ts_shifts *make_plate(int side) {
    ts_shifts *s = ts_shifts_new();
    s->has_tile_shape = true;
    s->tile_shape[0] = 2048;
    s->tile_shape[1] = 1900;
    s->has_orientation = true;
    s->orientation = (ts_orientation){.flipud = true, .fliplr = false, .rot90 = 3};
    s->has_nominal_pitch = true;
    s->nominal_pitch[0] = 1843.25;
    s->nominal_pitch[1] = 1710.5;
    const char *wells[] = {"A/1", "B/12", "C/3"};
    for (int wi = 0; wi < 3; wi++) {
        int w = ts_shifts_add_well(s, wells[wi]);
        int n = wi == 2 ? 2 : side; /* C/3: two tiles, one pair */
        for (int gy = n - 1; gy >= 0; gy--)
            for (int gx = 0; gx < n; gx++) assert_true(ts_shifts_add_tile(s, w, grid_name(gx, gy)) >= 0);
        assert_true(ts_shifts_ensure_positions(s, w));
        ts_well_shifts *ws = &s->wells[w];
        for (int t = 0; t < ws->ntiles; t++) {
            ws->has_origin[t] = t % 7 != 3;
            ws->origin[t][0] = 1843 * t + wi;
            ws->origin[t][1] = 17 * t;
            ws->position[t][0] = 1843.125 * t + wi;
            ws->position[t][1] = t % 5 == 1 ? NAN : 17.000001 * t;
        }
        int k = 0;
        for (int gy = 0; gy < n; gy++)
            for (int gx = 0; gx < n; gx++) {
                int a = ts_shifts_find_tile(s, w, grid_name(gx, gy));
                for (int d = 0; d < 2; d++) {
                    int bx = gx + (d == 0), by = gy + (d == 1);
                    if (bx >= n || by >= n) continue;
                    int b = ts_shifts_find_tile(s, w, grid_name(bx, by));
                    int p = ts_shifts_add_pair(s, w, a, b, d ? 1843.0 + 0.1 * k : -3.5e-7 * k,
                                               d ? 2.25 - k : 1710.0 + k / 3.0, (k % 11) / 10.0);
                    ws->pairs[p].outlier = k % 9 == 4;
                    if (k % 13 != 6) ws->pairs[p].ry = 0.001 * k, ws->pairs[p].rx = -0.5 * k;
                    k++;
                }
            }
    }
    return s;
}

/* The writer's layout, split at the start of every line and at bytes in
 * between: the model is always the single parser's, and the split is taken
 * wherever the target lies in a well's list of pairs past its first
 * entry (the first entry would leave part A the key without a list). */
static void test_every_split_point(void **state) {
    (void)state;
    char path[512];
    tmp_path(path, sizeof path, "plate.yaml");
    ts_shifts *s = make_plate(5);
    ts_error err;
    assert_int_equal(ts_shifts_write(path, s, &err), TS_OK);
    ts_shifts_free(s);
    ts_shifts *ref = NULL;
    assert_int_equal(read_single(path, &ref, &err), TS_OK);
    size_t len;
    char *text = read_text(path, &len);
    const char *pairs = strstr(text, "\npairs:\n"), *conf = strstr(text, "\nconfidence:\n");
    assert_non_null(pairs);
    assert_non_null(conf);
    int splits = 0, tried = 0;
    for (size_t target = 0; target <= len; target++) {
        bool line_start = target == 0 || text[target - 1] == '\n';
        if (!line_start && target % 7) continue;
        ts_shifts *got = NULL;
        int parts = 0;
        assert_int_equal(read_split_at(path, (long long)target, &parts, &got, &err), TS_OK);
        assert_same_model(ref, got);
        ts_shifts_free(got);
        tried++;
        splits += parts == 2;
        /* A line of a well's list past its first entry: split there. */
        if (line_start && text + target > pairs && text + target < conf && strncmp(text + target, "  - [", 5) == 0) {
            const char *prev = text + target - 1;
            while (prev > text && prev[-1] != '\n') prev--;
            if (strncmp(prev, "  - [", 5) == 0) assert_int_equal(parts, 2);
        }
    }
    /* All of A/1's and B/12's entries but their first, and C/3's one entry
     * is first: with 5 x 5 tiles 40 pairs each. */
    assert_true(splits >= 2 * 39);
    assert_true(tried > splits);
    free(text);
    ts_shifts_free(ref);
    remove(path);
}

/* A file big enough for the default threshold is split by default, near
 * TS_SHIFTS_SPLIT_AT of its bytes. */
static void test_default_split(void **state) {
    (void)state;
    char path[512];
    tmp_path(path, sizeof path, "big.yaml");
    ts_shifts *s = make_plate(60);
    ts_error err;
    assert_int_equal(ts_shifts_write(path, s, &err), TS_OK);
    ts_shifts_free(s);
    size_t len;
    free(read_text(path, &len));
    assert_true(len >= TS_SHIFTS_SPLIT_MIN);
    ts_shifts *ref = NULL, *got = NULL;
    assert_int_equal(read_single(path, &ref, &err), TS_OK);
    ts_shifts_read_opts o = {.split_min_bytes = 0, .split_target = -1};
    assert_int_equal(ts_shifts_read_ex(path, &o, &got, &err), TS_OK);
    assert_int_equal(o.parts, 2);
    assert_same_model(ref, got);
    ts_shifts_free(got);
    /* The public reader gives the same model. */
    assert_int_equal(ts_shifts_read(path, &got, &err), TS_OK);
    assert_same_model(ref, got);
    ts_shifts_free(got);
    ts_shifts_free(ref);
    remove(path);
}

/* The finder: the start of an entry line at or after the target, under its
 * well key; nothing when no key is above, or when only other kinds of lines
 * lead up to it. */
static void test_find_split(void **state) {
    (void)state;
    const char *t = "total_translation: {}\n"
                    "pairs:\n"
                    "  A/1:\n"
                    "  - [A/1/000000, A/1/001000, 1.0, 2.0, 0.5]\n"
                    "  # a comment\n"
                    "\n"
                    "  - [A/1/001000, A/1/002000, 1.0, 2.0, 0.5]\n";
    size_t len = strlen(t), split, wl;
    const char *well;
    const char *second = strstr(t, "  - [A/1/001000");
    assert_true(ts_yaml_find_split(t, len, (size_t)(strstr(t, "  # a") - t), &split, &well, &wl));
    assert_int_equal(split, (size_t)(second - t));
    assert_int_equal(wl, 3);
    assert_memory_equal(well, "A/1", 3);
    /* Past the last entry: the last one before. */
    assert_true(ts_yaml_find_split(t, len, len, &split, &well, &wl));
    assert_int_equal(split, (size_t)(second - t));
    /* Mid-line: the next line start, never the middle of an entry. */
    assert_true(ts_yaml_find_split(t, len, (size_t)(second - t) - 20, &split, &well, &wl));
    assert_int_equal(split, (size_t)(second - t));
    const char *no_key = "pairs:\n  A/1: [\n  - [a, b, 1, 2]\n  ]\n";
    assert_false(ts_yaml_find_split(no_key, strlen(no_key), 0, &split, &well, &wl));
    const char *quoted_key = "pairs:\n  'A/1':\n  - [a, b, 1, 2]\n  - [a, b, 1, 2]\n";
    assert_false(ts_yaml_find_split(quoted_key, strlen(quoted_key), 0, &split, &well, &wl));
    const char *deeper = "pairs:\n    A/1:\n    - [a, b, 1, 2]\n    - [a, b, 1, 2]\n";
    assert_false(ts_yaml_find_split(deeper, strlen(deeper), 0, &split, &well, &wl));
}

/* Writes text to path and reads it at every line start as the split
 * target: the same model as one parser, or the same error; returns how
 * often the split was taken. */
static int read_everywhere(const char *path, const char *text) {
    write_text(path, text);
    ts_shifts *ref = NULL;
    ts_error ref_err = {0};
    ts_status ref_st = read_single(path, &ref, &ref_err);
    int splits = 0;
    size_t len = strlen(text);
    for (size_t target = 0; target <= len; target++) {
        if (target > 0 && text[target - 1] != '\n') continue;
        ts_shifts *got = NULL;
        ts_error err = {0};
        int parts = 0;
        ts_status st = read_split_at(path, (long long)target, &parts, &got, &err);
        assert_int_equal(st, ref_st);
        if (st) assert_string_equal(err.message, ref_err.message);
        else assert_same_model(ref, got);
        ts_shifts_free(got);
        splits += parts == 2;
    }
    ts_shifts_free(ref);
    return splits;
}

/* Entry-looking lines inside a multi-line quoted scalar: part A would end
 * inside the scalar (an error), so one parser reads the file. */
static void test_split_in_quoted_scalar(void **state) {
    (void)state;
    char path[512];
    tmp_path(path, sizeof path, "quoted.yaml");
    const char *t = "total_translation:\n"
                    "  A/1/000000: [0, 0]\n"
                    "pairs:\n"
                    "  A/1:\n"
                    "  - [A/1/000000, A/1/001000, 1.0, 2.0, 0.5]\n"
                    "note: \"not pairs\n"
                    "  A/1:\n"
                    "  - [A/1/000000, A/1/001000, 3.0, 4.0, 0.5]\n"
                    "  - [A/1/000000, A/1/001000, 5.0, 6.0, 0.5]\n"
                    "  \"\n";
    assert_int_equal(read_everywhere(path, t), 0);
    remove(path);
}

/* Keys repeated across the split, in the two mappings it cuts through:
 * neither part sees both, so the parts are discarded and one parser
 * reports the repeat, naming both lines. */
static void test_split_repeated_keys(void **state) {
    (void)state;
    char path[512];
    tmp_path(path, sizeof path, "repeat.yaml");
    const char *top = "total_translation: {}\n"
                      "tiles:\n"
                      "  A/1: ['000000', '001000']\n"
                      "pairs:\n"
                      "  A/1:\n"
                      "  - [A/1/000000, A/1/001000, 1.0, 2.0, 0.5]\n"
                      "  - [A/1/000000, A/1/001000, 3.0, 4.0, 0.5]\n"
                      "  - [A/1/000000, A/1/001000, 5.0, 6.0, 0.5]\n"
                      "tiles:\n"
                      "  A/1: ['000000']\n";
    assert_int_equal(read_everywhere(path, top), 0);
    ts_shifts *s = NULL;
    ts_error err;
    assert_int_equal(read_split_at(path, (long long)(strstr(top, "  - [A/1/000000, A/1/001000, 3.0") - top), &(int){0},
                                   &s, &err),
                     TS_ERR_FORMAT);
    assert_non_null(strstr(err.message, "key 'tiles' is repeated (first at line 2)"));
    assert_non_null(strstr(err.message, ":9:1:"));
    const char *wells = "total_translation: {}\n"
                        "pairs:\n"
                        "  A/1:\n"
                        "  - [A/1/000000, A/1/001000, 1.0, 2.0, 0.5]\n"
                        "  B/2:\n"
                        "  - [B/2/000000, B/2/001000, 1.0, 2.0, 0.5]\n"
                        "  - [B/2/000000, B/2/001000, 3.0, 4.0, 0.5]\n"
                        "  A/1:\n"
                        "  - [A/1/000000, A/1/001000, 5.0, 6.0, 0.5]\n";
    assert_int_equal(read_everywhere(path, wells), 0);
    remove(path);
}

/* Errors after the split (part B), before it (part A), and a well list
 * whose only entry follows the key: the single parser's outcome, with the
 * line and column of the whole file. */
static void test_split_errors_and_fallbacks(void **state) {
    (void)state;
    char path[512];
    tmp_path(path, sizeof path, "errors.yaml");
    const char *late = "total_translation: {}\n"
                       "pairs:\n"
                       "  A/1:\n"
                       "  - [A/1/000000, A/1/001000, 1.0, 2.0, 0.5]\n"
                       "  - [A/1/000000, A/1/001000, 3.0, 4.0, 0.5]\n"
                       "  - [A/1/000000, A/1/001000, 5.0, x6.0, 0.5]\n";
    assert_int_equal(read_everywhere(path, late), 0);
    ts_shifts *s = NULL;
    ts_error err;
    int parts = 0;
    assert_int_equal(read_split_at(path, (long long)(strstr(late, "3.0") - late), &parts, &s, &err), TS_ERR_FORMAT);
    assert_non_null(strstr(err.message, ":6:35: pairs A/1 [2] (000000 -> 001000): 'x6.0' is not a number"));
    const char *early = "total_translation: {}\n"
                        "pairs:\n"
                        "  A/1:\n"
                        "  - [A/1/000000, A/1/001000, 1.0, 2.0, 1.5]\n"
                        "  - [A/1/000000, A/1/001000, 3.0, 4.0, 0.5]\n";
    assert_int_equal(read_everywhere(path, early), 0);
    /* Outliers after the split refer to pairs of both parts. */
    const char *ok = "total_translation: {A/1/000000: [0, 0]}\n"
                     "pairs:\n"
                     "  A/1:\n"
                     "  - [A/1/000000, A/1/001000, 1.0, 2.0, 0.5]\n"
                     "\n"
                     "  # comment lines and blank lines between entries\n"
                     "  - [A/1/001000, A/1/002000, 3.0, 4.0, 0.5]\n"
                     "  - [A/1/000000, A/1/000001, 5.0, 6.0, 0.5]\n"
                     "outliers:\n"
                     "  A/1: [0, 2]\n"
                     "residuals:\n"
                     "  A/1: [[0.5, 1], null, [2, 3]]\n"
                     "positions:\n"
                     "  A/1/002000: [1, 2]\n"
                     "names_yx: true\n";
    assert_true(read_everywhere(path, ok) >= 2);
    assert_int_equal(read_split_at(path, (long long)(strstr(ok, "  # comment") - ok), &parts, &s, &err), TS_OK);
    assert_int_equal(parts, 2);
    assert_true(s->names_yx);
    assert_int_equal(s->wells[0].npairs, 3);
    assert_true(s->wells[0].pairs[0].outlier && !s->wells[0].pairs[1].outlier && s->wells[0].pairs[2].outlier);
    ts_shifts_free(s);
    /* Pairs before the split are checked against outliers after it. */
    const char *range = "total_translation: {}\n"
                        "pairs:\n"
                        "  A/1:\n"
                        "  - [A/1/000000, A/1/001000, 1.0, 2.0, 0.5]\n"
                        "  - [A/1/001000, A/1/002000, 3.0, 4.0, 0.5]\n"
                        "outliers:\n"
                        "  A/1: [2]\n";
    assert_int_equal(read_everywhere(path, range), 0);
    /* %TAG directives: never split (B would not know the handle). */
    const char *tags = "%TAG !t! tag:example.com,2026:\n"
                       "---\n"
                       "total_translation: {}\n"
                       "pairs:\n"
                       "  A/1:\n"
                       "  - [A/1/000000, A/1/001000, 1.0, 2.0, 0.5]\n"
                       "  - [A/1/001000, A/1/002000, !t!n 3.0, 4.0, 0.5]\n";
    assert_int_equal(read_everywhere(path, tags), 0);
    remove(path);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_split_point),
        cmocka_unit_test(test_default_split),
        cmocka_unit_test(test_find_split),
        cmocka_unit_test(test_split_in_quoted_scalar),
        cmocka_unit_test(test_split_repeated_keys),
        cmocka_unit_test(test_split_errors_and_fallbacks),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
