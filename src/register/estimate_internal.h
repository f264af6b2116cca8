/* Estimate internals shared between its files. */
#ifndef TS_REGISTER_ESTIMATE_INTERNAL_H
#define TS_REGISTER_ESTIMATE_INTERNAL_H

#include "shifts/shifts.h"
#include "tessera/tessera.h"

/* Turns the pairwise measurements in s into tile origins (total_translation,
 * positions, outliers, residuals) for every well: the global solve with
 * opt->solve. h, w: the oriented tile shape (nominal pitch = size - overlap,
 * the initial guess and the fallback for tiles without usable edges).
 * Adds the solve's counts to result (may be NULL). */
ts_status ts_estimate_place(ts_shifts *s, int h, int w, const ts_estimate_options *opt,
                            ts_estimate_result *result, ts_error *err);

#endif
