/* tessera import: a folder of TIFF tiles as an OME-Zarr HCS plate.
 *
 * Order of work, so that a bad folder costs nothing and a failed run leaves
 * nothing: list the folder and map matching names to grid cells; open every
 * TIFF's header (in parallel) and check that all tiles are greyscale of one
 * size, dtype and page count; only then create the store, write the tiles
 * (in parallel, one image group per tile through the ome/zarr writers, as
 * simulate does) and last the plate and well groups, so a killed run never
 * leaves a plate listing positions that were not written. A failure after
 * the store was created removes it. */
#include "tessera/tessera.h"

#include <ctype.h>
#include <dirent.h>
#include <limits.h>
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/error.h"
#include "common/fs.h"
#include "common/pool.h"
#include "import/ome_xml.h"
#include "import/pattern.h"
#include "import/tiff_read.h"
#include "ome/ome.h"
#include "ome/window.h"
#include "zarr/zarr.h"

void ts_import_options_init(ts_import_options *opt) {
    memset(opt, 0, sizeof *opt);
    opt->pattern = "r{row}_c{col}.tif";
    opt->well = "A/1";
    opt->format = TS_OME_05;
    opt->codec = TS_CODEC_ZSTD;
    opt->scale_y = opt->scale_x = 0; /* the OME-XML's, else 1 */
}

typedef struct imp_tile {
    char *file;     /* name inside the folder */
    long num[3];    /* row, column, index as the name gives them */
    int gx, gy;     /* grid column, row (from 0) */
    char name[8];   /* position XXXYYY */
    ti_tiff_info info;
    bool bad;       /* its header failed the checks */
    /* What its OME-XML says (the few fields of ti_ome_meta kept per tile:
     * plates have up to 10^6 tiles). */
    bool has_sy, has_sx, has_pos, pos_assumed;
    double sy, sx, pos_y, pos_x; /* micrometres */
} imp_tile;

typedef struct imp_job {
    const ts_import_options *opt;
    char *input;            /* folder path without a trailing '/' */
    const char *root;       /* where the plate is built (beside the output, swapped in at the end) */
    imp_tile *tiles;
    int64_t ntiles;
    ti_tiff_info info;      /* every tile's */
    int64_t bh, bw;         /* storage block (chunk, or shard) of a plane */
    void **plane, **block;  /* per-worker buffers */
    pthread_mutex_t progress_lock;
    int64_t done;
    /* From the OME-XML: the first tile's channel names, and what is written
     * for all tiles (resolve_ome). */
    int nnames;
    char names[TI_OME_MAX_CHANNELS][64];
    double scale_y, scale_x;
    bool scale_from_ome, names_from_ome, positions, pos_assumed;
} imp_job;

static ts_status check_options(const ts_import_options *o, ti_pattern *pat, ts_error *err) {
    if (!o->input || !*o->input) return ts_fail(err, TS_ERR_ARG, "import: no input folder");
    if (!o->output || !*o->output) return ts_fail(err, TS_ERR_ARG, "import: no output path");
    ts_status st = ti_pattern_parse(o->pattern, pat, err);
    if (st != TS_OK) return st;
    char row[16], col[16];
    if ((st = ts_well_split(o->well, row, col, err)) != TS_OK) return st;
    if (o->first_index != 0 && o->first_index != 1)
        return ts_fail(err, TS_ERR_ARG, "first index %d: must be 0 or 1", o->first_index);
    if (o->grid_cols < 0 || o->grid_rows < 0 || o->grid_cols > 999 || o->grid_rows > 999 ||
        (o->grid_cols == 0) != (o->grid_rows == 0))
        return ts_fail(err, TS_ERR_ARG, "grid %dx%d: each side must be 1..999", o->grid_cols,
                       o->grid_rows);
    if (pat->has_index && o->grid_cols == 0)
        return ts_fail(err, TS_ERR_ARG, "pattern '%s' numbers tiles with {index}: give the grid "
                                        "they fill (--grid COLSxROWS)", o->pattern);
    if (o->order < TS_ORDER_ROW || o->order > TS_ORDER_SNAKE_COLUMN)
        return ts_fail(err, TS_ERR_ARG, "order %d: not row, column, snake-row or snake-column",
                       (int)o->order);
    if (!pat->has_index && o->order != TS_ORDER_ROW)
        return ts_fail(err, TS_ERR_ARG, "pattern '%s' names rows and columns: an acquisition order "
                                        "applies to a running {index} only", o->pattern);
    if (o->format != TS_OME_04 && o->format != TS_OME_05)
        return ts_fail(err, TS_ERR_ARG, "format must be 0.4 or 0.5");
    if (o->chunk < 0 || o->chunk > 65536)
        return ts_fail(err, TS_ERR_ARG, "chunk %d px: must be 0 (whole tile) to 65536", o->chunk);
    ts_status cst = ts_codec_check_level(o->codec, o->codec_level, err);
    if (cst) return cst;
    bool from_files = o->scale_y == 0 && o->scale_x == 0;
    if (!from_files && (!(o->scale_y > 0) || !(o->scale_x > 0) || !isfinite(o->scale_y) ||
                        !isfinite(o->scale_x)))
        return ts_fail(err, TS_ERR_ARG, "pixel size %g,%g: must be finite and > 0 (or both 0: from "
                       "the OME-XML)", o->scale_y, o->scale_x);
    return TS_OK;
}

