/*
 * Fuzz target: zarr array metadata. The input is one document, parsed as a
 * v3 zarr.json and as a v2 .zarray (tz_meta_parse_v3/v2), and opened the
 * way a store is (tz_array_open on the document written as zarr.json, then
 * as .zarray beside a .zattrs), which also sets up the sharding sizes.
 * Invariants: a document that parses and that the writer accepts
 * (tz_meta_to_json) parses back to the same shape, chunks, dtype and codecs;
 * chunk keys fit their buffer.
 */
#include "fuzz_common.h"

#include <jansson.h>

#include "zarr/zarr_internal.h"

static void check_same(const tz_array_meta *a, const tz_array_meta *b) {
    fz_check(a->ndim == b->ndim, "ndim %d -> %d", a->ndim, b->ndim);
    for (int d = 0; d < a->ndim; d++) {
        fz_check(a->shape[d] == b->shape[d], "shape[%d] %lld -> %lld", d, (long long)a->shape[d],
                 (long long)b->shape[d]);
        fz_check(a->chunk[d] == b->chunk[d], "chunk[%d] %lld -> %lld", d, (long long)a->chunk[d],
                 (long long)b->chunk[d]);
    }
    fz_check(a->dtype == b->dtype, "dtype %d -> %d", (int)a->dtype, (int)b->dtype);
    fz_check(a->sharded == b->sharded, "sharded %d -> %d", a->sharded, b->sharded);
    fz_check(a->codecs.n == b->codecs.n, "codecs %d -> %d", a->codecs.n, b->codecs.n);
    for (int i = 0; i < a->codecs.n; i++)
        fz_check(a->codecs.c[i].id == b->codecs.c[i].id, "codec %d: id %d -> %d", i, (int)a->codecs.c[i].id,
                 (int)b->codecs.c[i].id);
    if (a->sharded) {
        fz_check(a->sharding.codecs.n == b->sharding.codecs.n, "inner codecs %d -> %d", a->sharding.codecs.n,
                 b->sharding.codecs.n);
        for (int d = 0; d < a->ndim; d++)
            fz_check(a->sharding.inner_chunk[d] == b->sharding.inner_chunk[d], "inner chunk[%d]", d);
    }
}

/* Writes meta back as a document and parses that again. */
static void round_trip(const tz_array_meta *meta) {
    ts_error err = {0};
    json_t *doc = NULL;
    if (tz_meta_to_json("fuzz", meta, &doc, &err) != TS_OK) {
        fz_no_nomem(err);
        return;
    }
    tz_array_meta again;
    char *attrs = NULL;
    ts_status st = meta->zarr_format == 3 ? tz_meta_parse_v3("fuzz", doc, &again, &attrs, &err)
                                          : tz_meta_parse_v2("fuzz", doc, &again, &err);
    fz_check(st == TS_OK, "the writer's own document does not parse: %s", err.message);
    check_same(meta, &again);
    free(attrs);
    json_decref(doc);
}

static void check_key(const tz_array_meta *meta) {
    int64_t idx[TZ_MAX_DIM];
    for (int d = 0; d < meta->ndim; d++) idx[d] = (meta->shape[d] + meta->chunk[d] - 1) / meta->chunk[d];
    char key[256];
    tz_chunk_key(meta, idx, key, sizeof key);
    fz_check(strlen(key) < sizeof key, "chunk key overflows");
}

static void open_as(const char *name, const uint8_t *data, size_t size, const char *attrs) {
    char dir[1024], file[1100];
    fz_path(dir, sizeof dir, NULL, "array");
    fz_remove_tree(dir);
    fz_mkdirs(dir);
    fz_path(file, sizeof file, dir, name);
    fz_write(file, data, size);
    if (attrs) {
        fz_path(file, sizeof file, dir, ".zattrs");
        fz_write(file, attrs, strlen(attrs));
    }
    tz_array *arr = NULL;
    ts_error err = {0};
    if (tz_array_open(dir, &arr, &err) == TS_OK) {
        int64_t grid[TZ_MAX_DIM];
        tz_array_grid(arr, grid);
        fz_check(tz_array_attributes(arr) != NULL, "no attributes text");
        tz_array_close(arr);
    } else {
        fz_check_error(err, "open");
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    json_error_t je;
    json_t *doc = json_loadb((const char *)data, size, 0, &je);
    if (doc) {
        ts_error err = {0};
        tz_array_meta meta;
        char *attrs = NULL;
        if (tz_meta_parse_v3("fuzz", doc, &meta, &attrs, &err) == TS_OK) {
            meta.attributes_json = attrs;
            check_key(&meta);
            round_trip(&meta);
        } else {
            fz_check_error(err, "v3");
        }
        free(attrs);
        err.message[0] = '\0';
        if (tz_meta_parse_v2("fuzz", doc, &meta, &err) == TS_OK) {
            check_key(&meta);
            round_trip(&meta);
        } else {
            fz_check_error(err, "v2");
        }
        json_decref(doc);
    }
    open_as("zarr.json", data, size, NULL);
    open_as(".zarray", data, size, "{\"a\": [1, 2]}");
    return 0;
}
