/* The re-registration pass: the stage model fitted to the first pass's
 * pairs, every pair it plans to redo searched inside its window (on the
 * pool; under MPI each rank a contiguous share of them, as the first pass;
 * tiles through the first pass's cache when it kept them, else a cache of
 * its own), and the result chosen per pair. Each pair's outcome depends
 * only on the model and its two tiles, so the output is the same for any
 * thread or rank count. */
#include "register/stage_model.h"

#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "common/error.h"
#include "common/graph_bridges.h"
#include "mpi/dist.h"

/* A pair the first pass left unmatched (nothing in its strips reached
 * min_ncc) is a match without the null draws only from this NCC, the
 * diagonal bridges' level, not the strips' 0.5. The window is searched
 * down to 4-px overlaps, and over 180 `tessera simulate` plates with
 * 20-40% blank tiles the window maxima of such pairs at NCC 0.5-0.74,
 * accepted as sure, were 51 matches more than 3 px off (true overlaps of
 * bare background between cells, maxima at 5-17 px overlaps) against 22
 * right ones; none of the 31 at 0.75 or more was wrong. At this level 3
 * wrong ones are accepted (through the null draws) and 30 right ones. On
 * the real-image recipes of test_register_robust.py (seeds 101-130) no
 * shifts file changes (docs/register.md, "Refused pairs"). */
#define REMATCH_SURE_NCC 0.8

typedef struct pass_ctx {
    const ts_stage_pass *ps;
    ts_stage_pair *p;
    const ts_stage_model *m;
    const int64_t *jobs;           /* pair index per job (this rank's from lo) */
    const ts_strip_geometry *geo;  /* strips per job */
    int64_t lo, nlocal;            /* this rank's jobs: [lo, lo + nlocal) */
    ts_tile_cache *cache;
    ts_registrar **workers;        /* [worker * 2 + dir] */
    ts_rereg_scratch *scratch;     /* [worker * 2 + dir]: the window search's buffers */
    atomic_llong done;
    pthread_mutex_t mu;            /* progress calls, one at a time (as the first pass's) */
} pass_ctx;

/* What a rank sends the others for each of its jobs. */
typedef struct job_result {
    ts_register_result res;
    int replaced, rematched, refused;
} job_result;

static ts_status redo_one(void *user, int64_t i, int worker, ts_error *err) {
    pass_ctx *x = user;
    const int64_t k = x->jobs[x->lo + i];
    ts_stage_pair *q = &x->p[k];
    const ts_strip_geometry *g = &x->geo[x->lo + i];
    ts_registrar **slot = &x->workers[worker * 2 + q->dir];
    ts_status st;
    ts_register_options o = *x->ps->reg;
    o.background_px = 0;
    if (!*slot && (st = ts_registrar_create(g->sh, g->sw, &o, slot, err)) != TS_OK) return st;
    ts_samples ta, tb;
    ts_rereg_result rr;
    if ((st = ts_tile_cache_get(x->cache, q->ta, &ta, err)) != TS_OK) return st;
    if ((st = ts_tile_cache_get(x->cache, q->tb, &tb, err)) == TS_OK) {
        const ts_stage_dir *md = &x->m->dir[q->dir];
        const ts_rereg_window win = {md->radius[0], md->radius[1], 0, q->res.matched ? 0 : REMATCH_SURE_NCC};
        st = ts_reregister_pair(*slot, g, ta, tb, x->ps->w, &win, q->res.matched, q->res.dy,
                                q->res.dx, &rr, &x->scratch[worker * 2 + q->dir], err);
        ts_tile_cache_release(x->cache, q->tb);
    }
    ts_tile_cache_release(x->cache, q->ta);
    if (st != TS_OK) return st;
    const bool was = q->res.matched;
    q->replaced = ts_reregister_choose(&rr, x->ps->reg->min_ncc, &q->res);
    q->rematched = q->replaced && !was;
    /* A kept first result the window does not bear out (refuse_pairs takes
     * it out with the pairs outside the window) */
    q->refused = was && !q->replaced && rr.ncc_first > -2 && !ts_reregister_supports(&rr, x->ps->reg->min_ncc);
    const int64_t done = atomic_fetch_add(&x->done, 1) + 1;
    if (x->ps->progress) {
        pthread_mutex_lock(&x->mu);
        x->ps->progress(x->ps->progress_user, "reregister", done, x->nlocal);
        pthread_mutex_unlock(&x->mu);
    }
    return TS_OK;
}

