/* A shifts file read as a guess of tile origins (tessera estimate/solve
 * --guess): stage positions, or the result of an earlier run. */
#include "shifts/shifts.h"

#include <math.h>

#include "common/error.h"

/* Beyond TS_SHIFTS_MAX_PX a guessed origin is not a stage position but a
 * broken file (the reader refuses those; this catches models built by hand). */
#define GUESS_MAX_PX TS_SHIFTS_MAX_PX

ts_status ts_shifts_guess_origin(const ts_shifts *guess, const char *path, const char *well, const char *tile,
                                 double yx[2], ts_error *err) {
    int w = ts_shifts_find_well(guess, well);
    int t = w >= 0 ? ts_shifts_find_tile(guess, w, tile) : -1;
    const ts_well_shifts *ws = w >= 0 ? &guess->wells[w] : NULL;
    if (t < 0 || !(ws->has_origin[t] || (ws->position && isfinite(ws->position[t][0]))))
        return ts_fail(err, TS_ERR_FORMAT, "guess %s has no origin for tile %s/%s (a guess must place every tile)",
                       path, well, tile);
    /* The float positions where the file has them (a previous run's), else
     * the integer origins (total_translation: stage positions, old tools). */
    if (ws->position && isfinite(ws->position[t][0]) && isfinite(ws->position[t][1])) {
        yx[0] = ws->position[t][0];
        yx[1] = ws->position[t][1];
    } else {
        yx[0] = (double)ws->origin[t][0];
        yx[1] = (double)ws->origin[t][1];
    }
    if (!(fabs(yx[0]) <= GUESS_MAX_PX && fabs(yx[1]) <= GUESS_MAX_PX))
        return ts_fail(err, TS_ERR_NUMERIC, "guess %s: origin [%g, %g] of tile %s/%s is absurd", path, yx[0], yx[1],
                       well, tile);
    return TS_OK;
}
