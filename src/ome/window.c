/* Display windows from the data (window.h). */
#include "ome/window.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/error.h"
#include "common/select.h"

#define HIST_BINS 65536

bool ome_window_init(ome_window_acc *a, ts_dtype dtype) {
    memset(a, 0, sizeof *a);
    a->dtype = dtype;
    if (dtype == TS_UINT8 || dtype == TS_UINT16) {
        a->hist = calloc(HIST_BINS, sizeof *a->hist);
        return a->hist != NULL;
    }
    return dtype == TS_FLOAT32;
}

void ome_window_free(ome_window_acc *a) {
    free(a->hist);
    free(a->vals);
    memset(a, 0, sizeof *a);
}

void ome_window_add(ome_window_acc *a, const void *values, size_t n) {
    if (a->dtype == TS_UINT16 && a->hist) {
        const uint16_t *v = values;
        for (size_t i = 0; i < n; i++) a->hist[v[i]]++;
    } else if (a->dtype == TS_UINT8 && a->hist) {
        const uint8_t *v = values;
        for (size_t i = 0; i < n; i++) a->hist[v[i]]++;
    } else if (a->dtype == TS_FLOAT32) {
        const float *v = values;
        for (size_t i = 0; i < n; i++) {
            if (v[i] == 0 || !isfinite(v[i])) continue;
            if (a->n == a->cap) {
                /* Past the sample bound the rest is left out (deterministic:
                 * the caller's reads come in a fixed order). */
                if (a->cap >= (size_t)OME_WINDOW_SAMPLE) return;
                size_t cap = a->cap ? 2 * a->cap : 4096;
                float *grown = realloc(a->vals, cap * sizeof *grown);
                if (!grown) return;
                a->vals = grown, a->cap = cap;
            }
            a->vals[a->n++] = v[i];
        }
    }
}

/* The value of rank r (0-based) among the non-zero histogram entries. */
static double hist_rank(const uint64_t *hist, uint64_t r) {
    uint64_t seen = 0;
    for (int v = 1; v < HIST_BINS; v++) {
        seen += hist[v];
        if (seen > r) return v;
    }
    return HIST_BINS - 1;
}

bool ome_window_result(const ome_window_acc *a, double out[4]) {
    uint64_t n = 0;
    if (a->hist)
        for (int v = 1; v < HIST_BINS; v++) n += a->hist[v];
    else
        n = a->n;
    if (n == 0) return false;
    /* Nearest ranks: the low quantile rounded down, the high one up. */
    uint64_t rlo = (uint64_t)floor(OME_WINDOW_LOW * (double)(n - 1));
    uint64_t rhi = (uint64_t)ceil(OME_WINDOW_HIGH * (double)(n - 1));
    if (rhi > n - 1) rhi = n - 1;
    double lo, hi;
    if (a->hist) {
        lo = hist_rank(a->hist, rlo);
        hi = hist_rank(a->hist, rhi);
        out[0] = 0;
        out[1] = a->dtype == TS_UINT8 ? 255 : 65535;
        if (hi <= lo) hi = lo + 1;
    } else {
        float *s = malloc(a->n * sizeof *s);
        if (!s) return false;
        memcpy(s, a->vals, a->n * sizeof *s);
        float vmin = s[0], vmax = s[0];
        for (size_t i = 1; i < a->n; i++) {
            vmin = s[i] < vmin ? s[i] : vmin;
            vmax = s[i] > vmax ? s[i] : vmax;
        }
        ts_select_rank(s, 0, a->n, (size_t)rlo);
        ts_select_rank(s, (size_t)rlo, a->n, (size_t)rhi); /* rhi >= rlo: in the upper part */
        lo = s[rlo];
        hi = s[rhi];
        out[0] = vmin < 0 ? vmin : 0;
        out[1] = vmax > 0 ? vmax : 0;
        free(s);
        if (hi <= lo) hi = lo + (fabs(lo) > 1 ? fabs(lo) * 1e-6 : 1e-6);
        if (out[1] < hi) out[1] = hi;
    }
    out[2] = lo;
    out[3] = hi;
    return true;
}

