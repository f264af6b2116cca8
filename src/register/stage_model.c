/* The stage model: per direction, the offset the trusted pairs agree on and
 * how far the stage scatters around it; per grid row (column) the row's
 * own median; which pairs to register again and where (stage_model.h). */
#include "register/stage_model.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/error.h"
#include "register/estimate_internal.h"

/* A first-pass pair the model is built from: matched with the quality
 * check's trust (docs/qc.md). */
#define MODEL_TRUST_CONF 0.1
/* Fewer agreeing pairs than this: no model for the direction. */
#define MODEL_MIN_INLIERS 4
/* A row (column) of fewer inliers predicts with the direction's median. */
#define MODEL_MIN_LINE 3
/* Matched pairs below this confidence are weak: registered again. Of the
 * first pass's pairs more than 1 px off on the jittered low-contrast plates
 * of test_register_robust.py, most are below it; a correct pair redone
 * keeps its own result unless the window search is better supported. */
#define MODEL_WEAK_CONF 0.5
/* A window wider than this share of the overlap (the stage scatters by a
 * good part of it): the first pass's strips, cut for the nominal overlap,
 * miss the thin overlaps and its confident pairs can be pixels off (5 px
 * at confidence 0.96 on test_register_robust.py's cell16_blank). Every
 * pair of such a direction whose first result no sub-pixel fit vouches
 * for (ts_register_result.unfitted) is searched again: over that test's
 * six recipes at six seeds each (36 plates) the first pass had 12
 * confident (>= MODEL_WEAK_CONF) pairs more than 1 px off, all 12
 * unfitted, and none of its other 1190 confident pairs was unfitted.
 * Searching every pair of the direction again, as before, gave the same
 * shifts files on those 36 plates and on the bench plates, at 1.3 times
 * the estimate's CPU time on 256 px tiles. (Not a rule from the strip
 * depth: the thinnest plausible overlap, overlap - 2.3 spreads, is
 * 0.55-0.64 of the first pass's strip on the 256 px bench plates and up to
 * 0.61 on the robust plates; docs/register.md, "Whether every pair of a
 * direction must be redone".) */
#define MODEL_REDO_ALL 0.25

/* Redone whatever the model says: unmatched or weak. */
bool ts_stage_weak(const ts_register_result *r) { return r->matched && r->confidence < MODEL_WEAK_CONF; }

static bool unmatched_or_weak(const ts_register_result *r) { return !r->matched || ts_stage_weak(r); }

bool ts_stage_may_redo(const ts_register_result *r) { return unmatched_or_weak(r) || r->unfitted; }

/* The window: 4 spreads and 2 px more. The relative jitter of two tiles
 * moved by +-J each reaches 2J, about 2.3 of its spreads, and the median
 * the window is centred on is biased towards the larger overlaps (the
 * first pass loses more of the thin ones: 18 px measured for a true 16 on
 * test_register_robust.py's cell16_blank, where 3 spreads put a true 6 px
 * overlap on the window's edge). */
static int window_radius(double spread) {
    double r = ceil(4.0 * spread) + 2.0;
    return r > 1e6 ? 1000000 : (int)r;
}

static int cmp_line(const void *x, const void *y) {
    const int64_t *a = x, *b = y;
    return (a[0] > b[0]) - (a[0] < b[0]);
}

/* One direction: trusted pairs' median and spread, then the same over the
 * inliers (within the first estimate's window). */
static void fit_dir(const ts_stage_pair *p, int64_t n, int d, int h, int w, double *v, double *scratch,
                    ts_stage_dir *m) {
    memset(m, 0, sizeof *m);
    double med[2] = {0, 0}, sp[2] = {0, 0};
    for (int pass = 0; pass < 2; pass++) {
        int r[2] = {window_radius(sp[0]), window_radius(sp[1])};
        for (int k = 0; k < 2; k++) {
            int64_t nv = 0;
            for (int64_t i = 0; i < n; i++) {
                if (p[i].dir != d || !p[i].res.matched || p[i].res.confidence < MODEL_TRUST_CONF) continue;
                if (pass == 1 && (fabs(p[i].res.dy - p[i].gy - med[0]) > r[0] || fabs(p[i].res.dx - p[i].gx - med[1]) > r[1])) continue;
                v[nv++] = k == 0 ? p[i].res.dy - p[i].gy : p[i].res.dx - p[i].gx;
            }
            if (pass == 0) m->trusted = nv;
            else m->inliers = nv;
            if (nv == 0) return;
            ts_qc_median_spread(v, nv, scratch, &m->offset[k], &m->spread[k]);
        }
        med[0] = m->offset[0], med[1] = m->offset[1];
        /* The first window is that of the trusted pairs' spread, which the
         * wrong ones inflate; the inliers' window is the model's. */
        sp[0] = m->spread[0], sp[1] = m->spread[1];
    }
    m->radius[0] = window_radius(m->spread[0]);
    m->radius[1] = window_radius(m->spread[1]);
    /* The overlap itself: the offsets along the axis of the trusted pairs
     * inside the model's own window (its medians and radii; the inliers
     * were counted inside the first window, the trusted pairs' wider one,
     * and most of them lie in this one, 6 of their MADs wide each way). */
    int64_t nv = 0;
    for (int64_t i = 0; i < n; i++) {
        if (p[i].dir != d || !p[i].res.matched || p[i].res.confidence < MODEL_TRUST_CONF) continue;
        if (fabs(p[i].res.dy - p[i].gy - med[0]) > window_radius(sp[0]) ||
            fabs(p[i].res.dx - p[i].gx - med[1]) > window_radius(sp[1]))
            continue;
        v[nv++] = d == TS_PAIR_RIGHT ? p[i].res.dx : p[i].res.dy;
    }
    double along, unused;
    ts_qc_median_spread(v, nv, scratch, &along, &unused);
    m->overlap = (d == TS_PAIR_RIGHT ? w : h) - along;
    m->valid = m->inliers >= MODEL_MIN_INLIERS && m->overlap >= 4;
}

