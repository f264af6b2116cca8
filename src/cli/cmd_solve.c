/* tessera solve: re-solve tile positions from the pairwise measurements that
 * estimate keeps in a shifts file, without reading any image. */
#include <jansson.h>
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"
#include "solve/solve.h"

static const char *SOLVE_USAGE =
    "usage: tessera solve PAIRS.yaml -o shifts.yaml [options]\n"
    "\n"
    "Re-solve the tile origins of every well from the pairs (tile a, tile b,\n"
    "dy, dx, confidence) kept in a shifts file, and write a new shifts file\n"
    "(total_translation, confidence, positions, residuals, outliers, pairs,\n"
    "tiles; tile_shape and orientation carried over).\n"
    "\n"
    "  -o, --output FILE      shifts YAML to write (required)\n"
    "  --solver l1|l2         robust L1 (IRLS, default) or least squares\n"
    "  --edge-weights MODE    linear (w = c, the default) | none (equal weights)\n"
    "                         | squared (w = c^2) | threshold:CUT (w = 1 if c >= CUT\n"
    "                         else the floor); w is at least the floor\n"
    "  --weight-floor W       smallest edge weight, default 1e-3\n"
    "  --max-iterations N     IRLS iterations at most, default 100\n"
    "  --tolerance PX         IRLS stops when no tile moves more, default 1e-3\n"
    "  --cost-tolerance R     IRLS also stops when an iteration lowers the L1 cost\n"
    "                         by less than R of it, default 3e-6 (0 = off)\n"
    "  --outlier-px PX        pairs with a larger residual are outliers, default 5\n"
    "  --loop-check on|off    down-weight, before solving, pairs that break the\n"
    "                         loops of the grid (the four pairs around a cell sum\n"
    "                         to zero) while their neighbours' loops close;\n"
    "                         default on (docs/solve.md, \"Loop check\")\n"
    "  --guess FILE           expected tile origins (a shifts file: stage positions\n"
    "                         or an earlier run): each group of connected tiles is\n"
    "                         anchored to it and a tile without pairs lands on it,\n"
    "                         instead of grid x pitch; it must place every tile\n"
    "  --tile HxW             tile shape, for files without tile_shape (used as\n"
    "                         the pitch of an axis without pairs, and written out)\n"
    "  --threads N            wells solved at once, default all cores (each\n"
    "                         well's solve is single-threaded)\n"
    "  --json                 print a JSON summary on stdout\n"
    "  -q, --quiet            no summary on stderr (warnings and errors still)\n"
    "  -h, --help             this help\n";

int cli_solve_option(const char *cmd, int argc, char **argv, int *i, ts_solve_options *o) {
    const char *a = argv[*i];
    const char *v;
    if (!strcmp(a, "--solver")) {
        if (!(v = cli_value(cmd, argc, argv, i))) return -1;
        static const char *const NAMES[] = {"l1", "l2"};
        static const int VALUES[] = {TS_SOLVER_L1, TS_SOLVER_L2};
        int x;
        if (!cli_choice(cmd, "--solver", v, NAMES, VALUES, 2, &x)) return -1;
        o->solver = (ts_solver)x;
    } else if (!strcmp(a, "--edge-weights")) {
        if (!(v = cli_value(cmd, argc, argv, i))) return -1;
        if (ts_edge_weighting_parse(v, &o->edge_weights, &o->threshold) != 0) {
            cli_usage_error(cmd, "--edge-weights: '%s' is not none, linear, squared or threshold:CUT", v);
            return -1;
        }
    } else if (!strcmp(a, "--weight-floor")) {
        if (!(v = cli_value(cmd, argc, argv, i)) || !cli_double(cmd, a, v, &o->weight_floor)) return -1;
        if (!(o->weight_floor > 0)) {
            cli_usage_error(cmd, "--weight-floor: must be > 0");
            return -1;
        }
    } else if (!strcmp(a, "--max-iterations")) {
        if (!(v = cli_value(cmd, argc, argv, i)) || !cli_int(cmd, a, v, 1, 100000, &o->max_iterations)) return -1;
    } else if (!strcmp(a, "--tolerance")) {
        if (!(v = cli_value(cmd, argc, argv, i)) || !cli_double(cmd, a, v, &o->tolerance)) return -1;
        if (!(o->tolerance > 0)) {
            cli_usage_error(cmd, "--tolerance: must be > 0");
            return -1;
        }
    } else if (!strcmp(a, "--cost-tolerance")) {
        if (!(v = cli_value(cmd, argc, argv, i)) || !cli_double(cmd, a, v, &o->cost_tolerance)) return -1;
        if (o->cost_tolerance < 0) {
            cli_usage_error(cmd, "--cost-tolerance: must be >= 0");
            return -1;
        }
    } else if (!strcmp(a, "--guess")) {
        if (!(v = cli_value(cmd, argc, argv, i))) return -1;
        o->guess = v;
    } else if (!strcmp(a, "--loop-check")) {
        if (!(v = cli_value(cmd, argc, argv, i))) return -1;
        static const char *const NAMES[] = {"on", "off"};
        static const int VALUES[] = {1, 0};
        int x;
        if (!cli_choice(cmd, "--loop-check", v, NAMES, VALUES, 2, &x)) return -1;
        o->loop_check = x;
    } else if (!strcmp(a, "--outlier-px")) {
        if (!(v = cli_value(cmd, argc, argv, i)) || !cli_double(cmd, a, v, &o->outlier_px)) return -1;
        if (!(o->outlier_px > 0)) {
            cli_usage_error(cmd, "--outlier-px: must be > 0");
            return -1;
        }
    } else {
        return 0;
    }
    return 1;
}

