/* See staged.h. */
#include "common/staged.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

#include "common/error.h"
#include "common/fs.h"

ts_status ts_staged_begin(ts_staged *s, const char *final, ts_error *err) {
    memset(s, 0, sizeof *s);
    size_t n = strlen(final);
    while (n > 1 && final[n - 1] == '/') n--;
    if (n + 100 >= sizeof s->final) return ts_fail(err, TS_ERR_ARG, "path too long: '%.64s...'", final);
    snprintf(s->final, sizeof s->final, "%.*s", (int)n, final);
    const char *slash = strrchr(s->final, '/');
    const char *name = slash ? slash + 1 : s->final;
    ts_status st = ts_sweep_temp_files_of(s->final, NULL, err);
    if (st == TS_OK) st = ts_make_temp_dir(s->final, s->dir, sizeof s->dir, err);
    if (st) {
        s->dir[0] = '\0';
        return st;
    }
    snprintf(s->build, sizeof s->build, "%s/%s", s->dir, name);
    struct stat sb;
    s->replacing = lstat(s->final, &sb) == 0;
    return TS_OK;
}

ts_status ts_staged_commit(ts_staged *s, ts_error *err) {
    char aside[4500];
    snprintf(aside, sizeof aside, "%s/previous", s->dir);
    bool old_at_build = false;
    ts_status st;
    if (!s->replacing) {
        /* Nothing was there: whatever appeared meanwhile is not ours to
         * replace (rename fails on a non-empty directory). */
        if (rename(s->build, s->final) != 0)
            return ts_fail(err, TS_ERR_IO, "cannot rename '%s' to '%s': %s", s->build, s->final, strerror(errno));
        st = TS_OK;
    } else {
        st = ts_replace_tree(s->build, s->final, aside, &old_at_build, err);
    }
    if (st) {
        /* ts_replace_tree put the old tree back, or says it is at aside. */
        if (!ts_path_exists(s->final) && ts_path_exists(aside)) s->keep = true;
        return st;
    }
    /* The directory now holds only the old tree (or nothing). */
    st = ts_remove_tree(s->dir, err);
    if (st) return ts_fail_context(err, st, "%s is in place, but its old copy was not removed", s->final);
    s->dir[0] = '\0';
    return TS_OK;
}

void ts_staged_abort(ts_staged *s, ts_error *err) {
    if (!s->dir[0] || s->keep) return;
    ts_error rm;
    if (ts_remove_tree(s->dir, &rm) != TS_OK && err) {
        size_t n = strlen(err->message);
        snprintf(err->message + n, sizeof err->message - n, "; could not remove the partial output: %s", rm.message);
    }
    s->dir[0] = '\0';
}
