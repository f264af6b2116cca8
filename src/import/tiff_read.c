/* Reading greyscale TIFF tiles with libtiff (see tiff_read.h). */
#include "import/tiff_read.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <tiffio.h>

#include "common/error.h"

#define TI_MAX_DIRS 4096

struct ti_tiff {
    TIFF *tif;
    const char *path;
    ti_tiff_info info;
    tdir_t *dirs;  /* IFD number of each full-resolution page */
    char msg[512]; /* libtiff's first error on this file */
};

/* libtiff reports through handlers; the per-file (ExtR) ones keep its
 * message with the file instead of on stderr. Warnings (unknown tags, ...)
 * are dropped: a tile that decodes is fine. */
static int on_error(TIFF *tif, void *user, const char *module, const char *fmt, va_list ap) {
    (void)tif;
    ti_tiff *t = user;
    if (!t->msg[0]) {
        char text[400];
        vsnprintf(text, sizeof text, fmt, ap);
        snprintf(t->msg, sizeof t->msg, "%s%s%s", module ? module : "", module ? ": " : "", text);
    }
    return 1; /* handled: do not call the global handler */
}

static int on_warning(TIFF *tif, void *user, const char *module, const char *fmt, va_list ap) {
    (void)tif, (void)user, (void)module, (void)fmt, (void)ap;
    return 1;
}

static ts_status libtiff_fail(ti_tiff *t, ts_status code, const char *what, ts_error *err) {
    return ts_fail(err, code, "%s: %s%s%s", t->path, what, t->msg[0] ? ": " : "", t->msg);
}

static const char *photometric_name(uint16_t p) {
    switch (p) {
    case PHOTOMETRIC_MINISWHITE: return "min-is-white greyscale";
    case PHOTOMETRIC_RGB: return "RGB";
    case PHOTOMETRIC_PALETTE: return "palette colour";
    case PHOTOMETRIC_MASK: return "transparency mask";
    case PHOTOMETRIC_SEPARATED: return "CMYK";
    case PHOTOMETRIC_YCBCR: return "YCbCr colour";
    case PHOTOMETRIC_CIELAB: return "CIE L*a*b* colour";
    default: return "not min-is-black greyscale";
    }
}

/* Checks the current directory; fills h, w, dtype. */
static ts_status check_page(ti_tiff *t, int page, int64_t *h, int64_t *w, ts_dtype *dtype,
                            ts_error *err) {
    TIFF *tif = t->tif;
    uint32_t width = 0, length = 0;
    uint16_t spp = 1, bps = 1, fmt = SAMPLEFORMAT_UINT, photometric = PHOTOMETRIC_MINISBLACK,
             compression = COMPRESSION_NONE;
    if (!TIFFGetField(tif, TIFFTAG_IMAGEWIDTH, &width) ||
        !TIFFGetField(tif, TIFFTAG_IMAGELENGTH, &length) || width == 0 || length == 0)
        return ts_fail(err, TS_ERR_FORMAT, "%s: page %d has no image size", t->path, page);
    TIFFGetFieldDefaulted(tif, TIFFTAG_SAMPLESPERPIXEL, &spp);
    TIFFGetFieldDefaulted(tif, TIFFTAG_BITSPERSAMPLE, &bps);
    TIFFGetFieldDefaulted(tif, TIFFTAG_SAMPLEFORMAT, &fmt);
    TIFFGetFieldDefaulted(tif, TIFFTAG_COMPRESSION, &compression);
    bool has_photometric = TIFFGetField(tif, TIFFTAG_PHOTOMETRIC, &photometric) != 0;
    if (spp != 1 || (has_photometric && photometric == PHOTOMETRIC_RGB))
        return ts_fail(err, TS_ERR_UNSUPPORTED,
                       "%s: page %d has %u samples per pixel (%s): only greyscale tiles are imported",
                       t->path, page, spp, has_photometric ? photometric_name(photometric) : "colour");
    if (has_photometric && photometric != PHOTOMETRIC_MINISBLACK)
        return ts_fail(err, TS_ERR_UNSUPPORTED,
                       "%s: page %d is %s (photometric %u): only min-is-black greyscale is imported",
                       t->path, page, photometric_name(photometric), photometric);
    if (fmt != SAMPLEFORMAT_UINT)
        return ts_fail(err, TS_ERR_UNSUPPORTED,
                       "%s: page %d holds %s samples: only unsigned 8- and 16-bit integers are imported",
                       t->path, page,
                       fmt == SAMPLEFORMAT_IEEEFP ? "floating-point"
                       : fmt == SAMPLEFORMAT_INT  ? "signed integer"
                                                  : "non-integer");
    if (bps != 8 && bps != 16)
        return ts_fail(err, TS_ERR_UNSUPPORTED,
                       "%s: page %d has %u bits per sample: only 8 and 16 are imported", t->path,
                       page, bps);
    if (!TIFFIsCODECConfigured(compression)) {
        const TIFFCodec *c = TIFFFindCODEC(compression);
        return ts_fail(err, TS_ERR_UNSUPPORTED,
                       "%s: page %d is compressed with %s (TIFF compression %u), which this libtiff "
                       "cannot decode", t->path, page, c ? c->name : "an unknown scheme",
                       compression);
    }
    *h = length, *w = width;
    *dtype = bps == 8 ? TS_UINT8 : TS_UINT16;
    return TS_OK;
}

