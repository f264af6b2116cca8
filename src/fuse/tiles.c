/* The tiles of one well: names matched between the shifts file and the
 * plate, stored shapes read from each tile's array metadata (in parallel),
 * oriented sizes and integer origins. And the consistency of the two: every
 * well fused and every tile of it placed by the shifts file, nothing in the
 * shifts file that the plate lacks, the recorded tile_shape that of the
 * tiles; each a TS_ERR_FORMAT naming the well or tile (a mosaic with holes,
 * a well left out or a file of another plate passed with exit 0). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/orient.h"
#include "fuse/fuse_internal.h"
#include "common/name_index.h"
#include "shifts/shifts.h"

/* Largest tile side fused (2^30, as preview): tiles are camera frames. */
#define FUSE_MAX_TILE_SIDE ((int64_t)1 << 30)
/* and T, C, Z (a block holds all C; C x block^2 must stay far from overflow). */
#define FUSE_MAX_TCZ ((int64_t)1 << 20)

static ts_status read_tile_meta(void *user, int64_t i, int worker, ts_error *err) {
    (void)worker;
    fuse_well *W = user;
    fuse_tile *t = &W->tiles[i];
    tz_array *arr = NULL;
    const ts_well_info *well = &W->plate->wells[W->w];
    ts_image_meta meta;
    char path[4200];
    fuse_tile_image_path(W, t->position, path, sizeof path);
    ts_status st = fuse_tile_open(W, t->position, &meta, &arr, err);
    if (st != TS_OK) return st;
    const tz_array_meta *m = tz_array_get_meta(arr);
    int rc = 0;
    /* Any axis subset with y and x (yx, cyx, zyx, czyx, tczyx): absent
     * t, c, z are size 1. load_strip reads all channels of one (t, z) as
     * c planes of y rows of x, so c must precede y and y precede x. */
    if ((st = ts_image_check_layout(&meta, path, err)) != TS_OK) {
        tz_array_close(arr);
        return st;
    }
    for (int a = 0; a < 5; a++) t->axis[a] = meta.axis_index[a];
    t->ndim = meta.ndim;
    snprintf(t->level0, sizeof t->level0, "%s", meta.level_paths[0]);
    int64_t extent[5];
    ts_image_extent(&meta, m, extent);
    t->T = extent[0], t->C = extent[1], t->Z = extent[2];
    t->raw_h = extent[3], t->raw_w = extent[4];
    t->dtype = m->dtype;
    switch (t->dtype) {
    case TS_UINT8: case TS_INT8: case TS_UINT16: case TS_INT16:
    case TS_UINT32: case TS_INT32: case TS_FLOAT32: case TS_FLOAT64: break;
    default:
        ts_fail(err, TS_ERR_UNSUPPORTED, "%s/%s/%s/0: dtype %s is not supported by fuse",
                W->plate->path, well->path, well->positions[t->position], ts_dtype_name(t->dtype));
        rc = 1;
    }
    /* A corrupt or hostile shape: h * w would overflow the weight and strip
     * sizes (a 2^40 x 2^40 claim crashed). */
    if (!rc && (t->raw_h > FUSE_MAX_TILE_SIDE || t->raw_w > FUSE_MAX_TILE_SIDE)) {
        ts_fail(err, TS_ERR_FORMAT, "%s/%s/%s/0: tile plane of %lldx%lld px is beyond %lld px a side",
                W->plate->path, well->path, well->positions[t->position], (long long)t->raw_h,
                (long long)t->raw_w, (long long)FUSE_MAX_TILE_SIDE);
        rc = 1;
    }
    if (!rc && (t->T > FUSE_MAX_TCZ || t->C > FUSE_MAX_TCZ || t->Z > FUSE_MAX_TCZ)) {
        ts_fail(err, TS_ERR_FORMAT, "%s/%s/%s/0: T, C, Z of %lld, %lld, %lld: beyond %lld",
                W->plate->path, well->path, well->positions[t->position], (long long)t->T,
                (long long)t->C, (long long)t->Z, (long long)FUSE_MAX_TCZ);
        rc = 1;
    }
    if (!rc && (t->raw_h <= 0 || t->raw_w <= 0 || t->T <= 0 || t->C <= 0 || t->Z <= 0)) {
        ts_fail(err, TS_ERR_FORMAT, "%s/%s/%s/0: empty tile", W->plate->path, well->path,
                well->positions[t->position]);
        rc = 1;
    }
    tz_array_close(arr);
    ts_orient_shape(&W->orient, t->raw_h, t->raw_w, &t->h, &t->w);
    return rc ? err->code : TS_OK;
}

static int cmp_shape(const void *pa, const void *pb) {
    const int64_t *a = pa, *b = pb;
    if (a[0] != b[0]) return a[0] < b[0] ? -1 : 1;
    return (a[1] > b[1]) - (a[1] < b[1]);
}