static int cmp_tiles(const void *a, const void *b) {
    const imp_tile *x = a, *y = b;
    if (x->gy != y->gy) return x->gy < y->gy ? -1 : 1;
    if (x->gx != y->gx) return x->gx < y->gx ? -1 : 1;
    return strcmp(x->file, y->file);
}

/* Grid cell of a matched name; an index outside the grid is an error
 * naming the file. */
static ts_status place(const imp_job *job, const ti_pattern *pat, const char *file, long row,
                       long col, long index, imp_tile *t, ts_error *err) {
    const ts_import_options *o = job->opt;
    long first = o->first_index;
    if (pat->has_index) {
        long i = index - first;
        long n = (long)o->grid_cols * o->grid_rows;
        if (i < 0 || i >= n)
            return ts_fail(err, TS_ERR_FORMAT,
                           "%s/%s: index %ld is outside the %dx%d grid (indices %ld..%ld)", job->input,
                           file, index, o->grid_cols, o->grid_rows, first, first + n - 1);
        long C = o->grid_cols, R = o->grid_rows;
        switch (o->order) {
        case TS_ORDER_COLUMN: row = i % R, col = i / R; break;
        case TS_ORDER_SNAKE_ROW:
            row = i / C, col = i % C;
            if (row % 2) col = C - 1 - col; /* odd rows run back */
            break;
        case TS_ORDER_SNAKE_COLUMN:
            col = i / R, row = i % R;
            if (col % 2) row = R - 1 - row;
            break;
        default: col = i % C, row = i / C; break;
        }
    } else {
        row -= first, col -= first;
        if (row < 0 || col < 0)
            return ts_fail(err, TS_ERR_FORMAT, "%s/%s: row or column below the first index %ld",
                           job->input, file, first);
        long cols = o->grid_cols ? o->grid_cols : 999, rows = o->grid_rows ? o->grid_rows : 999;
        if (col >= cols || row >= rows)
            return ts_fail(err, TS_ERR_FORMAT, "%s/%s: column %ld, row %ld is outside the %ldx%ld grid",
                           job->input, file, col + first, row + first, cols, rows);
    }
    t->gx = (int)col, t->gy = (int)row;
    return TS_OK;
}

/* How the names fit the grid if they count from `first`: files outside it,
 * the cells (up to TI_FIT_NAMED of them named) without a file, and whether
 * the grid's first row and column would all be empty. */
#define TI_FIT_NAMED 6
typedef struct imp_fit {
    long cols, rows;      /* the grid (given, or spanned by the names that fit) */
    int64_t outside, found, missing;
    const char *outside_file[3];
    long missing_cell[TI_FIT_NAMED][2]; /* column, row as named */
    bool empty_margin;
    bool twice;           /* two names on one cell (list_tiles names them) */
} imp_fit;

