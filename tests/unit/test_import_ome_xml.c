/* import: the OME-XML of OME-TIFF files (ti_ome_parse): sizes and positions
 * in micrometres whatever the unit, channel names, the Image of this file in
 * multi-file sets, texts that are not OME-XML, and the refusals. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "common/error.h"
#include "import/ome_xml.h"

static ts_status parse(const char *xml, const char *file, ti_ome_meta *m, ts_error *err) {
    return ti_ome_parse("t.ome.tif", file, xml, strlen(xml), m, err);
}

static void test_sizes_names_positions(void **state) {
    (void)state;
    const char *xml =
        "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
        "<OME xmlns=\"http://www.openmicroscopy.org/Schemas/OME/2016-06\"><Image ID=\"Image:0\">"
        "<Pixels ID=\"Pixels:0\" DimensionOrder=\"XYCZT\" Type=\"uint16\" SizeX=\"4\" SizeY=\"3\" SizeC=\"2\""
        " SizeZ=\"1\" SizeT=\"1\" PhysicalSizeX=\"650\" PhysicalSizeXUnit=\"nm\" PhysicalSizeY=\"0.325\">"
        "<Channel ID=\"Channel:0:0\" Name=\"DAPI\"/><Channel ID=\"Channel:0:1\"/>"
        "<TiffData IFD=\"0\" PlaneCount=\"2\"/>"
        /* the C = 1 plane first: the C = Z = T = 0 one is the field's */
        "<Plane TheC=\"1\" TheZ=\"0\" TheT=\"0\" PositionX=\"99\" PositionXUnit=\"mm\" PositionY=\"99\"/>"
        "<Plane TheC=\"0\" TheZ=\"0\" TheT=\"0\" PositionX=\"1.5\" PositionXUnit=\"mm\""
        " PositionY=\"-20\" PositionYUnit=\"\xce\xbcm\"/>"
        "</Pixels></Image></OME>";
    ti_ome_meta m;
    ts_error err;
    assert_int_equal(parse(xml, "t.ome.tif", &m, &err), TS_OK);
    assert_true(m.is_ome && m.has_size_x && m.has_size_y);
    assert_true(fabs(m.size_x_um - 0.65) < 1e-12);
    assert_true(fabs(m.size_y_um - 0.325) < 1e-12); /* default unit: micrometre */
    assert_int_equal(m.nchannels, 2);
    assert_string_equal(m.channel_names[0], "DAPI");
    assert_string_equal(m.channel_names[1], "");
    assert_true(m.has_position && !m.position_unit_assumed);
    assert_true(fabs(m.pos_x_um - 1500.0) < 1e-9);
    assert_true(fabs(m.pos_y_um + 20.0) < 1e-12);
}

static void test_reference_frame_is_assumed_um(void **state) {
    (void)state;
    ti_ome_meta m;
    ts_error err;
    const char *xml = "<OME><Image><Pixels><Plane PositionX=\"10\" PositionY=\"20\"/></Pixels></Image></OME>";
    assert_int_equal(parse(xml, NULL, &m, &err), TS_OK);
    assert_true(m.has_position && m.position_unit_assumed);
    assert_true(m.pos_x_um == 10 && m.pos_y_um == 20);
    assert_false(m.has_size_x || m.has_size_y);
    /* one coordinate only: no position */
    assert_int_equal(parse("<OME><Image><Pixels><Plane PositionX=\"10\"/></Pixels></Image></OME>", NULL, &m, &err),
                     TS_OK);
    assert_false(m.has_position);
}

static void test_image_of_this_file(void **state) {
    (void)state;
    /* a multi-file set: each file's XML lists every Image, the one whose
     * TiffData names this file's IFD 0 is this file's */
    const char *xml =
        "<OME><Image><Pixels PhysicalSizeX=\"1\"><TiffData IFD=\"0\"><UUID FileName=\"a.ome.tif\">u1</UUID>"
        "</TiffData></Pixels></Image>"
        "<Image><Pixels PhysicalSizeX=\"2\"><TiffData IFD=\"0\"><UUID FileName=\"b.ome.tif\">u2</UUID>"
        "</TiffData></Pixels></Image></OME>";
    ti_ome_meta m;
    ts_error err;
    assert_int_equal(parse(xml, "b.ome.tif", &m, &err), TS_OK);
    assert_true(m.size_x_um == 2);
    assert_int_equal(parse(xml, "a.ome.tif", &m, &err), TS_OK);
    assert_true(m.size_x_um == 1);
    assert_int_equal(parse(xml, "c.ome.tif", &m, &err), TS_OK); /* none names it: the first */
    assert_true(m.size_x_um == 1);
}

