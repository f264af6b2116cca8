/* The OME layer: writing and reading plates in 0.4 and 0.5, version
 * detection, real plate metadata (yaozarrs), the broken store, and a plate
 * of 170,000 positions listed from its plate and well JSON only. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <math.h>
#include <string.h>

#include "common/error.h"
#include "common/fs.h"
#include "ome/ome.h"

#define YAO TESSERA_TESTDATA "/yaozarrs/tests/data"

static char tmpdir[4096];

static const char *tmp_path(const char *name) {
    static char buf[4][4200];
    static int k;
    k = (k + 1) % 4;
    snprintf(buf[k], sizeof buf[k], "%s/%s", tmpdir, name);
    return buf[k];
}

static void write_text(const char *path, const char *text) {
    ts_error err = {0};
    assert_int_equal(ts_write_file_atomic(path, text, strlen(text), &err), TS_OK);
}

static void expect_error(ts_status st, const ts_error *err, const char *needle1,
                         const char *needle2) {
    assert_int_not_equal(st, TS_OK);
    if (!strstr(err->message, needle1) || (needle2 && !strstr(err->message, needle2)))
        fail_msg("error message '%s' lacks '%s' / '%s'", err->message, needle1,
                 needle2 ? needle2 : "");
}

static void roundtrip(ts_ome_version version) {
    ts_error err = {0};
    const char *store = tmp_path(version == TS_OME_04 ? "rt04.zarr" : "rt05.zarr");
    ts_remove_tree(store, &err);
    const char *wells[] = {"B/3", "A/12", "A/2"};
    const char *pos_a[] = {"000000", "001000"};
    const char *pos_b[] = {"000000"};
    const char *pos_c[] = {"000000", "000001", "001001"};
    const char *const *wp[] = {pos_a, pos_b, pos_c};
    int counts[] = {2, 1, 3};
    ts_plate_layout L = {.path = store, .version = version, .name = "rt", .nwells = 3,
                         .wells = wells, .positions_per_well = counts, .well_positions = wp};
    assert_int_equal(ts_plate_write_layout(&L, &err), TS_OK);

    ts_image_meta m;
    ts_image_meta_default(&m, 2);
    snprintf(m.channel_labels[0], 64, "DAPI");
    snprintf(m.channel_labels[1], 64, "GFP");
    m.scale[3] = m.scale[4] = 0.325;
    m.scale[2] = 2.0;
    snprintf(m.space_unit, sizeof m.space_unit, "micrometer");
    m.has_window[1] = true;
    m.window[1][0] = 0, m.window[1][1] = 4095, m.window[1][2] = 100, m.window[1][3] = 2000;
    char img[4300];
    snprintf(img, sizeof img, "%s/A/2/001001", store);
    assert_int_equal(ts_image_write_meta(img, version, &m, 3, &err), TS_OK);

    ts_plate *p = NULL;
    assert_int_equal(ts_plate_open(store, &p, &err), TS_OK);
    assert_int_equal(p->version, version);
    assert_string_equal(p->name, "rt");
    assert_int_equal(p->nwells, 3);
    assert_int_equal(p->nrows, 2);   /* A, B */
    assert_int_equal(p->ncols, 3);   /* 2, 3, 12 */
    assert_string_equal(p->row_names[0], "A");
    assert_string_equal(p->col_names[0], "2");
    assert_string_equal(p->col_names[2], "12"); /* numeric order, not "12" < "2" */
    int w = ts_plate_find_well(p, "A/2");
    assert_int_equal(w, 2);
    assert_int_equal(p->wells[w].npositions, 3);
    assert_string_equal(p->wells[w].positions[2], "001001");
    assert_int_equal(p->field_count, 3);

    ts_image_meta r;
    assert_int_equal(ts_plate_image_meta(p, w, 2, &r, &err), TS_OK);
    assert_int_equal(r.nchannels, 2);
    assert_string_equal(r.channel_labels[0], "DAPI");
    assert_string_equal(r.channel_labels[1], "GFP");
    assert_int_equal(r.ndim, 5);
    for (int a = 0; a < 5; a++) assert_int_equal(r.axis_index[a], a);
    assert_true(r.scale[3] == 0.325 && r.scale[4] == 0.325 && r.scale[2] == 2.0);
    assert_string_equal(r.space_unit, "micrometer");
    assert_int_equal(r.nlevels, 3);
    assert_string_equal(r.level_paths[2], "2");
    assert_true(r.has_window[1]);
    assert_true(r.window[1][2] == 100 && r.window[1][3] == 2000);

    assert_int_equal(ts_plate_filter_wells(p, "A/2, B/3", &err), TS_OK);
    assert_int_equal(p->nwells, 2);
    assert_string_equal(p->wells[0].path, "B/3");
    expect_error(ts_plate_filter_wells(p, "C/9", &err), &err, "C/9", NULL);
    ts_plate_close(p);
}

