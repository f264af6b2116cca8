/* Re-registration of one pair inside the stage model's window: an
 * exhaustive search of the overlap NCC over every shift the window allows
 * (no correlation peak needed: a thin overlap at the strips' edge, faded
 * by the window function, often has none), the window's NCC statistics
 * that say whether its maximum is a peak or noise, and the choice between
 * this result and the first pass's (stage_model.h). */
#include "register/stage_model.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/error.h"
#include "register/window_ncc.h"

/* Pixel operations one search may spend at full resolution (window shifts
 * x strip area): beyond, the window is searched on block means first. */
#define SEARCH_BUDGET 2e7
/* The shortest overlap (px) along either axis a shift may leave
 * (ts_reregister_pair's min_side is at least this). */
#define MIN_SIDE 4

/* Acceptance of a window maximum (docs/register.md, "Stage model", has the
 * measurements). A window holds many shifts, and at its thin end an
 * overlap of 4-6 px: there noise alone reaches NCCs that a single
 * threshold calls a match (blank tiles' pairs up to 0.28 on the IHC
 * plates, content pairs 0.77-1.0 on every real-image plate). So a maximum
 * under SURE_NCC (or under min_ncc, if higher) must clear what unrelated
 * content of the same texture reaches in the same window: at least
 * ACCEPT_NULL times the best of NULL_DRAWS searches of strip b with its
 * alignment broken (mirrored along the shared edge, turned half a turn,
 * rolled by half its length), at most ACCEPT_SECOND of it for the best
 * other local maximum, never on the window's edge, and at least
 * ACCEPT_FLOOR (blank pairs' maxima: 0.02-0.28). With one draw (the mirror)
 * and 2.5 times it, 2 of the 186 blank pairs so judged on 60 IHC plates
 * (seeds 101-160; a third at seed 307) were accepted: that draw is low by
 * chance 4.8% of the time (0.07% for the best of three at 2.2 times,
 * resampling those pairs' values). */
#define SURE_NCC 0.5
#define ACCEPT_FLOOR 0.12
#define ACCEPT_NULL 2.2
#define NULL_DRAWS 3
#define ACCEPT_SECOND 0.7
/* A matched first result inside the window is replaced only by a window
 * maximum better in NCC, in the same strips, and more than a pixel away. */
#define REPLACE_MARGIN 0.0

/* The NCC from which a window maximum is a match without the null draws:
 * the window's own level, else SURE_NCC or min_ncc if higher. */
static double sure_ncc(double sure, double min_ncc) {
    if (sure > 0) return sure;
    return min_ncc > SURE_NCC ? min_ncc : SURE_NCC;
}
/* The confidence a window result is given: its NCC scaled by this (the
 * window, not the images, ruled out the rivals beyond it; the NCC surface
 * of smooth content is too flat inside it for a rival-based measure), and
 * for a pair matched in the first pass at most its first confidence. */
#define REREG_CONF_SCALE 0.5

/* NCC of b[y][x] against a[y + sy][x + sx] over their overlap: the first
 * pass's (ts_overlap_ncc, vectorised), -2 when the overlap is thinner than
 * min_side. */
static double ncc_at(const float *a, const float *b, int h, int w, int sy, int sx, int min_side) {
    int y0 = sy < 0 ? -sy : 0, y1 = sy > 0 ? h - sy : h;
    int x0 = sx < 0 ? -sx : 0, x1 = sx > 0 ? w - sx : w;
    if (y1 - y0 < min_side || x1 - x0 < min_side) return -2;
    return ts_overlap_ncc(a, b, h, w, sy, sx);
}

/* Block means of f x f (the last partial blocks dropped). */
static void block_means(const float *src, int w, int f, float *dst, int dh, int dw) {
    const float k = 1.0f / (float)(f * f);
    for (int y = 0; y < dh; y++)
        for (int x = 0; x < dw; x++) {
            float sum = 0;
            for (int i = 0; i < f; i++)
                for (int j = 0; j < f; j++) sum += src[(size_t)(y * f + i) * (size_t)w + (size_t)(x * f + j)];
            dst[(size_t)y * (size_t)dw + (size_t)x] = sum * k;
        }
}

/* The window's samples: NCC of the (level) strips at every shift of the
 * grid and its best cell. */
typedef struct window_grid {
    int ny, nx, cy, cx; /* cells; the centre shift at this level */
    double *v;          /* ny * nx; -2 where the overlap is too thin */
    int bi, bj;         /* best cell, -1 if none */
} window_grid;

