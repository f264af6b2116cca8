/* Union-find over int indices (path halving; a union keeps the smaller
 * root, so a group's root is its smallest member): the connected groups
 * of tiles that the solve, its loop check, estimate's quality check and
 * its diagonal bridges each need. */
#ifndef TS_COMMON_UNION_FIND_H
#define TS_COMMON_UNION_FIND_H

#include <stddef.h>
#include <stdint.h>

static inline int ts_uf_find(int *parent, int i) {
    while (parent[i] != i) i = parent[i] = parent[parent[i]];
    return i;
}

static inline void ts_uf_join(int *parent, int a, int b) {
    int ra = ts_uf_find(parent, a), rb = ts_uf_find(parent, b);
    if (ra != rb) parent[ra > rb ? ra : rb] = ra > rb ? rb : ra;
}

/* The root of the largest group among members [lo, hi) (of equal ones,
 * the one with the smallest root), counting only the members whose root in
 * `within` is within_root (within NULL: all); -1 when none counts. size:
 * scratch of the parent array's length, zero, left zero. */
static inline int ts_uf_largest_within(int *parent, int64_t lo, int64_t hi, int *size, int *within, int within_root) {
    int best = -1;
    for (int64_t t = lo; t < hi; t++)
        if (!within || ts_uf_find(within, (int)t) == within_root) size[ts_uf_find(parent, (int)t)]++;
    for (int64_t t = lo; t < hi; t++) {
        if (within && ts_uf_find(within, (int)t) != within_root) continue;
        int r = ts_uf_find(parent, (int)t);
        if (best < 0 || size[r] > size[best] || (size[r] == size[best] && r < best)) best = r;
    }
    for (int64_t t = lo; t < hi; t++) size[ts_uf_find(parent, (int)t)] = 0;
    return best;
}

/* The largest group among members [lo, hi) (ts_uf_largest_within all). */
static inline int ts_uf_largest(int *parent, int64_t lo, int64_t hi, int *size) {
    return ts_uf_largest_within(parent, lo, hi, size, NULL, 0);
}

#endif
