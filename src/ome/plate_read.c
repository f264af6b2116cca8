/* Opening an HCS plate: wells from plate.wells, positions from each well's
 * images list. No position's metadata is read here, so a plate of 170,000
 * positions lists from 1 + (number of wells) small files. */
#include "ome/ome_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/error.h"
#include "common/name_index.h"
#include "common/fs.h"
#include "common/pool.h"

void ts_plate_close(ts_plate *plate) {
    if (!plate) return;
    for (int i = 0; i < plate->nwells; i++) free(plate->wells[i].positions);
    free(plate->wells);
    free(plate->row_names);
    free(plate->col_names);
    free(plate);
}

/* rows/columns: [{"name": "A"}, ...] into a malloc'd name table. */
static ts_status read_names(const ome_node *node, json_t *plate, const char *key,
                            char (**names)[16], int *n, ts_error *err) {
    json_t *arr = json_object_get(plate, key);
    *n = 0;
    *names = NULL;
    const char *pre = node->zarr_format == 3 ? "attributes.ome." : "";
    if (!json_is_array(arr) || json_array_size(arr) == 0)
        return ts_fail(err, TS_ERR_FORMAT, "%s: key '%splate.%s' is missing, empty or not a list",
                       node->file, pre, key);
    size_t count = json_array_size(arr);
    *names = calloc(count ? count : 1, sizeof **names);
    if (!*names) return ts_fail(err, TS_ERR_NOMEM, "%s: out of memory", node->file);
    for (size_t i = 0; i < count; i++) {
        json_t *nm = json_object_get(json_array_get(arr, i), "name");
        if (!json_is_string(nm) || !ome_valid_name(json_string_value(nm), 16))
            return ts_fail(err, TS_ERR_FORMAT, "%s: key 'plate.%s[%zu].name' is missing or not "
                                               "an alphanumeric name", node->file, key, i);
        snprintf((*names)[i], 16, "%s", json_string_value(nm));
        for (size_t j = 0; j < i; j++)
            if (strcmp((*names)[j], (*names)[i]) == 0)
                return ts_fail(err, TS_ERR_FORMAT, "%s: key '%splate.%s' lists '%s' twice",
                               node->file, pre, key, (*names)[i]);
    }
    *n = (int)count;
    return TS_OK;
}

/* A position listed twice would be stitched twice: refuse (a hash index
 * keeps this linear for wells of 100,000+ positions). */
static ts_status check_unique(const ts_well_info *well, const char *file, ts_error *err) {
    ts_name_index *ix = ts_name_index_new();
    if (!ix) return ts_fail(err, TS_ERR_NOMEM, "%s: out of memory", file);
    const char(*names)[32] = (const char(*)[32])well->positions;
    ts_status st = TS_OK;
    for (int i = 0; i < well->npositions && st == TS_OK; i++) {
        if (ts_name_index_find(ix, names, names[i], strlen(names[i])) >= 0)
            st = ts_fail(err, TS_ERR_FORMAT, "%s: key 'well.images' lists position '%s' twice", file, names[i]);
        else if (!ts_name_index_add(ix, names, i))
            st = ts_fail(err, TS_ERR_NOMEM, "%s: out of memory", file);
    }
    ts_name_index_free(ix);
    return st;
}

