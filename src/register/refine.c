/* Sub-pixel refinement of a strip shift: Gauss-Newton in the image domain
 * on b(p) = gain * a(p + d) + offset, from the integer NCC maximum, with
 * a(p + d) by cubic B-spline interpolation (its exact gradient as the
 * Jacobian; bilinear's is not differentiable at the pixels).
 *
 * Noisy overlaps are fitted again on low-passed strips: interpolating a
 * noisy image at a fractional position averages its noise (bilinear at
 * half a pixel halves the variance of white noise), so the residual of an
 * overlap whose read noise is comparable to its signal is smallest
 * half-way between pixels, whatever the content: on faint phase-contrast
 * overlaps the least-squares minimum sat 0.3-0.6 px from the truth. With
 * the noise's high frequencies removed interpolation barely changes its
 * variance. The re-fit costs transforms and a finer fit, and where the
 * noise is low the first fit is already within a few hundredths of a
 * pixel, hence the first fit's noise measure decides (TS_REFINE_NOISE:
 * phase-contrast overlaps 0.2-1.3, IHC 0.04-0.2, Hubble 0.03-0.13, SEM and
 * simulated plates 0.01-0.02). It is a choice of speed: measured, the
 * re-fit is the more precise on white residuals at nearly every noise
 * level, the clean ones too (docs/register.md, step 8, "What the noise
 * gate costs").
 *
 * That measure is also high where the misfit is structure rather than
 * noise: the real dot-grid tiles of test_register_starrynight.py (sharp
 * 8-bit dots, uneven illumination, 40-60% overlaps) score 1.1-1.9, and
 * smoothing moved them 0.3-0.5 px away from Fiji's positions. Read noise
 * is white before the pre-filter, so its residual keeps the fine-scale
 * share (1 - lag-1 correlation) the pre-filter leaves white noise (0.74
 * at 0.5 px), less a little from interpolating a's noise; structured
 * misfit is correlated over pixels. Measured against that share
 * (TS_REFINE_WHITE 0.7): rough cell24/cell16_blank overlaps 0.83-1.0
 * (but four of cell16_blank's at 0.06-0.27, lag-1 correlation 0.95: blank
 * tiles against content), starrynight's 0.24-0.57, the few rough overlaps
 * of the IHC, Hubble and SEM plates 0.02-0.5 (but one): those keep the
 * first fit.
 *
 * Why the overlap alone, cut at the integer shift, and filtered as two
 * equal crops: a filter at an image's edge sees the mirror image beyond
 * it. On whole strips the two strips' edges are at different places of
 * the overlap (one tile's edge is one end of the overlap, the other
 * tile's the other end), and that mismatch pulled overlaps of 15-35 px by
 * 0.1-0.25 px along the pair unless a band of 1-2 px along each edge was
 * left out, a third of a 6 px overlap. Cut to the same pixels, the two
 * crops' edges coincide up to the sub-pixel rest, and every pixel counts
 * (the B-spline taps beyond the crop are its mirror image, as the
 * coefficients' own boundary).
 * docs/register.md ("One pair of strips", step 8) has the measurements. */
#include "register/refine.h"

#include <math.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "register/lowpass.h"
#include "register/register.h"
#include "register/vec.h"

/* The cubic B-spline's pole, sqrt(3) - 2, and the samples beyond which its
 * powers are below 1e-9 (|z|^16 = 7e-10). */
#define POLE (-0.2679491924311227)

/* Eight float lanes (vec.h's ts_v8f: one AVX register, two SSE2 ones):
 * the fits' row sums run in eight lanes in both variants below, so
 * both give the same bits (test_refine_isas_same_bits). */
#define V8F_SPLAT(x) ((ts_v8f){(x), (x), (x), (x), (x), (x), (x), (x)})
/* Lanes 0-3 and 4-7 summed as ts_v4f_sum2 sums its two vectors. */
#define V8F_SUM(v) ts_v4f_sum2((ts_v4f){(v)[0], (v)[1], (v)[2], (v)[3]}, (ts_v4f){(v)[4], (v)[5], (v)[6], (v)[7]})
#define HORIZON 16

/* Causal start of a line of n samples (stride s) with a mirror boundary
 * (Unser's recursive filter; exact sum for short lines). */
static double causal_init(const float *c, int n, size_t s) {
    const double z = POLE;
    if (n <= 1) return n == 1 ? c[0] : 0;
    if (n > HORIZON) {
        double sum = 0, zk = 1;
        for (int k = 0; k < HORIZON; k++, zk *= z) sum += zk * c[(size_t)k * s];
        return sum;
    }
    double zn = z, iz = 1.0 / z, z2n = pow(z, n - 1);
    double sum = c[0] + z2n * c[(size_t)(n - 1) * s];
    z2n *= z2n * iz;
    for (int k = 1; k <= n - 2; k++) {
        sum += (zn + z2n) * c[(size_t)k * s];
        zn *= z;
        z2n *= iz;
    }
    return sum / (1.0 - zn * zn);
}

/* One row in place (stride 1), in double. */
static void spline_row(float *c, int n) {
    const double z = POLE, lambda = (1.0 - z) * (1.0 - 1.0 / z);
    if (n < 2) return;
    for (int k = 0; k < n; k++) c[k] = (float)(c[k] * lambda);
    double prev = causal_init(c, n, 1);
    c[0] = (float)prev;
    for (int k = 1; k < n; k++) c[k] = (float)(prev = c[k] + z * prev);
    double next = (z / (z * z - 1.0)) * (z * (double)c[n - 2] + (double)c[n - 1]);
    c[n - 1] = (float)next;
    for (int k = n - 2; k >= 0; k--) c[k] = (float)(next = z * (next - c[k]));
}

