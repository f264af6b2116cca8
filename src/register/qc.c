/* estimate's quality check: the overlap the trusted pairs measure, per
 * direction, against the nominal one, and whether the solution is
 * plausible at all. The thresholds come from measurements on simulated and
 * real-image plates (docs/qc.md has the tables):
 *
 * - a pair is trusted when it matched with confidence >= QC_TRUST_CONF and
 *   the solve kept it (not an outlier);
 * - the nominal overlap is wrong when, with at least QC_MIN_TRUSTED trusted
 *   pairs along the axis, the measured overlap differs from it by more than
 *   max(3 spread, QC_MIN_PX, QC_REL x nominal): correct runs measured within
 *   2 spreads of the truth, a nominal 25% off is beyond it on most plates;
 * - the solution is implausible when, in a well of QC_MIN_PAIRS measured
 *   pairs or more, more than QC_MAX_OUTLIERS of them are outliers: the
 *   measurements contradict each other (correct runs <= 9%, wrong overlaps
 *   >= 33%). Pairs that did not match at all (blank tiles, tiny or
 *   featureless tiles) contradict nothing: their tiles stay on the nominal
 *   grid, and the CLI warns when they are the majority (correct runs with
 *   10% blank tiles leave up to 38% unmatched);
 * - ... or when a well has a disputed outlier (ts_stage_disputes): the
 *   solve placed tiles as though the stage had slipped by more than it
 *   scatters, against a pair that says it did not, and nothing tells which
 *   is wrong. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/error.h"
#include "common/graph_bridges.h"
#include "common/union_find.h"
#include "register/estimate_internal.h"

#define QC_TRUST_CONF 0.1
#define QC_MIN_TRUSTED 3
#define QC_MIN_PX 4.0
#define QC_REL 0.1
#define QC_MIN_PAIRS 4
#define QC_MAX_OUTLIERS 0.2
/* A link in no loop below this confidence is named (the stage model's
 * weak pairs: stage_model.c's MODEL_WEAK_CONF). */
#define QC_HANG_CONF 0.5

void ts_estimate_result_free(ts_estimate_result *r) {
    if (!r) return;
    free(r->well_qc);
    r->well_qc = NULL;
    r->nwell_qc = 0;
}

const char *ts_verdict_name(ts_verdict v) {
    return v == TS_VERDICT_OK ? "ok" : v == TS_VERDICT_OVERLAP_WRONG ? "overlap_wrong" : "implausible";
}

bool ts_qc_trusted(const ts_qc_pair *p) {
    return p->matched && !p->outlier && p->confidence >= QC_TRUST_CONF;
}

static int cmp_double(const void *x, const void *y) {
    double a = *(const double *)x, b = *(const double *)y;
    return (a > b) - (a < b);
}

static double sorted_quantile(const double *v, int64_t n, double q) {
    if (n == 0) return NAN;
    double at = q * (double)(n - 1);
    int64_t i = (int64_t)floor(at);
    if (i + 1 >= n) return v[n - 1];
    return v[i] + (at - (double)i) * (v[i + 1] - v[i]);
}

/* Median and 1.4826 MAD of v (sorted in place; scratch: n doubles). */
void ts_qc_median_spread(double *v, int64_t n, double *scratch, double *median, double *spread) {
    *median = *spread = NAN;
    if (n == 0) return;
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    *median = sorted_quantile(v, n, 0.5);
    for (int64_t i = 0; i < n; i++) scratch[i] = fabs(v[i] - *median);
    qsort(scratch, (size_t)n, sizeof *scratch, cmp_double);
    *spread = 1.4826 * sorted_quantile(scratch, n, 0.5);
}

/* Fills q from pairs [0, n) of direction dir (well < 0: every well). */
static void direction_qc(const ts_qc_pair *p, int64_t n, int well, int dir, int extent, int nominal,
                         double *v, double *c, double *scratch, ts_overlap_qc *q) {
    memset(q, 0, sizeof *q);
    q->nominal = nominal;
    int64_t nv = 0, nc = 0;
    for (int64_t i = 0; i < n; i++) {
        if (p[i].dir != dir || (well >= 0 && p[i].well != well)) continue;
        q->pairs++;
        if (!p[i].matched) continue;
        q->measured++;
        q->outliers += p[i].outlier;
        c[nc++] = p[i].confidence;
        if (ts_qc_trusted(&p[i])) v[nv++] = (double)extent - p[i].offset;
    }
    q->trusted = nv;
    ts_qc_median_spread(v, nv, scratch, &q->overlap, &q->spread);
    qsort(c, (size_t)nc, sizeof *c, cmp_double);
    for (int k = 0; k < 3; k++) q->conf_q[k] = sorted_quantile(c, nc, 0.25 * (k + 1));
}

