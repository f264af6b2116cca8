/* What a store holds to be checked. A plate: every position its wells list
 * (input tiles, or the one mosaic image per well of a fuse output), through
 * the OME reader, so a listed well or image that is absent is a problem.
 * An OME image: its levels. A bare array: itself. Any other group: the
 * arrays under it, found by walking its directories in name order (an OME
 * image among them by its levels). */
#include "verify/verify_internal.h"

#include <dirent.h>
#include <errno.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "common/fs.h"

/* A group under a group under ... deeper than this is not walked: no
 * real layout nests so deep, and a loop of bind mounts would not end. */
#define WALK_DEPTH 48

typedef enum { NODE_NONE, NODE_ARRAY, NODE_GROUP, NODE_BAD } node_kind;

static ts_status add_unit(vf_ctx *c, vf_unit_kind kind, int w, int p, const char *rel, ts_error *err) {
    if (c->nunits == c->units_cap) {
        int64_t cap = c->units_cap ? c->units_cap * 2 : 64;
        vf_unit *u = realloc(c->units, (size_t)cap * sizeof *u);
        if (!u) return ts_fail(err, TS_ERR_NOMEM, "out of memory listing %s", c->root);
        c->units = u;
        c->units_cap = cap;
    }
    char *r = strdup(rel);
    if (!r) return ts_fail(err, TS_ERR_NOMEM, "out of memory listing %s", c->root);
    c->units[c->nunits++] = (vf_unit){kind, w, p, r};
    return TS_OK;
}

void vf_units_free(vf_ctx *c) {
    for (int64_t i = 0; i < c->nunits; i++) free(c->units[i].rel);
    free(c->units);
    c->units = NULL;
    c->nunits = c->units_cap = 0;
}

void vf_join(char *out, size_t n, const char *a, const char *b) {
    if (!*b) snprintf(out, n, "%s", a);
    else if (!*a) snprintf(out, n, "%s", b);
    else snprintf(out, n, "%s/%s", a, b);
}

/* The node at dir: its kind and, for a group, its OME attributes (v3
 * attributes.ome, v2 .zattrs), a new reference or NULL. A metadata file
 * that does not parse is NODE_BAD with the reason in why. */
static node_kind read_node(const char *dir, json_t **ome, char *why, size_t nwhy) {
    *ome = NULL;
    char file[4200];
    void *text = NULL;
    size_t size = 0;
    bool found = false;
    ts_error e;
    snprintf(file, sizeof file, "%s/zarr.json", dir);
    if (ts_read_file_opt(file, &text, &size, &found, &e) != TS_OK) {
        snprintf(why, nwhy, "%s", e.message);
        return NODE_BAD;
    }
    bool v3 = found;
    if (!found) {
        snprintf(file, sizeof file, "%s/.zarray", dir);
        if (ts_path_exists(file)) return NODE_ARRAY;
        char zgroup[4200];
        snprintf(zgroup, sizeof zgroup, "%s/.zgroup", dir);
        snprintf(file, sizeof file, "%s/.zattrs", dir);
        if (ts_read_file_opt(file, &text, &size, &found, &e) != TS_OK) {
            snprintf(why, nwhy, "%s", e.message);
            return NODE_BAD;
        }
        if (!found) return ts_path_exists(zgroup) ? NODE_GROUP : NODE_NONE;
    }
    json_error_t je;
    json_t *doc = json_loadb(text, size, 0, &je);
    free(text);
    if (!json_is_object(doc)) {
        snprintf(why, nwhy, "%.700s: %s%s", file, doc ? "not a JSON object" : "invalid JSON: ", doc ? "" : je.text);
        json_decref(doc);
        return NODE_BAD;
    }
    node_kind kind = NODE_GROUP;
    json_t *attrs = doc;
    if (v3) {
        const char *nt = json_string_value(json_object_get(doc, "node_type"));
        if (nt && strcmp(nt, "array") == 0) {
            json_decref(doc);
            return NODE_ARRAY;
        }
        if (!nt || strcmp(nt, "group") != 0) {
            snprintf(why, nwhy, "%.700s: key 'node_type' is %s%.64s%s, expected \"array\" or \"group\"", file,
                     nt ? "\"" : "missing", nt ? nt : "", nt ? "\"" : "");
            json_decref(doc);
            return NODE_BAD;
        }
        attrs = json_object_get(json_object_get(doc, "attributes"), "ome");
    }
    if (json_is_object(attrs)) *ome = json_incref(attrs);
    json_decref(doc);
    return kind;
}

