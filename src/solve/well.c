/* Solving the wells of a shifts model, and re-solving a shifts file
 * (tessera solve) from the pairwise measurements it keeps. */
#include "solve/solve.h"
#include "common/error.h"
#include "common/outpath.h"
#include "common/pool.h"
#include "common/select.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* The pairs' median shift (ts_median_double: selection, not sorting 167k
 * pairs' shifts twice, which was 45 ms of tessera solve's serial start on
 * the 409 x 409 plate); 0 with no pairs. */
static double median(double *v, int n) { return n ? ts_median_double(v, (size_t)n) : 0.0; }

void ts_solve_pitch_from_pairs(const ts_well_shifts *w, bool names_yx, double *pitch_y, double *pitch_x) {
    *pitch_y = *pitch_x = 0.0;
    double *vy = malloc((size_t)(w->npairs ? w->npairs : 1) * sizeof *vy);
    double *vx = malloc((size_t)(w->npairs ? w->npairs : 1) * sizeof *vx);
    if (!vy || !vx) {
        free(vy);
        free(vx);
        return;
    }
    int ny = 0, nx = 0;
    for (int i = 0; i < w->npairs; i++) {
        const ts_shift_pair *p = &w->pairs[i];
        int xa, ya, xb, yb;
        if (p->a < 0 || p->a >= w->ntiles || p->b < 0 || p->b >= w->ntiles) continue;
        if (!ts_position_grid(w->tiles[p->a], names_yx, &xa, &ya) ||
            !ts_position_grid(w->tiles[p->b], names_yx, &xb, &yb))
            continue;
        /* Left/right neighbours measure the x pitch, top/bottom the y pitch;
         * a pair listed right-to-left counts with its sign flipped. */
        if (ya == yb && abs(xb - xa) == 1 && isfinite(p->dx)) vx[nx++] = (xb - xa) * p->dx;
        if (xa == xb && abs(yb - ya) == 1 && isfinite(p->dy)) vy[ny++] = (yb - ya) * p->dy;
    }
    *pitch_y = median(vy, ny);
    *pitch_x = median(vx, nx);
    free(vy);
    free(vx);
}

/* The guessed origin of every tile of well w into target (n x [y, x]). */
static ts_status guess_targets(const ts_shifts *guess, const char *path, const ts_well_shifts *w,
                               double (*target)[2], ts_error *err) {
    for (int i = 0; i < w->ntiles; i++) {
        ts_status st = ts_shifts_guess_origin(guess, path, w->well, w->tiles[i], target[i], err);
        if (st) return st;
    }
    return TS_OK;
}

