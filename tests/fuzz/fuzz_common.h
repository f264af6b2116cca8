/*
 * Shared by the fuzz targets (tests/fuzz/fuzz_*.c). The library's entry
 * points read files (a store, a shifts file, a TIFF), so each process gets
 * a private scratch directory, made on first use and removed at exit, and
 * the targets write the input there before calling the real reader.
 *
 * A target aborts (fz_check) when an invariant the library promises does
 * not hold; under libFuzzer that is a crash like an ASan report, under the
 * replay driver (replay_main.c) it fails the ctest.
 */
#ifndef TS_FUZZ_COMMON_H
#define TS_FUZZ_COMMON_H

#include <dirent.h>
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "tessera/tessera.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Decoded sizes the targets hand the library (a chunk, a shard, a TIFF
 * page). The caller allocates these buffers from the metadata, as fuse and
 * import do; the targets look for what the library itself allocates beyond
 * them (libFuzzer's -rss_limit_mb / malloc limit catches that), so they
 * skip documents that merely declare a large array. */
#define FZ_MAX_DECODED ((size_t)8 << 20)

#define fz_check(cond, ...)                                                   \
    do {                                                                      \
        if (!(cond)) {                                                        \
            fprintf(stderr, "fuzz invariant failed at %s:%d: ", __FILE__, __LINE__); \
            fprintf(stderr, __VA_ARGS__);                                     \
            fputc('\n', stderr);                                              \
            abort();                                                          \
        }                                                                     \
    } while (0)

/* The targets only hand the library small inputs and buffers of at most
 * FZ_MAX_DECODED: running out of memory then means the library sized an
 * allocation from what a file claims (a decompression bomb). The replay
 * driver caps the address space so such a request fails (libFuzzer's malloc
 * limit catches it first under the fuzzer). */
#define fz_no_nomem(err) \
    fz_check((err).code != TS_ERR_NOMEM, "out of memory on a small input: %s", (err).message)

/* A refusal must say why, and must not be an out-of-memory. */
#define fz_check_error(err, what)                                                         \
    do {                                                                                  \
        fz_check((err).message[0] != '\0', "%s: an error without a message", what);       \
        fz_no_nomem(err);                                                                 \
    } while (0)

static char fz_dir_path[1024];

/* Removes path and everything below it (no symlinks are followed: lstat). */
static inline void fz_remove_tree(const char *path) {
    struct stat sb;
    if (lstat(path, &sb) != 0) return;
    if (S_ISDIR(sb.st_mode)) {
        DIR *d = opendir(path);
        if (d) {
            struct dirent *e;
            while ((e = readdir(d)) != NULL) {
                if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) continue;
                char sub[4096];
                int r = snprintf(sub, sizeof sub, "%s/%s", path, e->d_name);
                if (r > 0 && (size_t)r < sizeof sub) fz_remove_tree(sub);
            }
            closedir(d);
        }
        rmdir(path);
    } else {
        unlink(path);
    }
}

static inline void fz_cleanup(void) {
    if (fz_dir_path[0]) fz_remove_tree(fz_dir_path);
}

/* The process's scratch directory ($TMPDIR or /tmp). */
static inline const char *fz_dir(void) {
    if (!fz_dir_path[0]) {
        const char *t = getenv("TMPDIR");
        snprintf(fz_dir_path, sizeof fz_dir_path, "%s/tessera-fuzz-XXXXXX", t && *t ? t : "/tmp");
        fz_check(mkdtemp(fz_dir_path) != NULL, "mkdtemp %s: %s", fz_dir_path, strerror(errno));
        atexit(fz_cleanup);
    }
    return fz_dir_path;
}

/* dir/name in out (the scratch directory when dir is NULL). */
static inline void fz_path(char *out, size_t n, const char *dir, const char *name) {
    int r = snprintf(out, n, "%s/%s", dir ? dir : fz_dir(), name);
    fz_check(r >= 0 && (size_t)r < n, "path too long: %s/%s", dir ? dir : fz_dir(), name);
}

/* Creates the directories of path (mkdir -p). */
static inline void fz_mkdirs(const char *path) {
    char p[4096];
    snprintf(p, sizeof p, "%s", path);
    for (char *s = p + 1; *s; s++) {
        if (*s != '/') continue;
        *s = '\0';
        if (mkdir(p, 0700) != 0 && errno != EEXIST) fz_check(0, "mkdir %s: %s", p, strerror(errno));
        *s = '/';
    }
    if (mkdir(p, 0700) != 0 && errno != EEXIST) fz_check(0, "mkdir %s: %s", p, strerror(errno));
}

/* Writes n bytes to path, creating its parent directories. */
static inline void fz_write(const char *path, const void *data, size_t n) {
    const char *slash = strrchr(path, '/');
    if (slash && slash != path) {
        char parent[4096];
        snprintf(parent, sizeof parent, "%.*s", (int)(slash - path), path);
        fz_mkdirs(parent);
    }
    FILE *f = fopen(path, "wb");
    fz_check(f != NULL, "cannot write %s: %s", path, strerror(errno));
    fz_check(n == 0 || fwrite(data, 1, n, f) == n, "short write to %s", path);
    fz_check(fclose(f) == 0, "cannot close %s", path);
}

/* Splits data at the first NUL byte: [0, *n1) and [*rest, size). Without a
 * NUL the first part is everything and the second is empty. JSON and YAML
 * never hold a raw NUL, so it separates a metadata document from binary
 * data (or from the next document) without escaping. */
static inline void fz_split(const uint8_t *data, size_t size, size_t *n1, size_t *rest) {
    const uint8_t *z = memchr(data, 0, size);
    *n1 = z ? (size_t)(z - data) : size;
    *rest = z ? *n1 + 1 : size;
}

#endif
