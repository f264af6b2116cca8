/* Reading greyscale TIFF tiles with libtiff (see tiff_read.h). */
#include "import/tiff_read.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <tiffio.h>
#include <unistd.h>

#include "common/error.h"
#include "common/fs.h"

#define TI_MAX_DIRS 4096

/* Any tile side up to this is accepted whatever the image (writers use
 * fixed tile sizes, 256 or 512, for small images too); beyond it a tile may
 * be no larger than the image rounded up to the 16 px TIFF tiles come in. */
#define TI_FREE_TILE_SIDE 1024

struct ti_tiff {
    TIFF *tif;
    const char *path;
    uint64_t file_size;
    ti_tiff_info info;
    tdir_t *dirs;  /* IFD number of each full-resolution page */
    char *description; /* the first IFD's ImageDescription, or NULL */
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

/* The most bytes one stored byte can decode to, by compression: the
 * formats' own limits, rounded up (deflate 1032:1, LZW about 1300:1 with
 * 12-bit codes, PackBits 64:1, a zstd RLE block 32768:1); schemes that can
 * describe a constant image in a header (LERC, WebP, JPEG XL, LZMA) and
 * unknown ones 2^20:1. */
static uint64_t max_expansion(uint16_t compression) {
    switch (compression) {
    case COMPRESSION_NONE: return 1;
    case COMPRESSION_PACKBITS: return 128;
    case COMPRESSION_ADOBE_DEFLATE:
    case COMPRESSION_DEFLATE: return 2048;
    case COMPRESSION_LZW:
    case COMPRESSION_JPEG:
    case COMPRESSION_OJPEG: return 4096;
    case COMPRESSION_ZSTD: return 65536;
    default: return (uint64_t)1 << 20;
    }
}

static const char *compression_name(uint16_t compression) {
    const TIFFCodec *c = TIFFFindCODEC(compression);
    return c ? c->name : "unknown";
}

/* What a page declares against what the image and the file can hold, before
 * anything is allocated from it: the plane (height x width, which import
 * allocates per worker) must be addressable and decodable from a file this
 * size at the compression's largest ratio (a 350-byte file declaring a
 * gigapixel plane is refused), and a tile no larger than TI_FREE_TILE_SIDE or
 * the image rounded up to 16 (a 24x20 image declaring 65536x32768 tiles
 * asked for a 4 GiB tile buffer, and one with 32768x16384 deflate tiles
 * inflated 1 GiB of them). */
static ts_status check_sizes(const char *path, int page, uint32_t width, uint32_t length, unsigned bps,
                             uint16_t compression, bool tiled, uint32_t tile_w, uint32_t tile_l,
                             uint64_t file_size, ts_error *err) {
    uint64_t esize = bps > 8 ? 2 : 1, pixels = (uint64_t)width * length, bytes;
    if (__builtin_mul_overflow(pixels, esize, &bytes) || bytes > (uint64_t)PTRDIFF_MAX / 4)
        return ts_fail(err, TS_ERR_FORMAT,
                       "%s: page %d declares %ux%u pixels (ImageWidth %u, ImageLength %u): %llu pixels, more "
                       "than can be held in memory", path, page, width, length, width, length,
                       (unsigned long long)pixels);
    const uint64_t ratio = max_expansion(compression);
    if ((bytes + ratio - 1) / ratio > file_size) {
        if (ratio == 1)
            return ts_fail(err, TS_ERR_FORMAT,
                           "%s: page %d declares %ux%u %u-bit pixels (ImageWidth %u, ImageLength %u), %llu bytes "
                           "uncompressed, but the file is %llu bytes", path, page, width, length, bps, width, length,
                           (unsigned long long)bytes, (unsigned long long)file_size);
        return ts_fail(err, TS_ERR_FORMAT,
                       "%s: page %d declares %ux%u %u-bit pixels (ImageWidth %u, ImageLength %u), %llu bytes, but "
                       "the file is %llu bytes and %s data (TIFF compression %u) decodes to at most %llu times its "
                       "size", path, page, width, length, bps, width, length, (unsigned long long)bytes,
                       (unsigned long long)file_size, compression_name(compression), compression,
                       (unsigned long long)ratio);
    }
    if (tiled) {
        uint64_t wmax = ((uint64_t)width + 15) / 16 * 16, lmax = ((uint64_t)length + 15) / 16 * 16;
        if (wmax < TI_FREE_TILE_SIDE) wmax = TI_FREE_TILE_SIDE;
        if (lmax < TI_FREE_TILE_SIDE) lmax = TI_FREE_TILE_SIDE;
        if (tile_w > wmax || tile_l > lmax)
            return ts_fail(err, TS_ERR_FORMAT,
                           "%s: page %d has %ux%u tiles (TileWidth %u, TileLength %u) for a %ux%u image: a tile "
                           "side may be at most %d px or the image's rounded up to 16", path, page, tile_w,
                           tile_l, tile_w, tile_l, width, length, TI_FREE_TILE_SIDE);
    }
    return TS_OK;
}

/* Checks the current directory; fills h, w, dtype. */
static ts_status check_page(ti_tiff *t, int page, int64_t *h, int64_t *w, ts_dtype *dtype,
                            ts_error *err) {
    TIFF *tif = t->tif;
    ts_status st;
    uint32_t width = 0, length = 0, tile_w = 0, tile_l = 0;
    uint16_t spp = 1, bps = 1, fmt = SAMPLEFORMAT_UINT, photometric = PHOTOMETRIC_MINISBLACK,
             compression = COMPRESSION_NONE;
    if (!TIFFGetField(tif, TIFFTAG_IMAGEWIDTH, &width) ||
        !TIFFGetField(tif, TIFFTAG_IMAGELENGTH, &length) || width == 0 || length == 0)
        return ts_fail(err, TS_ERR_FORMAT, "%s: page %d has no image size", t->path, page);
    TIFFGetFieldDefaulted(tif, TIFFTAG_SAMPLESPERPIXEL, &spp);
    TIFFGetFieldDefaulted(tif, TIFFTAG_BITSPERSAMPLE, &bps);
    TIFFGetFieldDefaulted(tif, TIFFTAG_SAMPLEFORMAT, &fmt);
    TIFFGetFieldDefaulted(tif, TIFFTAG_COMPRESSION, &compression);
    TIFFGetField(tif, TIFFTAG_TILEWIDTH, &tile_w);
    TIFFGetField(tif, TIFFTAG_TILELENGTH, &tile_l);
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
    if ((st = check_sizes(t->path, page, width, length, bps, compression, TIFFIsTiled(tif) != 0,
                          tile_w, tile_l, t->file_size, err)) != TS_OK)
        return st;
    *h = length, *w = width;
    *dtype = bps == 8 ? TS_UINT8 : TS_UINT16;
    return TS_OK;
}

/* The first page's size tags read straight from the file, for the reason
 * libtiff does not always give when it refuses a page (4294967295 x
 * 4294967295 pixels fail its strip size arithmetic without a message).
 * Classic and BigTIFF; SHORT, LONG and LONG8 values held in the entry.
 * False when the header or directory cannot be read. */
typedef struct ifd_sizes {
    uint32_t width, length, tile_w, tile_l;
    unsigned bps;
    uint16_t compression;
    bool tiled;
} ifd_sizes;

static uint64_t get_uint(const unsigned char *p, int n, bool be) {
    uint64_t v = 0;
    for (int i = 0; i < n; i++) v |= (uint64_t)p[be ? n - 1 - i : i] << (8 * i);
    return v;
}

static bool read_first_ifd(int fd, ifd_sizes *z) {
    unsigned char h[16];
    if (pread(fd, h, sizeof h, 0) != (ssize_t)sizeof h) return false;
    bool be = h[0] == 'M' && h[1] == 'M';
    if (!be && !(h[0] == 'I' && h[1] == 'I')) return false;
    uint64_t magic = get_uint(h + 2, 2, be);
    bool big = magic == 43;
    if (magic != 42 && !big) return false;
    uint64_t at = big ? get_uint(h + 8, 8, be) : get_uint(h + 4, 4, be);
    unsigned char cnt[8];
    if (pread(fd, cnt, big ? 8 : 2, (off_t)at) != (big ? 8 : 2)) return false;
    uint64_t n = get_uint(cnt, big ? 8 : 2, be);
    const int esz = big ? 20 : 12, csz = big ? 8 : 4;
    *z = (ifd_sizes){.bps = 1, .compression = COMPRESSION_NONE};
    for (uint64_t i = 0; i < n && i < 4096; i++) {
        unsigned char e[20];
        if (pread(fd, e, (size_t)esz, (off_t)(at + (big ? 8 : 2) + i * (uint64_t)esz)) != esz) return false;
        uint64_t tag = get_uint(e, 2, be), type = get_uint(e + 2, 2, be), count = get_uint(e + 4, csz, be);
        const unsigned char *v = e + 4 + csz;
        uint64_t val;
        if (type == 3) val = get_uint(v, 2, be);
        else if (type == 4) val = get_uint(v, 4, be);
        else if (type == 16 && big) val = get_uint(v, 8, be);
        else continue;
        if (count != 1 && tag != TIFFTAG_BITSPERSAMPLE) continue;
        uint32_t v32 = val > UINT32_MAX ? UINT32_MAX : (uint32_t)val;
        switch (tag) {
        case TIFFTAG_IMAGEWIDTH: z->width = v32; break;
        case TIFFTAG_IMAGELENGTH: z->length = v32; break;
        case TIFFTAG_BITSPERSAMPLE: z->bps = (unsigned)(v32 & 0xffff); break;
        case TIFFTAG_COMPRESSION: z->compression = (uint16_t)v32; break;
        case TIFFTAG_TILEWIDTH: z->tile_w = v32, z->tiled = true; break;
        case TIFFTAG_TILELENGTH: z->tile_l = v32, z->tiled = true; break;
        default: break;
        }
    }
    return true;
}

ts_status ti_tiff_open(const char *path, int max_pages, ti_tiff **out, ti_tiff_info *info,
                       ts_error *err) {
    *out = NULL;
    /* Opened here, not by libtiff: a FIFO or device is refused at once
     * (libtiff's open of a FIFO waits for a writer forever), and the size
     * bounds what the pages may declare. */
    int fd;
    uint64_t fsize;
    bool found;
    ts_status st = ts_open_regular(path, &fd, &fsize, &found, err);
    if (st) return st;
    if (!found) return ts_fail(err, TS_ERR_IO, "cannot open %s: no such file", path);
    ti_tiff *t = calloc(1, sizeof *t);
    TIFFOpenOptions *oo = t ? TIFFOpenOptionsAlloc() : NULL;
    if (!oo) {
        free(t);
        close(fd);
        return ts_fail(err, TS_ERR_NOMEM, "out of memory opening %s", path);
    }
    t->path = path;
    t->file_size = fsize;
    TIFFOpenOptionsSetErrorHandlerExtR(oo, on_error, t);
    TIFFOpenOptionsSetWarningHandlerExtR(oo, on_warning, t);
    t->tif = TIFFFdOpenExt(fd, path, "r", oo); /* TIFFClose closes fd */
    TIFFOpenOptionsFree(oo);
    if (!t->tif) {
        /* A page size libtiff failed on says why better than libtiff. */
        ifd_sizes z;
        if (read_first_ifd(fd, &z) && z.width && z.length)
            st = check_sizes(path, 0, z.width, z.length, z.bps, z.compression, z.tiled, z.tile_w, z.tile_l, fsize,
                             err);
        close(fd);
        if (st) goto fail;
        if (t->msg[0]) st = libtiff_fail(t, TS_ERR_IO, "cannot open as a TIFF", err);
        else st = ts_fail(err, TS_ERR_FORMAT, "%s: cannot open as a TIFF (libtiff refused it without a reason)", path);
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
        const char *desc = NULL;
        if (d == 0 && TIFFGetField(t->tif, TIFFTAG_IMAGEDESCRIPTION, &desc) && desc &&
            !(t->description = strdup(desc))) {
            st = ts_fail(err, TS_ERR_NOMEM, "out of memory opening %s", path);
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

const char *ti_tiff_description(const ti_tiff *t) { return t->description; }

void ti_tiff_close(ti_tiff *t) {
    if (!t) return;
    if (t->tif) TIFFClose(t->tif);
    free(t->dirs);
    free(t->description);
    free(t);
}
