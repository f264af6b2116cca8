/* The fuse pipeline scheduler (see pipeline.h). One mutex guards all the
 * bookkeeping; the work itself (reading, blending, encoding, writing) runs
 * outside it. */
#include "fuse/pipeline.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "common/error.h"

/* Items of one process stage that idle workers may run (fuse_pipeline_share). */
typedef struct share {
    fuse_item_fn fn;
    void *user;
    int64_t n, next;     /* items; next one not started */
    int running;         /* items started and not finished */
    bool failed;
    ts_error error;
    struct share *link;  /* the sched's list of shares with items left */
} share;

enum { BLOCK_PENDING = 0, BLOCK_READY, BLOCK_RUNNING, BLOCK_DONE };

typedef struct unit_state {
    fuse_strip *strips;  /* per slot */
    int *refs;           /* per slot: blocks still to use it */
    int *pending;        /* per block: strips not loaded yet */
    unsigned char *state;/* per block */
    int64_t blocks_done;
} unit_state;

typedef struct sched {
    const fuse_plan *plan;
    const fuse_stage_fns *fns;
    int64_t nunits, nbx;
    int64_t b0, nlocal;  /* bands [b0, b0 + nlocal) of the plan are entered */
    int64_t g0, g1;      /* of each (t, z), the blocks band * nbx + bx in [g0, g1) are run */
    unit_state **units;  /* allocated when the load cursor enters a unit */
    int64_t u_min;       /* lowest unit not finished */
    int64_t cur_u;       /* load cursor: unit, slot */
    int cur_s;
    size_t budget, held, peak;
    int loads_in_flight;
    int64_t lookahead;   /* blocks that may be read ahead of the earliest unfinished */
    int64_t ready;       /* blocks ready and unclaimed */
    int running, max_blocks; /* blocks being processed; the most at once */
    int64_t done, total;
    bool failed;
    ts_error error;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    ts_progress_fn progress;
    void *progress_user;
    const char *stage;
    int64_t strips_loaded;
    share *shares;       /* shares with items not started */
} sched;

/* The pipeline the calling thread works for (NULL outside one). */
static _Thread_local sched *tl_sched;

/* Units are numbered here over the bands run, (t, z) slowest; the stage
 * functions get the whole plan's number of the same unit. */
static const fuse_band *unit_band(const sched *S, int64_t u) {
    return &S->plan->bands[S->b0 + u % S->nlocal];
}

static int64_t plan_unit(const sched *S, int64_t u) {
    return (u / S->nlocal) * S->plan->nbands + S->b0 + u % S->nlocal;
}

/* Whether block bx of unit u is one this run processes (the first and last
 * band of an MPI rank's share may be partly another rank's). */
static bool block_in_range(const sched *S, int64_t u, int64_t bx) {
    const int64_t g = (S->b0 + u % S->nlocal) * S->nbx + bx;
    return g >= S->g0 && g < S->g1;
}

static void strip_release(const fuse_stage_fns *fns, fuse_strip *strip) {
    if (!strip->data) return;
    if (fns->free_strip) fns->free_strip(fns->user, strip);
    else free(strip->data);
    strip->data = NULL;
}

static void unit_free(const fuse_stage_fns *fns, unit_state *us, const fuse_band *band) {
    if (!us) return;
    if (us->strips)
        for (int s = 0; s < band->nslots; s++) strip_release(fns, &us->strips[s]);
    free(us->strips);
    free(us->refs);
    free(us->pending);
    free(us->state);
    free(us);
}

/* Called with the lock held when the cursor enters unit u. */
static ts_status unit_enter(sched *S, int64_t u) {
    const fuse_band *band = unit_band(S, u);
    unit_state *us = calloc(1, sizeof *us);
    if (!us) return ts_fail(&S->error, TS_ERR_NOMEM, "pipeline unit");
    us->strips = calloc(band->nslots ? (size_t)band->nslots : 1, sizeof *us->strips);
    us->refs = calloc(band->nslots ? (size_t)band->nslots : 1, sizeof *us->refs);
    us->pending = calloc((size_t)S->nbx, sizeof *us->pending);
    us->state = calloc((size_t)S->nbx, 1);
    if (!us->strips || !us->refs || !us->pending || !us->state) {
        unit_free(S->fns, us, band);
        return ts_fail(&S->error, TS_ERR_NOMEM, "pipeline unit");
    }
    /* A strip is held for the blocks of this run that use it; one that only
     * another rank's blocks use is never loaded (cursor_settle skips it). */
    for (int s = 0; s < band->nslots; s++)
        for (int64_t bx = band->slots[s].bx0; bx <= band->slots[s].bx1; bx++) us->refs[s] += block_in_range(S, u, bx);
    for (int64_t bx = 0; bx < S->nbx; bx++) {
        if (!block_in_range(S, u, bx)) { /* another rank's: done as far as this run goes */
            us->state[bx] = BLOCK_DONE;
            us->blocks_done++;
            continue;
        }
        us->pending[bx] = band->block_start[bx + 1] - band->block_start[bx];
        if (us->pending[bx] == 0) { us->state[bx] = BLOCK_READY; S->ready++; }
    }
    S->units[u] = us;
    return TS_OK;
}

