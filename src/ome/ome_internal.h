/* Shared by the OME layer's files: reading one node's OME attributes. The
 * group metadata files are read directly (not through tz_node_attributes) so
 * that a listing parses each small file once and can check node_type. */
#ifndef TS_OME_INTERNAL_H
#define TS_OME_INTERNAL_H

#include <jansson.h>
#include <stdbool.h>

#include "ome/ome.h"

typedef struct ome_node {
    json_t *doc;        /* the parsed file (v3 zarr.json or v2 .zattrs) */
    json_t *ome;        /* the OME attributes: v3 attributes.ome, v2 .zattrs root */
    int zarr_format;    /* 2 or 3 */
    char file[4200];    /* metadata file read, for messages */
} ome_node;

/* Reads the group metadata at `path`. found = false (and TS_OK) when neither
 * zarr.json nor .zattrs/.zgroup exists, if found is not NULL; otherwise that
 * is a TS_ERR_FORMAT naming the path. A v3 node that is not a group, or
 * lacks attributes.ome, is a TS_ERR_FORMAT naming the file and key. */
ts_status ome_node_read(const char *path, ome_node *node, bool *found, ts_error *err);
/* The same where the store's zarr format is known (2 or 3; 0: either): a v2
 * group is read without first asking for a zarr.json (a failing lookup per
 * group), falling back to both probes when it is not there. */
ts_status ome_node_read_as(const char *path, int zarr_format, ome_node *node, bool *found, ts_error *err);
void ome_node_free(ome_node *node);

/* The OME version of a node, given the object key that carries it in 0.4
 * ("plate", "well", "multiscales"); checks it against the zarr format:
 * 0.4 needs zarr v2, 0.5 zarr v3. Missing or unknown: an error naming the
 * file and key. */
ts_status ome_node_version(const ome_node *node, const char *key, ts_ome_version *out,
                           ts_error *err);

/* Like ome_node_version, but a zarr v2 node without the version key (the
 * 0.4 well and image schemas make it optional) gets `fallback`. */
ts_status ome_node_version_v2opt(const ome_node *node, const char *key, ts_ome_version fallback,
                                 ts_ome_version *out, ts_error *err);

/* The value of `key` in the node's OME attributes, required to be of type
 * `type` (JSON_OBJECT, JSON_ARRAY); error naming the file and key. */
ts_status ome_node_get(const ome_node *node, const char *key, json_type type, json_t **out,
                       ts_error *err);

/* Position/well path components: [A-Za-z0-9]+, shorter than n. */
bool ome_valid_name(const char *s, size_t n);

/* Parses multiscales + omero of an already read image node. */
ts_status ome_parse_image_meta(const ome_node *node, ts_image_meta *meta, ts_error *err);

#endif
