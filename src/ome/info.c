/* ts_info_json: a description of a plate or image store as JSON. The plate
 * part comes from the plate and well metadata only; the image part from one
 * representative position (the first whose metadata reads), since every
 * position of an acquisition shares tile shape, dtype and channels. What
 * does not read (the image's metadata, a level's array) is described as an
 * "error" where it belongs and listed in the top-level "errors". */
#include "ome/ome_internal.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/error.h"
#include "shifts/shifts.h"

static json_t *int_list(const int64_t *v, int n) {
    json_t *a = json_array();
    for (int i = 0; i < n; i++) json_array_append_new(a, json_integer(v[i]));
    return a;
}

static json_t *codec_desc(const tz_codec *c) {
    json_t *o = json_object();
    switch (c->id) {
    case TZ_CODEC_BYTES:
        json_object_set_new(o, "name", json_string("bytes"));
        json_object_set_new(o, "endian", json_string(c->big_endian ? "big" : "little"));
        break;
    case TZ_CODEC_TRANSPOSE: json_object_set_new(o, "name", json_string("transpose")); break;
    case TZ_CODEC_BLOSC:
        json_object_set_new(o, "name", json_string("blosc"));
        json_object_set_new(o, "cname", json_string(c->cname));
        json_object_set_new(o, "clevel", json_integer(c->level));
        json_object_set_new(o, "shuffle", json_string(c->shuffle == TZ_SHUFFLE_BIT ? "bitshuffle"
                                                      : c->shuffle == TZ_SHUFFLE_BYTE ? "shuffle"
                                                                                      : "noshuffle"));
        break;
    case TZ_CODEC_ZSTD:
        json_object_set_new(o, "name", json_string("zstd"));
        json_object_set_new(o, "level", json_integer(c->level));
        break;
    case TZ_CODEC_GZIP:
        json_object_set_new(o, "name", json_string("gzip"));
        json_object_set_new(o, "level", json_integer(c->level));
        break;
    case TZ_CODEC_ZLIB:
        json_object_set_new(o, "name", json_string("zlib"));
        json_object_set_new(o, "level", json_integer(c->level));
        break;
    case TZ_CODEC_CRC32C: json_object_set_new(o, "name", json_string("crc32c")); break;
    case TZ_CODEC_SHARDING: json_object_set_new(o, "name", json_string("sharding_indexed")); break;
    default: json_object_set_new(o, "name", json_string("unknown")); break;
    }
    return o;
}

static json_t *chain_desc(const tz_codec_chain *ch) {
    json_t *a = json_array();
    for (int i = 0; i < ch->n; i++) json_array_append_new(a, codec_desc(&ch->c[i]));
    return a;
}

static json_t *array_desc(const tz_array *arr) {
    const tz_array_meta *m = tz_array_get_meta(arr);
    json_t *o = json_object();
    json_object_set_new(o, "zarr_format", json_integer(m->zarr_format));
    json_object_set_new(o, "shape", int_list(m->shape, m->ndim));
    json_object_set_new(o, "dtype", json_string(ts_dtype_name(m->dtype)));
    json_object_set_new(o, "fill_value", json_real(m->fill_value));
    if (m->sharded) {
        json_object_set_new(o, "shard_shape", int_list(m->chunk, m->ndim));
        json_object_set_new(o, "chunk_shape", int_list(m->sharding.inner_chunk, m->ndim));
        json_object_set_new(o, "codecs", chain_desc(&m->sharding.codecs));
        json_object_set_new(o, "index_codecs", chain_desc(&m->sharding.index_codecs));
    } else {
        json_object_set_new(o, "chunk_shape", int_list(m->chunk, m->ndim));
        json_object_set_new(o, "codecs", chain_desc(&m->codecs));
    }
    json_object_set_new(o, "sharded", json_boolean(m->sharded));
    int64_t grid[TZ_MAX_DIM];
    tz_array_grid(arr, grid);
    /* A shape near the int64 limit in chunks of 1 has more blocks than
     * int64 counts: reported as unknown (null). */
    int64_t blocks = 1;
    bool overflow = false;
    for (int d = 0; d < m->ndim && !overflow; d++) overflow = __builtin_mul_overflow(blocks, grid[d], &blocks);
    json_object_set_new(o, "blocks", overflow ? json_null() : json_integer(blocks));
    json_object_set_new(o, "separator", json_stringn(&m->separator, 1));
    return o;
}

