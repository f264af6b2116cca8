/*
 * Fuse over MPI ranks: which bands a rank owns, and the pipeline driven
 * over them only. Each rank owns a contiguous range of whole bands (block
 * rows, i.e. shard rows at every pyramid level: plan.c makes the block
 * divisible by 2^levels), balanced by canvas rows, for every (t, z). No
 * shard or 0.4 chunk is written by two ranks, and a block's bytes depend
 * only on its strips, so the store is the one a single process writes.
 */
#ifndef TS_FUSE_RANKS_H
#define TS_FUSE_RANKS_H

#include "fuse/fuse_internal.h"
#include "mpi/dist.h"

/* Bands [*b0, *b1) of plan owned by rank `rank` of `size`. */
void fuse_rank_bands(const fuse_plan *plan, int rank, int size, int64_t *b0, int64_t *b1);

/* The units of bands [b0, b1) of every (t, z), as a pipeline of their own:
 * *view is plan restricted to those bands (it shares plan's bands; never
 * free it) and *fns forwards to inner with the units renumbered as the
 * whole plan's (what the stage functions index by). Returns the number of
 * units to run. rank_fns must outlive the run. */
typedef struct fuse_rank_fns {
    fuse_stage_fns inner;
    int64_t b0, nlocal, nbands;
} fuse_rank_fns;
int64_t fuse_rank_pipeline(const fuse_plan *plan, int64_t ntz, int64_t b0, int64_t b1,
                           const fuse_stage_fns *inner, fuse_rank_fns *rank_fns,
                           fuse_plan *view, fuse_stage_fns *fns);

/* Ranks other than the first open the output arrays the first one created
 * (same handles and chunk sides as fuse_output_open gives). */
ts_status fuse_output_attach(fuse_well *W, const char *image_path, ts_error *err);

#endif
