/* tessera estimate: tile positions from the images.
 *
 * For each well: grid coordinates from the position names, an edge from each
 * tile to its right (x + 1) and lower (y + 1) neighbour when it exists; every
 * edge registered by phase correlation of the overlap strips (all cores, one
 * registrar per worker and strip shape); then the global solve and the
 * shifts file. Tiles are read once into a bounded cache: edges are ordered
 * in vertical bands of grid columns, row by row inside a band, so that a
 * tile's (at most four) uses are close together in time. */
#include <math.h>
#include <stdio.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/error.h"
#include "common/outpath.h"
#include "common/pages.h"
#include "common/orient.h"
#include "common/pool.h"
#include "mpi/dist.h"
#include "ome/ome.h"
#include "register/estimate_internal.h"
#include "solve/solve.h"
#include "register/register.h"
#include "register/tile_cache.h"
#include "register/content.h"
#include "register/stage_model.h"
#include "register/bridge.h"
#include "shifts/shifts.h"

void ts_estimate_options_init(ts_estimate_options *opt) {
    memset(opt, 0, sizeof *opt);
    opt->overlap_x = opt->overlap_y = 0; /* required */
    opt->cache_bytes = (size_t)1 << 30;
    ts_solve_options_init(&opt->solve);
}

typedef struct edge {
    int well, a, b; /* position indices within the well */
    int gx, gy;     /* grid cell of tile a */
    ts_pair_dir dir;
    int band;       /* scheduling band: gx / band width */
    int64_t canon;  /* index in the canonical (well, row, column, direction) order */
    int rank;       /* the rank whose share of the first pass's schedule held it */
    ts_register_result res;
    bool refused;   /* by the stage pass (ts_stage_pair.refused): res.matched is false */
    double stage_ey, stage_ex; /* the stage model's prediction (ts_stage_pair.ey/ex; est_ctx.staged) */
} edge;

typedef struct est_ctx {
    const ts_estimate_options *opt;
    ts_plate *plate;
    ts_pool *pool;        /* owned by the caller (ts_estimate_run) */
    int64_t *tile_base;   /* first tile id of each well */
    int64_t ntiles;
    int64_t raw_h, raw_w; /* tile plane before orientation */
    int64_t h, w;         /* after orientation */
    ts_dtype held;        /* the first tile's held dtype (held_dtype): the cache's tile size */
    size_t tile_bytes;    /* a tile of that dtype */
    int64_t fit;          /* tiles of that size --cache holds */
    char probe[64];       /* the tile they were read from ("A/1/000000"), for messages */
    ts_strip_geometry geom[2];
    ts_register_options reg;
    edge *edges;
    int64_t nedges;
    /* The stage pass's model, when it ran (staged): the edges' predictions
     * are its, for the check's disputed pairs. */
    ts_stage_model stage_model;
    bool staged;
    /* This rank's edges: [first, first + nlocal) of the schedule order
     * (all of them in one process). */
    int64_t first, nlocal;
    ts_tile_cache *cache;
    /* The stage model's pass re-reads tiles: when all this rank's fit the
     * cache, the first pass keeps those of the pairs the pass may redo
     * (ts_stage_may_redo) instead of decoding them again (kept[id]: tile id
     * holds one use more, given back after the pass). */
    bool keep_tiles;
    atomic_uchar *kept;
    /* The tiles' buffers (kept or not) are slots of one mapping, on huge pages where
     * the kernel has them (tile_arena), a dropped tile's slot taken by the
     * next tile read; arena_free[0, arena_nfree) are the free slots. */
    unsigned char *arena;
    size_t arena_bytes, arena_tile;
    int64_t *arena_free, arena_nfree, arena_nslots;
    pthread_mutex_t arena_mu;
    int64_t stage_tile_reads; /* decoded again by the stage pass's own cache */
    int64_t content_reads;    /* decoded for the content test (content_pass) */
    /* The decodes of the caches the overlap probes replaced (probe_pass),
     * for the run's tile_reads. (Its peak_cache_bytes stays the last
     * cache's: test_probes_keep_nothing compares the probes' own.) */
    int64_t replaced_tile_reads;
    double *content;          /* first rank: by tile id, the content of the tiles without a
                                 matched pair (content_pass; NULL: none without one) */
    bool *content_tested;     /* first rank: by tile id, whether content[id] was measured */
    bool *blank;              /* every rank: by tile id, tested and without content (the
                                 stage pass redoes none of their pairs); NULL: none */
    ts_content_check *content_check; /* the pattern learned (content_pass), every rank */
    ts_registrar **workers; /* [worker * 2 + dir], made lazily */
    atomic_llong done;
    pthread_mutex_t mu;   /* error and progress */
    ts_error err;
    bool failed;
    /* --guess: the file, and the guessed origin per tile (tile id order). */
    ts_shifts *guess;
    double (*guess_origin)[2];
    /* The diagonal pairs tried where grid pairs leave tiles outside their
     * well's largest group (bridge.h; the accepted ones matched; first
     * rank only). */
    ts_bridge *bridges;
    int64_t nbridges;
    /* Each tile's grid cell (gx, gy) from its name, by tile id (build_graph;
     * NULL where --positions pairs the tiles). */
    int (*cell)[2];
} est_ctx;

/* ------------------------------------------------------------ tile loading */

static void well_pos(const est_ctx *c, int64_t id, int *w, int *p) {
    int lo = 0, hi = c->plate->nwells - 1;
    while (lo < hi) { /* last well whose base <= id */
        int mid = (lo + hi + 1) / 2;
        if (c->tile_base[mid] <= id) lo = mid;
        else hi = mid - 1;
    }
    *w = lo;
    *p = (int)(id - c->tile_base[lo]);
}

/* A buffer for one tile: a free slot of the arena, the most recently
 * freed first (its pages are faulted in already), else malloc'd. */
static void *take_tile(est_ctx *c, size_t bytes) {
    void *out = NULL;
    if (c->arena && bytes == c->arena_tile) {
        pthread_mutex_lock(&c->arena_mu);
        if (c->arena_nfree > 0) out = c->arena + (size_t)c->arena_free[--c->arena_nfree] * bytes;
        pthread_mutex_unlock(&c->arena_mu);
    }
    return out ? out : malloc(bytes);
}

/* A tile buffer back (the cache's release): an arena slot is free again. */
static void release_tile(void *user, int64_t id, void *data) {
    (void)id;
    est_ctx *c = user;
    const unsigned char *b = (const unsigned char *)data;
    if (c->arena && b >= c->arena && b < c->arena + c->arena_bytes) {
        pthread_mutex_lock(&c->arena_mu);
        c->arena_free[c->arena_nfree++] = (int64_t)((size_t)(b - c->arena) / c->arena_tile);
        pthread_mutex_unlock(&c->arena_mu);
    } else {
        free(data);
    }
}

/* The tile buffers: one mapping on huge pages, with a slot for each tile
 * the cache can hold at once (nslots), faulted in only as slots are first
 * used; a dropped tile's slot is the next tile's (the most recently freed
 * first), so only the most tiles ever held at once are faulted in, not
 * every tile read. Decoded into fresh 4 KiB pages the 100 tiles of 256 px
 * of register_bench's first plate cost ~7,000 page faults, about 7% of its
 * estimate (perf stat, task-clock 173 -> 161 ms); malloc'd 2048^2 tiles
 * (16 MiB each, mapped afresh by glibc) made --no-stage-model's 3x3 plate
 * take 47,500 page faults. A tile beyond the slots (the cache exceeds its
 * budget while every tile it holds is in use) is malloc'd. Under
 * AddressSanitizer each tile keeps its own allocation, so an overrun of
 * one tile is not hidden in the next. Fails quietly: the tiles are then
 * malloc'd. */
static void tile_arena(est_ctx *c, int64_t nslots, size_t tile_bytes) {
#ifdef TS_ASAN
    (void)c, (void)nslots, (void)tile_bytes;
#else
    /* A later first pass (each overlap probe's) maps its own: the last
     * one's goes back first, so the pages the earlier passes faulted in
     * are not held through it (one mapping for all the passes: peak RSS
     * 104 against 75 MB on a 1024^2 plate estimated with a wrong
     * --overlap); unless a tile still holds a slot of it, then it serves
     * on. */
    if (c->arena) {
        if (c->arena_nfree < c->arena_nslots) return;
        ts_pages_unmap(c->arena, c->arena_bytes);
        free(c->arena_free);
        c->arena = NULL, c->arena_free = NULL, c->arena_bytes = 0, c->arena_nfree = c->arena_nslots = 0;
    }
    const size_t huge = (size_t)2 << 20;
    if (nslots <= 0 || tile_bytes == 0 || tile_bytes > (SIZE_MAX - huge) / (size_t)nslots) return;
    const size_t bytes = ((size_t)nslots * tile_bytes + huge - 1) / huge * huge;
    int64_t *free_slots = malloc((size_t)nslots * sizeof *free_slots);
    void *p = free_slots ? ts_pages_map(bytes, true, false) : NULL; /* faulted in as tiles are decoded */
    if (!p) {
        free(free_slots);
        return;
    }
    for (int64_t k = 0; k < nslots; k++) free_slots[k] = nslots - 1 - k; /* slot 0 taken first */
    c->arena = p, c->arena_bytes = bytes, c->arena_tile = tile_bytes;
    c->arena_free = free_slots, c->arena_nfree = c->arena_nslots = nslots;
#endif
}

/* How the tiles are held: in their own dtype where it is at most 4 bytes
 * (a uint16 tile is half its float copy, and only the strips registered
 * are converted, ts_samples), else as float32. */
