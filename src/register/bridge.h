/* Diagonal bridges (bridge.c; docs/register.md, "Diagonal bridges"): a
 * tile that its grid pairs leave outside its well's largest group (every
 * neighbour blank, or a few tiles cut off by blank ones) is registered
 * with its diagonal neighbours, whose corners overlap it, by the stage
 * model's confined search (reregister.c) and its acceptance. */
#ifndef TS_REGISTER_BRIDGE_H
#define TS_REGISTER_BRIDGE_H

#include <stdbool.h>
#include <stdint.h>

#include "common/pool.h"
#include "register/register.h"
#include "register/stage_model.h"
#include "register/tile_cache.h"

/* One diagonal pair. */
typedef struct ts_bridge {
    int well, a, b;         /* tiles within the well: a is the upper one */
    ts_register_result res; /* matched where the search was accepted (origin b - a) */
    bool contested;         /* refused although the corner matched (a window maximum, not on its
                               edge, at the sure level, NCC 0.8, which blank corners do not
                               reach): a rival too close, or (res.unfitted) no sub-pixel fit.
                               The tile has content that no pair places; res.ncc and
                               res.ncc_second are the maximum's and the rival's NCC (-1: none) */
} ts_bridge;

typedef struct ts_bridge_pass {
    int h, w;                       /* tiles after orientation */
    const ts_register_options *reg; /* the first pass's pre-filters and min_ncc */
    const ts_stage_model *model;    /* both directions valid, else no bridge is tried */
    ts_pool *pool;
    int nwells;
    const int64_t *tile_base;       /* first tile id of each well */
    int64_t ntiles;
    const int (*cell)[2];           /* each tile's grid cell (gx, gy), by tile id */
    const double (*guess)[2];       /* NULL, or each tile's guessed origin (the model is of the
                                       measurements minus the guess, as stage_model.h's) */
    /* The grid pairs as tile ids, and whether each is trusted (what groups
     * the tiles). */
    const int64_t (*pair_tiles)[2];
    const bool *trusted;
    int64_t npairs;
    /* The first pass's cache, holding the tiles it kept for the stage pass
     * (the bridges add their uses to it), or NULL: a cache of its own,
     * cache_bytes, tiles read with load. */
    ts_tile_cache *cache;
    size_t cache_bytes;
    ts_tile_load_fn load;
    ts_tile_release_fn release;     /* of load's buffers */
    void *load_user;
} ts_bridge_pass;

/* The diagonal pairs tried (*out, malloc'd, in (well, a, b) order; the
 * accepted ones matched) and the tiles decoded for them (*tile_reads).
 * Independent of the thread count. */
ts_status ts_bridge_tiles(const ts_bridge_pass *bp, ts_bridge **out, int64_t *nout, int64_t *tile_reads,
                          ts_error *err);

#endif
