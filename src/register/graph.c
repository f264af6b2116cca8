/* The neighbour pairs of a well from its tiles' expected origins (estimate
 * --positions): the tiles whose footprints (h x w at the origins) overlap
 * enough to register, each pair classified left/right or top/bottom so
 * that the strip machinery applies. On a regular grid these are exactly the
 * right and lower grid neighbours; on serpentine, irregular or jittered
 * scans they are the tiles that actually overlap, whatever the names say. */
#include <math.h>
#include <stdlib.h>

#include "common/error.h"
#include "register/estimate_internal.h"

/* A pair must share this much along its axis to be registered (the strips'
 * own minimum is 4 px), and at least half the tile across it: diagonal grid
 * neighbours share only the overlap corner and are left out, as the grid
 * leaves them out. */
#define MIN_OVERLAP_PX 4.0
#define MIN_OVERLAP_FRACTION 0.02
#define MIN_ACROSS_FRACTION 0.5

typedef struct slot {
    int64_t cy, cx; /* bucket: the tile's origin in units of the tile extent */
    int tile;
} slot;

static int cmp_slot(const void *pa, const void *pb) {
    const slot *a = pa, *b = pb;
    if (a->cy != b->cy) return a->cy < b->cy ? -1 : 1;
    if (a->cx != b->cx) return a->cx < b->cx ? -1 : 1;
    return a->tile - b->tile;
}

/* First slot at or after bucket (cy, cx). */
static int lower_bound(const slot *s, int n, int64_t cy, int64_t cx) {
    int lo = 0, hi = n;
    while (lo < hi) {
        int mid = lo + (hi - lo) / 2;
        if (s[mid].cy < cy || (s[mid].cy == cy && s[mid].cx < cx)) lo = mid + 1;
        else hi = mid;
    }
    return lo;
}

/* Canonical tile order: by the grid cell the origin falls in (pitch
 * units), then by origin: a regular grid comes out row by row, as the
 * names order it. */
typedef struct ranked {
    int64_t gy, gx;
    double y, x;
    int tile;
} ranked;

static int cmp_ranked(const void *pa, const void *pb) {
    const ranked *a = pa, *b = pb;
    if (a->gy != b->gy) return a->gy < b->gy ? -1 : 1;
    if (a->gx != b->gx) return a->gx < b->gx ? -1 : 1;
    if (a->y != b->y) return a->y < b->y ? -1 : 1;
    if (a->x != b->x) return a->x < b->x ? -1 : 1;
    return a->tile - b->tile;
}

static int cmp_pair(const void *pa, const void *pb) {
    const ts_tile_pair *a = pa, *b = pb;
    if (a->rank_a != b->rank_a) return a->rank_a < b->rank_a ? -1 : 1;
    if (a->dir != b->dir) return a->dir < b->dir ? -1 : 1;
    return a->rank_b < b->rank_b ? -1 : a->rank_b > b->rank_b;
}

static int64_t cell(double v, double unit) {
    double c = floor(v / unit);
    return c < -1e15 ? -1000000000000000LL : c > 1e15 ? 1000000000000000LL : (int64_t)c;
}

/* Classifies tiles i and j (offset d = o_j - o_i): false when they do not
 * overlap enough; else the pair, a the left (upper) tile. */
static bool classify(const double (*o)[2], int i, int j, int h, int w, const int *rank, ts_tile_pair *p) {
    double dy = o[j][0] - o[i][0], dx = o[j][1] - o[i][1];
    double ov_y = h - fabs(dy), ov_x = w - fabs(dx);
    bool lr = ov_x >= fmax(MIN_OVERLAP_PX, MIN_OVERLAP_FRACTION * w) && ov_y >= MIN_ACROSS_FRACTION * h;
    bool tb = ov_y >= fmax(MIN_OVERLAP_PX, MIN_OVERLAP_FRACTION * h) && ov_x >= MIN_ACROSS_FRACTION * w;
    if (!lr && !tb) return false;
    if (lr && tb) lr = fabs(dx) / w >= fabs(dy) / h; /* the dominant offset decides */
    double along = lr ? dx : dy;
    bool swap = along < 0 || (along == 0 && rank[j] < rank[i]);
    p->a = swap ? j : i;
    p->b = swap ? i : j;
    p->dir = lr ? 0 : 1;
    p->rank_a = rank[p->a];
    p->rank_b = rank[p->b];
    return true;
}

