/* Reading an image group: multiscales (axes, levels, scale) and omero
 * channels, and opening its arrays with a check that they match the axes. */
#include "ome/ome_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/error.h"

static const char AXIS_NAMES[5] = {'t', 'c', 'z', 'y', 'x'};

static int axis_slot(const char *name) {
    if (strlen(name) != 1) return -1;
    for (int i = 0; i < 5; i++)
        if (name[0] == AXIS_NAMES[i]) return i;
    return -1;
}

static void copy_str(char *dst, size_t n, json_t *v) {
    if (json_is_string(v)) snprintf(dst, n, "%s", json_string_value(v));
}

static ts_status parse_axes(const ome_node *node, const char *pre, json_t *ms, ts_image_meta *m,
                            ts_error *err) {
    json_t *axes = json_object_get(ms, "axes");
    if (!json_is_array(axes) || json_array_size(axes) < 2 || json_array_size(axes) > 5)
        return ts_fail(err, TS_ERR_FORMAT,
                       "%s: key '%smultiscales[0].axes' is missing or not a list of 2 to 5 axes",
                       node->file, pre);
    m->ndim = (int)json_array_size(axes);
    for (int i = 0; i < 5; i++) m->axis_index[i] = -1;
    for (int d = 0; d < m->ndim; d++) {
        json_t *ax = json_array_get(axes, (size_t)d);
        /* 0.3 used plain strings; 0.4 and 0.5 use objects */
        json_t *nm = json_is_object(ax) ? json_object_get(ax, "name") : NULL;
        int slot = json_is_string(nm) ? axis_slot(json_string_value(nm)) : -1;
        if (slot < 0)
            return ts_fail(err, TS_ERR_UNSUPPORTED,
                           "%s: key '%smultiscales[0].axes[%d]' names axis '%s'; tessera handles "
                           "t, c, z, y, x", node->file, pre, d,
                           json_is_string(nm) ? json_string_value(nm) : "?");
        if (m->axis_index[slot] >= 0)
            return ts_fail(err, TS_ERR_FORMAT, "%s: key '%smultiscales[0].axes': axis '%c' twice",
                           node->file, pre, AXIS_NAMES[slot]);
        static const char *const TYPES[5] = {"time", "channel", "space", "space", "space"};
        json_t *type = json_object_get(ax, "type");
        if (type && (!json_is_string(type) || strcmp(json_string_value(type), TYPES[slot]) != 0))
            return ts_fail(err, TS_ERR_FORMAT,
                           "%s: key '%smultiscales[0].axes[%d].type' of axis '%c' is not \"%s\"",
                           node->file, pre, d, AXIS_NAMES[slot], TYPES[slot]);
        m->axis_index[slot] = d;
        json_t *unit = json_object_get(ax, "unit");
        if (slot == 0) copy_str(m->time_unit, sizeof m->time_unit, unit);
        if (slot == 4 || (slot >= 2 && !m->space_unit[0]))
            copy_str(m->space_unit, sizeof m->space_unit, unit);
    }
    if (m->axis_index[3] < 0 || m->axis_index[4] < 0)
        return ts_fail(err, TS_ERR_UNSUPPORTED, "%s: key '%smultiscales[0].axes' lacks y or x",
                       node->file, pre);
    return TS_OK;
}

/* A coordinateTransformations list: one "scale" first (required for
 * datasets), optionally one "translation"; each with one number per axis
 * (scales positive). *scale_out: the scale array. */
static ts_status parse_transforms(const ome_node *node, const char *pre, const char *where,
                                  json_t *ct, int ndim, bool need_scale, json_t **scale_out,
                                  ts_error *err) {
    if (!json_is_array(ct) || (need_scale && json_array_size(ct) == 0))
        return ts_fail(err, TS_ERR_FORMAT, "%s: key '%s%s' is missing or empty", node->file, pre,
                       where);
    size_t i;
    json_t *t;
    int nscale = 0, ntrans = 0;
    json_array_foreach(ct, i, t) {
        json_t *type = json_object_get(t, "type");
        const char *ty = json_is_string(type) ? json_string_value(type) : "";
        bool is_scale = strcmp(ty, "scale") == 0, is_trans = strcmp(ty, "translation") == 0;
        if (!is_scale && !is_trans)
            return ts_fail(err, TS_ERR_FORMAT, "%s: key '%s%s[%zu].type' is \"%s\": only scale "
                           "then translation are allowed", node->file, pre, where, i, ty);
        if ((is_scale && (i != 0 || nscale++)) || (is_trans && ntrans++))
            return ts_fail(err, TS_ERR_FORMAT, "%s: key '%s%s': one scale first, then at most "
                           "one translation", node->file, pre, where);
        json_t *v = json_object_get(t, is_scale ? "scale" : "translation");
        if (!json_is_array(v) || (int)json_array_size(v) != ndim)
            return ts_fail(err, TS_ERR_FORMAT, "%s: key '%s%s[%zu].%s' does not have %d numbers "
                           "(one per axis)", node->file, pre, where, i, ty, ndim);
        for (int a = 0; a < ndim; a++) {
            json_t *x = json_array_get(v, (size_t)a);
            if (!json_is_number(x) || (is_scale && !(json_number_value(x) > 0)))
                return ts_fail(err, TS_ERR_FORMAT, "%s: key '%s%s[%zu].%s[%d]' is not a%s number",
                               node->file, pre, where, i, ty, a, is_scale ? " positive" : "");
        }
        if (is_scale) *scale_out = v;
    }
    if (need_scale && !*scale_out)
        return ts_fail(err, TS_ERR_FORMAT, "%s: key '%s%s' has no scale", node->file, pre, where);
    return TS_OK;
}

