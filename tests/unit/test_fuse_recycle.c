/* The pool of freed strip mappings (blend.c, fuse_strip_alloc) never adds
 * to the peak: a strip of a size the pool has none of is mapped only after
 * pooled mappings of other sizes, at least as many bytes, are unmapped, so
 * the strip mappings, held and pooled, grow only while none is pooled.
 * Kept beside the new mappings, the pool (64 mappings, 8 MB for 256 px
 * tiles) came on top of the strips in flight in the runs whose peak RSS
 * was highest (issue 12). A strip of a pooled size still reuses a pooled
 * mapping. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <pthread.h>
#include <string.h>

#include "fuse/fuse_internal.h"

static void test_pool_gives_back_before_mapping(void **state) {
    (void)state;
    fuse_well W;
    memset(&W, 0, sizeof W);
    pthread_mutex_init(&W.recycle_mu, NULL);
    W.recycle_cap = (size_t)1 << 30;
    enum { N = 8 };
    const size_t small = (size_t)128 << 10, other = (size_t)192 << 10;
    void *p[N];
    for (int i = 0; i < N; i++) {
        p[i] = fuse_strip_alloc(&W, small);
        assert_non_null(p[i]);
        memset(p[i], i + 1, small); /* resident, as strips are */
    }
    for (int i = 0; i < N; i++) fuse_strip_free(&W, p[i], small);
    assert_int_equal(W.nrecycled, N);
    assert_int_equal(W.recycled_bytes, N * small);
    /* a pooled size: one of the pooled mappings, the pool one fewer */
    void *q = fuse_strip_alloc(&W, small);
    bool pooled = false;
    for (int i = 0; i < N; i++) pooled |= q == p[i];
    assert_true(pooled);
    assert_int_equal(W.recycled_bytes, (N - 1) * small);
    /* a size the pool has none of: at least its bytes leave the pool first */
    const size_t before = W.recycled_bytes;
    void *r = fuse_strip_alloc(&W, other);
    assert_non_null(r);
    memset(r, 7, other);
    assert_true(W.recycled_bytes + other <= before);
    fuse_strip_free(&W, q, small);
    fuse_strip_free(&W, r, other);
    fuse_recycle_drain(&W);
    assert_int_equal(W.nrecycled, 0);
    pthread_mutex_destroy(&W.recycle_mu);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_pool_gives_back_before_mapping),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
