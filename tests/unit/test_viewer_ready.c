/* Viewer-ready plates (issue 11), the pieces alone: --codec NAME[:LEVEL]
 * parsing and level ranges, the default pyramid depth, one canvas per
 * plate, and the display window's quantiles (nearest ranks of the non-zero
 * values). The whole is tests/interop/test_viewer_ready.py. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "fuse/viewer.h"
#include "ome/window.h"

static void test_codec_parse(void **state) {
    (void)state;
    ts_codec c;
    int level = -7;
    ts_error err;
    assert_int_equal(ts_codec_parse("blosc-zstd:3", &c, &level, &err), TS_OK);
    assert_int_equal(c, TS_CODEC_BLOSC_ZSTD);
    assert_int_equal(level, 3);
    assert_int_equal(ts_codec_parse("zstd", &c, &level, &err), TS_OK);
    assert_int_equal(c, TS_CODEC_ZSTD);
    assert_int_equal(level, 0);
    assert_int_equal(ts_codec_parse("zstd:22", &c, &level, &err), TS_OK);
    assert_int_equal(level, 22);
    assert_int_equal(ts_codec_parse("gzip:1", &c, &level, &err), TS_OK);
    static const struct { const char *text, *words; } bad[] = {
        {"zstd:23", "level 23 is not in [1, 22]"}, {"zstd:0", "level 0 is not in [1, 22]"},
        {"gzip:10", "level 10 is not in [1, 9]"}, {"blosc-lz4:-2", "level -2"}, {"none:1", "none takes no level"},
        {"zstd:", "level '' is not an integer"}, {"zstd:3x", "'3x'"}, {"lz4:3", "'lz4:3'"}, {"", "''"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        c = TS_CODEC_NONE, level = -7;
        assert_int_equal(ts_codec_parse(bad[i].text, &c, &level, &err), TS_ERR_ARG);
        if (!strstr(err.message, bad[i].words)) fail_msg("'%s': message '%s' lacks '%s'", bad[i].text, err.message, bad[i].words);
        assert_int_equal(level, -7); /* nothing written on failure */
    }
    assert_int_equal(ts_codec_check_level(TS_CODEC_NONE, 0, &err), TS_OK);
    assert_int_equal(ts_codec_check_level(TS_CODEC_BLOSC_LZ4, 10, &err), TS_ERR_ARG);
    assert_int_equal(ts_codec_default_level(TS_CODEC_ZSTD), 3);
}

static void test_auto_levels(void **state) {
    (void)state;
    assert_int_equal(fuse_auto_levels(1024, 1024, 1024), 0);
    assert_int_equal(fuse_auto_levels(1025, 10, 1024), 1);
    assert_int_equal(fuse_auto_levels(2048, 2049, 1024), 2); /* 2049 -> 1025 -> 513 */
    assert_int_equal(fuse_auto_levels(3687, 2966, 1024), 2);  /* 922 x 742 */
    assert_int_equal(fuse_auto_levels(1, 1, 1024), 0);
    assert_int_equal(fuse_auto_levels((int64_t)1 << 40, 1, 1024), FUSE_MAX_LEVELS - 1);
}

static void test_plate_canvas(void **state) {
    (void)state;
    fuse_well w[3];
    memset(w, 0, sizeof w);
    w[0].canvas_h = 713, w[0].canvas_w = 710;
    w[1].canvas_h = 711, w[1].canvas_w = 714;
    w[2].canvas_h = 1400, w[2].canvas_w = 300;
    int levels = -1;
    fuse_plate_canvas(w, 3, &levels);
    for (int i = 0; i < 3; i++) {
        assert_int_equal(w[i].canvas_h, 1400);
        assert_int_equal(w[i].canvas_w, 714);
    }
    assert_int_equal(levels, 1);
    levels = 0; /* given: kept */
    fuse_plate_canvas(w, 3, &levels);
    assert_int_equal(levels, 0);
}

