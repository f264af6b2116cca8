/* A tile's stage position from its multiscales coordinateTransformations.
 * OME-NGFF maps level-0 index i along an axis to the physical coordinate
 * (i * s_d + t_d) * S + T, where s_d, t_d are datasets[0]'s scale and
 * translation and S, T the multiscale's own (applied after, both optional).
 * Converters (iohub, bioformats2raw layouts) put the stage position in the
 * translations, in physical units: the first pixel's coordinate divided by
 * the pixel's physical size is the origin in px, t_d / s_d + T / (s_d S),
 * taken to be in the frame of the oriented tiles (the mosaic's). */
#include "ome/image_origin.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#include "common/error.h"
#include "ome/ome_internal.h"

/* The scale and translation of a coordinateTransformations list along
 * array dimension d (1 and 0 when absent); *has_t when it has a
 * translation. The list was checked by ome_parse_image_meta. */
static void transform_along(json_t *ct, int d, double *scale, double *trans, bool *has_t) {
    *scale = 1.0;
    *trans = 0.0;
    size_t i;
    json_t *t;
    json_array_foreach(ct, i, t) {
        json_t *type = json_object_get(t, "type");
        const char *ty = json_is_string(type) ? json_string_value(type) : "";
        if (strcmp(ty, "scale") == 0) {
            *scale = json_number_value(json_array_get(json_object_get(t, "scale"), (size_t)d));
        } else if (strcmp(ty, "translation") == 0) {
            *trans = json_number_value(json_array_get(json_object_get(t, "translation"), (size_t)d));
            *has_t = true;
        }
    }
}

ts_status ts_plate_image_origin(const ts_plate *plate, int w, int p, double yx[2], bool *found, ts_error *err) {
    *found = false;
    if (w < 0 || w >= plate->nwells || p < 0 || p >= plate->wells[w].npositions)
        return ts_fail(err, TS_ERR_ARG, "%s: no well %d / position %d", plate->path, w, p);
    char path[4200];
    ts_plate_image_path(plate, w, p, path, sizeof path);
    ome_node node;
    ts_status st = ome_node_read(path, &node, NULL, err);
    if (st != TS_OK) return st;
    ts_image_meta meta; /* validates the axes and every transform list */
    if ((st = ome_parse_image_meta(&node, &meta, err)) != TS_OK) goto done;
    json_t *ms = json_array_get(json_object_get(node.ome, "multiscales"), 0);
    json_t *ds0 = json_array_get(json_object_get(ms, "datasets"), 0);
    json_t *ct = json_object_get(ds0, "coordinateTransformations");
    json_t *mct = json_object_get(ms, "coordinateTransformations");
    bool has_t = false;
    for (int k = 0; k < 2; k++) {
        int d = meta.axis_index[3 + k]; /* y, x: present (checked by the parse) */
        double s, t, gs = 1.0, gt = 0.0;
        transform_along(ct, d, &s, &t, &has_t);
        if (json_is_array(mct)) transform_along(mct, d, &gs, &gt, &has_t);
        double px = s * gs, v = (t * gs + gt) / px;
        if (!isfinite(v)) {
            st = ts_fail(err, TS_ERR_FORMAT, "%s: the %c translation of multiscales[0] (%g %s) is not a finite "
                         "number of pixels of size %g", node.file, "yx"[k], t * gs + gt,
                         meta.space_unit[0] ? meta.space_unit : "units", px);
            goto done;
        }
        /* To 1e-6 px: a grid in micrometres (pitch x 0.65) comes back a grid
         * in px, not 207.99999999999997, whose strips would be cut a pixel
         * off the grid's. */
        yx[k] = fabs(v) < 1e9 ? round(v * 1e6) / 1e6 : v;
    }
    *found = has_t;
done:
    ome_node_free(&node);
    return st;
}
