/*
 * The OME-NGFF layer: HCS plates in OME-Zarr 0.4 (zarr v2) and 0.5 (zarr v3).
 *
 * Reading: the version is detected from disk; wells come from the plate's
 * `wells` list and positions from each well's `images` list, so a plate with
 * 170,000 positions is listed from (1 + number of wells) small JSON files,
 * without opening any position's metadata. Tile arrays are opened on demand.
 *
 * Writing: plate -> well -> image groups with `multiscales` (axes t,c,z,y,x,
 * units, scale transforms, one or more levels) and `omero` channels.
 */
#ifndef TS_OME_H
#define TS_OME_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tessera/tessera.h"
#include "common/lock.h"
#include "common/staged.h"
#include "zarr/zarr.h"

#define TS_MAX_CHANNELS 64

typedef struct ts_well_info {
    char path[32];      /* "A/1" */
    char row[16], col[16];
    int npositions;
    char (*positions)[32]; /* image paths inside the well, e.g. "012034" */
    /* The plate lists the well but its group metadata is absent (partial
     * copies of real plates): listed with no positions, not an error. */
    bool metadata_missing;
} ts_well_info;

#define TS_MAX_LEVELS 32

/* Image-level metadata carried from input to output. */
typedef struct ts_image_meta {
    int nchannels;        /* read: omero.channels entries (0 without omero) */
    char channel_labels[TS_MAX_CHANNELS][64];
    char channel_colors[TS_MAX_CHANNELS][8];  /* "RRGGBB" or "" */
    double scale[5];      /* t, c, z, y, x of dataset 0 */
    /* Write side: a translation after the scale of every level (the
     * physical position of the first pixel, e.g. import's stage position). */
    bool has_translation;
    double translation[5];
    char space_unit[32];  /* e.g. "micrometer" ("" = none) */
    char time_unit[32];
    /* Read side: the array's axes as listed in multiscales.axes. axis_index
     * gives the array dimension of t, c, z, y, x (-1 when absent; real
     * images are often (c, z, y, x) or (c, y, x)). Writing always uses all
     * five in that order. */
    int ndim;
    int axis_index[5];
    /* Resolution levels (multiscales.datasets), full resolution first. */
    int nlevels;
    char level_paths[TS_MAX_LEVELS][32];
    /* omero window per channel: min, max, start, end. has_window false: the
     * writer uses 0..65535. */
    bool has_window[TS_MAX_CHANNELS];
    double window[TS_MAX_CHANNELS][4];
    /* Write side, for label images (labels.c): levels are 2x2 modes, not
     * means (multiscales type "mode"), no omero; extra_attrs, when not
     * NULL, is a JSON object merged into the image's OME attributes (its
     * "image-label"). Reading leaves both unset. */
    bool label_pyramid;
    const char *extra_attrs;
} ts_image_meta;

typedef struct ts_plate {
    char path[4096];
    ts_ome_version version;
    char name[256];
    int nrows, ncols;
    char (*row_names)[16];
    char (*col_names)[16];
    int nwells;
    ts_well_info *wells;
    int field_count;      /* plate field_count if given, else max positions */
} ts_plate;

/* Opens a plate; an unknown OME version or a store that is not a plate is a
 * TS_ERR_FORMAT/TS_ERR_UNSUPPORTED naming the path and key. */
ts_status ts_plate_open(const char *path, ts_plate **out, ts_error *err);
void ts_plate_close(ts_plate *plate);

/* Index of a well by path ("A/1"), or -1. */
int ts_plate_find_well(const ts_plate *plate, const char *well_path);

/* Keeps only the wells named in a comma list ("A/1,B/3"); an unknown name is
 * an error naming it. NULL or "" keeps all. */
ts_status ts_plate_filter_wells(ts_plate *plate, const char *list, ts_error *err);

/* For the stages that process wells (estimate, fuse), after the filter: a
 * listed well without its group on disk (metadata_missing) is a
 * TS_ERR_FORMAT naming it, not a well silently skipped. */
ts_status ts_plate_require_wells(const ts_plate *plate, ts_error *err);

/* The zarr format of an OME version's stores (0.4: 2, 0.5: 3; 0 unknown):
 * what a plate's arrays are opened as (tz_array_open_as). */
int ts_ome_zarr_format(ts_ome_version v);

/* Reads the image metadata (multiscales + omero) of well w, position p. */
ts_status ts_plate_image_meta(const ts_plate *plate, int w, int p, ts_image_meta *meta,
                              ts_error *err);

/* Opens array `level` ("0" = full resolution) of well w, position p, and
 * gives the image metadata it was opened by (meta may be NULL): the one
 * way to open a tile, reading its metadata once. The array's rank must
 * match the image's axes (and v3 dimension_names, when given, their
 * names); otherwise TS_ERR_FORMAT naming the array path. */
ts_status ts_plate_open_array(const ts_plate *plate, int w, int p, int level, ts_image_meta *meta,
                              tz_array **out, ts_error *err);

/* Splits a well name ROW/COLUMN into row and col (16 bytes each); both
 * must be alphanumeric (OME-NGFF), else TS_ERR_ARG naming the well. Every
 * writer of plates checks its wells with it before writing anything. */
ts_status ts_well_split(const char *well, char *row, char *col, ts_error *err);

/* Path of the image group of well w, position p ("<plate>/A/1/000000"). */
void ts_plate_image_path(const ts_plate *plate, int w, int p, char *out, size_t n);

/* The same for an image group given by path (not necessarily in a plate),
 * e.g. a fused well image "<out>/A/1/0". */
ts_status ts_image_read_meta(const char *image_path, ts_ome_version *version,
                             ts_image_meta *meta, ts_error *err);
