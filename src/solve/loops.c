/* The loop check: outlier rejection by loop consistency, before the solve.
 *
 * The four pairs around a grid cell (top = (x,y)->(x+1,y), right =
 * (x+1,y)->(x+1,y+1), bottom = (x,y+1)->(x+1,y+1), left = (x,y)->(x,y+1))
 * measure a closed walk: top + right - bottom - left is 0 for any true
 * tile positions, so the loop residual is registration error only. One
 * wrong pair (a wrong correlation peak, tens of px) breaks both loops it is
 * in, by its own error, while each of its loop mates still closes its other
 * loop. L1 survives a wrong pair where the right ones around a tile, or a
 * block of tiles, outnumber the wrong ones in effect; where they do not (the
 * pairs around a block of two tiles wrong in about the same direction, the
 * border), it follows the wrong ones, and at full confidence so do the
 * weights. The loops do not need a majority.
 *
 * A loop is bad when its residual's norm exceeds T = max(LOOP_FLOOR_PX,
 * LOOP_SIGMAS x s), s the robust per-axis spread of the loop residuals
 * (1.4826 x the median |component|; loops close on zero, so no centring).
 * A pair is condemned, in rounds, when all its loops are bad and either
 *   - it has two loops that imply the same error of it (each bad loop
 *     says "this pair is off by sign x residual"; a right pair between two
 *     wrong ones gets two unrelated answers), or
 *   - it is the only pair of one of its bad loops without a good loop (the
 *     others are vouched for by a loop that closes: a pair on the plate's
 *     border has one loop only).
 * Its implied error is then taken out of its measurement for the next
 * rounds' loops, so a second wrong pair sharing a loop with it shows up on
 * its own (two wrong pairs at one tile are found in two rounds). Bad loops
 * no round can pin on one pair go to explain_clusters (the sparsest set of
 * pairs that closes them, when it is unique). Where several sets do (a
 * tile three of whose four pairs are wrong: each of the four explains the
 * loops as well), the stage model of the rows and columns decides when one
 * set is clearly the one that leaves the offsets where the stage put its
 * other tiles (loop_model.c; a gross error moves a tile tens of px off its
 * row, the stage scatters less). What still cannot be told apart keeps its
 * weights, for L1 and the confidences to decide as without the check:
 * condemning all of it would also condemn right pairs, and where wrong
 * pairs hide from the loops (two wrong by the same vector at one tile close
 * the cell they share) leave the wrong ones in charge.
 *
 * Where pairs are missing (a blank tile's, unmatched) the loops are the
 * faces of the pair graph: the cells joined through the missing pairs,
 * walked around by the pairs on their border (grid_loops).
 *
 * Condemned pairs are down-weighted (TS_LOOP_FACTOR), never removed: a pair
 * in no closed face (next to a blank region that reaches the plate's edge,
 * a lone bridge) gives no information and keeps its weight. Sequential, in
 * grid order: the same answer whatever the thread count or pair order. */
#include "solve/loops.h"
#include "solve/loop_model.h"
#include "common/union_find.h"

#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* Loop residuals below this many px are registration noise whatever the
 * measured spread (noise-free pairs, integer peaks). */
#define LOOP_FLOOR_PX 1.5
/* ... and below this many robust standard deviations of the residuals. */
#define LOOP_SIGMAS 5.0
/* Two loops agree on a pair's error within this many T: their difference
 * is the noise of the six other pairs (1.22 T for Gaussian noise). */
#define LOOP_AGREE 1.5
/* Rounds of blame before what is left is condemned together. Each round
 * condemns at least one pair; chains of wrong pairs need one per link. */
#define LOOP_MAX_ROUNDS 64

typedef struct grid_edge {
    uint64_t key;   /* (y, x, dir): dir 0 = to the right, 1 = downwards */
    int pair;       /* index among the pairs */
    int from, to;   /* left/top tile, right/bottom tile */
    double dn[2];   /* measured offset to - from, with the errors taken out */
    int loop[2], nloops;
    unsigned char condemned;
    unsigned char twin; /* another edge is in the same two loops (grid_loops) */
} grid_edge;

/* A loop: the edges around one face of the grid's pair graph, each with
 * the sign the walk takes it with. A face is a grid cell with its four
 * pairs (top, right, bottom, left: signs +, +, -, -), or cells joined
 * through the pairs missing between them (the ring of eight pairs around
 * a blank tile, whose own pairs are unmatched), up to FACE_MAX pairs. */
#define FACE_MAX 12
typedef struct grid_loop {
    int n;
    int edge[FACE_MAX];
    signed char sign[FACE_MAX];
} grid_loop;

static const double LOOP_SIGN[4] = {1, 1, -1, -1};

static uint64_t edge_key(int64_t x, int64_t y, int dir) {
    return ((uint64_t)y << 33) | ((uint64_t)x << 1) | (uint64_t)dir;
}

static int cmp_edge(const void *p, const void *q) {
    const grid_edge *a = p, *b = q;
    if (a->key != b->key) return a->key < b->key ? -1 : 1;
    return (a->pair > b->pair) - (a->pair < b->pair);
}

