/* The overlap NCC at every shift of a window at once (the stage model's
 * confined search, reregister.c): the cross term of every shift from one
 * zero-padded FFT cross-correlation, the other sums from integral images,
 * in double precision. Scoring each shift on its own (ts_overlap_ncc) cost
 * window x overlap operations: on 256-px tiles the search made estimate 4x
 * slower than its first pass.
 *
 * NCC(sy, sx) of b[y][x] against a[y + sy][x + sx] over their overlap is
 * unchanged by subtracting a constant from a or from b, so both are taken
 * about their means first: the sums then stay small next to the products'
 * and the subtraction cov = sab - sa sb / n loses nothing to rounding. */
#include "register/window_ncc.h"
#include "register/size_cache.h"

#include <fftw3.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "common/error.h"
#include "common/pages.h"

/* FFTW's planner is not thread-safe (execution is); double-precision plans
 * have their own planner, apart from the registrar's float one. */
static pthread_mutex_t planner_lock = PTHREAD_MUTEX_INITIALIZER;

static bool smooth_2357(int n) {
    for (int p = 2; p <= 7; p++)
        while (n % p == 0) n /= p;
    return n == 1;
}

/* Smallest 2,3,5,7-smooth multiple of 4 >= n: the transforms are sized by
 * each window's reach, which moves by a px or two from pair to pair; on
 * multiples of 4 fewer sizes come up (each planned once per scratch, a
 * plan costs as much as tens of transforms) and FFTW runs them faster than
 * the odd-factored ones between (270 = 2 3^3 5 took 1.1-1.5x the time of
 * 280 = 2^3 5 7 here). */
static int fft_size(int n) {
    n = (n + 3) / 4 * 4;
    while (!smooth_2357(n)) n += 4;
    return n;
}

/* Sum of an (h + 1) x (w + 1) integral image over rows [y0, y1), cols [x0, x1). */
static double rect(const double *I, int w, int y0, int y1, int x0, int x1) {
    const size_t s = (size_t)w + 1;
    return I[(size_t)y1 * s + (size_t)x1] - I[(size_t)y0 * s + (size_t)x1] - I[(size_t)y1 * s + (size_t)x0] +
           I[(size_t)y0 * s + (size_t)x0];
}

/* Integral images of v - mean and of (v - mean)^2 (h + 1 x w + 1 each),
 * and v - mean into the transform's input pad (P x Q, the rest zero): one
 * pass over the strip for both (the same values as two). */
static void integrals(const float *v, int h, int w, double mean, double *I1, double *I2, double *pad, int P,
                      int Q) {
    const size_t s = (size_t)w + 1;
    memset(I1, 0, s * sizeof *I1);
    memset(I2, 0, s * sizeof *I2);
    for (int y = 0; y < h; y++) {
        double r1 = 0, r2 = 0;
        double *row = pad + (size_t)y * (size_t)Q;
        I1[(size_t)(y + 1) * s] = I2[(size_t)(y + 1) * s] = 0;
        for (int x = 0; x < w; x++) {
            double d = (double)v[(size_t)y * (size_t)w + (size_t)x] - mean;
            row[x] = d;
            r1 += d, r2 += d * d;
            I1[(size_t)(y + 1) * s + (size_t)x + 1] = I1[(size_t)y * s + (size_t)x + 1] + r1;
            I2[(size_t)(y + 1) * s + (size_t)x + 1] = I2[(size_t)y * s + (size_t)x + 1] + r2;
        }
        memset(row + w, 0, (size_t)(Q - w) * sizeof *row);
    }
    memset(pad + (size_t)h * (size_t)Q, 0, (size_t)(P - h) * (size_t)Q * sizeof *pad);
}

static double mean_of(const float *v, size_t n) {
    double s = 0;
    for (size_t i = 0; i < n; i++) s += v[i];
    return n ? s / (double)n : 0;
}

/* One transform size's buffers and plans. */
typedef struct fft_slot {
    int h, w, P, Q;
    double *pa, *pb, *I;
    fftw_complex *fa, *fb;
    ts_page_set mem; /* holds pa, pb, I, fa and fb */
    fftw_plan fwd_a, fwd_b, inv;
} fft_slot;

