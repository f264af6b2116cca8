/* The QC report: one self-contained HTML file (no script, no external
 * resource) that a microscopist opens in a browser. Per well: a picture of
 * the tiles at their solved positions (inline SVG), each measured pair's
 * seam coloured by its residual and drawn dashed when its confidence is
 * low, outliers and fallback tiles (no usable pair: placed on the grid or
 * the guess) marked, a legend; the quality-check figures per direction; the
 * worst seams with their tiles. The verdict and the plate's figures come
 * first. Everything is drawn from the shifts file estimate wrote and the
 * figures it measured, so the report says what the file holds. */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/error.h"
#include "common/fs.h"
#include "common/strbuf.h"
#include "tessera/tessera.h"
#include "shifts/shifts.h"

/* Wells this large get their tiles and worst seams only: a picture of
 * every seam of 170,000 tiles would be a browser-choking document. */
#define REPORT_ALL_SEAMS_MAX 20000
#define REPORT_WORST 20

/* Text into HTML (element content and attribute values). */
static void put_text(ts_strbuf *b, const char *s) {
    for (; *s; s++) {
        switch (*s) {
        case '<': ts_strbuf_printf(b, "&lt;"); break;
        case '>': ts_strbuf_printf(b, "&gt;"); break;
        case '&': ts_strbuf_printf(b, "&amp;"); break;
        case '"': ts_strbuf_printf(b, "&quot;"); break;
        default: ts_strbuf_put(b, s, 1);
        }
    }
}

/* A pair of tiles, as the check names it: "A/1/000003 &ndash; A/1/000004". */
static void put_pair(ts_strbuf *b, const char *a, const char *c) {
    put_text(b, a);
    ts_strbuf_printf(b, " &ndash; ");
    put_text(b, c);
}

static const char *verdict_name(ts_verdict v) {
    return v == TS_VERDICT_OK ? "ok" : v == TS_VERDICT_OVERLAP_WRONG ? "overlap wrong" : "implausible";
}

/* The seam colour of a residual, as the preview draws it: green 0, yellow
 * 1, red from 2 px. */
static void residual_rgb(double r, char *out, size_t n) {
    double c = 1 - (r > 2 ? 2 : r < 0 ? 0 : r) / 2;
    int red = (int)lround(255 * (c < 0.5 ? 1.0 : 2.0 * (1.0 - c))), green = (int)lround(255 * (c < 0.5 ? 2.0 * c : 1.0));
    snprintf(out, n, "#%02x%02x00", red, green);
}

static void put_num(ts_strbuf *b, double v, const char *unit) {
    if (isfinite(v)) ts_strbuf_printf(b, "%.2f%s", v, unit);
    else ts_strbuf_printf(b, "&ndash;");
}

static void put_dir_table(ts_strbuf *b, const ts_overlap_qc dir[2]) {
    ts_strbuf_printf(b, "<table class=\"qc\"><tr><th></th><th>pairs</th><th>measured</th><th>trusted</th><th>outliers</th>"
           "<th>nominal overlap</th><th>measured overlap</th><th>spread (repeatability)</th>"
           "<th>confidence quartiles</th></tr>\n");
    for (int d = 0; d < 2; d++) {
        const ts_overlap_qc *q = &dir[d];
        ts_strbuf_printf(b, "<tr class=\"dir-%c\"><th>%c</th><td>%lld</td><td>%lld</td><td>%lld</td><td>%lld</td><td>%d px</td>"
               "<td class=\"overlap\">",
            d ? 'y' : 'x', d ? 'y' : 'x', (long long)q->pairs, (long long)q->measured, (long long)q->trusted,
            (long long)q->outliers, q->nominal);
        put_num(b, q->overlap, " px");
        if (q->probed) ts_strbuf_printf(b, " (wide strips)");
        ts_strbuf_printf(b, "</td><td>");
        put_num(b, q->spread, " px");
        ts_strbuf_printf(b, "</td><td>");
        for (int k = 0; k < 3; k++) {
            if (k) ts_strbuf_printf(b, " / ");
            put_num(b, q->conf_q[k], "");
        }
        ts_strbuf_printf(b, "</td></tr>\n");
    }
    ts_strbuf_printf(b, "</table>\n");
}

typedef struct seam {
    int pair;
    double residual;
} seam;

static int worse_first(const void *x, const void *y) {
    const seam *a = x, *b = y;
    if (a->residual != b->residual) return a->residual < b->residual ? 1 : -1;
    return a->pair - b->pair;
}

