/* Re-registration of one pair inside the stage model's window: an
 * exhaustive search of the overlap NCC over every shift the window allows
 * (no correlation peak needed: a thin overlap at the strips' edge, faded
 * by the window function, often has none), the window's NCC statistics
 * that say whether its maximum is a peak or noise, and the choice between
 * this result and the first pass's (stage_model.h). */
#include "register/stage_model.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/error.h"
#include "register/estimate_internal.h"

/* Pixel operations one search may spend (window shifts x overlap area):
 * beyond, the window is sampled every few px and the best sample climbed. */
#define SEARCH_BUDGET 3e8
/* The shortest overlap (px) along either axis a shift may leave. */
#define MIN_SIDE 4

/* Acceptance of a window maximum below min_ncc (docs/register.md, "Stage
 * model", has the measurements): at least ACCEPT_NULL times what strip b
 * mirrored reaches in the same window (pairs with a blank tile reached
 * 0.4-1.7 times it off the window's edge, up to 3.1 on it), at most
 * ACCEPT_SECOND of it for the best other local maximum, never on the
 * window's edge, and at least ACCEPT_FLOOR (blank pairs' maxima:
 * 0.05-0.16). */
#define ACCEPT_FLOOR 0.12
#define ACCEPT_NULL 2.5
#define ACCEPT_SECOND 0.7
/* A matched first result inside the window is replaced only by a window
 * maximum better in NCC, in the same strips, and more than a pixel away. */
#define REPLACE_MARGIN 0.0
/* The confidence a window result is given: its NCC scaled by this (the
 * window, not the images, ruled out the rivals beyond it; the NCC surface
 * of smooth content is too flat inside it for a rival-based measure). */
#define REREG_CONF_SCALE 0.5

/* NCC of b[y][x] against a[y + sy][x + sx] over their overlap (as
 * phasecorr.c's; -2 when the overlap is thinner than MIN_SIDE). */
static double ncc_at(const float *a, const float *b, int h, int w, int sy, int sx) {
    int y0 = sy < 0 ? -sy : 0, y1 = sy > 0 ? h - sy : h;
    int x0 = sx < 0 ? -sx : 0, x1 = sx > 0 ? w - sx : w;
    if (y1 - y0 < MIN_SIDE || x1 - x0 < MIN_SIDE) return -2;
    double sa = 0, sb = 0, saa = 0, sbb = 0, sab = 0;
    for (int y = y0; y < y1; y++) {
        const float *pa = a + (size_t)(y + sy) * (size_t)w + sx;
        const float *pb = b + (size_t)y * (size_t)w;
        float ra = 0, rb = 0, raa = 0, rbb = 0, rab = 0;
        for (int x = x0; x < x1; x++) {
            float va = pa[x], vb = pb[x];
            ra += va;
            rb += vb;
            raa += va * va;
            rbb += vb * vb;
            rab += va * vb;
        }
        sa += ra, sb += rb, saa += raa, sbb += rbb, sab += rab;
    }
    double n = (double)(y1 - y0) * (double)(x1 - x0);
    double va = saa - sa * sa / n, vb = sbb - sb * sb / n, cov = sab - sa * sb / n;
    if (!(va > 1e-12 * (saa + 1e-30)) || !(vb > 1e-12 * (sbb + 1e-30))) return 0;
    return cov / sqrt(va * vb);
}

