/* Where t, c, z, y, x live in an image's array: extents and read boxes by
 * axis name, so readers handle any axis subset (yx, cyx, zyx, czyx, tczyx)
 * the same way. */
#include "ome/ome.h"

#include "common/error.h"

static const char AXIS_NAMES[5] = {'t', 'c', 'z', 'y', 'x'};

void ts_image_extent(const ts_image_meta *meta, const tz_array_meta *am, int64_t extent[5]) {
    for (int a = 0; a < 5; a++) {
        int d = meta->axis_index[a];
        extent[a] = d >= 0 && d < am->ndim ? am->shape[d] : 1;
    }
}

ts_status ts_image_check_layout(const ts_image_meta *meta, const char *path, ts_error *err) {
    const int *ax = meta->axis_index;
    if (ax[3] < 0 || ax[4] < 0) return ts_fail(err, TS_ERR_FORMAT, "%s: the image has no y and x axes", path);
    if (ax[4] < ax[3] || (ax[1] >= 0 && ax[1] > ax[3]))
        return ts_fail(err, TS_ERR_UNSUPPORTED,
                       "%s: axes are not in t, c, z, y, x order (c at %d, y at %d, x at %d); tessera reads "
                       "c before y before x", path, ax[1], ax[3], ax[4]);
    return TS_OK;
}

ts_status ts_image_box(const int axis_index[5], int ndim, const tz_array_meta *am,
                       const int64_t start5[5], const int64_t count5[5], int64_t start[TZ_MAX_DIM],
                       int64_t count[TZ_MAX_DIM], const char *path, ts_error *err) {
    if (am->ndim != ndim || am->ndim > TZ_MAX_DIM)
        return ts_fail(err, TS_ERR_FORMAT, "%s: array has %d dimensions but the image's axes list %d",
                       path, am->ndim, ndim);
    for (int d = 0; d < am->ndim; d++) start[d] = 0, count[d] = 1;
    int64_t extent[5];
    for (int a = 0; a < 5; a++) {
        int d = axis_index[a];
        extent[a] = d >= 0 && d < am->ndim ? am->shape[d] : 1;
    }
    for (int a = 0; a < 5; a++) {
        if (start5[a] < 0 || count5[a] < 0 || start5[a] > extent[a] - count5[a])
            return ts_fail(err, TS_ERR_ARG, "%s: %c range [%lld, %lld) is outside the array's %lld%s",
                           path, AXIS_NAMES[a], (long long)start5[a],
                           (long long)(start5[a] + count5[a]), (long long)extent[a],
                           axis_index[a] < 0 ? " (the image has no such axis)" : "");
        int d = axis_index[a];
        if (d < 0) continue;
        start[d] = start5[a];
        count[d] = count5[a];
    }
    return TS_OK;
}
