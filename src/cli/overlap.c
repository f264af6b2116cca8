/* estimate's and stitch's overlap options: px, or a percentage of the tile
 * (--overlap 10%), which needs the tile shape: the plate's first tile of
 * the wells selected, as oriented (an odd --rot90 swaps its height and
 * width), read here before the library runs (ts_estimate_options carries
 * px only). */
#include "cli/cli.h"

#include <stdio.h>
#include <string.h>

#include "common/error.h"
#include "ome/ome.h"

int cli_overlap_option(const char *cmd, int argc, char **argv, int *i, cli_overlaps *ov) {
    const char *a = argv[*i];
    bool both = !strcmp(a, "--overlap"), x = !strcmp(a, "--overlap-x"), y = !strcmp(a, "--overlap-y");
    if (!both && !x && !y) return 0;
    const char *v = cli_value(cmd, argc, argv, i);
    cli_overlap val;
    if (!v || !cli_overlap_value(cmd, a, v, 1, 1 << 20, &val)) return -1;
    if (both || x) ov->x = val, ov->x_given = true;
    if (both || y) ov->y = val, ov->y_given = true;
    return 1;
}

/* The first tile's height and width (as stored) of the wells selected. */
static ts_status first_tile_shape(const char *input, const char *wells, int64_t hw[2], ts_error *err) {
    ts_plate *plate = NULL;
    ts_status st = ts_plate_open(input, &plate, err);
    if (st == TS_OK) st = ts_plate_filter_wells(plate, wells, err);
    int w = 0;
    while (st == TS_OK && w < plate->nwells && plate->wells[w].npositions == 0) w++;
    if (st == TS_OK && w == plate->nwells)
        st = ts_fail(err, TS_ERR_FORMAT, "%s: no well with positions, so no tile to take the overlap "
                                         "percentage of", input);
    ts_image_meta meta;
    tz_array *arr = NULL;
    if (st == TS_OK && (st = ts_plate_open_array(plate, w, 0, 0, &meta, &arr, err)) == TS_OK) {
        int64_t extent[5];
        ts_image_extent(&meta, tz_array_get_meta(arr), extent);
        hw[0] = extent[3], hw[1] = extent[4];
        tz_array_close(arr);
    }
    ts_plate_close(plate);
    return st;
}

int cli_overlap_resolve(const char *cmd, const cli_overlaps *ov, ts_estimate_options *o) {
    if (!ov->x_given || !ov->y_given)
        return cli_usage_error(cmd, "needs --overlap PX or N%% (or both --overlap-x and --overlap-y)");
    if (ov->x.percent < 0 && ov->y.percent < 0) {
        o->overlap_x = ov->x.px, o->overlap_y = ov->y.px;
        return CLI_OK;
    }
    int64_t hw[2];
    ts_error err;
    if (first_tile_shape(o->input, o->wells, hw, &err) != TS_OK) return cli_fail(cmd, &err);
    if (o->orientation.rot90 % 2) {
        int64_t t = hw[0];
        hw[0] = hw[1], hw[1] = t;
    }
    /* In px before the cast: 10% of a tile declared 5e10 px wide became
     * (int)5e9, 705032704 px. */
    for (int k = 0; k < 2; k++) {
        const cli_overlap *v = k ? &ov->y : &ov->x;
        int64_t extent = hw[1 - k];
        if (v->percent >= 0 && v->percent / 100.0 * (double)extent > (double)(1 << 20))
            return cli_usage_error(cmd, "an overlap of %g%% of %lld px tiles is beyond %d px", v->percent,
                                   (long long)extent, 1 << 20);
    }
    o->overlap_x = cli_overlap_px(&ov->x, hw[1]);
    o->overlap_y = cli_overlap_px(&ov->y, hw[0]);
    if (o->overlap_x < 1 || o->overlap_y < 1)
        return cli_usage_error(cmd, "an overlap of %g%% x %g%% of %lldx%lld tiles is %d x %d px: under 1 px",
                               ov->x.percent < 0 ? 0 : ov->x.percent, ov->y.percent < 0 ? 0 : ov->y.percent,
                               (long long)hw[0], (long long)hw[1], o->overlap_x, o->overlap_y);
    return CLI_OK;
}
