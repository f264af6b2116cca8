/* Sub-pixel refinement of a strip shift in the image domain (refine.c),
 * used by ts_register_strips and the stage model's re-registration. */
#ifndef TS_REGISTER_REFINE_H
#define TS_REGISTER_REFINE_H

#include <stdbool.h>

#include "register/lowpass.h"

/* A first fit on the strips as they come; where its residual's fine-scale
 * power over a's mean squared gradient (px^2: how far noise can pull the
 * fit) is above TS_REFINE_NOISE, a second on the overlap alone (both
 * strips cut to it at the first fit's integer shift) low-passed by a
 * Butterworth of order TS_REFINE_ORDER whose cut-off, measured on the two
 * crops (lowpass.c), is kept within [TS_REFINE_CUT_LO, TS_REFINE_CUT_HI]
 * rad/px. refine.c says why. */
#define TS_REFINE_NOISE 0.3
/* ... and where that residual is white: its fine-scale share (1 - lag-1
 * correlation) at least this fraction of white read noise's through the
 * pre-filter (refine.c: read-noise-dominated cell overlaps 0.83-1.0,
 * structured misfit, starrynight's dot grid, blank against content, 0.02-0.57). */
#define TS_REFINE_WHITE 0.7
#define TS_REFINE_CUT_LO 0.4
#define TS_REFINE_CUT_HI 1.6
#define TS_REFINE_ORDER 6

/* The cubic B-spline coefficients of img (h x w, mirror boundary, as
 * scipy.ndimage.spline_filter(mode="mirror")) into coef (h * w). */
void ts_spline_coefficients(const float *img, float *coef, int h, int w);

/* What ts_refine did. */
typedef enum ts_refine_how {
    TS_REFINE_FAILED = 0, /* no fit converged: the shift is unchanged */
    TS_REFINE_FIRST,      /* the first fit, on the strips as they are */
    TS_REFINE_LOWPASS     /* the second, on the low-passed overlap */
} ts_refine_how;

/* Floats of work ts_refine needs for h x w strips. */
#define TS_REFINE_WORK(h, w) \
    (2 * (size_t)(h) * (size_t)(w) + ((size_t)(h) + 3) * ((size_t)(w) + 3) + 2 * ((size_t)(w) + 8))

/* The refinement of strips a and b (h x w, smoothed by `have` px of
 * Gaussian; left as they are) from *dy, *dx (the integer NCC maximum):
 * the shift of b against a (b[y][x] ~ a[y + dy][x + dx]), updated when a
 * fit converges with a positive gain within 2 px of its start (the
 * low-passed re-fit: of the start or of the first fit's answer),
 * unchanged otherwise (TS_REFINE_FAILED). work: TS_REFINE_WORK(h, w) floats;
 * plans: the low-pass's (the caller's thread's). */
ts_refine_how ts_refine(const float *a, const float *b, int h, int w, double have, float *work,
                        ts_lowpass_plans *plans, double *dy, double *dx);
/* The same in one instruction-set variant (tests): isa "sse2" or "avx2"
 * (NULL: the CPU's widest, as ts_refine); both give the same bits. False,
 * with nothing done, when this build or CPU lacks it. */
bool ts_refine_isa(const char *isa, const float *a, const float *b, int h, int w, double have, float *work,
                   ts_lowpass_plans *plans, double *dy, double *dx, ts_refine_how *how);

#endif
