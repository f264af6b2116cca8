/* Array metadata: zarr v2 (.zarray) and v3 (zarr.json) documents to and from
 * tz_array_meta. Anything valid but not handled (string/object dtypes, F
 * order, filters like delta) is refused with TS_ERR_UNSUPPORTED naming the
 * array and the key. */
#include "zarr/zarr_internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void tz_array_meta_init(tz_array_meta *meta, int zarr_format) {
    memset(meta, 0, sizeof *meta);
    meta->zarr_format = zarr_format == 2 ? 2 : 3;
    meta->dtype = TS_UINT16;
    meta->key_encoding = meta->zarr_format == 2 ? TZ_KEY_V2 : TZ_KEY_DEFAULT;
    meta->separator = meta->zarr_format == 2 ? '.' : '/';
    meta->sharding.index_codecs.n = 2;
    meta->sharding.index_codecs.c[0].id = TZ_CODEC_BYTES;
    meta->sharding.index_codecs.c[1].id = TZ_CODEC_CRC32C;
}

void tz_meta_set_codec(tz_array_meta *meta, ts_codec codec) { tz_meta_set_codec_level(meta, codec, 0); }

void tz_meta_set_codec_level(tz_array_meta *meta, ts_codec codec, int level) {
    tz_codec c;
    memset(&c, 0, sizeof c);
    switch (codec) {
    case TS_CODEC_ZSTD: c.id = TZ_CODEC_ZSTD; c.level = 3; break;
    case TS_CODEC_BLOSC_LZ4:
        c.id = TZ_CODEC_BLOSC; c.level = 5; strcpy(c.cname, "lz4"); c.shuffle = TZ_SHUFFLE_BYTE; break;
    case TS_CODEC_BLOSC_ZSTD:
        c.id = TZ_CODEC_BLOSC; c.level = 5; strcpy(c.cname, "zstd"); c.shuffle = TZ_SHUFFLE_BYTE; break;
    case TS_CODEC_GZIP: c.id = TZ_CODEC_GZIP; c.level = 5; break;
    case TS_CODEC_NONE: default: c.id = 0; break;
    }
    if (c.id && level > 0) c.level = level;
    tz_codec_chain *chain = meta->sharded ? &meta->sharding.codecs : &meta->codecs;
    chain->n = 0;
    if (meta->sharded) {
        chain->c[chain->n].id = TZ_CODEC_BYTES;
        chain->c[chain->n].big_endian = meta->big_endian;
        chain->n++;
        meta->codecs.n = 0;
    }
    if (c.id) chain->c[chain->n++] = c;
}

/* ------------------------------------------------------------ fill value */

void tz_fill_element(ts_dtype dtype, double fill, unsigned char out[8]) {
    memset(out, 0, 8);
    switch (dtype) {
    case TS_BOOL: out[0] = fill != 0; break;
    case TS_INT8: { int8_t v = (int8_t)fill; memcpy(out, &v, 1); break; }
    case TS_UINT8: { uint8_t v = (uint8_t)fill; memcpy(out, &v, 1); break; }
    case TS_INT16: { int16_t v = (int16_t)fill; memcpy(out, &v, 2); break; }
    case TS_UINT16: { uint16_t v = (uint16_t)fill; memcpy(out, &v, 2); break; }
    case TS_INT32: { int32_t v = (int32_t)fill; memcpy(out, &v, 4); break; }
    case TS_UINT32: { uint32_t v = (uint32_t)fill; memcpy(out, &v, 4); break; }
    case TS_INT64: { int64_t v = (int64_t)fill; memcpy(out, &v, 8); break; }
    case TS_UINT64: { uint64_t v = fill <= 0 ? 0 : (uint64_t)fill; memcpy(out, &v, 8); break; }
    case TS_FLOAT32: { float v = (float)fill; memcpy(out, &v, 4); break; }
    case TS_FLOAT64: memcpy(out, &fill, 8); break;
    default: break;
    }
}

static ts_status parse_fill(const char *where, json_t *v, ts_dtype dtype, double *out, ts_error *err) {
    bool is_float = dtype == TS_FLOAT32 || dtype == TS_FLOAT64;
    if (!v || json_is_null(v)) { *out = 0; return TS_OK; }
    if (json_is_boolean(v)) { *out = json_is_true(v) ? 1 : 0; return TS_OK; }
    if (json_is_number(v)) {
        /* An integer dtype's fill must be an integer it can hold: converting
         * an out-of-range double (-1 for uint16, 1e20) is undefined in C. */
        double d = json_number_value(v), lo = 0, hi = 0;
        switch (dtype) {
        case TS_INT8: lo = INT8_MIN, hi = INT8_MAX; break;
        case TS_UINT8: hi = UINT8_MAX; break;
        case TS_INT16: lo = INT16_MIN, hi = INT16_MAX; break;
        case TS_UINT16: hi = UINT16_MAX; break;
        case TS_INT32: lo = INT32_MIN, hi = INT32_MAX; break;
        case TS_UINT32: hi = UINT32_MAX; break;
        case TS_INT64: lo = -0x1p63, hi = 0x1p63; break;  /* exclusive bound: 2^63 itself is out */
        case TS_UINT64: hi = 0x1p63; break; /* written back as a JSON (signed 64-bit) integer */
        case TS_BOOL: hi = 1; break;
        default: *out = d; return TS_OK; /* floats */
        }
        bool exclusive = dtype == TS_INT64 || dtype == TS_UINT64;
        if (d == floor(d) && d >= lo && (exclusive ? d < hi : d <= hi)) { *out = d; return TS_OK; }
    }
    if (json_is_string(v) && is_float) {
        const char *s = json_string_value(v);
        if (strcmp(s, "NaN") == 0) { *out = NAN; return TS_OK; }
        if (strcmp(s, "Infinity") == 0) { *out = INFINITY; return TS_OK; }
        if (strcmp(s, "-Infinity") == 0) { *out = -INFINITY; return TS_OK; }
        if (strncmp(s, "0x", 2) == 0) { /* v3: the raw IEEE bits */
            unsigned long long bits = strtoull(s + 2, NULL, 16);
            if (dtype == TS_FLOAT32) { uint32_t b = (uint32_t)bits; float f; memcpy(&f, &b, 4); *out = f; }
            else { double d; memcpy(&d, &bits, 8); *out = d; }
            return TS_OK;
        }
    }
    char *txt = json_dumps(v, JSON_ENCODE_ANY);
    ts_status st = ts_fail(err, TS_ERR_FORMAT, "%s: fill_value %s is not valid for dtype %s", where,
                           txt ? txt : "?", ts_dtype_name(dtype));
    free(txt);
    return st;
}