static int cmp_double(const void *p, const void *q) {
    double a = *(const double *)p, b = *(const double *)q;
    return (a > b) - (a < b);
}

/* bsearch's comparison of a key with an edge (the edges are sorted by key,
 * one edge per key: grid_edges). */
static int cmp_key_edge(const void *k, const void *g) {
    const uint64_t key = *(const uint64_t *)k, ek = ((const grid_edge *)g)->key;
    return (key > ek) - (key < ek);
}

static int find_edge(const grid_edge *e, int ne, uint64_t key) {
    const grid_edge *hit = bsearch(&key, e, (size_t)ne, sizeof *e, cmp_key_edge);
    return hit ? (int)(hit - e) : -1;
}

static void residual(const grid_edge *e, const grid_loop *l, double r[2]) {
    r[0] = r[1] = 0;
    for (int k = 0; k < l->n; k++) {
        r[0] += l->sign[k] * e[l->edge[k]].dn[0];
        r[1] += l->sign[k] * e[l->edge[k]].dn[1];
    }
}

/* The sign of edge i in loop l (its error enters the residual so). */
static double sign_in(const grid_loop *l, int i) {
    for (int k = 0; k < l->n; k++)
        if (l->edge[k] == i) return l->sign[k];
    return 0;
}

static bool has_good_loop(const grid_edge *e, const unsigned char *bad) {
    for (int k = 0; k < e->nloops; k++)
        if (!bad[e->loop[k]]) return true;
    return false;
}

/* The edges of the plate's grid: pairs of horizontal or vertical
 * neighbours, oriented left-to-right / top-to-bottom; a grid edge measured
 * by more than one pair is left out (which to trust is not the loops'
 * business). Returns the count, or -1 (no memory). */
static int grid_edges(int ntiles, const int *gx, const int *gy, int npairs, const int *a, const int *b,
                      const unsigned char *usable, const double (*d)[2], grid_edge **out) {
    *out = NULL;
    int64_t minx = INT64_MAX, miny = INT64_MAX, maxx = INT64_MIN, maxy = INT64_MIN;
    for (int i = 0; i < ntiles; i++) {
        minx = gx[i] < minx ? gx[i] : minx, maxx = gx[i] > maxx ? gx[i] : maxx;
        miny = gy[i] < miny ? gy[i] : miny, maxy = gy[i] > maxy ? gy[i] : maxy;
    }
    /* The key packs x and y (+1 for the neighbours looked up) in 31 bits. */
    if (ntiles == 0 || maxx - minx >= (INT64_C(1) << 30) || maxy - miny >= (INT64_C(1) << 30)) return 0;
    grid_edge *e = malloc((size_t)(npairs ? npairs : 1) * sizeof *e);
    if (!e) return -1;
    int ne = 0;
    for (int k = 0; k < npairs; k++) {
        if (!usable[k]) continue;
        int64_t ddx = (int64_t)gx[b[k]] - gx[a[k]], ddy = (int64_t)gy[b[k]] - gy[a[k]];
        int dir;
        if (ddy == 0 && (ddx == 1 || ddx == -1)) dir = 0;
        else if (ddx == 0 && (ddy == 1 || ddy == -1)) dir = 1;
        else continue;
        bool fwd = ddx + ddy > 0;
        int from = fwd ? a[k] : b[k];
        grid_edge *g = &e[ne++];
        memset(g, 0, sizeof *g);
        g->key = edge_key(gx[from] - minx, gy[from] - miny, dir);
        g->pair = k;
        g->from = from;
        g->to = fwd ? b[k] : a[k];
        g->dn[0] = fwd ? d[k][0] : -d[k][0];
        g->dn[1] = fwd ? d[k][1] : -d[k][1];
    }
    qsort(e, (size_t)ne, sizeof *e, cmp_edge);
    int kept = 0;
    for (int i = 0; i < ne;) {
        int j = i + 1;
        while (j < ne && e[j].key == e[i].key) j++;
        if (j == i + 1) e[kept++] = e[i];
        i = j;
    }
    *out = e;
    return kept;
}

static uint64_t cell_key(uint64_t x, uint64_t y) { return (y << 32) | x; }

static int cmp_u64(const void *p, const void *q) {
    const uint64_t a = *(const uint64_t *)p, b = *(const uint64_t *)q;
    return (a > b) - (a < b);
}

static int find_cell(const uint64_t *c, int nc, uint64_t key) {
    const uint64_t *hit = bsearch(&key, c, (size_t)nc, sizeof *c, cmp_u64);
    return hit ? (int)(hit - c) : -1;
}

/* Side k (top, right, bottom, left) of cell (x, y): the edge's key, and
 * the cell across it (*ox, *oy; false when that is off the grid). */
