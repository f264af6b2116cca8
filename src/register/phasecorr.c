/* Phase correlation of two overlap strips, with candidate-peak
 * disambiguation by normalised cross-correlation of the overlap. */
#include "register/register.h"

#include <fftw3.h>
#include <float.h>
#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/error.h"
#include "common/pages.h"
#include "register/lowpass.h"
#include "register/refine.h"
#include "register/vec.h"

#define MAX_CANDIDATES 32
#define MAX_ALL (4 * MAX_CANDIDATES + 2 * (MAX_CANDIDATES + 1) + 1)
#define MEMO_SLOTS 4096 /* a power of two */
#define MEMO_PROBES 64

/* One scored shift of the current pair (gen == the registrar's memo_gen). */
typedef struct ncc_memo {
    uint32_t gen;
    int sy, sx;
    double ncc;
} ncc_memo;

struct ts_registrar {
    int h, w, wc; /* wc = w / 2 + 1 complex columns */
    ts_register_options opt;
    float *fa, *fb, *tmp;  /* pre-filtered strips (h * w) and scratch (2 * h * w +
                              2 * (w + 8): the refinement's, refine.h) */
    double *rowsum;        /* TS_BACKGROUND_SCRATCH(w): background subtraction's */
    float *ha, *hb;        /* the same without their smooth background: what is
                              correlated (the refinement fits fa/fb with a gain) */
    float *real;           /* FFT input / correlation surface */
    fftwf_complex *A, *B;  /* spectra, h * wc */
    ts_page_set planes;    /* holds fa, fb, ha, hb, tmp, real, A and B */
    float *win_y, *win_x;  /* separable apodisation window */
    float *gauss_y, *gauss_x; /* separable spectral Gaussian */
    fftwf_plan forward, inverse;
    ts_lowpass_plans *lowpass; /* the refinement's re-fit (refine.c) */
    ncc_memo *memo;        /* MEMO_SLOTS: the overlap NCCs this pair has scored */
    uint32_t memo_gen;     /* the current pair's stamp (never 0) */
    bool memo_off;         /* tests: score every request */
    long long ncc_requests, ncc_scored; /* since the registrar was made */
};

void ts_register_options_init(ts_register_options *opt) {
    memset(opt, 0, sizeof *opt);
    opt->clahe = false;
    opt->clahe_tiles = 8;
    opt->clahe_clip = 0.01;
    opt->log_compress = false;
    opt->denoise_sigma = 0.5;
    opt->sobel = false;
    opt->window = TS_WINDOW_TUKEY;
    opt->tukey_alpha = 0.2;
    opt->spectral_sigma = 1.0;
    opt->candidates = 12;
    opt->refine = true;
    opt->min_overlap = 0.5;
    opt->background_px = 32;
    opt->min_ncc = 0.25;
    opt->strip_margin = 1.25;
}

static void make_window(float *win, int n, ts_window kind, double alpha) {
    if (kind == TS_WINDOW_HANN) alpha = 1.0;
    if (kind == TS_WINDOW_NONE || n < 3 || !(alpha > 0)) {
        for (int i = 0; i < n; i++) win[i] = 1.0f;
        return;
    }
    if (alpha > 1) alpha = 1;
    double taper = alpha * (double)(n - 1) / 2.0;
    for (int i = 0; i < n; i++) {
        double d = (double)(i < n - 1 - i ? i : n - 1 - i); /* distance to the nearer end */
        win[i] = d >= taper ? 1.0f : (float)(0.5 * (1.0 - cos(M_PI * d / taper)));
    }
}

/* exp(-2 pi^2 sigma^2 f^2) for the FFT frequencies of an n-point axis, f in cycles/px. */
static void make_spectral_gauss(float *g, int count, int n, double sigma) {
    for (int k = 0; k < count; k++) {
        double f = (double)(k <= n / 2 ? k : k - n) / (double)n;
        g[k] = sigma > 0 ? (float)exp(-2.0 * M_PI * M_PI * sigma * sigma * f * f) : 1.0f;
    }
}

ts_status ts_registrar_create(int h, int w, const ts_register_options *opt, ts_registrar **out,
                              ts_error *err) {
    *out = NULL;
    if (h < 4 || w < 4)
        return ts_fail(err, TS_ERR_ARG, "registration strip %dx%d is too small (need at least 4x4)", h, w);
    ts_registrar *r = calloc(1, sizeof *r);
    if (!r) return ts_fail(err, TS_ERR_NOMEM, "out of memory for a %dx%d registrar", h, w);
    r->h = h;
    r->w = w;
    r->wc = w / 2 + 1;
    if (opt) r->opt = *opt;
    else ts_register_options_init(&r->opt);
    size_t n = (size_t)h * (size_t)w, nc = (size_t)h * (size_t)r->wc;
    /* The planes and spectra every pair writes, in one mapping (pages.h).
     * Background subtraction needs two planes, the refinement TS_REFINE_WORK. */
    const size_t plane = n * sizeof(float), spectrum = nc * sizeof(fftwf_complex);
    const size_t sizes[] = {plane, plane, plane, plane, TS_REFINE_WORK(h, w) * sizeof(float), plane, spectrum, spectrum};
    void *planes[8];
    if (ts_page_set_alloc(&r->planes, 8, sizes, planes)) {
        r->fa = planes[0], r->fb = planes[1], r->ha = planes[2], r->hb = planes[3];
        r->tmp = planes[4], r->real = planes[5], r->A = planes[6], r->B = planes[7];
    }
    r->rowsum = malloc(TS_BACKGROUND_SCRATCH(w) * sizeof(double));
    r->win_y = malloc((size_t)h * sizeof(float));
    r->win_x = malloc((size_t)w * sizeof(float));
    r->gauss_y = malloc((size_t)h * sizeof(float));
    r->gauss_x = malloc((size_t)r->wc * sizeof(float));
    r->memo = calloc(MEMO_SLOTS, sizeof *r->memo);
    r->lowpass = ts_lowpass_plans_create();
    if (!r->fa || !r->fb || !r->ha || !r->hb || !r->tmp || !r->rowsum || !r->win_y || !r->win_x || !r->gauss_y || !r->gauss_x ||
        !r->real || !r->A || !r->B || !r->memo || !r->lowpass) {
        ts_registrar_free(r);
        return ts_fail(err, TS_ERR_NOMEM, "out of memory for a %dx%d registrar", h, w);
    }
    /* A thin strip (one side less than half the other) is tapered along its
     * long axis only: across it the taper would fade exactly the
     * rows/columns that overlap. */
    make_window(r->win_y, h, 2 * h < w ? TS_WINDOW_NONE : r->opt.window, r->opt.tukey_alpha);
    make_window(r->win_x, w, 2 * w < h ? TS_WINDOW_NONE : r->opt.window, r->opt.tukey_alpha);
    make_spectral_gauss(r->gauss_y, h, h, r->opt.spectral_sigma);
    make_spectral_gauss(r->gauss_x, r->wc, w, r->opt.spectral_sigma);
    ts_fftwf_planner_lock();
    r->forward = fftwf_plan_dft_r2c_2d(h, w, r->real, r->A, FFTW_ESTIMATE);
    r->inverse = fftwf_plan_dft_c2r_2d(h, w, r->A, r->real, FFTW_ESTIMATE);
    ts_fftwf_planner_unlock();
    if (!r->forward || !r->inverse) {
        ts_registrar_free(r);
        return ts_fail(err, TS_ERR_INTERNAL, "FFTW could not plan a %dx%d transform", h, w);
    }
    *out = r;
    return TS_OK;
}

