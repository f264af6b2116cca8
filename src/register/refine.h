/* Sub-pixel refinement of a strip shift in the image domain (refine.c),
 * used by ts_register_strips and the stage model's re-registration. */
#ifndef TS_REGISTER_REFINE_H
#define TS_REGISTER_REFINE_H

#include <stdbool.h>

/* A first fit on the strips as they come; where its residual's fine-scale
 * power over a's mean squared gradient (px^2: how far noise can pull the
 * fit) is above TS_REFINE_NOISE, a second on the strips smoothed to a total
 * Gaussian sigma (px), leaving out a band along the strips' edges (px):
 * overlaps at least TS_REFINE_THICK px thick on both axes get the first
 * pair, thinner ones the second (a 1.5-px Gaussian and its 2-px band leave
 * too little of a 6-10 px overlap). refine.c says why. */
#define TS_REFINE_NOISE 0.3
/* ... and where that residual is white: its fine-scale share (1 - lag-1
 * correlation) at least this fraction of white read noise's through the
 * pre-filter (refine.c: read-noise-dominated cell overlaps 0.83-1.0,
 * structured misfit, starrynight's dot grid, blank against content, 0.02-0.57). */
#define TS_REFINE_WHITE 0.7
#define TS_REFINE_THICK 12
#define TS_REFINE_SIGMA 1.5
#define TS_REFINE_MARGIN 2
#define TS_REFINE_THIN_SIGMA 1.0
#define TS_REFINE_THIN_MARGIN 1

/* Smooths a and b (h x w, in place) from `have` px of Gaussian smoothing
 * to the sigma for the overlap that the shift (dy, dx) leaves, and returns
 * the band the fit should leave out; tmp: h * w floats. */
int ts_refine_smooth(float *a, float *b, int h, int w, double have, double dy, double dx, float *tmp);

/* The cubic B-spline coefficients of img (h x w, mirror boundary, as
 * scipy.ndimage.spline_filter(mode="mirror")) into coef (h * w). */
void ts_spline_coefficients(const float *img, float *coef, int h, int w);

/* The refinement of strips a and b (h x w, smoothed by `have` px of
 * Gaussian; smoothed further in place when the first fit is noisy) from
 * *dy, *dx (the integer NCC maximum): the shift of b against a
 * (b[y][x] ~ a[y + dy][x + dx]), updated when a fit converges within 2 px
 * of its start with a positive gain; false (unchanged) otherwise.
 * work: 2 * h * w + 2 * (w + 8) floats. */
bool ts_refine(float *a, float *b, int h, int w, double have, float *work, double *dy, double *dx);

#endif
