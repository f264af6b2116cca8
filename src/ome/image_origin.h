/* Where an image of a plate lies on the stage, from its OME-NGFF metadata
 * (estimate --positions metadata, docs/register.md "Stage positions"). */
#ifndef TS_OME_IMAGE_ORIGIN_H
#define TS_OME_IMAGE_ORIGIN_H

#include <stdbool.h>

#include "ome/ome.h"

/* The origin [y, x] of well w, position p in px of its full-resolution
 * level: the physical position of its first pixel (the translation of
 * multiscales[0].datasets[0], then the multiscale's own scale and
 * translation when it has them) divided by the physical size of a level-0
 * pixel (the scales). *found is false (TS_OK) when neither transform list
 * has a translation: the image does not say where it is. Malformed
 * metadata: TS_ERR_FORMAT naming the file and key, as for reading it. */
ts_status ts_plate_image_origin(const ts_plate *plate, int w, int p, double yx[2], bool *found, ts_error *err);

#endif
