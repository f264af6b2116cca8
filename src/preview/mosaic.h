/* Preview of an input plate's well: tiles laid out at the origins of a
 * shifts file, after the file's orientation, mean-downsampled and averaged
 * where they overlap (no blending: a quick look at the registration). */
#ifndef TS_PREVIEW_MOSAIC_H
#define TS_PREVIEW_MOSAIC_H

#include "ome/ome.h"
#include "preview/canvas.h"
#include "shifts/shifts.h"

/* Fills cv (allocating cv->rgb) and *scale (level-0 px -> picture px). */
ts_status pv_mosaic(const ts_plate *plate, int w, const ts_shifts *sh, int sw, int max_size,
                    int threads, pv_canvas *cv, double *scale, ts_error *err);

#endif
