/* The codec chain: array->array (transpose), array->bytes (bytes: endian),
 * bytes->bytes (blosc, zstd, gzip, zlib, crc32c). Encoding allocates; the
 * last decoding step writes straight into the caller's buffer when nothing
 * (transpose, byte swap) has to follow, so a compressed chunk costs one
 * decompression and no extra copy.
 *
 * Decoding is bounded by the chunk, never by what the data claims: each
 * step writes into a buffer of the most that step can produce from a valid
 * chunk (the chunk's size for the last step, the encoding bound of the steps
 * below it for the others) and stops there, so a frame claiming 2^60 bytes
 * or a stream inflating to gigabytes costs no more memory or time than a
 * valid chunk; going past the bound is TS_ERR_CORRUPT. */
#include "zarr/zarr_internal.h"

#include <blosc.h>
#include <limits.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>
#include <zstd.h>
#include <zstd_errors.h>

/* ---------------------------------------------------------------- helpers */

static void byteswap(void *data, size_t n, size_t esize) {
    unsigned char *p = data;
    if (esize == 2) {
        for (size_t i = 0; i < n; i++, p += 2) { unsigned char t = p[0]; p[0] = p[1]; p[1] = t; }
    } else if (esize == 4) {
        for (size_t i = 0; i < n; i++, p += 4) {
            uint32_t v;
            memcpy(&v, p, 4);
            v = __builtin_bswap32(v);
            memcpy(p, &v, 4);
        }
    } else if (esize == 8) {
        for (size_t i = 0; i < n; i++, p += 8) {
            uint64_t v;
            memcpy(&v, p, 8);
            v = __builtin_bswap64(v);
            memcpy(p, &v, 8);
        }
    }
}

/* dst = transpose(src, order): dst.shape[i] = src_shape[order[i]]. */
static void transpose(int ndim, size_t esize, const int *order, const unsigned char *src,
                      const int64_t *src_shape, unsigned char *dst) {
    int64_t src_stride[TZ_MAX_DIM], dst_shape[TZ_MAX_DIM], stride[TZ_MAX_DIM], idx[TZ_MAX_DIM];
    int64_t s = 1;
    for (int i = ndim - 1; i >= 0; i--) { src_stride[i] = s; s *= src_shape[i]; }
    for (int i = 0; i < ndim; i++) {
        dst_shape[i] = src_shape[order[i]];
        stride[i] = src_stride[order[i]];
        idx[i] = 0;
    }
    int64_t n = tz_prod(ndim, dst_shape);
    int64_t off = 0;
    for (int64_t k = 0; k < n; k++) {
        memcpy(dst + (size_t)k * esize, src + (size_t)off * esize, esize);
        for (int d = ndim - 1; d >= 0; d--) {
            idx[d]++;
            off += stride[d];
            if (idx[d] < dst_shape[d]) break;
            off -= stride[d] * dst_shape[d];
            idx[d] = 0;
        }
    }
}

static bool is_array_codec(tz_codec_id id) { return id == TZ_CODEC_TRANSPOSE; }

static ts_status check_chain(const tz_codec_chain *chain, int ndim, int *first_bytes_codec,
                             bool *big_endian, ts_error *err) {
    int i = 0;
    for (; i < chain->n && is_array_codec(chain->c[i].id); i++) {
        bool seen[TZ_MAX_DIM] = {false};
        for (int d = 0; d < ndim; d++) {
            int o = chain->c[i].order[d];
            if (o < 0 || o >= ndim || seen[o])
                return ts_fail(err, TS_ERR_FORMAT, "transpose order is not a permutation of %d axes", ndim);
            seen[o] = true;
        }
    }
    if (i < chain->n && chain->c[i].id == TZ_CODEC_BYTES) { *big_endian = chain->c[i].big_endian; i++; }
    *first_bytes_codec = i;
    for (int k = i; k < chain->n; k++) {
        tz_codec_id id = chain->c[k].id;
        if (id == TZ_CODEC_TRANSPOSE || id == TZ_CODEC_BYTES || id == TZ_CODEC_SHARDING)
            return ts_fail(err, TS_ERR_FORMAT, "codec chain out of order (array codec after bytes codecs)");
    }
    return TS_OK;
}

