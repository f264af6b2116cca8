/* Bench driver for the global solve (built and run by bench/solve_bench.sh).
 *   solve_bench gen SIDE WRONG PREFIX   a SIDE x SIDE grid: true origins =
 *       grid x pitch + jitter, pairs = differences + 0.3 px noise, a WRONG
 *       fraction off by 50-200 px with low confidence (with `confident`:
 *       the confidence of a right pair). Writes PREFIX.bin
 *       (raw arrays for the scipy baseline) and PREFIX.yaml (pairs file).
 *   solve_bench solve PREFIX l1|l2 [WEIGHTS [on|off]]   times
 *       ts_solve_positions (loop check on unless `off`), prints seconds,
 *       iterations, factorisations, errors vs truth, seams off by > 2 px,
 *       pairs the loop check down-weighted, peak RSS, and
 *       writes PREFIX.<solver>.pos (float64 n x 2). */
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "shifts/shifts.h"
#include "solve/solve.h"

static uint64_t rng = 88172645463325252ull;
static double urand(void) {
    rng ^= rng >> 12;
    rng ^= rng << 25;
    rng ^= rng >> 27;
    return (double)((rng * 2685821657736338717ull) >> 11) / 9007199254740992.0;
}
static double nrand(void) { return sqrt(-2 * log(urand() + 1e-12)) * cos(2 * M_PI * urand()); }
static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

/* PREFIX.bin: int32 n, m, then gx[n], gy[n] (int32), truth[n][2], then
 * a[m], b[m] (int32), d[m][2], c[m] (float64). */
static int gen(int side, double wrong, const char *prefix, bool confident) {
    int n = side * side;
    int *gx = malloc(sizeof(int) * n), *gy = malloc(sizeof(int) * n), *a = malloc(sizeof(int) * 2 * n),
        *b = malloc(sizeof(int) * 2 * n);
    double(*t)[2] = malloc(sizeof *t * n), (*d)[2] = malloc(sizeof *d * 2 * n), *c = malloc(sizeof(double) * 2 * n);
    for (int i = 0; i < n; i++) {
        gx[i] = i % side;
        gy[i] = i / side;
        t[i][0] = gy[i] * 1843.0 + 20 * (2 * urand() - 1);
        t[i][1] = gx[i] * 1843.0 + 20 * (2 * urand() - 1);
    }
    int m = 0;
    for (int i = 0; i < n; i++)
        for (int right = 1; right >= 0; right--) {
            int j;
            if (right) {
                if (gx[i] + 1 >= side) continue;
                j = i + 1;
            } else {
                if (gy[i] + 1 >= side) continue;
                j = i + side;
            }
            a[m] = i;
            b[m] = j;
            d[m][0] = t[j][0] - t[i][0] + 0.3 * nrand();
            d[m][1] = t[j][1] - t[i][1] + 0.3 * nrand();
            c[m] = 0.6 + 0.4 * urand();
            if (urand() < wrong) {
                double mag = 50 + 150 * urand(), ang = 2 * M_PI * urand();
                d[m][0] += mag * sin(ang);
                d[m][1] += mag * cos(ang);
                /* Low confidence by default (the registration saw a poor
                 * peak); "confident" keeps it, the hard case where only
                 * the loops tell. */
                double cw = 0.02 + 0.1 * urand();
                if (!confident) c[m] = cw;
            }
            m++;
        }
    char path[1024];
    snprintf(path, sizeof path, "%s.bin", prefix);
    FILE *f = fopen(path, "wb");
    if (!f) return 1;
    fwrite(&n, 4, 1, f);
    fwrite(&m, 4, 1, f);
    fwrite(gx, 4, n, f);
    fwrite(gy, 4, n, f);
    fwrite(t, 16, n, f);
    fwrite(a, 4, m, f);
    fwrite(b, 4, m, f);
    fwrite(d, 16, m, f);
    fwrite(c, 8, m, f);
    fclose(f);
    ts_shifts *s = ts_shifts_new();
    s->has_tile_shape = true;
    s->tile_shape[0] = s->tile_shape[1] = 2048;
    int w = ts_shifts_add_well(s, "A/1");
    char name[16];
    for (int i = 0; i < n; i++) {
        snprintf(name, sizeof name, "%03d%03d", gx[i], gy[i]);
        ts_shifts_add_tile(s, w, name);
    }
    for (int e = 0; e < m; e++) ts_shifts_add_pair(s, w, a[e], b[e], d[e][0], d[e][1], c[e]);
    snprintf(path, sizeof path, "%s.yaml", prefix);
    ts_error err;
    if (ts_shifts_write(path, s, &err)) {
        fprintf(stderr, "%s\n", err.message);
        return 1;
    }
    printf("generated %d tiles, %d pairs\n", n, m);
    ts_shifts_free(s);
    return 0;
}

static int cmp_double(const void *x, const void *y) {
    double a = *(const double *)x, b = *(const double *)y;
    return (a > b) - (a < b);
}

