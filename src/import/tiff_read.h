/* Greyscale TIFF tiles through libtiff: 8- or 16-bit unsigned, one sample
 * per pixel, strips or tiles, any compression this libtiff decodes. Each
 * full-resolution page (IFD) is a channel; reduced-resolution pages
 * (pyramids) are skipped. Anything else is refused naming the file. libtiff's
 * own messages are caught per file (never printed) and end up in ts_error. */
#ifndef TS_IMPORT_TIFF_READ_H
#define TS_IMPORT_TIFF_READ_H

#include <stdint.h>
#include "tessera/tessera.h"

typedef struct ti_tiff_info {
    int64_t height, width;
    int pages;      /* full-resolution pages = channels */
    ts_dtype dtype; /* TS_UINT8 or TS_UINT16 */
} ti_tiff_info;

typedef struct ti_tiff ti_tiff;

/* Opens a TIFF and checks every page; max_pages bounds the channels. */
ts_status ti_tiff_open(const char *path, int max_pages, ti_tiff **out, ti_tiff_info *info,
                       ts_error *err);
/* Decodes page `page` (0-based, of the full-resolution pages) into buf:
 * height x width, C order, native endian, of the dtype. */
ts_status ti_tiff_read_page(ti_tiff *t, int page, void *buf, ts_error *err);
/* The first IFD's ImageDescription (where OME-TIFF keeps its OME-XML), or
 * NULL; owned by t. */
const char *ti_tiff_description(const ti_tiff *t);
void ti_tiff_close(ti_tiff *t);

#endif
