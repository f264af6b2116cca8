/* Writing the shifts YAML. A hand-formatted writer (the output is a fixed,
 * simple layout, and 167k tiles must not take longer to write than to read)
 * into one buffer, then one atomic write. Scalars are quoted whenever a YAML
 * 1.1 reader (PyYAML) could take them for anything but a string, and floats
 * always carry a '.' or an exponent with a sign so they resolve as floats. */
#include "shifts/shifts.h"
#include "common/error.h"
#include "common/fs.h"
#include "common/strbuf.h"

#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Shortest of %.15g..%.17g that reads back exactly, made a YAML float. */
static void put_double(ts_strbuf *b, double v) {
    char s[40];
    for (int prec = 15; prec <= 17; prec++) {
        snprintf(s, sizeof s, "%.*g", prec, v);
        if (strtod(s, NULL) == v) break;
    }
    /* "-0" -> "0"; "1e-05" -> "1.0e-05"; "12" stays an int (same value). */
    if (strcmp(s, "-0") == 0) strcpy(s, "0");
    char *e = strchr(s, 'e');
    if (e && !strchr(s, '.')) {
        char tail[40];
        strcpy(tail, e);
        snprintf(e, sizeof s - (size_t)(e - s), ".0%s", tail);
    }
    ts_strbuf_puts(b, s);
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

/* "A/1" + "/" + "000000" as one name. */
static void put_key(ts_strbuf *b, const char *well, const char *tile) {
    char key[80];
    snprintf(key, sizeof key, "%s/%s", well, tile);
    put_name(b, key);
}

static void write_translation(ts_strbuf *b, const ts_shifts *s) {
    ts_strbuf_puts(b, "total_translation:");
    bool any = false;
    for (int wi = 0; wi < s->nwells; wi++) {
        const ts_well_shifts *w = &s->wells[wi];
        for (int t = 0; t < w->ntiles; t++) {
            if (!w->has_origin[t]) continue;
            ts_strbuf_puts(b, "\n  ");
            any = true;
            put_key(b, w->well, w->tiles[t]);
            ts_strbuf_printf(b, ": [%" PRId64 ", %" PRId64 "]", w->origin[t][0], w->origin[t][1]);
        }
    }
    ts_strbuf_puts(b, any ? "\n" : " {}\n");
}

static void write_confidence(ts_strbuf *b, const ts_shifts *s) {
    bool any = false;
    for (int wi = 0; wi < s->nwells; wi++) any |= s->wells[wi].npairs > 0 || s->wells[wi].nedges > 0;
    if (!any) return;
    ts_strbuf_puts(b, "confidence:\n");
    for (int wi = 0; wi < s->nwells; wi++) {
        const ts_well_shifts *w = &s->wells[wi];
        if (w->npairs == 0 && w->nedges == 0) continue;
        ts_strbuf_puts(b, "  ");
        put_name(b, w->well);
        ts_strbuf_puts(b, ":");
        int written = 0;
        if (w->npairs > 0) {
            /* Edge id = pair index, tiles as grid [x, y], as the old tool did. */
            for (int i = 0; i < w->npairs; i++) {
                const ts_shift_pair *p = &w->pairs[i];
                int xa, ya, xb, yb;
                if (p->a < 0 || p->a >= w->ntiles || p->b < 0 || p->b >= w->ntiles ||
                    !ts_position_grid(w->tiles[p->a], s->names_yx, &xa, &ya) ||
                    !ts_position_grid(w->tiles[p->b], s->names_yx, &xb, &yb))
                    continue;
                ts_strbuf_printf(b, "\n    '%d': [[%d, %d], [%d, %d], ", i, xa, ya, xb, yb);
                put_double(b, p->confidence);
                ts_strbuf_puts(b, "]");
                written++;
            }
        } else {
            for (int i = 0; i < w->nedges; i++) {
                const ts_shift_edge *e = &w->edges[i];
                ts_strbuf_printf(b, "\n    '%d': [[%d, %d], [%d, %d], ", i, e->xa, e->ya, e->xb, e->yb);
                put_double(b, e->confidence);
                ts_strbuf_puts(b, "]");
                written++;
            }
        }
        ts_strbuf_puts(b, written ? "\n" : " {}\n");
    }
}

static void write_layout(ts_strbuf *b, const ts_shifts *s) {
    if (s->has_tile_shape) ts_strbuf_printf(b, "tile_shape: [%d, %d]\n", s->tile_shape[0], s->tile_shape[1]);
    if (s->has_orientation)
        ts_strbuf_printf(b, "orientation: {flipud: %s, fliplr: %s, rot90: %d}\n", s->orientation.flipud ? "true" : "false",
             s->orientation.fliplr ? "true" : "false", s->orientation.rot90);
    ts_strbuf_printf(b, "names_yx: %s\n", s->names_yx ? "true" : "false");
    if (s->has_nominal_pitch) {
        ts_strbuf_puts(b, "nominal_pitch: [");
        put_double(b, s->nominal_pitch[0]);
        ts_strbuf_puts(b, ", ");
        put_double(b, s->nominal_pitch[1]);
        ts_strbuf_puts(b, "]\n");
    }
}

static void write_tiles(ts_strbuf *b, const ts_shifts *s) {
    if (s->nwells == 0) return;
    ts_strbuf_puts(b, "tiles:\n");
    for (int wi = 0; wi < s->nwells; wi++) {
        const ts_well_shifts *w = &s->wells[wi];
        ts_strbuf_puts(b, "  ");
        put_name(b, w->well);
        ts_strbuf_puts(b, ": [");
        for (int t = 0; t < w->ntiles; t++) {
            /* Break the flow list every 8 names to keep lines short. */
            if (t) ts_strbuf_puts(b, t % 8 ? ", " : ",\n    ");
            put_name(b, w->tiles[t]);
        }
        ts_strbuf_puts(b, "]\n");
    }
}

static bool any_pairs(const ts_shifts *s) {
    for (int wi = 0; wi < s->nwells; wi++)
        if (s->wells[wi].npairs > 0) return true;
    return false;
}

static void write_pairs(ts_strbuf *b, const ts_shifts *s) {
    if (!any_pairs(s)) return;
    ts_strbuf_puts(b, "pairs:\n");
    for (int wi = 0; wi < s->nwells; wi++) {
        const ts_well_shifts *w = &s->wells[wi];
        if (w->npairs == 0) continue;
        ts_strbuf_puts(b, "  ");
        put_name(b, w->well);
        ts_strbuf_puts(b, ":\n");
        for (int i = 0; i < w->npairs; i++) {
            const ts_shift_pair *p = &w->pairs[i];
            ts_strbuf_puts(b, "  - [");
            put_key(b, w->well, w->tiles[p->a]);
            ts_strbuf_puts(b, ", ");
            put_key(b, w->well, w->tiles[p->b]);
            ts_strbuf_puts(b, ", ");
            put_double(b, p->dy);
            ts_strbuf_puts(b, ", ");
            put_double(b, p->dx);
            ts_strbuf_puts(b, ", ");
            put_double(b, p->confidence);
            ts_strbuf_puts(b, "]\n");
        }
    }
}

static void write_positions(ts_strbuf *b, const ts_shifts *s) {
    bool any = false;
    for (int wi = 0; wi < s->nwells; wi++) any |= s->wells[wi].position != NULL;
    if (!any) return;
    ts_strbuf_puts(b, "positions:\n");
    for (int wi = 0; wi < s->nwells; wi++) {
        const ts_well_shifts *w = &s->wells[wi];
        if (!w->position) continue;
        for (int t = 0; t < w->ntiles; t++) {
            if (!isfinite(w->position[t][0]) || !isfinite(w->position[t][1])) continue;
            ts_strbuf_puts(b, "  ");
            put_key(b, w->well, w->tiles[t]);
            ts_strbuf_puts(b, ": [");
            put_fixed6(b, w->position[t][0]);
            ts_strbuf_puts(b, ", ");
            put_fixed6(b, w->position[t][1]);
            ts_strbuf_puts(b, "]\n");
        }
    }
}

static void write_residuals(ts_strbuf *b, const ts_shifts *s) {
    bool any = false;
    for (int wi = 0; wi < s->nwells; wi++)
        for (int i = 0; i < s->wells[wi].npairs && !any; i++)
            any = isfinite(s->wells[wi].pairs[i].ry) && isfinite(s->wells[wi].pairs[i].rx);
    if (!any) return;
    ts_strbuf_puts(b, "residuals:\n");
    for (int wi = 0; wi < s->nwells; wi++) {
        const ts_well_shifts *w = &s->wells[wi];
        if (w->npairs == 0) continue;
        ts_strbuf_puts(b, "  ");
        put_name(b, w->well);
        ts_strbuf_puts(b, ":\n");
        /* One entry per pair (index = pair index); unknown residuals are
         * written as null. */
        for (int i = 0; i < w->npairs; i++) {
            const ts_shift_pair *p = &w->pairs[i];
            if (!isfinite(p->ry) || !isfinite(p->rx)) {
                ts_strbuf_puts(b, "  - null\n");
                continue;
            }
            ts_strbuf_puts(b, "  - [");
            put_fixed6(b, p->ry);
            ts_strbuf_puts(b, ", ");
            put_fixed6(b, p->rx);
            ts_strbuf_puts(b, "]\n");
        }
    }
}

static void write_outliers(ts_strbuf *b, const ts_shifts *s) {
    if (!any_pairs(s)) return;
    ts_strbuf_puts(b, "outliers:\n");
    for (int wi = 0; wi < s->nwells; wi++) {
        const ts_well_shifts *w = &s->wells[wi];
        if (w->npairs == 0) continue;
        ts_strbuf_puts(b, "  ");
        put_name(b, w->well);
        ts_strbuf_puts(b, ": [");
        int n = 0;
        for (int i = 0; i < w->npairs; i++)
            if (w->pairs[i].outlier) ts_strbuf_printf(b, n++ ? ", %d" : "%d", i);
        ts_strbuf_puts(b, "]\n");
    }
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

ts_status ts_shifts_write(const char *path, const ts_shifts *s, ts_error *err) {
    ts_status st = check_model(path, s, err);
    if (st) return st;
    ts_strbuf b = {0};
    ts_strbuf_puts(&b, "# tessera shifts: integer tile origins [y, x] (min over a well = 0) and the\n"
              "# pairwise measurements they were solved from.\n");
    write_translation(&b, s);
    write_layout(&b, s);
    write_tiles(&b, s);
    write_pairs(&b, s);
    /* After pairs, which it repeats: readers that know pairs skip it. */
    write_confidence(&b, s);
    write_positions(&b, s);
    write_residuals(&b, s);
    write_outliers(&b, s);
    if (b.failed) {
        free(b.data);
        return ts_fail(err, TS_ERR_NOMEM, "writing '%s': out of memory", path);
    }
    /* A killed earlier run's temporary of this file goes (nothing else in
     * the user's directory is touched). Best effort: a directory that can be
     * written but not listed is the write's business, not the sweep's. */
    ts_error sweep_err;
    (void)ts_sweep_temp_files_of(path, NULL, &sweep_err);
    st = ts_write_file_atomic(path, b.data, b.len, err);
    free(b.data);
    return st;
}