/* The tolerance of a nominal overlap given a measurement's spread. */
static double tolerance(const ts_overlap_qc *q) {
    return fmax(3.0 * q->spread, fmax(QC_MIN_PX, QC_REL * q->nominal));
}

bool ts_qc_overlap_wrong(const ts_overlap_qc *q) {
    return q->trusted >= QC_MIN_TRUSTED && fabs(q->overlap - q->nominal) > tolerance(q);
}

/* The measured overlap is worth suggesting: enough trusted pairs, and
 * most measured pairs agree with the solve. */
bool ts_qc_measurement_reliable(const ts_overlap_qc *q) {
    return q->trusted >= QC_MIN_TRUSTED && 2 * q->trusted >= q->measured;
}

/* Fewer than half of a direction's neighbour pairs trusted: the run
 * alone cannot confirm the nominal overlap (estimate then probes it). */
bool ts_qc_low_coverage(const ts_overlap_qc *q) {
    return q->pairs >= QC_MIN_PAIRS && 2 * q->trusted < q->pairs;
}

/* "A/1/004003": position pos of well wi, as the summary names tiles, into
 * one of ts_estimate_well_qc's name fields (all of one size). */
#define TILE_NAME_CAP sizeof(((ts_estimate_well_qc *)0)->first_hanging)
_Static_assert(sizeof(((ts_estimate_well_qc *)0)->first_untrusted) == TILE_NAME_CAP &&
                   sizeof(((ts_estimate_well_qc *)0)->first_bridged) == TILE_NAME_CAP &&
                   sizeof(((ts_estimate_well_qc *)0)->first_cut_off) == TILE_NAME_CAP &&
                   sizeof(((ts_estimate_well_qc *)0)->first_stranded) == TILE_NAME_CAP &&
                   sizeof(((ts_estimate_well_qc *)0)->first_refused[0]) == TILE_NAME_CAP &&
                   sizeof(((ts_estimate_well_qc *)0)->worst_outlier[0]) == TILE_NAME_CAP &&
                   sizeof(((ts_estimate_well_qc *)0)->worst_disputed[0]) == TILE_NAME_CAP,
               "the well QC's tile names are of one size");
static void tile_name(char *name, const ts_plate *plate, int wi, int64_t pos) {
    snprintf(name, TILE_NAME_CAP, "%s/%s", plate->wells[wi].path, plate->wells[wi].positions[pos]);
}

/* More outliers than right nominal overlaps give (the verdict's tables). */
static bool too_many_outliers(const ts_estimate_well_qc *wq) {
    int64_t measured = wq->dir[0].measured + wq->dir[1].measured;
    int64_t outliers = wq->dir[0].outliers + wq->dir[1].outliers;
    return measured >= QC_MIN_PAIRS && (double)outliers > QC_MAX_OUTLIERS * (double)measured;
}

static ts_verdict well_verdict(const ts_estimate_well_qc *wq) {
    return wq->disputed || too_many_outliers(wq) ? TS_VERDICT_IMPLAUSIBLE : TS_VERDICT_OK;
}

bool ts_qc_disputes_only(const ts_estimate_result *r) {
    if (r->verdict != TS_VERDICT_IMPLAUSIBLE) return false;
    for (int i = 0; i < r->nwell_qc; i++)
        if (r->well_qc[i].verdict == TS_VERDICT_IMPLAUSIBLE && too_many_outliers(&r->well_qc[i])) return false;
    return true;
}

/* Marks bridge[i] for the matched pairs p[i] that are not outliers whose
 * removal would split their group (graph bridges: in no cycle of such
 * pairs; an outlier, which the solve all but ignores, closes no loop).
 * False: out of memory. */