static void test_window_quantiles(void **state) {
    (void)state;
    /* 1..1000 with zeros (fill) between: rank floor(0.001 * 999) = 0 and
     * ceil(0.999 * 999) = 999 of the non-zero values. */
    uint16_t v[2000];
    for (int i = 0; i < 1000; i++) v[2 * i] = (uint16_t)(1000 - i), v[2 * i + 1] = 0;
    ome_window_acc a;
    double w[4];
    assert_true(ome_window_init(&a, TS_UINT16));
    ome_window_add(&a, v, 2000);
    assert_true(ome_window_result(&a, w));
    assert_true(w[0] == 0 && w[1] == 65535 && w[2] == 1 && w[3] == 1000);
    ome_window_free(&a);
    /* 10000 values: ranks 9 and 9990 (0.999 * 9999 = 9989.001 rounds up). */
    uint16_t *big = malloc(10000 * sizeof *big);
    assert_non_null(big);
    for (int i = 0; i < 10000; i++) big[i] = (uint16_t)(i + 1);
    assert_true(ome_window_init(&a, TS_UINT16));
    ome_window_add(&a, big, 10000);
    assert_true(ome_window_result(&a, w));
    assert_true(w[2] == 10 && w[3] == 9991);
    ome_window_free(&a);
    free(big);
    /* one value: end is start + 1; no value: no window */
    uint8_t one[3] = {0, 7, 0};
    assert_true(ome_window_init(&a, TS_UINT8));
    ome_window_add(&a, one, 3);
    assert_true(ome_window_result(&a, w));
    assert_true(w[1] == 255 && w[2] == 7 && w[3] == 8);
    ome_window_free(&a);
    assert_true(ome_window_init(&a, TS_UINT16));
    ome_window_add(&a, v + 1, 1); /* a zero */
    assert_false(ome_window_result(&a, w));
    ome_window_free(&a);
    /* float32: zeros and NaN left out, min/max the sample's extremes */
    float f[6] = {0.0f, -2.0f, 0.5f, 3.0f, NAN, 1.0f};
    assert_true(ome_window_init(&a, TS_FLOAT32));
    ome_window_add(&a, f, 6);
    assert_true(ome_window_result(&a, w));
    assert_true(w[0] == -2 && w[1] == 3 && w[2] == -2 && w[3] == 3);
    ome_window_free(&a);
    /* float32 ranks are selected, not sorted: the same values as the
     * sorted sample's nearest ranks, on ties (blended integers), on sorted
     * and reversed input (the pivots' worst cases) and with negatives */
    enum { NF = 100003 };
    float *fv = malloc(NF * sizeof *fv), *sorted = malloc(NF * sizeof *sorted);
    assert_non_null(fv);
    assert_non_null(sorted);
    for (int pass = 0; pass < 4; pass++) {
        uint32_t x = 12345u;
        for (int i = 0; i < NF; i++) {
            x = x * 1664525u + 1013904223u;
            fv[i] = pass == 0   ? (float)(x >> 20) + 1.0f     /* 4096 values, many ties */
                    : pass == 1 ? (float)i + 1.0f              /* sorted */
                    : pass == 2 ? (float)(NF - i)              /* reversed */
                                : (float)((int32_t)x) / 65536.0f; /* both signs */
            if (fv[i] == 0) fv[i] = 1;
            sorted[i] = fv[i];
        }
        for (int gap = NF / 2; gap > 0; gap /= 2)
            for (int i = gap; i < NF; i++) {
                float t = sorted[i];
                int j = i;
                for (; j >= gap && sorted[j - gap] > t; j -= gap) sorted[j] = sorted[j - gap];
                sorted[j] = t;
            }
        assert_true(ome_window_init(&a, TS_FLOAT32));
        ome_window_add(&a, fv, NF);
        assert_true(ome_window_result(&a, w));
        const size_t rlo = (size_t)floor(OME_WINDOW_LOW * (NF - 1)), rhi = (size_t)ceil(OME_WINDOW_HIGH * (NF - 1));
        if (w[2] != sorted[rlo] || w[3] != sorted[rhi] || w[0] != (sorted[0] < 0 ? sorted[0] : 0) ||
            w[1] != sorted[NF - 1])
            fail_msg("pass %d: window %g %g %g %g, sorted ranks %g %g, extremes %g %g", pass, w[0], w[1], w[2], w[3],
                     sorted[rlo], sorted[rhi], sorted[0], sorted[NF - 1]);
        ome_window_free(&a);
    }
    free(fv);
    free(sorted);
    /* no window from data for other dtypes */
    assert_false(ome_window_init(&a, TS_INT32));
    ome_window_free(&a);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_codec_parse),
        cmocka_unit_test(test_auto_levels),
        cmocka_unit_test(test_plate_canvas),
        cmocka_unit_test(test_window_quantiles),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