static ts_status fit_grid(const imp_job *job, const ti_pattern *pat, long first, imp_fit *f, ts_error *err) {
    const ts_import_options *o = job->opt;
    memset(f, 0, sizeof *f);
    long bound_c = o->grid_cols ? o->grid_cols : 999, bound_r = o->grid_rows ? o->grid_rows : 999;
    long min_r = LONG_MAX, min_c = LONG_MAX, max_r = -1, max_c = -1;
    for (int64_t i = 0; i < job->ntiles; i++) {
        const imp_tile *t = &job->tiles[i];
        bool in;
        if (pat->has_index) {
            long k = t->num[2] - first;
            in = k >= 0 && k < bound_c * bound_r;
        } else {
            long r = t->num[0] - first, c = t->num[1] - first;
            in = r >= 0 && c >= 0 && r < bound_r && c < bound_c;
            if (in) {
                if (r < min_r) min_r = r;
                if (c < min_c) min_c = c;
                if (r > max_r) max_r = r;
                if (c > max_c) max_c = c;
            }
        }
        if (!in && f->outside < 3) f->outside_file[f->outside] = t->file;
        f->outside += !in;
    }
    f->found = job->ntiles - f->outside;
    f->cols = o->grid_cols ? o->grid_cols : max_c + 1;
    f->rows = o->grid_rows ? o->grid_rows : max_r + 1;
    if (pat->has_index) f->cols = bound_c, f->rows = bound_r;
    f->empty_margin = !pat->has_index && f->found > 0 && min_r >= 1 && min_c >= 1;
    if (f->found == 0 || f->cols <= 0 || f->rows <= 0) return TS_OK;
    /* the cells without a file, in the names' numbering */
    size_t cells = (size_t)f->cols * (size_t)f->rows;
    unsigned char *seen = calloc(cells, 1);
    if (!seen) return ts_fail(err, TS_ERR_NOMEM, "out of memory checking the grid of %s", job->input);
    for (int64_t i = 0; i < job->ntiles; i++) {
        const imp_tile *t = &job->tiles[i];
        long k = pat->has_index ? t->num[2] - first
                                : (t->num[0] - first) * f->cols + (t->num[1] - first);
        bool in = pat->has_index ? k >= 0 && (size_t)k < cells
                                 : t->num[0] - first >= 0 && t->num[0] - first < f->rows &&
                                       t->num[1] - first >= 0 && t->num[1] - first < f->cols;
        if (in && seen[k]) f->twice = true;
        if (in) seen[k] = 1;
    }
    for (size_t k = 0; k < cells; k++) {
        if (seen[k]) continue;
        if (f->missing < TI_FIT_NAMED) {
            f->missing_cell[f->missing][0] = pat->has_index ? (long)k + first : (long)(k % (size_t)f->cols) + first;
            f->missing_cell[f->missing][1] = pat->has_index ? -1 : (long)(k / (size_t)f->cols) + first;
        }
        f->missing++;
    }
    free(seen);
    return TS_OK;
}

/* Names counted from 1 imported with --first-index 0 leave the grid's
 * first row and column empty (or put the last index outside it); names
 * counted from 0 with --first-index 1 fall below it. Either way, when the
 * other first index fits every name, the import stops naming what is
 * missing and the first index to use, instead of writing a plate with an
 * empty row and column. */
static ts_status check_first_index(const imp_job *job, const ti_pattern *pat, ts_error *err) {
    long first = job->opt->first_index, other = 1 - first;
    imp_fit a, b;
    ts_status st;
    if ((st = fit_grid(job, pat, first, &a, err)) != TS_OK) return st;
    if (a.twice || (a.outside == 0 && !a.empty_margin)) return TS_OK;
    if ((st = fit_grid(job, pat, other, &b, err)) != TS_OK) return st;
    if (b.outside != 0 || b.empty_margin) return TS_OK; /* not an off-by-one: place() says what */
    char missing[512] = "", outside[512] = "";
    size_t n = 0;
    for (int64_t m = 0; m < a.missing && m < TI_FIT_NAMED && n < sizeof missing; m++) {
        if (pat->has_index)
            n += (size_t)snprintf(missing + n, sizeof missing - n, "%sindex %ld", m ? ", " : "", a.missing_cell[m][0]);
        else
            n += (size_t)snprintf(missing + n, sizeof missing - n, "%scolumn %ld row %ld", m ? ", " : "",
                                  a.missing_cell[m][0], a.missing_cell[m][1]);
    }
    if (a.missing > TI_FIT_NAMED && n < sizeof missing)
        snprintf(missing + n, sizeof missing - n, " and %lld more", (long long)(a.missing - TI_FIT_NAMED));
    n = 0;
    for (int64_t m = 0; m < a.outside && m < 3 && n < sizeof outside; m++)
        n += (size_t)snprintf(outside + n, sizeof outside - n, "%s%s", m ? ", " : "", a.outside_file[m]);
    if (a.outside > 3 && n < sizeof outside)
        snprintf(outside + n, sizeof outside - n, " and %lld more", (long long)(a.outside - 3));
    char grid[64];
    snprintf(grid, sizeof grid, "%ldx%ld", a.cols, a.rows);
    return ts_fail(err, TS_ERR_FORMAT,
                   "%s: with --first-index %ld, %lld of the %lld cells of the %s grid have a file%s%s%s%s%s%s%s; "
                   "the names count from %ld: use --first-index %ld",
                   job->input, first, (long long)a.found, (long long)(a.cols * a.rows), a.found ? grid : "",
                   a.missing ? " (missing: " : "", missing, a.missing ? ")" : "",
                   a.outside ? (a.outside == 1 ? " and 1 file lies outside it (" : " and files lie outside it (")
                             : "",
                   outside, a.outside ? ")" : "",
                   a.empty_margin ? ": its first row and column are empty" : "", other, other);
}

