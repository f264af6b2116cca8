/*
 * Fuzz target: TIFF import (src/import/tiff_read.c over libtiff). The input
 * is the file: ti_tiff_open checks every page (size, samples, bits, sample
 * format, compression, pyramid levels), then each full-resolution page is
 * decoded with ti_tiff_read_page into a plane of height x width, as import
 * allocates it. Pages whose plane would exceed FZ_MAX_DECODED are not
 * decoded (the caller's buffer); what tiff_read allocates itself (strip and
 * tile scratch) is left to libFuzzer's limits.
 */
#include "fuzz_common.h"

#include "import/tiff_read.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char path[1100];
    fz_path(path, sizeof path, NULL, "tile.tif");
    fz_write(path, data, size);
    ti_tiff *t = NULL;
    ti_tiff_info info;
    ts_error err = {0};
    if (ti_tiff_open(path, 8, &t, &info, &err) != TS_OK) {
        fz_check_error(err, "open");
        return 0;
    }
    fz_check(info.height > 0 && info.width > 0 && info.pages >= 1 && info.pages <= 8, "info %lldx%lld, %d pages",
             (long long)info.height, (long long)info.width, info.pages);
    fz_check(info.dtype == TS_UINT8 || info.dtype == TS_UINT16, "dtype %d", (int)info.dtype);
    size_t es = ts_dtype_size(info.dtype);
    if ((size_t)info.width <= FZ_MAX_DECODED / es / (size_t)info.height) {
        size_t plane = (size_t)info.height * (size_t)info.width * es;
        if (plane <= FZ_MAX_DECODED) {
            void *buf = malloc(plane);
            fz_check(buf != NULL, "malloc %zu", plane);
            for (int p = 0; p < info.pages; p++)
                if (ti_tiff_read_page(t, p, buf, &err) != TS_OK)
                    fz_check_error(err, "read");
            free(buf);
        }
    }
    ti_tiff_close(t);
    return 0;
}
