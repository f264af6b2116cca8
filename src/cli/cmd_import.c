/* tessera import: a folder of TIFF tiles as an OME-Zarr HCS plate. */
#include "cli/cli.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *CMD = "import";

static void help(void) {
    printf(
        "usage: tessera import DIR -o PLATE [options]\n\n"
        "Make an OME-Zarr HCS plate from a folder of TIFF tiles: every file of DIR whose\n"
        "name matches the pattern becomes one position of one well, named XXXYYY from its\n"
        "grid column and row, so that estimate, fuse and stitch take the plate as is.\n"
        "Tiles are greyscale, 8- or 16-bit unsigned (kept as uint8 / uint16), all of one\n"
        "size; the pages of a multi-page TIFF are channels. Files that do not match the\n"
        "pattern are ignored. OME-TIFF tiles give the pixel size, the channel names and\n"
        "the stage positions (written as NGFF translations) from their OME-XML.\n\n"
        "options:\n"
        "  -o, --output PLATE     plate store to create (an existing plate there is replaced)\n"
        "  --pattern TEXT         file names, with {row} and {col}, or {index} (a running\n"
        "                         number filling --grid in --order); digits may be\n"
        "                         zero-padded; the rest is literal (default 'r{row}_c{col}.tif')\n"
        "  --order ORDER          how {index} fills the grid: row (default: row by row, each\n"
        "                         from the left), column (column by column, each from the\n"
        "                         top), snake-row, snake-column (serpentine: every other\n"
        "                         row / column runs back)\n"
        "  --first-index 0|1      what the numbers in the names count from (default 0)\n"
        "  --grid COLSxROWS       the grid: required with {index}; with {row}/{col} a bound\n"
        "                         (default: the largest row and column found)\n"
        "  --well ROW/COL         the well (default A/1)\n"
        "  --names-yx             name positions YYYXXX instead of XXXYYY\n"
        "  --scale Y,X            pixel size in micrometres (default: the OME-XML's\n"
        "                         PhysicalSizeY/X, else 1,1)\n"
        "  --format 0.4|0.5       OME-Zarr version: 0.4 zarr v2, 0.5 zarr v3 (default 0.5)\n"
        "  --chunk PX             chunk side (default: one chunk per tile plane; with 0.5,\n"
        "                         one shard per plane of PX x PX chunks)\n"
        "  --codec NAME[:LEVEL]   zstd|blosc-lz4|blosc-zstd|gzip|none (default zstd);\n"
        "                         LEVEL zstd 1-22 (default 3), blosc and gzip 1-9 (5)\n"
        "  --threads N            worker threads (default: all cores)\n"
        "  --json                 print a JSON summary\n"
        "  --progress MODE        auto (default: bar on a terminal, else log), bar,\n"
        "                         log[:SECONDS] (a line every 15 s), none\n"
        "  -q, --quiet            print nothing on success\n"
        "Options take their value as the next argument or after '=' (--grid=4x3).\n");
}

static bool parse_scale(const char *text, double *y, double *x) {
    char *end;
    double a = strtod(text, &end);
    if (end == text || *end != ',') goto bad;
    const char *rest = end + 1;
    double b = strtod(rest, &end);
    if (end == rest || *end || !(a > 0) || !(b > 0) || a > 1e9 || b > 1e9) goto bad;
    *y = a, *x = b;
    return true;
bad:
    cli_usage_error(CMD, "--scale: '%s' is not Y,X (two positive numbers, micrometres)", text);
    return false;
}

static bool parse_order(const char *text, ts_import_order *out) {
    static const char *const NAMES[] = {"row", "column", "snake-row", "snake-column"};
    static const int VALUES[] = {TS_ORDER_ROW, TS_ORDER_COLUMN, TS_ORDER_SNAKE_ROW, TS_ORDER_SNAKE_COLUMN};
    int x;
    if (!cli_choice(CMD, "--order", text, NAMES, VALUES, 4, &x)) return false;
    *out = (ts_import_order)x;
    return true;
}

