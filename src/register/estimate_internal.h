/* Estimate internals shared between its files. */
#ifndef TS_REGISTER_ESTIMATE_INTERNAL_H
#define TS_REGISTER_ESTIMATE_INTERNAL_H

#include "ome/ome.h"
#include "shifts/shifts.h"
#include "tessera/tessera.h"

/* The registration's max_shift from opt->max_shift (0: none, or half the
 * smaller overlap with a guess). (guess.c) */
double ts_estimate_max_shift(const ts_estimate_options *opt);

/* Reads the guess file `path` (opt->solve.guess) and the guessed origin of
 * every tile of the plate into *origin (malloc'd, indexed tile_base[well] +
 * position). TS_ERR_FORMAT naming the first tile the guess does not place.
 * *guess (the file, for the solve's targets) is set even on failure:
 * free it with ts_shifts_free. (guess.c) */
ts_status ts_estimate_read_guess(const char *path, const ts_plate *plate, const int64_t *tile_base,
                                 int64_t ntiles, ts_shifts **guess, double (**origin)[2], ts_error *err);

/* ---- stage positions (positions.c, graph.c; docs/register.md) ---- */

/* The expected origin of every tile from opt->positions (TS_POSITIONS_METADATA:
 * each image's NGFF translation / scale; TS_POSITIONS_FILE: the Fiji
 * TileConfiguration opt->positions_file, the same file for every well),
 * in each well's frame (min 0 per axis), into *origin (malloc'd, indexed
 * tile_base[well] + position) and as a guess for the solve (*guess, float
 * positions of every tile; ts_shifts_free). A tile without a position:
 * TS_ERR_FORMAT naming it (or the file's line that matches nothing). */
ts_status ts_estimate_read_positions(const ts_estimate_options *opt, const ts_plate *plate, const int64_t *tile_base,
                                     int64_t ntiles, ts_shifts **guess, double (**origin)[2], ts_error *err);

/* One neighbour pair found from the positions. */
typedef struct ts_tile_pair {
    int a, b;           /* tiles within the well; a is left of (dir 0) or above (dir 1) b */
    int dir;            /* ts_pair_dir: 0 left/right, 1 top/bottom */
    int gx, gy;         /* tile a's grid cell (origin / pitch, rounded): the schedule's bands */
    int rank_a, rank_b; /* private: canonical order */
} ts_tile_pair;

/* The pairs of a well's n tiles of h x w px at origins o ([y, x]): tiles
 * whose footprints overlap by max(4 px, 2% of the tile) along one axis and
 * half the tile across it, left/right or top/bottom by the larger offset
 * relative to the tile; in canonical order (tiles by grid cell of pitch,
 * row by row, right pairs before lower ones), which for a regular grid is
 * the grid names' order. Two tiles within 1 px of each other: TS_ERR_FORMAT
 * naming them (names: the well's position names). *out: malloc'd. */
ts_status ts_pairs_from_positions(const double (*o)[2], int n, int h, int w, double pitch_y, double pitch_x,
                                  const char *well, const char (*names)[32], ts_tile_pair **out, int64_t *nout,
                                  ts_error *err);

/* ---- quality check (qc.c, docs/qc.md) ---- */

/* One neighbour pair as the quality check sees it. */
typedef struct ts_qc_pair {
    int well, a, b;     /* well index, tile indices within it */
    int dir;            /* 0: x (right neighbour), 1: y (lower neighbour),
                           TS_QC_DIAGONAL: a diagonal bridge (bridge.h) */
    bool matched, outlier;
    bool disputed;      /* an outlier the stage model disputes (ts_stage_disputes) */
    double confidence;
    double offset;      /* measured origin b - a along the pair's axis, px */
    double residual;    /* 2-D residual after the solve, px (0 if unmatched) */
    bool refused;       /* matched, refused by the stage pass (matched false) */
    bool contested;     /* a diagonal bridge refused although its corner matched (bridge.h) */
    bool unfitted;      /* ... for want of a sub-pixel fit (else a rival came too close) */
    double ncc, rival;  /* contested: the corner's maximum NCC and the best other one's (-1: none) */
} ts_qc_pair;

#define TS_QC_DIAGONAL 2

bool ts_qc_trusted(const ts_qc_pair *p);
bool ts_qc_overlap_wrong(const ts_overlap_qc *q);
bool ts_qc_measurement_reliable(const ts_overlap_qc *q);
bool ts_qc_low_coverage(const ts_overlap_qc *q);
/* Implausible, and every implausible well only for a disputed outlier
 * (ts_estimate_well_qc.disputed): not the overlap's doing. */
bool ts_qc_disputes_only(const ts_estimate_result *r);
/* Median and 1.4826 MAD of v[0, n) (v is sorted; scratch: n doubles). */
void ts_qc_median_spread(double *v, int64_t n, double *scratch, double *median, double *spread);

/* Fills r's overlap, well_qc (allocated), nwell_qc, disputed_pairs and verdict from the
 * pairs. tile_base: first tile id of each well of plate. content: by tile
 * id, the share of content (content.h) of each tile without a matched
 * pair, or NULL (not measured). */
ts_status ts_estimate_qc(const ts_qc_pair *p, int64_t n, const ts_plate *plate, const int64_t *tile_base,
                         int h, int w, int nominal_x, int nominal_y, const double *content,
                         ts_estimate_result *r, ts_error *err);

/* The one-line message of a failed check: what was measured, what to pass
 * (same_nominal: the user gave one --overlap for both axes). */
void ts_estimate_qc_message(const ts_estimate_result *r, bool same_nominal, char *buf, size_t cap);

#endif
