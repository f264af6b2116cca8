/* The size-keyed cache (src/register/size_cache.c) that keeps FFTW plans:
 * found by its whole key, empty slots filled first, then the least
 * recently used (a find counts as a use) replaced and destroyed, and
 * every item destroyed once by a clear. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "register/size_cache.h"

static int destroyed[16], ndestroyed;
static int items[16];

static void destroy(void *item) { destroyed[ndestroyed++] = (int)((int *)item - items); }

static void test_lru(void **state) {
    (void)state;
    ts_size_cache c;
    ts_size_cache_init(&c, 3, destroy);
    ndestroyed = 0;
    const int k[5][TS_SIZE_KEYS] = {{1, 2, 0, 0}, {2, 1, 0, 0}, {1, 2, 3, 0}, {7, 7, 0, 0}, {8, 8, 0, 0}};
    for (int i = 0; i < 3; i++) ts_size_cache_put(&c, k[i], &items[i]);
    assert_int_equal(ndestroyed, 0); /* empty slots first */
    assert_ptr_equal(ts_size_cache_find(&c, k[1]), &items[1]);
    assert_ptr_equal(ts_size_cache_find(&c, k[0]), &items[0]); /* item 2 is now the least recent */
    assert_null(ts_size_cache_find(&c, k[3]));                  /* the whole key must match */
    ts_size_cache_put(&c, k[3], &items[3]);
    assert_int_equal(ndestroyed, 1);
    assert_int_equal(destroyed[0], 2);
    assert_null(ts_size_cache_find(&c, k[2]));
    ts_size_cache_put(&c, k[4], &items[4]); /* then item 1 (found before item 0) */
    assert_int_equal(destroyed[1], 1);
    ts_size_cache_clear(&c);
    assert_int_equal(ndestroyed, 5);
    ts_size_cache_clear(&c); /* empty: nothing destroyed twice */
    assert_int_equal(ndestroyed, 5);
}

int main(void) {
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_lru)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
