/* The pipeline stages of one well: loading tile strips (read, orient,
 * orient, keep uint16 or convert to float32) and blending a block (accumulate, normalise, write). */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "common/orient.h"
#include "common/pages.h"
#include "fuse/fuse_internal.h"
#include "gpu/gpu.h"

ts_status fuse_weights_init(fuse_well *W, ts_error *err) {
    W->shapes = calloc((size_t)W->ntiles, sizeof *W->shapes);
    W->weights = calloc((size_t)W->ntiles, sizeof *W->weights);
    if (!W->shapes || !W->weights) return ts_fail(err, TS_ERR_NOMEM, "weights");
    W->nshapes = 0;
    for (int i = 0; i < W->ntiles; i++) {
        fuse_tile *t = &W->tiles[i];
        int k;
        for (k = 0; k < W->nshapes; k++)
            if (W->shapes[k][0] == t->h && W->shapes[k][1] == t->w) break;
        if (k == W->nshapes) {
            W->shapes[k][0] = t->h;
            W->shapes[k][1] = t->w;
            /* Within --memory: fuse_well_tiles checked it (tiles.c). */
            W->weights[k] = malloc(fuse_tile_weights_bytes(t->h, t->w));
            if (!W->weights[k]) {
                const ts_well_info *well = &W->plate->wells[W->w];
                return ts_fail(err, TS_ERR_NOMEM, "out of memory for the blending weights of tile %s/%s of plate %s "
                               "(%lldx%lld px)", well->path, well->positions[t->position], W->plate->path,
                               (long long)t->h, (long long)t->w);
            }
            /* Labels take the tile of the largest weight: any exponent > 0
             * picks the same one, so edt^1. */
            W->K->weights(W->weights[k], t->h, t->w, W->label ? TS_BLEND_EDT : W->opt->blend,
                          W->label ? 1.0 : W->opt->exponent);
            W->nshapes++;
        }
        t->shape_id = k;
    }
    return TS_OK;
}

size_t fuse_weights_bytes(const fuse_well *W) {
    size_t n = 0;
    for (int k = 0; k < W->nshapes; k++) n += fuse_tile_weights_bytes(W->shapes[k][0], W->shapes[k][1]);
    return n;
}

void fuse_weights_free(fuse_well *W) {
    if (W->weights)
        for (int k = 0; k < W->nshapes; k++) free(W->weights[k]);
    free(W->weights);
    free(W->shapes);
    W->weights = NULL;
    W->shapes = NULL;
}

/* Unit u -> (t index among those processed, z, band). */
static void unit_coords(const fuse_well *W, int64_t u, int64_t *t, int64_t *z, int64_t *band) {
    int64_t nb = W->plan->nbands;
    *band = u % nb;
    *z = (u / nb) % W->L.Z;
    *t = u / (nb * W->L.Z);
}

/* Strips live across several blocks while short-lived buffers (decoded
 * chunks, encoded shards) come and go around them; on the malloc heap that
 * interleaving fragments it and RSS creeps up with the canvas. Large strips
 * therefore get their own mapping, returned to the system when freed. */
#define STRIP_MMAP_MIN ((size_t)64 << 10)

/* Mapped lengths are rounded up (strips of one tile shape then share a few
 * sizes, so recycled mappings fit the next strips). */
static size_t strip_mapped_size(size_t bytes) {
    size_t g = bytes >= ((size_t)1 << 20) ? (size_t)1 << 20 : STRIP_MMAP_MIN;
    return (bytes + g - 1) / g * g;
}