static ts_status put_well(ts_strbuf *b, const ts_shifts *s, const ts_well_shifts *w, const ts_estimate_well_qc *q,
                          ts_error *err) {
    const int th = s->tile_shape[0], tw = s->tile_shape[1];
    ts_strbuf_printf(b, "<section class=\"well\" id=\"well-");
    put_text(b, w->well);
    ts_strbuf_printf(b, "\"><h2>Well ");
    put_text(b, w->well);
    if (q) ts_strbuf_printf(b, " <span class=\"verdict %s\">%s</span>", q->verdict == TS_VERDICT_OK ? "ok" : "bad",
               verdict_name(q->verdict));
    ts_strbuf_printf(b, "</h2>\n");
    if (q) {
        ts_strbuf_printf(b, "<p>%d tiles, %lld isolated (no usable pair: placed on the grid or the guess), %d connected "
               "group%s, largest residual of a trusted pair ",
            w->ntiles, (long long)q->isolated, q->groups, q->groups == 1 ? "" : "s");
        put_num(b, q->max_residual, " px");
        ts_strbuf_printf(b, ".</p>\n");
        /* The tiles the summary line names: placed by weak evidence, by a
         * corner, with a group of their own on the stage positions, or
         * left there alone although a corner showed content. */
        const struct { int64_t n; const char *first, *what; } named[5] = {
            {q->untrusted, q->first_untrusted, "placed by untrusted pairs only"},
            {q->bridged, q->first_bridged, "placed by diagonal neighbours only"},
            {q->hanging, q->first_hanging, "hanging on one weak pair in no loop, or on outliers"},
            {q->cut_off, q->first_cut_off, "in groups no pair joins to the rest, placed on their stage positions"},
            {q->stranded, q->first_stranded,
             "with content and no pair, placed on the stage positions only (a diagonal corner matched but was "
             "refused as a bridge, or the tile's own image stands out of its noise)"}};
        for (int k = 0; k < 5; k++) {
            if (!named[k].n) continue;
            ts_strbuf_printf(b, "<p class=\"check\">%lld tile%s %s (first: ", (long long)named[k].n,
                             named[k].n == 1 ? "" : "s", named[k].what);
            put_text(b, named[k].first);
            ts_strbuf_printf(b, "): check %s.</p>\n", named[k].n == 1 ? "it" : "them");
        }
        if (q->refused) {
            ts_strbuf_printf(b,
                             "<p class=\"check\">%lld pair%s refused by the stage model, not borne out by its "
                             "window's search (first: ",
                             (long long)q->refused, q->refused == 1 ? "" : "s");
            put_pair(b, q->first_refused[0], q->first_refused[1]);
            ts_strbuf_printf(b, "): %s tiles are placed without %s.</p>\n", q->refused == 1 ? "its" : "their",
                             q->refused == 1 ? "it" : "them");
        }
        if (q->disputed) {
            ts_strbuf_printf(b, "<p class=\"check\">%lld outlier%s disputed by the stage model: measured on the "
                             "stage's rows and columns, solved far outside them (either the stage slipped there or "
                             "the solve followed a wrong pair). The worst: ",
                             (long long)q->disputed, q->disputed == 1 ? "" : "s");
            put_pair(b, q->worst_disputed[0], q->worst_disputed[1]);
            ts_strbuf_printf(b, ", solved %.1f px off its measurement.</p>\n", q->disputed_px);
        }
        if (q->worst_outlier[0][0]) {
            ts_strbuf_printf(b, "<p class=\"check\">Worst outlier: ");
            put_pair(b, q->worst_outlier[0], q->worst_outlier[1]);
            ts_strbuf_printf(b, ", residual %.1f px.</p>\n", q->worst_outlier_px);
        }
        put_dir_table(b, q->dir);
    }
    /* Tiles with a usable pair (matched, not an outlier); the rest fell
     * back to the grid or the guess. */
    bool *usable = calloc((size_t)w->ntiles + 1, sizeof *usable);
    seam *seams = calloc((size_t)w->npairs + 1, sizeof *seams);
    double (*segs)[4] = calloc((size_t)w->npairs + 1, sizeof *segs);
    if (!usable || !seams || !segs) {
        free(usable), free(seams), free(segs);
        return ts_fail(err, TS_ERR_NOMEM, "report: well %s", w->well);
    }
    int nseams = 0;
    for (int p = 0; p < w->npairs; p++) {
        const ts_shift_pair *pr = &w->pairs[p];
        double r;
        if (!ts_pair_seam(s, w, pr, segs[p], &r)) continue;
        seams[nseams++] = (seam){p, r};
        if (pr->confidence >= 0.1 && !pr->outlier) usable[pr->a] = usable[pr->b] = true;
    }
    double H = 1, W = 1;
    for (int t = 0; t < w->ntiles; t++) {
        if (!w->has_origin[t]) continue;
        if ((double)w->origin[t][0] + th > H) H = (double)w->origin[t][0] + th;
        if ((double)w->origin[t][1] + tw > W) W = (double)w->origin[t][1] + tw;
    }
    const double stroke = fmax(H, W) / 250;
    ts_strbuf_printf(b, "<figure><svg class=\"layout\" xmlns=\"http://www.w3.org/2000/svg\" viewBox=\"0 0 %.0f %.0f\" "
           "width=\"900\" height=\"%.0f\" preserveAspectRatio=\"xMinYMin meet\">\n"
           "<rect x=\"0\" y=\"0\" width=\"%.0f\" height=\"%.0f\" fill=\"#111\"/>\n",
        W, H, fmin(900 * H / W, 900), W, H);
    for (int t = 0; t < w->ntiles; t++) {
        if (!w->has_origin[t]) continue;
        ts_strbuf_printf(b, "<rect class=\"tile%s\" x=\"%lld\" y=\"%lld\" width=\"%d\" height=\"%d\" fill=\"%s\" "
               "stroke=\"#8888aa\" stroke-width=\"%.1f\"><title>",
            usable[t] ? "" : " fallback", (long long)w->origin[t][1], (long long)w->origin[t][0], tw, th,
            usable[t] ? "#2a2a33" : "#553300", stroke / 3);
        put_text(b, w->tiles[t]);
        ts_strbuf_printf(b, "%s</title></rect>\n", usable[t] ? "" : " (fallback: no usable pair)");
    }
    qsort(seams, (size_t)nseams, sizeof *seams, worse_first);
    const int ndraw = w->ntiles > REPORT_ALL_SEAMS_MAX && nseams > 2000 ? 2000 : nseams;
    for (int i = ndraw - 1; i >= 0; i--) { /* worst on top */
        const ts_shift_pair *pr = &w->pairs[seams[i].pair];
        const double *g = segs[seams[i].pair];
        char col[16];
        const char *cls = pr->confidence < 0.1 ? "seam unmatched" : pr->outlier ? "seam outlier" : "seam";
        if (pr->confidence < 0.1) snprintf(col, sizeof col, "#4080ff");
        else if (pr->outlier) snprintf(col, sizeof col, "#ff00ff");
        else residual_rgb(seams[i].residual, col, sizeof col);
        ts_strbuf_printf(b, "<line class=\"%s\" x1=\"%.1f\" y1=\"%.1f\" x2=\"%.1f\" y2=\"%.1f\" stroke=\"%s\" stroke-width=\"%.1f\"%s>"
               "<title>",
            cls, g[1], g[0], g[3], g[2], col, stroke * (pr->outlier ? 1.6 : 1.0),
            pr->confidence < 0.5 ? " stroke-dasharray=\"6 4\"" : "");
        put_pair(b, w->tiles[pr->a], w->tiles[pr->b]);
        ts_strbuf_printf(b, ": residual %.2f px, confidence %.2f%s</title></line>\n", seams[i].residual, pr->confidence,
            pr->outlier ? ", outlier" : "");
    }
    ts_strbuf_printf(b, "</svg><figcaption>Tiles at their solved positions. Seams: colour = residual (measured offset "
           "against the solved positions) <span class=\"swatch\" style=\"background:linear-gradient(90deg,#00ff00,"
           "#ffff00,#ff0000)\"></span> 0 / 1 / 2+ px; dashed = confidence below 0.5; "
           "<span class=\"swatch\" style=\"background:#ff00ff\"></span> outlier (not used by the solve); "
           "<span class=\"swatch\" style=\"background:#4080ff\"></span> no match (confidence below 0.1); "
           "<span class=\"swatch\" style=\"background:#553300\"></span> fallback tile (no usable pair).%s"
           "</figcaption></figure>\n",
        ndraw < nseams ? " Only the 2,000 worst seams of this large well are drawn." : "");
    ts_strbuf_printf(b, "<h3>Worst seams</h3>\n<table class=\"worst\"><tr><th>#</th><th>tile a</th><th>tile b</th>"
           "<th>residual</th><th>confidence</th><th></th></tr>\n");
    for (int i = 0; i < nseams && i < REPORT_WORST; i++) {
        const ts_shift_pair *pr = &w->pairs[seams[i].pair];
        ts_strbuf_printf(b, "<tr><td>%d</td><td>", i + 1);
        put_text(b, w->tiles[pr->a]);
        ts_strbuf_printf(b, "</td><td>");
        put_text(b, w->tiles[pr->b]);
        ts_strbuf_printf(b, "</td><td class=\"residual\">%.2f px</td><td>%.2f</td><td>%s</td></tr>\n", seams[i].residual,
            pr->confidence, pr->outlier ? "outlier" : pr->confidence < 0.1 ? "no match" : "");
    }
    ts_strbuf_printf(b, "</table></section>\n");
    free(usable), free(seams), free(segs);
    return TS_OK;
}

