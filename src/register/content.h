/* Whether a tile shows anything beyond its noise (content.c). For the tiles
 * no pair places: a blank one lands on its stage position harmlessly, one
 * with content there is as far off as the stage put it, and nothing in its
 * overlaps said so (a simulated tile 3.5 px off whose four overlap strips
 * were background and noise, counted among "9 isolated tiles"). */
#ifndef TS_REGISTER_CONTENT_H
#define TS_REGISTER_CONTENT_H

#include <stdbool.h>

#include "register/register.h"

/* The check for h x w tiles: how they are binned into cells (4 x 4 px
 * from 128 px up, 2 x 2 from 32, else single pixels) and, once learned,
 * the camera's fixed pattern. Read-only while tiles are measured (one
 * check serves every thread). */
typedef struct ts_content_check ts_content_check;

ts_status ts_content_check_create(int h, int w, ts_content_check **out, ts_error *err);
void ts_content_check_free(ts_content_check *c);
size_t ts_content_ncells(const ts_content_check *c);
/* A tile's noise, from its pixels: the median absolute difference of
 * neighbouring pixels along rows and columns, as binning leaves white
 * noise of that measure (pixel), and no less than the samples' rounding
 * (integers: 1/sqrt(12) of a step) or a float's precision (floor). */
typedef struct ts_content_noise {
    double pixel, floor;
} ts_content_noise;
/* The tile's cells (ts_content_ncells floats): the mean of each cell's
 * pixels, read as ts_samples do (non-finite as 0); and its noise. */
ts_status ts_content_cells(const ts_content_check *c, ts_samples tile, float *cells, ts_content_noise *noise,
                           ts_error *err);
/* The fixed pattern from n tiles' cells (n * ts_content_ncells floats, one
 * tile after another): per cell, their median, and for each of them the
 * median of the others. What blank tiles all show (dust on the sensor,
 * hot pixels, a bad column, the illumination's shape) is then not
 * content; a tile with content among them does not move the median.
 * Fewer than 4 tiles (3 others for each): no pattern. */
ts_status ts_content_learn(ts_content_check *c, const float *cells, int n, ts_error *err);

/* The share of the tile's area (0..1) that stands out of its noise, 0 when
 * nothing does. Its cells, less the pattern where one is learned, less a
 * smooth illumination (a surface of degree 4 fitted to the cells, and from
 * 512 px twice a box of a sixteenth of the side), have content
 *  - where at least 4 cells lie over 6 times the cells' noise, measured as
 *    the median absolute difference of neighbouring cells along rows and
 *    columns (sparse content: a few cells or galaxies on background), or
 *  - where the cells' robust spread (1.4826 x their median absolute value)
 *    is over 4 times what the pixels' noise (the median absolute
 *    difference of neighbouring pixels) leaves after binning (content
 *    everywhere, whose neighbouring cells differ as much as it varies).
 * The share is of the cells over 6 times the noise that decided. White
 * noise, a constant and a smooth illumination score 0. */
ts_status ts_tile_content(const ts_content_check *c, ts_samples tile, double *share, ts_error *err);
/* The same from a tile's cells and noise (ts_content_cells); the cells
 * are used up. in_sample: the tile is one of those the pattern was
 * learned from (it is then taken against the others' median). */
ts_status ts_content_share(const ts_content_check *c, float *cells, ts_content_noise noise, bool in_sample,
                           double *share, ts_error *err);

#endif
