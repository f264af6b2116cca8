/* OME-NGFF labels: the `labels` group of an image ({"labels": ["cells"]})
 * and the `image-label` metadata of each label image (a multiscales image
 * at labels/<name>). Read to find the label images of a plate's fields,
 * written for the label images fuse makes of them. */
#include "ome/ome_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/error.h"

/* A label name is a path component: no separator, not "." or "..", no
 * control characters, short enough for the mosaic's paths. */
static bool valid_label_name(const char *s) {
    size_t n = strlen(s);
    if (n == 0 || n >= TS_LABEL_NAME_MAX || !strcmp(s, ".") || !strcmp(s, "..")) return false;
    for (size_t i = 0; i < n; i++)
        if (s[i] == '/' || s[i] == '\\' || (unsigned char)s[i] < 0x20) return false;
    return true;
}

ts_status ts_labels_list(const char *image_path, char (*names)[TS_LABEL_NAME_MAX], int max, int *n,
                         ts_error *err) {
    *n = 0;
    char path[4300];
    snprintf(path, sizeof path, "%s/labels", image_path);
    ome_node node;
    bool found = false;
    ts_status st = ome_node_read(path, &node, &found, err);
    if (st != TS_OK || !found) return st;
    json_t *list = NULL;
    st = ome_node_get(&node, "labels", JSON_ARRAY, &list, err);
    size_t i;
    json_t *v;
    if (st == TS_OK) json_array_foreach(list, i, v) {
        const char *s = json_is_string(v) ? json_string_value(v) : NULL;
        if (!s || !valid_label_name(s)) {
            st = ts_fail(err, TS_ERR_FORMAT, "%s: key 'labels[%zu]' is not a label name (a path component of "
                         "under %d bytes)", node.file, i, TS_LABEL_NAME_MAX);
            break;
        }
        if (*n == max) {
            st = ts_fail(err, TS_ERR_UNSUPPORTED, "%s: more than %d label images", node.file, max);
            break;
        }
        for (int k = 0; k < *n && st == TS_OK; k++)
            if (!strcmp(names[k], s)) st = ts_fail(err, TS_ERR_FORMAT, "%s: key 'labels' lists '%s' twice", node.file, s);
        if (st != TS_OK) break;
        snprintf(names[(*n)++], TS_LABEL_NAME_MAX, "%s", s);
    }
    ome_node_free(&node);
    return st;
}

char *ts_label_attrs(const char *source_label_path, ts_ome_version version, const char *source_image) {
    json_t *label = NULL;
    ome_node node;
    bool found = false;
    ts_error ignored;
    /* The input's colours and properties name label values, which the
     * mosaic keeps: they carry over as they are. */
    if (source_label_path && ome_node_read(source_label_path, &node, &found, &ignored) == TS_OK && found) {
        json_t *il = json_object_get(node.ome, "image-label");
        if (json_is_object(il)) label = json_deep_copy(il);
        ome_node_free(&node);
    }
    if (!label) label = json_object();
    /* The version is the output's (0.4 inside image-label, 0.5 outside). */
    json_object_del(label, "version");
    if (version == TS_OME_04) json_object_set_new(label, "version", json_string("0.4"));
    json_object_del(label, "source");
    if (source_image) {
        json_t *src = json_object();
        json_object_set_new(src, "image", json_string(source_image));
        json_object_set_new(label, "source", src);
    }
    json_t *attrs = json_object();
    json_object_set_new(attrs, "image-label", label);
    char *text = json_dumps(attrs, JSON_PRESERVE_ORDER | JSON_COMPACT);
    json_decref(attrs);
    return text;
}

ts_status ts_labels_write_group(const char *image_path, ts_ome_version version,
                                const char (*names)[TS_LABEL_NAME_MAX], int n, ts_error *err) {
    json_t *list = json_array();
    for (int i = 0; i < n; i++) json_array_append_new(list, json_string(names[i]));
    json_t *attrs = json_object();
    if (version == TS_OME_04) {
        json_object_set_new(attrs, "labels", list);
    } else {
        json_t *ome = json_object();
        json_object_set_new(ome, "version", json_string("0.5"));
        json_object_set_new(ome, "labels", list);
        json_object_set_new(attrs, "ome", ome);
    }
    char *text = json_dumps(attrs, JSON_PRESERVE_ORDER | JSON_COMPACT);
    json_decref(attrs);
    char path[4300];
    snprintf(path, sizeof path, "%s/labels", image_path);
    if (!text) return ts_fail(err, TS_ERR_NOMEM, "%s: out of memory for metadata", path);
    ts_status st = tz_group_create(path, version == TS_OME_04 ? 2 : 3, text, err);
    free(text);
    return st;
}

bool ts_image_is_label(const char *image_path) {
    ome_node node;
    bool found = false;
    ts_error ignored;
    if (ome_node_read(image_path, &node, &found, &ignored) != TS_OK || !found) return false;
    bool is = json_is_object(json_object_get(node.ome, "image-label"));
    ome_node_free(&node);
    return is;
}
