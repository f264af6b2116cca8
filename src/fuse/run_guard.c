/* See run_guard.h. */
#include "fuse/run_guard.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "common/error.h"
#include "common/fs.h"
#include "common/staged.h"
#include "ome/ome.h"

struct fuse_guard_well {
    char row[4200], well[4200], image[4200]; /* OUT/ROW, OUT/ROW/COL, OUT/ROW/COL/0 */
    ts_staged staged;                        /* a replacement's, when staged.dir is not "" */
    bool row_existed, well_existed, image_existed;
    bool writing;                            /* ranks may be writing its data (fuse_guard_writing) */
    bool done;                               /* its image is complete (and in place) */
};

/* Appends text to err's message (truncated if it does not fit). */
static void append(ts_error *err, const char *text) {
    if (!err) return;
    size_t n = strlen(err->message);
    snprintf(err->message + n, sizeof err->message - n, "%s", text);
}

/* Whether anything is at path, a dangling symlink included: something the
 * user had there is never taken for something this run created. */
static bool present(const char *path) {
    struct stat sb;
    return lstat(path, &sb) == 0;
}

ts_status fuse_guard_begin(fuse_guard *g, const ts_fuse_options *opt, const char *const *wells,
                           int nwells, ts_error *err) {
    memset(g, 0, sizeof *g);
    /* Every path below must fit, untruncated: a cut path could name some
     * other directory, which a failed run would then remove. */
    if (strlen(opt->output) >= 4000) return ts_fail(err, TS_ERR_ARG, "output path too long: '%.64s...'", opt->output);
    for (int i = 0; i < nwells; i++)
        if (strlen(wells[i]) >= 64) return ts_fail(err, TS_ERR_ARG, "well path too long: '%.64s...'", wells[i]);
    g->output = opt->output;
    g->t_out = opt->t_out;
    g->store_existed = present(opt->output);
    if (!g->store_existed) ts_first_missing(opt->output, g->created_top, sizeof g->created_top);
    g->wells = calloc((size_t)nwells + 1, sizeof *g->wells);
    if (!g->wells) return ts_fail(err, TS_ERR_NOMEM, "fuse: wells");
    g->nwells = nwells;
    ts_status st = ts_sweep_temp_files(opt->output, false, NULL, err);
    for (int i = 0; st == TS_OK && i < nwells; i++) {
        fuse_guard_well *w = &g->wells[i];
        const char *slash = strchr(wells[i], '/');
        int rowlen = slash ? (int)(slash - wells[i]) : (int)strlen(wells[i]);
        snprintf(w->row, sizeof w->row, "%s/%.*s", opt->output, rowlen, wells[i]);
        snprintf(w->well, sizeof w->well, "%s/%s", opt->output, wells[i]);
        snprintf(w->image, sizeof w->image, "%s/%s/0", opt->output, wells[i]);
        w->row_existed = present(w->row);
        w->well_existed = present(w->well);
        w->image_existed = present(w->image);
        /* A replaced image is deleted once its successor is in: only if
         * all of it is tessera's (store_own.c). */
        if (w->image_existed && opt->t_out < 0 && (st = ts_tree_check_own(w->image, err)) != TS_OK) break;
        /* The group metadata files are rewritten in place, and a killed
         * replacement's temporary directory is in the well group; a new
         * image is built from scratch, but --t-out keeps the image and
         * rewrites blocks anywhere in its arrays. */
        if ((st = ts_sweep_temp_files(w->row, false, NULL, err)) != TS_OK) break;
        if ((st = ts_sweep_temp_files(w->well, false, NULL, err)) != TS_OK) break;
        st = ts_sweep_temp_files(w->image, opt->t_out >= 0, NULL, err);
    }
    return st;
}

ts_status fuse_guard_start_well(fuse_guard *g, int i, char *write_path, size_t n, ts_error *err) {
    fuse_guard_well *w = &g->wells[i];
    if (i + 1 > g->nstarted) g->nstarted = i + 1;
    if (!w->image_existed || g->t_out >= 0) {
        if ((size_t)snprintf(write_path, n, "%s", w->image) >= n)
            return ts_fail(err, TS_ERR_ARG, "path too long: '%s'", w->image);
        return TS_OK;
    }
    ts_status st = ts_staged_begin(&w->staged, w->image, err);
    if (st) return st;
    if ((size_t)snprintf(write_path, n, "%s", w->staged.build) >= n)
        return ts_fail(err, TS_ERR_ARG, "path too long: '%s'", w->staged.build);
    return TS_OK;
}

void fuse_guard_writing(fuse_guard *g, int i) { g->wells[i].writing = true; }

ts_status fuse_guard_finish_well(fuse_guard *g, int i, ts_error *err) {
    fuse_guard_well *w = &g->wells[i];
    if (w->staged.dir[0]) {
        ts_status st = ts_staged_commit(&w->staged, err);
        if (st) return st;
    }
    w->done = true;
    return TS_OK;
}

static void remove_or_say(const char *path, ts_error *err) {
    ts_error rm;
    if (ts_remove_tree(path, &rm) != TS_OK) {
        char text[1400];
        snprintf(text, sizeof text, "; could not remove the partial output: %s", rm.message);
        append(err, text);
    }
}

ts_status fuse_guard_fail(fuse_guard *g, ts_status st, ts_error *err) {
    if (!g->store_existed) {
        /* Nothing here was the user's before the run. */
        if (present(g->created_top)) remove_or_say(g->created_top, err);
        return st;
    }
    for (int i = 0; i < g->nstarted; i++) {
        fuse_guard_well *w = &g->wells[i];
        char text[4400];
        if (!w->image_existed) {
            remove_or_say(!w->row_existed ? w->row : !w->well_existed ? w->well : w->image, err);
        } else if (w->done) {
            continue; /* a complete image in place of the old one */
        } else if (g->t_out >= 0 && w->writing) {
            snprintf(text, sizeof text, "; timepoint %d of the existing image %s may be partly "
                     "overwritten (re-run to complete it)", g->t_out, w->image);
            append(err, text);
        } else if (g->t_out >= 0) {
            /* Refused while its arrays were opened and checked: no rank
             * had written to it. */
            snprintf(text, sizeof text, "; the existing image %s is left as it was", w->image);
            append(err, text);
        } else if (!w->staged.keep) {
            /* The replacement was being built beside the old image, which
             * was never touched: only the partial new one goes. */
            ts_staged_abort(&w->staged, err);
            snprintf(text, sizeof text, "; the existing image %s is left as it was", w->image);
            append(err, text);
        }
    }
    return st;
}

void fuse_guard_free(fuse_guard *g) {
    free(g->wells);
    g->wells = NULL;
}
