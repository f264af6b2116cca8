/* Reading the shifts YAML with libyaml's event parser: no document tree is
 * built, each scalar goes straight into the model, so a 167k-tile file loads
 * in about a second. Keys may come in any order (PyYAML sorts them), so
 * everything that refers to pair indices (outliers, residuals) is applied at
 * the end, and the tile order of the `tiles` key, when present, is restored
 * at the end too. */
#include "shifts/shifts.h"
#include "shifts/shifts_internal.h"
#include "shifts/yaml_guard.h"
#include "common/name_index.h"
#include "common/error.h"
#include "common/fs.h"
#include "common/pool.h"
#include "shifts/yaml_split.h"

#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>
#include <yaml.h>

/* Values read for one well that refer to pair indices, applied at the end. */
typedef struct pending {
    int *outliers;
    int noutliers, outlier_cap;
    double (*residuals)[2];
    int nresiduals, residual_cap;
    bool has_residuals;
    int *order; /* tile indices in the order of the `tiles` key */
    int norder, order_cap;
    bool has_order;
} pending;

/* Keys of one mapping, as read (the split read checks that the two parts
 * share no key of a mapping the split cuts through). */
typedef struct keylist {
    char **key;
    size_t *len;
    int n, cap;
} keylist;

/* What a part of a split read records (see read_split). */
typedef struct part_info {
    bool track;          /* record the below */
    keylist top, pairs;  /* top-level keys; well keys of `pairs` */
    bool tags;           /* the document has %TAG directives */
    bool layout_ok;      /* block mappings, `pairs` at column 1 */
    /* The last well list of `pairs`: well, columns, where it ended. */
    int last_well;
    bool last_block;     /* the well key plain at column 3, its block list at column 3 */
    yaml_mark_t last_end;
    bool have_last;
    yaml_mark_t stream_end;
    bool have_end;
} part_info;

typedef struct reader {
    yaml_parser_t parser;
    bool parser_ready;
    yaml_event_t ev; /* the current event */
    bool have_event;
    ts_yaml_guard guard; /* depth cap and repeated keys, on every event */
    const char *path;
    ts_error *err;
    ts_shifts *s;
    pending *pend; /* per well, grown with s->wells */
    bool pairs_read; /* a pairs section came before (confidence is derived from it) */
    int pend_cap;
    /* Context of the value being read in the hot loops, formatted only when
     * an error needs it (ctx == NULL in the readers below). */
    const char *c_section;
    const char *c_key; /* total_translation / positions key */
    int c_well, c_index, c_ta, c_tb; /* pairs: well, pair index, tiles (-1 = unknown) */
    char c_buf[256];
    part_info part;
} reader;

static bool keylist_add(keylist *k, const char *s, size_t len) {
    if (k->n >= k->cap) {
        int ncap = k->cap ? 2 * k->cap : 16;
        char **nk = realloc(k->key, (size_t)ncap * sizeof *nk);
        if (!nk) return false;
        k->key = nk;
        size_t *nl = realloc(k->len, (size_t)ncap * sizeof *nl);
        if (!nl) return false;
        k->len = nl;
        k->cap = ncap;
    }
    char *c = malloc(len + 1);
    if (!c) return false;
    memcpy(c, s, len);
    c[len] = '\0';
    k->key[k->n] = c;
    k->len[k->n++] = len;
    return true;
}

static void keylist_free(keylist *k) {
    for (int i = 0; i < k->n; i++) free(k->key[i]);
    free(k->key);
    free(k->len);
    memset(k, 0, sizeof *k);
}

static const char *lazy_ctx(reader *r, const char *ctx) {
    if (ctx) return ctx;
    if (r->c_key) {
        snprintf(r->c_buf, sizeof r->c_buf, "%s %s", r->c_section, r->c_key);
    } else {
        const ts_well_shifts *w = &r->s->wells[r->c_well];
        int n = snprintf(r->c_buf, sizeof r->c_buf, "%s %s [%d]", r->c_section, w->well, r->c_index);
        if (r->c_ta >= 0 && r->c_tb >= 0 && n > 0 && (size_t)n < sizeof r->c_buf)
            snprintf(r->c_buf + n, sizeof r->c_buf - (size_t)n, " (%s -> %s)", w->tiles[r->c_ta], w->tiles[r->c_tb]);
    }
    return r->c_buf;
}

static ts_status fail_at(reader *r, const char *fmt, ...) TS_PRINTF(2, 3);
static ts_status fail_at(reader *r, const char *fmt, ...) {
    char msg[700];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    unsigned long line = 0, col = 0;
    if (r->have_event) {
        line = (unsigned long)r->ev.start_mark.line + 1;
        col = (unsigned long)r->ev.start_mark.column + 1;
    }
    return ts_fail(r->err, TS_ERR_FORMAT, "%s:%lu:%lu: %s", r->path, line, col, msg);
}

/* Moves to the next event. */
static ts_status next(reader *r) {
    if (r->have_event) yaml_event_delete(&r->ev);
    r->have_event = false;
    if (!yaml_parser_parse(&r->parser, &r->ev)) {
        const yaml_mark_t *m = &r->parser.problem_mark;
        return ts_fail(r->err, TS_ERR_FORMAT, "%s:%lu:%lu: malformed YAML: %s%s%s", r->path,
                       (unsigned long)m->line + 1, (unsigned long)m->column + 1,
                       r->parser.problem ? r->parser.problem : "syntax error",
                       r->parser.context ? " " : "", r->parser.context ? r->parser.context : "");
    }
    r->have_event = true;
    if (r->ev.type == YAML_ALIAS_EVENT) return fail_at(r, "YAML aliases are not supported in a shifts file");
    char msg[200];
    ts_yaml_guard_result g = ts_yaml_guard_event(&r->guard, &r->ev, msg, sizeof msg);
    if (g == TS_YAML_GUARD_BAD) return fail_at(r, "%s", msg);
    if (g == TS_YAML_GUARD_NOMEM) return ts_fail(r->err, TS_ERR_NOMEM, "%s: out of memory", r->path);
    return TS_OK;
}

static bool is(const reader *r, yaml_event_type_t t) { return r->ev.type == t; }

static const char *scalar(const reader *r) { return (const char *)r->ev.data.scalar.value; }

static bool scalar_is_null(const reader *r) {
    if (!is(r, YAML_SCALAR_EVENT) || r->ev.data.scalar.style != YAML_PLAIN_SCALAR_STYLE) return false;
    const char *v = scalar(r);
    return v[0] == '\0' || strcmp(v, "~") == 0 || strcmp(v, "null") == 0 || strcmp(v, "Null") == 0 ||
           strcmp(v, "NULL") == 0;
}

static ts_status expect(reader *r, yaml_event_type_t t, const char *what, const char *ctx) {
    if (!is(r, t)) return fail_at(r, "%s: expected %s", ctx, what);
    return next(r);
}