/* Memory a tile needs whatever the block size: the weights of every
 * distinct tile shape (held for the whole well), the largest tile's decoded
 * plane and one worker's buffers at the smallest block (one chunk). Checked
 * against --memory here, before the weights are computed: a tile claiming
 * 20000^2 px took 1.6 GB of weights at --memory 256M, 60000^2 asked for
 * 14 GB. */
static ts_status check_tile_memory(const fuse_well *W, ts_error *err) {
    int64_t(*shapes)[2] = malloc((size_t)W->ntiles * sizeof *shapes);
    if (!shapes) return ts_fail(err, TS_ERR_NOMEM, "tile shapes of well %s", W->plate->wells[W->w].path);
    for (int i = 0; i < W->ntiles; i++) shapes[i][0] = W->tiles[i].h, shapes[i][1] = W->tiles[i].w;
    qsort(shapes, (size_t)W->ntiles, sizeof *shapes, cmp_shape);
    size_t weights = 0;
    for (int i = 0; i < W->ntiles; i++)
        if (i == 0 || cmp_shape(shapes[i], shapes[i - 1]) != 0) {
            size_t b = fuse_tile_weights_bytes(shapes[i][0], shapes[i][1]);
            weights = weights > SIZE_MAX - b ? SIZE_MAX : weights + b;
        }
    free(shapes);
    int big = 0;
    size_t plane = 0;
    for (int i = 0; i < W->ntiles; i++) {
        const fuse_tile *t = &W->tiles[i];
        size_t p = fuse_tile_plane_bytes(t->C < W->L.C ? t->C : W->L.C, t->raw_h, t->raw_w, ts_dtype_size(t->dtype));
        if (p > plane) plane = p, big = i;
    }
    const fuse_sizing sz = {.C = W->L.C, .out_elem = W->out_elem, .chunk = W->opt->chunk};
    size_t block = fuse_block_bytes(&sz, W->opt->chunk);
    size_t need = weights, usable = fuse_usable_memory(W->opt->memory);
    need = need > SIZE_MAX - plane ? SIZE_MAX : need + plane;
    need = need > SIZE_MAX - block ? SIZE_MAX : need + block;
    if (need <= usable) return TS_OK;
    const fuse_tile *t = &W->tiles[big];
    const ts_well_info *well = &W->plate->wells[W->w];
    char need_s[32], w_s[32], p_s[32], mem_s[32], use_s[32];
    ts_format_bytes(need_s, sizeof need_s, need);
    ts_format_bytes(w_s, sizeof w_s, weights);
    ts_format_bytes(p_s, sizeof p_s, plane);
    ts_format_bytes(mem_s, sizeof mem_s, W->opt->memory);
    ts_format_bytes(use_s, sizeof use_s, usable);
    int64_t nc = t->C < W->L.C ? t->C : W->L.C;
    return ts_fail(err, TS_ERR_NOMEM,
                   "tile %s/%s of plate %s is %lldx%lld px (%lld channel%s, %s): fusing it needs %s (blending "
                   "weights %s, a decoded plane %s), beyond --memory %s (%s usable); give more --memory",
                   well->path, well->positions[t->position], W->plate->path, (long long)t->h, (long long)t->w,
                   (long long)nc, nc == 1 ? "" : "s", ts_dtype_name(t->dtype), need_s, w_s, p_s, mem_s, use_s);
}