static ts_status list_tiles(imp_job *job, const ti_pattern *pat, ts_error *err) {
    DIR *d = opendir(job->input);
    if (!d) return ts_fail(err, TS_ERR_IO, "cannot read folder %s: %s", job->input, strerror(errno));
    size_t cap = 0;
    ts_status st = TS_OK;
    struct dirent *e;
    while (st == TS_OK && (e = readdir(d)) != NULL) {
        long row = 0, col = 0, index = 0;
        if (!ti_pattern_match(pat, e->d_name, &row, &col, &index)) continue;
        if ((size_t)job->ntiles == cap) {
            cap = cap ? 2 * cap : 64;
            imp_tile *grown = realloc(job->tiles, cap * sizeof *grown);
            if (!grown) {
                st = ts_fail(err, TS_ERR_NOMEM, "out of memory listing %s", job->input);
                break;
            }
            job->tiles = grown;
        }
        imp_tile *t = &job->tiles[job->ntiles];
        memset(t, 0, sizeof *t);
        if (!(t->file = strdup(e->d_name))) {
            st = ts_fail(err, TS_ERR_NOMEM, "out of memory listing %s", job->input);
            break;
        }
        job->ntiles++;
        t->num[0] = row, t->num[1] = col, t->num[2] = index;
    }
    closedir(d);
    if (st != TS_OK) return st;
    if (job->ntiles == 0)
        return ts_fail(err, TS_ERR_IO, "no file in %s matches the pattern '%s'", job->input,
                       job->opt->pattern);
    if ((st = check_first_index(job, pat, err)) != TS_OK) return st;
    for (int64_t i = 0; st == TS_OK && i < job->ntiles; i++) {
        imp_tile *t = &job->tiles[i];
        st = place(job, pat, t->file, t->num[0], t->num[1], t->num[2], t, err);
    }
    if (st != TS_OK) return st;
    qsort(job->tiles, (size_t)job->ntiles, sizeof *job->tiles, cmp_tiles);
    for (int64_t i = 1; i < job->ntiles; i++) {
        const imp_tile *a = &job->tiles[i - 1], *b = &job->tiles[i];
        if (a->gx == b->gx && a->gy == b->gy)
            return ts_fail(err, TS_ERR_FORMAT, "%s: %s and %s are both grid column %d, row %d",
                           job->input, a->file, b->file, a->gx + job->opt->first_index,
                           a->gy + job->opt->first_index);
    }
    return TS_OK;
}

static void tile_path(const imp_job *job, const imp_tile *t, char *out, size_t n) {
    snprintf(out, n, "%s/%s", job->input, t->file);
}

/* One more tile done; the callback is called under a lock, in order of
 * completion (the CLI's progress line keeps state between calls). */
static void report_progress(imp_job *job, const char *stage) {
    if (!job->opt->progress) return;
    pthread_mutex_lock(&job->progress_lock);
    job->done++;
    job->opt->progress(job->opt->progress_user, stage, job->done, job->ntiles);
    pthread_mutex_unlock(&job->progress_lock);
}