/* Reads the well group: its images list becomes the position list. */
static ts_status read_well(const ts_plate *plate, ts_well_info *well, ts_error *err) {
    char path[4200];
    snprintf(path, sizeof path, "%s/%s", plate->path, well->path);
    ome_node node;
    bool found;
    ts_status st = ome_node_read(path, &node, &found, err);
    if (st != TS_OK) return st;
    if (!found) {
        well->metadata_missing = true;
        return TS_OK;
    }
    json_t *w = NULL, *images = NULL;
    ts_ome_version ver;
    if ((st = ome_node_version_v2opt(&node, "well", plate->version, &ver, err)) != TS_OK ||
        (st = ome_node_get(&node, "well", JSON_OBJECT, &w, err)) != TS_OK)
        goto done;
    if (ver != plate->version) {
        st = ts_fail(err, TS_ERR_FORMAT, "%s: well version 0.%d differs from the plate's 0.%d",
                     node.file, (int)ver, (int)plate->version);
        goto done;
    }
    images = json_object_get(w, "images");
    if (!json_is_array(images)) {
        st = ts_fail(err, TS_ERR_FORMAT, "%s: key 'well.images' is missing or not an array",
                     node.file);
        goto done;
    }
    size_t n = json_array_size(images);
    well->positions = calloc(n ? n : 1, sizeof *well->positions);
    if (!well->positions) {
        st = ts_fail(err, TS_ERR_NOMEM, "%s: out of memory for %zu positions", node.file, n);
        goto done;
    }
    for (size_t i = 0; i < n; i++) {
        json_t *p = json_object_get(json_array_get(images, i), "path");
        const char *s = json_is_string(p) ? json_string_value(p) : NULL;
        if (!s || !ome_valid_name(s, sizeof well->positions[0])) {
            st = ts_fail(err, TS_ERR_FORMAT,
                         "%s: key 'well.images[%zu].path' is missing or not an alphanumeric name",
                         node.file, i);
            goto done;
        }
        memcpy(well->positions[i], s, strlen(s) + 1);
    }
    well->npositions = (int)n;
    if (n == 0) {
        st = ts_fail(err, TS_ERR_FORMAT, "%s: key 'well.images' is empty", node.file);
        goto done;
    }
    if ((st = check_unique(well, node.file, err)) != TS_OK) goto done;
done:
    ome_node_free(&node);
    return st;
}

/* The well's row and column must be among the plate's rows and columns,
 * and rowIndex/columnIndex (when given) must point at them: a path like
 * "1/A" (column before row) is caught here. */
static ts_status check_index_of(const ome_node *node, json_t *jw, size_t i, const char *key,
                                const char *name, char (*names)[16], int n, ts_error *err) {
    const char *pre = node->zarr_format == 3 ? "attributes.ome." : "";
    int found = -1;
    for (int k = 0; k < n && found < 0; k++)
        if (strcmp(names[k], name) == 0) found = k;
    if (found < 0)
        return ts_fail(err, TS_ERR_FORMAT, "%s: key '%splate.wells[%zu].path' names %s '%s', "
                       "which the plate does not list", node->file, pre, i,
                       strcmp(key, "rowIndex") == 0 ? "row" : "column", name);
    json_t *idx = json_object_get(jw, key);
    if (idx && (!json_is_integer(idx) || json_integer_value(idx) != found))
        return ts_fail(err, TS_ERR_FORMAT, "%s: key '%splate.wells[%zu].%s' does not point at "
                       "'%s'", node->file, pre, i, key, name);
    return TS_OK;
}

static ts_status check_well_index_err(const ome_node *node, const ts_plate *plate, json_t *jw,
                                      size_t i, const ts_well_info *w, ts_error *err) {
    ts_status st = check_index_of(node, jw, i, "rowIndex", w->row, plate->row_names, plate->nrows, err);
    if (st != TS_OK) return st;
    return check_index_of(node, jw, i, "columnIndex", w->col, plate->col_names, plate->ncols, err);
}

static ts_status read_one_well(void *user, int64_t i, int worker, ts_error *err) {
    (void)worker;
    ts_plate *plate = user;
    return read_well(plate, &plate->wells[i], err);
}

/* Well groups are independent files: read them on a few threads. The error
 * reported is the lowest-numbered failing well's, whatever the timing (the
 * pool hands out indices in order and finishes each one it starts). */
