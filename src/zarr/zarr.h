/*
 * The zarr layer: arrays in zarr v2 and v3 (with sharding_indexed), on a
 * local file-system store. Written here because no packaged C library does
 * it; kept small and tested against zarr-python, zarrita and the fixtures in
 * shared/testdata.
 *
 * Model: an array is split into "storage blocks", the unit that is one file
 * on disk: a chunk for v2 and unsharded v3, a shard for sharded v3. Writes
 * are whole blocks (encoded in memory, written to a temporary name, renamed),
 * so no writer ever reads-modifies-writes a file another writer may touch.
 * Reads take any box and are thread-safe: an open array is immutable.
 */
#ifndef TS_ZARR_H
#define TS_ZARR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "tessera/tessera.h"

#define TZ_MAX_DIM 8

/* One codec of a chain. v2 "compressor"/"filters" are mapped onto the same
 * list as v3 "codecs" (array->bytes->bytes). */
typedef enum tz_codec_id {
    TZ_CODEC_BYTES = 1,    /* v3 array->bytes; endian */
    TZ_CODEC_TRANSPOSE,    /* v3 array->array; order[] */
    TZ_CODEC_BLOSC,        /* cname, clevel, shuffle, typesize, blocksize */
    TZ_CODEC_ZSTD,         /* level, checksum */
    TZ_CODEC_GZIP,         /* level (gzip container) */
    TZ_CODEC_ZLIB,         /* level (zlib container; v2 "zlib") */
    TZ_CODEC_CRC32C,       /* v3 bytes->bytes: appends little-endian CRC32C */
    TZ_CODEC_SHARDING      /* v3 sharding_indexed; see tz_sharding */
} tz_codec_id;

typedef enum { TZ_SHUFFLE_NONE = 0, TZ_SHUFFLE_BYTE = 1, TZ_SHUFFLE_BIT = 2 } tz_shuffle;

typedef struct tz_codec {
    tz_codec_id id;
    int level;              /* zstd/gzip/zlib/blosc clevel */
    char cname[16];         /* blosc: lz4, lz4hc, zstd, blosclz, zlib, snappy */
    tz_shuffle shuffle;     /* blosc */
    int typesize;           /* blosc; 0 = element size */
    int blocksize;          /* blosc; 0 = automatic */
    bool checksum;          /* zstd */
    bool big_endian;        /* bytes */
    int order[TZ_MAX_DIM];  /* transpose */
} tz_codec;

#define TZ_MAX_CODECS 8

typedef struct tz_codec_chain {
    int n;
    tz_codec c[TZ_MAX_CODECS];
} tz_codec_chain;

/* v3 sharding_indexed configuration. */
typedef struct tz_sharding {
    int64_t inner_chunk[TZ_MAX_DIM];
    tz_codec_chain codecs;        /* of the inner chunks */
    tz_codec_chain index_codecs;  /* usually bytes(little) + crc32c */
    bool index_at_start;          /* index_location "start" */
} tz_sharding;

typedef enum {
    TZ_KEY_DEFAULT = 0, /* v3 default: "c/0/1/2" (separator '/' or '.') */
    TZ_KEY_V2           /* v2 and v3 "v2": "0.1.2" (separator '.' or '/') */
} tz_key_encoding;

/* Everything needed to create an array, and what an open array reports. */
typedef struct tz_array_meta {
    int zarr_format;              /* 2 or 3 */
    int ndim;
    int64_t shape[TZ_MAX_DIM];
    int64_t chunk[TZ_MAX_DIM];    /* storage block: the shard shape when sharded */
    ts_dtype dtype;
    bool big_endian;              /* v2 dtype "<" vs ">"; v3: bytes codec */
    double fill_value;            /* numeric fill (NaN allowed for floats) */
    tz_key_encoding key_encoding;
    char separator;               /* '/' or '.' */
    tz_codec_chain codecs;        /* v2: filters+compressor; v3: codecs after
                                     the array->bytes codec (which is implicit
                                     unless sharded) */
    bool sharded;                 /* v3 sharding_indexed is the array->bytes codec */
    tz_sharding sharding;
    char dimension_names[TZ_MAX_DIM][16]; /* v3 optional; "" = none */
    const char *attributes_json;  /* create: user attributes as a JSON object text, or NULL */
} tz_array_meta;

