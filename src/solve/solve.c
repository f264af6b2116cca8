/* ts_solve_positions: the set-up of one well (checks, weights, groups and
 * anchors), the gauge (each group anchored at its targets), residuals,
 * outliers and the well frame. The iterations are in irls.c. */
#include "solve/solve.h"
#include "solve/solve_internal.h"
#include "solve/loops.h"
#include "common/error.h"
#include "common/union_find.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

void ts_solve_result_free(ts_solve_result *r) {
    if (!r) return;
    free(r->position);
    free(r->origin);
    free(r->outlier);
    free(r->residual);
    memset(r, 0, sizeof *r);
}


/* Translates every group so that the mean of its positions is the mean of
 * its targets (a group of one lands on its target). */
void ts_solve_apply_gauge(int n, const int *comp, int ncomp, const double (*target)[2], double (*pos)[2],
                        double (*acc)[2], int *size) {
    for (int c = 0; c < ncomp; c++) acc[c][0] = acc[c][1] = 0.0, size[c] = 0;
    for (int i = 0; i < n; i++) {
        acc[comp[i]][0] += target[i][0] - pos[i][0];
        acc[comp[i]][1] += target[i][1] - pos[i][1];
        size[comp[i]]++;
    }
    for (int i = 0; i < n; i++) {
        pos[i][0] += acc[comp[i]][0] / size[comp[i]];
        pos[i][1] += acc[comp[i]][1] / size[comp[i]];
    }
}

static ts_status check_options(const ts_solve_options *opt, ts_error *err) {
    if (opt->solver != TS_SOLVER_L1 && opt->solver != TS_SOLVER_L2)
        return ts_fail(err, TS_ERR_ARG, "solve: unknown solver %d", (int)opt->solver);
    if (!(opt->weight_floor > 0) || !isfinite(opt->weight_floor))
        return ts_fail(err, TS_ERR_ARG, "solve: weight_floor must be > 0 (got %g)", opt->weight_floor);
    if (opt->max_iterations < 1)
        return ts_fail(err, TS_ERR_ARG, "solve: max_iterations must be >= 1 (got %d)", opt->max_iterations);
    if (!(opt->tolerance > 0))
        return ts_fail(err, TS_ERR_ARG, "solve: tolerance must be > 0 (got %g)", opt->tolerance);
    if (!(opt->cost_tolerance >= 0) || !isfinite(opt->cost_tolerance))
        return ts_fail(err, TS_ERR_ARG, "solve: cost_tolerance must be >= 0 (got %g)", opt->cost_tolerance);
    if (!(opt->outlier_px > 0))
        return ts_fail(err, TS_ERR_ARG, "solve: outlier_px must be > 0 (got %g)", opt->outlier_px);
    return TS_OK;
}