static void test_not_ome(void **state) {
    (void)state;
    const char *texts[] = {"{\"shape\": [2, 30, 44]}", "ImageJ=1.54f\nimages=2\n", "a note", "",
                           "<svg><OME/></svg>", "<?xml version=\"1.0\"?><!-- c --><notOME/>"};
    for (size_t i = 0; i < sizeof texts / sizeof texts[0]; i++) {
        ti_ome_meta m;
        ts_error err;
        assert_int_equal(parse(texts[i], NULL, &m, &err), TS_OK);
        assert_false(m.is_ome);
    }
    ti_ome_meta m;
    ts_error err;
    assert_int_equal(parse("  \n<ome:OME xmlns:ome=\"x\"><ome:Image/></ome:OME>", NULL, &m, &err), TS_OK);
    assert_true(m.is_ome);
}

static void refused(const char *xml, const char *words) {
    ti_ome_meta m;
    ts_error err = {0};
    assert_int_equal(parse(xml, NULL, &m, &err), TS_ERR_FORMAT);
    if (!strstr(err.message, words) || !strstr(err.message, "t.ome.tif")) fail_msg("%s", err.message);
}

static void test_refusals(void **state) {
    (void)state;
    refused("<OME><Image><Pixels PhysicalSizeX=\"1\"></Image></OME>", "does not parse");
    refused("<OME><Image><Pixels PhysicalSizeX=\"-1\"/></Image></OME>", "PhysicalSizeX=\"-1\"");
    refused("<OME><Image><Pixels PhysicalSizeX=\"nan\"/></Image></OME>", "PhysicalSizeX");
    refused("<OME><Image><Pixels PhysicalSizeY=\"1\" PhysicalSizeYUnit=\"pixel\"/></Image></OME>",
            "PhysicalSizeYUnit=\"pixel\"");
    refused("<OME><Image><Pixels PhysicalSizeX=\"1\" PhysicalSizeXUnit=\"reference frame\"/></Image></OME>",
            "reference frame");
    refused("<OME><Image><Pixels><Plane PositionX=\"1\" PositionY=\"2\" PositionYUnit=\"parsec\"/></Pixels></Image></OME>",
            "PositionYUnit");
    /* finite in its unit, not in micrometres */
    refused("<OME><Image><Pixels><Plane PositionX=\"1e305\" PositionXUnit=\"km\" PositionY=\"2\"/></Pixels></Image></OME>",
            "PositionX=\"1e305\"");
    /* an external entity is never fetched: refused in an attribute (not
     * well-formed), left out in text */
    refused("<?xml version=\"1.0\"?><!DOCTYPE OME [<!ENTITY e SYSTEM \"/etc/passwd\">]>"
            "<OME><Image><Pixels><Channel Name=\"&e;\"/></Pixels></Image></OME>", "external entity");
    ti_ome_meta m;
    ts_error err;
    const char *xxe = "<?xml version=\"1.0\"?><!DOCTYPE OME [<!ENTITY e SYSTEM \"/etc/passwd\">]>"
                      "<OME><Image><Pixels><Channel Name=\"x\">&e;</Channel></Pixels></Image></OME>";
    assert_int_equal(parse(xxe, NULL, &m, &err), TS_OK);
    assert_int_equal(m.nchannels, 1);
    assert_string_equal(m.channel_names[0], "x");
}

static void test_units(void **state) {
    (void)state;
    assert_true(ti_ome_unit_um("\xc2\xb5m") == 1 && ti_ome_unit_um("\xce\xbcm") == 1 && ti_ome_unit_um("um") == 1);
    assert_true(ti_ome_unit_um("nm") == 1e-3 && ti_ome_unit_um("mm") == 1e3 && ti_ome_unit_um("m") == 1e6);
    assert_true(ti_ome_unit_um("\xc3\x85") == 1e-4 && ti_ome_unit_um("pm") == 1e-6);
    assert_true(ti_ome_unit_um("reference frame") == 0 && ti_ome_unit_um("") == 0 && ti_ome_unit_um("MM") == 0);
}

/* Attribute values are read whole: a length longer than any buffer is its
 * value or refused, never the number its first bytes spell; an IFD or
 * plane index is not read from its first digits; a channel name cut to fit
 * ends on a whole UTF-8 character (the NGFF label is JSON, which takes no
 * broken one). */
