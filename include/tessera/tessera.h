/*
 * tessera: stitch tiled microscope scans into OME-Zarr mosaics.
 *
 * The one public header. Each pipeline stage has an options struct with an
 * `_init` function that fills the defaults, and one entry point that returns
 * a ts_status and, on failure, a message in a caller-owned ts_error naming the
 * file, key or value at fault. The library keeps no global state, never
 * prints and never exits.
 */
#ifndef TESSERA_H
#define TESSERA_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------ errors */

typedef enum ts_status {
    TS_OK = 0,
    TS_ERR_ARG,         /* a bad option or argument value */
    TS_ERR_IO,          /* a file could not be read, written or renamed */
    TS_ERR_FORMAT,      /* malformed metadata (JSON, YAML, zarr, OME) */
    TS_ERR_UNSUPPORTED, /* valid but not handled (codec, dtype, version) */
    TS_ERR_CORRUPT,     /* data that fails a check: CRC, truncation, size */
    TS_ERR_CODEC,       /* a compressor or decompressor failed */
    TS_ERR_NOMEM,
    TS_ERR_NUMERIC,     /* NaN, absurd shift, singular system */
    TS_ERR_INTERNAL,
    TS_ERR_BUSY         /* the output is being written by another run (its lock) */
} ts_status;

typedef struct ts_error {
    ts_status code;
    char message[1024];
} ts_error;

const char *ts_version(void);
const char *ts_status_name(ts_status code);

/* --------------------------------------------------------- shared vocabulary */

typedef enum ts_dtype {
    TS_DTYPE_INVALID = 0,
    TS_BOOL,
    TS_INT8, TS_INT16, TS_INT32, TS_INT64,
    TS_UINT8, TS_UINT16, TS_UINT32, TS_UINT64,
    TS_FLOAT32, TS_FLOAT64
} ts_dtype;

size_t ts_dtype_size(ts_dtype dtype);
const char *ts_dtype_name(ts_dtype dtype); /* "uint16", ... */
ts_dtype ts_dtype_from_name(const char *name); /* TS_DTYPE_INVALID if unknown */

/* OME-Zarr version of a store: 0.4 is zarr v2, 0.5 is zarr v3. */
typedef enum ts_ome_version {
    TS_OME_UNKNOWN = 0,
    TS_OME_04 = 4,
    TS_OME_05 = 5
} ts_ome_version;

/* Compression of written chunks. */
typedef enum ts_codec {
    TS_CODEC_ZSTD = 0,
    TS_CODEC_BLOSC_LZ4,
    TS_CODEC_BLOSC_ZSTD,
    TS_CODEC_GZIP,
    TS_CODEC_NONE
} ts_codec;

const char *ts_codec_name(ts_codec codec);          /* "zstd", "blosc-lz4", ... */
int ts_codec_from_name(const char *name, ts_codec *out); /* 0 or -1 */
/* Compression level: 0 in an options struct is the codec's default (zstd 3,
 * blosc 5, gzip 5); zstd takes 1..22, blosc-lz4, blosc-zstd and gzip 1..9,
 * none no level. The level written is the one stored in the metadata. */
int ts_codec_default_level(ts_codec codec);
ts_status ts_codec_check_level(ts_codec codec, int level, ts_error *err);
/* "NAME[:LEVEL]" (zstd, blosc-zstd:3): TS_ERR_ARG naming the text at fault;
 * *level 0 when none is given. */
ts_status ts_codec_parse(const char *text, ts_codec *codec, int *level, ts_error *err);

/* How raw tiles map onto stage axes: flipud, then fliplr, then rot90 k times
 * (numpy's rot90 on the (Y, X) plane, counter-clockwise). Odd k swaps Y/X. */
typedef struct ts_orientation {
    bool flipud;
    bool fliplr;
    int rot90; /* 0..3 */
} ts_orientation;

/* ------------------------------------------------------------ progress hook */

/* Optional progress callback: stage name, done, total. The CLI draws it on a
 * terminal; the library only calls it. */
typedef void (*ts_progress_fn)(void *user, const char *stage, int64_t done, int64_t total);

/* ------------------------------------------------- distribution (MPI ranks) */

