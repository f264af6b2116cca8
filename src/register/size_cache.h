/* A few objects kept by size (a transform's dimensions), the least recently
 * used replaced: FFTW plans, and the buffers they run on, cost more to make
 * than the transforms they serve (window_ncc.c). */
#ifndef TS_REGISTER_SIZE_CACHE_H
#define TS_REGISTER_SIZE_CACHE_H

#define TS_SIZE_CACHE_MAX 64
#define TS_SIZE_KEYS 4

typedef struct ts_size_cache {
    int nslots;                   /* at most TS_SIZE_CACHE_MAX */
    void (*destroy)(void *item);  /* frees an item replaced or cleared */
    unsigned long clock;
    struct {
        int key[TS_SIZE_KEYS];
        void *item;               /* NULL: empty */
        unsigned long used;
    } slot[TS_SIZE_CACHE_MAX];
} ts_size_cache;

void ts_size_cache_init(ts_size_cache *c, int nslots, void (*destroy)(void *item));
/* Destroys every item (the cache is empty after). */
void ts_size_cache_clear(ts_size_cache *c);
/* The item kept under key (unused key entries 0), or NULL. */
void *ts_size_cache_find(ts_size_cache *c, const int key[TS_SIZE_KEYS]);
/* Keeps item under key in an empty slot, else in place of the least
 * recently used one, whose item is destroyed. */
void ts_size_cache_put(ts_size_cache *c, const int key[TS_SIZE_KEYS], void *item);

#endif
