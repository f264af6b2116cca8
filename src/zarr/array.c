/* Arrays on a local store: open/create, chunk keys, box reads and whole
 * storage-block writes. */
#include "zarr/zarr_internal.h"
#include "common/fs.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

void tz_chunk_key(const tz_array_meta *meta, const int64_t *idx, char *out, size_t n) {
    size_t len = 0;
    out[0] = '\0';
    if (meta->key_encoding == TZ_KEY_DEFAULT) len += (size_t)snprintf(out, n, "c");
    else if (meta->ndim == 0) { snprintf(out, n, "0"); return; }
    for (int d = 0; d < meta->ndim && len < n; d++) {
        bool sep = meta->key_encoding == TZ_KEY_DEFAULT || d > 0;
        len += (size_t)snprintf(out + len, n - len, "%s%lld", sep ? (meta->separator == '.' ? "." : "/") : "",
                                (long long)idx[d]);
    }
}

static ts_status array_from_doc(const char *path, json_t *doc, int format, const char *attrs_text,
                                tz_array **out, ts_error *err) {
    tz_array *a = calloc(1, sizeof *a);
    if (!a) return ts_fail(err, TS_ERR_NOMEM, "out of memory opening '%s'", path);
    a->path = strdup(path);
    ts_status st = TS_OK;
    if (format == 3) {
        st = tz_meta_parse_v3(path, doc, &a->meta, &a->attributes, err);
    } else {
        st = tz_meta_parse_v2(path, doc, &a->meta, err);
        if (!st) a->attributes = strdup(attrs_text ? attrs_text : "{}");
    }
    if (!st && (!a->path || !a->attributes)) st = ts_fail(err, TS_ERR_NOMEM, "out of memory opening '%s'", path);
    if (st) { tz_array_close(a); return st; }
    a->meta.attributes_json = a->attributes;
    a->esize = ts_dtype_size(a->meta.dtype);
    tz_fill_element(a->meta.dtype, a->meta.fill_value, a->fill);
    a->fill_is_nan = (a->meta.dtype == TS_FLOAT32 || a->meta.dtype == TS_FLOAT64) && isnan(a->meta.fill_value);
    if (a->meta.sharded) {
        a->inner_per_shard = 1;
        for (int d = 0; d < a->meta.ndim; d++) {
            a->chunks_per_shard[d] = a->meta.chunk[d] / a->meta.sharding.inner_chunk[d];
            a->inner_per_shard *= a->chunks_per_shard[d];
        }
        a->index_bytes = (size_t)a->inner_per_shard * 16;
        for (int i = 0; i < a->meta.sharding.index_codecs.n; i++)
            if (a->meta.sharding.index_codecs.c[i].id == TZ_CODEC_CRC32C) a->index_bytes += 4;
    }
    *out = a;
    return TS_OK;
}

ts_status tz_array_open(const char *path, tz_array **out, ts_error *err) {
    return tz_array_open_as(path, 0, out, err);
}

ts_status tz_array_open_as(const char *path, int zarr_format, tz_array **out, ts_error *err) {
    *out = NULL;
    char mpath[4096];
    json_t *doc = NULL;
    bool found = false;
    int format = 3;
    /* Each format's file once, the store's own first (v3's unless told). */
    const bool v2_first = zarr_format == 2;
    ts_status st;
    for (int k = 0; k < 2 && !found; k++) {
        format = (k == 0) == v2_first ? 2 : 3;
        snprintf(mpath, sizeof mpath, "%s/%s", path, format == 2 ? ".zarray" : "zarr.json");
        if ((st = tz_load_json(mpath, &doc, &found, err))) return st;
    }
    if (!found) return tz_no_node(path, "array (neither zarr.json nor .zarray)", err);
    char *attrs = NULL;
    if (format == 2) {
        char apath[4096];
        snprintf(apath, sizeof apath, "%s/.zattrs", path);
        json_t *a = NULL;
        st = tz_load_json(apath, &a, &found, err);
        if (st) { json_decref(doc); return st; }
        if (found) {
            attrs = json_dumps(a, JSON_COMPACT);
            json_decref(a);
        }
    }
    st = array_from_doc(path, doc, format, attrs, out, err);
    free(attrs);
    json_decref(doc);
    return st;
}