/* A run spread over processes (MPI ranks): estimate and fuse split their work
 * across the ranks of the communicator and every rank returns the same status
 * and message. NULL in an options struct means one process. Created by the
 * caller after MPI_Init (the library never initialises MPI). */
typedef struct ts_dist ts_dist;

/* True when the library was built with MPI. */
bool ts_dist_mpi_available(void);
/* A distribution over the ranks of *(const MPI_Comm *)mpi_comm (duplicated:
 * the library's messages never mix with the caller's). Collective.
 * TS_ERR_UNSUPPORTED when built without MPI. */
ts_status ts_dist_mpi_create(const void *mpi_comm, ts_dist **out, ts_error *err);
/* Collective (frees the duplicated communicator); NULL is a no-op. */
void ts_dist_free(ts_dist *dist);
int ts_dist_rank(const ts_dist *dist); /* 0 for NULL */
int ts_dist_size(const ts_dist *dist); /* 1 for NULL */

/* ---------------------------------------------------------------- simulate */

typedef struct ts_simulate_options {
    const char *output;       /* plate store to create (required) */
    const char *wells;        /* "A/1,B/2"; default "A/1" */
    int grid_cols, grid_rows; /* default 4 x 3 */
    int tile_h, tile_w;       /* default 256 x 256 */
    int overlap;              /* px, default tile/8 */
    double jitter;            /* stage jitter, px (uniform +-), default 3 */
    int channels, timepoints, z; /* default 1 each */
    double noise;             /* sensor noise sigma in grey levels, default 20 */
    double blank_fraction;    /* tiles with no features, default 0 */
    double missing_fraction;  /* positions never acquired, default 0 */
    ts_ome_version format;    /* default TS_OME_05 */
    ts_dtype dtype;           /* default TS_UINT16 */
    ts_codec codec;           /* default zstd */
    int codec_level;          /* 0 = the codec's default (ts_codec_check_level) */
    uint64_t seed;            /* default 0 */
    const char *truth;        /* write true origins here (shifts format), or NULL */
    /* Orientation the "camera" applies to each stored tile; estimate/fuse
     * undo it with the same flags. Default: none. */
    ts_orientation acquisition;
    bool names_yx;            /* name positions YYYXXX instead of XXXYYY */
    double pixel_size_um;     /* physical scale of Y and X, default 0.65 */
    int threads;              /* 0 = all cores */
    double vignetting;        /* fraction of light lost in the tile corners, default 0.15 */
    double background;        /* camera offset, grey levels, default 100 */
} ts_simulate_options;

void ts_simulate_options_init(ts_simulate_options *opt);
ts_status ts_simulate(const ts_simulate_options *opt, ts_error *err);

/* ------------------------------------------------------------------ import */

/* A folder of TIFF tiles as a plate (docs/import.md): every file of `input`
 * whose name matches `pattern` becomes one position of one well, named
 * XXXYYY from its grid column and row, array 0 shaped (1, C, 1, Y, X) with
 * the TIFF's dtype (uint8 or uint16) and one channel per page. OME-TIFF
 * tiles give the pixel size, channel names and stage position (written as
 * the NGFF translation) from their OME-XML. */

/* How a running {index} fills the grid: row by row or column by column,
 * each starting from the same side (ROW, COLUMN) or turning back at the end
 * of each row / column (SNAKE_*, serpentine scans). */
typedef enum ts_import_order {
    TS_ORDER_ROW = 0,
    TS_ORDER_COLUMN,
    TS_ORDER_SNAKE_ROW,
    TS_ORDER_SNAKE_COLUMN
} ts_import_order;

typedef struct ts_import_options {
    const char *input;        /* folder of TIFF tiles (required) */
    const char *output;       /* plate store to create (required; an existing plate is replaced) */
    const char *pattern;      /* file names: literal text with {row} and {col}, or {index};
                                 default "r{row}_c{col}.tif" */
    const char *well;         /* default "A/1" */
    int first_index;          /* what {row}, {col}, {index} count from: 0 (default) or 1 */
    int grid_cols, grid_rows; /* required with {index}; with {row}/{col}: 0 =
                                 from the largest row and column found, else a bound */
    ts_import_order order;    /* {index} only; default TS_ORDER_ROW */
    bool names_yx;            /* name positions YYYXXX instead of XXXYYY */
    ts_ome_version format;    /* default TS_OME_05 */
    int chunk;                /* chunk side, px; 0 (default) = one chunk per tile plane */
    ts_codec codec;           /* default zstd */
    int codec_level;          /* 0 = the codec's default (ts_codec_check_level) */
    double scale_y, scale_x;  /* pixel size in micrometres; 0 (default): the OME-XML's
                                 PhysicalSizeY/X, else 1 */
    int threads;              /* 0 = all cores */
    ts_progress_fn progress;  /* optional */
    void *progress_user;
} ts_import_options;

