/* Label images in fuse (src/fuse/label.c): a label goes from the tile's
 * dtype to the 32-bit label the kernels compare and back to the same dtype
 * unchanged, for every integer dtype of up to 32 bits, signed ones and
 * their extremes included, along oriented rows (negative steps). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <string.h>

#include "fuse/fuse_internal.h"

#define ROUND_TRIP(DT, TYPE, ...)                                                         \
    do {                                                                                  \
        const TYPE src[] = {__VA_ARGS__};                                                 \
        enum { N = sizeof src / sizeof src[0] };                                          \
        uint32_t lab[N];                                                                  \
        TYPE back[N];                                                                     \
        fuse_label_convert_row(DT, lab, src, 0, 1, N);                                    \
        fuse_label_store(back, DT, lab, N);                                               \
        assert_memory_equal(back, src, sizeof src);                                       \
        /* Backwards (a flipped row): element at - j. */                                  \
        fuse_label_convert_row(DT, lab, src, N - 1, -1, N);                               \
        fuse_label_store(back, DT, lab, N);                                               \
        for (int j = 0; j < N; j++) assert_true(back[j] == src[N - 1 - j]);               \
    } while (0)

static void test_labels_keep_their_values(void **state) {
    (void)state;
    ROUND_TRIP(TS_UINT8, uint8_t, 0, 1, 200, 255);
    ROUND_TRIP(TS_INT8, int8_t, 0, -1, 127, -128, 5);
    ROUND_TRIP(TS_UINT16, uint16_t, 0, 1, 65535, 40000);
    ROUND_TRIP(TS_INT16, int16_t, 0, -1, 32767, -32768);
    ROUND_TRIP(TS_UINT32, uint32_t, 0, 16777217u, 4294967295u, 7);
    ROUND_TRIP(TS_INT32, int32_t, 0, -1, 2147483647, -2147483647 - 1, 16777217);
}

/* Distinct labels stay distinct as 32-bit labels (the kernels compare
 * nothing but weights, yet a sign-extension slip would merge -1 with 255). */
static void test_distinct_labels_stay_distinct(void **state) {
    (void)state;
    const int8_t s8[2] = {-1, 127};
    uint32_t l8[2];
    fuse_label_convert_row(TS_INT8, l8, s8, 0, 1, 2);
    assert_true(l8[0] != l8[1]);
    const int16_t s16[2] = {-1, 255};
    uint32_t l16[2];
    fuse_label_convert_row(TS_INT16, l16, s16, 0, 1, 2);
    assert_true(l16[0] != l16[1] && l16[1] == 255u);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_labels_keep_their_values),
        cmocka_unit_test(test_distinct_labels_stay_distinct),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
