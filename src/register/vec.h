/* Fixed-width float vectors (GCC/Clang vector extensions) for the
 * registration's inner loops.
 *
 * Why not plain loops: at -O2 (the RelWithDebInfo build) gcc 12 vectorises
 * only loops whose trip count is a known multiple of the vector width, and
 * never reorders a floating-point reduction, so a sum over a row ran as one
 * chain of dependent scalar adds. These types make the lanes explicit: a
 * reduction is accumulated in eight independent lanes and combined in a
 * fixed order, so its result depends only on the data (not on the thread,
 * the run or the compiler's choices); element-wise loops give the same bits
 * as their scalar form. Without SIMD registers wide enough the compiler
 * splits a vector into smaller ones (same results). */
#ifndef TS_REGISTER_VEC_H
#define TS_REGISTER_VEC_H

#include <stdint.h>
#include <string.h>

#include "common/isa.h"

/* Four floats: the SSE2 register every x86-64 has (a wider vector type
 * passed by value changes the ABI without AVX, -Wpsabi). Reductions use two
 * of them, eight lanes, to keep two add chains in flight. */
typedef float ts_v4f __attribute__((vector_size(4 * sizeof(float))));

/* Unaligned load and store (memcpy compiles to one vector move). */
static inline ts_v4f ts_v4f_load(const float *p) {
    ts_v4f v;
    memcpy(&v, p, sizeof v);
    return v;
}

static inline void ts_v4f_store(float *p, ts_v4f v) { memcpy(p, &v, sizeof v); }

static inline ts_v4f ts_v4f_splat(float x) { return (ts_v4f){x, x, x, x}; }

/* Four lanes of a comparison of ts_v4f (each all ones or zero), and which
 * are set, as bits 0-3 (one instruction on x86: movmskps). */
typedef int32_t ts_v4i __attribute__((vector_size(4 * sizeof(int32_t))));

static inline unsigned ts_v4i_bits(ts_v4i m) {
#ifdef TS_ISA_X86
    return (unsigned)__builtin_ia32_movmskps((ts_v4f)m);
#else
    return (m[0] ? 1u : 0u) | (m[1] ? 2u : 0u) | (m[2] ? 4u : 0u) | (m[3] ? 8u : 0u);
#endif
}

/* Two doubles (an SSE2 register) and the two floats they convert to/from
 * (__builtin_convertvector). */
typedef double ts_v2d __attribute__((vector_size(2 * sizeof(double))));
typedef float ts_v2f __attribute__((vector_size(2 * sizeof(float))));

static inline void ts_v2d_store(double *p, ts_v2d v) { memcpy(p, &v, sizeof v); }

/* Two floats loaded (unaligned) and widened to double, exactly. */
static inline ts_v2d ts_v2f_load_v2d(const float *p) {
    ts_v2f v;
    memcpy(&v, p, sizeof v);
    return __builtin_convertvector(v, ts_v2d);
}

/* Sum of img (n values) in double: four lanes, combined in a fixed order
 * (phasecorr.c's strip mean, refine.c's centre: one definition, one bit
 * pattern for the same data). */
static inline double ts_sum_f64(const float *img, size_t n) {
    ts_v2d s0 = {0}, s1 = {0};
    size_t i = 0;
    for (; i + 4 <= n; i += 4) {
        s0 += ts_v2f_load_v2d(img + i);
        s1 += ts_v2f_load_v2d(img + i + 2);
    }
    double t = 0;
    for (; i < n; i++) t += img[i];
    return ((s0[0] + s0[1]) + (s1[0] + s1[1])) + t;
}

/* Eight floats and four doubles: one AVX register, two SSE2 ones. For
 * local variables only (passed by value they would change the ABI without
 * AVX, -Wpsabi). Element-wise, each lane does what it does in a ts_v4f or
 * ts_v2d, so code written with them gives the same bits in the baseline
 * build and in the AVX2 one below. */
typedef float ts_v8f __attribute__((vector_size(8 * sizeof(float))));
typedef double ts_v4d __attribute__((vector_size(4 * sizeof(double))));
/* Unaligned loads and stores of eight floats through a type that may
 * alias them (what the compilers' own unaligned-load intrinsics do);
 * macros, not functions, since a ts_v8f passed or returned changes the ABI
 * without AVX. */
typedef float ts_v8f_unaligned __attribute__((vector_size(8 * sizeof(float)), aligned(4), may_alias));
#define ts_v8f_load(p) (*(const ts_v8f_unaligned *)(const void *)(p))
#define ts_v8f_store(p, v) (*(ts_v8f_unaligned *)(void *)(p) = (v))

/* A loop body compiled twice (common/isa.h), for the x86-64 baseline
 * (SSE2) and, as TS_TARGET_AVX2 functions, for AVX2: the wide types above
 * fill a whole AVX register there. Not FMA (the avx2 target brings none,
 * and these files are built with -ffp-contract=off, CMakeLists.txt), so
 * both give the same bits. */
#ifdef TS_ISA_X86
#define TS_TARGET_AVX2 __attribute__((target("avx2")))
#endif

/* Which variant: NULL, the CPU's widest; tests name one, "sse2" or
 * "avx2". 1: the AVX2 one, 0: the baseline, -1: no such variant in this
 * build or on this CPU. */
static inline int ts_isa_pick(const char *isa) {
    if (!isa) return ts_isa_available("avx2") ? 1 : 0;
    const bool wide = !strcmp(isa, "avx2");
    if (!wide && strcmp(isa, "sse2")) return -1;
    return ts_isa_available(isa) ? wide : -1;
}

/* The four lanes summed in double, in a fixed pairwise order. */
static inline double ts_v4f_sum(ts_v4f v) {
    return ((double)v[0] + (double)v[1]) + ((double)v[2] + (double)v[3]);
}

/* The eight lanes of lo and hi summed in double, in a fixed pairwise order. */
static inline double ts_v4f_sum2(ts_v4f lo, ts_v4f hi) {
    return (((double)lo[0] + (double)lo[1]) + ((double)lo[2] + (double)lo[3])) +
           (((double)hi[0] + (double)hi[1]) + ((double)hi[2] + (double)hi[3]));
}

#endif
