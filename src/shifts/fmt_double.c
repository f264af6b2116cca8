/* Exact decimal formatting of doubles (see fmt_double.h). For v = m 2^-s
 * with 1e-5 <= |v| < 1e15, the P-digit decimal of v is round(m 10^k / 2^s)
 * with k = P - 1 - X (X the decimal exponent): m < 2^53, 10^k <= 10^21 and
 * s <= 69, so every quantity, remainders included, is exact in 128 bits.
 * The round-trip test is exact too: the decimal reads back as v when it
 * lies inside v's rounding interval (half an ulp each side, a quarter below
 * a power of two, ties to the even mantissa as strtod does). */
#include "shifts/fmt_double.h"

#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef unsigned __int128 u128;

size_t ts_fmt_shortest_g_printf(char *out, double v) {
    for (int prec = 15; prec <= 17; prec++) {
        snprintf(out, TS_FMT_DOUBLE_MAX, "%.*g", prec, v);
        if (strtod(out, NULL) == v) break;
    }
    return strlen(out);
}

size_t ts_fmt_int64(char *out, long long v) {
    char tmp[24], *p = tmp + sizeof tmp;
    unsigned long long a = v < 0 ? 0ull - (unsigned long long)v : (unsigned long long)v;
    do *--p = (char)('0' + a % 10), a /= 10; while (a);
    if (v < 0) *--p = '-';
    size_t n = (size_t)(tmp + sizeof tmp - p);
    memcpy(out, p, n);
    out[n] = '\0';
    return n;
}

static u128 pow10_u128(int k) {
    u128 r = 1;
    for (int i = 0; i < k; i++) r *= 10;
    return r;
}

/* The decimal of v rounded to P significant digits: digits D (exactly P of
 * them), decimal exponent X (v ~ D 10^(X - P + 1)), and whether that decimal
 * reads back as v. m, s: v = m 2^-s, m the 53-bit mantissa. */
static void round_digits(uint64_t m, int s, int P, int X, uint64_t *D, int *Xout, bool *roundtrip) {
    const u128 lo = pow10_u128(P - 1), hi = lo * 10;
    for (;;) {
        int k = P - 1 - X;
        u128 ten_k = pow10_u128(k), N = (u128)m * ten_k;
        u128 d0 = N >> s, r = N - (d0 << s), half = (u128)1 << (s - 1);
        if (d0 >= hi) { /* the estimate of X was low (or high, below) */
            X++;
            continue;
        }
        if (d0 < lo) {
            X--;
            continue;
        }
        bool up = r > half || (r == half && (d0 & 1));
        /* |decimal - v| in units of 2^-s 10^-k, where half an ulp is 10^k / 2 */
        u128 diff = up ? ((u128)1 << s) - r : r;
        if (!up && m == (1ull << 52)) /* below a power of two the gap is half */
            *roundtrip = 4 * diff <= ten_k; /* a tie there goes to v (even) */
        else
            *roundtrip = 2 * diff < ten_k || (2 * diff == ten_k && !(m & 1));
        u128 d = d0 + up;
        if (d == hi) d = lo, X++; /* 9.99..95 -> 10.0..0: one more digit before the point */
        *D = (uint64_t)d;
        *Xout = X;
        return;
    }
}

/* %.Pg of the decimal D 10^(X - P + 1) (D has exactly P digits). */
static size_t put_g(char *out, bool neg, uint64_t D, int X, int P) {
    char dig[20];
    for (int i = P - 1; i >= 0; i--) dig[i] = (char)('0' + D % 10), D /= 10;
    int nd = P;
    while (nd > 1 && dig[nd - 1] == '0') nd--; /* %g drops trailing zeros */
    char *p = out;
    if (neg) *p++ = '-';
    if (X < -4 || X >= P) {
        *p++ = dig[0];
        if (nd > 1) {
            *p++ = '.';
            memcpy(p, dig + 1, (size_t)nd - 1);
            p += nd - 1;
        }
        int ax = X < 0 ? -X : X;
        *p++ = 'e';
        *p++ = X < 0 ? '-' : '+';
        if (ax >= 100) *p++ = (char)('0' + ax / 100);
        *p++ = (char)('0' + ax / 10 % 10);
        *p++ = (char)('0' + ax % 10);
    } else if (X >= 0) {
        memcpy(p, dig, (size_t)X + 1);
        p += X + 1;
        if (nd > X + 1) {
            *p++ = '.';
            memcpy(p, dig + X + 1, (size_t)(nd - X - 1));
            p += nd - X - 1;
        }
    } else {
        *p++ = '0';
        *p++ = '.';
        for (int i = 0; i < -X - 1; i++) *p++ = '0';
        memcpy(p, dig, (size_t)nd);
        p += nd;
    }
    *p = '\0';
    return (size_t)(p - out);
}

size_t ts_fmt_shortest_g(char *out, double v) {
    double a = fabs(v);
    if (!(a >= 1e-5 && a < 1e15)) return ts_fmt_shortest_g_printf(out, v); /* 0, NaN, huge, tiny */
    uint64_t bits;
    memcpy(&bits, &v, sizeof bits);
    int be = (int)((bits >> 52) & 0x7ff);
    uint64_t m = (bits & ((1ull << 52) - 1)) | (1ull << 52);
    int s = 1075 - be; /* v = m 2^-s; 1 <= s <= 69 in this range */
    int X = (int)floor(log10(a));
    if (X < -5) X = -5;
    if (X > 14) X = 14;
    uint64_t D = 0;
    int XD = X;
    for (int P = 15; P <= 17; P++) {
        bool rt;
        round_digits(m, s, P, X, &D, &XD, &rt);
        if (rt || P == 17) return put_g(out, v < 0, D, XD, P);
    }
    return 0; /* not reached */
}
