#include "common/fs.h"
#include "common/error.h"

#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>
#include <dirent.h>
#include <signal.h>
#include <sys/syscall.h>

static atomic_ulong tmp_counter;

ts_status ts_mkdirs(const char *path, ts_error *err) {
    char buf[4096];
    size_t n = strlen(path);
    if (n == 0 || n >= sizeof buf) return ts_fail(err, TS_ERR_ARG, "path too long or empty: '%s'", path);
    memcpy(buf, path, n + 1);
    for (size_t i = 1; i <= n; i++) {
        if (buf[i] == '/' || buf[i] == '\0') {
            char c = buf[i];
            buf[i] = '\0';
            if (mkdir(buf, 0777) != 0 && errno != EEXIST)
                return ts_fail(err, TS_ERR_IO, "cannot create directory '%s': %s", buf, strerror(errno));
            buf[i] = c;
        }
    }
    if (!ts_is_dir(path)) return ts_fail(err, TS_ERR_IO, "'%s' exists and is not a directory", path);
    return TS_OK;
}

static ts_status parent_dirs(const char *path, ts_error *err) {
    const char *slash = strrchr(path, '/');
    if (!slash || slash == path) return TS_OK;
    char dir[4096];
    size_t n = (size_t)(slash - path);
    if (n >= sizeof dir) return ts_fail(err, TS_ERR_ARG, "path too long: '%s'", path);
    memcpy(dir, path, n);
    dir[n] = '\0';
    if (ts_is_dir(dir)) return TS_OK;
    return ts_mkdirs(dir, err);
}

/* A random number per process, so that processes with the same pid (MPI
 * ranks in containers on the hosts of a shared file system, a re-run after a
 * kill) do not walk through the same temporary names. */
static unsigned long process_salt(void) {
    static atomic_ulong salt;
    unsigned long v = atomic_load(&salt);
    if (v) return v;
    if (getrandom(&v, sizeof v, GRND_NONBLOCK) != (ssize_t)sizeof v) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        v = (unsigned long)ts.tv_nsec * 2654435761ul ^ (unsigned long)ts.tv_sec;
    }
    v |= 1;
    unsigned long zero = 0;
    return atomic_compare_exchange_strong(&salt, &zero, v) ? v : zero;
}

/* Creates a temporary file next to path with O_EXCL: a temporary is never
 * shared with (truncated under) another writer or a stale file of a killed
 * run; a taken name moves on to the next one. */
static void temp_name(const char *path, char *tmp, size_t n) {
    snprintf(tmp, n, "%s.tmp.%ld.%lx.%lu", path, (long)getpid(), process_salt(),
             (unsigned long)atomic_fetch_add(&tmp_counter, 1));
}

static int open_temp(const char *path, char *tmp, size_t n) {
    for (int attempt = 0; attempt < 64; attempt++) {
        temp_name(path, tmp, n);
        int fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL, 0666);
        if (fd >= 0 || errno != EEXIST) return fd;
    }
    errno = EEXIST;
    return -1;
}

ts_status ts_make_temp_dir(const char *path, char *tmp, size_t n, ts_error *err) {
    /* The name must come out whole: a cut one would be another path. */
    if (strlen(path) + 64 > n) return ts_fail(err, TS_ERR_ARG, "path too long: '%s'", path);
    for (int attempt = 0; attempt < 64; attempt++) {
        temp_name(path, tmp, n);
        if (mkdir(tmp, 0777) == 0) return TS_OK;
        if (errno != EEXIST) break;
    }
    return ts_fail(err, TS_ERR_IO, "cannot create a temporary directory beside '%s': %s", path, strerror(errno));
}

ts_status ts_write_file_atomic(const char *path, const void *data, size_t size, ts_error *err) {
    ts_file_part part = {data, size};
    return ts_write_file_atomic_parts(path, &part, 1, err);
}