static json_t *image_desc(const char *image_path, json_t *out) {
    ts_image_meta meta;
    ts_error err = {0};
    ts_ome_version ver;
    if (ts_image_read_meta(image_path, &ver, &meta, &err) != TS_OK) {
        json_object_set_new(out, "error", json_string(err.message));
        return out;
    }
    char axes[6] = {0};
    for (int a = 0; a < 5; a++)
        if (meta.axis_index[a] >= 0) axes[meta.axis_index[a]] = "tczyx"[a];
    json_object_set_new(out, "axes", json_string(axes));
    json_t *scale = json_array();
    for (int a = 0; a < 5; a++)
        if (meta.axis_index[a] >= 0) json_array_append_new(scale, json_real(meta.scale[a]));
    json_object_set_new(out, "scale", scale);
    if (meta.space_unit[0]) json_object_set_new(out, "space_unit", json_string(meta.space_unit));
    if (meta.time_unit[0]) json_object_set_new(out, "time_unit", json_string(meta.time_unit));
    json_t *chs = json_array();
    for (int c = 0; c < meta.nchannels; c++) {
        json_t *ch = json_object();
        json_object_set_new(ch, "label", json_string(meta.channel_labels[c]));
        if (meta.channel_colors[c][0])
            json_object_set_new(ch, "color", json_string(meta.channel_colors[c]));
        if (meta.has_window[c])
            json_object_set_new(ch, "window", json_pack("[ff]", meta.window[c][2], meta.window[c][3]));
        json_array_append_new(chs, ch);
    }
    json_object_set_new(out, "channels", chs);
    json_t *levels = json_array();
    for (int l = 0; l < meta.nlevels; l++) {
        json_t *lv = json_object();
        json_object_set_new(lv, "path", json_string(meta.level_paths[l]));
        tz_array *arr = NULL;
        if (ts_image_open_array(image_path, &meta, l, &arr, &err) == TS_OK) {
            json_t *ad = array_desc(arr);
            json_object_update(lv, ad);
            json_decref(ad);
            if (l == 0) {
                const tz_array_meta *m = tz_array_get_meta(arr);
                json_object_set_new(out, "tile_shape",
                                    json_pack("[II]", (json_int_t)m->shape[meta.axis_index[3]],
                                              (json_int_t)m->shape[meta.axis_index[4]]));
                json_object_set_new(out, "dtype", json_string(ts_dtype_name(m->dtype)));
            }
            tz_array_close(arr);
        } else {
            json_object_set_new(lv, "error", json_string(err.message));
        }
        json_array_append_new(levels, lv);
    }
    json_object_set_new(out, "levels", levels);
    /* Its NGFF label images (labels/<name>): name, dtype, levels. */
    char names[TS_MAX_LABEL_IMAGES][TS_LABEL_NAME_MAX];
    int nl = 0;
    json_t *labels = json_array();
    if (ts_labels_list(image_path, names, TS_MAX_LABEL_IMAGES, &nl, &err) != TS_OK)
        json_object_set_new(out, "labels_error", json_string(err.message));
    for (int k = 0; k < nl; k++) {
        char lp[4400];
        snprintf(lp, sizeof lp, "%s/labels/%s", image_path, names[k]);
        json_t *lo = json_pack("{s:s}", "name", names[k]);
        ts_image_meta lm;
        tz_array *arr = NULL;
        if (ts_image_read_meta(lp, NULL, &lm, &err) == TS_OK && ts_image_open_array(lp, &lm, 0, &arr, &err) == TS_OK) {
            json_object_set_new(lo, "dtype", json_string(ts_dtype_name(tz_array_get_meta(arr)->dtype)));
            json_object_set_new(lo, "levels", json_integer(lm.nlevels));
            tz_array_close(arr);
        } else {
            json_object_set_new(lo, "error", json_string(err.message));
        }
        json_array_append_new(labels, lo);
    }
    json_object_set_new(out, "labels", labels);
    return out;
}

