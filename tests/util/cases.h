/*
 * cases.h: one GEMM test case laid out in a client buffer: A, B, C and D
 * placed at unaligned-but-legal offsets with chosen leading-dimension
 * padding, the whole region poisoned with 0xff bytes (NaN in every type) so
 * that a daemon reading padding or an unread C, or writing outside D, is
 * caught. tu_case_prepare() fills the inputs and computes the fp64
 * reference; tu_case_verify() checks D and that every other byte of the
 * region is unchanged. The prepared state is owned by the caller and freed
 * by tu_case_free(). Thread-safe for distinct buffers.
 */
#ifndef GEMM_TESTS_UTIL_CASES_H
#define GEMM_TESTS_UTIL_CASES_H

#include <gemm/gemm.h>

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum tu_c_mode {
    TU_C_NONE,     /* beta must be 0; c.buf = NULL */
    TU_C_SEPARATE, /* C in its own place */
    TU_C_INPLACE,  /* C is D: same buffer, offset and ld */
    TU_C_UNREAD,   /* C given (all NaN) but beta == 0: must not be read */
};

#define TU_TIGHT UINT32_MAX /* pad value meaning "ld = 0" */

typedef struct tu_case {
    uint64_t m, n, k;
    gemm_dtype ab, cd;
    bool ta, tb;
    float alpha, beta;
    enum tu_c_mode c_mode;
    uint32_t pad_a, pad_b, pad_c, pad_d; /* ld = cols + pad, or TU_TIGHT */
    uint64_t base;                       /* byte offset of the region */
    uint64_t seed;
} tu_case;

typedef struct tu_prepared {
    gemm_op op;
    uint8_t *data;     /* buffer memory */
    size_t lo, hi;     /* the region checked for stray writes */
    uint8_t *snapshot; /* region before the run */
    double *ref, *scale;
} tu_prepared;

/* Bytes of the buffer that the case uses (from offset 0). */
size_t tu_case_bytes(const tu_case *cs);

/* Lays out, fills and references the case in buf (which must hold
 * tu_case_bytes() + 64 bytes). Returns false (with why) if it does not fit. */
bool tu_case_prepare(const tu_case *cs, gemm_buffer *buf, tu_prepared *p,
                     char *why, size_t whylen);

/* After a successful run: true if D matches and nothing else changed. */
bool tu_case_verify(const tu_prepared *p, char *why, size_t whylen);

void tu_case_free(tu_prepared *p);

/* prepare + gemm_run + verify. Returns the gemm_error of gemm_run, or -1 if
 * the result is wrong (why says how). */
int tu_case_run(gemm_client *c, gemm_buffer *buf, const tu_case *cs, char *why,
                size_t whylen);

/* A case with random small shape, types, transposes, ld padding and
 * alpha/beta mode drawn from *state (dims in 1..maxdim). */
void tu_case_random(tu_case *cs, uint64_t *state, uint64_t maxdim);

/* The plain case: m x n x k of types ab, cd, alpha 1, no C, every
 * operand tight, at offset 0 of its buffer. */
tu_case tu_case_plain(uint64_t m, uint64_t n, uint64_t k, gemm_dtype ab,
                      gemm_dtype cd, uint64_t seed);

/* Sets cs's C mode with its alpha and beta, one of four by sel % 4: no C,
 * a separate C, C in place as D, a C present but unread (beta 0). */
void tu_case_c_mode(tu_case *cs, unsigned sel);

#endif