/* -------------------------------------------------------- bytes -> bytes */

/* Compression contexts reused across the chunks of one call (a shard):
 * creating a zstd context per chunk costs as much as compressing it. */
void tz_codec_ctx_free(tz_codec_ctx *ctx) {
    ZSTD_freeCCtx(ctx->zc);
    ZSTD_freeDCtx(ctx->zd);
    free(ctx->buf[0]);
    free(ctx->buf[1]);
    memset(ctx, 0, sizeof *ctx);
}

/* Scratch buffer k of the context with at least `need` bytes. Kept across
 * chunks, so large outputs are not mapped and unmapped for every chunk. */
static unsigned char *ctx_buf(tz_codec_ctx *ctx, int k, size_t need) {
    if (ctx->cap[k] < need) {
        size_t cap = ctx->cap[k] * 2 > need ? ctx->cap[k] * 2 : need;
        unsigned char *b = realloc(ctx->buf[k], cap);
        if (!b) return NULL;
        ctx->buf[k] = b;
        ctx->cap[k] = cap;
    }
    return ctx->buf[k];
}

/* Largest output of one encoding step for n input bytes. */
static size_t encode_bound(const tz_codec *c, size_t n) {
    switch (c->id) {
    case TZ_CODEC_ZSTD: return ZSTD_compressBound(n);
    case TZ_CODEC_GZIP:
    case TZ_CODEC_ZLIB: return compressBound((uLong)n) + 32; /* + gzip header/trailer */
    case TZ_CODEC_BLOSC: return n + BLOSC_MAX_OVERHEAD;
    case TZ_CODEC_CRC32C: return n + 4;
    default: return n;
    }
}

/* Encodes one bytes->bytes step into o (capacity encode_bound(c, n)). */
static ts_status encode_one(const tz_codec *c, size_t esize, const unsigned char *in, size_t n,
                            unsigned char *o, size_t cap, size_t *out_n, tz_codec_ctx *ctx, ts_error *err) {
    switch (c->id) {
    case TZ_CODEC_ZSTD: {
        if (!ctx->zc) {
            ctx->zc = ZSTD_createCCtx();
            ctx->zc_params = -1;
        }
        ZSTD_CCtx *cc = ctx->zc;
        if (!cc) return ts_fail(err, TS_ERR_NOMEM, "out of memory (zstd)");
        /* Parameters only when they change: resetting them makes zstd
         * re-initialise its whole workspace for every chunk. */
        int params = c->level * 2 + (c->checksum ? 1 : 0);
        if (ctx->zc_params != params) {
            ZSTD_CCtx_reset(cc, ZSTD_reset_session_and_parameters);
            ZSTD_CCtx_setParameter(cc, ZSTD_c_compressionLevel, c->level);
            ZSTD_CCtx_setParameter(cc, ZSTD_c_checksumFlag, c->checksum ? 1 : 0);
            ctx->zc_params = params;
        }
        size_t r = ZSTD_compress2(cc, o, cap, in, n);
        if (ZSTD_isError(r)) {
            ctx->zc_params = -1;
            return ts_fail(err, TS_ERR_CODEC, "zstd compression failed: %s", ZSTD_getErrorName(r));
        }
        *out_n = r;
        return TS_OK;
    }
    case TZ_CODEC_GZIP:
    case TZ_CODEC_ZLIB: {
        z_stream zs;
        memset(&zs, 0, sizeof zs);
        int wbits = c->id == TZ_CODEC_GZIP ? 15 + 16 : 15;
        int level = c->level < 0 ? Z_DEFAULT_COMPRESSION : c->level;
        if (deflateInit2(&zs, level, Z_DEFLATED, wbits, 8, Z_DEFAULT_STRATEGY) != Z_OK)
            return ts_fail(err, TS_ERR_CODEC, "deflateInit failed (level %d)", c->level);
        /* zlib counts in uInt: feed chunks over 4 GiB in pieces (one
         * (uInt) cast compressed only the first n mod 2^32 bytes). */
        zs.next_in = (Bytef *)in;
        zs.next_out = o;
        size_t in_left = n, out_left = cap;
        int r;
        do {
            if (zs.avail_in == 0) {
                zs.avail_in = in_left > UINT_MAX ? UINT_MAX : (uInt)in_left;
                in_left -= zs.avail_in;
            }
            if (zs.avail_out == 0) {
                zs.avail_out = out_left > UINT_MAX ? UINT_MAX : (uInt)out_left;
                out_left -= zs.avail_out;
            }
            r = deflate(&zs, in_left == 0 ? Z_FINISH : Z_NO_FLUSH);
        } while (r == Z_OK ||
                 (r == Z_BUF_ERROR && ((zs.avail_out == 0 && out_left > 0) || (zs.avail_in == 0 && in_left > 0))));
        size_t got = (size_t)(zs.next_out - o);
        deflateEnd(&zs);
        if (r != Z_STREAM_END) return ts_fail(err, TS_ERR_CODEC, "deflate failed (%d)", r);
        *out_n = got;
        return TS_OK;
    }
    case TZ_CODEC_BLOSC: {
        size_t ts = c->typesize > 0 ? (size_t)c->typesize : esize;
        int r = blosc_compress_ctx(c->level, (int)c->shuffle, ts, n, in, o, cap,
                                   c->cname[0] ? c->cname : "lz4", (size_t)c->blocksize, 1);
        if (r <= 0) {
            int code = blosc_compname_to_compcode(c->cname[0] ? c->cname : "lz4");
            if (code < 0) return ts_fail(err, TS_ERR_UNSUPPORTED, "blosc compressor '%s' is not available", c->cname);
            return ts_fail(err, TS_ERR_CODEC, "blosc compression failed (cname '%s', %d)", c->cname, r);
        }
        *out_n = (size_t)r;
        return TS_OK;
    }
    case TZ_CODEC_CRC32C: {
        memcpy(o, in, n);
        uint32_t crc = tz_crc32c(0, in, n);
        for (int k = 0; k < 4; k++) o[n + (size_t)k] = (unsigned char)(crc >> (8 * k));
        *out_n = n + 4;
        return TS_OK;
    }
    default:
        return ts_fail(err, TS_ERR_UNSUPPORTED, "codec %d cannot encode bytes", (int)c->id);
    }
}

