/* The loop check of the global solve (docs/solve.md, "Loop check"): before
 * solving, pairs that break the loop consistency of the tile grid are
 * down-weighted. */
#ifndef TS_SOLVE_LOOPS_H
#define TS_SOLVE_LOOPS_H

/* What the weight of a condemned pair is multiplied by: a millionth, as
 * good as absent next to any right pair (even one of confidence 0, at the
 * 1e-3 floor), yet never 0: no tile loses its constraints, and a tile whose
 * every pair is condemned keeps their ratios. */
#define TS_LOOP_FACTOR 1e-6

/* Around each grid cell whose four pairs are all present (tiles (x, y),
 * (x+1, y), (x, y+1), (x+1, y+1) by gx/gy), and around each face of the
 * pair graph where pairs are missing (the ring around a blank tile, up to
 * 12 pairs), the measured offsets must sum to zero. Pairs found to break
 * their loops get w[e] *= TS_LOOP_FACTOR.
 * usable[e] == 0 pairs and pairs that are not grid neighbours are left
 * alone (and so are loops through them). d[e] = measured (dy, dx) of
 * p_b - p_a. Deterministic (sequential, in grid order). Returns the number
 * of pairs down-weighted, or -1 when out of memory (w untouched);
 * *by_stage (when not NULL): how many of them the stage model chose where
 * the loops alone were ambiguous (docs/solve.md, "Loop check"). */
int ts_solve_loop_check(int ntiles, const int *gx, const int *gy, int npairs, const int *a, const int *b,
                        const unsigned char *usable, const double (*d)[2], double *w, int *by_stage);

#endif