static void test_roundtrip_04(void **state) {
    (void)state;
    roundtrip(TS_OME_04);
}

static void test_roundtrip_05(void **state) {
    (void)state;
    roundtrip(TS_OME_05);
}

static void test_versions_refused(void **state) {
    (void)state;
    ts_error err = {0};
    ts_plate *p = NULL;
    char s[4200];
    snprintf(s, sizeof s, "%s", tmp_path("v03.zarr"));
    ts_remove_tree(s, &err);
    write_text(tmp_path("v03.zarr/.zgroup"), "{\"zarr_format\": 2}");
    write_text(tmp_path("v03.zarr/.zattrs"),
               "{\"plate\": {\"version\": \"0.3\", \"wells\": []}}");
    expect_error(ts_plate_open(s, &p, &err), &err, "plate.version", "0.3");
    assert_int_equal(err.code, TS_ERR_UNSUPPORTED);

    write_text(tmp_path("v03.zarr/.zattrs"), "{\"plate\": {\"wells\": []}}");
    expect_error(ts_plate_open(s, &p, &err), &err, "plate.version", "v03.zarr/.zattrs");

    /* a well that is an array, not a group: refused, not "metadata missing" */
    write_text(tmp_path("v03.zarr/.zattrs"),
               "{\"plate\": {\"version\": \"0.4\", \"rows\": [{\"name\": \"A\"}], "
               "\"columns\": [{\"name\": \"1\"}], \"wells\": [{\"path\": \"A/1\"}]}}");
    write_text(tmp_path("v03.zarr/A/1/.zarray"), "{\"zarr_format\": 2}");
    expect_error(ts_plate_open(s, &p, &err), &err, "A/1", "is an array");

    snprintf(s, sizeof s, "%s", tmp_path("v3bad.zarr"));
    ts_remove_tree(s, &err);
    write_text(tmp_path("v3bad.zarr/zarr.json"),
               "{\"zarr_format\": 3, \"node_type\": \"group\", \"attributes\": {\"ome\": "
               "{\"version\": \"0.4\", \"plate\": {\"wells\": []}}}}");
    expect_error(ts_plate_open(s, &p, &err), &err, "attributes.ome.version", "zarr v3");
    write_text(tmp_path("v3bad.zarr/zarr.json"),
               "{\"zarr_format\": 3, \"node_type\": \"group\", \"attributes\": {\"ome\": "
               "{\"plate\": {\"wells\": []}}}}");
    expect_error(ts_plate_open(s, &p, &err), &err, "attributes.ome.version", "missing");
    write_text(tmp_path("v3bad.zarr/zarr.json"),
               "{\"zarr_format\": 3, \"node_type\": \"group\", \"attributes\": {}}");
    expect_error(ts_plate_open(s, &p, &err), &err, "attributes.ome", "v3bad.zarr/zarr.json");
    write_text(tmp_path("v3bad.zarr/zarr.json"), "{\"zarr_format\": 3, \"node_type\": ");
    expect_error(ts_plate_open(s, &p, &err), &err, "invalid JSON", "v3bad.zarr/zarr.json");
    expect_error(ts_plate_open(tmp_path("nothing-here"), &p, &err), &err, "nothing-here", NULL);
    assert_null(p);
}