typedef struct tz_array tz_array;

/* Defaults: v3, little endian, default key encoding, '/' separator, no codecs. */
void tz_array_meta_init(tz_array_meta *meta, int zarr_format);

/* Convenience: fill meta->codecs (and the sharding inner codecs when sharded)
 * from a product-level codec choice. Call it after setting meta->sharded and
 * meta->big_endian: sharded arrays get sharding.codecs = [bytes, codec] and
 * an empty meta->codecs. (zstd level 3; blosc clevel 5 byte shuffle; gzip 5.) */
void tz_meta_set_codec(tz_array_meta *meta, ts_codec codec);
/* The same with a level (0: the codec's default, as above; the caller has
 * checked it with ts_codec_check_level). */
void tz_meta_set_codec_level(tz_array_meta *meta, ts_codec codec, int level);

/* Opens an existing array (detects v2 .zarray or v3 zarr.json). */
ts_status tz_array_open(const char *path, tz_array **out, ts_error *err);
/* The same where the store's format is known (2 or 3; 0: either): a v2
 * array is opened without first asking for a zarr.json, falling back to
 * both probes when its .zarray is not there. */
ts_status tz_array_open_as(const char *path, int zarr_format, tz_array **out, ts_error *err);

/* Creates an array: writes its metadata (atomically); overwrites existing
 * metadata at that path but never deletes data files. */
ts_status tz_array_create(const char *path, const tz_array_meta *meta, tz_array **out,
                          ts_error *err);

void tz_array_close(tz_array *arr);

const tz_array_meta *tz_array_get_meta(const tz_array *arr);
const char *tz_array_path(const tz_array *arr);
/* The array's attributes as a JSON object text (v2 .zattrs / v3 attributes),
 * "{}" when none. Owned by the array. */
const char *tz_array_attributes(const tz_array *arr);

/* Number of storage blocks along each dimension (ceil(shape / chunk)). */
void tz_array_grid(const tz_array *arr, int64_t grid[TZ_MAX_DIM]);

/* Reads the box [start, start+count) into buf, C order, native endian, of
 * the array's dtype. Missing chunks read as the fill value. Thread-safe.
 * Errors name the store path and chunk key. Each needed chunk (or inner
 * chunk, fetched by pread) is decoded once per call; a box that is exactly
 * one chunk is decoded straight into buf. */
ts_status tz_array_read(const tz_array *arr, const int64_t *start, const int64_t *count,
                        void *buf, ts_error *err);

/* Writes one whole storage block (chunk, or shard when sharded) at block
 * index idx. data holds the full block shape in C order, native endian; the
 * parts beyond the array edge must already hold the fill value (padding).
 * A block equal to the fill value everywhere is not written (and an
 * existing one removed): it reads as the fill. In a shard, such inner
 * chunks are stored as the empty sentinel. Encoded into memory, written to
 * a temporary name, renamed. Thread-safe for distinct idx. */
ts_status tz_array_write_block(tz_array *arr, const int64_t *idx, const void *data,
                               ts_error *err);

/* A caller's way to run independent items in parallel: run(user, n, fn,
 * fn_user, err) calls fn(fn_user, i, worker, err) once for each i in
 * [0, n), on any threads, worker < nworkers naming the thread (for its
 * scratch), and returns when all have finished (the first failure). */
typedef ts_status (*tz_item_fn)(void *fn_user, int64_t i, int worker, ts_error *err);
typedef struct tz_parallel {
    int nworkers;
    ts_status (*run)(void *user, int64_t n, tz_item_fn fn, void *fn_user, ts_error *err);
    void *user;
} tz_parallel;

/* tz_array_write_block with the inner chunks of a shard encoded through
 * par (NULL: on the calling thread). The bytes are the same either way. */
ts_status tz_array_write_block_parallel(tz_array *arr, const int64_t *idx, const void *data,
                                        const tz_parallel *par, ts_error *err);

