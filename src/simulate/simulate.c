/* tessera simulate: a plate of overlapping tiles cut from a procedural
 * specimen, with stage jitter, camera effects and ground truth.
 *
 * Geometry: the "true" tile (stage orientation, Ht x Wt) of grid cell
 * (gx, gy) has its origin at (gy * pitch_y, gx * pitch_x) + uniform jitter,
 * pitch = true tile size - overlap. The stored (camera) tile is the true tile
 * mapped by the inverse of the orientation that estimate/fuse apply (flipud,
 * then fliplr, then rot90 k), so running them with the same flags recovers
 * the true tile. --tile gives the stored shape; the true shape swaps H and W
 * for odd k. Every random draw is a hash of (seed, what it is for), so the
 * result does not depend on thread count or scheduling. */
#include "tessera/tessera.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/error.h"
#include "common/fs.h"
#include "common/orient.h"
#include "common/outpath.h"
#include "common/pool.h"
#include "ome/ome.h"
#include "shifts/shifts.h"
#include "simulate/specimen.h"
#include "zarr/zarr.h"

void ts_simulate_options_init(ts_simulate_options *opt) {
    memset(opt, 0, sizeof *opt);
    opt->wells = "A/1";
    opt->grid_cols = 4;
    opt->grid_rows = 3;
    opt->tile_h = opt->tile_w = 256;
    opt->overlap = -1; /* tile/8 */
    opt->jitter = 3;
    opt->channels = opt->timepoints = opt->z = 1;
    opt->noise = 20;
    opt->format = TS_OME_05;
    opt->dtype = TS_UINT16;
    opt->codec = TS_CODEC_ZSTD;
    opt->pixel_size_um = 0.65;
    opt->vignetting = 0.15;
    opt->background = 100;
}

/* Salts of the independent random streams. */
enum { SALT_WELL = 11, SALT_MISSING, SALT_BLANK, SALT_JITTER, SALT_NOISE };

typedef struct sim_tile {
    int well, gx, gy;
    char name[24];
    double oy, ox; /* true origin, px */
    bool blank;
} sim_tile;

typedef struct sim_job {
    const ts_simulate_options *opt;
    const char *root;     /* where the plate is built (beside the output, swapped in at the end) */
    ts_orientation acq;
    int true_h, true_w;   /* stage orientation */
    int raw_h, raw_w;     /* stored */
    char (*wells)[32];
    int nwells;
    sim_tile *tiles;
    int ntiles;
    /* per-worker buffers, reused across tiles (fresh 40 MB allocations per
     * 2048x2048 tile cost more in page faults than the rendering) */
    float **scratch;      /* 2 planes of floats */
    void **raw;           /* one stored plane */
} sim_job;

static ts_status parse_wells(const char *list, char (**out)[32], int *n, ts_error *err) {
    size_t len = strlen(list);
    *out = calloc(len + 1, sizeof **out);
    if (!*out) return ts_fail(err, TS_ERR_NOMEM, "out of memory");
    *n = 0;
    const char *s = list;
    while (*s) {
        const char *e = strchr(s, ',');
        size_t k = e ? (size_t)(e - s) : strlen(s);
        if (k == 0 || k >= 32) return ts_fail(err, TS_ERR_ARG, "bad well list '%s'", list);
        memcpy((*out)[*n], s, k);
        (*out)[*n][k] = '\0';
        char row[16], col[16];
        ts_status st = ts_well_split((*out)[*n], row, col, err);
        if (st) return st;
        for (int i = 0; i < *n; i++)
            if (strcmp((*out)[i], (*out)[*n]) == 0)
                return ts_fail(err, TS_ERR_ARG, "well '%s' is listed twice", (*out)[*n]);
        (*n)++;
        s += e ? k + 1 : k;
    }
    if (*n == 0) return ts_fail(err, TS_ERR_ARG, "no wells given");
    return TS_OK;
}