ts_status ts_pairs_from_positions(const double (*o)[2], int n, int h, int w, double pitch_y, double pitch_x,
                                  const char *well, const char (*names)[32], ts_tile_pair **out, int64_t *nout,
                                  ts_error *err) {
    *out = NULL;
    *nout = 0;
    size_t nn = (size_t)(n ? n : 1);
    slot *s = malloc(nn * sizeof *s);
    ranked *r = malloc(nn * sizeof *r);
    int *rank = malloc(nn * sizeof *rank);
    ts_tile_pair *pairs = NULL;
    int64_t np = 0, cap = 0;
    ts_status st = TS_OK;
    if (!s || !r || !rank) {
        st = ts_fail(err, TS_ERR_NOMEM, "out of memory for the pairs of well %s", well);
        goto done;
    }
    if (!(pitch_y >= 1)) pitch_y = 1;
    if (!(pitch_x >= 1)) pitch_x = 1;
    for (int i = 0; i < n; i++) {
        s[i] = (slot){cell(o[i][0], h), cell(o[i][1], w), i};
        r[i] = (ranked){cell(o[i][0] + 0.5 * pitch_y, pitch_y), cell(o[i][1] + 0.5 * pitch_x, pitch_x), o[i][0],
                        o[i][1], i};
    }
    qsort(s, (size_t)n, sizeof *s, cmp_slot);
    qsort(r, (size_t)n, sizeof *r, cmp_ranked);
    for (int k = 0; k < n; k++) rank[r[k].tile] = k;
    /* Tiles that overlap are less than a tile extent apart on each axis:
     * in the same or an adjacent bucket. */
    for (int k = 0; k < n && st == TS_OK; k++) {
        int i = s[k].tile;
        for (int64_t dy = -1; dy <= 1 && st == TS_OK; dy++) {
            int64_t cy = s[k].cy + dy;
            int m = lower_bound(s, n, cy, s[k].cx - 1);
            for (; m < n && s[m].cy == cy && s[m].cx <= s[k].cx + 1; m++) {
                int j = s[m].tile;
                if (j <= i) continue; /* each unordered pair once */
                if (fabs(o[j][0] - o[i][0]) < 1 && fabs(o[j][1] - o[i][1]) < 1) {
                    st = ts_fail(err, TS_ERR_FORMAT, "tiles %s/%s and %s/%s are at the same stage position "
                                 "([%.1f, %.1f] and [%.1f, %.1f] px): these are not positions of a scan", well,
                                 names[i], well, names[j], o[i][0], o[i][1], o[j][0], o[j][1]);
                    break;
                }
                ts_tile_pair p;
                if (!classify(o, i, j, h, w, rank, &p)) continue;
                if (np == cap) {
                    int64_t ncap = cap ? 2 * cap : 64;
                    ts_tile_pair *q = realloc(pairs, (size_t)ncap * sizeof *q);
                    if (!q) {
                        st = ts_fail(err, TS_ERR_NOMEM, "out of memory for the pairs of well %s", well);
                        break;
                    }
                    pairs = q;
                    cap = ncap;
                }
                pairs[np++] = p;
            }
        }
    }
    if (st != TS_OK) goto done;
    /* Canonical order: by tile a, its right pairs first, then by tile b. */
    if (np > 1) qsort(pairs, (size_t)np, sizeof *pairs, cmp_pair); /* pairs is NULL when there are none */
    for (int64_t e = 0; e < np; e++) {
        const ranked *ra = &r[pairs[e].rank_a];
        pairs[e].gy = ra->gy < 0 ? 0 : ra->gy > 1000000 ? 1000000 : (int)ra->gy;
        pairs[e].gx = ra->gx < 0 ? 0 : ra->gx > 1000000 ? 1000000 : (int)ra->gx;
    }
    *out = pairs;
    *nout = np;
    pairs = NULL;
done:
    free(pairs);
    free(s);
    free(r);
    free(rank);
    return st;
}
