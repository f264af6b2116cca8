/* Tile orientation: flipud, then fliplr, then numpy's rot90 k times
 * (counter-clockwise on the (Y, X) plane). Shared by estimate (registration
 * sees oriented tiles) and fuse (places oriented tiles), so both agree on
 * the exact pixel mapping. For odd k the oriented plane is W x H. */
#ifndef TS_COMMON_ORIENT_H
#define TS_COMMON_ORIENT_H

#include <stddef.h>
#include <stdint.h>

#include "tessera/tessera.h"

/* rot90 reduced to 0..3 (negative k allowed, as numpy). */
int ts_orient_k(const ts_orientation *o);

/* Shape (oh, ow) of an h x w plane after orientation. */
void ts_orient_shape(const ts_orientation *o, int64_t h, int64_t w, int64_t *oh, int64_t *ow);

/* Source pixel (sy, sx) in the raw h x w plane of oriented pixel (y, x). */
void ts_orient_source(const ts_orientation *o, int64_t h, int64_t w, int64_t y, int64_t x,
                      int64_t *sy, int64_t *sx);

/* Orients a C-order h x w plane of elem-byte elements from src into dst
 * (distinct buffers, dst holds h*w elements laid out as oh x ow). */
void ts_orient_plane(const ts_orientation *o, const void *src, int64_t h, int64_t w,
                     size_t elem, void *dst);

#endif
