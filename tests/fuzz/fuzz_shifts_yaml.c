/*
 * Fuzz target: the shifts YAML reader (ts_shifts_read, libyaml events into
 * the model). The input is the file. A file that reads is also used the way
 * solve and fuse use it (grid coordinates of its position names, the guess
 * origin of each tile) and written back with ts_shifts_write. Invariant:
 * what the writer writes reads back, with the same wells, tiles and pairs.
 */
#include "fuzz_common.h"

#include <math.h>

#include "shifts/shifts.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char path[1100], again_path[1100];
    fz_path(path, sizeof path, NULL, "shifts.yaml");
    fz_path(again_path, sizeof again_path, NULL, "again.yaml");
    fz_write(path, data, size);
    ts_shifts *s = NULL;
    ts_error err = {0};
    if (ts_shifts_read(path, &s, &err) != TS_OK) {
        fz_check_error(err, "read");
        return 0;
    }
    for (int w = 0; w < s->nwells; w++) {
        const ts_well_shifts *ws = &s->wells[w];
        fz_check(ts_shifts_find_well(s, ws->well) == w, "well '%s' is not found by name", ws->well);
        for (int t = 0; t < ws->ntiles && t < 64; t++) {
            int gx, gy;
            ts_position_grid(ws->tiles[t], s->names_yx, &gx, &gy);
            double yx[2];
            if (ts_shifts_guess_origin(s, path, ws->well, ws->tiles[t], yx, &err) == TS_OK)
                fz_check(isfinite(yx[0]) && isfinite(yx[1]), "guess origin of %s is not finite", ws->tiles[t]);
        }
        for (int p = 0; p < ws->npairs; p++)
            fz_check(ws->pairs[p].a >= 0 && ws->pairs[p].a < ws->ntiles && ws->pairs[p].b >= 0 &&
                         ws->pairs[p].b < ws->ntiles,
                     "pair %d of %s names tiles %d, %d of %d", p, ws->well, ws->pairs[p].a, ws->pairs[p].b,
                     ws->ntiles);
    }
    if (ts_shifts_write(again_path, s, &err) == TS_OK) {
        ts_shifts *t = NULL;
        ts_status st = ts_shifts_read(again_path, &t, &err);
        fz_check(st == TS_OK, "the writer's own file does not read: %s", err.message);
        /* Wells are read in the order they first appear, which the writer's
         * section order may change: they are matched by name. */
        fz_check(t->nwells == s->nwells, "%d wells -> %d", s->nwells, t->nwells);
        for (int w = 0; w < s->nwells; w++) {
            int v = ts_shifts_find_well(t, s->wells[w].well);
            fz_check(v >= 0, "well %s is lost", s->wells[w].well);
            fz_check(t->wells[v].ntiles == s->wells[w].ntiles, "%s: %d tiles -> %d", s->wells[w].well,
                     s->wells[w].ntiles, t->wells[v].ntiles);
            fz_check(t->wells[v].npairs == s->wells[w].npairs, "%s: %d pairs -> %d", s->wells[w].well,
                     s->wells[w].npairs, t->wells[v].npairs);
        }
        ts_shifts_free(t);
    }
    fz_no_nomem(err);
    ts_shifts_free(s);
    return 0;
}