/* Every cell of the window at once (window_ncc.c), then its best cell. */
static ts_status scan_grid(window_grid *gr, const float *a, const float *b, int h, int w, int min_side,
                           ts_window_scratch **ws, ts_error *err) {
    gr->bi = gr->bj = -1;
    ts_status st = ts_window_ncc(a, b, h, w, gr->cy, gr->cx, gr->ny, gr->nx, min_side, gr->v, ws, err);
    if (st != TS_OK) return st;
    for (int i = 0; i < gr->ny; i++)
        for (int j = 0; j < gr->nx; j++) {
            double v = gr->v[(size_t)i * (size_t)gr->nx + (size_t)j];
            if (v <= -2) continue;
            if (gr->bi < 0 || v > gr->v[(size_t)gr->bi * (size_t)gr->nx + (size_t)gr->bj]) gr->bi = i, gr->bj = j;
        }
    return TS_OK;
}

void ts_rereg_scratch_free(ts_rereg_scratch *s) {
    if (!s) return;
    ts_window_scratch_free(s->win);
    free(s->work);
    s->win = NULL, s->work = NULL, s->cap = 0;
}

static ts_status search(ts_registrar *r, const ts_strip_geometry *g, ts_samples a, ts_samples b, int w,
                        const ts_rereg_window *win, bool have_first, double first_dy, double first_dx,
                        ts_rereg_result *out, ts_rereg_scratch *sc, ts_error *err);

ts_status ts_reregister_pair(ts_registrar *r, const ts_strip_geometry *g, ts_samples a, ts_samples b,
                             int w, const ts_rereg_window *win, bool have_first, double first_dy, double first_dx,
                             ts_rereg_result *out, ts_rereg_scratch *scratch, ts_error *err) {
    if (scratch) return search(r, g, a, b, w, win, have_first, first_dy, first_dx, out, scratch, err);
    ts_rereg_scratch own = {0};
    ts_status st = search(r, g, a, b, w, win, have_first, first_dy, first_dx, out, &own, err);
    ts_rereg_scratch_free(&own);
    return st;
}

