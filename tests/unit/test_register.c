/* Pairwise registration on in-memory synthetic images: known integer and
 * sub-pixel shifts, blank and periodic strips, pair geometry, orientation. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "xorshift.h"
#include "common/orient.h"
#include "register/content.h"
#include "register/register.h"

/* A deterministic "specimen": Gaussian blobs of random size and brightness,
 * evaluated at continuous coordinates so sub-pixel shifts are exact. */
typedef struct blob { double y, x, s, a; } blob;
typedef struct scene { int n; blob *b; } scene;

static uint64_t rng_state = 12345;
static double urand(void) { return xorshift_u01(&rng_state); }
static double nrand(void) { return xorshift_normal(&rng_state); }

static scene make_scene(int n, double H, double W) {
    scene s = {n, malloc((size_t)n * sizeof(blob))};
    for (int i = 0; i < n; i++)
        s.b[i] = (blob){urand() * H, urand() * W, 1.5 + 4 * urand(), 200 + 800 * urand()};
    return s;
}

/* Renders the h x w window whose top-left corner is at (y0, x0). */
static float *render(const scene *s, int h, int w, double y0, double x0, double noise) {
    float *img = calloc((size_t)h * (size_t)w, sizeof(float));
    for (int i = 0; i < s->n; i++) {
        const blob *b = &s->b[i];
        int r = (int)ceil(4 * b->s);
        int ylo = (int)floor(b->y - y0) - r, yhi = (int)ceil(b->y - y0) + r;
        int xlo = (int)floor(b->x - x0) - r, xhi = (int)ceil(b->x - x0) + r;
        for (int y = ylo < 0 ? 0 : ylo; y < h && y <= yhi; y++)
            for (int x = xlo < 0 ? 0 : xlo; x < w && x <= xhi; x++) {
                double dy = y + y0 - b->y, dx = x + x0 - b->x;
                img[(size_t)y * w + x] += (float)(b->a * exp(-(dy * dy + dx * dx) / (2 * b->s * b->s)));
            }
    }
    for (size_t i = 0; i < (size_t)h * w; i++) img[i] += 100.0f + (float)(noise * nrand());
    return img;
}

static void register_shift(const ts_register_options *opt, int h, int w, double sy, double sx,
                           double noise, ts_register_result *res) {
    scene s = make_scene(h * w / 40, h + 200, w + 200);
    float *a = render(&s, h, w, 50, 50, noise);
    float *b = render(&s, h, w, 50 + sy, 50 + sx, noise);
    ts_registrar *r;
    ts_error err;
    assert_int_equal(ts_registrar_create(h, w, opt, &r, &err), TS_OK);
    assert_int_equal(ts_register_strips(r, ts_f32(a), w, ts_f32(b), w, 0, 0, res, &err), TS_OK);
    ts_registrar_free(r);
    free(a);
    free(b);
    free(s.b);
}

static void test_integer_shifts(void **state) {
    (void)state;
    ts_register_options opt;
    ts_register_options_init(&opt);
    const int shifts[][2] = {{0, 0}, {3, -7}, {-12, 20}, {25, 31}, {-40, -2}};
    for (size_t i = 0; i < sizeof shifts / sizeof shifts[0]; i++) {
        ts_register_result res;
        register_shift(&opt, 160, 128, shifts[i][0], shifts[i][1], 5, &res);
        print_message("integer: want (%d, %d) got (%.3f, %.3f) conf %.3f ncc %.3f second %.3f ratio %.3f\n", shifts[i][0], shifts[i][1], res.dy, res.dx, res.confidence, res.ncc, res.ncc_second, res.peak_ratio);
        assert_true(fabs(res.dy - shifts[i][0]) < 0.2);
        assert_true(fabs(res.dx - shifts[i][1]) < 0.2);
        assert_true(res.confidence > 0.3);
        assert_true(res.ncc > 0.8);
        assert_true(res.matched);
    }
}

