/* Ranks as threads of one test process: a ts_dist transport (mpi/dist.h)
 * whose collectives meet at a barrier, so that code written for MPI can be
 * run with 2-8 ranks inside a unit test (and under the sanitizers) without
 * mpirun. Each rank's thread calls the code under test with its own
 * ts_dist from thread_ranks_dist(); the collectives copy between the
 * threads' buffers. For tests only: no failure handling beyond aborting. */
#ifndef TS_TEST_THREAD_RANKS_H
#define TS_TEST_THREAD_RANKS_H

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "mpi/dist.h"

enum { THREAD_RANKS_MAX = 8 };

typedef struct thread_ranks {
    int size;
    pthread_barrier_t barrier;
    const void *buf[THREAD_RANKS_MAX];
    size_t n[THREAD_RANKS_MAX];
    uint64_t count[THREAD_RANKS_MAX];
    ts_dist dist[THREAD_RANKS_MAX];
} thread_ranks;

static thread_ranks *thread_ranks_of(const ts_dist *d) { return (thread_ranks *)d->impl; }

static ts_status thread_ranks_counts(const ts_dist *d, uint64_t mine, uint64_t *counts, ts_error *err) {
    (void)err;
    thread_ranks *w = thread_ranks_of(d);
    w->count[d->rank] = mine;
    pthread_barrier_wait(&w->barrier);
    memcpy(counts, w->count, (size_t)w->size * sizeof *counts);
    pthread_barrier_wait(&w->barrier);
    return TS_OK;
}

static ts_status thread_ranks_allgatherv(const ts_dist *d, const void *mine, size_t n, void *all,
                                         const uint64_t *counts, ts_error *err) {
    (void)counts, (void)err;
    thread_ranks *w = thread_ranks_of(d);
    w->buf[d->rank] = mine;
    w->n[d->rank] = n;
    pthread_barrier_wait(&w->barrier);
    size_t at = 0;
    for (int r = 0; r < w->size; r++) {
        if (w->n[r]) memcpy((char *)all + at, w->buf[r], w->n[r]);
        at += w->n[r];
    }
    pthread_barrier_wait(&w->barrier);
    return TS_OK;
}

static ts_status thread_ranks_bcast(const ts_dist *d, void *buf, size_t n, int root, ts_error *err) {
    (void)err;
    thread_ranks *w = thread_ranks_of(d);
    if (d->rank == root) w->buf[root] = buf;
    pthread_barrier_wait(&w->barrier);
    if (d->rank != root && n) memcpy(buf, w->buf[root], n);
    pthread_barrier_wait(&w->barrier);
    return TS_OK;
}

static void thread_ranks_destroy(ts_dist *d) { (void)d; }

static void thread_ranks_abort(const ts_dist *d, const ts_error *why) {
    (void)d, (void)why;
    abort();
}

static const ts_dist_ops THREAD_RANKS_OPS = {thread_ranks_counts, thread_ranks_allgatherv, thread_ranks_bcast,
                                             thread_ranks_destroy, thread_ranks_abort};

static void thread_ranks_init(thread_ranks *w, int size) {
    memset(w, 0, sizeof *w);
    w->size = size;
    pthread_barrier_init(&w->barrier, NULL, (unsigned)size);
    for (int r = 0; r < size; r++) w->dist[r] = (ts_dist){r, size, &THREAD_RANKS_OPS, w};
}

static void thread_ranks_free(thread_ranks *w) { pthread_barrier_destroy(&w->barrier); }

static const ts_dist *thread_ranks_dist(thread_ranks *w, int rank) { return &w->dist[rank]; }

#endif
