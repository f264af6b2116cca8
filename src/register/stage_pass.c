/* The re-registration pass: the stage model fitted to the first pass's
 * pairs, every pair it plans to redo searched inside its window (on the
 * pool, tiles through a cache of their own: the first pass's has dropped
 * them after their last use), and the result chosen per pair. Each pair's
 * outcome depends only on the model and its two tiles, so the output is
 * the same for any thread count. */
#include "register/stage_model.h"

#include <stdlib.h>
#include <string.h>

#include "common/error.h"

typedef struct pass_ctx {
    const ts_stage_pass *ps;
    ts_stage_pair *p;
    const ts_stage_model *m;
    const int64_t *jobs;           /* pair index per job */
    const ts_strip_geometry *geo;  /* strips per job */
    ts_tile_cache *cache;
    ts_registrar **workers;        /* [worker * 2 + dir] */
    ts_rereg_scratch *scratch;     /* [worker * 2 + dir]: the window search's buffers */
} pass_ctx;

static ts_status redo_one(void *user, int64_t i, int worker, ts_error *err) {
    pass_ctx *x = user;
    const int64_t k = x->jobs[i];
    ts_stage_pair *q = &x->p[k];
    const ts_strip_geometry *g = &x->geo[i];
    ts_registrar **slot = &x->workers[worker * 2 + q->dir];
    ts_status st;
    ts_register_options o = *x->ps->reg;
    o.background_px = 0;
    if (!*slot && (st = ts_registrar_create(g->sh, g->sw, &o, slot, err)) != TS_OK) return st;
    const float *ta = NULL, *tb = NULL;
    ts_rereg_result rr;
    if ((st = ts_tile_cache_get(x->cache, q->ta, &ta, err)) != TS_OK) return st;
    if ((st = ts_tile_cache_get(x->cache, q->tb, &tb, err)) == TS_OK) {
        const ts_stage_dir *md = &x->m->dir[q->dir];
        st = ts_reregister_pair(*slot, g, ta, tb, x->ps->w, md->radius[0], md->radius[1], q->res.matched, q->res.dy,
                                q->res.dx, &rr, &x->scratch[worker * 2 + q->dir], err);
        ts_tile_cache_release(x->cache, q->tb);
    }
    ts_tile_cache_release(x->cache, q->ta);
    if (st != TS_OK) return st;
    const bool was = q->res.matched;
    q->replaced = ts_reregister_choose(&rr, x->ps->reg->min_ncc, &q->res);
    q->rematched = q->replaced && !was;
    return TS_OK;
}

ts_status ts_stage_reregister(const ts_stage_pass *ps, ts_stage_pair *p, int64_t n, ts_stage_summary *sum,
                              ts_error *err) {
    memset(sum, 0, sizeof *sum);
    const size_t nn = (size_t)(n ? n : 1);
    ts_stage_plan *plan = malloc(nn * sizeof *plan);
    int64_t *jobs = malloc(nn * sizeof *jobs);
    ts_strip_geometry *geo = malloc(nn * sizeof *geo);
    int *uses = calloc((size_t)(ps->ntiles ? ps->ntiles : 1), sizeof *uses);
    const int nworkers = ts_pool_size(ps->pool);
    ts_registrar **workers = calloc((size_t)nworkers * 2, sizeof *workers);
    ts_rereg_scratch *scratch = calloc((size_t)nworkers * 2, sizeof *scratch);
    ts_tile_cache *cache = NULL;
    ts_status st = TS_OK;
    if (!plan || !jobs || !geo || !uses || !workers || !scratch) {
        st = ts_fail(err, TS_ERR_NOMEM, "out of memory for the re-registration of %lld pairs", (long long)n);
        goto done;
    }
    for (int64_t i = 0; i < n; i++) p[i].replaced = p[i].rematched = false;
    if ((st = ts_stage_model_fit(p, n, ps->h, ps->w, &sum->model, plan, err)) != TS_OK) goto done;
    ts_strip_geometry base[2];
    bool have[2];
    for (int d = 0; d < 2; d++) have[d] = ts_stage_geometry(&sum->model, (ts_pair_dir)d, ps->h, ps->w, ps->reg, &base[d]);
    int64_t njobs = 0;
    for (int64_t i = 0; i < n; i++) {
        if (!plan[i].redo || !have[p[i].dir]) continue;
        /* The strips over the overlap the model predicts for the pair's
         * row (column); none when it predicts no overlap to search. */
        if (!ts_strip_geometry_at(&base[p[i].dir], ps->h, ps->w, plan[i].ey, plan[i].ex, &geo[njobs])) continue;
        jobs[njobs++] = i;
        uses[p[i].ta]++;
        uses[p[i].tb]++;
    }
    sum->redone = njobs;
    if (njobs == 0) goto done;
    if (!(cache = ts_tile_cache_create(ps->ntiles, uses, ps->cache_bytes, ps->load, ps->load_user))) {
        st = ts_fail(err, TS_ERR_NOMEM, "out of memory for the re-registration's tile cache");
        goto done;
    }
    pass_ctx x = {ps, p, &sum->model, jobs, geo, cache, workers, scratch};
    if ((st = ts_pool_run(ps->pool, njobs, redo_one, &x, err)) != TS_OK) goto done;
    for (int64_t j = 0; j < njobs; j++) {
        const ts_stage_pair *q = &p[jobs[j]];
        sum->replaced += q->replaced;
        sum->rematched += q->rematched;
    }
    sum->tile_reads = ts_tile_cache_get_stats(cache).loads;
done:
    for (int i = 0; workers && i < 2 * nworkers; i++) ts_registrar_free(workers[i]);
    for (int i = 0; scratch && i < 2 * nworkers; i++) ts_rereg_scratch_free(&scratch[i]);
    free(scratch);
    ts_tile_cache_destroy(cache);
    free(workers), free(uses), free(geo), free(jobs), free(plan);
    return st;
}