/* The transforms are sized by each window's reach (ts_window_ncc), which
 * differs between a pass's pairs by a few px and between the two searches
 * of one pair not at all: a few sizes kept, so that pairs alternating
 * between two sizes do not plan again each time (the least recently used
 * goes). Each slot's results depend only on its size, not on what the
 * scratch did before. */
#define SLOTS 4
struct ts_window_scratch {
    ts_size_cache slots; /* of fft_slot */
};

static void slot_free(fft_slot *s) {
    if (!s) return;
    pthread_mutex_lock(&planner_lock);
    if (s->fwd_a) fftw_destroy_plan(s->fwd_a);
    if (s->fwd_b) fftw_destroy_plan(s->fwd_b);
    if (s->inv) fftw_destroy_plan(s->inv);
    pthread_mutex_unlock(&planner_lock);
    ts_page_set_free(&s->mem);
    free(s);
}

static void slot_destroy(void *s) { slot_free(s); }

void ts_window_scratch_free(ts_window_scratch *s) {
    if (!s) return;
    ts_size_cache_clear(&s->slots);
    free(s);
}

static fft_slot *slot_new(int h, int w, int P, int Q, ts_error *err) {
    fft_slot *s = calloc(1, sizeof *s);
    if (!s) {
        ts_fail(err, TS_ERR_NOMEM, "out of memory for the window NCC of %dx%d strips", h, w);
        return NULL;
    }
    s->h = h, s->w = w, s->P = P, s->Q = Q;
    const size_t nr = (size_t)s->P * (size_t)s->Q, nc = (size_t)s->P * (size_t)(s->Q / 2 + 1);
    const size_t sizes[] = {nr * sizeof *s->pa, nr * sizeof *s->pb, nc * sizeof *s->fa, nc * sizeof *s->fb,
                            4 * ((size_t)h + 1) * ((size_t)w + 1) * sizeof *s->I};
    void *buf[5];
    if (ts_page_set_alloc(&s->mem, 5, sizes, buf)) {
        s->pa = buf[0], s->pb = buf[1], s->fa = buf[2], s->fb = buf[3], s->I = buf[4];
        pthread_mutex_lock(&planner_lock);
        s->fwd_a = fftw_plan_dft_r2c_2d(s->P, s->Q, s->pa, s->fa, FFTW_ESTIMATE);
        s->fwd_b = fftw_plan_dft_r2c_2d(s->P, s->Q, s->pb, s->fb, FFTW_ESTIMATE);
        s->inv = fftw_plan_dft_c2r_2d(s->P, s->Q, s->fa, s->pa, FFTW_ESTIMATE);
        pthread_mutex_unlock(&planner_lock);
        if (s->fwd_a && s->fwd_b && s->inv) return s;
        ts_fail(err, TS_ERR_INTERNAL, "FFTW could not plan a %dx%d window NCC", s->P, s->Q);
    } else {
        ts_fail(err, TS_ERR_NOMEM, "out of memory for the window NCC of %dx%d strips", h, w);
    }
    slot_free(s);
    return NULL;
}

/* The scratch's slot for these strips and sizes, made (in place of the
 * least recently used) if none has them; NULL on failure (err set). */
static fft_slot *slot_get(ts_window_scratch *S, int h, int w, int P, int Q, ts_error *err) {
    const int key[TS_SIZE_KEYS] = {h, w, P, Q};
    fft_slot *s = ts_size_cache_find(&S->slots, key);
    if (s) return s;
    if (!(s = slot_new(h, w, P, Q, err))) return NULL;
    ts_size_cache_put(&S->slots, key, s);
    return s;
}

/* The largest |shift| along one axis of n cells around c that a strip of
 * length len scores (beyond len - min_side the overlap is too thin). */
static int window_reach(int c, int n, int len, int min_side) {
    int lo = c - n / 2, hi = c + n - 1 - n / 2;
    int r = abs(lo) > abs(hi) ? abs(lo) : abs(hi);
    return r > len - min_side ? (len - min_side > 0 ? len - min_side : 0) : r;
}