static ts_status check_options(const ts_simulate_options *o, ts_error *err) {
    if (!o->output || !*o->output) return ts_fail(err, TS_ERR_ARG, "simulate: no output path");
    if (o->grid_cols < 1 || o->grid_rows < 1 || o->grid_cols > 999 || o->grid_rows > 999)
        return ts_fail(err, TS_ERR_ARG, "grid %dx%d: each side must be 1..999", o->grid_cols,
                       o->grid_rows);
    if (o->tile_h < 8 || o->tile_w < 8 || o->tile_h > 16384 || o->tile_w > 16384)
        return ts_fail(err, TS_ERR_ARG, "tile %dx%d: each side must be 8..16384", o->tile_h,
                       o->tile_w);
    if (o->channels < 1 || o->timepoints < 1 || o->z < 1 || o->channels > TS_MAX_CHANNELS ||
        o->timepoints > 1000 || o->z > 1000)
        return ts_fail(err, TS_ERR_ARG, "channels/timepoints/z must be >= 1 (channels <= %d)",
                       TS_MAX_CHANNELS);
    if (!(o->jitter >= 0) || !(o->noise >= 0) || !(o->vignetting >= 0 && o->vignetting < 1) ||
        !(o->background >= 0) || !isfinite(o->noise) || !isfinite(o->background))
        return ts_fail(err, TS_ERR_ARG, "jitter, noise and background must be finite and >= 0, "
                                        "vignetting in [0, 1)");
    /* Beyond a tile size the jitter reorders tiles (no longer a grid scan),
     * and a huge one put the specimen's cell indices out of int64 range. */
    int smaller = o->tile_h < o->tile_w ? o->tile_h : o->tile_w;
    if (!(o->jitter <= smaller))
        return ts_fail(err, TS_ERR_ARG, "jitter %g px: at most the tile size (%d px)", o->jitter, smaller);
    if (!(o->blank_fraction >= 0 && o->blank_fraction <= 1) ||
        !(o->missing_fraction >= 0 && o->missing_fraction < 1))
        return ts_fail(err, TS_ERR_ARG, "blank fraction must be in [0, 1], missing in [0, 1)");
    if (o->format != TS_OME_04 && o->format != TS_OME_05)
        return ts_fail(err, TS_ERR_ARG, "format must be 0.4 or 0.5");
    if (o->dtype != TS_UINT16 && o->dtype != TS_UINT8 && o->dtype != TS_FLOAT32)
        return ts_fail(err, TS_ERR_UNSUPPORTED, "simulate writes uint8, uint16 or float32, not %s",
                       ts_dtype_name(o->dtype));
    /* Finite: an infinite scale has no JSON number, and the NGFF scale list
     * was written with 3 entries for 5 axes. */
    if (!(o->pixel_size_um > 0) || !isfinite(o->pixel_size_um))
        return ts_fail(err, TS_ERR_ARG, "pixel size %g um must be finite and > 0", o->pixel_size_um);
    return ts_codec_check_level(o->codec, o->codec_level, err);
}

/* Sensor noise from a per-plane counter-based stream: the sum of four
 * 16-bit uniforms of one hash (Irwin-Hall), scaled to unit variance; close
 * enough to Gaussian for a camera and a quarter of the cost of Box-Muller. */
static double noise01(uint64_t key, uint64_t i) {
    uint64_t h = sim_hash(key, i, 1, 0);
    double s = (double)(h & 0xFFFF) + (double)((h >> 16) & 0xFFFF) + (double)((h >> 32) & 0xFFFF) +
               (double)(h >> 48);
    return (s / 65536.0 - 2.0) * 1.7320508075688772; /* var of U(0,1) sum of 4 = 1/3 */
}

static void store_value(void *buf, ts_dtype dt, size_t i, double v) {
    if (dt == TS_FLOAT32) {
        ((float *)buf)[i] = (float)v;
        return;
    }
    double hi = dt == TS_UINT8 ? 255.0 : 65535.0;
    v = v < 0 ? 0 : v > hi ? hi : v;
    /* v >= 0: floor(v + 0.5) is lround, without the libm call */
    if (dt == TS_UINT8) ((uint8_t *)buf)[i] = (uint8_t)(v + 0.5);
    else ((uint16_t *)buf)[i] = (uint16_t)(v + 0.5);
}