static ts_dtype held_dtype(ts_dtype dt) {
    const size_t size = ts_dtype_size(dt);
    return size > 0 && size <= 4 ? dt : TS_FLOAT32;
}

/* Reads the chosen t/c/z plane of a tile, oriented, in its held dtype. */
static ts_status load_tile(void *user, int64_t id, void **data, ts_dtype *dtype, size_t *bytes, ts_error *err) {
    est_ctx *c = user;
    int w, p;
    well_pos(c, id, &w, &p);
    const ts_well_info *wi = &c->plate->wells[w];
    ts_image_meta meta;
    tz_array *arr = NULL;
    void *raw = NULL, *flat = NULL, *out = NULL;
    char path[4200];
    ts_plate_image_path(c->plate, w, p, path, sizeof path);
    ts_status st = ts_plate_open_array(c->plate, w, p, 0, &meta, &arr, err);
    if (st != TS_OK) goto fail;
    const tz_array_meta *am = tz_array_get_meta(arr);
    int64_t extent[5];
    ts_image_extent(&meta, am, extent);
    const int want[3] = {c->opt->timepoint, c->opt->channel, c->opt->z};
    static const char *const axis_name[3] = {"timepoint", "channel", "z"};
    for (int a = 0; a < 3; a++)
        if (want[a] >= extent[a]) {
            st = ts_fail(err, TS_ERR_ARG, "%s: %s %d requested but the tile has %lld", path,
                         axis_name[a], want[a], (long long)extent[a]);
            goto fail;
        }
    if ((st = ts_image_check_layout(&meta, path, err)) != TS_OK) goto fail;
    if (extent[3] != c->raw_h || extent[4] != c->raw_w) {
        st = ts_fail(err, TS_ERR_UNSUPPORTED, "%s: tile is %lldx%lld but the first tile is %lldx%lld",
                     path, (long long)extent[3], (long long)extent[4],
                     (long long)c->raw_h, (long long)c->raw_w);
        goto fail;
    }
    const int64_t start5[5] = {want[0], want[1], want[2], 0, 0};
    const int64_t count5[5] = {1, 1, 1, c->raw_h, c->raw_w};
    int64_t start[TZ_MAX_DIM], count[TZ_MAX_DIM];
    if ((st = ts_image_box(meta.axis_index, meta.ndim, am, start5, count5, start, count, path, err)) != TS_OK) goto fail;
    size_t n = (size_t)(c->raw_h * c->raw_w);
    const ts_orientation *o = &c->opt->orientation;
    const bool identity = ts_orient_k(o) == 0 && !o->flipud && !o->fliplr;
    const ts_dtype held = held_dtype(am->dtype);
    const size_t held_size = ts_dtype_size(held);
    /* The common case, a tile held as stored and not turned, is decoded
     * straight into its buffer (a box that is one chunk is decoded in
     * place); else through raw, and flat for a converted one turned. */
    const bool direct = identity && held == am->dtype;
    raw = direct ? NULL : malloc(n * ts_dtype_size(am->dtype));
    flat = identity || held == am->dtype ? NULL : malloc(n * held_size);
    out = take_tile(c, n * held_size);
    if ((!direct && !raw) || (!identity && held != am->dtype && !flat) || !out) {
        st = ts_fail(err, TS_ERR_NOMEM, "%s: out of memory for a %lldx%lld tile", path,
                     (long long)c->raw_h, (long long)c->raw_w);
        goto fail;
    }
    if ((st = tz_array_read(arr, start, count, direct ? out : raw, err)) != TS_OK) goto fail;
    if (held != am->dtype) { /* to float32, then turned */
        ts_samples_to_float(raw, am->dtype, n, identity ? out : flat);
        if (!identity) ts_orient_plane(o, flat, c->raw_h, c->raw_w, held_size, out);
    } else if (!direct) {
        ts_orient_plane(o, raw, c->raw_h, c->raw_w, held_size, out);
    }
    free(raw);
    free(flat);
    tz_array_close(arr);
    *data = out;
    *dtype = held;
    *bytes = n * held_size;
    return TS_OK;
fail:
    free(raw);
    free(flat);
    release_tile(c, id, out);
    if (arr) tz_array_close(arr);
    return ts_fail_context(err, st, "reading tile %s/%s", wi->path, wi->positions[p]);
}

/* ------------------------------------------------------------ registration */

static void set_error(est_ctx *c, const ts_error *e) {
    pthread_mutex_lock(&c->mu);
    if (!c->failed) {
        c->failed = true;
        c->err = *e;
    }
    pthread_mutex_unlock(&c->mu);
}

/* With a guess: the pair's strips where the guess puts its overlap. False
 * when the guess leaves them no overlap to correlate (the pair is then not
 * registered, and its tiles are not read for it). */
static bool guessed_geometry(const est_ctx *c, const edge *e, ts_strip_geometry *g) {
    const double *oa = c->guess_origin[c->tile_base[e->well] + e->a];
    const double *ob = c->guess_origin[c->tile_base[e->well] + e->b];
    return ts_strip_geometry_at(&c->geom[e->dir], (int)c->h, (int)c->w, ob[0] - oa[0], ob[1] - oa[1], g);
}

static int register_edge(void *user, int64_t i, int worker) {
    est_ctx *c = user;
    edge *e = &c->edges[c->first + i];
    ts_error err;
    ts_error_clear(&err);
    ts_registrar **slot = &c->workers[worker * 2 + e->dir];
    const ts_strip_geometry *g = &c->geom[e->dir];
    ts_strip_geometry guessed;
    if (c->guess_origin) {
        if (!guessed_geometry(c, e, &guessed)) { /* unmatched, at the guessed offset */
            memset(&e->res, 0, sizeof e->res);
            e->res.dy = guessed.off_dy + guessed.prior_dy;
            e->res.dx = guessed.off_dx + guessed.prior_dx;
            return 0;
        }
        g = &guessed;
    }
    if (!*slot && ts_registrar_create(g->sh, g->sw, &c->reg, slot, &err) != TS_OK) {
        /* Name the pair, its tiles and the plate ("out of memory for a
         * 31610880x20 registrar" said none of them). */
        const ts_well_info *wi = &c->plate->wells[e->well];
        ts_fail_context(&err, err.code, "registering tiles %s/%s and %s/%s (%lldx%lld px) of plate %s", wi->path,
                        wi->positions[e->a], wi->path, wi->positions[e->b], (long long)c->h, (long long)c->w,
                        c->plate->path);
        set_error(c, &err);
        return 1;
    }
    int64_t ia = c->tile_base[e->well] + e->a, ib = c->tile_base[e->well] + e->b;
    ts_samples ta, tb;
    ts_status st = ts_tile_cache_get(c->cache, ia, &ta, &err);
    if (st == TS_OK) {
        st = ts_tile_cache_get(c->cache, ib, &tb, &err);
        if (st == TS_OK) {
            st = ts_register_pair(*slot, g, ta, tb, (int)c->w, &e->res, &err);
            if (st == TS_OK && (!isfinite(e->res.dy) || !isfinite(e->res.dx) || !isfinite(e->res.confidence)))
                e->res.matched = false; /* never pass NaN on */
            if (st == TS_OK && c->kept && ts_stage_may_redo(&e->res)) /* while this pair still holds them */
                for (int k = 0; k < 2; k++)
                    if (!atomic_exchange(&c->kept[k ? ib : ia], 1)) ts_tile_cache_add_uses(c->cache, k ? ib : ia, 1);
            ts_tile_cache_release(c->cache, ib);
        }
        ts_tile_cache_release(c->cache, ia);
    }
    if (st != TS_OK) {
        set_error(c, &err);
        return 1;
    }
    int64_t done = atomic_fetch_add(&c->done, 1) + 1;
    if (c->opt->progress) {
        pthread_mutex_lock(&c->mu);
        c->opt->progress(c->opt->progress_user, "register", done, c->nlocal);
        pthread_mutex_unlock(&c->mu);
    }
    return 0;
}

/* ------------------------------------------------------------ graph, order */

typedef struct cell { int gx, gy, pos; } cell;

static int cmp_cell(const void *pa, const void *pb) {
    const cell *a = pa, *b = pb;
    if (a->gy != b->gy) return a->gy < b->gy ? -1 : 1;
    if (a->gx != b->gx) return a->gx < b->gx ? -1 : 1;
    return 0;
}

static int find_cell(const cell *cells, int n, int gx, int gy) {
    cell key = {gx, gy, 0};
    const cell *hit = bsearch(&key, cells, (size_t)n, sizeof *cells, cmp_cell);
    return hit ? hit->pos : -1;
}

static int cmp_edge(const void *pa, const void *pb) {
    const edge *a = pa, *b = pb;
    if (a->well != b->well) return a->well < b->well ? -1 : 1;
    if (a->band != b->band) return a->band < b->band ? -1 : 1;
    if (a->gy != b->gy) return a->gy < b->gy ? -1 : 1;
    if (a->gx != b->gx) return a->gx < b->gx ? -1 : 1;
    return (int)a->dir - (int)b->dir;
}

static int cmp_canon(const void *pa, const void *pb) {
    const edge *a = pa, *b = pb;
    return a->canon < b->canon ? -1 : a->canon > b->canon;
}