/* What an import wrote, for the CLI's summary. */
typedef struct ts_import_result {
    int64_t tiles;            /* positions written */
    int grid_cols, grid_rows; /* the grid the tiles were placed on */
    int64_t missing;          /* grid cells without a tile */
    int64_t tile_h, tile_w;
    int channels;             /* pages per TIFF */
    ts_dtype dtype;
    double scale_y, scale_x;  /* the pixel size written, micrometres */
    bool scale_from_ome;      /* ... taken from the OME-XML */
    bool names_from_ome;      /* channel labels taken from the OME-XML */
    bool positions;           /* stage positions written (NGFF translations) */
    bool position_unit_assumed; /* ... whose OME unit was "reference frame", taken as µm */
} ts_import_result;

void ts_import_options_init(ts_import_options *opt);
/* result may be NULL. On failure no plate is left at the output (a store
 * this run created or replaced is removed). */
ts_status ts_import(const ts_import_options *opt, ts_import_result *result, ts_error *err);

/* ---------------------------------------------------------------- estimate */

typedef enum ts_solver { TS_SOLVER_L1 = 0, TS_SOLVER_L2 } ts_solver;

typedef enum ts_edge_weighting {
    TS_EDGE_WEIGHTS_NONE = 0,
    TS_EDGE_WEIGHTS_LINEAR,   /* w = c */
    TS_EDGE_WEIGHTS_SQUARED,  /* w = c^2 */
    TS_EDGE_WEIGHTS_THRESHOLD /* w = 1 if c >= cut else floor */
} ts_edge_weighting;

typedef struct ts_solve_options {
    ts_solver solver;              /* default L1 */
    ts_edge_weighting edge_weights; /* default linear (docs/solve.md); none = equal */
    double threshold;              /* cut for TS_EDGE_WEIGHTS_THRESHOLD */
    double weight_floor;           /* default 1e-3 */
    int max_iterations;            /* IRLS, default 100 */
    double tolerance;              /* IRLS stop: max position change, px; default 1e-3 */
    double cost_tolerance;         /* IRLS stop: a step lowered the L1 cost by less than
                                      this fraction of it; default 3e-6, 0 = off */
    double outlier_px;             /* residual reported as outlier, default 5 */
    /* Loop check before the solve (docs/solve.md): around each grid cell
     * the four pairs must sum to zero; a pair that breaks all its loops
     * while its neighbours' other loops close is down-weighted. Default
     * true (ts_solve_options_init). */
    bool loop_check;
    /* Optional guess of the tile origins: a shifts file (its float
     * `positions` where it has them, else total_translation; stage positions
     * or a previous run). The solve's targets (group anchors, and where a
     * tile without usable pairs lands) instead of grid x pitch; estimate
     * also takes each pair's expected offset (where the overlap strips are
     * cut) from it. Every tile solved must be in it (TS_ERR_FORMAT naming
     * the first one missing). NULL = none. */
    const char *guess;
} ts_solve_options;

void ts_solve_options_init(ts_solve_options *opt);
/* Parse "none|linear|squared|threshold:CUT". */
int ts_edge_weighting_parse(const char *text, ts_edge_weighting *mode, double *cut);

typedef enum ts_positions_source {
    TS_POSITIONS_NAMES = 0,
    TS_POSITIONS_METADATA,
    TS_POSITIONS_FILE
} ts_positions_source;

/* Where fusion (and, later, registration) runs (docs/gpu.md): CPU (the
 * default until the device checks have run), GPU (TS_ERR_UNSUPPORTED
 * saying why when this build has no CUDA backend or finds no device), or
 * AUTO (the GPU when there is one, else the CPU). */
