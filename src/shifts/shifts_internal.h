/* Shared between the files of src/shifts (not part of the stage interface). */
#ifndef TS_SHIFTS_INTERNAL_H
#define TS_SHIFTS_INTERNAL_H

#include <stddef.h>
#include "shifts/shifts.h"

/* Finds or adds the tile named name[0, len) in well w; -1 on failure. */
int ts_shifts_add_tile_n(ts_shifts *s, int w, const char *name, size_t len);

/* Files this big or bigger are read by two libyaml parsers on two threads,
 * one per half (shifts_read.c), split near TS_SHIFTS_SPLIT_AT of their
 * bytes: part B also parses the `confidence` it skips, which costs less
 * per byte than the pairs part A builds the model from (409 x 409 plate,
 * with the machine to itself: at 0.55 A took 0.62 s and B 0.70 s; at 0.58
 * both about 0.66). */
#define TS_SHIFTS_SPLIT_MIN ((size_t)1 << 20)
#define TS_SHIFTS_SPLIT_AT 0.58

/* ts_shifts_read with the split made testable. */
typedef struct ts_shifts_read_opts {
    size_t split_min_bytes; /* 0: TS_SHIFTS_SPLIT_MIN (and files are split on one core too) */
    long long split_target; /* byte offset the split is looked for from; < 0: TS_SHIFTS_SPLIT_AT */
    int parts;              /* out: 2 when the file was read in two parts, else 1 */
} ts_shifts_read_opts;

ts_status ts_shifts_read_ex(const char *path, ts_shifts_read_opts *o, ts_shifts **out, ts_error *err);

#endif
