/*
 * Global solve: tile origins from pairwise measurements (SPEC 2.3).
 *
 * Per axis the unknowns are the tile origins and each usable pair says
 * p_b - p_a = d_ab. L2 is weighted least squares through the sparse normal
 * equations (the weighted graph Laplacian) factorised by CHOLMOD; L1 (the
 * default) is IRLS on top, the weights 1/max(|r|, eps) taken from the 2-D
 * residual so both axes share one factorisation per iteration.
 *
 * Anchoring (the gauge): each connected group of tiles is solved with one of
 * its tiles fixed, then translated as a whole so that the mean of its
 * positions equals the mean of its targets (initial guess, or grid x pitch).
 * The least-squares answer is unique up to that translation, so this picks
 * the member of the solution family closest to the prior, without pulling on
 * the relative placement. A tile with no usable pair is a group of one: it
 * lands on its target. Finally the well is shifted so that the minimum
 * position over the well is 0 per axis; origins are those positions rounded.
 * See docs/solve.md.
 */
#ifndef TS_SOLVE_H
#define TS_SOLVE_H

#include <stdbool.h>
#include <stdint.h>

#include "tessera/tessera.h"
#include "shifts/shifts.h"

typedef struct ts_solve_problem {
    int ntiles;
    const int *gx, *gy;         /* grid column / row per tile (NULL when initial is given) */
    double pitch_y, pitch_x;    /* nominal tile pitch, px (targets = grid x pitch) */
    const double (*initial)[2]; /* optional target [y, x] per tile; NULL = grid x pitch */
    int npairs;
    const ts_shift_pair *pairs; /* a, b, dy, dx (origin b - origin a), confidence;
                                   outlier/ry/rx are ignored */
} ts_solve_problem;

typedef struct ts_solve_result {
    int ntiles, npairs;
    double (*position)[2];  /* float [y, x] per tile, min over the well = 0 per axis */
    int64_t (*origin)[2];   /* llround(position): integer origins, min 0 */
    bool *outlier;          /* per pair: |residual| > outlier_px after the solve */
    double (*residual)[2];  /* per pair: (p_b - p_a) - d; NaN for unusable pairs */
    int iterations;         /* solves done (1 for L2; IRLS steps for L1) */
    int factorisations;     /* whole-plate numeric factorisations among them
                               (other whole-plate steps were CG preconditioned
                               by the last factorisation) */
    int local_steps;        /* IRLS steps on the few tiles still moving only */
    bool converged;         /* L1: the last step moved every tile < tolerance */
    double max_change;      /* px, the last IRLS step's largest position change */
    int components;         /* connected groups, isolated tiles included */
    int isolated;           /* tiles with no usable pair (placed at their target) */
    int noutliers;
    int loop_downweighted;  /* pairs the loop check down-weighted before the solve */
    int stage_downweighted; /* ... of those, chosen by its stage model where the loops
                               alone were ambiguous */
    double max_residual;    /* the largest 2-D residual norm, px */
} ts_solve_result;

/* Solves one well. On success fills *out (free with ts_solve_result_free).
 * Errors: TS_ERR_ARG (bad tile index in a pair, no targets), TS_ERR_NUMERIC
 * (NaN/inf measurement, naming the pair; a failed factorisation). */
ts_status ts_solve_positions(const ts_solve_problem *p, const ts_solve_options *opt,
                             ts_solve_result *out, ts_error *err);
void ts_solve_result_free(ts_solve_result *r);

/* The weight an edge of confidence c gets before IRLS (1 for `none`). */
double ts_solve_edge_weight(const ts_solve_options *opt, double confidence);

/* Nominal pitch of a well from its pairs: median dx of left/right pairs,
 * median dy of top/bottom pairs (grid from the position names). 0 for an
 * axis without such pairs. */
void ts_solve_pitch_from_pairs(const ts_well_shifts *w, bool names_yx, double *pitch_y, double *pitch_x);

/* Solves well `well` of s in place: position (allocated), origin and
 * has_origin of every tile, outlier/ry/rx of every pair. Grid from the
 * position names (s->names_yx). Pitch per axis: pitch_y/pitch_x if > 0, else
 * from the pairs, else from s->tile_shape; TS_ERR_ARG if still unknown and
 * needed. Targets (initial guess, anchors, where pair-less tiles go): the
 * guessed origins (ts_shifts_guess_origin; TS_ERR_FORMAT naming the first
 * tile it lacks; opt->guess only names the file in messages), or with
 * guess NULL grid x pitch. stats may be NULL; its arrays are not kept (only
 * the counters). */
ts_status ts_solve_well_guess(ts_shifts *s, int well, double pitch_y, double pitch_x, const ts_shifts *guess,
                              const ts_solve_options *opt, ts_solve_result *stats, ts_error *err);

/* Totals of ts_solve_wells / ts_solve_file_ex, for the CLI's --json. */
typedef struct ts_solve_summary {
    int wells, tiles, pairs, outliers, isolated, components, max_components;
    int loop_downweighted; /* pairs the loop check down-weighted, all wells */
    int stage_downweighted; /* ... of those, chosen by its stage model */
    int max_iterations_used;
    bool converged;  /* every well converged (always true for L2) */
    double seconds;  /* solve only, without reading/writing (wall clock) */
} ts_solve_summary;

/* ts_solve_well_guess for every well, `threads` wells at a time (0 = all
 * cores; each well's solve is single-threaded). guess: already read, or
 * NULL to read opt->guess (if set) here. On failure the error of the first
 * failing well (in well order), naming it. summary may be NULL. */
ts_status ts_solve_wells(ts_shifts *s, double pitch_y, double pitch_x, const ts_shifts *guess,
                         const ts_solve_options *opt, int threads, ts_solve_summary *summary, ts_error *err);

/* ts_solve_file with a tile shape for files without tile_shape (0 = none),
 * a thread count for the wells (0 = all cores) and an optional summary. */
ts_status ts_solve_file_ex(const char *pairs_yaml, const char *output, const ts_solve_options *opt,
                           int tile_h, int tile_w, int threads, ts_solve_summary *summary, ts_error *err);

#endif
