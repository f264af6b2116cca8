/* ts_dist: the serial case, and the collectives built on a transport's
 * three primitives (dist.h). */
#include "mpi/dist.h"

#include <stdlib.h>
#include <string.h>

#include "common/error.h"

int ts_dist_rank(const ts_dist *d) { return d ? d->rank : 0; }
int ts_dist_size(const ts_dist *d) { return d ? d->size : 1; }

void ts_dist_free(ts_dist *d) {
    if (d && d->ops && d->ops->destroy) d->ops->destroy(d);
}

ts_status ts_dist_allgatherv(const ts_dist *d, const void *mine, size_t n, void **all,
                             uint64_t **counts, ts_error *err) {
    *all = NULL;
    if (counts) *counts = NULL;
    const int size = ts_dist_size(d);
    uint64_t *cnt = malloc((size_t)size * sizeof *cnt);
    if (!cnt) return ts_fail(err, TS_ERR_NOMEM, "gathering %zu bytes from %d ranks", n, size);
    ts_status st = TS_OK;
    if (d && d->ops) st = d->ops->allgather_counts(d, n, cnt, err);
    else cnt[0] = n;
    uint64_t total = 0;
    for (int r = 0; st == TS_OK && r < size; r++) total += cnt[r];
    void *buf = NULL;
    if (st == TS_OK && !(buf = malloc(total ? (size_t)total : 1)))
        st = ts_fail(err, TS_ERR_NOMEM, "gathering %llu bytes from %d ranks", (unsigned long long)total, size);
    /* The other ranks are already on their way into the gather: a rank
     * that cannot take part must end the job rather than leave them
     * waiting (MPI has no way to join a collective without a buffer). */
    if (st != TS_OK && d && d->ops && d->size > 1) d->ops->abort(d, err);
    if (st == TS_OK) {
        if (d && d->ops) st = d->ops->allgatherv(d, mine, n, buf, cnt, err);
        else if (n) memcpy(buf, mine, n);
    }
    if (st != TS_OK) {
        free(buf);
        free(cnt);
        return st;
    }
    *all = buf;
    if (counts) *counts = cnt;
    else free(cnt);
    return TS_OK;
}

ts_status ts_dist_bcast(const ts_dist *d, void *buf, size_t n, int root, ts_error *err) {
    if (!d || !d->ops || d->size == 1) return TS_OK;
    return d->ops->bcast(d, buf, n, root, err);
}

ts_status ts_dist_agree(const ts_dist *d, ts_status st, ts_error *err) {
    if (!d || !d->ops || d->size == 1) return st;
    /* Each rank's status, then the first failing rank's error to all. */
    int32_t mine = (int32_t)st;
    uint64_t *counts = NULL;
    int32_t *all = NULL;
    ts_error local;
    ts_status cst = ts_dist_allgatherv(d, &mine, sizeof mine, (void **)&all, &counts, &local);
    if (cst != TS_OK) {
        if (err) *err = local;
        return cst;
    }
    int failed = -1;
    for (int r = 0; r < d->size && failed < 0; r++)
        if (all[r] != TS_OK) failed = r;
    ts_status agreed = failed < 0 ? TS_OK : (ts_status)all[failed];
    free(all);
    free(counts);
    if (failed < 0) return TS_OK;
    ts_error shared;
    memset(&shared, 0, sizeof shared);
    if (d->rank == failed) {
        if (err) shared = *err;
        shared.code = agreed;
    }
    cst = d->ops->bcast(d, &shared, sizeof shared, failed, &local);
    if (cst != TS_OK) {
        if (err) *err = local;
        return cst;
    }
    shared.message[sizeof shared.message - 1] = '\0';
    if (err) *err = shared;
    return agreed;
}

ts_status ts_dist_reduce(const ts_dist *d, int64_t *v, const ts_dist_op *op, int n, ts_error *err) {
    if (!d || !d->ops || d->size == 1) return TS_OK;
    int64_t *all = NULL;
    ts_status st = ts_dist_allgatherv(d, v, (size_t)n * sizeof *v, (void **)&all, NULL, err);
    if (st) return st;
    for (int i = 0; i < n; i++) {
        int64_t acc = all[i];
        for (int r = 1; r < d->size; r++) {
            int64_t x = all[(size_t)r * (size_t)n + (size_t)i];
            acc = op[i] == TS_DIST_MAX ? (x > acc ? x : acc) : acc + x;
        }
        v[i] = acc;
    }
    free(all);
    return TS_OK;
}

void ts_dist_share(int64_t n, int rank, int size, int64_t *lo, int64_t *hi) {
    if (size <= 1 || n <= 0) {
        *lo = 0, *hi = n > 0 ? n : 0;
        return;
    }
    /* n * rank / size without overflow for any plate (n < 2^40, size < 2^20). */
    *lo = n / size * rank + n % size * rank / size;
    *hi = n / size * (rank + 1) + n % size * (rank + 1) / size;
}

int ts_dist_share_rank(int64_t n, int size, int64_t i) {
    if (size <= 1 || n <= 0) return 0;
    /* The proportional guess is within a rank or so; the shares, in rank
     * order, tell which way to step. */
    int r = (int)((long double)i * size / n);
    if (r >= size) r = size - 1;
    for (;;) {
        int64_t lo, hi;
        ts_dist_share(n, r, size, &lo, &hi);
        if (i < lo && r > 0) r--;
        else if (i >= hi && r < size - 1) r++;
        else return r;
    }
}