ts_status ts_write_file_atomic_parts(const char *path, const ts_file_part *parts, size_t nparts, ts_error *err) {
    ts_status st = parent_dirs(path, err);
    if (st) return st;
    char tmp[4200];
    int fd = open_temp(path, tmp, sizeof tmp);
    if (fd < 0) return ts_fail(err, TS_ERR_IO, "cannot write '%s': %s", path, strerror(errno));
    for (size_t i = 0; i < nparts; i++) {
        const char *p = parts[i].data;
        size_t left = parts[i].size;
        while (left > 0) {
            ssize_t w = write(fd, p, left);
            if (w < 0) {
                if (errno == EINTR) continue;
                int e = errno;
                close(fd);
                unlink(tmp);
                return ts_fail(err, TS_ERR_IO, "cannot write '%s': %s", path, strerror(e));
            }
            p += w;
            left -= (size_t)w;
        }
    }
    if (close(fd) != 0) {
        int e = errno;
        unlink(tmp);
        return ts_fail(err, TS_ERR_IO, "cannot write '%s': %s", path, strerror(e));
    }
    if (rename(tmp, path) != 0) {
        int e = errno;
        unlink(tmp);
        return ts_fail(err, TS_ERR_IO, "cannot rename into '%s': %s", path, strerror(e));
    }
    return TS_OK;
}

static const char *file_kind(mode_t m) {
    if (S_ISDIR(m)) return "a directory";
    if (S_ISFIFO(m)) return "a FIFO";
    if (S_ISCHR(m)) return "a character device";
    if (S_ISBLK(m)) return "a block device";
    if (S_ISSOCK(m)) return "a socket";
    return "not a regular file";
}

/* O_NONBLOCK: opening a FIFO for reading otherwise waits for a writer,
 * forever; the descriptor of a regular file is then made blocking again. */
ts_status ts_open_regular(const char *path, int *fd_out, uint64_t *file_size, bool *found, ts_error *err) {
    *fd_out = -1;
    *file_size = 0;
    *found = false;
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) {
        if (errno == ENOENT || errno == ENOTDIR) return TS_OK;
        int e = errno;
        struct stat sb;
        if (e == ENXIO && stat(path, &sb) == 0 && !S_ISREG(sb.st_mode)) /* a socket */
            return ts_fail(err, TS_ERR_IO, "cannot read '%s': %s, not a regular file", path, file_kind(sb.st_mode));
        return ts_fail(err, TS_ERR_IO, "cannot read '%s': %s", path, strerror(e));
    }
    struct stat sb;
    if (fstat(fd, &sb) != 0) {
        int e = errno;
        close(fd);
        return ts_fail(err, TS_ERR_IO, "cannot stat '%s': %s", path, strerror(e));
    }
    if (!S_ISREG(sb.st_mode)) {
        close(fd);
        return ts_fail(err, TS_ERR_IO, "cannot read '%s': %s, not a regular file", path, file_kind(sb.st_mode));
    }
    int fl = fcntl(fd, F_GETFL);
    if (fl >= 0) fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
    *fd_out = fd;
    *file_size = (uint64_t)sb.st_size;
    *found = true;
    return TS_OK;
}

ts_status ts_read_fd(int fd, const char *path, uint64_t fsize, uint64_t max_size, void **data, size_t *size,
                     ts_error *err) {
    *data = NULL;
    *size = 0;
    /* The size is checked before anything is allocated or read: a sparse
     * file claims gigabytes for free. Reading stops at max_size + 1 bytes
     * too, in case the file grows meanwhile. */
    if (fsize > max_size || fsize >= SIZE_MAX) {
        close(fd);
        return ts_fail(err, TS_ERR_CORRUPT, "'%s' is %llu bytes, more than the %llu bytes it can be", path,
                       (unsigned long long)fsize, (unsigned long long)max_size);
    }
    size_t cap = (size_t)fsize;
    char *buf = malloc(cap + 1);
    if (!buf) {
        close(fd);
        return ts_fail(err, TS_ERR_NOMEM, "out of memory reading '%s' (%zu bytes)", path, cap);
    }
    size_t got = 0;
    enum { READ_OK, TOO_BIG, NO_MEMORY, IO_ERROR } fail = READ_OK;
    int e = 0;
    for (;;) {
        ssize_t r;
        if (got < cap) {
            r = read(fd, buf + got, cap - got);
            if (r > 0) got += (size_t)r;
        } else {
            /* At the size fstat gave: one byte more means the file grew
             * meanwhile (or its size is not its length, as in /proc). */
            char probe;
            r = read(fd, &probe, 1);
            if (r > 0) {
                if (got >= max_size) { fail = TOO_BIG; break; }
                size_t ncap = cap < 4096 ? 4096 : cap > SIZE_MAX / 2 - 1 ? SIZE_MAX - 1 : cap * 2;
                if (ncap > max_size) ncap = (size_t)max_size;
                char *nb = realloc(buf, ncap + 1);
                if (!nb) { fail = NO_MEMORY; break; }
                buf = nb;
                cap = ncap;
                buf[got++] = probe;
            }
        }
        if (r == 0) break;
        if (r < 0 && errno != EINTR) { e = errno; fail = IO_ERROR; break; }
    }
    close(fd);
    if (fail) {
        free(buf);
        if (fail == TOO_BIG)
            return ts_fail(err, TS_ERR_CORRUPT, "'%s' is more than the %llu bytes it can be", path,
                           (unsigned long long)max_size);
        if (fail == NO_MEMORY) return ts_fail(err, TS_ERR_NOMEM, "out of memory reading '%s'", path);
        return ts_fail(err, TS_ERR_IO, "cannot read '%s': %s", path, strerror(e));
    }
    buf[got] = '\0';
    *data = buf;
    *size = got;
    return TS_OK;
}

