/* Shared command-line helpers: value parsing, errors, progress. */
#include "cli/cli.h"

#include <ctype.h>
#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

int cli_usage_error(const char *cmd, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "tessera %s: ", cmd);
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, " (see 'tessera %s --help')\n", cmd);
    va_end(ap);
    return CLI_USAGE;
}

int cli_fail(const char *cmd, const ts_error *err) {
    if (cli_is_terminal()) fputc('\n', stderr);
    fprintf(stderr, "tessera %s: %s\n", cmd, err->message[0] ? err->message : ts_status_name(err->code));
    return err->code == TS_ERR_ARG ? CLI_USAGE : CLI_FAIL;
}

const char *cli_value(const char *cmd, int argc, char **argv, int *i) {
    if (*i + 1 >= argc) {
        cli_usage_error(cmd, "option %s needs a value", argv[*i]);
        return NULL;
    }
    return argv[++*i];
}

int cli_common_option(const char *cmd, int argc, char **argv, int *i, cli_common *c) {
    const char *a = argv[*i];
    const char *v;
#define VALUE() do { if (!(v = cli_value(cmd, argc, argv, i))) return -1; } while (0)
    if (!strcmp(a, "-o") || !strcmp(a, "--output")) {
        VALUE();
        c->output = v;
    } else if (!strcmp(a, "--flipud")) {
        c->orientation.flipud = true, c->orientation_given = true;
    } else if (!strcmp(a, "--fliplr")) {
        c->orientation.fliplr = true, c->orientation_given = true;
    } else if (!strcmp(a, "--rot90")) {
        VALUE();
        if (!cli_int(cmd, a, v, -3, 3, &c->orientation.rot90)) return -1;
        c->orientation_given = true;
    } else if (!strcmp(a, "--wells")) {
        VALUE();
        c->wells = v;
    } else if (!strcmp(a, "--threads")) {
        VALUE();
        if (!cli_int(cmd, a, v, 0, 4096, &c->threads)) return -1;
    } else if (!strcmp(a, "--json")) {
        c->json = true;
    } else if (!strcmp(a, "--progress")) {
        VALUE();
        if (!cli_progress_mode(cmd, v)) return -1;
    } else {
        return 0;
    }
#undef VALUE
    return 1;
}

/* The arguments as the command parsers see them, --name=value split in two
 * (one way for every option of every command: parsers compare whole
 * arguments and take values with cli_value), and for each split value the
 * flag it was attached to, so that a value given to a flag that takes none
 * (--json=1) is refused as such, not taken for a positional argument. */
static struct {
    char **argv;
    const char **flag_of; /* per argument: the "--name" it was split from, or NULL */
    char **names;         /* the "--name" strings allocated */
    int argc, nnames;
} split;

static bool option_name(const char *a, size_t n) {
    if (n < 3 || a[0] != '-' || a[1] != '-') return false;
    for (size_t k = 2; k < n; k++)
        if (!(islower((unsigned char)a[k]) || isdigit((unsigned char)a[k]) || a[k] == '-')) return false;
    return true;
}

char **cli_split_options(int argc, char **argv, int *out_argc) {
    cli_split_free();
    split.argv = calloc((size_t)(2 * argc + 1), sizeof *split.argv);
    split.flag_of = calloc((size_t)(2 * argc + 1), sizeof *split.flag_of);
    split.names = calloc((size_t)argc + 1, sizeof *split.names);
    if (!split.argv || !split.flag_of || !split.names) {
        cli_split_free();
        *out_argc = argc;
        return argv; /* out of memory: parse as given (--name=value is then unknown) */
    }
    int n = 0;
    for (int i = 0; i < argc; i++) {
        const char *eq = i > 0 ? strchr(argv[i], '=') : NULL;
        char *name = eq && option_name(argv[i], (size_t)(eq - argv[i])) ? strndup(argv[i], (size_t)(eq - argv[i])) : NULL;
        if (!name) {
            split.argv[n++] = argv[i];
            continue;
        }
        split.names[split.nnames++] = name;
        split.argv[n++] = name;
        split.flag_of[n] = name;
        split.argv[n++] = (char *)eq + 1;
    }
    split.argv[n] = NULL;
    split.argc = n;
    *out_argc = n;
    return split.argv;
}