static ts_status parse_datasets(const ome_node *node, const char *pre, json_t *ms,
                                ts_image_meta *m, ts_error *err) {
    json_t *ds = json_object_get(ms, "datasets");
    if (!json_is_array(ds) || json_array_size(ds) == 0)
        return ts_fail(err, TS_ERR_FORMAT,
                       "%s: key '%smultiscales[0].datasets' is missing or empty", node->file, pre);
    if (json_array_size(ds) > TS_MAX_LEVELS)
        return ts_fail(err, TS_ERR_UNSUPPORTED, "%s: more than %d resolution levels", node->file,
                       TS_MAX_LEVELS);
    m->nlevels = (int)json_array_size(ds);
    for (int l = 0; l < m->nlevels; l++) {
        json_t *d = json_array_get(ds, (size_t)l);
        json_t *p = json_object_get(d, "path");
        const char *s = json_is_string(p) ? json_string_value(p) : NULL;
        if (!s || !*s || strlen(s) >= sizeof m->level_paths[0] || strstr(s, "..") || s[0] == '/')
            return ts_fail(err, TS_ERR_FORMAT,
                           "%s: key '%smultiscales[0].datasets[%d].path' is missing or invalid",
                           node->file, pre, l);
        snprintf(m->level_paths[l], sizeof m->level_paths[l], "%s", s);
        char where[96];
        snprintf(where, sizeof where, "multiscales[0].datasets[%d].coordinateTransformations", l);
        json_t *sc = NULL;
        ts_status st = parse_transforms(node, pre, where, json_object_get(d, "coordinateTransformations"),
                                        m->ndim, true, &sc, err);
        if (st != TS_OK) return st;
        if (l > 0) continue;
        for (int a = 0; a < 5; a++)
            if (m->axis_index[a] >= 0)
                m->scale[a] = json_number_value(json_array_get(sc, (size_t)m->axis_index[a]));
    }
    json_t *mct = json_object_get(ms, "coordinateTransformations");
    if (mct) {
        json_t *sc = NULL;
        ts_status st = parse_transforms(node, pre, "multiscales[0].coordinateTransformations", mct,
                                        m->ndim, false, &sc, err);
        if (st != TS_OK) return st;
    }
    return TS_OK;
}

static void parse_omero(json_t *omero, ts_image_meta *m) {
    json_t *ch = json_object_get(omero, "channels");
    if (!json_is_array(ch)) return;
    size_t i;
    json_t *c;
    json_array_foreach(ch, i, c) {
        if (i >= TS_MAX_CHANNELS) break;
        copy_str(m->channel_labels[i], sizeof m->channel_labels[i], json_object_get(c, "label"));
        json_t *col = json_object_get(c, "color");
        if (json_is_string(col) && strlen(json_string_value(col)) == 6)
            copy_str(m->channel_colors[i], sizeof m->channel_colors[i], col);
        json_t *win = json_object_get(c, "window");
        static const char *const keys[4] = {"min", "max", "start", "end"};
        bool all = json_is_object(win);
        for (int k = 0; all && k < 4; k++) {
            json_t *v = json_object_get(win, keys[k]);
            if (json_is_number(v)) m->window[i][k] = json_number_value(v);
            else all = false;
        }
        m->has_window[i] = all;
        m->nchannels = (int)i + 1;
    }
}

ts_status ome_parse_image_meta(const ome_node *node, ts_image_meta *m, ts_error *err) {
    memset(m, 0, sizeof *m);
    for (int i = 0; i < 5; i++) m->scale[i] = 1.0;
    const char *pre = node->zarr_format == 3 ? "attributes.ome." : "";
    json_t *mss = NULL;
    ts_status st = ome_node_get(node, "multiscales", JSON_ARRAY, &mss, err);
    if (st != TS_OK) return st;
    json_t *ms = json_array_get(mss, 0);
    if (!json_is_object(ms))
        return ts_fail(err, TS_ERR_FORMAT, "%s: key '%smultiscales' is empty", node->file, pre);
    if ((st = parse_axes(node, pre, ms, m, err)) != TS_OK) return st;
    if ((st = parse_datasets(node, pre, ms, m, err)) != TS_OK) return st;
    parse_omero(json_object_get(node->ome, "omero"), m);
    return TS_OK;
}