static json_t *plate_desc(const ts_plate *plate) {
    json_t *o = json_object();
    json_object_set_new(o, "kind", json_string("plate"));
    json_object_set_new(o, "format", json_string(plate->version == TS_OME_04 ? "0.4" : "0.5"));
    json_object_set_new(o, "zarr_format", json_integer(plate->version == TS_OME_04 ? 2 : 3));
    json_object_set_new(o, "name", json_string(plate->name));
    json_object_set_new(o, "rows", json_integer(plate->nrows));
    json_object_set_new(o, "columns", json_integer(plate->ncols));
    json_object_set_new(o, "field_count", json_integer(plate->field_count));
    json_t *wells = json_array();
    int64_t total = 0;
    int rep_w = -1;
    for (int w = 0; w < plate->nwells; w++) {
        const ts_well_info *wi = &plate->wells[w];
        json_t *jw = json_object();
        json_object_set_new(jw, "path", json_string(wi->path));
        json_object_set_new(jw, "positions", json_integer(wi->npositions));
        total += wi->npositions;
        if (wi->metadata_missing) json_object_set_new(jw, "metadata_missing", json_true());
        if (wi->npositions > 0) {
            json_object_set_new(jw, "first", json_string(wi->positions[0]));
            json_object_set_new(jw, "last", json_string(wi->positions[wi->npositions - 1]));
            /* grid extent when names follow XXXYYY */
            int gx, gy, x0 = 1 << 30, x1 = -1, y0 = 1 << 30, y1 = -1;
            bool grid = true;
            for (int p = 0; p < wi->npositions && grid; p++) {
                grid = ts_position_grid(wi->positions[p], false, &gx, &gy);
                if (!grid) break;
                if (gx < x0) x0 = gx;
                if (gx > x1) x1 = gx;
                if (gy < y0) y0 = gy;
                if (gy > y1) y1 = gy;
            }
            if (grid)
                json_object_set_new(jw, "grid_xxxyyy",
                                    json_pack("{s[ii]s[ii]}", "x", x0, x1, "y", y0, y1));
            if (rep_w < 0) rep_w = w;
        }
        json_array_append_new(wells, jw);
    }
    json_object_set_new(o, "nwells", json_integer(plate->nwells));
    json_object_set_new(o, "npositions", json_integer(total));
    json_object_set_new(o, "wells", wells);
    if (rep_w >= 0) {
        /* the first position whose metadata reads describes them all
         * (partial copies of real plates lack some); if none of the first
         * few reads, the first failure is reported */
        json_t *img = NULL, *first_fail = NULL;
        int tries = 0;
        for (int w = rep_w; w < plate->nwells && !img && tries < 64; w++)
            for (int p = 0; p < plate->wells[w].npositions && !img && tries < 64; p++, tries++) {
                char path[4200], rel[80];
                ts_plate_image_path(plate, w, p, path, sizeof path);
                json_t *d = image_desc(path, json_object());
                snprintf(rel, sizeof rel, "%s/%s", plate->wells[w].path,
                         plate->wells[w].positions[p]);
                json_object_set_new(d, "path", json_string(rel));
                if (!json_object_get(d, "error")) img = d;
                else if (!first_fail) first_fail = d;
                else json_decref(d);
            }
        if (img) {
            json_object_set_new(o, "image", img);
            if (first_fail) json_decref(first_fail);
        } else if (first_fail) {
            json_object_set_new(o, "image", first_fail);
        }
    }
    return o;
}

/* Every error of the description (the image's, each level's) in one list,
 * so that a caller (tessera info's exit status, a pipeline reading --json)
 * need not walk the tree to learn that something did not read. */