void ts_registrar_free(ts_registrar *r) {
    if (!r) return;
    ts_fftwf_planner_lock();
    if (r->forward) fftwf_destroy_plan(r->forward);
    if (r->inverse) fftwf_destroy_plan(r->inverse);
    ts_fftwf_planner_unlock();
    ts_page_set_free(&r->planes);
    free(r->rowsum);
    free(r->win_y);
    free(r->win_x);
    free(r->gauss_y);
    free(r->gauss_x);
    free(r->memo);
    ts_lowpass_plans_free(r->lowpass);
    free(r);
}

int ts_registrar_height(const ts_registrar *r) { return r->h; }

void ts_registrar_ncc_counts(const ts_registrar *r, long long *requested, long long *scored) {
    *requested = r->ncc_requests;
    *scored = r->ncc_scored;
}

void ts_registrar_set_memo(ts_registrar *r, bool on) { r->memo_off = !on; }
int ts_registrar_width(const ts_registrar *r) { return r->w; }

/* ------------------------------------------------------------ pre-filtering */

void ts_samples_to_float(const void *src, ts_dtype dt, size_t n, float *dst) {
    switch (dt) {
#define CONVERT(T) { const T *s = src; for (size_t i = 0; i < n; i++) dst[i] = (float)s[i]; } break
    case TS_BOOL: case TS_UINT8: CONVERT(uint8_t);
    case TS_INT8: CONVERT(int8_t);
    case TS_UINT16: CONVERT(uint16_t);
    case TS_INT16: CONVERT(int16_t);
    case TS_UINT32: CONVERT(uint32_t);
    case TS_INT32: CONVERT(int32_t);
    case TS_UINT64: CONVERT(uint64_t);
    case TS_INT64: CONVERT(int64_t);
    case TS_FLOAT64: CONVERT(double);
    case TS_FLOAT32: memcpy(dst, src, n * sizeof(float)); break;
    default: memset(dst, 0, n * sizeof(float)); break;
#undef CONVERT
    }
}

/* Rows of float32 src into dst, non-finite values (all exponent bits set)
 * as 0. */
static void copy_rows_f32(float *dst, const float *src, size_t stride, int h, int w) {
    const ts_v4i expo = {0x7f800000, 0x7f800000, 0x7f800000, 0x7f800000};
    for (int y = 0; y < h; y++) {
        const float *s = src + (size_t)y * stride;
        float *d = dst + (size_t)y * (size_t)w;
        int x = 0;
        for (; x + 4 <= w; x += 4) {
            ts_v4i bits;
            memcpy(&bits, s + x, sizeof bits);
            bits &= (bits & expo) != expo; /* -1 where finite */
            memcpy(d + x, &bits, sizeof bits);
        }
        for (; x < w; x++) d[x] = isfinite(s[x]) ? s[x] : 0.0f;
    }
}

/* Rows of src, in its own dtype, into dst as float: each value as (float)
 * of it (what a float copy of the whole tile held before), a non-finite
 * one as 0. Integer samples convert to finite floats; float64 ones go
 * through float first, as the whole-tile copy did. */
void ts_copy_rows(float *dst, ts_samples src, size_t stride, int h, int w) {
    if (src.dtype == TS_FLOAT32) {
        copy_rows_f32(dst, src.p, stride, h, w);
        return;
    }
    const size_t esize = ts_dtype_size(src.dtype);
    for (int y = 0; y < h; y++) {
        float *d = dst + (size_t)y * (size_t)w;
        ts_samples_to_float((const unsigned char *)src.p + (size_t)y * stride * esize, src.dtype, (size_t)w, d);
        if (src.dtype == TS_FLOAT64)
            for (int x = 0; x < w; x++)
                if (!isfinite(d[x])) d[x] = 0.0f;
    }
}

/* The smallest and largest of v (n >= 1 values, all finite: ts_copy_rows
 * reads non-finite samples as 0); exact, in any order, so the variants
 * below (eight lanes: one AVX register, two SSE2 ones) agree. */
