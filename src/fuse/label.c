/* Label images (segmentation masks) in fuse: integer images that are not
 * blended. A pixel of the mosaic takes the label of the tile that covers it
 * with the largest edt weight, i.e. the tile it lies deepest inside (ties:
 * the tile first in the shifts file's order, which is the order blocks
 * blend their strips in); a tile's 0 is background and is taken like any
 * label, so where the most central view of a pixel saw no object there is
 * none. The result is a choice among the input pixels, never a mixture: no
 * label appears that is not in a tile, and the bytes do not depend on the
 * threads or ranks (each block's strips are visited in tile order).
 *
 * The block's float num/den scratch holds the state: den the best weight
 * so far, num (same size, 4 bytes a pixel) the label's 32 bits. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fuse/fuse_internal.h"

bool fuse_label_plate(const ts_plate *plate, int w) {
    if (plate->wells[w].npositions < 1) return false;
    char image[4300];
    ts_plate_image_path(plate, w, 0, image, sizeof image);
    return ts_image_is_label(image);
}

ts_status fuse_label_check_tiles(fuse_well *W, ts_error *err) {
    const ts_well_info *well = &W->plate->wells[W->w];
    ts_dtype dt = W->tiles[0].dtype;
    for (int i = 0; i < W->ntiles; i++) {
        const fuse_tile *t = &W->tiles[i];
        char image[4300];
        fuse_tile_image_path(W, t->position, image, sizeof image);
        switch (t->dtype) {
        case TS_UINT8: case TS_INT8: case TS_UINT16: case TS_INT16: case TS_UINT32: case TS_INT32: break;
        default:
            return ts_fail(err, TS_ERR_UNSUPPORTED, "%s: dtype %s is not a label image's (labels are fused from "
                           "integer images of up to 32 bits: uint8, int8, uint16, int16, uint32, int32)",
                           image, ts_dtype_name(t->dtype));
        }
        if (t->dtype != dt) {
            char first[4300];
            fuse_tile_image_path(W, W->tiles[0].position, first, sizeof first);
            return ts_fail(err, TS_ERR_FORMAT, "well %s: label tiles of two dtypes, %s (%s) and %s (%s): a label "
                           "mosaic keeps the one dtype of its tiles", well->path, ts_dtype_name(dt), first,
                           ts_dtype_name(t->dtype), image);
        }
    }
    W->out_dtype = dt;
    W->out_elem = ts_dtype_size(dt);
    return TS_OK;
}

#define LABEL_ROW(TYPE)                                                          \
    do {                                                                         \
        const TYPE *s = (const TYPE *)raw + at;                                  \
        for (int64_t j = 0; j < n; j++) dst[j] = (uint32_t)(int64_t)s[j * step]; \
    } while (0)

void fuse_label_convert_row(ts_dtype dt, uint32_t *dst, const void *raw, int64_t at, int64_t step, int64_t n) {
    switch (dt) {
    case TS_UINT8: LABEL_ROW(uint8_t); break;
    case TS_INT8: LABEL_ROW(int8_t); break;
    case TS_UINT16: LABEL_ROW(uint16_t); break;
    case TS_INT16: LABEL_ROW(int16_t); break;
    case TS_UINT32: LABEL_ROW(uint32_t); break;
    case TS_INT32: LABEL_ROW(int32_t); break;
    default: break; /* fuse_label_check_tiles refused the rest */
    }
}

void fuse_label_row(const fuse_well *W, float *best, uint32_t *lab, const fuse_strip *s, int64_t at,
                    const float *w, int64_t n) {
    if (s->dtype == TS_UINT16) W->K->label_u16(best, lab, (const uint16_t *)s->data + at, w, n);
    else W->K->label_u32(best, lab, (const uint32_t *)s->data + at, w, n);
}