static bool cell_side(uint64_t x, uint64_t y, int k, uint64_t *key, uint64_t *ox, uint64_t *oy) {
    static const int ex[4] = {0, 1, 0, 0}, ey[4] = {0, 0, 1, 0}, dir[4] = {0, 1, 0, 1};
    static const int cx[4] = {0, 1, 0, -1}, cy[4] = {-1, 0, 1, 0};
    *key = edge_key((int64_t)(x + (uint64_t)ex[k]), (int64_t)(y + (uint64_t)ey[k]), dir[k]);
    if ((cx[k] < 0 && x == 0) || (cy[k] < 0 && y == 0)) return false;
    *ox = x + (uint64_t)(int64_t)cx[k], *oy = y + (uint64_t)(int64_t)cy[k];
    return true;
}

/* Whether the loop's walk closes on the same tiles (two tiles at one grid
 * position, possible through the library, break it): each tile entered as
 * often as left. */
static bool closes(const grid_edge *e, const grid_loop *c) {
    for (int k = 0; k < c->n; k++)
        for (int end = 0; end < 2; end++) {
            const int tile = end ? e[c->edge[k]].to : e[c->edge[k]].from;
            int sum = 0;
            for (int j = 0; j < c->n; j++)
                sum += (e[c->edge[j]].to == tile) * c->sign[j] - (e[c->edge[j]].from == tile) * c->sign[j];
            if (sum) return false;
        }
    return true;
}

/* The faces: the cells next to an edge, joined through the sides whose
 * pair is missing; a face reaching past the grid or a cell next to no
 * edge (a blank region's inside) is open and no loop, nor one of more than
 * FACE_MAX pairs. Loops in the order of their first cell (row by row; a
 * lone cell's pairs top, right, bottom, left), each edge in at most the
 * two faces on its sides. */
static int grid_loops(grid_edge *e, int ne, grid_loop **out) {
    *out = NULL;
    const size_t cap = (size_t)(2 * ne + 1);
    uint64_t *cell = malloc(cap * sizeof *cell);
    int *parent = malloc(cap * sizeof *parent), *face = malloc(cap * sizeof *face);
    int *side = malloc(4 * cap * sizeof *side), *other = malloc(4 * cap * sizeof *other);
    unsigned char *open = calloc(cap, 1);
    int nc = 0, nl = -1;
    if (!cell || !parent || !face || !side || !other || !open) goto done;
    for (int i = 0; i < ne; i++) {
        const uint64_t x = (e[i].key >> 1) & ((UINT64_C(1) << 32) - 1), y = e[i].key >> 33;
        cell[nc++] = cell_key(x, y); /* the cell below (right of) it */
        if (!(e[i].key & 1) && y > 0) cell[nc++] = cell_key(x, y - 1);
        if ((e[i].key & 1) && x > 0) cell[nc++] = cell_key(x - 1, y);
    }
    qsort(cell, (size_t)nc, sizeof *cell, cmp_u64);
    int m = 0;
    for (int i = 0; i < nc; i++)
        if (!m || cell[i] != cell[m - 1]) cell[m++] = cell[i];
    nc = m;
    /* Each cell's sides: the edge there (-1: missing) and the cell across
     * (-1: none). */
    for (int c = 0; c < nc; c++) {
        const uint64_t x = cell[c] & ((UINT64_C(1) << 32) - 1), y = cell[c] >> 32;
        for (int k = 0; k < 4; k++) {
            uint64_t key, ox, oy;
            const bool inside = cell_side(x, y, k, &key, &ox, &oy);
            side[4 * c + k] = find_edge(e, ne, key);
            other[4 * c + k] = inside ? find_cell(cell, nc, cell_key(ox, oy)) : -1;
        }
    }
    /* Cells joined through their missing sides; open where one leads off
     * the grid or to a cell next to no edge. */
    for (int c = 0; c < nc; c++) parent[c] = c;
    for (int c = 0; c < nc; c++)
        for (int k = 0; k < 4; k++) {
            if (side[4 * c + k] >= 0) continue;
            if (other[4 * c + k] < 0) open[c] = 1;
            else ts_uf_join(parent, c, other[4 * c + k]);
        }
    for (int c = 0; c < nc; c++) parent[c] = ts_uf_find(parent, c);
    for (int c = 0; c < nc; c++) open[parent[c]] |= open[c];
    /* A face's pairs: its cells' present sides whose other cell is in
     * another face (or none). Counted per face (at its root, the face's
     * first cell: union_find.h), numbered, then filled. */
#define FACE_SIDE(c, k) (side[4 * (c) + (k)] >= 0 && !(other[4 * (c) + (k)] >= 0 && parent[other[4 * (c) + (k)]] == parent[c]))
    memset(face, 0, (size_t)nc * sizeof *face);
    for (int c = 0; c < nc; c++)
        for (int k = 0; k < 4; k++) face[parent[c]] += FACE_SIDE(c, k);
    nl = 0;
    for (int c = 0; c < nc; c++)
        if (parent[c] == c) face[c] = !open[c] && face[c] >= 3 && face[c] <= FACE_MAX ? nl++ : -1;
    if (!(*out = calloc((size_t)(nl ? nl : 1), sizeof **out))) {
        nl = -1;
        goto done;
    }
    for (int c = 0; c < nc; c++) {
        if (face[parent[c]] < 0) continue;
        grid_loop *g = &(*out)[face[parent[c]]];
        for (int k = 0; k < 4; k++)
            if (FACE_SIDE(c, k)) {
                g->edge[g->n] = side[4 * c + k];
                g->sign[g->n] = (signed char)LOOP_SIGN[k];
                g->n++;
            }
    }
#undef FACE_SIDE
    /* Loops whose walk does not close on their tiles are dropped; each edge
     * is told its loops. */
    int kept = 0;
    for (int c = 0; c < nl; c++) {
        if (!closes(e, &(*out)[c])) continue;
        grid_loop *g = &(*out)[kept];
        if (kept != c) *g = (*out)[c];
        for (int k = 0; k < g->n; k++) {
            grid_edge *d = &e[g->edge[k]];
            if (d->nloops < 2) d->loop[d->nloops++] = kept;
        }
        kept++;
    }
    nl = kept;
    /* Edges in the same two loops (a tile between two faces with two pairs
     * only, one on each side) are in series: the loops see the sum of
     * their errors, not which one erred. (Two cells share one edge: never
     * so on a full grid.) */
    for (int c = 0; c < nl; c++) {
        const grid_loop *g = &(*out)[c];
        for (int k = 0; k < g->n; k++)
            for (int q = k + 1; q < g->n; q++) {
                grid_edge *a = &e[g->edge[k]], *b = &e[g->edge[q]];
                if (a->nloops == 2 && b->nloops == 2 && a->loop[0] == b->loop[0] && a->loop[1] == b->loop[1])
                    a->twin = b->twin = 1;
            }
    }
done:
    free(cell), free(parent), free(face), free(side), free(other), free(open);
    return nl;
}

