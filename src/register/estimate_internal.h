/* Estimate internals shared between its files. */
#ifndef TS_REGISTER_ESTIMATE_INTERNAL_H
#define TS_REGISTER_ESTIMATE_INTERNAL_H

#include "ome/ome.h"
#include "shifts/shifts.h"
#include "tessera/tessera.h"

/* The registration's max_shift from opt->max_shift (0: none, or half the
 * smaller overlap with a guess). (guess.c) */
double ts_estimate_max_shift(const ts_estimate_options *opt);

/* Reads the guess file `path` (opt->solve.guess) and the guessed origin of
 * every tile of the plate into *origin (malloc'd, indexed tile_base[well] +
 * position). TS_ERR_FORMAT naming the first tile the guess does not place.
 * *guess (the file, for the solve's targets) is set even on failure:
 * free it with ts_shifts_free. (guess.c) */
ts_status ts_estimate_read_guess(const char *path, const ts_plate *plate, const int64_t *tile_base,
                                 int64_t ntiles, ts_shifts **guess, double (**origin)[2], ts_error *err);

#endif
