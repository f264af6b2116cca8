/* The unit tests' pseudo-random numbers: Marsaglia's xorshift64 (shifts
 * 13, 7, 17) on a state each test program seeds itself, so its data are
 * the same on every run and machine. */
#ifndef TESSERA_TEST_XORSHIFT_H
#define TESSERA_TEST_XORSHIFT_H

#include <math.h>
#include <stdint.h>

static inline uint64_t xorshift64(uint64_t *s) {
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

/* Uniform in [0, 1), 53 bits. */
static inline double xorshift_u01(uint64_t *s) { return (double)(xorshift64(s) >> 11) / 9007199254740992.0; }

/* Standard normal (Box-Muller, one of the pair). */
static inline double xorshift_normal(uint64_t *s) {
    double u = xorshift_u01(s) + 1e-12, v = xorshift_u01(s);
    return sqrt(-2 * log(u)) * cos(2 * M_PI * v);
}

#endif
