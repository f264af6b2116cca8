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

/* The picture of an h x w image whose longest side is max_size (never
 * enlarged): the scale s (image px -> picture px) and the picture size.
 * Image pixel p falls into picture pixel pv_bin(p, s, n). */
double pv_picture_size(int64_t h, int64_t w, int max_size, int *ph, int *pw);
static inline int pv_bin(int64_t p, double s, int n) {
    int64_t b = (int64_t)((double)p * s);
    return b < 0 ? 0 : b >= n ? n - 1 : (int)b;
}

/* Confidence in [0, 1] to a red - yellow - green colour. */
void pv_confidence_color(double c, float out[3]);

void pv_line(pv_canvas *cv, double y0, double x0, double y1, double x1, const float color[3]);
void pv_rect(pv_canvas *cv, double y0, double x0, double y1, double x1, const float color[3]);

/* A filled rectangle, and text in a 5x7 pixel font scaled by `scale`
 * (digits, '.', '+', space and upper-case letters; others are blank). */
void pv_fill(pv_canvas *cv, long y0, long x0, long y1, long x1, const float color[3]);
void pv_text(pv_canvas *cv, long y, long x, const char *text, int scale, const float color[3]);
/* Width in px of text drawn by pv_text. */
long pv_text_width(const char *text, int scale);

/* Encodes the canvas as an 8-bit RGB PNG and writes it atomically. */
ts_status pv_write_png(const pv_canvas *cv, const char *path, ts_error *err);

#endif
