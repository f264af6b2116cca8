/* tessera estimate: register neighbouring tiles and solve tile positions. */
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"
#include "common/outpath.h"

static const char *ESTIMATE_USAGE =
    "usage: tessera estimate PLATE -o shifts.yaml --overlap PX [options]\n"
    "\n"
    "Register every tile of PLATE with its right (x+1) and lower (y+1) neighbour\n"
    "by phase correlation of the overlap strips, solve the tile origins per well\n"
    "and write them, with the pairwise measurements, to shifts.yaml.\n"
    "\n"
    "registration:\n"
    "  --overlap PX|N%        nominal overlap of neighbouring tiles, both axes (N%:\n"
    "                         of the tile width for x, of its height for y)\n"
    "  --overlap-x PX|N%      overlap of left/right neighbours (oriented tiles)\n"
    "  --overlap-y PX|N%      overlap of top/bottom neighbours (oriented tiles)\n"
    "  --channel C            channel registered, default 0\n"
    "  --timepoint T          timepoint registered, default 0\n"
    "  --z Z                  z plane registered, default 0\n"
    "  --clahe                contrast-limited adaptive histogram equalisation\n"
    "                         before correlating (uneven illumination)\n"
    "  --guess FILE           expected tile origins, a shifts file (stage positions,\n"
    "                         an earlier run; float positions if it has them, else\n"
    "                         total_translation): each pair's overlap strips are cut\n"
    "                         where it puts them, and tiles without usable pairs (or\n"
    "                         groups of them) are placed by it, instead of the grid\n"
    "                         x pitch; it must place every tile (else an error)\n"
    "  --positions SRC        where the tiles are expected: names (default: the grid\n"
    "                         of the XXXYYY names x pitch), metadata (each tile's\n"
    "                         OME-NGFF translation / scale) or a Fiji\n"
    "                         TileConfiguration FILE (lines matched to positions by\n"
    "                         image name, else in order); with metadata or FILE the\n"
    "                         pairs are the tiles that overlap there (serpentine,\n"
    "                         irregular scans) and the positions are the guess\n"
    "  --max-shift PX         a pair's shift is at most PX from its expected offset\n"
    "                         (nominal or guessed); the expected offset itself is\n"
    "                         checked. Default: no limit, with --guess or\n"
    "                         --positions half the overlap; -1: no limit\n"
    "  --no-stage-model       do not register weak, unmatched and outlying pairs\n"
    "                         again inside the window the trusted pairs allow\n"
    "solve:\n"
    "  --solver l1|l2         robust L1 (IRLS, default) or least squares\n"
    "  --edge-weights MODE    linear (default), none, squared or threshold:CUT:\n"
    "                         weight pairs by their confidence (none: equally)\n"
    "  --weight-floor W, --max-iterations N, --tolerance PX,\n"
    "  --cost-tolerance R, --outlier-px PX\n"
    "                         solver tuning, as in 'tessera solve --help'\n"
    "  --loop-check on|off    down-weight pairs that break the grid's loops\n"
    "                         before solving (default on; 'tessera solve --help')\n"
    "tiles:\n"
    "  --flipud, --fliplr, --rot90 K\n"
    "                         tile orientation (flipud, then fliplr, then rot90\n"
    "                         counter-clockwise); recorded in shifts.yaml for fuse\n"
    "  --names-yx             position names are YYYXXX (default XXXYYY)\n"
    "  --wells LIST           only these wells, e.g. A/1,B/3\n"
    "running:\n"
    "  --device cpu|gpu|auto  default cpu; registration on the GPU is not wired in\n"
    "                         yet (docs/gpu.md): gpu is an error, auto runs on the CPU\n"
    "  --threads N            worker threads, default all cores\n"
    "  --cache BYTES          tile cache bound (e.g. 2G, 512M), default 1G\n"
    "  --accept-poor          write the shifts file even when the quality check\n"
    "                         fails (the measured overlap disagrees with --overlap,\n"
    "                         or too many pairs are outliers); see docs/qc.md\n"
    "  --progress MODE        auto (default: a bar on a terminal, else a log line\n"
    "                         every 15 s and at each stage's end), bar,\n"
    "                         log[:SECONDS], none\n"
    "  --json                 print a JSON summary on stdout (also when the check\n"
    "                         fails: verdict, message, written)\n"
    "  --report FILE.html     also write the QC report: per well the tiles at their\n"
    "                         solved positions, seams coloured by residual, the\n"
    "                         figures and the worst seams (docs/qc.md)\n"
    "  -q, --quiet            no summary on stderr (warnings and errors still)\n"
    "  -h, --help             this help\n";