int ts_ome_zarr_format(ts_ome_version v) { return v == TS_OME_04 ? 2 : v == TS_OME_05 ? 3 : 0; }

static ts_status read_meta_as(const char *image_path, int zarr_format, ts_ome_version *version,
                              ts_image_meta *meta, ts_error *err) {
    ome_node node;
    ts_status st = ome_node_read_as(image_path, zarr_format, &node, NULL, err);
    if (st != TS_OK) return st;
    ts_ome_version ver = TS_OME_UNKNOWN;
    /* 0.4 images may omit multiscales[].version (the schema allows it) */
    st = ome_node_version_v2opt(&node, "multiscales", TS_OME_04, &ver, err);
    if (st == TS_OK) st = ome_parse_image_meta(&node, meta, err);
    if (st == TS_OK && version) *version = ver;
    ome_node_free(&node);
    return st;
}

ts_status ts_image_read_meta(const char *image_path, ts_ome_version *version,
                             ts_image_meta *meta, ts_error *err) {
    return read_meta_as(image_path, 0, version, meta, err);
}

static ts_status open_array_as(const char *image_path, int zarr_format, const ts_image_meta *meta, int level,
                               tz_array **out, ts_error *err) {
    *out = NULL;
    if (level < 0 || level >= meta->nlevels)
        return ts_fail(err, TS_ERR_ARG, "%s: no resolution level %d (the image has %d)",
                       image_path, level, meta->nlevels);
    char path[4200];
    snprintf(path, sizeof path, "%s/%s", image_path, meta->level_paths[level]);
    tz_array *arr = NULL;
    ts_status st = tz_array_open_as(path, zarr_format, &arr, err);
    if (st != TS_OK) return st;
    /* The message is formatted from the array's metadata before the array
     * (which owns it) is closed. */
    const tz_array_meta *am = tz_array_get_meta(arr);
    if (am->ndim != meta->ndim)
        st = ts_fail(err, TS_ERR_FORMAT, "%s: array has %d dimensions but the image's multiscales axes list %d",
                     path, am->ndim, meta->ndim);
    for (int a = 0; st == TS_OK && a < 5; a++) {
        int d = meta->axis_index[a];
        if (d < 0 || !am->dimension_names[d][0]) continue;
        if (strlen(am->dimension_names[d]) != 1 || am->dimension_names[d][0] != AXIS_NAMES[a])
            st = ts_fail(err, TS_ERR_FORMAT, "%s: dimension_names[%d] is '%s' but multiscales axis %d is '%c'",
                         path, d, am->dimension_names[d], d, AXIS_NAMES[a]);
    }
    if (st != TS_OK) {
        tz_array_close(arr);
        return st;
    }
    *out = arr;
    return TS_OK;
}

ts_status ts_image_open_array(const char *image_path, const ts_image_meta *meta, int level,
                              tz_array **out, ts_error *err) {
    return open_array_as(image_path, 0, meta, level, out, err);
}

static ts_status check_index(const ts_plate *plate, int w, int p, ts_error *err) {
    if (w < 0 || w >= plate->nwells || p < 0 || p >= plate->wells[w].npositions)
        return ts_fail(err, TS_ERR_ARG, "%s: no well %d / position %d", plate->path, w, p);
    return TS_OK;
}

ts_status ts_plate_image_meta(const ts_plate *plate, int w, int p, ts_image_meta *meta,
                              ts_error *err) {
    ts_status st = check_index(plate, w, p, err);
    if (st != TS_OK) return st;
    char path[4200];
    ts_plate_image_path(plate, w, p, path, sizeof path);
    /* A plate's images are in its own format (checked here), so the
     * other format's metadata files are not asked for tile by tile. */
    ts_ome_version ver;
    if ((st = read_meta_as(path, ts_ome_zarr_format(plate->version), &ver, meta, err)) != TS_OK) return st;
    if (ver != plate->version)
        return ts_fail(err, TS_ERR_FORMAT, "%s: image version 0.%d differs from the plate's 0.%d",
                       path, (int)ver, (int)plate->version);
    return TS_OK;
}

ts_status ts_plate_open_array(const ts_plate *plate, int w, int p, int level, ts_image_meta *meta,
                              tz_array **out, ts_error *err) {
    ts_image_meta own;
    if (!meta) meta = &own;
    ts_status st = ts_plate_image_meta(plate, w, p, meta, err);
    if (st != TS_OK) return st;
    char path[4200];
    ts_plate_image_path(plate, w, p, path, sizeof path);
    return open_array_as(path, ts_ome_zarr_format(plate->version), meta, level, out, err);
}