int cmd_solve(int argc, char **argv) {
    const char *cmd = "solve";
    ts_solve_options o;
    ts_solve_options_init(&o);
    const char *input = NULL, *output = NULL;
    int tile_h = 0, tile_w = 0, threads = 0, npos = 0;
    bool json = false, quiet = false;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v;
        if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
            fputs(SOLVE_USAGE, stdout);
            return CLI_OK;
        }
        int r = cli_solve_option(cmd, argc, argv, &i, &o);
        if (r < 0) return CLI_USAGE;
        if (r > 0) continue;
        if (!strcmp(a, "-o") || !strcmp(a, "--output")) {
            if (!(v = cli_value(cmd, argc, argv, &i))) return CLI_USAGE;
            output = v;
        } else if (!strcmp(a, "--tile")) {
            if (!(v = cli_value(cmd, argc, argv, &i)) || !cli_pair(cmd, a, v, 'x', &tile_h, &tile_w)) return CLI_USAGE;
        } else if (!strcmp(a, "--threads")) {
            if (!(v = cli_value(cmd, argc, argv, &i)) || !cli_int(cmd, a, v, 0, 4096, &threads)) return CLI_USAGE;
        } else if (!strcmp(a, "--json")) {
            json = true;
        } else if (!strcmp(a, "-q") || !strcmp(a, "--quiet")) {
            quiet = true;
        } else if (cli_positional(cmd, a, &input, &npos, 1) != CLI_OK) {
            return CLI_USAGE;
        }
    }
    if (!input) return cli_usage_error(cmd, "missing PAIRS.yaml");
    if (!output) return cli_usage_error(cmd, "missing -o shifts.yaml");
    ts_error err = {0};
    ts_solve_summary sum;
    if (ts_solve_file_ex(input, output, &o, tile_h, tile_w, threads, &sum, &err) != TS_OK) return cli_fail(cmd, &err);
    if (!quiet)
        fprintf(stderr,
                "tessera solve: wrote %s: %d well%s, %d tiles, %d pairs, solver %s, %d outliers (%d down-weighted "
                "by the loop check, %d of them by its stage model), %d isolated tiles, %d iterations at most, "
                "solved in %.2f s\n", output, sum.wells, sum.wells == 1 ? "" : "s", sum.tiles, sum.pairs,
                o.solver == TS_SOLVER_L1 ? "l1" : "l2", sum.outliers, sum.loop_downweighted, sum.stage_downweighted,
                sum.isolated, sum.max_iterations_used, sum.seconds);
    if (json) {
        cli_json_emit(cmd, input, output,
                      json_pack("{s:s, s:i, s:i, s:i, s:i, s:i, s:i, s:i, s:i, s:i, s:b, s:f}", "solver",
                                o.solver == TS_SOLVER_L1 ? "l1" : "l2", "wells", sum.wells, "tiles", sum.tiles,
                                "pairs", sum.pairs, "outliers", sum.outliers, "loop_downweighted",
                                sum.loop_downweighted, "stage_downweighted", sum.stage_downweighted,
                                "isolated_tiles", sum.isolated,
                                "components", sum.components, "iterations", sum.max_iterations_used, "converged",
                                sum.converged, "seconds", sum.seconds));
    } else if (!sum.converged) {
        fprintf(stderr, "tessera solve: warning: IRLS stopped at %d iterations before reaching the tolerance\n",
                sum.max_iterations_used);
    }
    return CLI_OK;
}