typedef enum ts_device { TS_DEVICE_CPU = 0, TS_DEVICE_GPU, TS_DEVICE_AUTO } ts_device;
/* "cpu", "gpu", "auto". */
const char *ts_device_name(ts_device d);
/* Whether a GPU backend can run here: true with a description of the
 * device(s) in buf; false with why not ("built without CUDA", "no CUDA
 * device: ..."). buf may be NULL. */
bool ts_gpu_info(char *buf, size_t n);

typedef struct ts_estimate_options {
    const char *input;        /* plate store (required) */
    const char *output;       /* shifts YAML to write (required) */
    int overlap_x, overlap_y; /* px; required (>0) */
    int channel, timepoint, z;
    ts_orientation orientation;
    bool names_yx;
    bool clahe;
    const char *wells;        /* NULL = all */
    int threads;              /* 0 = all cores */
    size_t cache_bytes;       /* tile cache bound, default 1 GiB */
    ts_solve_options solve;
    ts_progress_fn progress;  /* optional */
    void *progress_user;
    const ts_dist *dist;      /* NULL = one process; else edges split over ranks */
    /* A pair's shift is at most this many px from its expected offset (the
     * nominal one, or solve.guess's): farther correlation peaks are not
     * considered, and the expected offset itself is checked. 0 = default:
     * no limit, or half the smaller overlap with a guess; < 0: no limit. */
    double max_shift;
    /* Write the shifts file even when the quality check fails (the nominal
     * overlap disagrees with the measured one, or the solution is
     * implausible); ts_estimate_run then returns TS_OK with result->verdict
     * set. Default false: TS_ERR_NUMERIC, nothing written. See docs/qc.md. */
    bool accept_poor;
    /* No stage model: the weak, unmatched and outlying pairs are not
     * registered again inside the window the trusted pairs allow
     * (docs/register.md, "Stage model"). Default false. */
    bool no_stage_model;
    /* Default TS_DEVICE_CPU; registration on the GPU is not wired in yet
     * (docs/gpu.md): GPU is TS_ERR_UNSUPPORTED, AUTO runs on the CPU. */
    ts_device device;
    /* Where the tiles are expected (docs/register.md, "Stage positions"):
     * TS_POSITIONS_NAMES (default) the grid of the position names x the
     * nominal pitch; METADATA each image's OME-NGFF translation divided by
     * its scale; FILE a Fiji TileConfiguration (positions_file). From
     * metadata or a file the positions are the guess (as solve.guess, which
     * may not be given with them) and the neighbour pairs are the tiles
     * that overlap there. */
    ts_positions_source positions;
    const char *positions_file;
} ts_estimate_options;

void ts_estimate_options_init(ts_estimate_options *opt);
ts_status ts_estimate(const ts_estimate_options *opt, ts_error *err);

/* The quality check of one direction (x: left/right pairs, y: top/bottom
 * pairs) over a well or the plate. A pair is trusted when it matched with
 * confidence >= 0.1 and the solve did not flag it as an outlier; the
 * measured overlap is the tile extent minus the median trusted offset along
 * the axis, its spread 1.4826 x the median absolute deviation (the stage
 * repeatability). See docs/qc.md. */
typedef struct ts_overlap_qc {
    int64_t pairs, measured, trusted, outliers; /* neighbour pairs; matched; trusted; flagged */
    int nominal;                 /* --overlap-x / --overlap-y, px */
    double overlap, spread;      /* px; NaN without trusted pairs */
    double conf_q[3];            /* confidence quartiles of the measured pairs (NaN: none) */
    bool probed;                 /* overlap re-measured with wide strips (few trusted pairs) */
} ts_overlap_qc;

typedef enum ts_verdict {
    TS_VERDICT_OK = 0,
    TS_VERDICT_OVERLAP_WRONG, /* measured overlap disagrees with the nominal one */
    TS_VERDICT_IMPLAUSIBLE    /* too many outliers, or a disputed one (ts_estimate_well_qc) */
} ts_verdict;
const char *ts_verdict_name(ts_verdict v); /* "ok", "overlap_wrong", "implausible" (--json's words) */

