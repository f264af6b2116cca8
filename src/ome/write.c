/* Writing OME metadata: plate and well groups, and image groups with
 * multiscales + omero. 0.4 puts the attributes at the top level of .zattrs
 * with "version" inside plate/well/multiscales; 0.5 puts them under "ome"
 * of zarr.json attributes with one "version". */
#include "ome/ome_internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/error.h"
#include "common/fs.h"

static const char *const DEFAULT_COLORS[] = {"00FF00", "FF00FF", "00FFFF", "FFFF00",
                                             "FF0000", "0000FF", "FFFFFF"};

void ts_image_meta_default(ts_image_meta *meta, int nchannels) {
    memset(meta, 0, sizeof *meta);
    if (nchannels > TS_MAX_CHANNELS) nchannels = TS_MAX_CHANNELS;
    if (nchannels < 0) nchannels = 0;
    meta->nchannels = nchannels;
    for (int c = 0; c < nchannels; c++) {
        snprintf(meta->channel_labels[c], sizeof meta->channel_labels[c], "Channel %d", c);
        snprintf(meta->channel_colors[c], sizeof meta->channel_colors[c], "%s",
                 nchannels == 1 ? "FFFFFF" : DEFAULT_COLORS[c % 7]);
    }
    for (int i = 0; i < 5; i++) meta->scale[i] = 1.0;
    meta->ndim = 5;
    for (int i = 0; i < 5; i++) meta->axis_index[i] = i;
    meta->nlevels = 1;
    snprintf(meta->level_paths[0], sizeof meta->level_paths[0], "0");
}

/* Wraps OME content for the version: 0.4 as is (the version is already
 * inside), 0.5 as {"ome": {"version": "0.5", ...}}. Steals `content`. */
static json_t *wrap_attributes(json_t *content, ts_ome_version version) {
    if (version == TS_OME_04) return content;
    json_t *ome = json_object();
    json_object_set_new(ome, "version", json_string("0.5"));
    json_object_update(ome, content);
    json_decref(content);
    json_t *root = json_object();
    json_object_set_new(root, "ome", ome);
    return root;
}

/* The attributes go to the zarr layer as text, which it parses again and
 * writes (indented when small, tz_write_json). */
static ts_status write_group(const char *path, ts_ome_version version, json_t *attrs, ts_error *err) {
    char *text = NULL;
    if (attrs) {
        text = json_dumps(attrs, JSON_PRESERVE_ORDER | JSON_COMPACT);
        json_decref(attrs);
        if (!text) return ts_fail(err, TS_ERR_NOMEM, "%s: out of memory for metadata", path);
    }
    ts_status st = tz_group_create(path, version == TS_OME_04 ? 2 : 3, text, err);
    free(text);
    return st;
}

static ts_status check_version(ts_ome_version v, const char *path, ts_error *err) {
    if (v != TS_OME_04 && v != TS_OME_05)
        return ts_fail(err, TS_ERR_ARG, "%s: OME-Zarr version must be 0.4 or 0.5", path);
    return TS_OK;
}

/* Row names sort A..Z, AA..; column names numerically when they are numbers. */
static int name_cmp(const char *a, const char *b) {
    size_t la = strlen(a), lb = strlen(b);
    if (la != lb) return la < lb ? -1 : 1;
    return strcmp(a, b);
}

static int add_unique(char (*names)[16], int *n, const char *s) {
    for (int i = 0; i < *n; i++)
        if (strcmp(names[i], s) == 0) return i;
    snprintf(names[*n], 16, "%s", s);
    return (*n)++;
}

static void sort_names(char (*names)[16], int n) {
    for (int i = 1; i < n; i++)
        for (int j = i; j > 0 && name_cmp(names[j - 1], names[j]) > 0; j--) {
            char t[16];
            memcpy(t, names[j], 16);
            memcpy(names[j], names[j - 1], 16);
            memcpy(names[j - 1], t, 16);
        }
}

static int find_name(char (*names)[16], int n, const char *s) {
    for (int i = 0; i < n; i++)
        if (strcmp(names[i], s) == 0) return i;
    return -1;
}

