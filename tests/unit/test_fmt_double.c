/* The shifts writer's exact double formatter gives the bytes of the printf
 * loop it replaced ("shortest of %.15g..%.17g that strtod reads back"), on
 * random bit patterns, random values at pixel and confidence scales, short
 * decimals, exact ties, powers of two and ten and their neighbours, and the
 * edges of its 128-bit range; and the integer formatter those of %lld. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <float.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "shifts/fmt_double.h"

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;
static uint64_t next_u64(void) { /* xorshift64*, deterministic */
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return rng_state * 2685821657736338717ull;
}
static double urand(void) { return (double)(next_u64() >> 11) / 9007199254740992.0; }

static int mismatches;

static void check(double v) {
    char fast[TS_FMT_DOUBLE_MAX], ref[TS_FMT_DOUBLE_MAX];
    size_t nf = ts_fmt_shortest_g(fast, v), nr = ts_fmt_shortest_g_printf(ref, v);
    if (nf != nr || strcmp(fast, ref) != 0) {
        if (mismatches++ < 10) print_error("%a: fast '%s' printf '%s'\n", v, fast, ref);
    }
}

static void check_pm(double v) {
    check(v);
    check(-v);
    check(nextafter(v, 0));
    check(nextafter(v, INFINITY));
}

static void test_random_bits(void **state) {
    (void)state;
    mismatches = 0;
    for (int i = 0; i < 150000; i++) {
        uint64_t b = next_u64();
        double v;
        memcpy(&v, &b, sizeof v);
        check(v);
        /* the same mantissa at exponents of the fast range */
        b = (b & ~(0x7ffull << 52)) | ((uint64_t)(1006 + next_u64() % 45) << 52);
        memcpy(&v, &b, sizeof v);
        check(v);
    }
    assert_int_equal(mismatches, 0);
}

static void test_pixels_and_confidences(void **state) {
    (void)state;
    mismatches = 0;
    for (int i = 0; i < 150000; i++) {
        check((urand() * 2 - 1) * 4000);         /* pair shifts, px */
        check(urand());                           /* confidences */
        check(0.02 + 0.1 * urand());
        check(ldexp(urand(), -(int)(next_u64() % 20))); /* down to ~1e-6 */
        check((urand() - 0.5) * 1e15);
        check(round(urand() * 1e6) / 1e3); /* short decimals: 123.456 */
        check(round(urand() * 1e4) / 1e4);
    }
    assert_int_equal(mismatches, 0);
}

static void test_edges(void **state) {
    (void)state;
    mismatches = 0;
    for (int e = -60; e <= 60; e++) check_pm(ldexp(1.0, e)); /* powers of two: the narrow gap below */
    for (int e = -8; e <= 16; e++) {
        double p = pow(10, e);
        check_pm(p);
        check_pm(9.5 * p);
        check_pm(9.9999999999999995 * p);
        check_pm(9.99999999999999995 * p);
    }
    /* exact decimal ties at the 15th, 16th and 17th digit */
    check(1234567890123456.5);
    check(123456789012345.25);
    check(12345678901234.125);
    check(0.5);
    check(2.5);
    check(1e15 - 0.5);
    check(1e15 - 0.125);
    check(999999999999999.9);
    check(1e-5);
    check(nextafter(1e-5, 0));
    check(0.0);
    check(-0.0);
    check(DBL_MIN);
    check(DBL_MAX);
    check(DBL_TRUE_MIN);
    check(INFINITY);
    check(-INFINITY);
    check(NAN);
    check(0.1);
    check(0.3);
    check(1.0 / 3.0);
    check(1843.0);
    for (int i = 1; i < 100000; i++) check(i / 64.0), check(i * 0.001), check(i * 0.1);
    assert_int_equal(mismatches, 0);
}

static void test_int64(void **state) {
    (void)state;
    const long long vals[] = {0, 1, -1, 9, 10, -10, 12345, INT_MAX, INT_MIN, LLONG_MAX, LLONG_MIN};
    char a[32], b[32];
    for (size_t i = 0; i < sizeof vals / sizeof vals[0]; i++) {
        size_t n = ts_fmt_int64(a, vals[i]);
        snprintf(b, sizeof b, "%lld", vals[i]);
        assert_string_equal(a, b);
        assert_int_equal(n, strlen(b));
    }
    for (int i = 0; i < 100000; i++) {
        long long v = (long long)next_u64() >> (next_u64() % 63);
        ts_fmt_int64(a, v);
        snprintf(b, sizeof b, "%lld", v);
        assert_string_equal(a, b);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_random_bits),
        cmocka_unit_test(test_pixels_and_confidences),
        cmocka_unit_test(test_edges),
        cmocka_unit_test(test_int64),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