typedef struct ts_estimate_well_qc {
    char well[32];
    ts_overlap_qc dir[2];        /* [0] x, [1] y */
    int64_t isolated;            /* tiles without a matched pair */
    int64_t untrusted;           /* tiles with matched pairs, none of them trusted (confidence
                                    < 0.1 or an outlier): placed by weak evidence only */
    char first_untrusted[96];    /* the first of them ("A/1/004003"), "" when none */
    int64_t bridged;             /* tiles the diagonal bridges joined to the well's largest
                                    group, which trusted grid pairs left outside it (every
                                    neighbour blank, a group cut off) */
    char first_bridged[96];      /* the first of them, "" when none */
    int64_t cut_off;             /* tiles in groups of two or more that no pair joins to the
                                    well's largest group: placed as a group on the grid (or
                                    the guess), as far off as the stage put them */
    char first_cut_off[96];      /* the first of them, "" when none */
    int64_t stranded;            /* tiles with content and no pair, left on their stage positions:
                                    no matched pair, and either a diagonal corner that matched
                                    (NCC >= 0.8, which blank corners do not reach) but was refused
                                    as a bridge (a rival maximum too close, or no sub-pixel fit), or
                                    an image that stands out of its noise (its overlaps did not) */
    char first_stranded[96];     /* the first of them (one with a refused corner first), "" when
                                    none */
    double stranded_content;     /* the first one's share of its area standing out of its noise
                                    (0 < share <= 1) when no corner speaks for it; 0: its corner
                                    does (the three below) */
    double stranded_ncc;         /* the first one's corner (when stranded > 0 and stranded_content
                                    is 0): its maximum's NCC */
    double stranded_rival;       /* ... the best other local maximum's (-1: none) */
    bool stranded_unfitted;      /* ... refused for want of a sub-pixel fit (else: the rival came
                                    too close) */
    int64_t hanging;             /* tiles joined to the well's largest group only through one
                                    pair of confidence < 0.5 in no loop of pairs: its error,
                                    whatever it is, moves them all, and nothing can check it */
    char first_hanging[96];      /* the first of them, "" when none */
    int64_t refused;             /* pairs refused by the stage pass (refused_pairs) */
    char first_refused[2][96];   /* the first one's two tiles, "" when none */
    int64_t disputed;            /* outlier pairs whose measurement the stage model of the rows and
                                    columns holds and whose solved offset lies far outside its
                                    window: the solve placed their tiles as though the stage had
                                    slipped, against a pair that says it did not, and the run
                                    cannot tell which is wrong (docs/qc.md); the well is then
                                    implausible */
    char worst_disputed[2][96];  /* the one of largest residual: its two tiles, "" when none */
    double disputed_px;          /* ... and its residual, px (0: none) */
    double worst_outlier_px;     /* the largest residual of an outlier pair, px (0: none) */
    char worst_outlier[2][96];   /* its two tiles ("A/1/003002"), "" when none */
    int groups;                  /* connected groups of tiles (isolated ones included) */
    double max_residual;         /* px, largest residual of a trusted pair */
    ts_verdict verdict;
} ts_estimate_well_qc;

/* What an estimate run did, for the CLI's --json summary. */
typedef struct ts_estimate_result {
    int wells;
    int64_t tiles, pairs;         /* pairs measured (written and solved) */
    int64_t unmatched_pairs;      /* neighbours whose overlap did not match (blank tiles) */
    int64_t low_confidence_pairs; /* measured, confidence < 0.1 */
    int64_t unfitted_pairs;       /* measured, but no sub-pixel fit converged at the shift: in the
                                     solve and the file at a tenth of their confidence */
    int64_t reregistered_pairs;   /* replaced by the stage model's confined search */
    int64_t bridge_pairs;         /* diagonal pairs measured (in pairs): tiles the grid pairs
                                     left outside their well's largest group */
    int64_t rematched_pairs;      /* ... of those, unmatched in the first pass */
    int64_t refused_pairs;        /* matches the stage model's window search does not bear out:
                                     kept first results no clearer than unrelated content in the
                                     window, and ones outside it that the search did not replace,
                                     weak, or confident and far off with no loop of pairs to check
                                     them: left out of the solve and the file */
    int64_t loop_downweighted_pairs; /* the solve's loop check down-weighted (docs/solve.md) */
    int64_t stage_downweighted_pairs; /* of loop_downweighted_pairs, those the loop check's
                                         stage model chose where the loops were ambiguous */
    int64_t disputed_pairs;       /* outliers the stage model disputes (ts_estimate_well_qc):
                                     each makes its well implausible */
    int64_t outlier_pairs;        /* flagged by the solve */
    int64_t isolated_tiles;       /* no usable pair: placed on the grid */
    int max_components;           /* most connected groups in one well */
    int64_t tile_reads;           /* tile planes decoded (tiles + content_reads when the cache held
                                     them) */
    int64_t content_reads;        /* of those, the content check's: each tile left without a matched
                                     pair once (docs/qc.md, stranded tiles) */
    size_t peak_cache_bytes;
    int strip_shape[2][2];        /* (h, w) of the right / below pair strips */
    /* The quality check (first rank only; filled also when it fails). */
    ts_overlap_qc overlap[2];     /* over the plate: [0] x, [1] y */
    ts_verdict verdict;
    char verdict_message[1024];    /* one line: what was measured, what to pass */
    bool written;                 /* the shifts file was written */
    int nwell_qc;
    ts_estimate_well_qc *well_qc; /* per well (malloc'd; ts_estimate_result_free) */
} ts_estimate_result;

