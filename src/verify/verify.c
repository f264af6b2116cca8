/* ts_verify: the store's units are opened and checked in batches, each in
 * two passes over the thread pool: open the batch's arrays (one item per
 * unit), then check every stored piece of them (one item per chunk, or per
 * part of a shard). Batches keep the open arrays few however many tiles a
 * plate has; the items of a batch span all its arrays, so one big mosaic
 * and many small tiles both keep every thread busy. Problems are kept in
 * store order (unit, level, block, inner chunk), whatever the timing. */
#include "verify/verify_internal.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/pool.h"

/* Units opened per batch: a few per thread, and at most this many open
 * arrays' metadata (each level one) held at once. */
#define BATCH_UNITS 256
/* A batch's items aim at this many per thread, shards split to get them. */
#define ITEMS_PER_THREAD 16
/* ...but a part decodes at least this many inner chunks (each part reads
 * the index again). */
#define MIN_INNER_PER_PART 4

void ts_verify_options_init(ts_verify_options *opt) {
    memset(opt, 0, sizeof *opt);
    opt->max_problems = 1000;
}

const char *ts_verify_kind_name(ts_verify_kind kind) {
    switch (kind) {
    case TS_VERIFY_METADATA: return "metadata";
    case TS_VERIFY_MISSING: return "missing";
    case TS_VERIFY_TRUNCATED: return "truncated";
    case TS_VERIFY_CORRUPT: return "corrupt";
    case TS_VERIFY_IO: return "io";
    case TS_VERIFY_UNSUPPORTED: return "unsupported";
    }
    return "unknown";
}

static int cmp_where(const vf_where *a, const vf_where *b) {
    if (a->unit != b->unit) return a->unit < b->unit ? -1 : 1;
    if (a->level != b->level) return a->level < b->level ? -1 : 1;
    if (a->block != b->block) return a->block < b->block ? -1 : 1;
    if (a->inner != b->inner) return a->inner < b->inner ? -1 : 1;
    return 0;
}

static int cmp_problem(const void *x, const void *y) {
    const vf_problem *a = x, *b = y;
    int r = cmp_where(&a->at, &b->at);
    if (r) return r;
    /* one place, several problems (an image and its listing): by text */
    r = strcmp(a->p.reason, b->p.reason);
    return r ? r : (int)a->p.kind - (int)b->p.kind;
}

static void problem_free(ts_verify_problem *p) {
    free(p->path);
    free(p->key);
    free(p->reason);
}

/* Keeps the max_problems first in store order: past twice that, the kept
 * ones are sorted and cut, and anything after the last kept is only
 * counted from then on. */
static void trim_problems(vf_ctx *c) {
    int64_t keep = c->opt->max_problems;
    if (c->nproblems_kept > 1) qsort(c->problems, (size_t)c->nproblems_kept, sizeof *c->problems, cmp_problem);
    for (int64_t i = keep; i < c->nproblems_kept; i++) problem_free(&c->problems[i].p);
    if (c->nproblems_kept > keep) {
        c->nproblems_kept = keep;
        c->have_cutoff = true;
        if (keep > 0) c->cutoff = c->problems[keep - 1].at;
        else c->cutoff = (vf_where){-1, -1, -1, -1};
    }
}