static void test_subpixel_shifts(void **state) {
    (void)state;
    ts_register_options opt;
    ts_register_options_init(&opt);
    const double shifts[][2] = {{0.3, -0.4}, {2.5, 7.75}, {-10.2, 3.6}, {15.9, -20.1}};
    for (size_t i = 0; i < sizeof shifts / sizeof shifts[0]; i++) {
        ts_register_result res;
        register_shift(&opt, 200, 96, shifts[i][0], shifts[i][1], 3, &res);
        print_message("subpixel: want (%.2f, %.2f) got (%.3f, %.3f) conf %.3f\n", shifts[i][0],
                      shifts[i][1], res.dy, res.dx, res.confidence);
        assert_true(fabs(res.dy - shifts[i][0]) < 0.2);
        assert_true(fabs(res.dx - shifts[i][1]) < 0.2);
    }
}

static void test_prefilter_variants(void **state) {
    (void)state;
    for (int v = 0; v < 5; v++) {
        ts_register_options opt;
        ts_register_options_init(&opt);
        if (v == 0) opt.clahe = true;
        if (v == 1) opt.log_compress = true;
        if (v == 2) opt.sobel = true;
        if (v == 3) opt.window = TS_WINDOW_HANN, opt.denoise_sigma = 0;
        if (v == 4) opt.spectral_sigma = 0, opt.tukey_alpha = 0.25;
        ts_register_result res;
        register_shift(&opt, 128, 128, 6, -9, 5, &res);
        print_message("variant %d: (%.3f, %.3f) conf %.3f ncc %.3f second %.3f ratio %.3f\n", v, res.dy, res.dx, res.confidence, res.ncc, res.ncc_second, res.peak_ratio);
        assert_true(fabs(res.dy - 6) < 0.3);
        assert_true(fabs(res.dx + 9) < 0.3);
        assert_true(res.confidence > 0.2);
    }
}

static void test_negative_images(void **state) {
    (void)state;
    ts_register_options opt;
    ts_register_options_init(&opt);
    opt.log_compress = true; /* log of negatives would be NaN without the shift */
    int h = 128, w = 96;
    scene s = make_scene(h * w / 40, h + 200, w + 200);
    float *a = render(&s, h, w, 50, 50, 2), *b = render(&s, h, w, 54, 47, 2);
    for (int i = 0; i < h * w; i++) a[i] -= 600, b[i] -= 600;
    ts_registrar *r;
    ts_error err;
    ts_register_result res;
    assert_int_equal(ts_registrar_create(h, w, &opt, &r, &err), TS_OK);
    assert_int_equal(ts_register_strips(r, ts_f32(a), w, ts_f32(b), w, 0, 0, &res, &err), TS_OK);
    assert_true(fabs(res.dy - 4) < 0.2 && fabs(res.dx + 3) < 0.2);
    ts_registrar_free(r);
    free(a), free(b), free(s.b);
}

