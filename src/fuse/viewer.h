/* What makes a fused plate open in viewers (docs/fuse.md, "Viewer-ready
 * plates"): one canvas shape for every well of a run, a pyramid down to
 * 1024 px by default, and a display window from the data. */
#ifndef TS_FUSE_VIEWER_H
#define TS_FUSE_VIEWER_H

#include "fuse/fuse_internal.h"

/* The side the default pyramid brings the smallest level within. */
#define FUSE_AUTO_LEVELS_SIDE 1024

/* Pyramid levels below level 0 until both sides are at most `side` px. */
int fuse_auto_levels(int64_t h, int64_t w, int64_t side);

/* Before the layouts: every prepared image (wells[0..n)) gets the largest
 * canvas among them (padding at the bottom and right, origins unchanged:
 * vizarr's plate view is blank when the wells' smallest levels differ in
 * shape), and *levels, when negative (the default), becomes
 * fuse_auto_levels of that canvas. */
void fuse_plate_canvas(fuse_well *wells, int n, int *levels);

/* The display window of each channel from the well's written data (the
 * largest level whose plane fits OME_WINDOW_SAMPLE, else the smallest; the
 * timepoints this run wrote) into im. */
ts_status fuse_window(const fuse_well *W, ts_image_meta *im, ts_error *err);

#endif
