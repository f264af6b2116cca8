/* The fuse planner: geometry only (see plan.h). */
#include "fuse/plan.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/error.h"
#include "mpi/dist.h"

/* A canvas side beyond this is an absurd shift, not a mosaic (2^31 px is
 * ~1.4 km at 0.65 um/px). */
#define FUSE_MAX_SIDE ((int64_t)1 << 31)

ts_status fuse_canvas(const fuse_tile *tiles, int ntiles, int64_t *h, int64_t *w, ts_error *err) {
    int64_t H = 0, W = 0;
    for (int i = 0; i < ntiles; i++) {
        const fuse_tile *t = &tiles[i];
        if (t->oy < 0 || t->ox < 0)
            return ts_fail(err, TS_ERR_NUMERIC, "tile %d has a negative origin [%lld, %lld]", i,
                           (long long)t->oy, (long long)t->ox);
        if (t->oy > FUSE_MAX_SIDE || t->ox > FUSE_MAX_SIDE)
            return ts_fail(err, TS_ERR_NUMERIC, "tile %d has an absurd origin [%lld, %lld]", i,
                           (long long)t->oy, (long long)t->ox);
        if (t->oy + t->h > H) H = t->oy + t->h;
        if (t->ox + t->w > W) W = t->ox + t->w;
    }
    if (H <= 0 || W <= 0) return ts_fail(err, TS_ERR_ARG, "no tiles to fuse (empty canvas)");
    /* Tiles covering under 1/1000 of their canvas: a wild shift, not a scan. */
    double covered = 0;
    for (int i = 0; i < ntiles; i++) covered += (double)tiles[i].h * (double)tiles[i].w;
    if ((double)H * (double)W > 1000.0 * covered + 1e6)
        return ts_fail(err, TS_ERR_NUMERIC,
                       "canvas of %lldx%lld px for %d tiles covering %.0f px: absurd origins",
                       (long long)H, (long long)W, ntiles, covered);
    *h = H;
    *w = W;
    return TS_OK;
}

size_t fuse_usable_memory(size_t memory) {
    size_t reserve = memory / 8 + (memory / 8 < ((size_t)32 << 20) ? memory / 8 : ((size_t)32 << 20));
    return memory - reserve;
}

/* Tile sides are at most 2^30 (tiles.c) and nc at most 2^20: the products
 * are taken in double, saturating at SIZE_MAX rather than wrapping. */
static size_t sat_bytes(double b) { return b >= (double)SIZE_MAX ? SIZE_MAX : (size_t)b; }

size_t fuse_tile_weights_bytes(int64_t h, int64_t w) { return sat_bytes((double)h * (double)w * sizeof(float)); }

size_t fuse_tile_plane_bytes(int64_t nc, int64_t raw_h, int64_t raw_w, size_t in_elem) {
    return sat_bytes((double)nc * (double)raw_h * (double)raw_w * (double)in_elem);
}

int64_t fuse_row_group(int64_t block) {
    int64_t r = ((int64_t)256 << 10) / (8 * (block > 0 ? block : 1));
    if (r < 1) r = 1;
    return r < block ? r : block;
}

size_t fuse_block_bytes(const fuse_sizing *s, int64_t block) {
    size_t px = (size_t)block * (size_t)block;
    /* level-0 output + pyramid levels (<= 1/3 more) + the encoded copy the
     * zarr layer makes + num/den for one row group. */
    size_t out = px * (size_t)s->C * s->out_elem;
    return out + out / 3 + out + (size_t)(fuse_row_group(block) * block) * 8;
}

size_t fuse_strip_bytes(const fuse_sizing *s, int64_t block) {
    /* Tiles touching a block cover at most (block + tile) on each side;
     * their strips are at most float32 per channel (uint16 tiles are held
     * as uint16: this over-counts them twice), plus the raw read buffer. The
     * block size leaves room for the strips of two blocks (the pipeline's
     * read-ahead is then bounded by the budget, whatever the threads). */
    size_t sy = (size_t)(block + s->tile_h), sx = (size_t)(block + s->tile_w);
    return sy * sx * (size_t)s->C * 4 + (size_t)s->tile_h * (size_t)s->tile_w * (size_t)s->C * 4;
}