ts_status fuse_well_tiles(fuse_well *W, const void *well_shifts, ts_pool *pool, ts_error *err) {
    const ts_well_shifts *ws = well_shifts;
    const ts_well_info *well = &W->plate->wells[W->w];
    ts_name_index *ix = ts_name_index_new();
    if (!ix) return ts_fail(err, TS_ERR_NOMEM, "position index of well %s", well->path);
    for (int p = 0; p < well->npositions; p++)
        if (!ts_name_index_add(ix, (const char (*)[32])well->positions, p)) {
            ts_name_index_free(ix);
            return ts_fail(err, TS_ERR_NOMEM, "position index of well %s", well->path);
        }
    W->tiles = calloc(ws->ntiles ? (size_t)ws->ntiles : 1, sizeof *W->tiles);
    bool *placed = calloc((size_t)well->npositions + 1, sizeof *placed);
    if (!W->tiles || !placed) {
        ts_name_index_free(ix);
        free(placed);
        return ts_fail(err, TS_ERR_NOMEM, "tiles of well %s", well->path);
    }
    W->ntiles = 0;
    int64_t min_y = INT64_MAX, min_x = INT64_MAX;
    for (int i = 0; i < ws->ntiles; i++) {
        /* Every tile the shifts file names (placed or only listed) must be
         * one of the plate's: a file of another plate is not fused. */
        const char *name = ws->tiles[i];
        int p = ts_name_index_find(ix, (const char (*)[32])well->positions, name, strlen(name));
        if (p < 0) {
            ts_name_index_free(ix);
            free(placed);
            return ts_fail(err, TS_ERR_FORMAT, "shifts file %s: tile %s/%s is not a position of plate %s",
                           W->opt->shifts, well->path, name, W->plate->path);
        }
        if (ws->has_origin && !ws->has_origin[i]) continue;
        placed[p] = true;
        fuse_tile *t = &W->tiles[W->ntiles++];
        t->position = p;
        t->oy = ws->origin[i][0];
        t->ox = ws->origin[i][1];
        if (t->oy < min_y) min_y = t->oy;
        if (t->ox < min_x) min_x = t->ox;
    }
    ts_name_index_free(ix);
    /* Every position of the plate's well must be placed: one left out
     * was a hole in the mosaic. */
    int unplaced = 0, first = -1;
    for (int p = 0; p < well->npositions; p++)
        if (!placed[p] && unplaced++ == 0) first = p;
    free(placed);
    if (unplaced) {
        char more[64] = "";
        if (unplaced > 1) snprintf(more, sizeof more, " (and %d more of its %d tiles)", unplaced - 1, well->npositions);
        return ts_fail(err, TS_ERR_FORMAT, "tile %s/%s of plate %s has no origin in the shifts file %s "
                       "(total_translation)%s", well->path, well->positions[first], W->plate->path,
                       W->opt->shifts, more);
    }
    if (W->ntiles == 0)
        return ts_fail(err, TS_ERR_FORMAT, "well %s: no tile has a position in the shifts file", well->path);
    /* Origins are "min over the well = 0"; tolerate files that are not. */
    for (int i = 0; i < W->ntiles; i++) {
        W->tiles[i].oy -= min_y;
        W->tiles[i].ox -= min_x;
    }
    ts_status st = ts_pool_run(pool, W->ntiles, read_tile_meta, W, err);
    if (st != TS_OK) return st;
    /* Output T/C/Z by policy; all tiles must share a dtype. */
    int64_t T = W->tiles[0].T, C = W->tiles[0].C, Z = W->tiles[0].Z;
    for (int i = 1; i < W->ntiles; i++) {
        const fuse_tile *t = &W->tiles[i];
        if (W->opt->tcz == TS_TCZ_MAX) {
            if (t->T > T) T = t->T;
            if (t->C > C) C = t->C;
            if (t->Z > Z) Z = t->Z;
        } else {
            if (t->T < T) T = t->T;
            if (t->C < C) C = t->C;
            if (t->Z < Z) Z = t->Z;
        }
    }
    W->L.T = T, W->L.C = C, W->L.Z = Z;
    return check_tile_memory(W, err);
}

ts_status fuse_check_wells(const ts_fuse_options *opt, const ts_plate *plate, const ts_shifts *shifts,
                           ts_error *err) {
    ts_status st = ts_plate_require_wells(plate, err);
    if (st) return st;
    for (int w = 0; w < plate->nwells; w++)
        if (ts_shifts_find_well(shifts, plate->wells[w].path) < 0)
            return ts_fail(err, TS_ERR_FORMAT, "well %s of plate %s is not in the shifts file %s (--wells "
                           "selects the wells to fuse)", plate->wells[w].path, plate->path, opt->shifts);
    /* A run restricted with --wells needs only those wells consistent. A
     * well of the shifts file that places no tile (an empty entry) names
     * nothing to fuse. */
    if (opt->wells && *opt->wells) return TS_OK;
    for (int sw = 0; sw < shifts->nwells; sw++)
        if (shifts->wells[sw].ntiles > 0 && ts_plate_find_well(plate, shifts->wells[sw].well) < 0)
            return ts_fail(err, TS_ERR_FORMAT, "shifts file %s places well %s, which plate %s does not list",
                           opt->shifts, shifts->wells[sw].well, plate->path);
    return TS_OK;
}

ts_status fuse_check_tile_shape(const fuse_well *W, const ts_shifts *shifts, ts_error *err) {
    if (!shifts->has_tile_shape) return TS_OK;
    for (int i = 0; i < W->ntiles; i++) {
        const fuse_tile *t = &W->tiles[i];
        if (t->h == shifts->tile_shape[0] && t->w == shifts->tile_shape[1]) continue;
        const ts_orientation *o = &W->orient;
        return ts_fail(err, TS_ERR_FORMAT,
                       "tile %s/%s of plate %s is %lldx%lld px after orientation (flipud=%d fliplr=%d rot90=%d) "
                       "but the shifts file %s has tile_shape %dx%d (a file of another plate, or another "
                       "orientation?)", W->plate->wells[W->w].path, W->plate->wells[W->w].positions[t->position],
                       W->plate->path, (long long)t->h, (long long)t->w, o->flipud, o->fliplr, ts_orient_k(o),
                       W->opt->shifts, shifts->tile_shape[0], shifts->tile_shape[1]);
    }
    return TS_OK;
}
