/* See outpath.h. */
#include "common/outpath.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/error.h"
#include "common/fs.h"

bool ts_is_zarr_node(const char *dir) {
    static const char *const names[] = {"zarr.json", ".zgroup", ".zarray", ".zattrs"};
    char p[4300];
    for (size_t i = 0; i < sizeof names / sizeof *names; i++) {
        if (!ts_path_join(p, sizeof p, dir, names[i])) return false;
        struct stat sb;
        if (lstat(p, &sb) == 0) return true;
    }
    return false;
}

/* The absolute, symlink-free form of path into out (PATH_MAX bytes), for a
 * path that may not exist: its deepest existing ancestor resolved, the rest
 * appended ("." dropped, ".." taken back). False when it cannot be formed. */
static bool resolve(const char *path, char *out) {
    char head[PATH_MAX], tail[PATH_MAX] = "", cwd[PATH_MAX];
    if (path[0] == '/') {
        if ((size_t)snprintf(head, sizeof head, "%s", path) >= sizeof head) return false;
    } else {
        if (!getcwd(cwd, sizeof cwd)) return false;
        if ((size_t)snprintf(head, sizeof head, "%s/%s", cwd, path) >= sizeof head) return false;
    }
    while (!realpath(head, out)) {
        if (errno != ENOENT && errno != ENOTDIR) return false;
        char *slash = strrchr(head, '/'); /* head is absolute: there is one */
        char joined[PATH_MAX];
        if ((size_t)snprintf(joined, sizeof joined, "%s/%s", slash + 1, tail) >= sizeof joined) return false;
        snprintf(tail, sizeof tail, "%s", joined);
        if (slash == head) head[1] = '\0';
        else *slash = '\0';
    }
    char *save = NULL;
    for (char *c = strtok_r(tail, "/", &save); c; c = strtok_r(NULL, "/", &save)) {
        if (!strcmp(c, ".")) continue;
        if (!strcmp(c, "..")) {
            char *slash = strrchr(out, '/');
            if (slash && slash != out) *slash = '\0';
            else out[1] = '\0';
            continue;
        }
        size_t len = strlen(out);
        if (len + strlen(c) + 2 >= PATH_MAX) return false;
        if (len > 1) out[len++] = '/';
        strcpy(out + len, c);
    }
    return true;
}

/* Whether a is b or lies inside it (both resolved). */
static bool within(const char *a, const char *b) {
    size_t n = strlen(b);
    if (n == 1 && b[0] == '/') return true;
    return strncmp(a, b, n) == 0 && (a[n] == '\0' || a[n] == '/');
}

ts_status ts_check_output_path(const char *what, const char *output, const char *const *inputs, int n,
                               ts_error *err) {
    char out[PATH_MAX];
    if (!resolve(output, out))
        return ts_fail(err, TS_ERR_IO, "%s %s: cannot resolve the path: %s", what, output, strerror(errno));
    for (int i = 0; i < n; i++) {
        if (!inputs[i] || !*inputs[i]) continue;
        char in[PATH_MAX];
        if (!resolve(inputs[i], in)) continue; /* the input's own read reports it */
        if (strcmp(out, in) == 0)
            return ts_fail(err, TS_ERR_ARG, "%s %s is the input %s; not writing over it", what, output, inputs[i]);
        if (within(out, in))
            return ts_fail(err, TS_ERR_ARG, "%s %s is inside the input %s; not writing into it", what, output,
                           inputs[i]);
        if (within(in, out))
            return ts_fail(err, TS_ERR_ARG, "%s %s holds the input %s; not writing over it", what, output,
                           inputs[i]);
    }
    /* No ancestor may be a zarr node: the output would become part of a
     * store it does not belong to. */
    char dir[PATH_MAX];
    snprintf(dir, sizeof dir, "%s", out);
    for (;;) {
        char *slash = strrchr(dir, '/');
        if (!slash) break;
        if (slash == dir) {
            if (!dir[1]) break;
            dir[1] = '\0';
        } else {
            *slash = '\0';
        }
        if (ts_is_zarr_node(dir))
            return ts_fail(err, TS_ERR_ARG, "%s %s is inside the zarr store %s; not writing into it", what,
                           output, dir);
        if (!strcmp(dir, "/")) break;
    }
    return TS_OK;
}
