/* File-system helpers. Every write of output data goes through
 * ts_write_file_atomic: a temporary name in the same directory, then rename,
 * so a killed run leaves files complete or absent, never half-written. */
#ifndef TS_COMMON_FS_H
#define TS_COMMON_FS_H

#include <stddef.h>
#include <stdbool.h>
#include <stdint.h>
#include "tessera/tessera.h"

/* mkdir -p. */
ts_status ts_mkdirs(const char *path, ts_error *err);

/* Writes data to path via a temporary "<path>.tmp.<pid>.<salt>.<n>" (created
 * with O_EXCL, so never shared with another writer) + rename; creates parent
 * directories. */
ts_status ts_write_file_atomic(const char *path, const void *data, size_t size, ts_error *err);

/* ts_write_file_atomic of the concatenation of parts (a document formatted
 * in pieces is written without joining them first). */
typedef struct ts_file_part {
    const void *data;
    size_t size;
} ts_file_part;
ts_status ts_write_file_atomic_parts(const char *path, const ts_file_part *parts, size_t nparts, ts_error *err);

/* Creates an empty directory beside path named like ts_write_file_atomic's
 * temporaries ("<path>.tmp.<pid>.<salt>.<n>", mkdir'ed, so never shared
 * with another writer) and puts its name into tmp (n bytes): a place to
 * build a directory tree that is renamed into place when complete, and that
 * ts_sweep_temp_files removes once its writer is dead. */
ts_status ts_make_temp_dir(const char *path, char *tmp, size_t n, ts_error *err);

/* Reads a whole file into a malloc'd buffer (NUL-terminated for text use;
 * *size excludes the NUL). TS_ERR_IO with the path when missing. */
ts_status ts_read_file(const char *path, void **data, size_t *size, ts_error *err);

/* Like ts_read_file but a missing file is not an error: *found = false. */
ts_status ts_read_file_opt(const char *path, void **data, size_t *size, bool *found, ts_error *err);

/* The rest of fd, a regular file of fsize bytes (ts_open_regular's), as
 * ts_read_file_max reads it (NUL-terminated; more than max_size bytes is
 * TS_ERR_CORRUPT naming path); closes fd. For a caller that looks at the
 * size before deciding how to read. */
ts_status ts_read_fd(int fd, const char *path, uint64_t fsize, uint64_t max_size, void **data, size_t *size,
                     ts_error *err);

/* Like ts_read_file_opt, but a file of more than max_size bytes is
 * TS_ERR_CORRUPT naming it, found from its size before anything is read. */
ts_status ts_read_file_max(const char *path, uint64_t max_size, void **data, size_t *size, bool *found,
                           ts_error *err);

/* Opens path for reading when it is a regular file (*found = false when it
 * does not exist): a FIFO, device, socket or directory is TS_ERR_IO naming
 * it and what it is, at once (opening a FIFO would wait for a writer
 * forever). *file_size from fstat. The readers above go through it. */
ts_status ts_open_regular(const char *path, int *fd, uint64_t *file_size, bool *found, ts_error *err);

bool ts_path_exists(const char *path);
bool ts_is_dir(const char *path);

/* Joins a and b with one '/' into out (size n). Returns false if truncated. */
bool ts_path_join(char *out, size_t n, const char *a, const char *b);

/* Removes a directory tree (rm -rf). Missing is not an error. */
ts_status ts_remove_tree(const char *path, ts_error *err);

/* True when name (a file name, no directory) has the form of
 * ts_write_file_atomic's temporaries: "<name>.tmp.<pid>.<hex salt>.<n>". */
bool ts_is_temp_name(const char *name);

/* The writer pid in such a name (its last ".tmp."), or -1 when name is not
 * of that form. */
long ts_temp_name_pid(const char *name);

/* Removes the temporaries a killed writer left in dir (and, if recursive,
 * its subdirectories): regular files of ts_is_temp_name's form whose writer
 * pid is not a live process on this host (a live one, e.g. another MPI rank
 * or a concurrent job on this node, may still rename it), and directories
 * of that form (ts_make_temp_dir's) of such a writer, with all they hold.
 * Nothing else is touched (a symlink is never followed or removed). A missing dir is not an error; *removed (may be NULL) counts. */
ts_status ts_sweep_temp_files(const char *dir, bool recursive, size_t *removed, ts_error *err);

/* The same for the temporaries of one file only ("<path>.tmp.*" of a dead
 * writer next to path): for outputs written alone into a directory the user
 * owns (a shifts file), where other files are none of tessera's business. */
ts_status ts_sweep_temp_files_of(const char *path, size_t *removed, ts_error *err);

/* Opens a new temporary file beside path, of ts_write_file_atomic's name
 * form (so a dead writer's is swept), O_EXCL, for writing; its name goes
 * into tmp (n bytes). Returns the descriptor, or -1 with errno set. */
int ts_open_temp_file(const char *path, char *tmp, size_t n);

/* Process pid's state letter (R, S, Z, ...) and start time (clock ticks
 * after boot) from /proc/PID/stat; false where it cannot be read. Either
 * out-pointer may be NULL. */
bool ts_process_stat(long pid, char *state, unsigned long long *start);

/* Whether process pid is alive on this host (this process included; a
 * zombie is not). */
bool ts_process_alive(long pid);

/* Puts the complete tree `built` at `path` (a sibling of it, on the same file
 * system): a new path is a rename; an existing one is exchanged with it in
 * one step where the file system can (renameat2 RENAME_EXCHANGE), else moved
 * into `aside` (a path inside a temporary directory the caller owns) first.
 * Afterwards `built` (exchanged) or `aside` holds the old tree, for the
 * caller to remove. On a failed second rename the old tree is put back. */
ts_status ts_replace_tree(const char *built, const char *path, const char *aside, bool *old_at_built,
                          ts_error *err);

/* The outermost directory of path (path included) that does not exist yet,
 * a dangling symlink counting as existing: what mkdir -p path creates. */
void ts_first_missing(const char *path, char *top, size_t n);

#endif