/* This rank's jobs [lo, lo + nlocal) on the pool. */
static ts_status run_share(const ts_stage_pass *ps, ts_stage_pair *p, const ts_stage_model *m, const int64_t *jobs,
                           const ts_strip_geometry *geo, int64_t lo, int64_t nlocal, ts_stage_summary *sum,
                           ts_error *err) {
    const int nworkers = ts_pool_size(ps->pool);
    int *uses = calloc((size_t)(ps->ntiles ? ps->ntiles : 1), sizeof *uses);
    ts_registrar **workers = calloc((size_t)nworkers * 2, sizeof *workers);
    ts_rereg_scratch *scratch = calloc((size_t)nworkers * 2, sizeof *scratch);
    ts_tile_cache *own = NULL, *cache = ps->cache;
    ts_status st = TS_OK;
    if (!uses || !workers || !scratch) {
        st = ts_fail(err, TS_ERR_NOMEM, "out of memory for the re-registration of %lld pairs", (long long)nlocal);
        goto done;
    }
    for (int64_t j = lo; j < lo + nlocal; j++) {
        uses[p[jobs[j]].ta]++;
        uses[p[jobs[j]].tb]++;
    }
    const int64_t loads0 = cache ? ts_tile_cache_get_stats(cache).loads : 0;
    if (!(cache = ts_tile_cache_for_pass(cache, ps->ntiles, uses, ps->cache_bytes, ps->load, ps->release, ps->load_user, &own))) {
        st = ts_fail(err, TS_ERR_NOMEM, "out of memory for the re-registration's tile cache");
        goto done;
    }
    pass_ctx x = {ps, p, m, jobs, geo, lo, nlocal, cache, workers, scratch, 0, PTHREAD_MUTEX_INITIALIZER};
    st = ts_pool_run(ps->pool, nlocal, redo_one, &x, err);
    pthread_mutex_destroy(&x.mu);
    sum->tile_reads = ts_tile_cache_get_stats(cache).loads - loads0;
done:
    for (int i = 0; workers && i < 2 * nworkers; i++) ts_registrar_free(workers[i]);
    for (int i = 0; scratch && i < 2 * nworkers; i++) ts_rereg_scratch_free(&scratch[i]);
    free(scratch), free(workers), free(uses);
    ts_tile_cache_destroy(own);
    return st;
}

/* Every rank's results of its share into every rank's pairs (a copy in one
 * process). Reached by every rank whatever st says (mpi/dist.h). */
static ts_status share_results(const ts_stage_pass *ps, ts_stage_pair *p, const int64_t *jobs, int64_t njobs,
                               int64_t lo, int64_t nlocal, ts_status st, ts_error *err) {
    job_result *mine = calloc((size_t)(nlocal ? nlocal : 1), sizeof *mine);
    if (st == TS_OK && !mine) st = ts_fail(err, TS_ERR_NOMEM, "out of memory for %lld re-registered pairs", (long long)nlocal);
    st = ts_dist_agree(ps->dist, st, err);
    if (st != TS_OK) {
        free(mine);
        return st;
    }
    for (int64_t j = 0; j < nlocal; j++) {
        const ts_stage_pair *q = &p[jobs[lo + j]];
        mine[j].res = q->res;
        mine[j].replaced = q->replaced;
        mine[j].rematched = q->rematched;
        mine[j].refused = q->refused;
    }
    job_result *all = NULL;
    st = ts_dist_allgatherv(ps->dist, mine, (size_t)nlocal * sizeof *mine, (void **)&all, NULL, err);
    free(mine);
    /* The shares are contiguous and in rank order: all[j] is job j. */
    for (int64_t j = 0; st == TS_OK && j < njobs; j++) {
        ts_stage_pair *q = &p[jobs[j]];
        q->res = all[j].res;
        q->replaced = all[j].replaced;
        q->rematched = all[j].rematched;
        q->refused = all[j].refused;
    }
    free(all);
    return st;
}

/* The jobs (and their strips) grouped by the rank that redoes each, in
 * rank order and, within a rank, in pair order (share_results gathers them
 * so); this rank's are [*lo, *hi). A pair's rank is the one that registered
 * it in the first pass and kept its tiles: an even split of the jobs gave
 * a rank pairs whose tiles the other had kept, decoded again while its own
 * sat unused (docs/register.md: 89 decodes against 72 on a 2-rank plate). */