ts_status ts_stage_model_fit(const ts_stage_pair *p, int64_t n, int h, int w, ts_stage_model *m,
                             ts_stage_plan *plan, ts_error *err) {
    memset(m, 0, sizeof *m);
    size_t nn = (size_t)(n ? n : 1);
    double *v = malloc(nn * sizeof *v), *scratch = malloc(nn * sizeof *scratch);
    int64_t *order = malloc(nn * 2 * sizeof *order);
    if (!v || !scratch || !order) {
        free(v), free(scratch), free(order);
        return ts_fail(err, TS_ERR_NOMEM, "out of memory for the stage model of %lld pairs", (long long)n);
    }
    for (int d = 0; d < 2; d++) fit_dir(p, n, d, h, w, v, scratch, &m->dir[d]);
    for (int64_t i = 0; i < n; i++) {
        const ts_stage_dir *md = &m->dir[p[i].dir];
        plan[i] = (ts_stage_plan){false, false, p[i].gy + md->offset[0], p[i].gx + md->offset[1], 0};
    }
    /* Per (well, direction, line): the line's inliers' medians. Pairs are
     * grouped by a sort key, so this is O(n log n) whatever the layout. */
    for (int64_t i = 0; i < n; i++) {
        order[2 * i] = ((int64_t)p[i].well * 2 + p[i].dir) * ((int64_t)1 << 31) + p[i].line;
        order[2 * i + 1] = i;
    }
    qsort(order, (size_t)n, 2 * sizeof *order, cmp_line);
    for (int64_t s = 0; s < n;) {
        int64_t e = s;
        while (e < n && order[2 * e] == order[2 * s]) e++;
        const ts_stage_dir *md = &m->dir[p[order[2 * s + 1]].dir];
        double med[2];
        bool own = md->valid;
        for (int k = 0; k < 2 && own; k++) {
            int64_t nv = 0;
            for (int64_t j = s; j < e; j++) {
                const ts_stage_pair *q = &p[order[2 * j + 1]];
                if (!q->res.matched || q->res.confidence < MODEL_TRUST_CONF || fabs(q->res.dy - q->gy - md->offset[0]) > md->radius[0] ||
                    fabs(q->res.dx - q->gx - md->offset[1]) > md->radius[1])
                    continue;
                v[nv++] = k == 0 ? q->res.dy - q->gy : q->res.dx - q->gx;
            }
            double spread;
            if (nv < MODEL_MIN_LINE) own = false;
            else ts_qc_median_spread(v, nv, scratch, &med[k], &spread);
        }
        for (int64_t j = s; j < e && own; j++) {
            plan[order[2 * j + 1]].ey = p[order[2 * j + 1]].gy + med[0];
            plan[order[2 * j + 1]].ex = p[order[2 * j + 1]].gx + med[1];
        }
        s = e;
    }
    for (int64_t i = 0; i < n; i++) {
        const ts_stage_dir *md = &m->dir[p[i].dir];
        if (!md->valid) continue;
        ts_stage_plan *pl = &plan[i];
        /* (radii are at least 2 px: window_radius) */
        pl->windows_off = p[i].res.matched ? ts_stage_windows_off(md, pl->ey, pl->ex, p[i].res.dy, p[i].res.dx) : 0;
        pl->outlying = pl->windows_off > 1;
        const bool all = md->radius[p[i].dir == TS_PAIR_RIGHT ? 1 : 0] > MODEL_REDO_ALL * md->overlap;
        /* (besides the outliers, a subset of ts_stage_may_redo's) */
        pl->redo = unmatched_or_weak(&p[i].res) || (all && p[i].res.unfitted) || pl->outlying;
    }
    free(v), free(scratch), free(order);
    return TS_OK;
}

double ts_stage_windows_off(const ts_stage_dir *md, double ey, double ex, double dy, double dx) {
    return fmax(fabs(dy - ey) / md->radius[0], fabs(dx - ex) / md->radius[1]);
}

bool ts_stage_disputes(const ts_stage_dir *md, double ey, double ex, double dy, double dx, double ry, double rx) {
    return md->valid && ts_stage_windows_off(md, ey, ex, dy, dx) <= 1 &&
           ts_stage_windows_off(md, ey, ex, dy + ry, dx + rx) > TS_STAGE_FAR_WINDOWS;
}

int ts_stage_depth(double overlap, int radius, int extent) {
    /* The deepest overlap the window allows, cut from the measured
     * overlap (not the nominal one: a larger true overlap is then inside
     * the strips). */
    double deep = ceil(overlap) + radius;
    return deep >= extent - 1 ? extent - 1 : (int)deep;
}

bool ts_stage_geometry(const ts_stage_model *m, ts_pair_dir dir, int h, int w, const ts_register_options *opt,
                       ts_strip_geometry *g) {
    const ts_stage_dir *md = &m->dir[dir];
    if (!md->valid) return false;
    const int depth = ts_stage_depth(md->overlap, md->radius[dir == TS_PAIR_RIGHT ? 1 : 0], dir == TS_PAIR_RIGHT ? w : h);
    if (depth < 4) return false;
    ts_register_options o = *opt;
    o.strip_margin = 1.0;
    return ts_strip_geometry_for(dir, h, w, depth, &o, g, NULL) == TS_OK;
}