/* Renders one plane of tile `t` into raw (stored) layout of dtype. */
static void render_plane(const sim_job *job, const sim_tile *t, int ti, int tt, int c, int z,
                         float *truebuf, void *raw) {
    const ts_simulate_options *o = job->opt;
    int Ht = job->true_h, Wt = job->true_w, H = job->raw_h, W = job->raw_w;
    size_t n = (size_t)Ht * (size_t)Wt;
    if (t->blank) {
        for (size_t k = 0; k < n; k++) truebuf[k] = 0;
    } else {
        sim_plane pl = {.seed = sim_hash(o->seed, SALT_WELL, (uint64_t)t->well, 0),
                        .channel = c, .t = tt, .nt = o->timepoints, .z = z, .nz = o->z};
        sim_render(&pl, t->oy, t->ox, Ht, Wt, truebuf);
    }
    uint64_t nkey = sim_hash(o->seed, SALT_NOISE, (uint64_t)ti,
                             ((uint64_t)tt << 40) ^ ((uint64_t)c << 20) ^ (uint64_t)z);
    double cy = (H - 1) / 2.0, cx = (W - 1) / 2.0;
    /* Walk the oriented (true) plane and scatter into the raw plane: raw
     * pixel ts_orient_source(o, y, x) is what fuse reads as oriented (y, x). */
    float *rawf = truebuf + n; /* second half of the scratch */
    bool identity = !job->acq.flipud && !job->acq.fliplr && job->acq.rot90 == 0;
    if (identity) rawf = truebuf;
    for (int y = 0; !identity && y < Ht; y++)
        for (int x = 0; x < Wt; x++) {
            int64_t sy, sx;
            ts_orient_source(&job->acq, H, W, y, x, &sy, &sx);
            rawf[(size_t)sy * (size_t)W + (size_t)sx] = truebuf[(size_t)y * (size_t)Wt + (size_t)x];
        }
    for (int y = 0; y < H; y++) {
        double dy = (y - cy) / (cy > 0 ? cy : 1);
        for (int x = 0; x < W; x++) {
            double dx = (x - cx) / (cx > 0 ? cx : 1);
            double gain = 1.0 - o->vignetting * 0.5 * (dx * dx + dy * dy);
            size_t k = (size_t)y * (size_t)W + (size_t)x;
            double v = o->background + rawf[k] * gain;
            if (o->noise > 0) v += o->noise * noise01(nkey, k);
            store_value(raw, o->dtype, k, v);
        }
    }
}

static ts_status write_tile(void *user, int64_t index, int worker, ts_error *err) {
    sim_job *job = user;
    const ts_simulate_options *o = job->opt;
    const sim_tile *t = &job->tiles[index];
    char image[4200], arrpath[4300];
    snprintf(image, sizeof image, "%s/%s/%s", job->root, job->wells[t->well], t->name);
    snprintf(arrpath, sizeof arrpath, "%s/0", image);

    ts_image_meta meta;
    ts_image_meta_default(&meta, o->channels);
    meta.scale[3] = meta.scale[4] = o->pixel_size_um;
    meta.scale[2] = 1.0;
    snprintf(meta.space_unit, sizeof meta.space_unit, "micrometer");
    if (o->timepoints > 1) snprintf(meta.time_unit, sizeof meta.time_unit, "second");
    for (int c = 0; c < o->channels; c++) {
        snprintf(meta.channel_labels[c], sizeof meta.channel_labels[c], "%s",
                 c % 3 == 0 ? "nuclei" : c % 3 == 1 ? "cytoplasm" : "puncta");
        if (c >= 3)
            snprintf(meta.channel_labels[c], sizeof meta.channel_labels[c], "%s %d",
                     c % 3 == 0 ? "nuclei" : c % 3 == 1 ? "cytoplasm" : "puncta", c / 3 + 1);
        meta.has_window[c] = true;
        double hi = o->dtype == TS_UINT8 ? 255 : 65535;
        meta.window[c][0] = 0, meta.window[c][1] = hi;
        meta.window[c][2] = 0, meta.window[c][3] = o->dtype == TS_UINT8 ? 255 : 4000;
    }
    ts_status st = ts_image_write_meta(image, o->format, &meta, 1, err);
    if (st != TS_OK) return st;

    tz_array_meta am;
    tz_array_meta_init(&am, o->format == TS_OME_04 ? 2 : 3);
    am.ndim = 5;
    int64_t shape[5] = {o->timepoints, o->channels, o->z, job->raw_h, job->raw_w};
    for (int d = 0; d < 5; d++) {
        am.shape[d] = shape[d];
        am.chunk[d] = d < 3 ? 1 : shape[d];
    }
    am.dtype = o->dtype;
    am.fill_value = 0;
    am.separator = '/';
    if (o->format == TS_OME_04) am.key_encoding = TZ_KEY_V2;
    else {
        static const char *const names[5] = {"t", "c", "z", "y", "x"};
        for (int d = 0; d < 5; d++) snprintf(am.dimension_names[d], 16, "%s", names[d]);
    }
    tz_meta_set_codec_level(&am, o->codec, o->codec_level);
    tz_array *arr = NULL;
    if ((st = tz_array_create(arrpath, &am, &arr, err)) != TS_OK) return st;

    size_t n = (size_t)job->raw_h * (size_t)job->raw_w;
    if (!job->scratch[worker]) job->scratch[worker] = malloc(2 * n * sizeof(float));
    if (!job->raw[worker]) job->raw[worker] = malloc(n * ts_dtype_size(o->dtype));
    float *scratch = job->scratch[worker];
    void *raw = job->raw[worker];
    int rc = 0;
    if (!scratch || !raw) {
        ts_fail(err, TS_ERR_NOMEM, "%s: out of memory for a %dx%d tile", arrpath, job->raw_h,
                job->raw_w);
        rc = 1;
    }
    for (int tt = 0; !rc && tt < o->timepoints; tt++)
        for (int c = 0; !rc && c < o->channels; c++)
            for (int z = 0; !rc && z < o->z; z++) {
                render_plane(job, t, (int)index, tt, c, z, scratch, raw);
                int64_t idx[5] = {tt, c, z, 0, 0};
                if (tz_array_write_block(arr, idx, raw, err) != TS_OK) rc = 1;
            }
    tz_array_close(arr);
    return rc ? err->code : TS_OK;
}