/* T: the robust spread of the loop residuals, at least the floor. */
static int loop_threshold(const grid_edge *e, const grid_loop *l, int nl, double *t) {
    double *v = malloc((size_t)(2 * nl + 1) * sizeof *v);
    if (!v) return -1;
    for (int c = 0; c < nl; c++) {
        double r[2];
        residual(e, &l[c], r);
        v[2 * c] = fabs(r[0]);
        v[2 * c + 1] = fabs(r[1]);
    }
    qsort(v, (size_t)(2 * nl), sizeof *v, cmp_double);
    double s = 1.4826 * v[nl]; /* the median of 2 nl values */
    free(v);
    *t = fmax(LOOP_FLOOR_PX, LOOP_SIGMAS * s);
    return 0;
}

static void mark_bad(const grid_edge *e, const grid_loop *l, int nl, double t, double (*r)[2], unsigned char *bad) {
    for (int c = 0; c < nl; c++) {
        residual(e, &l[c], r[c]);
        bad[c] = hypot(r[c][0], r[c][1]) > t;
    }
}

static bool all_bad(const grid_edge *g, const unsigned char *bad) {
    if (g->nloops == 0) return false;
    for (int k = 0; k < g->nloops; k++)
        if (!bad[g->loop[k]]) return false;
    return true;
}

/* One round of blame (see the top of the file). Returns pairs condemned. */
static int blame_round(grid_edge *e, int ne, const grid_loop *l, int nl, double t, double (*r)[2],
                       unsigned char *bad, unsigned char *touched) {
    mark_bad(e, l, nl, t, r, bad);
    memset(touched, 0, (size_t)nl);
    int n = 0;
    for (int i = 0; i < ne; i++) {
        grid_edge *g = &e[i];
        if (g->condemned || !all_bad(g, bad)) continue;
        /* A loop already explained this round has a stale residual. */
        bool stale = false;
        for (int k = 0; k < g->nloops; k++) stale |= touched[g->loop[k]];
        if (stale) continue;
        double implied[2][2];
        for (int k = 0; k < g->nloops; k++) {
            double s = sign_in(&l[g->loop[k]], i);
            implied[k][0] = s * r[g->loop[k]][0];
            implied[k][1] = s * r[g->loop[k]][1];
        }
        double err[2];
        bool blamed = false;
        if (g->nloops == 2 && !g->twin &&
            hypot(implied[0][0] - implied[1][0], implied[0][1] - implied[1][1]) <= LOOP_AGREE * t) {
            err[0] = 0.5 * (implied[0][0] + implied[1][0]);
            err[1] = 0.5 * (implied[0][1] + implied[1][1]);
            blamed = true;
        }
        for (int k = 0; k < g->nloops && !blamed; k++) {
            const grid_loop *c = &l[g->loop[k]];
            bool alone = true;
            for (int j = 0; j < c->n; j++)
                if (c->edge[j] != i && !has_good_loop(&e[c->edge[j]], bad)) alone = false;
            if (alone) {
                err[0] = implied[k][0];
                err[1] = implied[k][1];
                blamed = true;
            }
        }
        if (!blamed) continue;
        g->condemned = 1;
        g->dn[0] -= err[0];
        g->dn[1] -= err[1];
        for (int k = 0; k < g->nloops; k++) touched[g->loop[k]] = 1;
        n++;
    }
    return n;
}