/* Skips the node starting at the current event. */
static ts_status skip_node(reader *r) {
    int depth = 0;
    do {
        if (is(r, YAML_SEQUENCE_START_EVENT) || is(r, YAML_MAPPING_START_EVENT)) depth++;
        else if (is(r, YAML_SEQUENCE_END_EVENT) || is(r, YAML_MAPPING_END_EVENT)) depth--;
        else if (is(r, YAML_STREAM_END_EVENT) || is(r, YAML_DOCUMENT_END_EVENT))
            return fail_at(r, "unexpected end of document");
        ts_status st = next(r);
        if (st) return st;
    } while (depth > 0);
    return TS_OK;
}

/* Reads a finite number from the current scalar; ctx names the key. */
static ts_status read_number(reader *r, const char *ctx, double *out) {
    if (!is(r, YAML_SCALAR_EVENT) || r->ev.data.scalar.length == 0 || r->ev.data.scalar.length > 60) ctx = lazy_ctx(r, ctx);
    if (!is(r, YAML_SCALAR_EVENT)) return fail_at(r, "%s: expected a number", ctx);
    const char *v = scalar(r);
    char *end;
    errno = 0;
    double d = strtod(v, &end);
    if (end == v || *end != '\0' || !isfinite(d)) ctx = lazy_ctx(r, ctx);
    if (end == v || *end != '\0') {
        const char *p = v + (*v == '-' || *v == '+');
        if (strcasecmp(p, ".nan") == 0) return fail_at(r, "%s: value is NaN", ctx);
        if (strcasecmp(p, ".inf") == 0) return fail_at(r, "%s: value is infinite", ctx);
        return fail_at(r, "%s: '%.40s' is not a number", ctx, v);
    }
    if (isnan(d)) return fail_at(r, "%s: value is NaN", ctx);
    if (!isfinite(d)) return fail_at(r, "%s: value '%.40s' is not finite", ctx, v);
    *out = d;
    return next(r);
}

static ts_status read_int(reader *r, const char *ctx, long lo, long hi, int *out) {
    double d = 0; /* set by read_number on success (gcc -O3 cannot tell) */
    /* The value's place, for the message: read_number moves past it. */
    unsigned long line = r->have_event ? (unsigned long)r->ev.start_mark.line + 1 : 0;
    unsigned long col = r->have_event ? (unsigned long)r->ev.start_mark.column + 1 : 0;
    ts_status st = read_number(r, ctx, &d);
    if (st) return st;
    if (d != floor(d) || d < (double)lo || d > (double)hi)
        return ts_fail(r->err, TS_ERR_FORMAT, "%s:%lu:%lu: %s: %g is not an integer in [%ld, %ld]", r->path, line,
                       col, ctx, d, lo, hi);
    *out = (int)d;
    return TS_OK;
}

/* A coordinate or shift in px: finite and within TS_SHIFTS_MAX_PX (1e300
 * passed the number check and reached the solve as "the tile system is
 * singular"). The message gives the value's own line and column. */
static ts_status read_px(reader *r, const char *ctx, const char *what, double *out) {
    unsigned long line = r->have_event ? (unsigned long)r->ev.start_mark.line + 1 : 0;
    unsigned long col = r->have_event ? (unsigned long)r->ev.start_mark.column + 1 : 0;
    ts_status st = read_number(r, ctx, out);
    if (st) return st;
    if (fabs(*out) > TS_SHIFTS_MAX_PX)
        return ts_fail(r->err, TS_ERR_FORMAT, "%s:%lu:%lu: %s: %s %g px is absurd (beyond %.0f px)", r->path, line,
                       col, lazy_ctx(r, ctx), what, *out, TS_SHIFTS_MAX_PX);
    return TS_OK;
}

static ts_status read_bool(reader *r, const char *ctx, bool *out) {
    if (!is(r, YAML_SCALAR_EVENT)) return fail_at(r, "%s: expected true or false", ctx);
    const char *v = scalar(r);
    if (!strcasecmp(v, "true") || !strcasecmp(v, "yes") || !strcasecmp(v, "on") || !strcmp(v, "1")) *out = true;
    else if (!strcasecmp(v, "false") || !strcasecmp(v, "no") || !strcasecmp(v, "off") || !strcmp(v, "0")) *out = false;
    else return fail_at(r, "%s: '%.40s' is not true or false", ctx, v);
    return next(r);
}

/* [a, b] */
static ts_status read_vec2(reader *r, const char *ctx, double out[2]) {
    if (!is(r, YAML_SEQUENCE_START_EVENT)) return fail_at(r, "%s: expected a list [y, x]", lazy_ctx(r, ctx));
    ts_status st = next(r);
    for (int i = 0; !st && i < 2; i++) {
        if (is(r, YAML_SEQUENCE_END_EVENT)) return fail_at(r, "%s: expected 2 numbers", lazy_ctx(r, ctx));
        st = read_px(r, ctx, i ? "x" : "y", &out[i]);
    }
    if (st) return st;
    if (!is(r, YAML_SEQUENCE_END_EVENT)) return fail_at(r, "%s: expected 2 numbers, got more", lazy_ctx(r, ctx));
    return next(r);
}

/* A tile translation: [y, x], or [z, y, x] as biahub's StitchSettings
 * writes it (a leading z, which a 2-D mosaic can only take when it is 0). */
static ts_status read_yx(reader *r, const char *ctx, double out[2]) {
    if (!is(r, YAML_SEQUENCE_START_EVENT)) return fail_at(r, "%s: expected a list [y, x]", lazy_ctx(r, ctx));
    ts_status st = next(r);
    double v[3] = {0, 0, 0};
    int k = 0;
    while (!st && !is(r, YAML_SEQUENCE_END_EVENT)) {
        if (k == 3) return fail_at(r, "%s: expected [y, x] or [z, y, x], got more numbers", lazy_ctx(r, ctx));
        st = read_px(r, ctx, "coordinate", &v[k++]);
    }
    if (st) return st;
    if (k < 2) return fail_at(r, "%s: expected [y, x] or [z, y, x], got %d number%s", lazy_ctx(r, ctx), k, k == 1 ? "" : "s");
    if (k == 3 && v[0] != 0)
        return fail_at(r, "%s: z translation %g is not 0 (a 2-D mosaic cannot place it)", lazy_ctx(r, ctx), v[0]);
    out[0] = v[k - 2];
    out[1] = v[k - 1];
    return next(r);
}

static pending *pend_for(reader *r, int w) {
    if (w >= r->pend_cap) {
        int ncap = r->pend_cap ? r->pend_cap * 2 : 8;
        while (ncap <= w) ncap *= 2;
        pending *np = realloc(r->pend, (size_t)ncap * sizeof *np);
        if (!np) return NULL;
        memset(np + r->pend_cap, 0, (size_t)(ncap - r->pend_cap) * sizeof *np);
        r->pend = np;
        r->pend_cap = ncap;
    }
    return &r->pend[w];
}

static int add_well(reader *r, const char *name, size_t len) {
    char well[64];
    if (len == 0 || len >= sizeof r->s->wells[0].well) return -1;
    memcpy(well, name, len);
    well[len] = '\0';
    int w = ts_shifts_add_well(r->s, well);
    if (w >= 0 && !pend_for(r, w)) return -1;
    return w;
}