/* Largest encoding of n bytes through one bytes->bytes step by any encoder
 * (readers meet files written by others): our own bound plus room for
 * what other writers add (gzip names and extra fields, zstd frames ended at
 * every flush, blosc block headers). Saturates instead of wrapping. */
static size_t step_bound(const tz_codec *c, size_t n) {
    if (c->id == TZ_CODEC_BYTES || c->id == TZ_CODEC_TRANSPOSE) return n;
    size_t b = encode_bound(c, n);
    size_t slack = n / 64 + ((size_t)64 << 10);
    if (b < n || b > SIZE_MAX - slack) return SIZE_MAX;
    return b + slack;
}

size_t tz_chain_max_encoded(const tz_codec_chain *chain, size_t decoded) {
    size_t b = decoded;
    for (int i = 0; i < chain->n; i++) b = step_bound(&chain->c[i], b);
    return b;
}

/* For messages: what a decoding step's output went past, "the chunk's 8192
 * bytes" (the last step) or "73872 bytes, the most ...". */
#define BOUND_FMT "%s%zu bytes%s"
#define BOUND_ARGS(cap, exact) (exact) ? "the chunk's " : "", (size_t)(cap), \
        (exact) ? "" : ", the most this step can produce for a valid chunk"

/* Inflates (zlib or gzip, detected) into o, at most cap bytes (exactly cap
 * when exact). Output beyond cap is detected with one spare byte, without
 * inflating further. */
