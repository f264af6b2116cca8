/* Bench driver for the shifts file (built by bench/shifts_load.sh):
 *   shifts_load gen PATH SIDE   write a SIDE x SIDE grid (total_translation,
 *                               confidence, tiles, pairs) and time the write
 *   shifts_load load PATH       time ts_shifts_read, print peak RSS */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "shifts/shifts.h"

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static long peak_rss_kb(void) {
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return ru.ru_maxrss;
}

int main(int argc, char **argv) {
    ts_error err;
    if (argc == 4 && strcmp(argv[1], "gen") == 0) {
        int side = atoi(argv[3]);
        ts_shifts *s = ts_shifts_new();
        s->has_tile_shape = true;
        s->tile_shape[0] = s->tile_shape[1] = 2048;
        int w = ts_shifts_add_well(s, "A/1");
        char name[24];
        srand(1);
        for (int y = 0; y < side; y++)
            for (int x = 0; x < side; x++) {
                snprintf(name, sizeof name, "%03d%03d", x, y);
                int t = ts_shifts_add_tile(s, w, name);
                s->wells[w].origin[t][0] = (int64_t)y * 1843 + rand() % 7;
                s->wells[w].origin[t][1] = (int64_t)x * 1843 + rand() % 7;
                s->wells[w].has_origin[t] = true;
            }
        for (int y = 0; y < side; y++)
            for (int x = 0; x < side; x++) {
                int t = y * side + x;
                double c = (rand() % 1000) / 1000.0;
                if (x + 1 < side) ts_shifts_add_pair(s, w, t, t + 1, (rand() % 400) / 100.0 - 2, 1843.0 + (rand() % 400) / 100.0, c);
                if (y + 1 < side) ts_shifts_add_pair(s, w, t, t + side, 1843.0 + (rand() % 400) / 100.0, (rand() % 400) / 100.0 - 2, c);
            }
        double t0 = now();
        if (ts_shifts_write(argv[2], s, &err)) {
            fprintf(stderr, "%s\n", err.message);
            return 1;
        }
        printf("write_s=%.3f tiles=%d pairs=%d\n", now() - t0, s->wells[w].ntiles, s->wells[w].npairs);
        ts_shifts_free(s);
        return 0;
    }
    if (argc == 3 && strcmp(argv[1], "load") == 0) {
        double t0 = now();
        ts_shifts *s = NULL;
        if (ts_shifts_read(argv[2], &s, &err)) {
            fprintf(stderr, "%s\n", err.message);
            return 1;
        }
        double dt = now() - t0;
        long tiles = 0, pairs = 0;
        for (int w = 0; w < s->nwells; w++) tiles += s->wells[w].ntiles, pairs += s->wells[w].npairs;
        printf("load_s=%.3f tiles=%ld pairs=%ld peak_rss_mb=%.1f\n", dt, tiles, pairs, peak_rss_kb() / 1024.0);
        ts_shifts_free(s);
        return 0;
    }
    fprintf(stderr, "usage: shifts_load gen PATH SIDE | load PATH\n");
    return 2;
}
