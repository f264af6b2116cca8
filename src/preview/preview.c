/* tessera preview: a downsampled PNG of a well's mosaic.
 *
 * The well image (a fused output has one, "0") is read at the smallest
 * pyramid level whose longest side still reaches max_size (else level 0),
 * streamed in bands of whole chunk rows and mean-downsampled to at most
 * max_size, so memory follows the picture, not the mosaic. Channels are
 * contrast-stretched by percentiles of covered (non-zero) pixels and tinted
 * with their omero colours. With a shifts file, tile outlines and the seam
 * of every measured pair are drawn, seams coloured by residual (outliers and
 * unmatched pairs apart, with a legend); for an
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

/* Mean-downsamples channel c (t = 0, middle z) of arr at scale sc into out
 * (oh x ow, pixel p of the array falling into pv_bin(p, sc, n));
 * valid[i] = 1 where any source pixel is non-zero. */
static ts_status downsample(const char *image, const tz_array *arr, const ts_image_meta *meta, int c, double sc,
                            int oh, int ow, float *out, unsigned char *valid, ts_error *err) {
    const tz_array_meta *m = tz_array_get_meta(arr);
    int ya = meta->axis_index[3], xa = meta->axis_index[4];
    int64_t H = m->shape[ya], W = m->shape[xa];
    int64_t start[TZ_MAX_DIM] = {0}, count[TZ_MAX_DIM];
    for (int d = 0; d < m->ndim; d++) count[d] = 1;
    if (meta->axis_index[1] >= 0) start[meta->axis_index[1]] = c;
    if (meta->axis_index[2] >= 0) start[meta->axis_index[2]] = m->shape[meta->axis_index[2]] / 2;
    /* bands: at least one chunk row high (an inner chunk of a shard: reads
     * fetch inner chunks alone, and a shard row of a fused mosaic can be
     * 32,768 rows x the whole width) */
    const int64_t chunk_h = m->sharded ? m->sharding.inner_chunk[ya] : m->chunk[ya];
    int64_t band = chunk_h < H ? chunk_h : H;
    if (band < 1) band = 1;
    size_t es = ts_dtype_size(m->dtype), bytes;
    /* The shape comes from the store: a product that wraps would be a small
     * buffer read into as if it were large. */
    if (__builtin_mul_overflow((size_t)band, (size_t)W, &bytes) || __builtin_mul_overflow(bytes, es, &bytes) ||
        W > ((int64_t)1 << 31) || bytes > ((size_t)1 << 33))
        return ts_fail(err, TS_ERR_FORMAT, "%s: a %lld x %lld plane is too large to preview", image, (long long)H,
                       (long long)W);
    void *buf = malloc(bytes);
    double *sum = calloc((size_t)ow, sizeof *sum);
    int64_t *cnt = calloc((size_t)ow, sizeof *cnt);
    int *col = malloc((size_t)(W > 0 ? W : 1) * sizeof *col);
    if (!buf || !sum || !cnt || !col) {
        free(buf), free(sum), free(cnt), free(col);
        return ts_fail(err, TS_ERR_NOMEM, "out of memory for a %lld-row preview band",
                       (long long)band);
    }
    for (int64_t x = 0; x < W; x++) col[x] = pv_bin(x, sc, ow);
    /* Source rows go to picture rows in order: one row of sums at a time. */
    int cur = 0;
    ts_status st = TS_OK;
    for (int64_t y0 = 0; y0 < H && st == TS_OK; y0 += band) {
        int64_t bh = y0 + band <= H ? band : H - y0;
        start[ya] = y0, count[ya] = bh;
        start[xa] = 0, count[xa] = W;
        if ((st = tz_array_read(arr, start, count, buf, err)) != TS_OK) break;
        for (int64_t r = 0; r < bh; r++) {
            int orow = pv_bin(y0 + r, sc, oh);
            if (orow != cur) {
                for (int x = 0; x < ow; x++)
                    out[(size_t)cur * (size_t)ow + (size_t)x] = cnt[x] ? (float)(sum[x] / (double)cnt[x]) : 0;
                memset(sum, 0, (size_t)ow * sizeof *sum);
                memset(cnt, 0, (size_t)ow * sizeof *cnt);
                cur = orow;
            }
            unsigned char *vrow = &valid[(size_t)orow * (size_t)ow];
            for (int64_t x = 0; x < W; x++) {
                double v = pv_value_at(buf, m->dtype, (size_t)(r * W + x));
                if (!isfinite(v)) continue;
                sum[col[x]] += v;
                cnt[col[x]]++;
                if (v != 0) vrow[col[x]] = 1;
            }
        }
    }
    if (st == TS_OK)
        for (int x = 0; x < ow; x++)
            out[(size_t)cur * (size_t)ow + (size_t)x] = cnt[x] ? (float)(sum[x] / (double)cnt[x]) : 0;
    free(buf), free(sum), free(cnt), free(col);
    return st;
}

static bool dtype_supported(ts_dtype d) {
    return d == TS_UINT8 || d == TS_UINT16 || d == TS_INT16 || d == TS_UINT32 || d == TS_INT32 ||
           d == TS_FLOAT32 || d == TS_FLOAT64;
}

/* Seam colours: by residual (the pair's measured offset against the
 * solved positions), green at 0 px, yellow at 1, red from 2; an outlier of
 * the solve magenta; a pair with no trustworthy match (confidence < 0.1,
 * hardly a constraint) blue. */
static const float OUTLIER_COLOR[3] = {1, 0, 1}, NO_MATCH_COLOR[3] = {0.25f, 0.5f, 1};
static const float OUTLINE_COLOR[3] = {0.4f, 0.4f, 0.55f}; /* not grey: apart from the picture */

