/* Diagonal bridges (bridge.h).
 *
 * Why: on the IHC plates of test_register_robust (overlap 16 of 128 px,
 * 10% blank tiles) 4 of 60 seeds had a tile with content all of whose
 * grid neighbours were blank: no pair placed it, and it landed on its
 * stage position, 4.5-7.3 px off; at a fifth, four tiles cut off by blank
 * ones were a group of their own, anchored on the grid, 3.4 px off. The
 * tiles at the diagonal cells overlap each such tile in a corner (here
 * 6-26 px on each side), and the tissue there is as textured as anywhere.
 *
 * Which pairs: the tiles outside their well's largest group over trusted
 * pairs none of whose grid neighbours is in it, each with every diagonal
 * neighbour in it. A tile beside the group whose pairs with it failed,
 * even in the stage pass, is blank (or its overlaps are): trying it cost
 * the register bench's plates (5% blank tiles) 14% more CPU at 256 px, a
 * decode more of each blank tile's diagonal neighbours, for nothing. The
 * pairs are fixed before any is registered and each is registered on its
 * own, so the result does not depend on the schedule.
 *
 * How: as the stage pass redoes a pair (reregister.c), in strips over the
 * corner the two directions' models predict (the right pairs' offset plus
 * or minus the lower pairs'), as deep along each axis as that direction's
 * measured overlap plus the window, with stricter acceptance than a
 * strip's (below): a bridge is its tile's or group's only link, so nothing
 * downstream can catch a wrong one. */
#include "register/bridge.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/error.h"
#include "common/union_find.h"

/* The thinnest corner a shift in the window may leave, px: at 4 x 4 px
 * (the strips' limit) noise alone scores NCCs over 0.5, and every window
 * maximum of a blank tile's corner sat at the window's far end. */
#define BRIDGE_MIN_SIDE 8
/* The NCC from which a corner's maximum is a match without the null
 * draws: blank tiles' corners against content reached 0.46 at 8 x 8 px
 * and more, content corners of the IHC plates 0.99; the null draws of a
 * smooth texture's corner reach 0.8-0.92, so below this level a corner
 * is hardly ever accepted. */
#define BRIDGE_SURE_NCC 0.8
/* ... and the best other local maximum's misfit (1 - NCC) at least this
 * many times the maximum's. Phase-contrast corners (cell16_blank, seeds
 * 101-160) reached NCCs of 0.88-0.95 at shifts 3-34 px off, with a rival
 * 1.0-1.7 times as far from 1; simulated corners (blobs, 20-40% blank
 * tiles) 0.90 at 4.6 and 28.9 px off with rivals 8.9 and 7.6 times as
 * far; the IHC corners' true maxima 0.97-0.997, rivals 16-164 times as far
 * (one at 5.5, refused). */
#define BRIDGE_RIVAL 10.0
/* The window around the prediction, in spreads of a pair's offset (plus
 * 2 px): the difference of two uniform jitters of +-J has a spread of
 * 0.82 J and a range of +-2.45 spreads. */
#define BRIDGE_WINDOW 3.0

typedef struct cell_key {
    int well, gy, gx;
    int64_t id;
} cell_key;

static int cmp_key(const void *pa, const void *pb) {
    const cell_key *a = pa, *b = pb;
    if (a->well != b->well) return a->well < b->well ? -1 : 1;
    if (a->gy != b->gy) return a->gy < b->gy ? -1 : 1;
    return a->gx < b->gx ? -1 : a->gx > b->gx;
}

static int cmp_bridge(const void *pa, const void *pb) {
    const ts_bridge *a = pa, *b = pb;
    if (a->well != b->well) return a->well < b->well ? -1 : 1;
    if (a->a != b->a) return a->a < b->a ? -1 : 1;
    return a->b < b->b ? -1 : a->b > b->b;
}


static int64_t lookup(const cell_key *keys, int64_t n, int well, int gx, int gy) {
    const cell_key k = {well, gy, gx, 0};
    const cell_key *hit = bsearch(&k, keys, (size_t)n, sizeof k, cmp_key);
    return hit ? hit->id : -1;
}

