/*
 * Pairwise registration of neighbouring tiles by phase correlation.
 *
 * A ts_registrar holds the FFTW plans and work buffers for one strip shape;
 * it is used by one thread at a time (estimate keeps one per worker and
 * strip shape). Plans are made once under a lock, because FFTW's planner is
 * not thread-safe; executing them is.
 *
 * Shift convention: for strips a and b of the same shape, the result (dy, dx)
 * says b[y][x] ~ a[y + dy][x + dx], i.e. (dy, dx) is the origin of strip b
 * minus the origin of strip a in the common (stage) frame.
 */
#ifndef TS_REGISTER_H
#define TS_REGISTER_H

#include <stdbool.h>
#include <stddef.h>

#include "tessera/tessera.h"

typedef enum ts_window { TS_WINDOW_NONE = 0, TS_WINDOW_HANN, TS_WINDOW_TUKEY } ts_window;

/* Samples of an image in their own dtype (estimate keeps tiles as decoded:
 * a uint16 tile is half the memory of its float copy, and only the strips
 * registered are converted, as they are copied into a registrar). Any
 * dtype; each sample reads as (float) of its value, a non-finite one as 0. */
typedef struct ts_samples {
    const void *p;
    ts_dtype dtype;
} ts_samples;

static inline ts_samples ts_f32(const float *p) { return (ts_samples){p, TS_FLOAT32}; }
/* The view i samples further on. */
static inline ts_samples ts_samples_at(ts_samples s, size_t i) {
    return (ts_samples){(const unsigned char *)s.p + i * ts_dtype_size(s.dtype), s.dtype};
}

typedef struct ts_register_options {
    /* Pre-filtering, in this order: non-negative shift (always), CLAHE, log
     * compression, Gaussian denoise, background subtraction, Sobel edge
     * magnitude. */
    bool clahe;             /* default false */
    int clahe_tiles;        /* contextual regions along the longer side, default 8 */
    double clahe_clip;      /* clip limit as a fraction of a region's pixels, default 0.01 */
    bool log_compress;      /* log1p of intensities, default false */
    double denoise_sigma;   /* Gaussian sigma in px, 0 = off; default 0.5 */
    int background_px;      /* subtract a smooth background (twice a box filter of this
                               width): removes vignetting and uneven illumination,
                               which are fixed to the tile, not the specimen.
                               0 = off; default 32 */
    bool sobel;             /* edge magnitude instead of intensity, default false */
    /* Apodisation before the FFT. */
    ts_window window;       /* default Tukey */
    double tukey_alpha;     /* tapered fraction, default 0.2 (thin strips: a wider taper
                               would fade the very rows/columns that overlap) */
    /* Gaussian weighting of the normalised cross-power spectrum: makes the
     * correlation peak a Gaussian of this sigma (px) that a 3-point fit
     * locates to sub-pixel precision, and damps the whitened noise at high
     * frequencies. 0 = none (plain phase correlation). Default 1. */
    double spectral_sigma;
    int candidates;         /* correlation peaks checked by NCC, default 12 */
    bool refine;            /* Gauss-Newton sub-pixel refinement in the image domain
                               (else the 3-point fit of the peak only); default true */
    double min_overlap;     /* candidate shifts must keep this fraction of the overlap
                               area the nominal shift has, default 0.5 */
    double min_ncc;         /* best overlap NCC below this: no match (see `matched`);
                               default 0.25 (true matches of real and synthetic tiles
                               score > 0.5, blank or noise-only overlaps < 0.15) */
    double strip_margin;    /* strip depth = overlap * margin, clipped to the tile; default 1.25 */
    double max_shift;       /* > 0: the shift is at most this far (px) from the expected
                               (prior) one: farther candidates are not considered, and
                               the expected shift itself is checked by NCC. 0 = no
                               limit (default) */
} ts_register_options;

void ts_register_options_init(ts_register_options *opt);

