/* The stage model of the loop check's tie-breaker (docs/solve.md, "Loop
 * check"): what offset each grid edge's row (right pairs) or column (lower
 * pairs) agrees on, and how far the stage scatters around it. */
#ifndef TS_SOLVE_LOOP_MODEL_H
#define TS_SOLVE_LOOP_MODEL_H

#include <stdint.h>

/* ne grid edges: dir[i] 0 (to the right) or 1 (downwards), line[i] their
 * grid row (dir 0) or column (dir 1), dn[i] the measured (dy, dx) and
 * vouched[i] set for the edges the model is built from (those a closing
 * loop vouches for). pred[i]: the median of the vouched edges of i's line
 * and direction, that of its whole direction when the line has fewer than
 * three (NAN where the direction has none); spread[dir][axis]: 1.4826 x the
 * median |dn - pred| of the direction's vouched edges (0 with none).
 * Returns 0, or -1 when out of memory. */
int ts_loop_model_fit(int ne, const unsigned char *dir, const int64_t *line, const double (*dn)[2],
                      const unsigned char *vouched, double (*pred)[2], double spread[2][2]);

#endif
