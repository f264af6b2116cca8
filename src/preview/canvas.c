/* Drawing and PNG output of the preview (see canvas.h). */
#include "preview/canvas.h"

#include <math.h>
#include <png.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/error.h"
#include "common/fs.h"
#include "common/select.h"

void pv_add_channel(pv_canvas *cv, const float *plane, const unsigned char *valid, double lo_pct,
                    double hi_pct, const float color[3]) {
    size_t n = (size_t)cv->h * (size_t)cv->w, m = 0;
    float *v = malloc((n ? n : 1) * sizeof *v);
    if (!v) return;
    for (size_t i = 0; i < n; i++)
        if (!valid || valid[i]) v[m++] = plane[i];
    if (m == 0) {
        free(v);
        return;
    }
    /* Two ranks, selected (a sort of the whole plane was a fifth of a
     * preview); the second within the part on its side of the first. */
    const size_t rlo = (size_t)(lo_pct / 100.0 * (double)(m - 1)), rhi = (size_t)(hi_pct / 100.0 * (double)(m - 1));
    ts_select_rank(v, 0, m, rlo);
    if (rhi >= rlo) ts_select_rank(v, rlo, m, rhi);
    else ts_select_rank(v, 0, rlo + 1, rhi);
    float lo = v[rlo];
    float hi = v[rhi];
    free(v);
    float span = hi > lo ? hi - lo : 1.0f;
    for (size_t i = 0; i < n; i++) {
        if (valid && !valid[i]) continue;
        float x = (plane[i] - lo) / span;
        x = x < 0 ? 0 : x > 1 ? 1 : x;
        for (int k = 0; k < 3; k++) {
            float *p = &cv->rgb[i * 3 + (size_t)k];
            *p += x * color[k];
            if (*p > 1) *p = 1;
        }
    }
}

double pv_value_at(const void *buf, ts_dtype dt, size_t k) {
    switch (dt) {
    case TS_UINT8: return ((const uint8_t *)buf)[k];
    case TS_UINT16: return ((const uint16_t *)buf)[k];
    case TS_INT16: return ((const int16_t *)buf)[k];
    case TS_UINT32: return ((const uint32_t *)buf)[k];
    case TS_INT32: return ((const int32_t *)buf)[k];
    case TS_FLOAT32: return ((const float *)buf)[k];
    case TS_FLOAT64: return ((const double *)buf)[k];
    default: return 0;
    }
}

int pv_parse_color(const char *hex, float out[3]) {
    if (!hex || strlen(hex) != 6) return 0;
    for (int k = 0; k < 3; k++) {
        char b[3] = {hex[2 * k], hex[2 * k + 1], 0};
        char *end;
        long v = strtol(b, &end, 16);
        if (*end) return 0;
        out[k] = (float)v / 255.0f;
    }
    return 1;
}

double pv_picture_size(int64_t h, int64_t w, int max_size, int *ph, int *pw) {
    int64_t longest = h > w ? h : w;
    double s = longest > max_size ? (double)max_size / (double)longest : 1.0;
    int64_t a = (int64_t)llround((double)h * s), b = (int64_t)llround((double)w * s);
    *ph = (int)(a < 1 ? 1 : a > max_size ? max_size : a);
    *pw = (int)(b < 1 ? 1 : b > max_size ? max_size : b);
    return s;
}

void pv_confidence_color(double c, float out[3]) {
    if (!(c >= 0)) c = 0;
    if (c > 1) c = 1;
    /* 0 red, 0.5 yellow, 1 green */
    out[0] = (float)(c < 0.5 ? 1.0 : 2.0 * (1.0 - c));
    out[1] = (float)(c < 0.5 ? 2.0 * c : 1.0);
    out[2] = 0;
}

static void plot(pv_canvas *cv, long y, long x, const float color[3]) {
    if (y < 0 || x < 0 || y >= cv->h || x >= cv->w) return;
    float *p = &cv->rgb[((size_t)y * (size_t)cv->w + (size_t)x) * 3];
    p[0] = color[0], p[1] = color[1], p[2] = color[2];
}