void fuse_label_store(void *out, ts_dtype dt, const uint32_t *lab, int64_t n) {
    switch (ts_dtype_size(dt)) {
    case 1:
        for (int64_t i = 0; i < n; i++) ((uint8_t *)out)[i] = (uint8_t)lab[i];
        break;
    case 2:
        for (int64_t i = 0; i < n; i++) ((uint16_t *)out)[i] = (uint16_t)lab[i];
        break;
    default:
        memcpy(out, lab, (size_t)n * sizeof *lab);
        break;
    }
}

void fuse_tile_image_path(const fuse_well *W, int p, char *out, size_t n) {
    ts_plate_image_path(W->plate, W->w, p, out, n);
    if (W->sub[0]) {
        size_t len = strlen(out);
        snprintf(out + len, n - len, "/%s", W->sub);
    }
}

ts_status fuse_tile_image_meta(const fuse_well *W, int p, ts_image_meta *meta, ts_error *err) {
    if (!W->sub[0]) return ts_plate_image_meta(W->plate, W->w, p, meta, err);
    char path[4300];
    fuse_tile_image_path(W, p, path, sizeof path);
    ts_ome_version ver;
    ts_status st = ts_image_read_meta(path, &ver, meta, err);
    if (st == TS_OK && ver != W->plate->version)
        st = ts_fail(err, TS_ERR_FORMAT, "%s: label image version 0.%d differs from the plate's 0.%d", path, (int)ver,
                     (int)W->plate->version);
    return st;
}

ts_status fuse_tile_open(const fuse_well *W, int p, ts_image_meta *meta, tz_array **arr, ts_error *err) {
    if (!W->sub[0]) return ts_plate_open_array(W->plate, W->w, p, 0, meta, arr, err);
    ts_status st = fuse_tile_image_meta(W, p, meta, err);
    if (st != TS_OK) return st;
    char path[4300];
    fuse_tile_image_path(W, p, path, sizeof path);
    return ts_image_open_array(path, meta, 0, arr, err);
}

ts_status fuse_label_write_meta(const fuse_well *W, const char *image_path, ts_image_meta *im, ts_error *err) {
    char source[4300];
    fuse_tile_image_path(W, W->tiles[0].position, source, sizeof source);
    /* The first tile's image-label (colours, properties); under labels/ the
     * mosaic is its source image's, two levels up. */
    char *attrs = ts_label_attrs(source, W->format, W->sub[0] ? "../../" : NULL);
    if (!attrs) return ts_fail(err, TS_ERR_NOMEM, "%s: label metadata", image_path);
    im->label_pyramid = true;
    im->extra_attrs = attrs;
    ts_status st = ts_image_write_meta(image_path, W->format, im, W->L.levels + 1, err);
    im->extra_attrs = NULL;
    free(attrs);
    if (st != TS_OK || !W->sub[0] || W->label_index != W->nlabel_names - 1) return st;
    /* image_path is <mosaic>/labels/<name>: the group is its parent. */
    char parent[4300];
    snprintf(parent, sizeof parent, "%s", image_path);
    size_t len = strlen(parent), sl = strlen(W->sub);
    if (len > sl) parent[len - sl - 1] = '\0';
    return ts_labels_write_group(parent, W->format, W->label_names, W->nlabel_names, err);
}

ts_status fuse_label_check_shapes(const fuse_well *image, const fuse_well *label, ts_error *err) {
    for (int i = 0; i < label->ntiles && i < image->ntiles; i++) {
        const fuse_tile *a = &image->tiles[i], *b = &label->tiles[i];
        if (a->raw_h == b->raw_h && a->raw_w == b->raw_w) continue;
        char ip[4300], lp[4300];
        fuse_tile_image_path(image, a->position, ip, sizeof ip);
        fuse_tile_image_path(label, b->position, lp, sizeof lp);
        return ts_fail(err, TS_ERR_FORMAT, "label image %s is %lldx%lld px but its image %s is %lldx%lld px: labels "
                       "are fused at the image's origins, so at its resolution", lp, (long long)b->raw_h,
                       (long long)b->raw_w, ip, (long long)a->raw_h, (long long)a->raw_w);
    }
    return TS_OK;
}
