/* Private parts of the zarr layer shared by its source files. */
#ifndef TS_ZARR_INTERNAL_H
#define TS_ZARR_INTERNAL_H

#include "zarr/zarr.h"
#include "common/error.h"

#include <jansson.h>

/* An open array. Immutable after open/create, so reads need no locks. */
struct tz_array {
    char *path;
    tz_array_meta meta;
    char *attributes;            /* JSON object text, never NULL */
    size_t esize;                /* element size in bytes */
    unsigned char fill[8];       /* fill value as one native-endian element */
    bool fill_is_nan;            /* float fill NaN: any NaN counts as fill */
    /* Sharding (meta.sharded): inner chunks per shard and the encoded index size. */
    int64_t chunks_per_shard[TZ_MAX_DIM];
    int64_t inner_per_shard;
    size_t index_bytes;
};

static inline bool tz_native_big_endian(void) {
    const uint16_t one = 1;
    return *(const unsigned char *)&one == 0;
}

static inline int64_t tz_prod(int ndim, const int64_t *v) {
    int64_t p = 1;
    for (int i = 0; i < ndim; i++) p *= v[i];
    return p;
}

/* codec.c: the chain with contexts and scratch buffers reused across the
 * calls of one thread (a shard's inner chunks). Zero-initialise; free with
 * tz_codec_ctx_free. tz_encode_chunk_ctx's *out points into the context
 * (or at data itself when the chain changes nothing): valid until the next
 * call with the same context. */
typedef struct tz_codec_ctx {
    struct ZSTD_CCtx_s *zc;
    int zc_params;            /* level and checksum zc is set up for */
    struct ZSTD_DCtx_s *zd;
    unsigned char *buf[2];
    size_t cap[2];
} tz_codec_ctx;
void tz_codec_ctx_free(tz_codec_ctx *ctx);
ts_status tz_encode_chunk_ctx(const tz_codec_chain *chain, ts_dtype dtype, bool big_endian, int ndim,
                              const int64_t *shape, const void *data, const void **out, size_t *out_size,
                              tz_codec_ctx *ctx, ts_error *err);
ts_status tz_decode_chunk_ctx(const tz_codec_chain *chain, ts_dtype dtype, bool big_endian, int ndim,
                              const int64_t *shape, const void *in, size_t in_size, void *data,
                              tz_codec_ctx *ctx, ts_error *err);
/* The most bytes any encoder can store for a chunk of `decoded` bytes through
 * chain (each bytes->bytes step's worst-case expansion, with room for other
 * writers' headers; SIZE_MAX when it overflows): a larger chunk file or inner
 * chunk is not an encoding of the chunk and is refused unread. Decoding
 * bounds each step the same way. */
size_t tz_chain_max_encoded(const tz_codec_chain *chain, size_t decoded);

/* meta.c: metadata documents <-> tz_array_meta. `where` names the array in
 * error messages. The parse functions fill meta and *attributes (malloc'd). */
ts_status tz_meta_parse_v3(const char *where, json_t *doc, tz_array_meta *meta,
                           char **attributes, ts_error *err);
ts_status tz_meta_parse_v2(const char *where, json_t *zarray, tz_array_meta *meta,
                           ts_error *err);
/* Returns a new JSON document (zarr.json or .zarray) for meta; attributes
 * (v3 only) are embedded from meta->attributes_json. */
ts_status tz_meta_to_json(const char *where, const tz_array_meta *meta, json_t **out,
                          ts_error *err);
/* Parses JSON object text (NULL -> {}) for attributes. */
ts_status tz_parse_attributes(const char *where, const char *text, json_t **out, ts_error *err);
/* Fill value as one element of dtype, native endian. */
void tz_fill_element(ts_dtype dtype, double fill, unsigned char out[8]);

/* group.c: a JSON object document; a missing file is *found = false, not an
 * error; invalid JSON or a non-object is TS_ERR_FORMAT naming the file. */
ts_status tz_load_json(const char *path, json_t **out, bool *found, ts_error *err);
/* Writes doc (indented) to dir/name with ts_write_file_atomic. */
ts_status tz_write_json(const char *dir, const char *name, json_t *doc, ts_error *err);

/* group.c: the error for a path with no zarr metadata: TS_ERR_UNSUPPORTED
 * when the path is (inside) a zip file, else TS_ERR_FORMAT. */
ts_status tz_no_node(const char *path, const char *what, ts_error *err);

/* region.c: copying boxes between C-order buffers, contiguous rows by memcpy. */
/* Copies the box `extent` at src_off in src (shape src_shape) to dst_off in
 * dst (shape dst_shape). */
void tz_copy_box(int ndim, size_t esize, const void *src, const int64_t *src_shape,
                 const int64_t *src_off, void *dst, const int64_t *dst_shape,
                 const int64_t *dst_off, const int64_t *extent);
/* Sets the box to the fill element. */
void tz_fill_box(int ndim, size_t esize, const unsigned char *fill, void *dst,
                 const int64_t *dst_shape, const int64_t *dst_off, const int64_t *extent);
/* True when all n elements equal the fill (NaN matching NaN if fill_is_nan). */
bool tz_all_fill(const tz_array *arr, const void *data, size_t n);
/* A block (chunk or shard) holding only the fill value is not stored (it
 * reads as the fill), and a file an earlier write left at its path is
 * removed, so a re-run gives the same store. */
ts_status tz_remove_fill_block(const char *file, ts_error *err);

/* shard.c */
/* Encodes the shard (its inner chunks as par's items) and writes it to
 * file_path atomically; an all-fill shard is not written and a stale file
 * there is removed. */
ts_status tz_shard_write(const tz_array *arr, const void *shard, const char *key,
                         const tz_parallel *par, const char *file_path, ts_error *err);
/* Reads the part `box_off`/`extent` (shard-relative) of the shard file at
 * file_path into dst (shape dst_shape, at dst_off). Missing file = fill. */
ts_status tz_shard_read(const tz_array *arr, const char *file_path, const char *key,
                        const int64_t *box_off, const int64_t *extent, void *dst,
                        const int64_t *dst_shape, const int64_t *dst_off, ts_error *err);

#endif
