/* Whether a tile shows anything beyond its noise (content.h).
 *
 * Why cells and two noise measures: a tile's noise is not known, only
 * measured, and what measures it is also what content changes. The median
 * absolute difference of neighbours is the noise where content is sparse
 * (most neighbours differ by noise alone), and binning lifts anything a few
 * pixels wide over the cells' noise (by the cell's side, for white noise).
 * Content that fills the tile makes neighbouring cells differ as much as it
 * varies, so the cells' own measure no longer sees it; the pixels' measure
 * still does (optics blur the specimen over several pixels, so neighbouring
 * pixels differ by noise mostly), and white noise binned keeps exactly
 * that measure over the cell's side. */
#include "register/content.h"

#include <math.h>
#include <stdbool.h>
#include <stdlib.h>

#include "common/error.h"
#include "common/select.h"

#define CONTENT_SIGMAS 6.0      /* a cell this far out is not noise (Gaussian: 2e-9) */
#define CONTENT_MIN_CELLS 4     /* nor are fewer of them (a hot pixel, binned) */
#define CONTENT_SPREAD 4.0      /* cells spread this far over the pixels' noise binned */
#define MAD_DIFF 0.9539         /* median |a - b| of two N(0, 1) draws: 0.6745 sqrt(2) */
#define MAD_NORMAL 1.4826       /* 1 / median |N(0, 1)| */

static int cell_side(int h, int w) {
    const int m = h < w ? h : w;
    return m >= 128 ? 4 : m >= 32 ? 2 : 1;
}

/* One row of samples as float, non-finite ones as 0. */
static void read_row(ts_samples tile, int w, int y, float *row) {
    ts_samples_to_float(ts_samples_at(tile, (size_t)y * (size_t)w).p, tile.dtype, (size_t)w, row);
    for (int x = 0; x < w; x++)
        if (!isfinite(row[x])) row[x] = 0.0f;
}

/* The median of the |v[i]| (n > 0), reordering v. */
static double median_abs(float *v, size_t n) {
    for (size_t i = 0; i < n; i++) v[i] = fabsf(v[i]);
    ts_select_rank(v, 0, n, n / 2);
    return v[n / 2];
}

/* The monomials y^i x^j, i + j <= degree, at (y, x). */
static void terms(double y, double x, int degree, double *t) {
    int k = 0;
    double py = 1;
    for (int i = 0; i <= degree; i++, py *= y) {
        double p = py;
        for (int j = 0; j <= degree - i; j++, p *= x) t[k++] = p;
    }
}

static size_t cells_over(const float *c, size_t n, double limit) {
    size_t k = 0;
    for (size_t i = 0; i < n; i++) k += fabsf(c[i]) > limit;
    return k;
}

/* The surface of the given degree (0, 2 or 4) fitted to the ch x cw cells
 * by least squares, subtracted from them. Vignetting is a smooth bowl
 * (cos^4 falloff: a quadratic, and a quartic beyond 20%), and a fit, unlike
 * a box filter's background, is as good at the tile's edges as inside.
 * False where the normal equations are singular (fewer cells than terms). */
#define MAX_TERMS 15
static bool fit_illumination(float *cells, int ch, int cw, int degree) {
    int nt = 0;
    for (int i = 0; i <= degree; i++) nt += degree + 1 - i;
    double a[MAX_TERMS][MAX_TERMS] = {{0}}, b[MAX_TERMS] = {0}, t[MAX_TERMS];
    /* coordinates in [-1, 1]: the equations stay well conditioned */
    const double sy = ch > 1 ? 2.0 / (ch - 1) : 0, sx = cw > 1 ? 2.0 / (cw - 1) : 0;
    for (int y = 0; y < ch; y++)
        for (int x = 0; x < cw; x++) {
            const size_t i = (size_t)y * (size_t)cw + (size_t)x;
            terms(y * sy - 1, x * sx - 1, degree, t);
            for (int r = 0; r < nt; r++) {
                b[r] += t[r] * cells[i];
                for (int c = 0; c <= r; c++) a[r][c] += t[r] * t[c];
            }
        }
    /* Cholesky, in place in the lower triangle */
    for (int r = 0; r < nt; r++) {
        for (int c = 0; c <= r; c++) {
            double v = a[r][c];
            for (int k = 0; k < c; k++) v -= a[r][k] * a[c][k];
            if (r == c) {
                if (!(v > 1e-9 * (a[0][0] + 1))) return false;
                a[r][r] = sqrt(v);
            } else {
                a[r][c] = v / a[c][c];
            }
        }
    }
    for (int r = 0; r < nt; r++) { /* L z = b, then L^T coef = z */
        for (int k = 0; k < r; k++) b[r] -= a[r][k] * b[k];
        b[r] /= a[r][r];
    }
    for (int r = nt - 1; r >= 0; r--) {
        for (int k = r + 1; k < nt; k++) b[r] -= a[k][r] * b[k];
        b[r] /= a[r][r];
    }
    for (int y = 0; y < ch; y++)
        for (int x = 0; x < cw; x++) {
            terms(y * sy - 1, x * sx - 1, degree, t);
            double v = 0;
            for (int r = 0; r < nt; r++) v += b[r] * t[r];
            cells[(size_t)y * (size_t)cw + (size_t)x] -= (float)v;
        }
    return true;
}