typedef struct bridge_ctx {
    const ts_bridge_pass *bp;
    ts_bridge *br;
    ts_strip_geometry base;
    int ry, rx;
    ts_tile_cache *cache;
    ts_registrar **workers;
    ts_rereg_scratch *scratch;
} bridge_ctx;

/* The strips of pair q where the model predicts its corner (false: it
 * leaves no corner to search); q->res is reset to the prediction. */
static bool place(const bridge_ctx *x, ts_bridge *q, ts_strip_geometry *g) {
    const ts_bridge_pass *bp = x->bp;
    const int64_t ia = bp->tile_base[q->well] + q->a, ib = bp->tile_base[q->well] + q->b;
    const ts_stage_dir *right = &bp->model->dir[TS_PAIR_RIGHT], *below = &bp->model->dir[TS_PAIR_BELOW];
    /* b down and to the right of a: the right pairs' offset plus the lower
     * pairs'; down and to the left: the lower pairs' less the right ones'. */
    const double s = bp->cell[ib][0] > bp->cell[ia][0] ? 1.0 : -1.0;
    double ey = s * right->offset[0] + below->offset[0], ex = s * right->offset[1] + below->offset[1];
    if (bp->guess) {
        ey += bp->guess[ib][0] - bp->guess[ia][0];
        ex += bp->guess[ib][1] - bp->guess[ia][1];
    }
    memset(&q->res, 0, sizeof q->res);
    q->res.dy = ey, q->res.dx = ex;
    return ts_strip_geometry_at(&x->base, bp->h, bp->w, ey, ex, g);
}

/* A refused bridge whose corner matched (still unmatched): why, and the
 * maximum's and the rival's NCC, for the run's summary. */
static void contest(ts_bridge *q, const ts_rereg_result *rr, bool unfitted) {
    q->res.ncc = rr->ncc;
    q->res.ncc_second = rr->second;
    q->res.unfitted = unfitted;
    q->contested = true;
}

static ts_status bridge_one(void *user, int64_t i, int worker, ts_error *err) {
    bridge_ctx *x = user;
    const ts_bridge_pass *bp = x->bp;
    ts_bridge *q = &x->br[i];
    const int64_t ia = bp->tile_base[q->well] + q->a, ib = bp->tile_base[q->well] + q->b;
    ts_strip_geometry g;
    if (!place(x, q, &g)) return TS_OK; /* (its tiles have no use counted) */
    ts_registrar **slot = &x->workers[worker];
    ts_status st;
    if (!*slot) {
        ts_register_options o = *bp->reg;
        o.background_px = 0; /* as the stage pass: no room for a 32 px box in a corner */
        if ((st = ts_registrar_create(g.sh, g.sw, &o, slot, err)) != TS_OK) return st;
    }
    ts_samples ta, tb;
    ts_rereg_result rr;
    if ((st = ts_tile_cache_get(x->cache, ia, &ta, err)) != TS_OK) return st;
    if ((st = ts_tile_cache_get(x->cache, ib, &tb, err)) == TS_OK) {
        const ts_rereg_window win = {x->ry, x->rx, BRIDGE_MIN_SIDE, BRIDGE_SURE_NCC};
        st = ts_reregister_pair(*slot, &g, ta, tb, bp->w, &win, false, 0, 0, &rr, &x->scratch[worker], err);
        ts_tile_cache_release(x->cache, ib);
    }
    ts_tile_cache_release(x->cache, ia);
    if (st != TS_OK) return st;
    /* A corner's maximum must also stand out from the window's other
     * local maxima in misfit (1 - NCC), which at a few hundred px of a
     * smooth texture are nearly as good as the true one. */
    /* Refused as below with a maximum of match level: the tile has
     * content left where the stage put it, which the run must name (seed
     * 114 of the IHC recipe: a corner tile 4.6 px off, NCC 0.97 and a
     * rival 5.5 times as far from 1, said nowhere). */
    const bool strong = ts_reregister_sure(&rr, bp->reg->min_ncc);
    if (rr.second > -1 && 1 - rr.second < BRIDGE_RIVAL * (1 - rr.ncc)) {
        if (strong) contest(q, &rr, false);
        return TS_OK;
    }
    /* A bridge is its tile's (or group's) only link: an unfitted maximum
     * (no basin of alignment; elsewhere a tenth of its confidence, which
     * does not matter for a lone link) is refused: 6.3 and 8.8 px off on
     * simulated plates. */
    if (ts_reregister_choose(&rr, bp->reg->min_ncc, &q->res) && bp->reg->refine && q->res.unfitted) {
        q->res.matched = false;
        if (strong) contest(q, &rr, true);
    }
    return TS_OK;
}

