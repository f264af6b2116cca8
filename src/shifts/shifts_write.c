/* Writing the shifts YAML. A hand-formatted writer (the output is a fixed,
 * simple layout, and 167k tiles must not take longer to write than to read)
 * into one buffer, then one atomic write. Scalars are quoted whenever a YAML
 * 1.1 reader (PyYAML) could take them for anything but a string, and floats
 * always carry a '.' or an exponent with a sign so they resolve as floats. */
#include "shifts/shifts.h"
#include "common/error.h"
#include "common/fs.h"
#include "common/pool.h"
#include "common/strbuf.h"
#include "shifts/fmt_double.h"

#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Shortest of %.15g..%.17g that reads back exactly, made a YAML float
 * (ts_fmt_shortest_g: the printf loop's bytes without printf). */
static void put_double(ts_strbuf *b, double v) {
    char s[TS_FMT_DOUBLE_MAX + 4];
    size_t n = ts_fmt_shortest_g(s, v);
    /* "-0" -> "0"; "1e-05" -> "1.0e-05"; "12" stays an int (same value). */
    if (n == 2 && s[0] == '-' && s[1] == '0') {
        ts_strbuf_put(b, "0", 1);
        return;
    }
    char *e = memchr(s, 'e', n);
    if (e && !memchr(s, '.', n)) {
        memmove(e + 2, e, (size_t)(s + n - e) + 1);
        e[0] = '.';
        e[1] = '0';
        n += 2;
    }
    ts_strbuf_put(b, s, n);
}

static void put_int(ts_strbuf *b, long long v) {
    char s[24];
    ts_strbuf_put(b, s, ts_fmt_int64(s, v));
}

/* Derived values (solved positions, residuals) to 1e-6 px, formatted by hand:
 * printf/strtod round trips dominated writing a 167k-tile file. Always with a
 * '.' so YAML reads a float. */
static void put_fixed6(ts_strbuf *b, double v) {
    if (!(fabs(v) < 1e12)) {
        put_double(b, v);
        return;
    }
    long long q = llround(v * 1e6);
    char s[48], *e = s + sizeof s, *p = e;
    unsigned long long a = q < 0 ? (unsigned long long)(-q) : (unsigned long long)q;
    unsigned long long ip = a / 1000000ull, fp = a % 1000000ull;
    int digits = 6;
    while (digits > 1 && fp % 10 == 0) fp /= 10, digits--;
    for (int i = 0; i < digits; i++) *--p = (char)('0' + fp % 10), fp /= 10;
    *--p = '.';
    do *--p = (char)('0' + ip % 10), ip /= 10; while (ip);
    if (q < 0) *--p = '-';
    ts_strbuf_put(b, p, (size_t)(e - p));
}

static bool plain_safe(const char *s) {
    /* Plain only for names like A/1 or A/1/000000: a letter first (so never a
     * number) and not one of YAML 1.1's booleans / nulls. */
    static const char *const WORDS[] = {"y", "Y", "n", "N", "yes", "Yes", "YES", "no", "No", "NO",
                                        "true", "True", "TRUE", "false", "False", "FALSE",
                                        "on", "On", "ON", "off", "Off", "OFF", "null", "Null",
                                        "NULL"};
    if (!((s[0] >= 'A' && s[0] <= 'Z') || (s[0] >= 'a' && s[0] <= 'z'))) return false;
    for (const char *p = s; *p; p++) {
        char c = *p;
        if (!((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '/' ||
              c == '_' || c == '-' || c == '.'))
            return false;
    }
    /* The words are at most 5 letters: a tile key (A/1/000000) is longer,
     * and comparing each of a plate's 167k keys with all 25 was most of
     * preparing them (serial, before the formatting threads start). */
    if (strlen(s) > 5) return true;
    for (size_t i = 0; i < sizeof WORDS / sizeof WORDS[0]; i++)
        if (strcmp(s, WORDS[i]) == 0) return false;
    return true;
}

static void put_name(ts_strbuf *b, const char *s) {
    if (plain_safe(s)) {
        ts_strbuf_puts(b, s);
        return;
    }
    ts_strbuf_put(b, "'", 1);
    for (const char *p = s; *p; p++) {
        if (*p == '\'') ts_strbuf_put(b, "'", 1);
        ts_strbuf_put(b, p, 1);
    }
    ts_strbuf_put(b, "'", 1);
}

/* Per well, prepared once: the YAML key of every tile ("A/1" + "/" + tile,
 * quoted when needed; each tile is written 2 + 2 x its pairs times) and its
 * grid coordinates for `confidence` (gx < 0: not a grid name). */
typedef struct well_keys {
    char *text;
    size_t *off; /* key t is text[off[t] .. off[t + 1]) */
    int *gx, *gy;
} well_keys;

static bool prepare_keys(const ts_shifts *s, const ts_well_shifts *w, well_keys *k) {
    size_t n = (size_t)w->ntiles;
    ts_strbuf b = {0};
    k->off = malloc((n + 1) * sizeof *k->off);
    k->gx = malloc((n ? n : 1) * sizeof *k->gx);
    k->gy = malloc((n ? n : 1) * sizeof *k->gy);
    if (!k->off || !k->gx || !k->gy) return false;
    for (size_t t = 0; t < n; t++) {
        char key[80]; /* well/tile: both NUL-terminated within 32 bytes */
        size_t wl = strnlen(w->well, sizeof w->well), tl = strnlen(w->tiles[t], sizeof w->tiles[t]);
        memcpy(key, w->well, wl);
        key[wl] = '/';
        memcpy(key + wl + 1, w->tiles[t], tl);
        key[wl + 1 + tl] = '\0';
        k->off[t] = b.len;
        put_name(&b, key);
        if (!ts_position_grid(w->tiles[t], s->names_yx, &k->gx[t], &k->gy[t])) k->gx[t] = k->gy[t] = -1;
    }
    k->off[n] = b.len;
    k->text = b.data;
    return !b.failed;
}

static void free_keys(well_keys *k) {
    free(k->text);
    free(k->off);
    free(k->gx);
    free(k->gy);
}

static void put_key(ts_strbuf *b, const well_keys *k, int t) {
    ts_strbuf_put(b, k->text ? k->text + k->off[t] : "", k->off[t + 1] - k->off[t]);
}

/* The document is a list of pieces, each formatted into its own buffer
 * (several threads at a time) and then joined in order: fixed text, or the
 * lines of items [lo, hi) of one well's section. */
typedef struct write_ctx {
    const ts_shifts *s;
    well_keys *keys;
} write_ctx;

typedef void (*piece_fn)(ts_strbuf *b, const write_ctx *c, int wi, int lo, int hi);

typedef struct piece {
    piece_fn fn; /* NULL: text */
    const char *text;
    int wi, lo, hi;
    ts_strbuf out;
} piece;

static void lines_translation(ts_strbuf *b, const write_ctx *c, int wi, int lo, int hi) {
    const ts_well_shifts *w = &c->s->wells[wi];
    for (int t = lo; t < hi; t++) {
        if (!w->has_origin[t]) continue;
        ts_strbuf_put(b, "\n  ", 3);
        put_key(b, &c->keys[wi], t);
        ts_strbuf_put(b, ": [", 3);
        put_int(b, w->origin[t][0]);
        ts_strbuf_put(b, ", ", 2);
        put_int(b, w->origin[t][1]);
        ts_strbuf_put(b, "]", 1);
    }
}

static void put_edge(ts_strbuf *b, int i, int xa, int ya, int xb, int yb, double confidence) {
    ts_strbuf_put(b, "\n    '", 6);
    put_int(b, i);
    ts_strbuf_put(b, "': [[", 5);
    put_int(b, xa);
    ts_strbuf_put(b, ", ", 2);
    put_int(b, ya);
    ts_strbuf_put(b, "], [", 4);
    put_int(b, xb);
    ts_strbuf_put(b, ", ", 2);
    put_int(b, yb);
    ts_strbuf_put(b, "], ", 3);
    put_double(b, confidence);
    ts_strbuf_put(b, "]", 1);
}

/* Edge id = pair index, tiles as grid [x, y], as the old tool did. */
static void lines_confidence(ts_strbuf *b, const write_ctx *c, int wi, int lo, int hi) {
    const ts_well_shifts *w = &c->s->wells[wi];
    const well_keys *k = &c->keys[wi];
    for (int i = lo; i < hi; i++) {
        if (w->npairs > 0) {
            const ts_shift_pair *p = &w->pairs[i];
            if (k->gx[p->a] < 0 || k->gx[p->b] < 0) continue;
            put_edge(b, i, k->gx[p->a], k->gy[p->a], k->gx[p->b], k->gy[p->b], p->confidence);
        } else {
            const ts_shift_edge *e = &w->edges[i];
            put_edge(b, i, e->xa, e->ya, e->xb, e->yb, e->confidence);
        }
    }
}

/* Tile names, breaking the flow list every 8 names to keep lines short. */
static void lines_tiles(ts_strbuf *b, const write_ctx *c, int wi, int lo, int hi) {
    const ts_well_shifts *w = &c->s->wells[wi];
    for (int t = lo; t < hi; t++) {
        if (t) ts_strbuf_puts(b, t % 8 ? ", " : ",\n    ");
        put_name(b, w->tiles[t]);
    }
}

static void lines_pairs(ts_strbuf *b, const write_ctx *c, int wi, int lo, int hi) {
    const ts_well_shifts *w = &c->s->wells[wi];
    for (int i = lo; i < hi; i++) {
        const ts_shift_pair *p = &w->pairs[i];
        ts_strbuf_put(b, "  - [", 5);
        put_key(b, &c->keys[wi], p->a);
        ts_strbuf_put(b, ", ", 2);
        put_key(b, &c->keys[wi], p->b);
        ts_strbuf_put(b, ", ", 2);
        put_double(b, p->dy);
        ts_strbuf_put(b, ", ", 2);
        put_double(b, p->dx);
        ts_strbuf_put(b, ", ", 2);
        put_double(b, p->confidence);
        ts_strbuf_put(b, "]\n", 2);
    }
}

static void lines_positions(ts_strbuf *b, const write_ctx *c, int wi, int lo, int hi) {
    const ts_well_shifts *w = &c->s->wells[wi];
    for (int t = lo; t < hi; t++) {
        if (!isfinite(w->position[t][0]) || !isfinite(w->position[t][1])) continue;
        ts_strbuf_put(b, "  ", 2);
        put_key(b, &c->keys[wi], t);
        ts_strbuf_put(b, ": [", 3);
        put_fixed6(b, w->position[t][0]);
        ts_strbuf_put(b, ", ", 2);
        put_fixed6(b, w->position[t][1]);
        ts_strbuf_put(b, "]\n", 2);
    }
}

/* One entry per pair (index = pair index); unknown residuals are written as
 * null. */
static void lines_residuals(ts_strbuf *b, const write_ctx *c, int wi, int lo, int hi) {
    const ts_well_shifts *w = &c->s->wells[wi];
    for (int i = lo; i < hi; i++) {
        const ts_shift_pair *p = &w->pairs[i];
        if (!isfinite(p->ry) || !isfinite(p->rx)) {
            ts_strbuf_put(b, "  - null\n", 9);
            continue;
        }
        ts_strbuf_put(b, "  - [", 5);
        put_fixed6(b, p->ry);
        ts_strbuf_put(b, ", ", 2);
        put_fixed6(b, p->rx);
        ts_strbuf_put(b, "]\n", 2);
    }
}

static void lines_outliers(ts_strbuf *b, const write_ctx *c, int wi, int lo, int hi) {
    const ts_well_shifts *w = &c->s->wells[wi];
    int n = 0;
    for (int i = lo; i < hi; i++)
        if (w->pairs[i].outlier) {
            if (n++) ts_strbuf_put(b, ", ", 2);
            put_int(b, i);
        }
}

/* The list of pieces; items per piece: enough to make the join and the task
 * overhead negligible, few enough that two threads share the work evenly. */
#define PIECE_ITEMS 16384

typedef struct piece_list {
    piece *v;
    int n, cap;
    bool failed;
} piece_list;

static void add_piece(piece_list *l, piece_fn fn, const char *text, int wi, int lo, int hi) {
    if (l->failed) return;
    if (l->n == l->cap) {
        int ncap = l->cap ? 2 * l->cap : 64;
        piece *nv = realloc(l->v, (size_t)ncap * sizeof *nv);
        if (!nv) {
            l->failed = true;
            return;
        }
        l->v = nv;
        l->cap = ncap;
    }
    l->v[l->n++] = (piece){.fn = fn, .text = text, .wi = wi, .lo = lo, .hi = hi};
}

static void add_text(piece_list *l, const char *text) { add_piece(l, NULL, text, 0, 0, 0); }

static void add_lines(piece_list *l, piece_fn fn, int wi, int n) {
    for (int lo = 0; lo < n; lo += PIECE_ITEMS) add_piece(l, fn, NULL, wi, lo, lo + PIECE_ITEMS < n ? lo + PIECE_ITEMS : n);
}

/* A well name as a piece of text: its own small buffer. */
static void add_well_name(piece_list *l, const char *before, const char *well, const char *after) {
    if (l->failed) return;
    add_text(l, NULL);
    if (l->failed) return;
    ts_strbuf *b = &l->v[l->n - 1].out;
    ts_strbuf_puts(b, before);
    put_name(b, well);
    ts_strbuf_puts(b, after);
    l->failed |= b->failed;
}

static bool any_pairs(const ts_shifts *s) {
    for (int wi = 0; wi < s->nwells; wi++)
        if (s->wells[wi].npairs > 0) return true;
    return false;
}

static void plan_translation(piece_list *l, const ts_shifts *s) {
    add_text(l, "total_translation:");
    bool any = false;
    for (int wi = 0; wi < s->nwells; wi++) {
        const ts_well_shifts *w = &s->wells[wi];
        for (int t = 0; t < w->ntiles && !any; t++) any = w->has_origin[t];
        add_lines(l, lines_translation, wi, w->ntiles);
    }
    add_text(l, any ? "\n" : " {}\n");
}

static void plan_layout(piece_list *l, const ts_shifts *s) {
    char line[160];
    ts_strbuf b = {0};
    if (s->has_tile_shape) ts_strbuf_printf(&b, "tile_shape: [%d, %d]\n", s->tile_shape[0], s->tile_shape[1]);
    if (s->has_orientation)
        ts_strbuf_printf(&b, "orientation: {flipud: %s, fliplr: %s, rot90: %d}\n", s->orientation.flipud ? "true" : "false",
                         s->orientation.fliplr ? "true" : "false", s->orientation.rot90);
    snprintf(line, sizeof line, "names_yx: %s\n", s->names_yx ? "true" : "false");
    ts_strbuf_puts(&b, line);
    if (s->has_nominal_pitch) {
        ts_strbuf_puts(&b, "nominal_pitch: [");
        put_double(&b, s->nominal_pitch[0]);
        ts_strbuf_puts(&b, ", ");
        put_double(&b, s->nominal_pitch[1]);
        ts_strbuf_puts(&b, "]\n");
    }
    add_text(l, NULL);
    if (l->failed || b.failed) {
        l->failed = true;
        free(b.data);
        return;
    }
    l->v[l->n - 1].out = b;
}

static void plan_tiles(piece_list *l, const ts_shifts *s) {
    if (s->nwells == 0) return;
    add_text(l, "tiles:\n");
    for (int wi = 0; wi < s->nwells; wi++) {
        add_well_name(l, "  ", s->wells[wi].well, ": [");
        add_lines(l, lines_tiles, wi, s->wells[wi].ntiles);
        add_text(l, "]\n");
    }
}

static void plan_pairs(piece_list *l, const ts_shifts *s) {
    if (!any_pairs(s)) return;
    add_text(l, "pairs:\n");
    for (int wi = 0; wi < s->nwells; wi++) {
        if (s->wells[wi].npairs == 0) continue;
        add_well_name(l, "  ", s->wells[wi].well, ":\n");
        add_lines(l, lines_pairs, wi, s->wells[wi].npairs);
    }
}

static void plan_confidence(piece_list *l, const ts_shifts *s, const well_keys *keys) {
    bool any = false;
    for (int wi = 0; wi < s->nwells; wi++) any |= s->wells[wi].npairs > 0 || s->wells[wi].nedges > 0;
    if (!any) return;
    add_text(l, "confidence:\n");
    for (int wi = 0; wi < s->nwells; wi++) {
        const ts_well_shifts *w = &s->wells[wi];
        if (w->npairs == 0 && w->nedges == 0) continue;
        add_well_name(l, "  ", w->well, ":");
        int n = w->npairs > 0 ? w->npairs : w->nedges, written = w->npairs > 0 ? 0 : n;
        for (int i = 0; i < w->npairs; i++)
            written += keys[wi].gx[w->pairs[i].a] >= 0 && keys[wi].gx[w->pairs[i].b] >= 0;
        add_lines(l, lines_confidence, wi, n);
        add_text(l, written ? "\n" : " {}\n");
    }
}

static void plan_positions(piece_list *l, const ts_shifts *s) {
    bool any = false;
    for (int wi = 0; wi < s->nwells; wi++) any |= s->wells[wi].position != NULL;
    if (!any) return;
    add_text(l, "positions:\n");
    for (int wi = 0; wi < s->nwells; wi++)
        if (s->wells[wi].position) add_lines(l, lines_positions, wi, s->wells[wi].ntiles);
}

static void plan_residuals(piece_list *l, const ts_shifts *s) {
    bool any = false;
    for (int wi = 0; wi < s->nwells; wi++)
        for (int i = 0; i < s->wells[wi].npairs && !any; i++)
            any = isfinite(s->wells[wi].pairs[i].ry) && isfinite(s->wells[wi].pairs[i].rx);
    if (!any) return;
    add_text(l, "residuals:\n");
    for (int wi = 0; wi < s->nwells; wi++) {
        if (s->wells[wi].npairs == 0) continue;
        add_well_name(l, "  ", s->wells[wi].well, ":\n");
        add_lines(l, lines_residuals, wi, s->wells[wi].npairs);
    }
}

/* The outlier list is one flow sequence per well: one piece (short). */
static void plan_outliers(piece_list *l, const ts_shifts *s) {
    if (!any_pairs(s)) return;
    add_text(l, "outliers:\n");
    for (int wi = 0; wi < s->nwells; wi++) {
        if (s->wells[wi].npairs == 0) continue;
        add_well_name(l, "  ", s->wells[wi].well, ": [");
        add_piece(l, lines_outliers, NULL, wi, 0, s->wells[wi].npairs);
        add_text(l, "]\n");
    }
}

typedef struct format_job {
    piece_list *l;
    const write_ctx *c;
} format_job;

static int format_piece(void *user, int64_t i, int worker) {
    (void)worker;
    format_job *j = user;
    piece *p = &j->l->v[i];
    if (p->fn) p->fn(&p->out, j->c, p->wi, p->lo, p->hi);
    return 0;
}

static ts_status check_model(const char *path, const ts_shifts *s, ts_error *err) {
    for (int wi = 0; wi < s->nwells; wi++) {
        const ts_well_shifts *w = &s->wells[wi];
        for (int i = 0; i < w->npairs; i++) {
            const ts_shift_pair *p = &w->pairs[i];
            if (p->a < 0 || p->a >= w->ntiles || p->b < 0 || p->b >= w->ntiles)
                return ts_fail(err, TS_ERR_INTERNAL, "writing '%s': pair %d of well %s names tile %d/%d of %d",
                               path, i, w->well, p->a, p->b, w->ntiles);
            if (!isfinite(p->dy) || !isfinite(p->dx) || !isfinite(p->confidence))
                return ts_fail(err, TS_ERR_NUMERIC, "writing '%s': pair %d (%s/%s -> %s/%s) has a non-finite value",
                               path, i, w->well, w->tiles[p->a], w->well, w->tiles[p->b]);
        }
    }
    return TS_OK;
}

/* Threads formatting the pieces: the work is all formatting, a few hundred
 * ms for a 167k-tile plate; more than 4 would only add start-up. */
#define WRITE_THREADS 4

ts_status ts_shifts_write(const char *path, const ts_shifts *s, ts_error *err) {
    ts_status st = check_model(path, s, err);
    if (st) return st;
    piece_list l = {0};
    well_keys *keys = calloc((size_t)(s->nwells ? s->nwells : 1), sizeof *keys);
    bool ok = keys != NULL;
    for (int wi = 0; ok && wi < s->nwells; wi++) ok = prepare_keys(s, &s->wells[wi], &keys[wi]);
    write_ctx c = {.s = s, .keys = keys};
    if (ok) {
        add_text(&l, "# tessera shifts: integer tile origins [y, x] (min over a well = 0) and the\n"
                     "# pairwise measurements they were solved from.\n");
        plan_translation(&l, s);
        plan_layout(&l, s);
        plan_tiles(&l, s);
        plan_pairs(&l, s);
        /* After pairs, which it repeats: readers that know pairs skip it. */
        plan_confidence(&l, s, keys);
        plan_positions(&l, s);
        plan_residuals(&l, s);
        plan_outliers(&l, s);
        ok = !l.failed;
    }
    if (ok) {
        int threads = ts_cpu_count() < WRITE_THREADS ? ts_cpu_count() : WRITE_THREADS;
        ts_pool *pool = l.n > 1 && threads > 1 ? ts_pool_create(threads) : NULL;
        format_job j = {.l = &l, .c = &c};
        if (pool) ts_pool_for(pool, l.n, format_piece, &j);
        else
            for (int i = 0; i < l.n; i++) format_piece(&j, i, 0);
        ts_pool_destroy(pool);
        for (int i = 0; i < l.n; i++) ok &= !l.v[i].out.failed;
    }
    /* The pieces are written in order as they are (joining the 72 MB of a
     * 167k-tile plate into one buffer first cost 45 ms of copying). */
    ts_file_part *parts = ok ? malloc((l.n > 0 ? (size_t)l.n : 1) * sizeof *parts) : NULL;
    for (int i = 0; parts && i < l.n; i++) {
        const piece *q = &l.v[i];
        parts[i] = q->text ? (ts_file_part){q->text, strlen(q->text)} : (ts_file_part){q->out.data, q->out.len};
    }
    if (parts) {
        /* A killed earlier run's temporary of this file goes (nothing else in
         * the user's directory is touched). Best effort: a directory that can be
         * written but not listed is the write's business, not the sweep's. */
        ts_error sweep_err;
        (void)ts_sweep_temp_files_of(path, NULL, &sweep_err);
        st = ts_write_file_atomic_parts(path, parts, (size_t)l.n, err);
    } else {
        st = ts_fail(err, TS_ERR_NOMEM, "writing '%s': out of memory", path);
    }
    free(parts);
    for (int i = 0; i < l.n; i++) free(l.v[i].out.data);
    free(l.v);
    for (int wi = 0; keys && wi < s->nwells; wi++) free_keys(&keys[wi]);
    free(keys);
    return st;
}