static json_t *fill_to_json(ts_dtype dtype, double fill) {
    if (dtype == TS_BOOL) return json_boolean(fill != 0);
    if (dtype == TS_FLOAT32 || dtype == TS_FLOAT64) {
        if (isnan(fill)) return json_string("NaN");
        if (isinf(fill)) return json_string(fill > 0 ? "Infinity" : "-Infinity");
        return json_real(fill);
    }
    return json_integer((json_int_t)fill);
}

/* ------------------------------------------------------- small JSON reads */

static ts_status get_int_array(const char *where, json_t *doc, const char *key, int64_t *out,
                               int *n, ts_error *err) {
    json_t *a = json_object_get(doc, key);
    if (!json_is_array(a)) return ts_fail(err, TS_ERR_FORMAT, "%s: \"%s\" is missing or not a list", where, key);
    if (json_array_size(a) > TZ_MAX_DIM)
        return ts_fail(err, TS_ERR_UNSUPPORTED, "%s: \"%s\" has %zu dimensions (at most %d)", where, key,
                       json_array_size(a), TZ_MAX_DIM);
    *n = (int)json_array_size(a);
    for (int i = 0; i < *n; i++) {
        json_t *v = json_array_get(a, (size_t)i);
        if (!json_is_integer(v) || json_integer_value(v) < 0)
            return ts_fail(err, TS_ERR_FORMAT, "%s: \"%s\"[%d] is not a non-negative integer", where, key, i);
        out[i] = json_integer_value(v);
    }
    return TS_OK;
}

static int get_int(json_t *obj, const char *key, int dflt) {
    json_t *v = json_object_get(obj, key);
    return json_is_integer(v) ? (int)json_integer_value(v) : dflt;
}

static void copy_name(char *dst, size_t n, const char *src) {
    snprintf(dst, n, "%s", src ? src : "");
}

/* ----------------------------------------------------------- v3 codecs */

static ts_status parse_v3_chain(const char *where, json_t *list, int ndim, tz_codec_chain *chain,
                                tz_sharding *sharding, bool *sharded, ts_error *err);
static ts_status parse_v2_codec(const char *where, json_t *cj, tz_codec *c, ts_error *err);
static ts_status check_sizes(const char *where, const tz_array_meta *meta, ts_status code, ts_error *err);

