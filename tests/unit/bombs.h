/* For the tests of bounded reading (test_zarr_bounds, test_import_bounds):
 * decompression bombs made with the real zlib, and the process's memory
 * figures from /proc/self/status. Include after cmocka.h. */
#ifndef TESSERA_TEST_BOMBS_H
#define TESSERA_TEST_BOMBS_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

static const unsigned char bomb_zeros[1 << 20];

/* A field of /proc/self/status in kB (VmRSS, VmHWM, VmPeak), -1 if absent. */
static inline long status_kb(const char *field) {
    FILE *f = fopen("/proc/self/status", "r");
    if (!f) return -1;
    char line[256];
    long v = -1;
    size_t n = strlen(field);
    while (fgets(line, sizeof line, f))
        if (strncmp(line, field, n) == 0 && line[n] == ':') v = atol(line + n + 1);
    fclose(f);
    return v;
}

/* total zero bytes deflated at level into a zlib stream (malloc'd, *n bytes). */
static inline unsigned char *deflate_zeros(size_t total, int level, size_t *n) {
    z_stream zs;
    memset(&zs, 0, sizeof zs);
    assert_int_equal(deflateInit(&zs, level), Z_OK);
    size_t cap = total / 100 + (1 << 16);
    unsigned char *out = malloc(cap);
    assert_non_null(out);
    zs.next_out = out;
    zs.avail_out = (uInt)cap;
    int r = Z_OK;
    for (size_t left = total; r != Z_STREAM_END;) {
        size_t k = left < sizeof bomb_zeros ? left : sizeof bomb_zeros;
        left -= k;
        zs.next_in = (Bytef *)bomb_zeros;
        zs.avail_in = (uInt)k;
        do r = deflate(&zs, left ? Z_NO_FLUSH : Z_FINISH);
        while (r == Z_OK && zs.avail_in > 0);
        assert_true(r == Z_OK || r == Z_STREAM_END);
    }
    *n = zs.total_out;
    deflateEnd(&zs);
    return out;
}

#endif
