/* The weighted graph Laplacian of the tile graph with one tile per connected
 * group removed (its anchor), factorised by CHOLMOD. The sparsity pattern and
 * the symbolic analysis (fill-reducing ordering; for large systems one for
 * the first factorisation and one for the refactorisations) are computed
 * once; every IRLS iteration only refills the values and refactorises
 * numerically, or runs CG preconditioned by the last factorisation. */
#ifndef TS_SOLVE_LAPLACIAN_H
#define TS_SOLVE_LAPLACIAN_H

#include <stdbool.h>
#include "tessera/tessera.h"

typedef struct ts_laplacian ts_laplacian;

/* unknown[i]: index of tile i among the unknowns, or -1 (anchor or isolated
 * tile, fixed at 0). Edges e with a[e] == b[e] or usable[e] == 0 are ignored. */
ts_status ts_laplacian_create(int ntiles, const int *unknown, int nedges, const int *a, const int *b,
                              const unsigned char *usable, ts_laplacian **out, ts_error *err);

/* Solves L p = B^T W d for both axes with edge weights w; d[e] = measured
 * (dy, dx) of p_b - p_a. Fixed tiles sit at fixed[i] (NULL: at 0); pos[i]
 * for every tile (fixed tiles copied; pos may be fixed itself).
 *
 * reuse = false: numeric factorisation with these weights, direct solve.
 * reuse = true (IRLS after the first step): conjugate gradients on the new
 * system, warm-started at the previous solution and preconditioned by the
 * last factorisation; if that takes more than a few iterations (the weights
 * moved a lot) it refactorises instead. Late in IRLS only a few weights
 * still change, a low-rank change that CG absorbs in a few steps, so the
 * long tail of IRLS costs triangular solves instead of factorisations.
 * *factorised (may be NULL) tells whether a factorisation happened. */
ts_status ts_laplacian_solve(ts_laplacian *lap, const double *w, const double (*d)[2], const double (*fixed)[2],
                             double (*pos)[2], bool reuse, bool *factorised, ts_error *err);

/* Tells the system that it will be refactorised (IRLS): a large one then
 * computes, on a second thread, the nested-dissection analysis that the
 * refactorisations use (the first factorisation uses AMD's, ready at
 * once). Without this call (L2) the first solve computes the nested
 * dissection and uses it. The results do not depend on the thread's
 * timing. */
void ts_laplacian_prepare_refactor(ts_laplacian *lap);

/* Large systems factorise on two threads, rows of disjoint subtrees of the
 * elimination tree at the same time (the same bytes as one
 * cholmod_factorize); no_split = true makes them call cholmod_factorize
 * (for the tests that check this). */
void ts_laplacian_set_no_split(ts_laplacian *lap, bool no_split);
/* How many factorisations took the split path (tests: that the path they
 * compare was taken). */
int ts_laplacian_split_factorisations(const ts_laplacian *lap);

void ts_laplacian_free(ts_laplacian *lap);

#endif
