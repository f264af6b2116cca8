/* import: tile-name patterns ({row}, {col}, {index} over digit runs). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <string.h>

#include "common/error.h"
#include "import/pattern.h"

static void test_row_col_with_padding(void **state) {
    (void)state;
    ti_pattern p;
    ts_error err;
    assert_int_equal(ti_pattern_parse("r{row}_c{col}.tif", &p, &err), TS_OK);
    assert_true(p.has_row && p.has_col && !p.has_index);
    long row = -1, col = -1, index = -7;
    assert_true(ti_pattern_match(&p, "r003_c12.tif", &row, &col, &index));
    assert_int_equal(row, 3);
    assert_int_equal(col, 12);
    assert_int_equal(index, -7); /* fields the pattern lacks are left alone */
    assert_true(ti_pattern_match(&p, "r0_c0.tif", &row, &col, &index));
    assert_int_equal(row, 0);
    assert_int_equal(col, 0);
}

static void test_non_matches(void **state) {
    (void)state;
    ti_pattern p;
    ts_error err;
    assert_int_equal(ti_pattern_parse("r{row}_c{col}.tif", &p, &err), TS_OK);
    long row, col, index;
    const char *no[] = {
        "r3_c4.tiff",      /* literal suffix differs */
        "R3_c4.tif",       /* case-sensitive */
        "r_c4.tif",        /* empty field */
        "rx_c4.tif",       /* not digits */
        "r3_c4.tif.bak",   /* trailing text */
        "xr3_c4.tif",      /* leading text */
        "r-3_c4.tif",      /* no sign */
        "r3_c99999999999.tif", /* above 10^9 */
        "",
    };
    for (size_t i = 0; i < sizeof no / sizeof no[0]; i++)
        if (ti_pattern_match(&p, no[i], &row, &col, &index)) fail_msg("'%s' matched", no[i]);
}

static void test_index_pattern(void **state) {
    (void)state;
    ti_pattern p;
    ts_error err;
    assert_int_equal(ti_pattern_parse("{index}.tif", &p, &err), TS_OK);
    assert_true(p.has_index && !p.has_row && !p.has_col);
    long row = -1, col = -1, index = -1;
    assert_true(ti_pattern_match(&p, "10.tif", &row, &col, &index));
    assert_int_equal(index, 10);
    assert_true(ti_pattern_match(&p, "007.tif", &row, &col, &index));
    assert_int_equal(index, 7);
    assert_false(ti_pattern_match(&p, "fused.tiff", &row, &col, &index));
    assert_int_equal(row, -1);
}

static void test_refused_patterns(void **state) {
    (void)state;
    const char *bad[] = {
        "r{row}.tif",            /* row without col */
        "{row}{col}.tif",        /* fields side by side */
        "r{row}_c{col}_{row}.tif", /* a field twice */
        "{index}_{row}_{col}.tif", /* index with row/col */
        "sub/r{row}_c{col}.tif", /* a folder */
        "r{rows}_c{col}.tif",    /* unknown field */
        "r{row_c{col}.tif",      /* unclosed brace */
        "plain.tif",             /* no field */
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        ti_pattern p;
        ts_error err;
        ts_error_clear(&err);
        ts_status st = ti_pattern_parse(bad[i], &p, &err);
        if (st == TS_OK) fail_msg("pattern '%s' accepted", bad[i]);
        assert_int_equal(st, TS_ERR_ARG);
        if (!strstr(err.message, bad[i])) fail_msg("message for '%s' does not name it: %s", bad[i], err.message);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_row_col_with_padding),
        cmocka_unit_test(test_non_matches),
        cmocka_unit_test(test_index_pattern),
        cmocka_unit_test(test_refused_patterns),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
