/* One writer per output at a time. A run that writes a store (fuse, import,
 * simulate, stitch) holds "<output>.lock" beside it for the whole run: a
 * small file naming the host, pid and process start of the writer, created
 * whole by link(2) (or O_EXCL where links are not supported), so two runs
 * never both believe they hold it. A lock whose writer is gone (same host,
 * pid dead or reused by a later process, or a previous boot) is taken over;
 * a live one, or one of another host (whose processes this one cannot see),
 * is TS_ERR_BUSY with a message naming that process and the lock file.
 *
 * The lock lives beside the output, not inside it: the output itself is
 * replaced whole by import and simulate (built beside, swapped in). Within
 * one process a second acquire of a lock the process already holds (stitch
 * takes it before estimate, its fuse step again) succeeds as a nested hold
 * that releases nothing. */
#ifndef TS_COMMON_LOCK_H
#define TS_COMMON_LOCK_H

#include <stdbool.h>

#include "tessera/tessera.h"

typedef struct ts_output_lock {
    char path[4200];        /* the lock file */
    char content[512];      /* what this run wrote into it */
    char created_top[4200]; /* the outermost parent directory this lock created, or "" */
    bool held;              /* this handle created the lock file (and removes it) */
} ts_output_lock;

/* Takes the lock of output (a path that may not exist yet; its missing
 * parent directories are created). command names the run ("fuse") in the
 * lock, for the message another run gets. */
ts_status ts_output_lock_acquire(ts_output_lock *lock, const char *output, const char *command, ts_error *err);

/* Removes the lock file if this handle holds it and it is still this run's,
 * and the parent directories acquire created if they are empty (a failed
 * run leaves nothing behind). Safe on a zeroed or already-released lock. */
void ts_output_lock_release(ts_output_lock *lock);

#endif