void *fuse_strip_alloc(fuse_well *W, size_t bytes) {
    if (bytes < STRIP_MMAP_MIN) return malloc(bytes ? bytes : 1);
    bytes = strip_mapped_size(bytes);
    pthread_mutex_lock(&W->recycle_mu);
    for (int i = 0; i < W->nrecycled; i++)
        if (W->recycled_size[i] == bytes) {
            void *p = W->recycled[i];
            W->recycled[i] = W->recycled[W->nrecycled - 1];
            W->recycled_size[i] = W->recycled_size[--W->nrecycled];
            W->recycled_bytes -= bytes;
            pthread_mutex_unlock(&W->recycle_mu);
            return p;
        }
    /* None of this size: mappings of other sizes go back before a new one
     * is made (at least as many bytes), so the pool never adds to the
     * peak: the strip mappings, held and pooled, only grow while none is
     * pooled. Kept while new strips were mapped beside them, the pool
     * (up to 64 mappings, 8 MB for 256 px tiles) came on top of the strips
     * in flight in the runs with the highest peak RSS (issue 12: strip
     * mappings 24.2 MB at most against 18.5-18.8 in the other runs). */
    void *evict[FUSE_RECYCLE_MAX];
    size_t evict_size[FUSE_RECYCLE_MAX], evicted = 0;
    int nevict = 0;
    while (W->nrecycled > 0 && evicted < bytes) {
        const int j = --W->nrecycled;
        evict[nevict] = W->recycled[j];
        evict_size[nevict] = W->recycled_size[j];
        evicted += W->recycled_size[j];
        W->recycled_bytes -= W->recycled_size[j];
        nevict++;
    }
    pthread_mutex_unlock(&W->recycle_mu);
    for (int i = 0; i < nevict; i++) munmap(evict[i], evict_size[i]);
    /* A strip of 2 MiB or more on huge pages: the pages a trimmed kept
     * plane gives back (kept_trim) are faulted in again under the next
     * strips, and with 4 KiB pages that made 2048^2 tiles 3-7% slower. */
    return ts_pages_map(bytes, bytes >= ((size_t)2 << 20), true);
}

/* Returns a buffer of fuse_strip_alloc(W, bytes). */
void fuse_strip_free(fuse_well *W, void *p, size_t bytes) {
    if (!p) return;
    if (bytes < STRIP_MMAP_MIN) {
        free(p);
        return;
    }
    size_t mapped = strip_mapped_size(bytes);
    pthread_mutex_lock(&W->recycle_mu);
    if (W->nrecycled < FUSE_RECYCLE_MAX && W->recycled_bytes + mapped <= W->recycle_cap) {
        W->recycled[W->nrecycled] = p;
        W->recycled_size[W->nrecycled++] = mapped;
        W->recycled_bytes += mapped;
        p = NULL;
    }
    pthread_mutex_unlock(&W->recycle_mu);
    if (p) munmap(p, mapped);
}

/* A tile's (t, z) plane, all channels, decoded once when the tile spans
 * several bands and shared by its strips in those bands: input chunks are
 * usually whole tiles, so reading each band's rows on its own decoded the
 * tile again for every band it touches (1.5x the decoding on 2048^2 tiles
 * in bands of 3584 rows). Kept until its last band's strip is released,
 * within W->kept_cap bytes; beyond that, strips read their own rows. */
typedef struct kept_plane {
    int tile;
    int64_t t, z;
    void *raw;                 /* nc x raw_h x raw_w of the tile's dtype */
    size_t bytes;
    /* Units (t, z, band) are numbered band fastest, so the tile's strips
     * come in units next_unit, ..., last_unit (the last band of this
     * process it touches). */
    int64_t next_unit, last_unit;
    int refs;                  /* strips viewing it */
    struct kept_plane *next;
    /* Of bytes, what counts in W->kept_bytes: the raw rows [keep0, keep1)
     * of each channel plane still held (kept_trim gives the rest back). */
    size_t counted;
    int64_t keep0, keep1;
} kept_plane;

/* Drops a plane no strip views and no band will ask for. recycle_mu held;
 * returns it for fuse_strip_free outside the lock. */
static kept_plane *kept_unlink_if_done(fuse_well *W, kept_plane *k) {
    if (k->refs > 0 || k->next_unit <= k->last_unit) return NULL;
    kept_plane **p = &W->kept;
    while (*p != k) p = &(*p)->next;
    *p = k->next;
    W->kept_bytes -= k->counted;
    return k;
}