/* The WELL key of a per-well section (confidence, tiles, pairs, outliers,
 * residuals): finds or adds the well and moves to its value. *empty: the
 * value was null (already skipped). */
static ts_status well_key(reader *r, const char *section, int *w, bool *empty) {
    if (!is(r, YAML_SCALAR_EVENT)) return fail_at(r, "%s: expected a well name", section);
    *w = add_well(r, scalar(r), strlen(scalar(r)));
    if (*w < 0) return fail_at(r, "%s: bad well name '%.40s'", section, scalar(r));
    ts_status st = next(r);
    if (st) return st;
    *empty = scalar_is_null(r);
    return *empty ? next(r) : TS_OK;
}

/* A tile key "A/1/000000": well and tile split at the last '/'. With
 * well_hint >= 0 a bare tile name is accepted and the well must match. */
static ts_status tile_key(reader *r, const char *key, int well_hint, const char *ctx, int *w_out, int *t_out) {
    const char *slash = strrchr(key, '/');
    int w = well_hint;
    const char *tile = key;
    if (slash) {
        size_t wl = (size_t)(slash - key);
        if (well_hint >= 0) {
            const char *hint = r->s->wells[well_hint].well;
            if (strlen(hint) != wl || strncmp(hint, key, wl) != 0)
                return fail_at(r, "%s: tile '%.80s' is not in well %s", lazy_ctx(r, ctx), key, hint);
        } else {
            /* Keys of one well come together: try the last well first. */
            w = -1;
            if (r->s->nwells > 0) {
                const char *last = r->s->wells[r->s->nwells - 1].well;
                if (strlen(last) == wl && strncmp(last, key, wl) == 0) w = r->s->nwells - 1;
            }
            if (w < 0) w = add_well(r, key, wl);
            if (w < 0) return fail_at(r, "%s: bad well name in '%.80s'", lazy_ctx(r, ctx), key);
        }
        tile = slash + 1;
    } else if (well_hint < 0) {
        return fail_at(r, "%s: key '%.80s' is not WELL/POSITION (e.g. A/1/000000)", lazy_ctx(r, ctx), key);
    }
    int t = ts_shifts_add_tile_n(r->s, w, tile, strlen(tile));
    if (t < 0) return fail_at(r, "%s: bad position name '%.80s'", lazy_ctx(r, ctx), key);
    *w_out = w;
    *t_out = t;
    return TS_OK;
}

/* total_translation / positions: KEY: [y, x] */
static ts_status read_tile_vectors(reader *r, const char *section, bool origins) {
    if (scalar_is_null(r)) return next(r);
    ts_status st = expect(r, YAML_MAPPING_START_EVENT, "a mapping WELL/POSITION: [y, x]", section);
    while (!st && !is(r, YAML_MAPPING_END_EVENT)) {
        if (!is(r, YAML_SCALAR_EVENT)) return fail_at(r, "%s: expected a WELL/POSITION key", section);
        char key[128];
        size_t kl = r->ev.data.scalar.length;
        if (kl >= sizeof key) return fail_at(r, "%s: key '%.60s...' too long", section, scalar(r));
        memcpy(key, scalar(r), kl + 1);
        r->c_section = section;
        r->c_key = key;
        int w, t;
        if ((st = tile_key(r, key, -1, section, &w, &t)) || (st = next(r))) return st;
        double v[2] = {0, 0};
        if ((st = read_yx(r, NULL, v))) return st;
        ts_well_shifts *ws = &r->s->wells[w];
        if (origins) {
            ws->origin[t][0] = llround(v[0]);
            ws->origin[t][1] = llround(v[1]);
            ws->has_origin[t] = true;
        } else {
            if (!ts_shifts_ensure_positions(r->s, w)) return ts_fail(r->err, TS_ERR_NOMEM, "%s: out of memory", r->path);
            ws->position[t][0] = v[0];
            ws->position[t][1] = v[1];
        }
    }
    r->c_key = NULL;
    return st ? st : next(r);
}

/* A grid reference in a confidence entry: [x, y], or a position name. */
static ts_status read_grid_ref(reader *r, const char *ctx, int *x, int *y) {
    if (is(r, YAML_SCALAR_EVENT)) {
        const char *name = strrchr(scalar(r), '/');
        name = name ? name + 1 : scalar(r);
        if (!ts_position_grid(name, r->s->names_yx, x, y))
            return fail_at(r, "%s: '%.40s' is not a grid position", ctx, scalar(r));
        return next(r);
    }
    /* Grid coordinates are 3-digit name fields: an integer in [0, 999]
     * (anything else would not name a tile, and casting a huge value to int
     * is undefined). */
    if (!is(r, YAML_SEQUENCE_START_EVENT)) return fail_at(r, "%s: expected [x, y]", ctx);
    ts_status st = next(r);
    int *out[2] = {x, y};
    for (int i = 0; !st && i < 2; i++) {
        if (is(r, YAML_SEQUENCE_END_EVENT)) return fail_at(r, "%s: expected [x, y]", ctx);
        st = read_int(r, ctx, 0, 999, out[i]);
    }
    if (st) return st;
    if (!is(r, YAML_SEQUENCE_END_EVENT)) return fail_at(r, "%s: expected [x, y], got more", ctx);
    return next(r);
}

/* confidence: WELL: {ID: [[xa, ya], [xb, yb], c]} */
static ts_status read_confidence(reader *r) {
    if (scalar_is_null(r)) return next(r);
    ts_status st = expect(r, YAML_MAPPING_START_EVENT, "a mapping WELL: {id: [...]}", "confidence");
    while (!st && !is(r, YAML_MAPPING_END_EVENT)) {
        int w;
        bool empty;
        if ((st = well_key(r, "confidence", &w, &empty))) return st;
        if (empty) continue;
        if ((st = expect(r, YAML_MAPPING_START_EVENT, "a mapping id: [[xa, ya], [xb, yb], c]", "confidence")))
            return st;
        while (!is(r, YAML_MAPPING_END_EVENT)) {
            char ctx[160];
            snprintf(ctx, sizeof ctx, "confidence %s '%.40s'", r->s->wells[w].well,
                     is(r, YAML_SCALAR_EVENT) ? scalar(r) : "?");
            if ((st = next(r))) return st;
            int xa, ya, xb, yb;
            double c;
            if ((st = expect(r, YAML_SEQUENCE_START_EVENT, "[[xa, ya], [xb, yb], c]", ctx)) ||
                (st = read_grid_ref(r, ctx, &xa, &ya)) || (st = read_grid_ref(r, ctx, &xb, &yb)) ||
                (st = read_number(r, ctx, &c)))
                return st;
            if (!is(r, YAML_SEQUENCE_END_EVENT)) return fail_at(r, "%s: expected [[xa, ya], [xb, yb], c]", ctx);
            if ((st = next(r))) return st;
            if (ts_shifts_add_edge(r->s, w, xa, ya, xb, yb, c) < 0)
                return ts_fail(r->err, TS_ERR_NOMEM, "%s: out of memory", r->path);
        }
        st = next(r);
    }
    return st ? st : next(r);
}