int fuse_blocks_in_flight(const fuse_sizing *s, int64_t block, size_t memory) {
    size_t strips = 2 * fuse_strip_bytes(s, block), one = fuse_block_bytes(s, block);
    size_t n = memory > strips && one ? (memory - strips) / one : 1;
    return n < 1 ? 1 : n > 1 << 20 ? 1 << 20 : (int)n;
}

static int64_t gcd64(int64_t a, int64_t b) {
    while (b) { int64_t t = a % b; a = b; b = t; }
    return a;
}

ts_status fuse_layout_init(fuse_layout *L, const fuse_sizing *s, ts_error *err) {
    memset(L, 0, sizeof *L);
    if (s->chunk <= 0) return ts_fail(err, TS_ERR_ARG, "chunk size %d must be positive", s->chunk);
    if (s->shard < 0) return ts_fail(err, TS_ERR_ARG, "shard size %d must be >= 0", s->shard);
    if (s->levels < 0 || s->levels > 16)
        return ts_fail(err, TS_ERR_ARG, "pyramid levels %d not in [0, 16]", s->levels);
    int64_t chunk = s->chunk;
    /* S*chunk must be divisible by 2^levels so every level's blocks align. */
    int64_t pow2 = (int64_t)1 << s->levels;
    int64_t s_step = pow2 / gcd64(chunk, pow2);
    int64_t S;
    if (s->shard > 0) {
        S = s->shard;
        if (S % s_step)
            return ts_fail(err, TS_ERR_ARG,
                           "shard of %d chunks of %lld px is not divisible by 2^%d (levels); "
                           "use a multiple of %lld chunks",
                           s->shard, (long long)chunk, s->levels, (long long)s_step);
    } else {
        int64_t side = s->canvas_h > s->canvas_w ? s->canvas_h : s->canvas_w;
        int64_t need = (side + chunk - 1) / chunk;
        const int64_t cap = FUSE_AUTO_BLOCK_PX / chunk > 1 ? FUSE_AUTO_BLOCK_PX / chunk : 1;
        S = need < cap ? need : cap;
        while (S > 1) {
            size_t cost = (size_t)FUSE_LAYOUT_BLOCKS * fuse_block_bytes(s, S * chunk) +
                          2 * fuse_strip_bytes(s, S * chunk);
            if (cost <= s->memory) break;
            S--;
        }
        /* Small canvases: rather more, smaller shards than idle threads.
         * At least FUSE_LAYOUT_BLOCKS blocks: with four, the first band's
         * reads, the blending and a thin last band hardly overlapped (a
         * 2.8k x 3.7k canvas on 2 threads: 4 blocks of 2560 px ran ~15%
         * slower than 12 of 1024 px, and each block buffer is 6x smaller). */
        while (S > 1) {
            int64_t nb = ((s->canvas_h + S * chunk - 1) / (S * chunk)) *
                         ((s->canvas_w + S * chunk - 1) / (S * chunk));
            if (nb >= FUSE_LAYOUT_BLOCKS) break;
            S--;
        }
        /* Prefer a multiple of 2^levels: every level then keeps the full
         * chunk size (and a later --t-out run derives the same chunks). */
        int64_t S_full = (S + pow2 - 1) / pow2 * pow2;
        size_t cost_full = (size_t)FUSE_LAYOUT_BLOCKS * fuse_block_bytes(s, S_full * chunk) +
                           2 * fuse_strip_bytes(s, S_full * chunk);
        if (S_full <= cap && cost_full <= s->memory) S = S_full;
        else S = (S + s_step - 1) / s_step * s_step;
    }
    L->canvas_h = s->canvas_h;
    L->canvas_w = s->canvas_w;
    L->C = s->C;
    L->chunk = chunk;
    L->block = S * chunk;
    L->nbands = (s->canvas_h + L->block - 1) / L->block;
    L->nbx = (s->canvas_w + L->block - 1) / L->block;
    L->levels = s->levels;
    if (L->block >> s->levels < 1)
        return ts_fail(err, TS_ERR_ARG, "block of %lld px is too small for %d pyramid levels",
                       (long long)L->block, s->levels);
    for (int k = 0; k <= s->levels; k++) L->level_chunk[k] = gcd64(chunk, L->block >> k);
    return TS_OK;
}