ts_status ts_read_file_max(const char *path, uint64_t max_size, void **data, size_t *size, bool *found,
                           ts_error *err) {
    *data = NULL;
    *size = 0;
    int fd;
    uint64_t fsize;
    ts_status st = ts_open_regular(path, &fd, &fsize, found, err);
    if (st || !*found) return st;
    return ts_read_fd(fd, path, fsize, max_size, data, size, err);
}

ts_status ts_read_file_opt(const char *path, void **data, size_t *size, bool *found, ts_error *err) {
    return ts_read_file_max(path, SIZE_MAX - 1, data, size, found, err);
}

ts_status ts_read_file(const char *path, void **data, size_t *size, ts_error *err) {
    bool found;
    ts_status st = ts_read_file_opt(path, data, size, &found, err);
    if (st) return st;
    if (!found) return ts_fail(err, TS_ERR_IO, "cannot read '%s': no such file", path);
    return TS_OK;
}

bool ts_path_exists(const char *path) {
    struct stat sb;
    return stat(path, &sb) == 0;
}

bool ts_is_dir(const char *path) {
    struct stat sb;
    return stat(path, &sb) == 0 && S_ISDIR(sb.st_mode);
}

bool ts_path_join(char *out, size_t n, const char *a, const char *b) {
    size_t la = strlen(a);
    while (la > 1 && a[la - 1] == '/') la--;
    int w = snprintf(out, n, "%.*s/%s", (int)la, a, b);
    return w >= 0 && (size_t)w < n;
}

ts_status ts_remove_tree(const char *path, ts_error *err) {
    struct stat sb;
    if (lstat(path, &sb) != 0) return TS_OK;
    if (S_ISDIR(sb.st_mode)) {
        DIR *d = opendir(path);
        if (!d) return ts_fail(err, TS_ERR_IO, "cannot open directory '%s': %s", path, strerror(errno));
        struct dirent *e;
        char child[4096];
        ts_status st = TS_OK;
        while (st == TS_OK && (e = readdir(d)) != NULL) {
            if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) continue;
            if (!ts_path_join(child, sizeof child, path, e->d_name)) {
                st = ts_fail(err, TS_ERR_ARG, "path too long under '%s'", path);
                break;
            }
            st = ts_remove_tree(child, err);
        }
        closedir(d);
        if (st) return st;
        if (rmdir(path) != 0) return ts_fail(err, TS_ERR_IO, "cannot remove '%s': %s", path, strerror(errno));
    } else if (unlink(path) != 0) {
        return ts_fail(err, TS_ERR_IO, "cannot remove '%s': %s", path, strerror(errno));
    }
    return TS_OK;
}

/* Parses the digits of base `base` at *p (at least one); false if none. */
static bool parse_digits(const char **p, int base, unsigned long long *v) {
    const char *s = *p;
    unsigned long long x = 0;
    int n = 0;
    for (;; s++, n++) {
        int d;
        if (*s >= '0' && *s <= '9') d = *s - '0';
        else if (base == 16 && *s >= 'a' && *s <= 'f') d = *s - 'a' + 10;
        else break;
        if (n >= 20) return false;
        x = x * (unsigned)base + (unsigned)d;
    }
    if (n == 0) return false;
    *p = s, *v = x;
    return true;
}

