/* tessera stitch: estimate tile positions, then fuse, in one command. */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"
#include "common/lock.h"
#include "common/outpath.h"
#include "mpi/dist.h"

static const char *STITCH_USAGE =
    "usage: tessera stitch PLATE -o OUT --overlap PX [options]\n"
    "\n"
    "Estimate the tile positions of PLATE (as 'tessera estimate'), write them to a\n"
    "shifts file, then fuse the tiles into the OME-Zarr plate OUT (as 'tessera\n"
    "fuse'). Takes the options of both commands ('tessera estimate --help',\n"
    "'tessera fuse --help'); shared flags (--flipud, --fliplr, --rot90, --wells,\n"
    "--threads) apply to both steps.\n"
    "\n"
    "  -o, --output OUT       output plate store (required)\n"
    "  --shifts-out FILE      where the shifts file goes (default OUT.shifts.yaml)\n"
    "  --report FILE.html     the estimate's QC report (see 'tessera estimate --help')\n"
    "  --overlap PX|N% | --overlap-x PX|N% --overlap-y PX|N%   (required, see estimate)\n"
    "  --channel C, --timepoint T, --z Z, --clahe, --solver l1|l2,\n"
    "  --edge-weights MODE, --weight-floor W, --max-iterations N, --tolerance PX,\n"
    "  --cost-tolerance R, --outlier-px PX, --loop-check on|off, --guess FILE,\n"
    "  --max-shift PX,\n"
    "  --positions names|metadata|FILE,\n"
    "  --names-yx, --cache BYTES, --accept-poor\n"
    "                                                         estimate options\n"
    "  --format, --blend, --exponent, --dtype, --chunk, --shard, --codec,\n"
    "  --levels, --tcz, --t-out, --memory                     fuse options\n"
    "  --device cpu|gpu|auto  where fusion runs (fuse --help; registration stays\n"
    "                         on the CPU)\n"
    "  --flipud, --fliplr, --rot90 K, --wells LIST, --threads N   both steps\n"
    "  --progress MODE        auto (default: a bar on a terminal, else a log line\n"
    "                         every 15 s and at each stage's end), bar,\n"
    "                         log[:SECONDS], none\n"
    "  --json                 print {\"shifts\", \"estimate\", \"fuse\"} on stdout\n"
    "  -q, --quiet            no estimate or fuse summary on stderr\n"
    "  -h, --help             this help\n";

int cmd_stitch(int argc, char **argv) {
    const char *cmd = "stitch";
    ts_estimate_options eo;
    ts_fuse_options fo;
    ts_estimate_options_init(&eo);
    ts_fuse_options_init(&fo);
    const char *input = NULL, *shifts_out = NULL, *report = NULL;
    int npos = 0;
    bool quiet = false;
    cli_common com = {0};
    cli_overlaps overlaps = {0};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            fputs(STITCH_USAGE, stdout);
            return CLI_OK;
        }
        if (!strcmp(a, "-q") || !strcmp(a, "--quiet")) {
            quiet = true;
            continue;
        }
        int r = cli_estimate_option(cmd, argc, argv, &i, &eo, &overlaps);
        if (r == 0) r = cli_fuse_option(cmd, argc, argv, &i, &fo);
        if (r == 0) r = cli_common_option(cmd, argc, argv, &i, &com);
        if (r == 0 && !strcmp(a, "--report")) {
            if (!(report = cli_value(cmd, argc, argv, &i))) return CLI_USAGE;
            r = 1;
        }
        if (r == 0 && !strcmp(a, "--shifts-out")) {
            if (!(shifts_out = cli_value(cmd, argc, argv, &i))) return CLI_USAGE;
            r = 1;
        }
        if (r < 0) return CLI_USAGE;
        if (r == 0 && cli_positional(cmd, a, &input, &npos, 1) != CLI_OK) return CLI_USAGE;
    }
    const char *output = com.output;
    if (!input) return cli_usage_error(cmd, "needs PLATE");
    if (!output) return cli_usage_error(cmd, "needs -o OUT");
    eo.input = input;
    eo.wells = com.wells;
    eo.orientation = com.orientation;
    int code = cli_overlap_resolve(cmd, &overlaps, &eo);
    if (code != CLI_OK) return code;
    char shifts_default[4200];
    if (!shifts_out) {
        size_t n = strlen(output);
        while (n > 1 && output[n - 1] == '/') n--;
        snprintf(shifts_default, sizeof shifts_default, "%.*s.shifts.yaml", (int)n, output);
        shifts_out = shifts_default;
    }
    eo.input = input;
    eo.output = shifts_out;
    eo.orientation = com.orientation;
    eo.wells = fo.wells = com.wells;
    eo.threads = fo.threads = com.threads;
    eo.progress = cli_progress;
    eo.dist = cli_dist();
    /* fuse reads the orientation estimate recorded in the shifts file */
    fo.input = input;
    fo.shifts = shifts_out;
    fo.output = output;
    fo.orientation = com.orientation;
    fo.orientation_given = com.orientation_given;
    fo.progress = cli_progress;
    fo.dist = cli_dist();

    ts_error err;
    ts_estimate_result er;
    ts_fuse_result fr;
    /* Both outputs checked, and the mosaic's lock taken (on the first rank,
     * for the whole run: the fuse step holds it again, nested), before the
     * estimate spends its time. */
    const char *mosaic_inputs[2] = {input, shifts_out}, *shifts_inputs[2] = {input, output};
    ts_output_lock lock = {0};
    ts_status st = ts_check_output_path("output", output, mosaic_inputs, 2, &err);
    if (st == TS_OK) st = ts_check_output_path("--shifts-out", shifts_out, shifts_inputs, 2, &err);
    const char *report_inputs[3] = {input, shifts_out, output};
    if (st == TS_OK && report) st = ts_check_output_path("--report", report, report_inputs, 3, &err);
    if (st == TS_OK && ts_dist_rank(fo.dist) == 0) st = ts_output_lock_acquire(&lock, output, "stitch", &err);
    if ((st = ts_dist_agree(fo.dist, st, &err)) != TS_OK) {
        ts_output_lock_release(&lock);
        return cli_fail(cmd, &err);
    }
    double t0 = cli_now();
    st = ts_estimate_run(&eo, &er, &err);
    if (st == TS_OK && !quiet) cli_estimate_summary(cmd, &er);
    if (st == TS_OK) cli_estimate_warn(cmd, &er);
    if (st == TS_OK && report && ts_dist_rank(fo.dist) == 0) st = ts_report_write(report, shifts_out, &er, &err);
    double t1 = cli_now();
    if (st == TS_OK) st = ts_fuse_run(&fo, &fr, &err);
    ts_output_lock_release(&lock);
    if (st) {
        ts_estimate_result_free(&er);
        return cli_fail(cmd, &err);
    }
    double t2 = cli_now();
    cli_fuse_warn(cmd, &fr);
    if (!quiet) cli_fuse_summary(cmd, output, &fr, t2 - t1);
    if (com.json)
        cli_json_emit(cmd, input, output,
                      json_pack("{s:o, s:o, s:o}", "shifts", cli_json_path(shifts_out), "estimate",
                                cli_estimate_json(&er, t1 - t0), "fuse", cli_fuse_json(&fr, t2 - t1)));
    ts_estimate_result_free(&er);
    return CLI_OK;
}