static ts_status parse_v3_codec(const char *where, json_t *cj, int ndim, tz_codec *c,
                                tz_sharding *sharding, ts_error *err) {
    memset(c, 0, sizeof *c);
    const char *name = json_string_value(json_object_get(cj, "name"));
    if (!name) return ts_fail(err, TS_ERR_FORMAT, "%s: codec without a \"name\"", where);
    json_t *cfg = json_object_get(cj, "configuration");
    if (strcmp(name, "bytes") == 0) {
        c->id = TZ_CODEC_BYTES;
        const char *e = json_string_value(json_object_get(cfg, "endian"));
        if (e && strcmp(e, "big") == 0) c->big_endian = true;
        else if (e && strcmp(e, "little") != 0)
            return ts_fail(err, TS_ERR_FORMAT, "%s: bytes codec endian \"%s\"", where, e);
    } else if (strcmp(name, "transpose") == 0) {
        c->id = TZ_CODEC_TRANSPOSE;
        json_t *o = json_object_get(cfg, "order");
        if (json_is_string(o)) { /* early drafts: "C" or "F" */
            bool f = strcmp(json_string_value(o), "F") == 0;
            for (int d = 0; d < ndim; d++) c->order[d] = f ? ndim - 1 - d : d;
        } else {
            if (!json_is_array(o) || (int)json_array_size(o) != ndim)
                return ts_fail(err, TS_ERR_FORMAT, "%s: transpose order must list %d axes", where, ndim);
            bool seen[TZ_MAX_DIM] = {false};
            for (int d = 0; d < ndim; d++) {
                json_t *v = json_array_get(o, (size_t)d);
                json_int_t k = json_is_integer(v) ? json_integer_value(v) : -1;
                if (k < 0 || k >= ndim || seen[k])
                    return ts_fail(err, TS_ERR_FORMAT, "%s: transpose order is not a permutation of %d axes", where, ndim);
                seen[k] = true;
                c->order[d] = (int)k;
            }
        }
    } else if (strcmp(name, "blosc") == 0) {
        c->id = TZ_CODEC_BLOSC;
        copy_name(c->cname, sizeof c->cname, json_string_value(json_object_get(cfg, "cname")));
        c->level = get_int(cfg, "clevel", 5);
        const char *sh = json_string_value(json_object_get(cfg, "shuffle"));
        c->shuffle = !sh || strcmp(sh, "noshuffle") == 0 ? TZ_SHUFFLE_NONE
                   : strcmp(sh, "bitshuffle") == 0       ? TZ_SHUFFLE_BIT
                                                          : TZ_SHUFFLE_BYTE;
        c->typesize = get_int(cfg, "typesize", 0);
        c->blocksize = get_int(cfg, "blocksize", 0);
    } else if (strcmp(name, "zstd") == 0) {
        c->id = TZ_CODEC_ZSTD;
        c->level = get_int(cfg, "level", 0);
        c->checksum = json_is_true(json_object_get(cfg, "checksum"));
    } else if (strcmp(name, "gzip") == 0) {
        c->id = TZ_CODEC_GZIP;
        c->level = get_int(cfg, "level", 5);
    } else if (strcmp(name, "crc32c") == 0) {
        c->id = TZ_CODEC_CRC32C;
    } else if (strcmp(name, "zlib") == 0 || strncmp(name, "numcodecs.", 10) == 0) {
        /* zarr-python 3 names numcodecs codecs "numcodecs.<id>" with their
         * v2 configuration; zarrita also knows a bare "zlib". */
        json_t *v2 = json_is_object(cfg) ? json_deep_copy(cfg) : json_object();
        json_object_set_new(v2, "id", json_string(strcmp(name, "zlib") == 0 ? "zlib" : name + 10));
        ts_status st = parse_v2_codec(where, v2, c, err);
        json_decref(v2);
        if (st) return st;
    } else if (strcmp(name, "sharding_indexed") == 0) {
        c->id = TZ_CODEC_SHARDING;
        if (!sharding) return ts_fail(err, TS_ERR_UNSUPPORTED, "%s: nested sharding_indexed", where);
        int n = 0;
        ts_status st = get_int_array(where, cfg, "chunk_shape", sharding->inner_chunk, &n, err);
        if (st) return st;
        if (n != ndim) return ts_fail(err, TS_ERR_FORMAT, "%s: sharding chunk_shape has %d axes, array %d", where, n, ndim);
        st = parse_v3_chain(where, json_object_get(cfg, "codecs"), ndim, &sharding->codecs, NULL, NULL, err);
        if (st) return st;
        st = parse_v3_chain(where, json_object_get(cfg, "index_codecs"), ndim + 1, &sharding->index_codecs,
                            NULL, NULL, err);
        if (st) return st;
        for (int i = 0; i < sharding->index_codecs.n; i++) {
            tz_codec_id id = sharding->index_codecs.c[i].id;
            if (id != TZ_CODEC_BYTES && id != TZ_CODEC_CRC32C)
                return ts_fail(err, TS_ERR_UNSUPPORTED, "%s: shard index_codecs other than bytes and crc32c", where);
        }
        json_t *lj = json_object_get(cfg, "index_location");
        const char *loc = lj ? json_string_value(lj) : "end"; /* optional, default "end" */
        if (!loc || (strcmp(loc, "start") != 0 && strcmp(loc, "end") != 0))
            return ts_fail(err, TS_ERR_FORMAT, "%s: sharding index_location must be \"start\" or \"end\"", where);
        sharding->index_at_start = strcmp(loc, "start") == 0;
    } else {
        return ts_fail(err, TS_ERR_UNSUPPORTED, "%s: codec \"%s\" is not supported", where, name);
    }
    return TS_OK;
}

/* Parses a v3 codec list. The sharding codec may appear only where
 * `sharding` is given; *sharded reports it. Bytes codecs stay in the chain. */
static ts_status parse_v3_chain(const char *where, json_t *list, int ndim, tz_codec_chain *chain,
                                tz_sharding *sharding, bool *sharded, ts_error *err) {
    chain->n = 0;
    if (sharded) *sharded = false;
    if (!json_is_array(list)) return ts_fail(err, TS_ERR_FORMAT, "%s: \"codecs\" is missing or not a list", where);
    size_t i;
    json_t *cj;
    json_array_foreach(list, i, cj) {
        tz_codec c;
        ts_status st = parse_v3_codec(where, cj, ndim, &c, sharding, err);
        if (st) return st;
        if (c.id == TZ_CODEC_SHARDING) {
            if (chain->n > 0)
                return ts_fail(err, TS_ERR_UNSUPPORTED, "%s: codecs before sharding_indexed", where);
            *sharded = true;
            continue;
        }
        if (chain->n >= TZ_MAX_CODECS) return ts_fail(err, TS_ERR_UNSUPPORTED, "%s: more than %d codecs", where, TZ_MAX_CODECS);
        chain->c[chain->n++] = c;
    }
    return TS_OK;
}

