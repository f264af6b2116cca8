/* The preview picture: an RGB float canvas, channel compositing with
 * percentile contrast stretch, lines and rectangles, and PNG encoding. */
#ifndef TS_PREVIEW_CANVAS_H
#define TS_PREVIEW_CANVAS_H

#include <stddef.h>

#include "tessera/tessera.h"

typedef struct pv_canvas {
    int h, w;
    float *rgb; /* h * w * 3, [0, 1] */
} pv_canvas;

/* Contrast-stretches plane (h*w values; entries with valid[i] == 0 are
 * ignored for the percentiles and stay black) between the lo and hi
 * percentiles, tints it with colour (r, g, b in [0, 1]) and adds it. */
void pv_add_channel(pv_canvas *cv, const float *plane, const unsigned char *valid, double lo_pct,
                    double hi_pct, const float color[3]);

/* Element k of a buffer of dtype dt as a double (0 for a dtype preview
 * does not read). */
double pv_value_at(const void *buf, ts_dtype dt, size_t k);

/* Parses "RRGGBB"; false if malformed. */
int pv_parse_color(const char *hex, float out[3]);

/* Confidence in [0, 1] to a red - yellow - green colour. */
void pv_confidence_color(double c, float out[3]);

void pv_line(pv_canvas *cv, double y0, double x0, double y1, double x1, const float color[3]);
void pv_rect(pv_canvas *cv, double y0, double x0, double y1, double x1, const float color[3]);

/* Encodes the canvas as an 8-bit RGB PNG and writes it atomically. */
ts_status pv_write_png(const pv_canvas *cv, const char *path, ts_error *err);

#endif