/* The last ".tmp." is the one open_temp appended. */
long ts_temp_name_pid(const char *name) {
    const char *tag = NULL;
    for (const char *s = strstr(name, ".tmp."); s; s = strstr(s + 1, ".tmp.")) tag = s;
    if (!tag || tag == name) return -1;
    const char *p = tag + 5;
    unsigned long long pid, salt, n;
    if (!parse_digits(&p, 10, &pid) || *p++ != '.') return -1;
    if (!parse_digits(&p, 16, &salt) || *p++ != '.') return -1;
    if (!parse_digits(&p, 10, &n) || *p != '\0') return -1;
    if (pid == 0 || pid > 0x7fffffffull) return -1;
    return (long)pid;
}

bool ts_is_temp_name(const char *name) { return ts_temp_name_pid(name) > 0; }

bool ts_process_stat(long pid, char *state, unsigned long long *start) {
    char path[64], buf[1024];
    snprintf(path, sizeof path, "/proc/%ld/stat", pid);
    FILE *f = fopen(path, "r");
    if (!f) return false;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    /* The command name (field 2) is in parentheses and may hold spaces. */
    const char *p = strrchr(buf, ')');
    if (!p || p[1] != ' ' || !p[2]) return false;
    if (state) *state = p[2];
    p += 2;
    for (int field = 3; field < 22; field++) {
        p = strchr(p + 1, ' ');
        if (!p) return false;
    }
    if (start) *start = strtoull(p + 1, NULL, 10);
    return true;
}

/* A zombie (killed, not yet reaped by its parent) still answers kill(pid,
 * 0) but writes nothing more: it counts as dead (state Z or X; where /proc
 * is absent, as alive). */
static bool zombie(long pid) {
    char state = 0;
    return ts_process_stat(pid, &state, NULL) && (state == 'Z' || state == 'X');
}

static bool process_alive(long pid) {
    if (pid == (long)getpid()) return true;
    if (kill((pid_t)pid, 0) != 0 && errno != EPERM) return false;
    return !zombie(pid);
}

bool ts_process_alive(long pid) { return pid > 0 && process_alive(pid); }

/* Sweeps dir (recursively or not); only names starting with `prefix` when
 * it is not NULL. */
static ts_status sweep(const char *dir, bool recursive, const char *prefix, size_t *removed, ts_error *err);

ts_status ts_sweep_temp_files(const char *dir, bool recursive, size_t *removed, ts_error *err) {
    return sweep(dir, recursive, NULL, removed, err);
}

ts_status ts_sweep_temp_files_of(const char *path, size_t *removed, ts_error *err) {
    char dir[4096], prefix[4096];
    const char *slash = strrchr(path, '/');
    const char *base = slash ? slash + 1 : path;
    if (!*base) return ts_fail(err, TS_ERR_ARG, "'%s' names a directory, not a file", path);
    if (slash == path) snprintf(dir, sizeof dir, "/");
    else if (slash) snprintf(dir, sizeof dir, "%.*s", (int)(slash - path), path);
    else snprintf(dir, sizeof dir, ".");
    int n = snprintf(prefix, sizeof prefix, "%s.tmp.", base);
    if (n < 0 || (size_t)n >= sizeof prefix) return ts_fail(err, TS_ERR_ARG, "path too long: '%s'", path);
    return sweep(dir, false, prefix, removed, err);
}