void ome_window_of_plane(ts_image_meta *meta, int c, ts_dtype dtype, const void *plane, size_t n) {
    ome_window_acc a = {0};
    double w[4];
    if (c >= 0 && c < TS_MAX_CHANNELS && ome_window_init(&a, dtype)) {
        ome_window_add(&a, plane, n);
        if (ome_window_result(&a, w)) {
            meta->has_window[c] = true;
            for (int k = 0; k < 4; k++) meta->window[c][k] = w[k];
        }
    }
    ome_window_free(&a);
}

static ts_status read_box(const tz_array *arr, int64_t t, int64_t c, int64_t z, int64_t y, int64_t x, int64_t h,
                          int64_t w, void *buf, ome_window_acc *a, ts_error *err) {
    int64_t start[5] = {t, c, z, y, x}, count[5] = {1, 1, 1, h, w};
    ts_status st = tz_array_read(arr, start, count, buf, err);
    if (st == TS_OK) ome_window_add(a, buf, (size_t)(h * w));
    return st;
}

/* One channel's sample, in a fixed order. */
static ts_status sample_channel(const tz_array *arr, int64_t t0, int64_t nt, int64_t c, void *buf,
                                ome_window_acc *a, ts_error *err) {
    const tz_array_meta *m = tz_array_get_meta(arr);
    const int64_t Z = m->shape[2], H = m->shape[3], W = m->shape[4], area = H * W, planes = nt * Z;
    if (area <= OME_WINDOW_SAMPLE) {
        int64_t k = OME_WINDOW_SAMPLE / area;
        if (k > planes) k = planes;
        for (int64_t i = 0; i < k; i++) {
            int64_t p = i * planes / k;
            ts_status st = read_box(arr, t0 + p / Z, c, p % Z, 0, 0, H, W, buf, a, err);
            if (st) return st;
        }
        return TS_OK;
    }
    /* A plane larger than the sample: chunk-aligned boxes (each decodes
     * one chunk) on an even grid over the middle plane. */
    int64_t ch = m->sharded ? m->sharding.inner_chunk[3] : m->chunk[3];
    int64_t cw = m->sharded ? m->sharding.inner_chunk[4] : m->chunk[4];
    int64_t bh = ch < 2048 ? ch : 2048, bw = cw < 2048 ? cw : 2048;
    int64_t gy = (H + ch - 1) / ch, gx = (W + cw - 1) / cw;
    int64_t need = OME_WINDOW_SAMPLE / (bh * bw);
    if (need < 1) need = 1;
    int64_t s = (int64_t)ceil(sqrt((double)(gy * gx) / (double)need));
    if (s < 1) s = 1;
    for (int64_t i = 0; i < gy; i += s)
        for (int64_t j = 0; j < gx; j += s) {
            int64_t y = i * ch, x = j * cw;
            int64_t h = H - y < bh ? H - y : bh, w = W - x < bw ? W - x : bw;
            ts_status st = read_box(arr, t0 + (nt - 1) / 2, c, Z / 2, y, x, h, w, buf, a, err);
            if (st) return st;
        }
    return TS_OK;
}

ts_status ome_window_from_array(const tz_array *arr, int64_t t0, int64_t nt, int nc, double (*window)[4],
                                bool *has, ts_error *err) {
    const tz_array_meta *m = tz_array_get_meta(arr);
    for (int c = 0; c < nc; c++) has[c] = false;
    if (m->ndim != 5 || nt < 1 || t0 < 0 || t0 + nt > m->shape[0] || m->shape[3] < 1 || m->shape[4] < 1)
        return TS_OK;
    if (m->dtype != TS_UINT8 && m->dtype != TS_UINT16 && m->dtype != TS_FLOAT32) return TS_OK;
    ome_window_acc a;
    size_t es = ts_dtype_size(m->dtype);
    void *buf = malloc((size_t)OME_WINDOW_SAMPLE * es);
    if (!buf) return ts_fail(err, TS_ERR_NOMEM, "%s: display window sample", tz_array_path(arr));
    ts_status st = TS_OK;
    for (int c = 0; st == TS_OK && c < nc && c < m->shape[1]; c++) {
        if (!ome_window_init(&a, m->dtype)) {
            st = ts_fail(err, TS_ERR_NOMEM, "%s: display window histogram", tz_array_path(arr));
            break;
        }
        st = sample_channel(arr, t0, nt, c, buf, &a, err);
        if (st == TS_OK) has[c] = ome_window_result(&a, window[c]);
        ome_window_free(&a);
    }
    free(buf);
    return st;
}
