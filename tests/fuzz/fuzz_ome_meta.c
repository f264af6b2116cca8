/*
 * Fuzz target: OME-NGFF metadata (plate, well, image attributes and the
 * tile array they lead to). The input is a format byte ('2': OME-Zarr 0.4
 * on zarr v2, .zattrs files beside a .zgroup; anything else: 0.5, zarr.json
 * files) and up to four documents separated by NUL bytes: the plate group,
 * the group of its first well, that well's first image group and the
 * image's first level array. Each is written where the previous document
 * points (plate.wells[0].path, well.images[0].path,
 * multiscales[0].datasets[0].path, when they are plain relative names),
 * then the store is read as tessera does: ts_plate_open (every well's
 * images list), ts_plate_open_array for a few positions (image metadata,
 * the array and its check against the axes), ts_image_box,
 * ts_plate_filter_wells, ts_image_read_meta on its own and ts_info_json.
 */
#include "fuzz_common.h"

#include <ctype.h>
#include <jansson.h>

#include "ome/ome.h"

/* A relative path of alphanumeric components ("A/1", "0"), at most `parts`. */
static bool plain_path(const char *s, int parts) {
    if (!s || !*s || strlen(s) > 40) return false;
    int n = 1;
    for (const char *p = s; *p; p++) {
        if (*p == '/') {
            if (p == s || p[1] == '\0' || p[-1] == '/' || ++n > parts) return false;
        } else if (!isalnum((unsigned char)*p)) {
            return false;
        }
    }
    return true;
}

/* The OME attributes of a document: v3 attributes.ome, v2 the root. */
static json_t *ome_of(json_t *doc, bool v2) {
    return v2 ? doc : json_object_get(json_object_get(doc, "attributes"), "ome");
}

/* doc[key][0][field] when it is a plain path. */
static const char *first_path(json_t *obj, const char *key, const char *field, int parts) {
    const char *s = json_string_value(json_object_get(json_array_get(json_object_get(obj, key), 0), field));
    return plain_path(s, parts) ? s : NULL;
}

static void write_node(const char *dir, bool v2, bool array, const uint8_t *doc, size_t n) {
    char file[4400];
    fz_mkdirs(dir);
    if (v2) {
        snprintf(file, sizeof file, "%s/%s", dir, array ? ".zarray" : ".zgroup");
        if (array) {
            fz_write(file, doc, n);
        } else {
            fz_write(file, "{\"zarr_format\": 2}", 18);
            snprintf(file, sizeof file, "%s/.zattrs", dir);
            fz_write(file, doc, n);
        }
    } else {
        snprintf(file, sizeof file, "%s/zarr.json", dir);
        fz_write(file, doc, n);
    }
}

static void read_plate(const char *root) {
    ts_plate *plate = NULL;
    ts_error err = {0};
    if (ts_plate_open(root, &plate, &err) != TS_OK) {
        fz_check_error(err, "plate");
        return;
    }
    for (int w = 0; w < plate->nwells && w < 4; w++) {
        fz_check(ts_plate_find_well(plate, plate->wells[w].path) >= 0, "well %s not found", plate->wells[w].path);
        for (int p = 0; p < plate->wells[w].npositions && p < 2; p++) {
            ts_image_meta im;
            tz_array *arr = NULL;
            if (ts_plate_open_array(plate, w, p, 0, &im, &arr, &err) != TS_OK) {
                fz_check_error(err, "open array");
                continue;
            }
            const tz_array_meta *am = tz_array_get_meta(arr);
            int64_t ext[5], start5[5] = {0}, start[TZ_MAX_DIM], count[TZ_MAX_DIM];
            ts_image_extent(&im, am, ext);
            char path[4400];
            ts_plate_image_path(plate, w, p, path, sizeof path);
            ts_image_check_layout(&im, path, &err);
            ts_image_box(im.axis_index, im.ndim, am, start5, ext, start, count, path, &err);
            tz_array_close(arr);
        }
    }
    if (plate->nwells > 0) {
        char list[80];
        snprintf(list, sizeof list, " %s ,%s", plate->wells[plate->nwells - 1].path, plate->wells[0].path);
        fz_check(ts_plate_filter_wells(plate, list, &err) == TS_OK, "filter by its own wells: %s", err.message);
        ts_plate_filter_wells(plate, "Z/99", &err);
    }
    fz_no_nomem(err);
    ts_plate_close(plate);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    bool v2 = data[0] == '2';
    data++, size--;
    const uint8_t *part[4] = {NULL};
    size_t len[4] = {0};
    int nparts = 0;
    while (nparts < 4) {
        size_t n, rest;
        fz_split(data, size, &n, &rest);
        part[nparts] = data;
        len[nparts++] = n;
        if (rest == size && n == size) break;
        data += rest, size -= rest;
    }
    char root[1024], dir[4600];
    fz_path(root, sizeof root, NULL, "plate");
    fz_remove_tree(root);
    write_node(root, v2, false, part[0], len[0]);
    /* Where the next document goes, from the one before it. */
    json_error_t je;
    json_t *docs[3] = {NULL};
    for (int i = 0; i < 3 && i < nparts; i++) docs[i] = json_loadb((const char *)part[i], len[i], 0, &je);
    const char *well = docs[0] ? first_path(json_object_get(ome_of(docs[0], v2), "plate"), "wells", "path", 2) : NULL;
    const char *image = docs[1] ? first_path(json_object_get(ome_of(docs[1], v2), "well"), "images", "path", 1) : NULL;
    json_t *ms = docs[2] ? json_array_get(json_object_get(ome_of(docs[2], v2), "multiscales"), 0) : NULL;
    const char *level = ms ? first_path(ms, "datasets", "path", 1) : NULL;
    char image_dir[4200] = "";
    if (nparts > 1 && well) {
        snprintf(dir, sizeof dir, "%s/%s", root, well);
        write_node(dir, v2, false, part[1], len[1]);
        if (nparts > 2 && image) {
            snprintf(image_dir, sizeof image_dir, "%s/%s/%s", root, well, image);
            write_node(image_dir, v2, false, part[2], len[2]);
            if (nparts > 3 && level) {
                snprintf(dir, sizeof dir, "%s/%s", image_dir, level);
                write_node(dir, v2, true, part[3], len[3]);
            }
        }
    }
    for (int i = 0; i < 3; i++) json_decref(docs[i]);

    read_plate(root);
    if (image_dir[0]) {
        ts_ome_version ver;
        ts_image_meta im;
        ts_error err = {0};
        if (ts_image_read_meta(image_dir, &ver, &im, &err) == TS_OK) {
            fz_check(im.nlevels >= 1 && im.nlevels <= TS_MAX_LEVELS, "%d levels", im.nlevels);
            fz_check(im.ndim >= 2 && im.ndim <= 5, "%d axes", im.ndim);
            for (int l = 0; l < im.nlevels && l < 2; l++) {
                tz_array *arr = NULL;
                if (ts_image_open_array(image_dir, &im, l, &arr, &err) == TS_OK) tz_array_close(arr);
            }
        }
        fz_no_nomem(err);
    }
    char *json = NULL;
    ts_error err = {0};
    if (ts_info_json(root, &json, &err) == TS_OK) free(json);
    fz_no_nomem(err);
    return 0;
}
