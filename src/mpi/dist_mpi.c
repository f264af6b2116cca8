/* ts_dist over an MPI communicator (built with TESSERA_HAVE_MPI only). The
 * caller's communicator is duplicated, so the library's collectives never
 * match the caller's messages, and set to return errors instead of
 * aborting, so they become ts_error messages like any other failure. */
#include "mpi/dist.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/error.h"

#ifdef TESSERA_HAVE_MPI
#include <limits.h>
#include <mpi.h>

typedef struct mpi_impl {
    MPI_Comm comm;
} mpi_impl;

static MPI_Comm comm_of(const ts_dist *d) { return ((const mpi_impl *)d->impl)->comm; }

static ts_status mpi_fail(ts_error *err, int rc, const char *what) {
    char text[MPI_MAX_ERROR_STRING];
    int len = 0;
    if (MPI_Error_string(rc, text, &len) != MPI_SUCCESS) snprintf(text, sizeof text, "error %d", rc);
    return ts_fail(err, TS_ERR_IO, "MPI %s failed: %s", what, text);
}

static ts_status mpi_allgather_counts(const ts_dist *d, uint64_t mine, uint64_t *counts, ts_error *err) {
    int rc = MPI_Allgather(&mine, 1, MPI_UINT64_T, counts, 1, MPI_UINT64_T, comm_of(d));
    return rc == MPI_SUCCESS ? TS_OK : mpi_fail(err, rc, "Allgather");
}

static ts_status mpi_allgatherv(const ts_dist *d, const void *mine, size_t n, void *all,
                                const uint64_t *counts, ts_error *err) {
    /* MPI counts are int: every rank checks the same gathered counts, so
     * all refuse together (no rank is left inside the collective). */
    uint64_t total = 0;
    for (int r = 0; r < d->size; r++) total += counts[r];
    if (total > INT_MAX)
        return ts_fail(err, TS_ERR_UNSUPPORTED, "MPI gather of %llu bytes is beyond 2 GiB",
                       (unsigned long long)total);
    int *cnt = malloc((size_t)d->size * 2 * sizeof *cnt);
    if (!cnt) {
        ts_error e;
        ts_fail(&e, TS_ERR_NOMEM, "MPI gather counts");
        d->ops->abort(d, &e);
        return ts_fail(err, TS_ERR_NOMEM, "MPI gather counts");
    }
    int *displ = cnt + d->size;
    int off = 0;
    for (int r = 0; r < d->size; r++) {
        cnt[r] = (int)counts[r];
        displ[r] = off;
        off += cnt[r];
    }
    int rc = MPI_Allgatherv(n ? mine : all, (int)n, MPI_BYTE, all, cnt, displ, MPI_BYTE, comm_of(d));
    free(cnt);
    return rc == MPI_SUCCESS ? TS_OK : mpi_fail(err, rc, "Allgatherv");
}

static ts_status mpi_bcast(const ts_dist *d, void *buf, size_t n, int root, ts_error *err) {
    if (n > INT_MAX) return ts_fail(err, TS_ERR_UNSUPPORTED, "MPI broadcast of %zu bytes is beyond 2 GiB", n);
    int rc = MPI_Bcast(buf, (int)n, MPI_BYTE, root, comm_of(d));
    return rc == MPI_SUCCESS ? TS_OK : mpi_fail(err, rc, "Bcast");
}

static void mpi_destroy(ts_dist *d) {
    mpi_impl *m = d->impl;
    MPI_Comm_free(&m->comm);
    free(m);
    free(d);
}

static void mpi_abort(const ts_dist *d, const ts_error *why) {
    (void)why; /* the library never prints; MPI_Abort reports the rank */
    MPI_Abort(comm_of(d), 1);
}

static const ts_dist_ops MPI_OPS = {
    mpi_allgather_counts, mpi_allgatherv, mpi_bcast, mpi_destroy, mpi_abort,
};

bool ts_dist_mpi_available(void) { return true; }

ts_status ts_dist_mpi_create(const void *mpi_comm, ts_dist **out, ts_error *err) {
    *out = NULL;
    if (!mpi_comm) return ts_fail(err, TS_ERR_ARG, "no MPI communicator given");
    int inited = 0;
    MPI_Initialized(&inited);
    if (!inited) return ts_fail(err, TS_ERR_ARG, "MPI is not initialised (call MPI_Init first)");
    /* MPI_Comm_dup is collective: every rank calls it, even one that has
     * no memory for the rest, so that the others do not wait in it. */
    MPI_Comm comm;
    int rc = MPI_Comm_dup(*(const MPI_Comm *)mpi_comm, &comm);
    if (rc != MPI_SUCCESS) return mpi_fail(err, rc, "Comm_dup");
    ts_dist *d = calloc(1, sizeof *d);
    mpi_impl *m = calloc(1, sizeof *m);
    if (!d || !m) {
        free(d);
        free(m);
        MPI_Comm_free(&comm);
        return ts_fail(err, TS_ERR_NOMEM, "MPI distribution");
    }
    m->comm = comm;
    MPI_Comm_set_errhandler(m->comm, MPI_ERRORS_RETURN);
    MPI_Comm_rank(m->comm, &d->rank);
    MPI_Comm_size(m->comm, &d->size);
    d->ops = &MPI_OPS;
    d->impl = m;
    *out = d;
    return TS_OK;
}

#else

bool ts_dist_mpi_available(void) { return false; }

ts_status ts_dist_mpi_create(const void *mpi_comm, ts_dist **out, ts_error *err) {
    (void)mpi_comm;
    *out = NULL;
    return ts_fail(err, TS_ERR_UNSUPPORTED, "tessera was built without MPI (configure with -DTESSERA_MPI=ON)");
}

#endif
