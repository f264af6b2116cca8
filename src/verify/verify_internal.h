/* tessera verify, shared by its files: what is to be checked (units: an OME
 * image, a plate position or a bare array), the problems found, in an order
 * that does not depend on the threads, and the counters.
 *
 *   walk.c    the store -> units (plate positions, images, arrays of a group)
 *   open.c    a unit -> its open arrays (all levels), metadata problems
 *   block.c   one chunk, or one part of one shard: read, index, decode
 *   verify.c  batches of units through the thread pool, problems, result
 */
#ifndef TS_VERIFY_INTERNAL_H
#define TS_VERIFY_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "common/error.h"
#include "ome/ome.h"
#include "zarr/zarr.h"

typedef enum { VF_POSITION = 1, VF_IMAGE, VF_ARRAY } vf_unit_kind;

typedef struct vf_unit {
    vf_unit_kind kind;
    int w, p;        /* VF_POSITION: well and position of the plate */
    char *rel;       /* path relative to the store ("" = the store itself) */
} vf_unit;

/* Where a problem sits in the store, for a stable order: the unit, the
 * level (negative: found while listing), the block, the inner chunk. */
typedef struct vf_where {
    int64_t unit;
    int level;
    int64_t block;
    int64_t inner;
} vf_where;

typedef struct vf_problem {
    vf_where at;
    ts_verify_problem p;
} vf_problem;

/* One open array of the current batch, and its share of the batch's items:
 * `parts` items per block (shards are split so few big shards still keep
 * every thread busy), items [first_item, first_item + nblocks * parts). */
typedef struct vf_array {
    tz_array *arr;
    int64_t unit;
    int level;
    char *rel;
    int64_t grid[TZ_MAX_DIM];
    int64_t nblocks;
    int64_t parts;
    int64_t first_item;
} vf_array;

/* A shard index entry by position in the file, for the overlap check. */
typedef struct vf_entry_pos {
    uint64_t off;
    int64_t lin;
} vf_entry_pos;

/* One worker's scratch: bounded by one stored piece. */
typedef struct vf_scratch {
    tz_decoder *dec;
    unsigned char *buf;      /* encoded bytes of one chunk / inner chunk */
    size_t cap;
    uint64_t *index;         /* a shard index */
    vf_entry_pos *order;     /* its non-empty entries by offset */
    int64_t index_cap;       /* entries */
} vf_scratch;

typedef struct vf_ctx {
    const ts_verify_options *opt;
    char root[4096];
    ts_plate *plate;
    vf_unit *units;
    int64_t nunits, units_cap;

    pthread_mutex_t mu;      /* problems */
    vf_problem *problems;
    int64_t nproblems_kept, problems_cap;
    int64_t nproblems;       /* all, kept or not */
    bool have_cutoff;        /* problems after `cutoff` are only counted */
    vf_where cutoff;

    atomic_llong images, arrays, blocks, chunks, empty, absent, bytes_read, bytes_decoded;
    vf_scratch *scratch;     /* per worker */
    int nworkers;
} vf_ctx;

/* Records a problem (thread-safe). path and key may be NULL (""). */
ts_status vf_report(vf_ctx *c, vf_where at, ts_verify_kind kind, const char *path, const char *key,
                    int64_t inner, const char *fmt, ...) TS_PRINTF(7, 8);
/* The kind a failed open or decode of a stored piece counts as. */
ts_verify_kind vf_kind_of(ts_status st);

/* walk.c: fills c->units (and c->plate), reporting listing problems. An
 * error only when the store is not a zarr node at all (or out of memory). */
ts_status vf_discover(vf_ctx *c, ts_error *err);
void vf_units_free(vf_ctx *c);
/* a/b into out (n bytes); an empty a or b is left out, so the store's
 * root joins as itself and relative paths stay relative. */
void vf_join(char *out, size_t n, const char *a, const char *b);

/* open.c: opens the arrays of unit u into out[0..TS_MAX_LEVELS), reporting
 * what is missing; *n arrays opened. */
ts_status vf_open_unit(vf_ctx *c, int64_t u, vf_array *out, int *n, ts_error *err);

/* block.c: checks part `part` of block `block` of a (every part of an
 * unsharded chunk is the whole chunk). */
ts_status vf_check_block(vf_ctx *c, const vf_array *a, int64_t block, int64_t part, int worker,
                         ts_error *err);

#endif