static ts_status read_wells(ts_plate *plate, ts_error *err) {
    int n = plate->nwells, threads = ts_cpu_count();
    if (threads > 8) threads = 8;
    if (threads > n) threads = n;
    if (n < 4 || threads < 2) {
        for (int i = 0; i < n; i++) {
            ts_status st = read_well(plate, &plate->wells[i], err);
            if (st != TS_OK) return st;
        }
        return TS_OK;
    }
    ts_pool *pool = ts_pool_create(threads);
    if (!pool) return ts_fail(err, TS_ERR_NOMEM, "%s: cannot start threads to read wells", plate->path);
    ts_status st = ts_pool_run(pool, n, read_one_well, plate, err);
    ts_pool_destroy(pool);
    return st;
}

static ts_status read_plate(ts_plate *plate, const ome_node *node, ts_error *err) {
    json_t *pl = NULL;
    ts_status st;
    if ((st = ome_node_get(node, "plate", JSON_OBJECT, &pl, err)) != TS_OK) return st;
    if ((st = ome_node_version(node, "plate", &plate->version, err)) != TS_OK) return st;
    json_t *name = json_object_get(pl, "name");
    if (json_is_string(name)) snprintf(plate->name, sizeof plate->name, "%s", json_string_value(name));
    if ((st = read_names(node, pl, "rows", &plate->row_names, &plate->nrows, err)) != TS_OK ||
        (st = read_names(node, pl, "columns", &plate->col_names, &plate->ncols, err)) != TS_OK)
        return st;
    json_t *fc = json_object_get(pl, "field_count");
    if (json_is_integer(fc)) plate->field_count = (int)json_integer_value(fc);

    json_t *wells = json_object_get(pl, "wells");
    if (!json_is_array(wells))
        return ts_fail(err, TS_ERR_FORMAT, "%s: key 'plate.wells' is missing or not an array",
                       node->file);
    size_t nw = json_array_size(wells);
    plate->wells = calloc(nw ? nw : 1, sizeof *plate->wells);
    if (!plate->wells) return ts_fail(err, TS_ERR_NOMEM, "%s: out of memory", node->file);
    for (size_t i = 0; i < nw; i++) {
        ts_well_info *w = &plate->wells[i];
        plate->nwells = (int)i + 1;
        json_t *p = json_object_get(json_array_get(wells, i), "path");
        const char *s = json_is_string(p) ? json_string_value(p) : NULL;
        const char *slash = s ? strchr(s, '/') : NULL;
        if (!slash || (size_t)(slash - s) >= sizeof w->row ||
            strlen(slash + 1) >= sizeof w->col)
            return ts_fail(err, TS_ERR_FORMAT,
                           "%s: key 'plate.wells[%zu].path' is missing or not ROW/COLUMN",
                           node->file, i);
        memcpy(w->row, s, (size_t)(slash - s));
        w->row[slash - s] = '\0';
        snprintf(w->col, sizeof w->col, "%s", slash + 1);
        if (!ome_valid_name(w->row, sizeof w->row) || !ome_valid_name(w->col, sizeof w->col))
            return ts_fail(err, TS_ERR_FORMAT,
                           "%s: key 'plate.wells[%zu].path' (\"%s\") is not ROW/COLUMN with "
                           "alphanumeric names", node->file, i, s);
        snprintf(w->path, sizeof w->path, "%s/%s", w->row, w->col);
        /* 0.5 only: the 0.4 test suite itself names wells "A/1" on plates
         * whose rows are "1" and columns "A", so 0.4 files cannot be held
         * to it */
        if (plate->version == TS_OME_05 &&
            (st = check_well_index_err(node, plate, json_array_get(wells, i), i, w, err)) != TS_OK)
            return st;
        for (size_t j = 0; j < i; j++)
            if (strcmp(plate->wells[j].path, w->path) == 0)
                return ts_fail(err, TS_ERR_FORMAT, "%s: well '%s' is listed twice in plate.wells",
                               node->file, w->path);
    }
    if ((st = read_wells(plate, err)) != TS_OK) return st;
    if (plate->field_count <= 0)
        for (int i = 0; i < plate->nwells; i++)
            if (plate->wells[i].npositions > plate->field_count)
                plate->field_count = plate->wells[i].npositions;
    return TS_OK;
}