static bool graph_bridges(const ts_qc_pair *p, int64_t n, const int64_t *tile_base, int64_t ntiles,
                          unsigned char *bridge) {
    int64_t(*ends)[2] = malloc((size_t)(n ? n : 1) * sizeof *ends);
    unsigned char *use = malloc((size_t)(n ? n : 1));
    bool ok = ends && use;
    for (int64_t i = 0; ok && i < n; i++) {
        ends[i][0] = tile_base[p[i].well] + p[i].a, ends[i][1] = tile_base[p[i].well] + p[i].b;
        use[i] = p[i].matched && !p[i].outlier;
    }
    ok = ok && ts_graph_bridges(ntiles, n, (const int64_t(*)[2])ends, use, bridge);
    free(ends), free(use);
    return ok;
}

ts_status ts_estimate_qc(const ts_qc_pair *p, int64_t n, const ts_plate *plate, const int64_t *tile_base,
                         int h, int w, int nominal_x, int nominal_y, const double *content,
                         ts_estimate_result *r, ts_error *err) {
    const int nw = plate->nwells;
    const int64_t ntiles = nw ? tile_base[nw - 1] + plate->wells[nw - 1].npositions : 0;
    size_t nn = (size_t)(n ? n : 1);
    double *v = malloc(nn * sizeof *v), *c = malloc(nn * sizeof *c), *scratch = malloc(nn * sizeof *scratch);
    int *parent = malloc((size_t)(ntiles ? ntiles : 1) * sizeof *parent);
    bool *paired = calloc((size_t)(ntiles ? ntiles : 1), sizeof *paired);
    bool *vouched = calloc((size_t)(ntiles ? ntiles : 1), sizeof *vouched); /* a trusted pair */
    /* Groups over trusted pairs, with the diagonal bridges and without
     * them (which tiles the bridges place), and a scratch count. */
    int *tparent = malloc((size_t)(ntiles ? ntiles : 1) * sizeof *tparent);
    int *gparent = malloc((size_t)(ntiles ? ntiles : 1) * sizeof *gparent);
    int *size = calloc((size_t)(ntiles ? ntiles : 1), sizeof *size);
    /* ... and over matched pairs less the weak ones that are a group's only
     * link (graph bridges): which tiles hang on one weak pair. */
    int *hparent = malloc((size_t)(ntiles ? ntiles : 1) * sizeof *hparent);
    unsigned char *bridge = malloc((size_t)(n ? n : 1));
    r->well_qc = calloc((size_t)(nw ? nw : 1), sizeof *r->well_qc);
    if (!v || !c || !scratch || !parent || !paired || !vouched || !tparent || !gparent || !size || !hparent ||
        !bridge || !r->well_qc || !graph_bridges(p, n, tile_base, ntiles, bridge)) {
        free(v), free(c), free(scratch), free(parent), free(paired), free(vouched);
        free(tparent), free(gparent), free(size), free(hparent), free(bridge);
        return ts_fail(err, TS_ERR_NOMEM, "out of memory for the quality check of %lld pairs", (long long)n);
    }
    r->nwell_qc = nw;
    const int extent[2] = {w, h}, nominal[2] = {nominal_x, nominal_y};
    for (int d = 0; d < 2; d++) direction_qc(p, n, -1, d, extent[d], nominal[d], v, c, scratch, &r->overlap[d]);
    /* Groups over matched pairs: what the solve connects. */
    for (int64_t i = 0; i < ntiles; i++) parent[i] = tparent[i] = gparent[i] = hparent[i] = (int)i;
    for (int64_t i = 0; i < n; i++) {
        if (!p[i].matched) continue;
        int a = (int)(tile_base[p[i].well] + p[i].a), b = (int)(tile_base[p[i].well] + p[i].b);
        paired[a] = paired[b] = true;
        if (ts_qc_trusted(&p[i])) {
            vouched[a] = vouched[b] = true;
            ts_uf_join(tparent, a, b);
            if (p[i].dir != TS_QC_DIAGONAL) ts_uf_join(gparent, a, b);
        }
        ts_uf_join(parent, a, b);
        if (!p[i].outlier && (!bridge[i] || p[i].confidence >= QC_HANG_CONF)) ts_uf_join(hparent, a, b);
    }
    r->verdict = TS_VERDICT_OK;
    r->disputed_pairs = 0;
    for (int wi = 0; wi < nw; wi++) {
        ts_estimate_well_qc *wq = &r->well_qc[wi];
        snprintf(wq->well, sizeof wq->well, "%s", plate->wells[wi].path);
        for (int d = 0; d < 2; d++) direction_qc(p, n, wi, d, extent[d], nominal[d], v, c, scratch, &wq->dir[d]);
        const int64_t lo = tile_base[wi], hi = lo + plate->wells[wi].npositions;
        const int tmain = ts_uf_largest(tparent, lo, hi, size), gmain = ts_uf_largest(gparent, lo, hi, size);
        /* Groups over matched pairs (what the solve connects): the largest,
         * and the size of each (size is zero again after the well). */
        const int main_group = ts_uf_largest(parent, lo, hi, size);
        /* The largest piece of the main group without its weak links; a
         * lone tile is no anchor (two tiles joined by one weak pair are one
         * group, neither hangs on the other). */
        int anchor = ts_uf_largest_within(hparent, lo, hi, size, parent, main_group);
        int64_t anchor_size = 0;
        for (int64_t t = lo; t < hi; t++) anchor_size += ts_uf_find(hparent, (int)t) == anchor;
        if (anchor_size < 2) anchor = -2;
        for (int64_t t = lo; t < hi; t++) size[ts_uf_find(parent, (int)t)]++;
        for (int64_t t = lo; t < hi; t++) {
            wq->isolated += !paired[t];
            /* Placed by weak evidence only: said, and named, not hidden in
             * a count of pairs (a corner tile whose two pairs were both
             * wrong, 5 px off, on a plate whose verdict is ok). */
            if (paired[t] && !vouched[t] && wq->untrusted++ == 0)
                tile_name(wq->first_untrusted, plate, wi, t - tile_base[wi]);
            /* Joined to the well's largest group by diagonal bridges, which
             * the grid pairs left outside it: said and named too (a corner
             * is a smaller overlap than any grid pair's). */
            if (ts_uf_find(tparent, (int)t) == tmain && ts_uf_find(gparent, (int)t) != gmain && wq->bridged++ == 0)
                tile_name(wq->first_bridged, plate, wi, t - tile_base[wi]);
            /* A group of its own, placed on the grid: its tiles matched each
             * other, so it has content, but nothing places it against the
             * rest (a row cut off by blank tiles was 3.4-7 px off). Said
             * and named, not only counted in groups. */
            const int root = ts_uf_find(parent, (int)t);
            if (root != main_group && size[root] >= 2 && wq->cut_off++ == 0)
                tile_name(wq->first_cut_off, plate, wi, t - tile_base[wi]);
            /* Hanging on one weak pair: in the main group only through a
             * pair of confidence under QC_HANG_CONF in no loop, or through
             * outliers, whose error, whatever it is, moves them all (13
             * tiles of a simulated well 51 px off, verdict ok, held by a
             * weak pair whose only loop ran through an outlier). */
            if (anchor != -2 && root == main_group && ts_uf_find(hparent, (int)t) != anchor && wq->hanging++ == 0)
                tile_name(wq->first_hanging, plate, wi, t - tile_base[wi]);
            wq->groups += root == (int)t;
        }
        for (int64_t t = lo; t < hi; t++) size[ts_uf_find(parent, (int)t)] = 0;
        /* Content left on its stage position: a tile with no matched pair
         * whose diagonal corner matched but was refused as a bridge (too
         * close a rival), or whose own image has content (content.h).
         * Isolated tiles are mostly blank ones, so the count of them says
         * nothing; these are named (the IHC recipe's seed 114: a corner
         * tile 4.6 px off, exit 0, nothing said; a simulated tile 3.5 px
         * off whose overlaps showed background only). Those with a refused
         * corner first: more is known of them. (size, zero over the well,
         * marks the tiles counted.) */
        for (int64_t i = 0; i < n; i++) {
            if (p[i].well != wi || !p[i].contested) continue;
            for (int k = 0; k < 2; k++) {
                const int64_t pos = k ? p[i].b : p[i].a, t = lo + pos;
                if (paired[t] || size[t]) continue;
                size[t] = 1;
                if (wq->stranded++ == 0) {
                    tile_name(wq->first_stranded, plate, wi, pos);
                    wq->stranded_ncc = p[i].ncc, wq->stranded_rival = p[i].rival;
                    wq->stranded_unfitted = p[i].unfitted;
                }
            }
        }
        for (int64_t t = lo; content && t < hi; t++) {
            if (paired[t] || size[t] || !(content[t] > 0)) continue;
            if (wq->stranded++ == 0) {
                tile_name(wq->first_stranded, plate, wi, t - lo);
                wq->stranded_content = content[t];
            }
        }
        for (int64_t t = lo; t < hi; t++) size[t] = 0;
        for (int64_t i = 0; i < n; i++) {
            if (p[i].well == wi && ts_qc_trusted(&p[i]) && p[i].residual > wq->max_residual)
                wq->max_residual = p[i].residual;
            /* Refused by the stage pass: its tiles are placed without it
             * (on their stage positions where it was their only pair). */
            if (p[i].well == wi && p[i].refused && wq->refused++ == 0) {
                tile_name(wq->first_refused[0], plate, wi, p[i].a);
                tile_name(wq->first_refused[1], plate, wi, p[i].b);
            }
            /* The worst outlier, named: the counts alone do not say where
             * (two wrong pairs in one loop put ten tiles 34 px off; the
             * solve flagged the weaker one, residual 39 px). */
            if (p[i].well == wi && p[i].matched && p[i].outlier && p[i].residual > wq->worst_outlier_px) {
                wq->worst_outlier_px = p[i].residual;
                tile_name(wq->worst_outlier[0], plate, wi, p[i].a);
                tile_name(wq->worst_outlier[1], plate, wi, p[i].b);
            }
            /* Disputed by the stage model (ts_stage_disputes, register/
             * stage_model.h): the tiles it places hang on a choice the run
             * cannot make. */
            if (p[i].well == wi && p[i].disputed) {
                wq->disputed++;
                if (p[i].residual > wq->disputed_px) {
                    wq->disputed_px = p[i].residual;
                    tile_name(wq->worst_disputed[0], plate, wi, p[i].a);
                    tile_name(wq->worst_disputed[1], plate, wi, p[i].b);
                }
            }
        }
        wq->verdict = well_verdict(wq);
        if (wq->verdict == TS_VERDICT_IMPLAUSIBLE) r->verdict = TS_VERDICT_IMPLAUSIBLE;
        r->disputed_pairs += wq->disputed;
    }
    if (r->verdict == TS_VERDICT_OK && (ts_qc_overlap_wrong(&r->overlap[0]) || ts_qc_overlap_wrong(&r->overlap[1])))
        r->verdict = TS_VERDICT_OVERLAP_WRONG;
    free(v), free(c), free(scratch), free(parent), free(paired), free(vouched);
    free(tparent), free(gparent), free(size), free(hparent), free(bridge);
    return TS_OK;
}

