#include "common/orient.h"

#include <string.h>

int ts_orient_k(const ts_orientation *o) {
    int k = o ? o->rot90 % 4 : 0;
    return k < 0 ? k + 4 : k;
}

void ts_orient_shape(const ts_orientation *o, int64_t h, int64_t w, int64_t *oh, int64_t *ow) {
    bool swap = ts_orient_k(o) % 2 == 1;
    *oh = swap ? w : h;
    *ow = swap ? h : w;
}

/* numpy: rot90(m, 1)[i, j] = m[j, W-1-i]; rot90(m, 2)[i, j] = m[H-1-i, W-1-j];
 * rot90(m, 3)[i, j] = m[H-1-j, i]. The flips act on the raw plane first. */
void ts_orient_source(const ts_orientation *o, int64_t h, int64_t w, int64_t y, int64_t x,
                      int64_t *sy, int64_t *sx) {
    int64_t ay, ax;
    switch (ts_orient_k(o)) {
    case 1: ay = x; ax = w - 1 - y; break;
    case 2: ay = h - 1 - y; ax = w - 1 - x; break;
    case 3: ay = h - 1 - x; ax = y; break;
    default: ay = y; ax = x; break;
    }
    *sy = (o && o->flipud) ? h - 1 - ay : ay;
    *sx = (o && o->fliplr) ? w - 1 - ax : ax;
}

void ts_orient_plane(const ts_orientation *o, const void *src, int64_t h, int64_t w,
                     size_t elem, void *dst) {
    int64_t oh, ow;
    ts_orient_shape(o, h, w, &oh, &ow);
    const unsigned char *s = src;
    unsigned char *d = dst;
    if (ts_orient_k(o) == 0 && !(o && o->fliplr)) {
        /* Rows stay rows: copy whole rows (possibly in reverse row order). */
        for (int64_t y = 0; y < oh; y++) {
            int64_t sy = (o && o->flipud) ? h - 1 - y : y;
            memcpy(d + (size_t)(y * ow) * elem, s + (size_t)(sy * w) * elem, (size_t)w * elem);
        }
        return;
    }
    /* General case: along an output row the source index moves by a fixed
     * stride, so compute the start and step once per row. */
    for (int64_t y = 0; y < oh; y++) {
        int64_t y0, x0, y1, x1;
        ts_orient_source(o, h, w, y, 0, &y0, &x0);
        if (ow > 1) ts_orient_source(o, h, w, y, 1, &y1, &x1);
        else y1 = y0, x1 = x0;
        int64_t start = y0 * w + x0, step = (y1 * w + x1) - start;
        unsigned char *row = d + (size_t)(y * ow) * elem;
        switch (elem) {
        case 1:
            for (int64_t x = 0; x < ow; x++) row[x] = s[start + x * step];
            break;
        case 2: {
            uint16_t *r = (uint16_t *)row;
            const uint16_t *ss = (const uint16_t *)src;
            for (int64_t x = 0; x < ow; x++) r[x] = ss[start + x * step];
            break;
        }
        case 4: {
            uint32_t *r = (uint32_t *)row;
            const uint32_t *ss = (const uint32_t *)src;
            for (int64_t x = 0; x < ow; x++) r[x] = ss[start + x * step];
            break;
        }
        default:
            for (int64_t x = 0; x < ow; x++)
                memcpy(row + (size_t)x * elem, s + (size_t)(start + x * step) * elem, elem);
        }
    }
}
