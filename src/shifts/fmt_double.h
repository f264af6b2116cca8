/* Exact decimal formatting of doubles for the shifts writer: the same bytes
 * as the printf loop it replaces, without printf's multi-precision
 * arithmetic (printf and the strtod round-trip checks were most of the time
 * of writing a 167k-tile file). */
#ifndef TS_SHIFTS_FMT_DOUBLE_H
#define TS_SHIFTS_FMT_DOUBLE_H

#include <stddef.h>

/* Room for any result of ts_fmt_shortest_g (sign, 17 digits, '.', "e-308"). */
#define TS_FMT_DOUBLE_MAX 40

/* The shortest of snprintf "%.15g", "%.16g", "%.17g" of v that strtod reads
 * back as v (the 17-digit one when none does), into out (TS_FMT_DOUBLE_MAX
 * bytes, NUL-terminated); returns its length. Byte for byte what the printf
 * loop gives (round to nearest, ties to even, as glibc in the default
 * rounding mode), for every double: values outside the range handled with
 * 128-bit integer arithmetic (|v| in [1e-5, 1e15), about) go to that loop. */
size_t ts_fmt_shortest_g(char *out, double v);

/* The printf loop itself (the reference of the tests). */
size_t ts_fmt_shortest_g_printf(char *out, double v);

/* Decimal digits of an int64, into out (21 bytes at least, NUL-terminated);
 * returns the length. */
size_t ts_fmt_int64(char *out, long long v);

#endif
