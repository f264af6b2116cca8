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

/* The codec ids of a chain without its bytes codecs: a chain that leaves
 * the array->bytes codec implicit ("codecs": [] inside sharding_indexed) is
 * written with it explicit, which decodes the same. */
static int non_bytes(const tz_codec_chain *c, tz_codec_id *ids) {
    int n = 0;
    for (int i = 0; i < c->n; i++)
        if (c->c[i].id != TZ_CODEC_BYTES) ids[n++] = c->c[i].id;
    return n;
}

static void check_same_chain(const char *what, const tz_codec_chain *a, const tz_codec_chain *b) {
    tz_codec_id ia[TZ_MAX_CODECS], ib[TZ_MAX_CODECS];
    int na = non_bytes(a, ia), nb = non_bytes(b, ib);
    fz_check(na == nb, "%s: %d codecs -> %d", what, na, nb);
    for (int i = 0; i < na; i++) fz_check(ia[i] == ib[i], "%s: codec %d: id %d -> %d", what, i, (int)ia[i], (int)ib[i]);
}

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
    check_same_chain("codecs", &a->codecs, &b->codecs);
    if (a->sharded) {
        check_same_chain("inner codecs", &a->sharding.codecs, &b->sharding.codecs);
        /* An empty index_codecs list (not valid v3; read as an index
         * without checksum) is written as the default bytes + crc32c. */
        if (a->sharding.index_codecs.n > 0)
            check_same_chain("index codecs", &a->sharding.index_codecs, &b->sharding.index_codecs);
        fz_check(a->sharding.index_at_start == b->sharding.index_at_start, "index location");
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