__attribute__((always_inline)) static inline void strip_range_body(const float *v, size_t n, float *lo, float *hi) {
    typedef int32_t v8i __attribute__((vector_size(32)));
    ts_v8f lo8 = {v[0], v[0], v[0], v[0], v[0], v[0], v[0], v[0]}, hi8 = lo8;
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        ts_v8f x;
        memcpy(&x, v + i, sizeof x);
        v8i take = x < lo8; /* -1 where smaller */
        lo8 = (ts_v8f)((take & (v8i)x) | (~take & (v8i)lo8));
        take = x > hi8;
        hi8 = (ts_v8f)((take & (v8i)x) | (~take & (v8i)hi8));
    }
    float l = lo8[0], h = hi8[0];
    for (int k = 1; k < 8; k++) {
        if (lo8[k] < l) l = lo8[k];
        if (hi8[k] > h) h = hi8[k];
    }
    for (; i < n; i++) {
        if (v[i] < l) l = v[i];
        if (v[i] > h) h = v[i];
    }
    *lo = l, *hi = h;
}

static void strip_range_sse2(const float *v, size_t n, float *lo, float *hi) { strip_range_body(v, n, lo, hi); }
#ifdef TS_ISA_X86
TS_TARGET_AVX2 static void strip_range_avx2(const float *v, size_t n, float *lo, float *hi) {
    strip_range_body(v, n, lo, hi);
}
#endif

static void strip_range(const float *v, size_t n, float *lo, float *hi) {
#ifdef TS_ISA_X86
    if (ts_isa_pick(NULL) == 1) {
        strip_range_avx2(v, n, lo, hi);
        return;
    }
#endif
    strip_range_sse2(v, n, lo, hi);
}

/* Whether a strip is constant for registration: its standard deviation
 * at most 1e-6 of its mean's magnitude (plus 1e-3). Most strips are
 * decided by their range alone: n values spanning lo..hi have a standard
 * deviation of at least (hi - lo) / sqrt(2 n) and a mean of magnitude at
 * most max(|lo|, |hi|), so a range twice what the test needs passes it
 * (the factor 2 covers rounding); only the rest pay mean_std's two passes,
 * which decide exactly as before. */
static void mean_std(const float *img, size_t n, double *mean, double *sd);
static bool constant_strip(const float *v, size_t n, float lo, float hi) {
    const double big = fmax(fabs((double)lo), fabs((double)hi));
    if (((double)hi - (double)lo) / sqrt(2.0 * (double)n) > 2e-6 * (big + 1e-3)) return false;
    double mean, sd;
    mean_std(v, n, &mean, &sd);
    return !(sd > 1e-6 * (fabs(mean) + 1e-3));
}

static ts_status prefilter(ts_registrar *r, float *img, float shift, ts_error *err) {
    int h = r->h, w = r->w;
    size_t n = (size_t)h * (size_t)w;
    const ts_register_options *o = &r->opt;
    if (shift != 0)
        for (size_t i = 0; i < n; i++) img[i] -= shift;
    if (o->clahe) {
        ts_status st = ts_clahe(img, h, w, o->clahe_tiles, o->clahe_clip, err);
        if (st) return st;
    }
    if (o->log_compress)
        for (size_t i = 0; i < n; i++) img[i] = log1pf(img[i]);
    if (o->denoise_sigma > 0) ts_gaussian_blur(img, h, w, o->denoise_sigma, r->tmp);
    if (o->sobel) {
        ts_sobel_magnitude(img, r->tmp, h, w);
        memcpy(img, r->tmp, n * sizeof(float));
    }
    return TS_OK;
}

static void mean_std(const float *img, size_t n, double *mean, double *sd) {
    double m = ts_sum_f64(img, n) / (double)n;
    const ts_v2d m2 = {m, m};
    ts_v2d s0 = {0}, s1 = {0};
    size_t i = 0;
    for (; i + 4 <= n; i += 4) {
        ts_v2d d0 = ts_v2f_load_v2d(img + i) - m2, d1 = ts_v2f_load_v2d(img + i + 2) - m2;
        s0 += d0 * d0;
        s1 += d1 * d1;
    }
    double ss = 0;
    for (; i < n; i++) {
        double d = img[i] - m;
        ss += d * d;
    }
    ss += (s0[0] + s0[1]) + (s1[0] + s1[1]);
    *mean = m;
    *sd = sqrt(ss / (double)n);
}

/* Mean-free, apodised copy of img into r->real, then its spectrum into out. */
static void spectrum(ts_registrar *r, const float *img, double mean, fftwf_complex *out) {
    int h = r->h, w = r->w;
    for (int y = 0; y < h; y++) {
        const float *s = img + (size_t)y * (size_t)w;
        float *d = r->real + (size_t)y * (size_t)w;
        float wy = r->win_y[y];
        for (int x = 0; x < w; x++) d[x] = (float)(s[x] - mean) * wy * r->win_x[x];
    }
    fftwf_execute_dft_r2c(r->forward, r->real, out);
}

/* |re + i im|: glibc's hypotf computes exactly this (the same bits for
 * finite values; spectra are finite), without the call. */
static inline float magnitude(float re, float im) {
    return (float)sqrt((double)re * (double)re + (double)im * (double)im);
}

/* ----------------------------------------------------------- peak handling */

typedef struct peak {
    int y, x;
    float value;
} peak;

static inline float surf_at(const ts_registrar *r, int y, int x) {
    y = (y % r->h + r->h) % r->h;
    x = (x % r->w + r->w) % r->w;
    return r->real[(size_t)y * (size_t)r->w + (size_t)x];
}

/* Whether v would enter the n best so far (of k at most): above the k-th
 * once there are k. */
static inline bool beats_kth(const peak *out, int n, int k, float v) { return n < k || v > out[k - 1].value; }

/* (y, x, v) among the k best so far, best first, if it beats the k-th. */
static inline void offer_peak(peak *out, int *n, int k, int y, int x, float v) {
    if (!beats_kth(out, *n, k, v)) return;
    int pos = *n < k ? (*n)++ : k - 1;
    while (pos > 0 && out[pos - 1].value < v) {
        out[pos] = out[pos - 1];
        pos--;
    }
    out[pos] = (peak){y, x, v};
}

/* Whether (y, x), of value v, is a local maximum of the 3x3 neighbourhood,
 * the surface periodic: above the neighbours before it in scan order, at
 * least the ones after (ties: only the first counts). A NaN, its own or a
 * neighbour's, fails a comparison, as in local_max_inner. */
