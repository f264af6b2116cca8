/* tessera preview: a downsampled PNG of a well's mosaic.
 *
 * The well image (a fused output has one, "0") is read at the smallest
 * pyramid level whose longest side still reaches max_size (else level 0),
 * streamed in bands of whole chunk rows and mean-downsampled to at most
 * max_size, so memory follows the picture, not the mosaic. Channels are
 * contrast-stretched by percentiles of covered (non-zero) pixels and tinted
 * with their omero colours. With a shifts file, tile outlines and
 * neighbour links are drawn coloured by registration confidence; for an
 * input plate (many images per well) the shifts file also places the tiles
 * (mosaic.c). */
#include "tessera/tessera.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/error.h"
#include "common/outpath.h"
#include "ome/ome.h"
#include "preview/canvas.h"
#include "preview/mosaic.h"
#include "shifts/shifts.h"

void ts_preview_options_init(ts_preview_options *opt) {
    memset(opt, 0, sizeof *opt);
    opt->max_size = 1024;
}

static const char *const PALETTE[] = {"00FF00", "FF00FF", "00FFFF", "FFFF00", "FF0000", "0000FF"};

typedef struct level_pick {
    int level;
    int64_t h, w;       /* of the chosen level */
    double to_level;    /* level-0 px -> level px */
} level_pick;

static ts_status pick_level(const char *image, const ts_image_meta *meta, int max_size,
                            level_pick *out, tz_array **arr_out, ts_error *err) {
    int ya = meta->axis_index[3], xa = meta->axis_index[4];
    int64_t h0 = 0;
    int best = -1;
    int64_t best_side = 0;
    for (int l = 0; l < meta->nlevels; l++) {
        tz_array *a = NULL;
        ts_status st = ts_image_open_array(image, meta, l, &a, err);
        if (st != TS_OK) {
            if (l == 0) return st;
            break; /* a broken lower level: use what we have */
        }
        const tz_array_meta *m = tz_array_get_meta(a);
        int64_t side = m->shape[ya] > m->shape[xa] ? m->shape[ya] : m->shape[xa];
        if (l == 0) {
            h0 = m->shape[ya];
            best = 0, best_side = side;
        } else if (side >= max_size && side < best_side) {
            best = l, best_side = side;
        }
        tz_array_close(a);
    }
    ts_status st = ts_image_open_array(image, meta, best, arr_out, err);
    if (st != TS_OK) return st;
    const tz_array_meta *m = tz_array_get_meta(*arr_out);
    out->level = best;
    out->h = m->shape[ya];
    out->w = m->shape[xa];
    out->to_level = h0 > 0 ? (double)out->h / (double)h0 : 1.0;
    return TS_OK;
}

/* Mean-downsamples channel c (t = 0, middle z) of arr by f into out
 * (oh x ow); valid[i] = 1 where any source pixel is non-zero. */
static ts_status downsample(const char *image, const tz_array *arr, const ts_image_meta *meta, int c, int64_t f,
                            int oh, int ow, float *out, unsigned char *valid, ts_error *err) {
    const tz_array_meta *m = tz_array_get_meta(arr);
    int ya = meta->axis_index[3], xa = meta->axis_index[4];
    int64_t H = m->shape[ya], W = m->shape[xa];
    int64_t start[TZ_MAX_DIM] = {0}, count[TZ_MAX_DIM];
    for (int d = 0; d < m->ndim; d++) count[d] = 1;
    if (meta->axis_index[1] >= 0) start[meta->axis_index[1]] = c;
    if (meta->axis_index[2] >= 0) start[meta->axis_index[2]] = m->shape[meta->axis_index[2]] / 2;
    /* bands: whole output rows, at least one chunk row high (an inner
     * chunk of a shard: reads fetch inner chunks alone, and a shard row of
     * a fused mosaic can be 32,768 rows x the whole width) */
    const int64_t chunk_h = m->sharded ? m->sharding.inner_chunk[ya] : m->chunk[ya];
    int64_t band = f;
    while (band < chunk_h && band < H) band += f;
    size_t es = ts_dtype_size(m->dtype), bytes;
    /* The shape comes from the store: a product that wraps would be a small
     * buffer read into as if it were large. */
    if (__builtin_mul_overflow((size_t)band, (size_t)W, &bytes) || __builtin_mul_overflow(bytes, es, &bytes))
        return ts_fail(err, TS_ERR_FORMAT, "%s: a %lld x %lld plane is too large to preview", image, (long long)H,
                       (long long)W);
    void *buf = malloc(bytes);
    double *sum = calloc((size_t)ow, sizeof *sum);
    int64_t *cnt = calloc((size_t)ow, sizeof *cnt);
    if (!buf || !sum || !cnt) {
        free(buf), free(sum), free(cnt);
        return ts_fail(err, TS_ERR_NOMEM, "out of memory for a %lld-row preview band",
                       (long long)band);
    }
    ts_status st = TS_OK;
    for (int64_t y0 = 0; y0 < H && st == TS_OK; y0 += band) {
        int64_t bh = y0 + band <= H ? band : H - y0;
        start[ya] = y0, count[ya] = bh;
        start[xa] = 0, count[xa] = W;
        if ((st = tz_array_read(arr, start, count, buf, err)) != TS_OK) break;
        for (int64_t r0 = 0; r0 < bh; r0 += f) {
            int orow = (int)((y0 + r0) / f);
            if (orow >= oh) break;
            memset(sum, 0, (size_t)ow * sizeof *sum);
            memset(cnt, 0, (size_t)ow * sizeof *cnt);
            unsigned char *vrow = &valid[(size_t)orow * (size_t)ow];
            for (int64_t r = r0; r < r0 + f && r < bh; r++)
                for (int64_t x = 0; x < W; x++) {
                    size_t k = (size_t)(r * W + x);
                    double v = pv_value_at(buf, m->dtype, k);
                    if (!isfinite(v)) continue;
                    int ox = (int)(x / f);
                    sum[ox] += v;
                    cnt[ox]++;
                    if (v != 0) vrow[ox] = 1;
                }
            for (int x = 0; x < ow; x++)
                out[(size_t)orow * (size_t)ow + (size_t)x] = cnt[x] ? (float)(sum[x] / (double)cnt[x]) : 0;
        }
    }
    free(buf), free(sum), free(cnt);
    return st;
}