/* Clusters of bad loops no round could pin on one pair, joined through the
 * pairs they share that no good loop vouches for (the candidates). The
 * sparsest explanation: the fewest candidates whose errors, fitted to the
 * loops by least squares, close every loop of the cluster to T. When one
 * set of that size fits, it is condemned, its fitted errors taken out.
 * When several do (the four pairs of a tile three of which are wrong: any
 * of them may be the right one), the stage model may choose one (below);
 * else nothing is condemned: even a pair in every fit has no one error to
 * take out, and left in, it would make the cluster's right pairs look
 * wrong to the next rounds. Clusters larger than this are left to the
 * solve's L1. */
#define CLUSTER_MAX_LOOPS 16
#define CLUSTER_MAX_EDGES 16
#define CLUSTER_MAX_BLAME 4

/* The tie-breaker where the loops are ambiguous: the stage model
 * (loop_model.c) of each candidate's row or column, from the edges a
 * closing loop vouches for. Each explanation of a cluster implies offsets
 * of its candidates (the measurement of a pair it keeps, the measurement
 * less the fitted error of one it condemns); the one whose implied offsets
 * lie nearest the model (chi^2 in the model's spreads) is condemned when
 * every implied offset is within STAGE_SPREADS spreads of the model (at
 * least T) and every other explanation's chi^2 is STAGE_MARGIN more. At a
 * tile three of whose four pairs are wrong, the right explanation implies
 * the true offsets and each other one the true offsets moved by a wrong
 * pair's error (tens of px): all four of its pairs off the model.
 * A slipped row's vertical pairs are right but off their columns' medians:
 * there the right explanation is not near the model, and nothing is
 * condemned (as without the model); its horizontal pairs agree with their
 * row's median, which follows the slip.
 * STAGE_SPREADS as the re-registration window of stage_model.c: a pair's
 * offset is the difference of two tiles' stage errors, which for a
 * uniform jitter of +-J reaches 2J = 2.3 spreads, and 4 spreads of a
 * Gaussian stage hold all but 6e-5 of the pairs. STAGE_MARGIN: a
 * likelihood ratio of e^12.5 (2.7e5) between the best explanation and the
 * next under a Gaussian stage; the right one's chi^2 has 2 x candidates (6
 * or 8) degrees of freedom, 26 at its 99.9th percentile for 8. On the
 * 409 x 409 bench plate (pair offsets +-40 px, spread 17 px; errors of
 * 50-200 px) the ten ambiguous clusters were decided with margins of 38 to
 * 331; errors inside the stage's scatter (15 px there) give margins below
 * 25 and are left alone (test_solve_loops.c). */
#define STAGE_SPREADS 4.0
#define STAGE_MARGIN 25.0
/* Before the stage model, the evidence: of several explanations, the one
 * whose pairs all weigh at most this share of each candidate it keeps is
 * condemned, when it is the only such one. Estimate solves an unfitted
 * match (no sub-pixel fit converged) at a tenth of its confidence: at a
 * plate's corner, where each of a tile's two pairs has that cell's loop
 * only, a wrong unfitted pair (a broad hump of background at 9 px of a
 * 4 px overlap) and the right one explain the loop alike, and the stage
 * model, fitted from pairs that favour the larger overlaps, condemned the
 * right one: the tile 5 px off on 2 of 60 Hubble plates of
 * test_register_robust's recipe (seeds 147, 151). */
#define WEIGHT_GAP 0.2
/* Spreads below this are taken as this (noise-free pairs, a jitter-free
 * stage), px: chi^2 stays finite, and sub-pixel scatter does not decide. */
#define STAGE_MIN_SPREAD 0.5

typedef struct stage_ctx {
    bool fitted, failed;
    double (*pred)[2];
    double spread[2][2];
} stage_ctx;

static int edge_dir(const grid_edge *g) { return (int)(g->key & 1); }

/* Whether a good loop of four pairs (a cell) vouches for the edge. The
 * model is fitted from those alone, as before faces: a face vouches for
 * more edges, and more lines then reach LINE_MIN_EDGES, each the median of
 * its own few offsets, whose deviations from it are small (a third of a
 * line of three is 0): the spreads came out lower (2.1 against 3.3 px on
 * one plate of register_sweep.py, seed 53, 7x7 tiles, 30% blank), and a
 * wrong pair the model had chosen was no longer near enough to choose. */
static bool has_good_cell(const grid_edge *g, const grid_loop *l, const unsigned char *bad) {
    for (int k = 0; k < g->nloops; k++)
        if (!bad[g->loop[k]] && l[g->loop[k]].n == 4) return true;
    return false;
}

