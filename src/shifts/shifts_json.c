/* The shifts file as JSON, for bindings (the Python package): the same keys
 * and values as the YAML (shifts.h), read and written through the same
 * model, so a binding never parses or formats the file itself. */
#include "shifts/shifts.h"
#include "common/error.h"
#include "shifts/shifts_internal.h"

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ------------------------------------------------------------------ read */

static json_t *yx_array(double y, double x) {
    return json_pack("[ff]", y, x);
}

static json_t *real_or_null(double v) {
    return isfinite(v) ? json_real(v) : json_null();
}

static char *tile_key(char *buf, size_t n, const ts_well_shifts *w, int t) {
    snprintf(buf, n, "%s/%s", w->well, w->tiles[t]);
    return buf;
}

static json_t *shifts_to_json(const ts_shifts *s) {
    json_t *root = json_object();
    json_t *tt = json_object(), *pos = json_object(), *tiles = json_object();
    json_t *pairs = json_object(), *res = json_object(), *outl = json_object(), *conf = json_object();
    bool any_pos = false, any_pairs = false, any_res = false, any_outl = false, any_conf = false;
    char key[80];
    for (int wi = 0; wi < s->nwells; wi++) {
        const ts_well_shifts *w = &s->wells[wi];
        json_t *names = json_array();
        for (int t = 0; t < w->ntiles; t++) {
            json_array_append_new(names, json_string(w->tiles[t]));
            tile_key(key, sizeof key, w, t);
            if (w->has_origin[t])
                json_object_set_new(tt, key, json_pack("[II]", (json_int_t)w->origin[t][0],
                                                       (json_int_t)w->origin[t][1]));
            if (w->position && isfinite(w->position[t][0]) && isfinite(w->position[t][1])) {
                json_object_set_new(pos, key, yx_array(w->position[t][0], w->position[t][1]));
                any_pos = true;
            }
        }
        json_object_set_new(tiles, w->well, names);
        if (w->npairs) {
            json_t *list = json_array(), *rlist = json_array(), *olist = json_array();
            bool has_res = false;
            for (int p = 0; p < w->npairs; p++) {
                const ts_shift_pair *pr = &w->pairs[p];
                char ka[80], kb[80];
                json_array_append_new(list, json_pack("[ssfff]", tile_key(ka, sizeof ka, w, pr->a),
                                                      tile_key(kb, sizeof kb, w, pr->b), pr->dy, pr->dx,
                                                      pr->confidence));
                json_array_append_new(rlist, json_pack("[oo]", real_or_null(pr->ry), real_or_null(pr->rx)));
                has_res |= isfinite(pr->ry) || isfinite(pr->rx);
                if (pr->outlier) json_array_append_new(olist, json_integer(p));
            }
            json_object_set_new(pairs, w->well, list);
            any_pairs = true;
            if (has_res) json_object_set_new(res, w->well, rlist), any_res = true;
            else json_decref(rlist);
            if (json_array_size(olist)) json_object_set_new(outl, w->well, olist), any_outl = true;
            else json_decref(olist);
        }
        if (w->nedges) {
            json_t *edges = json_object();
            for (int e = 0; e < w->nedges; e++) {
                const ts_shift_edge *ed = &w->edges[e];
                char id[16];
                snprintf(id, sizeof id, "%d", e);
                json_object_set_new(edges, id, json_pack("[[ii][ii]f]", ed->xa, ed->ya, ed->xb, ed->yb,
                                                         ed->confidence));
            }
            json_object_set_new(conf, w->well, edges);
            any_conf = true;
        }
    }
    json_object_set_new(root, "total_translation", tt);
    json_object_set_new(root, "tiles", tiles);
    if (any_pos) json_object_set_new(root, "positions", pos); else json_decref(pos);
    if (any_pairs) json_object_set_new(root, "pairs", pairs); else json_decref(pairs);
    if (any_res) json_object_set_new(root, "residuals", res); else json_decref(res);
    if (any_outl) json_object_set_new(root, "outliers", outl); else json_decref(outl);
    if (any_conf) json_object_set_new(root, "confidence", conf); else json_decref(conf);
    if (s->has_tile_shape)
        json_object_set_new(root, "tile_shape", json_pack("[ii]", s->tile_shape[0], s->tile_shape[1]));
    if (s->has_orientation)
        json_object_set_new(root, "orientation",
                            json_pack("{sbsbsi}", "flipud", s->orientation.flipud, "fliplr",
                                      s->orientation.fliplr, "rot90", s->orientation.rot90));
    json_object_set_new(root, "names_yx", json_boolean(s->names_yx));
    if (s->has_nominal_pitch)
        json_object_set_new(root, "nominal_pitch", yx_array(s->nominal_pitch[0], s->nominal_pitch[1]));
    return root;
}