static bool dtype_supported(ts_dtype d) {
    return d == TS_UINT8 || d == TS_UINT16 || d == TS_INT16 || d == TS_UINT32 || d == TS_INT32 ||
           d == TS_FLOAT32 || d == TS_FLOAT64;
}

/* Tile outlines and links between registered neighbours, at scale s
 * (level-0 px -> picture px). */
static void draw_shifts(pv_canvas *cv, const ts_shifts *sh, int wi, double s) {
    const ts_well_shifts *w = &sh->wells[wi];
    int th = sh->has_tile_shape ? sh->tile_shape[0] : 0, tw = sh->has_tile_shape ? sh->tile_shape[1] : 0;
    double *best = malloc((size_t)(w->ntiles ? w->ntiles : 1) * sizeof *best);
    if (!best) return;
    for (int t = 0; t < w->ntiles; t++) best[t] = -1;
    for (int p = 0; p < w->npairs; p++) {
        const ts_shift_pair *pr = &w->pairs[p];
        if (pr->a < 0 || pr->b < 0 || pr->a >= w->ntiles || pr->b >= w->ntiles) continue;
        if (pr->confidence > best[pr->a]) best[pr->a] = pr->confidence;
        if (pr->confidence > best[pr->b]) best[pr->b] = pr->confidence;
    }
    /* old-tool files: confidence entries by grid coordinates */
    for (int e = 0; e < w->nedges; e++) {
        const ts_shift_edge *ed = &w->edges[e];
        for (int t = 0; t < w->ntiles; t++) {
            int gx, gy;
            if (!ts_position_grid(w->tiles[t], sh->names_yx, &gx, &gy)) continue;
            if ((gx == ed->xa && gy == ed->ya) || (gx == ed->xb && gy == ed->yb))
                if (ed->confidence > best[t]) best[t] = ed->confidence;
        }
    }
    float col[3];
    if (th > 0 && tw > 0)
        for (int t = 0; t < w->ntiles; t++) {
            if (!w->has_origin[t]) continue;
            pv_confidence_color(best[t] < 0 ? 0 : best[t], col);
            double y0 = (double)w->origin[t][0] * s, x0 = (double)w->origin[t][1] * s;
            pv_rect(cv, y0, x0, y0 + (th - 1) * s, x0 + (tw - 1) * s, col);
        }
    for (int p = 0; p < w->npairs; p++) {
        const ts_shift_pair *pr = &w->pairs[p];
        if (pr->a < 0 || pr->b < 0 || pr->a >= w->ntiles || pr->b >= w->ntiles) continue;
        if (!w->has_origin[pr->a] || !w->has_origin[pr->b]) continue;
        pv_confidence_color(pr->confidence, col);
        double cy = th / 2.0, cx = tw / 2.0;
        pv_line(cv, (w->origin[pr->a][0] + cy) * s, (w->origin[pr->a][1] + cx) * s,
                (w->origin[pr->b][0] + cy) * s, (w->origin[pr->b][1] + cx) * s, col);
    }
    free(best);
}