/* Moves the cursor past exhausted units, entering new ones. Lock held. */
static ts_status cursor_settle(sched *S) {
    while (S->cur_u < S->nunits) {
        if (!S->units[S->cur_u]) {
            ts_status st = unit_enter(S, S->cur_u);
            if (st != TS_OK) return st;
        }
        const unit_state *us = S->units[S->cur_u];
        const int nslots = unit_band(S, S->cur_u)->nslots;
        while (S->cur_s < nslots && us->refs[S->cur_s] == 0) S->cur_s++;
        if (S->cur_s < nslots) break;
        S->cur_u++;
        S->cur_s = 0;
    }
    return TS_OK;
}

static bool find_ready(const sched *S, int64_t *u_out, int64_t *bx_out) {
    if (S->ready == 0 || S->running >= S->max_blocks) return false;
    for (int64_t u = S->u_min; u < S->nunits && u <= S->cur_u; u++) {
        const unit_state *us = S->units[u];
        if (!us) continue;
        for (int64_t bx = 0; bx < S->nbx; bx++)
            if (us->state[bx] == BLOCK_READY) { *u_out = u; *bx_out = bx; return true; }
    }
    return false;
}

/* Global index of the earliest block not finished. */
static int64_t earliest_unfinished(const sched *S) {
    for (int64_t u = S->u_min; u < S->nunits; u++) {
        const unit_state *us = S->units[u];
        if (!us) return u * S->nbx; /* not entered yet */
        for (int64_t bx = 0; bx < S->nbx; bx++)
            if (us->state[bx] != BLOCK_DONE) return u * S->nbx + bx;
    }
    return INT64_MAX;
}

static bool can_load(const sched *S, size_t *estimate) {
    if (S->cur_u >= S->nunits) return false;
    const fuse_slot *slot = &unit_band(S, S->cur_u)->slots[S->cur_s];
    int64_t g = S->cur_u * S->nbx + slot->bx0;
    /* What the earliest unfinished block waits for is always loaded, so the
     * pipeline cannot stall; anything else waits for budget and window. */
    int64_t first = earliest_unfinished(S);
    if (g <= first) {
        *estimate = S->fns->strip_estimate(S->fns->user, plan_unit(S, S->cur_u), slot);
        return true;
    }
    /* Otherwise read ahead a few blocks (at a band's end, into the next
     * band), within the byte budget. The window is counted in blocks, not
     * bands, so what is held does not grow with the canvas width. */
    if (g > first + S->lookahead) return false;
    *estimate = S->fns->strip_estimate(S->fns->user, plan_unit(S, S->cur_u), slot);
    return S->held + *estimate <= S->budget;
}

static void fail_locked(sched *S, const ts_error *e) {
    if (!S->failed) {
        S->failed = true;
        S->error = *e;
    }
    pthread_cond_broadcast(&S->cv);
}

static void do_load(sched *S, size_t estimate) {
    int64_t u = S->cur_u;
    int s = S->cur_s++;
    S->held += estimate;
    S->loads_in_flight++;
    ts_error e;
    ts_error_clear(&e);
    if (cursor_settle(S) != TS_OK) {
        e = S->error;
        S->loads_in_flight--;
        fail_locked(S, &e);
        return;
    }
    const fuse_band *band = unit_band(S, u);
    const fuse_slot *slot = &band->slots[s];
    fuse_strip strip;
    memset(&strip, 0, sizeof strip);
    pthread_mutex_unlock(&S->mu);
    ts_status st = S->fns->load(S->fns->user, plan_unit(S, u), slot, &strip, &e);
    pthread_mutex_lock(&S->mu);
    S->loads_in_flight--;
    S->held = S->held - estimate + strip.bytes;
    if (S->held > S->peak) S->peak = S->held;
    if (st != TS_OK) { strip_release(S->fns, &strip); fail_locked(S, &e); return; }
    S->strips_loaded++;
    unit_state *us = S->units[u];
    us->strips[s] = strip;
    for (int64_t bx = slot->bx0; bx <= slot->bx1; bx++)
        if (--us->pending[bx] == 0) { us->state[bx] = BLOCK_READY; S->ready++; }
    pthread_cond_broadcast(&S->cv);
}