ts_status ts_shifts_read_json(const char *path, char **json_out, ts_error *err) {
    if (!path || !json_out) return ts_fail(err, TS_ERR_ARG, "shifts to JSON: a path and an output are required");
    *json_out = NULL;
    ts_shifts *s = NULL;
    ts_status st = ts_shifts_read(path, &s, err);
    if (st != TS_OK) return st;
    json_t *root = shifts_to_json(s);
    ts_shifts_free(s);
    char *text = root ? json_dumps(root, JSON_COMPACT | JSON_REAL_PRECISION(17)) : NULL;
    json_decref(root);
    if (!text) return ts_fail(err, TS_ERR_NOMEM, "%s: out of memory converting the shifts to JSON", path);
    *json_out = text;
    return TS_OK;
}

/* ----------------------------------------------------------------- write */

/* Everything the converter checks names the key at fault; the values are
 * then bounded as the YAML reader bounds them, so that what is written
 * reads back. */
typedef struct {
    const char *path;
    ts_error *err;
} jctx;

static ts_status bad(jctx *c, const char *what, const char *key) {
    return ts_fail(c->err, TS_ERR_FORMAT, "%s: shifts JSON: %s%s%s", c->path, what, key ? " at " : "",
                   key ? key : "");
}

static bool finite_px(const json_t *v, double *out) {
    if (!json_is_number(v)) return false;
    double d = json_number_value(v);
    if (!isfinite(d) || fabs(d) > TS_SHIFTS_MAX_PX) return false;
    *out = d;
    return true;
}

static bool yx_pair(const json_t *v, double yx[2]) {
    return json_is_array(v) && json_array_size(v) == 2 && finite_px(json_array_get(v, 0), &yx[0]) &&
           finite_px(json_array_get(v, 1), &yx[1]);
}

/* An integer in [lo, hi] (json_unpack's "i" keeps the low 32 bits of a
 * larger one: 2^32 + 1 became 1); the YAML reader's bounds, so that what
 * is written reads back. */
static bool int_in(const json_t *v, long lo, long hi, int *out) {
    if (!json_is_integer(v)) return false;
    json_int_t x = json_integer_value(v);
    if (x < lo || x > hi) return false;
    *out = (int)x;
    return true;
}

/* Names are written into the YAML as they are: one with a control
 * character (a line break) was written across lines, and the reader
 * refused the file. */
static bool printable(const char *name) {
    for (const unsigned char *p = (const unsigned char *)name; *p; p++)
        if (*p < 0x20 || *p == 0x7f) return false;
    return true;
}

/* A refused name as a message shows it: control characters as \xNN. */
static ts_status bad_name(jctx *c, const char *what, const char *name) {
    char shown[200];
    size_t n = 0;
    for (const unsigned char *p = (const unsigned char *)name; *p && n + 5 < sizeof shown; p++)
        n += (size_t)snprintf(shown + n, sizeof shown - n, *p < 0x20 || *p == 0x7f ? "\\x%02x" : "%c", *p);
    return bad(c, what, shown);
}

/* "A/1/000000" -> well index (added) and tile index (added). */
static ts_status tile_of_key(jctx *c, ts_shifts *s, const char *key, int *wi, int *ti) {
    const char *slash = strrchr(key, '/');
    if (!slash || slash == key || !slash[1]) return bad(c, "a tile key is not WELL/POSITION", key);
    if (!printable(key)) return bad_name(c, "a tile key holds a control character", key);
    char well[32];
    size_t wl = (size_t)(slash - key);
    if (wl >= sizeof well) return bad(c, "a well name is too long", key);
    memcpy(well, key, wl);
    well[wl] = '\0';
    if ((*wi = ts_shifts_add_well(s, well)) < 0) return bad(c, "a well name is too long", key);
    if ((*ti = ts_shifts_add_tile(s, *wi, slash + 1)) < 0) return bad(c, "a position name is too long", key);
    return TS_OK;
}

