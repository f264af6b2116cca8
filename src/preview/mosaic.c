/* Input-plate preview (see mosaic.h). Tiles are read in parallel; each is
 * reduced to the picture cells it covers before being added under a lock,
 * so the lock is held for a few hundred cells, not millions of pixels. */
#include "preview/mosaic.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/error.h"
#include "common/orient.h"
#include "common/pool.h"

static const char *const PALETTE[] = {"00FF00", "FF00FF", "00FFFF", "FFFF00", "FF0000", "0000FF"};

typedef struct mosaic_job {
    const ts_plate *plate;
    int w;
    const ts_well_shifts *ws;
    const int *plate_pos;   /* shifts tile -> plate position, -1 if absent */
    ts_orientation orient;
    int nc;
    double sc;              /* canvas px -> picture px */
    int ch, cw;
    double *sum;            /* nc planes of ch*cw */
    int64_t *cnt;           /* ch*cw */
    pthread_mutex_t mu;
} mosaic_job;

static ts_status add_tile(void *user, int64_t t, int worker, ts_error *err) {
    (void)worker;
    mosaic_job *J = user;
    int p = J->plate_pos[t];
    if (p < 0 || !J->ws->has_origin[t]) return TS_OK;
    tz_array *arr = NULL;
    ts_image_meta meta;
    if (ts_plate_open_array(J->plate, J->w, p, 0, &meta, &arr, err) != TS_OK) return err->code;
    char image[4200];
    ts_plate_image_path(J->plate, J->w, p, image, sizeof image);
    if (ts_image_check_layout(&meta, image, err) != TS_OK) {
        tz_array_close(arr);
        return err->code;
    }
    const tz_array_meta *m = tz_array_get_meta(arr);
    int ya = meta.axis_index[3], xa = meta.axis_index[4];
    int64_t H = m->shape[ya], W = m->shape[xa], oh, ow;
    /* The shape comes from the store: a plane beyond 2^30 px a side is no
     * tile (and H * W would overflow). */
    if (H < 1 || W < 1 || H > (1 << 30) || W > (1 << 30)) {
        ts_fail(err, TS_ERR_FORMAT, "%s/%s/%s/0: a %lldx%lld plane is not a tile", J->plate->path, J->ws->well,
                J->ws->tiles[t], (long long)H, (long long)W);
        tz_array_close(arr);
        return err->code;
    }
    ts_orient_shape(&J->orient, H, W, &oh, &ow);
    size_t es = ts_dtype_size(m->dtype), n = (size_t)H * (size_t)W;
    int64_t oy = J->ws->origin[t][0], ox = J->ws->origin[t][1];
    int r0 = pv_bin(oy, J->sc, J->ch), c0 = pv_bin(ox, J->sc, J->cw);
    int r1 = pv_bin(oy + oh - 1, J->sc, J->ch), c1 = pv_bin(ox + ow - 1, J->sc, J->cw);
    int lh = r1 - r0 + 1, lw = c1 - c0 + 1;
    void *raw = malloc(n * es), *oriented = malloc(n * es);
    double *lsum = calloc((size_t)J->nc * (size_t)lh * (size_t)lw, sizeof *lsum);
    int64_t *lcnt = calloc((size_t)lh * (size_t)lw, sizeof *lcnt);
    int rc = 0;
    if (!raw || !oriented || !lsum || !lcnt) {
        ts_fail(err, TS_ERR_NOMEM, "out of memory for a %lldx%lld tile", (long long)H, (long long)W);
        rc = 1;
    }
    int64_t start[TZ_MAX_DIM] = {0}, count[TZ_MAX_DIM];
    for (int d = 0; d < m->ndim; d++) count[d] = 1;
    count[ya] = H, count[xa] = W;
    if (meta.axis_index[2] >= 0) start[meta.axis_index[2]] = m->shape[meta.axis_index[2]] / 2;
    for (int c = 0; !rc && c < J->nc; c++) {
        if (meta.axis_index[1] >= 0) {
            if (c >= m->shape[meta.axis_index[1]]) break;
            start[meta.axis_index[1]] = c;
        }
        if (tz_array_read(arr, start, count, raw, err) != TS_OK) {
            rc = 1;
            break;
        }
        ts_orient_plane(&J->orient, raw, H, W, es, oriented);
        double *ls = lsum + (size_t)c * (size_t)lh * (size_t)lw;
        for (int64_t y = 0; y < oh; y++) {
            int lr = pv_bin(oy + y, J->sc, J->ch) - r0;
            for (int64_t x = 0; x < ow; x++) {
                int lc = pv_bin(ox + x, J->sc, J->cw) - c0;
                ls[lr * lw + lc] += pv_value_at(oriented, m->dtype, (size_t)(y * ow + x));
                if (c == 0) lcnt[lr * lw + lc]++;
            }
        }
    }
    tz_array_close(arr);
    if (!rc) {
        pthread_mutex_lock(&J->mu);
        for (int r = 0; r < lh; r++)
            for (int c = 0; c < lw; c++) {
                int R = r0 + r, C = c0 + c;
                if (R < 0 || C < 0 || R >= J->ch || C >= J->cw) continue;
                size_t k = (size_t)R * (size_t)J->cw + (size_t)C;
                J->cnt[k] += lcnt[r * lw + c];
                for (int ch = 0; ch < J->nc; ch++)
                    J->sum[(size_t)ch * (size_t)J->ch * (size_t)J->cw + k] +=
                        lsum[((size_t)ch * (size_t)lh + (size_t)r) * (size_t)lw + (size_t)c];
            }
        pthread_mutex_unlock(&J->mu);
    }
    free(raw), free(oriented), free(lsum), free(lcnt);
    return rc ? err->code : TS_OK;
}


