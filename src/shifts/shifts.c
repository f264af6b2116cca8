/* The in-memory shifts model: wells, tiles (found through a hash index),
 * pairs and old-tool confidence entries. Reading and writing the YAML live
 * in shifts_read.c and shifts_write.c. */
#include "shifts/shifts.h"
#include "common/name_index.h"
#include "shifts/shifts_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

ts_shifts *ts_shifts_new(void) {
    return calloc(1, sizeof(ts_shifts));
}

static void free_well(ts_well_shifts *w) {
    free(w->tiles);
    free(w->origin);
    free(w->position);
    free(w->has_origin);
    free(w->pairs);
    free(w->edges);
    ts_name_index_free(w->index);
}

void ts_shifts_free(ts_shifts *s) {
    if (!s) return;
    for (int i = 0; i < s->nwells; i++) free_well(&s->wells[i]);
    free(s->wells);
    free(s);
}

int ts_shifts_find_well(const ts_shifts *s, const char *well) {
    for (int i = 0; i < s->nwells; i++)
        if (strcmp(s->wells[i].well, well) == 0) return i;
    return -1;
}

int ts_shifts_add_well(ts_shifts *s, const char *well) {
    int found = ts_shifts_find_well(s, well);
    if (found >= 0) return found;
    if (strlen(well) >= sizeof s->wells[0].well) return -1;
    if (s->nwells >= s->well_cap) {
        int ncap = s->well_cap ? s->well_cap * 2 : 4;
        if (ncap < s->nwells + 1) ncap = s->nwells + 1;
        ts_well_shifts *nw = realloc(s->wells, (size_t)ncap * sizeof *nw);
        if (!nw) return -1;
        s->wells = nw;
        s->well_cap = ncap;
    }
    ts_well_shifts *w = &s->wells[s->nwells];
    memset(w, 0, sizeof *w);
    strcpy(w->well, well);
    return s->nwells++;
}

/* Grows a well's per-tile arrays to hold n tiles. */
static bool reserve_tiles(ts_well_shifts *w, int n) {
    if (n <= w->tile_cap) return true;
    int ncap = w->tile_cap ? w->tile_cap : 16;
    while (ncap < n) ncap *= 2;
    /* Tiles appended by hand may already exceed tile_cap: never shrink. */
    if (ncap < w->ntiles) ncap = w->ntiles;
    void *p;
    if (!(p = realloc(w->tiles, (size_t)ncap * sizeof *w->tiles))) return false;
    w->tiles = p;
    if (!(p = realloc(w->origin, (size_t)ncap * sizeof *w->origin))) return false;
    w->origin = p;
    if (!(p = realloc(w->has_origin, (size_t)ncap * sizeof *w->has_origin))) return false;
    w->has_origin = p;
    if (w->position) {
        if (!(p = realloc(w->position, (size_t)ncap * sizeof *w->position))) return false;
        w->position = p;
    }
    w->tile_cap = ncap;
    return true;
}

/* Brings the hash index up to date with tiles appended without add_tile. */
static bool catch_up_index(ts_well_shifts *w) {
    if (!w->index && !(w->index = ts_name_index_new())) return false;
    while (w->index->count < w->ntiles)
        if (!ts_name_index_add(w->index, (const char (*)[32])w->tiles, w->index->count)) return false;
    return true;
}

static int find_tile_n(const ts_well_shifts *w, const char *name, size_t len) {
    int indexed = 0;
    if (w->index) {
        int p = ts_name_index_find(w->index, (const char (*)[32])w->tiles, name, len);
        if (p >= 0) return p;
        indexed = w->index->count;
    }
    for (int i = indexed; i < w->ntiles; i++)
        if (strncmp(w->tiles[i], name, len) == 0 && w->tiles[i][len] == '\0') return i;
    return -1;
}

int ts_shifts_find_tile(const ts_shifts *s, int w, const char *name) {
    if (w < 0 || w >= s->nwells) return -1;
    return find_tile_n(&s->wells[w], name, strlen(name));
}

/* Finds or adds the tile named name[0, len). Used by the reader too. */
int ts_shifts_add_tile_n(ts_shifts *s, int wi, const char *name, size_t len) {
    if (wi < 0 || wi >= s->nwells || len == 0 || len >= sizeof s->wells[0].tiles[0]) return -1;
    /* Keys are WELL/POSITION split at the last '/': a '/' in a position name
     * would be read back as part of the well. */
    if (memchr(name, '/', len)) return -1;
    ts_well_shifts *w = &s->wells[wi];
    int found = find_tile_n(w, name, len);
    if (found >= 0) return found;
    if (!reserve_tiles(w, w->ntiles + 1) || !catch_up_index(w)) return -1;
    int t = w->ntiles;
    memcpy(w->tiles[t], name, len);
    w->tiles[t][len] = '\0';
    w->origin[t][0] = w->origin[t][1] = 0;
    w->has_origin[t] = false;
    if (w->position) w->position[t][0] = w->position[t][1] = NAN;
    if (!ts_name_index_add(w->index, (const char (*)[32])w->tiles, t)) return -1;
    w->ntiles++;
    return t;
}

