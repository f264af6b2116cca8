/* The byte-level guess of a split point of a shifts file (yaml_split.h). */
#include "shifts/yaml_split.h"

#include <string.h>

static const char ENTRY[] = "  - [";

static bool is_entry(const char *buf, size_t len, size_t p) {
    return len - p >= sizeof ENTRY - 1 && memcmp(buf + p, ENTRY, sizeof ENTRY - 1) == 0;
}

static bool key_char(char c) {
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '/' || c == '_' ||
           c == '.' || c == '-';
}

/* The start of the line before the one starting at p (p > 0). */
static size_t prev_line(const char *buf, size_t p) {
    size_t q = p - 1; /* buf[q] == '\n' */
    while (q > 0 && buf[q - 1] != '\n') q--;
    return q;
}

/* Line [p, e) (e at its '\n' or the end): "  KEY:" and trailing spaces,
 * KEY starting with a letter or digit. */
static bool is_key_line(const char *buf, size_t p, size_t e, const char **key, size_t *klen) {
    if (e - p < 4 || buf[p] != ' ' || buf[p + 1] != ' ') return false;
    size_t k = p + 2, q = k;
    if (!((buf[k] >= 'A' && buf[k] <= 'Z') || (buf[k] >= 'a' && buf[k] <= 'z') || (buf[k] >= '0' && buf[k] <= '9')))
        return false;
    while (q < e && key_char(buf[q])) q++;
    if (q == e || buf[q] != ':' || q - k > TS_YAML_SPLIT_MAX_WELL) return false;
    for (size_t t = q + 1; t < e; t++)
        if (buf[t] != ' ') return false;
    *key = buf + k;
    *klen = q - k;
    return true;
}

/* Lines that may lie between a well key and an entry of its list: other
 * entries, their continuations (deeper), blank and comment lines. */
static bool passable(const char *buf, size_t p, size_t e) {
    if (e - p >= 4 && memcmp(buf + p, "  - ", 4) == 0) return true;
    if (e - p >= 3 && memcmp(buf + p, "   ", 3) == 0) return true;
    size_t q = p;
    while (q < e && buf[q] == ' ') q++;
    return q == e || buf[q] == '#' || (buf[q] == '\r' && q + 1 == e);
}

/* Line [p, e) is "pairs:" (and trailing spaces). */
static bool is_pairs_line(const char *buf, size_t p, size_t e) {
    if (e - p < 6 || memcmp(buf + p, "pairs:", 6) != 0) return false;
    for (size_t t = p + 6; t < e; t++)
        if (buf[t] != ' ') return false;
    return true;
}

/* The well key above the entry at split, and `pairs:` above that (other
 * wells' keys and lists between). */
static bool well_above(const char *buf, size_t split, const char **well, size_t *well_len) {
    size_t p = split;
    bool found = false;
    while (p > 0) {
        size_t e = p - 1;
        p = prev_line(buf, p);
        const char *k;
        size_t kl;
        if (is_key_line(buf, p, e, &k, &kl)) {
            if (!found) *well = k, *well_len = kl;
            found = true;
        } else if (found && is_pairs_line(buf, p, e)) {
            return true;
        } else if (!passable(buf, p, e)) {
            return false;
        }
    }
    return false;
}

bool ts_yaml_find_split(const char *buf, size_t len, size_t target, size_t *split, const char **well,
                        size_t *well_len) {
    if (target > len) target = len;
    /* Forward: the first line start at or after target. */
    size_t p = target;
    if (p > 0 && buf[p - 1] != '\n') {
        const char *nl = memchr(buf + p, '\n', len - p);
        p = nl ? (size_t)(nl - buf) + 1 : len;
    }
    while (p < len) {
        if (is_entry(buf, len, p)) {
            if (p > 0 && well_above(buf, p, well, well_len)) {
                *split = p;
                return true;
            }
            break; /* the list this entry is in has no key above it that we trust */
        }
        const char *nl = memchr(buf + p, '\n', len - p);
        if (!nl) break;
        p = (size_t)(nl - buf) + 1;
    }
    /* Backward from target. */
    p = target;
    while (p > 0 && buf[p - 1] != '\n') p--;
    while (p > 0) {
        p = prev_line(buf, p);
        if (is_entry(buf, len, p)) {
            if (p > 0 && well_above(buf, p, well, well_len)) {
                *split = p;
                return true;
            }
            return false;
        }
    }
    return false;
}