/* Options of the estimate stage proper (shared with `stitch`). Returns 1 if
 * argv[*i] was one of them, 0 if not, -1 on a usage error (printed). */
int cli_estimate_option(const char *cmd, int argc, char **argv, int *i, ts_estimate_options *o,
                        cli_overlaps *ov) {
    const char *a = argv[*i];
    const char *v;
    int r = cli_solve_option(cmd, argc, argv, i, &o->solve);
    if (r == 0) r = cli_overlap_option(cmd, argc, argv, i, ov);
    if (r != 0) return r;
#define VALUE() do { if (!(v = cli_value(cmd, argc, argv, i))) return -1; } while (0)
    if (!strcmp(a, "--channel")) {
        VALUE();
        if (!cli_int(cmd, a, v, 0, 1 << 20, &o->channel)) return -1;
    } else if (!strcmp(a, "--timepoint")) {
        VALUE();
        if (!cli_int(cmd, a, v, 0, 1 << 30, &o->timepoint)) return -1;
    } else if (!strcmp(a, "--z")) {
        VALUE();
        if (!cli_int(cmd, a, v, 0, 1 << 30, &o->z)) return -1;
    } else if (!strcmp(a, "--max-shift")) {
        VALUE();
        if (!cli_double(cmd, a, v, &o->max_shift)) return -1;
        if (!(o->max_shift >= 0) && o->max_shift != -1) {
            cli_usage_error(cmd, "--max-shift: '%s' is not a distance in px (>= 0, or -1 for no limit)", v);
            return -1;
        }
    } else if (!strcmp(a, "--positions")) {
        VALUE();
        if (!*v) {
            cli_usage_error(cmd, "--positions: give names, metadata or a TileConfiguration file");
            return -1;
        }
        o->positions = !strcmp(v, "names") ? TS_POSITIONS_NAMES
                       : !strcmp(v, "metadata") ? TS_POSITIONS_METADATA : TS_POSITIONS_FILE;
        o->positions_file = o->positions == TS_POSITIONS_FILE ? v : NULL;
    } else if (!strcmp(a, "--accept-poor")) {
        o->accept_poor = true;
    } else if (!strcmp(a, "--no-stage-model")) {
        o->no_stage_model = true;
    } else if (!strcmp(a, "--clahe")) {
        o->clahe = true;
    } else if (!strcmp(a, "--names-yx")) {
        o->names_yx = true;
    } else if (!strcmp(a, "--cache")) {
        VALUE();
        if (!cli_size(cmd, a, v, &o->cache_bytes)) return -1;
    } else {
        return 0;
    }
#undef VALUE
    return 1;
}

/* A figure rounded to digits decimals, null when not finite (no trusted
 * pairs). */
static json_t *number(double v, int digits) {
    if (!isfinite(v)) return json_null();
    double m = pow(10, digits);
    return json_real(round(v * m) / m);
}

/* One direction's check; the same names in the plate and per-well objects. */
static json_t *overlap_json(const ts_overlap_qc *q) {
    return json_pack("{s:I, s:I, s:I, s:I, s:i, s:o, s:o, s:[o,o,o], s:b}", "pairs", (json_int_t)q->pairs, "measured",
                     (json_int_t)q->measured, "trusted", (json_int_t)q->trusted, "outliers", (json_int_t)q->outliers,
                     "nominal", q->nominal, "overlap", number(q->overlap, 2), "spread", number(q->spread, 2),
                     "confidence_quartiles", number(q->conf_q[0], 3), number(q->conf_q[1], 3),
                     number(q->conf_q[2], 3), "wide_strips", q->probed);
}

