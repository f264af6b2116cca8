/* A growing text buffer for documents written in one piece (the shifts
 * YAML, the QC report): appends never fail one by one; a failed allocation
 * sets `failed` and later appends do nothing, so a writer checks once at
 * the end. */
#ifndef TS_COMMON_STRBUF_H
#define TS_COMMON_STRBUF_H

#include <stdbool.h>
#include <stddef.h>

#include "common/error.h"

typedef struct ts_strbuf {
    char *data;    /* NUL-terminated while not failed; free() it */
    size_t len, cap;
    bool failed;
} ts_strbuf;

void ts_strbuf_put(ts_strbuf *b, const char *s, size_t n);
void ts_strbuf_puts(ts_strbuf *b, const char *s);
void ts_strbuf_printf(ts_strbuf *b, const char *fmt, ...) TS_PRINTF(2, 3);

#endif