ts_status fuse_check_band(const fuse_layout *L, int64_t y0, int64_t y1, ts_error *err) {
    if (L->block <= 0) return ts_fail(err, TS_ERR_INTERNAL, "band check: block size %lld", (long long)L->block);
    if (y0 < 0 || y1 <= y0 || y1 > L->canvas_h)
        return ts_fail(err, TS_ERR_INTERNAL, "band [%lld, %lld) is outside the canvas of height %lld",
                       (long long)y0, (long long)y1, (long long)L->canvas_h);
    if (y0 % L->block != 0)
        return ts_fail(err, TS_ERR_INTERNAL,
                       "band [%lld, %lld) starts at row %lld, not on a shard boundary (shard "
                       "height %lld): two writers would share a shard and drop chunks",
                       (long long)y0, (long long)y1, (long long)y0, (long long)L->block);
    int64_t end = y0 + L->block < L->canvas_h ? y0 + L->block : L->canvas_h;
    if (y1 != end)
        return ts_fail(err, TS_ERR_INTERNAL,
                       "band [%lld, %lld) does not span exactly one shard row [%lld, %lld) "
                       "(shard height %lld)",
                       (long long)y0, (long long)y1, (long long)y0, (long long)end,
                       (long long)L->block);
    return TS_OK;
}

static int cmp_slot_load_order(const void *a, const void *b) {
    const fuse_slot *x = a, *y = b;
    if (x->bx0 != y->bx0) return x->bx0 < y->bx0 ? -1 : 1;
    return (x->tile > y->tile) - (x->tile < y->tile);
}

/* qsort has no context argument: block lists are sorted by tile index via
 * a key array of (tile, slot) pairs. */
typedef struct { int tile, slot; } tile_slot;
static int cmp_tile_slot(const void *a, const void *b) {
    const tile_slot *x = a, *y = b;
    return (x->tile > y->tile) - (x->tile < y->tile);
}

void fuse_block_costs(const fuse_plan *p, int64_t *cost) {
    const fuse_layout *L = &p->L;
    for (int b = 0; b < p->nbands; b++) {
        const fuse_band *band = &p->bands[b];
        for (int64_t bx = 0; bx < L->nbx; bx++) {
            int64_t c = 0;
            for (int k = band->block_start[bx]; k < band->block_start[bx + 1]; k++) {
                const fuse_slot *s = &band->slots[band->block_slots[k]];
                c += (s->r1 - s->r0) * L->block;
            }
            const int64_t x0 = bx * L->block, x1 = x0 + L->block < L->canvas_w ? x0 + L->block : L->canvas_w;
            if (c > 0) c += (band->y1 - band->y0) * (x1 - x0);
            cost[(int64_t)b * L->nbx + bx] = c;
        }
    }
}

/* The split of the blocks into ranks' runs: the cost of a run is its
 * blocks' (fuse_block_costs) plus the decoding of every tile it reads,
 * once (its area): a tile whose blocks two ranks share is decoded by both.
 * Counting a tile only where it is first read left the rank after each
 * border those decodes unpaid: on the 6x5 plate of 2048^2 tiles, 8 of the
 * 30 tiles decoded twice, rank 1 working while rank 0 waited at the end.
 * A run's cost only grows as it takes more blocks, so the greedy cut (each
 * run as long as fits under a bound) finds the runs of the smallest
 * largest cost, searched by bisection on the bound. */
typedef struct run_split {
    const fuse_plan *p;
    const fuse_tile *tiles;
    const int64_t *cost;  /* per block */
    int *stamp;           /* per tile: the run that last paid its decoding */
    int run;
} run_split;