static ts_status probe_tile(void *user, int64_t index, int worker, ts_error *err) {
    (void)worker;
    imp_job *job = user;
    imp_tile *t = &job->tiles[index];
    char path[4400];
    tile_path(job, t, path, sizeof path);
    ti_tiff *tif = NULL;
    ts_status st = ti_tiff_open(path, TS_MAX_CHANNELS, &tif, &t->info, err);
    const char *desc = st == TS_OK ? ti_tiff_description(tif) : NULL;
    if (desc) {
        ti_ome_meta m;
        st = ti_ome_parse(path, t->file, desc, strlen(desc), &m, err);
        if (st == TS_OK) {
            t->has_sy = m.has_size_y, t->has_sx = m.has_size_x, t->sy = m.size_y_um, t->sx = m.size_x_um;
            t->has_pos = m.has_position, t->pos_assumed = m.position_unit_assumed;
            t->pos_y = m.pos_y_um, t->pos_x = m.pos_x_um;
            if (index == 0) {
                job->nnames = m.nchannels;
                memcpy(job->names, m.channel_names, sizeof job->names);
            }
        }
    }
    t->bad = st != TS_OK;
    ti_tiff_close(tif);
    report_progress(job, "headers");
    return st;
}

/* A tile's pixel size from its OME-XML: Y and X, one standing for the
 * other when only it is given; false without either. */
static bool tile_scale(const imp_tile *t, double *sy, double *sx) {
    if (!t->has_sy && !t->has_sx) return false;
    *sy = t->has_sy ? t->sy : t->sx;
    *sx = t->has_sx ? t->sx : t->sy;
    return true;
}

static bool same_size(double a, double b) { return fabs(a - b) <= 1e-9 * fmax(fabs(a), fabs(b)); }

/* What the OME-XML gives for the whole plate: one pixel size (unless
 * --scale says it), the first tile's channel names when it names one per
 * page, and the stage positions when every tile has one. Tiles that
 * disagree on the pixel size, or a stage position on some tiles only, are
 * refused naming two of them: a plate has one pixel size, and positions for
 * some fields only cannot place the others. */
static ts_status resolve_ome(imp_job *job, ts_error *err) {
    const ts_import_options *o = job->opt;
    const imp_tile *t0 = &job->tiles[0];
    char p0[4400], pi[4400];
    tile_path(job, t0, p0, sizeof p0);
    job->scale_y = o->scale_y, job->scale_x = o->scale_x;
    if (!(o->scale_y > 0)) {
        double sy = 1, sx = 1;
        job->scale_from_ome = tile_scale(t0, &sy, &sx);
        for (int64_t i = 1; i < job->ntiles; i++) {
            const imp_tile *t = &job->tiles[i];
            double ty = 1, tx = 1;
            bool has = tile_scale(t, &ty, &tx);
            if (has == job->scale_from_ome && (!has || (same_size(ty, sy) && same_size(tx, sx)))) continue;
            tile_path(job, t, pi, sizeof pi);
            char a[96], b[96];
            snprintf(a, sizeof a, has ? "%g x %g um" : "none", ty, tx);
            snprintf(b, sizeof b, job->scale_from_ome ? "%g x %g um" : "none", sy, sx);
            return ts_fail(err, TS_ERR_FORMAT,
                           "%s has OME-XML pixel size (PhysicalSizeY x PhysicalSizeX) %s but %s has %s: "
                           "a plate has one pixel size (--scale Y,X sets it for all tiles)", pi, a, p0, b);
        }
        job->scale_y = sy, job->scale_x = sx;
    }
    int64_t with = 0;
    const imp_tile *lacking = NULL, *having = NULL;
    for (int64_t i = 0; i < job->ntiles; i++) {
        const imp_tile *t = &job->tiles[i];
        if (t->has_pos) with++, having = having ? having : t, job->pos_assumed |= t->pos_assumed;
        else if (!lacking) lacking = t;
    }
    if (with > 0 && lacking) {
        tile_path(job, lacking, pi, sizeof pi);
        tile_path(job, having, p0, sizeof p0);
        return ts_fail(err, TS_ERR_FORMAT,
                       "%s has no stage position (OME-XML Plane PositionX, PositionY) but %s has one "
                       "(%lld of %lld tiles have): positions are written for all tiles or none", pi, p0,
                       (long long)with, (long long)job->ntiles);
    }
    job->positions = with > 0;
    job->names_from_ome = false;
    if (job->nnames == job->info.pages)
        for (int c = 0; c < job->nnames; c++) job->names_from_ome |= job->names[c][0] != '\0';
    return TS_OK;
}

