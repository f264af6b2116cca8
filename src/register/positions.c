/* estimate --positions metadata|FILE: the expected origin of every tile
 * from the stage, instead of the grid of the position names. The origins
 * become the guess (as --guess would give them: strips at the guessed
 * overlap, the solve anchored on them) and the neighbour graph is built
 * from them (graph.c). docs/register.md, "Stage positions". */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "common/error.h"
#include "common/name_index.h"
#include "ome/image_origin.h"
#include "register/estimate_internal.h"
#include "register/tile_config.h"

static ts_status from_metadata(const ts_plate *plate, const int64_t *tile_base, double (*o)[2], ts_error *err) {
    for (int w = 0; w < plate->nwells; w++) {
        const ts_well_info *wi = &plate->wells[w];
        for (int p = 0; p < wi->npositions; p++) {
            bool found;
            ts_status st = ts_plate_image_origin(plate, w, p, o[tile_base[w] + p], &found, err);
            if (st != TS_OK) return ts_fail_context(err, st, "reading the stage position of tile %s/%s", wi->path,
                                                    wi->positions[p]);
            if (!found) {
                char path[4200];
                ts_plate_image_path(plate, w, p, path, sizeof path);
                return ts_fail(err, TS_ERR_FORMAT, "tile %s/%s has no stage position: %s has no translation in "
                               "multiscales[0] (datasets[0] or its own coordinateTransformations), and --positions "
                               "metadata needs one for every tile", wi->path, wi->positions[p], path);
            }
            const double *v = o[tile_base[w] + p];
            if (!(fabs(v[0]) <= TS_SHIFTS_MAX_PX && fabs(v[1]) <= TS_SHIFTS_MAX_PX))
                return ts_fail(err, TS_ERR_FORMAT, "tile %s/%s: its translation puts it at [%g, %g] px, beyond %.0f "
                               "px: not a stage position", wi->path, wi->positions[p], v[0], v[1], TS_SHIFTS_MAX_PX);
        }
    }
    return TS_OK;
}

/* One well's tiles from the file's lines: by image file name when any
 * line's name (without directory and extension) is a position of the
 * well, then every line must name one and every position have one; else
 * in order, the k-th line for the k-th position of the well's images
 * list, the counts equal. line_of[p]: the entry of position p. */
static ts_status match_well(const ts_tile_config *tc, const char *path, const ts_well_info *wi, int *line_of,
                            ts_error *err) {
    ts_name_index *ix = ts_name_index_new();
    ts_status st = TS_OK;
    for (int p = 0; ix && p < wi->npositions; p++)
        if (!ts_name_index_add(ix, (const char(*)[32])wi->positions, p)) {
            ts_name_index_free(ix);
            ix = NULL;
        }
    if (!ix) return ts_fail(err, TS_ERR_NOMEM, "out of memory for the positions of well %s", wi->path);
    bool by_name = false;
    for (int k = 0; k < tc->n && !by_name; k++)
        by_name = tc->e[k].stem[0] &&
                  ts_name_index_find(ix, (const char(*)[32])wi->positions, tc->e[k].stem, strlen(tc->e[k].stem)) >= 0;
    for (int p = 0; p < wi->npositions; p++) line_of[p] = -1;
    if (by_name) {
        for (int k = 0; k < tc->n && st == TS_OK; k++) {
            const ts_tile_config_entry *e = &tc->e[k];
            int p = e->stem[0] ? ts_name_index_find(ix, (const char(*)[32])wi->positions, e->stem, strlen(e->stem)) : -1;
            if (p < 0)
                st = ts_fail(err, TS_ERR_FORMAT, "%s:%d: image '%.80s' is no position of well %s (lines are matched "
                             "to positions by image file name without extension, as other lines are)", path, e->line,
                             e->name, wi->path);
            else if (line_of[p] >= 0)
                st = ts_fail(err, TS_ERR_FORMAT, "%s:%d: image '%.80s' is position %s/%s, as line %d is already",
                             path, e->line, e->name, wi->path, wi->positions[p], tc->e[line_of[p]].line);
            else
                line_of[p] = k;
        }
        for (int p = 0; p < wi->npositions && st == TS_OK; p++)
            if (line_of[p] < 0)
                st = ts_fail(err, TS_ERR_FORMAT, "positions file %s has no line for tile %s/%s (lines are matched "
                             "by image file name, e.g. %s.tif)", path, wi->path, wi->positions[p], wi->positions[p]);
    } else if (tc->n > wi->npositions) {
        const ts_tile_config_entry *e = &tc->e[wi->npositions];
        st = ts_fail(err, TS_ERR_FORMAT, "%s:%d: image '%.80s' is tile %d but well %s has %d positions (no image "
                     "name in the file is a position name, so lines are matched to the well's positions in order)",
                     path, e->line, e->name, wi->npositions + 1, wi->path, wi->npositions);
    } else if (tc->n < wi->npositions) {
        st = ts_fail(err, TS_ERR_FORMAT, "positions file %s has no line for tile %s/%s: it lists %d tiles and the "
                     "well has %d positions (no image name in the file is a position name, so lines are matched "
                     "to the well's positions in order)", path, wi->path, wi->positions[tc->n], tc->n,
                     wi->npositions);
    } else {
        for (int p = 0; p < wi->npositions; p++) line_of[p] = p;
    }
    ts_name_index_free(ix);
    return st;
}