static json_t *codec_to_v3(const tz_codec *c, int ndim, size_t esize) {
    json_t *cfg = json_object();
    const char *name = "?";
    switch (c->id) {
    case TZ_CODEC_BYTES:
        name = "bytes";
        json_object_set_new(cfg, "endian", json_string(c->big_endian ? "big" : "little"));
        break;
    case TZ_CODEC_TRANSPOSE: {
        name = "transpose";
        json_t *o = json_array();
        for (int d = 0; d < ndim; d++) json_array_append_new(o, json_integer(c->order[d]));
        json_object_set_new(cfg, "order", o);
        break;
    }
    case TZ_CODEC_BLOSC:
        name = "blosc";
        json_object_set_new(cfg, "cname", json_string(c->cname[0] ? c->cname : "lz4"));
        json_object_set_new(cfg, "clevel", json_integer(c->level));
        json_object_set_new(cfg, "shuffle", json_string(c->shuffle == TZ_SHUFFLE_BIT    ? "bitshuffle"
                                                        : c->shuffle == TZ_SHUFFLE_BYTE ? "shuffle"
                                                                                        : "noshuffle"));
        json_object_set_new(cfg, "typesize", json_integer(c->typesize > 0 ? c->typesize : (json_int_t)esize));
        json_object_set_new(cfg, "blocksize", json_integer(c->blocksize));
        break;
    case TZ_CODEC_ZSTD:
        name = "zstd";
        json_object_set_new(cfg, "level", json_integer(c->level));
        json_object_set_new(cfg, "checksum", json_boolean(c->checksum));
        break;
    case TZ_CODEC_GZIP:
        name = "gzip";
        json_object_set_new(cfg, "level", json_integer(c->level));
        break;
    case TZ_CODEC_ZLIB: /* not a core v3 codec: zarr-python 3's name for it */
        name = "numcodecs.zlib";
        json_object_set_new(cfg, "level", json_integer(c->level));
        break;
    case TZ_CODEC_CRC32C: name = "crc32c"; break;
    default: break;
    }
    json_t *o = json_object();
    json_object_set_new(o, "name", json_string(name));
    if (json_object_size(cfg) > 0) json_object_set_new(o, "configuration", cfg);
    else json_decref(cfg);
    return o;
}

/* Appends a chain to a v3 list, inserting the bytes codec after the
 * transposes when the chain has none. */
static void chain_to_v3(json_t *list, const tz_codec_chain *chain, int ndim, size_t esize,
                        bool big_endian, bool add_bytes) {
    bool have_bytes = false;
    for (int i = 0; i < chain->n; i++) have_bytes = have_bytes || chain->c[i].id == TZ_CODEC_BYTES;
    bool placed = !add_bytes || have_bytes;
    for (int i = 0; i < chain->n; i++) {
        if (!placed && chain->c[i].id != TZ_CODEC_TRANSPOSE) {
            tz_codec b = {.id = TZ_CODEC_BYTES, .big_endian = big_endian};
            json_array_append_new(list, codec_to_v3(&b, ndim, esize));
            placed = true;
        }
        json_array_append_new(list, codec_to_v3(&chain->c[i], ndim, esize));
    }
    if (!placed) {
        tz_codec b = {.id = TZ_CODEC_BYTES, .big_endian = big_endian};
        json_array_append_new(list, codec_to_v3(&b, ndim, esize));
    }
}

/* ---------------------------------------------------------------- v3 doc */

ts_status tz_parse_attributes(const char *where, const char *text, json_t **out, ts_error *err) {
    if (!text) { *out = json_object(); return TS_OK; }
    json_error_t je;
    json_t *a = json_loads(text, 0, &je);
    if (!a || !json_is_object(a)) {
        json_decref(a);
        return ts_fail(err, TS_ERR_ARG, "%s: attributes are not a JSON object (%s)", where, a ? "not an object" : je.text);
    }
    *out = a;
    return TS_OK;
}

