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
#include "register/size_cache.h"

#include <fftw3.h>
#include <math.h>
#include <pthread.h>
#include <stddef.h>
#include <stdlib.h>

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

/* Plans by size, least recently used replaced: a plate's overlaps come in
 * a few dozen sizes (the overlap's depth by its length, both varying with
 * the stage's scatter), and planning, even FFTW_ESTIMATE, costs more than
 * the transforms. A small plate still plans nearly every crop: on
 * test_register_robust's cell24 (45 pairs, all re-fitted) estimate takes
 * 112 ms against 56 with the Gaussian re-fit, 37% of it in FFTW's
 * planner (143 ms without this cache). */
#define PLAN_SLOTS 64

typedef struct dct_plans {
    fftwf_plan fwd, inv;
} dct_plans;

static void dct_plans_free(void *item) {
    dct_plans *d = item;
    ts_fftwf_planner_lock();
    if (d->fwd) fftwf_destroy_plan(d->fwd);
    if (d->inv) fftwf_destroy_plan(d->inv);
    ts_fftwf_planner_unlock();
    free(d);
}

struct ts_lowpass_plans {
    ts_size_cache cache; /* of dct_plans */
};

ts_lowpass_plans *ts_lowpass_plans_create(void) {
    ts_lowpass_plans *p = malloc(sizeof *p);
    if (p) ts_size_cache_init(&p->cache, PLAN_SLOTS, dct_plans_free);
    return p;
}

void ts_lowpass_plans_free(ts_lowpass_plans *p) {
    if (!p) return;
    ts_size_cache_clear(&p->cache);
    free(p);
}

/* The h x w plans (made on first use), or NULL. In-place plans for any
 * alignment, executed on the caller's arrays. */
static const dct_plans *plans_for(ts_lowpass_plans *p, int h, int w) {
    const int key[TS_SIZE_KEYS] = {h, w, 0, 0};
    dct_plans *d = ts_size_cache_find(&p->cache, key);
    if (d) return d;
    float *buf = fftwf_malloc((size_t)h * (size_t)w * sizeof(float));
    if (!buf || !(d = calloc(1, sizeof *d))) {
        fftwf_free(buf);
        return NULL;
    }
    const unsigned flags = FFTW_ESTIMATE | FFTW_UNALIGNED;
    ts_fftwf_planner_lock();
    d->fwd = fftwf_plan_r2r_2d(h, w, buf, buf, FFTW_REDFT10, FFTW_REDFT10, flags);
    d->inv = fftwf_plan_r2r_2d(h, w, buf, buf, FFTW_REDFT01, FFTW_REDFT01, flags);
    ts_fftwf_planner_unlock();
    fftwf_free(buf);
    if (!d->fwd || !d->inv) {
        dct_plans_free(d);
        return NULL;
    }
    ts_size_cache_put(&p->cache, key, d);
    return d;
}

bool ts_lowpass_pair(ts_lowpass_plans *plans, float *a, float *b, int h, int w, int order, double lo, double hi,
                     double *cutoff) {
    if (h < 1 || w < 1 || !plans) return false;
    const dct_plans *d = plans_for(plans, h, w);
    if (!d) return false;
    fftwf_execute_r2r(d->fwd, a, a);
    fftwf_execute_r2r(d->fwd, b, b);
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
    fftwf_execute_r2r(d->inv, a, a);
    fftwf_execute_r2r(d->inv, b, b);
    return true;
}