static void test_blank_low_confidence(void **state) {
    (void)state;
    ts_register_options opt;
    ts_register_options_init(&opt);
    int h = 128, w = 64;
    float *a = malloc(sizeof(float) * h * w), *b = malloc(sizeof(float) * h * w);
    ts_registrar *r;
    ts_error err;
    ts_register_result res;
    assert_int_equal(ts_registrar_create(h, w, &opt, &r, &err), TS_OK);
    /* Constant strips: degenerate, prior returned. */
    for (int i = 0; i < h * w; i++) a[i] = b[i] = 500;
    assert_int_equal(ts_register_strips(r, ts_f32(a), w, ts_f32(b), w, 1.5, 30, &res, &err), TS_OK);
    assert_true(res.degenerate);
    assert_true(res.confidence == 0);
    assert_true(res.dy == 1.5 && res.dx == 30);
    /* Nearly constant: one pixel d above 1000 in 128 x 64 gives a standard
     * deviation of about d / 90.5 against the test's 1e-6 (1000 + 1e-3):
     * constant up to d ~ 0.09. The strip's range decides from d ~ 0.26
     * (phasecorr.c, constant_strip); between, the mean and deviation do,
     * as they did for every strip before. */
    static const struct { float d; bool constant; } near[] = {{0.05f, true}, {0.15f, false}, {1.0f, false}};
    for (size_t k = 0; k < sizeof near / sizeof near[0]; k++) {
        for (int i = 0; i < h * w; i++) a[i] = 1000;
        for (int i = 0; i < h * w; i++) b[i] = (float)(500 + 20 * nrand());
        a[h * w / 2 + 7] = 1000 + near[k].d;
        assert_int_equal(ts_register_strips(r, ts_f32(a), w, ts_f32(b), w, 0, 0, &res, &err), TS_OK);
        assert_int_equal(res.degenerate, near[k].constant);
    }
    /* Independent noise only: no true match. */
    double worst = 0;
    for (int trial = 0; trial < 10; trial++) {
        for (int i = 0; i < h * w; i++) a[i] = (float)(500 + 20 * nrand()), b[i] = (float)(500 + 20 * nrand());
        assert_int_equal(ts_register_strips(r, ts_f32(a), w, ts_f32(b), w, 0, 0, &res, &err), TS_OK);
        if (res.confidence > worst) worst = res.confidence;
    }
    print_message("noise-only strips: max confidence %.3f\n", worst);
    assert_true(worst < 0.1);
    /* One blank strip against a textured one. */
    scene s = make_scene(h * w / 40, h + 200, w + 200);
    float *t = render(&s, h, w, 50, 50, 5);
    for (int i = 0; i < h * w; i++) a[i] = (float)(500 + 5 * nrand());
    assert_int_equal(ts_register_strips(r, ts_f32(t), w, ts_f32(a), w, 0, 0, &res, &err), TS_OK);
    print_message("blank vs textured: confidence %.3f\n", res.confidence);
    assert_true(res.confidence < 0.1);
    assert_false(res.matched); /* not a measurement: the prior comes back */
    assert_true(res.dy == 0 && res.dx == 0);
    ts_registrar_free(r);
    free(a), free(b), free(t), free(s.b);
}

/* The content check of the tiles no pair places (content.h): noise,
 * illumination, a constant and a hot pixel are not content; one blob, a
 * scene, and a texture as fine as the cells (which only the pixels' noise
 * measure sees) are. */
static double content_in(ts_samples tile, int h, int w) {
    double share = -1;
    ts_error err;
    ts_content_check *c;
    assert_int_equal(ts_content_check_create(h, w, &c, &err), TS_OK);
    assert_int_equal(ts_tile_content(c, tile, &share, &err), TS_OK);
    ts_content_check_free(c);
    return share;
}

static double content_of(const float *img, int h, int w) { return content_in(ts_f32(img), h, w); }

