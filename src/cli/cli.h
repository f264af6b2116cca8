/* The tessera command line: one file per subcommand, shared helpers here.
 * Exit status: 0 success, 2 bad usage, 1 any other failure, with one line on
 * stderr saying what and where. */
#ifndef TS_CLI_H
#define TS_CLI_H

#include <stdbool.h>
#include <stdint.h>
#include "tessera/tessera.h"

enum { CLI_OK = 0, CLI_FAIL = 1, CLI_USAGE = 2 };

int cmd_simulate(int argc, char **argv);
int cmd_import(int argc, char **argv);
int cmd_info(int argc, char **argv);
int cmd_estimate(int argc, char **argv);
int cmd_solve(int argc, char **argv);
int cmd_fuse(int argc, char **argv);
int cmd_stitch(int argc, char **argv);
int cmd_preview(int argc, char **argv);
int cmd_verify(int argc, char **argv);

/* Estimate-stage options (also parsed by stitch): 1 consumed, 0 not ours,
 * -1 usage error (printed). */
struct cli_overlaps;
int cli_estimate_option(const char *cmd, int argc, char **argv, int *i, ts_estimate_options *o,
                        struct cli_overlaps *ov);
/* Warns on stderr when most neighbour pairs did not match (wrong overlap or
 * orientation), for estimate and stitch alike. */
void cli_estimate_warn(const char *cmd, const ts_estimate_result *r);
/* The quality summary on stderr (per well, then the verdict). */
void cli_estimate_summary(const char *cmd, const ts_estimate_result *r);
/* The --json summary of an estimate run on stdout. */
struct json_t *cli_estimate_json(const ts_estimate_result *r, double seconds);
/* Parses argv[*i] if it is a fuse option (shared by fuse and stitch):
 * returns 1 if consumed (advancing *i past its value), 0 if not a fuse
 * option, -1 on a bad value (usage error printed). */
int cli_fuse_option(const char *cmd, int argc, char **argv, int *i, ts_fuse_options *o);
/* Warns on stderr when the orientation flags given differ from the shifts file's. */
void cli_fuse_warn(const char *cmd, const ts_fuse_result *r);
void cli_fuse_summary(const char *cmd, const char *output, const ts_fuse_result *r, double seconds);
struct json_t *cli_fuse_json(const ts_fuse_result *r, double seconds);
/* --device cpu|gpu|auto into *d; false (usage error printed) otherwise. */
bool cli_device(const char *cmd, const char *v, ts_device *d);

/* Flags that estimate, fuse and stitch share with one meaning. */
typedef struct cli_common {
    const char *output;          /* -o, --output */
    ts_orientation orientation;  /* --flipud, --fliplr, --rot90 K */
    bool orientation_given;
    const char *wells;           /* --wells LIST */
    int threads;                 /* --threads N (0 = all cores) */
    bool json;                   /* --json */
    /* --progress MODE is applied as it is parsed (cli_progress_mode). */
} cli_common;

/* Parses argv[*i] if it is one of the cli_common flags: 1 consumed, 0 not
 * one of them, -1 usage error (printed). */
int cli_common_option(const char *cmd, int argc, char **argv, int *i, cli_common *c);

/* What is left of an argument: an unknown option is a usage error, else it
 * is stored as positional argument *npos of at most max. Returns CLI_OK or
 * CLI_USAGE (printed). */
int cli_positional(const char *cmd, const char *arg, const char **pos, int *npos, int max);

/* The MPI ranks this process runs with (main.c: set up when launched by
 * mpirun), or NULL for one process. estimate, fuse and stitch pass it on. */
const ts_dist *cli_dist(void);

/* "tessera <cmd>: message" on stderr; returns CLI_USAGE. */
int cli_usage_error(const char *cmd, const char *fmt, ...);
/* Prints the library error on stderr; returns CLI_FAIL. */
int cli_fail(const char *cmd, const ts_error *err);

/* Value parsers: return false (after printing a usage error) on bad input. */
bool cli_int(const char *cmd, const char *flag, const char *text, long lo, long hi, int *out);
bool cli_double(const char *cmd, const char *flag, const char *text, double *out);
bool cli_size(const char *cmd, const char *flag, const char *text, size_t *out); /* 2G, 512M, bytes */
bool cli_pair(const char *cmd, const char *flag, const char *text, char sep, int *a, int *b); /* "4x3" */
/* An overlap as given: px, or a percentage of the tile's extent on the
 * axis it applies to (x: the width, y: the height, of the tile as
 * oriented), resolved by cli_overlap_px once that is known. */