/* All columns at once, a row at a time (rows are contiguous). */
static void spline_cols(float *c, int h, int w) {
    const float z = (float)POLE, lambda = (float)((1.0 - POLE) * (1.0 - 1.0 / POLE));
    const float anti = (float)(POLE / (POLE * POLE - 1.0));
    if (h < 2) return;
    for (size_t i = 0; i < (size_t)h * (size_t)w; i++) c[i] *= lambda;
    for (int x = 0; x < w; x++) c[x] = (float)causal_init(c + x, h, (size_t)w);
    for (int y = 1; y < h; y++) {
        float *row = c + (size_t)y * (size_t)w;
        const float *up = row - w;
        for (int x = 0; x < w; x++) row[x] += z * up[x];
    }
    float *last = c + (size_t)(h - 1) * (size_t)w;
    const float *before = last - w;
    for (int x = 0; x < w; x++) last[x] = anti * (z * before[x] + last[x]);
    for (int y = h - 2; y >= 0; y--) {
        float *row = c + (size_t)y * (size_t)w;
        const float *dn = row + w;
        for (int x = 0; x < w; x++) row[x] = z * (dn[x] - row[x]);
    }
}

void ts_spline_coefficients(const float *img, float *coef, int h, int w) {
    for (size_t i = 0; i < (size_t)h * (size_t)w; i++) coef[i] = img[i];
    for (int y = 0; y < h; y++) spline_row(coef + (size_t)y * (size_t)w, w);
    spline_cols(coef, h, w);
}

/* Cubic B-spline weights of the taps -1, 0, 1, 2 around a sample at
 * fraction f past a pixel, and their derivatives in f. */
static void bspline_weights(double f, float wt[4], float dw[4]) {
    const double g = 1.0 - f, f2 = f * f, f3 = f2 * f;
    wt[0] = (float)(g * g * g / 6.0);
    wt[1] = (float)(2.0 / 3.0 - f2 + 0.5 * f3);
    wt[2] = (float)(1.0 / 6.0 + 0.5 * (f + f2 - f3));
    wt[3] = (float)(f3 / 6.0);
    dw[0] = (float)(-0.5 * g * g);
    dw[1] = (float)(-2.0 * f + 1.5 * f2);
    dw[2] = (float)(0.5 + f - 1.5 * f2);
    dw[3] = (float)(0.5 * f2);
}

/* Solves the symmetric 4 x 4 system m x = v by Gaussian elimination with
 * partial pivoting; false when singular. */
static bool solve4(double m[4][4], double v[4], double x[4]) {
    const int n = 4;
    for (int c = 0; c < n; c++) {
        int piv = c;
        for (int i = c + 1; i < n; i++)
            if (fabs(m[i][c]) > fabs(m[piv][c])) piv = i;
        if (!(fabs(m[piv][c]) > 1e-12 * (fabs(m[0][0]) + fabs(m[n - 1][n - 1]) + 1e-300))) return false;
        if (piv != c) {
            for (int j = 0; j < n; j++) {
                double t = m[c][j];
                m[c][j] = m[piv][j];
                m[piv][j] = t;
            }
            double t = v[c];
            v[c] = v[piv];
            v[piv] = t;
        }
        for (int i = c + 1; i < n; i++) {
            double f = m[i][c] / m[c][c];
            for (int j = c; j < n; j++) m[i][j] -= f * m[c][j];
            v[i] -= f * v[c];
        }
    }
    for (int i = n - 1; i >= 0; i--) {
        double s = v[i];
        for (int j = i + 1; j < n; j++) s -= m[i][j] * x[j];
        x[i] = s / m[i][i];
    }
    return true;
}

/* One Gauss-Newton step on (ty, tx, gain, offset) from the normal
 * equations m (upper triangle; the lower one is filled in here) and v:
 * false where m is singular or the shift leaves the 2 px leash around
 * (y0, x0); *done once the shift moved less than 1e-3 px. */
static bool gn_step(double m[4][4], double v[4], double y0, double x0, double *ty, double *tx, double *gain,
                    double *offset, bool *done) {
    for (int p = 0; p < 4; p++)
        for (int q = 0; q < p; q++) m[p][q] = m[q][p];
    double step[4];
    if (!solve4(m, v, step)) return false;
    *ty += step[0];
    *tx += step[1];
    *gain += step[2];
    *offset += step[3];
    if (!isfinite(*ty) || !isfinite(*tx) || fabs(*ty - y0) > 2.0 || fabs(*tx - x0) > 2.0) return false;
    *done = fabs(step[0]) < 1e-3 && fabs(step[1]) < 1e-3;
    return true;
}

/* The b pixels [lo, hi) along one axis of n px at integer shift i whose
 * sample lies inside a: its floor index in [0, n - 1) (the taps, floor - 1
 * .. floor + 2, in the coefficients' mirrored border). */
static void domain(int n, int i, int *lo, int *hi) {
    const int l = -i, u = n - 1 - i;
    *lo = l > 0 ? l : 0;
    *hi = u < n ? u : n;
}

/* The normal equations (J = [gain ay, gain ax, a - centre, 1]) of the fit
 * at shift (ty, tx) into m (upper triangle) and v; false when the domain
 * is thinner than 4 px. coef: a's B-spline coefficients with a mirrored
 * border (pad_coefficients: row and column -1 .. n + 1 addressable), rows
 * cs floats apart. V, D: rows of w + 3 floats. */