static ts_status search(ts_registrar *r, const ts_strip_geometry *g, ts_samples a, ts_samples b, int w,
                        const ts_rereg_window *win, bool have_first, double first_dy, double first_dx,
                        ts_rereg_result *out, ts_rereg_scratch *sc, ts_error *err) {
    memset(out, 0, sizeof *out);
    out->second = -1;
    out->ncc_first = -2;
    out->null_max = -2;
    out->sure = win->sure;
    const int ry = win->ry, rx = win->rx, min_side = win->min_side > MIN_SIDE ? win->min_side : MIN_SIDE;
    const int sh = g->sh, sw = g->sw;
    if (ts_registrar_height(r) != sh || ts_registrar_width(r) != sw)
        return ts_fail(err, TS_ERR_INTERNAL, "registrar is %dx%d but the strips are %dx%d", ts_registrar_height(r),
                       ts_registrar_width(r), sh, sw);
    const float *ha, *hb;
    ts_status st = ts_registrar_prepare(r, ts_samples_at(a, (size_t)g->a_y0 * (size_t)w + (size_t)g->a_x0), (size_t)w,
                                        ts_samples_at(b, (size_t)g->b_y0 * (size_t)w + (size_t)g->b_x0), (size_t)w,
                                        &ha, &hb, err);
    if (st != TS_OK || !ha) return st; /* a constant strip: nothing found */
    const int cy = (int)lround(g->prior_dy), cx = (int)lround(g->prior_dx);
    /* The level: the whole window at full resolution when affordable, else
     * on f x f block means (a cost f^4 lower), then at full resolution
     * around the level's best local maxima. */
    int f = 1;
    while (f < 8 && (double)(2 * ry / f + 1) * (double)(2 * rx / f + 1) * (double)(sh / f) * (double)(sw / f) >
                        SEARCH_BUDGET)
        f *= 2;
    while (f > 1 && (sh / f < 2 * min_side || sw / f < 2 * min_side)) f /= 2;
    const int lh = sh / f, lw = sw / f;
    window_grid gr = {2 * (ry / f) + 1, 2 * (rx / f) + 1, (int)lround(g->prior_dy / f), (int)lround(g->prior_dx / f),
                      NULL, -1, -1};
    const size_t cells = (size_t)gr.ny * (size_t)gr.nx, level = (size_t)lh * (size_t)lw;
    /* The window's cells, the null draws' strip b and (on block means) the
     * level's strips: one block the worker keeps (doubles first, so the
     * floats after them stay aligned). */
    const size_t need = cells * sizeof(double) + (f > 1 ? 3 : 1) * level * sizeof(float);
    if (need > sc->cap) {
        void *nw = realloc(sc->work, need);
        if (!nw) return ts_fail(err, TS_ERR_NOMEM, "out of memory for a %dx%d search window", gr.ny, gr.nx);
        sc->work = nw, sc->cap = need;
    }
    gr.v = sc->work;
    float *null_b = (float *)(gr.v + cells);
    float *la = f > 1 ? null_b + level : NULL, *lb = f > 1 ? null_b + 2 * level : NULL;
    if (f > 1) {
        block_means(ha, sw, f, la, lh, lw);
        block_means(hb, sw, f, lb, lh, lw);
    }
    const float *ea = f > 1 ? la : ha, *eb = f > 1 ? lb : hb;
    /* The thinnest overlap at this level: min_side full-resolution px (at
     * f = 2 a 4-px side was 8 px, and true 8-px overlaps fell on the edge). */
    const int lside = (min_side + f - 1) / f < 2 ? 2 : (min_side + f - 1) / f;
    if ((st = scan_grid(&gr, ea, eb, lh, lw, lside, &sc->win, err)) != TS_OK) return st;
    if (gr.bi < 0) return TS_OK; /* the window leaves no overlap */
#define CELL(i, j) gr.v[(size_t)(i) * (size_t)gr.nx + (size_t)(j)]
    /* Local maxima (3x3) of the level: the best, the next best away from
     * the best's neighbourhood (a true match is one peak, noise many), and
     * up to three to refine at full resolution. */
    int top[3][2] = {{gr.bi, gr.bj}, {-1, -1}, {-1, -1}};
    double topv[3] = {CELL(gr.bi, gr.bj), -3, -3};
    for (int i = 0; i < gr.ny; i++)
        for (int j = 0; j < gr.nx; j++) {
            double v = CELL(i, j);
            if (v <= -2 || (i == gr.bi && j == gr.bj)) continue;
            bool is_max = true;
            for (int di = -1; di <= 1 && is_max; di++)
                for (int dj = -1; dj <= 1; dj++) {
                    int ii = i + di, jj = j + dj;
                    if ((!di && !dj) || ii < 0 || jj < 0 || ii >= gr.ny || jj >= gr.nx) continue;
                    if (CELL(ii, jj) > v) { is_max = false; break; }
                }
            if (!is_max) continue;
            if ((abs(i - gr.bi) > 1 || abs(j - gr.bj) > 1) && v > out->second) out->second = v;
            for (int k = 1; k < 3; k++)
                if (v > topv[k]) {
                    for (int m = 2; m > k; m--) topv[m] = topv[m - 1], top[m][0] = top[m - 1][0], top[m][1] = top[m - 1][1];
                    topv[k] = v, top[k][0] = i, top[k][1] = j;
                    break;
                }
        }
    /* On the edge: the window cuts a slope (or a peak beyond it) short. */
    bool border = gr.bi == 0 || gr.bj == 0 || gr.bi == gr.ny - 1 || gr.bj == gr.nx - 1;
    for (int di = -1; di <= 1 && !border; di++)
        for (int dj = -1; dj <= 1; dj++)
            if (CELL(gr.bi + di, gr.bj + dj) <= -2) border = true;
    out->border = border;
    out->search_best = topv[0];
    /* The full-resolution maximum: the level's best cell (and, on block
     * means, the next two local maxima) searched +-f px at 1 px. */
    int by = 0, bx = 0;
    double best = -3;
    for (int k = 0; k < (f > 1 ? 3 : 1); k++) {
        if (top[k][0] < 0) continue;
        const int sy0 = (gr.cy + top[k][0] - gr.ny / 2) * f, sx0 = (gr.cx + top[k][1] - gr.nx / 2) * f;
        for (int dy = -(f - 1); dy <= f - 1; dy++)
            for (int dx = -(f - 1); dx <= f - 1; dx++) {
                int sy = sy0 + dy, sx = sx0 + dx;
                if (abs(sy - cy) > ry || abs(sx - cx) > rx) continue;
                double v = f > 1 || dy || dx ? ncc_at(ha, hb, sh, sw, sy, sx, min_side) : topv[0];
                if (v > best) best = v, by = sy, bx = sx;
            }
    }
    /* Under the sure level the maximum must clear what unrelated content
     * of the same texture reaches in the same window (the null draws).
     * Only where ts_reregister_accept or ts_reregister_supports looks at
     * it: a maximum (or a first result that stays) under the floor is
     * refused whatever the baseline (blank tiles' pairs: most of the cost
     * of the pass on small tiles went into this search). */
    bool same_shift = false, next_to = false;
    if (have_first && best > -2) {
        int fy = (int)lround(first_dy - g->off_dy), fx = (int)lround(first_dx - g->off_dx);
        out->ncc_first = ncc_at(ha, hb, sh, sw, fy, fx, min_side);
        same_shift = by == fy && bx == fx;
        next_to = abs(by - fy) <= 1 && abs(bx - fx) <= 1;
    }
    /* A maximum at the first result's own shift is no better result: its
     * NCC there is ncc_first up to the FFT's rounding (by which it came out
     * "better" on half the pairs of the bench plates, each then refined
     * only for the choice to keep the first result, within a pixel of it). */
    const bool first_stays =
        have_first && out->ncc_first > -2 && (same_shift || !(best > out->ncc_first + REPLACE_MARGIN));
    /* The first result is the window's maximum, as near as the integer
     * grid and the FFT's rounding tell (ts_reregister_supports). */
    out->first_best = have_first && out->ncc_first > -2 && (first_stays || next_to);
    /* (Not on the window's edge either: acceptance refuses it whatever the
     * draws say; at f > 1 the edge is known only after them, below. A first
     * result that stays is judged by them in its place: the stage pass
     * refuses it where they do not bear it out, ts_reregister_supports.) */
    const double judged = first_stays ? out->ncc_first : best;
    if (best > -2 && judged < sure_ncc(out->sure, ts_registrar_min_ncc(r)) && judged >= ACCEPT_FLOOR &&
        (first_stays || !border)) {
        /* Tall strips: a right pair's, the shared edge runs down the
         * columns (along y); else a lower pair's, along x. */
        const bool tall = lh >= lw;
        /* Per draw, whether b's rows (y) and columns (x) are reversed or
         * rolled by half: mirrored along the shared edge, half a turn,
         * rolled along the edge. */
        static const struct { bool flip_along, flip_across, roll_along; } draw[NULL_DRAWS] = {
            {true, false, false}, {true, true, false}, {false, false, true}};
        for (int k = 0; k < NULL_DRAWS; k++) {
            const bool flip_y = tall ? draw[k].flip_along : draw[k].flip_across;
            const bool flip_x = tall ? draw[k].flip_across : draw[k].flip_along;
            const bool roll_y = tall && draw[k].roll_along, roll_x = !tall && draw[k].roll_along;
            for (int y = 0; y < lh; y++) {
                const int sy = flip_y ? lh - 1 - y : roll_y ? (y + lh / 2) % lh : y;
                for (int x = 0; x < lw; x++) {
                    const int sx = flip_x ? lw - 1 - x : roll_x ? (x + lw / 2) % lw : x;
                    null_b[(size_t)y * (size_t)lw + (size_t)x] = eb[(size_t)sy * (size_t)lw + (size_t)sx];
                }
            }
            /* (gr.v is free for it: the window's cells were read above) */
            if ((st = ts_window_ncc(ea, null_b, lh, lw, gr.cy, gr.cx, gr.ny, gr.nx, lside, gr.v, &sc->win, err)) != TS_OK)
                return st;
            for (size_t c = 0; c < cells; c++)
                if (gr.v[c] > out->null_max) out->null_max = gr.v[c];
        }
    }
#undef CELL
    if (!(best > -2)) return TS_OK;
    if (f > 1 && (abs(by - cy) == ry || abs(bx - cx) == rx)) out->border = true;
    out->searched = true;
    out->ncc = best;
    out->dy = by + g->off_dy;
    out->dx = bx + g->off_dx;
    /* The sub-pixel refinement only for a result ts_reregister_choose can
     * take (at the registrar's min_ncc): accepted, and for a first result in
     * these strips better than its NCC (else the choice keeps the first
     * result whatever the refinement says; acceptance does not depend on
     * it). On plates where the stage scatters by a good part of the
     * overlap every pair is searched and most keep their first result. */
    if (first_stays || !ts_reregister_accept(out, ts_registrar_min_ncc(r))) return TS_OK;
    double dy = by, dx = bx;
    /* The refinement is kept as far as its own leash lets it move (2 px
     * from the integer maximum, its low-passed re-fit 2 px from its first
     * fit: refine.h): on noisy low-contrast overlaps the window's NCC is
     * flat enough for its integer maximum to be a pixel or two off, and a
     * leash of 1 px here threw away refinements that had found the truth
     * (within 0.09 px, 1.09 px from the maximum), leaving the pair a whole
     * pixel off. Over the 36 plates of test_register_robust.py's recipes at
     * 6 seeds each the worst tile went from 0.65 to 0.36 px
     * (docs/register.md). A leash of 2 px from the maximum here, once the
     * refinement's own, would now turn a re-fit 2-4 px away into an
     * unfitted pair at the integer maximum. */
    out->fitted = ts_registrar_refine(r, &dy, &dx);
    out->refined = true;
    out->dy = dy + g->off_dy;
    out->dx = dx + g->off_dx;
    return TS_OK;
}