void pv_line(pv_canvas *cv, double y0, double x0, double y1, double x1, const float color[3]) {
    double dy = y1 - y0, dx = x1 - x0;
    long steps = (long)ceil(fmax(fabs(dy), fabs(dx)));
    if (steps < 1) steps = 1;
    if (steps > 1L << 20) return; /* absurd coordinates: draw nothing */
    for (long i = 0; i <= steps; i++) {
        double t = (double)i / (double)steps;
        plot(cv, lround(y0 + t * dy), lround(x0 + t * dx), color);
    }
}

void pv_rect(pv_canvas *cv, double y0, double x0, double y1, double x1, const float color[3]) {
    pv_line(cv, y0, x0, y0, x1, color);
    pv_line(cv, y1, x0, y1, x1, color);
    pv_line(cv, y0, x0, y1, x0, color);
    pv_line(cv, y0, x1, y1, x1, color);
}

void pv_fill(pv_canvas *cv, long y0, long x0, long y1, long x1, const float color[3]) {
    for (long y = y0; y <= y1; y++)
        for (long x = x0; x <= x1; x++) plot(cv, y, x, color);
}

/* 5x7 glyphs, one byte a row, bit 4 the leftmost column. */
static const struct {
    char c;
    unsigned char rows[7];
} GLYPHS[] = {
    {'0', {0x0E, 0x11, 0x13, 0x15, 0x19, 0x11, 0x0E}}, {'1', {0x04, 0x0C, 0x04, 0x04, 0x04, 0x04, 0x0E}},
    {'2', {0x0E, 0x11, 0x01, 0x02, 0x04, 0x08, 0x1F}}, {'3', {0x1F, 0x02, 0x04, 0x02, 0x01, 0x11, 0x0E}},
    {'4', {0x02, 0x06, 0x0A, 0x12, 0x1F, 0x02, 0x02}}, {'5', {0x1F, 0x10, 0x1E, 0x01, 0x01, 0x11, 0x0E}},
    {'6', {0x06, 0x08, 0x10, 0x1E, 0x11, 0x11, 0x0E}}, {'7', {0x1F, 0x01, 0x02, 0x04, 0x08, 0x08, 0x08}},
    {'8', {0x0E, 0x11, 0x11, 0x0E, 0x11, 0x11, 0x0E}}, {'9', {0x0E, 0x11, 0x11, 0x0F, 0x01, 0x02, 0x0C}},
    {'.', {0, 0, 0, 0, 0, 0x0C, 0x0C}},                {'+', {0, 0x04, 0x04, 0x1F, 0x04, 0x04, 0}},
    {'A', {0x0E, 0x11, 0x11, 0x1F, 0x11, 0x11, 0x11}}, {'C', {0x0E, 0x11, 0x10, 0x10, 0x10, 0x11, 0x0E}},
    {'D', {0x1E, 0x11, 0x11, 0x11, 0x11, 0x11, 0x1E}}, {'E', {0x1F, 0x10, 0x10, 0x1E, 0x10, 0x10, 0x1F}},
    {'F', {0x1F, 0x10, 0x10, 0x1E, 0x10, 0x10, 0x10}}, {'G', {0x0E, 0x11, 0x10, 0x17, 0x11, 0x11, 0x0F}},
    {'H', {0x11, 0x11, 0x11, 0x1F, 0x11, 0x11, 0x11}}, {'I', {0x0E, 0x04, 0x04, 0x04, 0x04, 0x04, 0x0E}},
    {'L', {0x10, 0x10, 0x10, 0x10, 0x10, 0x10, 0x1F}}, {'M', {0x11, 0x1B, 0x15, 0x15, 0x11, 0x11, 0x11}},
    {'N', {0x11, 0x11, 0x19, 0x15, 0x13, 0x11, 0x11}}, {'O', {0x0E, 0x11, 0x11, 0x11, 0x11, 0x11, 0x0E}},
    {'P', {0x1E, 0x11, 0x11, 0x1E, 0x10, 0x10, 0x10}}, {'R', {0x1E, 0x11, 0x11, 0x1E, 0x14, 0x12, 0x11}},
    {'S', {0x0F, 0x10, 0x10, 0x0E, 0x01, 0x01, 0x1E}}, {'T', {0x1F, 0x04, 0x04, 0x04, 0x04, 0x04, 0x04}},
    {'U', {0x11, 0x11, 0x11, 0x11, 0x11, 0x11, 0x0E}}, {'W', {0x11, 0x11, 0x11, 0x15, 0x15, 0x1B, 0x11}},
    {'X', {0x11, 0x11, 0x0A, 0x04, 0x0A, 0x11, 0x11}}, {'Y', {0x11, 0x11, 0x0A, 0x04, 0x04, 0x04, 0x04}},
};