static void position_name(const ts_simulate_options *o, int gx, int gy, char out[24]) {
    snprintf(out, 24, "%03d%03d", o->names_yx ? gy : gx, o->names_yx ? gx : gy);
}

/* Which tiles exist, where they truly are, which are blank. */
static ts_status plan_tiles(sim_job *job, ts_error *err) {
    const ts_simulate_options *o = job->opt;
    size_t per = (size_t)o->grid_cols * (size_t)o->grid_rows;
    job->tiles = calloc(per * (size_t)job->nwells, sizeof *job->tiles);
    if (!job->tiles) return ts_fail(err, TS_ERR_NOMEM, "out of memory for the tile plan");
    int ov = o->overlap >= 0 ? o->overlap : (job->true_h < job->true_w ? job->true_h : job->true_w) / 8;
    double py = job->true_h - ov, px = job->true_w - ov;
    for (int w = 0; w < job->nwells; w++) {
        int first = job->ntiles;
        for (int gy = 0; gy < o->grid_rows; gy++)
            for (int gx = 0; gx < o->grid_cols; gx++) {
                uint64_t cell = ((uint64_t)w << 32) ^ ((uint64_t)gy << 16) ^ (uint64_t)gx;
                bool missing = sim_u01(sim_hash(o->seed, SALT_MISSING, cell, 0)) < o->missing_fraction;
                /* keep at least one tile per well: the last one if all else is missing */
                bool last = gy == o->grid_rows - 1 && gx == o->grid_cols - 1;
                if (missing && !(last && job->ntiles == first)) continue;
                sim_tile *t = &job->tiles[job->ntiles++];
                t->well = w, t->gx = gx, t->gy = gy;
                position_name(o, gx, gy, t->name);
                double jy = sim_u01(sim_hash(o->seed, SALT_JITTER, cell, 1)) * 2 - 1;
                double jx = sim_u01(sim_hash(o->seed, SALT_JITTER, cell, 2)) * 2 - 1;
                t->oy = gy * py + o->jitter * jy;
                t->ox = gx * px + o->jitter * jx;
                t->blank = sim_u01(sim_hash(o->seed, SALT_BLANK, cell, 0)) < o->blank_fraction;
            }
    }
    return TS_OK;
}

static ts_status write_layout(const sim_job *job, ts_error *err) {
    const ts_simulate_options *o = job->opt;
    const char **wells = calloc((size_t)job->nwells, sizeof *wells);
    int *counts = calloc((size_t)job->nwells, sizeof *counts);
    const char ***names = calloc((size_t)job->nwells, sizeof *names);
    const char **all = calloc((size_t)job->ntiles + 1, sizeof *all);
    ts_status st = TS_OK;
    if (!wells || !counts || !names || !all) {
        st = ts_fail(err, TS_ERR_NOMEM, "out of memory");
        goto done;
    }
    for (int i = 0; i < job->ntiles; i++) all[i] = job->tiles[i].name;
    for (int i = 0, w = 0; w < job->nwells; w++) {
        wells[w] = job->wells[w];
        names[w] = all + i;
        while (i < job->ntiles && job->tiles[i].well == w) i++, counts[w]++;
    }
    ts_plate_layout L = {.path = job->root, .version = o->format, .name = "tessera simulate",
                         .nwells = job->nwells, .wells = wells, .positions_per_well = counts,
                         .well_positions = (const char *const *const *)names};
    st = ts_plate_write_layout(&L, err);
done:
    free(wells);
    free(counts);
    free(names);
    free(all);
    return st;
}