/* What block g adds to the current run: its cost and the decoding of its
 * tiles the run has not read yet (now marked read). */
static int64_t run_add(run_split *x, int64_t g) {
    const fuse_band *band = &x->p->bands[g / x->p->L.nbx];
    const int64_t bx = g % x->p->L.nbx;
    int64_t c = x->cost[g];
    for (int k = band->block_start[bx]; k < band->block_start[bx + 1]; k++) {
        const int tile = band->slots[band->block_slots[k]].tile;
        if (x->stamp[tile] != x->run) {
            x->stamp[tile] = x->run;
            c += x->tiles[tile].h * x->tiles[tile].w;
        }
    }
    return c;
}

/* Cuts [0, n) greedily into runs of cost <= bound (each at least one
 * block); returns how many. With ends, ends[i] = the end of run i, for the
 * first `size` runs. */
static int64_t run_cut(run_split *x, int64_t n, int64_t bound, int64_t *ends, int size) {
    int64_t runs = 0, g = 0;
    while (g < n) {
        x->run++;
        int64_t acc = 0;
        const int64_t start = g;
        while (g < n) {
            const int64_t add = run_add(x, g);
            if (g > start && acc + add > bound) break;
            acc += add;
            g++;
        }
        if (ends && runs < size) ends[runs] = g;
        runs++;
    }
    return runs;
}

ts_status fuse_rank_blocks(const fuse_plan *p, const fuse_tile *tiles, int rank, int size, int64_t *g0, int64_t *g1,
                           ts_error *err) {
    const int64_t n = (int64_t)p->nbands * p->L.nbx;
    *g0 = 0, *g1 = n;
    if (size <= 1) return TS_OK;
    int ntiles = 0;
    for (int b = 0; b < p->nbands; b++)
        for (int s = 0; s < p->bands[b].nslots; s++)
            if (p->bands[b].slots[s].tile >= ntiles) ntiles = p->bands[b].slots[s].tile + 1;
    int64_t *cost = malloc((size_t)(n > 0 ? n : 1) * sizeof *cost);
    int64_t *ends = malloc((size_t)size * sizeof *ends);
    int *stamp = calloc((size_t)(ntiles > 0 ? ntiles : 1), sizeof *stamp);
    if (!cost || !ends || !stamp) {
        free(cost), free(ends), free(stamp);
        return ts_fail(err, TS_ERR_NOMEM, "out of memory for the costs of %lld blocks", (long long)n);
    }
    fuse_block_costs(p, cost);
    run_split x = {p, tiles, cost, stamp, 0};
    /* The bound lies between the dearest single block and the whole. */
    int64_t lo = 0, hi = 0;
    for (int64_t g = 0; g < n; g++) {
        x.run++;
        const int64_t c = run_add(&x, g);
        if (c > lo) lo = c;
    }
    x.run++;
    for (int64_t g = 0; g < n; g++) hi += run_add(&x, g);
    if (hi < lo) hi = lo;
    while (lo < hi) {
        const int64_t mid = lo + (hi - lo) / 2;
        if (run_cut(&x, n, mid, NULL, size) <= size) hi = mid;
        else lo = mid + 1;
    }
    for (int r = 0; r < size; r++) ends[r] = n; /* ranks past the last run: none */
    run_cut(&x, n, lo, ends, size);
    *g0 = rank == 0 ? 0 : ends[rank - 1];
    *g1 = ends[rank];
    free(cost), free(ends), free(stamp);
    return TS_OK;
}

void fuse_plan_free(fuse_plan *p) {
    if (!p) return;
    for (int b = 0; b < p->nbands; b++) {
        free(p->bands[b].slots);
        free(p->bands[b].block_start);
        free(p->bands[b].block_slots);
    }
    free(p->bands);
    free(p);
}