long pv_text_width(const char *text, int scale) { return (long)strlen(text) * 6 * scale; }

void pv_text(pv_canvas *cv, long y, long x, const char *text, int scale, const float color[3]) {
    for (const char *p = text; *p; p++, x += 6 * scale) {
        for (size_t g = 0; g < sizeof GLYPHS / sizeof GLYPHS[0]; g++) {
            if (GLYPHS[g].c != *p) continue;
            for (int r = 0; r < 7; r++)
                for (int c = 0; c < 5; c++)
                    if (GLYPHS[g].rows[r] & (0x10 >> c))
                        pv_fill(cv, y + r * scale, x + c * scale, y + (r + 1) * scale - 1, x + (c + 1) * scale - 1,
                                color);
            break;
        }
    }
}

typedef struct membuf {
    unsigned char *data;
    size_t size, cap;
    int failed;
} membuf;

static void png_write_mem(png_structp png, png_bytep data, png_size_t n) {
    membuf *m = png_get_io_ptr(png);
    if (m->failed) return;
    if (m->size + n > m->cap) {
        size_t cap = m->cap ? m->cap * 2 : 65536;
        while (cap < m->size + n) cap *= 2;
        unsigned char *p = realloc(m->data, cap);
        if (!p) {
            m->failed = 1;
            return;
        }
        m->data = p, m->cap = cap;
    }
    memcpy(m->data + m->size, data, n);
    m->size += n;
}

static void png_flush_mem(png_structp png) { (void)png; }

ts_status pv_write_png(const pv_canvas *cv, const char *path, ts_error *err) {
    membuf m = {0};
    unsigned char *row = malloc((size_t)cv->w * 3);
    png_structp png = png_create_write_struct(PNG_LIBPNG_VER_STRING, NULL, NULL, NULL);
    png_infop info = png ? png_create_info_struct(png) : NULL;
    if (!row || !png || !info) {
        free(row);
        png_destroy_write_struct(&png, info ? &info : NULL);
        return ts_fail(err, TS_ERR_NOMEM, "%s: out of memory for the PNG", path);
    }
    if (setjmp(png_jmpbuf(png))) {
        png_destroy_write_struct(&png, &info);
        free(row);
        free(m.data);
        return ts_fail(err, TS_ERR_CODEC, "%s: libpng failed to encode the picture", path);
    }
    png_set_write_fn(png, &m, png_write_mem, png_flush_mem);
    png_set_IHDR(png, info, (png_uint_32)cv->w, (png_uint_32)cv->h, 8, PNG_COLOR_TYPE_RGB,
                 PNG_INTERLACE_NONE, PNG_COMPRESSION_TYPE_DEFAULT, PNG_FILTER_TYPE_DEFAULT);
    png_write_info(png, info);
    for (int y = 0; y < cv->h; y++) {
        const float *src = &cv->rgb[(size_t)y * (size_t)cv->w * 3];
        for (int i = 0; i < cv->w * 3; i++) row[i] = (unsigned char)lroundf(src[i] * 255.0f);
        png_write_row(png, row);
    }
    png_write_end(png, NULL);
    png_destroy_write_struct(&png, &info);
    free(row);
    ts_status st;
    if (m.failed) st = ts_fail(err, TS_ERR_NOMEM, "%s: out of memory for the PNG", path);
    else st = ts_write_file_atomic(path, m.data, m.size, err);
    free(m.data);
    return st;
}