ts_status ts_well_split(const char *well, char *row, char *col, ts_error *err) {
    const char *slash = well ? strchr(well, '/') : NULL;
    if (!slash || slash - well >= 16 || strlen(slash + 1) >= 16)
        return ts_fail(err, TS_ERR_ARG, "well '%s' is not ROW/COLUMN (e.g. A/1)", well ? well : "");
    memcpy(row, well, (size_t)(slash - well));
    row[slash - well] = '\0';
    snprintf(col, 16, "%s", slash + 1);
    if (!ome_valid_name(row, 16) || !ome_valid_name(col, 16))
        return ts_fail(err, TS_ERR_ARG, "well '%s': row and column must be alphanumeric", well);
    return TS_OK;
}

static ts_status write_well(const ts_plate_layout *L, int w, const char *row, const char *col,
                            ts_error *err) {
    int np = L->positions_per_well ? L->positions_per_well[w] : L->npositions;
    const char *const *names = L->well_positions ? L->well_positions[w] : L->positions;
    if (np < 1)
        return ts_fail(err, TS_ERR_ARG, "well %s has no positions (a well lists at least one image)",
                       L->wells[w]);
    json_t *images = json_array();
    for (int p = 0; p < np; p++) {
        if (!ome_valid_name(names[p], 32)) {
            json_decref(images);
            return ts_fail(err, TS_ERR_ARG, "position name '%s' in well %s is not alphanumeric",
                           names[p], L->wells[w]);
        }
        json_t *img = json_object();
        json_object_set_new(img, "path", json_string(names[p]));
        json_array_append_new(images, img);
    }
    json_t *well = json_object();
    json_object_set_new(well, "images", images);
    if (L->version == TS_OME_04) json_object_set_new(well, "version", json_string("0.4"));
    json_t *content = json_object();
    json_object_set_new(content, "well", well);
    char path[4200];
    snprintf(path, sizeof path, "%s/%s/%s", L->path, row, col);
    return write_group(path, L->version, wrap_attributes(content, L->version), err);
}

ts_status ts_plate_write_layout(const ts_plate_layout *L, ts_error *err) {
    ts_status st = check_version(L->version, L->path, err);
    if (st != TS_OK) return st;
    if (L->nwells <= 0) return ts_fail(err, TS_ERR_ARG, "%s: a plate needs at least one well", L->path);
    char (*rows)[16] = calloc((size_t)L->nwells, 16);
    char (*cols)[16] = calloc((size_t)L->nwells, 16);
    char (*wr)[16] = calloc((size_t)L->nwells, 16);
    char (*wc)[16] = calloc((size_t)L->nwells, 16);
    json_t *plate = NULL;
    int nr = 0, nc = 0;
    if (!rows || !cols || !wr || !wc) {
        st = ts_fail(err, TS_ERR_NOMEM, "out of memory");
        goto done;
    }
    for (int w = 0; w < L->nwells; w++) {
        if ((st = ts_well_split(L->wells[w], wr[w], wc[w], err)) != TS_OK) goto done;
        for (int v = 0; v < w; v++)
            if (strcmp(wr[v], wr[w]) == 0 && strcmp(wc[v], wc[w]) == 0) {
                st = ts_fail(err, TS_ERR_ARG, "well '%s' is listed twice", L->wells[w]);
                goto done;
            }
        add_unique(rows, &nr, wr[w]);
        add_unique(cols, &nc, wc[w]);
    }
    sort_names(rows, nr);
    sort_names(cols, nc);

    plate = json_object();
    if (L->version == TS_OME_04) json_object_set_new(plate, "version", json_string("0.4"));
    /* strict plates want a name: default to the store's base name */
    const char *base = strrchr(L->path, '/');
    base = base && base[1] ? base + 1 : L->path;
    json_object_set_new(plate, "name", json_string(L->name ? L->name : base));
    json_t *jr = json_array(), *jc = json_array(), *jw = json_array();
    for (int i = 0; i < nr; i++) {
        json_t *o = json_object();
        json_object_set_new(o, "name", json_string(rows[i]));
        json_array_append_new(jr, o);
    }
    for (int i = 0; i < nc; i++) {
        json_t *o = json_object();
        json_object_set_new(o, "name", json_string(cols[i]));
        json_array_append_new(jc, o);
    }
    int maxfields = 0;
    for (int w = 0; w < L->nwells; w++) {
        json_t *o = json_object();
        char wp[40];
        snprintf(wp, sizeof wp, "%s/%s", wr[w], wc[w]);
        json_object_set_new(o, "path", json_string(wp));
        json_object_set_new(o, "rowIndex", json_integer(find_name(rows, nr, wr[w])));
        json_object_set_new(o, "columnIndex", json_integer(find_name(cols, nc, wc[w])));
        json_array_append_new(jw, o);
        int np = L->positions_per_well ? L->positions_per_well[w] : L->npositions;
        if (np > maxfields) maxfields = np;
    }
    int fc = L->field_count > 0 ? L->field_count : maxfields;
    json_t *acq = json_array(), *a0 = json_object();
    json_object_set_new(a0, "id", json_integer(0));
    json_object_set_new(a0, "name", json_string(L->name ? L->name : "acquisition 0"));
    if (fc > 0) json_object_set_new(a0, "maximumfieldcount", json_integer(fc));
    json_array_append_new(acq, a0);
    json_object_set_new(plate, "acquisitions", acq);
    json_object_set_new(plate, "columns", jc);
    json_object_set_new(plate, "rows", jr);
    json_object_set_new(plate, "wells", jw);
    if (fc > 0) json_object_set_new(plate, "field_count", json_integer(fc));
    json_t *content = json_object();
    json_object_set_new(content, "plate", plate);
    plate = NULL;
    if ((st = write_group(L->path, L->version, wrap_attributes(content, L->version), err)) !=
        TS_OK)
        goto done;
    /* zarr needs every level of the hierarchy to be a group: the rows too */
    for (int r = 0; r < nr; r++) {
        char path[4200];
        snprintf(path, sizeof path, "%s/%s", L->path, rows[r]);
        if ((st = tz_group_create(path, L->version == TS_OME_04 ? 2 : 3, NULL, err)) != TS_OK)
            goto done;
    }
    for (int w = 0; w < L->nwells; w++)
        if ((st = write_well(L, w, wr[w], wc[w], err)) != TS_OK) goto done;
done:
    free(rows);
    free(cols);
    free(wr);
    free(wc);
    return st;
}

