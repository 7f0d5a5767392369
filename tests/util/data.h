/*
 * data.h: test data for the integration tests: the tests' own conversions
 * between bf16/fp16/fp32 (independent of libgemmclient's, so a bug there
 * cannot hide in both), random fills that are never zero, an fp64 reference
 * GEMM over the values actually stored, and the tolerance for each dtype
 * combination. Pure functions; thread-safe.
 */
#ifndef GEMM_TESTS_UTIL_DATA_H
#define GEMM_TESTS_UTIL_DATA_H

#include <gemm/gemm.h>

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

uint16_t tu_f32_to_bf16(float f);
uint16_t tu_f32_to_fp16(float f);
double tu_bf16_to_f64(uint16_t h);
double tu_fp16_to_f64(uint16_t h);

/* Element i of an array of type t, converted exactly to double. */
double tu_load(const void *base, gemm_dtype t, size_t i);
/* Stores v (rounded to nearest even) as element i of type t. */
void tu_store(void *base, gemm_dtype t, size_t i, float v);

/* xorshift64*: a small, seedable generator (seed must not be 0). */
uint64_t tu_rand(uint64_t *state);
/* Uniform in [-1, 1). */
double tu_rand_uniform(uint64_t *state);

/* Fills a rows x cols matrix with leading dimension ld (elements) with
 * uniform [-1, 1) values, none of which is zero after rounding to t. */
void tu_fill(void *base, gemm_dtype t, size_t rows, size_t cols, size_t ld,
             uint64_t *state);

/* Elements spanned by a rows x cols matrix with leading dimension ld. */
size_t tu_extent(size_t rows, size_t cols, size_t ld);

/* Stored shape of each operand of op: rows, cols and the effective ld
 * (op's ld, or cols when it is 0). which: 'a', 'b', 'c' or 'd'. */
void tu_shape(const gemm_op *op, char which, size_t *rows, size_t *cols,
              size_t *ld);

/*
 * fp64 reference of op over the stored values: ref[i*n+j] = alpha *
 * sum_l op(A)[i][l] * op(B)[l][j] + beta * C[i][j], and scale[i*n+j] the
 * same sum of absolute values (the error bound's scale). a, b and c point
 * at element 0 of each matrix; c is not read when beta == 0.
 */
void tu_ref_gemm(const gemm_op *op, const void *a, const void *b, const void *c,
                 double *ref, double *scale);
/* One element of the same (for spot checks of large products). */
void tu_ref_elem(const gemm_op *op, const void *a, const void *b, const void *c,
                 size_t i, size_t j, double *ref, double *scale);

/* Allowed |got - ref| for an element: tol_rel * scale + tol_abs (by the
 * types, k and, for fp32 inputs, op's precision). */
void tu_tolerance(const gemm_op *op, double *tol_rel, double *tol_abs);

/*
 * Compares D (element 0 at d, op's ldd) with ref/scale. Returns true if all
 * m x n elements are within tolerance; otherwise writes the worst element
 * into why.
 */
bool tu_compare(const gemm_op *op, const void *d, const double *ref,
                const double *scale, char *why, size_t whylen);

#endif