/* tiles: WELL: [name, ...] */
static ts_status read_tiles(reader *r) {
    if (scalar_is_null(r)) return next(r);
    ts_status st = expect(r, YAML_MAPPING_START_EVENT, "a mapping WELL: [positions]", "tiles");
    while (!st && !is(r, YAML_MAPPING_END_EVENT)) {
        int w;
        bool empty;
        if ((st = well_key(r, "tiles", &w, &empty))) return st;
        pending *pd = &r->pend[w];
        pd->has_order = true;
        if (empty) continue;
        char ctx[64];
        snprintf(ctx, sizeof ctx, "tiles %s", r->s->wells[w].well);
        if ((st = expect(r, YAML_SEQUENCE_START_EVENT, "a list of position names", ctx))) return st;
        while (!is(r, YAML_SEQUENCE_END_EVENT)) {
            if (!is(r, YAML_SCALAR_EVENT)) return fail_at(r, "%s: expected a position name", ctx);
            int t = ts_shifts_add_tile_n(r->s, w, scalar(r), strlen(scalar(r)));
            if (t < 0) return fail_at(r, "%s: bad position name '%.40s'", ctx, scalar(r));
            if (pd->norder >= pd->order_cap) {
                int ncap = pd->order_cap ? pd->order_cap * 2 : 64;
                int *no = realloc(pd->order, (size_t)ncap * sizeof *no);
                if (!no) return ts_fail(r->err, TS_ERR_NOMEM, "%s: out of memory", r->path);
                pd->order = no;
                pd->order_cap = ncap;
            }
            pd->order[pd->norder++] = t;
            if ((st = next(r))) return st;
        }
        st = next(r);
    }
    return st ? st : next(r);
}

/* pairs: WELL: [[a, b, dy, dx, c], ...] */
static ts_status read_pairs(reader *r) {
    if (scalar_is_null(r)) return next(r);
    part_info *pi = &r->part;
    if (pi->track && !(is(r, YAML_MAPPING_START_EVENT) && r->ev.data.mapping_start.style == YAML_BLOCK_MAPPING_STYLE))
        pi->layout_ok = false;
    ts_status st = expect(r, YAML_MAPPING_START_EVENT, "a mapping WELL: [[a, b, dy, dx, c], ...]", "pairs");
    while (!st && !is(r, YAML_MAPPING_END_EVENT)) {
        int w;
        bool empty;
        bool key_ok = is(r, YAML_SCALAR_EVENT) && r->ev.start_mark.column == 2 &&
                      r->ev.data.scalar.style == YAML_PLAIN_SCALAR_STYLE;
        if (pi->track && is(r, YAML_SCALAR_EVENT) && !keylist_add(&pi->pairs, scalar(r), r->ev.data.scalar.length))
            return ts_fail(r->err, TS_ERR_NOMEM, "%s: out of memory", r->path);
        pi->have_last = false;
        if ((st = well_key(r, "pairs", &w, &empty))) return st;
        if (empty) continue;
        char ctx[200];
        snprintf(ctx, sizeof ctx, "pairs %s", r->s->wells[w].well);
        /* An indentless block list: it starts at its first "- ", column 3. */
        bool list_ok = key_ok && is(r, YAML_SEQUENCE_START_EVENT) && r->ev.start_mark.column == 2 &&
                       r->ev.data.sequence_start.style == YAML_BLOCK_SEQUENCE_STYLE;
        if ((st = expect(r, YAML_SEQUENCE_START_EVENT, "a list of [a, b, dy, dx, c]", ctx))) return st;
        int index = 0;
        r->c_section = "pairs";
        r->c_key = NULL;
        r->c_well = w;
        while (!is(r, YAML_SEQUENCE_END_EVENT)) {
            r->c_index = index;
            r->c_ta = r->c_tb = -1;
            if (!is(r, YAML_SEQUENCE_START_EVENT)) return fail_at(r, "%s: expected [a, b, dy, dx, c]", lazy_ctx(r, NULL));
            if ((st = next(r))) return st;
            int t[2], wt;
            for (int k = 0; k < 2; k++) {
                if (!is(r, YAML_SCALAR_EVENT)) return fail_at(r, "%s: expected a tile name", lazy_ctx(r, NULL));
                char key[128];
                size_t kl = r->ev.data.scalar.length;
                if (kl >= sizeof key) return fail_at(r, "%s: tile name too long", lazy_ctx(r, NULL));
                memcpy(key, scalar(r), kl + 1);
                if ((st = tile_key(r, key, w, NULL, &wt, &t[k])) || (st = next(r))) return st;
            }
            r->c_ta = t[0];
            r->c_tb = t[1];
            if (t[0] == t[1]) return fail_at(r, "%s: a pair joins a tile to itself", lazy_ctx(r, NULL));
            double dy, dx, c = 1.0;
            if ((st = read_px(r, NULL, "dy", &dy)) || (st = read_px(r, NULL, "dx", &dx))) return st;
            if (!is(r, YAML_SEQUENCE_END_EVENT)) {
                /* The solve weights a pair by its confidence: outside [0, 1]
                 * a weight could be negative (an indefinite system). */
                unsigned long line = (unsigned long)r->ev.start_mark.line + 1;
                unsigned long col = (unsigned long)r->ev.start_mark.column + 1;
                if ((st = read_number(r, NULL, &c))) return st;
                if (!(c >= 0 && c <= 1))
                    return ts_fail(r->err, TS_ERR_FORMAT, "%s:%lu:%lu: %s: confidence %g is not in [0, 1]", r->path,
                                   line, col, lazy_ctx(r, NULL), c);
            }
            if (!is(r, YAML_SEQUENCE_END_EVENT))
                return fail_at(r, "%s: expected [a, b, dy, dx, c]", lazy_ctx(r, NULL));
            if ((st = next(r))) return st;
            if (ts_shifts_add_pair(r->s, w, t[0], t[1], dy, dx, c) < 0)
                return ts_fail(r->err, TS_ERR_NOMEM, "%s: out of memory", r->path);
            index++;
        }
        pi->last_well = w;
        pi->last_block = list_ok;
        pi->last_end = r->ev.start_mark;
        pi->have_last = true;
        st = next(r);
    }
    return st ? st : next(r);
}