/* Builds every well's tiles (into the shifts) and edges. */
static ts_status build_graph(est_ctx *c, ts_shifts *s, ts_error *err) {
    int64_t cap = 0;
    for (int w = 0; w < c->plate->nwells; w++) cap += 2 * (int64_t)c->plate->wells[w].npositions;
    c->edges = calloc((size_t)(cap ? cap : 1), sizeof *c->edges);
    c->cell = malloc((size_t)(c->ntiles ? c->ntiles : 1) * sizeof *c->cell);
    if (!c->edges || !c->cell) return ts_fail(err, TS_ERR_NOMEM, "out of memory for %lld edges", (long long)cap);
    for (int w = 0; w < c->plate->nwells; w++) {
        const ts_well_info *wi = &c->plate->wells[w];
        int ws = ts_shifts_add_well(s, wi->path);
        if (ws != w) return ts_fail(err, TS_ERR_NOMEM, "out of memory adding well %s", wi->path);
        cell *cells = malloc((size_t)(wi->npositions ? wi->npositions : 1) * sizeof *cells);
        if (!cells) return ts_fail(err, TS_ERR_NOMEM, "out of memory for well %s", wi->path);
        for (int p = 0; p < wi->npositions; p++) {
            if (!ts_position_grid(wi->positions[p], c->opt->names_yx, &cells[p].gx, &cells[p].gy)) {
                free(cells);
                return ts_fail(err, TS_ERR_FORMAT,
                               "%s/%s: position name is not 6 digits (%s)", wi->path,
                               wi->positions[p], c->opt->names_yx ? "YYYXXX" : "XXXYYY");
            }
            cells[p].pos = p;
            c->cell[c->tile_base[w] + p][0] = cells[p].gx, c->cell[c->tile_base[w] + p][1] = cells[p].gy;
            if (ts_shifts_add_tile(s, w, wi->positions[p]) != p) {
                free(cells);
                return ts_fail(err, TS_ERR_FORMAT, "%s/%s: position listed twice", wi->path,
                               wi->positions[p]);
            }
        }
        qsort(cells, (size_t)wi->npositions, sizeof *cells, cmp_cell);
        for (int i = 1; i < wi->npositions; i++)
            if (cmp_cell(&cells[i - 1], &cells[i]) == 0) {
                ts_status st = ts_fail(err, TS_ERR_FORMAT, "%s: positions %s and %s are the same grid cell",
                                       wi->path, wi->positions[cells[i - 1].pos], wi->positions[cells[i].pos]);
                free(cells);
                return st;
            }
        for (int i = 0; i < wi->npositions; i++) {
            const cell *t = &cells[i];
            int right = find_cell(cells, wi->npositions, t->gx + 1, t->gy);
            int below = find_cell(cells, wi->npositions, t->gx, t->gy + 1);
            if (right >= 0)
                c->edges[c->nedges++] = (edge){.well = w, .a = t->pos, .b = right, .gx = t->gx, .gy = t->gy, .dir = TS_PAIR_RIGHT};
            if (below >= 0)
                c->edges[c->nedges++] = (edge){.well = w, .a = t->pos, .b = below, .gx = t->gx, .gy = t->gy, .dir = TS_PAIR_BELOW};
        }
        free(cells);
    }
    return TS_OK;
}

/* --positions metadata|FILE: the positions are the guess, and the pairs
 * are the tiles that overlap there (graph.c), whatever the names. */
static ts_status build_position_graph(est_ctx *c, ts_shifts *s, ts_error *err) {
    const ts_estimate_options *opt = c->opt;
    ts_status st = ts_estimate_read_positions(opt, c->plate, c->tile_base, c->ntiles, &c->guess, &c->guess_origin,
                                              err);
    if (st != TS_OK) return st;
    int64_t cap = 0;
    if (!(c->edges = calloc(1, sizeof *c->edges))) return ts_fail(err, TS_ERR_NOMEM, "out of memory");
    for (int w = 0; w < c->plate->nwells && st == TS_OK; w++) {
        const ts_well_info *wi = &c->plate->wells[w];
        if (ts_shifts_add_well(s, wi->path) != w) return ts_fail(err, TS_ERR_NOMEM, "out of memory adding well %s", wi->path);
        for (int p = 0; p < wi->npositions; p++)
            if (ts_shifts_add_tile(s, w, wi->positions[p]) != p)
                return ts_fail(err, TS_ERR_NOMEM, "out of memory adding tile %s/%s", wi->path, wi->positions[p]);
        ts_tile_pair *pairs;
        int64_t np;
        if ((st = ts_pairs_from_positions((const double(*)[2])(c->guess_origin + c->tile_base[w]), wi->npositions,
                                          (int)c->h, (int)c->w, (double)(c->h - opt->overlap_y),
                                          (double)(c->w - opt->overlap_x), wi->path,
                                          (const char(*)[32])wi->positions, &pairs, &np, err)) != TS_OK)
            return st;
        if (np == 0 && wi->npositions > 1) {
            free(pairs);
            return ts_fail(err, TS_ERR_FORMAT, "well %s: no two of its %d tiles of %lldx%lld px overlap at the "
                           "positions from %s (a pair needs 4 px and 2%% of the tile along one axis, half the tile "
                           "across): nothing to register", wi->path, wi->npositions, (long long)c->h,
                           (long long)c->w, opt->positions == TS_POSITIONS_METADATA ? "the metadata" : opt->positions_file);
        }
        edge *ne = np ? realloc(c->edges, (size_t)(cap + np) * sizeof *ne) : c->edges;
        if (np && !ne) {
            free(pairs);
            return ts_fail(err, TS_ERR_NOMEM, "out of memory for %lld pairs", (long long)(cap + np));
        }
        c->edges = ne;
        cap += np;
        for (int64_t k = 0; k < np; k++)
            c->edges[c->nedges++] = (edge){.well = w, .a = pairs[k].a, .b = pairs[k].b, .gx = pairs[k].gx,
                                           .gy = pairs[k].gy, .dir = (ts_pair_dir)pairs[k].dir};
        free(pairs);
    }
    return st;
}

/* The largest tile side estimate takes: the strip geometry, registrars and
 * shifts file hold sides as int (sums of two sides included). Tiles that
 * large cannot be registered anyway; the --cache and registrar checks say
 * why for the ones below it. */
#define TS_MAX_TILE_SIDE (1 << 30)

/* The share of its confidence an unfitted match keeps (solve_and_write). */
#define UNFITTED_CONF 0.1

/* The confidence the solve gives a measurement (solve_and_write says why
 * an unfitted match keeps a tenth). */
static double solve_confidence(const est_ctx *c, const ts_register_result *r) {
    return r->confidence * (c->reg.refine && r->matched && r->unfitted ? UNFITTED_CONF : 1.0);
}

/* Shape of the first tile (all tiles must share it). */
static ts_status probe_tile_shape(est_ctx *c, ts_error *err) {
    for (int w = 0; w < c->plate->nwells; w++) {
        if (c->plate->wells[w].npositions == 0) continue;
        ts_image_meta meta;
        tz_array *arr;
        char path[4200];
        ts_plate_image_path(c->plate, w, 0, path, sizeof path);
        ts_status st = ts_plate_open_array(c->plate, w, 0, 0, &meta, &arr, err);
        if (st != TS_OK) return st;
        const tz_array_meta *am = tz_array_get_meta(arr);
        /* Refused here, before any pair is registered (as fuse would). */
        if ((st = ts_image_check_layout(&meta, path, err)) != TS_OK) {
            tz_array_close(arr);
            return st;
        }
        int64_t extent[5];
        ts_image_extent(&meta, am, extent);
        c->raw_h = extent[3];
        c->raw_w = extent[4];
        c->held = held_dtype(am->dtype);
        tz_array_close(arr);
        /* The data is at fault, not the --overlap it would be checked
         * against next (that was a usage error, exit 2). */
        if (c->raw_h <= 0 || c->raw_w <= 0)
            return ts_fail(err, TS_ERR_FORMAT, "%s/%s: empty tile (%lldx%lld px)", path, meta.level_paths[0],
                           (long long)c->raw_h, (long long)c->raw_w);
        /* Strip geometry, registrars and the shifts file hold tile sides as
         * int: a side beyond that is refused here rather than wrapping
         * (a 5e10-px-wide tile was reported as -1539607552 px). */
        if (c->raw_h > TS_MAX_TILE_SIDE || c->raw_w > TS_MAX_TILE_SIDE)
            return ts_fail(err, TS_ERR_UNSUPPORTED, "%s/%s: tile of %lldx%lld px; estimate takes tiles of at most "
                           "%d px a side", path, meta.level_paths[0], (long long)c->raw_h, (long long)c->raw_w,
                           TS_MAX_TILE_SIDE);
        ts_orient_shape(&c->opt->orientation, c->raw_h, c->raw_w, &c->h, &c->w);
        snprintf(c->probe, sizeof c->probe, "%s/%s", c->plate->wells[w].path, c->plate->wells[w].positions[0]);
        return TS_OK;
    }
    return ts_fail(err, TS_ERR_FORMAT, "%s: no positions in the selected wells", c->plate->path);
}