static void test_tile_content(void **state) {
    (void)state;
    const int h = 128, w = 160;
    const size_t n = (size_t)h * w;
    float *img = malloc(n * sizeof *img);
    /* Read noise on a background falling by a fifth to the corners. */
    for (int trial = 0; trial < 10; trial++) {
        for (int y = 0; y < h; y++)
            for (int x = 0; x < w; x++) {
                const double dy = (y - h / 2.0) / (h / 2.0), dx = (x - w / 2.0) / (w / 2.0);
                img[(size_t)y * w + x] = (float)(1000 * (1 - 0.1 * (dy * dy + dx * dx)) + 20 * nrand());
            }
        assert_true(content_of(img, h, w) == 0);
    }
    /* A falloff as cos^4 of the field angle leaves a third of the light in
     * the corners of a 512 px tile (a quartic surface alone leaves cells
     * over 6 sigmas in them, content.c). */
    {
        const int H = 512;
        float *v = malloc((size_t)H * H * sizeof *v);
        const double u = pow(1 - 0.65, -0.5) - 1; /* (1 + u)^-2 = 0.35 in the corners */
        for (int y = 0; y < H; y++)
            for (int x = 0; x < H; x++) {
                const double dy = (y - H / 2.0) / (H / 2.0), dx = (x - H / 2.0) / (H / 2.0);
                v[(size_t)y * H + x] = (float)(1000 * pow(1 + u * (dy * dy + dx * dx) / 2, -2) + 20 * nrand());
            }
        assert_true(content_of(v, H, H) == 0);
        free(v);
    }
    /* 1024 px: the noise medians sample rows (every 260th) and cells
     * (every 17th). Noise alone, then one faint cell. */
    {
        const int H = 1024;
        float *v = malloc((size_t)H * H * sizeof *v);
        for (size_t i = 0; i < (size_t)H * H; i++) v[i] = (float)(1000 + 20 * nrand());
        assert_true(content_of(v, H, H) == 0);
        scene cell1 = {1, &(blob){600, 300, 3, 200}};
        float *c1 = render(&cell1, H, H, 0, 0, 20);
        assert_true(content_of(c1, H, H) > 0);
        free(v), free(c1);
    }
    /* ... with one hot pixel */
    img[(size_t)40 * w + 77] = 60000;
    assert_true(content_of(img, h, w) == 0);
    /* ... with one faint cell (10 read-noise sigmas at its peak, 6 px wide) */
    scene one = {1, &(blob){70, 50, 3, 200}};
    float *cell = render(&one, h, w, 0, 0, 20);
    const double share = content_of(cell, h, w);
    print_message("one cell: share %.4f\n", share);
    assert_true(share > 0 && share < 0.05);
    free(cell);
    /* A scene */
    scene s = make_scene(h * w / 400, h, w);
    float *full = render(&s, h, w, 0, 0, 20);
    assert_true(content_of(full, h, w) > 0.05);
    free(full), free(s.b);
    /* A texture as fine as the cells (4 x 4 px, +-3 read-noise sigmas):
     * neighbouring cells differ as much as they vary. */
    for (int y = 0; y < h; y++)
        for (int x = 0; x < w; x++)
            img[(size_t)y * w + x] = (float)(1000 + (((y / 4 + x / 4) & 1) ? 60 : -60) + 20 * nrand());
    assert_true(content_of(img, h, w) > 0.5);
    /* Constants, and rounding only, in integer and float samples. */
    uint16_t *u = malloc(n * sizeof *u);
    for (size_t i = 0; i < n; i++) u[i] = 1000, img[i] = 1000.5f;
    assert_true(content_in((ts_samples){u, TS_UINT16}, h, w) == 0 && content_of(img, h, w) == 0);
    for (size_t i = 0; i < n; i++) u[i] = (uint16_t)lround(1000 + 0.3 * nrand());
    assert_true(content_in((ts_samples){u, TS_UINT16}, h, w) == 0);
    /* Small tiles: 2 x 2 cells, and single pixels. */
    for (size_t i = 0; i < 64 * 64; i++) img[i] = (float)(100 + 20 * nrand());
    assert_true(content_of(img, 64, 64) == 0);
    for (int y = 20; y < 28; y++)
        for (int x = 30; x < 38; x++) img[(size_t)y * 64 + x] += 400;
    assert_true(content_of(img, 64, 64) > 0);
    for (size_t i = 0; i < 16 * 16; i++) img[i] = (float)(100 + 20 * nrand());
    assert_true(content_of(img, 16, 16) == 0);
    free(u), free(img);
}

/* The camera's fixed pattern (content.h, ts_content_learn): blank tiles
 * with dust shadows on the sensor and a hot column show "content" each,
 * the same in every tile; against the median of a sample of them, nine
 * with one specimen tile among them, the blank ones have none and the
 * specimen tile still has. */
