/* A tree built beside its final place and swapped in when complete, so a
 * failed or killed run leaves what was at the final path as it was: import
 * and simulate build a whole plate this way, fuse each well image it
 * replaces. The build happens in a temporary directory of
 * ts_make_temp_dir's form beside the final path (a dead writer's is swept
 * by the next run), under the final path's own name, since OME metadata
 * may name an image by its directory. */
#ifndef TS_COMMON_STAGED_H
#define TS_COMMON_STAGED_H

#include <stdbool.h>

#include "tessera/tessera.h"

typedef struct ts_staged {
    char final[4200];  /* where the tree goes */
    char dir[4300];    /* the temporary directory beside it, "" when none */
    char build[8704];  /* where to build: dir/<name of final> */
    bool replacing;    /* something was at final when the build began */
    bool keep;         /* dir holds the only copy of the old tree: never removed */
} ts_staged;

/* Sweeps dead writers' temporaries of final and makes the directory. */
ts_status ts_staged_begin(ts_staged *s, const char *final, ts_error *err);

/* The tree at s->build is complete: it takes final's place and what was
 * there is removed. On failure the message says where the old tree is if it
 * could not be put back. */
ts_status ts_staged_commit(ts_staged *s, ts_error *err);

/* The run failed: removes the partial tree (not the old one). Appends to
 * err's message (may be NULL) what could not be removed. */
void ts_staged_abort(ts_staged *s, ts_error *err);

#endif