ts_status tz_meta_parse_v3(const char *where, json_t *doc, tz_array_meta *meta,
                           char **attributes, ts_error *err) {
    tz_array_meta_init(meta, 3);
    meta->sharding.index_codecs.n = 0;
    if (json_integer_value(json_object_get(doc, "zarr_format")) != 3)
        return ts_fail(err, TS_ERR_FORMAT, "%s: zarr_format is not 3", where);
    const char *nt = json_string_value(json_object_get(doc, "node_type"));
    if (!nt || strcmp(nt, "array") != 0)
        return ts_fail(err, TS_ERR_FORMAT, "%s: node_type is \"%s\", not \"array\"", where, nt ? nt : "(missing)");
    ts_status st = get_int_array(where, doc, "shape", meta->shape, &meta->ndim, err);
    if (st) return st;
    json_t *dt = json_object_get(doc, "data_type");
    if (!json_is_string(dt)) return ts_fail(err, TS_ERR_UNSUPPORTED, "%s: data_type is not a plain type name", where);
    meta->dtype = ts_dtype_from_name(json_string_value(dt));
    if (meta->dtype == TS_DTYPE_INVALID)
        return ts_fail(err, TS_ERR_UNSUPPORTED, "%s: data_type \"%s\" is not supported", where, json_string_value(dt));
    json_t *grid = json_object_get(doc, "chunk_grid");
    const char *gname = json_string_value(json_object_get(grid, "name"));
    if (!gname || strcmp(gname, "regular") != 0)
        return ts_fail(err, TS_ERR_UNSUPPORTED, "%s: chunk_grid \"%s\" is not supported", where, gname ? gname : "(missing)");
    int n = 0;
    st = get_int_array(where, json_object_get(grid, "configuration"), "chunk_shape", meta->chunk, &n, err);
    if (st) return st;
    if (n != meta->ndim) return ts_fail(err, TS_ERR_FORMAT, "%s: chunk_shape has %d axes, shape %d", where, n, meta->ndim);
    for (int d = 0; d < n; d++)
        if (meta->chunk[d] <= 0) return ts_fail(err, TS_ERR_FORMAT, "%s: chunk_shape[%d] is 0", where, d);
    json_t *kenc = json_object_get(doc, "chunk_key_encoding");
    const char *kname = json_string_value(json_object_get(kenc, "name"));
    if (!kname || strcmp(kname, "default") == 0) {
        meta->key_encoding = TZ_KEY_DEFAULT;
        meta->separator = '/';
    } else if (strcmp(kname, "v2") == 0) {
        meta->key_encoding = TZ_KEY_V2;
        meta->separator = '.';
    } else {
        return ts_fail(err, TS_ERR_UNSUPPORTED, "%s: chunk_key_encoding \"%s\" is not supported", where, kname);
    }
    const char *sep = json_string_value(json_object_get(json_object_get(kenc, "configuration"), "separator"));
    if (sep) {
        if (strcmp(sep, "/") != 0 && strcmp(sep, ".") != 0)
            return ts_fail(err, TS_ERR_FORMAT, "%s: chunk key separator \"%s\"", where, sep);
        meta->separator = sep[0];
    }
    st = parse_fill(where, json_object_get(doc, "fill_value"), meta->dtype, &meta->fill_value, err);
    if (st) return st;
    json_t *stf = json_object_get(doc, "storage_transformers");
    if (json_array_size(stf) > 0) return ts_fail(err, TS_ERR_UNSUPPORTED, "%s: storage_transformers are not supported", where);
    st = parse_v3_chain(where, json_object_get(doc, "codecs"), meta->ndim, &meta->codecs, &meta->sharding,
                        &meta->sharded, err);
    if (st) return st;
    /* The top-level bytes codec is implicit in tz_array_meta: keep its endian. */
    tz_codec_chain *inner = meta->sharded ? &meta->sharding.codecs : &meta->codecs;
    for (int i = 0; i < inner->n; i++)
        if (inner->c[i].id == TZ_CODEC_BYTES) meta->big_endian = inner->c[i].big_endian;
    if (!meta->sharded) {
        int k = 0;
        for (int i = 0; i < meta->codecs.n; i++)
            if (meta->codecs.c[i].id != TZ_CODEC_BYTES) meta->codecs.c[k++] = meta->codecs.c[i];
        meta->codecs.n = k;
    } else {
        if (meta->codecs.n > 0)
            return ts_fail(err, TS_ERR_UNSUPPORTED, "%s: codecs after sharding_indexed are not supported", where);
        for (int d = 0; d < meta->ndim; d++)
            if (meta->sharding.inner_chunk[d] <= 0 || meta->chunk[d] % meta->sharding.inner_chunk[d] != 0)
                return ts_fail(err, TS_ERR_FORMAT, "%s: shard shape is not a multiple of the inner chunk_shape (axis %d)", where, d);
    }
    json_t *dn = json_object_get(doc, "dimension_names");
    if (json_is_array(dn))
        for (int d = 0; d < meta->ndim && d < (int)json_array_size(dn); d++)
            copy_name(meta->dimension_names[d], sizeof meta->dimension_names[d],
                      json_string_value(json_array_get(dn, (size_t)d)));
    json_t *attrs = json_object_get(doc, "attributes");
    *attributes = json_is_object(attrs) ? json_dumps(attrs, JSON_COMPACT) : strdup("{}");
    if (!*attributes) return ts_fail(err, TS_ERR_NOMEM, "%s: out of memory", where);
    st = check_sizes(where, meta, TS_ERR_FORMAT, err);
    if (st) { free(*attributes); *attributes = NULL; }
    return st;
}

/* The sizes the reader and writer compute from a shape must not overflow,
 * and what is decoded in memory at once (an unsharded chunk, an inner chunk,
 * a shard index) must be allocatable: metadata from disk is untrusted, and a
 * chunk_shape like [2^22, 2^21, 2^21] would otherwise wrap to a tiny buffer.
 * `code`: TS_ERR_FORMAT for documents read from disk, TS_ERR_ARG for create. */
#define TZ_MAX_DECODED_BYTES ((int64_t)1 << 40)

static ts_status check_sizes(const char *where, const tz_array_meta *meta, ts_status code, ts_error *err) {
    int64_t esize = (int64_t)ts_dtype_size(meta->dtype), block = esize, inner = esize, nidx = 16;
    for (int d = 0; d < meta->ndim; d++) {
        if (meta->shape[d] > INT64_MAX - meta->chunk[d])
            return ts_fail(err, code, "%s: shape %lld of axis %d is too large", where, (long long)meta->shape[d], d);
        if (__builtin_mul_overflow(block, meta->chunk[d], &block))
            return ts_fail(err, code, "%s: chunk shape overflows 64 bits (axis %d)", where, d);
        if (meta->sharded && (__builtin_mul_overflow(inner, meta->sharding.inner_chunk[d], &inner) ||
                              __builtin_mul_overflow(nidx, meta->chunk[d] / meta->sharding.inner_chunk[d], &nidx)))
            return ts_fail(err, code, "%s: sharding chunk shape overflows 64 bits (axis %d)", where, d);
    }
    if (!meta->sharded && block > TZ_MAX_DECODED_BYTES)
        return ts_fail(err, code, "%s: a chunk of %lld bytes is too large (at most %lld)", where, (long long)block,
                       (long long)TZ_MAX_DECODED_BYTES);
    if (meta->sharded && (inner > TZ_MAX_DECODED_BYTES || nidx > TZ_MAX_DECODED_BYTES))
        return ts_fail(err, code, "%s: an inner chunk of %lld bytes or a shard index of %lld bytes is too large (at most %lld)",
                       where, (long long)inner, (long long)nidx, (long long)TZ_MAX_DECODED_BYTES);
    return TS_OK;
}