ts_status ts_tile_content(ts_samples tile, int h, int w, double *share, ts_error *err) {
    *share = 0;
    if (h < 2 || w < 2) return TS_OK;
    const int f = cell_side(h, w), ch = h / f, cw = w / f;
    const size_t ncell = (size_t)ch * (size_t)cw;
    /* cells, two planes of scratch, the differences, one row */
    const size_t ndiff_px = (size_t)((h + f - 1) / f) * (size_t)(w - 1);
    const size_t ndiff = ndiff_px > ncell ? ndiff_px : ncell;
    float *cells = malloc((3 * ncell + ndiff + (size_t)w) * sizeof *cells);
    double *rowsum = malloc((size_t)cw * sizeof *rowsum);
    if (!cells || !rowsum) {
        free(cells), free(rowsum);
        return ts_fail(err, TS_ERR_NOMEM, "out of memory for the content check of a %dx%d tile", h, w);
    }
    float *tmp = cells + ncell, *diff = tmp + 2 * ncell, *row = diff + ndiff;
    /* The cells (the mean of f x f pixels) and, on every f-th row, the
     * differences of neighbouring pixels. */
    for (size_t i = 0; i < ncell; i++) cells[i] = 0;
    size_t nd = 0;
    for (int y = 0; y < h; y++) {
        read_row(tile, w, y, row);
        if (y % f == 0)
            for (int x = 0; x + 1 < w; x++) diff[nd++] = row[x + 1] - row[x];
        if (y / f >= ch) continue;
        float *c = cells + (size_t)(y / f) * (size_t)cw;
        for (int x = 0; x < cw * f; x++) c[x / f] += row[x];
    }
    const float inv = 1.0f / (float)(f * f);
    double mean = 0;
    for (size_t i = 0; i < ncell; i++) mean += cells[i] *= inv;
    mean /= (double)ncell;
    /* A noiseless tile still has its rounding (integer samples: 1/sqrt(12)
     * of a step) and a float's precision: no less noise than that. */
    const bool integer = tile.dtype != TS_FLOAT32 && tile.dtype != TS_FLOAT64;
    const double floor_noise = fmax(integer ? 0.2887 / f : 0, 1e-6 * (fabs(mean) + 1e-3));
    const double pixel_noise = fmax(median_abs(diff, nd) / MAD_DIFF / f, floor_noise); /* binned white noise */
    size_t n = 0;
    for (int y = 0; y < ch; y++)
        for (int x = 0; x + 1 < cw; x++) diff[n++] = cells[(size_t)y * cw + x + 1] - cells[(size_t)y * cw + x];
    const double cell_noise = fmax(n ? median_abs(diff, n) / MAD_DIFF : 0, floor_noise);
    /* Illumination is smooth; content and noise are not. */
    const int side = ch < cw ? ch : cw, degree = side >= 16 ? 4 : side >= 6 ? 2 : 0;
    if (!fit_illumination(cells, ch, cw, degree)) goto done; /* (not with 4 cells or more) */
    /* Many cells (tiles from 512 px) see what a quartic leaves of a steep
     * falloff (a third of the light at the corners): what is left, smooth
     * too, goes with a local background of a sixteenth of the side. */
    if (side / 16 >= 8) ts_subtract_background(cells, ch, cw, side / 16, tmp, rowsum);
    size_t k = cells_over(cells, ncell, CONTENT_SIGMAS * cell_noise);
    if (k >= CONTENT_MIN_CELLS) {
        *share = (double)k / (double)ncell;
    } else {
        for (size_t i = 0; i < ncell; i++) diff[i] = cells[i];
        const double spread = MAD_NORMAL * median_abs(diff, ncell);
        if (spread > CONTENT_SPREAD * pixel_noise) {
            k = cells_over(cells, ncell, CONTENT_SIGMAS * pixel_noise);
            *share = k >= CONTENT_MIN_CELLS ? (double)k / (double)ncell : 0;
        }
    }
done:
    free(cells), free(rowsum);
    return TS_OK;
}