static void residual_color(double r, float out[3]) {
    double c = 1 - (r > 2 ? 2 : r < 0 ? 0 : r) / 2;
    pv_confidence_color(c, out);
}

static void legend(pv_canvas *cv) {
    const int k = cv->w >= 900 ? 2 : 1;  /* font scale */
    const long bar = 40L * k, gap = 6L * k, line = 9L * k;
    const char *const items[] = {"0 1 2+ PX RESIDUAL", "OUTLIER", "NO MATCH"};
    long width = pv_text_width(items[0], k) + bar + 3 * gap;
    long height = 3 * line + 2 * gap;
    if (cv->w < width + 8 || cv->h < height + 8) return; /* too small a picture for it */
    const long y0 = cv->h - height - 4, x0 = 4;
    const float black[3] = {0, 0, 0}, white[3] = {1, 1, 1};
    pv_fill(cv, y0, x0, y0 + height, x0 + width, black);
    long y = y0 + gap;
    for (long i = 0; i < bar; i++) {
        float col[3];
        residual_color(2.0 * (double)i / (double)(bar - 1), col);
        pv_fill(cv, y, x0 + gap + i, y + 7 * k - 1, x0 + gap + i, col);
    }
    pv_text(cv, y, x0 + 2 * gap + bar, items[0], k, white);
    y += line;
    pv_fill(cv, y, x0 + gap, y + 7 * k - 1, x0 + gap + bar - 1, OUTLIER_COLOR);
    pv_text(cv, y, x0 + 2 * gap + bar, items[1], k, white);
    y += line;
    pv_fill(cv, y, x0 + gap, y + 7 * k - 1, x0 + gap + bar - 1, NO_MATCH_COLOR);
    pv_text(cv, y, x0 + 2 * gap + bar, items[2], k, white);
}

/* Tile outlines (grey) and, for each measured pair, its seam: a line
 * through the middle of the two tiles' overlap, across it, coloured by
 * the pair's residual, at scale s (level-0 px -> picture px), with a
 * legend. Files with confidence entries only (the old tool's) colour the
 * outlines by the best confidence of each tile instead. */
static void draw_shifts(pv_canvas *cv, const ts_shifts *sh, int wi, double s, ts_preview_result *res) {
    const ts_well_shifts *w = &sh->wells[wi];
    int th = sh->has_tile_shape ? sh->tile_shape[0] : 0, tw = sh->has_tile_shape ? sh->tile_shape[1] : 0;
    double *best = malloc((size_t)(w->ntiles ? w->ntiles : 1) * sizeof *best);
    if (!best) return;
    for (int t = 0; t < w->ntiles; t++) best[t] = -1;
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
            if (w->nedges > 0) pv_confidence_color(best[t] < 0 ? 0 : best[t], col);
            double y0 = (double)w->origin[t][0] * s, x0 = (double)w->origin[t][1] * s;
            pv_rect(cv, y0, x0, y0 + (th - 1) * s, x0 + (tw - 1) * s, w->nedges > 0 ? col : OUTLINE_COLOR);
        }
    free(best);
    if (th <= 0 || tw <= 0 || w->npairs == 0) return;
    for (int p = 0; p < w->npairs; p++) {
        const ts_shift_pair *pr = &w->pairs[p];
        if (pr->a < 0 || pr->b < 0 || pr->a >= w->ntiles || pr->b >= w->ntiles) continue;
        double seg[4], r;
        if (!ts_pair_seam(sh, w, pr, seg, &r)) continue;
        if (pr->confidence < 0.1) memcpy(col, NO_MATCH_COLOR, sizeof col), res->unmatched_seams++;
        else if (pr->outlier) memcpy(col, OUTLIER_COLOR, sizeof col), res->outlier_seams++;
        else residual_color(r, col);
        res->seams++;
        const bool along_y = seg[1] == seg[3];
        for (int d = -1; d <= 1; d++)
            pv_line(cv, seg[0] * s + (along_y ? 0 : d), seg[1] * s + (along_y ? d : 0), seg[2] * s + (along_y ? 0 : d),
                    seg[3] * s + (along_y ? d : 0), col);
    }
    legend(cv);
}

ts_status ts_preview(const ts_preview_options *opt, ts_error *err) { return ts_preview_run(opt, NULL, err); }

ts_status ts_preview_run(const ts_preview_options *opt, ts_preview_result *result, ts_error *err) {
    ts_preview_result local;
    ts_preview_result *res = result ? result : &local;
    memset(res, 0, sizeof *res);
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
        draw_shifts(&cv, sh, sw, scale, res);
        res->level = -1;
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
    /* The longest side comes out at max_size exactly (a larger mosaic is
     * binned by a fractional factor, never enlarged). */
    const double sc = pv_picture_size(lp.h, lp.w, opt->max_size, &cv.h, &cv.w);
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
        if ((st = downsample(image, arr, &meta, c, sc, cv.h, cv.w, plane, valid, err)) != TS_OK) goto done;
        float col[3] = {1, 1, 1};
        if (nc > 1 && !(c < meta.nchannels && pv_parse_color(meta.channel_colors[c], col)))
            pv_parse_color(PALETTE[c % 6], col);
        pv_add_channel(&cv, plane, valid, 0.5, 99.5, col);
    }
    if (sh) draw_shifts(&cv, sh, sw, lp.to_level * sc, res);
    res->level = lp.level;
    st = pv_write_png(&cv, opt->output, err);
done:
    snprintf(res->well, sizeof res->well, "%s", w >= 0 ? plate->wells[w].path : "");
    res->height = cv.h, res->width = cv.w;
    free(cv.rgb);
    free(plane);
    free(valid);
    if (arr) tz_array_close(arr);
    if (sh) ts_shifts_free(sh);
    ts_plate_close(plate);
    return st;
}