ts_status ts_report_write(const char *html_path, const char *shifts_path, const ts_estimate_result *qc,
                          ts_error *err) {
    ts_shifts *s = NULL;
    ts_status st = ts_shifts_read(shifts_path, &s, err);
    if (st) return ts_fail_context(err, st, "report %s", html_path);
    if (!s->has_tile_shape) {
        ts_shifts_free(s);
        return ts_fail(err, TS_ERR_FORMAT, "report %s: %s has no tile_shape", html_path, shifts_path);
    }
    ts_strbuf b = {0};
    ts_strbuf_printf(&b, "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>tessera QC: ");
    put_text(&b, shifts_path);
    ts_strbuf_printf(&b, "</title><style>\n"
            "body{font-family:sans-serif;margin:1.5em;color:#222;max-width:1000px}"
            "table{border-collapse:collapse;margin:.5em 0}td,th{border:1px solid #bbb;padding:.2em .6em;"
            "text-align:right}th{background:#eee}.verdict{padding:.1em .5em;border-radius:.3em;color:#fff}"
            ".verdict.ok{background:#2a8a2a}.verdict.bad{background:#c02020}.swatch{display:inline-block;"
            "width:2.5em;height:.8em;vertical-align:middle;border:1px solid #888}"
            "svg.layout{display:block;border:1px solid #888}figcaption{font-size:.9em;margin:.3em 0 1em}\n"
            "</style></head><body>\n<h1>Stitching quality</h1>\n<p>Shifts file <code>");
    put_text(&b, shifts_path);
    ts_strbuf_printf(&b, "</code>: %d well%s.</p>\n", s->nwells, s->nwells == 1 ? "" : "s");
    if (qc) {
        ts_strbuf_printf(&b, "<p class=\"plate-verdict\">Verdict: <span class=\"verdict %s\">%s</span>",
            qc->verdict == TS_VERDICT_OK ? "ok" : "bad", verdict_name(qc->verdict));
        if (qc->verdict_message[0]) {
            ts_strbuf_printf(&b, " ");
            put_text(&b, qc->verdict_message);
        }
        ts_strbuf_printf(&b, "</p>\n<p>%lld tiles, %lld pairs measured, %lld unmatched, %lld with confidence below 0.1, "
                "%lld outliers, %lld isolated tiles.</p>\n",
            (long long)qc->tiles, (long long)qc->pairs, (long long)qc->unmatched_pairs,
            (long long)qc->low_confidence_pairs, (long long)qc->outlier_pairs, (long long)qc->isolated_tiles);
        put_dir_table(&b, qc->overlap);
    }
    for (int w = 0; w < s->nwells && st == TS_OK; w++) {
        const ts_estimate_well_qc *q = NULL;
        for (int k = 0; qc && k < qc->nwell_qc; k++)
            if (!strcmp(qc->well_qc[k].well, s->wells[w].well)) q = &qc->well_qc[k];
        st = put_well(&b, s, &s->wells[w], q, err);
    }
    ts_strbuf_printf(&b, "<p><small>Written by tessera %s. How to read it: docs/qc.md.</small></p>\n</body></html>\n",
        ts_version());
    if (st == TS_OK && b.failed) st = ts_fail(err, TS_ERR_NOMEM, "report %s: out of memory", html_path);
    if (st == TS_OK) st = ts_write_file_atomic(html_path, b.data, b.len, err);
    free(b.data);
    ts_shifts_free(s);
    return st;
}
