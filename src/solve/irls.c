/* The iterations of the global solve: one weighted least-squares solve for
 * L2; IRLS for L1, with whole-plate steps (factorisation or CG) and local
 * steps on the few tiles still moving. */
#include "solve/solve_internal.h"
#include "common/error.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* IRLS weights are base / max(|r|, IRLS_EPS). Below half a pixel a residual
 * is taken as registration noise and weighted as in least squares (the cost
 * is Huber's there), above it as L1: gross errors (tens of px) get the L1
 * treatment that makes the solve robust, while the smooth core keeps IRLS
 * converging in tens of iterations instead of crawling through the
 * non-smooth L1 valley, and keeps the system well conditioned. */
#define IRLS_EPS 0.5

/* IRLS weights from the residuals of the current positions, for the edges
 * with mask[tile] set at either end (mask NULL: all). */
static void reweight(irls_ctx *c, const unsigned char *mask) {
    for (int e = 0; e < c->m; e++) {
        if (!c->usable[e] || (mask && !mask[c->ea[e]] && !mask[c->eb[e]])) continue;
        double ry = c->pos[c->eb[e]][0] - c->pos[c->ea[e]][0] - c->d[e][0];
        double rx = c->pos[c->eb[e]][1] - c->pos[c->ea[e]][1] - c->d[e][1];
        double r = sqrt(ry * ry + rx * rx);
        c->w[e] = c->w0[e] / (r > IRLS_EPS ? r : IRLS_EPS);
    }
}

/* Largest move of a tile since prev (over mask, or all), and how many moved
 * by tolerance or more. */
static double max_change(const irls_ctx *c, const unsigned char *mask, int *moving) {
    double change = 0;
    int nm = 0;
    for (int i = 0; i < c->n; i++) {
        if (mask && !mask[i]) continue;
        double ch = fmax(fabs(c->pos[i][0] - c->prev[i][0]), fabs(c->pos[i][1] - c->prev[i][1]));
        nm += ch >= c->opt->tolerance;
        if (ch > change) change = ch;
    }
    if (moving) *moving = nm;
    return change;
}

static bool build_adjacency(irls_ctx *c) {
    if (c->adj_start) return true;
    c->adj_start = calloc((size_t)c->n + 1, sizeof(int));
    c->adj_edge = malloc((size_t)(2 * c->m + 1) * sizeof(int));
    if (!c->adj_start || !c->adj_edge) return false;
    for (int e = 0; e < c->m; e++)
        if (c->usable[e]) c->adj_start[c->ea[e] + 1]++, c->adj_start[c->eb[e] + 1]++;
    for (int i = 0; i < c->n; i++) c->adj_start[i + 1] += c->adj_start[i];
    int *fill = malloc((size_t)(c->n ? c->n : 1) * sizeof(int));
    if (!fill) return false;
    memcpy(fill, c->adj_start, (size_t)c->n * sizeof(int));
    for (int e = 0; e < c->m; e++)
        if (c->usable[e]) c->adj_edge[fill[c->ea[e]]++] = e, c->adj_edge[fill[c->eb[e]]++] = e;
    free(fill);
    return true;
}

/* The cost these IRLS weights minimise: w0 |r| above IRLS_EPS and the
 * quadratic w0 (r^2 / eps + eps) / 2 that meets it below (each IRLS step is a
 * majorise-minimise step of it, so it never increases). */
static double cost(const irls_ctx *c) {
    double f = 0;
    for (int e = 0; e < c->m; e++) {
        if (!c->usable[e]) continue;
        double ry = c->pos[c->eb[e]][0] - c->pos[c->ea[e]][0] - c->d[e][0];
        double rx = c->pos[c->eb[e]][1] - c->pos[c->ea[e]][1] - c->d[e][1];
        double r = sqrt(ry * ry + rx * rx);
        f += c->w0[e] * (r > IRLS_EPS ? r : 0.5 * (r * r / IRLS_EPS + IRLS_EPS));
    }
    return f;
}

/* The second stopping rule: a step that lowered the cost by less than
 * cost_tolerance of it. On tiles whose pairs tie (two of four wrong, one of
 * two), the L1 cost is flat along the tie and IRLS creeps along it for
 * hundreds of steps with the cost unchanged to 1e-6: no step there makes the
 * answer better, so none is worth taking. */
static bool cost_settled(const irls_ctx *c, double before, double after) {
    return c->opt->cost_tolerance > 0 && before - after <= c->opt->cost_tolerance * after;
}

/* Local IRLS: once only a few tiles still move (typically around a pair of
 * nearly tied wrong/right measurements, where IRLS creeps), iterate on those
 * tiles and two rings of neighbours with every other tile held where it is.
 * That is block-coordinate descent on the same IRLS problem, at the cost of
 * a tiny system per step instead of the whole plate. Returns TS_OK with
 * *ran = false when not applicable (a whole group would be free). */
static ts_status local_phase(irls_ctx *c, int *it, bool *ran, ts_error *err) {
    *ran = false;
    int n = c->n;
    if (!build_adjacency(c)) return ts_fail(err, TS_ERR_NOMEM, "solve: out of memory");
    unsigned char *active = calloc((size_t)n, 1);
    int *unknown = malloc((size_t)n * sizeof(int)), *count = calloc((size_t)c->ncomp, sizeof(int));
    unsigned char *usable = malloc((size_t)(c->m ? c->m : 1));
    ts_laplacian *loc = NULL;
    ts_status st = TS_OK;
    if (!active || !unknown || !count || !usable) {
        st = ts_fail(err, TS_ERR_NOMEM, "solve: out of memory");
        goto done;
    }
    for (int i = 0; i < n; i++)
        active[i] = fmax(fabs(c->pos[i][0] - c->prev[i][0]), fabs(c->pos[i][1] - c->prev[i][1])) >= c->opt->tolerance;
    for (int ring = 1; ring <= 2; ring++) {
        for (int i = 0; i < n; i++) {
            if (active[i] != ring) continue;
            for (int k = c->adj_start[i]; k < c->adj_start[i + 1]; k++) {
                int e = c->adj_edge[k], j = c->ea[e] == i ? c->eb[e] : c->ea[e];
                if (!active[j]) active[j] = (unsigned char)(ring + 1);
            }
        }
    }
    int nact = 0;
    for (int i = 0; i < n; i++) {
        unknown[i] = active[i] ? nact++ : -1;
        if (active[i]) count[c->comp[i]]++;
    }
    for (int i = 0; i < n; i++)
        if (active[i] && count[c->comp[i]] == c->size[c->comp[i]]) goto done; /* nothing to hold it */
    for (int e = 0; e < c->m; e++) usable[e] = c->usable[e] && (active[c->ea[e]] || active[c->eb[e]]);
    if ((st = ts_laplacian_create(n, unknown, c->m, c->ea, c->eb, usable, &loc, err))) goto done;
    *ran = true;
    double f = cost(c);
    while (*it < c->opt->max_iterations) {
        memcpy(c->prev, c->pos, (size_t)n * sizeof *c->pos);
        reweight(c, active);
        if ((st = ts_laplacian_solve(loc, c->w, c->d, (const double(*)[2])c->pos, c->pos, false, NULL, err)))
            goto done;
        ++*it;
        c->out->local_steps++;
        c->out->max_change = max_change(c, active, NULL);
        if (c->out->max_change < c->opt->tolerance) break;
        double before = f;
        f = cost(c);
        if (cost_settled(c, before, f)) break;
    }
    /* Held tiles did not move, so this step's translation of the groups is
     * restored by the gauge. */
    ts_solve_apply_gauge(n, c->comp, c->ncomp, c->target, c->pos, c->acc, c->size);
done:
    ts_laplacian_free(loc);
    free(active);
    free(unknown);
    free(count);
    free(usable);
    return st;
}

/* L2: one solve. L1: IRLS until no tile moves by tolerance, or a step
 * lowers the cost by less than cost_tolerance of it (both checked on a
 * whole-plate step), or max_iterations steps. */
ts_status ts_solve_iterate(irls_ctx *c, ts_error *err) {
    bool l1 = c->opt->solver == TS_SOLVER_L1;
    c->out->converged = !l1;
    int it = 0;
    bool after_local = false;
    double f_prev = INFINITY; /* cost of the positions the step started from */
    if (l1 && c->opt->max_iterations > 1) ts_laplacian_prepare_refactor(c->lap);
    for (;;) {
        bool factorised;
        ts_status st = ts_laplacian_solve(c->lap, c->w, c->d, NULL, c->pos, it > 0, &factorised, err);
        if (st) return st;
        ts_solve_apply_gauge(c->n, c->comp, c->ncomp, c->target, c->pos, c->acc, c->size);
        it++;
        c->out->factorisations += factorised;
        if (!l1) break;
        int moving = c->n;
        if (it > 1) {
            c->out->max_change = max_change(c, NULL, &moving);
            if (c->out->max_change < c->opt->tolerance || cost_settled(c, f_prev, cost(c))) {
                c->out->converged = true;
                break;
            }
        }
        if (it >= c->opt->max_iterations) break;
        /* Few tiles still moving: continue locally, then verify with a
         * whole-plate step (never two local phases without one). */
        if (it > 1 && !after_local && moving <= c->n / 20) {
            bool ran;
            if ((st = local_phase(c, &it, &ran, err))) return st;
            after_local = ran;
            if (it >= c->opt->max_iterations) break;
        } else {
            after_local = false;
        }
        memcpy(c->prev, c->pos, (size_t)c->n * sizeof *c->pos);
        reweight(c, NULL);
        f_prev = cost(c);
    }
    c->out->iterations = it;
    return TS_OK;
}
