/* A small fixed-size thread pool for data-parallel loops. No global state:
 * each stage creates a pool sized from its options (threads = 0 means all
 * cores). ts_pool_for runs fn(i) for i in [0, n) with dynamic scheduling and
 * returns when all are done; the first error (non-zero return) wins. */
#ifndef TS_COMMON_POOL_H
#define TS_COMMON_POOL_H

#include <stdint.h>

#include "common/error.h"

typedef struct ts_pool ts_pool;

/* fn(user, index, worker_id); worker_id in [0, ts_pool_size). */
typedef int (*ts_pool_fn)(void *user, int64_t index, int worker);

int ts_cpu_count(void);
ts_pool *ts_pool_create(int threads); /* NULL on failure */
int ts_pool_size(const ts_pool *pool);
/* Returns 0 or the first non-zero value returned by fn (later items are skipped). */
int ts_pool_for(ts_pool *pool, int64_t n, ts_pool_fn fn, void *user);
void ts_pool_destroy(ts_pool *pool);

/* ts_pool_for for items that fail with a status and a message: fn reports
 * into its own ts_error. Returns TS_OK, or the status of the lowest failing
 * index with its message in err (may be NULL), whatever the timing; items
 * not started after a failure are skipped. The one way a stage collects the
 * errors of its parallel items. */
typedef ts_status (*ts_pool_status_fn)(void *user, int64_t index, int worker, ts_error *err);
ts_status ts_pool_run(ts_pool *pool, int64_t n, ts_pool_status_fn fn, void *user, ts_error *err);

#endif
