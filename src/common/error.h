/* Error reporting inside the library: set a code and a formatted message that
 * names the file, key or value at fault. Never prints, never exits. */
#ifndef TS_COMMON_ERROR_H
#define TS_COMMON_ERROR_H

#include "tessera/tessera.h"

#if defined(__GNUC__)
#define TS_PRINTF(a, b) __attribute__((format(printf, a, b)))
#else
#define TS_PRINTF(a, b)
#endif

/* Sets err (if not NULL) and returns code, so callers can `return ts_fail(...)`. */
ts_status ts_fail(ts_error *err, ts_status code, const char *fmt, ...) TS_PRINTF(3, 4);

/* Prefixes the message already in err with context ("reading A/1/000000:
 * ...") and sets its code to `code` (the status the failed call returned, or
 * a more precise one). Returns code whether or not err is NULL, so callers
 * can `return ts_fail_context(err, st, ...)`. */
ts_status ts_fail_context(ts_error *err, ts_status code, const char *fmt, ...) TS_PRINTF(3, 4);

/* A byte count for a message: "1.5 GiB", "192 MiB". */
void ts_format_bytes(char *out, size_t n, size_t bytes);

static inline void ts_error_clear(ts_error *err) {
    if (err) { err->code = TS_OK; err->message[0] = '\0'; }
}

#endif