void ts_estimate_result_free(ts_estimate_result *r);

/* ts_estimate that also reports what it did (result may be NULL). */
ts_status ts_estimate_run(const ts_estimate_options *opt, ts_estimate_result *result, ts_error *err);

/* The QC report of an estimate (docs/qc.md): one self-contained HTML file
 * at html_path drawn from the shifts file estimate wrote and the figures it
 * measured (qc may be NULL: the picture and the worst seams only). Written
 * atomically. */
ts_status ts_report_write(const char *html_path, const char *shifts_path, const ts_estimate_result *qc,
                          ts_error *err);

/* Re-solve from the pairwise measurements of a shifts file. */
ts_status ts_solve_file(const char *pairs_yaml, const char *output,
                        const ts_solve_options *opt, ts_error *err);

/* The shifts file as JSON, for bindings (docs/python.md): the YAML's keys
 * with the same values ("total_translation", "positions": {"A/1/000000":
 * [y, x]}, "pairs": {"A/1": [[tile_a, tile_b, dy, dx, c]]}, "tiles",
 * "tile_shape", "orientation", ...). Read: the file is checked as every
 * reader checks it; *json_out is freed with free(). Write: atomically;
 * "positions" alone is enough (integer origins are then the positions,
 * moved to a minimum of 0 per well and rounded, as the solve writes them);
 * an unknown key, a non-finite or absurd value, a confidence outside
 * [0, 1] is TS_ERR_FORMAT naming it. */
ts_status ts_shifts_read_json(const char *path, char **json_out, ts_error *err);
ts_status ts_shifts_write_json(const char *path, const char *json, ts_error *err);

/* -------------------------------------------------------------------- fuse */

/* TS_BLEND_LABEL: integer label images (segmentation masks) are not
 * blended: each pixel takes the label of the covering tile with the largest
 * edt weight (ties: the first tile in the shifts file's order), 0 is
 * background, the tiles' dtype is kept (dtype is ignored); pyramid levels
 * take the 2x2 mode. Label images of the input's fields (NGFF `labels`),
 * and images with NGFF image-label metadata, are fused this way whatever
 * blend says (docs/fuse.md). */
typedef enum ts_blend { TS_BLEND_EDT = 0, TS_BLEND_AVERAGE, TS_BLEND_LABEL } ts_blend;
typedef enum ts_tcz_policy { TS_TCZ_MIN = 0, TS_TCZ_MAX } ts_tcz_policy;