ts_status ts_solve_well_guess(ts_shifts *s, int wi, double pitch_y, double pitch_x, const ts_shifts *guess,
                              const ts_solve_options *opt, ts_solve_result *stats, ts_error *err) {
    if (wi < 0 || wi >= s->nwells) return ts_fail(err, TS_ERR_ARG, "solve: no well %d", wi);
    ts_well_shifts *w = &s->wells[wi];
    double py = 0, px = 0;
    if (!(pitch_y > 0) || !(pitch_x > 0)) ts_solve_pitch_from_pairs(w, s->names_yx, &py, &px);
    if (pitch_y > 0) py = pitch_y;
    if (pitch_x > 0) px = pitch_x;
    /* No pair along an axis: the tile size is the best guess of the pitch. */
    if (!(py > 0) && s->has_tile_shape) py = s->tile_shape[0];
    if (!(px > 0) && s->has_tile_shape) px = s->tile_shape[1];

    int n = w->ntiles;
    int *gx = malloc((size_t)(n ? n : 1) * sizeof *gx), *gy = malloc((size_t)(n ? n : 1) * sizeof *gy);
    if (!gx || !gy) {
        free(gx);
        free(gy);
        return ts_fail(err, TS_ERR_NOMEM, "solve: out of memory");
    }
    for (int i = 0; i < n; i++) {
        if (!ts_position_grid(w->tiles[i], s->names_yx, &gx[i], &gy[i])) {
            free(gx);
            free(gy);
            return ts_fail(err, TS_ERR_FORMAT, "solve: position '%s' of well %s is not a %s grid name", w->tiles[i],
                           w->well, s->names_yx ? "YYYXXX" : "XXXYYY");
        }
    }
    ts_solve_problem prob = {.ntiles = n, .gx = gx, .gy = gy, .pitch_y = py, .pitch_x = px,
                             .npairs = w->npairs, .pairs = w->pairs};
    /* With a guess, its origins are the targets (the grid is not used). */
    double(*target)[2] = NULL;
    ts_status st = TS_OK;
    if (guess) {
        target = malloc((size_t)(n ? n : 1) * sizeof *target);
        if (!target) st = ts_fail(err, TS_ERR_NOMEM, "solve: out of memory");
        else st = guess_targets(guess, opt->guess ? opt->guess : "(in memory)", w, target, err);
        prob.initial = (const double(*)[2])target;
    }
    const bool guess_failed = st != TS_OK; /* its message names the well and tile */
    ts_solve_result res;
    if (st == TS_OK) st = ts_solve_positions(&prob, opt, &res, err);
    free(gx);
    free(gy);
    free(target);
    if (guess_failed) return st;
    if (st == TS_ERR_ARG && err && !guess && !s->has_tile_shape && (!(py > 0) || !(px > 0))) {
        char msg[sizeof err->message];
        snprintf(msg, sizeof msg, "%s", err->message);
        return ts_fail(err, TS_ERR_ARG, "well %s: %s; no tile_shape to fall back on (give the tile shape, e.g. "
                       "tessera solve --tile HxW)", w->well, msg);
    }
    if (st) return ts_fail_context(err, st, "well %s", w->well);
    if (!ts_shifts_ensure_positions(s, wi)) {
        ts_solve_result_free(&res);
        return ts_fail(err, TS_ERR_NOMEM, "solve: out of memory");
    }
    for (int i = 0; i < n; i++) {
        w->position[i][0] = res.position[i][0];
        w->position[i][1] = res.position[i][1];
        w->origin[i][0] = res.origin[i][0];
        w->origin[i][1] = res.origin[i][1];
        w->has_origin[i] = true;
    }
    for (int e = 0; e < w->npairs; e++) {
        w->pairs[e].outlier = res.outlier[e];
        w->pairs[e].ry = res.residual[e][0];
        w->pairs[e].rx = res.residual[e][1];
    }
    if (stats) { /* the counters only: the arrays are freed here */
        *stats = res;
        stats->position = NULL;
        stats->origin = NULL;
        stats->outlier = NULL;
        stats->residual = NULL;
    }
    ts_solve_result_free(&res);
    return TS_OK;
}