static bool local_max_wrapped(const float *surf, int h, int w, int y, int x, float v) {
    const int ys[3] = {y > 0 ? y - 1 : h - 1, y, y + 1 < h ? y + 1 : 0};
    const int xs[3] = {x > 0 ? x - 1 : w - 1, x, x + 1 < w ? x + 1 : 0};
    for (int dy = -1; dy <= 1; dy++)
        for (int dx = -1; dx <= 1; dx++) {
            if (!dy && !dx) continue;
            const float u = surf[(size_t)ys[dy + 1] * (size_t)w + (size_t)xs[dx + 1]];
            const bool before = dy < 0 || (dy == 0 && dx < 0);
            if (before ? !(u < v) : !(u <= v)) return false;
        }
    return true;
}

/* The same test away from the edges, where no neighbour wraps. */
static inline bool local_max_inner(const float *row, int w, int x, float v) {
    const float *up = row - w, *dn = row + w;
    return up[x - 1] < v && up[x] < v && up[x + 1] < v && row[x - 1] < v && row[x + 1] <= v && dn[x - 1] <= v &&
           dn[x] <= v && dn[x + 1] <= v;
}

/* The k highest local maxima (3x3, periodic) of the surface, best first.
 * The surface is smooth (the spectrum's Gaussian weight), so the slopes
 * around its highest peaks stay above the k-th best for many values:
 * away from the edges, eight values at a time are tested in vector lanes,
 * against the k-th best and their eight neighbours (local_max_inner's
 * comparisons, lane by lane), and only the maxima among them are offered,
 * in scan order, each against the k-th best at its turn. This scan runs
 * over every value of the surface, twice a pair. */
static int local_maxima_top(const float *surf, int h, int w, peak *out, int k) {
    int n = 0;
    for (int y = 0; y < h; y++) {
        const float *row = surf + (size_t)y * (size_t)w;
        if (y == 0 || y + 1 == h || w < 3) {
            for (int x = 0; x < w; x++)
                if (beats_kth(out, n, k, row[x]) && local_max_wrapped(surf, h, w, y, x, row[x]))
                    offer_peak(out, &n, k, y, x, row[x]);
            continue;
        }
        if (beats_kth(out, n, k, row[0]) && local_max_wrapped(surf, h, w, y, 0, row[0]))
            offer_peak(out, &n, k, y, 0, row[0]);
        const float *up = row - w, *dn = row + w;
        int x = 1;
        for (; x + 8 <= w - 1; x += 8) {
            const ts_v4f t = ts_v4f_splat(n == k ? out[k - 1].value : -INFINITY);
            const ts_v4f v0 = ts_v4f_load(row + x), v1 = ts_v4f_load(row + x + 4);
            ts_v4i m0 = v0 > t, m1 = v1 > t;
            /* Most blocks lie below the k-th best: one test decides. */
            if (!ts_v4i_bits(m0 | m1)) continue;
#define LOCAL_MAX(m, v, o)                                                                                             \
    m &= (ts_v4f_load(up + x + (o)-1) < v) & (ts_v4f_load(up + x + (o)) < v) & (ts_v4f_load(up + x + (o) + 1) < v) &   \
         (ts_v4f_load(row + x + (o)-1) < v) & (ts_v4f_load(row + x + (o) + 1) <= v) &                                  \
         (ts_v4f_load(dn + x + (o)-1) <= v) & (ts_v4f_load(dn + x + (o)) <= v) & (ts_v4f_load(dn + x + (o) + 1) <= v)
            LOCAL_MAX(m0, v0, 0);
            LOCAL_MAX(m1, v1, 4);
#undef LOCAL_MAX
            for (unsigned bits = ts_v4i_bits(m0) | ts_v4i_bits(m1) << 4; bits; bits &= bits - 1) {
                const int i = __builtin_ctz(bits);
                offer_peak(out, &n, k, y, x + i, row[x + i]);
            }
        }
        for (; x < w - 1; x++)
            if (beats_kth(out, n, k, row[x]) && local_max_inner(row, w, x, row[x]))
                offer_peak(out, &n, k, y, x, row[x]);
        if (beats_kth(out, n, k, row[w - 1]) && local_max_wrapped(surf, h, w, y, w - 1, row[w - 1]))
            offer_peak(out, &n, k, y, w - 1, row[w - 1]);
    }
    return n;
}

int ts_local_maxima_top(const float *surf, int h, int w, int k, int *ys, int *xs, float *values) {
    peak out[MAX_CANDIDATES + 1];
    if (k > MAX_CANDIDATES + 1) k = MAX_CANDIDATES + 1;
    if (k < 1 || h < 1 || w < 1) return 0;
    const int n = local_maxima_top(surf, h, w, out, k);
    for (int i = 0; i < n; i++) ys[i] = out[i].y, xs[i] = out[i].x, values[i] = out[i].value;
    return n;
}

/* NCC of b[y][x] against a[y + sy][x + sx] over their overlap. The five
 * moments are summed in eight float lanes (vec.h: independent chains the
 * compiler keeps in vector registers) and a scalar tail, flushed to double
 * in a fixed order after at most NCC_FLUSH values per lane and in the tail
 * (a few rows of a thin strip, one row of a wide one): the result depends
 * on the data only, and no float sum has more than NCC_FLUSH terms. */
#define NCC_FLUSH 128
/* The NCC's eight float lanes in one ts_v8f (vec.h): lanes 0-3 and 4-7
 * are what two ts_v4f did before, so ncc_sse2 and ncc_avx2 give the same
 * bits as each other and as before (test_ncc_isas_same_bits). */
/* The eight lanes summed as ts_v4f_sum2 sums lanes 0-3 and 4-7. */
#define NCC_SUM8(v) ts_v4f_sum2((ts_v4f){(v)[0], (v)[1], (v)[2], (v)[3]}, (ts_v4f){(v)[4], (v)[5], (v)[6], (v)[7]})