/* Drops block bx of unit u's references to its strips, freeing those no
 * other block needs. Lock held. */
static void block_release_strips(sched *S, int64_t u, int64_t bx) {
    unit_state *us = S->units[u];
    const fuse_band *band = unit_band(S, u);
    const int a = band->block_start[bx], n = band->block_start[bx + 1] - a;
    for (int k = 0; k < n; k++) {
        int s = band->block_slots[a + k];
        if (--us->refs[s] == 0) {
            S->held -= us->strips[s].bytes;
            strip_release(S->fns, &us->strips[s]);
        }
    }
}

static void do_block(sched *S, int worker, int64_t u, int64_t bx) {
    unit_state *us = S->units[u];
    const fuse_band *band = unit_band(S, u);
    us->state[bx] = BLOCK_RUNNING;
    S->ready--;
    S->running++;
    int a = band->block_start[bx], n = band->block_start[bx + 1] - a;
    const fuse_strip **strips = malloc((n ? (size_t)n : 1) * sizeof *strips);
    if (!strips) { S->running--; ts_error e; ts_fail(&e, TS_ERR_NOMEM, "block strips"); fail_locked(S, &e); return; }
    for (int k = 0; k < n; k++) strips[k] = &us->strips[band->block_slots[a + k]];
    ts_error e;
    ts_error_clear(&e);
    pthread_mutex_unlock(&S->mu);
    ts_status st = S->fns->process(S->fns->user, worker, plan_unit(S, u), bx, strips, n, &e);
    bool released = false;
    if (st == TS_OK && S->fns->write) { /* blended: its strips go before the encode and write */
        pthread_mutex_lock(&S->mu);
        block_release_strips(S, u, bx);
        released = true;
        pthread_cond_broadcast(&S->cv);
        pthread_mutex_unlock(&S->mu);
        st = S->fns->write(S->fns->user, worker, plan_unit(S, u), bx, &e);
    }
    pthread_mutex_lock(&S->mu);
    free(strips);
    S->running--;
    if (st != TS_OK) { fail_locked(S, &e); return; }
    us->state[bx] = BLOCK_DONE;
    if (!released) block_release_strips(S, u, bx);
    S->done++;
    if (++us->blocks_done == S->nbx) {
        unit_free(S->fns, us, band);
        S->units[u] = NULL;
    }
    while (S->u_min < S->nunits && S->u_min < S->cur_u && !S->units[S->u_min]) S->u_min++;
    if (S->progress) S->progress(S->progress_user, S->stage, S->done, S->total);
    pthread_cond_broadcast(&S->cv);
}

/* Starts the next item of a share, runs it unlocked, records its end.
 * Lock held; the share has items left. */
static void run_item(sched *S, share *sh, int worker) {
    int64_t i = sh->next++;
    if (sh->next == sh->n) {  /* last one started: off the list */
        share **p = &S->shares;
        while (*p != sh) p = &(*p)->link;
        *p = sh->link;
    }
    sh->running++;
    ts_error e;
    ts_error_clear(&e);
    pthread_mutex_unlock(&S->mu);
    ts_status st = sh->fn(sh->user, i, worker, &e);
    pthread_mutex_lock(&S->mu);
    sh->running--;
    if (st != TS_OK && !sh->failed) {
        sh->failed = true;
        sh->error = e;
        if (sh->next < sh->n) {  /* start no more */
            sh->n = sh->next;
            share **p = &S->shares;
            while (*p != sh) p = &(*p)->link;
            *p = sh->link;
        }
    }
    pthread_cond_broadcast(&S->cv);
}

ts_status fuse_pipeline_share(int64_t n, fuse_item_fn fn, void *user, int worker, ts_error *err) {
    sched *S = tl_sched;
    if (!S || n <= 1) {
        for (int64_t i = 0; i < n; i++) {
            ts_status st = fn(user, i, worker, err);
            if (st != TS_OK) return st;
        }
        return TS_OK;
    }
    share sh;
    memset(&sh, 0, sizeof sh);
    sh.fn = fn;
    sh.user = user;
    sh.n = n;
    pthread_mutex_lock(&S->mu);
    sh.link = S->shares;
    S->shares = &sh;
    pthread_cond_broadcast(&S->cv);
    while (sh.next < sh.n) run_item(S, &sh, worker);
    while (sh.running > 0) pthread_cond_wait(&S->cv, &S->mu);
    pthread_mutex_unlock(&S->mu);
    if (sh.failed) {
        if (err) *err = sh.error;
        return sh.error.code != TS_OK ? sh.error.code : TS_ERR_INTERNAL;
    }
    return TS_OK;
}