void cli_split_free(void) {
    for (int k = 0; k < split.nnames; k++) free(split.names[k]);
    free(split.names);
    free(split.argv);
    free(split.flag_of);
    memset(&split, 0, sizeof split);
}

bool cli_stray_value(const char *cmd, const char *arg) {
    for (int k = 0; k < split.argc; k++)
        if (split.argv[k] == arg && split.flag_of[k]) {
            cli_usage_error(cmd, "option %s takes no value (got %s=%s)", split.flag_of[k], split.flag_of[k], arg);
            return true;
        }
    return false;
}

int cli_positional(const char *cmd, const char *arg, const char **pos, int *npos, int max) {
    if (cli_stray_value(cmd, arg)) return CLI_USAGE;
    if (arg[0] == '-' && arg[1]) return cli_usage_error(cmd, "unknown option %s", arg);
    if (*npos >= max) return cli_usage_error(cmd, "unexpected argument '%s'", arg);
    pos[(*npos)++] = arg;
    return CLI_OK;
}

bool cli_int(const char *cmd, const char *flag, const char *text, long lo, long hi, int *out) {
    char *end;
    errno = 0;
    long v = strtol(text, &end, 10);
    if (errno || end == text || *end || v < lo || v > hi) {
        cli_usage_error(cmd, "%s: '%s' is not an integer in [%ld, %ld]", flag, text, lo, hi);
        return false;
    }
    *out = (int)v;
    return true;
}

bool cli_double(const char *cmd, const char *flag, const char *text, double *out) {
    char *end;
    errno = 0;
    double v = strtod(text, &end);
    if (errno || end == text || *end || !isfinite(v)) {
        cli_usage_error(cmd, "%s: '%s' is not a number", flag, text);
        return false;
    }
    *out = v;
    return true;
}

bool cli_size(const char *cmd, const char *flag, const char *text, size_t *out) {
    char *end;
    errno = 0;
    double v = strtod(text, &end);
    double mult = 1;
    if (*end == 'K' || *end == 'k') mult = 1024.0, end++;
    else if (*end == 'M' || *end == 'm') mult = 1024.0 * 1024, end++;
    else if (*end == 'G' || *end == 'g') mult = 1024.0 * 1024 * 1024, end++;
    if (*end == 'i') end++;
    if (*end == 'B') end++;
    /* Converted only when it fits: (size_t) of 1e30 or inf is undefined
     * (gcc -O2 made it 0: "--memory 1e30" was refused as "0 bytes"). */
    double bytes = v * mult;
    if (errno || end == text || *end || !(bytes >= 1) || !(bytes < 0x1p63)) {
        cli_usage_error(cmd, "%s: '%s' is not a size from 1 byte to 8 EiB (e.g. 2G, 512M, 1048576)", flag, text);
        return false;
    }
    *out = (size_t)bytes;
    return true;
}

bool cli_overlap_value(const char *cmd, const char *flag, const char *text, long lo_px, long hi_px,
                       cli_overlap *out) {
    size_t n = strlen(text);
    if (n > 1 && text[n - 1] == '%') {
        char *end;
        errno = 0;
        double p = strtod(text, &end);
        if (errno || end != text + n - 1 || !(p >= 0 && p < 100) || (lo_px > 0 && !(p > 0))) {
            cli_usage_error(cmd, "%s: '%s' is not a percentage of the tile in %s0, 100)", flag, text,
                            lo_px > 0 ? "(" : "[");
            return false;
        }
        out->percent = p, out->px = 0;
        return true;
    }
    int px;
    char what[64];
    snprintf(what, sizeof what, "%s (px, or N%% of the tile)", flag);
    if (!cli_int(cmd, what, text, lo_px, hi_px, &px)) return false;
    out->px = px, out->percent = -1;
    return true;
}

