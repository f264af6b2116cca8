/* See run_guard.h. */
#include "fuse/run_guard.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "common/error.h"
#include "common/fs.h"

struct fuse_guard_well {
    char row[4200], well[4200], image[4200]; /* OUT/ROW, OUT/ROW/COL, OUT/ROW/COL/0 */
    char staging[4300];                      /* a replacement's temporary directory, or "" */
    bool row_existed, well_existed, image_existed;
    bool keep_staging;                       /* it holds the old image: never removed */
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

/* The outermost directory of path that does not exist yet (the run's
 * mkdir -p creates it and everything below), into top. */
static void first_missing(const char *path, char *top, size_t n) {
    snprintf(top, n, "%s", path);
    char parent[4200];
    snprintf(parent, sizeof parent, "%s", path);
    for (;;) {
        char *slash = strrchr(parent, '/');
        while (slash && slash > parent && slash[1] == '\0') { /* trailing '/' */
            *slash = '\0';
            slash = strrchr(parent, '/');
        }
        if (!slash || slash == parent) return;
        *slash = '\0';
        if (present(parent)) return;
        snprintf(top, n, "%s", parent);
    }
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
    if (!g->store_existed) first_missing(opt->output, g->created_top, sizeof g->created_top);
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
    ts_status st = ts_make_temp_dir(w->image, w->staging, sizeof w->staging, err);
    if (st) {
        w->staging[0] = '\0';
        return st;
    }
    if ((size_t)snprintf(write_path, n, "%s/0", w->staging) >= n)
        return ts_fail(err, TS_ERR_ARG, "path too long: '%s/0'", w->staging);
    return TS_OK;
}

ts_status fuse_guard_finish_well(fuse_guard *g, int i, ts_error *err) {
    fuse_guard_well *w = &g->wells[i];
    if (!w->staging[0]) {
        w->done = true;
        return TS_OK;
    }
    char built[4400], old[4400];
    snprintf(built, sizeof built, "%s/0", w->staging);
    snprintf(old, sizeof old, "%s/old", w->staging);
    /* Two renames within the well group: the old image is only ever absent
     * from its path between them (a kill there leaves both images in the
     * temporary directory, which the re-run sweeps before it fuses anew). */
    if (rename(w->image, old) != 0)
        return ts_fail(err, TS_ERR_IO, "cannot move the image '%s' aside to '%s': %s", w->image, old, strerror(errno));
    if (rename(built, w->image) != 0) {
        int e = errno;
        if (rename(old, w->image) != 0) {
            w->keep_staging = true;
            return ts_fail(err, TS_ERR_IO, "cannot rename '%s' to '%s': %s; the previous image is now '%s' "
                           "(move it back before a re-run, which would remove it)", built, w->image,
                           strerror(e), old);
        }
        return ts_fail(err, TS_ERR_IO, "cannot rename '%s' to '%s': %s", built, w->image, strerror(e));
    }
    w->done = true;
    /* The directory now holds only the old image. */
    ts_status st = ts_remove_tree(w->staging, err);
    if (st == TS_OK) w->staging[0] = '\0';
    else ts_fail_context(err, st, "the new image %s is in place, but its old one was not removed", w->image);
    return st;
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
        } else if (g->t_out >= 0) {
            snprintf(text, sizeof text, "; timepoint %d of the existing image %s may be partly "
                     "overwritten (re-run to complete it)", g->t_out, w->image);
            append(err, text);
        } else if (!w->keep_staging) {
            /* The replacement was being built beside the old image, which
             * was never touched: only the partial new one goes. */
            if (w->staging[0]) remove_or_say(w->staging, err);
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