typedef struct ts_fuse_options {
    const char *input;      /* plate store (required) */
    const char *shifts;     /* shifts YAML (required) */
    const char *output;     /* output plate store (required) */
    ts_ome_version format;  /* default 0.5 */
    ts_blend blend;         /* default edt */
    double exponent;        /* default 1 */
    ts_dtype dtype;         /* TS_UINT16 (default) or TS_FLOAT32 */
    int chunk;              /* inner chunk px, default 512 */
    int shard;              /* chunks per shard side, default 0 = auto (~4096 chunks) */
    ts_codec codec;         /* default blosc-zstd (level 3, byte shuffle) */
    int codec_level;        /* 0 = the codec's default (ts_codec_check_level) */
    /* Extra pyramid levels; -1 (default): as many as bring the plate's
     * canvas within 1024 px on both axes (viewers such as ome-zarr.js
     * refuse a large single level). */
    int levels;
    ts_tcz_policy tcz;      /* default min */
    int t_out;              /* -1 = write all T from 0; else that T index */
    int t_in;               /* with t_out: the input timepoint written, default 0 */
    ts_orientation orientation;
    bool orientation_given; /* false: use the shifts file's orientation */
    const char *wells;      /* NULL = all */
    int threads;            /* 0 = all cores */
    size_t memory;          /* bound on working memory, default 2 GiB */
    ts_progress_fn progress; /* optional */
    void *progress_user;
    const ts_dist *dist;     /* NULL = one process; else Y bands split over ranks */
    /* Continue an interrupted (killed) run that was writing a new store at
     * output: its blocks that are complete and decode are kept, the rest
     * written; the result is the store an uninterrupted run writes. Refused
     * (TS_ERR_ARG naming what differs) when the options, inputs or layouts
     * are not the interrupted run's, and when there is no such run. */
    bool resume;
    /* Default TS_DEVICE_CPU (docs/gpu.md): the GPU writes the same bytes. */
    ts_device device;
    /* Which of format, chunk, shard, levels and codec the caller chose
     * (TS_FUSE_GIVEN_* bits; the CLI sets one per flag given). With t_out
     * into an existing mosaic its own layout and codec are used; a chosen
     * value that differs from them is refused (TS_ERR_ARG naming both)
     * instead of being ignored. 0 (default): nothing chosen. */
    unsigned given;
} ts_fuse_options;

#define TS_FUSE_GIVEN_FORMAT 1u
#define TS_FUSE_GIVEN_CHUNK 2u
#define TS_FUSE_GIVEN_SHARD 4u
#define TS_FUSE_GIVEN_LEVELS 8u
#define TS_FUSE_GIVEN_CODEC 16u

void ts_fuse_options_init(ts_fuse_options *opt);
ts_status ts_fuse(const ts_fuse_options *opt, ts_error *err);

/* What a fuse run did, for the CLI's warnings and --json summary. */
typedef struct ts_fuse_result {
    int wells;                      /* wells fused */
    int64_t tiles;                  /* tiles placed */
    int64_t strips_read;            /* tile reads (one per tile per band per t, z) */
    int64_t blocks_written;         /* storage blocks (shards / chunk groups), level 0 */
    int64_t output_pixels;          /* Y*X*C*Z*T written at level 0, all wells */
    int64_t canvas_h, canvas_w;     /* of the last well */
    int chunk, shard;               /* inner chunk px, chunks per shard side */
    size_t peak_strip_bytes;        /* most tile-strip memory held at once */
    int64_t blocks_resumed;         /* --resume: blocks kept from the interrupted run (all levels) */
    ts_orientation orientation;     /* orientation used */
    bool orientation_from_file;     /* taken from the shifts file */
    /* Flags were given and the shifts file recorded different ones (the
     * given flags are used; the CLI warns). */
    bool orientation_mismatch;
    ts_orientation file_orientation;
    ts_device device_used;          /* TS_DEVICE_CPU or TS_DEVICE_GPU (label images: always the CPU) */
    /* (A shifts file's tile_shape that differs from the oriented tiles is
     * an error: the origins were measured on tiles of another shape.) */
} ts_fuse_result;

/* ts_fuse that also reports what it did (result may be NULL). */
ts_status ts_fuse_run(const ts_fuse_options *opt, ts_fuse_result *result, ts_error *err);

/* ------------------------------------------------------------- info/preview */

/* A JSON description of a store (version, wells, positions, tile shape,
 * dtype, channels, codecs, chunk/shard layout). Caller frees with free().
 * TS_OK whenever the store's top-level metadata reads; what does not read
 * below it (an image's metadata, a level's array) is listed in the
 * top-level "errors" array (empty when all is well): `tessera info` then
 * exits 1. */
ts_status ts_info_json(const char *store, char **json_out, ts_error *err);

typedef struct ts_preview_options {
    const char *store;     /* mosaic (or plate) store */
    const char *output;    /* PNG path */
    const char *well;      /* NULL = first well */
    int max_size;          /* longest side, px; default 1024 */
    const char *shifts;    /* draw tile outlines coloured by confidence, or NULL; with
                              an input plate (many images per well), also lay the
                              tiles out at its origins (averaged where they overlap) */
    int threads;           /* tile reads for an input plate; 0 = all cores */
} ts_preview_options;