/* outliers: WELL: [i, ...]   residuals: WELL: [[ry, rx] | null, ...] */
static ts_status read_per_pair(reader *r, const char *section, bool residuals) {
    if (scalar_is_null(r)) return next(r);
    ts_status st = expect(r, YAML_MAPPING_START_EVENT, "a mapping WELL: [...]", section);
    while (!st && !is(r, YAML_MAPPING_END_EVENT)) {
        int w;
        bool empty;
        if ((st = well_key(r, section, &w, &empty))) return st;
        if (empty) continue;
        pending *pd = &r->pend[w];
        char ctx[64];
        snprintf(ctx, sizeof ctx, "%s %s", section, r->s->wells[w].well);
        if ((st = expect(r, YAML_SEQUENCE_START_EVENT, "a list", ctx))) return st;
        pd->has_residuals |= residuals;
        while (!is(r, YAML_SEQUENCE_END_EVENT)) {
            if (residuals) {
                double v[2] = {NAN, NAN};
                if (scalar_is_null(r)) st = next(r);
                else st = read_vec2(r, ctx, v);
                if (st) return st;
                if (pd->nresiduals >= pd->residual_cap) {
                    int ncap = pd->residual_cap ? pd->residual_cap * 2 : 64;
                    void *np = realloc(pd->residuals, (size_t)ncap * sizeof *pd->residuals);
                    if (!np) return ts_fail(r->err, TS_ERR_NOMEM, "%s: out of memory", r->path);
                    pd->residuals = np;
                    pd->residual_cap = ncap;
                }
                pd->residuals[pd->nresiduals][0] = v[0];
                pd->residuals[pd->nresiduals][1] = v[1];
                pd->nresiduals++;
            } else {
                int i;
                if ((st = read_int(r, ctx, 0, 2000000000L, &i))) return st;
                if (pd->noutliers >= pd->outlier_cap) {
                    int ncap = pd->outlier_cap ? pd->outlier_cap * 2 : 64;
                    int *np = realloc(pd->outliers, (size_t)ncap * sizeof *np);
                    if (!np) return ts_fail(r->err, TS_ERR_NOMEM, "%s: out of memory", r->path);
                    pd->outliers = np;
                    pd->outlier_cap = ncap;
                }
                pd->outliers[pd->noutliers++] = i;
            }
        }
        st = next(r);
    }
    return st ? st : next(r);
}

static ts_status read_orientation(reader *r) {
    ts_status st = expect(r, YAML_MAPPING_START_EVENT, "{flipud: ..., fliplr: ..., rot90: ...}", "orientation");
    r->s->has_orientation = true;
    while (!st && !is(r, YAML_MAPPING_END_EVENT)) {
        if (!is(r, YAML_SCALAR_EVENT)) return fail_at(r, "orientation: expected a key");
        char key[32];
        snprintf(key, sizeof key, "%s", scalar(r));
        if ((st = next(r))) return st;
        if (!strcmp(key, "flipud")) st = read_bool(r, "orientation flipud", &r->s->orientation.flipud);
        else if (!strcmp(key, "fliplr")) st = read_bool(r, "orientation fliplr", &r->s->orientation.fliplr);
        else if (!strcmp(key, "rot90")) st = read_int(r, "orientation rot90", 0, 3, &r->s->orientation.rot90);
        else st = skip_node(r);
    }
    return st ? st : next(r);
}

static ts_status read_tile_shape(reader *r) {
    ts_status st = expect(r, YAML_SEQUENCE_START_EVENT, "[H, W]", "tile_shape");
    for (int i = 0; !st && i < 2; i++) {
        if (is(r, YAML_SEQUENCE_END_EVENT)) return fail_at(r, "tile_shape: expected [H, W]");
        st = read_int(r, "tile_shape", 1, 1000000000L, &r->s->tile_shape[i]);
    }
    if (st) return st;
    if (!is(r, YAML_SEQUENCE_END_EVENT)) return fail_at(r, "tile_shape: expected [H, W]");
    r->s->has_tile_shape = true;
    return next(r);
}

/* [py, px]: what estimate solved with; both > 0 (a pitch of 0 or less
 * would stack or reverse the grid). */
static ts_status read_nominal_pitch(reader *r) {
    unsigned long line = r->have_event ? (unsigned long)r->ev.start_mark.line + 1 : 0;
    ts_status st = read_vec2(r, "nominal_pitch", r->s->nominal_pitch);
    if (st) return st;
    if (!(r->s->nominal_pitch[0] > 0) || !(r->s->nominal_pitch[1] > 0))
        return ts_fail(r->err, TS_ERR_FORMAT, "%s:%lu: nominal_pitch: [%g, %g] is not a positive pitch [y, x]",
                       r->path, line, r->s->nominal_pitch[0], r->s->nominal_pitch[1]);
    r->s->has_nominal_pitch = true;
    return TS_OK;
}

static ts_status read_root(reader *r, bool *has_translation) {
    ts_status st;
    if ((st = next(r))) return st;
    if ((st = expect(r, YAML_STREAM_START_EVENT, "a YAML stream", "file"))) return st;
    if (is(r, YAML_STREAM_END_EVENT)) return fail_at(r, "empty file: no total_translation");
    part_info *pi = &r->part;
    if (is(r, YAML_DOCUMENT_START_EVENT))
        pi->tags = r->ev.data.document_start.tag_directives.start != r->ev.data.document_start.tag_directives.end;
    if ((st = expect(r, YAML_DOCUMENT_START_EVENT, "a YAML document", "file"))) return st;
    pi->layout_ok = is(r, YAML_MAPPING_START_EVENT) && r->ev.data.mapping_start.style == YAML_BLOCK_MAPPING_STYLE;
    if ((st = expect(r, YAML_MAPPING_START_EVENT, "a mapping with total_translation", "top level"))) return st;
    while (!is(r, YAML_MAPPING_END_EVENT)) {
        if (!is(r, YAML_SCALAR_EVENT)) return fail_at(r, "top level: expected a key");
        char key[64];
        snprintf(key, sizeof key, "%s", scalar(r));
        if (pi->track) {
            if (!keylist_add(&pi->top, scalar(r), r->ev.data.scalar.length))
                return ts_fail(r->err, TS_ERR_NOMEM, "%s: out of memory", r->path);
            if (!strcmp(key, "pairs"))
                pi->layout_ok = pi->layout_ok && r->ev.start_mark.column == 0 &&
                                r->ev.data.scalar.style == YAML_PLAIN_SCALAR_STYLE;
        }
        if ((st = next(r))) return st;
        if (!strcmp(key, "total_translation")) {
            *has_translation = true;
            st = read_tile_vectors(r, "total_translation", true);
        } else if (!strcmp(key, "positions")) st = read_tile_vectors(r, "positions", false);
        /* confidence only repeats the pairs (tessera writes it after them):
         * parsing its ~340k entries of a plate was a third of the load. It
         * is read where it is all there is (old-tool files), or before. */
        else if (!strcmp(key, "confidence")) st = r->pairs_read ? skip_node(r) : read_confidence(r);
        else if (!strcmp(key, "tiles")) st = read_tiles(r);
        else if (!strcmp(key, "pairs")) st = read_pairs(r), r->pairs_read = true;
        else if (!strcmp(key, "outliers")) st = read_per_pair(r, "outliers", false);
        else if (!strcmp(key, "residuals")) st = read_per_pair(r, "residuals", true);
        else if (!strcmp(key, "tile_shape")) st = read_tile_shape(r);
        else if (!strcmp(key, "orientation")) st = read_orientation(r);
        else if (!strcmp(key, "names_yx")) st = read_bool(r, "names_yx", &r->s->names_yx);
        else if (!strcmp(key, "nominal_pitch")) st = read_nominal_pitch(r);
        else st = skip_node(r);
        if (st) return st;
    }
    if ((st = next(r))) return st;
    if ((st = expect(r, YAML_DOCUMENT_END_EVENT, "the end of the document", "file"))) return st;
    if (!is(r, YAML_STREAM_END_EVENT)) return fail_at(r, "more than one YAML document in a shifts file");
    pi->stream_end = r->ev.start_mark;
    pi->have_end = true;
    return TS_OK;
}