static ts_status put_tiles(jctx *c, ts_shifts *s, const json_t *tiles) {
    const char *well;
    const json_t *names;
    json_object_foreach((json_t *)tiles, well, names) {
        if (!printable(well)) return bad_name(c, "a well name holds a control character", well);
        int wi = ts_shifts_add_well(s, well);
        if (wi < 0) return bad(c, "a well name is too long", well);
        if (!json_is_array(names)) return bad(c, "tiles of a well are not a list", well);
        size_t i;
        const json_t *n;
        json_array_foreach(names, i, n) {
            if (!json_is_string(n) || ts_shifts_add_tile(s, wi, json_string_value(n)) < 0)
                return bad(c, "a tile name is not a short string", well);
            if (!printable(json_string_value(n)))
                return bad_name(c, "a tile name holds a control character", json_string_value(n));
        }
    }
    return TS_OK;
}

static ts_status put_origins(jctx *c, ts_shifts *s, const json_t *obj, bool positions) {
    const char *key;
    const json_t *v;
    json_object_foreach((json_t *)obj, key, v) {
        int wi, ti;
        double yx[2];
        if (tile_of_key(c, s, key, &wi, &ti) != TS_OK) return c->err ? c->err->code : TS_ERR_FORMAT;
        if (!yx_pair(v, yx)) return bad(c, "not a finite [y, x] within range", key);
        ts_well_shifts *w = &s->wells[wi];
        if (positions) {
            if (!ts_shifts_ensure_positions(s, wi)) return ts_fail(c->err, TS_ERR_NOMEM, "out of memory");
            w->position[ti][0] = yx[0];
            w->position[ti][1] = yx[1];
        } else {
            if (yx[0] != floor(yx[0]) || yx[1] != floor(yx[1])) return bad(c, "total_translation is not integer", key);
            w->origin[ti][0] = (int64_t)yx[0];
            w->origin[ti][1] = (int64_t)yx[1];
            w->has_origin[ti] = true;
        }
    }
    return TS_OK;
}

static ts_status put_pairs(jctx *c, ts_shifts *s, const json_t *pairs) {
    const char *well;
    const json_t *list;
    json_object_foreach((json_t *)pairs, well, list) {
        if (!json_is_array(list)) return bad(c, "pairs of a well are not a list", well);
        size_t i;
        const json_t *p;
        json_array_foreach(list, i, p) {
            double dy, dx, conf;
            if (!json_is_array(p) || json_array_size(p) != 5 || !json_is_string(json_array_get(p, 0)) ||
                !json_is_string(json_array_get(p, 1)) || !finite_px(json_array_get(p, 2), &dy) ||
                !finite_px(json_array_get(p, 3), &dx) || !json_is_number(json_array_get(p, 4)))
                return bad(c, "a pair is not [tile_a, tile_b, dy, dx, confidence]", well);
            conf = json_number_value(json_array_get(p, 4));
            if (!(conf >= 0 && conf <= 1)) return bad(c, "a pair confidence is outside [0, 1]", well);
            int wa, a, wb, b;
            if (tile_of_key(c, s, json_string_value(json_array_get(p, 0)), &wa, &a) != TS_OK ||
                tile_of_key(c, s, json_string_value(json_array_get(p, 1)), &wb, &b) != TS_OK)
                return c->err ? c->err->code : TS_ERR_FORMAT;
            if (strcmp(s->wells[wa].well, well) || wb != wa) return bad(c, "a pair's tiles are not of its well", well);
            if (ts_shifts_add_pair(s, wa, a, b, dy, dx, conf) < 0) return ts_fail(c->err, TS_ERR_NOMEM, "out of memory");
        }
    }
    return TS_OK;
}

static ts_status put_residuals(jctx *c, ts_shifts *s, const json_t *res, const json_t *outl) {
    const char *well;
    const json_t *list;
    json_object_foreach((json_t *)res, well, list) {
        int wi = ts_shifts_find_well(s, well);
        if (wi < 0 || !json_is_array(list) || json_array_size(list) != (size_t)s->wells[wi].npairs)
            return bad(c, "residuals are not one [ry, rx] per pair of a listed well", well);
        size_t i;
        const json_t *r;
        json_array_foreach(list, i, r) {
            ts_shift_pair *p = &s->wells[wi].pairs[i];
            if (!json_is_array(r) || json_array_size(r) != 2) return bad(c, "a residual is not [ry, rx]", well);
            /* Unknown is [null, null]: the file writes a residual with one
             * axis unknown as null, losing the other. */
            if (json_is_null(json_array_get(r, 0)) != json_is_null(json_array_get(r, 1)))
                return bad(c, "a residual is [ry, rx] or [null, null] (unknown), not known on one axis only", well);
            for (int k = 0; k < 2; k++) {
                const json_t *v = json_array_get(r, (size_t)k);
                double d = NAN;
                if (!json_is_null(v) && !finite_px(v, &d)) return bad(c, "a residual is not finite", well);
                *(k ? &p->rx : &p->ry) = d;
            }
        }
    }
    json_object_foreach((json_t *)outl, well, list) {
        int wi = ts_shifts_find_well(s, well);
        if (wi < 0 || !json_is_array(list)) return bad(c, "outliers are not a list of a listed well", well);
        size_t i;
        const json_t *v;
        json_array_foreach(list, i, v) {
            json_int_t k = json_is_integer(v) ? json_integer_value(v) : -1;
            if (k < 0 || k >= s->wells[wi].npairs) return bad(c, "an outlier is not a pair index", well);
            s->wells[wi].pairs[k].outlier = true;
        }
    }
    return TS_OK;
}

