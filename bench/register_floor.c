/* Bench driver (bench/register_bench.sh): the machine's floor for `tessera
 * estimate` on a plate, on one thread. What no registration can avoid:
 *   - decoding every tile (level 0, through the zarr layer's
 *     tz_array_read: file read + codec) into buffers already faulted in
 *     (the faster of two reads of each tile); not the conversion to
 *     float, which estimate makes only of the strips it registers;
 *   - per pair (each tile and its right and lower neighbour), the FFTW
 *     forward r2c of both strips and one c2r inverse, at the strip shapes
 *     estimate uses (ts_strip_geometry_for, default options), with the same
 *     FFTW_ESTIMATE plans.
 * Everything else tessera does (pre-filters, peak search, NCC, sub-pixel
 * refinement, solve, YAML) is above this floor.
 *   register_floor PLATE OVERLAP_PX [REPEATS]
 * prints a line "floor: ..." (tiles, pairs, decode ms, fft ms, floor
 * ms/pair; CPU time of this process) and a line "fftw: ..." comparing
 * ESTIMATE with MEASURE plans (time, planning time, a checksum of the first
 * pair's correlation: MEASURE's may change from run to run). With
 * REPEATS > 1 the FFTs are timed that many times and the fastest kept
 * (the machine may be shared). Positions must be named XXXYYY. */
#include <fftw3.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ome/ome.h"
#include "register/register.h"
#include "shifts/shifts.h"
#include "zarr/zarr.h"

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* The first t/c/z plane of a tile (the trailing two axes are y, x). */
static float *decode_tile(const ts_plate *plate, int w, int p, int64_t *h, int64_t *wd, double *secs) {
    ts_error err = {0};
    ts_image_meta meta;
    tz_array *arr = NULL;
    if (ts_plate_open_array(plate, w, p, 0, &meta, &arr, &err) != TS_OK) {
        fprintf(stderr, "register_floor: %s\n", err.message);
        exit(1);
    }
    const tz_array_meta *am = tz_array_get_meta(arr);
    int64_t start[TZ_MAX_DIM] = {0}, count[TZ_MAX_DIM];
    for (int d = 0; d < am->ndim; d++) count[d] = d < am->ndim - 2 ? 1 : am->shape[d];
    *h = am->shape[am->ndim - 2];
    *wd = am->shape[am->ndim - 1];
    size_t n = (size_t)(*h * *wd);
    void *raw = malloc(n * ts_dtype_size(am->dtype));
    float *out = malloc(n * sizeof(float));
    if (!raw || !out) {
        fprintf(stderr, "register_floor: out of memory\n");
        exit(1);
    }
    /* Faulting in fresh pages is not decoding, and a floor leaves out
     * what can be avoided: the buffers are touched first, and the faster
     * of two reads counts (the second's buffers inside the zarr layer come
     * back from the allocator already faulted in). 100 tiles of 256^2 on
     * this VM, 2026-12-05: 108-130 ms timed as before, 60 ms with the
     * buffers touched, 15-16 ms best of two. */
    memset(raw, 0, n * ts_dtype_size(am->dtype));
    memset(out, 0, n * sizeof(float));
    double best = 1e300;
    for (int rep = 0; rep < 2; rep++) {
        double t0 = now();
        if (tz_array_read(arr, start, count, raw, &err) != TS_OK) {
            fprintf(stderr, "register_floor: %s\n", err.message);
            exit(1);
        }
        double t = now() - t0;
        if (t < best) best = t;
    }
    *secs += best;
    /* Untimed: estimate holds tiles as decoded and converts only the
     * strips it registers (while copying them into a registrar), so the
     * floor leaves the conversion out; the FFTs below read float strips. */
    ts_samples_to_float(raw, am->dtype, n, out);
    free(raw);
    tz_array_close(arr);
    return out;
}

typedef struct fft_shape {
    int h, w;
    float *real;
    fftwf_complex *A, *B;
    fftwf_plan fwd, inv;
} fft_shape;

static void plan_shape(fft_shape *f, int h, int w, unsigned flags) {
    size_t n = (size_t)h * (size_t)w, nc = (size_t)h * (size_t)(w / 2 + 1);
    f->h = h, f->w = w;
    f->real = fftwf_malloc(n * sizeof(float));
    f->A = fftwf_malloc(nc * sizeof(fftwf_complex));
    f->B = fftwf_malloc(nc * sizeof(fftwf_complex));
    f->fwd = fftwf_plan_dft_r2c_2d(h, w, f->real, f->A, flags);
    f->inv = fftwf_plan_dft_c2r_2d(h, w, f->A, f->real, flags);
}

