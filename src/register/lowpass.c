/* Butterworth low-pass of two views of one scene by the DCT-II, its
 * cut-off measured on the two views.
 *
 * Why the DCT: the filtered image is the symmetric extension's, so an
 * edge sees its own mirror image, not the opposite edge (the FFT's
 * periodic wrap). Why this shape rather than a Gaussian: where read noise
 * is as strong as a faint texture's detail, the refinement (refine.c) has
 * to drop the frequencies the noise owns; a Gaussian also damps the
 * middle band below its cut-off, which carries most of the shift, while a
 * Butterworth of order 6 keeps it flat. Why measured: where the noise
 * takes over depends on the specimen (the phase-contrast cell plates'
 * overlaps mostly at 0.6-1.0 rad/px, test_stage_model's blurred texture
 * at 0.85-1.6); a fixed 0.8 cost the latter 0.92 px rms against 0.58
 * (docs/register.md, step 8). */
#include "register/lowpass.h"

#include <fftw3.h>
#include <math.h>
#include <pthread.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

static pthread_mutex_t planner_lock = PTHREAD_MUTEX_INITIALIZER;

void ts_fftwf_planner_lock(void) { pthread_mutex_lock(&planner_lock); }
void ts_fftwf_planner_unlock(void) { pthread_mutex_unlock(&planner_lock); }

/* The radial frequency (rad/px, over `cutoff`) of DCT-II coefficient (y, x)
 * of an h x w image, raised to `order`: the Butterworth's denominator less 1. */
static double butter_power(int y, int x, int h, int w, double cutoff, int order) {
    const double fy = (double)y / (double)h, fx = (double)x / (double)w;
    const double r = M_PI * sqrt(fy * fy + fx * fx) / cutoff;
    double r2 = r * r, p = 1;
    for (int k = 0; k < order / 2; k++) p *= r2;
    if (order % 2) p *= r;
    return p;
}

#define BINS 48
#define BIN_WIDTH 0.05 /* rad/px */

/* Plans by length, for the transform done one axis at a time: a plate's
 * overlaps come in a few dozen sizes (the overlap's depth by its length,
 * both varying with the stage's scatter), nearly every size of a small
 * plate a new one, and planning, even FFTW_ESTIMATE, costs more than the
 * transforms. A 2-D plan per size cost 0.3-2.8 ms (on 24x24 tiles of 256
 * px, 41 sizes for 40 re-fitted pairs: 55 ms of CPU, 8% of estimate,
 * against 12 ms of transforms); the lengths recur across sizes, and the
 * 2-D transform is the rows' then the columns' 1-D ones (FFTW's own 2-D
 * plan does the same: the same bits). (On test_register_robust's cell24,
 * 45 pairs all re-fitted, estimate took 112 ms against 56 with the
 * Gaussian re-fit, 37% of it in FFTW's planner, 143 ms without a cache.) */
typedef struct dct_plans {
    fftwf_plan fwd, inv;
} dct_plans;

/* The plans are shared by every registrar alive (each thread's, the stage
 * pass's, the bridges'): the two directions' overlaps have the same
 * lengths, depth and length swapped. By length, never replaced while one
 * registrar lives (a plan may be running in another thread; the lengths
 * are at most the strips' sides), all destroyed with the last. */
static pthread_mutex_t shared_lock = PTHREAD_MUTEX_INITIALIZER;
static struct {
    dct_plans *by_length; /* [n]: fwd NULL where not made yet */
    int n;
    int users; /* ts_lowpass_plans alive */
} shared;

/* A caller's scratch: two planes, each a 1-D pass's output (turned: the
 * image transposed, for its columns), in one allocation. */
struct ts_lowpass_plans {
    float *spare, *turned; /* turned = spare + size */
    size_t size;           /* floats each holds */
};