ts_status tz_array_create(const char *path, const tz_array_meta *meta, tz_array **out, ts_error *err) {
    if (out) *out = NULL;
    json_t *doc;
    ts_status st = tz_meta_to_json(path, meta, &doc, err);
    if (st) return st;
    st = tz_write_json(path, meta->zarr_format == 2 ? ".zarray" : "zarr.json", doc, err);
    char *attrs = NULL;
    if (!st && meta->zarr_format == 2 && meta->attributes_json) {
        json_t *a;
        st = tz_parse_attributes(path, meta->attributes_json, &a, err);
        if (!st) {
            attrs = json_dumps(a, JSON_COMPACT);
            st = tz_write_json(path, ".zattrs", a, err);
            json_decref(a);
        }
    }
    if (!st && out) st = array_from_doc(path, doc, meta->zarr_format == 2 ? 2 : 3, attrs, out, err);
    free(attrs);
    json_decref(doc);
    return st;
}

void tz_array_close(tz_array *arr) {
    if (!arr) return;
    free(arr->path);
    free(arr->attributes);
    free(arr);
}

const tz_array_meta *tz_array_get_meta(const tz_array *arr) { return &arr->meta; }
const char *tz_array_path(const tz_array *arr) { return arr->path; }
const char *tz_array_attributes(const tz_array *arr) { return arr->attributes; }

void tz_array_grid(const tz_array *arr, int64_t grid[TZ_MAX_DIM]) {
    for (int d = 0; d < arr->meta.ndim; d++)
        grid[d] = (arr->meta.shape[d] + arr->meta.chunk[d] - 1) / arr->meta.chunk[d];
}

static void block_file(const tz_array *arr, const int64_t *idx, char *key, size_t nkey, char *file, size_t nfile) {
    tz_chunk_key(&arr->meta, idx, key, nkey);
    snprintf(file, nfile, "%s/%s", arr->path, key);
}

/* ------------------------------------------------------------------- read */

/* One unsharded chunk: decode straight into buf when the box is exactly
 * this chunk, else through `scratch` (one chunk, reused across the call). */
static ts_status read_chunk(const tz_array *arr, const int64_t *idx, const int64_t *box_off,
                            const int64_t *extent, void *buf, const int64_t *count,
                            const int64_t *dst_off, unsigned char **scratch, ts_error *err) {
    const tz_array_meta *m = &arr->meta;
    char key[256], file[4400];
    block_file(arr, idx, key, sizeof key, file, sizeof file);
    void *data = NULL;
    size_t size = 0;
    bool found = false;
    /* A file larger than any encoding of the chunk is refused by its size,
     * unread (a sparse file costs its writer nothing). */
    size_t chunk_bytes = (size_t)tz_prod(m->ndim, m->chunk) * arr->esize;
    ts_status st = ts_read_file_max(file, tz_chain_max_encoded(&m->codecs, chunk_bytes), &data, &size, &found, err);
    if (st == TS_ERR_CORRUPT)
        return ts_fail_context(err, st, "zarr array '%s', chunk '%s' (%zu bytes decoded)", arr->path, key, chunk_bytes);
    if (st) return st;
    if (!found) {
        tz_fill_box(m->ndim, arr->esize, arr->fill, buf, count, dst_off, extent);
        return TS_OK;
    }
    bool whole = true;
    for (int d = 0; d < m->ndim; d++)
        whole = whole && box_off[d] == 0 && extent[d] == m->chunk[d] && count[d] == m->chunk[d];
    unsigned char *target = buf;
    if (!whole) {
        if (!*scratch) *scratch = malloc((size_t)tz_prod(m->ndim, m->chunk) * arr->esize);
        if (!*scratch) { free(data); return ts_fail(err, TS_ERR_NOMEM, "out of memory reading '%s'", file); }
        target = *scratch;
    }
    st = tz_decode_chunk(&m->codecs, m->dtype, m->big_endian, m->ndim, m->chunk, data, size, target, err);
    free(data);
    if (st) {
        if (st != TS_ERR_NOMEM && st != TS_ERR_UNSUPPORTED) st = TS_ERR_CORRUPT;
        ts_fail_context(err, st, "zarr array '%s', chunk '%s'", arr->path, key);
        return st;
    }
    if (!whole) tz_copy_box(m->ndim, arr->esize, target, m->chunk, box_off, buf, count, dst_off, extent);
    return TS_OK;
}