/* A plane no strip views that a later band will ask for: only the rows of
 * that band and below are read again, so the pages of the rows above are
 * given back (raw rows, when oriented rows are raw rows: no odd rot90). A
 * tile straddling a band boundary is held from its first band until the
 * next band's blocks reach its column, so the planes held grow with the
 * canvas width: whole, they were most of the peak RSS's growth from 1x to
 * 16x the area (2 -> 14 MB of tile planes for 256 x 256 tiles); a
 * straddling tile has on average half its rows in the next band. recycle_mu
 * held; returns the byte ranges to release (madvise outside the lock: no
 * strip views them and none will). */
static int kept_trim(fuse_well *W, kept_plane *k, unsigned char **at, size_t *len, int max) {
    const fuse_tile *t = &W->tiles[k->tile];
    const size_t es = ts_dtype_size(t->dtype);
    const long page_l = sysconf(_SC_PAGESIZE);
    const size_t page = page_l > 0 ? (size_t)page_l : 4096;
    const int64_t plane = t->raw_h * t->raw_w, nc = (int64_t)(k->bytes / ((size_t)plane * es));
    /* malloc'd (small) planes are not page-aligned; one range before and
     * one after the rows kept per channel */
    if (k->bytes < STRIP_MMAP_MIN || t->w < 2 || nc < 1 || 2 * nc > max) return 0;
    const fuse_band *band = &W->plan->bands[k->next_unit % W->plan->nbands];
    const int64_t r = band->y0 - t->oy; /* first oriented row read again */
    if (r <= 0) return 0;
    int64_t y0, x0, y1, x1, y2, x2;
    ts_orient_source(&W->orient, t->raw_h, t->raw_w, r, 0, &y0, &x0);
    ts_orient_source(&W->orient, t->raw_h, t->raw_w, r, t->w - 1, &y1, &x1);
    ts_orient_source(&W->orient, t->raw_h, t->raw_w, t->h - 1, 0, &y2, &x2);
    if (y0 != y1) return 0; /* oriented rows are raw columns */
    int64_t keep0 = y0 < y2 ? y0 : y2, keep1 = (y0 > y2 ? y0 : y2) + 1;
    if (keep0 < k->keep0) keep0 = k->keep0;
    if (keep1 > k->keep1) keep1 = k->keep1;
    if (keep0 <= k->keep0 && keep1 >= k->keep1) return 0;
    const size_t before = k->counted;
    k->keep0 = keep0, k->keep1 = keep1;
    k->counted = (size_t)(nc * (keep1 - keep0) * t->raw_w) * es;
    W->kept_bytes -= before - k->counted;
    int n = 0;
    for (int64_t c = 0; c < nc; c++) {
        /* Whole pages of channel c before raw row keep0 and after keep1. */
        const size_t p0 = (size_t)(c * plane) * es, p1 = p0 + (size_t)plane * es;
        const size_t k0 = p0 + (size_t)(keep0 * t->raw_w) * es, k1 = p0 + (size_t)(keep1 * t->raw_w) * es;
        size_t a = (p0 + page - 1) / page * page, b = k0 / page * page;
        if (b > a) at[n] = (unsigned char *)k->raw + a, len[n++] = b - a;
        a = (k1 + page - 1) / page * page, b = p1 / page * page;
        if (b > a) at[n] = (unsigned char *)k->raw + a, len[n++] = b - a;
    }
    return n;
}

/* Frees a plane. A trimmed one is unmapped, not recycled: recycled, its
 * given-back pages were faulted in again (at once, or one by one under the
 * next strip) and the pool of recycled mappings took back what trimming
 * gave (2048^2 tiles: the same peak RSS, 3-10% slower). */
static void kept_free(fuse_well *W, kept_plane *k) {
    if (k->counted < k->bytes) munmap(k->raw, strip_mapped_size(k->bytes));
    else fuse_strip_free(W, k->raw, k->bytes);
    free(k);
}

void (*fuse_test_trim_window)(void);