typedef struct { const char (*names)[32]; int idx; } name_ref;

static int cmp_ref(const void *a, const void *b) {
    const name_ref *x = a, *y = b;
    return strcmp(x->names[x->idx], y->names[y->idx]);
}

ts_status pv_mosaic(const ts_plate *plate, int w, const ts_shifts *sh, int sw, int max_size,
                    int threads, pv_canvas *cv, double *scale, ts_error *err) {
    const ts_well_shifts *ws = &sh->wells[sw];
    const ts_well_info *wi = &plate->wells[w];
    mosaic_job J = {.plate = plate, .w = w, .ws = ws};
    if (sh->has_orientation) J.orient = sh->orientation;
    ts_status st = TS_OK;
    int *plate_pos = malloc((size_t)(ws->ntiles ? ws->ntiles : 1) * sizeof *plate_pos);
    name_ref *refs = malloc((size_t)(wi->npositions ? wi->npositions : 1) * sizeof *refs);
    if (!plate_pos || !refs) {
        free(plate_pos), free(refs);
        return ts_fail(err, TS_ERR_NOMEM, "out of memory");
    }
    for (int p = 0; p < wi->npositions; p++) refs[p] = (name_ref){(const char(*)[32])wi->positions, p};
    qsort(refs, (size_t)wi->npositions, sizeof *refs, cmp_ref);
    /* tile extent: the shifts file's tile_shape, else the first tile's */
    int64_t th = sh->has_tile_shape ? sh->tile_shape[0] : 0, tw = sh->has_tile_shape ? sh->tile_shape[1] : 0;
    int64_t H = 0, W = 0, found = 0;
    for (int t = 0; t < ws->ntiles; t++) {
        name_ref key = {(const char(*)[32])ws->tiles, t};
        name_ref *hit = bsearch(&key, refs, (size_t)wi->npositions, sizeof *refs, cmp_ref);
        plate_pos[t] = hit ? hit->idx : -1;
        if (!hit || !ws->has_origin[t]) continue;
        found++;
        if (th == 0) {
            tz_array *a = NULL;
            ts_image_meta meta;
            if ((st = ts_plate_open_array(plate, w, hit->idx, 0, &meta, &a, err)) != TS_OK) goto done;
            const tz_array_meta *m = tz_array_get_meta(a);
            ts_orient_shape(&J.orient, m->shape[meta.axis_index[3]], m->shape[meta.axis_index[4]], &th, &tw);
            tz_array_close(a);
        }
        if (ws->origin[t][0] < 0 || ws->origin[t][1] < 0) {
            st = ts_fail(err, TS_ERR_NUMERIC, "tile %s/%s has a negative origin", ws->well, ws->tiles[t]);
            goto done;
        }
        if (ws->origin[t][0] + th > H) H = ws->origin[t][0] + th;
        if (ws->origin[t][1] + tw > W) W = ws->origin[t][1] + tw;
    }
    if (found == 0) {
        st = ts_fail(err, TS_ERR_ARG, "no tile of well %s in the shifts file is in %s", wi->path, plate->path);
        goto done;
    }
    /* channels and colours from the first image */
    ts_image_meta meta;
    tz_array *a0 = NULL;
    if ((st = ts_plate_open_array(plate, w, 0, 0, &meta, &a0, err)) != TS_OK) goto done;
    J.nc = meta.axis_index[1] >= 0 ? (int)tz_array_get_meta(a0)->shape[meta.axis_index[1]] : 1;
    tz_array_close(a0);
    if (J.nc > TS_MAX_CHANNELS) J.nc = TS_MAX_CHANNELS;
    J.sc = pv_picture_size(H, W, max_size, &J.ch, &J.cw);
    size_t n = (size_t)J.ch * (size_t)J.cw;
    J.sum = calloc(n * (size_t)J.nc, sizeof *J.sum);
    J.cnt = calloc(n, sizeof *J.cnt);
    J.plate_pos = plate_pos;
    ts_pool *pool = ts_pool_create(threads);
    if (!J.sum || !J.cnt || !pool) {
        if (pool) ts_pool_destroy(pool);
        st = ts_fail(err, TS_ERR_NOMEM, "out of memory for a %dx%d preview", J.ch, J.cw);
        goto done;
    }
    pthread_mutex_init(&J.mu, NULL);
    st = ts_pool_run(pool, ws->ntiles, add_tile, &J, err);
    ts_pool_destroy(pool);
    pthread_mutex_destroy(&J.mu);
    if (st != TS_OK) goto done;
    cv->h = J.ch, cv->w = J.cw;
    cv->rgb = calloc(n * 3, sizeof *cv->rgb);
    float *plane = malloc(n * sizeof *plane);
    unsigned char *valid = malloc(n);
    if (!cv->rgb || !plane || !valid) {
        free(plane), free(valid);
        st = ts_fail(err, TS_ERR_NOMEM, "out of memory for a %dx%d preview", J.ch, J.cw);
        goto done;
    }
    for (size_t k = 0; k < n; k++) valid[k] = J.cnt[k] > 0;
    for (int c = 0; c < J.nc; c++) {
        for (size_t k = 0; k < n; k++)
            plane[k] = J.cnt[k] ? (float)(J.sum[(size_t)c * n + k] / (double)J.cnt[k]) : 0;
        float col[3] = {1, 1, 1};
        if (J.nc > 1 && !(c < meta.nchannels && pv_parse_color(meta.channel_colors[c], col)))
            pv_parse_color(PALETTE[c % 6], col);
        pv_add_channel(cv, plane, valid, 0.5, 99.5, col);
    }
    free(plane), free(valid);
    *scale = J.sc;
done:
    free(J.sum), free(J.cnt);
    free(plate_pos), free(refs);
    return st;
}
