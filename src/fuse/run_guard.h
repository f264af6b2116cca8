/* Leaves nothing half-written behind a fuse run. Before the first write it
 * records which parts of the output already exist and sweeps the stale
 * temporaries of killed runs from the directories the run writes (so a
 * re-run gives a clean run's bytes); when the run fails it removes what the
 * run created: the whole store if the run created it, else the well images
 * (and their new well/row groups) it created, and an image it was replacing
 * and had not completed. Timepoints written by --t-out into an existing
 * image cannot be undone: the error then says which image may be partly
 * overwritten. */
#ifndef TS_FUSE_RUN_GUARD_H
#define TS_FUSE_RUN_GUARD_H

#include <stdbool.h>

#include "tessera/tessera.h"

typedef struct fuse_guard_well fuse_guard_well;

typedef struct fuse_guard {
    const char *output;
    int t_out;
    bool store_existed;
    char created_top[4200];      /* a new store: it or its first new parent */
    int nwells, nstarted;
    fuse_guard_well *wells;
} fuse_guard;

/* Before anything is written into opt->output: records what exists for the
 * wells (paths "ROW/COL") this run writes, and sweeps stale temporaries. */
ts_status fuse_guard_begin(fuse_guard *g, const ts_fuse_options *opt, const char *const *wells,
                           int nwells, ts_error *err);

/* Well i (in begin's order) is about to be written / is complete. */
void fuse_guard_start_well(fuse_guard *g, int i);
void fuse_guard_well_done(fuse_guard *g, int i);

/* The run failed with st (message in err): undoes what it can, and adds to
 * the message what could not be undone. Returns st. */
ts_status fuse_guard_fail(fuse_guard *g, ts_status st, ts_error *err);

void fuse_guard_free(fuse_guard *g);

#endif