int cli_overlap_px(const cli_overlap *ov, int64_t extent) {
    if (ov->percent < 0) return ov->px;
    return (int)lround(ov->percent / 100.0 * (double)extent);
}

bool cli_pair(const char *cmd, const char *flag, const char *text, char sep, int *a, int *b) {
    char *end;
    long x = strtol(text, &end, 10);
    if (end == text || *end != sep) goto bad;
    const char *rest = end + 1;
    long y = strtol(rest, &end, 10);
    if (end == rest || *end || x <= 0 || y <= 0 || x > 1000000 || y > 1000000) goto bad;
    *a = (int)x;
    *b = (int)y;
    return true;
bad:
    cli_usage_error(cmd, "%s: '%s' is not of the form N%cM", flag, text, sep);
    return false;
}

bool cli_choice(const char *cmd, const char *flag, const char *text, const char *const *names, const int *values,
                int n, int *out) {
    for (int k = 0; k < n; k++)
        if (!strcmp(text, names[k])) {
            *out = values[k];
            return true;
        }
    char list[256] = "";
    size_t at = 0;
    for (int k = 0; k < n && at < sizeof list; k++)
        at += (size_t)snprintf(list + at, sizeof list - at, "%s%s", k == 0 ? "" : k == n - 1 ? " or " : ", ",
                               names[k]);
    cli_usage_error(cmd, "%s: '%s' is not %s", flag, text, list);
    return false;
}

bool cli_format(const char *cmd, const char *text, ts_ome_version *out) {
    static const char *const NAMES[] = {"0.4", "0.5"};
    static const int VALUES[] = {TS_OME_04, TS_OME_05};
    int x;
    if (!cli_choice(cmd, "--format", text, NAMES, VALUES, 2, &x)) return false;
    *out = (ts_ome_version)x;
    return true;
}

bool cli_codec(const char *cmd, const char *text, ts_codec *out) {
    if (ts_codec_from_name(text, out) == 0) return true;
    cli_usage_error(cmd, "--codec: '%s' is not zstd, blosc-lz4, blosc-zstd, gzip or none", text);
    return false;
}

bool cli_is_terminal(void) { return isatty(STDERR_FILENO) == 1; }

/* The CLI's progress state (one command per process). */
static struct {
    enum { PROGRESS_AUTO, PROGRESS_BAR, PROGRESS_LOG, PROGRESS_NONE } mode;
    double interval;          /* seconds between log lines */
    const char *command;
    char stage[128];
    double start, last;       /* stage start, last line drawn */
    int64_t last_done;
    bool logged;              /* a line was printed for this stage */
} progress = {PROGRESS_AUTO, 15.0, "tessera", "", 0, 0, -1, false};

void cli_progress_command(const char *name) { progress.command = name; }

bool cli_progress_mode(const char *cmd, const char *text) {
    char *end = NULL;
    if (!strcmp(text, "auto")) progress.mode = PROGRESS_AUTO;
    else if (!strcmp(text, "bar")) progress.mode = PROGRESS_BAR;
    else if (!strcmp(text, "none")) progress.mode = PROGRESS_NONE;
    else if (!strncmp(text, "log", 3) && (text[3] == '\0' || text[3] == ':')) {
        progress.mode = PROGRESS_LOG;
        if (text[3] == ':') {
            double s = strtod(text + 4, &end);
            if (end == text + 4 || *end || !(s > 0 && s <= 86400)) {
                cli_usage_error(cmd, "--progress: '%s': the log interval must be seconds in (0, 86400]", text);
                return false;
            }
            progress.interval = s;
        }
    } else {
        cli_usage_error(cmd, "--progress: '%s' is not auto, bar, log, log:SECONDS or none", text);
        return false;
    }
    return true;
}

static void format_duration(double s, char *out, size_t n) {
    if (!(s >= 0) || s > 1e8) {
        snprintf(out, n, "?");
        return;
    }
    long t = (long)(s + 0.5);
    if (t >= 3600) snprintf(out, n, "%ld:%02ld:%02ld", t / 3600, t / 60 % 60, t % 60);
    else snprintf(out, n, "%ld:%02ld", t / 60, t % 60);
}