static void kept_release(fuse_well *W, kept_plane *k) {
    unsigned char *at[16];
    size_t len[16];
    pthread_mutex_lock(&W->recycle_mu);
    k->refs--;
    kept_plane *gone;
    for (;;) {
        gone = kept_unlink_if_done(W, k);
        const int n = !gone && k->refs == 0 ? kept_trim(W, k, at, len, 16) : 0;
        if (n == 0) break;
        /* Pinned (one ref more) while its pages go back outside the lock: a
         * load that found it stale meanwhile freed and unmapped it, the next
         * strip was mapped at the same address, and the madvise zeroed that
         * strip's rows (blocks written as fill, exit 0). The attach of a
         * later band's strip may happen meanwhile (it reads rows the trim
         * keeps); trimmed further, if that moved next_unit, on the next turn. */
        k->refs++;
        pthread_mutex_unlock(&W->recycle_mu);
        if (fuse_test_trim_window) fuse_test_trim_window();
        for (int i = 0; i < n; i++) (void)madvise(at[i], len[i], MADV_DONTNEED);
        pthread_mutex_lock(&W->recycle_mu);
        k->refs--;
    }
    pthread_mutex_unlock(&W->recycle_mu);
    if (gone) kept_free(W, gone);
}

static void strip_free(void *user, fuse_strip *strip) {
    fuse_well *W = user;
    if (W->gpu) ts_gpu_fuse_forget(W->gpu, strip); /* its device copy first (docs/gpu.md, rule 4) */
    if (strip->owner) kept_release(W, strip->owner);
    else fuse_strip_free(W, strip->data, strip->bytes);
    strip->owner = NULL;
}

void fuse_recycle_drain(fuse_well *W) {
    while (W->kept) {
        kept_plane *k = W->kept;
        W->kept = k->next;
        kept_free(W, k);
    }
    W->kept_bytes = 0;
    for (int i = 0; i < W->nrecycled; i++) munmap(W->recycled[i], W->recycled_size[i]);
    W->nrecycled = 0;
    W->recycled_bytes = 0;
}

/* uint16 tiles are held as uint16 (blended straight from them), anything
 * else as float32, or for labels as 32-bit labels (float32 holds integers
 * exactly only up to 2^24). */
static ts_dtype strip_dtype(const fuse_well *W, ts_dtype tile) {
    return tile == TS_UINT16 ? TS_UINT16 : W->label ? TS_UINT32 : TS_FLOAT32;
}

static size_t strip_estimate(void *user, int64_t unit, const fuse_slot *slot) {
    (void)unit;
    fuse_well *W = user;
    const fuse_tile *t = &W->tiles[slot->tile];
    int64_t nc = t->C < W->L.C ? t->C : W->L.C;
    return (size_t)nc * (size_t)(slot->r1 - slot->r0) * (size_t)t->w * ts_dtype_size(strip_dtype(W, t->dtype));
}

/* One oriented row of n pixels from raw (element step `step` along it)
 * into dst, converted to float32 (NaN, no data in a float tile, becomes 0:
 * padding, which carries no weight instead of poisoning the blend). */
#define CONVERT_ROW(TYPE)                                                        \
    do {                                                                         \
        const TYPE *s = (const TYPE *)raw + at;                                  \
        if (step == 1)                                                           \
            for (int64_t j = 0; j < n; j++) dst[j] = (float)s[j];                \
        else                                                                     \
            for (int64_t j = 0; j < n; j++) dst[j] = (float)s[j * step];         \
    } while (0)

static void convert_row(ts_dtype dt, float *dst, const void *raw, int64_t at, int64_t step, int64_t n) {
    switch (dt) {
    case TS_UINT8: CONVERT_ROW(uint8_t); break;
    case TS_INT8: CONVERT_ROW(int8_t); break;
    case TS_INT16: CONVERT_ROW(int16_t); break;
    case TS_UINT32: CONVERT_ROW(uint32_t); break;
    case TS_INT32: CONVERT_ROW(int32_t); break;
    case TS_FLOAT32: CONVERT_ROW(float); break;
    case TS_FLOAT64: CONVERT_ROW(double); break;
    default: break; /* read_tile_meta (tiles.c) refused other dtypes */
    }
    if (dt == TS_FLOAT32 || dt == TS_FLOAT64)
        for (int64_t k = 0; k < n; k++) dst[k] = dst[k] == dst[k] ? dst[k] : 0.0f;
}

