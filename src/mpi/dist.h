/*
 * Distribution of one run over processes (ts_dist, see tessera.h): the few
 * collectives estimate and fuse need. A NULL ts_dist is the serial case
 * (rank 0 of 1): every collective is then a copy or a no-op, so the stages
 * call them unconditionally and keep one code path.
 *
 * Every collective must be reached by every rank, in the same order. The
 * stages therefore never return early between two of them: a rank that
 * fails carries its status to the next ts_dist_agree, which makes every
 * rank fail with the message of the lowest failing rank (no rank is left
 * waiting in a collective the failed one never reaches).
 */
#ifndef TS_MPI_DIST_H
#define TS_MPI_DIST_H

#include <stddef.h>
#include <stdint.h>

#include "tessera/tessera.h"

/* The transport behind a ts_dist (dist_mpi.c); the serial case has none. */
typedef struct ts_dist_ops {
    /* Concatenation, in rank order, of every rank's n bytes at mine into
     * all (sum of counts bytes, allocated by the caller); counts[r] are
     * the ranks' byte counts, gathered first. */
    ts_status (*allgather_counts)(const ts_dist *d, uint64_t mine, uint64_t *counts, ts_error *err);
    ts_status (*allgatherv)(const ts_dist *d, const void *mine, size_t n, void *all,
                            const uint64_t *counts, ts_error *err);
    ts_status (*bcast)(const ts_dist *d, void *buf, size_t n, int root, ts_error *err);
    void (*destroy)(ts_dist *d);
    /* Ends every rank's process (a rank that cannot reach a collective the
     * others are in: without it they would wait for ever). */
    void (*abort)(const ts_dist *d, const ts_error *why);
} ts_dist_ops;

struct ts_dist {
    int rank, size;
    const ts_dist_ops *ops;
    void *impl;
};

/* Combines every rank's status: returns TS_OK on every rank if all passed
 * st == TS_OK, else on every rank the status and message (into err) of the
 * lowest failing rank. Also a barrier. */
ts_status ts_dist_agree(const ts_dist *d, ts_status st, ts_error *err);

/* Every rank's n bytes at mine, concatenated in rank order into a malloc'd
 * *all (free()); *counts (malloc'd, size entries) the byte count of each
 * rank, may be NULL. Ranks may pass different n. */
ts_status ts_dist_allgatherv(const ts_dist *d, const void *mine, size_t n, void **all,
                             uint64_t **counts, ts_error *err);

/* Rank root's n bytes at buf copied into every rank's buf. */
ts_status ts_dist_bcast(const ts_dist *d, void *buf, size_t n, int root, ts_error *err);

/* v[i] combined over the ranks by op[i] (sum or maximum), in place on
 * every rank; one collective for all n values. */
typedef enum ts_dist_op { TS_DIST_SUM, TS_DIST_MAX } ts_dist_op;
ts_status ts_dist_reduce(const ts_dist *d, int64_t *v, const ts_dist_op *op, int n, ts_error *err);

/* The contiguous share [*lo, *hi) of rank `rank` among size ranks of n
 * items: in rank order, covering [0, n), sizes within one of each other. */
void ts_dist_share(int64_t n, int rank, int size, int64_t *lo, int64_t *hi);
/* The rank whose share holds item i of n (0 <= i < n; 0 when size <= 1). */
int ts_dist_share_rank(int64_t n, int size, int64_t i);

#endif
