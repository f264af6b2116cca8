/* Reading one OME node (plate, well or image group) and its version. */
#include "ome/ome_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/error.h"
#include "common/fs.h"
#include "zarr/zarr.h"

static ts_status parse_json(const char *file, const char *text, size_t size, json_t **out,
                            ts_error *err) {
    json_error_t jerr;
    json_t *doc = json_loadb(text, size, 0, &jerr);
    if (!doc)
        return ts_fail(err, TS_ERR_FORMAT, "%s: invalid JSON at line %d: %s", file, jerr.line,
                       jerr.text);
    if (!json_is_object(doc)) {
        json_decref(doc);
        return ts_fail(err, TS_ERR_FORMAT, "%s: not a JSON object", file);
    }
    *out = doc;
    return TS_OK;
}

static ts_status read_v2(const char *path, ome_node *node, bool *found, ts_error *err);

ts_status ome_node_read(const char *path, ome_node *node, bool *found, ts_error *err) {
    return ome_node_read_as(path, 0, node, found, err);
}

ts_status ome_node_read_as(const char *path, int zarr_format, ome_node *node, bool *found, ts_error *err) {
    memset(node, 0, sizeof *node);
    if (found) *found = true;
    void *data = NULL;
    size_t size = 0;
    bool have = false;
    ts_status st;

    /* A v2 store's groups have no zarr.json: where the caller knows the
     * format, not asking for it saves a failing lookup per group (per tile
     * of a 0.4 plate; on a cluster's file system a round trip each). What
     * is not there falls back to both probes, so the messages stay. */
    if (zarr_format == 2) {
        st = read_v2(path, node, found, err);
        if (st == TS_OK && (!found || *found)) return st;
        memset(node, 0, sizeof *node);
        if (found) *found = true;
    }
    snprintf(node->file, sizeof node->file, "%s/zarr.json", path);
    if ((st = ts_read_file_max(node->file, TZ_MAX_METADATA_BYTES, &data, &size, &have, err)) != TS_OK) return st;
    if (have) {
        node->zarr_format = 3;
        st = parse_json(node->file, data, size, &node->doc, err);
        free(data);
        if (st != TS_OK) return st;
        json_t *nt = json_object_get(node->doc, "node_type");
        if (!json_is_string(nt) || strcmp(json_string_value(nt), "group") != 0) {
            st = ts_fail(err, TS_ERR_FORMAT, "%s: key 'node_type' is %s, expected \"group\"",
                         node->file, json_is_string(nt) ? json_string_value(nt) : "missing");
            ome_node_free(node);
            return st;
        }
        json_t *zf = json_object_get(node->doc, "zarr_format");
        if (!json_is_integer(zf) || json_integer_value(zf) != 3) {
            ome_node_free(node);
            return ts_fail(err, TS_ERR_FORMAT, "%s: key 'zarr_format' is not 3", node->file);
        }
        json_t *attrs = json_object_get(node->doc, "attributes");
        node->ome = attrs ? json_object_get(attrs, "ome") : NULL;
        if (!json_is_object(node->ome)) {
            ome_node_free(node);
            return ts_fail(err, TS_ERR_FORMAT,
                           "%s: key 'attributes.ome' is missing: not an OME-Zarr 0.5 group",
                           node->file);
        }
        return TS_OK;
    }
    return read_v2(path, node, found, err);
}

static ts_status read_v2(const char *path, ome_node *node, bool *found, ts_error *err) {
    void *data = NULL;
    size_t size = 0;
    bool have = false;
    ts_status st;
    /* zarr v2: .zattrs carries the attributes; .zgroup says it is a group.
     * Partial copies of real stores sometimes keep only .zattrs, so .zattrs
     * alone is accepted; a .zarray there is not. */
    char zarray[4200];
    snprintf(zarray, sizeof zarray, "%s/.zarray", path);
    snprintf(node->file, sizeof node->file, "%s/.zattrs", path);
    if ((st = ts_read_file_max(node->file, TZ_MAX_METADATA_BYTES, &data, &size, &have, err)) != TS_OK) return st;
    if (!have && ts_path_exists(zarray))
        return ts_fail(err, TS_ERR_FORMAT, "%s: is an array (.zarray), expected a group", path);
    if (!have) {
        char zgroup[4200];
        snprintf(zgroup, sizeof zgroup, "%s/.zgroup", path);
        if (ts_path_exists(zgroup))
            return ts_fail(err, TS_ERR_FORMAT, "%s: group has no .zattrs: no OME metadata", path);
        if (found) {
            *found = false;
            return TS_OK;
        }
        return ts_fail(err, TS_ERR_FORMAT,
                       "%s: no zarr.json or .zattrs: not a zarr group (missing or not OME-Zarr)",
                       path);
    }
    if (ts_path_exists(zarray)) {
        free(data);
        return ts_fail(err, TS_ERR_FORMAT, "%s: is an array (.zarray), expected a group", path);
    }
    node->zarr_format = 2;
    st = parse_json(node->file, data, size, &node->doc, err);
    free(data);
    if (st != TS_OK) return st;
    node->ome = node->doc;
    return TS_OK;
}

