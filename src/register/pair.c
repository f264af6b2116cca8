/* Tile pairs: which strips of two neighbouring tiles are correlated, and how
 * the strip shift turns into the tiles' relative origin. */
#include "register/register.h"

#include <math.h>

#include "common/error.h"

static bool smooth_2357(int n) {
    static const int primes[] = {2, 3, 5, 7};
    for (int i = 0; i < 4; i++)
        while (n % primes[i] == 0) n /= primes[i];
    return n == 1;
}

/* Largest 2,3,5,7-smooth length <= n (FFTW is fastest on those). */
static int smooth_below(int n) {
    while (n > 1 && !smooth_2357(n)) n--;
    return n;
}

/* Smallest smooth length >= n if it fits in limit, else the largest below limit. */
static int smooth_near(int n, int limit) {
    for (int m = n; m <= limit; m++)
        if (smooth_2357(m)) return m;
    return smooth_below(limit);
}

ts_status ts_strip_geometry_for(ts_pair_dir dir, int h, int w, int overlap,
                                const ts_register_options *opt, ts_strip_geometry *g,
                                ts_error *err) {
    int depth_limit = dir == TS_PAIR_RIGHT ? w : h;
    if (overlap <= 0 || overlap >= depth_limit)
        return ts_fail(err, TS_ERR_ARG, "overlap %d px is not inside the tile %s (%d px)", overlap,
                       dir == TS_PAIR_RIGHT ? "width" : "height", depth_limit);
    double margin = opt && opt->strip_margin >= 1.0 ? opt->strip_margin : 1.0;
    int want = (int)lround(overlap * margin);
    if (want < overlap) want = overlap;
    if (want > depth_limit) want = depth_limit;
    int depth = smooth_near(want, depth_limit);
    if (depth < 4)
        return ts_fail(err, TS_ERR_ARG, "overlap %d px gives a strip too thin to register", overlap);
    if (dir == TS_PAIR_RIGHT) {
        /* Right columns of a against left columns of b, full height (centred
         * crop to a smooth length). */
        g->sw = depth;
        g->sh = smooth_below(h);
        g->a_y0 = g->b_y0 = (h - g->sh) / 2;
        g->a_x0 = w - depth;
        g->b_x0 = 0;
        g->off_dy = 0;
        g->off_dx = w - depth;
        g->prior_dy = 0;
        g->prior_dx = depth - overlap;
    } else {
        g->sh = depth;
        g->sw = smooth_below(w);
        g->a_x0 = g->b_x0 = (w - g->sw) / 2;
        g->a_y0 = h - depth;
        g->b_y0 = 0;
        g->off_dy = h - depth;
        g->off_dx = 0;
        g->prior_dy = depth - overlap;
        g->prior_dx = 0;
    }
    return TS_OK;
}

/* Places strips of length len along one axis of tiles of size n whose
 * origins are expected e apart (b - a): both over the middle of the
 * expected overlap, each clipped to its tile. Writes the strip starts and
 * returns the expected overlap (<= 0: none). For the nominal offset this is
 * ts_strip_geometry_for's placement: flush with the shared edge along the
 * pair, centred across it. */
static double place_axis(int len, int n, double e, int *a0, int *b0) {
    double lo = e > 0 ? e : 0, hi = e < 0 ? n + e : n;
    double mid = 0.5 * (lo + hi);
    double fa = floor(mid - 0.5 * len), fb = floor(mid - e - 0.5 * len);
    *a0 = fa < 0 ? 0 : fa > n - len ? n - len : (int)fa;
    *b0 = fb < 0 ? 0 : fb > n - len ? n - len : (int)fb;
    return hi - lo;
}

bool ts_strip_geometry_at(const ts_strip_geometry *base, int h, int w, double ey, double ex,
                          ts_strip_geometry *g) {
    *g = *base;
    double ov_y = place_axis(g->sh, h, ey, &g->a_y0, &g->b_y0);
    double ov_x = place_axis(g->sw, w, ex, &g->a_x0, &g->b_x0);
    g->off_dy = g->a_y0 - g->b_y0;
    g->off_dx = g->a_x0 - g->b_x0;
    g->prior_dy = ey - g->off_dy;
    g->prior_dx = ex - g->off_dx;
    /* Too thin an overlap to correlate (as ts_strip_geometry_for's
     * minimum), or none at all. */
    return ov_y >= 4 && ov_x >= 4;
}

ts_status ts_register_pair(ts_registrar *r, const ts_strip_geometry *g, ts_samples a,
                           ts_samples b, int w, ts_register_result *res, ts_error *err) {
    if (ts_registrar_height(r) != g->sh || ts_registrar_width(r) != g->sw)
        return ts_fail(err, TS_ERR_INTERNAL, "registrar is %dx%d but the strips are %dx%d",
                       ts_registrar_height(r), ts_registrar_width(r), g->sh, g->sw);
    const ts_samples sa = ts_samples_at(a, (size_t)g->a_y0 * (size_t)w + (size_t)g->a_x0);
    const ts_samples sb = ts_samples_at(b, (size_t)g->b_y0 * (size_t)w + (size_t)g->b_x0);
    ts_status st = ts_register_strips(r, sa, (size_t)w, sb, (size_t)w, g->prior_dy, g->prior_dx,
                                      res, err);
    if (st) return st;
    res->dy += g->off_dy;
    res->dx += g->off_dx;
    return TS_OK;
}