static void test_tile_content_pattern(void **state) {
    (void)state;
    const int h = 128, w = 128, ntile = 9;
    const size_t n = (size_t)h * w;
    blob dust[3] = {{30, 40, 4, -150}, {90, 100, 6, -120}, {64, 20, 3, -200}};
    scene fixed = {3, dust};
    float *tiles = malloc((size_t)ntile * n * sizeof *tiles);
    for (int t = 0; t < ntile; t++) {
        float *d = render(&fixed, h, w, 0, 0, 20); /* 100 + dust + noise */
        for (size_t i = 0; i < n; i++) d[i] += 900;
        for (int y = 0; y < h; y++) d[(size_t)y * w + 77] += 300; /* hot column */
        if (t == 4) { /* a specimen tile: a cell away from the dust */
            scene cell = {1, &(blob){60, 70, 4, 400}};
            float *c = render(&cell, h, w, 0, 0, 0);
            for (size_t i = 0; i < n; i++) d[i] += c[i] - 100;
            free(c);
        }
        memcpy(tiles + (size_t)t * n, d, n * sizeof *d);
        free(d);
    }
    ts_error err;
    ts_content_check *c;
    assert_int_equal(ts_content_check_create(h, w, &c, &err), TS_OK);
    double share;
    assert_int_equal(ts_tile_content(c, ts_f32(tiles), &share, &err), TS_OK);
    assert_true(share > 0); /* the camera's pattern alone: "content" */
    const size_t nc = ts_content_ncells(c);
    float *cells = malloc((size_t)ntile * nc * sizeof *cells);
    ts_content_noise noise[9];
    for (int t = 0; t < ntile; t++)
        assert_int_equal(ts_content_cells(c, ts_f32(tiles + (size_t)t * n), cells + (size_t)t * nc, &noise[t], &err),
                         TS_OK);
    assert_int_equal(ts_content_learn(c, cells, ntile, &err), TS_OK);
    for (int t = 0; t < ntile; t++) {
        /* read again (against all nine), or from the cells kept (against
         * the eight others): the same verdict */
        double kept;
        assert_int_equal(ts_tile_content(c, ts_f32(tiles + (size_t)t * n), &share, &err), TS_OK);
        assert_int_equal(ts_content_share(c, cells + (size_t)t * nc, noise[t], true, &kept, &err), TS_OK);
        print_message("tile %d against the pattern: share %.4f\n", t, share);
        assert_true(t == 4 ? share > 0 : share == 0);
        assert_true(t == 4 ? kept > 0 : kept == 0);
    }
    ts_content_check_free(c);
    free(cells), free(tiles);
    /* Noise only, 1024 px, 3 to 5 tiles (3: no pattern), each taken from
     * its own kept cells: not content (against a median that held its own
     * value, a third of its cells were 0 with 3 tiles, its noise measure
     * shrank, and 1-2 of 3 such tiles had "content") */
    const int H = 1024, nt[3] = {3, 4, 5};
    for (int r = 0; r < 3; r++) {
        assert_int_equal(ts_content_check_create(H, H, &c, &err), TS_OK);
        const size_t hn = (size_t)H * H, hc = ts_content_ncells(c);
        uint16_t *u = malloc(hn * sizeof *u);
        float *hcells = malloc((size_t)nt[r] * hc * sizeof *hcells);
        ts_content_noise hnoise[5];
        for (int t = 0; t < nt[r]; t++) {
            for (size_t i = 0; i < hn; i++) u[i] = (uint16_t)lround(1000 + 20 * nrand());
            assert_int_equal(ts_content_cells(c, (ts_samples){u, TS_UINT16}, hcells + (size_t)t * hc, &hnoise[t], &err),
                             TS_OK);
        }
        assert_int_equal(ts_content_learn(c, hcells, nt[r], &err), TS_OK);
        for (int t = 0; t < nt[r]; t++) {
            assert_int_equal(ts_content_share(c, hcells + (size_t)t * hc, hnoise[t], true, &share, &err), TS_OK);
            assert_true(share == 0);
        }
        ts_content_check_free(c);
        free(u), free(hcells);
    }
}