static ts_status check_options(const ts_estimate_options *opt, ts_error *err) {
    if (!opt->input || !*opt->input) return ts_fail(err, TS_ERR_ARG, "estimate: no input plate given");
    if (!opt->output || !*opt->output) return ts_fail(err, TS_ERR_ARG, "estimate: no output file given");
    /* docs/gpu.md: the batched cuFFT surfaces (src/gpu/phasecorr.cu) are
     * not called by estimate yet, so --device gpu is refused rather than
     * quietly run on the CPU; auto runs on the CPU. */
    if (opt->device == TS_DEVICE_GPU) {
        char why[512];
        if (!ts_gpu_info(why, sizeof why))
            return ts_fail(err, TS_ERR_UNSUPPORTED, "estimate --device gpu: %s", why);
        return ts_fail(err, TS_ERR_UNSUPPORTED, "estimate --device gpu: registration on the GPU is not wired into "
                       "estimate yet (docs/gpu.md); use --device cpu or auto");
    }
    if (opt->device != TS_DEVICE_CPU && opt->device != TS_DEVICE_AUTO)
        return ts_fail(err, TS_ERR_ARG, "estimate: device %d is not cpu, gpu or auto", (int)opt->device);
    if (opt->overlap_x <= 0 || opt->overlap_y <= 0)
        return ts_fail(err, TS_ERR_ARG, "estimate: overlap must be positive (x %d, y %d px)",
                       opt->overlap_x, opt->overlap_y);
    if (!isfinite(opt->max_shift))
        return ts_fail(err, TS_ERR_ARG, "estimate: max_shift %g px is not finite", opt->max_shift);
    if (opt->channel < 0 || opt->timepoint < 0 || opt->z < 0)
        return ts_fail(err, TS_ERR_ARG, "estimate: channel/timepoint/z must be >= 0");
    if (opt->positions != TS_POSITIONS_NAMES && opt->solve.guess)
        return ts_fail(err, TS_ERR_ARG, "estimate: --guess and --positions are both tile origins; give one");
    if (opt->positions == TS_POSITIONS_FILE && (!opt->positions_file || !*opt->positions_file))
        return ts_fail(err, TS_ERR_ARG, "estimate: no positions file given");
    const char *inputs[3] = {opt->input, opt->solve.guess,
                             opt->positions == TS_POSITIONS_FILE ? opt->positions_file : NULL};
    return ts_check_output_path("output", opt->output, inputs, 3, err);
}

/* Everything before the registration: the plate, the tile shape, the
 * neighbour graph, the guess, the threads, and this rank's proposal for
 * the band width of the schedule (from its cache and threads). */
static ts_status estimate_prepare(est_ctx *c, ts_shifts **sp, ts_pool **poolp, int *band_width, ts_error *err) {
    const ts_estimate_options *opt = c->opt;
    ts_status st;
    if ((st = ts_plate_open(opt->input, &c->plate, err)) != TS_OK) return st;
    if ((st = ts_plate_filter_wells(c->plate, opt->wells, err)) != TS_OK) return st;
    if ((st = ts_plate_require_wells(c->plate, err)) != TS_OK) return st;
    if ((st = probe_tile_shape(c, err)) != TS_OK) return st;
    ts_shifts *s = *sp = ts_shifts_new();
    if (!s) return ts_fail(err, TS_ERR_NOMEM, "out of memory");
    s->has_tile_shape = true;
    s->tile_shape[0] = (int)c->h;
    s->tile_shape[1] = (int)c->w;
    s->has_orientation = true;
    s->orientation = opt->orientation;
    s->orientation.rot90 = ts_orient_k(&opt->orientation);
    s->names_yx = opt->names_yx;
    /* What the solve below is given, for tessera solve to give it again. */
    s->has_nominal_pitch = true;
    s->nominal_pitch[0] = (double)(c->h - opt->overlap_y);
    s->nominal_pitch[1] = (double)(c->w - opt->overlap_x);
    if ((st = ts_strip_geometry_for(TS_PAIR_RIGHT, (int)c->h, (int)c->w, opt->overlap_x, &c->reg,
                                    &c->geom[TS_PAIR_RIGHT], err)) != TS_OK ||
        (st = ts_strip_geometry_for(TS_PAIR_BELOW, (int)c->h, (int)c->w, opt->overlap_y, &c->reg,
                                    &c->geom[TS_PAIR_BELOW], err)) != TS_OK)
        return ts_fail_context(err, st, "estimate on %lldx%lld tiles (after orientation)",
                               (long long)c->h, (long long)c->w);
    c->tile_base = malloc((size_t)c->plate->nwells * sizeof *c->tile_base + 1);
    if (!c->tile_base) return ts_fail(err, TS_ERR_NOMEM, "out of memory");
    for (int w = 0; w < c->plate->nwells; w++) {
        c->tile_base[w] = c->ntiles;
        c->ntiles += c->plate->wells[w].npositions;
    }
    st = opt->positions == TS_POSITIONS_NAMES ? build_graph(c, s, err) : build_position_graph(c, s, err);
    if (st != TS_OK) return st;
    if (opt->solve.guess && (st = ts_estimate_read_guess(opt->solve.guess, c->plate, c->tile_base, c->ntiles,
                                                         &c->guess, &c->guess_origin, err)) != TS_OK)
        return st;

    /* Memory follows --cache, not what the tiles claim: the cache holds
     * decoded tiles, a worker registers a pair of them, so a pair must fit
     * it (a plate claiming 20000^2 px tiles decoded 1.6 GB per tile whatever
     * --cache said), and no more workers run than pairs fit. Sized by the
     * first tile's dtype: a later tile of a wider one (a plate of mixed
     * dtypes) is held in its own, up to 4x larger, and the cache counts
     * its real size when it evicts. */
    const size_t sample = ts_dtype_size(c->held);
    size_t tile_bytes = (size_t)c->h * (size_t)c->w * sample;
    if (c->h > (1 << 30) || c->w > (1 << 30) || tile_bytes / (size_t)c->h / sample != (size_t)c->w ||
        tile_bytes > opt->cache_bytes / 2) {
        char need[32], have[32];
        ts_format_bytes(need, sizeof need, c->h > (1 << 30) || c->w > (1 << 30) ? SIZE_MAX : 2 * tile_bytes);
        ts_format_bytes(have, sizeof have, opt->cache_bytes);
        return ts_fail(err, TS_ERR_NOMEM, "tile %s of plate %s is %lldx%lld px: registering a pair holds two "
                       "such tiles as decoded (%s), %s, beyond --cache %s; give more --cache", c->probe,
                       c->plate->path, (long long)c->h, (long long)c->w, ts_dtype_name(c->held), need, have);
    }
    const int64_t fit = c->fit = (int64_t)(opt->cache_bytes / (tile_bytes ? tile_bytes : 1));
    c->tile_bytes = tile_bytes;
    ts_pool *pool = *poolp = c->pool = ts_pool_create(opt->threads);
    if (pool && ts_pool_size(pool) > fit / 2) {
        ts_pool_destroy(pool);
        pool = *poolp = c->pool = ts_pool_create((int)(fit / 2));
    }
    if (!pool) return ts_fail(err, TS_ERR_NOMEM, "could not start threads");
    int nthreads = ts_pool_size(pool);
    /* Band width: about half the tiles the cache holds, less what the
     * workers keep in flight, so two grid rows of a band stay resident. */
    int64_t band = (fit - 2 * nthreads) / 2;
    *band_width = band < 1 ? 1 : band > 1000000 ? 1000000 : (int)band;
    return TS_OK;
}

/* The pass's registrars, freed as soon as it ends: the stage pass and the
 * bridges make their own, and with these gone they are carved from pages
 * just given back (a page never written before costs the first write
 * 1.5-3 ms per MB on a virtual machine, one just unmapped 0.06). */
static void free_registrars(est_ctx *c) {
    for (int i = 0; c->workers && i < 2 * ts_pool_size(c->pool); i++) ts_registrar_free(c->workers[i]);
    free(c->workers);
    c->workers = NULL;
}

/* Registers this rank's run of the schedule. band_width must be the same
 * on every rank (each rank cuts its run from its own copy of the
 * schedule, and the results are gathered by position in it). */
static ts_status estimate_register(est_ctx *c, int band_width, ts_error *err) {
    const ts_estimate_options *opt = c->opt;
    ts_pool *pool = c->pool;
    const int nthreads = ts_pool_size(pool);
    for (int64_t i = 0; i < c->nedges; i++) {
        c->edges[i].band = c->edges[i].gx / band_width;
        c->edges[i].canon = i;
    }
    qsort(c->edges, (size_t)c->nedges, sizeof *c->edges, cmp_edge);

    /* Under MPI each rank takes a contiguous run of the schedule: whole
     * bands of grid columns, so its tiles are mostly its own (a tile on a
     * share's border is read by both ranks). The cache counts only this
     * rank's uses, so a tile is dropped after its last use here. */
    ts_dist_share(c->nedges, ts_dist_rank(opt->dist), ts_dist_size(opt->dist), &c->first,
                  &c->nlocal);
    c->nlocal -= c->first;
    int *uses = calloc((size_t)(c->ntiles ? c->ntiles : 1), sizeof *uses);
    if (!uses) return ts_fail(err, TS_ERR_NOMEM, "out of memory");
    for (int64_t i = c->first; i < c->first + c->nlocal; i++) {
        ts_strip_geometry unused;
        if (c->guess_origin && !guessed_geometry(c, &c->edges[i], &unused)) continue;
        uses[c->tile_base[c->edges[i].well] + c->edges[i].a]++;
        uses[c->tile_base[c->edges[i].well] + c->edges[i].b]++;
    }
    int64_t used = 0;
    for (int64_t t = 0; t < c->ntiles; t++) used += uses[t] > 0;
    /* All of them within the budget: nothing is evicted, so keeping them
     * costs the first pass no read. */
    if (c->keep_tiles && used <= c->fit &&
        (c->kept = calloc((size_t)(c->ntiles > 0 ? c->ntiles : 1), sizeof *c->kept)))
        for (int64_t t = 0; t < c->ntiles; t++) atomic_init(&c->kept[t], 0);
    tile_arena(c, used < c->fit ? used : c->fit, c->tile_bytes);
    c->cache = ts_tile_cache_create(c->ntiles, uses, opt->cache_bytes, load_tile, c);
    if (c->cache) ts_tile_cache_set_release(c->cache, release_tile);
    free(uses);
    c->workers = calloc((size_t)nthreads * 2, sizeof *c->workers);
    if (!c->cache || !c->workers) return ts_fail(err, TS_ERR_NOMEM, "out of memory");

    const bool failed = ts_pool_for(pool, c->nlocal, register_edge, c) != 0 || c->failed;
    free_registrars(c);
    if (failed) {
        if (err) *err = c->err; /* err may be NULL, as for ts_fail */
        return c->err.code ? c->err.code : TS_ERR_INTERNAL;
    }
    return TS_OK;
}

