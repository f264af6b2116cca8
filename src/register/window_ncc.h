/* The overlap NCC at every shift of a window at once, by FFT (window_ncc.c). */
#ifndef TS_WINDOW_NCC_H
#define TS_WINDOW_NCC_H

#include <math.h>

#include "tessera/tessera.h"

/* out[i * nx + j]: the NCC of b[y][x] against a[y + sy][x + sx] over their
 * overlap (h x w row-major strips), sy = cy + i - ny / 2, sx = cx + j -
 * nx / 2, as ts_overlap_ncc computes it (0 for a constant overlap, to
 * ~1e-12 in double precision); -2 where the overlap is thinner than
 * min_side on either axis. Shifts must satisfy |sy| < h, |sx| < w. */
/* Buffers and FFTW plans of the last few transform sizes (the strip shape
 * and the window's reach), kept by a worker from one search to the next
 * (allocating them per search made the page faults cost more than the
 * transforms). NULL scratch: made and freed per call. */
typedef struct ts_window_scratch ts_window_scratch;
void ts_window_scratch_free(ts_window_scratch *s);

ts_status ts_window_ncc(const float *a, const float *b, int h, int w, int cy, int cx, int ny, int nx, int min_side,
                        double *out, ts_window_scratch **scratch, ts_error *err);

#endif