/* Puts a well's tiles in the order of its `tiles` list (others after). */
static ts_status restore_order(reader *r, int wi, const pending *pd) {
    ts_well_shifts *w = &r->s->wells[wi];
    int n = w->ntiles;
    /* An empty `tiles` list (the writer's for a well without tiles): the
     * well's arrays are NULL and there is nothing to reorder. (A count is
     * never negative; saying so keeps gcc -O3 from warning on the copies.) */
    if (n <= 0) return TS_OK;
    /* Already in that order (the writer puts `tiles` first, so the reader
     * numbered the tiles in its order): nothing moves. Saves rebuilding
     * the name index, 15 ms of a 167k-tile read that is otherwise parallel. */
    bool identity = true;
    for (int i = 0; identity && i < pd->norder; i++) identity = pd->order[i] == i;
    if (identity) return TS_OK;
    int *newpos = malloc((size_t)n * sizeof *newpos);
    int *order = malloc((size_t)n * sizeof *order);
    char (*tiles)[32] = malloc((size_t)n * sizeof *tiles);
    int64_t (*origin)[2] = malloc((size_t)n * sizeof *origin);
    bool *has = malloc((size_t)n * sizeof *has);
    double (*pos)[2] = w->position ? malloc((size_t)n * sizeof *pos) : NULL;
    ts_status st = TS_OK;
    if (!newpos || !order || !tiles || !origin || !has || (w->position && !pos)) {
        st = ts_fail(r->err, TS_ERR_NOMEM, "%s: out of memory", r->path);
        goto done;
    }
    for (int i = 0; i < n; i++) newpos[i] = -1;
    int k = 0;
    for (int i = 0; i < pd->norder; i++) {
        /* A position listed twice would be fused twice. */
        if (newpos[pd->order[i]] >= 0) {
            st = ts_fail(r->err, TS_ERR_FORMAT, "%s: tiles %s: position '%s' is listed twice", r->path, w->well,
                         w->tiles[pd->order[i]]);
            goto done;
        }
        newpos[pd->order[i]] = k, order[k++] = pd->order[i];
    }
    for (int i = 0; i < n; i++)
        if (newpos[i] < 0) newpos[i] = k, order[k++] = i;
    for (int i = 0; i < n; i++) {
        memcpy(tiles[i], w->tiles[order[i]], sizeof tiles[i]);
        origin[i][0] = w->origin[order[i]][0];
        origin[i][1] = w->origin[order[i]][1];
        has[i] = w->has_origin[order[i]];
        if (pos) pos[i][0] = w->position[order[i]][0], pos[i][1] = w->position[order[i]][1];
    }
    memcpy(w->tiles, tiles, (size_t)n * sizeof *tiles);
    memcpy(w->origin, origin, (size_t)n * sizeof *origin);
    memcpy(w->has_origin, has, (size_t)n * sizeof *has);
    if (pos) memcpy(w->position, pos, (size_t)n * sizeof *pos);
    for (int i = 0; i < w->npairs; i++) {
        w->pairs[i].a = newpos[w->pairs[i].a];
        w->pairs[i].b = newpos[w->pairs[i].b];
    }
    /* Rebuild the name index for the new order. */
    ts_name_index_free(w->index);
    w->index = ts_name_index_new();
    for (int i = 0; w->index && i < n; i++)
        if (!ts_name_index_add(w->index, (const char (*)[32])w->tiles, i)) {
            ts_name_index_free(w->index);
            w->index = NULL;
            break;
        }
done:
    free(newpos);
    free(order);
    free(tiles);
    free(origin);
    free(has);
    free(pos);
    return st;
}

static ts_status apply_pending(reader *r) {
    for (int wi = 0; wi < r->s->nwells; wi++) {
        ts_well_shifts *w = &r->s->wells[wi];
        const pending *pd = &r->pend[wi];
        for (int i = 0; i < pd->noutliers; i++) {
            if (pd->outliers[i] >= w->npairs)
                return ts_fail(r->err, TS_ERR_FORMAT, "%s: outliers %s: pair index %d out of range (%d pairs)",
                               r->path, w->well, pd->outliers[i], w->npairs);
            w->pairs[pd->outliers[i]].outlier = true;
        }
        if (pd->has_residuals && pd->nresiduals != w->npairs)
            return ts_fail(r->err, TS_ERR_FORMAT, "%s: residuals %s: %d entries for %d pairs", r->path, w->well,
                           pd->nresiduals, w->npairs);
        for (int i = 0; i < pd->nresiduals; i++) {
            w->pairs[i].ry = pd->residuals[i][0];
            w->pairs[i].rx = pd->residuals[i][1];
        }
        /* Old-tool confidence entries are only kept when there are no pairs
         * (with pairs, confidence is derived from them). */
        if (w->npairs > 0) w->nedges = 0;
        if (pd->has_order) {
            ts_status st = restore_order(r, wi, pd);
            if (st) return st;
        }
    }
    return TS_OK;
}

/* ---- Setting up, and the whole file on one parser ---- */

static bool reader_init(reader *r, const char *path, ts_error *err, bool track) {
    memset(r, 0, sizeof *r);
    r->path = path;
    r->err = err;
    r->part.track = track;
    r->s = ts_shifts_new();
    if (!r->s || !ts_yaml_guard_init(&r->guard)) return false;
    r->parser_ready = yaml_parser_initialize(&r->parser) != 0;
    return r->parser_ready;
}

/* Frees everything but the model (r->s: the caller's, or NULL). */
static void reader_release(reader *r) {
    if (r->have_event) yaml_event_delete(&r->ev);
    r->have_event = false;
    if (r->parser_ready) yaml_parser_delete(&r->parser);
    r->parser_ready = false;
    ts_yaml_guard_free(&r->guard);
    for (int i = 0; i < r->pend_cap; i++) {
        free(r->pend[i].outliers);
        free(r->pend[i].residuals);
        free(r->pend[i].order);
    }
    free(r->pend);
    r->pend = NULL;
    r->pend_cap = 0;
    keylist_free(&r->part.top);
    keylist_free(&r->part.pairs);
}

/* The document on r's parser, checked and with the pending values applied. */
static ts_status parse_whole(reader *r) {
    bool has_translation = false;
    ts_status st = read_root(r, &has_translation);
    if (!st && !has_translation)
        st = ts_fail(r->err, TS_ERR_FORMAT, "%s: no total_translation key (not a shifts file?)", r->path);
    if (!st) st = apply_pending(r);
    return st;
}