static void test_periodic_low_confidence(void **state) {
    (void)state;
    ts_register_options opt;
    ts_register_options_init(&opt);
    int h = 128, w = 96;
    float *a = malloc(sizeof(float) * h * w), *b = malloc(sizeof(float) * h * w);
    /* A grid of bright lines every 16 px (like a calibration target), shifted
     * by (3, 5): shifts differing by multiples of 16 are equally good. */
    for (int y = 0; y < h; y++)
        for (int x = 0; x < w; x++) {
            double ya = y, xa = x, yb = y + 3, xb = x + 5;
            a[y * w + x] = (float)(100 + 200 * (pow(cos(M_PI * ya / 16), 8) + pow(cos(M_PI * xa / 16), 8)) + 3 * nrand());
            b[y * w + x] = (float)(100 + 200 * (pow(cos(M_PI * yb / 16), 8) + pow(cos(M_PI * xb / 16), 8)) + 3 * nrand());
        }
    ts_registrar *r;
    ts_error err;
    ts_register_result res;
    assert_int_equal(ts_registrar_create(h, w, &opt, &r, &err), TS_OK);
    assert_int_equal(ts_register_strips(r, ts_f32(a), w, ts_f32(b), w, 0, 0, &res, &err), TS_OK);
    print_message("periodic: (%.2f, %.2f) conf %.3f ncc %.3f second %.3f ratio %.3f\n", res.dy,
                  res.dx, res.confidence, res.ncc, res.ncc_second, res.peak_ratio);
    /* Whatever period it picked, it must be one of the equivalent shifts ... */
    assert_true(fabs(remainder(res.dy - 3, 16)) < 0.3 && fabs(remainder(res.dx - 5, 16)) < 0.3);
    /* ... and say it is unsure. */
    assert_true(res.confidence < 0.15);
    assert_true(res.matched); /* it does match, just not uniquely */
    ts_registrar_free(r);
    free(a), free(b);
}

/* Two tiles of a scene with overlap ~ov in x, registered as a RIGHT pair
 * and as a BELOW pair (transposed layout). */
static void test_pairs(void **state) {
    (void)state;
    ts_register_options opt;
    ts_register_options_init(&opt);
    int H = 180, W = 240;
    scene s = make_scene(4000, 600, 600);
    /* True offsets differ from the nominal pitch by a few px both ways. */
    const double cases[][3] = {/* overlap nominal, true dy, true dx (along) */
                               {48, 2.4, -3.3}, {48, -4.0, 6.6}, {60, 0.5, 0.0}};
    for (size_t c = 0; c < 3; c++) {
        int ov = (int)cases[c][0];
        for (int dir = 0; dir < 2; dir++) {
            double tdy, tdx;
            if (dir == TS_PAIR_RIGHT) tdy = cases[c][1], tdx = W - ov + cases[c][2];
            else tdy = H - ov + cases[c][2], tdx = cases[c][1];
            float *a = render(&s, H, W, 20, 20, 4);
            float *b = render(&s, H, W, 20 + tdy, 20 + tdx, 4);
            ts_strip_geometry g;
            ts_error err;
            assert_int_equal(ts_strip_geometry_for((ts_pair_dir)dir, H, W, ov, &opt, &g, &err), TS_OK);
            ts_registrar *r;
            assert_int_equal(ts_registrar_create(g.sh, g.sw, &opt, &r, &err), TS_OK);
            ts_register_result res;
            assert_int_equal(ts_register_pair(r, &g, ts_f32(a), ts_f32(b), W, &res, &err), TS_OK);
            print_message("pair dir %d ov %d: want (%.2f, %.2f) got (%.3f, %.3f) conf %.3f strip %dx%d\n",
                          dir, ov, tdy, tdx, res.dy, res.dx, res.confidence, g.sh, g.sw);
            assert_true(fabs(res.dy - tdy) < 0.2);
            assert_true(fabs(res.dx - tdx) < 0.2);
            assert_true(res.confidence > 0.2);
            ts_registrar_free(r);
            free(a), free(b);
        }
    }
    free(s.b);
    /* Bad overlaps are argument errors. */
    ts_strip_geometry g;
    ts_error err;
    assert_int_equal(ts_strip_geometry_for(TS_PAIR_RIGHT, H, W, 0, &opt, &g, &err), TS_ERR_ARG);
    assert_int_equal(ts_strip_geometry_for(TS_PAIR_BELOW, H, W, H, &opt, &g, &err), TS_ERR_ARG);
}