__attribute__((always_inline)) static inline bool normal_equations_body(const float *coef, size_t cs, const float *b,
                                                                        int h, int w, double ty, double tx,
                                                                        double gain, double offset, double centre,
                                                                        float *V, float *D, double m[4][4],
                                                                        double v[4], double *ee) {
    const int iy = (int)floor(ty), ix = (int)floor(tx);
    float wy[4], dwy[4], wx[4], dwx[4];
    bspline_weights(ty - iy, wy, dwy);
    bspline_weights(tx - ix, wx, dwx);
    int ylo, yhi, xlo, xhi;
    domain(h, iy, &ylo, &yhi);
    domain(w, ix, &xlo, &xhi);
    if (yhi - ylo < 4 || xhi - xlo < 4) return false;
    *ee = 0;
    for (int p = 0; p < 4; p++) {
        v[p] = 0;
        for (int q = 0; q < 4; q++) m[p][q] = 0;
    }
    const int nx = xhi - xlo, nc = nx + 3;
    const ts_v8f WY0 = V8F_SPLAT(wy[0]), WY1 = V8F_SPLAT(wy[1]), WY2 = V8F_SPLAT(wy[2]), WY3 = V8F_SPLAT(wy[3]),
                 DY0 = V8F_SPLAT(dwy[0]), DY1 = V8F_SPLAT(dwy[1]), DY2 = V8F_SPLAT(dwy[2]),
                 DY3 = V8F_SPLAT(dwy[3]);
    const ts_v8f WX0 = V8F_SPLAT(wx[0]), WX1 = V8F_SPLAT(wx[1]), WX2 = V8F_SPLAT(wx[2]), WX3 = V8F_SPLAT(wx[3]),
                 DX0 = V8F_SPLAT(dwx[0]), DX1 = V8F_SPLAT(dwx[1]), DX2 = V8F_SPLAT(dwx[2]),
                 DX3 = V8F_SPLAT(dwx[3]);
    const float g = (float)gain, off = (float)offset, ca = (float)centre;
    const ts_v8f G = V8F_SPLAT(g), OFF = V8F_SPLAT(off), CA = V8F_SPLAT(ca);
    for (int y = ylo; y < yhi; y++) {
        /* The four coefficient rows combined vertically (value and d/dy),
         * over the columns the row's taps reach. */
        const float *r0 = coef + (ptrdiff_t)(y + iy - 1) * (ptrdiff_t)cs + (ptrdiff_t)(xlo + ix - 1);
        const float *r1 = r0 + cs, *r2 = r1 + cs, *r3 = r2 + cs;
        int j = 0;
        for (; j + 8 <= nc; j += 8) {
            ts_v8f c0 = ts_v8f_load(r0 + j), c1 = ts_v8f_load(r1 + j), c2 = ts_v8f_load(r2 + j), c3 = ts_v8f_load(r3 + j);
            ts_v8f_store(V + j, WY0 * c0 + WY1 * c1 + WY2 * c2 + WY3 * c3);
            ts_v8f_store(D + j, DY0 * c0 + DY1 * c1 + DY2 * c2 + DY3 * c3);
        }
        for (; j < nc; j++) {
            V[j] = wy[0] * r0[j] + wy[1] * r1[j] + wy[2] * r2[j] + wy[3] * r3[j];
            D[j] = dwy[0] * r0[j] + dwy[1] * r1[j] + dwy[2] * r2[j] + dwy[3] * r3[j];
        }
        /* Then horizontally, and the row's sums of the normal equations'
         * 10 distinct entries and right-hand side: eight lanes and a tail,
         * combined in a fixed order; rows are added up in double. */
        const float *pb = b + (size_t)y * (size_t)w + (size_t)xlo;
        ts_v8f M00 = {0}, M01 = {0}, M02 = {0}, M03 = {0}, M11 = {0}, M12 = {0}, M13 = {0}, M22 = {0}, M23 = {0},
               V0 = {0}, V1 = {0}, V2 = {0}, V3 = {0}, E2 = {0};
        int x = 0;
        for (; x + 8 <= nx; x += 8) {
            ts_v8f v0 = ts_v8f_load(V + x), v1 = ts_v8f_load(V + x + 1), v2 = ts_v8f_load(V + x + 2), v3 = ts_v8f_load(V + x + 3);
            ts_v8f d0 = ts_v8f_load(D + x), d1 = ts_v8f_load(D + x + 1), d2 = ts_v8f_load(D + x + 2), d3 = ts_v8f_load(D + x + 3);
            ts_v8f av = WX0 * v0 + WX1 * v1 + WX2 * v2 + WX3 * v3 - CA;
            ts_v8f ay = WX0 * d0 + WX1 * d1 + WX2 * d2 + WX3 * d3;
            ts_v8f ax = DX0 * v0 + DX1 * v1 + DX2 * v2 + DX3 * v3;
            ts_v8f j0 = G * ay, j1 = G * ax;
            ts_v8f e = ts_v8f_load(pb + x) - (G * av + OFF);
            M00 += j0 * j0, M01 += j0 * j1, M02 += j0 * av, M03 += j0;
            M11 += j1 * j1, M12 += j1 * av, M13 += j1;
            M22 += av * av, M23 += av;
            V0 += j0 * e, V1 += j1 * e, V2 += av * e, V3 += e, E2 += e * e;
        }
        float m00 = 0, m01 = 0, m02 = 0, m03 = 0, m11 = 0, m12 = 0, m13 = 0, m22 = 0, m23 = 0;
        float s0 = 0, s1 = 0, s2 = 0, s3 = 0, s4 = 0;
        for (; x < nx; x++) {
            const float *pv = V + x, *pd = D + x;
            float av = wx[0] * pv[0] + wx[1] * pv[1] + wx[2] * pv[2] + wx[3] * pv[3] - ca;
            float ay = wx[0] * pd[0] + wx[1] * pd[1] + wx[2] * pd[2] + wx[3] * pd[3];
            float ax = dwx[0] * pv[0] + dwx[1] * pv[1] + dwx[2] * pv[2] + dwx[3] * pv[3];
            float j0 = g * ay, j1 = g * ax;
            float e = pb[x] - (g * av + off);
            m00 += j0 * j0, m01 += j0 * j1, m02 += j0 * av, m03 += j0;
            m11 += j1 * j1, m12 += j1 * av, m13 += j1;
            m22 += av * av, m23 += av;
            s0 += j0 * e, s1 += j1 * e, s2 += av * e, s3 += e, s4 += e * e;
        }
        m[0][0] += V8F_SUM(M00) + m00, m[0][1] += V8F_SUM(M01) + m01;
        m[0][2] += V8F_SUM(M02) + m02, m[0][3] += V8F_SUM(M03) + m03;
        m[1][1] += V8F_SUM(M11) + m11, m[1][2] += V8F_SUM(M12) + m12, m[1][3] += V8F_SUM(M13) + m13;
        m[2][2] += V8F_SUM(M22) + m22, m[2][3] += V8F_SUM(M23) + m23, m[3][3] += (double)nx;
        v[0] += V8F_SUM(V0) + s0, v[1] += V8F_SUM(V1) + s1;
        v[2] += V8F_SUM(V2) + s2, v[3] += V8F_SUM(V3) + s3;
        *ee += V8F_SUM(E2) + s4;
    }
    return true;
}