/* The key of a block/chunk relative to the array path ("c/0/1", "0.1", ...). */
void tz_chunk_key(const tz_array_meta *meta, const int64_t *idx, char *out, size_t n);

/* ---- codec chain (exposed for tests and for the fuse encoder) ---- */

/* Encodes one chunk of `elems` elements of meta->dtype (native endian, C
 * order, chunk shape `shape`) through `chain` into a malloc'd buffer. */
ts_status tz_encode_chunk(const tz_codec_chain *chain, ts_dtype dtype, bool big_endian,
                          int ndim, const int64_t *shape, const void *data,
                          void **out, size_t *out_size, ts_error *err);
/* Decodes into `data` (exactly the chunk's bytes, native endian, C order). */
ts_status tz_decode_chunk(const tz_codec_chain *chain, ts_dtype dtype, bool big_endian,
                          int ndim, const int64_t *shape, const void *in, size_t in_size,
                          void *data, ts_error *err);

/* CRC32C (Castagnoli), as used by the v3 crc32c codec and the shard index. */
uint32_t tz_crc32c(uint32_t crc, const void *data, size_t n);

/* ---- checking stored pieces one by one (check.c; tessera verify) ---- */

/* One thread's decoding scratch (codec contexts, one decoded chunk). */
typedef struct tz_decoder tz_decoder;
tz_decoder *tz_decoder_new(void); /* NULL when out of memory */
void tz_decoder_free(tz_decoder *dec);
/* Decoded bytes of one stored chunk: an inner chunk when sharded. */
size_t tz_stored_chunk_bytes(const tz_array *arr);
/* The most bytes any encoder stores for one stored chunk through its chain
 * (tz_chain_max_encoded, as the readers use): a file (or inner chunk)
 * larger than this is not an encoding of it. */
uint64_t tz_stored_chunk_bound(const tz_array *arr);
/* Decodes one stored chunk (inner chunk when sharded) through its chain
 * into dec's scratch; a wrong decoded size is TS_ERR_CORRUPT. The message
 * names no file (the caller knows which). */
ts_status tz_decode_stored_chunk(const tz_array *arr, const void *in, size_t n, tz_decoder *dec,
                                 ts_error *err);
/* Inner chunks per shard and encoded index bytes (0 when not sharded). */
int64_t tz_shard_inner_count(const tz_array *arr);
size_t tz_shard_index_size(const tz_array *arr);
/* Reads the index of the open shard file fd (fsize bytes) into index
 * (2 * tz_shard_inner_count (offset, nbytes) pairs, native endian), CRC32C
 * checked: too short or a bad CRC is TS_ERR_CORRUPT (messages name no file). */
ts_status tz_shard_index_read(const tz_array *arr, int fd, uint64_t fsize, uint64_t *index, ts_error *err);
/* One index entry against a file of fsize bytes: 1 the empty sentinel, 0 a
 * range inside the chunk data (not over the index, not past the end), -1
 * anything else, with the reason in why. */
int tz_shard_entry_check(const tz_array *arr, uint64_t fsize, uint64_t off, uint64_t nbytes, char *why,
                         size_t n);

/* ---- groups ---- */

/* The largest metadata document read (zarr.json, .zarray, .zattrs,
 * .zgroup): a larger file is refused by its size (a well of 167,000
 * positions is about 7 MB). */
#define TZ_MAX_METADATA_BYTES ((uint64_t)64 << 20)

/* Creates a group (v2: .zgroup + .zattrs; v3: zarr.json node_type group)
 * with attributes (JSON object text, may be NULL). v3 attributes are written
 * as given (OME 0.5 callers put their metadata under "ome"). */
ts_status tz_group_create(const char *path, int zarr_format, const char *attributes_json,
                          ts_error *err);

/* Reads a group's or array's attributes, detecting the format: *zarr_format
 * = 2 or 3. Returns a malloc'd JSON object text ("{}" when none). Missing
 * metadata: TS_ERR_FORMAT naming the path. */
ts_status tz_node_attributes(const char *path, int *zarr_format, char **attributes_json,
                             ts_error *err);

#endif
