/* The fusion row kernels compiled for AVX2 and AVX-512 write the same bytes
 * as the SSE2 ones (src/fuse/kernels.c, kernels_body.h), on random rows of
 * every length up to 70 and a long one, at unaligned starts, with zeros
 * (padding), NaN quotients, denormal and huge weights. A set this CPU
 * lacks is skipped (and said so). */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "xorshift.h"
#include "fuse/kernels.h"

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static uint32_t next_u32(void) { return (uint32_t)(xorshift64(&rng) >> 11); }

static float any_float(void) {
    switch (next_u32() % 8) {
    case 0: return 0.0f;
    case 1: return 1e-40f;           /* denormal */
    case 2: return 3e38f;            /* near FLT_MAX */
    case 3: return (float)(next_u32() % 70000);
    default: return (float)(next_u32() % 100000) / 37.0f;
    }
}

enum { LONG_N = 10007, PAD = 3 };

typedef struct {
    float num[LONG_N + PAD], den[LONG_N + PAD], v[LONG_N + PAD], w[LONG_N + PAD], best[LONG_N + PAD];
    uint16_t v16[LONG_N + PAD], o16[LONG_N + PAD];
    uint32_t v32[LONG_N + PAD], lab[LONG_N + PAD];
    float of[LONG_N + PAD];
} rows;

static void fill(rows *r) {
    for (int i = 0; i < LONG_N + PAD; i++) {
        r->num[i] = any_float();
        r->den[i] = next_u32() % 5 == 0 ? 0.0f : any_float();
        r->v[i] = next_u32() % 4 == 0 ? 0.0f : any_float();
        r->w[i] = any_float();
        r->best[i] = any_float();
        r->v16[i] = next_u32() % 5 == 0 ? 0 : (uint16_t)next_u32();
        r->v32[i] = next_u32();
        r->lab[i] = next_u32();
        r->o16[i] = 0;
        r->of[i] = 0;
    }
    r->num[7] = NAN; /* a NaN quotient converts to 0 */
}

/* Runs every row kernel of set k over r (in place), rows of length n at
 * offset off. */
static void run_set(const ts_fuse_kernels *k, rows *r, int off, int64_t n) {
    k->accumulate(r->num + off, r->den + off, r->v + off, r->w + off, n);
    k->accumulate_u16(r->num + off, r->den + off, r->v16 + off, r->w + off, n);
    k->normalise_u16(r->o16 + off, r->num + off, r->den + off, n);
    k->normalise_f32(r->of + off, r->num + off, r->den + off, n);
    k->label_u16(r->best + off, r->lab + off, r->v16 + off, r->w + off, n);
    k->label_u32(r->best + off, r->lab + off, r->v32 + off, r->w + off, n);
}

static void same_as_sse2(const char *isa) {
    const ts_fuse_kernels *base = ts_fuse_cpu_kernels_isa("sse2"), *k = ts_fuse_cpu_kernels_isa(isa);
    assert_non_null(base);
    if (!k) {
        printf("skip: this CPU has no %s\n", isa);
        return;
    }
    static rows a, b;
    int compared = 0;
    for (int64_t n = 0; n <= 70; n++)
        for (int off = 0; off < PAD; off++) {
            fill(&a);
            b = a;
            run_set(base, &a, off, n);
            run_set(k, &b, off, n);
            assert_memory_equal(&a, &b, sizeof a);
            compared++;
        }
    fill(&a);
    b = a;
    run_set(base, &a, 1, LONG_N);
    run_set(k, &b, 1, LONG_N);
    assert_memory_equal(&a, &b, sizeof a);
    /* Downsampling, odd and even shapes. */
    enum { H = 37, W = 53 };
    static uint16_t s16[H * W], d16a[H * W], d16b[H * W];
    static float sf[H * W], dfa[H * W], dfb[H * W];
    for (int i = 0; i < H * W; i++) s16[i] = (uint16_t)next_u32(), sf[i] = any_float();
    for (int h = 1; h <= H; h += 6)
        for (int w = 1; w <= W; w += 5) {
            memset(d16a, 0, sizeof d16a), memset(d16b, 0, sizeof d16b);
            memset(dfa, 0, sizeof dfa), memset(dfb, 0, sizeof dfb);
            base->downsample_u16(d16a, W, s16, W, h, w);
            k->downsample_u16(d16b, W, s16, W, h, w);
            base->downsample_f32(dfa, W, sf, W, h, w);
            k->downsample_f32(dfb, W, sf, W, h, w);
            assert_memory_equal(d16a, d16b, sizeof d16a);
            assert_memory_equal(dfa, dfb, sizeof dfa);
        }
    printf("%s: %d row cases and the downsampling shapes give the SSE2 bytes\n", isa, compared + 1);
}

static void test_avx2_same_bytes(void **state) {
    (void)state;
    same_as_sse2("avx2");
}

static void test_avx512_same_bytes(void **state) {
    (void)state;
    same_as_sse2("avx512");
}

static void test_dispatch_picks_an_available_set(void **state) {
    (void)state;
    const char *isa = ts_fuse_cpu_isa();
    assert_non_null(ts_fuse_cpu_kernels_isa(isa));
    assert_ptr_equal(ts_fuse_cpu_kernels(), ts_fuse_cpu_kernels_isa(isa));
    assert_null(ts_fuse_cpu_kernels_isa("neon-on-x86"));
    printf("dispatch: %s\n", isa);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_avx2_same_bytes),
        cmocka_unit_test(test_avx512_same_bytes),
        cmocka_unit_test(test_dispatch_picks_an_available_set),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