static ts_status order_by_rank(const ts_stage_pair *p, int64_t *jobs, ts_strip_geometry *geo, int64_t njobs,
                               int rank, int size, int64_t *lo, int64_t *hi, ts_error *err) {
    *lo = *hi = 0;
    if (size <= 1) {
        *hi = njobs;
        return TS_OK;
    }
    int64_t *start = calloc((size_t)size + 1, sizeof *start);
    int64_t *jobs2 = malloc((size_t)(njobs ? njobs : 1) * sizeof *jobs2);
    ts_strip_geometry *geo2 = malloc((size_t)(njobs ? njobs : 1) * sizeof *geo2);
    ts_status st = TS_OK;
    if (!start || !jobs2 || !geo2) {
        st = ts_fail(err, TS_ERR_NOMEM, "out of memory for the re-registration of %lld pairs", (long long)njobs);
        goto done;
    }
    for (int64_t j = 0; j < njobs; j++) {
        const int r = p[jobs[j]].rank;
        if (r < 0 || r >= size) {
            st = ts_fail(err, TS_ERR_INTERNAL, "pair %lld: rank %d of %d", (long long)jobs[j], r, size);
            goto done;
        }
        start[r + 1]++;
    }
    for (int r = 0; r < size; r++) start[r + 1] += start[r];
    *lo = start[rank], *hi = start[rank + 1];
    for (int64_t j = 0; j < njobs; j++) {
        const int64_t k = start[p[jobs[j]].rank]++;
        jobs2[k] = jobs[j], geo2[k] = geo[j];
    }
    memcpy(jobs, jobs2, (size_t)njobs * sizeof *jobs);
    memcpy(geo, geo2, (size_t)njobs * sizeof *geo);
done:
    free(start), free(jobs2), free(geo2);
    return st;
}

/* The redone pairs that keep a first result the evidence does not hold,
 * refused: unmatched from here on, left out of the solve and the file
 * (sum->refused counts them).
 * - Unsupported ones (refused by redo_one already): inside the window's
 *   strips, the first result is not shown to be a match as a window
 *   maximum would have to be (an NCC of 0.5, or the window's maximum
 *   clearing the null draws and the other maxima). The window's judgement
 *   of its own maxima was not applied to the first pass's, and there a
 *   wrong first result stayed whenever the window found nothing better:
 *   over 540 `tessera simulate` plates with 20-40% blank tiles
 *   (bench/register_sweep.py, seeds 1-60) 107 of the 148 written pairs
 *   more than 3 px off went, and 31 of 21,245 right ones; plates with a
 *   tile with content more than 20 px off 20 -> 6 (ten tiles 34 px off,
 *   verdict ok, hung on two such pairs at confidence 0.35 and 0.27; one
 *   tile 42 px off on a pair at 0.21 whose NCC at the truth is lower than
 *   at its first result). On the real-image recipes of
 *   test_register_robust.py (seeds 101-160) no worst tile changes; three
 *   Hubble files lose a pair each, all three 9-20 px off the truth.
 * Outside the window (plan[i].outlying), not replaced:
 * - Weak ones (ts_stage_weak), always: the stage the trusted pairs
 *   measured does not put their tiles there (4 spreads and 2 px hold all
 *   but 6e-5 of a Gaussian stage's pairs), and their own evidence is weak.
 *   Kept, one placed a tile whose other pairs are blank 96 px off at
 *   confidence 0.22 (a right pair 84 px off in y, window 22), exit 0: over
 *   180 `tessera simulate` plates with 20-40% blank tiles 53 of the 129
 *   written pairs more than 3 px off were such pairs, and 2 of the 6762
 *   right ones, each just past the window (docs/register.md, "Refused
 *   pairs").
 * - Confident ones only where no loop of matched pairs runs through them
 *   (a graph bridge, after the weak ones are out) and more than
 *   TS_STAGE_FAR_WINDOWS windows off: a slipped tile's pairs are all off the model
 *   and agree with each other, which the solve's loop check sees; a lone
 *   pair has nothing to check it against. Over those plates (seeds 1-40) 9
 *   confident pairs outside the window were 48-83 px off, 1.6-4.0 windows
 *   out, and the 6 right ones 1.01-1.31 (refused at 1 window, two of them,
 *   each its corner tile's only pair, put the tile 5-6 px off). */