static ts_status put_edges(jctx *c, ts_shifts *s, const json_t *conf) {
    const char *well;
    const json_t *edges;
    json_object_foreach((json_t *)conf, well, edges) {
        if (!printable(well)) return bad_name(c, "a well name holds a control character", well);
        int wi = ts_shifts_add_well(s, well);
        if (wi < 0 || !json_is_object(edges)) return bad(c, "confidence of a well is not a mapping", well);
        const char *id;
        const json_t *e;
        json_object_foreach((json_t *)edges, id, e) {
            int xa, ya, xb, yb;
            json_t *ca, *cb, *cv;
            double cf = NAN;
            if (json_unpack((json_t *)e, "[ooo!]", &ca, &cb, &cv) == 0 && json_is_number(cv)) cf = json_number_value(cv);
            if (!json_is_array(ca) || !json_is_array(cb) || json_array_size(ca) != 2 || json_array_size(cb) != 2 ||
                !int_in(json_array_get(ca, 0), 0, 999, &xa) || !int_in(json_array_get(ca, 1), 0, 999, &ya) ||
                !int_in(json_array_get(cb, 0), 0, 999, &xb) || !int_in(json_array_get(cb, 1), 0, 999, &yb) ||
                !(cf >= 0 && cf <= 1))
                return bad(c, "a confidence entry is not [[xa, ya], [xb, yb], c] with grid cells 0..999 and c in "
                           "[0, 1]", well);
            if (ts_shifts_add_edge(s, wi, xa, ya, xb, yb, cf) < 0) return ts_fail(c->err, TS_ERR_NOMEM, "out of memory");
        }
    }
    return TS_OK;
}

/* A file given positions only (a binding's own placement) gets the integer
 * origins the solve would write: each well moved so its minimum is 0, then
 * rounded to nearest. */
static ts_status origins_from_positions(jctx *c, ts_shifts *s) {
    for (int wi = 0; wi < s->nwells; wi++) {
        ts_well_shifts *w = &s->wells[wi];
        if (!w->position) continue;
        /* Moving only the tiles without an origin would place them in
         * another frame than those with one (whose positions stay). */
        int with = -1, without = -1;
        for (int t = 0; t < w->ntiles; t++) {
            if (w->has_origin[t]) with = t;
            else if (isfinite(w->position[t][0]) && isfinite(w->position[t][1])) without = t;
        }
        if (with >= 0 && without >= 0) {
            char k1[80], k2[80];
            snprintf(k1, sizeof k1, "%s/%s", w->well, w->tiles[with]);
            snprintf(k2, sizeof k2, "%s/%s", w->well, w->tiles[without]);
            return ts_fail(c->err, TS_ERR_FORMAT, "%s: shifts JSON: tile %s has positions but no total_translation "
                           "while %s of its well has one: give both for every tile of the well, or positions only",
                           c->path, k2, k1);
        }
        double lo[2] = {INFINITY, INFINITY};
        for (int t = 0; t < w->ntiles; t++)
            for (int k = 0; k < 2; k++)
                if (isfinite(w->position[t][k]) && w->position[t][k] < lo[k]) lo[k] = w->position[t][k];
        for (int t = 0; t < w->ntiles; t++) {
            if (w->has_origin[t] || !isfinite(w->position[t][0]) || !isfinite(w->position[t][1])) continue;
            for (int k = 0; k < 2; k++) {
                w->position[t][k] -= lo[k];
                w->origin[t][k] = (int64_t)llround(w->position[t][k]);
            }
            w->has_origin[t] = true;
        }
    }
    return TS_OK;
}

static const char *const known_keys[] = {"total_translation", "positions", "tiles", "pairs", "residuals",
                                         "outliers", "confidence", "tile_shape", "orientation", "names_yx",
                                         "nominal_pitch", NULL};