/* The pairs to try: each tile outside its well's largest group over
 * trusted pairs and with no grid neighbour in it, with each diagonal
 * neighbour in it. */
static ts_status candidates(const ts_bridge_pass *bp, ts_bridge **out, int64_t *nout, ts_error *err) {
    const int64_t nt = bp->ntiles;
    int *parent = malloc((size_t)(nt ? nt : 1) * sizeof *parent);
    int *size = calloc((size_t)(nt ? nt : 1), sizeof *size);
    int *main_root = malloc((size_t)(bp->nwells ? bp->nwells : 1) * sizeof *main_root);
    cell_key *keys = malloc((size_t)(nt ? nt : 1) * sizeof *keys);
    ts_bridge *br = NULL;
    int64_t nb = 0, cap = 0;
    ts_status st = TS_OK;
    if (!parent || !size || !main_root || !keys) {
        st = ts_fail(err, TS_ERR_NOMEM, "out of memory for the diagonal bridges of %lld tiles", (long long)nt);
        goto done;
    }
    for (int64_t t = 0; t < nt; t++) parent[t] = (int)t;
    for (int64_t i = 0; i < bp->npairs; i++)
        if (bp->trusted[i]) ts_uf_join(parent, (int)bp->pair_tiles[i][0], (int)bp->pair_tiles[i][1]);
    for (int wi = 0; wi < bp->nwells; wi++) {
        const int64_t lo = bp->tile_base[wi], hi = wi + 1 < bp->nwells ? bp->tile_base[wi + 1] : nt;
        main_root[wi] = ts_uf_largest(parent, lo, hi, size);
        for (int64_t t = lo; t < hi; t++) keys[t] = (cell_key){wi, bp->cell[t][1], bp->cell[t][0], t};
    }
    qsort(keys, (size_t)nt, sizeof *keys, cmp_key);
    for (int wi = 0; wi < bp->nwells; wi++) {
        const int64_t lo = bp->tile_base[wi], hi = wi + 1 < bp->nwells ? bp->tile_base[wi + 1] : nt;
        for (int64_t t = lo; t < hi; t++) {
            if (ts_uf_find(parent, (int)t) == main_root[wi]) continue;
            /* A grid neighbour in the main group whose pair with t failed
             * even in the stage pass: t is blank (or its overlaps are), and
             * a corner would not do better. */
            bool beside_main = false;
            for (int k = 0; k < 4 && !beside_main; k++) {
                const int dx = k == 0 ? -1 : k == 1 ? 1 : 0, dy = k == 2 ? -1 : k == 3 ? 1 : 0;
                int64_t u = lookup(keys, nt, wi, bp->cell[t][0] + dx, bp->cell[t][1] + dy);
                beside_main = u >= 0 && ts_uf_find(parent, (int)u) == main_root[wi];
            }
            if (beside_main) continue;
            for (int k = 0; k < 4; k++) {
                const int dy = k < 2 ? -1 : 1, dx = k % 2 ? 1 : -1;
                int64_t u = lookup(keys, nt, wi, bp->cell[t][0] + dx, bp->cell[t][1] + dy);
                if (u < 0 || ts_uf_find(parent, (int)u) != main_root[wi]) continue;
                if (nb == cap) {
                    int64_t nc = cap ? 2 * cap : 64;
                    ts_bridge *nbr = realloc(br, (size_t)nc * sizeof *nbr);
                    if (!nbr) {
                        st = ts_fail(err, TS_ERR_NOMEM, "out of memory for %lld diagonal pairs", (long long)nc);
                        goto done;
                    }
                    br = nbr, cap = nc;
                }
                const int64_t a = dy < 0 ? u : t, b = dy < 0 ? t : u;
                memset(&br[nb], 0, sizeof br[nb]);
                br[nb].well = wi, br[nb].a = (int)(a - lo), br[nb].b = (int)(b - lo);
                nb++;
            }
        }
    }
    if (nb) qsort(br, (size_t)nb, sizeof *br, cmp_bridge);
done:
    free(parent), free(size), free(main_root), free(keys);
    if (st != TS_OK) {
        free(br);
        br = NULL, nb = 0;
    }
    *out = br;
    *nout = nb;
    return st;
}

