/* The fusion row kernels per instruction set (src/fuse/kernels.c), in one
 * run: blend (accumulate_u16 of 4 tiles) + normalise_u16 of a 2048 x 2048
 * block, best of 5, as output megapixels/s; SSE2 is the baseline and a
 * STREAM-like copy of the same bytes the limit.
 *   fuse_kernels        prints one line per set this CPU has */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "fuse/kernels.h"

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

enum { N = 2048 * 2048, TILES = 4 };

int main(void) {
    float *num = malloc(N * sizeof *num), *den = malloc(N * sizeof *den), *w = malloc(N * sizeof *w);
    uint16_t *v = malloc(N * sizeof *v), *out = malloc(N * sizeof *out);
    if (!num || !den || !w || !v || !out) return 1;
    for (int i = 0; i < N; i++) v[i] = (uint16_t)(i * 2654435761u >> 20), w[i] = (float)(i % 1024) + 1e-6f;
    /* The limit: the bytes the blend must move (per tile: v, w read, num,
     * den read and written; then num, den read, out written), copied. */
    const double bytes = (double)TILES * N * (2 + 4 + 16) + (double)N * (8 + 2);
    char *src = malloc((size_t)bytes / 2), *dst = malloc((size_t)bytes / 2);
    if (!src || !dst) return 1;
    memset(src, 1, (size_t)bytes / 2);
    memset(dst, 0, (size_t)bytes / 2);
    double copy = 1e30;
    for (int r = 0; r < 5; r++) {
        double t0 = now();
        memcpy(dst, src, (size_t)bytes / 2);
        double t = now() - t0;
        if (t < copy) copy = t;
    }
    printf("limit: moving the blend's %.0f MB (memcpy of half of it, read + write) %.1f ms = %.1f output MP/s\n",
           bytes / 1e6, copy * 1e3, N / 1e6 / copy);
    double base = 0;
    const char *isas[] = {"sse2", "avx2", "avx512"};
    for (int s = 0; s < 3; s++) {
        const ts_fuse_kernels *k = ts_fuse_cpu_kernels_isa(isas[s]);
        if (!k) { printf("%-6s: not on this CPU\n", isas[s]); continue; }
        double best = 1e30;
        for (int r = 0; r < 5; r++) {
            memset(num, 0, N * sizeof *num), memset(den, 0, N * sizeof *den);
            double t0 = now();
            for (int t = 0; t < TILES; t++)
                for (int y = 0; y < 2048; y++)
                    k->accumulate_u16(num + y * 2048, den + y * 2048, v + y * 2048, w + y * 2048, 2048);
            for (int y = 0; y < 2048; y++) k->normalise_u16(out + y * 2048, num + y * 2048, den + y * 2048, 2048);
            double t = now() - t0;
            if (t < best) best = t;
        }
        if (s == 0) base = best;
        printf("%-6s: blend of %d tiles + normalise %.1f ms = %.1f output MP/s, %.2fx SSE2, %.2fx the limit's time%s\n",
               isas[s], TILES, best * 1e3, N / 1e6 / best, base / best, best / copy,
               !strcmp(isas[s], ts_fuse_cpu_isa()) ? " (chosen)" : "");
    }
    free(num), free(den), free(w), free(v), free(out), free(src), free(dst);
    return 0;
}
