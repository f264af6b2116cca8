/*
 * Fuzz target: the shard index (and the chunk files of a store). The input
 * is a zarr.json (or .zarray) document, a NUL byte, and the bytes of the
 * array's first storage block (a shard when sharded). They are written as a
 * store and the block is read back with tz_array_read, whole and in part:
 * the index is fetched from the start or the end, decoded through the index
 * codecs (crc32c checked), its (offset, nbytes) pairs checked against the
 * file and the inner chunks decoded. Documents whose block would decode to
 * more than FZ_MAX_DECODED are skipped (the caller's buffer).
 */
#include "fuzz_common.h"

#include <jansson.h>

#include "zarr/zarr_internal.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    size_t nmeta, rest;
    fz_split(data, size, &nmeta, &rest);
    json_error_t je;
    json_t *doc = json_loadb((const char *)data, nmeta, 0, &je);
    if (!doc) return 0;
    int format = json_integer_value(json_object_get(doc, "zarr_format")) == 3 ? 3 : 2;
    json_decref(doc);

    char dir[1024], file[4400];
    fz_path(dir, sizeof dir, NULL, "store");
    fz_remove_tree(dir);
    fz_mkdirs(dir);
    fz_path(file, sizeof file, dir, format == 3 ? "zarr.json" : ".zarray");
    fz_write(file, data, nmeta);
    tz_array *arr = NULL;
    ts_error err = {0};
    if (tz_array_open(dir, &arr, &err) != TS_OK) {
        fz_no_nomem(err);
        return 0;
    }
    const tz_array_meta *m = tz_array_get_meta(arr);
    int64_t start[TZ_MAX_DIM] = {0}, count[TZ_MAX_DIM], idx[TZ_MAX_DIM] = {0};
    size_t bytes = ts_dtype_size(m->dtype);
    bool empty = false;
    for (int d = 0; d < m->ndim; d++) {
        count[d] = m->shape[d] < m->chunk[d] ? m->shape[d] : m->chunk[d];
        if (count[d] == 0) empty = true;
        if (count[d] > 0 && (size_t)count[d] > FZ_MAX_DECODED / bytes) empty = true;
        else bytes *= (size_t)(count[d] ? count[d] : 1);
    }
    /* The read allocates one decoded inner chunk (or chunk) and the index. */
    const int64_t *ic = m->sharded ? m->sharding.inner_chunk : m->chunk;
    size_t inner = ts_dtype_size(m->dtype), nidx = 16;
    for (int d = 0; d < m->ndim && !empty; d++) {
        if ((size_t)ic[d] > FZ_MAX_DECODED / inner) empty = true;
        else inner *= (size_t)ic[d];
        if (m->sharded) {
            int64_t per = m->chunk[d] / ic[d];
            if ((size_t)per > FZ_MAX_DECODED / nidx) empty = true;
            else nidx *= (size_t)per;
        }
    }
    if (empty || bytes > FZ_MAX_DECODED || inner > FZ_MAX_DECODED || nidx > FZ_MAX_DECODED) {
        tz_array_close(arr);
        return 0;
    }
    char key[256];
    tz_chunk_key(m, idx, key, sizeof key);
    fz_path(file, sizeof file, dir, key);
    fz_write(file, data + rest, size - rest);
    unsigned char *buf = malloc(bytes ? bytes : 1);
    fz_check(buf != NULL, "malloc %zu", bytes);
    ts_status st = tz_array_read(arr, start, count, buf, &err);
    if (st != TS_OK) {
        fz_check_error(err, "read");
    } else {
        /* The inner part of the block: boxes that cut inner chunks. */
        bool cut = false;
        for (int d = 0; d < m->ndim; d++)
            if (count[d] >= 3) { start[d] = 1; count[d] -= 2; cut = true; }
        if (cut) {
            st = tz_array_read(arr, start, count, buf, &err);
            fz_check(st == TS_OK, "the whole block reads but a part does not: %s", err.message);
        }
    }
    free(buf);
    tz_array_close(arr);
    return 0;
}
