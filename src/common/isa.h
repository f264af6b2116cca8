/* The instruction sets the per-pixel loops are compiled for, each loop
 * once per set (fuse/kernels.c: SSE2, AVX2, AVX-512; register/: SSE2,
 * AVX2), the widest the CPU has chosen at run time and any one named by
 * the tests that compare them. Every variant gives the same bits. */
#ifndef TS_COMMON_ISA_H
#define TS_COMMON_ISA_H

#include <stdbool.h>
#include <string.h>

/* x86-64 with GCC or clang: the AVX2 and AVX-512 variants are built
 * (function target attributes, __builtin_cpu_supports). */
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
#define TS_ISA_X86 1
#endif

/* Whether this build and this CPU run the set named "sse2" (the x86-64
 * baseline, and the portable code elsewhere), "avx2" or "avx512" (F and
 * BW); false for any other name. Asked again on every call, not cached:
 * __builtin_cpu_supports reads flags the runtime filled in at start-up. */
static inline bool ts_isa_available(const char *isa) {
    if (!strcmp(isa, "sse2")) return true;
#ifdef TS_ISA_X86
    if (!strcmp(isa, "avx2")) return __builtin_cpu_supports("avx2");
    if (!strcmp(isa, "avx512")) return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw");
#endif
    return false;
}

#endif
