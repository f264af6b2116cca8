/* The stage model and the re-registration of the pairs that disagree with
 * it (docs/register.md, "Stage model").
 *
 * From the pairs the first pass trusts, per direction (left/right,
 * top/bottom): the median origin offset b - a (so the actual overlap) and
 * its robust spread (the stage's repeatability), and per grid row (right
 * pairs) or column (lower pairs) the median of the row's trusted pairs, as
 * MIST does. Every weak, unmatched or outlying pair is registered again by
 * an exhaustive NCC search confined to the window the model allows around
 * its row's (column's) prediction, in strips cut for the measured overlap
 * plus the window (so an overlap larger than the nominal one is inside
 * them); the result replaces the first pass's only when the window search
 * is better supported (stage_model.c, reregister.c). */
#ifndef TS_REGISTER_STAGE_MODEL_H
#define TS_REGISTER_STAGE_MODEL_H

#include <stdbool.h>
#include <stdint.h>

#include "register/register.h"
#include "register/window_ncc.h"

/* One neighbour pair as the model sees it (canonical order). */
typedef struct ts_stage_pair {
    int well;
    int dir;            /* ts_pair_dir */
    int line;           /* grid row (right pairs) or column (lower pairs) of tile a */
    int64_t ta, tb;     /* tile ids (the tile cache's) */
    double gy, gx;      /* the offset expected before measuring (a guess's b - a; 0
                           without one): the model is of the measurement minus it */
    ts_register_result res; /* the first pass's; replaced where re-registered */
    int rank;           /* the rank that registered it in the first pass, which redoes it
                           (0 in one process) */
    double ey, ex;      /* set by ts_stage_reregister: the offset the model predicts for it
                           (ts_stage_plan), NAN where its direction has no model */
    bool replaced;      /* set by ts_stage_reregister */
    bool rematched;     /* ... and unmatched in the first pass */
    bool refused;       /* set by ts_stage_reregister: matched, redone, kept, inside the
                           window's strips and not shown a match there as a window maximum
                           would be (ts_reregister_supports); or outside the window,
                           the window search found nothing to take its place, and weak, or
                           confident but far off and in no loop of pairs (stage_pass.c);
                           res.matched is then false (left out of the solve and the file) */
} ts_stage_pair;

/* The model of one direction. */
typedef struct ts_stage_dir {
    bool valid;          /* enough trusted pairs that agree */
    int64_t trusted;     /* pairs trusted by the first pass */
    int64_t inliers;     /* of those, within the model's window of its median */
    double offset[2];    /* median of the inliers' (dy, dx) minus (gy, gx) */
    double spread[2];    /* its 1.4826 MAD */
    int radius[2];       /* search window half-widths (y, x), px */
    double overlap;      /* extent - the inliers' median offset along the pair's axis, px */
} ts_stage_dir;

typedef struct ts_stage_model {
    ts_stage_dir dir[2];
} ts_stage_model;

/* What to do with one pair. */
typedef struct ts_stage_plan {
    bool redo;           /* re-register inside the window */
    bool outlying;       /* its measurement lies outside the window (windows_off > 1) */
    double ey, ex;       /* predicted origin offset (its row's or column's median) */
    double windows_off;  /* how many windows off the prediction it lies (the larger of the
                            two components' |offset - prediction| / radius; 0 unmatched or
                            without a model) */
} ts_stage_plan;

/* How many windows off the prediction (ey, ex) the offset (dy, dx) lies
 * under direction model md: the larger of its components'
 * |offset - prediction| / radius. */
double ts_stage_windows_off(const ts_stage_dir *md, double ey, double ex, double dy, double dx);
/* Past this many windows a pair is far off the stage: the stage pass
 * refuses such a confident pair where no loop checks it (stage_pass.c), and
 * a solve that puts a pair there against its measurement inside the
 * window is disputed (ts_stage_disputes). */
