/* Internals of the global solve shared by solve.c (set-up, gauge, results)
 * and irls.c (the L2 / IRLS iterations). */
#ifndef TS_SOLVE_INTERNAL_H
#define TS_SOLVE_INTERNAL_H

#include <stdbool.h>
#include "solve/solve.h"
#include "solve/laplacian.h"

/* The state of one well's solve, shared by the iteration steps. */
typedef struct irls_ctx {
    int n, m;
    const int *ea, *eb;
    const unsigned char *usable;
    const double (*d)[2];
    const double *w0;
    double *w;
    const int *comp;
    int ncomp;
    const double (*target)[2];
    double (*pos)[2], (*prev)[2], (*acc)[2];
    int *size;
    ts_laplacian *lap;
    const ts_solve_options *opt;
    ts_solve_result *out;
    int *adj_start, *adj_edge; /* tile -> its usable edges, built on demand */
} irls_ctx;

/* Translates every group so that the mean of its positions is the mean of
 * its targets (a group of one lands on its target). acc and size: scratch of
 * ncomp entries. */
void ts_solve_apply_gauge(int n, const int *comp, int ncomp, const double (*target)[2], double (*pos)[2],
                          double (*acc)[2], int *size);

/* L2: one solve. L1: IRLS until no tile moves by tolerance (checked on a
 * whole-plate step) or max_iterations steps. Fills c->out's counters. */
ts_status ts_solve_iterate(irls_ctx *c, ts_error *err);

#endif