static ts_status check_meta(const char *where, const tz_array_meta *meta, ts_error *err) {
    if (meta->ndim < 0 || meta->ndim > TZ_MAX_DIM) return ts_fail(err, TS_ERR_ARG, "%s: ndim %d", where, meta->ndim);
    if (!ts_dtype_size(meta->dtype)) return ts_fail(err, TS_ERR_ARG, "%s: invalid dtype", where);
    for (int d = 0; d < meta->ndim; d++) {
        if (meta->shape[d] < 0 || meta->chunk[d] <= 0)
            return ts_fail(err, TS_ERR_ARG, "%s: shape/chunk of axis %d is %lld/%lld", where, d,
                           (long long)meta->shape[d], (long long)meta->chunk[d]);
        if (meta->sharded && (meta->sharding.inner_chunk[d] <= 0 || meta->chunk[d] % meta->sharding.inner_chunk[d]))
            return ts_fail(err, TS_ERR_ARG, "%s: shard %lld is not a multiple of inner chunk %lld (axis %d)", where,
                           (long long)meta->chunk[d], (long long)meta->sharding.inner_chunk[d], d);
    }
    if (meta->sharded && meta->codecs.n > 0)
        return ts_fail(err, TS_ERR_ARG, "%s: sharded arrays take their codecs in sharding.codecs (meta.codecs must be empty)", where);
    if (meta->separator != '/' && meta->separator != '.')
        return ts_fail(err, TS_ERR_ARG, "%s: separator '%c'", where, meta->separator);
    return check_sizes(where, meta, TS_ERR_ARG, err);
}

static json_t *int_list(int n, const int64_t *v) {
    json_t *a = json_array();
    for (int i = 0; i < n; i++) json_array_append_new(a, json_integer(v[i]));
    return a;
}

static ts_status meta_to_v3(const char *where, const tz_array_meta *meta, json_t **out, ts_error *err) {
    size_t es = ts_dtype_size(meta->dtype);
    json_t *attrs = NULL; /* set on success (gcc -O3 cannot tell) */
    ts_status st = tz_parse_attributes(where, meta->attributes_json, &attrs, err);
    if (st) return st;
    json_t *doc = json_object();
    json_object_set_new(doc, "zarr_format", json_integer(3));
    json_object_set_new(doc, "node_type", json_string("array"));
    json_object_set_new(doc, "shape", int_list(meta->ndim, meta->shape));
    json_object_set_new(doc, "data_type", json_string(ts_dtype_name(meta->dtype)));
    json_t *grid = json_object();
    json_object_set_new(grid, "name", json_string("regular"));
    json_t *gcfg = json_object();
    json_object_set_new(gcfg, "chunk_shape", int_list(meta->ndim, meta->chunk));
    json_object_set_new(grid, "configuration", gcfg);
    json_object_set_new(doc, "chunk_grid", grid);
    json_t *kenc = json_object();
    json_object_set_new(kenc, "name", json_string(meta->key_encoding == TZ_KEY_V2 ? "v2" : "default"));
    json_t *kcfg = json_object();
    char sep[2] = {meta->separator, 0};
    json_object_set_new(kcfg, "separator", json_string(sep));
    json_object_set_new(kenc, "configuration", kcfg);
    json_object_set_new(doc, "chunk_key_encoding", kenc);
    json_object_set_new(doc, "fill_value", fill_to_json(meta->dtype, meta->fill_value));
    json_t *codecs = json_array();
    if (meta->sharded) {
        json_t *sh = json_object();
        json_object_set_new(sh, "name", json_string("sharding_indexed"));
        json_t *cfg = json_object();
        json_object_set_new(cfg, "chunk_shape", int_list(meta->ndim, meta->sharding.inner_chunk));
        json_t *inner = json_array();
        chain_to_v3(inner, &meta->sharding.codecs, meta->ndim, es, meta->big_endian, true);
        json_object_set_new(cfg, "codecs", inner);
        json_t *idx = json_array();
        tz_codec_chain ic = meta->sharding.index_codecs;
        if (ic.n == 0) { ic.n = 2; ic.c[0].id = TZ_CODEC_BYTES; ic.c[1].id = TZ_CODEC_CRC32C; }
        for (int i = 0; i < ic.n; i++) ic.c[i].big_endian = false;
        chain_to_v3(idx, &ic, meta->ndim + 1, 8, false, true);
        json_object_set_new(cfg, "index_codecs", idx);
        json_object_set_new(cfg, "index_location", json_string(meta->sharding.index_at_start ? "start" : "end"));
        json_object_set_new(sh, "configuration", cfg);
        json_array_append_new(codecs, sh);
        chain_to_v3(codecs, &meta->codecs, meta->ndim, es, false, false);
    } else {
        chain_to_v3(codecs, &meta->codecs, meta->ndim, es, meta->big_endian, true);
    }
    json_object_set_new(doc, "codecs", codecs);
    json_object_set_new(doc, "attributes", attrs);
    bool names = false;
    for (int d = 0; d < meta->ndim; d++) names = names || meta->dimension_names[d][0];
    if (names) {
        json_t *dn = json_array();
        for (int d = 0; d < meta->ndim; d++)
            json_array_append_new(dn, meta->dimension_names[d][0] ? json_string(meta->dimension_names[d]) : json_null());
        json_object_set_new(doc, "dimension_names", dn);
    }
    *out = doc;
    return TS_OK;
}