#define NORMAL_EQUATIONS_PARAMS                                                                                      \
    const float *coef, size_t cs, const float *b, int h, int w, double ty, double tx, double gain, double offset,    \
        double centre, float *V, float *D, double m[4][4], double v[4], double *ee
#define NORMAL_EQUATIONS_ARGS coef, cs, b, h, w, ty, tx, gain, offset, centre, V, D, m, v, ee

static bool normal_equations_sse2(NORMAL_EQUATIONS_PARAMS) { return normal_equations_body(NORMAL_EQUATIONS_ARGS); }
#ifdef TS_ISA_X86
TS_TARGET_AVX2 static bool normal_equations_avx2(NORMAL_EQUATIONS_PARAMS) {
    return normal_equations_body(NORMAL_EQUATIONS_ARGS);
}
#endif

/* wide: the AVX2 variant (ts_isa_pick). */
static bool normal_equations(bool wide, NORMAL_EQUATIONS_PARAMS) {
#ifdef TS_ISA_X86
    if (wide) return normal_equations_avx2(NORMAL_EQUATIONS_ARGS);
#else
    (void)wide;
#endif
    return normal_equations_sse2(NORMAL_EQUATIONS_ARGS);
}

/* The fine-scale share of a residual whose read noise went through the
 * pre-filter: 1 - the lag-1 correlation of white noise after
 * ts_gaussian_blur's kernel at sigma (the same taps; 1 unfiltered), e.g.
 * 0.74 at the default 0.5 px. */
static double white_share(double sigma) {
    if (!(sigma > 0)) return 1;
    int radius = (int)ceil(3.0 * sigma);
    if (radius > 64) radius = 64;
    double k[129], sum = 0;
    for (int i = -radius; i <= radius; i++) sum += k[i + radius] = exp(-0.5 * (double)(i * i) / (sigma * sigma));
    double k0 = 0, k1 = 0;
    for (int i = 0; i <= 2 * radius; i++) {
        k[i] /= sum;
        k0 += k[i] * k[i];
        if (i > 0) k1 += k[i] * k[i - 1];
    }
    return 1 - k1 / k0;
}

/* The residuals of one row of b, pixels [xlo, xlo + nx), against a's
 * bilinear sample at (iy + y + fy, ix + x + fx), in double: two lanes at a
 * time, each lane the scalar expression's operations in the same order
 * (the same bits; no contraction in ISO C). */
static void residual_row(const float *a, const float *b, int w, int y, int iy, int ix, int xlo, int nx, double fy,
                         double fx, double gain, double offset, double centre, double *r) {
    const float *p0 = a + (size_t)(y + iy) * (size_t)w + (size_t)(xlo + ix), *p1 = p0 + w;
    const float *pb = b + (size_t)y * (size_t)w + (size_t)xlo;
    const ts_v2d FY = {fy, fy}, FX = {fx, fx}, GY = {1 - fy, 1 - fy}, GX = {1 - fx, 1 - fx}, G = {gain, gain},
                 OFF = {offset, offset}, CA = {centre, centre};
    int x = 0;
    for (; x + 2 <= nx; x += 2) {
        ts_v2d av = GY * (GX * ts_v2f_load_v2d(p0 + x) + FX * ts_v2f_load_v2d(p0 + x + 1)) +
                    FY * (GX * ts_v2f_load_v2d(p1 + x) + FX * ts_v2f_load_v2d(p1 + x + 1));
        ts_v2d_store(r + x, ts_v2f_load_v2d(pb + x) - (G * (av - CA) + OFF));
    }
    for (; x < nx; x++) {
        double av = (1 - fy) * ((1 - fx) * p0[x] + fx * p0[x + 1]) + fy * ((1 - fx) * p1[x] + fx * p1[x + 1]);
        r[x] = pb[x] - (gain * (av - centre) + offset);
    }
}