ts_status ts_solve_positions(const ts_solve_problem *p, const ts_solve_options *opt, ts_solve_result *out,
                             ts_error *err) {
    memset(out, 0, sizeof *out);
    ts_status st = check_options(opt, err);
    if (st) return st;
    int n = p->ntiles, m = p->npairs;
    if (n < 0 || m < 0 || (m > 0 && !p->pairs)) return ts_fail(err, TS_ERR_ARG, "solve: bad problem size");
    if (!p->initial && n > 0 && (!p->gx || !p->gy))
        return ts_fail(err, TS_ERR_ARG, "solve: neither grid coordinates nor initial positions given");
    for (int e = 0; e < m; e++) {
        const ts_shift_pair *q = &p->pairs[e];
        if (q->a < 0 || q->a >= n || q->b < 0 || q->b >= n)
            return ts_fail(err, TS_ERR_ARG, "solve: pair %d names tile %d -> %d, but there are %d tiles", e, q->a,
                           q->b, n);
        if (!isfinite(q->dy) || !isfinite(q->dx))
            return ts_fail(err, TS_ERR_NUMERIC, "solve: pair %d (tile %d -> %d) has a non-finite shift (%g, %g)", e,
                           q->a, q->b, q->dy, q->dx);
        /* Refused here, not reported by CHOLMOD as "singular" (the shifts
         * reader refuses these already, naming the line). */
        if (fabs(q->dy) > TS_SHIFTS_MAX_PX || fabs(q->dx) > TS_SHIFTS_MAX_PX)
            return ts_fail(err, TS_ERR_NUMERIC, "solve: pair %d (tile %d -> %d) has an absurd shift (%g, %g) px", e,
                           q->a, q->b, q->dy, q->dx);
    }

    size_t nn = (size_t)(n ? n : 1), mm = (size_t)(m ? m : 1);
    double(*target)[2] = malloc(nn * sizeof *target);
    double(*pos)[2] = malloc(nn * sizeof *pos);
    double(*prev)[2] = malloc(nn * sizeof *prev);
    double(*acc)[2] = malloc(nn * sizeof *acc);
    double(*d)[2] = malloc(mm * sizeof *d);
    double *w0 = malloc(mm * sizeof *w0), *w = malloc(mm * sizeof *w);
    int *parent = malloc(nn * sizeof *parent), *comp = malloc(nn * sizeof *comp);
    int *size = malloc(nn * sizeof *size), *unknown = malloc(nn * sizeof *unknown);
    int *ea = malloc(mm * sizeof *ea), *eb = malloc(mm * sizeof *eb);
    unsigned char *usable = malloc(mm);
    ts_laplacian *lap = NULL;
    out->position = malloc(nn * sizeof *out->position);
    out->origin = malloc(nn * sizeof *out->origin);
    out->outlier = calloc(mm, sizeof *out->outlier);
    out->residual = malloc(mm * sizeof *out->residual);
    if (!target || !pos || !prev || !acc || !d || !w0 || !w || !parent || !comp || !size || !unknown || !ea ||
        !eb || !usable || !out->position || !out->origin || !out->outlier || !out->residual) {
        st = ts_fail(err, TS_ERR_NOMEM, "solve: out of memory for %d tiles", n);
        goto done;
    }
    out->ntiles = n;
    out->npairs = m;

    for (int i = 0; i < n; i++) {
        if (p->initial) {
            target[i][0] = p->initial[i][0];
            target[i][1] = p->initial[i][1];
        } else {
            target[i][0] = p->gy[i] * p->pitch_y;
            target[i][1] = p->gx[i] * p->pitch_x;
        }
        parent[i] = i;
    }
    for (int e = 0; e < m; e++) {
        const ts_shift_pair *q = &p->pairs[e];
        ea[e] = q->a;
        eb[e] = q->b;
        d[e][0] = q->dy;
        d[e][1] = q->dx;
        usable[e] = q->a != q->b;
        w0[e] = w[e] = ts_solve_edge_weight(opt, q->confidence);
        if (usable[e]) {
            ts_uf_join(parent, q->a, q->b);
        }
    }
    /* Pairs that break their grid loops weigh little from the start. */
    if (opt->loop_check && p->gx && p->gy) {
        int k = ts_solve_loop_check(n, p->gx, p->gy, m, ea, eb, usable, (const double(*)[2])d, w0,
                                    &out->stage_downweighted);
        if (k < 0) {
            st = ts_fail(err, TS_ERR_NOMEM, "solve: out of memory for the loop check of %d pairs", m);
            goto done;
        }
        out->loop_downweighted = k;
        memcpy(w, w0, mm * sizeof *w);
    }
    /* Groups, numbered in tile order; the first tile of a group of two or
     * more is its anchor (fixed at 0 while solving). */
    int ncomp = 0;
    for (int i = 0; i < n; i++) size[i] = 0;
    for (int i = 0; i < n; i++) size[ts_uf_find(parent, i)]++;
    for (int i = 0; i < n; i++) unknown[i] = -2;
    int nunk = 0;
    for (int i = 0; i < n; i++) {
        int r = ts_uf_find(parent, i);
        if (unknown[r] == -2) { /* r is the smallest index of its group: i == r */
            comp[r] = ncomp++;
            unknown[r] = -1;
            if (size[r] == 1) out->isolated++;
        } else {
            unknown[i] = nunk++;
        }
        comp[i] = comp[r];
    }
    out->components = ncomp;
    if (!p->initial && ncomp > 1 && (!(p->pitch_y > 0) || !(p->pitch_x > 0))) {
        st = ts_fail(err, TS_ERR_ARG,
                     "solve: %d disconnected groups of tiles but no nominal pitch to place them (pitch %g x %g)",
                     ncomp, p->pitch_y, p->pitch_x);
        goto done;
    }

    if ((st = ts_laplacian_create(n, unknown, m, ea, eb, usable, &lap, err))) goto done;
    irls_ctx c = {.n = n, .m = m, .ea = ea, .eb = eb, .usable = usable, .d = (const double(*)[2])d, .w0 = w0,
                  .w = w, .comp = comp, .ncomp = ncomp, .target = (const double(*)[2])target, .pos = pos,
                  .prev = prev, .acc = acc, .size = size, .lap = lap, .opt = opt, .out = out};
    st = ts_solve_iterate(&c, err);
    free(c.adj_start);
    free(c.adj_edge);
    if (st) goto done;

    for (int e = 0; e < m; e++) {
        if (!usable[e]) {
            out->residual[e][0] = out->residual[e][1] = NAN;
            continue;
        }
        double ry = pos[eb[e]][0] - pos[ea[e]][0] - d[e][0];
        double rx = pos[eb[e]][1] - pos[ea[e]][1] - d[e][1];
        out->residual[e][0] = ry;
        out->residual[e][1] = rx;
        double r = sqrt(ry * ry + rx * rx);
        if (r > out->max_residual) out->max_residual = r;
        out->outlier[e] = r > opt->outlier_px;
        out->noutliers += out->outlier[e];
    }
    /* The well frame: min position 0 per axis; origins are rounded positions. */
    double miny = INFINITY, minx = INFINITY;
    for (int i = 0; i < n; i++) {
        if (pos[i][0] < miny) miny = pos[i][0];
        if (pos[i][1] < minx) minx = pos[i][1];
    }
    for (int i = 0; i < n; i++) {
        out->position[i][0] = pos[i][0] - miny;
        out->position[i][1] = pos[i][1] - minx;
        out->origin[i][0] = llround(out->position[i][0]);
        out->origin[i][1] = llround(out->position[i][1]);
    }

done:
    ts_laplacian_free(lap);
    free(target);
    free(pos);
    free(prev);
    free(acc);
    free(d);
    free(w0);
    free(w);
    free(parent);
    free(comp);
    free(size);
    free(unknown);
    free(ea);
    free(eb);
    free(usable);
    if (st) ts_solve_result_free(out);
    return st;
}
