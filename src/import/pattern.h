/* File-name patterns of TIFF tile folders: literal text with the fields
 * {row}, {col} and {index}, each matching a run of decimal digits (leading
 * zeros allowed), e.g. "r{row}_c{col}.tif" or "{index}.tif". */
#ifndef TS_IMPORT_PATTERN_H
#define TS_IMPORT_PATTERN_H

#include <stdbool.h>
#include "tessera/tessera.h"

#define TI_MAX_PARTS 32

typedef enum ti_part_kind { TI_LITERAL = 0, TI_ROW, TI_COL, TI_INDEX } ti_part_kind;

typedef struct ti_part {
    ti_part_kind kind;
    char text[256]; /* TI_LITERAL */
} ti_part;

typedef struct ti_pattern {
    int nparts;
    ti_part parts[TI_MAX_PARTS];
    bool has_row, has_col, has_index;
} ti_pattern;

/* Parses a pattern. Refused (TS_ERR_ARG naming the pattern): an unknown
 * field, a '/' (a pattern names files of one folder), two fields side by
 * side (their digits could be split anywhere), a field given twice, and
 * anything but {row}+{col} or {index} alone. */
ts_status ti_pattern_parse(const char *text, ti_pattern *out, ts_error *err);

/* Matches a file name against the pattern; on a match fills the fields the
 * pattern has (row, col or index; the others are left alone). Numbers above
 * 10^9 do not match. */
bool ti_pattern_match(const ti_pattern *p, const char *name, long *row, long *col, long *index);

#endif