/* The residual of the fit (bilinear, as fit_bilinear's) at (ty, tx): half
 * the mean square of the differences of neighbouring residuals (its
 * fine-scale power, which is the noise's: a smooth misfit, vignetting or a
 * gain that varies across the overlap, cancels in the differences) into
 * *rough, and that over the residual's variance (1 - its lag-1
 * correlation, averaged over the two axes) into *share. Each residual is
 * computed once (two rows kept in scratch, 2 * w doubles, 8-byte aligned);
 * the sums run in the order of the scalar double loop this replaces (same
 * bits: the gate's decision, hence every shift, unchanged). */
static void roughness(const float *a, const float *b, int h, int w, double ty, double tx, double gain, double offset,
                      double centre, double *scratch, double *rough, double *share) {
    const int iy = (int)floor(ty), ix = (int)floor(tx);
    const double fy = ty - iy, fx = tx - ix;
    const int ylo = iy < 0 ? -iy : 0, yhi = h - 1 - iy < h ? h - 1 - iy : h;
    const int xlo = ix < 0 ? -ix : 0, xhi = w - 1 - ix < w ? w - 1 - ix : w;
    double sx = 0, sy = 0, s1 = 0, s2 = 0, n = 0;
    const int nx = xhi - xlo;
    if (ylo + 1 < yhi && nx >= 2) {
        double *cur = scratch, *next = scratch + w;
        residual_row(a, b, w, ylo, iy, ix, xlo, nx, fy, fx, gain, offset, centre, cur);
        for (int y = ylo; y + 1 < yhi; y++) {
            residual_row(a, b, w, y + 1, iy, ix, xlo, nx, fy, fx, gain, offset, centre, next);
            for (int x = 0; x + 1 < nx; x++) {
                const double r00 = cur[x], ex = r00 - cur[x + 1], ey = r00 - next[x];
                sx += ex * ex;
                sy += ey * ey;
                s1 += r00, s2 += r00 * r00;
            }
            double *t = cur;
            cur = next, next = t;
        }
        n = (double)(yhi - 1 - ylo) * (double)(nx - 1); /* the old per-pixel count, exact */
    }
    *rough = INFINITY, *share = 0;
    if (!(n > 0)) return;
    *rough = 0.25 * (sx + sy) / n;
    const double var = s2 / n - (s1 / n) * (s1 / n);
    if (var > 0) *share = *rough / var;
}

/* The central difference of row at x (one-sided at the ends, 0 on a
 * single column). */
static inline float grad_x(const float *row, int w, int x) {
    int l = x > 0 ? x - 1 : 0, rr = x + 1 < w ? x + 1 : w - 1;
    return (rr - l == 2 ? 0.5f : 1.0f) * (row[rr] - row[l]);
}

/* fit_bilinear's normal equations (J = [gain*ay, gain*ax, a, 1]) at
 * integer shift (iy, ix) and fraction (fy, fx), over b's rows [ylo, yhi)
 * and columns [xlo, xhi), added into m (upper triangle) and v: per row,
 * float sums in eight lanes (V8F_SUM) and a tail, combined in a fixed
 * order; rows are added up in double. */
