/* Solve options: defaults, the --edge-weights syntax, and edge weights. */
#include "solve/solve.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

void ts_solve_options_init(ts_solve_options *opt) {
    memset(opt, 0, sizeof *opt);
    opt->solver = TS_SOLVER_L1;
    /* By confidence, a pair of confidence 0 at the floor: over 55 simulated
     * and real-image plates (docs/solve.md) the fewest tiles off by > 3 px
     * (57; none 68, squared 88, threshold:0.1 65) and the smallest worst
     * error (16.9 px; none 71.6). `none` stays the equal weights. */
    opt->edge_weights = TS_EDGE_WEIGHTS_LINEAR;
    opt->threshold = 0.5;
    opt->weight_floor = 1e-3;
    opt->max_iterations = 100;
    opt->tolerance = 1e-3;
    opt->cost_tolerance = 3e-6;
    opt->outlier_px = 5.0;
    opt->loop_check = true;
}

int ts_edge_weighting_parse(const char *text, ts_edge_weighting *mode, double *cut) {
    if (!text) return -1;
    if (strcmp(text, "none") == 0) {
        *mode = TS_EDGE_WEIGHTS_NONE;
        return 0;
    }
    if (strcmp(text, "linear") == 0) {
        *mode = TS_EDGE_WEIGHTS_LINEAR;
        return 0;
    }
    if (strcmp(text, "squared") == 0) {
        *mode = TS_EDGE_WEIGHTS_SQUARED;
        return 0;
    }
    if (strncmp(text, "threshold:", 10) == 0) {
        const char *v = text + 10;
        char *end;
        errno = 0;
        double c = strtod(v, &end);
        if (errno || end == v || *end || !isfinite(c)) return -1;
        *mode = TS_EDGE_WEIGHTS_THRESHOLD;
        if (cut) *cut = c;
        return 0;
    }
    return -1;
}

double ts_solve_edge_weight(const ts_solve_options *opt, double c) {
    /* `none` must not look at the confidence at all: equal weights exactly. */
    if (opt->edge_weights == TS_EDGE_WEIGHTS_NONE) return 1.0;
    double floor_w = opt->weight_floor;
    if (!isfinite(c)) c = 0.0;
    double w;
    switch (opt->edge_weights) {
    case TS_EDGE_WEIGHTS_LINEAR: w = c; break;
    case TS_EDGE_WEIGHTS_SQUARED: w = c * c; break;
    case TS_EDGE_WEIGHTS_THRESHOLD: w = c >= opt->threshold ? 1.0 : floor_w; break;
    default: w = 1.0; break;
    }
    return w > floor_w ? w : floor_w;
}
