/* estimate --guess: the expected origin of every tile, read once from the
 * guess file (a shifts file: stage positions or an earlier run). Pairs are
 * registered where the guess puts their overlap (ts_strip_geometry_at), and
 * the solve anchors on the guess (ts_solve_well_guess). */
#include <stdlib.h>

#include "common/error.h"
#include "register/estimate_internal.h"

ts_status ts_estimate_read_guess(const char *path, const ts_plate *plate, const int64_t *tile_base,
                                 int64_t ntiles, ts_shifts **guess, double (**origin)[2], ts_error *err) {
    *guess = NULL;
    *origin = NULL;
    ts_status st = ts_shifts_read(path, guess, err);
    if (st) return ts_fail_context(err, st, "reading the guess");
    double(*o)[2] = malloc((size_t)(ntiles ? ntiles : 1) * sizeof *o);
    if (!o) return ts_fail(err, TS_ERR_NOMEM, "out of memory for the guess of %lld tiles", (long long)ntiles);
    for (int w = 0; w < plate->nwells; w++) {
        const ts_well_info *wi = &plate->wells[w];
        for (int p = 0; p < wi->npositions; p++)
            if ((st = ts_shifts_guess_origin(*guess, path, wi->path, wi->positions[p], o[tile_base[w] + p], err)) !=
                TS_OK) {
                free(o);
                return st;
            }
    }
    *origin = o;
    return TS_OK;
}

double ts_estimate_max_shift(const ts_estimate_options *opt) {
    if (opt->max_shift > 0) return opt->max_shift;
    if (opt->max_shift < 0 || (!opt->solve.guess && opt->positions == TS_POSITIONS_NAMES)) return 0;
    /* A guess off by more than half the overlap would hardly be one. */
    int overlap = opt->overlap_x < opt->overlap_y ? opt->overlap_x : opt->overlap_y;
    return 0.5 * overlap;
}
