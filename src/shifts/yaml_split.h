/* Where a large shifts file can be cut in two for two libyaml parsers
 * (shifts_read.c reads the halves on two threads).
 *
 * The cut is only ever proposed between two entries of a well's block list
 * of pairs, as tessera's writer lays it out:
 *
 *   pairs:
 *     A/1:
 *     - [A/1/000000, A/1/001000, -10.8, 1817.5, 0.68]
 *     - [...]          <- split: the start of this line
 *
 * The second parser then reads the synthetic "pairs:\n  A/1:\n" followed by
 * the bytes from the split on, which tokenises exactly as the rest of the
 * file would in place. This finder only looks at bytes and may guess wrong
 * (e.g. lines inside a multi-line quoted scalar that look like entries):
 * the reader accepts the cut only when the first parser confirms it
 * (its input ended right after a complete entry of well A/1's list, the
 * list at column 3 under a key at column 3 of the `pairs` key at column 1),
 * and reads the file with one parser otherwise. */
#ifndef TS_SHIFTS_YAML_SPLIT_H
#define TS_SHIFTS_YAML_SPLIT_H

#include <stdbool.h>
#include <stddef.h>

/* The longest well key the split accepts (the model's limit is 31). */
#define TS_YAML_SPLIT_MAX_WELL 31

/* Looks for a line starting "  - [" at or after target (else the last one
 * before it), and the well key line above it ("  KEY:" with KEY of
 * letters, digits and "/_.-"; only entry, continuation, blank and comment
 * lines between), under a line "pairs:" (other wells between). The search
 * gives up at the first entry line that does not qualify (the lines of a
 * list after it would not either). On success *split is the offset of that line and
 * well[0..*well_len) the key. False when there is no such place. */
bool ts_yaml_find_split(const char *buf, size_t len, size_t target, size_t *split, const char **well,
                        size_t *well_len);

#endif