int ts_shifts_add_tile(ts_shifts *s, int w, const char *name) {
    return ts_shifts_add_tile_n(s, w, name, strlen(name));
}

bool ts_shifts_ensure_positions(ts_shifts *s, int wi) {
    ts_well_shifts *w = &s->wells[wi];
    if (w->position) return true;
    int cap = w->tile_cap > w->ntiles ? w->tile_cap : w->ntiles;
    w->position = malloc((size_t)(cap ? cap : 1) * sizeof *w->position);
    if (!w->position) return false;
    for (int i = 0; i < cap; i++) w->position[i][0] = w->position[i][1] = NAN;
    return true;
}

int ts_shifts_add_pair(ts_shifts *s, int wi, int a, int b, double dy, double dx, double conf) {
    if (wi < 0 || wi >= s->nwells) return -1;
    ts_well_shifts *w = &s->wells[wi];
    if (w->npairs >= w->pair_cap) {
        int ncap = w->pair_cap ? w->pair_cap * 2 : 16;
        if (ncap < w->npairs + 1) ncap = w->npairs + 1;
        ts_shift_pair *np = realloc(w->pairs, (size_t)ncap * sizeof *np);
        if (!np) return -1;
        w->pairs = np;
        w->pair_cap = ncap;
    }
    ts_shift_pair *p = &w->pairs[w->npairs];
    p->a = a;
    p->b = b;
    p->dy = dy;
    p->dx = dx;
    p->confidence = conf;
    p->outlier = false;
    p->ry = p->rx = NAN;
    return w->npairs++;
}

int ts_shifts_add_edge(ts_shifts *s, int wi, int xa, int ya, int xb, int yb, double conf) {
    if (wi < 0 || wi >= s->nwells) return -1;
    ts_well_shifts *w = &s->wells[wi];
    if (w->nedges >= w->edge_cap) {
        int ncap = w->edge_cap ? w->edge_cap * 2 : 16;
        if (ncap < w->nedges + 1) ncap = w->nedges + 1;
        ts_shift_edge *ne = realloc(w->edges, (size_t)ncap * sizeof *ne);
        if (!ne) return -1;
        w->edges = ne;
        w->edge_cap = ncap;
    }
    w->edges[w->nedges] = (ts_shift_edge){xa, ya, xb, yb, conf};
    return w->nedges++;
}

bool ts_position_grid(const char *name, bool names_yx, int *gx, int *gy) {
    if (!name) return false;
    for (int i = 0; i < 6; i++)
        if (name[i] < '0' || name[i] > '9') return false;
    if (name[6] != '\0') return false;
    int first = (name[0] - '0') * 100 + (name[1] - '0') * 10 + (name[2] - '0');
    int second = (name[3] - '0') * 100 + (name[4] - '0') * 10 + (name[5] - '0');
    *gx = names_yx ? second : first;
    *gy = names_yx ? first : second;
    return true;
}

static void tile_at(const ts_well_shifts *w, int t, double *y, double *x) {
    if (w->position) *y = w->position[t][0], *x = w->position[t][1];
    else *y = (double)w->origin[t][0], *x = (double)w->origin[t][1];
}

bool ts_pair_seam(const ts_shifts *s, const ts_well_shifts *w, const ts_shift_pair *p, double seg[4],
                  double *residual) {
    if (!s->has_tile_shape || p->a < 0 || p->b < 0 || p->a >= w->ntiles || p->b >= w->ntiles) return false;
    if (!w->has_origin[p->a] || !w->has_origin[p->b]) return false;
    const double th = s->tile_shape[0], tw = s->tile_shape[1];
    double ya, xa, yb, xb;
    tile_at(w, p->a, &ya, &xa);
    tile_at(w, p->b, &yb, &xb);
    *residual = isfinite(p->ry) && isfinite(p->rx) ? hypot(p->ry, p->rx)
                                                   : hypot((yb - ya) - p->dy, (xb - xa) - p->dx);
    /* The overlap of the two tiles (or the gap between facing edges). */
    const double oy0 = fmax(ya, yb), oy1 = fmin(ya, yb) + th, ox0 = fmax(xa, xb), ox1 = fmin(xa, xb) + tw;
    if (fabs(p->dx) >= fabs(p->dy)) {
        seg[0] = oy0, seg[2] = oy1 - 1;
        seg[1] = seg[3] = (ox0 + ox1) / 2;
    } else {
        seg[1] = ox0, seg[3] = ox1 - 1;
        seg[0] = seg[2] = (oy0 + oy1) / 2;
    }
    return true;
}