/* The plate's check and the run's figures (estimate's and stitch's --json). */
json_t *cli_estimate_json(const ts_estimate_result *r, double seconds) {
    json_t *wells = json_array();
    for (int i = 0; i < r->nwell_qc; i++) {
        const ts_estimate_well_qc *w = &r->well_qc[i];
        json_t *o = json_pack("{s:o, s:s, s:I, s:i, s:o, s:o, s:o}", "well", cli_json_path(w->well), "verdict",
                              ts_verdict_name(w->verdict), "isolated_tiles", (json_int_t)w->isolated, "groups",
                              w->groups, "max_residual", number(w->max_residual, 3), "x", overlap_json(&w->dir[0]),
                              "y", overlap_json(&w->dir[1]));
        json_object_set_new(o, "untrusted_tiles", json_integer((json_int_t)w->untrusted));
        json_object_set_new(o, "first_untrusted_tile", w->untrusted ? cli_json_path(w->first_untrusted) : json_null());
        json_object_set_new(o, "bridged_tiles", json_integer((json_int_t)w->bridged));
        json_object_set_new(o, "first_bridged_tile", w->bridged ? cli_json_path(w->first_bridged) : json_null());
        json_object_set_new(o, "cut_off_tiles", json_integer((json_int_t)w->cut_off));
        json_object_set_new(o, "first_cut_off_tile", w->cut_off ? cli_json_path(w->first_cut_off) : json_null());
        json_object_set_new(o, "stranded_tiles", json_integer((json_int_t)w->stranded));
        json_object_set_new(o, "first_stranded_tile", w->stranded ? cli_json_path(w->first_stranded) : json_null());
        /* the first one's evidence: its refused corner, or its own content */
        const bool corner = w->stranded && !(w->stranded_content > 0);
        /* (three significant digits: one cell of a 2048 px tile is 4e-6) */
        json_object_set_new(o, "first_stranded_content",
                            w->stranded && !corner
                                ? number(w->stranded_content, 2 - (int)floor(log10(w->stranded_content)))
                                : json_null());
        json_object_set_new(o, "first_stranded_ncc", corner ? number(w->stranded_ncc, 3) : json_null());
        json_object_set_new(o, "first_stranded_rival_ncc",
                            corner && w->stranded_rival > -1 ? number(w->stranded_rival, 3) : json_null());
        json_object_set_new(o, "first_stranded_refused_as",
                            corner ? json_string(w->stranded_unfitted ? "unfitted" : "ambiguous") : json_null());
        json_object_set_new(o, "worst_outlier", w->worst_outlier[0][0] ? json_pack("[o,o]", cli_json_path(w->worst_outlier[0]),
                                                                                   cli_json_path(w->worst_outlier[1]))
                                                                      : json_null());
        json_object_set_new(o, "worst_outlier_px", number(w->worst_outlier_px, 2));
        json_object_set_new(o, "disputed_pairs", json_integer((json_int_t)w->disputed));
        json_object_set_new(o, "worst_disputed_pair", w->disputed ? json_pack("[o,o]", cli_json_path(w->worst_disputed[0]),
                                                                            cli_json_path(w->worst_disputed[1]))
                                                                  : json_null());
        json_object_set_new(o, "disputed_px", number(w->disputed_px, 2));
        json_object_set_new(o, "refused_pairs", json_integer((json_int_t)w->refused));
        json_object_set_new(o, "first_refused_pair", w->refused ? json_pack("[o,o]", cli_json_path(w->first_refused[0]),
                                                                          cli_json_path(w->first_refused[1]))
                                                                : json_null());
        json_object_set_new(o, "hanging_tiles", json_integer((json_int_t)w->hanging));
        json_object_set_new(o, "first_hanging_tile", w->hanging ? cli_json_path(w->first_hanging) : json_null());
        json_array_append_new(wells, o);
    }
    json_t *j = json_pack("{s:i, s:I, s:I, s:I, s:I, s:I, s:I, s:i, s:I, s:I, s:[i,i], s:[i,i], s:o, s:o}", "wells",
                          r->wells, "tiles", (json_int_t)r->tiles, "pairs", (json_int_t)r->pairs, "unmatched_pairs",
                          (json_int_t)r->unmatched_pairs, "low_confidence_pairs", (json_int_t)r->low_confidence_pairs,
                          "outlier_pairs", (json_int_t)r->outlier_pairs, "isolated_tiles",
                          (json_int_t)r->isolated_tiles, "max_components", r->max_components, "tile_reads",
                          (json_int_t)r->tile_reads, "peak_cache_bytes", (json_int_t)r->peak_cache_bytes,
                          "strip_right", r->strip_shape[0][0], r->strip_shape[0][1], "strip_below",
                          r->strip_shape[1][0], r->strip_shape[1][1], "seconds", number(seconds, 3),
                          "pairs_per_second", number(seconds > 0 ? (double)r->pairs / seconds : 0.0, 1));
    json_object_set_new(j, "verdict", json_string(ts_verdict_name(r->verdict)));
    json_object_set_new(j, "written", json_boolean(r->written));
    json_object_set_new(j, "reregistered_pairs", json_integer((json_int_t)r->reregistered_pairs));
    json_object_set_new(j, "content_reads", json_integer((json_int_t)r->content_reads));
    json_object_set_new(j, "bridge_pairs", json_integer((json_int_t)r->bridge_pairs));
    json_object_set_new(j, "loop_downweighted_pairs", json_integer((json_int_t)r->loop_downweighted_pairs));
    json_object_set_new(j, "stage_downweighted_pairs", json_integer((json_int_t)r->stage_downweighted_pairs));
    json_object_set_new(j, "disputed_pairs", json_integer((json_int_t)r->disputed_pairs));
    json_object_set_new(j, "rematched_pairs", json_integer((json_int_t)r->rematched_pairs));
    json_object_set_new(j, "refused_pairs", json_integer((json_int_t)r->refused_pairs));
    json_object_set_new(j, "unfitted_pairs", json_integer((json_int_t)r->unfitted_pairs));
    json_object_set_new(j, "message", cli_json_path(r->verdict_message));
    json_object_set_new(j, "x", overlap_json(&r->overlap[0]));
    json_object_set_new(j, "y", overlap_json(&r->overlap[1]));
    json_object_set_new(j, "well_qc", wells);
    return j;
}