/* Every header in parallel; then, in grid order, the first bad tile's
 * message or the first tile unlike the first one. (ts_pool_run reports the
 * lowest bad index and starts every tile before it, so the loop meets no
 * unprobed tile before the first bad one.) */
static ts_status check_tiles(imp_job *job, ts_pool *pool, ts_error *err) {
    ts_error bad_err;
    ts_status bad = ts_pool_run(pool, job->ntiles, probe_tile, job, &bad_err);
    for (int64_t i = 0; i < job->ntiles; i++) {
        const imp_tile *t = &job->tiles[i];
        char path[4400];
        tile_path(job, t, path, sizeof path);
        if (t->bad) {
            if (err) *err = bad_err;
            return bad;
        }
        const ti_tiff_info *a = &job->tiles[0].info, *b = &t->info;
        if (a->height != b->height || a->width != b->width || a->dtype != b->dtype ||
            a->pages != b->pages)
            return ts_fail(err, TS_ERR_FORMAT,
                           "%s is %lldx%lld %s with %d page%s but %s is %lldx%lld %s with %d page%s: "
                           "all tiles must have one size, dtype and page count",
                           path, (long long)b->height, (long long)b->width, ts_dtype_name(b->dtype),
                           b->pages, b->pages == 1 ? "" : "s", job->tiles[0].file,
                           (long long)a->height, (long long)a->width, ts_dtype_name(a->dtype),
                           a->pages, a->pages == 1 ? "" : "s");
    }
    job->info = job->tiles[0].info;
    return resolve_ome(job, err);
}

/* The store's arrays: chunk = the whole plane by default; with a chunk
 * size, 0.4 stores (cy, cx) chunks and 0.5 one shard per plane of such
 * inner chunks (one file per channel plane, like one TIFF page). */
static void array_meta(const imp_job *job, tz_array_meta *am) {
    const ts_import_options *o = job->opt;
    bool v3 = o->format == TS_OME_05;
    int64_t H = job->info.height, W = job->info.width;
    tz_array_meta_init(am, v3 ? 3 : 2);
    am->ndim = 5;
    int64_t shape[5] = {1, job->info.pages, 1, H, W};
    int64_t cy = o->chunk > 0 && o->chunk < H ? o->chunk : H;
    int64_t cx = o->chunk > 0 && o->chunk < W ? o->chunk : W;
    for (int d = 0; d < 5; d++) {
        am->shape[d] = shape[d];
        am->chunk[d] = d < 3 ? 1 : d == 3 ? cy : cx;
    }
    am->dtype = job->info.dtype;
    am->fill_value = 0;
    am->separator = '/';
    if (!v3) {
        am->key_encoding = TZ_KEY_V2;
    } else {
        static const char *const names[5] = {"t", "c", "z", "y", "x"};
        for (int d = 0; d < 5; d++) snprintf(am->dimension_names[d], 16, "%s", names[d]);
        if (cy < H || cx < W) {
            am->sharded = true;
            for (int d = 0; d < 5; d++) am->sharding.inner_chunk[d] = am->chunk[d];
            am->chunk[3] = (H + cy - 1) / cy * cy;
            am->chunk[4] = (W + cx - 1) / cx * cx;
        }
    }
    tz_meta_set_codec_level(am, o->codec, o->codec_level);
}

static void image_meta(const imp_job *job, const imp_tile *t, ts_image_meta *meta) {
    ts_image_meta_default(meta, job->info.pages);
    meta->scale[3] = job->scale_y;
    meta->scale[4] = job->scale_x;
    for (int c = 0; job->names_from_ome && c < job->info.pages; c++)
        if (job->names[c][0])
            snprintf(meta->channel_labels[c], sizeof meta->channel_labels[c], "%s", job->names[c]);
    if (job->positions) {
        /* the stage position of the field's first pixel, in micrometres
         * like the scale it follows (NGFF: translation after scale) */
        meta->has_translation = true;
        meta->translation[3] = t->pos_y;
        meta->translation[4] = t->pos_x;
    }
    snprintf(meta->space_unit, sizeof meta->space_unit, "micrometer");
    double hi = job->info.dtype == TS_UINT8 ? 255 : 65535;
    for (int c = 0; c < job->info.pages; c++) {
        meta->has_window[c] = true;
        meta->window[c][0] = 0, meta->window[c][1] = hi;
        meta->window[c][2] = 0, meta->window[c][3] = hi;
    }
}