static ts_status inflate_capped(const unsigned char *in, size_t n, unsigned char *o, size_t cap, bool exact,
                                size_t *out_n, ts_error *err) {
    z_stream zs;
    memset(&zs, 0, sizeof zs);
    if (inflateInit2(&zs, 15 + 32) != Z_OK) return ts_fail(err, TS_ERR_CODEC, "inflateInit failed");
    /* zlib counts in uInt: input and output over 4 GiB go in pieces. */
    size_t unfed = n, got = 0;
    unsigned char spare;
    bool over = false;
    int r;
    for (;;) {
        if (zs.avail_in == 0 && unfed > 0) {
            zs.next_in = (Bytef *)(in + (n - unfed));
            zs.avail_in = unfed > UINT_MAX ? UINT_MAX : (uInt)unfed;
            unfed -= zs.avail_in;
        }
        size_t room = cap - got;
        bool probe = room == 0;
        zs.next_out = probe ? &spare : o + got;
        zs.avail_out = probe ? 1 : room > UINT_MAX ? UINT_MAX : (uInt)room;
        uInt before = zs.avail_out;
        r = inflate(&zs, unfed == 0 ? Z_FINISH : Z_NO_FLUSH);
        if (probe) {
            if (zs.avail_out == 0) { over = true; break; }
        } else {
            got += before - zs.avail_out;
        }
        if (r == Z_STREAM_END) break;
        if (r == Z_OK) continue;
        /* Z_BUF_ERROR: no progress; fine only when the output just filled
         * (probed next round) or more input is waiting to be fed. */
        if (r == Z_BUF_ERROR && ((zs.avail_in == 0 && unfed > 0) || (!probe && got == cap))) continue;
        break;
    }
    inflateEnd(&zs);
    if (over)
        return ts_fail(err, TS_ERR_CORRUPT, "zlib/gzip data inflates to more than " BOUND_FMT,
                       BOUND_ARGS(cap, exact));
    if (r != Z_STREAM_END)
        return ts_fail(err, TS_ERR_CORRUPT, "zlib/gzip data is invalid or truncated (%s)",
                       zs.msg ? zs.msg : "incomplete stream");
    if (exact && got != cap) return ts_fail(err, TS_ERR_CORRUPT, "inflated %zu bytes, expected %zu", got, cap);
    *out_n = got;
    return TS_OK;
}

/* Single-shot into the bounded buffer: zstd stops at its end whatever the
 * frame header claims, and needs no window buffer (streaming would allocate
 * one as large as the frame asks). Frames without a content size (streaming
 * encoders) and several frames decode the same way. */
static ts_status zstd_decode(const unsigned char *in, size_t n, unsigned char *o, size_t cap, bool exact,
                             size_t *out_n, tz_codec_ctx *ctx, ts_error *err) {
    unsigned long long fs = ZSTD_getFrameContentSize(in, n);
    if (fs == ZSTD_CONTENTSIZE_ERROR) return ts_fail(err, TS_ERR_CORRUPT, "not a zstd frame");
    if (fs != ZSTD_CONTENTSIZE_UNKNOWN && fs > cap)
        return ts_fail(err, TS_ERR_CORRUPT, "zstd frame claims %llu bytes, more than " BOUND_FMT, fs,
                       BOUND_ARGS(cap, exact));
    if (!ctx->zd) ctx->zd = ZSTD_createDCtx();
    if (!ctx->zd) return ts_fail(err, TS_ERR_NOMEM, "out of memory (zstd)");
    size_t r = ZSTD_decompressDCtx(ctx->zd, o, cap, in, n);
    if (ZSTD_isError(r)) {
        if (ZSTD_getErrorCode(r) == ZSTD_error_dstSize_tooSmall)
            return ts_fail(err, TS_ERR_CORRUPT, "zstd data decodes to more than " BOUND_FMT,
                           BOUND_ARGS(cap, exact));
        return ts_fail(err, TS_ERR_CORRUPT, "zstd decompression failed: %s", ZSTD_getErrorName(r));
    }
    if (exact && r != cap)
        return ts_fail(err, TS_ERR_CORRUPT, "zstd data decodes to %zu bytes, expected %zu", r, cap);
    *out_n = r;
    return TS_OK;
}

/* The header's sizes are checked against the bound before anything is
 * decompressed: blosc trusts them for its own buffers. */