ts_status ti_tiff_open(const char *path, int max_pages, ti_tiff **out, ti_tiff_info *info,
                       ts_error *err) {
    *out = NULL;
    ti_tiff *t = calloc(1, sizeof *t);
    if (!t) return ts_fail(err, TS_ERR_NOMEM, "out of memory opening %s", path);
    t->path = path;
    TIFFOpenOptions *oo = TIFFOpenOptionsAlloc();
    if (!oo) {
        free(t);
        return ts_fail(err, TS_ERR_NOMEM, "out of memory opening %s", path);
    }
    TIFFOpenOptionsSetErrorHandlerExtR(oo, on_error, t);
    TIFFOpenOptionsSetWarningHandlerExtR(oo, on_warning, t);
    t->tif = TIFFOpenExt(path, "r", oo);
    TIFFOpenOptionsFree(oo);
    ts_status st = TS_OK;
    if (!t->tif) {
        st = libtiff_fail(t, TS_ERR_IO, "cannot open as a TIFF", err);
        goto fail;
    }
    tdir_t ndirs = TIFFNumberOfDirectories(t->tif);
    if (ndirs == 0 || ndirs > TI_MAX_DIRS) {
        st = ts_fail(err, TS_ERR_FORMAT, "%s: %u pages (1 to %d)", path, (unsigned)ndirs, TI_MAX_DIRS);
        goto fail;
    }
    t->dirs = calloc(ndirs, sizeof *t->dirs);
    if (!t->dirs) {
        st = ts_fail(err, TS_ERR_NOMEM, "out of memory opening %s", path);
        goto fail;
    }
    for (tdir_t d = 0; d < ndirs; d++) {
        if (!TIFFSetDirectory(t->tif, d)) {
            st = libtiff_fail(t, TS_ERR_CORRUPT, "cannot read a page directory", err);
            goto fail;
        }
        uint32_t subfile = 0;
        TIFFGetFieldDefaulted(t->tif, TIFFTAG_SUBFILETYPE, &subfile);
        if (subfile & FILETYPE_REDUCEDIMAGE) continue; /* a pyramid level, not a channel */
        int64_t h = 0, w = 0;
        ts_dtype dt = TS_DTYPE_INVALID;
        int page = t->info.pages;
        if ((st = check_page(t, page, &h, &w, &dt, err)) != TS_OK) goto fail;
        if (page == 0) {
            t->info.height = h, t->info.width = w, t->info.dtype = dt;
        } else if (h != t->info.height || w != t->info.width || dt != t->info.dtype) {
            st = ts_fail(err, TS_ERR_UNSUPPORTED,
                         "%s: page %d is %lldx%lld %s but page 0 is %lldx%lld %s: the pages "
                         "(channels) of a tile must match", path, page, (long long)h, (long long)w,
                         ts_dtype_name(dt), (long long)t->info.height, (long long)t->info.width,
                         ts_dtype_name(t->info.dtype));
            goto fail;
        }
        if (page >= max_pages) {
            st = ts_fail(err, TS_ERR_UNSUPPORTED, "%s: more than %d pages (channels)", path,
                         max_pages);
            goto fail;
        }
        t->dirs[t->info.pages++] = d;
    }
    if (t->info.pages == 0) {
        st = ts_fail(err, TS_ERR_FORMAT, "%s: only reduced-resolution pages", path);
        goto fail;
    }
    *info = t->info;
    *out = t;
    return TS_OK;
fail:
    ti_tiff_close(t);
    return st;
}