/* Fits the model on first use (most plates never need it). */
static bool stage_fit(stage_ctx *s, const grid_edge *e, int ne, const grid_loop *l, const unsigned char *bad) {
    if (s->fitted) return !s->failed;
    s->fitted = true;
    unsigned char *dir = malloc((size_t)(ne ? ne : 1)), *vouched = malloc((size_t)(ne ? ne : 1));
    int64_t *line = malloc((size_t)(ne ? ne : 1) * sizeof *line);
    double(*dn)[2] = malloc((size_t)(ne ? ne : 1) * sizeof *dn);
    s->pred = malloc((size_t)(ne ? ne : 1) * sizeof *s->pred);
    s->failed = !dir || !vouched || !line || !dn || !s->pred;
    for (int i = 0; i < ne && !s->failed; i++) {
        dir[i] = (unsigned char)edge_dir(&e[i]);
        /* Right pairs by row (y), lower pairs by column (x). */
        line[i] = dir[i] == 0 ? (int64_t)(e[i].key >> 33) : (int64_t)((e[i].key >> 1) & ((UINT64_C(1) << 32) - 1));
        dn[i][0] = e[i].dn[0], dn[i][1] = e[i].dn[1];
        vouched[i] = !e[i].condemned && has_good_cell(&e[i], l, bad);
    }
    if (!s->failed && ts_loop_model_fit(ne, dir, line, (const double(*)[2])dn, vouched, s->pred, s->spread))
        s->failed = true;
    for (int d = 0; d < 2; d++)
        for (int x = 0; x < 2; x++) s->spread[d][x] = fmax(s->spread[d][x], STAGE_MIN_SPREAD);
    free(dir), free(vouched), free(line), free(dn);
    return !s->failed;
}

/* chi^2 of the offsets a fit implies for the cluster's candidates; *near:
 * every one within the window. */
static double stage_chi2(const stage_ctx *s, const grid_edge *e, const int *cand, int ncand, const int *sel, int k,
                         double err[CLUSTER_MAX_BLAME][2], double t, bool *near) {
    double chi2 = 0;
    *near = true;
    for (int q = 0; q < ncand; q++) {
        const grid_edge *g = &e[cand[q]];
        double off[2] = {g->dn[0], g->dn[1]};
        for (int j = 0; j < k; j++)
            if (sel[j] == cand[q]) off[0] -= err[j][0], off[1] -= err[j][1];
        for (int x = 0; x < 2; x++) {
            double sp = s->spread[edge_dir(g)][x], dev = off[x] - s->pred[cand[q]][x];
            if (!isfinite(dev) || fabs(dev) > fmax(t, STAGE_SPREADS * sp)) *near = false;
            chi2 += isfinite(dev) ? dev * dev / (sp * sp) : INFINITY;
        }
    }
    return chi2;
}


/* Least squares of the errors of the k edges sel[] on the cluster's loops;
 * true when every loop closes to t with them taken out (err: the fit). */
static bool explains(const grid_loop *l, const int *loops, int nloops, const int *sel, int k, double t,
                     double (*r)[2], double err[CLUSTER_MAX_BLAME][2]) {
    double a[CLUSTER_MAX_BLAME][CLUSTER_MAX_BLAME] = {{0}}, rhs[CLUSTER_MAX_BLAME][2] = {{0}};
    for (int c = 0; c < nloops; c++) {
        double s[CLUSTER_MAX_BLAME];
        for (int j = 0; j < k; j++) s[j] = sign_in(&l[loops[c]], sel[j]);
        for (int j = 0; j < k; j++) {
            for (int q = 0; q < k; q++) a[j][q] += s[j] * s[q];
            rhs[j][0] += s[j] * r[loops[c]][0];
            rhs[j][1] += s[j] * r[loops[c]][1];
        }
    }
    /* Gaussian elimination; a singular system (two edges in the same loops
     * only) is no explanation: a smaller set explains as much. */
    for (int j = 0; j < k; j++) {
        int piv = j;
        for (int q = j + 1; q < k; q++)
            if (fabs(a[q][j]) > fabs(a[piv][j])) piv = q;
        if (fabs(a[piv][j]) < 1e-9) return false;
        for (int q = 0; q < k; q++) {
            double tmp = a[j][q];
            a[j][q] = a[piv][q];
            a[piv][q] = tmp;
        }
        for (int x = 0; x < 2; x++) {
            double tmp = rhs[j][x];
            rhs[j][x] = rhs[piv][x];
            rhs[piv][x] = tmp;
        }
        for (int q = j + 1; q < k; q++) {
            double f = a[q][j] / a[j][j];
            for (int z = j; z < k; z++) a[q][z] -= f * a[j][z];
            rhs[q][0] -= f * rhs[j][0];
            rhs[q][1] -= f * rhs[j][1];
        }
    }
    for (int j = k - 1; j >= 0; j--)
        for (int x = 0; x < 2; x++) {
            double v = rhs[j][x];
            for (int q = j + 1; q < k; q++) v -= a[j][q] * err[q][x];
            err[j][x] = v / a[j][j];
        }
    for (int c = 0; c < nloops; c++) {
        double left[2] = {r[loops[c]][0], r[loops[c]][1]};
        for (int j = 0; j < k; j++) {
            double s = sign_in(&l[loops[c]], sel[j]);
            left[0] -= s * err[j][0];
            left[1] -= s * err[j][1];
        }
        if (hypot(left[0], left[1]) > t) return false;
    }
    return true;
}

