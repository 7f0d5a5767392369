/*
 * mm.h: what the two halves of `gemmctl mm` share: its options, the
 * helpers both use (mm_util.c), and the entry of the stack half
 * (mm_stack.c) that the one-GEMM half (mm.c) calls.
 */
#ifndef GEMMCTL_MM_H
#define GEMMCTL_MM_H

#include "gemmctl.h"
#include "npy.h"

#include <stdbool.h>
#include <stdint.h>

struct mm_args {
    const char *a_path, *b_path, *c_path, *out_path;
    double alpha, beta, alpha_im, beta_im;
    bool have_beta, ta, tb, ca, cb, check;
    bool quiet; /* no report on stderr: only D (or nothing with --out) */
    bool have_dtype, have_cd, have_out_dtype;
    gemm_dtype dtype, cd, out_dtype;
    uint64_t m, n, k;
    bool have_m, have_n, have_k;
    unsigned repeat;
    uint64_t seed;
    const char *kernel; /* NULL: the daemon picks */
    gemm_precision precision;
    unsigned moduli; /* fp64: the Ozaki-II modulus count; 0: the daemon picks */
};

/* fp64 and the complex types: computed in their own type, checked in long
 * double. */
bool mm_wide_type(gemm_dtype t);

/* C and D's type when --cd-dtype is not given: int32 for int8 inputs,
 * else ab. */
gemm_dtype mm_cd_default(gemm_dtype ab);

/* --out's type when --out-dtype is not given: fp16, the wide types and
 * int32 as they are, else fp32. */
gemm_dtype mm_out_default(gemm_dtype cd);

/* Whether alpha and beta go to the daemon as doubles (gemm_op_set_scalars)
 * rather than floats: the wide types, and int8 (exact integers). */
bool mm_scalars64(gemm_dtype ab);

/* An --out-dtype that cannot hold D: a usage error (message printed) or
 * EXIT_OK. */
int mm_check_out_type(gemm_dtype outt, gemm_dtype cd);

/* Elements of D (m x n, tight) that differ from the exact int8 reference
 * alpha op(A) op(B) + beta C (C may be NULL) reduced modulo 2^32, over
 * every row_step-th row; *checked says how many elements were compared.
 * A and B tight as stored (k x m when ta, n x k when tb). */
uint64_t mm_s8_mismatches(const int8_t *A, const int8_t *B, const int32_t *C,
                          const int32_t *D, uint64_t m, uint64_t n, uint64_t k,
                          bool ta, bool tb, int32_t alpha, int32_t beta,
                          uint64_t row_step, uint64_t *checked);

/* The --check tolerance of a GEMM and the name of what sets it; moduli:
 * those the fp64 emulation used (gemm_timings.moduli), 0 when native. */
double mm_tolerance(gemm_dtype ab, gemm_dtype cd, gemm_precision p,
                    unsigned moduli, const char **what);

/* Allocates a buffer for count elements of type t (name for messages). */
int mm_alloc(gemm_client *c, size_t count, gemm_dtype t, const char *name,
             gemm_buffer **out);

/* Copies count elements of file f into dst as type dt (real files into
 * complex buffers too); a complex file for a real type is a usage error. */
int mm_load_input(const char *name, void *dst, gemm_dtype dt,
                  const npy_matrix *f, size_t count);

/* The default A/B type of file inputs. */
gemm_dtype mm_file_type(const npy_matrix *A, const npy_matrix *B);

/* The report on stderr (nothing with --quiet). */
void mm_note(const struct mm_args *a, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* mm of 3-D stacks (A or B has 3 dimensions; C, if given, 2-D or 3-D):
 * numpy's matmul for a stack times a stack (equal counts, or one of them
 * 1) or a stack times a matrix (broadcast), as one strided batch request;
 * D is written as a 3-D .npy (--out). Returns an exit code. */
int mm_stack(const char *url, struct mm_args *a, const npy_matrix *A,
             const npy_matrix *B, const npy_matrix *C);

#endif