ts_status vf_report(vf_ctx *c, vf_where at, ts_verify_kind kind, const char *path, const char *key, int64_t inner,
                    const char *fmt, ...) {
    char reason[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(reason, sizeof reason, fmt, ap);
    va_end(ap);
    /* The readers' messages start with the full path; the problem names
     * it already: "<store>/<path>: why" becomes "why". */
    size_t nr = strlen(c->root), np = path ? strlen(path) : 0;
    char *why = reason;
    if (strncmp(why, c->root, nr) == 0 && why[nr] == '/') {
        why += nr + 1;
        if (np && strncmp(why, path, np) == 0 && why[np] == ':' && why[np + 1] == ' ') why += np + 2;
        memmove(reason, why, strlen(why) + 1);
    }
    ts_status st = TS_OK;
    pthread_mutex_lock(&c->mu);
    c->nproblems++;
    if (!c->have_cutoff || cmp_where(&at, &c->cutoff) < 0) {
        if (c->nproblems_kept == c->problems_cap) {
            int64_t cap = c->problems_cap ? c->problems_cap * 2 : 16;
            vf_problem *np = realloc(c->problems, (size_t)cap * sizeof *np);
            if (!np) st = TS_ERR_NOMEM;
            else c->problems = np, c->problems_cap = cap;
        }
        if (!st) {
            vf_problem *p = &c->problems[c->nproblems_kept];
            p->at = at;
            p->p = (ts_verify_problem){kind, strdup(path ? path : ""), strdup(key ? key : ""), inner, strdup(reason)};
            if (!p->p.path || !p->p.key || !p->p.reason) {
                problem_free(&p->p);
                st = TS_ERR_NOMEM;
            } else {
                c->nproblems_kept++;
            }
        }
        if (!st && c->nproblems_kept > 2 * (int64_t)c->opt->max_problems + 16) trim_problems(c);
    }
    pthread_mutex_unlock(&c->mu);
    return st;
}

/* ------------------------------------------------------------- batches */

typedef struct batch {
    vf_ctx *c;
    int64_t u0, nunits;
    vf_array *slots;       /* TS_MAX_LEVELS per unit */
    int *nslot;
    vf_array *arrays;      /* the opened ones, in unit and level order */
    int64_t narrays;
    int64_t nitems;
} batch;

static ts_status open_item(void *user, int64_t i, int worker, ts_error *err) {
    (void)worker;
    batch *b = user;
    return vf_open_unit(b->c, b->u0 + i, &b->slots[i * TS_MAX_LEVELS], &b->nslot[i], err);
}

static ts_status check_item(void *user, int64_t i, int worker, ts_error *err) {
    batch *b = user;
    /* the array whose items hold i: the last with first_item <= i */
    int64_t lo = 0, hi = b->narrays - 1;
    while (lo < hi) {
        int64_t mid = (lo + hi + 1) / 2;
        if (b->arrays[mid].first_item <= i) lo = mid;
        else hi = mid - 1;
    }
    const vf_array *a = &b->arrays[lo];
    int64_t local = i - a->first_item;
    return vf_check_block(b->c, a, local / a->parts, local % a->parts, worker, err);
}

/* Blocks of each array, and the parts its shards are split into. An
 * array with more blocks than int64 counts is not checked. */
static ts_status plan_items(batch *b, int nthreads) {
    vf_ctx *c = b->c;
    int64_t total = 0;
    for (int64_t k = 0; k < b->narrays; k++) {
        vf_array *a = &b->arrays[k];
        const tz_array_meta *m = tz_array_get_meta(a->arr);
        tz_array_grid(a->arr, a->grid);
        a->nblocks = 1;
        bool overflow = false;
        for (int d = 0; d < m->ndim; d++) overflow = overflow || __builtin_mul_overflow(a->nblocks, a->grid[d], &a->nblocks);
        if (overflow || a->nblocks > (INT64_MAX >> 8)) {
            ts_status st = vf_report(c, (vf_where){a->unit, a->level, -1, -1}, TS_VERIFY_UNSUPPORTED, a->rel, "", -1,
                                     "more chunks than can be counted: not checked");
            if (st) return st;
            a->nblocks = 0;
        }
        total += a->nblocks;
    }
    int64_t want = (int64_t)nthreads * ITEMS_PER_THREAD;
    int64_t split = total > 0 && total < want ? (want + total - 1) / total : 1;
    b->nitems = 0;
    for (int64_t k = 0; k < b->narrays; k++) {
        vf_array *a = &b->arrays[k];
        int64_t inner = tz_shard_inner_count(a->arr);
        int64_t most = inner / MIN_INNER_PER_PART > 1 ? inner / MIN_INNER_PER_PART : 1;
        a->parts = split < most ? split : most;
        a->first_item = b->nitems;
        b->nitems += a->nblocks * a->parts;
        atomic_fetch_add(&c->arrays, 1);
    }
    return TS_OK;
}

static void close_batch(batch *b) {
    for (int64_t k = 0; k < b->narrays; k++) {
        tz_array_close(b->arrays[k].arr);
        free(b->arrays[k].rel);
    }
    b->narrays = 0;
}

static ts_status run_batch(vf_ctx *c, ts_pool *pool, batch *b, ts_error *err) {
    memset(b->nslot, 0, (size_t)b->nunits * sizeof *b->nslot);
    ts_status st = ts_pool_run(pool, b->nunits, open_item, b, err);
    /* gather what opened, failed or not (all of it is closed below) */
    b->narrays = 0;
    for (int64_t i = 0; i < b->nunits; i++)
        for (int l = 0; l < b->nslot[i]; l++) b->arrays[b->narrays++] = b->slots[i * TS_MAX_LEVELS + l];
    if (!st) st = plan_items(b, ts_pool_size(pool));
    if (!st) st = ts_pool_run(pool, b->nitems, check_item, b, err);
    close_batch(b);
    return st;
}

static void free_ctx(vf_ctx *c) {
    for (int i = 0; c->scratch && i < c->nworkers; i++) {
        tz_decoder_free(c->scratch[i].dec);
        free(c->scratch[i].buf);
        free(c->scratch[i].index);
        free(c->scratch[i].order);
    }
    free(c->scratch);
    for (int64_t i = 0; i < c->nproblems_kept; i++) problem_free(&c->problems[i].p);
    free(c->problems);
    vf_units_free(c);
    ts_plate_close(c->plate);
    pthread_mutex_destroy(&c->mu);
}

ts_status ts_verify(const ts_verify_options *opt, ts_verify_result *result, ts_error *err) {
    memset(result, 0, sizeof *result);
    if (err) ts_error_clear(err);
    if (!opt->store || !*opt->store) return ts_fail(err, TS_ERR_ARG, "verify: no store given");
    if (opt->threads < 0) return ts_fail(err, TS_ERR_ARG, "verify: threads %d is negative", opt->threads);
    if (opt->max_problems < 0) return ts_fail(err, TS_ERR_ARG, "verify: max_problems %d is negative", opt->max_problems);
    vf_ctx *c = calloc(1, sizeof *c);
    if (!c) return ts_fail(err, TS_ERR_NOMEM, "out of memory");
    c->opt = opt;
    pthread_mutex_init(&c->mu, NULL);
    size_t len = strlen(opt->store);
    while (len > 1 && opt->store[len - 1] == '/') len--;
    if (len >= sizeof c->root) {
        free_ctx(c);
        free(c);
        return ts_fail(err, TS_ERR_ARG, "store path too long: %.64s...", opt->store);
    }
    memcpy(c->root, opt->store, len);
    ts_status st = vf_discover(c, err);
    ts_pool *pool = NULL;
    batch b = {.c = c};
    if (!st) {
        pool = ts_pool_create(opt->threads);
        c->nworkers = pool ? ts_pool_size(pool) : 0;
        c->scratch = calloc((size_t)(c->nworkers ? c->nworkers : 1), sizeof *c->scratch);
        b.slots = calloc(BATCH_UNITS * TS_MAX_LEVELS, sizeof *b.slots);
        b.arrays = calloc(BATCH_UNITS * TS_MAX_LEVELS, sizeof *b.arrays);
        b.nslot = calloc(BATCH_UNITS, sizeof *b.nslot);
        if (!pool || !c->scratch || !b.slots || !b.arrays || !b.nslot)
            st = ts_fail(err, TS_ERR_NOMEM, "out of memory starting %d threads to verify %s", opt->threads, c->root);
    }
    for (int64_t u0 = 0; !st && u0 < c->nunits; u0 += BATCH_UNITS) {
        b.u0 = u0;
        b.nunits = c->nunits - u0 < BATCH_UNITS ? c->nunits - u0 : BATCH_UNITS;
        st = run_batch(c, pool, &b, err);
        if (opt->progress) opt->progress(opt->progress_user, "verify", u0 + b.nunits, c->nunits);
    }
    /* out of memory inside an item or a report, with no message of its own */
    if (st && err && !err->message[0]) ts_fail(err, st, "out of memory verifying %s", c->root);
    free(b.slots);
    free(b.arrays);
    free(b.nslot);
    if (pool) ts_pool_destroy(pool);
    if (!st) {
        pthread_mutex_lock(&c->mu);
        int64_t keep = opt->max_problems;
        if (c->nproblems_kept > 1) qsort(c->problems, (size_t)c->nproblems_kept, sizeof *c->problems, cmp_problem);
        if (c->nproblems_kept > keep) trim_problems(c);
        pthread_mutex_unlock(&c->mu);
        result->problems = calloc((size_t)(c->nproblems_kept ? c->nproblems_kept : 1), sizeof *result->problems);
        if (!result->problems) {
            st = ts_fail(err, TS_ERR_NOMEM, "out of memory");
        } else {
            for (int64_t i = 0; i < c->nproblems_kept; i++) result->problems[i] = c->problems[i].p;
            result->nlisted = (int)c->nproblems_kept;
            c->nproblems_kept = 0; /* moved to the result */
            result->nproblems = c->nproblems;
            result->images = atomic_load(&c->images);
            result->arrays = atomic_load(&c->arrays);
            result->blocks = atomic_load(&c->blocks);
            result->chunks = atomic_load(&c->chunks);
            result->empty = atomic_load(&c->empty);
            result->absent = atomic_load(&c->absent);
            result->bytes_read = atomic_load(&c->bytes_read);
            result->bytes_decoded = atomic_load(&c->bytes_decoded);
            result->threads = c->nworkers;
        }
    }
    free_ctx(c);
    free(c);
    return st;
}

void ts_verify_result_free(ts_verify_result *result) {
    if (!result) return;
    for (int i = 0; i < result->nlisted; i++) problem_free(&result->problems[i]);
    free(result->problems);
    memset(result, 0, sizeof *result);
}