ts_status ts_window_ncc(const float *a, const float *b, int h, int w, int cy, int cx, int ny, int nx, int min_side,
                        double *out, ts_window_scratch **scratch, ts_error *err) {
    /* The circular correlation of strips zero-padded to P rows holds the
     * linear one for every |shift| <= P - h: padded to the window's reach,
     * not to 2h (the strip's every shift), the transforms are about half
     * as large on the stage model's windows. */
    int ry = window_reach(cy, ny, h, min_side), rx = window_reach(cx, nx, w, min_side);
    const int P = fft_size(h + ry), Q = fft_size(w + rx);
    ts_window_scratch *own = NULL, **sp = scratch ? scratch : &own;
    if (!*sp) {
        if (!(*sp = malloc(sizeof **sp)))
            return ts_fail(err, TS_ERR_NOMEM, "out of memory for the window NCC of %dx%d strips", h, w);
        ts_size_cache_init(&(*sp)->slots, SLOTS, slot_destroy);
    }
    fft_slot *S = slot_get(*sp, h, w, P, Q, err);
    if (!S) {
        ts_window_scratch_free(own);
        return err ? err->code : TS_ERR_NOMEM;
    }
    const int Qc = Q / 2 + 1;
    const size_t nI = ((size_t)h + 1) * ((size_t)w + 1);
    double *pa = S->pa, *pb = S->pb, *I = S->I;
    fftw_complex *fa = S->fa, *fb = S->fb;
    ts_status st = TS_OK;
    const double ma = mean_of(a, (size_t)h * (size_t)w), mb = mean_of(b, (size_t)h * (size_t)w);
    double *IA = I, *IAA = I + nI, *IB = I + 2 * nI, *IBB = I + 3 * nI;
    /* (pa is the inverse's output too: filled, padding included, each call) */
    integrals(a, h, w, ma, IA, IAA, pa, P, Q);
    integrals(b, h, w, mb, IB, IBB, pb, P, Q);
    fftw_execute(S->fwd_a);
    fftw_execute(S->fwd_b);
    /* A conj(B): its inverse at (s mod P, t mod Q) is sum A[y + s][x + t] B[y][x]. */
    for (size_t k = 0; k < (size_t)P * (size_t)Qc; k++) {
        const double ar = fa[k][0], ai = fa[k][1], br = fb[k][0], bi = fb[k][1];
        fa[k][0] = ar * br + ai * bi;
        fa[k][1] = ai * br - ar * bi;
    }
    fftw_execute(S->inv);
    const double scale = 1.0 / ((double)P * (double)Q);
    for (int i = 0; i < ny; i++)
        for (int j = 0; j < nx; j++) {
            const int sy = cy + i - ny / 2, sx = cx + j - nx / 2;
            const int y0 = sy < 0 ? -sy : 0, y1 = sy > 0 ? h - sy : h;
            const int x0 = sx < 0 ? -sx : 0, x1 = sx > 0 ? w - sx : w;
            double *o = &out[(size_t)i * (size_t)nx + (size_t)j];
            if (y1 - y0 < min_side || x1 - x0 < min_side) {
                *o = -2;
                continue;
            }
            const double n = (double)(y1 - y0) * (double)(x1 - x0);
            const double sa = rect(IA, w, y0 + sy, y1 + sy, x0 + sx, x1 + sx);
            const double saa = rect(IAA, w, y0 + sy, y1 + sy, x0 + sx, x1 + sx);
            const double sb = rect(IB, w, y0, y1, x0, x1), sbb = rect(IBB, w, y0, y1, x0, x1);
            const double sab = pa[(size_t)((sy + P) % P) * (size_t)Q + (size_t)((sx + Q) % Q)] * scale;
            const double va = saa - sa * sa / n, vb = sbb - sb * sb / n, cov = sab - sa * sb / n;
            /* Constant overlaps score 0, as ts_overlap_ncc's: measured
             * against the raw sums of squares (mean restored). */
            const double raw_aa = saa + 2 * ma * sa + n * ma * ma, raw_bb = sbb + 2 * mb * sb + n * mb * mb;
            *o = !(va > 1e-12 * (raw_aa + 1e-30)) || !(vb > 1e-12 * (raw_bb + 1e-30)) ? 0 : cov / sqrt(va * vb);
        }
    ts_window_scratch_free(own);
    return st;
}
