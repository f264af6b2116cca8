/* Leaves nothing half-written behind a fuse run. Before the first write it
 * records which parts of the output already exist and sweeps the stale
 * temporaries of killed runs from the directories the run writes (so a
 * re-run gives a clean run's bytes). An image that replaces an existing one
 * (not --t-out) is built in a temporary directory beside it and swapped in
 * when complete, so the old image stays as it was until then. When the run
 * fails the guard removes what the run created: the whole store if the run
 * created it, else the well images (and their new well/row groups) it
 * created and the temporary directories of replacements not swapped in.
 * Timepoints written by --t-out into an existing image cannot be undone:
 * the error then says which image may be partly overwritten (or, when the
 * run failed before any rank wrote to it, that it is left as it was). */
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

/* Well i (in begin's order) is about to be written: the path its image is
 * written at goes into write_path (n bytes). That is the image path itself,
 * except when the run replaces an existing image (not --t-out): then it is
 * "0" inside a new temporary directory beside the image ("0" too, as the
 * image's metadata names it by its directory). */
ts_status fuse_guard_start_well(fuse_guard *g, int i, char *write_path, size_t n, ts_error *err);

/* From here on any rank may write well i's data: its arrays are created,
 * or opened and checked, on the first rank, and every rank has agreed.
 * Before it, a failed --t-out run has not touched the existing image and
 * says so. */
void fuse_guard_writing(fuse_guard *g, int i);

/* Well i's image is complete (every rank's data and its metadata written):
 * a replacement is swapped in (old image renamed into the temporary
 * directory, the new one renamed to the image path, the directory with the
 * old image removed). On failure the old image is put back where possible
 * and the message says where it is otherwise. */
ts_status fuse_guard_finish_well(fuse_guard *g, int i, ts_error *err);

/* The run failed with st (message in err): undoes what it can, and adds to
 * the message what could not be undone. Returns st. */
ts_status fuse_guard_fail(fuse_guard *g, ts_status st, ts_error *err);

void fuse_guard_free(fuse_guard *g);

#endif