__attribute__((always_inline)) static inline void bilinear_sums_body(const float *a, const float *gy, const float *gx,
                                                                     const float *b, int w, int iy, int ix, int ylo,
                                                                     int yhi, int xlo, int xhi, float fy, float fx,
                                                                     double gain, double offset, double centre,
                                                                     double m[4][4], double v[4]) {
    const float w00 = (1 - fy) * (1 - fx), w01 = (1 - fy) * fx, w10 = fy * (1 - fx), w11 = fy * fx;
    const float g = (float)gain, off = (float)offset, ca = (float)centre;
    const ts_v8f W00 = V8F_SPLAT(w00), W01 = V8F_SPLAT(w01), W10 = V8F_SPLAT(w10), W11 = V8F_SPLAT(w11),
                 G = V8F_SPLAT(g), OFF = V8F_SPLAT(off), CA = V8F_SPLAT(ca);
    for (int y = ylo; y < yhi; y++) {
        size_t r0 = (size_t)(y + iy) * (size_t)w, r1 = r0 + (size_t)w;
        /* Pointers at the row's first sample (x = xlo): x + ix >= 0. */
        const size_t c0 = (size_t)(xlo + ix);
        const float *a0 = a + r0 + c0, *a1 = a + r1 + c0;
        const float *gy0 = gy + r0 + c0, *gy1 = gy + r1 + c0;
        const float *gx0 = gx + r0 + c0, *gx1 = gx + r1 + c0;
        const float *pb = b + (size_t)y * (size_t)w + (size_t)xlo;
        const int nx = xhi - xlo;
        ts_v8f M00 = {0}, M01 = {0}, M02 = {0}, M03 = {0}, M11 = {0}, M12 = {0}, M13 = {0}, M22 = {0}, M23 = {0},
               V0 = {0}, V1 = {0}, V2 = {0}, V3 = {0};
        int x = 0;
        for (; x + 8 <= nx; x += 8) {
            ts_v8f av = W00 * ts_v8f_load(a0 + x) + W01 * ts_v8f_load(a0 + x + 1) + W10 * ts_v8f_load(a1 + x) +
                        W11 * ts_v8f_load(a1 + x + 1) - CA;
            ts_v8f ay = W00 * ts_v8f_load(gy0 + x) + W01 * ts_v8f_load(gy0 + x + 1) + W10 * ts_v8f_load(gy1 + x) +
                        W11 * ts_v8f_load(gy1 + x + 1);
            ts_v8f ax = W00 * ts_v8f_load(gx0 + x) + W01 * ts_v8f_load(gx0 + x + 1) + W10 * ts_v8f_load(gx1 + x) +
                        W11 * ts_v8f_load(gx1 + x + 1);
            ts_v8f j0 = G * ay, j1 = G * ax;
            ts_v8f e = ts_v8f_load(pb + x) - (G * av + OFF);
            M00 += j0 * j0; M01 += j0 * j1; M02 += j0 * av; M03 += j0;
            M11 += j1 * j1; M12 += j1 * av; M13 += j1;
            M22 += av * av; M23 += av;
            V0 += j0 * e; V1 += j1 * e; V2 += av * e; V3 += e;
        }
        float m00 = 0, m01 = 0, m02 = 0, m03 = 0, m11 = 0, m12 = 0, m13 = 0, m22 = 0, m23 = 0;
        float v0 = 0, v1 = 0, v2 = 0, v3 = 0;
        for (; x < nx; x++) {
            float av = w00 * a0[x] + w01 * a0[x + 1] + w10 * a1[x] + w11 * a1[x + 1] - ca;
            float ay = w00 * gy0[x] + w01 * gy0[x + 1] + w10 * gy1[x] + w11 * gy1[x + 1];
            float ax = w00 * gx0[x] + w01 * gx0[x + 1] + w10 * gx1[x] + w11 * gx1[x + 1];
            float j0 = g * ay, j1 = g * ax;
            float e = pb[x] - (g * av + off);
            m00 += j0 * j0; m01 += j0 * j1; m02 += j0 * av; m03 += j0;
            m11 += j1 * j1; m12 += j1 * av; m13 += j1;
            m22 += av * av; m23 += av;
            v0 += j0 * e; v1 += j1 * e; v2 += av * e; v3 += e;
        }
        m[0][0] += V8F_SUM(M00) + m00, m[0][1] += V8F_SUM(M01) + m01;
        m[0][2] += V8F_SUM(M02) + m02, m[0][3] += V8F_SUM(M03) + m03;
        m[1][1] += V8F_SUM(M11) + m11, m[1][2] += V8F_SUM(M12) + m12, m[1][3] += V8F_SUM(M13) + m13;
        m[2][2] += V8F_SUM(M22) + m22, m[2][3] += V8F_SUM(M23) + m23, m[3][3] += (double)nx;
        v[0] += V8F_SUM(V0) + v0, v[1] += V8F_SUM(V1) + v1;
        v[2] += V8F_SUM(V2) + v2, v[3] += V8F_SUM(V3) + v3;
    }
}

#define BILINEAR_SUMS_PARAMS                                                                                         \
    const float *a, const float *gy, const float *gx, const float *b, int w, int iy, int ix, int ylo, int yhi,       \
        int xlo, int xhi, float fy, float fx, double gain, double offset, double centre, double m[4][4], double v[4]
#define BILINEAR_SUMS_ARGS a, gy, gx, b, w, iy, ix, ylo, yhi, xlo, xhi, fy, fx, gain, offset, centre, m, v

static void bilinear_sums_sse2(BILINEAR_SUMS_PARAMS) { bilinear_sums_body(BILINEAR_SUMS_ARGS); }
#ifdef TS_ISA_X86
TS_TARGET_AVX2 static void bilinear_sums_avx2(BILINEAR_SUMS_PARAMS) { bilinear_sums_body(BILINEAR_SUMS_ARGS); }
#endif

static void bilinear_sums(bool wide, BILINEAR_SUMS_PARAMS) {
#ifdef TS_ISA_X86
    if (wide) {
        bilinear_sums_avx2(BILINEAR_SUMS_ARGS);
        return;
    }
#else
    (void)wide;
#endif
    bilinear_sums_sse2(BILINEAR_SUMS_ARGS);
}

/* The first fit: Gauss-Newton on bilinear interpolation of a and of its
 * central differences (gy, gx: h * w each), over every b pixel whose
 * sample lies inside a with its 4 neighbours (bilinear_sums; wide: its
 * AVX2 variant). *noise: the residual's fine-scale power over a's mean
 * squared gradient at the last iterate (px^2); *share: the residual's
 * fine-scale share (roughness). */
