/* The shifts file as JSON (ts_shifts_write_json / ts_shifts_read_json, the
 * Python package's path to the file): a dict is either refused naming the
 * key at fault, leaving no file, or written as a file the YAML reader reads
 * back to the same values. Each case here was written, and then read back
 * differently or refused by the reader, before the converter checked it. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tessera/tessera.h"

static char path[512];

static int setup(void **state) {
    (void)state;
    snprintf(path, sizeof path, "%s/shifts_json_%d.yaml", TESSERA_TEST_TMP, (int)getpid());
    return 0;
}

static int teardown(void **state) {
    (void)state;
    unlink(path);
    return 0;
}

/* Refused with TS_ERR_FORMAT naming `key` and the file; no file left. */
static void refused(const char *json, const char *key) {
    unlink(path);
    ts_error err = {0};
    ts_status st = ts_shifts_write_json(path, json, &err);
    if (st == TS_OK) {
        char *back = NULL;
        ts_error e2 = {0};
        ts_status rs = ts_shifts_read_json(path, &back, &e2);
        fail_msg("written, not refused: %s\n  read back (%d): %s", json, (int)rs, rs == TS_OK ? back : e2.message);
    }
    assert_int_equal(st, TS_ERR_FORMAT);
    if (!strstr(err.message, key) || !strstr(err.message, path)) fail_msg("'%s' does not name %s", err.message, key);
    assert_int_equal(access(path, F_OK), -1);
}

/* Written, and read back: the JSON the reader gives. */
static json_t *round_trip(const char *json) {
    ts_error err = {0};
    if (ts_shifts_write_json(path, json, &err) != TS_OK) fail_msg("refused: %s", err.message);
    char *text = NULL;
    if (ts_shifts_read_json(path, &text, &err) != TS_OK) fail_msg("written but not read back: %s", err.message);
    json_t *j = json_loads(text, 0, NULL);
    free(text);
    assert_non_null(j);
    return j;
}

/* Integers beyond int were cut to their low 32 bits (json_unpack "i"):
 * tile_shape 2^32 + 1 was written as 1, rot90 2^32 + 1 as 1; and values the
 * YAML reader refuses (a grid cell beyond 999, a tile side beyond 10^9)
 * were written. */
static void test_integers(void **state) {
    (void)state;
    refused("{\"total_translation\":{\"A/1/000000\":[0,0]},\"tile_shape\":[4294967297,5]}", "tile_shape");
    refused("{\"total_translation\":{\"A/1/000000\":[0,0]},\"tile_shape\":[2000000000,5]}", "tile_shape");
    refused("{\"total_translation\":{\"A/1/000000\":[0,0]},\"orientation\":{\"rot90\":4294967297}}", "orientation");
    refused("{\"total_translation\":{\"A/1/000000\":[0,0]},\"confidence\":{\"A/1\":{\"0\":[[0,0],[4294967297,0],"
            "0.5]}}}", "A/1");
    refused("{\"total_translation\":{\"A/1/000000\":[0,0]},\"confidence\":{\"A/1\":{\"0\":[[0,0],[1000,0],0.5]}}}",
            "A/1");
    json_t *j = round_trip("{\"total_translation\":{\"A/1/000000\":[0,0]},\"tile_shape\":[1000000000,7],"
                           "\"orientation\":{\"rot90\":3},\"confidence\":{\"A/1\":{\"0\":[[0,0],[999,0],0.5]}}}");
    json_t *ts = json_object_get(j, "tile_shape");
    assert_int_equal(json_integer_value(json_array_get(ts, 0)), 1000000000);
    assert_int_equal(json_integer_value(json_object_get(json_object_get(j, "orientation"), "rot90")), 3);
    json_t *e = json_object_get(json_object_get(json_object_get(j, "confidence"), "A/1"), "0");
    assert_int_equal(json_integer_value(json_array_get(json_array_get(e, 1), 0)), 999);
    json_decref(j);
}

/* A name with a line break was written (quoted across two lines) and the
 * reader then refused the file. */
static void test_control_characters(void **state) {
    (void)state;
    refused("{\"total_translation\":{\"A/1/a\\nb\":[0,0]}}", "A/1/a");
    refused("{\"total_translation\":{\"A/1/000000\":[0,0]},\"tiles\":{\"A/1\":[\"000000\",\"x\\u0001\"]}}", "x\\x01");
    refused("{\"total_translation\":{\"A\\r/1/000000\":[0,0]}}", "A\\x0d/1/000000");
    json_t *j = round_trip("{\"total_translation\":{\"A/1/#x\":[0,0],\"A/1/a: b\":[1,2],\"A/1/null\":[3,4],"
                           "\"A/1/\\u00e9\":[5,6]}}");
    json_t *tt = json_object_get(j, "total_translation");
    assert_int_equal(json_object_size(tt), 4);
    assert_non_null(json_object_get(tt, "A/1/#x"));
    assert_non_null(json_object_get(tt, "A/1/a: b"));
    assert_non_null(json_object_get(tt, "A/1/null"));
    assert_non_null(json_object_get(tt, "A/1/\xc3\xa9"));
    json_decref(j);
}

/* A well whose tiles have total_translation for some and positions only for
 * others: the positions of the latter were moved to start at 0 and those of
 * the former not, so the file placed them relative to each other where the
 * dict did not (b [100, 300] with a at [100, 100] came back [0, 200]). */
static void test_mixed_origins(void **state) {
    (void)state;
    refused("{\"total_translation\":{\"A/1/a\":[0,0]},\"positions\":{\"A/1/a\":[100,100],\"A/1/b\":[100,300]}}",
            "A/1/b");
    /* positions only: moved together, offsets kept */
    json_t *j = round_trip("{\"positions\":{\"A/1/a\":[100,100],\"A/1/b\":[100,300.5]}}");
    json_t *pos = json_object_get(j, "positions");
    json_t *a = json_object_get(pos, "A/1/a"), *b = json_object_get(pos, "A/1/b");
    assert_true(json_real_value(json_array_get(b, 1)) - json_real_value(json_array_get(a, 1)) == 200.5);
    assert_true(json_real_value(json_array_get(b, 0)) == json_real_value(json_array_get(a, 0)));
    json_decref(j);
}

/* A residual known on one axis only was written as null (unknown): the
 * known half was lost. */
static void test_half_residual(void **state) {
    (void)state;
    refused("{\"total_translation\":{\"A/1/000000\":[0,0],\"A/1/000001\":[0,100]},\"pairs\":{\"A/1\":[[\"A/1/000000\","
            "\"A/1/000001\",0,99.5,0.5]]},\"residuals\":{\"A/1\":[[null,0.25]]}}", "A/1");
    json_t *j = round_trip("{\"total_translation\":{\"A/1/000000\":[0,0],\"A/1/000001\":[0,100]},\"pairs\":{\"A/1\":"
                           "[[\"A/1/000000\",\"A/1/000001\",0,99.5,0.5],[\"A/1/000000\",\"A/1/000001\",0,99,0.5]]},"
                           "\"residuals\":{\"A/1\":[[null,null],[0.5,0.25]]}}");
    json_t *r = json_object_get(json_object_get(j, "residuals"), "A/1");
    assert_int_equal(json_array_size(r), 2);
    assert_true(json_real_value(json_array_get(json_array_get(r, 1), 1)) == 0.25);
    json_decref(j);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_integers, setup, teardown),
        cmocka_unit_test_setup_teardown(test_control_characters, setup, teardown),
        cmocka_unit_test_setup_teardown(test_mixed_origins, setup, teardown),
        cmocka_unit_test_setup_teardown(test_half_residual, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
