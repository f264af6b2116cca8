#include "register/tile_cache.h"

#include <pthread.h>
#include <stdlib.h>

#include "common/error.h"

enum { TILE_EMPTY = 0, TILE_LOADING, TILE_READY };

typedef struct entry {
    void *data;
    ts_dtype dtype;
    size_t bytes;
    int state;
    int refs;       /* workers holding it */
    int uses_left;  /* requests still to come */
    int64_t prev, next; /* idle LRU list (ready, refs == 0), -1 terminated */
    bool in_lru;
} entry;

struct ts_tile_cache {
    pthread_mutex_t mu;
    pthread_cond_t loaded;
    entry *e;
    int64_t n;
    int64_t lru_head, lru_tail; /* head = least recently used */
    size_t budget, bytes;
    ts_tile_load_fn load;
    ts_tile_release_fn release; /* NULL: free */
    void *user;
    ts_tile_cache_stats stats;
};

ts_tile_cache *ts_tile_cache_create(int64_t ntiles, const int *uses, size_t budget,
                                    ts_tile_load_fn load, void *user) {
    ts_tile_cache *c = calloc(1, sizeof *c);
    if (!c) return NULL;
    c->e = calloc((size_t)(ntiles > 0 ? ntiles : 1), sizeof *c->e);
    if (!c->e) {
        free(c);
        return NULL;
    }
    for (int64_t i = 0; i < ntiles; i++) c->e[i].uses_left = uses ? uses[i] : 1;
    c->n = ntiles;
    c->lru_head = c->lru_tail = -1;
    c->budget = budget;
    c->load = load;
    c->user = user;
    pthread_mutex_init(&c->mu, NULL);
    pthread_cond_init(&c->loaded, NULL);
    return c;
}

static void lru_remove(ts_tile_cache *c, int64_t id) {
    entry *e = &c->e[id];
    if (!e->in_lru) return;
    if (e->prev >= 0) c->e[e->prev].next = e->next;
    else c->lru_head = e->next;
    if (e->next >= 0) c->e[e->next].prev = e->prev;
    else c->lru_tail = e->prev;
    e->in_lru = false;
}

static void lru_append(ts_tile_cache *c, int64_t id) {
    entry *e = &c->e[id];
    e->prev = c->lru_tail;
    e->next = -1;
    if (c->lru_tail >= 0) c->e[c->lru_tail].next = id;
    else c->lru_head = id;
    c->lru_tail = id;
    e->in_lru = true;
}

static void release(ts_tile_cache *c, int64_t id) {
    if (!c->e[id].data) return;
    if (c->release) c->release(c->user, id, c->e[id].data);
    else free(c->e[id].data);
}

void ts_tile_cache_set_release(ts_tile_cache *c, ts_tile_release_fn fn) { c->release = fn; }

ts_tile_cache *ts_tile_cache_for_pass(ts_tile_cache *kept, int64_t ntiles, const int *uses, size_t budget,
                                      ts_tile_load_fn load, ts_tile_release_fn release, void *user,
                                      ts_tile_cache **own) {
    *own = NULL;
    if (kept) { /* its kept tiles are not decoded again */
        for (int64_t t = 0; t < ntiles; t++)
            if (uses[t]) ts_tile_cache_add_uses(kept, t, uses[t]);
        return kept;
    }
    if (!(*own = ts_tile_cache_create(ntiles, uses, budget, load, user))) return NULL;
    if (release) ts_tile_cache_set_release(*own, release);
    return *own;
}

static void drop(ts_tile_cache *c, int64_t id) {
    entry *e = &c->e[id];
    lru_remove(c, id);
    release(c, id);
    e->data = NULL;
    c->bytes -= e->bytes;
    e->bytes = 0;
    e->state = TILE_EMPTY;
}

/* Evicts idle tiles, oldest first, until `incoming` more bytes fit. Tiles in
 * use are never evicted, so the budget can be exceeded by what the workers
 * hold at once (two tiles each). */
static void make_room(ts_tile_cache *c, size_t incoming) {
    while (c->bytes + incoming > c->budget && c->lru_head >= 0) drop(c, c->lru_head);
}

ts_status ts_tile_cache_get(ts_tile_cache *c, int64_t id, ts_samples *tile, ts_error *err) {
    pthread_mutex_lock(&c->mu);
    entry *e = &c->e[id];
    while (e->state == TILE_LOADING) pthread_cond_wait(&c->loaded, &c->mu);
    if (e->state == TILE_READY) {
        lru_remove(c, id);
        e->refs++;
        c->stats.hits++;
        *tile = (ts_samples){e->data, e->dtype};
        pthread_mutex_unlock(&c->mu);
        return TS_OK;
    }
    e->state = TILE_LOADING;
    pthread_mutex_unlock(&c->mu);

    void *buf = NULL;
    ts_dtype dtype = TS_FLOAT32;
    size_t bytes = 0;
    ts_status st = c->load(c->user, id, &buf, &dtype, &bytes, err);

    pthread_mutex_lock(&c->mu);
    if (st != TS_OK) {
        e->state = TILE_EMPTY;
    } else {
        make_room(c, bytes);
        e->data = buf;
        e->dtype = dtype;
        e->bytes = bytes;
        e->state = TILE_READY;
        e->refs++;
        c->bytes += bytes;
        if (c->bytes > c->stats.peak_bytes) c->stats.peak_bytes = c->bytes;
        c->stats.loads++;
        *tile = (ts_samples){buf, dtype};
    }
    pthread_cond_broadcast(&c->loaded);
    pthread_mutex_unlock(&c->mu);
    return st;
}

void ts_tile_cache_release(ts_tile_cache *c, int64_t id) {
    pthread_mutex_lock(&c->mu);
    entry *e = &c->e[id];
    e->refs--;
    e->uses_left--;
    if (e->refs == 0) {
        if (e->uses_left <= 0) {
            drop(c, id); /* nobody will ask again */
        } else {
            lru_append(c, id);
            make_room(c, 0);
        }
    }
    pthread_mutex_unlock(&c->mu);
}

void ts_tile_cache_add_uses(ts_tile_cache *c, int64_t id, int delta) {
    pthread_mutex_lock(&c->mu);
    entry *e = &c->e[id];
    e->uses_left += delta;
    if (e->state == TILE_READY && e->refs == 0 && e->uses_left <= 0) drop(c, id);
    pthread_mutex_unlock(&c->mu);
}

ts_tile_cache_stats ts_tile_cache_get_stats(ts_tile_cache *c) {
    pthread_mutex_lock(&c->mu);
    ts_tile_cache_stats s = c->stats;
    pthread_mutex_unlock(&c->mu);
    return s;
}

void ts_tile_cache_destroy(ts_tile_cache *c) {
    if (!c) return;
    for (int64_t i = 0; i < c->n; i++) release(c, i);
    free(c->e);
    pthread_mutex_destroy(&c->mu);
    pthread_cond_destroy(&c->loaded);
    free(c);
}
