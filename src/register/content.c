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
/* The noise medians take at most about this many values: the median of
 * 8192 is within 2% of the whole's (standard error), which moves a 6-sigma
 * test by a tenth of a sigma; selecting over all 8 million differences of
 * a 2048 px tile took most of the check (72% at 256 px with 2^16). */
#define NOISE_SAMPLES 8192

static size_t gcd(size_t a, size_t b) {
    while (b) {
        const size_t t = a % b;
        a = b, b = t;
    }
    return a;
}

static int cell_side(int h, int w) {
    const int m = h < w ? h : w;
    return m >= 128 ? 4 : m >= 32 ? 2 : 1;
}

/* One row of samples as float, non-finite ones as 0. */
static void read_row(ts_samples tile, int w, int y, float *row) {
    ts_copy_rows(row, ts_samples_at(tile, (size_t)y * (size_t)w), (size_t)w, 1, w);
}

/* The median of the |v[i]| (n > 0), reordering v. */
static double median_abs(float *v, size_t n) {
    for (size_t i = 0; i < n; i++) v[i] = fabsf(v[i]);
    ts_select_rank(v, 0, n, n / 2);
    return v[n / 2];
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
 * On a grid the monomials y^i x^j separate: the normal equations are sums
 * of powers along each axis, and the right side and the surface take a
 * few sums per cell. False where the equations are singular (fewer cells
 * than terms). rowpow: (degree + 1) * (ch + cw) doubles of scratch. */
#define MAX_DEGREE 4
#define MAX_TERMS 15
/* Along one axis of n cells at coordinates k * scale - 1: the sums of the
 * powers 0..2 degree (sums) and the powers 0..degree of each (pw[i * n + k]). */
static void axis_powers(int n, double scale, int degree, double *sums, double *pw) {
    for (int i = 0; i <= 2 * degree; i++) sums[i] = 0;
    for (int k = 0; k < n; k++) {
        const double v = k * scale - 1;
        double p = 1;
        for (int i = 0; i <= 2 * degree; i++, p *= v) {
            sums[i] += p;
            if (i <= degree) pw[(size_t)i * n + k] = p;
        }
    }
}

static bool fit_illumination(float *cells, int ch, int cw, int degree, double *pow_scratch) {
    const int np = degree + 1;
    double *py = pow_scratch, *px = py + (size_t)np * (size_t)ch; /* py[i * ch + y] = y^i */
    /* coordinates in [-1, 1]: the equations stay well conditioned */
    const double sy = ch > 1 ? 2.0 / (ch - 1) : 0, sx = cw > 1 ? 2.0 / (cw - 1) : 0;
    double my[2 * MAX_DEGREE + 1], mx[2 * MAX_DEGREE + 1]; /* sums of powers */
    axis_powers(ch, sy, degree, my, py);
    axis_powers(cw, sx, degree, mx, px);
    /* the terms (i, j), i + j <= degree, and the right side: for each row,
     * the cells' sums against x^j, then against y^i */
    int ti[MAX_TERMS], tj[MAX_TERMS], nt = 0;
    for (int i = 0; i <= degree; i++)
        for (int j = 0; i + j <= degree; j++) ti[nt] = i, tj[nt] = j, nt++;
    double a[MAX_TERMS][MAX_TERMS], b[MAX_TERMS] = {0};
    for (int y = 0; y < ch; y++) {
        const float *c = cells + (size_t)y * (size_t)cw;
        double rx[MAX_DEGREE + 1] = {0};
        for (int j = 0; j < np; j++) {
            const double *pj = px + (size_t)j * cw;
            double sum = 0;
            for (int x = 0; x < cw; x++) sum += c[x] * pj[x];
            rx[j] = sum;
        }
        for (int r = 0; r < nt; r++) b[r] += py[(size_t)ti[r] * ch + y] * rx[tj[r]];
    }
    for (int r = 0; r < nt; r++)
        for (int c = 0; c <= r; c++) a[r][c] = my[ti[r] + ti[c]] * mx[tj[r] + tj[c]];
    /* Cholesky, in place in the lower triangle */
    const double scale = a[0][0]; /* (the cells' count) */
    for (int r = 0; r < nt; r++) {
        for (int c = 0; c <= r; c++) {
            double v = a[r][c];
            for (int k = 0; k < c; k++) v -= a[r][k] * a[c][k];
            if (r == c) {
                if (!(v > 1e-9 * (scale + 1))) return false;
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
    /* the surface: per column q_i(x) = sum_j coef_ij x^j (over px's
     * powers, which it overwrites), per cell sum_i y^i q_i(x) */
    double q[MAX_DEGREE + 1][MAX_DEGREE + 1] = {{0}}; /* coef by (i, j) */
    for (int r = 0; r < nt; r++) q[ti[r]][tj[r]] = b[r];
    for (int x = 0; x < cw; x++) {
        double pw[MAX_DEGREE + 1];
        for (int j = 0; j < np; j++) pw[j] = px[(size_t)j * cw + x];
        for (int i = 0; i < np; i++) {
            double v = 0;
            for (int j = 0; i + j <= degree; j++) v += q[i][j] * pw[j];
            px[(size_t)i * cw + x] = v;
        }
    }
    for (int y = 0; y < ch; y++) {
        float *c = cells + (size_t)y * (size_t)cw;
        for (int x = 0; x < cw; x++) {
            double v = 0;
            for (int i = 0; i < np; i++) v += py[(size_t)i * ch + y] * px[(size_t)i * cw + x];
            c[x] -= (float)v;
        }
    }
    return true;
}

struct ts_content_check {
    int h, w, f, ch, cw;
    size_t ncell;
    /* The pattern per cell, NULL until learned: of the n tiles' sorted
     * values, the (n - 2) / 2-th and the next (lo, hi). A tile not in the
     * sample takes the median of all n (hi for odd n, lo for even); one of
     * the sample takes the median of the others (hi where its own value
     * is at most lo, else lo): against a median that holds its own value,
     * a third of a tile's cells were exactly 0 with n = 3, its noise
     * measure shrank and blank 2048 px tiles had "content". */
    float *lo, *hi;
    bool median_hi;
};

ts_status ts_content_check_create(int h, int w, ts_content_check **out, ts_error *err) {
    *out = NULL;
    ts_content_check *c = calloc(1, sizeof *c);
    if (!c) return ts_fail(err, TS_ERR_NOMEM, "out of memory for the content check");
    c->h = h, c->w = w, c->f = cell_side(h, w);
    c->ch = h / c->f, c->cw = w / c->f;
    c->ncell = (size_t)c->ch * (size_t)c->cw;
    *out = c;
    return TS_OK;
}

void ts_content_check_free(ts_content_check *c) {
    if (!c) return;
    free(c->lo);
    free(c);
}

size_t ts_content_ncells(const ts_content_check *c) { return c->ncell; }

/* The tile's cells (the mean of f x f pixels, before any pattern) and, on
 * every row_step-th row, the differences of neighbouring pixels along the
 * row and to the next row (*nd of them into diff). row, next: w floats
 * each. */
static void bin_cells(const ts_content_check *c, ts_samples tile, int row_step, float *cells, float *diff,
                      size_t *nd, float *row, float *next) {
    const int f = c->f, w = c->w, cw = c->cw;
    for (size_t i = 0; i < c->ncell; i++) cells[i] = 0;
    size_t n = 0;
    bool have_next = false;
    for (int y = 0; y < c->h; y++) {
        if (have_next) {
            float *t = row;
            row = next, next = t;
        } else {
            read_row(tile, w, y, row);
        }
        have_next = false;
        if (y % row_step == 0) {
            for (int x = 0; x + 1 < w; x++) diff[n++] = row[x + 1] - row[x];
            if (y + 1 < c->h) {
                read_row(tile, w, y + 1, next);
                have_next = true;
                for (int x = 0; x < w; x++) diff[n++] = next[x] - row[x];
            }
        }
        if (y / f >= c->ch) continue;
        float *cy = cells + (size_t)(y / f) * (size_t)cw;
        for (int x = 0; x < cw; x++) {
            float sum = 0;
            for (int k = 0; k < f; k++) sum += row[x * f + k];
            cy[x] += sum;
        }
    }
    const float inv = 1.0f / (float)(f * f);
    for (size_t i = 0; i < c->ncell; i++) cells[i] *= inv;
    *nd = n;
}

ts_status ts_content_cells(const ts_content_check *c, ts_samples tile, float *cells, ts_content_noise *noise,
                           ts_error *err) {
    const int h = c->h, w = c->w, f = c->f;
    *noise = (ts_content_noise){0, 0};
    /* The median takes every k-th row (NOISE_SAMPLES). */
    const int pixel_rows = (h + f - 1) / f,
              row_step = f * (int)((size_t)pixel_rows * (2 * (size_t)w) / NOISE_SAMPLES + 1);
    const size_t ndiff = NOISE_SAMPLES + 2 * (size_t)w;
    float *diff = malloc((ndiff + 2 * (size_t)w) * sizeof *diff), *row = diff + ndiff;
    if (!diff) return ts_fail(err, TS_ERR_NOMEM, "out of memory for the content check of a %dx%d tile", h, w);
    size_t nd;
    bin_cells(c, tile, row_step, cells, diff, &nd, row, row + w);
    double mean = 0;
    for (size_t i = 0; i < c->ncell; i++) mean += cells[i];
    mean /= (double)c->ncell;
    /* A noiseless tile still has its rounding (integer samples: 1/sqrt(12)
     * of a step) and a float's precision: no less noise than that. The
     * differences run along rows and columns (banding in either direction
     * is noise, not content). */
    const bool integer = tile.dtype != TS_FLOAT32 && tile.dtype != TS_FLOAT64;
    noise->floor = fmax(integer ? 0.2887 / f : 0, 1e-6 * (fabs(mean) + 1e-3));
    noise->pixel = fmax(nd ? median_abs(diff, nd) / MAD_DIFF / f : 0, noise->floor); /* binned white noise */
    free(diff);
    return TS_OK;
}

ts_status ts_content_learn(ts_content_check *c, const float *cells, int n, ts_error *err) {
    if (n < 4) return TS_OK;
    float *lo = malloc(2 * c->ncell * sizeof *lo), *v = malloc((size_t)n * sizeof *v);
    if (!lo || !v) {
        free(lo), free(v);
        return ts_fail(err, TS_ERR_NOMEM, "out of memory for the content check's pattern of %d tiles", n);
    }
    const size_t r = (size_t)(n - 2) / 2;
    for (size_t i = 0; i < c->ncell; i++) {
        for (int k = 0; k < n; k++) v[k] = cells[(size_t)k * c->ncell + i];
        ts_select_rank(v, 0, (size_t)n, r);
        ts_select_rank(v, r + 1, (size_t)n, r + 1); /* (the least of those above) */
        lo[i] = v[r], lo[c->ncell + i] = v[r + 1];
    }
    free(v);
    free(c->lo);
    c->lo = lo, c->hi = lo + c->ncell;
    c->median_hi = n % 2 == 1;
    return TS_OK;
}

ts_status ts_content_share(const ts_content_check *c, float *cells, ts_content_noise noise, bool in_sample,
                           double *share, ts_error *err) {
    *share = 0;
    const int ch = c->ch, cw = c->cw;
    const size_t ncell = c->ncell;
    if (c->h < 2 || c->w < 2) return TS_OK;
    /* every k-th cell (NOISE_SAMPLES), k prime to the row's length: the
     * sample does not keep to a few columns */
    size_t cell_step = 2 * ncell / NOISE_SAMPLES + 1; /* (two differences a cell) */
    while (cell_step > 1 && gcd(cell_step, (size_t)cw) != 1) cell_step++;
    /* two planes of scratch, the differences; doubles: the box filter's
     * row sums, the fit's powers */
    const size_t ndouble = TS_BACKGROUND_SCRATCH(cw) > (MAX_DEGREE + 1) * ((size_t)ch + (size_t)cw)
                               ? TS_BACKGROUND_SCRATCH(cw)
                               : (MAX_DEGREE + 1) * ((size_t)ch + (size_t)cw);
    float *tmp = malloc(4 * ncell * sizeof *tmp), *diff = tmp + 2 * ncell;
    double *scratch = malloc(ndouble * sizeof *scratch);
    if (!tmp || !scratch) {
        free(tmp), free(scratch);
        return ts_fail(err, TS_ERR_NOMEM, "out of memory for the content check of a %dx%d tile", c->h, c->w);
    }
    /* What every tile shows is the camera's (dust, hot pixels, a bad
     * column, the illumination's shape), not the specimen's. */
    if (c->lo && in_sample)
        for (size_t i = 0; i < ncell; i++) cells[i] -= cells[i] <= c->lo[i] ? c->hi[i] : c->lo[i];
    else if (c->lo)
        for (size_t i = 0; i < ncell; i++) cells[i] -= c->median_hi ? c->hi[i] : c->lo[i];
    size_t n = 0;
    for (size_t i = 0; i < ncell; i += cell_step) {
        if ((i + 1) % (size_t)cw) diff[n++] = cells[i + 1] - cells[i]; /* (not across rows) */
        if (i + (size_t)cw < ncell) diff[n++] = cells[i + cw] - cells[i];
    }
    const double cell_noise = fmax(n ? median_abs(diff, n) / MAD_DIFF : 0, noise.floor);
    /* Illumination is smooth; content and noise are not. */
    const int side = ch < cw ? ch : cw, degree = side >= 16 ? 4 : side >= 6 ? 2 : 0;
    if (!fit_illumination(cells, ch, cw, degree, scratch)) goto done; /* (not with 4 cells or more) */
    /* Many cells (tiles from 512 px) see what a quartic leaves of a steep
     * falloff (a third of the light at the corners): what is left, smooth
     * too, goes with a local background of a sixteenth of the side. */
    if (side / 16 >= 8) ts_subtract_background(cells, ch, cw, side / 16, tmp, scratch);
    size_t k = cells_over(cells, ncell, CONTENT_SIGMAS * cell_noise);
    if (k >= CONTENT_MIN_CELLS) {
        *share = (double)k / (double)ncell;
    } else {
        n = 0;
        for (size_t i = 0; i < ncell; i += cell_step) diff[n++] = cells[i];
        const double spread = MAD_NORMAL * median_abs(diff, n);
        if (spread > CONTENT_SPREAD * noise.pixel) {
            k = cells_over(cells, ncell, CONTENT_SIGMAS * noise.pixel);
            *share = k >= CONTENT_MIN_CELLS ? (double)k / (double)ncell : 0;
        }
    }
done:
    free(tmp), free(scratch);
    return TS_OK;
}

ts_status ts_tile_content(const ts_content_check *c, ts_samples tile, double *share, ts_error *err) {
    *share = 0;
    if (c->h < 2 || c->w < 2) return TS_OK;
    float *cells = malloc(c->ncell * sizeof *cells);
    if (!cells) return ts_fail(err, TS_ERR_NOMEM, "out of memory for the content check of a %dx%d tile", c->h, c->w);
    ts_content_noise noise;
    ts_status st = ts_content_cells(c, tile, cells, &noise, err);
    if (st == TS_OK) st = ts_content_share(c, cells, noise, false, share, err);
    free(cells);
    return st;
}