static ts_status from_file(const char *path, const ts_plate *plate, const int64_t *tile_base, double (*o)[2],
                           ts_error *err) {
    ts_tile_config *tc;
    ts_status st = ts_tile_config_read(path, &tc, err);
    if (st != TS_OK) return st;
    for (int w = 0; w < plate->nwells && st == TS_OK; w++) {
        const ts_well_info *wi = &plate->wells[w];
        int *line_of = malloc((size_t)(wi->npositions ? wi->npositions : 1) * sizeof *line_of);
        if (!line_of) st = ts_fail(err, TS_ERR_NOMEM, "out of memory for well %s", wi->path);
        else st = match_well(tc, path, wi, line_of, err);
        for (int p = 0; st == TS_OK && p < wi->npositions; p++) {
            o[tile_base[w] + p][0] = tc->e[line_of[p]].y;
            o[tile_base[w] + p][1] = tc->e[line_of[p]].x;
        }
        free(line_of);
    }
    ts_tile_config_free(tc);
    return st;
}

/* The guess as the solve takes it: every tile's float position. */
static ts_status make_guess(const ts_plate *plate, const int64_t *tile_base, double (*o)[2], ts_shifts **out,
                            ts_error *err) {
    ts_shifts *g = *out = ts_shifts_new();
    if (!g) return ts_fail(err, TS_ERR_NOMEM, "out of memory");
    for (int w = 0; w < plate->nwells; w++) {
        const ts_well_info *wi = &plate->wells[w];
        int gw = ts_shifts_add_well(g, wi->path);
        if (gw < 0 || !ts_shifts_ensure_positions(g, gw)) return ts_fail(err, TS_ERR_NOMEM, "out of memory");
        for (int p = 0; p < wi->npositions; p++) {
            int t = ts_shifts_add_tile(g, gw, wi->positions[p]); /* grows the positions too */
            if (t < 0) return ts_fail(err, TS_ERR_NOMEM, "out of memory");
            g->wells[gw].position[t][0] = o[tile_base[w] + p][0];
            g->wells[gw].position[t][1] = o[tile_base[w] + p][1];
        }
    }
    return TS_OK;
}

ts_status ts_estimate_read_positions(const ts_estimate_options *opt, const ts_plate *plate, const int64_t *tile_base,
                                     int64_t ntiles, ts_shifts **guess, double (**origin)[2], ts_error *err) {
    *guess = NULL;
    *origin = NULL;
    /* The solve (src/solve/well.c) still reads a grid cell from every
     * name, also when it is given the guess: refused here, before the
     * registration, rather than after it. */
    for (int w = 0; w < plate->nwells; w++)
        for (int p = 0; p < plate->wells[w].npositions; p++) {
            int gx, gy;
            if (!ts_position_grid(plate->wells[w].positions[p], opt->names_yx, &gx, &gy))
                return ts_fail(err, TS_ERR_UNSUPPORTED, "tile %s/%s: position name is not 6 digits (%s); the solve "
                               "needs such names also with --positions (docs/register.md, \"Stage positions\")",
                               plate->wells[w].path, plate->wells[w].positions[p],
                               opt->names_yx ? "YYYXXX" : "XXXYYY");
        }
    double(*o)[2] = malloc((size_t)(ntiles ? ntiles : 1) * sizeof *o);
    if (!o) return ts_fail(err, TS_ERR_NOMEM, "out of memory for the positions of %lld tiles", (long long)ntiles);
    ts_status st = opt->positions == TS_POSITIONS_METADATA ? from_metadata(plate, tile_base, o, err)
                                                           : from_file(opt->positions_file, plate, tile_base, o, err);
    /* The well's frame (its first tile row and column at 0): stage
     * coordinates may be 10^5 px from the origin; only differences count. */
    for (int w = 0; st == TS_OK && w < plate->nwells; w++) {
        int n = plate->wells[w].npositions;
        double (*ow)[2] = o + tile_base[w], min[2] = {INFINITY, INFINITY};
        for (int p = 0; p < n; p++)
            for (int k = 0; k < 2; k++) min[k] = fmin(min[k], ow[p][k]);
        for (int p = 0; p < n; p++)
            for (int k = 0; k < 2; k++) ow[p][k] -= min[k];
    }
    if (st == TS_OK) st = make_guess(plate, tile_base, o, guess, err);
    if (st != TS_OK) {
        free(o);
        return st;
    }
    *origin = o;
    return TS_OK;
}