/* The fits of k of the cluster's candidates, in subset order: calls back
 * on each k-subset that explains the loops, until it returns false. */
typedef bool (*fit_fn)(void *user, const int *sel, double err[CLUSTER_MAX_BLAME][2]);

static void each_fit(const grid_loop *l, const int *loops, int nloops, const int *cand, int ncand, int k, double t,
                     double (*r)[2], fit_fn fn, void *user) {
    int idx[CLUSTER_MAX_BLAME], sel[CLUSTER_MAX_BLAME];
    double err[CLUSTER_MAX_BLAME][2];
    for (int j = 0; j < k; j++) idx[j] = j;
    for (;;) {
        for (int j = 0; j < k; j++) sel[j] = cand[idx[j]];
        if (explains(l, loops, nloops, sel, k, t, r, err) && !fn(user, sel, err)) return;
        int j = k - 1; /* the next k-subset of 0..ncand-1 */
        while (j >= 0 && idx[j] == ncand - k + j) j--;
        if (j < 0) return;
        idx[j]++;
        for (int q = j + 1; q < k; q++) idx[q] = idx[q - 1] + 1;
    }
}

typedef struct fit_pick {
    int k, nfit, nweak;
    /* the evidence's choice */
    const double *w;
    int sel[CLUSTER_MAX_BLAME];
    double err[CLUSTER_MAX_BLAME][2];
    /* the stage model's choice */
    const stage_ctx *stage;
    const grid_edge *e;
    const int *cand;
    int ncand;
    double t, best, second;
    bool near;
} fit_pick;

static bool count_fit(void *user, const int *sel, double err[CLUSTER_MAX_BLAME][2]) {
    fit_pick *f = user;
    if (f->nfit++ == 0) {
        memcpy(f->sel, sel, sizeof f->sel);
        memcpy(f->err, err, sizeof f->err);
    }
    return f->nfit < 2;
}

/* A fit whose pairs all weigh at most WEIGHT_GAP of each candidate it
 * keeps; the first such one is kept in sel/err, nweak counts them. */
static bool weak_fit(void *user, const int *sel, double err[CLUSTER_MAX_BLAME][2]) {
    fit_pick *f = user;
    double in = 0, out = INFINITY;
    for (int q = 0; q < f->ncand; q++) {
        bool mine = false;
        for (int j = 0; j < f->k; j++) mine |= sel[j] == f->cand[q];
        const double wq = f->w[f->e[f->cand[q]].pair];
        if (mine) in = fmax(in, wq);
        else out = fmin(out, wq);
    }
    if (in <= WEIGHT_GAP * out && f->nweak++ == 0) {
        memcpy(f->sel, sel, sizeof f->sel);
        memcpy(f->err, err, sizeof f->err);
    }
    return f->nweak < 2;
}

static bool rank_fit(void *user, const int *sel, double err[CLUSTER_MAX_BLAME][2]) {
    fit_pick *f = user;
    bool near;
    double chi2 = stage_chi2(f->stage, f->e, f->cand, f->ncand, sel, f->k, err, f->t, &near);
    if (chi2 < f->best) {
        f->second = f->best;
        f->best = chi2;
        f->near = near;
        memcpy(f->sel, sel, sizeof f->sel);
        memcpy(f->err, err, sizeof f->err);
    } else if (chi2 < f->second) {
        f->second = chi2;
    }
    return true;
}

/* The sparsest explanation of one cluster; where there are several, the
 * one of clearly weaker evidence (WEIGHT_GAP), else the stage model's
 * choice (stage_ctx); returns pairs condemned, *by_stage: how many of them
 * the model chose. */
static int explain_cluster(grid_edge *e, int ne, const grid_loop *l, const int *loops, int nloops, const int *cand,
                           int ncand, double t, double (*r)[2], const unsigned char *bad, const double *w,
                           stage_ctx *stage, int *by_stage) {
    for (int k = 1; k <= CLUSTER_MAX_BLAME && k <= ncand; k++) {
        fit_pick f = {.k = k};
        each_fit(l, loops, nloops, cand, ncand, k, t, r, count_fit, &f);
        if (f.nfit == 0) continue;
        fit_pick weak = {.k = k, .w = w, .e = e, .cand = cand, .ncand = ncand};
        if (f.nfit > 1) each_fit(l, loops, nloops, cand, ncand, k, t, r, weak_fit, &weak);
        if (f.nfit > 1 && weak.nweak == 1) {
            memcpy(f.sel, weak.sel, sizeof f.sel);
            memcpy(f.err, weak.err, sizeof f.err);
        } else if (f.nfit > 1) {
            if (!stage_fit(stage, e, ne, l, bad)) return 0;
            f = (fit_pick){.k = k, .stage = stage, .e = e, .cand = cand, .ncand = ncand, .t = t, .best = INFINITY,
                           .second = INFINITY};
            each_fit(l, loops, nloops, cand, ncand, k, t, r, rank_fit, &f);
            if (!f.near || !(f.second - f.best >= STAGE_MARGIN)) return 0;
            *by_stage += k;
        }
        for (int j = 0; j < k; j++) {
            grid_edge *g = &e[f.sel[j]];
            g->condemned = 1;
            g->dn[0] -= f.err[j][0];
            g->dn[1] -= f.err[j][1];
        }
        return k;
    }
    return 0;
}

