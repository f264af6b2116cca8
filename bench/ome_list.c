/* Plate listing at scale: writes the plate + well metadata of a plate with
 * many positions (no images), then times ts_plate_open, which lists wells and
 * positions from those files only.
 *   ome_list gen DIR VERSION(4|5) NWELLS NPOS_PER_WELL
 *   ome_list list DIR    -> "list_s=... wells=... positions=... peak_rss_mb=..." */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "common/fs.h"
#include "ome/ome.h"

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

int main(int argc, char **argv) {
    ts_error err = {0};
    if (argc == 6 && !strcmp(argv[1], "gen")) {
        int ver = atoi(argv[3]), nw = atoi(argv[4]), np = atoi(argv[5]);
        const char **wells = calloc((size_t)nw, sizeof *wells);
        char (*wn)[16] = calloc((size_t)nw, 16);
        for (int w = 0; w < nw; w++) {
            snprintf(wn[w], 16, "%c/%d", 'A' + w / 24, w % 24 + 1);
            wells[w] = wn[w];
        }
        char (*pn)[24] = calloc((size_t)np, 24);
        const char **pos = calloc((size_t)np, sizeof *pos);
        int side = 1;
        while (side * side < np) side++;
        for (int p = 0; p < np; p++) {
            snprintf(pn[p], 24, "%03d%03d", p % side, p / side);
            pos[p] = pn[p];
        }
        ts_plate_layout L = {.path = argv[2], .version = ver == 4 ? TS_OME_04 : TS_OME_05,
                             .nwells = nw, .wells = wells, .npositions = np, .positions = pos};
        ts_remove_tree(argv[2], &err);
        if (ts_plate_write_layout(&L, &err) != TS_OK) {
            fprintf(stderr, "%s\n", err.message);
            return 1;
        }
        return 0;
    }
    if (argc == 3 && !strcmp(argv[1], "list")) {
        double t0 = now();
        ts_plate *p = NULL;
        if (ts_plate_open(argv[2], &p, &err) != TS_OK) {
            fprintf(stderr, "%s\n", err.message);
            return 1;
        }
        long n = 0;
        for (int w = 0; w < p->nwells; w++) n += p->wells[w].npositions;
        double dt = now() - t0;
        struct rusage ru;
        getrusage(RUSAGE_SELF, &ru);
        printf("list_s=%.3f wells=%d positions=%ld peak_rss_mb=%.1f\n", dt, p->nwells, n,
               ru.ru_maxrss / 1024.0);
        ts_plate_close(p);
        return 0;
    }
    fprintf(stderr, "usage: ome_list gen DIR 4|5 NWELLS NPOS | ome_list list DIR\n");
    return 2;
}