__attribute__((format(printf, 4, 5)))
static size_t append(char *buf, size_t cap, size_t at, const char *fmt, ...) {
    if (at >= cap) return at;
    va_list ap;
    va_start(ap, fmt);
    int k = vsnprintf(buf + at, cap - at, fmt, ap);
    va_end(ap);
    return k > 0 ? at + (size_t)k : at;
}

void ts_estimate_qc_message(const ts_estimate_result *r, bool same_nominal, char *buf, size_t cap) {
    static const char axis[2] = {'x', 'y'};
    size_t at = 0;
    buf[0] = '\0';
    bool have[2];
    const bool disputes_only = ts_qc_disputes_only(r);
    at = append(buf, cap, at, "measured overlap ");
    for (int d = 0; d < 2; d++) {
        const ts_overlap_qc *q = &r->overlap[d];
        if (q->pairs == 0) {
            have[d] = false;
            continue;
        }
        have[d] = ts_qc_measurement_reliable(q);
        if (d == 1 && r->overlap[0].pairs) at = append(buf, cap, at, ", ");
        if (q->trusted > 0)
            at = append(buf, cap, at, "%.0f px in %c (spread %.1f px, %lld of %lld pairs trusted%s)", q->overlap,
                        axis[d], q->spread, (long long)q->trusted, (long long)q->pairs,
                        q->probed ? ", wide strips" : "");
        else
            at = append(buf, cap, at, "unknown in %c (0 of %lld pairs trusted)", axis[d], (long long)q->pairs);
    }
    if (r->verdict == TS_VERDICT_IMPLAUSIBLE) {
        int64_t pairs = 0, measured = 0, outliers = 0, trusted = 0, isolated = 0;
        int bad = 0, first = -1, disputed = -1;
        for (int i = 0; i < r->nwell_qc; i++) {
            const ts_estimate_well_qc *wq = &r->well_qc[i];
            if (wq->verdict != TS_VERDICT_IMPLAUSIBLE) continue;
            if (first < 0) first = i;
            if (disputed < 0 && wq->disputed) disputed = i;
            bad++;
            for (int d = 0; d < 2; d++) {
                pairs += wq->dir[d].pairs, measured += wq->dir[d].measured;
                outliers += wq->dir[d].outliers, trusted += wq->dir[d].trusted;
            }
            isolated += wq->isolated;
        }
        at = append(buf, cap, at, "; implausible solution in %d well%s (%s%s): %lld of %lld pairs trusted, %lld outliers, "
                    "%lld unmatched, %lld isolated tiles", bad, bad == 1 ? "" : "s",
                    first >= 0 ? r->well_qc[first].well : "?", bad > 1 ? ", ..." : "", (long long)trusted,
                    (long long)pairs, (long long)outliers, (long long)(pairs - measured), (long long)isolated);
        if (disputed >= 0) {
            const ts_estimate_well_qc *wq = &r->well_qc[disputed];
            at = append(buf, cap, at, "; in %s the solution is %.1f px off pair %.32s %.32s, which fits the stage's "
                        "rows and columns: either the stage slipped there or the solve followed a wrong pair, and "
                        "the pairs cannot tell which (%lld such pair%s%s): check the tiles around it", wq->well,
                        wq->disputed_px, wq->worst_disputed[0], wq->worst_disputed[1], (long long)wq->disputed,
                        wq->disputed == 1 ? "" : "s", disputed != first || bad > 1 ? " in this well" : "");
        }
    }
    const ts_overlap_qc *x = &r->overlap[0], *y = &r->overlap[1];
    /* Which nominal values the reliable measurements contradict. */
    bool off[2] = {have[0] && fabs(x->overlap - x->nominal) > tolerance(x),
                   have[1] && fabs(y->overlap - y->nominal) > tolerance(y)};
    bool suggest = (have[0] || !x->pairs) && (have[1] || !y->pairs) && (have[0] || have[1]);
    if (disputes_only && !off[0] && !off[1]) {
        /* Disputed pairs alone: the overlap and orientation are not in question. */
    } else if (suggest && !off[0] && !off[1]) {
        /* Implausible although the overlap is as given: not the overlap. */
        at = append(buf, cap, at, "; the measured overlap agrees with the nominal one (x %d, y %d px): check the "
                    "orientation flags and the tiles", x->nominal, y->nominal);
    } else {
        if (same_nominal)
            at = append(buf, cap, at, "; --overlap %d looks wrong", x->pairs ? x->nominal : y->nominal);
        else if (off[0] != off[1])
            at = append(buf, cap, at, "; --overlap-%c %d looks wrong", off[0] ? 'x' : 'y',
                        off[0] ? x->nominal : y->nominal);
        else
            at = append(buf, cap, at, "; --overlap-x %d --overlap-y %d look wrong", x->nominal, y->nominal);
        if (suggest) {
            double mx = have[0] ? x->overlap : y->overlap, my = have[1] ? y->overlap : x->overlap;
            double tol = fmax(have[0] ? tolerance(x) : 0, have[1] ? tolerance(y) : 0);
            if (fabs(mx - my) <= tol && (same_nominal || !(have[0] && have[1])))
                at = append(buf, cap, at, ": try --overlap %.0f", floor(0.5 * (mx + my) + 0.5));
            else
                at = append(buf, cap, at, ": try --overlap-x %.0f --overlap-y %.0f", floor(mx + 0.5), floor(my + 0.5));
        } else {
            at = append(buf, cap, at, " (too few trusted pairs to suggest one; check the overlap and the "
                        "orientation flags)");
        }
    }
    append(buf, cap, at, " (--accept-poor writes it anyway)");
}