typedef struct ts_register_result {
    double dy, dx;        /* shift (see convention above); for pairs: origin b - origin a */
    double confidence;    /* [0, 1] */
    double ncc;           /* normalised cross-correlation of the overlap at the chosen shift */
    double ncc_second;    /* best NCC of a distinct other candidate shift (-1 if none) */
    double peak_ratio;    /* best distinct other peak / chosen peak, above the mean */
    bool degenerate;      /* a strip was blank (no variance): shift is the prior */
    bool matched;         /* false: nothing in the overlap matches (blank strip, best NCC
                             below min_ncc): not a measurement; shift is the prior and
                             confidence 0 */
    bool unfitted;        /* no sub-pixel fit converged at this shift (not tried, or it
                             moved more than 2 px from the integer maximum): no basin of
                             alignment vouches for it (stage_model.c registers such a
                             pair again where the stage scatters) */
} ts_register_result;

typedef struct ts_registrar ts_registrar;

/* Plans for strips of h x w (h, w >= 4). */
ts_status ts_registrar_create(int h, int w, const ts_register_options *opt, ts_registrar **out,
                              ts_error *err);
void ts_registrar_free(ts_registrar *r);
int ts_registrar_height(const ts_registrar *r);
int ts_registrar_width(const ts_registrar *r);
/* Overlap NCCs asked for and actually computed (each shift once per pair:
 * the rest come from the pair's memo) since the registrar was made. */
void ts_registrar_ncc_counts(const ts_registrar *r, long long *requested, long long *scored);
/* Tests: false scores every request again (the results must not change). */
void ts_registrar_set_memo(ts_registrar *r, bool on);
/* NCC of b[y][x] against a[y + sy][x + sx] over their overlap (h x w
 * images, row-major); 0 for an empty or constant overlap. */
double ts_overlap_ncc(const float *a, const float *b, int h, int w, int sy, int sx);
/* Tests: the same as compiled for one instruction set ("sse2", the x86-64
 * baseline, or "avx2", which ts_overlap_ncc takes where the CPU has it);
 * false when this build or CPU has no such variant. */
bool ts_overlap_ncc_isa(const char *isa, const float *a, const float *b, int h, int w, int sy, int sx,
                        double *ncc);

/* Tests: the k (at most 33) highest 3x3 local maxima of an h x w surface,
 * periodic, best first (ties: the first in scan order), as the correlation
 * peaks are found; their count. */
int ts_local_maxima_top(const float *surf, int h, int w, int k, int *ys, int *xs, float *values);

/* For searches that are not a correlation (the stage model's window,
 * reregister.c), from the registrar's buffers: the strips copied and
 * pre-filtered as ts_register_strips does them (*ha, *hb the
 * background-free strips, NULL when a strip is constant), the sub-pixel
 * refinement of ts_register_strips from an integer shift, and min_ncc. */
ts_status ts_registrar_prepare(ts_registrar *r, ts_samples a, size_t a_stride, ts_samples b,
                               size_t b_stride, const float **ha, const float **hb, ts_error *err);
bool ts_registrar_refine(ts_registrar *r, double *dy, double *dx); /* false: no fit converged */
double ts_registrar_min_ncc(const ts_registrar *r);

/* Registers two h x w strips given as row-major views with row strides (in
 * elements). prior_dy/dx: the shift expected from the nominal geometry,
 * returned when a strip carries no signal. */
ts_status ts_register_strips(ts_registrar *r, ts_samples a, size_t a_stride, ts_samples b,
                             size_t b_stride, double prior_dy, double prior_dx,
                             ts_register_result *res, ts_error *err);

/* ---- tile pairs ---- */

typedef enum ts_pair_dir {
    TS_PAIR_RIGHT = 0, /* b is the right (x + 1) neighbour of a */
    TS_PAIR_BELOW = 1  /* b is the lower (y + 1) neighbour of a */
} ts_pair_dir;

