/*
 * The fuse planner: canvas, storage blocks, Y bands, and which tiles touch
 * which band and block. Pure geometry, no I/O, so it is unit-tested alone.
 *
 * Vocabulary. A *block* is the unit one worker blends and writes: all
 * channels of one (t, z) over a square of block x block canvas pixels. In
 * OME-Zarr 0.5 a block is exactly one shard (1, C, 1, block, block); in 0.4
 * it is written as its (1,1,1,chunk,chunk) chunks. A *band* is one row of
 * blocks. Bands are block-aligned by construction and fuse_check_band
 * asserts it before anything is written: two writers touching one shard
 * would silently drop each other's chunks (seed PR 18).
 */
#ifndef TS_FUSE_PLAN_H
#define TS_FUSE_PLAN_H

#include <stddef.h>
#include <stdint.h>

#include "tessera/tessera.h"

/* One tile as placed on the canvas (after orientation). */
typedef struct fuse_tile {
    int position;          /* index of the position in the plate well */
    int64_t oy, ox;        /* integer canvas origin */
    int64_t h, w;          /* oriented size */
    int64_t raw_h, raw_w;  /* stored size */
    int64_t T, C, Z;
    ts_dtype dtype;
    int shape_id;          /* index of its (h, w) in the weights cache */
    /* Where the stored array is and how its dimensions map to t, c, z, y, x,
     * read once from the image metadata so strip loads open the array only. */
    int axis[5], ndim;
    char level0[32];       /* path of resolution level 0 inside the image */
} fuse_tile;

typedef struct fuse_layout {
    int64_t canvas_h, canvas_w;
    int64_t T, C, Z;       /* output extents (T: the array's, possibly > written) */
    int64_t chunk;         /* inner chunk side (0.5) or chunk side (0.4), px */
    int64_t block;         /* block side, px: a multiple of chunk */
    int64_t nbands, nbx;   /* blocks along Y and X */
    int levels;            /* extra pyramid levels */
    /* Chunk side of level k: gcd(chunk, block >> k), so every level's
     * chunks tile its block (block >> k) exactly. */
    int64_t level_chunk[17];
} fuse_layout;

/* Canvas size = max(origin + size) over tiles; TS_ERR_NUMERIC for negative
 * origins or absurd sizes. */
ts_status fuse_canvas(const fuse_tile *tiles, int ntiles, int64_t *h, int64_t *w, ts_error *err);

/* Inputs of the block-size choice. */
typedef struct fuse_sizing {
    int64_t canvas_h, canvas_w;
    int64_t C;
    int64_t tile_h, tile_w;   /* largest oriented tile */
    size_t out_elem;          /* 2 (uint16) or 4 (float32) */
    int chunk;                /* px */
    int shard;                /* chunks per block side; 0 = auto */
    int levels;
    size_t memory;            /* working-memory bound, bytes */
} fuse_sizing;

/* The automatic block size does not depend on the threads (a store must
 * come out the same whatever --threads or the MPI ranks): it is sized for
 * FUSE_LAYOUT_BLOCKS block buffers in --memory, and small canvases get at
 * least that many blocks. A run then blends as many blocks at once as
 * its threads and --memory allow (fuse_blocks_in_flight). */
#define FUSE_LAYOUT_BLOCKS 8
/* ... and no larger than this many px a side: a block is the unit of
 * memory (its accumulators) and of MPI work, so a block that grew with the
 * canvas made peak RSS grow with it (77 / 272 / 641 MB for 1x / 4x / 16x
 * the area at the default --memory) and left 3 bands for 2 ranks on a
 * 219 MP canvas; at 2048 px the same plates fused no slower (strips read
 * +7%) in 113 MB (docs/fuse.md, "Blocks, bands and why they are aligned"). */
#define FUSE_AUTO_BLOCK_PX 2048

/* Rows of a block blended at a time: num/den of R x block float32 pairs
 * sized to stay in cache (about 256 KiB). */
int64_t fuse_row_group(int64_t block);

/* Working memory of one worker for a block of side `block` px, and the
 * tile strips a block needs, as the pipeline allocates them. */
