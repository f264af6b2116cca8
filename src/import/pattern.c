/* File-name patterns: parse once, then match every name in the folder. */
#include "import/pattern.h"

#include <ctype.h>
#include <stdio.h>
#include <string.h>

#include "common/error.h"

static const struct {
    const char *name;
    ti_part_kind kind;
} FIELDS[] = {{"{row}", TI_ROW}, {"{col}", TI_COL}, {"{index}", TI_INDEX}};

ts_status ti_pattern_parse(const char *text, ti_pattern *out, ts_error *err) {
    memset(out, 0, sizeof *out);
    if (!text || !*text) return ts_fail(err, TS_ERR_ARG, "empty file-name pattern");
    if (strchr(text, '/'))
        return ts_fail(err, TS_ERR_ARG, "pattern '%s': names files inside the folder, no '/'", text);
    const char *s = text;
    while (*s) {
        if (out->nparts == TI_MAX_PARTS)
            return ts_fail(err, TS_ERR_ARG, "pattern '%s': more than %d parts", text, TI_MAX_PARTS);
        ti_part *p = &out->parts[out->nparts];
        if (*s == '{') {
            size_t f = 0, nf = sizeof FIELDS / sizeof FIELDS[0];
            while (f < nf && strncmp(s, FIELDS[f].name, strlen(FIELDS[f].name)) != 0) f++;
            if (f == nf) {
                const char *close = strchr(s, '}');
                int len = close ? (int)(close - s + 1) : (int)strlen(s);
                return ts_fail(err, TS_ERR_ARG,
                               "pattern '%s': unknown field '%.*s' (fields: {row}, {col}, {index})",
                               text, len, s);
            }
            if (out->nparts > 0 && out->parts[out->nparts - 1].kind != TI_LITERAL)
                return ts_fail(err, TS_ERR_ARG,
                               "pattern '%s': two fields side by side; put text between them", text);
            bool *seen = FIELDS[f].kind == TI_ROW ? &out->has_row
                         : FIELDS[f].kind == TI_COL ? &out->has_col : &out->has_index;
            if (*seen)
                return ts_fail(err, TS_ERR_ARG, "pattern '%s': %s appears twice", text, FIELDS[f].name);
            *seen = true;
            p->kind = FIELDS[f].kind;
            s += strlen(FIELDS[f].name);
        } else {
            size_t n = strcspn(s, "{");
            if (n >= sizeof p->text)
                return ts_fail(err, TS_ERR_ARG, "pattern '%s': literal text too long", text);
            p->kind = TI_LITERAL;
            memcpy(p->text, s, n);
            p->text[n] = '\0';
            s += n;
        }
        out->nparts++;
    }
    if (out->has_index && (out->has_row || out->has_col))
        return ts_fail(err, TS_ERR_ARG, "pattern '%s': use {index} alone or {row} with {col}", text);
    if (!out->has_index && !(out->has_row && out->has_col))
        return ts_fail(err, TS_ERR_ARG,
                       "pattern '%s': needs {row} and {col}, or {index} (e.g. 'r{row}_c{col}.tif')",
                       text);
    return TS_OK;
}

/* Backtracking over how many digits each field takes: a literal right after
 * a field may itself start with digits ("t{index}0.tif"). Fields are never
 * adjacent, so each field's choice is checked against the next literal. */
static bool match_from(const ti_pattern *p, int i, const char *s, long v[3]) {
    if (i == p->nparts) return *s == '\0';
    const ti_part *part = &p->parts[i];
    if (part->kind == TI_LITERAL) {
        size_t n = strlen(part->text);
        return strncmp(s, part->text, n) == 0 && match_from(p, i + 1, s + n, v);
    }
    size_t run = 0;
    while (isdigit((unsigned char)s[run])) run++;
    for (size_t len = run; len >= 1; len--) {
        if (len > 9) {
            /* more than 9 significant digits: not a tile number */
            size_t lead = 0;
            while (lead < len && s[lead] == '0') lead++;
            if (len - lead > 9) continue;
        }
        long x = 0;
        for (size_t k = 0; k < len; k++) x = x * 10 + (s[k] - '0');
        if (match_from(p, i + 1, s + len, v)) {
            v[part->kind - TI_ROW] = x;
            return true;
        }
    }
    return false;
}

bool ti_pattern_match(const ti_pattern *p, const char *name, long *row, long *col, long *index) {
    long v[3] = {*row, *col, *index};
    if (!match_from(p, 0, name, v)) return false;
    *row = v[0], *col = v[1], *index = v[2];
    return true;
}