/* Inlined into one function per instruction set below. */
__attribute__((always_inline)) static inline double ncc_lanes(const float *a, const float *b, int h, int w, int sy,
                                                              int sx) {
    int y0 = sy < 0 ? -sy : 0, y1 = sy > 0 ? h - sy : h;
    int x0 = sx < 0 ? -sx : 0, x1 = sx > 0 ? w - sx : w;
    if (y1 <= y0 || x1 <= x0) return 0;
    /* Per row, each lane takes (x1 - x0) / 8 values, the tail the rest. */
    const int per_row = (x1 - x0) / 8 > (x1 - x0) % 8 ? (x1 - x0) / 8 : (x1 - x0) % 8;
    const int rows_per_flush = per_row >= NCC_FLUSH ? 1 : NCC_FLUSH / (per_row > 0 ? per_row : 1);
    double sa = 0, sb = 0, saa = 0, sbb = 0, sab = 0;
    for (int yb = y0; yb < y1; yb += rows_per_flush) {
        const int ye = yb + rows_per_flush < y1 ? yb + rows_per_flush : y1;
        ts_v8f la = {0}, lb = {0}, laa = {0}, lbb = {0}, lab = {0};
        float ra = 0, rb = 0, raa = 0, rbb = 0, rab = 0;
        for (int y = yb; y < ye; y++) {
            const float *pa = a + (size_t)(y + sy) * (size_t)w + sx;
            const float *pb = b + (size_t)y * (size_t)w;
            int x = x0;
            for (; x + 8 <= x1; x += 8) {
                ts_v8f va, vb;
                memcpy(&va, pa + x, sizeof va), memcpy(&vb, pb + x, sizeof vb);
                la += va, lb += vb, laa += va * va, lbb += vb * vb, lab += va * vb;
            }
            for (; x < x1; x++) {
                float va = pa[x], vb = pb[x];
                ra += va;
                rb += vb;
                raa += va * va;
                rbb += vb * vb;
                rab += va * vb;
            }
        }
        sa += NCC_SUM8(la) + ra;
        sb += NCC_SUM8(lb) + rb;
        saa += NCC_SUM8(laa) + raa;
        sbb += NCC_SUM8(lbb) + rbb;
        sab += NCC_SUM8(lab) + rab;
    }
    double n = (double)(y1 - y0) * (double)(x1 - x0);
    double va = saa - sa * sa / n, vb = sbb - sb * sb / n, cov = sab - sa * sb / n;
    if (!(va > 1e-12 * (saa + 1e-30)) || !(vb > 1e-12 * (sbb + 1e-30))) return 0;
    return cov / sqrt(va * vb);
}

static double ncc_sse2(const float *a, const float *b, int h, int w, int sy, int sx) {
    return ncc_lanes(a, b, h, w, sy, sx);
}

/* The NCC is a sixth of estimate's time on 2048^2 tiles; at AVX2's width
 * it runs 1.5-1.9x faster (same bits), chosen at run time (isa NULL). */
#ifdef TS_ISA_X86
TS_TARGET_AVX2 static double ncc_avx2(const float *a, const float *b, int h, int w, int sy,
                                                       int sx) {
    return ncc_lanes(a, b, h, w, sy, sx);
}
#endif

bool ts_overlap_ncc_isa(const char *isa, const float *a, const float *b, int h, int w, int sy, int sx,
                        double *ncc) {
    const int pick = ts_isa_pick(isa);
    if (pick < 0) return false;
#ifdef TS_ISA_X86
    if (pick == 1) {
        *ncc = ncc_avx2(a, b, h, w, sy, sx);
        return true;
    }
#endif
    *ncc = ncc_sse2(a, b, h, w, sy, sx);
    return true;
}

double ts_overlap_ncc(const float *a, const float *b, int h, int w, int sy, int sx) {
    double ncc;
    (void)ts_overlap_ncc_isa(NULL, a, b, h, w, sy, sx, &ncc); /* NULL: always a variant */
    return ncc;
}

/* The overlap NCC at a shift, looked up in the pair's memo table first: the
 * candidates and the climbs (of the choice and of every serious rival) ask
 * for the same shifts again and again (9% of the calls on 2048^2 tiles, 35%
 * on 256^2). Open addressing on (sy, sx); a generation stamp empties the
 * table for each pair without clearing it. A full table (never seen: a pair
 * scores a few hundred shifts) just scores without remembering. */
static double scored_ncc(ts_registrar *r, int sy, int sx) {
    r->ncc_requests++;
    if (!r->memo_off) {
        uint32_t hsh = ((uint32_t)sy * 0x9E3779B1u) ^ ((uint32_t)sx * 0x85EBCA77u);
        for (uint32_t k = 0; k < MEMO_PROBES; k++) {
            ncc_memo *m = &r->memo[(hsh + k) & (MEMO_SLOTS - 1)];
            if (m->gen != r->memo_gen) {
                m->gen = r->memo_gen;
                m->sy = sy;
                m->sx = sx;
                m->ncc = ts_overlap_ncc(r->ha, r->hb, r->h, r->w, sy, sx);
                r->ncc_scored++;
                return m->ncc;
            }
            if (m->sy == sy && m->sx == sx) return m->ncc;
        }
    }
    r->ncc_scored++;
    return ts_overlap_ncc(r->ha, r->hb, r->h, r->w, sy, sx);
}

/* Sub-pixel offset of a peak along one axis from three samples: a Gaussian
 * fit (exact for the Gaussian-weighted correlation peak) when all samples are
 * positive, else a parabola. */
static double subpixel(double cm, double c0, double cp) {
    double d;
    if (cm > 0 && c0 > 0 && cp > 0) {
        double lm = log(cm), l0 = log(c0), lp = log(cp);
        double den = 2.0 * (lm - 2.0 * l0 + lp);
        d = den < 0 ? (lm - lp) / den : 0;
    } else {
        double den = 2.0 * (cm - 2.0 * c0 + cp);
        d = den < 0 ? (cm - cp) / den : 0;
    }
    return d > 0.5 ? 0.5 : d < -0.5 ? -0.5 : d;
}

