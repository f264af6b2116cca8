#include "common/name_index.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* FNV-1a: short keys, good enough spread, no state. */
static uint64_t hash_name(const char *s, size_t n) {
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++) {
        h ^= (unsigned char)s[i];
        h *= 1099511628211ull;
    }
    return h ^ (h >> 29);
}

ts_name_index *ts_name_index_new(void) {
    ts_name_index *ix = calloc(1, sizeof *ix);
    return ix;
}

void ts_name_index_free(ts_name_index *ix) {
    if (!ix) return;
    free(ix->slots);
    free(ix);
}

static void insert_slot(int *slots, size_t mask, const char (*names)[32], int pos) {
    size_t i = (size_t)hash_name(names[pos], strlen(names[pos])) & mask;
    while (slots[i] >= 0) i = (i + 1) & mask;
    slots[i] = pos;
}

bool ts_name_index_add(ts_name_index *ix, const char (*names)[32], int pos) {
    size_t cap = ix->slots ? ix->mask + 1 : 0;
    /* Keep the load factor at most 1/2 so probes stay short. */
    if ((size_t)(ix->count + 1) * 2 > cap) {
        size_t ncap = cap ? cap * 2 : 64;
        int *ns = malloc(ncap * sizeof *ns);
        if (!ns) return false;
        memset(ns, 0xff, ncap * sizeof *ns);
        for (int p = 0; p < ix->count; p++) insert_slot(ns, ncap - 1, names, p);
        free(ix->slots);
        ix->slots = ns;
        ix->mask = ncap - 1;
    }
    insert_slot(ix->slots, ix->mask, names, pos);
    ix->count = pos + 1;
    return true;
}

int ts_name_index_find(const ts_name_index *ix, const char (*names)[32], const char *name, size_t len) {
    if (!ix || !ix->slots) return -1;
    size_t i = (size_t)hash_name(name, len) & ix->mask;
    for (;;) {
        int p = ix->slots[i];
        if (p < 0) return -1;
        if (strncmp(names[p], name, len) == 0 && names[p][len] == '\0') return p;
        i = (i + 1) & ix->mask;
    }
}