static void strip_in(fft_shape *f, const float *tile, int64_t tw, int y0, int x0) {
    for (int y = 0; y < f->h; y++)
        memcpy(f->real + (size_t)y * (size_t)f->w, tile + (size_t)(y0 + y) * (size_t)tw + (size_t)x0,
               (size_t)f->w * sizeof(float));
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: register_floor PLATE OVERLAP_PX [REPEATS]\n");
        return 2;
    }
    int overlap = atoi(argv[2]), repeats = argc > 3 ? atoi(argv[3]) : 1;
    if (repeats < 1) repeats = 1;
    ts_error err = {0};
    ts_plate *plate = NULL;
    if (ts_plate_open(argv[1], &plate, &err) != TS_OK) {
        fprintf(stderr, "register_floor: %s\n", err.message);
        return 1;
    }
    double t_decode = 0, t_fft = 0;
    long tiles = 0, pairs = 0;
    int64_t th = 0, tw = 0;
    /* Tiles first (each decoded once, as estimate's cache does), then the
     * pairs' FFTs. */
    int nw = plate->nwells;
    float ***tile = calloc((size_t)nw, sizeof *tile);
    int **gx = calloc((size_t)nw, sizeof *gx), **gy = calloc((size_t)nw, sizeof *gy);
    for (int w = 0; w < nw; w++) {
        int np = plate->wells[w].npositions;
        tile[w] = calloc((size_t)np, sizeof **tile);
        gx[w] = calloc((size_t)np, sizeof **gx);
        gy[w] = calloc((size_t)np, sizeof **gy);
        for (int p = 0; p < np; p++) {
            tile[w][p] = decode_tile(plate, w, p, &th, &tw, &t_decode);
            ts_position_grid(plate->wells[w].positions[p], false, &gx[w][p], &gy[w][p]);
            tiles++;
        }
    }
    ts_register_options opt;
    ts_register_options_init(&opt);
    ts_strip_geometry g[2];
    for (int d = 0; d < 2; d++)
        if (ts_strip_geometry_for((ts_pair_dir)d, (int)th, (int)tw, overlap, &opt, &g[d], &err) != TS_OK) {
            fprintf(stderr, "register_floor: %s\n", err.message);
            return 1;
        }
    /* FFTW_ESTIMATE (what estimate uses) and, for comparison, FFTW_MEASURE
     * (timed planning: faster transforms, but the algorithm it picks, and
     * so the output's last bits, may change from run to run; the checksum
     * of the first pair's correlation shows it). */
    static const unsigned flags[2] = {FFTW_ESTIMATE, FFTW_MEASURE};
    double t_fft_by[2] = {1e300, 1e300}, t_plan[2] = {0, 0};
    unsigned long long sum_by[2] = {0, 0};
    for (int fl = 0; fl < 2; fl++) {
        fft_shape f[2];
        double tp = now();
        for (int d = 0; d < 2; d++) plan_shape(&f[d], g[d].sh, g[d].sw, flags[fl]);
        t_plan[fl] = now() - tp;
        for (int rep = 0; rep < repeats; rep++) {
            double t0 = now();
            long np_all = 0;
            for (int w = 0; w < nw; w++) {
                int np = plate->wells[w].npositions;
                for (int a = 0; a < np; a++)
                    for (int b = 0; b < np; b++) {
                        int d = gx[w][b] == gx[w][a] + 1 && gy[w][b] == gy[w][a] ? TS_PAIR_RIGHT
                                : gx[w][b] == gx[w][a] && gy[w][b] == gy[w][a] + 1 ? TS_PAIR_BELOW : -1;
                        if (d < 0) continue;
                        fft_shape *s = &f[d];
                        strip_in(s, tile[w][a], tw, g[d].a_y0, g[d].a_x0);
                        fftwf_execute_dft_r2c(s->fwd, s->real, s->A);
                        strip_in(s, tile[w][b], tw, g[d].b_y0, g[d].b_x0);
                        fftwf_execute_dft_r2c(s->fwd, s->real, s->B);
                        fftwf_execute_dft_c2r(s->inv, s->B, s->real);
                        if (np_all++ == 0 && rep == 0) {
                            unsigned long long h = 1469598103934665603ull;
                            const unsigned char *p = (const unsigned char *)s->real;
                            for (size_t i = 0; i < (size_t)s->h * (size_t)s->w * sizeof(float); i++)
                                h = (h ^ p[i]) * 1099511628211ull;
                            sum_by[fl] = h;
                        }
                    }
            }
            double t = now() - t0;
            if (t < t_fft_by[fl]) t_fft_by[fl] = t;
            pairs = np_all;
        }
        for (int d = 0; d < 2; d++) {
            fftwf_destroy_plan(f[d].fwd);
            fftwf_destroy_plan(f[d].inv);
            fftwf_free(f[d].real);
            fftwf_free(f[d].A);
            fftwf_free(f[d].B);
        }
    }
    t_fft = t_fft_by[0];
    printf("floor: %ld tiles of %lldx%lld, %ld pairs, strips %dx%d and %dx%d: decode %.1f ms, fft %.1f ms, "
           "%.2f ms/pair\n", tiles, (long long)th, (long long)tw, pairs, g[0].sh, g[0].sw, g[1].sh, g[1].sw,
           1e3 * t_decode, 1e3 * t_fft, pairs ? 1e3 * (t_decode + t_fft) / (double)pairs : 0.0);
    printf("fftw: ESTIMATE %.1f ms (planning %.1f ms, checksum %016llx), MEASURE %.1f ms (planning %.1f ms, "
           "checksum %016llx)\n", 1e3 * t_fft_by[0], 1e3 * t_plan[0], sum_by[0], 1e3 * t_fft_by[1],
           1e3 * t_plan[1], sum_by[1]);
    for (int w = 0; w < nw; w++) {
        for (int p = 0; p < plate->wells[w].npositions; p++) free(tile[w][p]);
        free(tile[w]), free(gx[w]), free(gy[w]);
    }
    free(tile), free(gx), free(gy);
    ts_plate_close(plate);
    return 0;
}