static void test_long_values(void **state) {
    (void)state;
    ti_ome_meta m;
    ts_error err = {0};
    char zeros[80];
    memset(zeros, '0', 70);
    zeros[70] = '\0';
    char xml[1024];
    /* 1.5 written with 70 leading zeros after the point and the exponent
     * last: its first 63 bytes are 1.5e-61 */
    snprintf(xml, sizeof xml, "<OME><Image><Pixels PhysicalSizeX=\"0.%s15e71\"/></Image></OME>", zeros);
    assert_int_equal(parse(xml, NULL, &m, &err), TS_OK);
    assert_true(m.has_size_x);
    if (!(fabs(m.size_x_um - 1.5) < 1e-12)) fail_msg("PhysicalSizeX read as %g, not 1.5", m.size_x_um);
    snprintf(xml, sizeof xml, "<OME><Image><Pixels><Plane PositionX=\"0.%s25e71\" PositionXUnit=\"mm\""
             " PositionY=\"1\"/></Pixels></Image></OME>", zeros);
    assert_int_equal(parse(xml, NULL, &m, &err), TS_OK);
    if (!(fabs(m.pos_x_um - 2500) < 1e-9)) fail_msg("PositionX read as %g um, not 2500", m.pos_x_um);
}

static void test_long_ifd(void **state) {
    (void)state;
    ti_ome_meta m;
    ts_error err = {0};
    char zeros[80];
    memset(zeros, '0', 70);
    zeros[70] = '\0';
    char xml[1024];
    /* IFD 0...01 is not IFD 0: the second Image, without UUID, is this file's */
    snprintf(xml, sizeof xml, "<OME><Image><Pixels PhysicalSizeX=\"1\"><TiffData IFD=\"%s1\"/></Pixels></Image>"
             "<Image><Pixels PhysicalSizeX=\"2\"><TiffData IFD=\"0\"/></Pixels></Image></OME>", zeros);
    assert_int_equal(parse(xml, NULL, &m, &err), TS_OK);
    assert_true(m.size_x_um == 2);
}

static void test_long_channel_name(void **state) {
    (void)state;
    ti_ome_meta m;
    ts_error err = {0};
    char xml[1024];
    /* 62 ASCII bytes then a 2-byte character: 64 bytes do not fit 63 */
    char name[80];
    memset(name, 'a', 62);
    snprintf(name + 62, sizeof name - 62, "\xc2\xb5m");
    snprintf(xml, sizeof xml, "<OME><Image><Pixels><Channel Name=\"%s\"/></Pixels></Image></OME>", name);
    assert_int_equal(parse(xml, NULL, &m, &err), TS_OK);
    assert_int_equal(m.nchannels, 1);
    assert_int_equal(strlen(m.channel_names[0]), 62);
}

/* Internal entities nested to a billion bytes in an attribute: refused by
 * the parser's amplification limit, not expanded into memory. */
static void test_entity_expansion(void **state) {
    (void)state;
    const char *xml =
        "<?xml version=\"1.0\"?><!DOCTYPE OME [<!ENTITY a \"aaaaaaaaaa\">"
        "<!ENTITY b \"&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;\"><!ENTITY c \"&b;&b;&b;&b;&b;&b;&b;&b;&b;&b;\">"
        "<!ENTITY d \"&c;&c;&c;&c;&c;&c;&c;&c;&c;&c;\"><!ENTITY e \"&d;&d;&d;&d;&d;&d;&d;&d;&d;&d;\">"
        "<!ENTITY f \"&e;&e;&e;&e;&e;&e;&e;&e;&e;&e;\"><!ENTITY g \"&f;&f;&f;&f;&f;&f;&f;&f;&f;&f;\">"
        "<!ENTITY h \"&g;&g;&g;&g;&g;&g;&g;&g;&g;&g;\"><!ENTITY i \"&h;&h;&h;&h;&h;&h;&h;&h;&h;&h;\">]>"
        "<OME><Image><Pixels><Channel Name=\"&i;\"/></Pixels></Image></OME>";
    ti_ome_meta m;
    ts_error err = {0};
    ts_status st = parse(xml, NULL, &m, &err);
    if (st == TS_OK) assert_true(strlen(m.channel_names[0]) < 64);
    else assert_int_equal(st, TS_ERR_FORMAT);
}

int main(void) {
    ti_ome_init();
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sizes_names_positions), cmocka_unit_test(test_reference_frame_is_assumed_um),
        cmocka_unit_test(test_image_of_this_file),    cmocka_unit_test(test_not_ome),
        cmocka_unit_test(test_refusals),              cmocka_unit_test(test_units),
        cmocka_unit_test(test_long_values), cmocka_unit_test(test_long_ifd),
        cmocka_unit_test(test_long_channel_name),           cmocka_unit_test(test_entity_expansion),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