size_t fuse_block_bytes(const fuse_sizing *s, int64_t block);
size_t fuse_strip_bytes(const fuse_sizing *s, int64_t block);
/* Block buffers of side `block` that `memory` holds beside the strips of
 * two blocks; at least 1. */
int fuse_blocks_in_flight(const fuse_sizing *s, int64_t block, size_t memory);

/* What of --memory the sizing may use: an eighth (and up to 32 MiB more)
 * is kept for what it does not count (the program itself, codec buffers,
 * allocator slack). */
size_t fuse_usable_memory(size_t memory);

/* What one tile needs in memory whatever the block size (fuse_tile_check):
 * its blending weights, float32 per oriented pixel (one image per distinct
 * tile shape, held for the whole well), and one decoded plane of its
 * channels (nc x raw_h x raw_w of in_elem bytes: what a strip read decodes
 * when the tile is stored as one chunk, as tiles usually are). */
size_t fuse_tile_weights_bytes(int64_t h, int64_t w);
size_t fuse_tile_plane_bytes(int64_t nc, int64_t raw_h, int64_t raw_w, size_t in_elem);

/* Fills the layout: block = S * chunk with S = shard if given, else the
 * largest S with S * chunk <= FUSE_AUTO_BLOCK_PX (at least 1) that the
 * canvas needs, that fits the memory bound and that leaves at least
 * FUSE_LAYOUT_BLOCKS blocks when the canvas has room for them; rounded up
 * to a multiple of 2^levels when that stays within the cap and the memory
 * bound, else to make the block divisible by 2^levels. */
ts_status fuse_layout_init(fuse_layout *L, const fuse_sizing *s, ts_error *err);

/* Asserts that the band [y0, y1) starts on a block (shard) boundary and
 * spans exactly one block row (the last one may be shorter, ending at the
 * canvas edge). */
ts_status fuse_check_band(const fuse_layout *L, int64_t y0, int64_t y1, ts_error *err);

/* A tile's part in one band. */
typedef struct fuse_slot {
    int tile;              /* index into the tile array */
    int64_t r0, r1;        /* oriented tile rows that fall in the band */
    int64_t bx0, bx1;      /* blocks [bx0, bx1] it overlaps */
} fuse_slot;

typedef struct fuse_band {
    int64_t y0, y1;
    int nslots;
    fuse_slot *slots;      /* sorted by (bx0, tile): the order strips are loaded */
    /* Per block bx: slot indices sorted by tile index (the fixed blending
     * order that makes the output independent of thread timing). */
    int *block_start;      /* nbx + 1 offsets into block_slots */
    int *block_slots;
} fuse_band;

typedef struct fuse_plan {
    fuse_layout L;
    int nbands;
    fuse_band *bands;
} fuse_plan;

ts_status fuse_plan_build(const fuse_layout *L, const fuse_tile *tiles, int ntiles,
                          fuse_plan **out, ts_error *err);

/* The work of each block, cost[band * nbx + bx] (nbands * nbx entries):
 * the tile rows blended into it (rows x block width per tile touching it)
 * plus its area in the canvas (normalised, downsampled, encoded), 0 for a
 * block no tile touches (all fill: nothing is encoded or stored). */
void fuse_block_costs(const fuse_plan *p, int64_t *cost);

/* The blocks [*g0, *g1) of each (t, z) (numbered band * nbx + bx) that
 * rank `rank` of `size` fuses: contiguous runs in rank order, covering
 * every block, the same split on every rank; all of them for one process.
 * A run costs its blocks' fuse_block_costs plus the area of every tile
 * (tiles: the plan's) it reads, once (its decoding, paid by each rank that
 * reads the tile); the runs are those of the smallest largest cost. A
 * block is one shard at every level (0.5; its own chunks in 0.4), so no
 * shard or chunk is written by two ranks even where a band is split
 * between two. */
ts_status fuse_rank_blocks(const fuse_plan *p, const fuse_tile *tiles, int rank, int size, int64_t *g0, int64_t *g1,
                           ts_error *err);
void fuse_plan_free(fuse_plan *p);

#endif