void cli_progress(void *user, const char *stage, int64_t done, int64_t total) {
    (void)user;
    int mode = progress.mode;
    if (mode == PROGRESS_AUTO) mode = cli_is_terminal() ? PROGRESS_BAR : PROGRESS_LOG;
    if (mode == PROGRESS_NONE) return;
    const double now = cli_now();
    const bool fresh = strcmp(stage, progress.stage) != 0 || done < progress.last_done;
    if (fresh) {
        snprintf(progress.stage, sizeof progress.stage, "%s", stage);
        progress.start = now;
        /* A bar shows at once; a log line only once the stage has run for
         * an interval (short runs leave the log to their summary). */
        progress.last = mode == PROGRESS_BAR ? -1e300 : now;
        progress.logged = false;
        progress.last_done = -1;
    }
    const bool end = total > 0 && done >= total;
    const double wait = mode == PROGRESS_BAR ? 0.1 : progress.interval;
    const bool same = done == progress.last_done;
    if (done > progress.last_done) progress.last_done = done;
    if (end ? same || (mode == PROGRESS_LOG && !progress.logged && now - progress.start < wait)
            : now - progress.last < wait || same)
        return;
    progress.last = now;
    progress.logged = true;
    const double elapsed = now - progress.start;
    const double rate = elapsed > 0 ? (double)done / elapsed : 0;
    char eta[32], took[32];
    format_duration(rate > 0 ? (double)(total - done) / rate : -1, eta, sizeof eta);
    format_duration(elapsed, took, sizeof took);
    const int pct = total > 0 ? (int)(100.0 * (double)done / (double)total) : 0;
    if (mode == PROGRESS_BAR) {
        char bar[31];
        int filled = total > 0 ? (int)(30.0 * (double)done / (double)total) : 0;
        for (int k = 0; k < 30; k++) bar[k] = k < filled ? '#' : '.';
        bar[30] = '\0';
        fprintf(stderr, "\r%s [%s] %3d%% %lld/%lld %.1f/s %s %s  ", stage, bar, pct, (long long)done,
                (long long)total, rate, end ? "took" : "ETA", end ? took : eta);
        if (end) fputc('\n', stderr);
    } else {
        fprintf(stderr, "tessera %s: %s: %lld/%lld (%d%%), %.1f/s, %s %s\n", progress.command, stage,
                (long long)done, (long long)total, pct, rate, end ? "took" : "ETA", end ? took : eta);
    }
    fflush(stderr);
}

json_t *cli_json_path(const char *path) {
    if (!path) return json_null();
    json_t *j = json_string(path);
    if (j) return j;
    /* Not UTF-8: each byte as the code point of its value. */
    size_t n = strlen(path);
    char *u = malloc(2 * n + 1), *q = u;
    if (!u) return json_null();
    for (const unsigned char *p = (const unsigned char *)path; *p; p++) {
        if (*p < 0x80) *q++ = (char)*p;
        else *q++ = (char)(0xC0 | (*p >> 6)), *q++ = (char)(0x80 | (*p & 0x3F));
    }
    *q = '\0';
    j = json_string(u);
    free(u);
    return j ? j : json_null();
}

void cli_json_emit(const char *command, const char *input, const char *output, json_t *obj) {
    json_t *all = json_object();
    json_object_set_new(all, "command", json_string(command));
    json_object_set_new(all, "input", cli_json_path(input));
    json_object_set_new(all, "output", cli_json_path(output));
    const char *key;
    json_t *v;
    json_object_foreach(obj, key, v) {
        if (strcmp(key, "command") && strcmp(key, "input") && strcmp(key, "output")) json_object_set(all, key, v);
    }
    char *s = json_dumps(all, JSON_PRESERVE_ORDER | JSON_COMPACT | JSON_REAL_PRECISION(6));
    printf("%s\n", s ? s : "{}");
    fflush(stdout);
    free(s);
    json_decref(all);
    json_decref(obj);
}

double cli_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}