/* ---------------------------------------------------------------- v2 doc */

static ts_status parse_v2_codec(const char *where, json_t *cj, tz_codec *c, ts_error *err) {
    memset(c, 0, sizeof *c);
    const char *id = json_string_value(json_object_get(cj, "id"));
    if (!id) return ts_fail(err, TS_ERR_FORMAT, "%s: compressor/filter without an \"id\"", where);
    if (strcmp(id, "blosc") == 0) {
        c->id = TZ_CODEC_BLOSC;
        copy_name(c->cname, sizeof c->cname, json_string_value(json_object_get(cj, "cname")));
        c->level = get_int(cj, "clevel", 5);
        int sh = get_int(cj, "shuffle", 1);
        c->shuffle = sh == 2 ? TZ_SHUFFLE_BIT : sh == 0 ? TZ_SHUFFLE_NONE : TZ_SHUFFLE_BYTE;
        if (sh == -1) c->shuffle = TZ_SHUFFLE_BYTE; /* AUTOSHUFFLE; decoding reads the header anyway */
        c->blocksize = get_int(cj, "blocksize", 0);
    } else if (strcmp(id, "zstd") == 0) {
        c->id = TZ_CODEC_ZSTD;
        c->level = get_int(cj, "level", 0);
        c->checksum = json_is_true(json_object_get(cj, "checksum"));
    } else if (strcmp(id, "zlib") == 0) {
        c->id = TZ_CODEC_ZLIB;
        c->level = get_int(cj, "level", 1);
    } else if (strcmp(id, "gzip") == 0) {
        c->id = TZ_CODEC_GZIP;
        c->level = get_int(cj, "level", 1);
    } else if (strcmp(id, "crc32c") == 0) {
        c->id = TZ_CODEC_CRC32C;
    } else {
        return ts_fail(err, TS_ERR_UNSUPPORTED, "%s: codec \"%s\" is not supported", where, id);
    }
    return TS_OK;
}

static ts_status parse_v2_dtype(const char *where, json_t *v, ts_dtype *dtype, bool *big_endian, ts_error *err) {
    const char *s = json_string_value(v);
    if (!s) return ts_fail(err, TS_ERR_UNSUPPORTED, "%s: structured dtype is not supported", where);
    static const struct { const char *code; ts_dtype t; } T[] = {
        {"b1", TS_BOOL},   {"i1", TS_INT8},   {"i2", TS_INT16},  {"i4", TS_INT32},
        {"i8", TS_INT64},  {"u1", TS_UINT8},  {"u2", TS_UINT16}, {"u4", TS_UINT32},
        {"u8", TS_UINT64}, {"f4", TS_FLOAT32}, {"f8", TS_FLOAT64},
    };
    if ((s[0] == '<' || s[0] == '>' || s[0] == '|' || s[0] == '=') && strlen(s) == 3) {
        for (size_t i = 0; i < sizeof T / sizeof T[0]; i++)
            if (strcmp(s + 1, T[i].code) == 0) {
                *dtype = T[i].t;
                *big_endian = s[0] == '>' || (s[0] == '=' && tz_native_big_endian());
                return TS_OK;
            }
    }
    return ts_fail(err, TS_ERR_UNSUPPORTED, "%s: dtype \"%s\" is not supported", where, s);
}

ts_status tz_meta_parse_v2(const char *where, json_t *doc, tz_array_meta *meta, ts_error *err) {
    tz_array_meta_init(meta, 2);
    if (json_integer_value(json_object_get(doc, "zarr_format")) != 2)
        return ts_fail(err, TS_ERR_FORMAT, "%s: zarr_format is not 2", where);
    ts_status st = get_int_array(where, doc, "shape", meta->shape, &meta->ndim, err);
    if (st) return st;
    int n = 0;
    st = get_int_array(where, doc, "chunks", meta->chunk, &n, err);
    if (st) return st;
    if (n != meta->ndim) return ts_fail(err, TS_ERR_FORMAT, "%s: chunks has %d axes, shape %d", where, n, meta->ndim);
    for (int d = 0; d < n; d++)
        if (meta->chunk[d] <= 0) return ts_fail(err, TS_ERR_FORMAT, "%s: chunks[%d] is 0", where, d);
    st = parse_v2_dtype(where, json_object_get(doc, "dtype"), &meta->dtype, &meta->big_endian, err);
    if (st) return st;
    const char *order = json_string_value(json_object_get(doc, "order"));
    if (order && strcmp(order, "C") != 0)
        return ts_fail(err, TS_ERR_UNSUPPORTED, "%s: order \"%s\" is not supported (only \"C\")", where, order);
    st = parse_fill(where, json_object_get(doc, "fill_value"), meta->dtype, &meta->fill_value, err);
    if (st) return st;
    const char *sep = json_string_value(json_object_get(doc, "dimension_separator"));
    if (sep) {
        if (strcmp(sep, "/") != 0 && strcmp(sep, ".") != 0)
            return ts_fail(err, TS_ERR_FORMAT, "%s: dimension_separator \"%s\"", where, sep);
        meta->separator = sep[0];
    }
    json_t *filters = json_object_get(doc, "filters");
    if (filters && !json_is_null(filters)) {
        if (!json_is_array(filters)) return ts_fail(err, TS_ERR_FORMAT, "%s: filters is not a list", where);
        size_t i;
        json_t *f;
        json_array_foreach(filters, i, f) {
            if (meta->codecs.n >= TZ_MAX_CODECS - 1) return ts_fail(err, TS_ERR_UNSUPPORTED, "%s: too many filters", where);
            st = parse_v2_codec(where, f, &meta->codecs.c[meta->codecs.n], err);
            if (st) return st;
            meta->codecs.n++;
        }
    }
    json_t *comp = json_object_get(doc, "compressor");
    if (comp && !json_is_null(comp)) {
        st = parse_v2_codec(where, comp, &meta->codecs.c[meta->codecs.n], err);
        if (st) return st;
        meta->codecs.n++;
    }
    return check_sizes(where, meta, TS_ERR_FORMAT, err);
}