static ts_status blosc_decode(const unsigned char *in, size_t n, unsigned char *o, size_t cap, bool exact,
                              size_t *out_n, ts_error *err) {
    size_t nbytes = 0, cbytes = 0, blocksize = 0;
    if (n < BLOSC_MIN_HEADER_LENGTH || blosc_cbuffer_validate(in, n, &nbytes) != 0)
        return ts_fail(err, TS_ERR_CORRUPT, "blosc header is invalid or the buffer truncated (%zu bytes)", n);
    blosc_cbuffer_sizes(in, &nbytes, &cbytes, &blocksize);
    if (nbytes > cap)
        return ts_fail(err, TS_ERR_CORRUPT, "blosc header claims %zu bytes, more than " BOUND_FMT, nbytes,
                       BOUND_ARGS(cap, exact));
    if (exact && nbytes != cap)
        return ts_fail(err, TS_ERR_CORRUPT, "blosc buffer holds %zu bytes, expected %zu", nbytes, cap);
    if (nbytes > 0 && (blocksize == 0 || blocksize > nbytes))
        return ts_fail(err, TS_ERR_CORRUPT, "blosc header's block size %zu does not fit its %zu bytes", blocksize,
                       nbytes);
    int r = nbytes ? blosc_decompress_ctx(in, o, nbytes, 1) : 0;
    if (r < 0 || (size_t)r != nbytes) {
        /* Flags bits 5-7 name the compressor; Debian's c-blosc lacks snappy. */
        const char *cname = NULL;
        int code = in[2] >> 5;
        if (blosc_compcode_to_compname(code, &cname) < 0) {
            /* A code no blosc ever had (no name) is a damaged header; a
             * known compressor left out of this build is unsupported. */
            if (!cname) return ts_fail(err, TS_ERR_CORRUPT, "blosc header names no known compressor (code %d)", code);
            return ts_fail(err, TS_ERR_UNSUPPORTED, "blosc compressor '%s' (code %d) is not available in this c-blosc build",
                           cname, code);
        }
        return ts_fail(err, TS_ERR_CORRUPT, "blosc decompression failed (%d)", r);
    }
    *out_n = nbytes;
    return TS_OK;
}

/* Decodes one bytes->bytes step into o (capacity cap; exactly cap bytes
 * when exact), except crc32c, which strips its checksum in place: *out is
 * `in` then, copied into o only when o is the caller's chunk (exact). */
static ts_status decode_one(const tz_codec *c, const unsigned char *in, size_t n, unsigned char *o,
                            size_t cap, bool exact, const unsigned char **out, size_t *out_n,
                            tz_codec_ctx *ctx, ts_error *err) {
    *out = o;
    switch (c->id) {
    case TZ_CODEC_ZSTD: return zstd_decode(in, n, o, cap, exact, out_n, ctx, err);
    case TZ_CODEC_GZIP:
    case TZ_CODEC_ZLIB: return inflate_capped(in, n, o, cap, exact, out_n, err);
    case TZ_CODEC_BLOSC: return blosc_decode(in, n, o, cap, exact, out_n, err);
    case TZ_CODEC_CRC32C: {
        if (n < 4) return ts_fail(err, TS_ERR_CORRUPT, "crc32c: %zu bytes is too short for a checksum", n);
        if (n - 4 > cap || (exact && n - 4 != cap))
            return ts_fail(err, TS_ERR_CORRUPT, "crc32c payload is %zu bytes, expected %s%zu", n - 4,
                           exact ? "" : "at most ", cap);
        uint32_t stored = (uint32_t)in[n - 4] | (uint32_t)in[n - 3] << 8 |
                          (uint32_t)in[n - 2] << 16 | (uint32_t)in[n - 1] << 24;
        uint32_t crc = tz_crc32c(0, in, n - 4);
        if (crc != stored)
            return ts_fail(err, TS_ERR_CORRUPT, "CRC32C mismatch (stored 0x%08x, computed 0x%08x)", stored, crc);
        if (o) memcpy(o, in, n - 4);
        else *out = in;
        *out_n = n - 4;
        return TS_OK;
    }
    default:
        return ts_fail(err, TS_ERR_UNSUPPORTED, "codec %d cannot decode bytes", (int)c->id);
    }
}

/* ------------------------------------------------------------ the chain */