/* numpy reference for m = arange(6).reshape(2, 3):
 *   np.rot90(m, 1) = [[2,5],[1,4],[0,3]]
 *   np.rot90(m, 2) = [[5,4,3],[2,1,0]]
 *   np.rot90(m, 3) = [[3,0],[4,1],[5,2]]
 *   np.rot90(np.fliplr(np.flipud(m)), 1) = [[3,0],[4,1],[5,2]]
 *   np.rot90(np.flipud(m), 1) = [[5,2],[4,1],[3,0]]
 *   np.fliplr(m) = [[2,1,0],[5,4,3]] */
static void test_orientation(void **state) {
    (void)state;
    const uint16_t m[6] = {0, 1, 2, 3, 4, 5};
    struct { ts_orientation o; int64_t oh, ow; uint16_t want[6]; } cases[] = {
        {{false, false, 0}, 2, 3, {0, 1, 2, 3, 4, 5}},
        {{false, false, 1}, 3, 2, {2, 5, 1, 4, 0, 3}},
        {{false, false, 2}, 2, 3, {5, 4, 3, 2, 1, 0}},
        {{false, false, 3}, 3, 2, {3, 0, 4, 1, 5, 2}},
        {{false, false, -1}, 3, 2, {3, 0, 4, 1, 5, 2}},
        {{true, true, 1}, 3, 2, {3, 0, 4, 1, 5, 2}},
        {{true, false, 1}, 3, 2, {5, 2, 4, 1, 3, 0}},
        {{false, true, 0}, 2, 3, {2, 1, 0, 5, 4, 3}},
        {{true, false, 0}, 2, 3, {3, 4, 5, 0, 1, 2}},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        int64_t oh, ow;
        ts_orient_shape(&cases[c].o, 2, 3, &oh, &ow);
        assert_int_equal(oh, cases[c].oh);
        assert_int_equal(ow, cases[c].ow);
        uint16_t out16[6];
        float in32[6], out32[6];
        uint8_t in8[6], out8[6];
        for (int i = 0; i < 6; i++) in32[i] = (float)m[i], in8[i] = (uint8_t)m[i];
        ts_orient_plane(&cases[c].o, m, 2, 3, 2, out16);
        ts_orient_plane(&cases[c].o, in32, 2, 3, 4, out32);
        ts_orient_plane(&cases[c].o, in8, 2, 3, 1, out8);
        for (int i = 0; i < 6; i++) {
            assert_int_equal(out16[i], cases[c].want[i]);
            assert_int_equal((int)out32[i], cases[c].want[i]);
            assert_int_equal(out8[i], cases[c].want[i]);
        }
    }
}

/* Strips held in their own dtype (estimate keeps tiles as decoded) register
 * exactly as their float copy, the view the registrar had before: same
 * result, bit for bit, for every dtype, with a row stride wider than the
 * strip, non-finite float samples read as 0 and float64 ones beyond float's
 * range as 0 too. */
