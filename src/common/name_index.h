/* A tiny open-addressing hash index from a name to its position in an array
 * of fixed-size names (char[32]), so 167k tiles are found in O(1) instead of
 * a linear scan per lookup. The index stores positions only; the names live
 * in the caller's array, which is passed to every call (it may be realloc'd
 * between calls). */
#ifndef TS_COMMON_NAME_INDEX_H
#define TS_COMMON_NAME_INDEX_H

#include <stdbool.h>
#include <stddef.h>

typedef struct ts_name_index {
    int *slots;   /* position in the names array, or -1 when empty */
    size_t mask;  /* capacity - 1, capacity a power of two */
    int count;    /* names[0, count) are indexed */
} ts_name_index;

ts_name_index *ts_name_index_new(void);
void ts_name_index_free(ts_name_index *ix);
/* Indexes names[pos]; pos must be ix->count (names are indexed in order).
 * Returns false on allocation failure. */
bool ts_name_index_add(ts_name_index *ix, const char (*names)[32], int pos);
/* Position of name, or -1. */
int ts_name_index_find(const ts_name_index *ix, const char (*names)[32], const char *name, size_t len);

#endif