static ts_status load_strip(void *user, int64_t unit, const fuse_slot *slot, fuse_strip *strip,
                            ts_error *err) {
    fuse_well *W = user;
    const fuse_tile *t = &W->tiles[slot->tile];
    const ts_well_info *well = &W->plate->wells[W->w];
    int64_t ti, z, band;
    unit_coords(W, unit, &ti, &z, &band);
    int64_t t_in = W->t_in0 + ti;
    strip->r0 = slot->r0;
    strip->r1 = slot->r1;
    strip->w = t->w;
    strip->nc = 0;
    strip->dtype = strip_dtype(W, t->dtype);
    /* tcz max: a tile without this t or z contributes nothing (zero pad);
     * with --resume, a strip only complete blocks use is not read. */
    if (t_in >= t->T || z >= t->Z || !fuse_resume_strip_needed(W, unit, slot)) return TS_OK;
    int64_t nc = t->C < W->L.C ? t->C : W->L.C;
    const ts_orientation *o = &W->orient;
    /* Raw bounding box of oriented rows [r0, r1) x all columns. */
    int64_t ry0 = INT64_MAX, ry1 = -1, rx0 = INT64_MAX, rx1 = -1;
    const int64_t cy[2] = {slot->r0, slot->r1 - 1}, cx[2] = {0, t->w - 1};
    for (int a = 0; a < 2; a++)
        for (int b = 0; b < 2; b++) {
            int64_t sy, sx;
            ts_orient_source(o, t->raw_h, t->raw_w, cy[a], cx[b], &sy, &sx);
            if (sy < ry0) ry0 = sy;
            if (sy > ry1) ry1 = sy;
            if (sx < rx0) rx0 = sx;
            if (sx > rx1) rx1 = sx;
        }
    int64_t rh = ry1 - ry0 + 1, rw = rx1 - rx0 + 1;
    const int64_t rows = slot->r1 - slot->r0, n = t->w;
    /* Along an oriented row the raw index moves by a fixed step, and from
     * one oriented row to the next by a fixed row step (the orientation is
     * an affine map of unit strides). */
    int64_t sy0, sx0, sy1 = 0, sx1 = 0, sy2 = 0, sx2 = 0;
    ts_orient_source(o, t->raw_h, t->raw_w, slot->r0, 0, &sy0, &sx0);
    if (n > 1) ts_orient_source(o, t->raw_h, t->raw_w, slot->r0, 1, &sy1, &sx1);
    if (rows > 1) ts_orient_source(o, t->raw_h, t->raw_w, slot->r0 + 1, 0, &sy2, &sx2);
    const size_t esize = ts_dtype_size(t->dtype);
    /* The tile's plane kept from an earlier band, or kept now for later
     * bands, or just this band's rows. */
    const int64_t B = W->L.block;
    int64_t last_band = (t->oy + t->h - 1) / B;
    /* ... the last band of this process that loads the tile's strip: its
     * last band may be partly another rank's, the tile's blocks there too. */
    const int64_t last_block = W->block_end - 1, end_band = last_block / W->L.nbx;
    if (last_band > end_band) last_band = end_band;
    if (last_band == end_band && slot->bx0 > last_block % W->L.nbx) last_band--;
    const size_t plane_bytes = (size_t)(nc * t->raw_h * t->raw_w) * esize;
    kept_plane *kept = NULL, *stale = NULL;
    bool keep = false;
    pthread_mutex_lock(&W->recycle_mu);
    for (kept_plane *k = W->kept, *next; k; k = next) {
        next = k->next;
        if (k->tile == slot->tile && k->t == t_in && k->z == z && k->next_unit == unit) {
            kept = k;
            k->refs++;
            k->next_unit = unit + 1;
        } else if (k->next_unit < unit && k->refs == 0) {
            /* Its next band read the rows itself (loaded while the plane
             * was still being decoded): nobody will ask for it. */
            k->next_unit = k->last_unit + 1;
            kept_plane *gone = kept_unlink_if_done(W, k);
            gone->next = stale;
            stale = gone;
        }
    }
    if (!kept && band < last_band && W->kept_bytes + plane_bytes <= W->kept_cap) {
        W->kept_bytes += plane_bytes;  /* reserved while it is read */
        keep = true;
    }
    pthread_mutex_unlock(&W->recycle_mu);
    while (stale) {
        kept_plane *k = stale;
        stale = k->next;
        kept_free(W, k);
    }
    if (kept || keep) { ry0 = 0, rx0 = 0, rh = t->raw_h, rw = t->raw_w; }
    void *raw = kept ? kept->raw : NULL;
    const size_t raw_bytes = (size_t)(nc * rh * rw) * esize;
    if (!kept) {
        raw = fuse_strip_alloc(W, raw_bytes);
        ts_status st = raw ? TS_OK : ts_fail(err, TS_ERR_NOMEM, "strip of tile %s/%s", well->path, well->positions[t->position]);
        /* The box by axis name (tiles may be yx, cyx, czyx, tczyx, ...),
         * from the axis map read_tile_meta kept: no image metadata is
         * re-read here. read_tile_meta checked that it reads as c planes
         * of y rows of x. */
        tz_array *arr = NULL;
        char image[4200], path[4300];
        fuse_tile_image_path(W, t->position, image, sizeof image);
        snprintf(path, sizeof path, "%s/%s", image, t->level0);
        if (st == TS_OK) st = tz_array_open_as(path, ts_ome_zarr_format(W->plate->version), &arr, err);
        if (st == TS_OK) {
            const int64_t start5[5] = {t_in, 0, z, ry0, rx0}, count5[5] = {1, nc, 1, rh, rw};
            int64_t start[TZ_MAX_DIM], count[TZ_MAX_DIM];
            st = ts_image_box(t->axis, t->ndim, tz_array_get_meta(arr), start5, count5, start, count,
                              path, err);
            if (st == TS_OK) st = tz_array_read(arr, start, count, raw, err);
            tz_array_close(arr);
        }
        if (keep) {
            kept = st == TS_OK ? calloc(1, sizeof *kept) : NULL;
            pthread_mutex_lock(&W->recycle_mu);
            if (kept) {
                *kept = (kept_plane){.tile = slot->tile, .t = t_in, .z = z, .raw = raw, .bytes = raw_bytes,
                                     .next_unit = unit + 1, .last_unit = unit + (last_band - band), .refs = 1,
                                     .next = W->kept, .counted = raw_bytes, .keep0 = 0, .keep1 = t->raw_h};
                W->kept = kept;
            } else {
                W->kept_bytes -= plane_bytes;
            }
            pthread_mutex_unlock(&W->recycle_mu);
            if (!kept && st == TS_OK) st = ts_fail(err, TS_ERR_NOMEM, "tile plane of %s/%s", well->path, well->positions[t->position]);
        }
        if (st != TS_OK) {
            fuse_strip_free(W, raw, raw_bytes);
            return st;
        }
    }
    /* Where oriented row r0, column 0 and its neighbours sit in raw (the
     * box read, or the whole plane). */
    const int64_t base = (sy0 - ry0) * rw + (sx0 - rx0);
    const int64_t step = n > 1 ? (sy1 - sy0) * rw + (sx1 - sx0) : 1;
    const int64_t row_step = rows > 1 ? (sy2 - sy0) * rw + (sx2 - sx0) : rw;
    /* uint16 rows that run forward (no left-right flip, no rotation; an
     * upside-down flip only reverses the row order) are blended where the
     * decoder put them. */
    if (t->dtype == TS_UINT16 && step == 1) {
        strip->data = raw;
        /* A view into a kept plane counts its rows (the plane is counted in
         * kept_bytes). */
        strip->bytes = kept ? (size_t)(nc * rows * n) * esize : raw_bytes;
        strip->owner = kept;
        strip->origin = base;
        strip->plane = rh * rw;
        strip->row_step = row_step;
        strip->nc = (int)nc;
        return TS_OK;
    }
    /* Otherwise an oriented copy: uint16 stays uint16, the rest becomes
     * float32. */
    strip->bytes = (size_t)(nc * rows * n) * ts_dtype_size(strip->dtype);
    strip->data = fuse_strip_alloc(W, strip->bytes);
    if (!strip->data) {
        if (kept) kept_release(W, kept);
        else fuse_strip_free(W, raw, raw_bytes);
        return ts_fail(err, TS_ERR_NOMEM, "strip of tile %s/%s", well->path, well->positions[t->position]);
    }
    strip->origin = 0;
    strip->plane = rows * n;
    strip->row_step = n;
    for (int64_t c = 0; c < nc; c++)
        for (int64_t r = 0; r < rows; r++) {
            const int64_t at = c * rh * rw + base + r * row_step;
            if (strip->dtype == TS_UINT16) {
                uint16_t *dst = (uint16_t *)strip->data + (c * rows + r) * n;
                const uint16_t *src = (const uint16_t *)raw + at;
                for (int64_t j = 0; j < n; j++) dst[j] = src[j * step];
            } else if (strip->dtype == TS_UINT32) {
                fuse_label_convert_row(t->dtype, (uint32_t *)strip->data + (c * rows + r) * n, raw, at, step, n);
            } else {
                convert_row(t->dtype, (float *)strip->data + (c * rows + r) * n, raw, at, step, n);
            }
        }
    if (kept) kept_release(W, kept);
    else fuse_strip_free(W, raw, raw_bytes);
    strip->nc = (int)nc;
    return TS_OK;
}