ts_status ts_plate_open(const char *path, ts_plate **out, ts_error *err) {
    *out = NULL;
    ts_plate *plate = calloc(1, sizeof *plate);
    if (!plate) return ts_fail(err, TS_ERR_NOMEM, "out of memory");
    size_t len = strlen(path);
    while (len > 1 && path[len - 1] == '/') len--;
    if (len >= sizeof plate->path) {
        free(plate);
        return ts_fail(err, TS_ERR_ARG, "store path too long: %.64s...", path);
    }
    memcpy(plate->path, path, len);
    plate->path[len] = '\0';

    ome_node node;
    ts_status st = ome_node_read(plate->path, &node, NULL, err);
    if (st == TS_OK) {
        if (!json_object_get(node.ome, "plate")) {
            st = ts_fail(err, TS_ERR_FORMAT, "%s: key '%splate' is missing: not an HCS plate",
                         node.file, node.zarr_format == 3 ? "attributes.ome." : "");
        } else {
            st = read_plate(plate, &node, err);
        }
        ome_node_free(&node);
    }
    if (st != TS_OK) {
        ts_plate_close(plate);
        return st;
    }
    *out = plate;
    return TS_OK;
}

int ts_plate_find_well(const ts_plate *plate, const char *well_path) {
    for (int i = 0; i < plate->nwells; i++)
        if (strcmp(plate->wells[i].path, well_path) == 0) return i;
    return -1;
}

ts_status ts_plate_filter_wells(ts_plate *plate, const char *list, ts_error *err) {
    if (!list || !*list) return TS_OK;
    bool *keep = calloc((size_t)plate->nwells + 1, sizeof *keep);
    if (!keep) return ts_fail(err, TS_ERR_NOMEM, "out of memory");
    const char *s = list;
    while (*s) {
        const char *e = strchr(s, ',');
        size_t len = e ? (size_t)(e - s) : strlen(s);
        char name[64];
        /* "A/1, B/2" as typed by people: surrounding spaces do not count */
        const char *b = s;
        size_t blen = len;
        while (blen > 0 && *b == ' ') b++, blen--;
        while (blen > 0 && b[blen - 1] == ' ') blen--;
        size_t n = blen < sizeof name ? blen : sizeof name - 1;
        memcpy(name, b, n);
        name[n] = '\0';
        if (n > 0) {
            int w = ts_plate_find_well(plate, name);
            if (w < 0) {
                free(keep);
                return ts_fail(err, TS_ERR_ARG, "well '%s' is not in plate %s", name, plate->path);
            }
            keep[w] = true;
        }
        s += e ? len + 1 : len;
    }
    int j = 0;
    for (int i = 0; i < plate->nwells; i++) {
        if (keep[i]) plate->wells[j++] = plate->wells[i];
        else free(plate->wells[i].positions);
    }
    plate->nwells = j;
    free(keep);
    return TS_OK;
}

ts_status ts_plate_require_wells(const ts_plate *plate, ts_error *err) {
    int missing = 0, first = -1;
    for (int i = 0; i < plate->nwells; i++)
        if (plate->wells[i].metadata_missing && missing++ == 0) first = i;
    if (!missing) return TS_OK;
    char more[64] = "";
    if (missing > 1) snprintf(more, sizeof more, " (and %d more listed wells)", missing - 1);
    return ts_fail(err, TS_ERR_FORMAT,
                   "%s: well %s is listed in plate.wells but has no well group on disk (%s/%s)%s; --wells "
                   "selects the wells to process", plate->path, plate->wells[first].path, plate->path,
                   plate->wells[first].path, more);
}

void ts_plate_image_path(const ts_plate *plate, int w, int p, char *out, size_t n) {
    snprintf(out, n, "%s/%s/%s", plate->path, plate->wells[w].path, plate->wells[w].positions[p]);
}