static bool fit_bilinear(bool wide, const float *a, const float *b, int h, int w, float *gy, float *gx, double *dy,
                         double *dx, double *noise, double *share) {
    for (int y = 0; y < h; y++) {
        const float *up = a + (size_t)(y > 0 ? y - 1 : 0) * (size_t)w;
        const float *dn = a + (size_t)(y + 1 < h ? y + 1 : h - 1) * (size_t)w;
        const float *row = a + (size_t)y * (size_t)w;
        float *ry = gy + (size_t)y * (size_t)w, *rx = gx + (size_t)y * (size_t)w;
        const float ky = (y > 0 && y + 1 < h) ? 0.5f : 1.0f;
        const ts_v4f KY = ts_v4f_splat(ky), HALF = ts_v4f_splat(0.5f);
        /* Four at a time (the same operations per pixel as the scalar
         * form, the same bits); gx's one-sided ends in the scalar loop. */
        int x = 0;
        for (; x + 4 <= w; x += 4) ts_v4f_store(ry + x, KY * (ts_v4f_load(dn + x) - ts_v4f_load(up + x)));
        for (; x < w; x++) ry[x] = ky * (dn[x] - up[x]);
        rx[0] = grad_x(row, w, 0);
        for (x = 1; x + 4 <= w - 1; x += 4)
            ts_v4f_store(rx + x, HALF * (ts_v4f_load(row + x + 1) - ts_v4f_load(row + x - 1)));
        for (; x < w; x++) rx[x] = grad_x(row, w, x);
    }
    /* Intensities enter centred on strip a's mean, which keeps the gain and
     * offset columns of the normal equations apart (well conditioned). */
    double centre = ts_sum_f64(a, (size_t)h * (size_t)w) / ((double)h * (double)w);
    double y0 = *dy, x0 = *dx, ty = *dy, tx = *dx, gain = 1, offset = 0, grad2 = 0, count = 0;
    for (int it = 0; it < 10; it++) {
        int iy = (int)floor(ty), ix = (int)floor(tx);
        float fy = (float)(ty - iy), fx = (float)(tx - ix);
        /* b pixels whose sample point lies inside a with its 4 neighbours. */
        int ylo = iy < 0 ? -iy : 0, yhi = h - 1 - iy < h ? h - 1 - iy : h;
        int xlo = ix < 0 ? -ix : 0, xhi = w - 1 - ix < w ? w - 1 - ix : w;
        if (yhi - ylo < 4 || xhi - xlo < 4) return false;
        double m[4][4] = {{0}}, v[4] = {0};
        bilinear_sums(wide, a, gy, gx, b, w, iy, ix, ylo, yhi, xlo, xhi, fy, fx, gain, offset, centre, m, v);
        grad2 = (m[0][0] + m[1][1]) / (gain * gain), count = m[3][3];
        bool done;
        if (!gn_step(m, v, y0, x0, &ty, &tx, &gain, &offset, &done)) return false;
        if (done) break;
    }
    if (!(gain > 0)) return false;
    *dy = ty;
    *dx = tx;
    /* gy is done with: two rows of residuals (4 * w floats as doubles) in
     * its room (h * w floats, h >= 5 here), at an 8-byte boundary. */
    double *scratch = (double *)(void *)(((uintptr_t)gy + 7) & ~(uintptr_t)7);
    double rough;
    roughness(a, b, h, w, ty, tx, gain, offset, centre, scratch, &rough, share);
    *noise = grad2 > 0 ? count * rough / grad2 : INFINITY;
    return true;
}

/* One Gauss-Newton fit from (*dy, *dx) on a's coefficients (padded,
 * rows cs floats apart). */
static bool fit(bool wide, const float *coef, size_t cs, const float *b, int h, int w, double centre, float *V, float *D,
                double *dy, double *dx) {
    const double y0 = *dy, x0 = *dx;
    double ty = y0, tx = x0, gain = 1, offset = 0, m[4][4], v[4], ee = 0;
    for (int it = 0; it < 16; it++) {
        if (!normal_equations(wide, coef, cs, b, h, w, ty, tx, gain, offset, centre, V, D, m, v, &ee)) return false;
        bool done;
        if (!gn_step(m, v, y0, x0, &ty, &tx, &gain, &offset, &done)) return false;
        if (done) break;
    }
    if (!(gain > 0)) return false;
    *dy = ty;
    *dx = tx;
    return true;
}

/* img's (h x w, h, w >= 4) B-spline coefficients, computed in place, then
 * copied into the inside of pad ((h + 3) x (w + 3): one row and column
 * before, two after), the border their mirror image (c[-1] = c[1],
 * c[n] = c[n - 2], c[n + 1] = c[n - 3], as the coefficients' own
 * boundary). Returns coefficient (0, 0). */
static float *pad_coefficients(float *img, int h, int w, float *pad) {
    const size_t cs = (size_t)w + 3;
    float *c0 = pad + cs + 1;
    ts_spline_coefficients(img, img, h, w);
    for (int y = 0; y < h; y++) {
        float *row = c0 + (size_t)y * cs;
        memcpy(row, img + (size_t)y * (size_t)w, (size_t)w * sizeof(float));
        row[-1] = row[1], row[w] = row[w - 2], row[w + 1] = row[w - 3];
    }
    memcpy(c0 - cs - 1, c0 + cs - 1, cs * sizeof(float));
    memcpy(c0 + (size_t)h * cs - 1, c0 + (size_t)(h - 2) * cs - 1, cs * sizeof(float));
    memcpy(c0 + (size_t)(h + 1) * cs - 1, c0 + (size_t)(h - 3) * cs - 1, cs * sizeof(float));
    return c0;
}

/* Whether (ty, tx) is within 2 px of one of the nl anchors (ly, lx). */
static bool leashed(double ty, double tx, int nl, const double *ly, const double *lx) {
    for (int k = 0; k < nl; k++)
        if (fabs(ty - ly[k]) <= 2.0 && fabs(tx - lx[k]) <= 2.0) return true;
    return false;
}

/* The fit on the overlap of a and b (h x w) at integer shift (iy, ix):
 * both cut to it (work: TS_REFINE_WORK), low-passed, b's crop fitted to
 * a's from each of the n starts (sy, sx) in turn (strip coordinates) until
 * one converges within 2 px of one of the nl anchors (ly, lx): its answer
 * into *dy, *dx. */
