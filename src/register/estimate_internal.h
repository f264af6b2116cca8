/* Estimate internals shared between its files. */
#ifndef TS_REGISTER_ESTIMATE_INTERNAL_H
#define TS_REGISTER_ESTIMATE_INTERNAL_H

#include "ome/ome.h"
#include "shifts/shifts.h"
#include "tessera/tessera.h"

/* Turns the pairwise measurements in s into tile origins (total_translation,
 * positions, outliers, residuals) for every well: the global solve with
 * opt->solve. h, w: the oriented tile shape (nominal pitch = size - overlap,
 * the initial guess and the fallback for tiles without usable edges); guess
 * (may be NULL): the read opt->solve.guess, which replaces grid x pitch.
 * Adds the solve's counts to result (may be NULL). */
ts_status ts_estimate_place(ts_shifts *s, int h, int w, const ts_shifts *guess, const ts_estimate_options *opt,
                            ts_estimate_result *result, ts_error *err);

/* Reads the guess file `path` (opt->solve.guess) and the guessed origin of
 * every tile of the plate into *origin (malloc'd, indexed tile_base[well] +
 * position). TS_ERR_FORMAT naming the first tile the guess does not place.
 * *guess (the file, for the solve's targets) is set even on failure:
 * free it with ts_shifts_free. (guess.c) */
/* The registration's max_shift from opt->max_shift (0: none, or half the
 * smaller overlap with a guess). (guess.c) */
double ts_estimate_max_shift(const ts_estimate_options *opt);

ts_status ts_estimate_read_guess(const char *path, const ts_plate *plate, const int64_t *tile_base,
                                 int64_t ntiles, ts_shifts **guess, double (**origin)[2], ts_error *err);

#endif
