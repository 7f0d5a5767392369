/*
 * cpu_s8.h: the CPU backend's int8 GEMM (OpenBLAS has none): D = alpha *
 * op(A) * op(B) + beta * C with A, B int8 and C, D int32, row-major, any
 * transposes and leading dimensions, accumulated exactly in int32 that
 * wraps on overflow (every product, sum and scaling is exact modulo
 * 2^32, as the GPU's int8 kernels and cuBLASLt compute it). Blocked and
 * packed for the caches, with an AVX2 inner kernel where the CPU has
 * AVX2 and portable C elsewhere (the same numbers: the arithmetic is
 * exact).
 */
#ifndef GEMMD_CPU_S8_H
#define GEMMD_CPU_S8_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct cpu_s8_problem {
    uint64_t m, n, k;      /* op(A) is m x k, op(B) k x n; each >= 1 */
    bool trans_a, trans_b; /* A stored k x m, B stored n x k */
    const int8_t *a, *b;
    uint64_t lda, ldb; /* elements of the stored rows */
    const int32_t *c;  /* NULL: beta is taken as 0; may be d itself */
    uint64_t ldc;
    int32_t *d; /* must not overlap a or b */
    uint64_t ldd;
    int32_t alpha, beta;
} cpu_s8_problem;

/*
 * Computes p on `threads` threads (the caller's and threads - 1 it
 * starts and joins; 1 or a small problem: the caller's alone). The
 * packing buffers belong to the calling thread and are kept for its next
 * call (threads * cpu_s8_scratch() bytes at most). Returns GEMM_OK, or
 * GEMM_ERR_NOMEM (packing buffers; D untouched). Any thread; calls on
 * distinct D may run at once.
 */
int cpu_s8_gemm(const cpu_s8_problem *p, unsigned threads);

/* Bytes of packing buffers cpu_s8_gemm needs per thread. */
size_t cpu_s8_scratch(void);

/* The inner kernel this CPU runs: "avx2" or "portable". Thread-safe. */
const char *cpu_s8_isa(void);

#endif