/* Writes one plane (page) as storage blocks, each cut from the plane with
 * the part beyond the edge set to the fill value 0. */
static ts_status write_plane(imp_job *job, tz_array *arr, int c, const uint8_t *plane,
                             uint8_t *block, ts_error *err) {
    int64_t H = job->info.height, W = job->info.width, bh = job->bh, bw = job->bw;
    size_t es = ts_dtype_size(job->info.dtype);
    for (int64_t by = 0; by * bh < H; by++)
        for (int64_t bx = 0; bx * bw < W; bx++) {
            int64_t idx[5] = {0, c, 0, by, bx};
            const void *data = plane;
            if (bh != H || bw != W) {
                int64_t y0 = by * bh, x0 = bx * bw;
                int64_t rows = H - y0 < bh ? H - y0 : bh, cols = W - x0 < bw ? W - x0 : bw;
                if (rows < bh || cols < bw) memset(block, 0, (size_t)(bh * bw) * es);
                for (int64_t r = 0; r < rows; r++)
                    memcpy(block + (size_t)(r * bw) * es, plane + (size_t)((y0 + r) * W + x0) * es,
                           (size_t)cols * es);
                data = block;
            }
            ts_status st = tz_array_write_block(arr, idx, data, err);
            if (st != TS_OK) return st;
        }
    return TS_OK;
}

static ts_status write_tile(void *user, int64_t index, int worker, ts_error *err) {
    imp_job *job = user;
    const ts_import_options *o = job->opt;
    const imp_tile *t = &job->tiles[index];
    char path[4400], image[4200], arrpath[4300];
    tile_path(job, t, path, sizeof path);
    snprintf(image, sizeof image, "%s/%s/%s", job->root, o->well, t->name);
    snprintf(arrpath, sizeof arrpath, "%s/0", image);
    size_t es = ts_dtype_size(job->info.dtype);
    size_t plane_bytes = (size_t)(job->info.height * job->info.width) * es;
    if (!job->plane[worker]) job->plane[worker] = malloc(plane_bytes);
    if (!job->block[worker]) job->block[worker] = malloc((size_t)(job->bh * job->bw) * es);
    if (!job->plane[worker] || !job->block[worker])
        return ts_fail(err, TS_ERR_NOMEM, "%s: out of memory for a %lldx%lld tile", path,
                       (long long)job->info.height, (long long)job->info.width);

    ts_image_meta meta;
    image_meta(job, t, &meta);
    ts_status st;
    tz_array_meta am;
    array_meta(job, &am);
    tz_array *arr = NULL;
    if ((st = tz_array_create(arrpath, &am, &arr, err)) != TS_OK) return st;
    ti_tiff *tif = NULL;
    ti_tiff_info info;
    st = ti_tiff_open(path, TS_MAX_CHANNELS, &tif, &info, err);
    /* the file changed since its header was checked */
    if (st == TS_OK && (info.height != job->info.height || info.width != job->info.width ||
                        info.dtype != job->info.dtype || info.pages != job->info.pages))
        st = ts_fail(err, TS_ERR_FORMAT, "%s changed while being imported", path);
    for (int c = 0; st == TS_OK && c < job->info.pages; c++) {
        if ((st = ti_tiff_read_page(tif, c, job->plane[worker], err)) != TS_OK) break;
        st = write_plane(job, arr, c, job->plane[worker], job->block[worker], err);
        /* The display window from the tile's pixels (ome/window.h); the
         * image metadata is written after them. */
        if (st == TS_OK)
            ome_window_of_plane(&meta, c, job->info.dtype, job->plane[worker],
                                (size_t)(job->info.height * job->info.width));
    }
    ti_tiff_close(tif);
    tz_array_close(arr);
    if (st == TS_OK) st = ts_image_write_meta(image, o->format, &meta, 1, err);
    if (st != TS_OK) return st;
    report_progress(job, "import");
    return TS_OK;
}