/* Sub-pixel refinement in the image domain (refine.c): Gauss-Newton on
 * b(p) ~ gain * a(p + d) + offset over the overlap of fa and fb (smoothed
 * further in place on noisy overlaps: fa, fb serve one refinement per
 * prepare). Unlike the correlation surface it is not biased towards zero
 * shift by the apodisation window. Starts from *dy, *dx (the integer NCC
 * maximum, a pixel or two from the answer); leaves them unchanged if no fit
 * converges within its leash (2 px; the low-passed re-fit's, 2 px from the
 * start or from the first fit: refine.h). */
static bool refine_shift(ts_registrar *r, double *dy, double *dx) {
    return ts_refine(r->fa, r->fb, r->h, r->w, r->opt.denoise_sigma, r->tmp, r->lowpass, dy, dx) !=
           TS_REFINE_FAILED;
}

/* Half-width of the autocorrelation's central lobe along (uy, ux): the
 * distance at which it first falls below a quarter of its peak or stops
 * falling. */
static double main_lobe(const ts_registrar *r, int uy, int ux, double auto0) {
    int limit = (uy ? r->h : r->w) / 2;
    if (!(auto0 > 0)) return 0;
    double prev = auto0;
    for (int d = 1; d < limit; d++) {
        double v = 0.5 * (surf_at(r, d * uy, d * ux) + surf_at(r, -d * uy, -d * ux));
        if (v < 0.25 * auto0 || v >= prev) return d;
        prev = v;
    }
    return limit;
}

typedef struct candidate {
    int sy, sx;     /* integer shift */
    int peak;       /* index into the peak list; -1: from self-similarity */
    double fy, fx;  /* sub-pixel offset from the correlation peak */
    double ncc;
} candidate;

static double clamp01(double v) { return v < 0 ? 0 : v > 1 ? 1 : v; }

/* Best NCC wins; a small penalty for the distance from the nominal shift
 * (0.1 NCC per strip side) only breaks near-ties, where the images cannot
 * decide (periodic or featureless overlaps). */
static int pick_best(const candidate *cands, int n, int h, int w, double prior_dy, double prior_dx) {
    double scale = 0.1 / (double)(h > w ? h : w), best_score = -1e300;
    int best = 0;
    for (int i = 0; i < n; i++) {
        double score = cands[i].ncc - scale * hypot(cands[i].sy - prior_dy, cands[i].sx - prior_dx);
        if (score > best_score) best_score = score, best = i;
    }
    return best;
}

/* Within opt.max_shift of the expected shift (always, without a limit); a
 * pixel of slack for the sub-pixel part. */
static bool near_prior(const ts_registrar *r, int sy, int sx, double prior_dy, double prior_dx) {
    return !(r->opt.max_shift > 0) || hypot(sy - prior_dy, sx - prior_dx) <= r->opt.max_shift + 1.0;
}

/* Moves c to the local maximum of the overlap NCC over integer shifts (8
 * neighbours); a move drops the peak's sub-pixel offset. The climb stays
 * within --max-shift of the expected shift, like the candidates (it could
 * walk a few pixels past the limit). */
static void climb_ncc(ts_registrar *r, candidate *c, double min_area, double prior_dy, double prior_dx) {
    for (int step = 0; step < 32; step++) {
        int by = c->sy, bx = c->sx;
        double best = c->ncc;
        for (int dy = -1; dy <= 1; dy++)
            for (int dx = -1; dx <= 1; dx++) {
                int sy = c->sy + dy, sx = c->sx + dx;
                if ((!dy && !dx) || abs(sy) >= r->h || abs(sx) >= r->w) continue;
                if ((double)(r->h - abs(sy)) * (double)(r->w - abs(sx)) < min_area) continue;
                if (!near_prior(r, sy, sx, prior_dy, prior_dx)) continue;
                double v = scored_ncc(r, sy, sx);
                if (v > best) best = v, by = sy, bx = sx;
            }
        if (by == c->sy && bx == c->sx) return;
        c->sy = by;
        c->sx = bx;
        c->ncc = best;
        c->fy = c->fx = 0;
    }
}

/* Inside the ellipse of the autocorrelation's main lobe. */
static bool inside_lobe(int ty, int tx, double lobe_y, double lobe_x) {
    double y = ty / lobe_y, x = tx / lobe_x;
    return y * y + x * x <= 1.0;
}