/* Every cluster of unexplained bad loops (bad[] and r[] current). */
static int explain_clusters(grid_edge *e, int ne, const grid_loop *l, int nl, double t, double (*r)[2],
                            const unsigned char *bad, const double *w, int *scratch, stage_ctx *stage,
                            int *by_stage) {
    int *parent = scratch, *order = scratch + nl, *start = scratch + 2 * nl; /* 3 nl + 1 ints */
    for (int c = 0; c < nl; c++) parent[c] = c;
    for (int i = 0; i < ne; i++) {
        if (e[i].condemned || !all_bad(&e[i], bad) || e[i].nloops < 2) continue;
        ts_uf_join(parent, e[i].loop[0], e[i].loop[1]);
    }
    /* Bad loops grouped by cluster (counting sort on the root). */
    memset(start, 0, (size_t)(nl + 1) * sizeof *start);
    for (int c = 0; c < nl; c++)
        if (bad[c]) start[ts_uf_find(parent, c) + 1]++;
    for (int c = 0; c < nl; c++) start[c + 1] += start[c];
    for (int c = 0; c < nl; c++)
        if (bad[c]) order[start[ts_uf_find(parent, c)]++] = c;
    for (int c = nl; c > 0; c--) start[c] = start[c - 1];
    start[0] = 0;
    int n = 0;
    for (int root = 0; root < nl; root++) {
        int nloops = start[root + 1] - start[root];
        if (nloops == 0 || nloops > CLUSTER_MAX_LOOPS) continue;
        const int *loops = order + start[root];
        int cand[CLUSTER_MAX_EDGES], ncand = 0;
        bool too_many = false;
        for (int c = 0; c < nloops && !too_many; c++)
            for (int k = 0; k < l[loops[c]].n; k++) {
                int i = l[loops[c]].edge[k];
                if (e[i].condemned || !all_bad(&e[i], bad)) continue;
                bool seen = false;
                for (int q = 0; q < ncand; q++) seen |= cand[q] == i;
                if (seen) continue;
                if (ncand == CLUSTER_MAX_EDGES) {
                    too_many = true;
                    break;
                }
                cand[ncand++] = i;
            }
        if (too_many || ncand == 0) continue;
        /* In edge order, so the answer does not depend on the loop order. */
        for (int q = 1; q < ncand; q++)
            for (int z = q; z > 0 && cand[z - 1] > cand[z]; z--) {
                int tmp = cand[z];
                cand[z] = cand[z - 1];
                cand[z - 1] = tmp;
            }
        n += explain_cluster(e, ne, l, loops, nloops, cand, ncand, t, r, bad, w, stage, by_stage);
    }
    return n;
}

int ts_solve_loop_check(int ntiles, const int *gx, const int *gy, int npairs, const int *a, const int *b,
                        const unsigned char *usable, const double (*d)[2], double *w, int *by_stage) {
    int stage_n = 0;
    stage_ctx stage = {0};
    if (by_stage) *by_stage = 0;
    grid_edge *e = NULL;
    grid_loop *l = NULL;
    double(*r)[2] = NULL;
    unsigned char *bad = NULL, *touched = NULL;
    int *scratch = NULL;
    int result = -1;
    int ne = grid_edges(ntiles, gx, gy, npairs, a, b, usable, d, &e);
    if (ne < 0) goto done;
    int nl = grid_loops(e, ne, &l);
    if (nl < 0) goto done;
    result = 0;
    if (nl == 0) goto done;
    result = -1;
    r = malloc((size_t)nl * sizeof *r);
    bad = malloc((size_t)nl);
    touched = malloc((size_t)nl);
    scratch = malloc((size_t)(3 * nl + 1) * sizeof *scratch);
    double t;
    if (!r || !bad || !touched || !scratch || loop_threshold(e, l, nl, &t)) goto done;
    /* Rounds of blame; then the clusters they left, whose explanations
     * may leave loops to blame again. */
    for (int pass = 0; pass < LOOP_MAX_ROUNDS; pass++) {
        int round = 0;
        while (round++ < LOOP_MAX_ROUNDS && blame_round(e, ne, l, nl, t, r, bad, touched) > 0) {
        }
        mark_bad(e, l, nl, t, r, bad);
        if (explain_clusters(e, ne, l, nl, t, r, bad, w, scratch, &stage, &stage_n) == 0) break;
    }
    if (stage.failed) goto done;
    result = 0;
    for (int i = 0; i < ne; i++)
        if (e[i].condemned) {
            w[e[i].pair] *= TS_LOOP_FACTOR;
            result++;
        }
    if (by_stage) *by_stage = stage_n;
done:
    free(stage.pred);
    free(e);
    free(l);
    free(r);
    free(bad);
    free(touched);
    free(scratch);
    return result;
}
