/* Depth cap and repeated-key check of the YAML event stream (yaml_guard.h).
 * One frame per open collection; a mapping's frame holds its keys in an
 * open-addressing hash set (FNV-1a) over a byte arena, reused by the next
 * mapping at that depth, so a 167k-key total_translation costs one
 * hash and one probe per key. */
#include "shifts/yaml_guard.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* 16 bytes: the confidence section of a 167k-tile plate has 333k keys in
 * one mapping. */
typedef struct key_slot {
    uint32_t hash;
    uint32_t off;  /* into the arena */
    uint32_t len;
    uint32_t line; /* 1-based line of the key's first occurrence; 0: empty slot */
} key_slot;

typedef struct yaml_guard_frame {
    bool is_map, expect_key;
    key_slot *slots;
    size_t nslots, count; /* nslots: a power of two, or 0 */
    char *arena;
    size_t arena_len, arena_cap;
} yaml_guard_frame;

bool ts_yaml_guard_init(ts_yaml_guard *g) {
    g->depth = 0;
    g->frames = calloc(TS_YAML_MAX_DEPTH, sizeof *g->frames);
    return g->frames != NULL;
}

void ts_yaml_guard_free(ts_yaml_guard *g) {
    if (!g->frames) return;
    for (int i = 0; i < TS_YAML_MAX_DEPTH; i++) {
        free(g->frames[i].slots);
        free(g->frames[i].arena);
    }
    free(g->frames);
    g->frames = NULL;
}

static uint32_t fnv1a(const char *s, size_t n) {
    uint32_t h = 2166136261u;
    for (size_t i = 0; i < n; i++) h = (h ^ (unsigned char)s[i]) * 16777619u;
    return h;
}

static bool grow_slots(yaml_guard_frame *f) {
    size_t n = f->nslots ? f->nslots * 2 : 64;
    key_slot *ns = calloc(n, sizeof *ns);
    if (!ns) return false;
    for (size_t i = 0; i < f->nslots; i++) {
        if (!f->slots[i].line) continue;
        size_t j = (size_t)f->slots[i].hash & (n - 1);
        while (ns[j].line) j = (j + 1) & (n - 1);
        ns[j] = f->slots[i];
    }
    free(f->slots);
    f->slots = ns;
    f->nslots = n;
    return true;
}

/* Adds the key; *first_line: 0 if new, else the line it was first seen on. */
static ts_yaml_guard_result add_key(yaml_guard_frame *f, const char *key, size_t len, uint32_t line,
                                    uint32_t *first_line) {
    *first_line = 0;
    /* Offsets are 32-bit: a mapping's keys beyond 4 GiB are not a shifts file. */
    if (len >= UINT32_MAX - f->arena_len || line == 0) return TS_YAML_GUARD_NOMEM;
    if (2 * (f->count + 1) > f->nslots && !grow_slots(f)) return TS_YAML_GUARD_NOMEM;
    uint32_t h = fnv1a(key, len);
    size_t j = (size_t)h & (f->nslots - 1);
    for (; f->slots[j].line; j = (j + 1) & (f->nslots - 1)) {
        const key_slot *s = &f->slots[j];
        if (s->hash == h && s->len == len && memcmp(f->arena + s->off, key, len) == 0) {
            *first_line = s->line;
            return TS_YAML_GUARD_OK;
        }
    }
    /* Allocated at the first key even when it is empty (''): memcpy to
     * NULL + 0 is undefined (UBSan). */
    if (!f->arena || f->arena_len + len > f->arena_cap) {
        size_t cap = f->arena_cap ? f->arena_cap : 4096;
        while (cap < f->arena_len + len) cap *= 2;
        char *na = realloc(f->arena, cap);
        if (!na) return TS_YAML_GUARD_NOMEM;
        f->arena = na;
        f->arena_cap = cap;
    }
    memcpy(f->arena + f->arena_len, key, len);
    f->slots[j] = (key_slot){h, (uint32_t)f->arena_len, (uint32_t)len, line};
    f->arena_len += len;
    f->count++;
    return TS_YAML_GUARD_OK;
}

/* A node of the top collection is complete: in a mapping, keys and values
 * alternate. */
static void node_done(ts_yaml_guard *g) {
    if (g->depth == 0) return;
    yaml_guard_frame *f = &g->frames[g->depth - 1];
    if (f->is_map) f->expect_key = !f->expect_key;
}

static bool at_key(const ts_yaml_guard *g) {
    return g->depth > 0 && g->frames[g->depth - 1].is_map && g->frames[g->depth - 1].expect_key;
}

ts_yaml_guard_result ts_yaml_guard_event(ts_yaml_guard *g, const yaml_event_t *ev, char *msg, size_t n) {
    switch (ev->type) {
    case YAML_SCALAR_EVENT:
    case YAML_ALIAS_EVENT:
        if (ev->type == YAML_SCALAR_EVENT && at_key(g)) {
            yaml_guard_frame *f = &g->frames[g->depth - 1];
            const char *key = (const char *)ev->data.scalar.value;
            size_t len = ev->data.scalar.length;
            uint32_t first = 0;
            ts_yaml_guard_result r = add_key(f, key, len, (uint32_t)ev->start_mark.line + 1, &first);
            if (r) return r;
            if (first) {
                snprintf(msg, n, "key '%.80s' is repeated (first at line %u): a mapping's keys must differ", key,
                         (unsigned)first);
                return TS_YAML_GUARD_BAD;
            }
        }
        node_done(g);
        return TS_YAML_GUARD_OK;
    case YAML_SEQUENCE_START_EVENT:
    case YAML_MAPPING_START_EVENT: {
        bool map = ev->type == YAML_MAPPING_START_EVENT;
        if (at_key(g)) {
            snprintf(msg, n, "a %s used as a mapping key (keys are names)", map ? "mapping" : "list");
            return TS_YAML_GUARD_BAD;
        }
        if (g->depth >= TS_YAML_MAX_DEPTH) {
            snprintf(msg, n, "nested more than %d levels deep (a shifts file nests 5)", TS_YAML_MAX_DEPTH);
            return TS_YAML_GUARD_BAD;
        }
        yaml_guard_frame *f = &g->frames[g->depth++];
        f->is_map = map;
        f->expect_key = true;
        /* A large table is dropped rather than cleared: many small
         * mappings after a big one at this depth must not each pay for
         * clearing it. */
        if (f->nslots > 64) {
            free(f->slots);
            f->slots = NULL;
            f->nslots = 0;
        } else if (f->count) {
            memset(f->slots, 0, f->nslots * sizeof *f->slots);
        }
        f->count = 0;
        f->arena_len = 0;
        return TS_YAML_GUARD_OK;
    }
    case YAML_SEQUENCE_END_EVENT:
    case YAML_MAPPING_END_EVENT:
        if (g->depth > 0) g->depth--;
        node_done(g);
        return TS_YAML_GUARD_OK;
    default:
        return TS_YAML_GUARD_OK;
    }
}
