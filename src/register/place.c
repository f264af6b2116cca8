/* From pairwise measurements to tile origins: the global solve of src/solve
 * per well, with the nominal pitch (tile size minus overlap), or the user's
 * guess, as the initial guess and the fallback for tiles the pairs do not
 * reach. */
#include "common/error.h"
#include "register/estimate_internal.h"
#include "solve/solve.h"

ts_status ts_estimate_place(ts_shifts *s, int h, int w, const ts_shifts *guess, const ts_estimate_options *opt,
                            ts_estimate_result *result, ts_error *err) {
    double pitch_y = h - opt->overlap_y, pitch_x = w - opt->overlap_x;
    for (int wi = 0; wi < s->nwells; wi++) {
        ts_solve_result stats;
        ts_status st = ts_solve_well_guess(s, wi, pitch_y, pitch_x, guess, &opt->solve, &stats, err);
        if (st != TS_OK) {
            return ts_fail_context(err, st, "solving well %s", s->wells[wi].well);
        }
        if (result) {
            result->outlier_pairs += stats.noutliers;
            result->isolated_tiles += stats.isolated;
            if (stats.components > result->max_components) result->max_components = stats.components;
        }
    }
    return TS_OK;
}