static int solve(const char *prefix, const char *solver, const char *weights, const char *loops) {
    char path[1024];
    snprintf(path, sizeof path, "%s.bin", prefix);
    FILE *f = fopen(path, "rb");
    if (!f) return 1;
    int n, m;
    if (fread(&n, 4, 1, f) != 1 || fread(&m, 4, 1, f) != 1) return 1;
    int *gx = malloc(sizeof(int) * n), *gy = malloc(sizeof(int) * n), *a = malloc(sizeof(int) * m),
        *b = malloc(sizeof(int) * m);
    double(*t)[2] = malloc(sizeof *t * n), (*d)[2] = malloc(sizeof *d * m), *c = malloc(sizeof(double) * m);
    size_t ok = fread(gx, 4, n, f) + fread(gy, 4, n, f) + fread(t, 16, n, f) + fread(a, 4, m, f) +
                fread(b, 4, m, f) + fread(d, 16, m, f) + fread(c, 8, m, f);
    fclose(f);
    if (ok != (size_t)(3 * n + 4 * m)) return 1;
    ts_shift_pair *p = malloc(sizeof *p * m);
    for (int e = 0; e < m; e++) p[e] = (ts_shift_pair){.a = a[e], .b = b[e], .dy = d[e][0], .dx = d[e][1], .confidence = c[e]};
    ts_solve_problem prob = {.ntiles = n, .gx = gx, .gy = gy, .pitch_y = 1843, .pitch_x = 1843, .npairs = m, .pairs = p};
    ts_solve_options o;
    ts_solve_options_init(&o);
    o.solver = strcmp(solver, "l2") == 0 ? TS_SOLVER_L2 : TS_SOLVER_L1;
    if (ts_edge_weighting_parse(weights, &o.edge_weights, &o.threshold)) return 2;
    if (strcmp(loops, "on") && strcmp(loops, "off")) return 2;
    o.loop_check = strcmp(loops, "on") == 0;
    ts_solve_result r;
    ts_error err;
    double t0 = now();
    if (ts_solve_positions(&prob, &o, &r, &err)) {
        fprintf(stderr, "%s\n", err.message);
        return 1;
    }
    double dt = now() - t0;
    /* error vs truth after removing the common translation */
    double my = 0, mx = 0, maxe = 0;
    for (int i = 0; i < n; i++) my += r.position[i][0] - t[i][0], mx += r.position[i][1] - t[i][1];
    my /= n, mx /= n;
    double *e = malloc(sizeof(double) * n);
    for (int i = 0; i < n; i++) {
        e[i] = hypot(r.position[i][0] - t[i][0] - my, r.position[i][1] - t[i][1] - mx);
        if (e[i] > maxe) maxe = e[i];
    }
    qsort(e, (size_t)n, sizeof *e, cmp_double);
    /* Seams: every measured neighbour pair, wrong ones included (their
     * tiles still meet in the image); a seam is off when the solved offset
     * of its two tiles differs from the true one by more than 2 px. */
    int seams = 0;
    for (int k = 0; k < m; k++)
        seams += hypot(r.position[b[k]][0] - r.position[a[k]][0] - (t[b[k]][0] - t[a[k]][0]),
                       r.position[b[k]][1] - r.position[a[k]][1] - (t[b[k]][1] - t[a[k]][1])) > 2.0;
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    double cpu = (double)ru.ru_utime.tv_sec + 1e-6 * (double)ru.ru_utime.tv_usec + (double)ru.ru_stime.tv_sec +
                 1e-6 * (double)ru.ru_stime.tv_usec;
    printf("seconds=%.3f cpu_s=%.3f iterations=%d factorisations=%d local_steps=%d converged=%d err_px_p50=%.3f p99=%.3f max=%.3f "
           "seams_over_2px=%d outliers=%d loop_downweighted=%d stage_downweighted=%d peak_rss_mb=%.1f\n",
           dt, cpu, r.iterations, r.factorisations, r.local_steps, r.converged, e[n / 2], e[n * 99 / 100], maxe, seams,
           r.noutliers, r.loop_downweighted, r.stage_downweighted, ru.ru_maxrss / 1024.0);
    snprintf(path, sizeof path, "%s.%s.pos", prefix, solver);
    f = fopen(path, "wb");
    fwrite(r.position, 16, n, f);
    fclose(f);
    ts_solve_result_free(&r);
    return 0;
}

int main(int argc, char **argv) {
    if ((argc == 5 || argc == 6) && strcmp(argv[1], "gen") == 0)
        return gen(atoi(argv[2]), atof(argv[3]), argv[4], argc == 6 && strcmp(argv[5], "confident") == 0);
    if (argc >= 4 && argc <= 6 && strcmp(argv[1], "solve") == 0)
        return solve(argv[2], argv[3], argc >= 5 ? argv[4] : "none", argc == 6 ? argv[5] : "on");
    fprintf(stderr, "usage: solve_bench gen SIDE WRONG PREFIX [confident] | solve PREFIX l1|l2 [WEIGHTS [on|off]]"
                    "\n  (on|off: the loop check, default on)\n");
    return 2;
}