ts_status ts_reregister_pair(ts_registrar *r, const ts_strip_geometry *g, const float *a, const float *b,
                             int w, int ry, int rx, bool have_first, double first_dy, double first_dx,
                             ts_rereg_result *out, ts_error *err) {
    memset(out, 0, sizeof *out);
    out->second = -1;
    out->ncc_first = -2;
    const int sh = g->sh, sw = g->sw;
    if (ts_registrar_height(r) != sh || ts_registrar_width(r) != sw)
        return ts_fail(err, TS_ERR_INTERNAL, "registrar is %dx%d but the strips are %dx%d", ts_registrar_height(r),
                       ts_registrar_width(r), sh, sw);
    const float *ha, *hb;
    ts_status st = ts_registrar_prepare(r, a + (size_t)g->a_y0 * (size_t)w + (size_t)g->a_x0, (size_t)w,
                                        b + (size_t)g->b_y0 * (size_t)w + (size_t)g->b_x0, (size_t)w, &ha, &hb, err);
    if (st != TS_OK || !ha) return st; /* a constant strip: nothing found */
    const int cy = (int)lround(g->prior_dy), cx = (int)lround(g->prior_dx);
    /* Sampling step: the whole window at 1 px when it is affordable. */
    int step = 1;
    while ((double)(2 * ry / step + 1) * (double)(2 * rx / step + 1) * (double)sh * (double)sw > SEARCH_BUDGET &&
           step < 64)
        step++;
    const int ny = 2 * (ry / step) + 1, nx = 2 * (rx / step) + 1;
    out->null_max = -2;
    double *grid = malloc((size_t)ny * (size_t)nx * sizeof *grid);
    double *vals = malloc((size_t)ny * (size_t)nx * 2 * sizeof *vals);
    if (!grid || !vals) {
        free(grid), free(vals);
        return ts_fail(err, TS_ERR_NOMEM, "out of memory for a %dx%d search window", ny, nx);
    }
    int bi = -1, bj = -1;
    int64_t nv = 0;
    for (int i = 0; i < ny; i++)
        for (int j = 0; j < nx; j++) {
            int sy = cy + (i - ny / 2) * step, sx = cx + (j - nx / 2) * step;
            double v = ncc_at(ha, hb, sh, sw, sy, sx);
            grid[(size_t)i * (size_t)nx + (size_t)j] = v;
            if (v <= -2) continue;
            vals[nv++] = v;
            if (bi < 0 || v > grid[(size_t)bi * (size_t)nx + (size_t)bj]) bi = i, bj = j;
        }
    if (bi < 0) {
        free(grid), free(vals);
        return TS_OK; /* the window leaves no overlap */
    }
    /* The best other local maximum (3x3 on the samples), away from the
     * best's own neighbourhood: a true match is one peak, noise many. */
    for (int i = 0; i < ny; i++)
        for (int j = 0; j < nx; j++) {
            double v = grid[(size_t)i * (size_t)nx + (size_t)j];
            if (v <= -2 || (abs(i - bi) <= 1 && abs(j - bj) <= 1)) continue;
            bool is_max = true;
            for (int di = -1; di <= 1 && is_max; di++)
                for (int dj = -1; dj <= 1; dj++) {
                    int ii = i + di, jj = j + dj;
                    if ((!di && !dj) || ii < 0 || jj < 0 || ii >= ny || jj >= nx) continue;
                    if (grid[(size_t)ii * (size_t)nx + (size_t)jj] > v) { is_max = false; break; }
                }
            if (is_max && v > out->second) out->second = v;
        }
    /* On the edge: the window cuts a slope (or a peak beyond it) short. */
    bool border = bi == 0 || bj == 0 || bi == ny - 1 || bj == nx - 1;
    for (int di = -1; di <= 1 && !border; di++)
        for (int dj = -1; dj <= 1; dj++)
            if (grid[(size_t)(bi + di) * (size_t)nx + (size_t)(bj + dj)] <= -2) border = true;
    out->border = border;
    ts_qc_median_spread(vals, nv, vals + nv, &out->median, &out->spread);
    /* Climb to the 1-px maximum between the samples. */
    int by = cy + (bi - ny / 2) * step, bx = cx + (bj - nx / 2) * step;
    double best = grid[(size_t)bi * (size_t)nx + (size_t)bj];
    for (int it = 0; step > 1 && it < 4 * step; it++) {
        int my = by, mx = bx;
        for (int dy = -1; dy <= 1; dy++)
            for (int dx = -1; dx <= 1; dx++) {
                int sy = by + dy, sx = bx + dx;
                if (abs(sy - cy) > ry || abs(sx - cx) > rx) continue;
                double v = ncc_at(ha, hb, sh, sw, sy, sx);
                if (v > best) best = v, my = sy, mx = sx;
            }
        if (my == by && mx == bx) break;
        by = my, bx = mx;
    }
    /* Below min_ncc the maximum must clear what unrelated content of the
     * same texture reaches in the same window: strip b mirrored along the
     * shared edge (same statistics, no alignment) searched alike. */
    if (best < ts_registrar_min_ncc(r)) {
        float *flip = malloc((size_t)sh * (size_t)sw * sizeof *flip);
        if (!flip) {
            free(grid), free(vals);
            return ts_fail(err, TS_ERR_NOMEM, "out of memory for a %dx%d strip", sh, sw);
        }
        const bool tall = sh >= sw;
        for (int y = 0; y < sh; y++)
            for (int x = 0; x < sw; x++)
                flip[(size_t)y * (size_t)sw + (size_t)x] =
                    tall ? hb[(size_t)(sh - 1 - y) * (size_t)sw + (size_t)x] : hb[(size_t)y * (size_t)sw + (size_t)(sw - 1 - x)];
        for (int i = 0; i < ny; i++)
            for (int j = 0; j < nx; j++) {
                double v = ncc_at(ha, flip, sh, sw, cy + (i - ny / 2) * step, cx + (j - nx / 2) * step);
                if (v > out->null_max) out->null_max = v;
            }
        free(flip);
    }
    free(grid), free(vals);
    if (have_first) {
        int fy = (int)lround(first_dy - g->off_dy), fx = (int)lround(first_dx - g->off_dx);
        out->ncc_first = ncc_at(ha, hb, sh, sw, fy, fx);
    }
    double dy = by, dx = bx;
    ts_registrar_refine(r, &dy, &dx);
    /* The refinement may move up to 2 px; beyond the integer maximum's
     * pixel it followed another structure. */
    if (!(fabs(dy - by) <= 1.0 && fabs(dx - bx) <= 1.0)) dy = by, dx = bx;
    out->searched = true;
    out->ncc = best;
    out->dy = dy + g->off_dy;
    out->dx = dx + g->off_dx;
    return TS_OK;
}