ts_status tz_encode_chunk(const tz_codec_chain *chain, ts_dtype dtype, bool big_endian,
                          int ndim, const int64_t *shape, const void *data,
                          void **out, size_t *out_size, ts_error *err) {
    tz_codec_ctx ctx = {0};
    const void *enc = NULL;
    size_t n = 0;
    ts_status st = tz_encode_chunk_ctx(chain, dtype, big_endian, ndim, shape, data, &enc, &n, &ctx, err);
    if (!st) {
        *out = malloc(n ? n : 1);
        if (*out) memcpy(*out, enc, n);
        else st = ts_fail(err, TS_ERR_NOMEM, "out of memory (%zu bytes)", n);
        *out_size = n;
    }
    tz_codec_ctx_free(&ctx);
    return st;
}

ts_status tz_decode_chunk(const tz_codec_chain *chain, ts_dtype dtype, bool big_endian,
                          int ndim, const int64_t *shape, const void *in, size_t in_size,
                          void *data, ts_error *err) {
    tz_codec_ctx ctx = {0};
    ts_status st = tz_decode_chunk_ctx(chain, dtype, big_endian, ndim, shape, in, in_size, data, &ctx, err);
    tz_codec_ctx_free(&ctx);
    return st;
}

ts_status tz_encode_chunk_ctx(const tz_codec_chain *chain, ts_dtype dtype, bool big_endian,
                              int ndim, const int64_t *shape, const void *data,
                              const void **out, size_t *out_size, tz_codec_ctx *ctx, ts_error *err) {
    size_t esize = ts_dtype_size(dtype);
    if (!esize) return ts_fail(err, TS_ERR_ARG, "invalid dtype");
    int first;
    bool be = big_endian;
    ts_status st = check_chain(chain, ndim, &first, &be, err);
    if (st) return st;
    size_t n = (size_t)tz_prod(ndim, shape) * esize;
    const unsigned char *cur = data;
    int k = 0; /* the scratch buffer the next step writes to (ping-pong) */
    int64_t cur_shape[TZ_MAX_DIM];
    memcpy(cur_shape, shape, sizeof(int64_t) * (size_t)ndim);
    for (int i = 0; i < first && chain->c[i].id == TZ_CODEC_TRANSPOSE; i++) {
        unsigned char *t = ctx_buf(ctx, k, n ? n : 1);
        if (!t) return ts_fail(err, TS_ERR_NOMEM, "out of memory (transpose)");
        transpose(ndim, esize, chain->c[i].order, cur, cur_shape, t);
        int64_t ns[TZ_MAX_DIM];
        for (int d = 0; d < ndim; d++) ns[d] = cur_shape[chain->c[i].order[d]];
        memcpy(cur_shape, ns, sizeof(int64_t) * (size_t)ndim);
        cur = t;
        k ^= 1;
    }
    if (esize > 1 && be != tz_native_big_endian()) {
        unsigned char *t = ctx_buf(ctx, k, n ? n : 1);
        if (!t) return ts_fail(err, TS_ERR_NOMEM, "out of memory (byte swap)");
        if (t != cur) memcpy(t, cur, n);
        byteswap(t, n / esize, esize);
        cur = t;
        k ^= 1;
    }
    size_t cur_n = n;
    for (int i = first; i < chain->n; i++) {
        size_t cap = encode_bound(&chain->c[i], cur_n);
        unsigned char *o = ctx_buf(ctx, k, cap);
        if (!o) return ts_fail(err, TS_ERR_NOMEM, "out of memory (%zu bytes)", cap);
        size_t on = 0;
        st = encode_one(&chain->c[i], esize, cur, cur_n, o, cap, &on, ctx, err);
        if (st) return st;
        cur = o;
        cur_n = on;
        k ^= 1;
    }
    *out = cur;
    *out_size = cur_n;
    return TS_OK;
}

/* Which of ctx's scratch buffers holds p (-1: neither, the caller's). */
static int buf_of(const tz_codec_ctx *ctx, const unsigned char *p) {
    for (int k = 0; k < 2; k++)
        if (ctx->buf[k] && (uintptr_t)p >= (uintptr_t)ctx->buf[k] &&
            (uintptr_t)p < (uintptr_t)ctx->buf[k] + ctx->cap[k])
            return k;
    return -1;
}

