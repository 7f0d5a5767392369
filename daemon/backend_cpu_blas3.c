/*
 * backend_cpu_blas3.c: symm, hemm, syrk, herk, syr2k, her2k, trmm and trsm
 * on the CPU backend: OpenBLAS's cblas_?routine with CblasRowMajor, which
 * is what the wire means, on the operands where they are (the output C,
 * or B of trmm/trsm, updated in place in the client's buffer). OpenBLAS
 * reads and writes only the triangles the reference does. Operands still
 * being filled (proto's Fill) were waited for whole first (backend_cpu.c,
 * fill_check.h).
 */
#include "backend_cpu_blas3.h"
#include "validate_blas3.h"

#include <gemm/types.h>

#include <cblas.h>
#include <limits.h>
#include <stdio.h>

static CBLAS_TRANSPOSE op_of(int op)
{
    return op == VAL_OP_N   ? CblasNoTrans
           : op == VAL_OP_T ? CblasTrans
                            : CblasConjTrans;
}

/* The call for the real types (s or d): T is float or double. */
#define REAL_CASES(T, p)                                                       \
    switch (j->routine) {                                                      \
    case VAL_SYMM:                                                             \
        cblas_##p##symm(CblasRowMajor, side, uplo, m, n, (T)j->alpha, j->a,    \
                        lda, j->b, ldb, (T)beta, j->d, ldd);                   \
        break;                                                                 \
    case VAL_SYRK:                                                             \
        cblas_##p##syrk(CblasRowMajor, uplo, tr, n, k, (T)j->alpha, j->a, lda, \
                        (T)beta, j->d, ldd);                                   \
        break;                                                                 \
    case VAL_SYR2K:                                                            \
        cblas_##p##syr2k(CblasRowMajor, uplo, tr, n, k, (T)j->alpha, j->a,     \
                         lda, j->b, ldb, (T)beta, j->d, ldd);                  \
        break;                                                                 \
    case VAL_TRMM:                                                             \
        cblas_##p##trmm(CblasRowMajor, side, uplo, tr, diag, m, n,             \
                        (T)j->alpha, j->a, lda, j->d, ldd);                    \
        break;                                                                 \
    case VAL_TRSM:                                                             \
        cblas_##p##trsm(CblasRowMajor, side, uplo, tr, diag, m, n,             \
                        (T)j->alpha, j->a, lda, j->d, ldd);                    \
        break;                                                                 \
    default:                                                                   \
        goto bad;                                                              \
    }

/* The complex types (c or z): T the part type; al, be the scalars as
 * pairs. */
#define CPLX_CASES(T, p)                                                       \
    switch (j->routine) {                                                      \
    case VAL_SYMM:                                                             \
        cblas_##p##symm(CblasRowMajor, side, uplo, m, n, al, j->a, lda, j->b,  \
                        ldb, be, j->d, ldd);                                   \
        break;                                                                 \
    case VAL_HEMM:                                                             \
        cblas_##p##hemm(CblasRowMajor, side, uplo, m, n, al, j->a, lda, j->b,  \
                        ldb, be, j->d, ldd);                                   \
        break;                                                                 \
    case VAL_SYRK:                                                             \
        cblas_##p##syrk(CblasRowMajor, uplo, tr, n, k, al, j->a, lda, be,      \
                        j->d, ldd);                                            \
        break;                                                                 \
    case VAL_HERK:                                                             \
        cblas_##p##herk(CblasRowMajor, uplo, tr, n, k, (T)j->alpha, j->a, lda, \
                        (T)beta, j->d, ldd);                                   \
        break;                                                                 \
    case VAL_SYR2K:                                                            \
        cblas_##p##syr2k(CblasRowMajor, uplo, tr, n, k, al, j->a, lda, j->b,   \
                         ldb, be, j->d, ldd);                                  \
        break;                                                                 \
    case VAL_HER2K:                                                            \
        cblas_##p##her2k(CblasRowMajor, uplo, tr, n, k, al, j->a, lda, j->b,   \
                         ldb, (T)beta, j->d, ldd);                             \
        break;                                                                 \
    case VAL_TRMM:                                                             \
        cblas_##p##trmm(CblasRowMajor, side, uplo, tr, diag, m, n, al, j->a,   \
                        lda, j->d, ldd);                                       \
        break;                                                                 \
    case VAL_TRSM:                                                             \
        cblas_##p##trsm(CblasRowMajor, side, uplo, tr, diag, m, n, al, j->a,   \
                        lda, j->d, ldd);                                       \
        break;                                                                 \
    default:                                                                   \
        goto bad;                                                              \
    }

int cpu_blas3(gemmd_job *j)
{
    if (j->m > INT_MAX || j->n > INT_MAX || j->k > INT_MAX ||
        j->lda > INT_MAX || j->ldb > INT_MAX || j->ldd > INT_MAX) {
        snprintf(j->msg, sizeof(j->msg),
                 "dimensions exceed the CPU backend's 32-bit BLAS");
        return GEMM_ERR_UNSUPPORTED;
    }
    CBLAS_SIDE side = j->right ? CblasRight : CblasLeft;
    CBLAS_UPLO uplo = j->lower ? CblasLower : CblasUpper;
    CBLAS_TRANSPOSE tr = op_of(j->op);
    CBLAS_DIAG diag = j->unit_diag ? CblasUnit : CblasNonUnit;
    int m = (int)j->m, n = (int)j->n, k = (int)j->k;
    int lda = (int)j->lda, ldb = (int)j->ldb, ldd = (int)j->ldd;
    /* beta 0: C is not read (the reference's rule, which OpenBLAS keeps) */
    double beta = j->has_c ? j->beta : 0.0, beta_im = j->has_c ? j->beta_im : 0;
    uint64_t t0 = gemmd_now_ns();
    switch (j->ab_type) {
    case GEMM_FP32:
        REAL_CASES(float, s)
        break;
    case GEMM_FP64:
        REAL_CASES(double, d)
        break;
    case GEMM_COMPLEX64: {
        float al[2] = {(float)j->alpha, (float)j->alpha_im};
        float be[2] = {(float)beta, (float)beta_im};
        CPLX_CASES(float, c)
        break;
    }
    case GEMM_COMPLEX128: {
        double al[2] = {j->alpha, j->alpha_im};
        double be[2] = {beta, beta_im};
        CPLX_CASES(double, z)
        break;
    }
    default:
        goto bad;
    }
    j->ns_kernel = gemmd_now_ns() - t0;
    if (j->ns_kernel == 0)
        j->ns_kernel = 1;
    snprintf(j->ran, sizeof(j->ran), "openblas");
    return GEMM_OK;
bad:
    snprintf(j->msg, sizeof(j->msg), "cpu backend: no %s for %s",
             val_routine_name(j->routine), gemm_dtype_name(j->ab_type));
    return GEMM_ERR_INTERNAL;
}
