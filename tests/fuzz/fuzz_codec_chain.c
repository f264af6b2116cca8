/*
 * Fuzz target: codec chains. The input is a metadata document (zarr.json,
 * or a .zarray when its zarr_format is not 3), a NUL byte, and the encoded
 * bytes of one chunk. The chunk is decoded through the parsed chain (the
 * inner-chunk codecs of a sharded array) into a buffer of the chunk's
 * expected size, as a reader does: transpose, bytes (endian), blosc, zstd,
 * gzip, zlib, crc32c in any order the metadata gives. Every decode step must
 * stay bounded by that size (libFuzzer's malloc and RSS limits catch a bomb).
 * Invariant: a chunk that decodes, encoded again through the same chain (at
 * a low level, for speed), decodes to the same bytes.
 */
#include "fuzz_common.h"

#include <jansson.h>

#include "zarr/zarr_internal.h"

/* Re-encoding at the document's level (zstd 22, gzip 9) would dominate the
 * time per input; the level does not change what decoding must give. */
static void lower_levels(tz_codec_chain *c) {
    for (int i = 0; i < c->n; i++)
        if (c->c[i].level > 1) c->c[i].level = 1;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    size_t nmeta, rest;
    fz_split(data, size, &nmeta, &rest);
    json_error_t je;
    json_t *doc = json_loadb((const char *)data, nmeta, 0, &je);
    if (!doc) return 0;
    ts_error err = {0};
    tz_array_meta meta;
    char *attrs = NULL;
    ts_status st = json_integer_value(json_object_get(doc, "zarr_format")) == 3
                       ? tz_meta_parse_v3("fuzz", doc, &meta, &attrs, &err)
                       : tz_meta_parse_v2("fuzz", doc, &meta, &err);
    json_decref(doc);
    free(attrs);
    if (st != TS_OK) {
        fz_no_nomem(err);
        return 0;
    }
    const tz_codec_chain *chain = meta.sharded ? &meta.sharding.codecs : &meta.codecs;
    const int64_t *shape = meta.sharded ? meta.sharding.inner_chunk : meta.chunk;
    size_t expect = ts_dtype_size(meta.dtype);
    for (int d = 0; d < meta.ndim; d++) {
        if (shape[d] <= 0 || (size_t)shape[d] > FZ_MAX_DECODED / expect) return 0;
        expect *= (size_t)shape[d];
    }
    if (expect > FZ_MAX_DECODED) return 0;
    unsigned char *out = malloc(expect ? expect : 1);
    fz_check(out != NULL, "malloc %zu", expect);
    st = tz_decode_chunk(chain, meta.dtype, meta.big_endian, meta.ndim, shape, data + rest, size - rest, out, &err);
    if (st == TS_OK && expect <= ((size_t)1 << 20)) {
        tz_codec_chain low = *chain;
        lower_levels(&low);
        void *enc = NULL;
        size_t nenc = 0;
        if (tz_encode_chunk(&low, meta.dtype, meta.big_endian, meta.ndim, shape, out, &enc, &nenc, &err) == TS_OK) {
            unsigned char *again = malloc(expect ? expect : 1);
            fz_check(again != NULL, "malloc %zu", expect);
            st = tz_decode_chunk(&low, meta.dtype, meta.big_endian, meta.ndim, shape, enc, nenc, again, &err);
            fz_check(st == TS_OK, "a chunk the chain encoded does not decode: %s", err.message);
            fz_check(memcmp(out, again, expect) == 0, "decode(encode(chunk)) differs from the chunk");
            free(again);
            free(enc);
        } else {
            fz_no_nomem(err);
        }
    } else if (st != TS_OK) {
        fz_check_error(err, "decode");
    }
    free(out);
    return 0;
}