/* Whether a result of NCC ncc at the window's maximum is a match: at the
 * sure level, or under it at or above the floor, clearing the null draws
 * and the other local maxima. Where search left the draws out (null_max
 * -2: under the floor, or the maximum a first result beats) it is not
 * shown to be one, and ACCEPT_NULL times -2 would pass any maximum. */
static bool is_match(const ts_rereg_result *x, double ncc, double min_ncc) {
    if (ncc >= sure_ncc(x->sure, min_ncc)) return true;
    return ncc >= ACCEPT_FLOOR && x->null_max > -2 && x->search_best >= ACCEPT_NULL * x->null_max &&
           x->second <= ACCEPT_SECOND * x->search_best;
}

/* A maximum inside the window at a finite shift: what either test judges. */
static bool judged(const ts_rereg_result *x) {
    return x->searched && !x->border && isfinite(x->dy) && isfinite(x->dx);
}

bool ts_reregister_accept(const ts_rereg_result *x, double min_ncc) {
    return judged(x) && is_match(x, x->ncc, min_ncc);
}

bool ts_reregister_sure(const ts_rereg_result *x, double min_ncc) {
    return judged(x) && x->ncc >= sure_ncc(x->sure, min_ncc);
}

bool ts_reregister_supports(const ts_rereg_result *x, double min_ncc) {
    if (!x->searched || !(x->ncc_first > -2)) return false;
    /* Under the sure level the first result must be the window's maximum
     * (a better one elsewhere is a rival the window prefers), shown to be
     * a match as the maximum is: by the null draws, or by the maximum
     * itself at the sure level, where search makes no draws. (Without the
     * latter a first result a pixel from a sure maximum, whose own integer
     * shift scored under it, was refused: on a thin overlap of sharp
     * content 0.25 beside 0.53, the window's refined maximum the first
     * result to 0.01 px, and its tile 2.6 px off without the pair.) */
    return x->ncc_first >= sure_ncc(x->sure, min_ncc) ||
           (x->first_best && (ts_reregister_sure(x, min_ncc) || is_match(x, x->ncc_first, min_ncc)));
}

bool ts_reregister_choose(const ts_rereg_result *x, double min_ncc, ts_register_result *res) {
    if (!ts_reregister_accept(x, min_ncc)) return false;
    /* A matched first result stays unless the window's maximum is better
     * in the same strips, and elsewhere (the first pass's sub-pixel result
     * is then as good); one outside these strips (an outlier far off) is
     * replaced when the window offers comparable evidence. */
    if (res->matched) {
        if (x->ncc_first > -2 ? !(x->ncc > x->ncc_first + REPLACE_MARGIN) || hypot(x->dy - res->dy, x->dx - res->dx) <= 1.0
                              : !(x->ncc >= 0.8 * res->ncc))
            return false;
    }
    /* A matched pair keeps at most its first confidence: inside the window
     * the first pass's rivals (a periodic specimen's) are still there. */
    double conf = REREG_CONF_SCALE * (x->ncc < 1 ? x->ncc : 1);
    if (res->matched && res->confidence < conf) conf = res->confidence;
    memset(res, 0, sizeof *res);
    res->dy = x->dy;
    res->dx = x->dx;
    res->ncc = x->ncc;
    res->ncc_second = x->second;
    res->confidence = conf;
    res->matched = true;
    res->unfitted = !x->fitted;
    return true;
}