static json_t *codec_to_v2(const tz_codec *c, size_t esize) {
    json_t *o = json_object();
    switch (c->id) {
    case TZ_CODEC_BLOSC:
        json_object_set_new(o, "id", json_string("blosc"));
        json_object_set_new(o, "cname", json_string(c->cname[0] ? c->cname : "lz4"));
        json_object_set_new(o, "clevel", json_integer(c->level));
        json_object_set_new(o, "shuffle", json_integer((int)c->shuffle));
        json_object_set_new(o, "blocksize", json_integer(c->blocksize));
        break;
    case TZ_CODEC_ZSTD:
        json_object_set_new(o, "id", json_string("zstd"));
        json_object_set_new(o, "level", json_integer(c->level));
        if (c->checksum) json_object_set_new(o, "checksum", json_true());
        break;
    case TZ_CODEC_ZLIB:
        json_object_set_new(o, "id", json_string("zlib"));
        json_object_set_new(o, "level", json_integer(c->level));
        break;
    case TZ_CODEC_GZIP:
        json_object_set_new(o, "id", json_string("gzip"));
        json_object_set_new(o, "level", json_integer(c->level));
        break;
    case TZ_CODEC_CRC32C: json_object_set_new(o, "id", json_string("crc32c")); break;
    default: break;
    }
    (void)esize;
    return o;
}

static ts_status meta_to_v2(const char *where, const tz_array_meta *meta, json_t **out, ts_error *err) {
    if (meta->sharded) return ts_fail(err, TS_ERR_ARG, "%s: sharding needs zarr v3", where);
    for (int i = 0; i < meta->codecs.n; i++)
        if (meta->codecs.c[i].id == TZ_CODEC_TRANSPOSE || meta->codecs.c[i].id == TZ_CODEC_BYTES ||
            meta->codecs.c[i].id == TZ_CODEC_SHARDING)
            return ts_fail(err, TS_ERR_ARG, "%s: codec %d has no zarr v2 form", where, (int)meta->codecs.c[i].id);
    static const char *codes[] = {
        [TS_BOOL] = "b1", [TS_INT8] = "i1", [TS_INT16] = "i2", [TS_INT32] = "i4", [TS_INT64] = "i8",
        [TS_UINT8] = "u1", [TS_UINT16] = "u2", [TS_UINT32] = "u4", [TS_UINT64] = "u8",
        [TS_FLOAT32] = "f4", [TS_FLOAT64] = "f8",
    };
    size_t es = ts_dtype_size(meta->dtype);
    char dt[8];
    snprintf(dt, sizeof dt, "%c%s", es == 1 ? '|' : meta->big_endian ? '>' : '<', codes[meta->dtype]);
    json_t *doc = json_object();
    json_object_set_new(doc, "zarr_format", json_integer(2));
    json_object_set_new(doc, "shape", int_list(meta->ndim, meta->shape));
    json_object_set_new(doc, "chunks", int_list(meta->ndim, meta->chunk));
    json_object_set_new(doc, "dtype", json_string(dt));
    json_object_set_new(doc, "order", json_string("C"));
    json_object_set_new(doc, "fill_value", fill_to_json(meta->dtype, meta->fill_value));
    char sep[2] = {meta->separator, 0};
    json_object_set_new(doc, "dimension_separator", json_string(sep));
    if (meta->codecs.n == 0) {
        json_object_set_new(doc, "compressor", json_null());
        json_object_set_new(doc, "filters", json_null());
    } else {
        json_object_set_new(doc, "compressor", codec_to_v2(&meta->codecs.c[meta->codecs.n - 1], es));
        if (meta->codecs.n == 1) {
            json_object_set_new(doc, "filters", json_null());
        } else {
            json_t *f = json_array();
            for (int i = 0; i < meta->codecs.n - 1; i++) json_array_append_new(f, codec_to_v2(&meta->codecs.c[i], es));
            json_object_set_new(doc, "filters", f);
        }
    }
    *out = doc;
    return TS_OK;
}

ts_status tz_meta_to_json(const char *where, const tz_array_meta *meta, json_t **out, ts_error *err) {
    ts_status st = check_meta(where, meta, err);
    if (st) return st;
    return meta->zarr_format == 2 ? meta_to_v2(where, meta, out, err) : meta_to_v3(where, meta, out, err);
}