static ts_status json_to_shifts(jctx *c, const json_t *root, ts_shifts *s) {
    if (!json_is_object(root)) return bad(c, "the top level is not an object", NULL);
    const char *key;
    const json_t *v;
    json_object_foreach((json_t *)root, key, v) {
        int k = 0;
        while (known_keys[k] && strcmp(known_keys[k], key)) k++;
        if (!known_keys[k]) return bad(c, "unknown key", key);
        bool obj = k <= 6;
        if (obj && !json_is_object(v)) return bad(c, "not a mapping", key);
    }
    const json_t *tt = json_object_get(root, "total_translation"), *pos = json_object_get(root, "positions");
    if (!tt && !pos) return bad(c, "neither total_translation nor positions is given", NULL);
    ts_status st = TS_OK;
    const json_t *o;
    if ((o = json_object_get(root, "tiles")) && (st = put_tiles(c, s, o)) != TS_OK) return st;
    if (tt && (st = put_origins(c, s, tt, false)) != TS_OK) return st;
    if (pos && (st = put_origins(c, s, pos, true)) != TS_OK) return st;
    if ((o = json_object_get(root, "pairs")) && (st = put_pairs(c, s, o)) != TS_OK) return st;
    const json_t *res = json_object_get(root, "residuals"), *outl = json_object_get(root, "outliers");
    json_t *empty = json_object();
    st = put_residuals(c, s, res ? res : empty, outl ? outl : empty);
    json_decref(empty);
    if (st != TS_OK) return st;
    if ((o = json_object_get(root, "confidence")) && (st = put_edges(c, s, o)) != TS_OK) return st;
    if ((o = json_object_get(root, "tile_shape"))) {
        int h, w;
        if (!json_is_array(o) || json_array_size(o) != 2 || !int_in(json_array_get(o, 0), 1, 1000000000L, &h) ||
            !int_in(json_array_get(o, 1), 1, 1000000000L, &w))
            return bad(c, "not [H, W] with H, W in 1..10^9", "tile_shape");
        s->has_tile_shape = true;
        s->tile_shape[0] = h;
        s->tile_shape[1] = w;
    }
    if ((o = json_object_get(root, "orientation"))) {
        int fu = 0, fl = 0, k = 0;
        json_t *kv = NULL;
        if (json_unpack((json_t *)o, "{s?b,s?b,s?o!}", "flipud", &fu, "fliplr", &fl, "rot90", &kv) != 0 ||
            (kv && !int_in(kv, 0, 3, &k)))
            return bad(c, "not {flipud: bool, fliplr: bool, rot90: 0..3}", "orientation");
        s->has_orientation = true;
        s->orientation = (ts_orientation){.flipud = fu, .fliplr = fl, .rot90 = k};
    }
    if ((o = json_object_get(root, "names_yx"))) {
        if (!json_is_boolean(o)) return bad(c, "not a boolean", "names_yx");
        s->names_yx = json_is_true(o);
    }
    if ((o = json_object_get(root, "nominal_pitch"))) {
        if (!yx_pair(o, s->nominal_pitch) || s->nominal_pitch[0] <= 0 || s->nominal_pitch[1] <= 0)
            return bad(c, "not a positive [py, px]", "nominal_pitch");
        s->has_nominal_pitch = true;
    }
    if ((st = origins_from_positions(c, s)) != TS_OK) return st;
    for (int wi = 0; wi < s->nwells; wi++)
        for (int t = 0; t < s->wells[wi].ntiles; t++)
            if (!s->wells[wi].has_origin[t]) {
                char k2[80];
                return bad(c, "a listed tile has no origin", tile_key(k2, sizeof k2, &s->wells[wi], t));
            }
    return TS_OK;
}

ts_status ts_shifts_write_json(const char *path, const char *json, ts_error *err) {
    if (!path || !json) return ts_fail(err, TS_ERR_ARG, "shifts from JSON: a path and the JSON text are required");
    json_error_t je;
    json_t *root = json_loads(json, JSON_REJECT_DUPLICATES, &je);
    if (!root)
        return ts_fail(err, TS_ERR_FORMAT, "%s: shifts JSON: %s (line %d, column %d)", path, je.text, je.line,
                       je.column);
    ts_shifts *s = ts_shifts_new();
    jctx c = {path, err};
    ts_status st = s ? json_to_shifts(&c, root, s) : ts_fail(err, TS_ERR_NOMEM, "out of memory");
    json_decref(root);
    if (st == TS_OK) st = ts_shifts_write(path, s, err);
    ts_shifts_free(s);
    return st;
}