ts_lowpass_plans *ts_lowpass_plans_create(void) {
    ts_lowpass_plans *p = calloc(1, sizeof *p);
    if (!p) return NULL;
    pthread_mutex_lock(&shared_lock);
    shared.users++;
    pthread_mutex_unlock(&shared_lock);
    return p;
}

void ts_lowpass_plans_free(ts_lowpass_plans *p) {
    if (!p) return;
    free(p->spare);
    free(p);
    pthread_mutex_lock(&shared_lock);
    if (--shared.users == 0) {
        ts_fftwf_planner_lock();
        for (int n = 0; n < shared.n; n++) {
            if (shared.by_length[n].fwd) fftwf_destroy_plan(shared.by_length[n].fwd);
            if (shared.by_length[n].inv) fftwf_destroy_plan(shared.by_length[n].inv);
        }
        ts_fftwf_planner_unlock();
        free(shared.by_length);
        shared.by_length = NULL, shared.n = 0;
    }
    pthread_mutex_unlock(&shared_lock);
}

/* The length-n plans (made on first use), or NULL. Out-of-place plans for
 * any alignment, executed on each row of the caller's arrays: planned in
 * place they cost twice the planning (0.34 against 0.19 ms a length from
 * 150 to 256 px, FFTW_ESTIMATE here) for the same bits (every length from
 * 4 to 300, both kinds, compared here). */
static dct_plans plans_for(int n) {
    dct_plans d = {NULL, NULL};
    pthread_mutex_lock(&shared_lock);
    if (n >= shared.n) {
        const int grown = n + 1 > 2 * shared.n ? n + 1 : 2 * shared.n;
        dct_plans *t = realloc(shared.by_length, (size_t)grown * sizeof *t);
        if (!t) goto out;
        memset(t + shared.n, 0, (size_t)(grown - shared.n) * sizeof *t);
        shared.by_length = t, shared.n = grown;
    }
    dct_plans *at = &shared.by_length[n];
    if (!at->fwd) {
        float *buf = fftwf_malloc(2 * (size_t)n * sizeof(float));
        if (!buf) goto out;
        const unsigned flags = FFTW_ESTIMATE | FFTW_UNALIGNED;
        ts_fftwf_planner_lock();
        fftwf_plan fwd = fftwf_plan_r2r_1d(n, buf, buf + n, FFTW_REDFT10, flags);
        fftwf_plan inv = fftwf_plan_r2r_1d(n, buf, buf + n, FFTW_REDFT01, flags);
        if (!fwd || !inv) {
            if (fwd) fftwf_destroy_plan(fwd);
            if (inv) fftwf_destroy_plan(inv);
            fwd = inv = NULL;
        }
        ts_fftwf_planner_unlock();
        fftwf_free(buf);
        at->fwd = fwd, at->inv = inv;
    }
    d = *at;
out:
    pthread_mutex_unlock(&shared_lock);
    return d;
}

/* dst (w x h) = src (h x w) transposed, in 8 x 8 blocks. */
static void transpose(const float *src, float *dst, int h, int w) {
    for (int y0 = 0; y0 < h; y0 += 8)
        for (int x0 = 0; x0 < w; x0 += 8) {
            const int y1 = y0 + 8 < h ? y0 + 8 : h, x1 = x0 + 8 < w ? x0 + 8 : w;
            for (int x = x0; x < x1; x++)
                for (int y = y0; y < y1; y++) dst[(size_t)x * (size_t)h + (size_t)y] = src[(size_t)y * (size_t)w + (size_t)x];
        }
}

/* The 2-D transform of v (h x w, into v): each row by the length-w plan
 * (into spare), then each column, as a row of it transposed, by the
 * length-h one (into spare again), transposed back. */