/* n quotients num/den into out, of the output dtype. */
static void normalise(const fuse_well *W, void *out, const float *num, const float *den, int64_t n) {
    if (W->label) fuse_label_store(out, W->out_dtype, (const uint32_t *)num, n);
    else if (W->out_dtype == TS_FLOAT32) W->K->normalise_f32(out, num, den, n);
    else W->K->normalise_u16(out, num, den, n);
}

/* Maps a worker's block buffers (every level) at its first block: done
 * here rather than before the pipeline starts, so that the workers fault
 * them in in parallel while others already read tiles. Freed with the rest
 * of the scratch (fuse.c). */
static ts_status block_buffers(fuse_well *W, fuse_scratch *sc, ts_error *err) {
    for (int k = 0; k <= W->L.levels; k++) {
        if (sc->level[k]) continue;
        int64_t Bk = W->L.block >> k;
        size_t bytes = (size_t)(W->L.C * Bk * Bk) * W->out_elem;
        /* Faulted in at once (a visible share of a small mosaic's time
         * page by page), on huge pages. */
        void *p = ts_pages_map(bytes, true, true);
        if (!p)
            return ts_fail(err, TS_ERR_NOMEM, "block buffer of %lld x %lld px x %lld channels",
                           (long long)Bk, (long long)Bk, (long long)W->L.C);
        sc->level[k] = p;
        sc->level_bytes[k] = bytes;
    }
    return TS_OK;
}

