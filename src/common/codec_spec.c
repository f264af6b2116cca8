/* Codec choices with a level: "NAME[:LEVEL]" as the command line and the
 * options structs take them, and the range of levels each codec accepts. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/error.h"

/* The levels each compressor takes (0 in an options struct means its
 * default): zstd 1..22 (its negative "fast" levels are left out: numcodecs
 * and zarrita readers differ on them), blosc's clevel 1..9 (0 stores
 * uncompressed: that is `none`), deflate 1..9. */
static bool level_range(ts_codec codec, int *lo, int *hi) {
    switch (codec) {
    case TS_CODEC_ZSTD: *lo = 1, *hi = 22; return true;
    case TS_CODEC_BLOSC_LZ4:
    case TS_CODEC_BLOSC_ZSTD:
    case TS_CODEC_GZIP: *lo = 1, *hi = 9; return true;
    default: return false;
    }
}

int ts_codec_default_level(ts_codec codec) {
    switch (codec) {
    case TS_CODEC_ZSTD: return 3;
    case TS_CODEC_BLOSC_LZ4:
    case TS_CODEC_BLOSC_ZSTD:
    case TS_CODEC_GZIP: return 5;
    default: return 0;
    }
}

ts_status ts_codec_check_level(ts_codec codec, int level, ts_error *err) {
    int lo = 0, hi = 0;
    if (!strcmp(ts_codec_name(codec), "invalid")) return ts_fail(err, TS_ERR_ARG, "codec %d is not a codec", (int)codec);
    if (level == 0) return TS_OK;
    if (!level_range(codec, &lo, &hi))
        return ts_fail(err, TS_ERR_ARG, "codec %s takes no level (level %d given)", ts_codec_name(codec), level);
    if (level < lo || level > hi)
        return ts_fail(err, TS_ERR_ARG, "codec %s: level %d is not in [%d, %d]", ts_codec_name(codec), level, lo,
                       hi);
    return TS_OK;
}

ts_status ts_codec_parse(const char *text, ts_codec *codec, int *level, ts_error *err) {
    if (!text) return ts_fail(err, TS_ERR_ARG, "no codec given");
    const char *colon = strchr(text, ':');
    size_t n = colon ? (size_t)(colon - text) : strlen(text);
    char name[32];
    ts_codec c;
    if (n >= sizeof name || (memcpy(name, text, n), name[n] = '\0', ts_codec_from_name(name, &c) != 0))
        return ts_fail(err, TS_ERR_ARG, "codec '%s' is not zstd, blosc-lz4, blosc-zstd, gzip or none (a level "
                       "follows a colon: zstd:5)", text);
    int lv = 0;
    if (colon) {
        char *end = NULL;
        long v = strtol(colon + 1, &end, 10);
        if (end == colon + 1 || *end || v < -1000000 || v > 1000000)
            return ts_fail(err, TS_ERR_ARG, "codec '%s': level '%s' is not an integer", text, colon + 1);
        if (v == 0) {
            int lo = 0, hi = 0;
            if (!level_range(c, &lo, &hi))
                return ts_fail(err, TS_ERR_ARG, "codec %s takes no level (level 0 given)", name);
            return ts_fail(err, TS_ERR_ARG, "codec %s: level 0 is not in [%d, %d]", name, lo, hi);
        }
        lv = (int)v;
        ts_status st = ts_codec_check_level(c, lv, err);
        if (st) return st;
    }
    *codec = c;
    *level = lv;
    return TS_OK;
}