static void summary_dir(char axis, const ts_overlap_qc *q) {
    if (q->pairs == 0) return;
    fprintf(stderr, "; %c: %lld pairs, %lld measured, %lld trusted, %lld outliers", axis, (long long)q->pairs,
            (long long)q->measured, (long long)q->trusted, (long long)q->outliers);
    if (isfinite(q->overlap))
        fprintf(stderr, ", overlap %.1f px (spread %.1f, nominal %d%s)", q->overlap, q->spread, q->nominal,
                q->probed ? ", wide strips" : "");
    if (isfinite(q->conf_q[1]))
        fprintf(stderr, ", confidence %.2f/%.2f/%.2f", q->conf_q[0], q->conf_q[1], q->conf_q[2]);
}

/* The summary after estimate (and stitch): per well (the first 8, then the
 * ones that failed), then the plate's verdict. */
void cli_estimate_summary(const char *cmd, const ts_estimate_result *r) {
    int shown = 0, left = 0;
    for (int i = 0; i < r->nwell_qc; i++) {
        const ts_estimate_well_qc *w = &r->well_qc[i];
        if (shown >= 8 && w->verdict == TS_VERDICT_OK) {
            left++;
            continue;
        }
        shown++;
        fprintf(stderr, "tessera %s: well %s", cmd, w->well);
        summary_dir('x', &w->dir[0]);
        summary_dir('y', &w->dir[1]);
        fprintf(stderr, "; %lld isolated tiles, %d group%s, max residual %.2f px", (long long)w->isolated, w->groups,
                w->groups == 1 ? "" : "s", w->max_residual);
        if (w->untrusted)
            fprintf(stderr, "; %lld tile%s placed by untrusted pairs only (%s%s): check %s", (long long)w->untrusted,
                    w->untrusted == 1 ? "" : "s", w->first_untrusted, w->untrusted > 1 ? ", ..." : "",
                    w->untrusted == 1 ? "it" : "them");
        if (w->bridged)
            fprintf(stderr, "; %lld tile%s placed by diagonal neighbours only (%s%s)", (long long)w->bridged,
                    w->bridged == 1 ? "" : "s", w->first_bridged, w->bridged > 1 ? ", ..." : "");
        if (w->stranded) {
            fprintf(stderr, "; %lld tile%s with content and no pair left on %s stage position%s (%s%s: ",
                    (long long)w->stranded, w->stranded == 1 ? "" : "s", w->stranded == 1 ? "its" : "their",
                    w->stranded == 1 ? "" : "s", w->first_stranded, w->stranded > 1 ? ", ..." : "");
            if (w->stranded_content > 0)
                fprintf(stderr, "%.3g%% of it stands out of its noise, and no pair places it)",
                        100 * w->stranded_content);
            else if (w->stranded_unfitted)
                fprintf(stderr, "its diagonal corner matched at NCC %.2f but was refused: no sub-pixel fit)",
                        w->stranded_ncc);
            else
                fprintf(stderr,
                        "its diagonal corner matched at NCC %.2f but was refused: another maximum at %.2f came "
                        "too close)",
                        w->stranded_ncc, w->stranded_rival);
            fprintf(stderr, ": check %s", w->stranded == 1 ? "it" : "them");
        }
        if (w->refused)
            fprintf(stderr,
                    "; %lld pair%s refused by the stage model (%s %s%s): not borne out by its window's search; "
                    "%s tiles placed without %s",
                    (long long)w->refused, w->refused == 1 ? "" : "s", w->first_refused[0], w->first_refused[1],
                    w->refused > 1 ? ", ..." : "", w->refused == 1 ? "its" : "their", w->refused == 1 ? "it" : "them");
        if (w->worst_outlier[0][0])
            fprintf(stderr, "; worst outlier %s %s (residual %.1f px)", w->worst_outlier[0], w->worst_outlier[1],
                    w->worst_outlier_px);
        if (w->disputed)
            fprintf(stderr, "; %lld outlier%s disputed by the stage model (%s %s%s: measured on the stage's rows and "
                    "columns, solved %.1f px off)", (long long)w->disputed, w->disputed == 1 ? "" : "s",
                    w->worst_disputed[0], w->worst_disputed[1], w->disputed > 1 ? ", ..." : "", w->disputed_px);
        if (w->hanging)
            fprintf(stderr, "; %lld tile%s hang%s on one weak pair in no loop, or on outliers (%s%s): check %s", (long long)w->hanging,
                    w->hanging == 1 ? "" : "s", w->hanging == 1 ? "s" : "", w->first_hanging,
                    w->hanging > 1 ? ", ..." : "", w->hanging == 1 ? "it" : "them");
        if (w->cut_off)
            fprintf(stderr, "; %lld tiles in groups no pair joins to the rest, placed on their stage positions (%s, ...): check them",
                    (long long)w->cut_off, w->first_cut_off);
        fprintf(stderr, "%s\n", w->verdict == TS_VERDICT_IMPLAUSIBLE ? " (implausible)" : "");
    }
    if (left) fprintf(stderr, "tessera %s: ... and %d more wells, all ok\n", cmd, left);
    fprintf(stderr, "tessera %s: verdict %s", cmd, ts_verdict_name(r->verdict));
    for (int d = 0; d < 2; d++)
        if (r->overlap[d].pairs && isfinite(r->overlap[d].overlap))
            fprintf(stderr, "%s overlap %c %.1f px (spread %.1f, nominal %d)", d && r->overlap[0].pairs ? "," : ":",
                    "xy"[d], r->overlap[d].overlap, r->overlap[d].spread, r->overlap[d].nominal);
    fprintf(stderr, "\n");
}