static ts_status sweep(const char *dir, bool recursive, const char *prefix, size_t *removed, ts_error *err) {
    DIR *d = opendir(dir);
    if (!d) {
        if (errno == ENOENT || errno == ENOTDIR) return TS_OK;
        return ts_fail(err, TS_ERR_IO, "cannot open directory '%s': %s", dir, strerror(errno));
    }
    ts_status st = TS_OK;
    struct dirent *e;
    char child[4096];
    while (st == TS_OK && (e = readdir(d)) != NULL) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0) continue;
        if (prefix && strncmp(e->d_name, prefix, strlen(prefix)) != 0) continue;
        long pid = ts_temp_name_pid(e->d_name);
        /* A chunk file is neither a temporary nor a directory: skipped
         * without a stat (a 0.4 mosaic holds millions of them). */
        if (pid <= 0 && (!recursive || (e->d_type != DT_DIR && e->d_type != DT_UNKNOWN))) continue;
        if (!ts_path_join(child, sizeof child, dir, e->d_name)) {
            st = ts_fail(err, TS_ERR_ARG, "path too long under '%s'", dir);
            break;
        }
        /* lstat, not d_type alone: some file systems report DT_UNKNOWN, and
         * a symlink is never followed or removed. */
        struct stat sb;
        if (lstat(child, &sb) != 0) continue; /* gone meanwhile */
        if (S_ISDIR(sb.st_mode) && pid > 0) {
            /* A directory of the temporary form is ts_make_temp_dir's (an
             * image being built): a dead writer's goes whole. */
            if (!process_alive(pid)) {
                st = ts_remove_tree(child, err);
                if (st == TS_OK && removed) (*removed)++;
            }
        } else if (S_ISDIR(sb.st_mode)) {
            if (recursive) st = sweep(child, true, prefix, removed, err);
        } else if (S_ISREG(sb.st_mode) && pid > 0 && !process_alive(pid)) {
            if (unlink(child) != 0 && errno != ENOENT)
                st = ts_fail(err, TS_ERR_IO, "cannot remove stale temporary '%s': %s", child, strerror(errno));
            else if (removed)
                (*removed)++;
        }
    }
    closedir(d);
    return st;
}

int ts_open_temp_file(const char *path, char *tmp, size_t n) {
    if (strlen(path) + 64 > n) {
        errno = ENAMETOOLONG;
        return -1;
    }
    return open_temp(path, tmp, n);
}

/* renameat2(RENAME_EXCHANGE): both names stay taken throughout, so there is
 * no instant in which path is missing. -1 with errno (EINVAL, ENOSYS where
 * the kernel or file system cannot). */
static int exchange(const char *a, const char *b) {
#if defined(__linux__) && defined(SYS_renameat2)
    return (int)syscall(SYS_renameat2, AT_FDCWD, a, AT_FDCWD, b, 2 /* RENAME_EXCHANGE */);
#else
    (void)a, (void)b;
    errno = ENOSYS;
    return -1;
#endif
}

ts_status ts_replace_tree(const char *built, const char *path, const char *aside, bool *old_at_built,
                          ts_error *err) {
    *old_at_built = false;
    struct stat sb;
    if (lstat(path, &sb) != 0) {
        if (rename(built, path) != 0)
            return ts_fail(err, TS_ERR_IO, "cannot rename '%s' to '%s': %s", built, path, strerror(errno));
        return TS_OK;
    }
    if (exchange(built, path) == 0) {
        *old_at_built = true;
        return TS_OK;
    }
    /* Two renames: path is absent between them (a kill there leaves the old
     * tree at aside, inside the caller's temporary directory). */
    if (rename(path, aside) != 0)
        return ts_fail(err, TS_ERR_IO, "cannot move '%s' aside to '%s': %s", path, aside, strerror(errno));
    if (rename(built, path) != 0) {
        int e = errno;
        if (rename(aside, path) != 0)
            return ts_fail(err, TS_ERR_IO, "cannot rename '%s' to '%s': %s; the previous one is now '%s' "
                           "(move it back before a re-run, which would remove it)", built, path, strerror(e), aside);
        return ts_fail(err, TS_ERR_IO, "cannot rename '%s' to '%s': %s", built, path, strerror(e));
    }
    return TS_OK;
}

void ts_first_missing(const char *path, char *top, size_t n) {
    snprintf(top, n, "%s", path);
    char parent[4200];
    snprintf(parent, sizeof parent, "%s", path);
    struct stat sb;
    for (;;) {
        char *slash = strrchr(parent, '/');
        while (slash && slash > parent && slash[1] == '\0') { /* trailing '/' */
            *slash = '\0';
            slash = strrchr(parent, '/');
        }
        if (!slash || slash == parent) return;
        *slash = '\0';
        if (lstat(parent, &sb) == 0) return;
        snprintf(top, n, "%s", parent);
    }
}