/* Where the strips of a pair lie in their (oriented, h x w) tiles. */
typedef struct ts_strip_geometry {
    int sh, sw;          /* strip shape */
    int a_y0, a_x0;      /* strip a's top-left corner in tile a */
    int b_y0, b_x0;      /* strip b's top-left corner in tile b */
    double off_dy, off_dx; /* tile origin b - a = (off_dy, off_dx) + strip shift */
    double prior_dy, prior_dx; /* strip shift for the nominal overlap */
} ts_strip_geometry;

/* Strip geometry for a pair with nominal overlap `overlap` px along dir.
 * The strip is deeper than the overlap by opt->strip_margin (so a larger
 * true overlap still has its full content in both strips) and, along both
 * axes, trimmed to an FFT-friendly (2,3,5,7-smooth) length. */
ts_status ts_strip_geometry_for(ts_pair_dir dir, int h, int w, int overlap,
                                const ts_register_options *opt, ts_strip_geometry *g,
                                ts_error *err);

/* The geometry of a pair expected at origin offset (ey, ex) (b - a, e.g.
 * from a guess of the tile origins) instead of the nominal one: base's strip
 * shape (so its registrar serves), each strip over the expected overlap,
 * clipped to its tile; prior = the strip shift that offset implies. Returns
 * false when the offset leaves less than 4 px of overlap along an axis (g is
 * then filled, off + prior = the offset, but not worth registering). */
bool ts_strip_geometry_at(const ts_strip_geometry *base, int h, int w, double ey, double ex,
                          ts_strip_geometry *g);

/* Registers oriented tiles a and b (both h x w, row-major) as a pair along
 * dir using registrar r, whose shape must be the geometry's strip shape.
 * res->dy/dx is the tile origin b minus origin a (nominal pitch plus the
 * measured correction). */
ts_status ts_register_pair(ts_registrar *r, const ts_strip_geometry *g, ts_samples a,
                           ts_samples b, int w, ts_register_result *res, ts_error *err);

/* ---- pre-filters (exposed for tests) ---- */

/* In-place Gaussian blur of an h x w image, mirrored borders. tmp: h*w floats. */
void ts_gaussian_blur(float *img, int h, int w, double sigma, float *tmp);
/* Sobel gradient magnitude of src into dst (h x w), replicated borders. */
void ts_sobel_magnitude(const float *src, float *dst, int h, int w);
/* Subtracts a smooth background: the image blurred twice by a size-px box.
 * tmp: 2*h*w floats; rowsum: TS_BACKGROUND_SCRATCH(w) doubles (scratch the
 * caller keeps, so the per-pair call cannot fail). */
#define TS_BACKGROUND_SCRATCH(w) (4 * (size_t)(w))
void ts_subtract_background(float *img, int h, int w, int block, float *tmp, double *rowsum);
/* Tests: ts_gaussian_blur and ts_subtract_background as compiled for one
 * instruction set ("sse2", or "avx2", which they take where the CPU has
 * it); false (img untouched) when this build or CPU has no such variant. */
bool ts_gaussian_blur_isa(const char *isa, float *img, int h, int w, double sigma, float *tmp);
bool ts_subtract_background_isa(const char *isa, float *img, int h, int w, int block, float *tmp, double *rowsum);
/* Contrast-limited adaptive histogram equalisation in place; output in [0, 1]. */
ts_status ts_clahe(float *img, int h, int w, int tiles, double clip, ts_error *err);
/* n samples of type dt as float (what registration reads a plane as); an
 * unsupported type reads as zeros. */
void ts_samples_to_float(const void *src, ts_dtype dt, size_t n, float *dst);
/* h rows of w samples of src (stride samples apart) into dst as float, a
 * non-finite value as 0: how a strip, or a tile's row, is read. */
void ts_copy_rows(float *dst, ts_samples src, size_t stride, int h, int w);

#endif