void ts_preview_options_init(ts_preview_options *opt);
ts_status ts_preview(const ts_preview_options *opt, ts_error *err);

/* What a preview drew. */
typedef struct ts_preview_result {
    char well[32];
    int level;              /* the pyramid level read (-1: tiles of an input plate) */
    int height, width;      /* of the picture, px */
    int seams;              /* pairs drawn as seams (with --shifts) */
    int outlier_seams, unmatched_seams;
} ts_preview_result;

/* ts_preview that also says what it drew (result may be NULL). */
ts_status ts_preview_run(const ts_preview_options *opt, ts_preview_result *result, ts_error *err);

/* ------------------------------------------------------------------ verify */

/* Reads back every stored piece of a store (docs/verify.md): every array
 * of a plate (all levels of every listed image: the tiles of an input
 * plate, the mosaics of a fuse output), of an OME image, of a zarr group
 * (arrays found under it) or a single zarr array. Each chunk, or each
 * shard's index (CRC32C, entry ranges, overlaps) and inner chunks, is
 * decoded through the codec chain and its size checked. One stored piece
 * per thread in memory. */
typedef struct ts_verify_options {
    const char *store;        /* required */
    int threads;              /* 0 = all cores */
    /* Zarr reads an absent chunk or shard as the fill value (tessera writes
     * none that is all fill), so absence is counted, not an error; set this
     * for stores known to be dense (every key present) to make it one. */
    bool require_chunks;
    int max_problems;         /* problems kept in the result (the first, in store
                                 order); default 1000; all are counted */
    ts_progress_fn progress;  /* optional: ("verify", units done, units): a unit is an
                                 image (all its levels) or a bare array */
    void *progress_user;
} ts_verify_options;

typedef enum ts_verify_kind {
    TS_VERIFY_METADATA = 1,   /* a listed group/array is absent, or its metadata bad */
    TS_VERIFY_MISSING,        /* an absent chunk/shard (require_chunks only) */
    TS_VERIFY_TRUNCATED,      /* shorter than its shard index or its read */
    TS_VERIFY_CORRUPT,        /* bad CRC, bad index entry, failed decode, wrong size */
    TS_VERIFY_IO,             /* could not be read (permissions, not a regular file) */
    TS_VERIFY_UNSUPPORTED     /* an array tessera cannot decode: not checked */
} ts_verify_kind;

typedef struct ts_verify_problem {
    ts_verify_kind kind;
    char *path;               /* node path relative to the store ("A/1/0/0"; "" = the store) */
    char *key;                /* chunk/shard key ("c/0/0/0/1/2"), "" for metadata */
    int64_t inner;            /* inner chunk of a shard (C order), -1 = none */
    char *reason;
} ts_verify_problem;

typedef struct ts_verify_result {
    int64_t images;           /* OME images whose levels were opened */
    int64_t arrays;           /* arrays checked */
    int64_t blocks;           /* chunk/shard files read */
    int64_t chunks;           /* chunks decoded (inner chunks when sharded) */
    int64_t empty;            /* empty-sentinel inner chunks (the fill) */
    int64_t absent;           /* chunk/shard keys with no file (read as the fill) */
    int64_t bytes_read;       /* encoded bytes read */
    int64_t bytes_decoded;
    int64_t nproblems;        /* all problems found */
    int nlisted;              /* problems[0..nlisted): the first, in store order */
    ts_verify_problem *problems;
    int threads;
} ts_verify_result;

void ts_verify_options_init(ts_verify_options *opt);
const char *ts_verify_kind_name(ts_verify_kind kind); /* "metadata", "corrupt", ... */
/* TS_OK when the store was read through, whatever it holds (problems are in
 * result; free it with ts_verify_result_free); an error when the store is
 * not a zarr node at all or verify itself failed (out of memory). */
ts_status ts_verify(const ts_verify_options *opt, ts_verify_result *result, ts_error *err);
void ts_verify_result_free(ts_verify_result *result);

#ifdef __cplusplus
}
#endif
#endif /* TESSERA_H */