/* Every rank's registration results, in schedule order, into every rank's
 * edges (a copy in one process). */
static ts_status gather_results(est_ctx *c, ts_error *err) {
    ts_register_result *mine = malloc((size_t)(c->nlocal ? c->nlocal : 1) * sizeof *mine);
    /* Without room for its results a rank still takes part (with nothing),
     * so that the others do not wait for it; the byte count then fails
     * everywhere. */
    const bool have_room = mine != NULL;
    const int64_t n = have_room ? c->nlocal : 0;
    for (int64_t i = 0; i < n; i++) mine[i] = c->edges[c->first + i].res;
    ts_register_result *all = NULL;
    uint64_t *counts = NULL;
    ts_status st = ts_dist_allgatherv(c->opt->dist, mine, (size_t)n * sizeof *mine, (void **)&all,
                                      &counts, err);
    free(mine);
    if (st == TS_OK && !have_room) st = ts_fail(err, TS_ERR_NOMEM, "out of memory for %lld pair results", (long long)c->nlocal);
    if (st) {
        free(all);
        free(counts);
        return st;
    }
    uint64_t total = 0;
    for (int r = 0; r < ts_dist_size(c->opt->dist); r++) total += counts[r];
    if (total != (uint64_t)c->nedges * sizeof *all)
        st = ts_fail(err, TS_ERR_INTERNAL, "gathered %llu bytes of pair results for %lld pairs",
                     (unsigned long long)total, (long long)c->nedges);
    for (int64_t i = 0; st == TS_OK && i < c->nedges; i++) c->edges[i].res = all[i];
    free(all);
    free(counts);
    return st;
}

/* An outlier of the solve that the stage model disputes
 * (ts_estimate_well_qc.disputed, ts_stage_disputes). */
static bool stage_disputes(const est_ctx *c, const edge *e, const ts_shift_pair *sp) {
    return c->staged && sp->outlier &&
           ts_stage_disputes(&c->stage_model.dir[e->dir], e->stage_ey, e->stage_ex, sp->dy, sp->dx, sp->ry, sp->rx);
}

/* The pairs as the quality check sees them: the solve's outlier flags and
 * residuals are on the shifts' pairs, which are the matched edges in
 * canonical order. */
static ts_qc_pair *qc_pairs(const est_ctx *c, const ts_shifts *s) {
    const int64_t nb = s ? c->nbridges : 0;
    ts_qc_pair *q = malloc((size_t)(c->nedges + nb ? c->nedges + nb : 1) * sizeof *q);
    if (!q) return NULL;
    int *k = calloc((size_t)(c->plate->nwells ? c->plate->nwells : 1), sizeof *k);
    if (!k) {
        free(q);
        return NULL;
    }
    for (int64_t i = 0; i < c->nedges; i++) {
        const edge *e = &c->edges[i];
        q[i] = (ts_qc_pair){.well = e->well, .a = e->a, .b = e->b, .dir = e->dir, .matched = e->res.matched,
                            .confidence = e->res.confidence,
                            .offset = e->dir == TS_PAIR_RIGHT ? e->res.dx : e->res.dy, .refused = e->refused};
        if (s && e->res.matched) {
            const ts_shift_pair *sp = &s->wells[e->well].pairs[k[e->well]++];
            q[i].outlier = sp->outlier;
            q[i].disputed = stage_disputes(c, e, sp);
            q[i].residual = hypot(sp->ry, sp->rx);
        }
    }
    /* The diagonal pairs the solve had (after every grid pair of their
     * well in the file): they group and vouch for tiles, and measure no
     * overlap of a direction. */
    for (int64_t i = 0; i < nb; i++) {
        const ts_bridge *b = &c->bridges[i];
        ts_qc_pair *p = &q[c->nedges + i];
        *p = (ts_qc_pair){.well = b->well, .a = b->a, .b = b->b, .dir = TS_QC_DIAGONAL, .matched = b->res.matched,
                          .confidence = b->res.confidence, .contested = b->contested,
                          .unfitted = b->contested && b->res.unfitted, .ncc = b->res.ncc, .rival = b->res.ncc_second};
        if (b->res.matched) {
            const ts_shift_pair *sp = &s->wells[b->well].pairs[k[b->well]++];
            p->outlier = sp->outlier;
            p->residual = hypot(sp->ry, sp->rx);
        }
    }
    free(k);
    return q;
}

/* One probe pass: every pair registered again with strips for a nominal
 * overlap of extent / div and candidate shifts down to a tenth of it; per
 * direction in need, the measurement kept when it has more trusted pairs
 * than the one kept so far and agrees with itself. */
static ts_status probe_pass(est_ctx *c, int div, const bool need[2], ts_overlap_qc best[2], ts_error *err) {
    c->reg.min_overlap = 0.1;
    c->reg.max_shift = 0;
    /* Tiles too small for this probe: nothing to learn, and the pass
     * before it (its cache, its strips) left as it was. (The cache was
     * dropped first, and a plate of 12 x 40 px tiles crashed in the
     * run's summary, which reads it.) No error is set: none happened. */
    ts_strip_geometry g[2];
    if (ts_strip_geometry_for(TS_PAIR_RIGHT, (int)c->h, (int)c->w, (int)(c->w / div), &c->reg, &g[TS_PAIR_RIGHT],
                              NULL) != TS_OK ||
        ts_strip_geometry_for(TS_PAIR_BELOW, (int)c->h, (int)c->w, (int)(c->h / div), &c->reg, &g[TS_PAIR_BELOW],
                              NULL) != TS_OK)
        return TS_OK;
    c->geom[TS_PAIR_RIGHT] = g[TS_PAIR_RIGHT], c->geom[TS_PAIR_BELOW] = g[TS_PAIR_BELOW];
    if (c->cache) c->replaced_tile_reads += ts_tile_cache_get_stats(c->cache).loads;
    ts_tile_cache_destroy(c->cache);
    c->cache = NULL;
    /* kept[] told which tiles held a use more in that cache (the stage
     * pass has given them back): left set, register_edge would keep the
     * tiles of the probes' weak pairs in their cache, never given back. */
    free(c->kept);
    c->kept = NULL;
    atomic_store(&c->done, 0);
    ts_status st;
    if ((st = estimate_register(c, 1000000, err)) != TS_OK) return st;
    qsort(c->edges, (size_t)c->nedges, sizeof *c->edges, cmp_canon);
    ts_qc_pair *q = qc_pairs(c, NULL);
    double *v = malloc((size_t)(c->nedges ? c->nedges : 1) * sizeof *v);
    double *scratch = malloc((size_t)(c->nedges ? c->nedges : 1) * sizeof *scratch);
    if (!q || !v || !scratch) {
        free(q), free(v), free(scratch);
        return ts_fail(err, TS_ERR_NOMEM, "out of memory for the overlap probe");
    }
    const int extent[2] = {(int)c->w, (int)c->h};
    for (int d = 0; d < 2; d++) {
        if (!need[d]) continue;
        int64_t n = 0;
        for (int64_t i = 0; i < c->nedges; i++)
            if (q[i].dir == d && ts_qc_trusted(&q[i])) v[n++] = extent[d] - q[i].offset;
        if (n < 3 || n <= best[d].trusted) continue;
        double m, sp;
        ts_qc_median_spread(v, n, scratch, &m, &sp);
        /* Noise peaks of pairs that do not overlap scatter over the strip
         * (a spread of 30-90 px on 256 px tiles); true ones agree to the
         * stage repeatability (2-3 px there). */
        if (!(sp <= 4.0 + 0.05 * extent[d])) continue;
        best[d].trusted = best[d].measured = n;
        best[d].overlap = m;
        best[d].spread = sp;
        best[d].probed = true;
    }
    free(q), free(v), free(scratch);
    return TS_OK;
}

/* Few trusted pairs along an axis (a wrong nominal overlap cuts the strips
 * where the tiles do not overlap): the overlap measured again by two probe
 * passes, strips over half the tile (overlaps of 5-62% of it) and over an
 * eighth (1.2-16%: thin overlaps are lost in the wide strips' noise). One
 * process only (the pairs are on this rank). */
static ts_status probe_overlap(est_ctx *c, ts_estimate_result *result, ts_error *err) {
    const ts_estimate_options *opt = c->opt;
    /* After a failed check every axis: the run's trusted pairs, registered
     * in strips cut at the wrong place, are biased (true 64 as 128: 66 px
     * from 23 pairs; the wide probe: 64 from 42). A probe replaces the
     * run's measurement only with more trusted pairs. */
    bool need[2];
    ts_overlap_qc best[2];
    memset(best, 0, sizeof best);
    /* (a disputed outlier puts no overlap in question: probed only for
     * what else calls for it) */
    const bool failed = result->verdict != TS_VERDICT_OK && !ts_qc_disputes_only(result);
    for (int d = 0; d < 2; d++) {
        const ts_overlap_qc *o = &result->overlap[d];
        need[d] = o->pairs >= 3 && (failed || !ts_qc_measurement_reliable(o) || ts_qc_low_coverage(o));
        if (ts_qc_measurement_reliable(o)) best[d].trusted = o->trusted;
    }
    if ((!need[0] && !need[1]) || c->guess_origin || ts_dist_size(opt->dist) > 1) return TS_OK;
    static const int divs[2] = {2, 8};
    for (int k = 0; k < 2; k++) {
        ts_status st = probe_pass(c, divs[k], need, best, err);
        if (st != TS_OK) return st;
    }
    for (int d = 0; d < 2; d++) {
        if (!best[d].probed) continue;
        ts_overlap_qc *o = &result->overlap[d];
        o->trusted = o->measured = best[d].trusted;
        o->overlap = best[d].overlap;
        o->spread = best[d].spread;
        o->probed = true;
    }
    return TS_OK;
}