ts_status ts_register_strips(ts_registrar *r, ts_samples a, size_t a_stride, ts_samples b,
                             size_t b_stride, double prior_dy, double prior_dx,
                             ts_register_result *res, ts_error *err) {
    int h = r->h, w = r->w;
    size_t n = (size_t)h * (size_t)w;
    memset(res, 0, sizeof *res);
    res->dy = prior_dy;
    res->dx = prior_dx;
    res->ncc_second = -1;
    res->peak_ratio = 1;
    if (++r->memo_gen == 0) r->memo_gen = 1; /* a new pair: the memo is empty */

    /* Copy, pre-filter, background (ts_registrar_prepare, shared with the
     * stage model's window search). */
    const float *ha, *hb;
    ts_status st = ts_registrar_prepare(r, a, a_stride, b, b_stride, &ha, &hb, err);
    if (st) return st;
    if (!ha) {
        res->degenerate = true; /* a constant strip: nothing to correlate */
        return TS_OK;
    }
    /* (The means alone: mean_std's second pass was a standard deviation
     * nothing read, 3.6% of a 512 px run.) */
    const double mean_a = ts_sum_f64(r->ha, n) / (double)n, mean_b = ts_sum_f64(r->hb, n) / (double)n;

    spectrum(r, r->ha, mean_a, r->A);
    spectrum(r, r->hb, mean_b, r->B);

    /* Normalised cross-power spectrum A conj(B) / |A conj(B)| into B, and
     * the half-whitened power spectrum |A| into A (for the self-similarity
     * check below), both weighted by the spectral Gaussian. */
    size_t nc = (size_t)h * (size_t)r->wc;
    float *mag = r->real; /* free until the inverse FFT; nc <= h * w */
    /* Element-wise (vectorised at -O3), then summed in lanes: one chain of
     * dependent double adds in this loop was 19% of this function. */
    for (size_t i = 0; i < nc; i++) {
        float re = r->A[i][0] * r->B[i][0] + r->A[i][1] * r->B[i][1];
        float im = r->A[i][1] * r->B[i][0] - r->A[i][0] * r->B[i][1];
        r->B[i][0] = re;
        r->B[i][1] = im;
        r->A[i][0] = magnitude(r->A[i][0], r->A[i][1]);
        r->A[i][1] = 0;
        mag[i] = magnitude(re, im);
    }
    float eps = (float)(1e-6 * ts_sum_f64(mag, nc) / (double)nc) + FLT_MIN;
    for (int y = 0; y < h; y++) {
        float gy = r->gauss_y[y];
        fftwf_complex *row = r->B + (size_t)y * (size_t)r->wc;
        fftwf_complex *arow = r->A + (size_t)y * (size_t)r->wc;
        const float *mrow = mag + (size_t)y * (size_t)r->wc;
        for (int x = 0; x < r->wc; x++) {
            float g = gy * r->gauss_x[x];
            float s = g / (mrow[x] + eps);
            row[x][0] *= s;
            row[x][1] *= s;
            arow[x][0] *= g;
        }
    }
    r->B[0][0] = r->B[0][1] = 0; /* the means were removed */
    r->A[0][0] = 0;
    fftwf_execute_dft_c2r(r->inverse, r->B, r->real);

    const double smean = ts_sum_f64(r->real, n) / (double)n;

    int k = r->opt.candidates < 1 ? 1 : r->opt.candidates > MAX_CANDIDATES ? MAX_CANDIDATES : r->opt.candidates;
    peak peaks[MAX_CANDIDATES];
    int npeaks = local_maxima_top(r->real, h, w, peaks, k);

    /* Each peak (py, px) stands for the shifts py or py - h, px or px - w
     * (phase correlation is periodic); the overlap's NCC decides. */
    candidate cands[MAX_ALL];
    int ncands = 0;
    double prior_area = (double)(h - fabs(prior_dy)) * (double)(w - fabs(prior_dx));
    double min_area = r->opt.min_overlap * (prior_area > 0 ? prior_area : (double)n);
    if (min_area < 0.1 * (double)n) min_area = 0.1 * (double)n;
    for (int p = 0; p < npeaks; p++) {
        int ys[2] = {peaks[p].y, peaks[p].y - h}, xs[2] = {peaks[p].x, peaks[p].x - w};
        for (int iy = 0; iy < (peaks[p].y ? 2 : 1); iy++)
            for (int ix = 0; ix < (peaks[p].x ? 2 : 1); ix++) {
                int sy = ys[iy], sx = xs[ix];
                double area = (double)(h - abs(sy)) * (double)(w - abs(sx));
                if (area < min_area || !near_prior(r, sy, sx, prior_dy, prior_dx)) continue;
                cands[ncands++] = (candidate){sy, sx, p, 0, 0, scored_ncc(r, sy, sx)};
            }
    }
    /* With a limit, the expected shift is trusted enough to be checked
     * itself: a thin overlap at the strips' edges, faded by the window, may
     * give no correlation peak there. */
    if (r->opt.max_shift > 0) {
        int sy = (int)lround(prior_dy), sx = (int)lround(prior_dx);
        bool seen = false;
        for (int i = 0; i < ncands && !seen; i++) seen = cands[i].sy == sy && cands[i].sx == sx;
        if (!seen && abs(sy) < h && abs(sx) < w && (double)(h - abs(sy)) * (double)(w - abs(sx)) >= min_area)
            cands[ncands++] = (candidate){sy, sx, -1, 0, 0, scored_ncc(r, sy, sx)};
    }
    if (ncands == 0) return TS_OK; /* no plausible shift: prior, confidence 0 */
    /* Sub-pixel offsets now, while the correlation surface is at hand. */
    for (int i = 0; i < ncands; i++) {
        if (cands[i].peak < 0) continue;
        const peak *pk = &peaks[cands[i].peak];
        cands[i].fy = subpixel(surf_at(r, pk->y - 1, pk->x), pk->value, surf_at(r, pk->y + 1, pk->x));
        cands[i].fx = subpixel(surf_at(r, pk->y, pk->x - 1), pk->value, surf_at(r, pk->y, pk->x + 1));
    }
    int first = pick_best(cands, ncands, h, w, prior_dy, prior_dx);

    /* Self-similarity: strip a's autocorrelation peaks t (periodic
     * patterns) nominate the shifts best +- t, which the correlation peaks
     * may have missed; they join the candidates. Shifts inside the
     * autocorrelation's main lobe are the same match blurred, not
     * alternatives. */
    fftwf_execute_dft_c2r(r->inverse, r->A, r->real); /* autocorrelation of a */
    double auto0 = r->real[0];
    double lobe_y = main_lobe(r, 1, 0, auto0), lobe_x = main_lobe(r, 0, 1, auto0);
    double floor_r = 3.0 * (r->opt.spectral_sigma > 1.0 ? r->opt.spectral_sigma : 1.0);
    if (lobe_y < floor_r) lobe_y = floor_r;
    if (lobe_x < floor_r) lobe_x = floor_r;
    peak selfp[MAX_CANDIDATES + 1];
    int nself = auto0 > 0 ? local_maxima_top(r->real, h, w, selfp, k + 1) : 0; /* auto0 <= 0: no signal */
    int ncore = ncands;
    for (int p = 0; p < nself; p++) {
        int ty = selfp[p].y > h / 2 ? selfp[p].y - h : selfp[p].y;
        int tx = selfp[p].x > w / 2 ? selfp[p].x - w : selfp[p].x;
        if (inside_lobe(ty, tx, lobe_y, lobe_x)) continue;
        for (int sign = -1; sign <= 1; sign += 2) {
            int sy = cands[first].sy + sign * ty, sx = cands[first].sx + sign * tx;
            if (abs(sy) >= h || abs(sx) >= w) continue;
            if ((double)(h - abs(sy)) * (double)(w - abs(sx)) < min_area) continue;
            if (!near_prior(r, sy, sx, prior_dy, prior_dx)) continue;
            bool seen = false;
            for (int i = 0; i < ncands && !seen; i++) seen = cands[i].sy == sy && cands[i].sx == sx;
            if (!seen && ncands < MAX_ALL)
                cands[ncands++] = (candidate){sy, sx, -1, 0, 0, scored_ncc(r, sy, sx)};
        }
    }
    int best = ncands > ncore ? pick_best(cands, ncands, h, w, prior_dy, prior_dx) : first;
    /* The correlation peak can sit a pixel or two off the best overlap
     * (thin strips, vignetting): climb the overlap NCC to its local maximum
     * on the integer grid before the sub-pixel refinement. */
    climb_ncc(r, &cands[best], min_area, prior_dy, prior_dx);
    const candidate *c = &cands[best];
    res->dy = c->sy + c->fy;
    res->dx = c->sx + c->fx;
    res->unfitted = !(r->opt.refine && refine_shift(r, &res->dy, &res->dx));
    res->ncc = c->ncc;

    /* Confidence = NCC * (1 - strongest rival). A rival is a candidate
     * outside the chosen shift's main lobe, strong on two counts: for two
     * correlation peaks, the geometric mean of the peak height ratio and the
     * NCC ratio (a second peak whose overlap does not match was already
     * ruled out); for a self-similarity shift (no peak of its own), the NCC
     * ratio squared. Blank or featureless strips have a low NCC to begin
     * with. */
    double top = c->peak >= 0 ? peaks[c->peak].value - smean : 0;
    double ncc = clamp01(c->ncc), rival = 0;
    res->peak_ratio = 0;
    int climbed = 0;
    for (int i = 0; i < ncands; i++) {
        if (i == best || inside_lobe(cands[i].sy - c->sy, cands[i].sx - c->sx, lobe_y, lobe_x)) continue;
        /* A serious rival is compared at its own best, like the choice. */
        if (cands[i].ncc >= 0.5 * c->ncc && climbed < 16) {
            climb_ncc(r, &cands[i], min_area, prior_dy, prior_dx);
            climbed++;
            if (inside_lobe(cands[i].sy - c->sy, cands[i].sx - c->sx, lobe_y, lobe_x)) continue;
        }
        double nr = ncc > 0 ? clamp01(cands[i].ncc / ncc) : 1.0;
        double strength = nr * nr;
        if (c->peak >= 0 && cands[i].peak >= 0) {
            double pr = top > 0 ? clamp01((peaks[cands[i].peak].value - smean) / top) : 1.0;
            strength = sqrt(pr * nr);
            if (pr > res->peak_ratio) res->peak_ratio = pr;
        }
        if (strength > rival) rival = strength;
        if (cands[i].ncc > res->ncc_second) res->ncc_second = cands[i].ncc;
    }
    res->confidence = ncc * (1.0 - rival);
    res->matched = true;
    if (c->ncc < r->opt.min_ncc) {
        /* Nothing in the overlap matches (blank or featureless tile): the
         * nominal offset is a better guess than a noise peak, and says so. */
        res->matched = false;
        res->dy = prior_dy;
        res->dx = prior_dx;
        res->confidence = 0;
    }
    return TS_OK;
}