ts_status fuse_plan_build(const fuse_layout *L, const fuse_tile *tiles, int ntiles,
                          fuse_plan **out, ts_error *err) {
    *out = NULL;
    fuse_plan *p = calloc(1, sizeof *p);
    if (!p) return ts_fail(err, TS_ERR_NOMEM, "fuse plan");
    p->L = *L;
    p->nbands = (int)L->nbands;
    p->bands = calloc((size_t)p->nbands, sizeof *p->bands);
    int *count = calloc((size_t)p->nbands, sizeof *count);
    tile_slot *keys = NULL;
    if (!p->bands || !count) goto nomem;
    const int64_t B = L->block;
    for (int pass = 0; pass < 2; pass++) {
        for (int i = 0; i < ntiles; i++) {
            const fuse_tile *t = &tiles[i];
            if (t->h <= 0 || t->w <= 0) continue;
            int64_t b0 = t->oy / B, b1 = (t->oy + t->h - 1) / B;
            for (int64_t b = b0; b <= b1 && b < p->nbands; b++) {
                if (pass == 0) { count[b]++; continue; }
                fuse_band *band = &p->bands[b];
                fuse_slot *s = &band->slots[band->nslots++];
                int64_t y0 = b * B, y1 = y0 + B;
                s->tile = i;
                s->r0 = (y0 > t->oy ? y0 : t->oy) - t->oy;
                s->r1 = (y1 < t->oy + t->h ? y1 : t->oy + t->h) - t->oy;
                s->bx0 = t->ox / B;
                s->bx1 = (t->ox + t->w - 1) / B;
                if (s->bx1 >= L->nbx) s->bx1 = L->nbx - 1;
            }
        }
        if (pass == 0)
            for (int b = 0; b < p->nbands; b++) {
                p->bands[b].slots = calloc(count[b] ? (size_t)count[b] : 1, sizeof(fuse_slot));
                if (!p->bands[b].slots) goto nomem;
            }
    }
    for (int b = 0; b < p->nbands; b++) {
        fuse_band *band = &p->bands[b];
        band->y0 = b * B;
        band->y1 = band->y0 + B < L->canvas_h ? band->y0 + B : L->canvas_h;
        ts_status st = fuse_check_band(L, band->y0, band->y1, err);
        if (st != TS_OK) { free(count); fuse_plan_free(p); return st; }
        qsort(band->slots, (size_t)band->nslots, sizeof(fuse_slot), cmp_slot_load_order);
        band->block_start = calloc((size_t)L->nbx + 1, sizeof(int));
        int total = 0;
        for (int s = 0; s < band->nslots; s++) total += (int)(band->slots[s].bx1 - band->slots[s].bx0 + 1);
        band->block_slots = calloc(total ? (size_t)total : 1, sizeof(int));
        free(keys);
        keys = calloc(total ? (size_t)total : 1, sizeof *keys);
        if (!band->block_start || !band->block_slots || !keys) goto nomem;
        for (int s = 0; s < band->nslots; s++)
            for (int64_t bx = band->slots[s].bx0; bx <= band->slots[s].bx1; bx++)
                band->block_start[bx + 1]++;
        for (int64_t bx = 0; bx < L->nbx; bx++) band->block_start[bx + 1] += band->block_start[bx];
        int *fillp = calloc((size_t)L->nbx, sizeof(int));
        if (!fillp) goto nomem;
        for (int s = 0; s < band->nslots; s++)
            for (int64_t bx = band->slots[s].bx0; bx <= band->slots[s].bx1; bx++) {
                int k = band->block_start[bx] + fillp[bx]++;
                keys[k].tile = band->slots[s].tile;
                keys[k].slot = s;
            }
        free(fillp);
        for (int64_t bx = 0; bx < L->nbx; bx++) {
            int a = band->block_start[bx], e = band->block_start[bx + 1];
            qsort(keys + a, (size_t)(e - a), sizeof *keys, cmp_tile_slot);
            for (int k = a; k < e; k++) band->block_slots[k] = keys[k].slot;
        }
    }
    free(keys);
    free(count);
    *out = p;
    return TS_OK;
nomem:
    free(keys);
    free(count);
    fuse_plan_free(p);
    return ts_fail(err, TS_ERR_NOMEM, "fuse plan for %d tiles", ntiles);
}