static void test_yaozarrs_v04_plate(void **state) {
    (void)state;
    ts_error err = {0};
    ts_plate *p = NULL;
    assert_int_equal(ts_plate_open(YAO "/v04/2551.zarr", &p, &err), TS_OK);
    assert_int_equal(p->version, TS_OME_04);
    assert_int_equal(p->nwells, 96);
    assert_int_equal(p->nrows, 8);
    assert_int_equal(p->ncols, 12);
    assert_int_equal(p->field_count, 6);
    int w = ts_plate_find_well(p, "A/2");
    assert_true(w >= 0);
    assert_false(p->wells[w].metadata_missing);
    assert_int_equal(p->wells[w].npositions, 6);
    assert_string_equal(p->wells[w].positions[5], "5");
    /* the copy keeps only some well groups: the others list as empty */
    int c3 = ts_plate_find_well(p, "C/3");
    assert_true(p->wells[c3].metadata_missing);
    assert_int_equal(p->wells[c3].npositions, 0);
    ts_image_meta m;
    assert_int_equal(ts_plate_image_meta(p, w, 2, &m, &err), TS_OK);
    assert_int_equal(m.ndim, 4); /* c, z, y, x */
    assert_int_equal(m.axis_index[0], -1);
    assert_int_equal(m.axis_index[1], 0);
    assert_int_equal(m.axis_index[4], 3);
    assert_true(m.scale[3] == 0.1077);
    assert_int_equal(m.nchannels, 2);
    assert_string_equal(m.channel_labels[0], "GFP");
    assert_string_equal(m.channel_labels[1], "Cascade blue");
    assert_string_equal(m.channel_colors[1], "0000FF");
    assert_string_equal(m.space_unit, "micrometer");
    assert_true(m.nlevels >= 2);
    ts_plate_close(p);
}

static void test_yaozarrs_v05_plate(void **state) {
    (void)state;
    ts_error err = {0};
    ts_plate *p = NULL;
    assert_int_equal(ts_plate_open(YAO "/v05/76-45.ome.zarr", &p, &err), TS_OK);
    assert_int_equal(p->version, TS_OME_05);
    assert_int_equal(p->nwells, 384);
    int w = ts_plate_find_well(p, "B/2");
    assert_true(w >= 0);
    assert_int_equal(p->wells[w].npositions, 1);
    assert_string_equal(p->wells[w].positions[0], "0");
    ts_image_meta m;
    assert_int_equal(ts_plate_image_meta(p, w, 0, &m, &err), TS_OK);
    assert_int_equal(m.ndim, 5);
    assert_int_equal(m.nchannels, 2);
    assert_string_equal(m.channel_labels[0], "Dapi");
    assert_int_equal(m.nlevels, 3);
    assert_true(m.has_window[0] && m.window[0][3] == 4095.0);
    ts_plate_close(p);
}

