/* The size-keyed cache of size_cache.h. */
#include "register/size_cache.h"

#include <stdbool.h>
#include <string.h>

void ts_size_cache_init(ts_size_cache *c, int nslots, void (*destroy)(void *item)) {
    memset(c, 0, sizeof *c);
    c->nslots = nslots < 1 ? 1 : nslots > TS_SIZE_CACHE_MAX ? TS_SIZE_CACHE_MAX : nslots;
    c->destroy = destroy;
}

void ts_size_cache_clear(ts_size_cache *c) {
    for (int i = 0; i < c->nslots; i++) {
        if (c->slot[i].item && c->destroy) c->destroy(c->slot[i].item);
        c->slot[i].item = NULL;
    }
}

void *ts_size_cache_find(ts_size_cache *c, const int key[TS_SIZE_KEYS]) {
    for (int i = 0; i < c->nslots; i++)
        if (c->slot[i].item && !memcmp(c->slot[i].key, key, sizeof c->slot[i].key)) {
            c->slot[i].used = ++c->clock;
            return c->slot[i].item;
        }
    return NULL;
}

void ts_size_cache_put(ts_size_cache *c, const int key[TS_SIZE_KEYS], void *item) {
    int k = 0;
    for (int i = 0; i < c->nslots; i++) {
        const bool empty = !c->slot[i].item;
        if (empty || (c->slot[k].item && c->slot[i].used < c->slot[k].used)) k = i;
        if (empty) break;
    }
    if (c->slot[k].item && c->destroy) c->destroy(c->slot[k].item);
    memcpy(c->slot[k].key, key, sizeof c->slot[k].key);
    c->slot[k].item = item;
    c->slot[k].used = ++c->clock;
}
