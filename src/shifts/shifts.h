/*
 * The shifts file: the interface between estimate, solve and fuse (and the
 * truth written by simulate). YAML, read and written with libyaml:
 *
 *   total_translation:           # integer [y, x] origins, min over a well = 0
 *     A/1/000000: [y, x]
 *   confidence:                  # per well: edge id -> [[xa,ya],[xb,yb],c]
 *     A/1:
 *       '0': [[0, 0], [1, 0], 0.93]
 *   tile_shape: [H, W]           # after orientation
 *   orientation: {flipud: false, fliplr: true, rot90: 1}
 *   tiles:                       # every tile, also those without pairs
 *     A/1: ['000000', '001000']
 *   pairs:                       # a, b, dy, dx (origin b - origin a), confidence
 *     A/1:
 *     - [A/1/000000, A/1/001000, 0.4, 1898.2, 0.93]
 *   positions:                   # float [y, x] origins, to 1e-6 px (extra key)
 *     A/1/000000: [0.0, 0.0]
 *   residuals:                   # per well: [ry, rx] per pair, (p_b - p_a) - d, to 1e-6 px
 *     A/1: [[0.01, -0.2]]
 *   outliers:                    # per well: list of pair indices (extra key)
 *     A/1: [3, 17]
 *   names_yx: false              # position names are YYYXXX (extra key)
 *   nominal_pitch: [py, px]      # the pitch estimate solved with (extra key)
 *
 * Only total_translation is required on read (files of the old tool have it
 * and confidence only); everything else is optional.
 */
#ifndef TS_SHIFTS_H
#define TS_SHIFTS_H

#include <stdbool.h>
#include <stdint.h>

#include "tessera/tessera.h"

typedef struct ts_shift_pair {
    int a, b;          /* tile indices within the well */
    double dy, dx;     /* measured origin b - origin a */
    double confidence; /* [0, 1] */
    bool outlier;      /* set by the solve */
    double ry, rx;     /* residual after the solve, (p_b - p_a) - d; NaN if unknown */
} ts_shift_pair;

/* A confidence entry of a file without pairs (the old tool's `confidence`
 * key): grid coordinates of the two tiles and the confidence. Files with
 * pairs derive `confidence` from the pairs instead. */
typedef struct ts_shift_edge {
    int xa, ya, xb, yb;
    double confidence;
} ts_shift_edge;

typedef struct ts_well_shifts {
    char well[32];           /* "A/1" */
    int ntiles;
    char (*tiles)[32];       /* position names, e.g. "012034" */
    int64_t (*origin)[2];    /* integer [y, x], min over the well = 0 */
    double (*position)[2];   /* float [y, x] (solve output), may be NULL */
    bool *has_origin;        /* false: tile listed but not in total_translation */
    int npairs;
    ts_shift_pair *pairs;
    int nedges;              /* old-tool confidence entries (only when npairs == 0) */
    ts_shift_edge *edges;
    /* Private bookkeeping of ts_shifts_add_*: capacities and the name -> tile
     * hash index (tiles appended by hand are still found, by a linear scan). */
    int tile_cap, pair_cap, edge_cap;
    struct ts_name_index *index;
} ts_well_shifts;

typedef struct ts_shifts {
    int nwells;
    ts_well_shifts *wells;
    bool has_tile_shape;
    int tile_shape[2];       /* H, W after orientation */
    bool has_orientation;
    ts_orientation orientation;
    bool names_yx;           /* position names are YYYXXX */
    /* The pitch estimate solved with (tile extent minus the nominal
     * overlap, px, [y, x]), so that tessera solve places disconnected
     * groups as estimate did; files without it fall back to the median
     * pair (extra key nominal_pitch). */
    bool has_nominal_pitch;
    double nominal_pitch[2];
    int well_cap;            /* private: capacity of wells */
} ts_shifts;

ts_shifts *ts_shifts_new(void);
void ts_shifts_free(ts_shifts *s);

/* Adds (or finds) a well; returns its index or -1 on allocation failure. */
int ts_shifts_add_well(ts_shifts *s, const char *well);
/* Adds a tile to well w; returns its index or -1. */
int ts_shifts_add_tile(ts_shifts *s, int w, const char *name);
int ts_shifts_find_well(const ts_shifts *s, const char *well);
int ts_shifts_find_tile(const ts_shifts *s, int w, const char *name);
/* Adds a pair to well w; returns its index or -1. */
int ts_shifts_add_pair(ts_shifts *s, int w, int a, int b, double dy, double dx, double conf);

/* Adds an old-tool confidence entry to well w; returns its index or -1. */
int ts_shifts_add_edge(ts_shifts *s, int w, int xa, int ya, int xb, int yb, double conf);
/* Allocates well w's position array (NaN = unknown) if it is NULL; false on
 * allocation failure. */
bool ts_shifts_ensure_positions(ts_shifts *s, int w);

/* Grid coordinates from a position name: XXXYYY (or YYYXXX when names_yx).
 * Returns false if the name is not 6 digits. */
bool ts_position_grid(const char *name, bool names_yx, int *gx, int *gy);

/* Where pair p of well w is drawn and how far off it is (preview, report):
 * tiles at their solved float positions when the file has them, else their
 * origins; the seam runs across the middle of the two tiles' overlap
 * (along y for a left/right pair, along x for a top/bottom one) from
 * (seg[0], seg[1]) to (seg[2], seg[3]), canvas px [y, x]; *residual is
 * |(p_b - p_a) - d| (the solve's residual when the file has it). False when
 * the tile shape or either tile's origin is unknown. */
bool ts_pair_seam(const ts_shifts *s, const ts_well_shifts *w, const ts_shift_pair *p, double seg[4],
                  double *residual);

/* Beyond this a coordinate or shift is a broken file, not a scan (2^30 px
 * is a 1 km scan at 1 um/px): the reader refuses it, naming key and line. */
#define TS_SHIFTS_MAX_PX 1073741824.0

/* Reads a shifts file. Refused with TS_ERR_FORMAT naming the line: malformed
 * YAML, a repeated mapping key, nesting deeper than 32, non-finite or absurd
 * (beyond TS_SHIFTS_MAX_PX) coordinates and shifts, a pair confidence
 * outside [0, 1], a position listed twice in `tiles`. */
ts_status ts_shifts_read(const char *path, ts_shifts **out, ts_error *err);

/* A shifts file used as a guess (ts_solve_options.guess): the expected
 * origin [y, x] of tile `tile` of well `well`, its float position if the
 * file has one, else its total_translation. TS_ERR_FORMAT naming the tile and
 * the file (path) when the guess does not place it; TS_ERR_NUMERIC when
 * the origin is absurd. */
ts_status ts_shifts_guess_origin(const ts_shifts *guess, const char *path, const char *well, const char *tile,
                                 double yx[2], ts_error *err);
/* Writes atomically (temporary name, then rename). */
ts_status ts_shifts_write(const char *path, const ts_shifts *s, ts_error *err);

#endif