typedef struct cli_overlap {
    int px;
    double percent; /* >= 0: N% was given; < 0: px */
} cli_overlap;
/* "PX" (an integer in [lo_px, hi_px]) or "N%" (0 <= N < 100, and N > 0
 * when lo_px > 0): the one parser of every --overlap* option. */
bool cli_overlap_value(const char *cmd, const char *flag, const char *text, long lo_px, long hi_px,
                       cli_overlap *out);
/* The px of an overlap on an axis of `extent` px (a percentage rounded to
 * the nearest px). */
int cli_overlap_px(const cli_overlap *ov, int64_t extent);

/* estimate's and stitch's --overlap, --overlap-x, --overlap-y (overlap.c):
 * parsed by cli_estimate_option, resolved against the plate's first tile
 * (as oriented) by cli_overlap_resolve into o->overlap_x / overlap_y. */
typedef struct cli_overlaps {
    cli_overlap x, y;
    bool x_given, y_given;
} cli_overlaps;
int cli_overlap_option(const char *cmd, int argc, char **argv, int *i, cli_overlaps *ov);
/* CLI_OK, or CLI_USAGE / CLI_FAIL after printing (no overlap given, a
 * plate that cannot be read for its tile shape, a percentage under 1 px). */
int cli_overlap_resolve(const char *cmd, const cli_overlaps *ov, ts_estimate_options *o);

/* text as one of n names: *out = values[k], or the usage error
 * "FLAG: 'text' is not a, b or c". */
bool cli_choice(const char *cmd, const char *flag, const char *text, const char *const *names, const int *values,
                int n, int *out);

/* --format 0.4|0.5 and --codec NAME, with the usage error when invalid. */
bool cli_format(const char *cmd, const char *text, ts_ome_version *out);
bool cli_codec(const char *cmd, const char *text, ts_codec *out);
/* --codec NAME[:LEVEL] (codec_opt.c): the codec and its level (0: none given). */
bool cli_codec_level(const char *cmd, const char *text, ts_codec *out, int *level);

/* Every command's arguments pass through this first (main.c): each
 * "--name=value" becomes "--name" "value", so --opt=value works for every
 * option of every command. Only the first '=' splits, only after a name of
 * lower-case letters, digits and '-': values keep theirs (--pattern=a=b.tif
 * is "--pattern" "a=b.tif"); argv[0] is kept. Valid until cli_split_free. */
char **cli_split_options(int argc, char **argv, int *out_argc);
void cli_split_free(void);
/* True (after a usage error naming the flag) when arg is a value split off
 * a --flag=value whose flag did not take it: parsers call it (through
 * cli_positional) before taking an argument as positional or unknown. */
bool cli_stray_value(const char *cmd, const char *arg);

/* A flag's value: argv[i+1], advancing i; prints a usage error if missing. */
const char *cli_value(const char *cmd, int argc, char **argv, int *i);

/* The one way a command prints its --json summary: one line on stdout, an
 * object whose first fields are "command", "input" and "output" (null when
 * the command has none), then obj's fields in their order. Takes obj. */
struct json_t;
void cli_json_emit(const char *command, const char *input, const char *output, struct json_t *obj);
/* A path, or null when NULL (jansson refuses strings that are not UTF-8:
 * those as Latin-1). */
struct json_t *cli_json_path(const char *path);

/* Monotonic clock in seconds, for the timings of --json summaries. */
double cli_now(void);

/* Progress of long work, as --progress says (cli_progress_mode): a bar
 * with done/total, rate and ETA on a terminal; off a terminal (batch logs,
 * SLURM, CI) one line at each stage's start, every interval seconds
 * (default 15) and at its end, so a log is never silent for long. */
void cli_progress(void *user, const char *stage, int64_t done, int64_t total);
/* --progress auto|bar|log[:SECONDS]|none; false (printed) when not one. */
bool cli_progress_mode(const char *cmd, const char *text);
/* The command named in log lines ("fuse"). */
void cli_progress_command(const char *name);
bool cli_is_terminal(void);

/* Parses one solve option (--solver, --edge-weights, --weight-floor,
 * --max-iterations, --tolerance, --outlier-px) at argv[*i] into o, for solve,
 * estimate and stitch alike. Returns 1 if consumed, 0 if not a solve option,
 * -1 after a usage error. (cmd_solve.c) */
int cli_solve_option(const char *cmd, int argc, char **argv, int *i, ts_solve_options *o);

#endif