static void dct_2d(ts_lowpass_plans *p, dct_plans rows, dct_plans cols, bool inverse, float *v, int h, int w) {
    const fftwf_plan pr = inverse ? rows.inv : rows.fwd, pc = inverse ? cols.inv : cols.fwd;
    for (int y = 0; y < h; y++) fftwf_execute_r2r(pr, v + (size_t)y * (size_t)w, p->spare + (size_t)y * (size_t)w);
    transpose(p->spare, p->turned, h, w);
    for (int x = 0; x < w; x++)
        fftwf_execute_r2r(pc, p->turned + (size_t)x * (size_t)h, p->spare + (size_t)x * (size_t)h);
    transpose(p->spare, v, w, h);
}

bool ts_lowpass_pair(ts_lowpass_plans *plans, float *a, float *b, int h, int w, int order, double lo, double hi,
                     double *cutoff) {
    if (h < 1 || w < 1 || !plans) return false;
    const size_t n = (size_t)h * (size_t)w;
    if (n > plans->size) {
        float *t = realloc(plans->spare, 2 * n * sizeof(float));
        if (!t) return false;
        plans->spare = t, plans->turned = t + n, plans->size = n;
    }
    const dct_plans rows = plans_for(w), cols = plans_for(h);
    if (!rows.fwd || !cols.fwd) return false;
    dct_2d(plans, rows, cols, false, a, h, w);
    dct_2d(plans, rows, cols, false, b, h, w);
    /* The two views' noise is independent, so a * b is the signal's
     * power and (a - b)^2 / 2 the noise's. Per radius bin: the sum of
     * each coefficient's worth a b - (a - b)^2 / 8, signal less a
     * quarter of the noise (a frequency is worth keeping while its
     * signal is above a quarter of its noise; at half, the two-view
     * Wiener weight P / (2P + N) at a quarter of its high-signal value,
     * the cell plates' overlaps were cut too early, 15 of 30 plates
     * over 0.3 px against 13). */
    double worth[BINS] = {0};
    for (int y = 0; y < h; y++)
        for (int x = 0; x < w; x++) {
            if (!y && !x) continue;
            const double fy = (double)y / (double)h, fx = (double)x / (double)w;
            const int k = (int)(M_PI * sqrt(fy * fy + fx * fx) / BIN_WIDTH);
            if (k >= BINS) continue;
            const double va = a[(size_t)y * (size_t)w + (size_t)x], vb = b[(size_t)y * (size_t)w + (size_t)x];
            const double t = va * vb - 0.125 * (va - vb) * (va - vb);
            worth[k] += t;
        }
    /* The cut-off: where the running sum over radii of r^2 worth is
     * largest. A sum over many coefficients, steadier than where one
     * bin first crosses; still, past the detail the sum wanders, and
     * its maximum can lie beyond where the detail ends (1.45 rad/px
     * for plane waves ending at 0.7 in test_lowpass, whose leakage
     * is common power too). Taking a larger radius only where the
     * sum gained twice its own noise cut the faint texture of
     * test_stage_model's many draws too early (0.80 px rms, 9 over
     * 1 px, against 0.58 and 2). */
    double rc = lo, run = 0, best = 0;
    for (int k = 0; k < BINS; k++) {
        const double r = (k + 0.5) * BIN_WIDTH;
        run += r * r * worth[k];
        if (run > best) best = run, rc = (k + 1) * BIN_WIDTH;
    }
    if (rc < lo) rc = lo;
    if (rc > hi) rc = hi;
    *cutoff = rc;
    const double norm = 1.0 / (4.0 * (double)h * (double)w);
    for (int y = 0; y < h; y++)
        for (int x = 0; x < w; x++) {
            const double g = norm / (1.0 + butter_power(y, x, h, w, rc, order));
            a[(size_t)y * (size_t)w + (size_t)x] = (float)(a[(size_t)y * (size_t)w + (size_t)x] * g);
            b[(size_t)y * (size_t)w + (size_t)x] = (float)(b[(size_t)y * (size_t)w + (size_t)x] * g);
        }
    dct_2d(plans, rows, cols, true, a, h, w);
    dct_2d(plans, rows, cols, true, b, h, w);
    return true;
}