static ts_status process_block(void *user, int worker, int64_t unit, int64_t bx,
                               const fuse_strip *const *strips, int nstrips, ts_error *err) {
    fuse_well *W = user;
    if (fuse_resume_block_done(W, unit, bx)) return TS_OK; /* --resume: checked complete */
    fuse_scratch *sc = &W->scratch[worker];
    ts_status st = block_buffers(W, sc, err);
    if (st != TS_OK) return st;
    const fuse_layout *L = &W->L;
    int64_t ti, z, b;
    unit_coords(W, unit, &ti, &z, &b);
    if (W->gpu) { /* --device gpu: every level on the device (gpu_block.c) */
        return fuse_gpu_block(W, sc, worker, b, bx, strips, nstrips, err); /* into sc->level */
    }
    const fuse_band *band = &W->plan->bands[b];
    const int64_t B = L->block;
    const int64_t y0 = band->y0, y1 = band->y1;
    const int64_t x0 = bx * B, x1 = x0 + B < L->canvas_w ? x0 + B : L->canvas_w;
    const int *slot_of = band->block_slots + band->block_start[bx];
    /* Rows are blended in groups small enough for num/den to stay in cache
     * (a whole 2560 x 2560 block of them would be 52 MB of memory traffic
     * per pass). */
    const int64_t R = fuse_row_group(B);
    /* Only the block's part inside the canvas (rows [y0, y1), columns
     * [x0, x1)) is blended; the padding of an edge block (most of it, for
     * a thin last band or column) is zeroed, which is what blending it
     * gave (no tile covers it). */
    const size_t es = W->out_elem;
    const int64_t vw = x1 - x0;
    for (int64_t c = 0; c < L->C; c++) {
        unsigned char *out = (unsigned char *)sc->level[0] + (size_t)(c * B * B) * es;
        for (int64_t g0 = y0; g0 < y0 + B; g0 += R) {
            const int64_t g1 = g0 + R < y0 + B ? g0 + R : y0 + B;
            const int64_t gv = g1 < y1 ? g1 : y1;  /* rows [g0, gv) are in the canvas */
            if (g0 >= gv) {
                memset(out + (size_t)((g0 - y0) * B) * es, 0, (size_t)((g1 - g0) * B) * es);
                continue;
            }
            if (vw == B) {
                memset(sc->num, 0, (size_t)((gv - g0) * B) * sizeof(float));
                memset(sc->den, 0, (size_t)((gv - g0) * B) * sizeof(float));
            } else {
                for (int64_t y = g0; y < gv; y++) {
                    memset(sc->num + (y - g0) * B, 0, (size_t)vw * sizeof(float));
                    memset(sc->den + (y - g0) * B, 0, (size_t)vw * sizeof(float));
                }
            }
            for (int k = 0; k < nstrips; k++) {
                const fuse_strip *s = strips[k];
                if (c >= s->nc) continue;
                const fuse_tile *t = &W->tiles[band->slots[slot_of[k]].tile];
                int64_t ya = g0 > t->oy + s->r0 ? g0 : t->oy + s->r0;
                int64_t yb = g1 < t->oy + s->r1 ? g1 : t->oy + s->r1;
                if (yb > y1) yb = y1;
                int64_t xa = x0 > t->ox ? x0 : t->ox;
                int64_t xb = x1 < t->ox + t->w ? x1 : t->ox + t->w;
                if (ya >= yb || xa >= xb) continue;
                const float *wimg = W->weights[t->shape_id];
                for (int64_t y = ya; y < yb; y++) {
                    int64_t ty = y - t->oy;
                    int64_t off = (y - g0) * B + (xa - x0);
                    int64_t at = s->origin + c * s->plane + (ty - s->r0) * s->row_step + (xa - t->ox);
                    const float *wrow = wimg + ty * t->w + (xa - t->ox);
                    if (W->label)
                        fuse_label_row(W, sc->den + off, (uint32_t *)(sc->num + off), s, at, wrow, xb - xa);
                    else if (s->dtype == TS_UINT16)
                        W->K->accumulate_u16(sc->num + off, sc->den + off, (const uint16_t *)s->data + at, wrow, xb - xa);
                    else
                        W->K->accumulate(sc->num + off, sc->den + off, (const float *)s->data + at, wrow, xb - xa);
                }
            }
            /* Rows in the canvas: normalised over the canvas width (in one
             * span when that is the whole block width), zero beyond. */
            int64_t span = vw == B ? gv - g0 : 1;
            for (int64_t y = g0; y < gv; y += span) {
                unsigned char *o = out + (size_t)((y - y0) * B) * es;
                normalise(W, o, sc->num + (y - g0) * B, sc->den + (y - g0) * B, vw == B ? span * B : vw);
                if (vw < B) memset(o + (size_t)vw * es, 0, (size_t)(B - vw) * es);
            }
            if (gv < g1) memset(out + (size_t)((gv - y0) * B) * es, 0, (size_t)((g1 - gv) * B) * es);
        }
    }
    return TS_OK;
}

/* The pipeline's write stage: the levels process_block left in the
 * worker's buffers, encoded and written. */
static ts_status write_block(void *user, int worker, int64_t unit, int64_t bx, ts_error *err) {
    fuse_well *W = user;
    if (fuse_resume_block_done(W, unit, bx)) return TS_OK;
    int64_t ti, z, b;
    unit_coords(W, unit, &ti, &z, &b);
    return fuse_write_block(W, &W->scratch[worker], W->t_out0 + ti, z, b, bx, err);
}

void fuse_stage_fns_init(fuse_well *W, fuse_stage_fns *fns) {
    fns->strip_estimate = strip_estimate;
    fns->load = load_strip;
    fns->process = process_block;
    fns->write = write_block;
    fns->user = W;
    fns->free_strip = strip_free;
}