static ts_status refuse_pairs(ts_stage_pair *p, int64_t n, const ts_stage_plan *plan, int64_t ntiles,
                                 ts_stage_summary *sum, ts_error *err) {
    for (int64_t i = 0; i < n; i++) {
        ts_stage_pair *q = &p[i];
        if (plan[i].outlying && !q->replaced && ts_stage_weak(&q->res)) q->refused = true;
    }
    const size_t nn = (size_t)(n > 0 ? n : 1);
    int64_t(*ends)[2] = malloc(nn * sizeof *ends);
    unsigned char *use = malloc(nn), *bridge = malloc(nn);
    bool ok = ends && use && bridge;
    for (int64_t i = 0; ok && i < n; i++) {
        ends[i][0] = p[i].ta, ends[i][1] = p[i].tb;
        use[i] = p[i].res.matched && !p[i].refused;
    }
    ok = ok && ts_graph_bridges(ntiles, n, (const int64_t(*)[2])ends, use, bridge);
    for (int64_t i = 0; ok && i < n; i++)
        if (plan[i].outlying && !p[i].replaced && use[i] && bridge[i] && plan[i].windows_off > TS_STAGE_FAR_WINDOWS)
            p[i].refused = true;
    free(ends), free(use), free(bridge);
    if (!ok) return ts_fail(err, TS_ERR_NOMEM, "out of memory for the loops of %lld pairs", (long long)n);
    for (int64_t i = 0; i < n; i++) {
        if (!p[i].refused) continue;
        p[i].res.matched = false;
        p[i].res.confidence = 0;
        sum->refused++;
    }
    return TS_OK;
}

ts_status ts_stage_reregister(const ts_stage_pass *ps, ts_stage_pair *p, int64_t n, ts_stage_summary *sum,
                              ts_error *err) {
    memset(sum, 0, sizeof *sum);
    const size_t nn = (size_t)(n ? n : 1);
    ts_stage_plan *plan = malloc(nn * sizeof *plan);
    int64_t *jobs = malloc(nn * sizeof *jobs);
    ts_strip_geometry *geo = malloc(nn * sizeof *geo);
    ts_status st = TS_OK;
    int64_t njobs = 0, lo = 0, hi = 0;
    /* Every rank fits the same model to the same pairs and plans the same
     * jobs; a failure on one rank is carried to the collectives below. */
    if (!p || !plan || !jobs || !geo)
        st = ts_fail(err, TS_ERR_NOMEM, "out of memory for the re-registration of %lld pairs", (long long)n);
    if (st == TS_OK) {
        for (int64_t i = 0; i < n; i++) p[i].replaced = p[i].rematched = p[i].refused = false;
        st = ts_stage_model_fit(p, n, ps->h, ps->w, &sum->model, plan, err);
        for (int64_t i = 0; st == TS_OK && i < n; i++) {
            const bool have = sum->model.dir[p[i].dir].valid;
            p[i].ey = have ? plan[i].ey : NAN, p[i].ex = have ? plan[i].ex : NAN;
        }
    }
    if (st == TS_OK) {
        ts_strip_geometry base[2];
        bool have[2];
        for (int d = 0; d < 2; d++)
            have[d] = ts_stage_geometry(&sum->model, (ts_pair_dir)d, ps->h, ps->w, ps->reg, &base[d]);
        for (int64_t i = 0; i < n; i++) {
            if (!plan[i].redo || !have[p[i].dir]) continue;
            if (ps->blank && (ps->blank[p[i].ta] || ps->blank[p[i].tb])) continue;
            /* The strips over the overlap the model predicts for the pair's
             * row (column); none when it predicts no overlap to search. */
            if (!ts_strip_geometry_at(&base[p[i].dir], ps->h, ps->w, plan[i].ey, plan[i].ex, &geo[njobs])) continue;
            jobs[njobs++] = i;
        }
        sum->redone = njobs;
        st = order_by_rank(p, jobs, geo, njobs, ts_dist_rank(ps->dist), ts_dist_size(ps->dist), &lo, &hi, err);
        if (st == TS_OK && hi > lo) st = run_share(ps, p, &sum->model, jobs, geo, lo, hi - lo, sum, err);
    }
    st = share_results(ps, p, jobs, njobs, lo, hi - lo, st, err);
    for (int64_t j = 0; st == TS_OK && j < njobs; j++) {
        const ts_stage_pair *q = &p[jobs[j]];
        sum->replaced += q->replaced;
        sum->rematched += q->rematched;
    }
    /* (every rank refuses the same pairs; a failure on one reaches all) */
    if (st == TS_OK) st = ts_dist_agree(ps->dist, refuse_pairs(p, n, plan, ps->ntiles, sum, err), err);
    free(geo), free(jobs), free(plan);
    return st;
}
