#include "common/error.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

ts_status ts_fail(ts_error *err, ts_status code, const char *fmt, ...) {
    if (err) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err->message, sizeof err->message, fmt, ap);
        va_end(ap);
        err->code = code;
    }
    return code;
}

ts_status ts_fail_context(ts_error *err, ts_status code, const char *fmt, ...) {
    if (!err) return code;
    char prefix[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(prefix, sizeof prefix, fmt, ap);
    va_end(ap);
    char old[sizeof err->message];
    memcpy(old, err->message, sizeof old);
    /* Truncation is acceptable: the start of the message says where. */
    size_t np = strlen(prefix);
    if (np + 2 >= sizeof err->message) np = sizeof err->message - 3;
    memcpy(err->message, prefix, np);
    memcpy(err->message + np, ": ", 2);
    size_t room = sizeof err->message - np - 3;
    size_t no = strnlen(old, room);
    memcpy(err->message + np + 2, old, no);
    err->message[np + 2 + no] = '\0';
    err->code = code;
    return code;
}

const char *ts_status_name(ts_status code) {
    switch (code) {
    case TS_OK: return "ok";
    case TS_ERR_ARG: return "bad argument";
    case TS_ERR_IO: return "I/O error";
    case TS_ERR_FORMAT: return "format error";
    case TS_ERR_UNSUPPORTED: return "unsupported";
    case TS_ERR_CORRUPT: return "corrupt data";
    case TS_ERR_CODEC: return "codec error";
    case TS_ERR_NOMEM: return "out of memory";
    case TS_ERR_NUMERIC: return "numeric error";
    case TS_ERR_INTERNAL: return "internal error";
    case TS_ERR_BUSY: return "output in use";
    }
    return "unknown error";
}

const char *ts_version(void) { return TESSERA_VERSION; }

void ts_format_bytes(char *out, size_t n, size_t bytes) {
    if (bytes >= ((size_t)1 << 30)) snprintf(out, n, "%.1f GiB", (double)bytes / (double)((size_t)1 << 30));
    else snprintf(out, n, "%.0f MiB", (double)bytes / (double)((size_t)1 << 20));
}
