/* tessera simulate: write a synthetic plate with ground-truth tile positions. */
#include "cli/cli.h"

#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ome/ome.h"

static const char *CMD = "simulate";

static void help(void) {
    printf(
        "usage: tessera simulate -o PLATE [options]\n\n"
        "Write a synthetic OME-Zarr HCS plate of overlapping tiles cut from a procedural\n"
        "specimen (cell-like blobs with texture), with stage jitter, sensor noise and\n"
        "vignetting, and optionally the true tile origins in the shifts format.\n\n"
        "options:\n"
        "  -o, --output PLATE     plate store to create (an existing plate there is replaced)\n"
        "  --wells LIST           wells, e.g. A/1,B/2 (default A/1)\n"
        "  --grid COLSxROWS       tile grid per well (default 4x3)\n"
        "  --tile HxW             stored tile shape in px (default 256x256)\n"
        "  --overlap PX|N%%        overlap of neighbouring tiles, px or a percentage of the\n"
        "                         tile (default tile/8)\n"
        "  --jitter PX            uniform stage jitter +-PX (default 3)\n"
        "  --channels N           channels (default 1): nuclei, cytoplasm, puncta, ...\n"
        "  --timepoints N         timepoints (default 1)\n"
        "  --z N                  z planes (default 1)\n"
        "  --noise SIGMA          sensor noise in grey levels (default 20)\n"
        "  --background LEVEL     camera offset in grey levels (default 100)\n"
        "  --vignetting F         fraction of light lost in the corners, 0..1 (default 0.15)\n"
        "  --blank FRACTION       tiles showing no specimen (default 0)\n"
        "  --missing FRACTION     positions never acquired (default 0)\n"
        "  --format 0.4|0.5       OME-Zarr version: 0.4 zarr v2, 0.5 zarr v3 (default 0.5)\n"
        "  --dtype uint16|uint8|float32  (default uint16)\n"
        "  --codec NAME[:LEVEL]   zstd|blosc-lz4|blosc-zstd|gzip|none (default zstd);\n"
        "                         LEVEL zstd 1-22 (default 3), blosc and gzip 1-9 (5)\n"
        "  --pixel-size UM        physical pixel size in micrometres (default 0.65)\n"
        "  --acq-flipud, --acq-fliplr, --acq-rot90 K\n"
        "                         the camera's orientation: estimate/fuse with --flipud,\n"
        "                         --fliplr, --rot90 K undo it (--tile is the stored shape)\n"
        "  --names-yx             name positions YYYXXX instead of XXXYYY\n"
        "  --seed N               random seed (default 0); same seed, same bytes\n"
        "  --truth FILE           write the true origins (shifts YAML)\n"
        "  --threads N            worker threads (default: all cores)\n"
        "  --json                 print a JSON summary\n"
        "  -q, --quiet            print nothing on success\n");
}

static bool parse_u64(const char *text, uint64_t *out) {
    char *end;
    errno = 0;
    unsigned long long v = strtoull(text, &end, 10);
    if (errno || end == text || *end || text[0] == '-') {
        cli_usage_error(CMD, "--seed: '%s' is not a non-negative integer", text);
        return false;
    }
    *out = (uint64_t)v;
    return true;
}

static bool parse_fraction(const char *flag, const char *text, double lo, double hi, double *out) {
    if (!cli_double(CMD, flag, text, out)) return false;
    if (*out < lo || *out > hi) {
        cli_usage_error(CMD, "%s: %s is outside [%g, %g]", flag, text, lo, hi);
        return false;
    }
    return true;
}