/* ---- Large files: two parsers, one per half, on two threads ----
 *
 * Part A reads bytes [0, split) as a document of its own (the parser closes
 * what is open at its end of input); part B reads "pairs:\n  WELL:\n"
 * followed by bytes [split, end). yaml_split.c proposes the split; it is
 * taken only when part A confirms it (split_confirmed) and both parts
 * parsed without error; then B's model is appended to A's, in file order
 * (merge_parts), and the checks that span the whole file (pending values,
 * total_translation present) run on the result. Anything else (an error in
 * either part, even out of memory; a split A does not confirm; a key both
 * parts read) discards both and parses the file again on one parser, which
 * gives the same result, or the error with its line and column, as before.
 *
 * Why the halves give the same events as one parser: A confirms that its
 * input ended right after a complete entry of WELL's block list (the list
 * closed at the end of input, so nothing but spaces, line breaks and
 * comments follows the entry), the list indentless at column 3 under the
 * plain key WELL at column 3 of the block mapping `pairs`, a plain key at
 * column 1 of the block top-level mapping, no %TAG directives. At the start
 * of the split line, one parser is therefore outside any scalar, flow
 * collection or simple key, with the indentation stack (0, 2) of those two
 * block mappings: exactly the state B's synthetic two lines leave. The
 * depth the guard counts is the same (3) and so are the keys of every
 * mapping but the two the split cuts through; merge_parts checks those two
 * for keys read by both parts. */

typedef struct part_input {
    const char *pre;
    size_t npre;
    const char *rest;
    size_t nrest;
    size_t off;
} part_input;

static int part_read(void *data, unsigned char *buffer, size_t size, size_t *size_read) {
    part_input *in = data;
    size_t n = 0;
    while (n < size && in->off < in->npre + in->nrest) {
        const char *src = in->off < in->npre ? in->pre + in->off : in->rest + (in->off - in->npre);
        size_t avail = in->off < in->npre ? in->npre - in->off : in->npre + in->nrest - in->off;
        size_t k = size - n < avail ? size - n : avail;
        memcpy(buffer + n, src, k);
        n += k;
        in->off += k;
    }
    *size_read = n;
    return 1;
}

typedef struct part_job {
    reader r;
    ts_error err;
    ts_status st;
    bool has_translation;
    part_input in;
} part_job;

static void *part_main(void *arg) {
    part_job *j = arg;
    j->st = read_root(&j->r, &j->has_translation);
    return NULL;
}

typedef struct key_ref {
    const char *s;
    size_t len;
} key_ref;

static int cmp_key_ref(const void *x, const void *y) {
    const key_ref *a = x, *b = y;
    size_t n = a->len < b->len ? a->len : b->len;
    int c = memcmp(a->s, b->s, n);
    return c ? c : (a->len > b->len) - (a->len < b->len);
}

/* How many keys a and b have in common (each list's keys differ: the guard
 * refuses repeats); -1 when out of memory. */
static long keys_shared(const keylist *a, const keylist *b) {
    size_t na = (size_t)a->n, nb = (size_t)b->n;
    key_ref *ka = malloc((na ? na : 1) * sizeof *ka), *kb = malloc((nb ? nb : 1) * sizeof *kb);
    long shared = -1;
    if (ka && kb) {
        for (size_t i = 0; i < na; i++) ka[i] = (key_ref){a->key[i], a->len[i]};
        for (size_t i = 0; i < nb; i++) kb[i] = (key_ref){b->key[i], b->len[i]};
        qsort(ka, na, sizeof *ka, cmp_key_ref);
        qsort(kb, nb, sizeof *kb, cmp_key_ref);
        shared = 0;
        for (size_t i = 0, j = 0; i < na && j < nb;) {
            int c = cmp_key_ref(&ka[i], &kb[j]);
            if (c == 0) shared++, i++, j++;
            else if (c < 0) i++;
            else j++;
        }
    }
    free(ka);
    free(kb);
    return shared;
}

static bool key_is(const keylist *k, int i, const char *s, size_t len) {
    return i >= 0 && i < k->n && k->len[i] == len && memcmp(k->key[i], s, len) == 0;
}

static bool has_key(const keylist *k, const char *s) {
    for (int i = 0; i < k->n; i++)
        if (key_is(k, i, s, strlen(s))) return true;
    return false;
}

/* The split is where A's input ended: see the comment above part_input. */
static bool split_confirmed(const part_job *a, const part_job *b, const char *well, size_t wl) {
    const part_info *pa = &a->r.part, *pb = &b->r.part;
    if (!pa->layout_ok || pa->tags || !pa->have_last || !pa->last_block || !pa->have_end) return false;
    if (pa->last_end.index != pa->stream_end.index) return false;
    const char *name = a->r.s->wells[pa->last_well].well;
    if (strlen(name) != wl || memcmp(name, well, wl) != 0) return false;
    if (!key_is(&pa->top, pa->top.n - 1, "pairs", 5) || !key_is(&pa->pairs, pa->pairs.n - 1, well, wl)) return false;
    if (!key_is(&pb->top, 0, "pairs", 5) || !key_is(&pb->pairs, 0, well, wl)) return false;
    /* The two mappings the split cuts: only the continued key in both. */
    return keys_shared(&pa->top, &pb->top) == 1 && keys_shared(&pa->pairs, &pb->pairs) == 1;
}

/* Appends pending values of B's well to A's; map: B's tile -> A's. */
static bool merge_pending(pending *pa, const pending *pb, const int *map) {
    if (pb->noutliers) {
        int *no = realloc(pa->outliers, (size_t)(pa->noutliers + pb->noutliers) * sizeof *no);
        if (!no) return false;
        memcpy(no + pa->noutliers, pb->outliers, (size_t)pb->noutliers * sizeof *no);
        pa->outliers = no;
        pa->noutliers += pb->noutliers;
        pa->outlier_cap = pa->noutliers;
    }
    if (pb->nresiduals) {
        double(*nr)[2] = realloc(pa->residuals, (size_t)(pa->nresiduals + pb->nresiduals) * sizeof *nr);
        if (!nr) return false;
        memcpy(nr + pa->nresiduals, pb->residuals, (size_t)pb->nresiduals * sizeof *nr);
        pa->residuals = nr;
        pa->nresiduals += pb->nresiduals;
        pa->residual_cap = pa->nresiduals;
    }
    pa->has_residuals |= pb->has_residuals;
    if (pb->norder) {
        int *no = realloc(pa->order, (size_t)(pa->norder + pb->norder) * sizeof *no);
        if (!no) return false;
        for (int i = 0; i < pb->norder; i++) no[pa->norder + i] = map[pb->order[i]];
        pa->order = no;
        pa->norder += pb->norder;
        pa->order_cap = pa->norder;
    }
    pa->has_order |= pb->has_order;
    return true;
}

/* B's model after A's, as one parser would have built it: wells and tiles
 * new to A get the next indices in B's order (their order of first
 * appearance), B's pairs and entries follow A's. False when out of memory. */