ts_status ts_bridge_tiles(const ts_bridge_pass *bp, ts_bridge **out, int64_t *nout, int64_t *tile_reads,
                          ts_error *err) {
    *out = NULL, *nout = 0, *tile_reads = 0;
    const ts_stage_dir *right = &bp->model->dir[TS_PAIR_RIGHT], *below = &bp->model->dir[TS_PAIR_BELOW];
    if (!right->valid || !below->valid) return TS_OK;
    bridge_ctx x = {bp, NULL, {0}, 0, 0, NULL, NULL, NULL};
    /* The diagonal offset is the two tiles' jitters apart, as a grid
     * pair's is (a tile between them cancels: (j_m - j_a) + (j_b - j_m)),
     * so its spread per axis is a pair's, the larger of the two
     * directions'; the window is BRIDGE_WINDOW of those and 2 px, not the
     * strips' 4 (which the thin overlaps on a strip window's edge need).
     * With the two directions' windows added in quadrature (+-29-40 px
     * over corners of 9-25 px) simulated plates with 20-40% blank tiles
     * had 5 of 337 bridges 28-43 px off, moving whole groups of tiles with
     * them. */
    const double sy = fmax(right->spread[0], below->spread[0]), sx = fmax(right->spread[1], below->spread[1]);
    x.ry = (int)ceil(BRIDGE_WINDOW * sy) + 2;
    x.rx = (int)ceil(BRIDGE_WINDOW * sx) + 2;
    /* As the stage pass's strips, along each axis (no FFT-friendly
     * trimming: corners are a few dozen px). */
    x.base.sh = ts_stage_depth(below->overlap, x.ry, bp->h);
    x.base.sw = ts_stage_depth(right->overlap, x.rx, bp->w);
    if (x.base.sh < 4 || x.base.sw < 4) return TS_OK;
    int64_t nb;
    ts_status st = candidates(bp, &x.br, &nb, err);
    if (st != TS_OK || nb == 0) return st;
    const int nworkers = ts_pool_size(bp->pool);
    ts_tile_cache *own = NULL;
    int *uses = calloc((size_t)(bp->ntiles ? bp->ntiles : 1), sizeof *uses);
    x.workers = calloc((size_t)nworkers, sizeof *x.workers);
    x.scratch = calloc((size_t)nworkers, sizeof *x.scratch);
    if (!uses || !x.workers || !x.scratch) {
        st = ts_fail(err, TS_ERR_NOMEM, "out of memory for %lld diagonal pairs", (long long)nb);
        goto done;
    }
    for (int64_t i = 0; i < nb; i++) {
        ts_strip_geometry g;
        if (!place(&x, &x.br[i], &g)) continue; /* not searched: its tiles not read */
        uses[bp->tile_base[x.br[i].well] + x.br[i].a]++;
        uses[bp->tile_base[x.br[i].well] + x.br[i].b]++;
    }
    if (!(x.cache = ts_tile_cache_for_pass(bp->cache, bp->ntiles, uses, bp->cache_bytes, bp->load, bp->release,
                                           bp->load_user, &own))) {
        st = ts_fail(err, TS_ERR_NOMEM, "out of memory for the diagonal pairs' tile cache");
        goto done;
    }
    const int64_t loads0 = ts_tile_cache_get_stats(x.cache).loads;
    st = ts_pool_run(bp->pool, nb, bridge_one, &x, err);
    *tile_reads = ts_tile_cache_get_stats(x.cache).loads - loads0;
done:
    for (int i = 0; x.workers && i < nworkers; i++) ts_registrar_free(x.workers[i]);
    for (int i = 0; x.scratch && i < nworkers; i++) ts_rereg_scratch_free(&x.scratch[i]);
    free(x.workers), free(x.scratch), free(uses);
    ts_tile_cache_destroy(own);
    if (st != TS_OK) {
        free(x.br);
        return st;
    }
    *out = x.br;
    *nout = nb;
    return TS_OK;
}