/* The tiles no matched pair places, each read again for its content: first
 * (pattern) the cells of a sample of them, then (measure) this rank's
 * share of them against their fixed pattern, the sample's from the cells
 * kept (in one process each tile is read once). */
#define CONTENT_SAMPLE 15 /* tiles the pattern is the median of */
typedef struct content_job {
    est_ctx *c;
    ts_content_check *check;
    const int64_t *tiles;
    int64_t n, m;            /* tiles[0, m): the pattern's sample */
    int64_t lo, hi;          /* this rank's share of tiles[0, n) */
    float *cells;            /* the sample's cells, one tile after another */
    ts_content_noise *noise; /* ... and noise */
    double *share;           /* tiles[lo + i]'s at share[i] */
    atomic_llong done;
} content_job;

/* Tile id for the content test: from the first pass's cache while it
 * keeps the tile for the stage pass (every tile without a matched pair,
 * unless the plate exceeds --cache: its pairs may all be redone), else
 * decoded (counted in content_reads). content_put gives it back. */
static ts_status content_get(est_ctx *c, int64_t id, ts_samples *tile, bool *cached, ts_error *err) {
    *cached = c->kept && atomic_load(&c->kept[id]);
    if (*cached) {
        ts_tile_cache_add_uses(c->cache, id, 1); /* this get's, so the stage pass's use stays */
        return ts_tile_cache_get(c->cache, id, tile, err);
    }
    void *data;
    size_t bytes;
    ts_status st = load_tile(c, id, &data, &tile->dtype, &bytes, err);
    if (st == TS_OK) {
        tile->p = data;
        pthread_mutex_lock(&c->mu);
        c->content_reads++;
        pthread_mutex_unlock(&c->mu);
    }
    return st;
}

static void content_put(est_ctx *c, int64_t id, ts_samples tile, bool cached) {
    if (cached) ts_tile_cache_release(c->cache, id);
    else release_tile(c, id, (void *)tile.p);
}

/* Tile id's share of content (ts_tile_content) against check's pattern. */
static ts_status tile_content_of(est_ctx *c, const ts_content_check *check, int64_t id, double *share,
                                 ts_error *err) {
    ts_samples tile;
    bool cached;
    ts_status st = content_get(c, id, &tile, &cached, err);
    if (st != TS_OK) return st;
    st = ts_tile_content(check, tile, share, err);
    content_put(c, id, tile, cached);
    return st;
}

static ts_status content_pattern_one(void *user, int64_t k, int worker, ts_error *err) {
    (void)worker;
    content_job *j = user;
    const int64_t id = j->tiles[k];
    ts_samples tile;
    bool cached;
    ts_status st = content_get(j->c, id, &tile, &cached, err);
    if (st != TS_OK) return st;
    st = ts_content_cells(j->check, tile, j->cells + (size_t)k * ts_content_ncells(j->check), &j->noise[k], err);
    content_put(j->c, id, tile, cached);
    return st;
}

static ts_status content_measure_one(void *user, int64_t k, int worker, ts_error *err) {
    (void)worker;
    content_job *j = user;
    const int64_t i = j->lo + k, id = j->tiles[i];
    ts_status st;
    if (i < j->m) { /* in the sample: its cells are kept */
        st = ts_content_share(j->check, j->cells + (size_t)i * ts_content_ncells(j->check), j->noise[i], true,
                              &j->share[k], err);
    } else {
        st = tile_content_of(j->c, j->check, id, &j->share[k], err);
    }
    const int64_t done = atomic_fetch_add(&j->done, 1) + 1;
    if (st == TS_OK && j->c->opt->progress) {
        pthread_mutex_lock(&j->c->mu);
        j->c->opt->progress(j->c->opt->progress_user, "content", done, j->hi - j->lo);
        pthread_mutex_unlock(&j->c->mu);
    }
    return st;
}

/* This rank's part of the test of tiles[0, n) (the same list on every
 * rank): the sample's cells (every rank reads the sample: the pattern is
 * every rank's), the pattern, and its share of the shares into *mine
 * (malloc'd). */
static ts_status content_share_of_rank(est_ctx *c, int64_t *tiles, int64_t n, double **mine, int64_t *nmine,
                                       ts_error *err) {
    content_job job = {.c = c, .tiles = tiles, .n = n};
    ts_dist_share(n, ts_dist_rank(c->opt->dist), ts_dist_size(c->opt->dist), &job.lo, &job.hi);
    *nmine = job.hi - job.lo;
    *mine = malloc((size_t)(*nmine ? *nmine : 1) * sizeof **mine);
    ts_status st = *mine ? TS_OK : ts_fail(err, TS_ERR_NOMEM, "out of memory for the content check");
    if (st == TS_OK) st = ts_content_check_create((int)c->h, (int)c->w, &job.check, err);
    if (st != TS_OK || !n) goto done;
    /* The pattern: a sample spread over the list (wells, rows), moved to
     * its front (the k-th from k * n / m, which grows faster than k and
     * is past every earlier pick); with fewer than 4 tiles none
     * (ts_content_learn). */
    job.m = n < CONTENT_SAMPLE ? n : CONTENT_SAMPLE;
    for (int64_t k = 0; k < job.m; k++) {
        const int64_t p = k * n / job.m, t = tiles[k];
        tiles[k] = tiles[p], tiles[p] = t;
    }
    /* (a rank without a share of the sample still needs its pattern) */
    job.cells = malloc((size_t)job.m * ts_content_ncells(job.check) * sizeof *job.cells);
    job.noise = malloc((size_t)job.m * sizeof *job.noise);
    if (!job.cells || !job.noise) {
        st = ts_fail(err, TS_ERR_NOMEM, "out of memory for the content check of %lld tiles", (long long)job.m);
        goto done;
    }
    if ((st = ts_pool_run(c->pool, job.m, content_pattern_one, &job, err)) != TS_OK) goto done;
    if ((st = ts_content_learn(job.check, job.cells, (int)job.m, err)) != TS_OK) goto done;
    job.share = *mine;
    st = ts_pool_run(c->pool, *nmine, content_measure_one, &job, err);
done:
    if (st == TS_OK) c->content_check = job.check; /* for the tiles the stage pass leaves alone */
    else ts_content_check_free(job.check);
    free(job.cells), free(job.noise);
    return st;
}

/* The tiles without a matched pair (a bridge's counts where with_bridges),
 * but those whose content is measured already (content_tested): their ids
 * into *tiles (malloc'd, NULL on failure), *n of them. */
static ts_status unpaired_tiles(const est_ctx *c, bool with_bridges, int64_t **tiles, int64_t *n, ts_error *err) {
    const size_t nt = (size_t)(c->ntiles ? c->ntiles : 1);
    bool *paired = calloc(nt, sizeof *paired);
    *tiles = malloc(nt * sizeof **tiles), *n = 0;
    if (!paired || !*tiles) {
        free(paired), free(*tiles), *tiles = NULL;
        return ts_fail(err, TS_ERR_NOMEM, "out of memory for the content check of %lld tiles", (long long)c->ntiles);
    }
    for (int64_t i = 0; i < c->nedges; i++)
        if (c->edges[i].res.matched)
            paired[c->tile_base[c->edges[i].well] + c->edges[i].a] =
                paired[c->tile_base[c->edges[i].well] + c->edges[i].b] = true;
    for (int64_t i = 0; with_bridges && i < c->nbridges; i++)
        if (c->bridges[i].res.matched)
            paired[c->tile_base[c->bridges[i].well] + c->bridges[i].a] =
                paired[c->tile_base[c->bridges[i].well] + c->bridges[i].b] = true;
    for (int64_t t = 0; t < c->ntiles; t++)
        if (!paired[t] && !(c->content_tested && c->content_tested[t])) (*tiles)[(*n)++] = t;
    free(paired);
    return TS_OK;
}

/* The first rank's content by tile id and which were measured, made on
 * first use. */
static ts_status content_arrays(est_ctx *c, ts_error *err) {
    const size_t nt = (size_t)(c->ntiles ? c->ntiles : 1);
    if (!c->content) c->content = calloc(nt, sizeof *c->content);
    if (!c->content_tested) c->content_tested = calloc(nt, sizeof *c->content_tested);
    if (c->content && c->content_tested) return TS_OK;
    return ts_fail(err, TS_ERR_NOMEM, "out of memory for the content check of %lld tiles", (long long)c->ntiles);
}

/* The content (content.h) of the tiles without a matched pair after the
 * first pass, before the stage pass: a tile without content (blank, a
 * well's empty corner) has only noise to match, so the stage pass redoes
 * none of its pairs (c->blank, every rank), whose window searches were
 * most of that pass's time on plates with blank tiles (their maxima
 * under the acceptance floor, refused); a tile with content is searched
 * as before, and where nothing places it in the end the quality check
 * names it (c->content, the first rank). Every rank tests a share of the
 * list (on a large plate with many blank tiles one rank alone was a
 * serial step) and gets every share; every rank reaches every
 * collective. The tiles come from the first pass's cache, which kept
 * them for the stage pass (content_get). */