#define TS_STAGE_FAR_WINDOWS 1.5
/* Whether the model md disputes a pair's solved offset: the measurement
 * (dy, dx) lies inside the window around the prediction (ey, ex) and the
 * solved offset, the measurement plus the solve's residual (ry, rx), more
 * than TS_STAGE_FAR_WINDOWS windows outside it. The solve then placed the
 * pair's tiles as though the stage had slipped there by more than it
 * scatters, against a pair that says it did not. From the loops such a
 * slip and a wrong pair the solve followed look alike (a slipped corner
 * tile whose other pair is weak and wrong: test_loops_weak_evidence; 7
 * tiles with content 54 px off on a wrong pair at confidence 0.8 whose
 * loop mate, right, weighed 0.001: register_sweep.py, 7x7 tiles of 128 px,
 * 20% blank, seed 51), so neither is chosen: estimate fails the well (docs/qc.md). False
 * without a model of the direction (md->valid). */
bool ts_stage_disputes(const ts_stage_dir *md, double ey, double ex, double dy, double dx, double ry, double rx);

/* Whether the model's plan may redo a pair from its first result alone:
 * unmatched, weak, or without a sub-pixel fit (redone where the direction's
 * stage scatters widely). The plan redoes these and the outlying pairs
 * (which only the model can tell); estimate keeps the tiles of these for
 * the pass and reads an outlier's tiles again. */
bool ts_stage_may_redo(const ts_register_result *r);
/* Matched with a confidence the model does not trust on its own (under
 * 0.5): redone, and refused when outside the window and not replaced, or
 * (as any redone pair) not supported inside it (ts_stage_reregister). */
bool ts_stage_weak(const ts_register_result *r);

/* Fits the model to p[0, n) (tiles h x w after orientation) and fills
 * plan[0, n). A direction without enough agreeing trusted pairs gets no
 * model (valid false) and none of its pairs is redone. */
ts_status ts_stage_model_fit(const ts_stage_pair *p, int64_t n, int h, int w, ts_stage_model *m,
                             ts_stage_plan *plan, ts_error *err);

/* The strip geometry of re-registration along dir: strips as deep as the
 * measured overlap plus the window, clipped to the tile (placed per pair
 * with ts_strip_geometry_at). False when the model leaves no room. */
bool ts_stage_geometry(const ts_stage_model *m, ts_pair_dir dir, int h, int w, const ts_register_options *opt,
                       ts_strip_geometry *g);
/* The strips' depth along an axis of extent px: the measured overlap plus
 * the window's radius, at most extent - 1 (under 4: no room). */
int ts_stage_depth(double overlap, int radius, int extent);

/* ---- the confined search (reregister.c) ---- */

typedef struct ts_rereg_result {
    bool searched;       /* the strips had signal and the window a valid shift */
    double dy, dx;       /* best origin offset b - a in the window (sub-pixel when
                            refined, else the integer maximum) */
    bool refined;        /* the sub-pixel refinement ran: only where
                            ts_reregister_choose, at the registrar's min_ncc, can take
                            the result (accepted, and better than ncc_first) */
    bool fitted;         /* ... and a fit converged within its leash (refine.h) */
    double ncc;          /* its NCC */
    double search_best;  /* the best NCC of the window's samples (on block means
                            when the window was searched on them; else = ncc) */
    double second;       /* best other local maximum of the samples (-1: none) */
    bool border;         /* the maximum is on the window's edge: a slope, not a peak */
    double ncc_first;    /* NCC of the first pass's offset in the same strips (-2: outside) */
    bool first_best;     /* ... and it is the window's maximum: the same shift or next to
                            it, or at least as good as it */
    double sure;         /* the window's sure level (ts_rereg_window), 0: the strips' */
    double null_max;     /* under the sure level (reregister.c: 0.5, or min_ncc if higher)
                            and at or above the floor: the best NCC of the window's samples
                            over the null draws (strip b mirrored along the shared edge,
                            turned half a turn, rolled by half its length: unrelated
                            content, same texture), for the maximum or, where it stays, for
                            the first result (its NCC judged so); else -2 */
} ts_rereg_result;

/* What a worker keeps from one search to the next (zero-initialised; grown,
 * never shrunk): the window NCC's FFT buffers and the search's work arrays,
 * which were allocated per pair before (strip-sized, five per pair). */
typedef struct ts_rereg_scratch {
    ts_window_scratch *win;
    void *work;
    size_t cap; /* bytes at work */
} ts_rereg_scratch;
void ts_rereg_scratch_free(ts_rereg_scratch *s); /* frees what it holds, leaves it zeroed */