static bool merge_parts(part_job *a, part_job *b) {
    ts_shifts *sa = a->r.s;
    const ts_shifts *sb = b->r.s;
    for (int wb = 0; wb < sb->nwells; wb++) {
        const ts_well_shifts *B = &sb->wells[wb];
        int wa = ts_shifts_add_well(sa, B->well);
        if (wa < 0 || !pend_for(&a->r, wa)) return false;
        int *map = malloc((size_t)(B->ntiles ? B->ntiles : 1) * sizeof *map);
        if (!map) return false;
        bool ok = true;
        for (int t = 0; ok && t < B->ntiles; t++) {
            int ta = ts_shifts_add_tile_n(sa, wa, B->tiles[t], strlen(B->tiles[t]));
            ts_well_shifts *A = &sa->wells[wa];
            map[t] = ta;
            if (ta < 0) ok = false;
            else if (B->has_origin[t]) {
                A->origin[ta][0] = B->origin[t][0];
                A->origin[ta][1] = B->origin[t][1];
                A->has_origin[ta] = true;
            }
            if (ok && B->position && !isnan(B->position[t][0])) {
                if (!ts_shifts_ensure_positions(sa, wa)) ok = false;
                else A->position[ta][0] = B->position[t][0], A->position[ta][1] = B->position[t][1];
            }
        }
        for (int e = 0; ok && e < B->npairs; e++) {
            const ts_shift_pair *q = &B->pairs[e];
            ok = ts_shifts_add_pair(sa, wa, map[q->a], map[q->b], q->dy, q->dx, q->confidence) >= 0;
        }
        for (int e = 0; ok && e < B->nedges; e++) {
            const ts_shift_edge *q = &B->edges[e];
            ok = ts_shifts_add_edge(sa, wa, q->xa, q->ya, q->xb, q->yb, q->confidence) >= 0;
        }
        ok = ok && merge_pending(&a->r.pend[wa], &b->r.pend[wb], map);
        free(map);
        if (!ok) return false;
    }
    /* The top-level scalars B read (each key is in one part only). */
    if (sb->has_tile_shape) sa->has_tile_shape = true, memcpy(sa->tile_shape, sb->tile_shape, sizeof sa->tile_shape);
    if (sb->has_orientation) sa->has_orientation = true, sa->orientation = sb->orientation;
    if (sb->has_nominal_pitch)
        sa->has_nominal_pitch = true, memcpy(sa->nominal_pitch, sb->nominal_pitch, sizeof sa->nominal_pitch);
    if (has_key(&b->r.part.top, "names_yx")) sa->names_yx = sb->names_yx;
    a->has_translation |= b->has_translation;
    return true;
}

/* The two-part read of buf; true with *out set when it was used, false
 * when the file is to be read on one parser (nothing reported). */
static bool read_split(const char *path, const char *buf, size_t len, size_t target, ts_shifts **out) {
    size_t split;
    const char *well;
    size_t wl;
    if (!ts_yaml_find_split(buf, len, target, &split, &well, &wl)) return false;
    char pre[2 * TS_YAML_SPLIT_MAX_WELL + 16];
    int np = snprintf(pre, sizeof pre, "pairs:\n  %.*s:\n", (int)wl, well);
    part_job *a = calloc(1, sizeof *a), *b = calloc(1, sizeof *b);
    bool ok = a && b && np > 0 && (size_t)np < sizeof pre;
    ok = ok && reader_init(&a->r, path, &a->err, true);
    ok = ok && reader_init(&b->r, path, &b->err, true);
    if (ok) {
        yaml_parser_set_input_string(&a->r.parser, (const unsigned char *)buf, split);
        b->in = (part_input){pre, (size_t)np, buf + split, len - split, 0};
        yaml_parser_set_input(&b->r.parser, part_read, &b->in);
        pthread_t t;
        bool threaded = pthread_create(&t, NULL, part_main, b) == 0;
        part_main(a);
        if (threaded) pthread_join(t, NULL);
        else part_main(b);
        ok = !a->st && !b->st && split_confirmed(a, b, well, wl) && merge_parts(a, b);
        /* Whole-file checks: with an error, the one-parser read reports it. */
        ok = ok && a->has_translation && apply_pending(&a->r) == TS_OK;
    }
    if (ok) *out = a->r.s;
    for (int i = 0; i < 2; i++) {
        part_job *j = i ? b : a;
        if (!j) continue;
        reader_release(&j->r);
        if (!ok || j == b) ts_shifts_free(j->r.s);
        free(j);
    }
    return ok;
}

ts_status ts_shifts_read_ex(const char *path, ts_shifts_read_opts *o, ts_shifts **out, ts_error *err) {
    *out = NULL;
    if (o) o->parts = 1;
    /* A regular file only: a FIFO would block the read for ever. */
    int fd = -1;
    bool found = false;
    uint64_t fsize = 0;
    ts_status ost = ts_open_regular(path, &fd, &fsize, &found, err);
    if (ost) return ost;
    if (!found) return ts_fail(err, TS_ERR_IO, "cannot read '%s': no such file", path);
    size_t split_min = o && o->split_min_bytes ? o->split_min_bytes : TS_SHIFTS_SPLIT_MIN;
    /* Two parsers pay off with a second core (tests ask for them anyway). */
    bool split = fsize >= split_min && (o || ts_cpu_count() >= 2);
    char *buf = NULL;
    size_t len = 0;
    FILE *f = NULL;
    if (split) {
        /* The whole file into memory: the split read needs it. */
        void *data = NULL;
        ts_status st = ts_read_fd(fd, path, fsize, UINT64_MAX, &data, &len, err);
        if (st) return st;
        buf = data;
        size_t target = o && o->split_target >= 0 ? (size_t)o->split_target : (size_t)(TS_SHIFTS_SPLIT_AT * (double)len);
        if (read_split(path, buf, len, target, out)) {
            free(buf);
            if (o) o->parts = 2;
            return TS_OK;
        }
    } else {
        f = fdopen(fd, "rb");
        if (!f) {
            close(fd);
            return ts_fail(err, TS_ERR_IO, "cannot read '%s': %s", path, strerror(errno));
        }
    }
    reader r;
    if (!reader_init(&r, path, err, false)) {
        if (f) fclose(f);
        free(buf);
        reader_release(&r);
        ts_shifts_free(r.s);
        return ts_fail(err, TS_ERR_NOMEM, "reading '%s': out of memory", path);
    }
    if (f) {
        /* A large stdio buffer: libyaml reads in small pieces. */
        setvbuf(f, NULL, _IOFBF, 1 << 20);
        yaml_parser_set_input_file(&r.parser, f);
    } else {
        yaml_parser_set_input_string(&r.parser, (const unsigned char *)buf, len);
    }
    ts_status st = parse_whole(&r);
    reader_release(&r);
    if (f) {
        if (ferror(f) && !st) st = ts_fail(err, TS_ERR_IO, "cannot read '%s'", path);
        fclose(f);
    }
    free(buf);
    if (st) {
        ts_shifts_free(r.s);
        return st;
    }
    *out = r.s;
    return TS_OK;
}

ts_status ts_shifts_read(const char *path, ts_shifts **out, ts_error *err) {
    return ts_shifts_read_ex(path, NULL, out, err);
}