static ts_status content_pass(est_ctx *c, ts_error *err) {
    const ts_dist *d = c->opt->dist;
    const int rank = ts_dist_rank(d);
    int64_t *tiles = NULL, n = 0, nmine = 0;
    double *mine = NULL;
    void *all = NULL;
    /* (every rank has every first-pass result: the same list everywhere) */
    ts_status st = unpaired_tiles(c, false, &tiles, &n, err);
    if (st == TS_OK) st = content_share_of_rank(c, tiles, n, &mine, &nmine, err);
    st = ts_dist_agree(d, st, err);
    if (st == TS_OK) st = ts_dist_allgatherv(d, mine, (size_t)nmine * sizeof *mine, &all, NULL, err);
    st = ts_dist_agree(d, st, err);
    if (st == TS_OK && n) {
        if (!(c->blank = calloc((size_t)c->ntiles, sizeof *c->blank)))
            st = ts_fail(err, TS_ERR_NOMEM, "out of memory for the content check of %lld tiles", (long long)c->ntiles);
        else if (rank == 0)
            st = content_arrays(c, err);
        const double *share = all; /* in rank order: the list's order */
        for (int64_t i = 0; st == TS_OK && i < n; i++) {
            c->blank[tiles[i]] = !(share[i] > 0);
            if (rank == 0) c->content[tiles[i]] = share[i], c->content_tested[tiles[i]] = true;
        }
    }
    st = ts_dist_agree(d, st, err);
    free(tiles), free(mine), free(all);
    return st;
}

typedef struct content_late_job {
    est_ctx *c;
    const int64_t *tiles;
} content_late_job;

static ts_status content_late_one(void *user, int64_t k, int worker, ts_error *err) {
    (void)worker;
    content_late_job *j = user;
    const int64_t id = j->tiles[k];
    ts_status st = tile_content_of(j->c, j->c->content_check, id, &j->c->content[id], err);
    if (st == TS_OK) j->c->content_tested[id] = true;
    return st;
}

/* On the first rank, after the stage pass and the bridges: the content of
 * the tiles without a matched pair that content_pass did not test (the
 * stage pass refused every pair they had), against the pattern it
 * learned. */
static ts_status content_late(est_ctx *c, ts_error *err) {
    if (!c->content_check) return TS_OK;
    int64_t *tiles = NULL, n = 0;
    ts_status st = unpaired_tiles(c, true, &tiles, &n, err);
    if (st == TS_OK && n) st = content_arrays(c, err);
    content_late_job job = {c, tiles};
    if (st == TS_OK && n) st = ts_pool_run(c->pool, n, content_late_one, &job, err);
    free(tiles);
    return st;
}

/* The verdict and its message (docs/qc.md). */
static ts_status quality_check(est_ctx *c, const ts_shifts *s, ts_estimate_result *result, ts_error *err) {
    const ts_estimate_options *opt = c->opt;
    const int64_t nq = c->nedges + c->nbridges;
    ts_qc_pair *q = qc_pairs(c, s);
    if (!q) return ts_fail(err, TS_ERR_NOMEM, "out of memory for the quality check");
    ts_status st = ts_estimate_qc(q, nq, c->plate, c->tile_base, (int)c->h, (int)c->w, opt->overlap_x,
                                  opt->overlap_y, c->content, result, err);
    free(q);
    if (st != TS_OK) return st;
    /* Most pairs of a direction unmatched: nothing contradicts the nominal
     * overlap, but nothing confirms it either (strips cut where the tiles do
     * not overlap match nothing, and the tiles then sit on a wrong grid:
     * true 32 px as --overlap 8 put tiles 215 px off with exit 0). */
    bool low = ts_qc_low_coverage(&result->overlap[0]) || ts_qc_low_coverage(&result->overlap[1]);
    if (result->verdict == TS_VERDICT_OK && !low) return TS_OK;
    /* With few trusted pairs the overlap reported (and suggested) is the
     * wide-strip probe's, marked as such; one that contradicts the nominal
     * overlap fails the check like the run's own. */
    if ((st = probe_overlap(c, result, err)) != TS_OK) return st;
    for (int d = 0; d < 2; d++)
        if (result->overlap[d].probed && result->verdict == TS_VERDICT_OK && ts_qc_overlap_wrong(&result->overlap[d]))
            result->verdict = TS_VERDICT_OVERLAP_WRONG;
    if (result->verdict != TS_VERDICT_OK)
        ts_estimate_qc_message(result, opt->overlap_x == opt->overlap_y, result->verdict_message,
                               sizeof result->verdict_message);
    return TS_OK;
}

/* The diagonal bridges (bridge.h) on this rank, from the stage model m:
 * with the grid of the position names only (--positions pairs tiles by
 * their overlap, diagonal ones included where they overlap enough). */
static ts_status diagonal_bridges(est_ctx *c, const ts_stage_model *m, ts_error *err) {
    if (!c->cell) return TS_OK;
    int64_t (*tiles)[2] = malloc((size_t)(c->nedges ? c->nedges : 1) * sizeof *tiles);
    bool *trusted = malloc((size_t)(c->nedges ? c->nedges : 1) * sizeof *trusted);
    ts_status st = TS_OK;
    if (!tiles || !trusted) {
        st = ts_fail(err, TS_ERR_NOMEM, "out of memory for the diagonal bridges");
        goto done;
    }
    for (int64_t i = 0; i < c->nedges; i++) {
        const edge *e = &c->edges[i];
        tiles[i][0] = c->tile_base[e->well] + e->a, tiles[i][1] = c->tile_base[e->well] + e->b;
        const ts_qc_pair q = {.well = e->well, .a = e->a, .b = e->b, .dir = e->dir, .matched = e->res.matched,
                              .confidence = solve_confidence(c, &e->res)};
        trusted[i] = ts_qc_trusted(&q);
    }
    const ts_bridge_pass bp = {(int)c->h, (int)c->w, &c->reg, m, c->pool, c->plate->nwells, c->tile_base,
                               c->ntiles, (const int(*)[2])c->cell, (const double(*)[2])c->guess_origin,
                               (const int64_t(*)[2])tiles, trusted, c->nedges, c->kept ? c->cache : NULL,
                               c->opt->cache_bytes, load_tile, release_tile, c};
    int64_t reads = 0;
    st = ts_bridge_tiles(&bp, &c->bridges, &c->nbridges, &reads, err);
    /* (through the first pass's cache, its loads count them already) */
    if (!c->kept) c->stage_tile_reads += reads;
done:
    free(tiles), free(trusted);
    return st;
}

/* The stage model (stage_model.h): the weak, unmatched and outlying pairs
 * registered again inside the window the trusted pairs allow, before the
 * solve. */
static ts_status stage_model_pass(est_ctx *c, ts_estimate_result *result, ts_error *err) {
    if (c->opt->no_stage_model) return TS_OK;
    /* c->edges in the canonical order on every rank (ts_estimate_run):
     * each registers a share, every rank gets every result. */
    ts_stage_pair *p = malloc((size_t)(c->nedges ? c->nedges : 1) * sizeof *p);
    for (int64_t i = 0; p && i < c->nedges; i++) {
        const edge *e = &c->edges[i];
        const int64_t ia = c->tile_base[e->well] + e->a, ib = c->tile_base[e->well] + e->b;
        /* With a guess the model is of the measurements minus the guessed
         * offsets (a nominal-grid guess changes nothing). */
        double gy = 0, gx = 0;
        if (c->guess_origin) {
            gy = c->guess_origin[ib][0] - c->guess_origin[ia][0];
            gx = c->guess_origin[ib][1] - c->guess_origin[ia][1];
        }
        /* redone by the rank that registered it (and kept its tiles) */
        p[i] = (ts_stage_pair){.well = e->well, .dir = e->dir, .line = e->dir == TS_PAIR_RIGHT ? e->gy : e->gx,
                               .ta = ia, .tb = ib, .gy = gy, .gx = gx, .res = e->res, .rank = e->rank};
    }
    const ts_stage_pass ps = {(int)c->h, (int)c->w, &c->reg, c->pool, c->ntiles, c->kept ? c->cache : NULL,
                              c->opt->cache_bytes, load_tile, release_tile, c, c->opt->dist, c->opt->progress,
                              c->opt->progress_user, c->blank};
    ts_stage_summary sum;
    /* (with p NULL it fails after the ranks' collectives) */
    ts_status st = ts_stage_reregister(&ps, p, c->nedges, &sum, err);
    for (int64_t i = 0; st == TS_OK && i < c->nedges; i++) {
        c->edges[i].res = p[i].res;
        c->edges[i].refused = p[i].refused;
        c->edges[i].stage_ey = p[i].ey, c->edges[i].stage_ex = p[i].ex;
    }
    if (st == TS_OK) c->stage_model = sum.model, c->staged = true;
    /* Tiles the grid pairs leave outside their well's largest group: their
     * diagonal neighbours, where the corners match, on the first rank (which
     * solves), from the tiles it kept where it has them. */
    if (st == TS_OK && ts_dist_rank(c->opt->dist) == 0) st = diagonal_bridges(c, &sum.model, err);
    if (c->kept) { /* the tiles kept for the pass: dropped now, and no longer marked (content_get) */
        for (int64_t t = 0; t < c->ntiles; t++)
            if (c->kept[t]) ts_tile_cache_add_uses(c->cache, t, -1);
        free(c->kept);
        c->kept = NULL;
    } else {
        c->stage_tile_reads += sum.tile_reads;
    }
    result->reregistered_pairs = sum.replaced;
    result->rematched_pairs = sum.rematched;
    result->refused_pairs = sum.refused;
    free(p);
    return st;
}