ts_status ts_preview(const ts_preview_options *opt, ts_error *err) {
    if (!opt->store || !opt->output)
        return ts_fail(err, TS_ERR_ARG, "preview: a store and an output PNG are required");
    if (opt->max_size < 16 || opt->max_size > 65536)
        return ts_fail(err, TS_ERR_ARG, "preview: max size %d px is outside 16..65536", opt->max_size);
    const char *inputs[2] = {opt->store, opt->shifts};
    ts_status cst = ts_check_output_path("output", opt->output, inputs, 2, err);
    if (cst) return cst;
    ts_plate *plate = NULL;
    ts_shifts *sh = NULL;
    tz_array *arr = NULL;
    pv_canvas cv = {0};
    float *plane = NULL;
    unsigned char *valid = NULL;
    ts_status st = ts_plate_open(opt->store, &plate, err);
    if (st != TS_OK) return st;
    int w = -1;
    if (opt->well && *opt->well) {
        w = ts_plate_find_well(plate, opt->well);
        if (w < 0) {
            st = ts_fail(err, TS_ERR_ARG, "well '%s' is not in %s", opt->well, opt->store);
            goto done;
        }
    } else {
        for (int i = 0; i < plate->nwells && w < 0; i++)
            if (plate->wells[i].npositions > 0) w = i;
        if (w < 0) {
            st = ts_fail(err, TS_ERR_FORMAT, "%s: no well has an image", opt->store);
            goto done;
        }
    }
    const ts_well_info *wi = &plate->wells[w];
    int sw = -1;
    if (opt->shifts) {
        if ((st = ts_shifts_read(opt->shifts, &sh, err)) != TS_OK) goto done;
        sw = ts_shifts_find_well(sh, wi->path);
        if (sw < 0) {
            st = ts_fail(err, TS_ERR_ARG, "%s has no well %s", opt->shifts, wi->path);
            goto done;
        }
    }
    if (wi->npositions != 1) {
        /* an input plate: lay its tiles out at the shifts' origins */
        if (!sh) {
            st = ts_fail(err, TS_ERR_UNSUPPORTED,
                         "%s: well %s has %d images: give --shifts to lay the tiles out, or "
                         "preview a fused mosaic (one image per well)",
                         opt->store, wi->path, wi->npositions);
            goto done;
        }
        double scale = 1;
        if ((st = pv_mosaic(plate, w, sh, sw, opt->max_size, opt->threads, &cv, &scale, err)) !=
            TS_OK)
            goto done;
        draw_shifts(&cv, sh, sw, scale);
        st = pv_write_png(&cv, opt->output, err);
        goto done;
    }
    char image[4400];
    ts_plate_image_path(plate, w, 0, image, sizeof image);
    ts_image_meta meta;
    if ((st = ts_plate_image_meta(plate, w, 0, &meta, err)) != TS_OK) goto done;
    level_pick lp;
    if ((st = pick_level(image, &meta, opt->max_size, &lp, &arr, err)) != TS_OK) goto done;
    const tz_array_meta *m = tz_array_get_meta(arr);
    if (!dtype_supported(m->dtype)) {
        st = ts_fail(err, TS_ERR_UNSUPPORTED, "%s: preview does not handle dtype %s", image,
                     ts_dtype_name(m->dtype));
        goto done;
    }
    int64_t longest = lp.h > lp.w ? lp.h : lp.w;
    /* ceil(a / b) without a + b - 1, which overflows for shapes near 2^63 */
    int64_t f = longest / opt->max_size + (longest % opt->max_size != 0);
    if (f < 1) f = 1;
    cv.h = (int)(lp.h / f + (lp.h % f != 0));
    cv.w = (int)(lp.w / f + (lp.w % f != 0));
    size_t n = (size_t)cv.h * (size_t)cv.w;
    cv.rgb = calloc(n * 3, sizeof *cv.rgb);
    plane = malloc(n * sizeof *plane);
    valid = malloc(n);
    if (!cv.rgb || !plane || !valid) {
        st = ts_fail(err, TS_ERR_NOMEM, "out of memory for a %dx%d preview", cv.h, cv.w);
        goto done;
    }
    int nc = meta.axis_index[1] >= 0 ? (int)m->shape[meta.axis_index[1]] : 1;
    if (nc > TS_MAX_CHANNELS) nc = TS_MAX_CHANNELS;
    for (int c = 0; c < nc; c++) {
        memset(valid, 0, n);
        if ((st = downsample(image, arr, &meta, c, f, cv.h, cv.w, plane, valid, err)) != TS_OK) goto done;
        float col[3] = {1, 1, 1};
        if (nc > 1 && !(c < meta.nchannels && pv_parse_color(meta.channel_colors[c], col)))
            pv_parse_color(PALETTE[c % 6], col);
        pv_add_channel(&cv, plane, valid, 0.5, 99.5, col);
    }
    if (sh) draw_shifts(&cv, sh, sw, lp.to_level / (double)f);
    st = pv_write_png(&cv, opt->output, err);
done:
    free(cv.rgb);
    free(plane);
    free(valid);
    if (arr) tz_array_close(arr);
    if (sh) ts_shifts_free(sh);
    ts_plate_close(plate);
    return st;
}