/* Strip by strip straight into the plane (a strip is whole rows). */
static ts_status read_strips(ti_tiff *t, int page, uint8_t *buf, size_t row_bytes, ts_error *err) {
    uint32_t rps = 0;
    TIFFGetFieldDefaulted(t->tif, TIFFTAG_ROWSPERSTRIP, &rps);
    int64_t H = t->info.height;
    if (rps == 0 || rps > H) rps = (uint32_t)H;
    uint32_t nstrips = TIFFNumberOfStrips(t->tif);
    if ((int64_t)nstrips * rps < H)
        return ts_fail(err, TS_ERR_CORRUPT, "%s: page %d has %u strips of %u rows for %lld rows",
                       t->path, page, nstrips, rps, (long long)H);
    for (int64_t y = 0, s = 0; y < H; y += rps, s++) {
        int64_t rows = H - y < rps ? H - y : rps;
        tmsize_t want = (tmsize_t)((size_t)rows * row_bytes);
        tmsize_t got = TIFFReadEncodedStrip(t->tif, (uint32_t)s, buf + (size_t)y * row_bytes, want);
        if (got != want)
            return libtiff_fail(t, TS_ERR_CORRUPT, "a strip does not decode (truncated or damaged)",
                                err);
    }
    return TS_OK;
}

/* Tile by tile through a scratch tile, copying the part inside the image. */
static ts_status read_tiles(ti_tiff *t, int page, uint8_t *buf, size_t esize, ts_error *err) {
    uint32_t tw = 0, th = 0;
    TIFFGetField(t->tif, TIFFTAG_TILEWIDTH, &tw);
    TIFFGetField(t->tif, TIFFTAG_TILELENGTH, &th);
    if (tw == 0 || th == 0)
        return ts_fail(err, TS_ERR_FORMAT, "%s: page %d is tiled without a tile size", t->path, page);
    tmsize_t tsize = TIFFTileSize(t->tif);
    if (tsize < (tmsize_t)((size_t)tw * th * esize))
        return libtiff_fail(t, TS_ERR_FORMAT, "bad tile size", err);
    uint8_t *tile = malloc((size_t)tsize);
    if (!tile) return ts_fail(err, TS_ERR_NOMEM, "%s: out of memory for a %ux%u tile", t->path, th, tw);
    int64_t H = t->info.height, W = t->info.width;
    ts_status st = TS_OK;
    for (int64_t y = 0; st == TS_OK && y < H; y += th)
        for (int64_t x = 0; st == TS_OK && x < W; x += tw) {
            uint32_t k = TIFFComputeTile(t->tif, (uint32_t)x, (uint32_t)y, 0, 0);
            if (TIFFReadEncodedTile(t->tif, k, tile, tsize) < 0) {
                st = libtiff_fail(t, TS_ERR_CORRUPT, "a tile does not decode (truncated or damaged)",
                                  err);
                break;
            }
            int64_t rows = H - y < th ? H - y : th, cols = W - x < tw ? W - x : tw;
            for (int64_t r = 0; r < rows; r++)
                memcpy(buf + ((size_t)(y + r) * (size_t)W + (size_t)x) * esize,
                       tile + (size_t)r * tw * esize, (size_t)cols * esize);
        }
    free(tile);
    return st;
}

ts_status ti_tiff_read_page(ti_tiff *t, int page, void *buf, ts_error *err) {
    if (page < 0 || page >= t->info.pages)
        return ts_fail(err, TS_ERR_ARG, "%s: no page %d", t->path, page);
    t->msg[0] = '\0';
    if (!TIFFSetDirectory(t->tif, t->dirs[page]))
        return libtiff_fail(t, TS_ERR_CORRUPT, "cannot read a page directory", err);
    size_t esize = ts_dtype_size(t->info.dtype);
    if (TIFFIsTiled(t->tif)) return read_tiles(t, page, buf, esize, err);
    return read_strips(t, page, buf, (size_t)t->info.width * esize, err);
}

void ti_tiff_close(ti_tiff *t) {
    if (!t) return;
    if (t->tif) TIFFClose(t->tif);
    free(t->dirs);
    free(t);
}