ts_status tz_decode_chunk_ctx(const tz_codec_chain *chain, ts_dtype dtype, bool big_endian,
                              int ndim, const int64_t *shape, const void *in, size_t in_size,
                              void *data, tz_codec_ctx *ctx, ts_error *err) {
    size_t esize = ts_dtype_size(dtype);
    if (!esize) return ts_fail(err, TS_ERR_ARG, "invalid dtype");
    int first;
    bool be = big_endian;
    ts_status st = check_chain(chain, ndim, &first, &be, err);
    if (st) return st;
    int ntrans = 0;
    while (ntrans < first && chain->c[ntrans].id == TZ_CODEC_TRANSPOSE) ntrans++;
    bool swap = esize > 1 && be != tz_native_big_endian();
    size_t n = (size_t)tz_prod(ndim, shape) * esize;

    /* bound[i]: the most decoding step i can rightly produce, i.e. the
     * largest input encoding step i can have been given: the chunk itself
     * for the first bytes codec, the encoding bound of the steps before it
     * for the others; bound[chain->n] bounds the stored bytes. */
    size_t bound[TZ_MAX_CODECS + 1];
    bound[first] = n;
    for (int i = first; i < chain->n; i++) bound[i + 1] = step_bound(&chain->c[i], bound[i]);
    if (in_size > bound[chain->n])
        return ts_fail(err, TS_ERR_CORRUPT, "%zu stored bytes, more than %zu, the most any encoding of a "
                       "%zu-byte chunk through its codecs can be", in_size, bound[chain->n], n);

    const unsigned char *cur = in;
    size_t cur_n = in_size;
    int cur_buf = buf_of(ctx, cur);
    for (int i = chain->n - 1; i >= first; i--) {
        bool last = i == first;
        unsigned char *o = NULL;
        int o_buf = -1;
        if (last && ntrans == 0) {
            o = data;
        } else if (chain->c[i].id != TZ_CODEC_CRC32C) {
            o_buf = cur_buf == 0 ? 1 : 0;
            if (!(o = ctx_buf(ctx, o_buf, bound[i] ? bound[i] : 1)))
                return ts_fail(err, TS_ERR_NOMEM, "out of memory (%zu bytes to decode a %zu-byte chunk)", bound[i], n);
        }
        const unsigned char *out = NULL;
        size_t on = 0;
        st = decode_one(&chain->c[i], cur, cur_n, o, bound[i], last, &out, &on, ctx, err);
        if (st) return st;
        if (out != o) o_buf = cur_buf; /* crc32c: a prefix of its input */
        cur = out;
        cur_n = on;
        cur_buf = o_buf;
    }
    if (cur_n != n) return ts_fail(err, TS_ERR_CORRUPT, "decoded chunk is %zu bytes, expected %zu", cur_n, n);
    if (ntrans > 0) {
        /* Undo the transposes, last first: the encoded shape is the chunk
         * shape permuted by each order in turn. */
        int64_t shapes[TZ_MAX_CODECS + 1][TZ_MAX_DIM];
        memcpy(shapes[0], shape, sizeof(int64_t) * (size_t)ndim);
        for (int t = 0; t < ntrans; t++)
            for (int d = 0; d < ndim; d++) shapes[t + 1][d] = shapes[t][chain->c[t].order[d]];
        for (int t = ntrans - 1; t >= 0; t--) {
            int inv[TZ_MAX_DIM];
            for (int d = 0; d < ndim; d++) inv[chain->c[t].order[d]] = d;
            int o_buf = cur_buf == 0 ? 1 : 0;
            unsigned char *dst = t == 0 ? data : ctx_buf(ctx, o_buf, n ? n : 1);
            if (!dst) return ts_fail(err, TS_ERR_NOMEM, "out of memory (transpose)");
            transpose(ndim, esize, inv, cur, shapes[t + 1], dst);
            cur = dst;
            cur_buf = o_buf;
        }
    } else if (cur != data) {
        memcpy(data, cur, n);
    }
    if (swap) byteswap(data, n / esize, esize);
    return TS_OK;
}
