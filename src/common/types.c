/* Names of the shared vocabulary types (dtype, codec). */
#include "tessera/tessera.h"

#include <string.h>

static const struct { ts_dtype t; const char *name; size_t size; } DTYPES[] = {
    {TS_BOOL, "bool", 1},       {TS_INT8, "int8", 1},       {TS_INT16, "int16", 2},
    {TS_INT32, "int32", 4},     {TS_INT64, "int64", 8},     {TS_UINT8, "uint8", 1},
    {TS_UINT16, "uint16", 2},   {TS_UINT32, "uint32", 4},   {TS_UINT64, "uint64", 8},
    {TS_FLOAT32, "float32", 4}, {TS_FLOAT64, "float64", 8},
};

size_t ts_dtype_size(ts_dtype dtype) {
    for (size_t i = 0; i < sizeof DTYPES / sizeof DTYPES[0]; i++)
        if (DTYPES[i].t == dtype) return DTYPES[i].size;
    return 0;
}

const char *ts_dtype_name(ts_dtype dtype) {
    for (size_t i = 0; i < sizeof DTYPES / sizeof DTYPES[0]; i++)
        if (DTYPES[i].t == dtype) return DTYPES[i].name;
    return "invalid";
}

ts_dtype ts_dtype_from_name(const char *name) {
    for (size_t i = 0; name && i < sizeof DTYPES / sizeof DTYPES[0]; i++)
        if (strcmp(DTYPES[i].name, name) == 0) return DTYPES[i].t;
    return TS_DTYPE_INVALID;
}

static const struct { ts_codec c; const char *name; } CODECS[] = {
    {TS_CODEC_ZSTD, "zstd"},   {TS_CODEC_BLOSC_LZ4, "blosc-lz4"},
    {TS_CODEC_BLOSC_ZSTD, "blosc-zstd"}, {TS_CODEC_GZIP, "gzip"},
    {TS_CODEC_NONE, "none"},
};

const char *ts_codec_name(ts_codec codec) {
    for (size_t i = 0; i < sizeof CODECS / sizeof CODECS[0]; i++)
        if (CODECS[i].c == codec) return CODECS[i].name;
    return "invalid";
}

int ts_codec_from_name(const char *name, ts_codec *out) {
    for (size_t i = 0; name && i < sizeof CODECS / sizeof CODECS[0]; i++)
        if (strcmp(CODECS[i].name, name) == 0) { *out = CODECS[i].c; return 0; }
    return -1;
}
