/* See strbuf.h. */
#include "common/strbuf.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static bool reserve(ts_strbuf *b, size_t extra) {
    if (b->failed) return false;
    if (b->len + extra + 1 <= b->cap) return true;
    size_t ncap = b->cap ? b->cap : 1 << 16;
    while (ncap < b->len + extra + 1) ncap *= 2;
    char *nd = realloc(b->data, ncap);
    if (!nd) {
        b->failed = true;
        return false;
    }
    b->data = nd;
    b->cap = ncap;
    return true;
}

void ts_strbuf_put(ts_strbuf *b, const char *s, size_t n) {
    if (!reserve(b, n)) return;
    memcpy(b->data + b->len, s, n);
    b->len += n;
    b->data[b->len] = '\0';
}

void ts_strbuf_puts(ts_strbuf *b, const char *s) { ts_strbuf_put(b, s, strlen(s)); }

void ts_strbuf_printf(ts_strbuf *b, const char *fmt, ...) {
    if (!reserve(b, 256)) return;
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(b->data + b->len, b->cap - b->len, fmt, ap);
    va_end(ap);
    if (n < 0) {
        b->failed = true;
        return;
    }
    if ((size_t)n >= b->cap - b->len) {
        if (!reserve(b, (size_t)n)) return;
        va_start(ap, fmt);
        vsnprintf(b->data + b->len, b->cap - b->len, fmt, ap);
        va_end(ap);
    }
    b->len += (size_t)n;
}