static ts_status write_layout(const imp_job *job, ts_error *err) {
    const char **names = calloc((size_t)job->ntiles, sizeof *names);
    if (!names) return ts_fail(err, TS_ERR_NOMEM, "out of memory");
    for (int64_t i = 0; i < job->ntiles; i++) names[i] = job->tiles[i].name;
    const char *wells[1] = {job->opt->well};
    ts_plate_layout L = {.path = job->root, .version = job->opt->format,
                         .name = "tessera import", .nwells = 1, .wells = wells,
                         .npositions = (int)job->ntiles, .positions = names};
    ts_status st = ts_plate_write_layout(&L, err);
    free(names);
    return st;
}

static ts_status write_store(imp_job *job, ts_pool *pool, ts_error *err) {
    int nw = ts_pool_size(pool);
    job->plane = calloc((size_t)nw, sizeof *job->plane);
    job->block = calloc((size_t)nw, sizeof *job->block);
    if (!job->plane || !job->block) return ts_fail(err, TS_ERR_NOMEM, "out of memory");
    tz_array_meta am;
    array_meta(job, &am);
    job->bh = am.chunk[3], job->bw = am.chunk[4];
    ts_status st = ts_pool_run(pool, job->ntiles, write_tile, job, err);
    for (int i = 0; i < nw; i++) {
        free(job->plane[i]);
        free(job->block[i]);
    }
    return st != TS_OK ? st : write_layout(job, err);
}

ts_status ts_import(const ts_import_options *o, ts_import_result *result, ts_error *err) {
    ti_pattern pat;
    ts_status st = check_options(o, &pat, err);
    if (st != TS_OK) return st;
    imp_job job = {.opt = o};
    pthread_mutex_init(&job.progress_lock, NULL);
    ts_pool *pool = NULL;
    if (!(job.input = strdup(o->input))) {
        st = ts_fail(err, TS_ERR_NOMEM, "out of memory");
        goto done;
    }
    for (size_t n = strlen(job.input); n > 1 && job.input[n - 1] == '/'; n--) job.input[n - 1] = '\0';
    if ((st = list_tiles(&job, &pat, err)) != TS_OK) goto done;
    int cols = o->grid_cols, rows = o->grid_rows;
    for (int64_t i = 0; !o->grid_cols && i < job.ntiles; i++) {
        if (job.tiles[i].gx + 1 > cols) cols = job.tiles[i].gx + 1;
        if (job.tiles[i].gy + 1 > rows) rows = job.tiles[i].gy + 1;
    }
    for (int64_t i = 0; i < job.ntiles; i++) {
        imp_tile *t = &job.tiles[i];
        snprintf(t->name, sizeof t->name, "%03d%03d", o->names_yx ? t->gy : t->gx,
                 o->names_yx ? t->gx : t->gy);
    }
    ti_ome_init(); /* before threads parse OME-XML */
    if (!(pool = ts_pool_create(o->threads))) {
        st = ts_fail(err, TS_ERR_NOMEM, "cannot start the thread pool");
        goto done;
    }
    if ((st = check_tiles(&job, pool, err)) != TS_OK) goto done;
    job.done = 0;
    /* Built beside the output and swapped in whole (ts_plate_output): a
     * failed or killed run leaves the previous plate as it was, and an
     * output holding or inside the input folder is refused. */
    ts_plate_output po;
    const char *inputs[1] = {job.input};
    if ((st = ts_plate_output_begin(&po, o->output, "import", inputs, 1, err)) != TS_OK) goto done;
    job.root = po.staged.build;
    st = write_store(&job, pool, err);
    if ((st = ts_plate_output_end(&po, st, err)) != TS_OK) goto done;
    if (result) {
        result->tiles = job.ntiles;
        result->grid_cols = cols, result->grid_rows = rows;
        result->missing = (int64_t)cols * rows - job.ntiles;
        result->tile_h = job.info.height, result->tile_w = job.info.width;
        result->channels = job.info.pages;
        result->dtype = job.info.dtype;
        result->scale_y = job.scale_y, result->scale_x = job.scale_x;
        result->scale_from_ome = job.scale_from_ome;
        result->names_from_ome = job.names_from_ome;
        result->positions = job.positions;
        result->position_unit_assumed = job.positions && job.pos_assumed;
    }
done:
    if (pool) ts_pool_destroy(pool);
    for (int64_t i = 0; i < job.ntiles; i++) free(job.tiles[i].file);
    free(job.tiles);
    free(job.input);
    free(job.plane);
    free(job.block);
    pthread_mutex_destroy(&job.progress_lock);
    return st;
}
