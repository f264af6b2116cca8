/* The procedural specimen (see specimen.h). Blobs live on a jittered lattice
 * of cells; each present cell draws its shape from a hash of (seed, cell), so
 * any window of the specimen renders on its own. */
#include "simulate/specimen.h"

#include <math.h>
#include <stdlib.h>
#include <stddef.h>
#include <stdint.h>

#define CELL 48.0 /* lattice spacing of cells, px */

static inline uint64_t mix64(uint64_t z) {
    z += 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

uint64_t sim_hash(uint64_t seed, uint64_t a, uint64_t b, uint64_t c) {
    return mix64(seed ^ mix64(a ^ mix64(b ^ mix64(c))));
}

double sim_u01(uint64_t h) { return (double)(h >> 11) * 0x1.0p-53; }

/* Value noise: hashed lattice values, smoothly interpolated; ~[0, 1]. */
static inline float lattice(uint64_t salt, int64_t iy, int64_t ix) {
    return (float)sim_u01(sim_hash(salt, (uint64_t)iy, (uint64_t)ix, 7));
}

static inline float smooth(float t) { return t * t * (3 - 2 * t); }

/* Adds amp * noise(y / scale, (x0 + c) / scale) to out[c] for c in [0, n)
 * where mask (if not NULL) is set. Along a row the lattice cell changes only
 * every `scale` pixels, so its four corner values are cached. */
static inline int64_t floor_i64(double v) {
    int64_t i = (int64_t)v; /* truncates toward zero */
    return (double)i > v ? i - 1 : i;
}

static void vnoise_row(uint64_t salt, double y, double x0, int n, double scale, float amp,
                       const unsigned char *mask, float *out) {
    double inv = 1.0 / scale;
    double fy = y * inv;
    int64_t iy = floor_i64(fy);
    float ty = smooth((float)(fy - (double)iy));
    int64_t cached = INT64_MIN;
    float v00 = 0, v01 = 0, v10 = 0, v11 = 0;
    for (int c = 0; c < n; c++) {
        if (mask && !mask[c]) continue;
        double fx = (x0 + c) * inv;
        int64_t ix = floor_i64(fx);
        if (ix != cached) {
            if (ix == cached + 1) {
                v00 = v01, v10 = v11;
            } else {
                v00 = lattice(salt, iy, ix);
                v10 = lattice(salt, iy + 1, ix);
            }
            v01 = lattice(salt, iy, ix + 1);
            v11 = lattice(salt, iy + 1, ix + 1);
            cached = ix;
        }
        float tx = smooth((float)(fx - (double)ix));
        float a = v00 + (v01 - v00) * tx, b = v10 + (v11 - v10) * tx;
        out[c] += amp * (a + (b - a) * ty);
    }
}

typedef struct blob {
    double cy, cx;     /* centre, global px */
    double ca, sa;     /* orientation cos/sin */
    double ra, rb;     /* semi-axes, px */
    float intensity;
    int kind;          /* 0 nucleus (plateau), 1 cytoplasm (gaussian), 2 spot */
} blob;

/* The blobs of cell (i, j) for a plane; returns how many (<= 8). */
static int cell_blobs(const sim_plane *pl, int64_t i, int64_t j, blob *out) {
    uint64_t base = sim_hash(pl->seed, (uint64_t)i, (uint64_t)j, 1);
    if (sim_u01(base) > 0.72) return 0; /* empty lattice site */
    double u[12];
    for (int k = 0; k < 12; k++) u[k] = sim_u01(sim_hash(base, (uint64_t)k, 0, 2));
    double cy = (i + 0.5 + (u[0] - 0.5) * 0.5) * CELL;
    double cx = (j + 0.5 + (u[1] - 0.5) * 0.5) * CELL;
    /* slow drift over time, per cell */
    cy += pl->t * 1.5 * (u[2] - 0.5);
    cx += pl->t * 1.5 * (u[3] - 0.5);
    double dz = pl->z - (pl->nz - 1) / 2.0;
    double defocus = 1.0 / (1.0 + 0.08 * dz * dz);
    double grow = 1.0 + 0.05 * fabs(dz);
    double ang = u[4] * 3.141592653589793;
    int kind = pl->channel % 3;
    /* channels beyond 3 reuse the kinds at other brightness */
    double gain = 1.0 / (1.0 + pl->channel / 3);
    if (kind == 0 || kind == 1) {
        blob *b = &out[0];
        b->cy = cy, b->cx = cx, b->ca = cos(ang), b->sa = sin(ang);
        double r = CELL * (kind == 0 ? 0.18 + 0.10 * u[5] : 0.40 + 0.15 * u[5]) * grow;
        double ecc = 0.7 + 0.3 * u[6];
        b->ra = r, b->rb = r * ecc;
        b->intensity = (float)((kind == 0 ? 1500 + 2000 * u[7] : 700 + 800 * u[7]) * defocus * gain);
        b->kind = kind;
        return 1;
    }
    int n = 3 + (int)(u[5] * 6);
    for (int k = 0; k < n; k++) {
        uint64_t h = sim_hash(base, (uint64_t)k, 1, 3);
        double a = sim_u01(h) * 6.283185307179586;
        double rr = CELL * (0.12 + 0.28 * sim_u01(mix64(h)));
        blob *b = &out[k];
        b->cy = cy + rr * sin(a), b->cx = cx + rr * cos(a);
        b->ca = 1, b->sa = 0;
        b->ra = b->rb = (1.3 + 1.2 * sim_u01(mix64(h + 1))) * grow;
        b->intensity = (float)((1800 + 2200 * sim_u01(mix64(h + 2))) * defocus * gain);
        b->kind = 2;
    }
    return n;
}

static void draw_blob(const blob *b, double y0, double x0, int h, int w, float *out) {
    double reach = b->kind == 1 ? 2.2 * b->ra : b->kind == 2 ? 3.5 * b->ra : 1.2 * b->ra;
    int r0 = (int)floor(b->cy - reach - y0), r1 = (int)ceil(b->cy + reach - y0);
    int c0 = (int)floor(b->cx - reach - x0), c1 = (int)ceil(b->cx + reach - x0);
    if (r0 < 0) r0 = 0;
    if (c0 < 0) c0 = 0;
    if (r1 > h - 1) r1 = h - 1;
    if (c1 > w - 1) c1 = w - 1;
    for (int r = r0; r <= r1; r++) {
        double dy = y0 + r - b->cy;
        float *row = out + (size_t)r * (size_t)w;
        for (int c = c0; c <= c1; c++) {
            double dx = x0 + c - b->cx;
            double p = (dx * b->ca + dy * b->sa) / b->ra, q = (-dx * b->sa + dy * b->ca) / b->rb;
            double rho2 = p * p + q * q;
            float v;
            if (b->kind == 0) {
                /* plateau with a soft rim */
                double rho = sqrt(rho2);
                double s = (1.12 - rho) / 0.25;
                if (s <= 0) continue;
                if (s > 1) s = 1;
                v = (float)(s * s * (3 - 2 * s));
            } else {
                if (rho2 > 12.5) continue;
                v = (float)exp(-0.5 * rho2 * (b->kind == 1 ? 2.0 : 1.0));
            }
            row[c] += b->intensity * v;
        }
    }
}

void sim_render(const sim_plane *pl, double y0, double x0, int h, int w, float *out) {
    size_t n = (size_t)h * (size_t)w;
    for (size_t k = 0; k < n; k++) out[k] = 0;
    int64_t i0 = (int64_t)floor((y0 - CELL) / CELL) - 1, i1 = (int64_t)floor((y0 + h + CELL) / CELL) + 1;
    int64_t j0 = (int64_t)floor((x0 - CELL) / CELL) - 1, j1 = (int64_t)floor((x0 + w + CELL) / CELL) + 1;
    blob blobs[8];
    for (int64_t i = i0; i <= i1; i++)
        for (int64_t j = j0; j <= j1; j++) {
            int nb = cell_blobs(pl, i, j, blobs);
            for (int k = 0; k < nb; k++) draw_blob(&blobs[k], y0, x0, h, w, out);
        }
    /* texture inside structures (chromatin-like, several scales), and a faint
     * slowly varying background everywhere */
    uint64_t salt = sim_hash(pl->seed, (uint64_t)pl->channel, 0, 5);
    uint64_t salt_bg = sim_hash(pl->seed, 0, 0, 6);
    float *tex = malloc((size_t)w * sizeof *tex);
    unsigned char *mask = malloc((size_t)w);
    if (!tex || !mask) {
        /* no scratch: plain blobs, still deterministic for this size */
        free(tex);
        free(mask);
        return;
    }
    for (int r = 0; r < h; r++) {
        double y = y0 + r;
        float *row = out + (size_t)r * (size_t)w;
        for (int c = 0; c < w; c++) {
            mask[c] = row[c] > 1.0f;
            tex[c] = 0.55f;
        }
        vnoise_row(salt, y, x0, w, 3.0, 0.45f, mask, tex);
        vnoise_row(salt + 1, y, x0, w, 9.0, 0.27f, mask, tex);
        vnoise_row(salt + 2, y, x0, w, 27.0, 0.18f, mask, tex);
        for (int c = 0; c < w; c++)
            if (mask[c]) row[c] *= tex[c];
        vnoise_row(salt_bg, y, x0, w, 160.0, 80.0f, NULL, row);
        vnoise_row(salt_bg + 1, y, x0, w, 45.0, 40.0f, NULL, row);
    }
    free(tex);
    free(mask);
}
