/* Private parts of the fuse stage shared by its source files. */
#ifndef TS_FUSE_INTERNAL_H
#define TS_FUSE_INTERNAL_H

#include <pthread.h>

#include "common/error.h"
#include "common/pool.h"
#include "fuse/kernels.h"
#include "fuse/pipeline.h"
#include "fuse/plan.h"
#include "ome/ome.h"
#include "zarr/zarr.h"

#define FUSE_MAX_LEVELS 17
#define FUSE_RECYCLE_MAX 64

/* Per-worker scratch, allocated once per well. */
typedef struct fuse_scratch {
    float *num, *den;            /* block x block */
    void *level[FUSE_MAX_LEVELS];/* C x (block>>k)^2 of the output dtype (mmapped) */
    size_t level_bytes[FUSE_MAX_LEVELS];
    void *chunk;                 /* one 0.4 chunk */
} fuse_scratch;

/* --t-out into an existing mosaic: its format, canvas and block rule. */
typedef struct existing_out {
    bool present;
    int zarr_format;
    int64_t T, C, Z, H, W, chunk, shard;
    ts_dtype dtype;
    int levels;                  /* extra pyramid levels it has (arrays 1..levels) */
    tz_codec compressor;         /* its level 0's bytes->bytes codec (id 0: none) */
} existing_out;

/* Everything one well's fusion needs. */
typedef struct fuse_well {
    const ts_fuse_options *opt;
    ts_ome_version format;       /* output format (an existing output's, for --t-out) */
    const ts_plate *plate;
    int w;                       /* well index in the plate */
    ts_orientation orient;
    const ts_fuse_kernels *K;
    fuse_tile *tiles;
    int ntiles;
    int64_t canvas_h, canvas_w; /* from the tiles (the layout may be larger: --t-out) */
    existing_out existing;
    ts_image_meta image_meta;    /* of the well's first position */
    /* Weight images per distinct oriented tile shape. */
    int nshapes;
    int64_t (*shapes)[2];
    float **weights;
    fuse_plan *plan;
    fuse_layout L;
    fuse_sizing sizing;          /* what L was derived from (fuse.c) */
    ts_dtype out_dtype;
    size_t out_elem;
    /* Units: (t, z, band), t slowest. t_in is read, t_out written. */
    int64_t nt;                  /* timepoints processed */
    int64_t t_in0, t_out0;       /* first input / output T index */
    tz_array *out[FUSE_MAX_LEVELS];
    fuse_scratch *scratch;       /* per worker */
    int nworkers;
    /* Recycled strip mappings (strips come in a few sizes): saves the page
     * faults of a fresh mapping per strip. Bounded by recycle_cap bytes. */
    pthread_mutex_t recycle_mu;
    int nrecycled;
    void *recycled[FUSE_RECYCLE_MAX];
    size_t recycled_size[FUSE_RECYCLE_MAX];
    size_t recycled_bytes, recycle_cap;
    /* Tile planes decoded once and shared by the strips of the bands a
     * tile spans (blend.c), at most kept_cap bytes; guarded by recycle_mu. */
    struct kept_plane *kept;
    size_t kept_bytes, kept_cap;
    /* Of each (t, z), the blocks band * nbx + bx in [block_begin, block_end)
     * are this process's (all of them in one process). */
    int64_t block_begin, block_end;
    /* --resume (resume.c): blocks an interrupted run completed (per unit x
     * block), strips the others need (per (t, z) x band slot). NULL: none. */
    uint8_t *resume_done, *resume_needed;
    int64_t *resume_slot_off;    /* band b's slots start at [b] */
    int64_t resume_blocks_kept;
    int run_index, run_count;    /* this well is number run_index + 1 of the run's run_count (progress) */
    /* Label images (label.c): not blended but the covering tile of the
     * largest weight taken (--blend label, or a label image of the fields). */
    bool label;
    /* A label image of the fields' NGFF labels: its path under each
     * position's image and under the mosaic ("labels/cells"); "" for the
     * images themselves. */
    char sub[160];
    /* Of a label image of the fields: its index among the image's labels,
     * all of whose names the last one lists in the mosaic's labels group. */
    int label_index, nlabel_names;
    const char (*label_names)[TS_LABEL_NAME_MAX];
    /* --device gpu/auto (gpu_block.c, docs/gpu.md): the CUDA backend's
     * context for this well; NULL: the CPU kernels. */
    struct ts_gpu_fuse *gpu;
} fuse_well;

/* tiles.c: the tiles of a well, placed (origins, oriented shapes, T/C/Z);
 * every position of the well must be placed and every tile the shifts file
 * lists for it must be a position. */
ts_status fuse_well_tiles(fuse_well *W, const void *well_shifts, ts_pool *pool, ts_error *err);
struct ts_shifts;
/* Before any well is prepared (after the --wells filter): every well of
 * the plate is on disk and in the shifts file; without --wells, every well
 * the shifts file places is in the plate. */
ts_status fuse_check_wells(const ts_fuse_options *opt, const ts_plate *plate, const struct ts_shifts *shifts,
                           ts_error *err);
/* The shifts file's tile_shape (when it has one) is that of every
 * prepared tile after orientation. */
ts_status fuse_check_tile_shape(const fuse_well *W, const struct ts_shifts *shifts, ts_error *err);