static bool fit_overlap(bool wide, const float *a, const float *b, int h, int w, int iy, int ix, float *work,
                        ts_lowpass_plans *plans, int n,
                        const double *sy, const double *sx, int nl, const double *ly, const double *lx, double *dy,
                        double *dx) {
    const int ys = iy < 0 ? -iy : 0, ye = iy > 0 ? h - iy : h;
    const int xs = ix < 0 ? -ix : 0, xe = ix > 0 ? w - ix : w;
    const int hc = ye - ys, wc = xe - xs;
    if (hc < 4 || wc < 4) return false;
    float *ca = work, *cb = work + (size_t)hc * (size_t)wc, *pad = work + 2 * (size_t)h * (size_t)w;
    float *V = pad + ((size_t)h + 3) * ((size_t)w + 3), *D = V + w + 8;
    for (int y = 0; y < hc; y++) {
        memcpy(ca + (size_t)y * (size_t)wc, a + (size_t)(y + ys + iy) * (size_t)w + (size_t)(xs + ix),
               (size_t)wc * sizeof(float));
        memcpy(cb + (size_t)y * (size_t)wc, b + (size_t)(y + ys) * (size_t)w + (size_t)xs, (size_t)wc * sizeof(float));
    }
    double cutoff;
    if (!ts_lowpass_pair(plans, ca, cb, hc, wc, TS_REFINE_ORDER, TS_REFINE_CUT_LO, TS_REFINE_CUT_HI, &cutoff))
        return false;
    const double centre = ts_sum_f64(ca, (size_t)hc * (size_t)wc) / ((double)hc * (double)wc);
    const float *coef = pad_coefficients(ca, hc, wc, pad);
    for (int k = 0; k < n; k++) {
        double ty = sy[k] - iy, tx = sx[k] - ix;
        if (fit(wide, coef, (size_t)wc + 3, cb, hc, wc, centre, V, D, &ty, &tx) &&
            leashed(ty + iy, tx + ix, nl, ly, lx)) {
            *dy = ty + iy, *dx = tx + ix;
            return true;
        }
    }
    return false;
}

static ts_refine_how refine(bool wide, const float *a, const float *b, int h, int w, double have, float *work,
                            ts_lowpass_plans *plans, double *dy, double *dx);

ts_refine_how ts_refine(const float *a, const float *b, int h, int w, double have, float *work,
                        ts_lowpass_plans *plans, double *dy, double *dx) {
    ts_refine_how how;
    (void)ts_refine_isa(NULL, a, b, h, w, have, work, plans, dy, dx, &how); /* NULL: always a variant */
    return how;
}

bool ts_refine_isa(const char *isa, const float *a, const float *b, int h, int w, double have, float *work,
                   ts_lowpass_plans *plans, double *dy, double *dx, ts_refine_how *how) {
    const int pick = ts_isa_pick(isa);
    if (pick < 0) return false;
    *how = refine(pick == 1, a, b, h, w, have, work, plans, dy, dx);
    return true;
}

static ts_refine_how refine(bool wide, const float *a, const float *b, int h, int w, double have, float *work,
                            ts_lowpass_plans *plans, double *dy, double *dx) {
    const size_t n = (size_t)h * (size_t)w;
    double fy = *dy, fx = *dx, noise = INFINITY, share = 0;
    const bool first = fit_bilinear(wide, a, b, h, w, work, work + n, &fy, &fx, &noise, &share);
    /* Re-fitted only where the residual is both rough and white: read
     * noise. Structured misfit (sharp content that bilinear interpolation
     * or a slight distortion does not follow, a blank tile against
     * content) is correlated over several pixels, and smoothing it does
     * not remove a pull towards half pixels but moves the fit. */
    if (first && (noise <= TS_REFINE_NOISE || share < TS_REFINE_WHITE * white_share(have))) {
        *dy = fy, *dx = fx;
        return TS_REFINE_FIRST;
    }
    /* Noisy: the overlap at the best integer shift known (the first fit's,
     * else the NCC maximum), cut from both strips, low-passed alike; cut
     * again where the answer rounds to another integer shift (the crops'
     * edges then coincide again), at most twice. */
    int iy = (int)lround(first ? fy : *dy), ix = (int)lround(first ? fx : *dx);
    double ry = 0, rx = 0;
    bool ok = false;
    /* Held within 2 px of the integer start or of the first fit, which it
     * refines: where the start is 2 px off, the first fit can stop short
     * within its own 2 px, and the re-fit's answers beyond them were thrown
     * away for the noisier first fit (6% of cell16_blank's re-fitted pairs;
     * test_refit_leashed_to_first_fit). The first fit alone is no anchor:
     * where it went the wrong way (3.2 px off the truth from a start 3.2 px
     * off), the start's re-fit went 1.6 px the right way, 2.3 px from it
     * (test_refit_leashed_to_start). In the first pass each start is an
     * anchor and no fit leaves 2 px of its start (gn_step), so the anchors
     * decide after a new cut, whose start is the answer before it. */
    const double ly[2] = {*dy, fy}, lx[2] = {*dx, fx};
    for (int pass = 0; pass < 3; pass++) {
        /* From the integer start, else from the first fit's answer (nearer,
         * when the integer maximum is 2 px off: the fit's leash then
         * reaches); after a new cut, from the answer before it. */
        const double sy[2] = {pass ? ry : *dy, fy}, sx[2] = {pass ? rx : *dx, fx};
        if (!fit_overlap(wide, a, b, h, w, iy, ix, work, plans, pass || !first ? 1 : 2, sy, sx, first ? 2 : 1, ly, lx,
                         &ry, &rx))
            break;
        ok = true;
        const int ny = (int)lround(ry), nx = (int)lround(rx);
        if (ny == iy && nx == ix) break;
        iy = ny, ix = nx;
    }
    if (ok) {
        *dy = ry, *dx = rx;
        return TS_REFINE_LOWPASS;
    }
    if (!first) return TS_REFINE_FAILED;
    *dy = fy, *dx = fx;
    return TS_REFINE_FIRST;
}
