/* What a run may replace or write into. A store is replaced (import,
 * simulate) or added to (fuse) only when it is a plate of the kind that run
 * writes, and an existing tree is deleted only when every file in it is one
 * that tessera itself writes: zarr metadata of its groups and arrays, chunk
 * keys inside its arrays, its own temporaries. A user's file inside (notes,
 * a symlink, an unrelated directory) makes the whole tree not tessera's to
 * delete, and the run is refused naming that file. */
#include <dirent.h>
#include <jansson.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "common/error.h"
#include "common/fs.h"
#include "common/outpath.h"
#include "ome/ome.h"
#include "zarr/zarr.h"

static bool is_metadata_name(const char *n) {
    return !strcmp(n, "zarr.json") || !strcmp(n, ".zgroup") || !strcmp(n, ".zattrs") || !strcmp(n, ".zarray") ||
           !strcmp(n, ".zmetadata");
}

/* A chunk key element: decimal digits, or digits joined by '.' (v2's
 * default separator), or v3's "c" prefix directory. */
static bool is_chunk_name(const char *n, bool dir) {
    if (dir && !strcmp(n, "c")) return true;
    bool digit = false;
    for (const char *p = n; *p; p++) {
        if (*p >= '0' && *p <= '9') digit = true;
        else if (*p == '.' && digit && p[1]) digit = false;
        else return false;
    }
    return digit;
}

static bool is_array_dir(const char *dir) {
    char p[4400];
    if (!ts_path_join(p, sizeof p, dir, ".zarray")) return false;
    if (ts_path_exists(p)) return true;
    if (!ts_path_join(p, sizeof p, dir, "zarr.json")) return false;
    void *data = NULL;
    size_t size = 0;
    bool found = false;
    if (ts_read_file_max(p, TZ_MAX_METADATA_BYTES, &data, &size, &found, NULL) != TS_OK || !found) return false;
    /* The top-level node_type, not words anywhere in it: a group's
     * attributes may say "array", and its digit-named files are not chunks. */
    json_t *doc = json_loadb(data, size, 0, NULL);
    free(data);
    const char *type = json_string_value(json_object_get(doc, "node_type"));
    bool array = type && !strcmp(type, "array");
    json_decref(doc);
    return array;
}

static ts_status foreign(const char *root, const char *what, const char *path, ts_error *err) {
    return ts_fail(err, TS_ERR_IO, "%s holds %s %s, which tessera did not write; not replacing it "
                   "(move that away, or choose another output)", root, what, path);
}

static ts_status walk(const char *root, const char *dir, bool in_array, ts_error *err) {
    DIR *d = opendir(dir);
    if (!d) return ts_fail(err, TS_ERR_IO, "cannot open directory '%s': %s", dir, strerror(errno));
    bool array = in_array || is_array_dir(dir);
    ts_status st = TS_OK;
    struct dirent *e;
    char child[4400];
    while (st == TS_OK && (e = readdir(d)) != NULL) {
        const char *n = e->d_name;
        if (!strcmp(n, ".") || !strcmp(n, "..")) continue;
        if (!ts_path_join(child, sizeof child, dir, n)) {
            st = ts_fail(err, TS_ERR_IO, "path too long under '%s'", dir);
            break;
        }
        struct stat sb;
        if (lstat(child, &sb) != 0) continue; /* gone meanwhile */
        if (ts_is_temp_name(n) && (S_ISREG(sb.st_mode) || S_ISDIR(sb.st_mode))) continue;
        if (S_ISREG(sb.st_mode)) {
            if (is_metadata_name(n) || (array && is_chunk_name(n, false))) continue;
            st = foreign(root, "the file", child, err);
        } else if (S_ISDIR(sb.st_mode)) {
            if (array) {
                if (is_chunk_name(n, true)) st = walk(root, child, true, err);
                else st = foreign(root, "the directory", child, err);
            } else if (ts_is_zarr_node(child)) {
                st = walk(root, child, false, err);
            } else {
                st = foreign(root, "the directory (no zarr metadata)", child, err);
            }
        } else {
            st = foreign(root, S_ISLNK(sb.st_mode) ? "the symlink" : "the special file", child, err);
        }
    }
    closedir(d);
    return st;
}

ts_status ts_tree_check_own(const char *path, ts_error *err) {
    struct stat sb;
    if (lstat(path, &sb) != 0) return TS_OK;
    if (!S_ISDIR(sb.st_mode)) return foreign(path, "itself", "(not a directory)", err);
    return walk(path, path, false, err);
}

static bool dir_empty(const char *path) {
    DIR *d = opendir(path);
    if (!d) return false;
    struct dirent *e;
    bool empty = true;
    while (empty && (e = readdir(d)) != NULL) empty = !strcmp(e->d_name, ".") || !strcmp(e->d_name, "..");
    closedir(d);
    return empty;
}

ts_status ts_store_check_kind(const char *path, ts_store_kind want, ts_ome_version *version, bool *exists,
                              ts_error *err) {
    *exists = false;
    struct stat sb;
    if (lstat(path, &sb) != 0) return TS_OK;
    if (S_ISDIR(sb.st_mode) && dir_empty(path)) return TS_OK; /* made for us, e.g. by mkdir */
    *exists = true;
    const char *kind = want == TS_STORE_MOSAIC_PLATE ? "a mosaic plate (tessera fuse output)" : "a plate of tiles";
    if (!S_ISDIR(sb.st_mode) || !ts_is_zarr_node(path))
        return ts_fail(err, TS_ERR_IO, "%s exists and is not a zarr store; not writing over it (this run "
                       "writes %s)", path, kind);
    ts_plate *plate = NULL;
    ts_error why;
    if (ts_plate_open(path, &plate, &why) != TS_OK)
        return ts_fail(err, TS_ERR_IO, "%s exists and is not an OME-Zarr plate this run may replace (%s); "
                       "not writing over it", path, why.message);
    /* fuse writes one image "0" per well; import and simulate name their
     * positions XXXYYY. */
    bool mosaic = true, tiles = true;
    for (int w = 0; w < plate->nwells; w++) {
        const ts_well_info *wi = &plate->wells[w];
        for (int p = 0; p < wi->npositions; p++) {
            if (!strcmp(wi->positions[p], "0")) tiles = false;
            else mosaic = false;
        }
    }
    if (version) *version = plate->version;
    ts_plate_close(plate);
    if (want == TS_STORE_MOSAIC_PLATE && !mosaic)
        return ts_fail(err, TS_ERR_IO, "%s is a plate of tiles, not %s; not writing into it", path, kind);
    if (want == TS_STORE_TILE_PLATE && !tiles)
        return ts_fail(err, TS_ERR_IO, "%s is a mosaic plate (tessera fuse output), not %s; not replacing it",
                       path, kind);
    return TS_OK;
}