ts_status ts_image_open_array(const char *image_path, const ts_image_meta *meta, int level,
                              tz_array **out, ts_error *err);

/* Size of t, c, z, y, x in an array of this image: 1 for an axis the
 * image lacks (a cyx tile is T = Z = 1). */
void ts_image_extent(const ts_image_meta *meta, const tz_array_meta *am, int64_t extent[5]);

/* Readers take a tile's planes as c planes of y rows of x (a box read keeps
 * the array's dimension order): an image whose y and x are missing, or whose
 * axes put x before y or c after y, is refused (TS_ERR_UNSUPPORTED /
 * TS_ERR_FORMAT naming `path`), the same way by estimate, fuse and preview. */
ts_status ts_image_check_layout(const ts_image_meta *meta, const char *path, ts_error *err);

/* The read box, in the array's own dimensions, of a box given per t, c, z,
 * y, x (start5/count5), for an image whose multiscales axes put t, c, z, y,
 * x at axis_index (-1: absent) of ndim dimensions (ts_image_meta's
 * axis_index and ndim; a reader may keep just these per tile): an absent axis takes only start 0, count 1. The
 * data read keep the array's dimension order. Out of range: TS_ERR_ARG
 * naming `path` and the axis. */
ts_status ts_image_box(const int axis_index[5], int ndim, const tz_array_meta *am,
                       const int64_t start5[5], const int64_t count5[5], int64_t start[TZ_MAX_DIM],
                       int64_t count[TZ_MAX_DIM], const char *path, ts_error *err);

/* ---- writing ---- */

typedef struct ts_plate_layout {
    const char *path;
    ts_ome_version version;
    const char *name;            /* plate name, may be NULL */
    int nwells;
    const char *const *wells;    /* "A/1", ... */
    /* positions per well: names (all wells share the same list when
     * positions_per_well is NULL). */
    int npositions;
    const char *const *positions;
    const int *positions_per_well;          /* optional, per well count */
    const char *const *const *well_positions; /* optional, per well names */
    int field_count;
} ts_plate_layout;

/* Writes plate and well group metadata (not the images). */
ts_status ts_plate_write_layout(const ts_plate_layout *layout, ts_error *err);

/* Writes an image group with multiscales + omero for `nlevels` levels, level
 * k at path "k" with scale meta->scale * 2^k in y and x. Arrays are created
 * by the caller (tz_array_create at "<image>/<k>"). */
ts_status ts_image_write_meta(const char *image_path, ts_ome_version version,
                              const ts_image_meta *meta, int nlevels, ts_error *err);

/* ---- labels (labels.c) ---- */

#define TS_LABEL_NAME_MAX 64
#define TS_MAX_LABEL_IMAGES 16

/* The names in the `labels` group of an image (`{"labels": ["cells"]}`),
 * at most max; *n = 0 when the image has no labels group. A name that is
 * not one path component, or listed twice: TS_ERR_FORMAT naming the file. */
ts_status ts_labels_list(const char *image_path, char (*names)[TS_LABEL_NAME_MAX], int max, int *n,
                         ts_error *err);
/* {"image-label": {...}} as JSON text (malloc'd; NULL: out of memory) for
 * a label image of the given version: the colours and properties of the
 * label image at source_label_path (NULL or without them: none), and
 * source.image when source_image is not NULL ("../../" under labels/). */
char *ts_label_attrs(const char *source_label_path, ts_ome_version version, const char *source_image);
/* Whether the image at image_path has image-label metadata (false when
 * it has not, or its metadata does not read: its readers report that). */
bool ts_image_is_label(const char *image_path);
/* Writes the group <image_path>/labels listing names. */
ts_status ts_labels_write_group(const char *image_path, ts_ome_version version,
                                const char (*names)[TS_LABEL_NAME_MAX], int n, ts_error *err);

/* Fills a default ts_image_meta: n channels labelled "Channel k", scale 1. */
void ts_image_meta_default(ts_image_meta *meta, int nchannels);


/* What an existing output may be (store_own.c). A run replaces or adds to
 * a store only when it is a plate of the kind it writes. */
typedef enum ts_store_kind { TS_STORE_TILE_PLATE, TS_STORE_MOSAIC_PLATE } ts_store_kind;

/* Nothing at path (or an empty directory): *exists = false. Else a plate of
 * kind want (its version into *version, may be NULL), or TS_ERR_ARG naming
 * what it is instead. */
ts_status ts_store_check_kind(const char *path, ts_store_kind want, ts_ome_version *version, bool *exists,
                              ts_error *err);

/* Every file under path is tessera's to delete (zarr metadata of groups and
 * arrays, chunk keys inside arrays, tessera temporaries); else TS_ERR_ARG
 * naming the first foreign file, directory or symlink. */
ts_status ts_tree_check_own(const char *path, ts_error *err);


/* Writing a plate of tiles (import, simulate) at output: begin checks the
 * path against the run's inputs (common/outpath.h), takes output's lock,
 * checks that what is there may be replaced (a plate of tiles, all of it
 * tessera's), and stages the new plate beside it: the run writes the plate
 * at po->staged.build. end(st) swaps it in when st is TS_OK (the old plate
 * is removed only then), else removes the partial one; it releases the lock
 * and returns the final status. */
typedef struct ts_plate_output {
    ts_output_lock lock;
    ts_staged staged;
    bool active;
} ts_plate_output;

ts_status ts_plate_output_begin(ts_plate_output *po, const char *output, const char *command,
                                const char *const *inputs, int ninputs, ts_error *err);
ts_status ts_plate_output_end(ts_plate_output *po, ts_status st, ts_error *err);

#endif