static void fill_as(ts_dtype dt, const float *v, size_t n, void *out, float *as_float) {
    for (size_t i = 0; i < n; i++) {
        const double x = v[i];
        switch (dt) {
        case TS_UINT8: ((uint8_t *)out)[i] = (uint8_t)(x / 8); break;
        case TS_INT8: ((int8_t *)out)[i] = (int8_t)(x / 16 - 60); break;
        case TS_UINT16: ((uint16_t *)out)[i] = (uint16_t)x; break;
        case TS_INT16: ((int16_t *)out)[i] = (int16_t)(x - 600); break;
        case TS_UINT32: ((uint32_t *)out)[i] = (uint32_t)(x * 70000); break;
        case TS_INT32: ((int32_t *)out)[i] = (int32_t)(x * 1000 - 500000); break;
        case TS_UINT64: ((uint64_t *)out)[i] = (uint64_t)(x * 1e12); break;
        case TS_INT64: ((int64_t *)out)[i] = (int64_t)(x * 1e12 - 5e14); break;
        case TS_FLOAT32: ((float *)out)[i] = i % 97 == 5 ? NAN : i % 89 == 7 ? INFINITY : (float)x; break;
        case TS_FLOAT64: ((double *)out)[i] = i % 83 == 3 ? 1e300 : i % 79 == 2 ? NAN : x + 1e-9; break;
        default: break;
        }
    }
    ts_samples_to_float(out, dt, n, as_float); /* what estimate held before: the float copy */
    for (size_t i = 0; i < n; i++)
        if (!isfinite(as_float[i])) as_float[i] = 0.0f;
}

static void test_samples_dtypes(void **state) {
    (void)state;
    const int h = 64, w = 48, stride = 56;
    scene s = make_scene(h * w / 40, h + 200, w + 200);
    float *a = render(&s, h, stride, 50, 50, 5), *b = render(&s, h, stride, 53.5, 48.25, 5);
    const size_t n = (size_t)h * stride;
    const ts_dtype types[] = {TS_UINT8, TS_INT8, TS_UINT16, TS_INT16, TS_UINT32,
                              TS_INT32, TS_UINT64, TS_INT64, TS_FLOAT32, TS_FLOAT64};
    ts_register_options opt;
    ts_register_options_init(&opt);
    ts_registrar *r;
    ts_error err;
    assert_int_equal(ts_registrar_create(h, w, &opt, &r, &err), TS_OK);
    void *ra = malloc(n * 8), *rb = malloc(n * 8);
    float *fa = malloc(n * sizeof *fa), *fb = malloc(n * sizeof *fb);
    for (size_t t = 0; t < sizeof types / sizeof types[0]; t++) {
        fill_as(types[t], a, n, ra, fa);
        fill_as(types[t], b, n, rb, fb);
        ts_register_result native, copy;
        assert_int_equal(ts_register_strips(r, (ts_samples){ra, types[t]}, stride, (ts_samples){rb, types[t]}, stride,
                                            0, 0, &native, &err), TS_OK);
        assert_int_equal(ts_register_strips(r, ts_f32(fa), stride, ts_f32(fb), stride, 0, 0, &copy, &err), TS_OK);
        if (memcmp(&native, &copy, sizeof native) != 0)
            fail_msg("%s: dy %.17g / %.17g, dx %.17g / %.17g, confidence %.17g / %.17g", ts_dtype_name(types[t]),
                     native.dy, copy.dy, native.dx, copy.dx, native.confidence, copy.confidence);
        /* the integer and float ones find the shift (not a vacuous pass) */
        if (types[t] == TS_UINT16 || types[t] == TS_FLOAT32) {
            assert_true(native.matched);
            assert_true(fabs(native.dy - 3.5) < 0.2 && fabs(native.dx + 1.75) < 0.2);
        }
    }
    free(ra), free(rb), free(fa), free(fb), free(a), free(b), free(s.b);
    ts_registrar_free(r);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_orientation),
        cmocka_unit_test(test_integer_shifts),
        cmocka_unit_test(test_subpixel_shifts),
        cmocka_unit_test(test_prefilter_variants),
        cmocka_unit_test(test_negative_images),
        cmocka_unit_test(test_blank_low_confidence),
        cmocka_unit_test(test_tile_content),
        cmocka_unit_test(test_tile_content_pattern),
        cmocka_unit_test(test_periodic_low_confidence),
        cmocka_unit_test(test_pairs),
        cmocka_unit_test(test_samples_dtypes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