void cli_estimate_warn(const char *cmd, const ts_estimate_result *r) {
    if (r->verdict != TS_VERDICT_OK) { /* written only with --accept-poor */
        fprintf(stderr, "tessera %s: warning: written although the check failed: %s\n", cmd, r->verdict_message);
        return;
    }
    int64_t all = r->pairs + r->unmatched_pairs, poor = r->low_confidence_pairs + r->unmatched_pairs;
    if (all >= 4 && 2 * poor > all)
        fprintf(stderr,
                "tessera %s: warning: %lld of %lld neighbour pairs did not match or matched "
                "with confidence < 0.1; check --overlap and the orientation flags\n",
                cmd, (long long)poor, (long long)all);
}

int cmd_estimate(int argc, char **argv) {
    const char *cmd = "estimate";
    ts_estimate_options o;
    ts_estimate_options_init(&o);
    cli_common com = {0};
    cli_overlaps overlaps = {0};
    const char *input = NULL;
    int npos = 0;
    bool quiet = false;
    const char *report = NULL;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) {
            fputs(ESTIMATE_USAGE, stdout);
            return CLI_OK;
        }
        if (!strcmp(argv[i], "-q") || !strcmp(argv[i], "--quiet")) {
            quiet = true;
            continue;
        }
        if (!strcmp(argv[i], "--report")) {
            if (!(report = cli_value(cmd, argc, argv, &i))) return CLI_USAGE;
            continue;
        }
        if (!strcmp(argv[i], "--device")) { /* estimate's own: stitch's --device is fuse's */
            const char *v = cli_value(cmd, argc, argv, &i);
            if (!v || !cli_device(cmd, v, &o.device)) return CLI_USAGE;
            continue;
        }
        int r = cli_estimate_option(cmd, argc, argv, &i, &o, &overlaps);
        if (r == 0) r = cli_common_option(cmd, argc, argv, &i, &com);
        if (r < 0) return CLI_USAGE;
        if (r == 0 && cli_positional(cmd, argv[i], &input, &npos, 1) != CLI_OK) return CLI_USAGE;
    }
    o.output = com.output;
    o.orientation = com.orientation;
    o.wells = com.wells;
    o.threads = com.threads;
    if (!input) return cli_usage_error(cmd, "needs PLATE");
    if (!o.output) return cli_usage_error(cmd, "needs -o shifts.yaml");
    o.input = input;
    int code = cli_overlap_resolve(cmd, &overlaps, &o);
    if (code != CLI_OK) return code;
    o.progress = cli_progress;
    o.dist = cli_dist();
    ts_estimate_result res;
    ts_error err;
    /* --report FILE.html apart from the plate and the shifts file, checked
     * before the estimate spends its time. */
    const char *report_inputs[2] = {input, o.output};
    if (report && ts_check_output_path("--report", report, report_inputs, 2, &err) != TS_OK)
        return cli_fail(cmd, &err);
    double t0 = cli_now();
    ts_status st = ts_estimate_run(&o, &res, &err);
    /* A failed check still says what was measured in --json (written:
     * false); stderr carries its one line. */
    if (st == TS_OK || res.verdict != TS_VERDICT_OK) {
        if (com.json) cli_json_emit(cmd, input, o.output, cli_estimate_json(&res, cli_now() - t0));
    }
    if (st != TS_OK) {
        ts_estimate_result_free(&res);
        return cli_fail(cmd, &err);
    }
    if (!quiet) cli_estimate_summary(cmd, &res);
    cli_estimate_warn(cmd, &res);
    if (report && ts_dist_rank(o.dist) == 0) st = ts_report_write(report, o.output, &res, &err);
    ts_estimate_result_free(&res);
    return st == TS_OK ? CLI_OK : cli_fail(cmd, &err);
}