/* Each flaw of yaozarrs' broken store is refused with the path at fault. */
static void test_yaozarrs_broken(void **state) {
    (void)state;
    ts_error err = {0};
    ts_plate *p = NULL;
    /* well A/2 is an "array" node: the plate does not open */
    expect_error(ts_plate_open(YAO "/broken/broken_v05.ome.zarr", &p, &err), &err,
                 "A/2/zarr.json", "node_type");

    /* a copy with the two broken wells (A/2 array node, C/3 without version)
     * repaired, to reach the per-image flaws */
    char copy[4200];
    snprintf(copy, sizeof copy, "%s", tmp_path("broken_copy.zarr"));
    ts_remove_tree(copy, &err);
    char cmd[8800];
    snprintf(cmd, sizeof cmd, "cp -r '%s' '%s'", YAO "/broken/broken_v05.ome.zarr", copy);
    assert_int_equal(system(cmd), 0);
    const char *well = "{\"zarr_format\": 3, \"node_type\": \"group\", \"attributes\": {\"ome\": "
                       "{\"version\": \"0.5\", \"well\": {\"images\": [{\"path\": \"0\"}, "
                       "{\"path\": \"1\"}]}}}}";
    char path[4300];
    snprintf(path, sizeof path, "%s/C/3/zarr.json", copy);
    write_text(path, "{\"zarr_format\": 3, \"node_type\": \"group\", \"attributes\": {\"ome\": {}}}");
    snprintf(path, sizeof path, "%s/A/2/zarr.json", copy);
    write_text(path, well);
    expect_error(ts_plate_open(copy, &p, &err), &err, "C/3/zarr.json", "attributes.ome.version");
    snprintf(path, sizeof path, "%s/C/3/zarr.json", copy);
    write_text(path, well);
    /* a position listed twice in a well (it would be stitched twice) */
    const char *dup = "{\"zarr_format\": 3, \"node_type\": \"group\", \"attributes\": {\"ome\": "
                      "{\"version\": \"0.5\", \"well\": {\"images\": [{\"path\": \"0\"}, "
                      "{\"path\": \"1\"}, {\"path\": \"0\"}]}}}}";
    write_text(path, dup);
    expect_error(ts_plate_open(copy, &p, &err), &err, "C/3/zarr.json", "position '0' twice");
    write_text(path, well);
    assert_int_equal(ts_plate_open(copy, &p, &err), TS_OK);
    assert_int_equal(p->nwells, 9);

    struct {
        const char *well;
        int pos;
        const char *needle1, *needle2;
    } cases[] = {
        {"A/1", 0, "A/1/0/0", NULL},                 /* array "0" absent */
        {"B/1", 0, "B/1/0/0", NULL},                 /* 5-d array, 3-d chunks, 3 axes */
        {"B/2", 0, "B/2/0/0", NULL},                 /* "group" with array fields */
        {"B/3", 1, "B/3/1/zarr.json", "node_type"},  /* image is an array node */
        {"C/2", 0, "C/2/0/zarr.json", "multiscales"}, /* empty multiscales */
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        int w = ts_plate_find_well(p, cases[i].well);
        assert_true(w >= 0);
        tz_array *arr = NULL;
        ts_error_clear(&err);
        ts_status st = ts_plate_open_array(p, w, cases[i].pos, 0, NULL, &arr, &err);
        if (st == TS_OK) fail_msg("%s/%d opened but is broken", cases[i].well, cases[i].pos);
        expect_error(st, &err, cases[i].needle1, cases[i].needle2);
        assert_null(arr);
    }
    /* B/2/1: "dimension_names" inside user attributes is not the array's;
     * the real dimension_names match the axes, so it opens */
    tz_array *arr = NULL;
    assert_int_equal(ts_plate_open_array(p, ts_plate_find_well(p, "B/2"), 1, 0, NULL, &arr, &err), TS_OK);
    tz_array_close(arr);
    /* a healthy one */
    assert_int_equal(ts_plate_open_array(p, ts_plate_find_well(p, "A/3"), 0, 1, NULL, &arr, &err), TS_OK);
    assert_int_equal(tz_array_get_meta(arr)->shape[2], 32);
    tz_array_close(arr);
    ts_plate_close(p);
}

/* 170,000 positions in 10 wells: only plate + well JSON exists on disk, and
 * the listing must not need anything else. (Timing is in bench/ome_list.) */
static void test_large_listing(void **state) {
    (void)state;
    ts_error err = {0};
    const char *store = tmp_path("large.zarr");
    ts_remove_tree(store, &err);
    enum { NW = 10, NP = 17000 };
    char (*names)[8] = malloc(sizeof(*names) * NP);
    const char **pos = malloc(sizeof(*pos) * NP);
    for (int i = 0; i < NP; i++) {
        snprintf(names[i], 8, "%03d%03d", i % 170, i / 170);
        pos[i] = names[i];
    }
    const char *wells[NW] = {"A/1", "A/2", "A/3", "B/1", "B/2", "B/3", "C/1", "C/2", "C/3", "D/1"};
    ts_plate_layout L = {.path = store, .version = TS_OME_05, .nwells = NW, .wells = wells,
                         .npositions = NP, .positions = pos};
    assert_int_equal(ts_plate_write_layout(&L, &err), TS_OK);
    ts_plate *p = NULL;
    assert_int_equal(ts_plate_open(store, &p, &err), TS_OK);
    long total = 0;
    for (int w = 0; w < p->nwells; w++) total += p->wells[w].npositions;
    assert_int_equal(total, (long)NW * NP);
    assert_string_equal(p->wells[9].positions[NP - 1], names[NP - 1]);
    /* no image group exists: asking for one is a clear error, not a crash */
    ts_image_meta m;
    expect_error(ts_plate_image_meta(p, 0, 0, &m, &err), &err, "A/1/000000", NULL);
    ts_plate_close(p);
    free(names);
    free(pos);
}

