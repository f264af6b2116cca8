#include "common/pool.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <unistd.h>

struct ts_pool {
    int nthreads;
    pthread_t *threads;
    pthread_mutex_t mu;
    pthread_cond_t work_cv, done_cv;
    /* current job */
    ts_pool_fn fn;
    void *user;
    int64_t n;
    atomic_llong next;
    atomic_int result;
    int active;       /* workers still inside the current job */
    uint64_t job_id;  /* bumps for each job */
    int quit;
};

int ts_cpu_count(void) {
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (int)n : 1;
}

static void run_items(ts_pool *p, int worker) {
    for (;;) {
        if (atomic_load(&p->result) != 0) break;
        int64_t i = atomic_fetch_add(&p->next, 1);
        if (i >= p->n) break;
        int r = p->fn(p->user, i, worker);
        if (r != 0) {
            int zero = 0;
            atomic_compare_exchange_strong(&p->result, &zero, r);
        }
    }
}

typedef struct { ts_pool *p; int id; } worker_arg;

static void *worker_main(void *arg) {
    worker_arg *wa = arg;
    ts_pool *p = wa->p;
    int id = wa->id;
    free(wa);
    uint64_t seen = 0;
    pthread_mutex_lock(&p->mu);
    for (;;) {
        while (!p->quit && p->job_id == seen) pthread_cond_wait(&p->work_cv, &p->mu);
        if (p->quit) break;
        seen = p->job_id;
        pthread_mutex_unlock(&p->mu);
        run_items(p, id);
        pthread_mutex_lock(&p->mu);
        if (--p->active == 0) pthread_cond_broadcast(&p->done_cv);
    }
    pthread_mutex_unlock(&p->mu);
    return NULL;
}

ts_pool *ts_pool_create(int threads) {
    if (threads <= 0) threads = ts_cpu_count();
    ts_pool *p = calloc(1, sizeof *p);
    if (!p) return NULL;
    p->nthreads = threads;
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->work_cv, NULL);
    pthread_cond_init(&p->done_cv, NULL);
    /* The calling thread is worker 0; threads-1 helpers. */
    if (threads > 1) {
        p->threads = calloc((size_t)threads - 1, sizeof *p->threads);
        if (!p->threads) { free(p); return NULL; }
        for (int i = 1; i < threads; i++) {
            worker_arg *wa = malloc(sizeof *wa);
            if (!wa) { p->nthreads = i; break; }
            wa->p = p;
            wa->id = i;
            if (pthread_create(&p->threads[i - 1], NULL, worker_main, wa) != 0) {
                free(wa);
                p->nthreads = i;
                break;
            }
        }
    }
    return p;
}

int ts_pool_size(const ts_pool *pool) { return pool ? pool->nthreads : 1; }

int ts_pool_for(ts_pool *p, int64_t n, ts_pool_fn fn, void *user) {
    if (n <= 0) return 0;
    pthread_mutex_lock(&p->mu);
    p->fn = fn;
    p->user = user;
    p->n = n;
    atomic_store(&p->next, 0);
    atomic_store(&p->result, 0);
    p->active = p->nthreads - 1;
    p->job_id++;
    pthread_cond_broadcast(&p->work_cv);
    pthread_mutex_unlock(&p->mu);
    run_items(p, 0);
    pthread_mutex_lock(&p->mu);
    while (p->active > 0) pthread_cond_wait(&p->done_cv, &p->mu);
    pthread_mutex_unlock(&p->mu);
    return atomic_load(&p->result);
}

void ts_pool_destroy(ts_pool *p) {
    if (!p) return;
    pthread_mutex_lock(&p->mu);
    p->quit = 1;
    pthread_cond_broadcast(&p->work_cv);
    pthread_mutex_unlock(&p->mu);
    for (int i = 1; i < p->nthreads; i++) pthread_join(p->threads[i - 1], NULL);
    free(p->threads);
    pthread_mutex_destroy(&p->mu);
    pthread_cond_destroy(&p->work_cv);
    pthread_cond_destroy(&p->done_cv);
    free(p);
}

typedef struct status_job {
    ts_pool_status_fn fn;
    void *user;
    pthread_mutex_t mu;
    int64_t first;      /* lowest failing index so far (n: none) */
    ts_status status;
    ts_error error;
} status_job;

static int run_status_item(void *user, int64_t i, int worker) {
    status_job *J = user;
    ts_error e;
    ts_error_clear(&e);
    ts_status st = J->fn(J->user, i, worker, &e);
    if (st == TS_OK) return 0;
    pthread_mutex_lock(&J->mu);
    if (i < J->first) {
        J->first = i;
        J->status = st;
        J->error = e;
    }
    pthread_mutex_unlock(&J->mu);
    return 1;
}

ts_status ts_pool_run(ts_pool *pool, int64_t n, ts_pool_status_fn fn, void *user, ts_error *err) {
    status_job J = {.fn = fn, .user = user, .first = n, .status = TS_OK};
    pthread_mutex_init(&J.mu, NULL);
    ts_pool_for(pool, n, run_status_item, &J);
    pthread_mutex_destroy(&J.mu);
    if (J.status != TS_OK && err) *err = J.error;
    return J.status;
}