static json_t *axis(const char *name, const char *type, const char *unit) {
    json_t *a = json_object();
    json_object_set_new(a, "name", json_string(name));
    json_object_set_new(a, "type", json_string(type));
    if (unit && unit[0]) json_object_set_new(a, "unit", json_string(unit));
    return a;
}

ts_status ts_image_write_meta(const char *image_path, ts_ome_version version,
                              const ts_image_meta *meta, int nlevels, ts_error *err) {
    ts_status st = check_version(version, image_path, err);
    if (st != TS_OK) return st;
    if (nlevels < 1 || nlevels > TS_MAX_LEVELS)
        return ts_fail(err, TS_ERR_ARG, "%s: %d resolution levels (1 to %d)", image_path, nlevels,
                       TS_MAX_LEVELS);
    /* jansson has no NaN/infinity and no invalid UTF-8: json_real/json_string
     * return NULL and the key or entry would be left out without a word
     * (an image with 3 scale entries for 5 axes). Refused, naming it. */
    for (int a = 0; a < 5; a++) {
        double s = meta->scale[a] > 0 ? meta->scale[a] : 1.0;
        if (!isfinite(s * (double)(1u << (nlevels - 1))) || (meta->has_translation && !isfinite(meta->translation[a])))
            return ts_fail(err, TS_ERR_ARG, "%s: axis %d's scale %g or translation %g is not a finite number",
                           image_path, a, meta->scale[a], meta->has_translation ? meta->translation[a] : 0.0);
    }
    for (int c = 0; c < meta->nchannels && c < TS_MAX_CHANNELS; c++) {
        json_t *probe = json_string(meta->channel_labels[c]);
        if (!probe) return ts_fail(err, TS_ERR_ARG, "%s: channel %d's name is not UTF-8 text", image_path, c);
        json_decref(probe);
        for (int k = 0; meta->has_window[c] && k < 4; k++)
            if (!isfinite(meta->window[c][k]))
                return ts_fail(err, TS_ERR_ARG, "%s: channel %d's display window is not finite", image_path, c);
    }
    json_t *ms = json_object();
    if (version == TS_OME_04) json_object_set_new(ms, "version", json_string("0.4"));
    const char *slash = strrchr(image_path, '/');
    json_object_set_new(ms, "name", json_string(slash ? slash + 1 : image_path));
    json_t *axes = json_array();
    json_array_append_new(axes, axis("t", "time", meta->time_unit));
    json_array_append_new(axes, axis("c", "channel", NULL));
    json_array_append_new(axes, axis("z", "space", meta->space_unit));
    json_array_append_new(axes, axis("y", "space", meta->space_unit));
    json_array_append_new(axes, axis("x", "space", meta->space_unit));
    json_object_set_new(ms, "axes", axes);
    json_t *ds = json_array();
    for (int l = 0; l < nlevels; l++) {
        json_t *d = json_object(), *sc = json_array(), *t = json_object(), *cts = json_array();
        char p[16];
        snprintf(p, sizeof p, "%d", l);
        double f = (double)(1u << l);
        for (int a = 0; a < 5; a++) {
            double s = meta->scale[a] > 0 ? meta->scale[a] : 1.0;
            json_array_append_new(sc, json_real(a >= 3 ? s * f : s));
        }
        json_object_set_new(t, "type", json_string("scale"));
        json_object_set_new(t, "scale", sc);
        json_array_append_new(cts, t);
        if (meta->has_translation) {
            /* NGFF: at most one translation, after the scale (so in
             * physical units); the same origin at every level */
            json_t *tr = json_object(), *tv = json_array();
            for (int a = 0; a < 5; a++) json_array_append_new(tv, json_real(meta->translation[a]));
            json_object_set_new(tr, "type", json_string("translation"));
            json_object_set_new(tr, "translation", tv);
            json_array_append_new(cts, tr);
        }
        json_object_set_new(d, "path", json_string(p));
        json_object_set_new(d, "coordinateTransformations", cts);
        json_array_append_new(ds, d);
    }
    json_object_set_new(ms, "datasets", ds);
    json_object_set_new(ms, "type", json_string(meta->label_pyramid ? "mode" : "mean"));
    json_t *md = json_object();
    json_object_set_new(md, "description", json_string(meta->label_pyramid ? "2x2 mode in y and x per level (the "
                                                       "most frequent value, ties to the first in raster order)"
                                                                           : "2x2 mean in y and x per level"));
    json_object_set_new(md, "method", json_string("tessera"));
    json_object_set_new(md, "version", json_string(ts_version()));
    json_object_set_new(ms, "metadata", md);
    json_t *mss = json_array();
    json_array_append_new(mss, ms);

    json_t *channels = json_array();
    for (int c = 0; c < meta->nchannels && c < TS_MAX_CHANNELS; c++) {
        json_t *ch = json_object(), *win = json_object();
        char label[64];
        if (meta->channel_labels[c][0]) snprintf(label, sizeof label, "%s", meta->channel_labels[c]);
        else snprintf(label, sizeof label, "Channel %d", c);
        json_object_set_new(ch, "label", json_string(label));
        json_object_set_new(ch, "color", json_string(meta->channel_colors[c][0]
                                                         ? meta->channel_colors[c]
                                                         : DEFAULT_COLORS[c % 7]));
        double wv[4] = {0, 65535, 0, 65535};
        if (meta->has_window[c]) memcpy(wv, meta->window[c], sizeof wv);
        json_object_set_new(win, "min", json_real(wv[0]));
        json_object_set_new(win, "max", json_real(wv[1]));
        json_object_set_new(win, "start", json_real(wv[2]));
        json_object_set_new(win, "end", json_real(wv[3]));
        json_object_set_new(ch, "window", win);
        json_object_set_new(ch, "active", json_true());
        json_object_set_new(ch, "coefficient", json_real(1.0));
        json_object_set_new(ch, "family", json_string("linear"));
        json_object_set_new(ch, "inverted", json_false());
        json_array_append_new(channels, ch);
    }
    json_t *omero = json_object(), *rdefs = json_object();
    json_object_set_new(omero, "channels", channels);
    json_object_set_new(rdefs, "model", json_string("color"));
    json_object_set_new(rdefs, "defaultT", json_integer(0));
    json_object_set_new(rdefs, "defaultZ", json_integer(0));
    json_object_set_new(omero, "rdefs", rdefs);

    json_t *content = json_object();
    json_object_set_new(content, "multiscales", mss);
    if (meta->label_pyramid) json_decref(omero); /* a label image has no display channels */
    else json_object_set_new(content, "omero", omero);
    if (meta->extra_attrs) {
        json_t *extra = json_loads(meta->extra_attrs, 0, NULL);
        if (!json_is_object(extra)) {
            json_decref(extra);
            json_decref(content);
            return ts_fail(err, TS_ERR_INTERNAL, "%s: extra image attributes are not a JSON object", image_path);
        }
        json_object_update(content, extra);
        json_decref(extra);
    }
    return write_group(image_path, version, wrap_attributes(content, version), err);
}
