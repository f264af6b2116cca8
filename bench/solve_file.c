/* Bench driver (bench/solve_bench.sh): what `tessera solve IN -o OUT` does
 * with its default options (ts_solve_file_ex: read, ts_solve_wells on all
 * cores, write), timed step by step, wall and CPU seconds.
 *   solve_file IN OUT */
#include <stdio.h>
#include <sys/resource.h>
#include <time.h>

#include "shifts/shifts.h"
#include "solve/solve.h"

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static double cpu(void) {
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)ru.ru_utime.tv_sec + 1e-6 * (double)ru.ru_utime.tv_usec + (double)ru.ru_stime.tv_sec +
           1e-6 * (double)ru.ru_stime.tv_usec;
}

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: solve_file IN OUT\n");
        return 2;
    }
    ts_solve_options o;
    ts_solve_options_init(&o);
    ts_error err;
    ts_shifts *s = NULL;
    double t[4], c[4];
    t[0] = now(), c[0] = cpu();
    if (ts_shifts_read(argv[1], &s, &err)) {
        fprintf(stderr, "%s\n", err.message);
        return 1;
    }
    t[1] = now(), c[1] = cpu();
    double py = s->has_nominal_pitch ? s->nominal_pitch[0] : 0, px = s->has_nominal_pitch ? s->nominal_pitch[1] : 0;
    ts_solve_summary sum;
    if (ts_solve_wells(s, py, px, NULL, &o, 0, &sum, &err)) {
        fprintf(stderr, "%s\n", err.message);
        return 1;
    }
    t[2] = now(), c[2] = cpu();
    if (ts_shifts_write(argv[2], s, &err)) {
        fprintf(stderr, "%s\n", err.message);
        return 1;
    }
    t[3] = now(), c[3] = cpu();
    ts_shifts_free(s);
    printf("read %.3f s (cpu %.3f), solve %.3f s (cpu %.3f), write %.3f s (cpu %.3f), total %.3f s (cpu %.3f); "
           "%d iterations, converged %d\n",
           t[1] - t[0], c[1] - c[0], t[2] - t[1], c[2] - c[1], t[3] - t[2], c[3] - c[2], t[3] - t[0], c[3] - c[0],
           sum.max_iterations_used, sum.converged);
    return 0;
}
