/* Whether a tile shows anything beyond its noise (content.c). For the tiles
 * no pair places: a blank one lands on its stage position harmlessly, one
 * with content there is as far off as the stage put it, and nothing in its
 * overlaps said so (a simulated tile 3.5 px off whose four overlap strips
 * were background and noise, counted among "9 isolated tiles"). */
#ifndef TS_REGISTER_CONTENT_H
#define TS_REGISTER_CONTENT_H

#include "register/register.h"

/* The share of the h x w tile's area (0..1) that stands out of its noise,
 * 0 when nothing does. The tile is binned into cells (4 x 4 px from 128
 * px up, 2 x 2 from 32, else single pixels) and a smooth illumination (a
 * surface of degree 4 fitted to the cells, and from 512 px twice a box of
 * a sixteenth of the side) is taken out; the tile has content
 *  - where at least 4 cells lie over 6 times the cells' noise, measured as
 *    the median absolute difference of neighbouring cells (sparse content:
 *    a few cells or galaxies on background), or
 *  - where the cells' robust spread (1.4826 x their median absolute value)
 *    is over 4 times what the pixels' noise (the median absolute
 *    difference of neighbouring pixels) leaves after binning (content
 *    everywhere, whose neighbouring cells differ as much as it varies).
 * The share is of the cells over 6 times the noise that decided. White
 * noise, a constant and a smooth illumination score 0. Samples read as
 * ts_samples do (non-finite as 0). */
ts_status ts_tile_content(ts_samples tile, int h, int w, double *share, ts_error *err);

#endif