void ome_node_free(ome_node *node) {
    if (node->doc) json_decref(node->doc);
    node->doc = node->ome = NULL;
}

ts_status ome_node_get(const ome_node *node, const char *key, json_type type, json_t **out,
                       ts_error *err) {
    json_t *v = json_object_get(node->ome, key);
    const char *prefix = node->zarr_format == 3 ? "attributes.ome." : "";
    if (!v)
        return ts_fail(err, TS_ERR_FORMAT, "%s: key '%s%s' is missing", node->file, prefix, key);
    if (json_typeof(v) != type)
        return ts_fail(err, TS_ERR_FORMAT, "%s: key '%s%s' is not %s", node->file, prefix, key,
                       type == JSON_ARRAY ? "an array" : type == JSON_OBJECT ? "an object"
                                                                            : "of the right type");
    *out = v;
    return TS_OK;
}

static ts_status parse_version(const ome_node *node, const char *keyname, json_t *v,
                               ts_ome_version *out, ts_error *err) {
    if (!v)
        return ts_fail(err, TS_ERR_FORMAT, "%s: key '%s' is missing: unknown OME-Zarr version",
                       node->file, keyname);
    if (!json_is_string(v))
        return ts_fail(err, TS_ERR_FORMAT, "%s: key '%s' is not a string", node->file, keyname);
    const char *s = json_string_value(v);
    ts_ome_version ver = strcmp(s, "0.4") == 0 ? TS_OME_04
                         : strcmp(s, "0.5") == 0 ? TS_OME_05
                                                 : TS_OME_UNKNOWN;
    if (ver == TS_OME_UNKNOWN)
        return ts_fail(err, TS_ERR_UNSUPPORTED,
                       "%s: key '%s' is \"%s\": unsupported OME-Zarr version (0.4 and 0.5 are)",
                       node->file, keyname, s);
    if ((ver == TS_OME_04) != (node->zarr_format == 2))
        return ts_fail(err, TS_ERR_FORMAT,
                       "%s: key '%s' is \"%s\" but the store is zarr v%d (0.4 is zarr v2, 0.5 "
                       "zarr v3)",
                       node->file, keyname, s, node->zarr_format);
    *out = ver;
    return TS_OK;
}

ts_status ome_node_version(const ome_node *node, const char *key, ts_ome_version *out,
                           ts_error *err) {
    if (node->zarr_format == 3)
        return parse_version(node, "attributes.ome.version", json_object_get(node->ome, "version"),
                             out, err);
    /* 0.4: the version sits inside the named object (multiscales: in each
     * entry; the first one counts). */
    json_t *obj = json_object_get(node->ome, key);
    if (json_is_array(obj)) obj = json_array_get(obj, 0);
    char keyname[96];
    snprintf(keyname, sizeof keyname, "%s%s.version", key,
             strcmp(key, "multiscales") == 0 ? "[0]" : "");
    if (!json_is_object(obj))
        return ts_fail(err, TS_ERR_FORMAT, "%s: key '%s' is missing", node->file, key);
    return parse_version(node, keyname, json_object_get(obj, "version"), out, err);
}

ts_status ome_node_version_v2opt(const ome_node *node, const char *key, ts_ome_version fallback,
                                 ts_ome_version *out, ts_error *err) {
    if (node->zarr_format == 2) {
        json_t *obj = json_object_get(node->ome, key);
        if (json_is_array(obj)) obj = json_array_get(obj, 0);
        if (json_is_object(obj) && !json_object_get(obj, "version")) {
            *out = fallback;
            return TS_OK;
        }
    }
    return ome_node_version(node, key, out, err);
}

bool ome_valid_name(const char *s, size_t n) {
    size_t len = strlen(s);
    if (len == 0 || len >= n) return false;
    for (size_t i = 0; i < len; i++) {
        char c = s[i];
        if (!((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9')))
            return false;
    }
    return true;
}