static json_t *errors_of(json_t *root) {
    json_t *errors = json_array();
    json_t *img = json_object_get(root, "image");
    json_t *e = json_object_get(img, "error");
    if (json_is_string(e)) json_array_append(errors, e);
    size_t i;
    json_t *lv;
    json_array_foreach(json_object_get(img, "levels"), i, lv) {
        e = json_object_get(lv, "error");
        if (json_is_string(e))
            json_array_append_new(errors, json_sprintf("level %s: %s", json_string_value(json_object_get(lv, "path")),
                                                       json_string_value(e)));
    }
    e = json_object_get(img, "labels_error");
    if (json_is_string(e)) json_array_append(errors, e);
    json_array_foreach(json_object_get(img, "labels"), i, lv) {
        e = json_object_get(lv, "error");
        if (json_is_string(e))
            json_array_append_new(errors, json_sprintf("label image %s: %s",
                                                       json_string_value(json_object_get(lv, "name")),
                                                       json_string_value(e)));
    }
    /* A well the plate lists whose group is not on disk: estimate and fuse
     * refuse such a plate, so info says so too. */
    json_t *w;
    json_array_foreach(json_object_get(root, "wells"), i, w) {
        if (json_is_true(json_object_get(w, "metadata_missing")))
            json_array_append_new(errors, json_sprintf("well %s is listed in plate.wells but its group has no "
                                                       "metadata on disk", json_string_value(json_object_get(w, "path"))));
    }
    return errors;
}

ts_status ts_info_json(const char *store, char **json_out, ts_error *err) {
    *json_out = NULL;
    ome_node node;
    ts_status st = ome_node_read(store, &node, NULL, err);
    if (st != TS_OK) return st;
    bool is_plate = json_object_get(node.ome, "plate") != NULL;
    bool is_image = json_object_get(node.ome, "multiscales") != NULL;
    bool is_bf2raw = json_object_get(node.ome, "bioformats2raw.layout") != NULL;
    ts_ome_version bf_ver = TS_OME_04;
    if (is_bf2raw && node.zarr_format == 3 &&
        (st = ome_node_version(&node, "bioformats2raw.layout", &bf_ver, err)) != TS_OK) {
        ome_node_free(&node);
        return st;
    }
    ome_node_free(&node);
    json_t *root = NULL;
    if (is_plate) {
        ts_plate *plate = NULL;
        if ((st = ts_plate_open(store, &plate, err)) != TS_OK) return st;
        root = plate_desc(plate);
        ts_plate_close(plate);
    } else if (is_image) {
        ts_image_meta meta;
        ts_ome_version ver;
        if ((st = ts_image_read_meta(store, &ver, &meta, err)) != TS_OK) return st;
        root = json_object();
        json_object_set_new(root, "kind", json_string("image"));
        json_object_set_new(root, "format", json_string(ver == TS_OME_04 ? "0.4" : "0.5"));
        json_object_set_new(root, "image", image_desc(store, json_object()));
    } else if (is_bf2raw) {
        /* a bioformats2raw container: series images at "0", "1", ... */
        root = json_object();
        json_object_set_new(root, "kind", json_string("bioformats2raw"));
        json_object_set_new(root, "format", json_string(bf_ver == TS_OME_04 ? "0.4" : "0.5"));
        char first[4200];
        snprintf(first, sizeof first, "%s/0", store);
        json_t *img = image_desc(first, json_object());
        json_object_set_new(img, "path", json_string("0"));
        json_object_set_new(root, "image", img);
    } else {
        return ts_fail(err, TS_ERR_FORMAT,
                       "%s: neither an HCS plate (key 'plate') nor an image (key 'multiscales')",
                       store);
    }
    json_object_set_new(root, "store", json_string(store));
    json_object_set_new(root, "errors", errors_of(root));
    *json_out = json_dumps(root, JSON_PRESERVE_ORDER | JSON_INDENT(2));
    json_decref(root);
    if (!*json_out) return ts_fail(err, TS_ERR_NOMEM, "out of memory");
    return TS_OK;
}