bool ts_reregister_accept(const ts_rereg_result *x, double min_ncc) {
    if (!x->searched || x->border || !isfinite(x->dy) || !isfinite(x->dx)) return false;
    if (x->ncc >= min_ncc) return true;
    return x->ncc >= ACCEPT_FLOOR && x->ncc >= ACCEPT_NULL * x->null_max && x->second <= ACCEPT_SECOND * x->ncc;
}

bool ts_reregister_choose(const ts_stage_plan *plan, const ts_rereg_result *x, double min_ncc,
                          ts_register_result *res) {
    if (!ts_reregister_accept(x, min_ncc)) return false;
    /* A matched first result stays unless the window's maximum is better
     * in the same strips, and elsewhere (the first pass's sub-pixel result
     * is then as good); one outside these strips (an outlier far off) is
     * replaced when the window offers comparable evidence. */
    if (res->matched) {
        if (x->ncc_first > -2 ? !(x->ncc > x->ncc_first + REPLACE_MARGIN) || hypot(x->dy - res->dy, x->dx - res->dx) <= 1.0
                              : !(x->ncc >= 0.8 * res->ncc))
            return false;
    }
    (void)plan;
    memset(res, 0, sizeof *res);
    res->dy = x->dy;
    res->dx = x->dx;
    res->ncc = x->ncc;
    res->ncc_second = x->second;
    res->confidence = REREG_CONF_SCALE * (x->ncc < 1 ? x->ncc : 1);
    res->matched = true;
    return true;
}