int cmd_import(int argc, char **argv) {
    ts_import_options o;
    ts_import_options_init(&o);
    const char *pos[1];
    int npos = 0;
    bool json = false, quiet = false;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = NULL;
#define VALUE() do { if (!(v = cli_value(CMD, argc, argv, &i))) return CLI_USAGE; } while (0)
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            help();
            return CLI_OK;
        } else if (!strcmp(a, "-o") || !strcmp(a, "--output")) {
            VALUE();
            o.output = v;
        } else if (!strcmp(a, "--pattern")) {
            VALUE();
            o.pattern = v;
        } else if (!strcmp(a, "--first-index")) {
            VALUE();
            if (!cli_int(CMD, a, v, 0, 1, &o.first_index)) return CLI_USAGE;
        } else if (!strcmp(a, "--grid")) {
            VALUE();
            if (!cli_pair(CMD, a, v, 'x', &o.grid_cols, &o.grid_rows)) return CLI_USAGE;
            if (o.grid_cols > 999 || o.grid_rows > 999)
                return cli_usage_error(CMD, "--grid: '%s': at most 999 per side (positions are "
                                            "named with 3 digits)", v);
        } else if (!strcmp(a, "--order")) {
            VALUE();
            if (!parse_order(v, &o.order)) return CLI_USAGE;
        } else if (!strcmp(a, "--well")) {
            VALUE();
            o.well = v;
        } else if (!strcmp(a, "--names-yx")) {
            o.names_yx = true;
        } else if (!strcmp(a, "--scale")) {
            VALUE();
            if (!parse_scale(v, &o.scale_y, &o.scale_x)) return CLI_USAGE;
        } else if (!strcmp(a, "--format")) {
            VALUE();
            if (!cli_format(CMD, v, &o.format)) return CLI_USAGE;
        } else if (!strcmp(a, "--chunk")) {
            VALUE();
            if (!cli_int(CMD, a, v, 1, 65536, &o.chunk)) return CLI_USAGE;
        } else if (!strcmp(a, "--codec")) {
            VALUE();
            if (!cli_codec_level(CMD, v, &o.codec, &o.codec_level)) return CLI_USAGE;
        } else if (!strcmp(a, "--threads")) {
            VALUE();
            if (!cli_int(CMD, a, v, 0, 4096, &o.threads)) return CLI_USAGE;
        } else if (!strcmp(a, "--json")) {
            json = true;
        } else if (!strcmp(a, "--progress")) {
            VALUE();
            if (!cli_progress_mode(CMD, v)) return CLI_USAGE;
        } else if (!strcmp(a, "-q") || !strcmp(a, "--quiet")) {
            quiet = true;
        } else if (cli_positional(CMD, a, pos, &npos, 1) != CLI_OK) {
            return CLI_USAGE;
        }
#undef VALUE
    }
    if (npos != 1) return cli_usage_error(CMD, "missing the folder of TIFF tiles");
    if (!o.output) return cli_usage_error(CMD, "missing -o PLATE");
    o.input = pos[0];
    o.progress = cli_progress;

    ts_error err = {0};
    ts_import_result r;
    double t0 = cli_now();
    if (ts_import(&o, &r, &err) != TS_OK) return cli_fail(CMD, &err);
    double seconds = cli_now() - t0;
    const char *fmt = o.format == TS_OME_04 ? "0.4" : "0.5";
    if (json) {
        json_t *j = json_object();
        json_object_set_new(j, "format", json_string(fmt));
        json_object_set_new(j, "well", json_string(o.well));
        json_object_set_new(j, "positions", json_integer(r.tiles));
        json_object_set_new(j, "missing", json_integer(r.missing));
        json_object_set_new(j, "grid", json_pack("[ii]", r.grid_cols, r.grid_rows));
        json_object_set_new(j, "tile", json_pack("[II]", (json_int_t)r.tile_h, (json_int_t)r.tile_w));
        json_object_set_new(j, "channels", json_integer(r.channels));
        json_object_set_new(j, "dtype", json_string(ts_dtype_name(r.dtype)));
        json_object_set_new(j, "pixel_size", json_pack("[ff]", r.scale_y, r.scale_x));
        json_object_set_new(j, "pixel_size_from", json_string(r.scale_from_ome ? "ome-xml" : o.scale_y > 0 ? "option" : "default"));
        json_object_set_new(j, "channel_names_from_ome", json_boolean(r.names_from_ome));
        json_object_set_new(j, "stage_positions", json_boolean(r.positions));
        json_object_set_new(j, "seconds", json_real(seconds));
        cli_json_emit(CMD, o.input, o.output, j);
    } else if (!quiet) {
        printf("wrote %s (OME-Zarr %s): well %s, %lld positions on a %dx%d grid (%lld missing), "
               "tiles %lldx%lld %s, C=%d, pixel %g x %g um (%s)%s\n",
               o.output, fmt, o.well, (long long)r.tiles, r.grid_cols, r.grid_rows,
               (long long)r.missing, (long long)r.tile_h, (long long)r.tile_w,
               ts_dtype_name(r.dtype), r.channels, r.scale_y, r.scale_x,
               r.scale_from_ome ? "OME-XML" : o.scale_y > 0 ? "--scale" : "default, no OME-XML pixel size",
               r.positions ? ", stage positions from the OME-XML" : "");
        if (r.position_unit_assumed)
            fprintf(stderr, "tessera import: the OME-XML stage positions have the unit 'reference frame' "
                            "(or none): taken as micrometres\n");
    }
    return CLI_OK;
}