static int cmp_names(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

/* Subdirectory names of dir, sorted (the walk's order is the problems'). */
static ts_status list_dirs(const char *dir, char ***names, size_t *n, ts_error *err) {
    *names = NULL;
    *n = 0;
    DIR *d = opendir(dir);
    if (!d) return ts_fail(err, TS_ERR_IO, "cannot list '%s': %s", dir, strerror(errno));
    size_t cap = 0;
    ts_status st = TS_OK;
    struct dirent *de;
    while (!st && (de = readdir(d))) {
        if (de->d_name[0] == '.') continue;
        char path[4200];
        snprintf(path, sizeof path, "%s/%s", dir, de->d_name);
        struct stat sb;
        if (lstat(path, &sb) != 0 || !S_ISDIR(sb.st_mode)) continue;
        if (*n == cap) {
            cap = cap ? cap * 2 : 16;
            char **nn = realloc(*names, cap * sizeof *nn);
            if (!nn) { st = ts_fail(err, TS_ERR_NOMEM, "out of memory listing '%s'", dir); break; }
            *names = nn;
        }
        if (!((*names)[*n] = strdup(de->d_name))) st = ts_fail(err, TS_ERR_NOMEM, "out of memory listing '%s'", dir);
        else (*n)++;
    }
    closedir(d);
    if (*n) qsort(*names, *n, sizeof **names, cmp_names);
    return st;
}

static vf_where listing(const vf_ctx *c) { return (vf_where){c->nunits, -1, -1, -1}; }

static ts_status walk(vf_ctx *c, const char *rel, int depth, ts_error *err);

/* Walks dir's subdirectories in name order, one level deeper, except those
 * that are levels of the image `levels` (NULL: none skipped). The depth cap
 * is here, for groups and images alike: images nested in images went
 * around it and recursed until the stack overflowed. */
static ts_status walk_children(vf_ctx *c, const char *rel, const char *dir, int depth, const ts_image_meta *levels,
                               ts_error *err) {
    if (depth >= WALK_DEPTH) return TS_OK;
    char **names;
    size_t n;
    ts_status st = list_dirs(dir, &names, &n, err);
    for (size_t i = 0; i < n && !st; i++) {
        bool level = false;
        for (int l = 0; levels && l < levels->nlevels && !level; l++)
            level = strcmp(levels->level_paths[l], names[i]) == 0;
        if (level) continue;
        char child[4096];
        vf_join(child, sizeof child, rel, names[i]);
        st = walk(c, child, depth + 1, err);
    }
    for (size_t i = 0; i < n; i++) free(names[i]);
    free(names);
    return st;
}

/* An OME image met while walking a group: one unit for its levels; its
 * level directories are not walked again (the rest are, e.g. labels). */
static ts_status walk_image(vf_ctx *c, const char *rel, const char *dir, int depth, ts_error *err) {
    ts_image_meta meta;
    ts_ome_version ver;
    ts_error e;
    bool ok = ts_image_read_meta(dir, &ver, &meta, &e) == TS_OK;
    if (!ok) {
        ts_status st = vf_report(c, listing(c), TS_VERIFY_METADATA, rel, "", -1, "%s", e.message);
        if (st) return st;
    } else {
        ts_status st = add_unit(c, VF_IMAGE, -1, -1, rel, err);
        if (st) return st;
    }
    return walk_children(c, rel, dir, depth, ok ? &meta : NULL, err);
}

static ts_status walk(vf_ctx *c, const char *rel, int depth, ts_error *err) {
    char dir[4200], why[1024];
    vf_join(dir, sizeof dir, c->root, rel);
    json_t *ome = NULL;
    node_kind kind = read_node(dir, &ome, why, sizeof why);
    if (kind == NODE_BAD) return vf_report(c, listing(c), TS_VERIFY_METADATA, rel, "", -1, "%s", why);
    if (kind == NODE_ARRAY) return add_unit(c, VF_ARRAY, -1, -1, rel, err);
    bool image = ome && json_object_get(ome, "multiscales");
    json_decref(ome);
    if (image) return walk_image(c, rel, dir, depth, err);
    /* Groups, and directories without metadata (implicit groups of v2
     * stores): the arrays below them are checked. */
    return walk_children(c, rel, dir, depth, NULL, err);
}

static ts_status list_plate(vf_ctx *c, ts_error *err) {
    ts_error e;
    if (ts_plate_open(c->root, &c->plate, &e) != TS_OK)
        return vf_report(c, listing(c), TS_VERIFY_METADATA, "", "", -1, "%s", e.message);
    const ts_plate *pl = c->plate;
    for (int w = 0; w < pl->nwells; w++) {
        const ts_well_info *wi = &pl->wells[w];
        ts_status st;
        if (wi->metadata_missing) {
            st = vf_report(c, listing(c), TS_VERIFY_METADATA, wi->path, "", -1,
                           "the plate lists well '%s' but its group metadata is absent", wi->path);
            if (st) return st;
        }
        for (int p = 0; p < wi->npositions; p++) {
            char rel[96];
            snprintf(rel, sizeof rel, "%s/%s", wi->path, wi->positions[p]);
            if ((st = add_unit(c, VF_POSITION, w, p, rel, err)) != TS_OK) return st;
        }
    }
    return TS_OK;
}

ts_status vf_discover(vf_ctx *c, ts_error *err) {
    struct stat sb;
    if (stat(c->root, &sb) != 0) return ts_fail(err, TS_ERR_IO, "cannot read store '%s': %s", c->root, strerror(errno));
    if (!S_ISDIR(sb.st_mode))
        return ts_fail(err, TS_ERR_FORMAT, "'%s' is a file, not a zarr store (a directory; zip stores are not supported)",
                       c->root);
    json_t *ome = NULL;
    char why[1024];
    node_kind kind = read_node(c->root, &ome, why, sizeof why);
    ts_status st = TS_OK;
    if (kind == NODE_NONE) {
        st = ts_fail(err, TS_ERR_FORMAT, "'%s' is not a zarr store (no zarr.json, .zarray, .zgroup or .zattrs)", c->root);
    } else if (kind == NODE_BAD) {
        st = vf_report(c, listing(c), TS_VERIFY_METADATA, "", "", -1, "%s", why);
    } else if (kind == NODE_ARRAY) {
        st = add_unit(c, VF_ARRAY, -1, -1, "", err);
    } else if (ome && json_object_get(ome, "plate")) {
        st = list_plate(c, err);
    } else if (ome && json_object_get(ome, "multiscales")) {
        st = walk_image(c, "", c->root, 0, err);
    } else {
        st = walk(c, "", 0, err);
    }
    json_decref(ome);
    return st;
}