static int worker_main(void *user, int64_t index, int worker) {
    (void)index;
    sched *S = user;
    tl_sched = S;
    pthread_mutex_lock(&S->mu);
    while (!S->failed && S->done < S->total) {
        int64_t u = 0, bx = 0;
        size_t estimate = 0;
        bool have_block = find_ready(S, &u, &bx);
        bool loadable = can_load(S, &estimate);
        /* Keep one reader ahead while blocks are ready; all read when none is. */
        if (have_block && (!loadable || S->loads_in_flight > 0)) do_block(S, worker, u, bx);
        else if (loadable) do_load(S, estimate);
        else if (have_block) do_block(S, worker, u, bx);
        else if (S->shares) run_item(S, S->shares, worker);
        else pthread_cond_wait(&S->cv, &S->mu);
    }
    int r = S->failed ? 1 : 0;
    pthread_mutex_unlock(&S->mu);
    tl_sched = NULL;
    return r;
}

ts_status fuse_pipeline_run_blocks(const fuse_plan *plan, int64_t ntz, int64_t g0, int64_t g1,
                                   const fuse_stage_fns *fns, ts_pool *pool, size_t budget, int max_blocks,
                                   ts_progress_fn progress, void *progress_user, const char *stage,
                                   fuse_pipeline_stats *stats, ts_error *err) {
    sched S;
    memset(&S, 0, sizeof S);
    const int64_t nbx = plan->L.nbx, nblocks = (int64_t)plan->nbands * nbx;
    if (g0 < 0) g0 = 0;
    if (g1 > nblocks) g1 = nblocks;
    /* The bands the blocks lie in: whole ones, and the first and last
     * perhaps in part. */
    const int64_t b0 = g1 > g0 ? g0 / nbx : 0, b1 = g1 > g0 ? (g1 - 1) / nbx + 1 : 0;
    const int64_t nunits = b1 > b0 && ntz > 0 ? ntz * (b1 - b0) : 0;
    S.plan = plan;
    S.fns = fns;
    S.b0 = b0;
    S.nlocal = b1 - b0;
    S.g0 = g0, S.g1 = g1;
    S.nunits = nunits;
    S.nbx = nbx;
    S.budget = budget;
    S.max_blocks = max_blocks > 0 ? max_blocks : 1;
    S.total = nunits > 0 ? ntz * (g1 - g0) : 0;
    S.progress = progress;
    S.progress_user = progress_user;
    S.stage = stage;
    if (stats) memset(stats, 0, sizeof *stats);
    if (nunits <= 0) return TS_OK;
    S.units = calloc((size_t)nunits, sizeof *S.units);
    if (!S.units) return ts_fail(err, TS_ERR_NOMEM, "pipeline of %lld units", (long long)nunits);
    pthread_mutex_init(&S.mu, NULL);
    pthread_cond_init(&S.cv, NULL);
    ts_status st = cursor_settle(&S);
    if (st == TS_OK) {
        if (progress) progress(progress_user, stage, 0, S.total);
        int n = ts_pool_size(pool);
        /* A window of one block per thread (blending it or reading its
         * strips). Each block further holds its strips until it is done
         * (~10 MB for 2048 px blocks of 256 px tiles): with threads + 2
         * the strips held were 32, 47 and 51 MB for 1x, 4x and 16x the
         * canvas area at the default --memory, with threads - 1 18, 20
         * and 21 MB, no slower at 1 and 2 threads (docs/fuse.md). */
        S.lookahead = (int64_t)n - 1;
        ts_pool_for(pool, n, worker_main, &S);
        if (S.failed) st = S.error.code != TS_OK ? S.error.code : TS_ERR_INTERNAL;
    }
    if (st != TS_OK && err) *err = S.error;
    for (int64_t u = 0; u < nunits; u++) unit_free(fns, S.units[u], unit_band(&S, u));
    free(S.units);
    pthread_mutex_destroy(&S.mu);
    pthread_cond_destroy(&S.cv);
    if (stats) {
        stats->strips_loaded = S.strips_loaded;
        stats->blocks_done = S.done;
        stats->peak_strip_bytes = S.peak;
    }
    return st;
}