/* tessera info on an image whose array has a chunk grid of more than 2^63
 * blocks (a shape near the int64 limit, chunks of 1): the block count is
 * reported as unknown (null), not a wrapped product (signed overflow). */
static void test_info_huge_grid(void **state) {
    (void)state;
    ts_error err = {0};
    char store[4200];
    snprintf(store, sizeof store, "%s", tmp_path("hugegrid.zarr"));
    ts_remove_tree(store, &err);
    write_text(tmp_path("hugegrid.zarr/.zgroup"), "{\"zarr_format\": 2}");
    write_text(tmp_path("hugegrid.zarr/.zattrs"),
               "{\"multiscales\": [{\"version\": \"0.4\", \"axes\": [{\"name\": \"t\", \"type\": \"time\"}, "
               "{\"name\": \"c\", \"type\": \"channel\"}, {\"name\": \"z\", \"type\": \"space\"}, "
               "{\"name\": \"y\", \"type\": \"space\"}, {\"name\": \"x\", \"type\": \"space\"}], "
               "\"datasets\": [{\"path\": \"0\", \"coordinateTransformations\": [{\"type\": \"scale\", "
               "\"scale\": [1, 1, 1, 1, 1]}]}]}]}");
    write_text(tmp_path("hugegrid.zarr/0/.zarray"),
               "{\"zarr_format\": 2, \"shape\": [1, 1, 1, 4611686018427387904, 4611686018427387904], "
               "\"chunks\": [1, 1, 1, 1, 1], \"dtype\": \"<u2\", \"compressor\": null, \"fill_value\": 0, "
               "\"order\": \"C\", \"filters\": null}");
    char *json = NULL;
    ts_status st = ts_info_json(store, &json, &err);
    if (st != TS_OK) fail_msg("info failed: %s", err.message);
    if (!strstr(json, "\"blocks\": null")) fail_msg("no \"blocks\": null in %s", json);
    free(json);
}

/* An array that disagrees with its image's axes (ndim, dimension_names) is
 * refused with a message formatted from the array's metadata: it was
 * formatted after the array was closed (a heap use-after-free under ASan). */
static void test_array_axes_mismatch(void **state) {
    (void)state;
    ts_error err = {0};
    char store[4200];
    snprintf(store, sizeof store, "%s", tmp_path("axes_mismatch.zarr"));
    ts_remove_tree(store, &err);
    write_text(tmp_path("axes_mismatch.zarr/zarr.json"),
               "{\"zarr_format\": 3, \"node_type\": \"group\", \"attributes\": {\"ome\": {\"version\": \"0.5\", "
               "\"multiscales\": [{\"axes\": [{\"name\": \"c\", \"type\": \"channel\"}, "
               "{\"name\": \"y\", \"type\": \"space\"}, {\"name\": \"x\", \"type\": \"space\"}], "
               "\"datasets\": [{\"path\": \"0\", \"coordinateTransformations\": [{\"type\": \"scale\", "
               "\"scale\": [1, 1, 1]}]}, {\"path\": \"1\", \"coordinateTransformations\": [{\"type\": "
               "\"scale\", \"scale\": [1, 2, 2]}]}]}]}}}");
    /* level 0: the right ndim, y and x named the other way round */
    write_text(tmp_path("axes_mismatch.zarr/0/zarr.json"),
               "{\"zarr_format\": 3, \"node_type\": \"array\", \"shape\": [1, 8, 8], \"data_type\": \"uint16\", "
               "\"chunk_grid\": {\"name\": \"regular\", \"configuration\": {\"chunk_shape\": [1, 8, 8]}}, "
               "\"chunk_key_encoding\": {\"name\": \"default\"}, \"fill_value\": 0, "
               "\"codecs\": [{\"name\": \"bytes\", \"configuration\": {\"endian\": \"little\"}}], "
               "\"dimension_names\": [\"c\", \"x\", \"y\"]}");
    /* level 1: 4 dimensions for 3 axes */
    write_text(tmp_path("axes_mismatch.zarr/1/zarr.json"),
               "{\"zarr_format\": 3, \"node_type\": \"array\", \"shape\": [1, 1, 4, 4], \"data_type\": \"uint16\", "
               "\"chunk_grid\": {\"name\": \"regular\", \"configuration\": {\"chunk_shape\": [1, 1, 4, 4]}}, "
               "\"chunk_key_encoding\": {\"name\": \"default\"}, \"fill_value\": 0, "
               "\"codecs\": [{\"name\": \"bytes\", \"configuration\": {\"endian\": \"little\"}}]}");
    ts_image_meta m;
    ts_ome_version ver;
    assert_int_equal(ts_image_read_meta(store, &ver, &m, &err), TS_OK);
    tz_array *arr = NULL;
    expect_error(ts_image_open_array(store, &m, 0, &arr, &err), &err, "dimension_names[1] is 'x'",
                 "axis 1 is 'y'");
    assert_null(arr);
    expect_error(ts_image_open_array(store, &m, 1, &arr, &err), &err, "array has 4 dimensions",
                 "axes list 3");
    assert_null(arr);
    /* ts_info_json describes the image and lists both levels under
     * "errors" (tessera info exits 1 on them; it printed "level 0: ERROR"
     * with exit 0) */
    char *json = NULL;
    if (ts_info_json(store, &json, &err) != TS_OK) fail_msg("info failed: %s", err.message);
    const char *errors = strstr(json, "\"errors\": [");
    if (!errors || !strstr(errors, "level 0: ") || !strstr(errors, "dimension_names[1] is 'x'") ||
        !strstr(errors, "level 1: ") || !strstr(errors, "array has 4 dimensions"))
        fail_msg("errors not listed: %s", json);
    free(json);
}