ts_status tz_array_read(const tz_array *arr, const int64_t *start, const int64_t *count, void *buf,
                        ts_error *err) {
    const tz_array_meta *m = &arr->meta;
    int64_t lo[TZ_MAX_DIM], hi[TZ_MAX_DIM], idx[TZ_MAX_DIM];
    for (int d = 0; d < m->ndim; d++) {
        if (start[d] < 0 || count[d] < 0 || count[d] > m->shape[d] - start[d]) /* no start + count: it may overflow */
            return ts_fail(err, TS_ERR_ARG, "zarr array '%s': read box [%lld, +%lld) outside axis %d of size %lld",
                           arr->path, (long long)start[d], (long long)count[d], d, (long long)m->shape[d]);
        if (count[d] == 0) return TS_OK;
        lo[d] = start[d] / m->chunk[d];
        hi[d] = (start[d] + count[d] - 1) / m->chunk[d];
        idx[d] = lo[d];
    }
    unsigned char *scratch = NULL;
    ts_status st = TS_OK;
    for (;;) {
        int64_t box_off[TZ_MAX_DIM], extent[TZ_MAX_DIM], dst_off[TZ_MAX_DIM];
        for (int d = 0; d < m->ndim; d++) {
            int64_t b0 = idx[d] * m->chunk[d];
            int64_t a = start[d] > b0 ? start[d] : b0;
            int64_t e = start[d] + count[d] < b0 + m->chunk[d] ? start[d] + count[d] : b0 + m->chunk[d];
            box_off[d] = a - b0;
            extent[d] = e - a;
            dst_off[d] = a - start[d];
        }
        if (m->sharded) {
            char key[256], file[4400];
            block_file(arr, idx, key, sizeof key, file, sizeof file);
            st = tz_shard_read(arr, file, key, box_off, extent, buf, count, dst_off, err);
        } else {
            st = read_chunk(arr, idx, box_off, extent, buf, count, dst_off, &scratch, err);
        }
        if (st) break;
        int d = m->ndim - 1;
        for (; d >= 0; d--) {
            if (++idx[d] <= hi[d]) break;
            idx[d] = lo[d];
        }
        if (d < 0) break;
    }
    free(scratch);
    return st;
}

/* ------------------------------------------------------------------ write */

ts_status tz_array_write_block(tz_array *arr, const int64_t *idx, const void *data, ts_error *err) {
    return tz_array_write_block_parallel(arr, idx, data, NULL, err);
}

ts_status tz_remove_fill_block(const char *file, ts_error *err) {
    if (unlink(file) != 0 && errno != ENOENT)
        return ts_fail(err, TS_ERR_IO, "cannot remove the stale block '%s' (all fill now): %s", file, strerror(errno));
    return TS_OK;
}

ts_status tz_array_write_block_parallel(tz_array *arr, const int64_t *idx, const void *data,
                                        const tz_parallel *par, ts_error *err) {
    const tz_array_meta *m = &arr->meta;
    int64_t grid[TZ_MAX_DIM];
    tz_array_grid(arr, grid);
    for (int d = 0; d < m->ndim; d++)
        if (idx[d] < 0 || idx[d] >= grid[d])
            return ts_fail(err, TS_ERR_ARG, "zarr array '%s': block index %lld outside grid %lld (axis %d)", arr->path,
                           (long long)idx[d], (long long)grid[d], d);
    char key[256], file[4400];
    block_file(arr, idx, key, sizeof key, file, sizeof file);
    /* A shard is encoded and written (or found all fill) by tz_shard_write. */
    if (m->sharded) return tz_shard_write(arr, data, key, par, file, err);
    if (tz_all_fill(arr, data, (size_t)tz_prod(m->ndim, m->chunk))) return tz_remove_fill_block(file, err);
    void *enc = NULL;
    size_t size = 0;
    ts_status st = tz_encode_chunk(&m->codecs, m->dtype, m->big_endian, m->ndim, m->chunk, data, &enc, &size, err);
    if (st) {
        ts_fail_context(err, st, "zarr array '%s', chunk '%s'", arr->path, key);
        return st;
    }
    st = ts_write_file_atomic(file, enc, size, err);
    free(enc);
    return st;
}
