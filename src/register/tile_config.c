/* Fiji's TileConfiguration format, as the Grid/Collection plugin writes it:
 *
 *   # Define the number of dimensions we are working on
 *   dim = 2
 *
 *   # Define the image coordinates
 *   1.tif; ; (0.0, 0.0)
 *   2.tif; ; (297.0, -1.0)
 *
 * The middle field is the series of a multi-series file (empty otherwise);
 * coordinates are the tile's top-left corner in px, x first. */
#include "register/tile_config.h"

#include <ctype.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/error.h"
#include "common/fs.h"
#include "shifts/shifts.h"

/* A tile list of 10^6 lines is ~40 MB; more is not a tile list. */
#define TILE_CONFIG_MAX_BYTES ((uint64_t)256 << 20)

void ts_tile_config_free(ts_tile_config *tc) {
    if (!tc) return;
    free(tc->e);
    free(tc);
}

static char *trim(char *s) {
    while (*s && isspace((unsigned char)*s)) s++;
    char *e = s + strlen(s);
    while (e > s && isspace((unsigned char)e[-1])) *--e = '\0';
    return s;
}

/* "tiles/1.tif" -> "1": the base name up to its first '.' (position names
 * are alphanumeric, so nothing after a dot could match one). */
static void stem_of(const char *name, char *stem, size_t cap) {
    const char *b = name;
    for (const char *p = name; *p; p++)
        if (*p == '/' || *p == '\\') b = p + 1;
    size_t n = strcspn(b, ".");
    if (n >= cap) n = 0; /* too long to be a position name */
    memcpy(stem, b, n);
    stem[n] = '\0';
}

/* "(x, y)" -> x, y; false unless exactly two finite numbers, in range. */
static bool parse_coords(char *s, double *x, double *y) {
    size_t n = strlen(s);
    if (n < 2 || s[0] != '(' || s[n - 1] != ')') return false;
    s[n - 1] = '\0';
    char *p = s + 1, *end;
    double v[2];
    for (int i = 0; i < 2; i++) {
        v[i] = strtod(p, &end);
        if (end == p || !isfinite(v[i]) || fabs(v[i]) > TS_SHIFTS_MAX_PX) return false;
        p = end;
        while (isspace((unsigned char)*p)) p++;
        if (i == 0) {
            if (*p != ',') return false;
            p++;
        }
    }
    if (*trim(p)) return false;
    *x = v[0];
    *y = v[1];
    return true;
}

/* "dim = N": true with *dim set when the line is one. */
static bool parse_dim(const char *s, long *dim) {
    if (strncmp(s, "dim", 3) != 0) return false;
    s += 3;
    while (isspace((unsigned char)*s)) s++;
    if (*s++ != '=') return false;
    char *end;
    *dim = strtol(s, &end, 10);
    if (end == s) return false;
    while (isspace((unsigned char)*end)) end++;
    return *end == '\0';
}

static ts_status parse(const char *path, char *text, ts_tile_config *tc, ts_error *err) {
    int cap = 0, lineno = 0;
    bool have_dim = false;
    /* A byte-order mark (a file saved by a Windows editor) made the first
     * line, Fiji's "# Define ..." comment, a malformed tile line. */
    char *next = strncmp(text, "\xef\xbb\xbf", 3) == 0 ? text + 3 : text;
    while (next) {
        char *line = next;
        next = strchr(line, '\n');
        if (next) *next++ = '\0';
        lineno++;
        char *s = trim(line);
        if (!*s || *s == '#') continue;
        long dim;
        if (parse_dim(s, &dim)) {
            if (dim != 2)
                return ts_fail(err, TS_ERR_UNSUPPORTED, "%s:%d: 'dim = %ld': tessera places 2-D tiles (dim = 2)",
                               path, lineno, dim);
            have_dim = true;
            continue;
        }
        char *semi1 = strchr(s, ';'), *semi2 = semi1 ? strchr(semi1 + 1, ';') : NULL;
        if (!semi2)
            return ts_fail(err, TS_ERR_FORMAT, "%s:%d: '%.60s' is not 'name; series; (x, y)', 'dim = 2' or a "
                           "# comment (a Fiji TileConfiguration)", path, lineno, s);
        if (!have_dim)
            return ts_fail(err, TS_ERR_FORMAT, "%s:%d: tile coordinates before the 'dim = 2' line", path, lineno);
        *semi1 = *semi2 = '\0';
        char *name = trim(s), *coords = trim(semi2 + 1);
        if (!*name) return ts_fail(err, TS_ERR_FORMAT, "%s:%d: no image name before the ';'", path, lineno);
        ts_tile_config_entry e = {.line = lineno};
        char shown[64];
        snprintf(shown, sizeof shown, "%s", coords); /* parse_coords cuts it */
        if (!parse_coords(coords, &e.x, &e.y))
            return ts_fail(err, TS_ERR_FORMAT, "%s:%d: coordinates '%s' of %.60s are not '(x, y)', two finite "
                           "numbers of px within %.0f", path, lineno, shown, name, TS_SHIFTS_MAX_PX);
        snprintf(e.name, sizeof e.name, "%s", name);
        stem_of(name, e.stem, sizeof e.stem);
        if (tc->n == cap) {
            int ncap = cap ? 2 * cap : 64;
            ts_tile_config_entry *ne = realloc(tc->e, (size_t)ncap * sizeof *ne);
            if (!ne) return ts_fail(err, TS_ERR_NOMEM, "%s: out of memory for %d tiles", path, ncap);
            tc->e = ne;
            cap = ncap;
        }
        tc->e[tc->n++] = e;
    }
    if (tc->n == 0)
        return ts_fail(err, TS_ERR_FORMAT, "%s: no tile coordinates ('name; series; (x, y)' lines): not a Fiji "
                       "TileConfiguration", path);
    return TS_OK;
}

ts_status ts_tile_config_read(const char *path, ts_tile_config **out, ts_error *err) {
    *out = NULL;
    void *data = NULL;
    size_t size = 0;
    bool found = false;
    ts_status st = ts_read_file_max(path, TILE_CONFIG_MAX_BYTES, &data, &size, &found, err);
    if (st != TS_OK) return ts_fail_context(err, st, "reading the positions file");
    if (!found) return ts_fail(err, TS_ERR_IO, "positions file %s does not exist", path);
    if (memchr(data, '\0', size)) {
        free(data);
        return ts_fail(err, TS_ERR_FORMAT, "%s: a binary file, not a Fiji TileConfiguration", path);
    }
    ts_tile_config *tc = calloc(1, sizeof *tc);
    if (!tc) {
        free(data);
        return ts_fail(err, TS_ERR_NOMEM, "out of memory");
    }
    st = parse(path, data, tc, err);
    free(data);
    if (st != TS_OK) {
        ts_tile_config_free(tc);
        return st;
    }
    *out = tc;
    return TS_OK;
}