/* ------------------------------------------ re-registration (reregister.c) */

/* The strips pre-filtered as ts_register_strips does (the same steps, so a
 * re-registered pair sees the same images), for a search that is not a
 * correlation: *ha, *hb are the background-free strips (the registrar's
 * buffers), NULL when a strip is constant. */
ts_status ts_registrar_prepare(ts_registrar *r, ts_samples a, size_t a_stride, ts_samples b,
                               size_t b_stride, const float **ha, const float **hb, ts_error *err) {
    int h = r->h, w = r->w;
    size_t n = (size_t)h * (size_t)w;
    *ha = *hb = NULL;
    ts_copy_rows(r->fa, a, a_stride, h, w);
    ts_copy_rows(r->fb, b, b_stride, h, w);
    float lo_a, hi_a, lo_b, hi_b;
    strip_range(r->fa, n, &lo_a, &hi_a);
    strip_range(r->fb, n, &lo_b, &hi_b);
    if (constant_strip(r->fa, n, lo_a, hi_a) || constant_strip(r->fb, n, lo_b, hi_b)) return TS_OK;
    /* Negative-valued images (phase contrast) are shifted to be non-negative,
     * both strips by the same amount so log compression treats them alike:
     * the smallest value of both and 0 (a -0 minimum leaves +0). */
    float lo = 0;
    if (lo_a < lo) lo = lo_a;
    if (lo_b < lo) lo = lo_b;
    ts_status st = prefilter(r, r->fa, lo, err);
    if (!st) st = prefilter(r, r->fb, lo, err);
    if (st) return st;
    memcpy(r->ha, r->fa, n * sizeof(float));
    memcpy(r->hb, r->fb, n * sizeof(float));
    if (r->opt.background_px > 1) {
        ts_subtract_background(r->ha, h, w, r->opt.background_px, r->tmp, r->rowsum);
        ts_subtract_background(r->hb, h, w, r->opt.background_px, r->tmp, r->rowsum);
    }
    *ha = r->ha;
    *hb = r->hb;
    return TS_OK;
}

/* The sub-pixel refinement of ts_register_strips from an integer shift, on
 * the strips of the last ts_registrar_prepare. */
bool ts_registrar_refine(ts_registrar *r, double *dy, double *dx) {
    return r->opt.refine && refine_shift(r, dy, dx);
}

double ts_registrar_min_ncc(const ts_registrar *r) { return r->opt.min_ncc; }