static ts_status write_truth(const sim_job *job, ts_error *err) {
    const ts_simulate_options *o = job->opt;
    ts_shifts *s = ts_shifts_new();
    if (!s) return ts_fail(err, TS_ERR_NOMEM, "out of memory");
    s->has_tile_shape = true;
    s->tile_shape[0] = job->true_h;
    s->tile_shape[1] = job->true_w;
    s->has_orientation = true;
    s->orientation = o->acquisition;
    s->names_yx = o->names_yx;
    ts_status st = TS_OK;
    for (int w = 0; w < job->nwells && st == TS_OK; w++) {
        int wi = ts_shifts_add_well(s, job->wells[w]);
        if (wi < 0 || !ts_shifts_ensure_positions(s, wi)) {
            st = ts_fail(err, TS_ERR_NOMEM, "out of memory");
            break;
        }
        double miny = INFINITY, minx = INFINITY;
        for (int i = 0; i < job->ntiles; i++)
            if (job->tiles[i].well == w) {
                if (job->tiles[i].oy < miny) miny = job->tiles[i].oy;
                if (job->tiles[i].ox < minx) minx = job->tiles[i].ox;
            }
        for (int i = 0; i < job->ntiles; i++) {
            const sim_tile *t = &job->tiles[i];
            if (t->well != w) continue;
            int ti = ts_shifts_add_tile(s, wi, t->name);
            if (ti < 0 || !ts_shifts_ensure_positions(s, wi)) {
                st = ts_fail(err, TS_ERR_NOMEM, "out of memory");
                break;
            }
            ts_well_shifts *ws = &s->wells[wi];
            ws->position[ti][0] = t->oy - miny;
            ws->position[ti][1] = t->ox - minx;
            ws->origin[ti][0] = llround(t->oy - miny);
            ws->origin[ti][1] = llround(t->ox - minx);
            ws->has_origin[ti] = true;
        }
    }
    if (st == TS_OK) st = ts_shifts_write(o->truth, s, err);
    ts_shifts_free(s);
    return st;
}

/* Every tile, then the plate and well groups (last: a plate never lists
 * positions that were not written), into job->root. */
static ts_status render(sim_job *job, ts_error *err) {
    ts_pool *pool = ts_pool_create(job->opt->threads);
    if (!pool) return ts_fail(err, TS_ERR_NOMEM, "cannot start the thread pool");
    int nw = ts_pool_size(pool);
    job->scratch = calloc((size_t)nw, sizeof *job->scratch);
    job->raw = calloc((size_t)nw, sizeof *job->raw);
    ts_status st = TS_OK;
    if (!job->scratch || !job->raw) st = ts_fail(err, TS_ERR_NOMEM, "out of memory");
    if (st == TS_OK) st = ts_pool_run(pool, job->ntiles, write_tile, job, err);
    ts_pool_destroy(pool);
    for (int i = 0; i < nw && job->scratch && job->raw; i++) {
        free(job->scratch[i]);
        free(job->raw[i]);
    }
    free(job->scratch);
    free(job->raw);
    job->scratch = NULL, job->raw = NULL;
    return st != TS_OK ? st : write_layout(job, err);
}

ts_status ts_simulate(const ts_simulate_options *o, ts_error *err) {
    ts_status st = check_options(o, err);
    if (st != TS_OK) return st;
    sim_job job = {.opt = o, .acq = o->acquisition};
    job.acq.rot90 = ts_orient_k(&o->acquisition);
    job.raw_h = o->tile_h, job.raw_w = o->tile_w;
    int64_t th, tw;
    ts_orient_shape(&job.acq, o->tile_h, o->tile_w, &th, &tw);
    job.true_h = (int)th, job.true_w = (int)tw;
    int ov = o->overlap >= 0 ? o->overlap : -1;
    if (ov >= job.true_h || ov >= job.true_w)
        return ts_fail(err, TS_ERR_ARG, "overlap %d px is not smaller than the tile (%dx%d)", ov,
                       job.true_h, job.true_w);
    if ((st = parse_wells(o->wells && *o->wells ? o->wells : "A/1", &job.wells, &job.nwells,
                          err)) != TS_OK)
        goto done;
    if ((st = plan_tiles(&job, err)) != TS_OK) goto done;
    /* The truth file is no part of the store, and not inside it. */
    const char *inputs[1] = {o->output};
    if (o->truth && (st = ts_check_output_path("--truth", o->truth, inputs, 1, err)) != TS_OK) goto done;
    /* Built beside the output and swapped in whole (ts_plate_output): a
     * failed or killed run leaves the previous plate as it was. */
    ts_plate_output po;
    if ((st = ts_plate_output_begin(&po, o->output, "simulate", NULL, 0, err)) != TS_OK) goto done;
    job.root = po.staged.build;
    st = render(&job, err);
    if ((st = ts_plate_output_end(&po, st, err)) != TS_OK) goto done;
    if (o->truth) st = write_truth(&job, err);
done:
    free(job.tiles);
    free(job.wells);
    return st;
}

