/* Box copies between C-order buffers: an odometer over the outer
 * dimensions, one memcpy per contiguous innermost row. */
#include "zarr/zarr_internal.h"

#include <math.h>
#include <string.h>

void tz_copy_box(int ndim, size_t esize, const void *src, const int64_t *src_shape,
                 const int64_t *src_off, void *dst, const int64_t *dst_shape,
                 const int64_t *dst_off, const int64_t *extent) {
    for (int d = 0; d < ndim; d++)
        if (extent[d] <= 0) return;
    if (ndim == 0) { memcpy(dst, src, esize); return; }
    int64_t ss[TZ_MAX_DIM], ds[TZ_MAX_DIM];
    int64_t s = 1, t = 1;
    for (int d = ndim - 1; d >= 0; d--) { ss[d] = s; s *= src_shape[d]; ds[d] = t; t *= dst_shape[d]; }
    /* Merge trailing dimensions that are whole in both buffers into longer rows. */
    int inner = ndim - 1;
    int64_t row = extent[inner];
    while (inner > 0 && extent[inner] == src_shape[inner] && extent[inner] == dst_shape[inner] &&
           src_off[inner] == 0 && dst_off[inner] == 0) {
        inner--;
        row *= extent[inner];
    }
    size_t row_bytes = (size_t)row * esize;
    int64_t so = 0, dof = 0;
    for (int d = 0; d < ndim; d++) { so += src_off[d] * ss[d]; dof += dst_off[d] * ds[d]; }
    const unsigned char *sp = src;
    unsigned char *dp = dst;
    int64_t idx[TZ_MAX_DIM] = {0};
    for (;;) {
        memcpy(dp + (size_t)dof * esize, sp + (size_t)so * esize, row_bytes);
        int d = inner - 1;
        for (; d >= 0; d--) {
            idx[d]++;
            so += ss[d];
            dof += ds[d];
            if (idx[d] < extent[d]) break;
            so -= ss[d] * extent[d];
            dof -= ds[d] * extent[d];
            idx[d] = 0;
        }
        if (d < 0) break;
    }
}

void tz_fill_box(int ndim, size_t esize, const unsigned char *fill, void *dst,
                 const int64_t *dst_shape, const int64_t *dst_off, const int64_t *extent) {
    for (int d = 0; d < ndim; d++)
        if (extent[d] <= 0) return;
    if (ndim == 0) { memcpy(dst, fill, esize); return; }
    int64_t ds[TZ_MAX_DIM];
    int64_t t = 1;
    for (int d = ndim - 1; d >= 0; d--) { ds[d] = t; t *= dst_shape[d]; }
    int inner = ndim - 1;
    int64_t row = extent[inner];
    while (inner > 0 && extent[inner] == dst_shape[inner] && dst_off[inner] == 0) {
        inner--;
        row *= extent[inner];
    }
    bool zero = true;
    for (size_t k = 0; k < esize; k++) zero = zero && fill[k] == 0;
    int64_t dof = 0;
    for (int d = 0; d < ndim; d++) dof += dst_off[d] * ds[d];
    unsigned char *dp = dst;
    int64_t idx[TZ_MAX_DIM] = {0};
    for (;;) {
        unsigned char *p = dp + (size_t)dof * esize;
        if (zero) {
            memset(p, 0, (size_t)row * esize);
        } else {
            /* Write one element, then double the filled prefix. */
            size_t total = (size_t)row * esize, done = esize;
            memcpy(p, fill, esize);
            while (done < total) {
                size_t m = done < total - done ? done : total - done;
                memcpy(p + done, p, m);
                done += m;
            }
        }
        int d = inner - 1;
        for (; d >= 0; d--) {
            idx[d]++;
            dof += ds[d];
            if (idx[d] < extent[d]) break;
            dof -= ds[d] * extent[d];
            idx[d] = 0;
        }
        if (d < 0) break;
    }
}

bool tz_all_fill(const tz_array *arr, const void *data, size_t n) {
    const unsigned char *p = data;
    size_t es = arr->esize;
    if (arr->fill_is_nan) {
        if (arr->meta.dtype == TS_FLOAT32) {
            for (size_t i = 0; i < n; i++) { float v; memcpy(&v, p + i * 4, 4); if (!isnan(v)) return false; }
        } else {
            for (size_t i = 0; i < n; i++) { double v; memcpy(&v, p + i * 8, 8); if (!isnan(v)) return false; }
        }
        return true;
    }
    /* Compare against a block of repeated fill elements (4096 is a multiple of every esize). */
    unsigned char pattern[4096];
    for (size_t k = 0; k < sizeof pattern; k += es) memcpy(pattern + k, arr->fill, es);
    size_t total = n * es;
    for (size_t off = 0; off < total; off += sizeof pattern) {
        size_t m = total - off < sizeof pattern ? total - off : sizeof pattern;
        if (memcmp(p + off, pattern, m) != 0) return false;
    }
    return true;
}
