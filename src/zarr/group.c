/* Groups and node attributes (v2 .zgroup/.zattrs, v3 zarr.json). */
#include "zarr/zarr_internal.h"
#include "common/fs.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

ts_status tz_no_node(const char *path, const char *what, ts_error *err) {
    /* A zip store, or a node inside one: some prefix of the path is a file. */
    char prefix[4096];
    size_t n = strlen(path);
    if (n >= sizeof prefix) n = sizeof prefix - 1;
    for (size_t i = 1; i <= n; i++) {
        if (i < n && path[i] != '/') continue;
        memcpy(prefix, path, i);
        prefix[i] = '\0';
        if (ts_path_exists(prefix) && !ts_is_dir(prefix)) {
            if (i >= 4 && strcmp(prefix + i - 4, ".zip") == 0)
                return ts_fail(err, TS_ERR_UNSUPPORTED, "'%s': zip stores are not supported (%s is a zip file); unzip it first",
                               path, prefix);
            break;
        }
    }
    return ts_fail(err, TS_ERR_FORMAT, "no zarr %s at '%s'", what, path);
}

/* Documents past this size are written compact: a well of 170,000
 * positions is ~3 MB so instead of ~9 MB indented, and reads faster;
 * small documents stay indented for people reading them. */
#define TZ_JSON_INDENT_MAX ((size_t)16 << 10)

ts_status tz_write_json(const char *dir, const char *name, json_t *doc, ts_error *err) {
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    char *text = json_dumps(doc, JSON_COMPACT);
    if (text && strlen(text) <= TZ_JSON_INDENT_MAX) {
        free(text);
        text = json_dumps(doc, JSON_INDENT(2));
    }
    if (!text) return ts_fail(err, TS_ERR_NOMEM, "out of memory writing '%s'", path);
    ts_status st = ts_write_file_atomic(path, text, strlen(text), err);
    free(text);
    return st;
}

ts_status tz_group_create(const char *path, int zarr_format, const char *attributes_json, ts_error *err) {
    json_t *attrs;
    ts_status st = tz_parse_attributes(path, attributes_json, &attrs, err);
    if (st) return st;
    json_t *doc = json_object();
    if (zarr_format == 2) {
        json_object_set_new(doc, "zarr_format", json_integer(2));
        st = tz_write_json(path, ".zgroup", doc, err);
        if (!st) st = tz_write_json(path, ".zattrs", attrs, err);
        json_decref(attrs);
    } else {
        json_object_set_new(doc, "zarr_format", json_integer(3));
        json_object_set_new(doc, "node_type", json_string("group"));
        json_object_set_new(doc, "attributes", attrs);
        st = tz_write_json(path, "zarr.json", doc, err);
    }
    json_decref(doc);
    return st;
}

/* (Metadata documents are read up to TZ_MAX_METADATA_BYTES, zarr.h.) */
ts_status tz_load_json(const char *path, json_t **out, bool *found, ts_error *err) {
    void *text = NULL;
    size_t size = 0;
    *out = NULL;
    ts_status st = ts_read_file_max(path, TZ_MAX_METADATA_BYTES, &text, &size, found, err);
    if (st == TS_ERR_CORRUPT) return ts_fail_context(err, TS_ERR_FORMAT, "zarr metadata");
    if (st || !*found) return st;
    json_error_t je;
    json_t *doc = json_loadb(text, size, 0, &je);
    free(text);
    if (!doc || !json_is_object(doc)) {
        ts_status st = doc ? ts_fail(err, TS_ERR_FORMAT, "%s: not a JSON object", path)
                           : ts_fail(err, TS_ERR_FORMAT, "%s: invalid JSON at line %d: %s", path, je.line, je.text);
        json_decref(doc);
        return st;
    }
    *out = doc;
    return TS_OK;
}

ts_status tz_node_attributes(const char *path, int *zarr_format, char **attributes_json, ts_error *err) {
    *attributes_json = NULL;
    char p[4096];
    json_t *doc;
    bool found;
    snprintf(p, sizeof p, "%s/zarr.json", path);
    ts_status st = tz_load_json(p, &doc, &found, err);
    if (st) return st;
    json_t *attrs = NULL;
    if (found) {
        if (json_integer_value(json_object_get(doc, "zarr_format")) != 3) {
            json_decref(doc);
            return ts_fail(err, TS_ERR_FORMAT, "%s: zarr_format is not 3", p);
        }
        *zarr_format = 3;
        attrs = json_object_get(doc, "attributes");
    } else {
        snprintf(p, sizeof p, "%s/.zgroup", path);
        bool is_node = ts_path_exists(p);
        snprintf(p, sizeof p, "%s/.zarray", path);
        is_node = is_node || ts_path_exists(p);
        if (!is_node) return tz_no_node(path, "group or array (no zarr.json, .zgroup or .zarray)", err);
        *zarr_format = 2;
        snprintf(p, sizeof p, "%s/.zattrs", path);
        st = tz_load_json(p, &doc, &found, err);
        if (st) return st;
        attrs = doc;
    }
    *attributes_json = json_is_object(attrs) ? json_dumps(attrs, JSON_COMPACT) : strdup("{}");
    json_decref(doc);
    if (!*attributes_json) return ts_fail(err, TS_ERR_NOMEM, "out of memory reading '%s'", path);
    return TS_OK;
}
