/* Opening the arrays of one unit through the OME and zarr readers the
 * other stages use, so verify accepts and refuses what they do: a plate
 * position through ts_plate_image_meta (its version must be the plate's),
 * every level its multiscales lists through ts_image_open_array. What does
 * not open is a problem of that image or level; the rest is still checked. */
#include "verify/verify_internal.h"

#include <string.h>

static ts_verify_kind open_kind(ts_status st) {
    return st == TS_ERR_UNSUPPORTED ? TS_VERIFY_UNSUPPORTED : st == TS_ERR_IO ? TS_VERIFY_IO : TS_VERIFY_METADATA;
}

static ts_status add_array(vf_ctx *c, int64_t u, int level, tz_array *arr, const char *rel, vf_array *out,
                           int *n, ts_error *err) {
    vf_array *a = &out[(*n)++];
    memset(a, 0, sizeof *a);
    a->arr = arr;
    a->unit = u;
    a->level = level;
    a->rel = strdup(rel);
    if (!a->rel) return ts_fail(err, TS_ERR_NOMEM, "out of memory opening '%s'", rel);
    return TS_OK;
}

ts_status vf_open_unit(vf_ctx *c, int64_t u, vf_array *out, int *n, ts_error *err) {
    const vf_unit *un = &c->units[u];
    char dir[4200];
    vf_join(dir, sizeof dir, c->root, un->rel);
    *n = 0;
    ts_error e;
    tz_array *arr = NULL;
    ts_status st;
    if (un->kind == VF_ARRAY) {
        if ((st = tz_array_open(dir, &arr, &e)) != TS_OK)
            return st == TS_ERR_NOMEM ? ts_fail(err, st, "%s", e.message)
                                      : vf_report(c, (vf_where){u, 0, -1, -1}, open_kind(st), un->rel, "", -1, "%s",
                                                  e.message);
        return add_array(c, u, 0, arr, un->rel, out, n, err);
    }
    ts_image_meta meta;
    st = un->kind == VF_POSITION ? ts_plate_image_meta(c->plate, un->w, un->p, &meta, &e)
                                 : ts_image_read_meta(dir, NULL, &meta, &e);
    if (st != TS_OK)
        return st == TS_ERR_NOMEM ? ts_fail(err, st, "%s", e.message)
                                  : vf_report(c, (vf_where){u, -1, -1, -1}, open_kind(st), un->rel, "", -1, "%s",
                                              e.message);
    atomic_fetch_add(&c->images, 1);
    for (int l = 0; l < meta.nlevels; l++) {
        char rel[4200];
        vf_join(rel, sizeof rel, un->rel, meta.level_paths[l]);
        if ((st = ts_image_open_array(dir, &meta, l, &arr, &e)) != TS_OK) {
            if (st == TS_ERR_NOMEM) return ts_fail(err, st, "%s", e.message);
            if ((st = vf_report(c, (vf_where){u, l, -1, -1}, open_kind(st), rel, "", -1, "%s", e.message)) != TS_OK)
                return st;
            continue;
        }
        if ((st = add_array(c, u, l, arr, rel, out, n, err)) != TS_OK) return st;
    }
    return TS_OK;
}
