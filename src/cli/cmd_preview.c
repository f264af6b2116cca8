/* tessera preview: write a downsampled PNG of a well's mosaic. */
#include "cli/cli.h"

#include <jansson.h>
#include <stdio.h>
#include <string.h>

static const char *CMD = "preview";

static void help(void) {
    printf("usage: tessera preview STORE -o PICTURE.png [--well W] [--max-size PX]\n"
           "                        [--shifts shifts.yaml] [--threads N] [--json]\n\n"
           "Write a downsampled picture of a fused mosaic (one image per well): the smallest\n"
           "pyramid level that still reaches --max-size is mean-downsampled, each channel\n"
           "contrast-stretched (0.5-99.5 percentiles of covered pixels) in its omero colour.\n\n"
           "options:\n"
           "  -o, --output FILE   PNG to write\n"
           "  --well W            well, e.g. B/3 (default: the first with an image)\n"
           "  --max-size PX       longest side of the picture (default 1024)\n"
           "  --shifts FILE       draw tile outlines and each measured pair's seam, coloured by\n"
           "                      its residual (green 0, yellow 1, red 2+ px; outliers magenta,\n"
           "                      unmatched pairs blue; legend in the corner); for an\n"
           "                      input plate (many images per well), also place the tiles at\n"
           "                      the file's origins and orientation (averaged, not blended)\n"
           "  --threads N         tile reads for an input plate (default: all cores)\n"
           "  --json              print a JSON summary on stdout\n");
}

int cmd_preview(int argc, char **argv) {
    ts_preview_options o;
    ts_preview_options_init(&o);
    bool json = false;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            help();
            return CLI_OK;
        } else if (!strcmp(a, "-o") || !strcmp(a, "--output")) {
            if (!(v = cli_value(CMD, argc, argv, &i))) return CLI_USAGE;
            o.output = v;
        } else if (!strcmp(a, "--well")) {
            if (!(v = cli_value(CMD, argc, argv, &i))) return CLI_USAGE;
            o.well = v;
        } else if (!strcmp(a, "--max-size")) {
            if (!(v = cli_value(CMD, argc, argv, &i))) return CLI_USAGE;
            if (!cli_int(CMD, a, v, 16, 65536, &o.max_size)) return CLI_USAGE;
        } else if (!strcmp(a, "--threads")) {
            if (!(v = cli_value(CMD, argc, argv, &i))) return CLI_USAGE;
            if (!cli_int(CMD, a, v, 0, 4096, &o.threads)) return CLI_USAGE;
        } else if (!strcmp(a, "--json")) {
            json = true;
        } else if (!strcmp(a, "--shifts")) {
            if (!(v = cli_value(CMD, argc, argv, &i))) return CLI_USAGE;
            o.shifts = v;
        } else if (cli_stray_value(CMD, a)) {
            return CLI_USAGE;
        } else if (a[0] == '-' && a[1]) {
            return cli_usage_error(CMD, "unknown option '%s'", a);
        } else if (!o.store) {
            o.store = a;
        } else {
            return cli_usage_error(CMD, "one STORE only (got '%s' and '%s')", o.store, a);
        }
    }
    if (!o.store) return cli_usage_error(CMD, "missing STORE");
    if (!o.output) return cli_usage_error(CMD, "missing -o PICTURE.png");
    ts_error err = {0};
    ts_preview_result r;
    double t0 = cli_now();
    if (ts_preview_run(&o, &r, &err) != TS_OK) return cli_fail(CMD, &err);
    if (json)
        cli_json_emit(CMD, o.store, o.output,
                      json_pack("{s:o, s:s, s:i, s:[i,i], s:i, s:i, s:i, s:f}", "shifts", cli_json_path(o.shifts),
                                "well", r.well, "level", r.level, "size", r.height, r.width, "seams", r.seams,
                                "outlier_seams", r.outlier_seams, "unmatched_seams", r.unmatched_seams, "seconds",
                                cli_now() - t0));
    return CLI_OK;
}
