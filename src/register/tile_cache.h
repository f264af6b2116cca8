/* A bounded cache of decoded, oriented tiles shared by the registration
 * workers. Each tile is read once as long as the budget allows: estimate
 * knows how many pairs use each tile and schedules pairs so that a tile's
 * uses are close together; a tile is dropped as soon as its last use is
 * done, and least-recently-used idle tiles are evicted when over budget.
 * A tile being loaded by one worker is waited for, not loaded twice. */
#ifndef TS_REGISTER_TILE_CACHE_H
#define TS_REGISTER_TILE_CACHE_H

#include <stddef.h>
#include <stdint.h>

#include "register/register.h"
#include "tessera/tessera.h"

/* Loads tile `id` into a malloc'd buffer: *data its samples, of *dtype
 * (estimate holds a tile in its own dtype, ts_samples), *bytes its size. */
typedef ts_status (*ts_tile_load_fn)(void *user, int64_t id, void **data, ts_dtype *dtype, size_t *bytes,
                                     ts_error *err);

typedef struct ts_tile_cache ts_tile_cache;

typedef struct ts_tile_cache_stats {
    int64_t loads, hits;
    size_t peak_bytes;
} ts_tile_cache_stats;

/* uses[id]: how many times tile id will be requested (copied). */
ts_tile_cache *ts_tile_cache_create(int64_t ntiles, const int *uses, size_t budget,
                                    ts_tile_load_fn load, void *user);
/* Returns the tile's samples, loading it if needed; pair with one
 * ts_tile_cache_release. */
ts_status ts_tile_cache_get(ts_tile_cache *c, int64_t id, ts_samples *tile, ts_error *err);
void ts_tile_cache_release(ts_tile_cache *c, int64_t id);
/* Changes how many more times tile id will be requested by delta (a later
 * pass announcing its uses, or giving back ones it kept and will not make):
 * an idle tile left with no use to come is dropped. */
void ts_tile_cache_add_uses(ts_tile_cache *c, int64_t id, int delta);
/* How the cache gives a tile's buffer back when it drops it (default:
 * free): for a loader whose buffers are not each malloc'd. */
typedef void (*ts_tile_release_fn)(void *user, int64_t id, void *data);
void ts_tile_cache_set_release(ts_tile_cache *c, ts_tile_release_fn release);
ts_tile_cache_stats ts_tile_cache_get_stats(ts_tile_cache *c);
/* The cache a later pass (the stage pass, the diagonal bridges) reads its
 * tiles through: kept, the first pass's, which holds the tiles it kept for
 * the pass, with the pass's uses added; else a new one of budget bytes
 * (*own, for the caller to destroy; NULL when kept serves) reading with
 * load and giving buffers back with release (NULL: free). NULL: out of
 * memory. */
ts_tile_cache *ts_tile_cache_for_pass(ts_tile_cache *kept, int64_t ntiles, const int *uses, size_t budget,
                                      ts_tile_load_fn load, ts_tile_release_fn release, void *user,
                                      ts_tile_cache **own);
void ts_tile_cache_destroy(ts_tile_cache *c);

#endif