/* Metadata JSON cannot hold (NaN, infinity, invalid UTF-8) is refused,
 * naming the image, instead of written without the key (an image with 3
 * scale entries for 5 axes came out of simulate --pixel-size inf). */
static void test_unwritable_values_refused(void **state) {
    (void)state;
    ts_error err = {0};
    char img[4300];
    snprintf(img, sizeof img, "%s/unwritable", tmpdir);
    ts_remove_tree(img, &err);
    ts_image_meta m;
    ts_image_meta_default(&m, 1);
    m.scale[4] = INFINITY;
    assert_int_equal(ts_image_write_meta(img, TS_OME_05, &m, 1, &err), TS_ERR_ARG);
    assert_non_null(strstr(err.message, "unwritable"));
    ts_image_meta_default(&m, 1);
    m.scale[3] = 1e308; /* finite, but not at level 2 (x 4) */
    assert_int_equal(ts_image_write_meta(img, TS_OME_05, &m, 3, &err), TS_ERR_ARG);
    ts_image_meta_default(&m, 1);
    m.has_translation = true;
    m.translation[3] = NAN;
    assert_int_equal(ts_image_write_meta(img, TS_OME_04, &m, 1, &err), TS_ERR_ARG);
    ts_image_meta_default(&m, 1);
    snprintf(m.channel_labels[0], 64, "bad \xff\xfe name");
    assert_int_equal(ts_image_write_meta(img, TS_OME_05, &m, 1, &err), TS_ERR_ARG);
    assert_non_null(strstr(err.message, "UTF-8"));
    ts_image_meta_default(&m, 1);
    m.has_window[0] = true;
    m.window[0][0] = 0, m.window[0][1] = NAN, m.window[0][2] = 0, m.window[0][3] = 1;
    assert_int_equal(ts_image_write_meta(img, TS_OME_05, &m, 1, &err), TS_ERR_ARG);
    ts_image_meta_default(&m, 1);
    assert_int_equal(ts_image_write_meta(img, TS_OME_05, &m, 1, &err), TS_OK);
}

int main(void) {
    snprintf(tmpdir, sizeof tmpdir, "%s/ome", TESSERA_TEST_TMP);
    ts_error err = {0};
    ts_mkdirs(tmpdir, &err);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_roundtrip_04),     cmocka_unit_test(test_roundtrip_05),
        cmocka_unit_test(test_versions_refused), cmocka_unit_test(test_yaozarrs_v04_plate),
        cmocka_unit_test(test_yaozarrs_v05_plate), cmocka_unit_test(test_yaozarrs_broken),
        cmocka_unit_test(test_large_listing),    cmocka_unit_test(test_info_huge_grid),
        cmocka_unit_test(test_array_axes_mismatch), cmocka_unit_test(test_unwritable_values_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