int cmd_simulate(int argc, char **argv) {
    ts_simulate_options o;
    ts_simulate_options_init(&o);
    bool json = false, quiet = false, overlap_given = false;
    cli_overlap overlap = {0};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = NULL;
#define VALUE() do { if (!(v = cli_value(CMD, argc, argv, &i))) return CLI_USAGE; } while (0)
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            help();
            return CLI_OK;
        } else if (!strcmp(a, "-o") || !strcmp(a, "--output")) {
            VALUE();
            o.output = v;
        } else if (!strcmp(a, "--wells")) {
            VALUE();
            o.wells = v;
        } else if (!strcmp(a, "--grid")) {
            VALUE();
            if (!cli_pair(CMD, a, v, 'x', &o.grid_cols, &o.grid_rows)) return CLI_USAGE;
        } else if (!strcmp(a, "--tile")) {
            VALUE();
            if (!cli_pair(CMD, a, v, 'x', &o.tile_h, &o.tile_w)) return CLI_USAGE;
        } else if (!strcmp(a, "--overlap")) {
            VALUE();
            if (!cli_overlap_value(CMD, a, v, 0, 100000, &overlap)) return CLI_USAGE;
            overlap_given = true;
        } else if (!strcmp(a, "--jitter")) {
            VALUE();
            if (!parse_fraction(a, v, 0, 1e6, &o.jitter)) return CLI_USAGE;
        } else if (!strcmp(a, "--channels")) {
            VALUE();
            if (!cli_int(CMD, a, v, 1, TS_MAX_CHANNELS, &o.channels)) return CLI_USAGE;
        } else if (!strcmp(a, "--timepoints")) {
            VALUE();
            if (!cli_int(CMD, a, v, 1, 1000, &o.timepoints)) return CLI_USAGE;
        } else if (!strcmp(a, "--z")) {
            VALUE();
            if (!cli_int(CMD, a, v, 1, 1000, &o.z)) return CLI_USAGE;
        } else if (!strcmp(a, "--noise")) {
            VALUE();
            if (!parse_fraction(a, v, 0, 1e6, &o.noise)) return CLI_USAGE;
        } else if (!strcmp(a, "--background")) {
            VALUE();
            if (!parse_fraction(a, v, 0, 1e6, &o.background)) return CLI_USAGE;
        } else if (!strcmp(a, "--vignetting")) {
            VALUE();
            if (!parse_fraction(a, v, 0, 0.99, &o.vignetting)) return CLI_USAGE;
        } else if (!strcmp(a, "--blank")) {
            VALUE();
            if (!parse_fraction(a, v, 0, 1, &o.blank_fraction)) return CLI_USAGE;
        } else if (!strcmp(a, "--missing")) {
            VALUE();
            if (!parse_fraction(a, v, 0, 0.99, &o.missing_fraction)) return CLI_USAGE;
        } else if (!strcmp(a, "--format")) {
            VALUE();
            if (!cli_format(CMD, v, &o.format)) return CLI_USAGE;
        } else if (!strcmp(a, "--dtype")) {
            VALUE();
            o.dtype = ts_dtype_from_name(v);
            if (o.dtype != TS_UINT16 && o.dtype != TS_UINT8 && o.dtype != TS_FLOAT32)
                return cli_usage_error(CMD, "--dtype: '%s' is not uint16, uint8 or float32", v);
        } else if (!strcmp(a, "--codec")) {
            VALUE();
            if (!cli_codec_level(CMD, v, &o.codec, &o.codec_level)) return CLI_USAGE;
        } else if (!strcmp(a, "--pixel-size")) {
            VALUE();
            if (!parse_fraction(a, v, 1e-9, 1e9, &o.pixel_size_um)) return CLI_USAGE;
        } else if (!strcmp(a, "--acq-flipud")) {
            o.acquisition.flipud = true;
        } else if (!strcmp(a, "--acq-fliplr")) {
            o.acquisition.fliplr = true;
        } else if (!strcmp(a, "--acq-rot90")) {
            VALUE();
            if (!cli_int(CMD, a, v, -3, 3, &o.acquisition.rot90)) return CLI_USAGE;
            o.acquisition.rot90 = ((o.acquisition.rot90 % 4) + 4) % 4;
        } else if (!strcmp(a, "--names-yx")) {
            o.names_yx = true;
        } else if (!strcmp(a, "--seed")) {
            VALUE();
            if (!parse_u64(v, &o.seed)) return CLI_USAGE;
        } else if (!strcmp(a, "--truth")) {
            VALUE();
            o.truth = v;
        } else if (!strcmp(a, "--threads")) {
            VALUE();
            if (!cli_int(CMD, a, v, 0, 4096, &o.threads)) return CLI_USAGE;
        } else if (!strcmp(a, "--json")) {
            json = true;
        } else if (!strcmp(a, "-q") || !strcmp(a, "--quiet")) {
            quiet = true;
        } else if (cli_stray_value(CMD, a)) {
            return CLI_USAGE;
        } else {
            return cli_usage_error(CMD, "unknown option '%s'", a);
        }
#undef VALUE
    }
    if (!o.output) return cli_usage_error(CMD, "missing -o PLATE");
    if (overlap_given) {
        /* one overlap for both axes: a percentage must give one px value */
        o.overlap = cli_overlap_px(&overlap, o.tile_w);
        if (cli_overlap_px(&overlap, o.tile_h) != o.overlap)
            return cli_usage_error(CMD, "--overlap %g%% of %dx%d tiles is %d px in y but %d in x: simulate "
                                        "takes one overlap for both axes (give it in px)",
                                   overlap.percent, o.tile_h, o.tile_w, cli_overlap_px(&overlap, o.tile_h),
                                   o.overlap);
    }

    ts_error err = {0};
    if (ts_simulate(&o, &err) != TS_OK) return cli_fail(CMD, &err);
    if (quiet && !json) return CLI_OK;

    /* Summarise from what is on disk: the plate as a reader sees it. */
    ts_plate *plate = NULL;
    if (ts_plate_open(o.output, &plate, &err) != TS_OK) return cli_fail(CMD, &err);
    long positions = 0;
    int missing = 0;
    for (int w = 0; w < plate->nwells; w++) {
        positions += plate->wells[w].npositions;
        missing += o.grid_cols * o.grid_rows - plate->wells[w].npositions;
    }
    const char *fmt = o.format == TS_OME_04 ? "0.4" : "0.5";
    if (json) {
        json_t *j = json_object();
        json_object_set_new(j, "format", json_string(fmt));
        json_object_set_new(j, "wells", json_integer(plate->nwells));
        json_object_set_new(j, "positions", json_integer(positions));
        json_object_set_new(j, "missing", json_integer(missing));
        json_object_set_new(j, "tile", json_pack("[ii]", o.tile_h, o.tile_w));
        json_object_set_new(j, "grid", json_pack("[ii]", o.grid_cols, o.grid_rows));
        json_object_set_new(j, "channels", json_integer(o.channels));
        json_object_set_new(j, "timepoints", json_integer(o.timepoints));
        json_object_set_new(j, "z", json_integer(o.z));
        json_object_set_new(j, "dtype", json_string(ts_dtype_name(o.dtype)));
        json_object_set_new(j, "seed", json_integer((json_int_t)o.seed));
        json_object_set_new(j, "truth", cli_json_path(o.truth));
        cli_json_emit(CMD, NULL, o.output, j);
    } else {
        printf("wrote %s (OME-Zarr %s): %d well%s, %ld positions (%d missing), tiles %dx%d %s, "
               "T=%d C=%d Z=%d%s%s\n",
               o.output, fmt, plate->nwells, plate->nwells == 1 ? "" : "s", positions, missing,
               o.tile_h, o.tile_w, ts_dtype_name(o.dtype), o.timepoints, o.channels, o.z,
               o.truth ? ", truth " : "", o.truth ? o.truth : "");
    }
    ts_plate_close(plate);
    return CLI_OK;
}