/* The check failed and --accept-poor does not override it: no file, and
 * the run fails (once its figures are shared: ts_estimate_run). */
static bool refused(const ts_estimate_options *opt, const ts_estimate_result *result) {
    return result->verdict != TS_VERDICT_OK && !opt->accept_poor;
}

/* On the first rank: the solve and the shifts file. */
static ts_status solve_and_write(est_ctx *c, ts_shifts *s, ts_estimate_result *result, ts_error *err) {
    const ts_estimate_options *opt = c->opt;
    ts_status st;
    /* c->edges is in the canonical order (ts_estimate_run): the file's. */

    /* A match no sub-pixel fit converged at (the refinement left its 2 px
     * leash or found no positive gain, in the first pass and, where it ran,
     * the stage pass) is the maximum of a correlation without a basin of
     * alignment: over test_register_robust's recipes at seeds 101-130, 4 of
     * the 10 such pairs with content were more than 1 px off, and on 2 of
     * 60 Hubble plates one, 5 px off (the NCC's maximum on a broad hump of
     * background at 9 px of a 4 px overlap), placed a tile 5 px off against
     * a right pair of twice its confidence. It keeps a tenth of its
     * confidence: a bridge still, where nothing else reaches its tiles. */
    for (int64_t i = 0; i < c->nedges; i++) {
        edge *e = &c->edges[i];
        if (c->reg.refine && e->res.matched && e->res.unfitted) {
            e->res.confidence = solve_confidence(c, &e->res);
            result->unfitted_pairs++;
        }
    }
    /* Pairs without a match (a blank or featureless tile) are not
     * measurements: left out of the solve and of the file, so such a tile,
     * with no pair left, falls back to its grid position instead of dragging
     * its neighbours with a noise peak. */
    for (int64_t i = 0; i < c->nedges; i++) {
        const edge *e = &c->edges[i];
        if (!e->res.matched) {
            /* (a refused pair matched: refused_pairs counts it) */
            result->unmatched_pairs += !e->refused;
            continue;
        }
        if (ts_shifts_add_pair(s, e->well, e->a, e->b, e->res.dy, e->res.dx, e->res.confidence) < 0)
            return ts_fail(err, TS_ERR_NOMEM, "out of memory for pairs");
    }
    /* The diagonal bridges the stage pass measured (bridge.h; fitted
     * ones only), after every grid pair of their well in the file. */
    for (int64_t i = 0; i < c->nbridges; i++) {
        const ts_bridge *b = &c->bridges[i];
        if (!b->res.matched) continue;
        result->bridge_pairs++;
        if (ts_shifts_add_pair(s, b->well, b->a, b->b, b->res.dy, b->res.dx, b->res.confidence) < 0)
            return ts_fail(err, TS_ERR_NOMEM, "out of memory for pairs");
    }
    /* The solve: nominal pitch (tile size minus overlap), or the guess, as
     * targets and the fallback for tiles no pair reaches. */
    ts_solve_summary sum;
    if ((st = ts_solve_wells(s, s->nominal_pitch[0], s->nominal_pitch[1], c->guess,
                             &opt->solve, opt->threads, &sum, err)) != TS_OK)
        return st;
    result->outlier_pairs = sum.outliers;
    result->loop_downweighted_pairs = sum.loop_downweighted;
    result->stage_downweighted_pairs = sum.stage_downweighted;
    result->isolated_tiles = sum.isolated;
    result->max_components = sum.max_components;
    result->wells = c->plate->nwells;
    result->tiles = c->ntiles;
    result->pairs = c->nedges - result->unmatched_pairs - result->refused_pairs + result->bridge_pairs;
    for (int64_t i = 0; i < c->nedges; i++)
        if (c->edges[i].res.matched && c->edges[i].res.confidence < 0.1) result->low_confidence_pairs++;
    result->strip_shape[0][0] = c->geom[0].sh, result->strip_shape[0][1] = c->geom[0].sw;
    result->strip_shape[1][0] = c->geom[1].sh, result->strip_shape[1][1] = c->geom[1].sw;

    if ((st = quality_check(c, s, result, err)) != TS_OK) return st;
    /* (the run fails later, so that the summary printed with the refusal
     * has its figures: its tile reads and cache peak were 0) */
    if (refused(opt, result)) return TS_OK;
    if ((st = ts_shifts_write(opt->output, s, err)) != TS_OK) return st;
    result->written = true;
    return TS_OK;
}

/* The first rank's result on every rank, with the tile reads summed and
 * the cache peak the largest over the ranks. */
static ts_status share_result(est_ctx *c, ts_estimate_result *result, ts_error *err) {
    ts_tile_cache_stats cs = ts_tile_cache_get_stats(c->cache);
    int64_t v[3] = {cs.loads + c->replaced_tile_reads + c->stage_tile_reads + c->content_reads,
                    (int64_t)cs.peak_bytes, c->content_reads};
    const ts_dist_op op[3] = {TS_DIST_SUM, TS_DIST_MAX, TS_DIST_SUM};
    ts_status st = ts_dist_reduce(c->opt->dist, v, op, 3, err);
    /* The per-well check stays where it was made (rank 0's pointer means
     * nothing elsewhere). */
    ts_estimate_well_qc *own = result->well_qc;
    int nown = result->nwell_qc;
    if (st == TS_OK) st = ts_dist_bcast(c->opt->dist, result, sizeof *result, 0, err);
    result->well_qc = own;
    result->nwell_qc = nown;
    result->tile_reads = v[0];
    result->peak_cache_bytes = (size_t)v[1];
    result->content_reads = v[2];
    return st;
}

/* Every collective below (agree, gather, share) is reached by every rank
 * in the same order whatever failed where: see mpi/dist.h. */
ts_status ts_estimate_run(const ts_estimate_options *opt, ts_estimate_result *result, ts_error *err) {
    ts_error_clear(err);
    ts_estimate_result local_result;
    if (!result) result = &local_result;
    memset(result, 0, sizeof *result);
    const ts_dist *dist = opt->dist;
    ts_status st = check_options(opt, err);

    est_ctx c;
    memset(&c, 0, sizeof c);
    c.opt = opt;
    pthread_mutex_init(&c.mu, NULL);
    pthread_mutex_init(&c.arena_mu, NULL);
    ts_register_options_init(&c.reg);
    c.reg.clahe = opt->clahe;
    c.reg.max_shift = ts_estimate_max_shift(opt);
    ts_shifts *s = NULL;
    ts_pool *pool = NULL;

    int band_width = 1;
    if (st == TS_OK) st = estimate_prepare(&c, &s, &pool, &band_width, err);
    st = ts_dist_agree(dist, st, err);
    /* Every rank cuts its run from the same schedule: rank 0's band width
     * for all (ranks may have other --threads or --cache). */
    if (st == TS_OK) st = ts_dist_bcast(dist, &band_width, sizeof band_width, 0, err);
    c.keep_tiles = !opt->no_stage_model;
    if (st == TS_OK) st = estimate_register(&c, band_width, err);
    c.keep_tiles = false; /* not for the overlap probes */
    st = ts_dist_agree(dist, st, err);
    if (st == TS_OK) st = gather_results(&c, err);
    st = ts_dist_agree(dist, st, err);
    /* The pairs in the canonical order, whatever the schedule (which
     * depends on the thread count and cache size), once, on every rank:
     * the stage pass shares them out by it, the solve and the file list
     * them in it. */
    if (st == TS_OK) {
        for (int64_t i = 0; i < c.nedges; i++) c.edges[i].rank = ts_dist_share_rank(c.nedges, ts_dist_size(dist), i);
        qsort(c.edges, (size_t)c.nedges, sizeof *c.edges, cmp_canon);
    }
    /* (every rank: its collectives) */
    if (st == TS_OK) st = content_pass(&c, err);
    st = ts_dist_agree(dist, st, err);
    /* Every rank or none (the pass's collectives) */
    if (st == TS_OK) st = stage_model_pass(&c, result, err);
    st = ts_dist_agree(dist, st, err);
    if (st == TS_OK && ts_dist_rank(dist) == 0) st = content_late(&c, err);
    st = ts_dist_agree(dist, st, err);
    if (st == TS_OK && ts_dist_rank(dist) == 0) st = solve_and_write(&c, s, result, err);
    st = ts_dist_agree(dist, st, err);
    if (st == TS_OK) st = share_result(&c, result, err);
    /* (every rank: the verdict is rank 0's, shared) */
    if (st == TS_OK && refused(opt, result)) st = ts_fail(err, TS_ERR_NUMERIC, "%s", result->verdict_message);

    free_registrars(&c);
    ts_pool_destroy(pool);
    ts_tile_cache_destroy(c.cache);
    ts_pages_unmap(c.arena, c.arena_bytes);
    free(c.arena_free);
    free(c.edges);
    free(c.bridges);
    free(c.content);
    free(c.content_tested);
    free(c.blank);
    ts_content_check_free(c.content_check);
    free(c.cell);
    free(c.kept);
    free(c.tile_base);
    free(c.guess_origin);
    ts_shifts_free(c.guess);
    ts_shifts_free(s);
    ts_plate_close(c.plate);
    pthread_mutex_destroy(&c.mu);
    pthread_mutex_destroy(&c.arena_mu);
    if (result == &local_result) ts_estimate_result_free(result);
    return st;
}

ts_status ts_estimate(const ts_estimate_options *opt, ts_error *err) {
    return ts_estimate_run(opt, NULL, err);
}
