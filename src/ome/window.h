/* The display window (omero.channels[].window) of a channel from its data:
 * robust percentiles of a bounded, deterministic sample, so a viewer opens
 * a mosaic or a tile with a contrast that shows it (a window of 0..65535
 * shows 12-bit data as black). */
#ifndef TS_OME_WINDOW_H
#define TS_OME_WINDOW_H

#include <stddef.h>
#include <stdint.h>

#include "tessera/tessera.h"
#include "ome/ome.h"
#include "zarr/zarr.h"

/* start and end are these quantiles of the non-zero values (zero is the
 * fill value: uncovered canvas and padding, not data). */
#define OME_WINDOW_LOW 0.001
#define OME_WINDOW_HIGH 0.999
/* Values read per channel at most (ome_window_from_array). */
#define OME_WINDOW_SAMPLE ((int64_t)1 << 22)

/* Accumulates the values of one channel: a histogram for uint8/uint16, the
 * values themselves (at most OME_WINDOW_SAMPLE) for float32. */
typedef struct ome_window_acc {
    ts_dtype dtype;
    uint64_t *hist;      /* 65536 bins (integer dtypes) */
    float *vals;         /* float32 */
    size_t n, cap;       /* float32 values kept, allocated */
} ome_window_acc;

/* false: the dtype has no window from data (anything but uint8, uint16,
 * float32) or out of memory; the caller keeps its window. */
bool ome_window_init(ome_window_acc *a, ts_dtype dtype);
/* n values of a's dtype, native endian. */
void ome_window_add(ome_window_acc *a, const void *values, size_t n);
/* out = {min, max, start, end}: min/max the dtype's range (uint8 0..255,
 * uint16 0..65535; float32: 0 and the sample's extremes), start/end the
 * quantiles, end > start. false when no non-zero value was seen. */
bool ome_window_result(const ome_window_acc *a, double out[4]);
void ome_window_free(ome_window_acc *a);

/* Channel c's window in meta from one whole plane of n values (import: a
 * tile as it is written); left as it was when the plane has none. */
void ome_window_of_plane(ts_image_meta *meta, int c, ts_dtype dtype, const void *plane, size_t n);

/* The window of each channel c < nc of a (T, C, Z, Y, X) array from
 * timepoints [t0, t0 + nt), all z: the whole planes when they fit
 * OME_WINDOW_SAMPLE (evenly spaced planes when not all do), else evenly
 * spaced chunks of the middle plane. has[c] false: no window from data. */
ts_status ome_window_from_array(const tz_array *arr, int64_t t0, int64_t nt, int nc, double (*window)[4],
                                bool *has, ts_error *err);

#endif