/* The run manifest a new store's temporary directory holds (fuse.c). */
#define FUSE_MANIFEST "fuse-run.txt"

/* resume.c: checks which of this process's blocks (W->block_begin ..
 * block_end of each (t, z)) are complete in the output arrays (W->out,
 * open) and which strips the rest need. */
ts_status fuse_resume_scan(fuse_well *W, ts_pool *pool, ts_error *err);
bool fuse_resume_block_done(const fuse_well *W, int64_t unit, int64_t bx);
bool fuse_resume_strip_needed(const fuse_well *W, int64_t unit, const fuse_slot *slot);
void fuse_resume_free(fuse_well *W);

/* blend.c: pipeline stages. */
void fuse_stage_fns_init(fuse_well *W, fuse_stage_fns *fns);
/* A strip (or tile plane) buffer of `bytes`: malloc'd when small, else a
 * mapping, taken from the pool of freed ones of its size when there is one
 * (none: pooled mappings of other sizes, at least `bytes` of them, are
 * unmapped first); fuse_strip_free returns it (to the pool, within
 * W->recycle_cap). */
void *fuse_strip_alloc(fuse_well *W, size_t bytes);
void fuse_strip_free(fuse_well *W, void *p, size_t bytes);
/* Unmaps the recycled strip buffers and kept tile planes (after the
 * pipeline). */
void fuse_recycle_drain(fuse_well *W);
/* Tests only (test_fuse_trim): called while a trimmed tile plane's pages
 * are given back (blend.c, kept_release), outside recycle_mu, so a test can
 * widen that window; NULL otherwise. */
extern void (*fuse_test_trim_window)(void);
ts_status fuse_weights_init(fuse_well *W, ts_error *err);
/* Bytes of the weight images (after fuse_weights_init): part of --memory. */
size_t fuse_weights_bytes(const fuse_well *W);
void fuse_weights_free(fuse_well *W);

/* label.c: label images (docs/fuse.md "Label images"). */
/* Whether well w's images are label images (the first position's has
 * NGFF image-label metadata): fused as labels whatever --blend says. */
bool fuse_label_plate(const ts_plate *plate, int w);
/* After fuse_well_tiles: every tile is of one integer dtype of at most 32
 * bits, which the mosaic keeps (out_dtype). */
ts_status fuse_label_check_tiles(fuse_well *W, ts_error *err);
/* One oriented row of a label tile into 32-bit labels (sign-extended
 * bits for signed dtypes, truncated back on output). */
void fuse_label_convert_row(ts_dtype dt, uint32_t *dst, const void *raw, int64_t at, int64_t step, int64_t n);
/* One strip row over one block row: the kernels' label_u16/label_u32. */
void fuse_label_row(const fuse_well *W, float *best, uint32_t *lab, const fuse_strip *s, int64_t at,
                    const float *w, int64_t n);
/* n labels into the output dtype. */
void fuse_label_store(void *out, ts_dtype dt, const uint32_t *lab, int64_t n);
/* The mosaic's label image metadata at image_path (multiscales of 2x2
 * modes, image-label with the input's colours and properties, and for a
 * label image of the fields its source and, from the last one, the labels
 * group listing them). */
ts_status fuse_label_write_meta(const fuse_well *W, const char *image_path, ts_image_meta *im, ts_error *err);
/* A label image of the fields has the tiles of the image: the same shapes. */
ts_status fuse_label_check_shapes(const fuse_well *image, const fuse_well *label, ts_error *err);
/* Image path of position p as this well reads it (with W->sub). */
void fuse_tile_image_path(const fuse_well *W, int p, char *out, size_t n);
/* Image metadata and level-0 array of position p (with W->sub). */
ts_status fuse_tile_image_meta(const fuse_well *W, int p, ts_image_meta *meta, ts_error *err);
ts_status fuse_tile_open(const fuse_well *W, int p, ts_image_meta *meta, tz_array **arr, ts_error *err);

/* gpu_block.c: the GPU seam. fuse_gpu_start makes W->gpu when the
 * options ask for the GPU (and, for auto, there is one); NULL otherwise. */
ts_status fuse_gpu_start(fuse_well *W, ts_error *err);
void fuse_gpu_stop(fuse_well *W);
/* Every level of block bx of band `band` into sc->level[] on the GPU. */
ts_status fuse_gpu_block(fuse_well *W, fuse_scratch *sc, int worker, int64_t band, int64_t bx,
                         const fuse_strip *const *strips, int nstrips, ts_error *err);

/* output.c: output arrays and block writes. */
/* Opens the arrays of every level at image_path: create, the first rank:
 * new arrays, or with --t-out the existing ones checked against this run;
 * otherwise (the other ranks) those the first rank made. */
ts_status fuse_output_open(fuse_well *W, const char *image_path, bool create, ts_error *err);
void fuse_output_close(fuse_well *W);
ts_status fuse_write_block(fuse_well *W, fuse_scratch *sc, int64_t t_out, int64_t z,
                           int64_t band, int64_t bx, ts_error *err);
/* The valid extent (rows *h, columns *w) of block bx of band `band` at
 * level k: the block side there, clipped at the level's canvas edge. The
 * CPU downsampling and the GPU's (gpu_block.c) both take it from here, so
 * their edge blocks cannot come to differ. */
void fuse_block_extent(const fuse_layout *L, int k, int64_t band, int64_t bx, int64_t *h, int64_t *w);

#endif
