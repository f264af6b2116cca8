/*
 * The fuse pipeline: a scheduler that streams tile strips in and blocks out
 * under a memory bound, with every thread doing whichever stage is due.
 *
 * Work is a sequence of *units* (one per (t, z, band)); unit u covers band
 * u % nbands of the plan (a run may take a range of the bands). A unit's strips (one per plan slot: the rows of a
 * tile that fall in the band, all channels) are loaded in plan order, i.e.
 * by first block, so the blocks of a band become ready from left to right;
 * a block is blended, encoded and written as soon as its strips are in, and
 * a strip is freed when the last block using it has blended (between that
 * block's process and write stages). Loading runs a
 * few blocks ahead of the earliest unfinished block (across a band's end,
 * into the next band) while earlier blocks blend, within the byte budget.
 * So each tile is read once per band, peak memory is set by the budget and
 * block size (not by the canvas, not even its width), and reads, blending,
 * encoding and writes overlap across threads. The result of a block depends
 * only on its strips, blended in tile order: identical bytes whatever the
 * thread count or timing.
 */
#ifndef TS_FUSE_PIPELINE_H
#define TS_FUSE_PIPELINE_H

#include <stddef.h>
#include <stdint.h>

#include "common/pool.h"
#include "fuse/plan.h"
#include "tessera/tessera.h"

typedef struct fuse_strip {
    int64_t r0, r1;  /* oriented tile rows held */
    int64_t w;       /* oriented tile width */
    int nc;          /* channels held; 0 = the tile has no plane for this (t, z) */
    ts_dtype dtype;  /* TS_UINT16 or TS_FLOAT32 */
    void *data;      /* the buffer (released by free_strip) */
    /* Oriented row i (r0 <= i < r1) of channel c starts at element
     * origin + c * plane + (i - r0) * row_step of data: a strip read straight
     * from the tile keeps the chunk's layout, so row_step is negative when
     * the tile is flipped upside down. */
    int64_t origin, plane, row_step;
    size_t bytes;
    void *owner;     /* the stage's record of a buffer data is a view into (NULL: data is the strip's own) */
} fuse_strip;

typedef struct fuse_stage_fns {
    /* Estimated bytes of a strip before loading (for the budget). */
    size_t (*strip_estimate)(void *user, int64_t unit, const fuse_slot *slot);
    /* Loads one strip (fills *strip; data from malloc unless free_strip). */
    ts_status (*load)(void *user, int64_t unit, const fuse_slot *slot, fuse_strip *strip,
                      ts_error *err);
    /* Blends block bx of unit `unit` into the worker's own buffers.
     * strips[k] is the strip of slot band->block_slots[band->block_start[bx]
     * + k], readable until process returns. */
    ts_status (*process)(void *user, int worker, int64_t unit, int64_t bx,
                         const fuse_strip *const *strips, int nstrips, ts_error *err);
    /* Encodes and writes what process blended, on the same worker, after
     * the strips no other block needs are freed: held through the encode
     * and write, most of a block's time, the strips of two blocks were most
     * of the peak RSS at the default --memory (docs/fuse.md "Memory").
     * NULL: process is the whole of a block. */
    ts_status (*write)(void *user, int worker, int64_t unit, int64_t bx, ts_error *err);
    void *user;
    /* Releases strip->data; NULL = free(). */
    void (*free_strip)(void *user, fuse_strip *strip);
} fuse_stage_fns;

typedef struct fuse_pipeline_stats {
    int64_t strips_loaded;
    int64_t blocks_done;
    size_t peak_strip_bytes;
} fuse_pipeline_stats;

/* Runs the blocks [g0, g1) of each of ntz (t, z) planes, a block numbered
 * band * nbx + bx (all blocks in one process; an MPI rank's share under
 * MPI: runs of blocks, so that a plate of few bands still splits evenly),
 * on pool's threads. A band whose blocks are partly in the range has only
 * the strips its blocks in the range use loaded. The stage functions get
 * the unit's number in the whole plan, (t, z) * nbands + band. At most
 * max_blocks blocks are processed at once (their buffers; >= 1). budget
 * bounds the bytes of strips held (except that the strips the earliest
 * unfinished block needs are always loaded, so the pipeline cannot stall). */
ts_status fuse_pipeline_run_blocks(const fuse_plan *plan, int64_t ntz, int64_t g0, int64_t g1,
                                   const fuse_stage_fns *fns, ts_pool *pool, size_t budget, int max_blocks,
                                   ts_progress_fn progress, void *progress_user, const char *stage,
                                   fuse_pipeline_stats *stats, ts_error *err);

/* Runs fn(user, i, worker, err) for i in [0, n): called from a process
 * stage, it lets pipeline workers that have nothing else to do (no block
 * ready, no strip to load) run items too, so the pieces of one large block
 * (the chunks a 0.4 block is written as) do not all wait on one thread.
 * worker is the index of the thread running the item (for its scratch).
 * Returns when every item has finished; the first failure stops items not
 * yet started and is returned. Outside a pipeline it runs the items in
 * order on the calling thread. */
typedef ts_status (*fuse_item_fn)(void *user, int64_t i, int worker, ts_error *err);
ts_status fuse_pipeline_share(int64_t n, fuse_item_fn fn, void *user, int worker, ts_error *err);

#endif