/* The window a search covers and how its maximum is judged. */
typedef struct ts_rereg_window {
    int ry, rx;     /* half-widths around the prior, px */
    int min_side;   /* the thinnest overlap a shift may leave, px (at least 4; 0: 4, the strips') */
    double sure;    /* the NCC from which a maximum is a match without the null draws;
                       0: the strips' level (reregister.c: 0.5, or min_ncc if higher),
                       for overlaps along a whole tile side; a corner's few hundred px
                       need more (bridge.c) */
} ts_rereg_window;

/* Searches the window around the prior of geometry g
 * (ts_strip_geometry_at for the prediction) for tiles a, b (h x w,
 * row-major); first_dy/dx: the first pass's offset, scored in the same
 * strips for the choice. r: a registrar of g's strip shape. scratch: the
 * worker's (NULL: made and freed per call). */
ts_status ts_reregister_pair(ts_registrar *r, const ts_strip_geometry *g, ts_samples a, ts_samples b,
                             int w, const ts_rereg_window *win, bool have_first, double first_dy, double first_dx,
                             ts_rereg_result *out, ts_rereg_scratch *scratch, ts_error *err);

/* Whether the window's maximum is a match (a clear peak above the window's
 * noise, docs/register.md has the measurements), and the result to keep
 * for a pair: *res (the first pass's) is replaced by the search when it is
 * accepted and better supported; returns true when replaced. */
bool ts_reregister_accept(const ts_rereg_result *x, double min_ncc);
/* ... at the window's sure level itself (not through the null draws):
 * content matched, whether or not the result is then taken. */
bool ts_reregister_sure(const ts_rereg_result *x, double min_ncc);
bool ts_reregister_choose(const ts_rereg_result *x, double min_ncc, ts_register_result *res);
/* Whether the first result, scored in the window's strips, is shown to be a
 * match as ts_reregister_accept shows a window maximum (false outside the
 * strips). */
bool ts_reregister_supports(const ts_rereg_result *x, double min_ncc);


/* ---- the pass (stage_pass.c) ---- */

#include "common/pool.h"
#include "register/tile_cache.h"

typedef struct ts_stage_pass {
    int h, w;                      /* tiles after orientation */
    const ts_register_options *reg; /* the first pass's pre-filters and min_ncc */
    ts_pool *pool;
    int64_t ntiles;
    /* The first pass's cache, which kept its tiles for this pass (the pass
     * adds its uses to it; the caller gives back what it kept), or NULL: a
     * cache of its own, cache_bytes, tiles read with load and given back
     * with release (NULL: free). */
    ts_tile_cache *cache;
    size_t cache_bytes;
    ts_tile_load_fn load;
    ts_tile_release_fn release;
    void *load_user;
    /* The ranks (NULL: one process): each registers the pairs redone whose
     * rank (ts_stage_pair) is its own, and every rank gets every result.
     * Every rank must call ts_stage_reregister with the same pairs. */
    const ts_dist *dist;
    /* Optional: ("reregister", this rank's pairs done, its pairs). */
    ts_progress_fn progress;
    void *progress_user;
    /* Optional, by tile id (the same on every rank): tiles without content
     * (content.h), whose pairs are not redone (only noise to match: the
     * window search would refuse them). NULL: none. */
    const bool *blank;
} ts_stage_pass;

typedef struct ts_stage_summary {
    ts_stage_model model;
    int64_t redone;                /* pairs searched again */
    int64_t replaced;              /* ... whose result was replaced */
    int64_t rematched;             /* ... of those, unmatched in the first pass */
    int64_t refused;               /* pairs refused (ts_stage_pair.refused) */
    int64_t tile_reads;            /* tiles decoded again for it (this rank) */
} ts_stage_summary;

/* Fits the model to p[0, n), registers its weak, unmatched and outlying
 * pairs again (on the pool and the ranks, each pair independent of the
 * schedule: the result does not depend on the thread or rank count) and
 * replaces p[i].res where the window search wins (ts_reregister_choose), on
 * every rank. A redone pair that keeps its first result is refused when
 * the window's search does not support it, or when outside the window and
 * weak, or far off and in no loop (ts_stage_pair.refused).
 * p NULL: fails (out of memory) after taking part in the ranks'
 * collectives. */
ts_status ts_stage_reregister(const ts_stage_pass *ps, ts_stage_pair *p, int64_t n, ts_stage_summary *sum,
                              ts_error *err);

#endif
