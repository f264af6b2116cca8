/* See lock.h. */
#include "common/lock.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/error.h"
#include "common/fs.h"

/* Who a process is, as far as a lock needs: pid alone can be reused, so
 * the start time (clock ticks after boot, /proc/PID/stat field 22) and the
 * boot tell one process from a later one with its pid. */
typedef struct holder {
    char host[256], boot[64], command[64], since[64];
    long pid;
    unsigned long long start; /* 0: unknown */
} holder;

static unsigned long long process_start(long pid) {
    unsigned long long start = 0;
    return ts_process_stat(pid, NULL, &start) ? start : 0;
}

static void boot_id(char *out, size_t n) {
    out[0] = '\0';
    FILE *f = fopen("/proc/sys/kernel/random/boot_id", "r");
    if (!f) return;
    if (fgets(out, (int)n, f)) out[strcspn(out, "\r\n")] = '\0';
    fclose(f);
}

static void self(holder *h, const char *command) {
    memset(h, 0, sizeof *h);
    if (gethostname(h->host, sizeof h->host - 1) != 0) snprintf(h->host, sizeof h->host, "unknown");
    boot_id(h->boot, sizeof h->boot);
    h->pid = (long)getpid();
    h->start = process_start(h->pid);
    snprintf(h->command, sizeof h->command, "%s", command);
    time_t now = time(NULL);
    struct tm tm;
    gmtime_r(&now, &tm);
    strftime(h->since, sizeof h->since, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

static void format_holder(const holder *h, char *out, size_t n) {
    snprintf(out, n, "tessera output lock\nhost: %s\nboot: %s\npid: %ld\nstart: %llu\ncommand: %s\nsince: %s\n",
             h->host, h->boot, h->pid, h->start, h->command, h->since);
}

static void field(const char *text, const char *key, char *out, size_t n) {
    out[0] = '\0';
    size_t k = strlen(key);
    for (const char *line = text; line && *line; line = strchr(line, '\n') ? strchr(line, '\n') + 1 : NULL) {
        if (strncmp(line, key, k) == 0 && line[k] == ':') {
            const char *v = line + k + 1;
            while (*v == ' ') v++;
            size_t len = strcspn(v, "\n");
            if (len >= n) len = n - 1;
            memcpy(out, v, len);
            out[len] = '\0';
            return;
        }
    }
}

/* False when text is not a lock (a partial or foreign file). */
static bool parse_holder(const char *text, holder *h) {
    memset(h, 0, sizeof *h);
    if (strncmp(text, "tessera output lock\n", 20) != 0) return false;
    char num[64];
    field(text, "host", h->host, sizeof h->host);
    field(text, "boot", h->boot, sizeof h->boot);
    field(text, "command", h->command, sizeof h->command);
    field(text, "since", h->since, sizeof h->since);
    field(text, "pid", num, sizeof num);
    h->pid = strtol(num, NULL, 10);
    field(text, "start", num, sizeof num);
    h->start = strtoull(num, NULL, 10);
    return h->host[0] && h->pid > 0;
}

typedef enum { HOLDER_LIVE, HOLDER_GONE, HOLDER_SELF } holder_state;

static holder_state judge(const holder *them, const holder *me) {
    if (strcmp(them->host, me->host) != 0) return HOLDER_LIVE; /* cannot tell: assume it runs */
    if (them->boot[0] && me->boot[0] && strcmp(them->boot, me->boot) != 0) return HOLDER_GONE;
    if (them->pid == me->pid)
        return !them->start || !me->start || them->start == me->start ? HOLDER_SELF : HOLDER_GONE;
    if (!ts_process_alive(them->pid)) return HOLDER_GONE;
    if (them->start) {
        unsigned long long now = process_start(them->pid);
        if (now && now != them->start) return HOLDER_GONE; /* the pid was reused */
    }
    return HOLDER_LIVE;
}

/* A lock is a few hundred bytes: a larger file at its name is no lock of
 * ours (it reads as ""), and is never read whole. */
static ts_status read_text(const char *path, char *out, size_t n, bool *found, ts_error *err) {
    void *data = NULL;
    size_t size = 0;
    ts_error big;
    ts_status st = ts_read_file_max(path, n - 1, &data, &size, found, &big);
    if (st == TS_ERR_CORRUPT) {
        *found = true;
        out[0] = '\0';
        return TS_OK;
    }
    if (st) return err ? (*err = big, st) : st;
    snprintf(out, n, "%s", *found ? (const char *)data : "");
    free(data);
    return TS_OK;
}

/* Creates the lock file whole with content: a temporary linked to the lock
 * name (link fails if the name exists, and the name never shows a partial
 * file). 0, or -1 with errno (EEXIST: taken). */
static int create_lock(const char *path, const char *content) {
    char tmp[4300];
    int fd = ts_open_temp_file(path, tmp, sizeof tmp);
    if (fd < 0) return -1;
    size_t len = strlen(content);
    bool ok = write(fd, content, len) == (ssize_t)len;
    ok = close(fd) == 0 && ok;
    if (!ok) {
        int e = errno;
        unlink(tmp);
        errno = e;
        return -1;
    }
    int r = link(tmp, path);
    int e = errno;
    if (r != 0 && (e == EPERM || e == ENOTSUP || e == EOPNOTSUPP || e == ENOSYS)) {
        /* No hard links here: O_EXCL, written at once (a reader seeing it
         * empty or partial takes it as live: see ts_output_lock_acquire). */
        fd = open(path, O_WRONLY | O_CREAT | O_EXCL, 0666);
        if (fd >= 0) {
            r = write(fd, content, len) == (ssize_t)len ? 0 : -1;
            e = errno;
            if (close(fd) != 0 && r == 0) r = -1, e = errno;
            if (r != 0) unlink(path);
        } else {
            e = errno;
        }
    }
    unlink(tmp);
    errno = e;
    return r;
}

/* Removes a stale lock whose text was `seen`, unless it changed meanwhile:
 * renamed to a private name first (only one of two runs taking it over gets
 * it), and put back if what was renamed is not what was judged stale. */
static void remove_stale(const char *path, const char *seen) {
    char mine[4300];
    int fd = ts_open_temp_file(path, mine, sizeof mine);
    if (fd < 0) return;
    close(fd);
    if (rename(path, mine) != 0) {
        unlink(mine);
        return;
    }
    char now[512];
    bool found = false;
    if (read_text(mine, now, sizeof now, &found, NULL) == TS_OK && found && strcmp(now, seen) != 0) {
        /* Another run's fresh lock: back where it was. */
        if (link(mine, path) != 0) { /* a third run took the name: it holds the lock */ }
    }
    unlink(mine);
}

ts_status ts_output_lock_acquire(ts_output_lock *lock, const char *output, const char *command, ts_error *err) {
    memset(lock, 0, sizeof *lock);
    size_t n = strlen(output);
    while (n > 1 && output[n - 1] == '/') n--;
    if (n == 0 || n + 64 > sizeof lock->path)
        return ts_fail(err, TS_ERR_ARG, "output path too long or empty: '%s'", output);
    snprintf(lock->path, sizeof lock->path, "%.*s.lock", (int)n, output);
    char parent[4200];
    snprintf(parent, sizeof parent, "%s", lock->path);
    char *slash = strrchr(parent, '/');
    if (slash && slash != parent) {
        *slash = '\0';
        if (!ts_is_dir(parent)) {
            ts_first_missing(parent, lock->created_top, sizeof lock->created_top);
            ts_status st = ts_mkdirs(parent, err);
            if (st) return ts_fail_context(err, st, "%s", output);
        }
    }
    holder me;
    self(&me, command);
    format_holder(&me, lock->content, sizeof lock->content);
    for (int attempt = 0; attempt < 50; attempt++) {
        if (create_lock(lock->path, lock->content) == 0) {
            lock->held = true;
            return TS_OK;
        }
        if (errno != EEXIST) {
            int e = errno;
            ts_output_lock_release(lock);
            return ts_fail(err, TS_ERR_IO, "cannot create the lock file '%s': %s", lock->path, strerror(e));
        }
        char seen[512];
        bool found = false;
        ts_status st = read_text(lock->path, seen, sizeof seen, &found, err);
        if (st) {
            ts_output_lock_release(lock);
            return st;
        }
        if (!found) continue; /* released meanwhile */
        holder them;
        if (!parse_holder(seen, &them)) {
            /* Being written (only without link support), or not a lock of
             * ours: never removed. */
            if (attempt < 49) {
                struct timespec ts = {0, 20 * 1000 * 1000};
                nanosleep(&ts, NULL);
                continue;
            }
            ts_output_lock_release(lock);
            return ts_fail(err, TS_ERR_BUSY, "%s: the lock file '%s' exists but is not a tessera lock; "
                           "remove it if no run is writing %s", output, lock->path, output);
        }
        holder_state s = judge(&them, &me);
        if (s == HOLDER_SELF) return TS_OK; /* nested: held (and released) by an outer call */
        if (s == HOLDER_LIVE) {
            ts_output_lock_release(lock);
            return ts_fail(err, TS_ERR_BUSY, "%s is being written by another run: tessera %s, pid %ld on host %s, "
                           "since %s (lock file %s); wait for it to end, or remove the lock file if that "
                           "process is gone", output, them.command[0] ? them.command : "?", them.pid,
                           them.host, them.since[0] ? them.since : "?", lock->path);
        }
        remove_stale(lock->path, seen);
    }
    ts_output_lock_release(lock);
    return ts_fail(err, TS_ERR_BUSY, "%s: cannot take its lock file '%s' (other runs keep taking it)", output,
                   lock->path);
}

void ts_output_lock_release(ts_output_lock *lock) {
    if (lock->held) {
        char now[512];
        bool found = false;
        if (read_text(lock->path, now, sizeof now, &found, NULL) == TS_OK && found &&
            strcmp(now, lock->content) == 0)
            unlink(lock->path);
        lock->held = false;
    }
    if (lock->created_top[0]) {
        /* The directories made for the lock, innermost first, if empty. */
        char dir[4200];
        snprintf(dir, sizeof dir, "%s", lock->path);
        size_t top = strlen(lock->created_top);
        for (;;) {
            char *slash = strrchr(dir, '/');
            if (!slash || slash == dir) break;
            *slash = '\0';
            if (strlen(dir) < top || rmdir(dir) != 0) break;
        }
        lock->created_top[0] = '\0';
    }
}