static double now_s(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

typedef struct wells_job {
    ts_shifts *s;
    const ts_shifts *guess;
    double pitch_y, pitch_x;
    const ts_solve_options *opt;
    ts_solve_result *res;
    ts_error *errs;
    ts_status *status;
} wells_job;

static int solve_one_well(void *user, int64_t i, int worker) {
    (void)worker;
    wells_job *j = user;
    j->status[i] = ts_solve_well_guess(j->s, (int)i, j->pitch_y, j->pitch_x, j->guess, j->opt, &j->res[i],
                                       &j->errs[i]);
    if (j->status[i] != TS_OK && !strstr(j->errs[i].message, j->s->wells[i].well))
        ts_fail_context(&j->errs[i], j->status[i], "solving well %s", j->s->wells[i].well);
    return j->status[i] != TS_OK;
}

ts_status ts_solve_wells(ts_shifts *s, double pitch_y, double pitch_x, const ts_shifts *given_guess,
                         const ts_solve_options *opt, int threads, ts_solve_summary *summary, ts_error *err) {
    int nw = s->nwells;
    size_t n = (size_t)(nw ? nw : 1);
    wells_job j = {.s = s, .pitch_y = pitch_y, .pitch_x = pitch_x, .opt = opt,
                   .res = calloc(n, sizeof(ts_solve_result)), .errs = calloc(n, sizeof(ts_error)),
                   .status = calloc(n, sizeof(ts_status))};
    if (threads <= 0 || threads > ts_cpu_count()) threads = ts_cpu_count();
    if (threads > nw) threads = nw > 0 ? nw : 1;
    ts_pool *pool = j.res && j.errs && j.status ? ts_pool_create(threads) : NULL;
    ts_status st = TS_OK;
    ts_shifts *guess = NULL;
    if (!pool) {
        st = ts_fail(err, TS_ERR_NOMEM, "solve: out of memory");
        goto done;
    }
    if (!given_guess && opt->guess && (st = ts_shifts_read(opt->guess, &guess, err)) != TS_OK) {
        ts_fail_context(err, st, "reading the guess");
        goto done;
    }
    j.guess = given_guess ? given_guess : guess;
    double t0 = now_s();
    /* Wells not reached after a failure keep status TS_OK and are ignored. */
    ts_pool_for(pool, nw, solve_one_well, &j);
    double seconds = now_s() - t0;
    for (int i = 0; i < nw; i++)
        if (j.status[i] != TS_OK) {
            if (err) *err = j.errs[i];
            st = j.status[i];
            goto done;
        }
    if (summary) {
        ts_solve_summary sum = {.converged = true, .seconds = seconds};
        for (int i = 0; i < nw; i++) {
            const ts_solve_result *r = &j.res[i];
            sum.wells++;
            sum.tiles += r->ntiles;
            sum.pairs += r->npairs;
            sum.outliers += r->noutliers;
            sum.loop_downweighted += r->loop_downweighted;
            sum.stage_downweighted += r->stage_downweighted;
            sum.isolated += r->isolated;
            sum.components += r->components;
            if (r->components > sum.max_components) sum.max_components = r->components;
            if (r->iterations > sum.max_iterations_used) sum.max_iterations_used = r->iterations;
            sum.converged &= r->converged;
        }
        *summary = sum;
    }
done:
    ts_shifts_free(guess);
    ts_pool_destroy(pool);
    free(j.res);
    free(j.errs);
    free(j.status);
    return st;
}

ts_status ts_solve_file_ex(const char *pairs_yaml, const char *output, const ts_solve_options *opt, int tile_h,
                           int tile_w, int threads, ts_solve_summary *summary, ts_error *err) {
    ts_solve_options defaults;
    if (!opt) {
        ts_solve_options_init(&defaults);
        opt = &defaults;
    }
    if (!pairs_yaml || !output) return ts_fail(err, TS_ERR_ARG, "solve: input and output paths are required");
    const char *inputs[2] = {pairs_yaml, opt->guess};
    ts_status st = ts_check_output_path("output", output, inputs, 2, err);
    if (st) return st;
    ts_shifts *s = NULL;
    st = ts_shifts_read(pairs_yaml, &s, err);
    if (st) return st;
    int npairs = 0;
    for (int i = 0; i < s->nwells; i++) npairs += s->wells[i].npairs;
    if (npairs == 0) {
        ts_shifts_free(s);
        return ts_fail(err, TS_ERR_FORMAT,
                       "%s: no pairs to solve from (files of the old tool keep only the solution; "
                       "re-run estimate to get the pairwise measurements)",
                       pairs_yaml);
    }
    if (tile_h > 0 && tile_w > 0) {
        s->has_tile_shape = true;
        s->tile_shape[0] = tile_h;
        s->tile_shape[1] = tile_w;
    }
    ts_solve_summary sum;
    /* estimate's pitch when the file records it (then disconnected groups
     * land where estimate put them); else the median pair per axis. */
    double py = s->has_nominal_pitch ? s->nominal_pitch[0] : 0, px = s->has_nominal_pitch ? s->nominal_pitch[1] : 0;
    if ((st = ts_solve_wells(s, py, px, NULL, opt, threads, &sum, err))) {
        ts_fail_context(err, st, "%s", pairs_yaml);
        ts_shifts_free(s);
        return st;
    }
    st = ts_shifts_write(output, s, err);
    ts_shifts_free(s);
    if (!st && summary) *summary = sum;
    return st;
}

ts_status ts_solve_file(const char *pairs_yaml, const char *output, const ts_solve_options *opt, ts_error *err) {
    return ts_solve_file_ex(pairs_yaml, output, opt, 0, 0, 0, NULL, err);
}
