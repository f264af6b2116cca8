/* Order statistics of float arrays: the value of one rank without sorting
 * the whole array (display windows, preview contrast: two ranks of up to a
 * few million values, where a full qsort was most of the work). */
#ifndef TS_COMMON_SELECT_H
#define TS_COMMON_SELECT_H

#include <stddef.h>

/* Puts the value of rank k (0-based, the value sorting s[lo, hi) would put
 * at s[k]) at s[k], everything in [lo, k) no larger and everything in
 * (k, hi) no smaller; lo <= k < hi. s holds no NaN (with one, the ranks are
 * as ill-defined as a sort's). Expected linear time. */
void ts_select_rank(float *s, size_t lo, size_t hi, size_t k);

/* The median of v[0, n) (n > 0; the mean of ranks n/2 - 1 and n/2 when n is
 * even), the value sorting gives; reorders v. For the solve's medians of
 * pairs' shifts and of the loop check's edges (10^5 values and more, where
 * a qsort each was a large part of the serial start). No NaN in v. */
double ts_median_double(double *v, size_t n);

#endif
