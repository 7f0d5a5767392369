/*
 * blas3.cu: symm, hemm, syrk, herk, syr2k, her2k, trmm and trsm through
 * cuBLAS (the wide types' handle, wide.cu), for gemmk_blas3
 * (gemm_kernels_blas3.h).
 *
 * The problem is row-major (CBLAS's CblasRowMajor meaning); cuBLAS is
 * column-major, and a row-major X seen column-major is X^T. So, as
 * reference CBLAS restates a row-major call: symm, hemm, trmm and trsm
 * flip SIDE and UPLO and swap m and n (TRANSA stays: op(A)^T of the
 * transposed view is the same op); the rank updates flip UPLO and TRANS
 * (N <-> T, or N <-> C for herk and her2k), and her2k takes conj(alpha).
 * No data moves; cuBLAS touches only the triangles the reference does.
 * GEMMK_GEMM3, a plain GEMM for the off-diagonal blocks of a rank update
 * cut into panels and for a blocked trsm's updates (the daemon's
 * staging_blas3.c), is the column-major C^T = op_b(B)^T op(A)^T: cuBLAS's
 * gemm with the operands swapped and each keeping its op; in fp32 and
 * complex64 our own GEMM (row-major as it stands) where it takes the
 * leading dimensions. symm and hemm can run as GEMMK_GEMM3 on A made
 * whole (blas3_whole.cu).
 */
#include <cublas_v2.h>
#include <stdio.h>

#include "catalog.h"
#include "ctx_internal.h"
#include "gemm_kernels_blas3.h"

namespace gemmk
{
gemm_error wide_handle(gemmk_ctx *ctx, cudaStream_t s, cublasHandle_t *out);

namespace
{

/* What failed, named in res, as a gemm_error. */
gemm_error fail(gemmk_result *res, cublasStatus_t s, const char *what)
{
    snprintf(res->msg, sizeof(res->msg), "%s failed: %s (blas3.cu)", what,
             cublasGetStatusString(s));
    switch (s) {
    case CUBLAS_STATUS_ALLOC_FAILED:
        return GEMM_ERR_DEVICE_MEMORY;
    case CUBLAS_STATUS_NOT_SUPPORTED:
    case CUBLAS_STATUS_ARCH_MISMATCH:
        return GEMM_ERR_UNSUPPORTED;
    default:
        return GEMM_ERR_DEVICE;
    }
}

/* The column-major call of a row-major problem. */
struct Col {
    cublasSideMode_t side;
    cublasFillMode_t uplo;
    cublasOperation_t op;
    cublasDiagType_t diag;
    int64_t m, n;               /* symm, trmm, trsm */
    cublasOperation_t opa, opb; /* GEMMK_GEMM3 */
};

cublasOperation_t plain_op(int t, bool cplx)
{
    return t == 0 ? CUBLAS_OP_N : t == 1 || !cplx ? CUBLAS_OP_T : CUBLAS_OP_C;
}

Col colmajor(const gemmk_blas3_problem *p)
{
    Col c;
    bool rank = p->routine >= GEMMK_SYRK && p->routine <= GEMMK_HER2K;
    bool her = p->routine == GEMMK_HERK || p->routine == GEMMK_HER2K;
    c.side = p->right ? CUBLAS_SIDE_LEFT : CUBLAS_SIDE_RIGHT;
    c.uplo = p->lower ? CUBLAS_FILL_MODE_UPPER : CUBLAS_FILL_MODE_LOWER;
    c.diag = p->unit_diag ? CUBLAS_DIAG_UNIT : CUBLAS_DIAG_NON_UNIT;
    if (rank)
        c.op = p->trans == 0 ? (her ? CUBLAS_OP_C : CUBLAS_OP_T) : CUBLAS_OP_N;
    else
        c.op = p->trans == 0   ? CUBLAS_OP_N
               : p->trans == 1 ? CUBLAS_OP_T
                               : CUBLAS_OP_C;
    c.m = p->n;
    c.n = p->m;
    bool cplx = p->dtype == GEMM_COMPLEX64 || p->dtype == GEMM_COMPLEX128;
    c.opa = plain_op(p->trans, cplx);
    c.opb = plain_op(p->trans_b, cplx);
    return c;
}

/* The calls of one real type R (float/double): S and D prefixes. */
#define REAL_BLAS3(R, P)                                                       \
    gemm_error run_##P(cublasHandle_t h, const gemmk_blas3_problem *p,         \
                       const Col &c, gemmk_result *res)                        \
    {                                                                          \
        R al = (R)p->alpha[0], be = (R)p->beta[0];                             \
        const R *A = static_cast<const R *>(p->a);                             \
        const R *B = static_cast<const R *>(p->b);                             \
        R *C = static_cast<R *>(p->c);                                         \
        cublasStatus_t s;                                                      \
        switch (p->routine) {                                                  \
        case GEMMK_GEMM3:                                                      \
            s = cublas##P##gemm_64(h, c.opb, c.opa, p->n, p->m, p->k, &al, B,  \
                                   p->ldb, A, p->lda, &be, C, p->ldc);         \
            break;                                                             \
        case GEMMK_SYMM:                                                       \
            s = cublas##P##symm_64(h, c.side, c.uplo, c.m, c.n, &al, A,        \
                                   p->lda, B, p->ldb, &be, C, p->ldc);         \
            break;                                                             \
        case GEMMK_SYRK:                                                       \
            s = cublas##P##syrk_64(h, c.uplo, c.op, p->n, p->k, &al, A,        \
                                   p->lda, &be, C, p->ldc);                    \
            break;                                                             \
        case GEMMK_SYR2K:                                                      \
            s = cublas##P##syr2k_64(h, c.uplo, c.op, p->n, p->k, &al, A,       \
                                    p->lda, B, p->ldb, &be, C, p->ldc);        \
            break;                                                             \
        case GEMMK_TRMM:                                                       \
            s = cublas##P##trmm_64(h, c.side, c.uplo, c.op, c.diag, c.m, c.n,  \
                                   &al, A, p->lda, B ? B : C,                  \
                                   B ? p->ldb : p->ldc, C, p->ldc);            \
            break;                                                             \
        case GEMMK_TRSM:                                                       \
            s = cublas##P##trsm_64(h, c.side, c.uplo, c.op, c.diag, c.m, c.n,  \
                                   &al, A, p->lda, C, p->ldc);                 \
            break;                                                             \
        default:                                                               \
            snprintf(res->msg, sizeof(res->msg),                               \
                     "routine %d is not for a real type", p->routine);         \
            return GEMM_ERR_INVALID;                                           \
        }                                                                      \
        return s == CUBLAS_STATUS_SUCCESS ? GEMM_OK                            \
                                          : fail(res, s, "cuBLAS " #P);        \
    }

/* The calls of one complex type X (cuComplex/cuDoubleComplex) with real
 * part R: C and Z prefixes. */
#define CPLX_BLAS3(X, R, P)                                                    \
    gemm_error run_##P(cublasHandle_t h, const gemmk_blas3_problem *p,         \
                       const Col &c, gemmk_result *res)                        \
    {                                                                          \
        X al = {(R)p->alpha[0], (R)p->alpha[1]};                               \
        X be = {(R)p->beta[0], (R)p->beta[1]};                                 \
        R al_r = (R)p->alpha[0], be_r = (R)p->beta[0];                         \
        X al_conj = {(R)p->alpha[0], (R)-p->alpha[1]};                         \
        const X *A = static_cast<const X *>(p->a);                             \
        const X *B = static_cast<const X *>(p->b);                             \
        X *C = static_cast<X *>(p->c);                                         \
        cublasStatus_t s;                                                      \
        switch (p->routine) {                                                  \
        case GEMMK_GEMM3:                                                      \
            s = cublas##P##gemm_64(h, c.opb, c.opa, p->n, p->m, p->k, &al, B,  \
                                   p->ldb, A, p->lda, &be, C, p->ldc);         \
            break;                                                             \
        case GEMMK_SYMM:                                                       \
            s = cublas##P##symm_64(h, c.side, c.uplo, c.m, c.n, &al, A,        \
                                   p->lda, B, p->ldb, &be, C, p->ldc);         \
            break;                                                             \
        case GEMMK_HEMM:                                                       \
            s = cublas##P##hemm_64(h, c.side, c.uplo, c.m, c.n, &al, A,        \
                                   p->lda, B, p->ldb, &be, C, p->ldc);         \
            break;                                                             \
        case GEMMK_SYRK:                                                       \
            s = cublas##P##syrk_64(h, c.uplo, c.op, p->n, p->k, &al, A,        \
                                   p->lda, &be, C, p->ldc);                    \
            break;                                                             \
        case GEMMK_HERK:                                                       \
            s = cublas##P##herk_64(h, c.uplo, c.op, p->n, p->k, &al_r, A,      \
                                   p->lda, &be_r, C, p->ldc);                  \
            break;                                                             \
        case GEMMK_SYR2K:                                                      \
            s = cublas##P##syr2k_64(h, c.uplo, c.op, p->n, p->k, &al, A,       \
                                    p->lda, B, p->ldb, &be, C, p->ldc);        \
            break;                                                             \
        case GEMMK_HER2K:                                                      \
            s = cublas##P##her2k_64(h, c.uplo, c.op, p->n, p->k, &al_conj, A,  \
                                    p->lda, B, p->ldb, &be_r, C, p->ldc);      \
            break;                                                             \
        case GEMMK_TRMM:                                                       \
            s = cublas##P##trmm_64(h, c.side, c.uplo, c.op, c.diag, c.m, c.n,  \
                                   &al, A, p->lda, B ? B : C,                  \
                                   B ? p->ldb : p->ldc, C, p->ldc);            \
            break;                                                             \
        case GEMMK_TRSM:                                                       \
            s = cublas##P##trsm_64(h, c.side, c.uplo, c.op, c.diag, c.m, c.n,  \
                                   &al, A, p->lda, C, p->ldc);                 \
            break;                                                             \
        default:                                                               \
            snprintf(res->msg, sizeof(res->msg), "unknown routine %d",         \
                     p->routine);                                              \
            return GEMM_ERR_INVALID;                                           \
        }                                                                      \
        return s == CUBLAS_STATUS_SUCCESS ? GEMM_OK                            \
                                          : fail(res, s, "cuBLAS " #P);        \
    }

REAL_BLAS3(float, S)
REAL_BLAS3(double, D)
CPLX_BLAS3(cuComplex, float, C)
CPLX_BLAS3(cuDoubleComplex, double, Z)

const char *kernel_name(const gemmk_blas3_problem *p)
{
    static const char *const names[4][9] = {
        {"cublas-sgemm", "cublas-ssymm", "", "cublas-ssyrk", "",
         "cublas-ssyr2k", "", "cublas-strmm", "cublas-strsm"},
        {"cublas-dgemm", "cublas-dsymm", "", "cublas-dsyrk", "",
         "cublas-dsyr2k", "", "cublas-dtrmm", "cublas-dtrsm"},
        {"cublas-cgemm", "cublas-csymm", "cublas-chemm", "cublas-csyrk",
         "cublas-cherk", "cublas-csyr2k", "cublas-cher2k", "cublas-ctrmm",
         "cublas-ctrsm"},
        {"cublas-zgemm", "cublas-zsymm", "cublas-zhemm", "cublas-zsyrk",
         "cublas-zherk", "cublas-zsyr2k", "cublas-zher2k", "cublas-ztrmm",
         "cublas-ztrsm"},
    };
    int t = p->dtype == GEMM_FP32         ? 0
            : p->dtype == GEMM_FP64       ? 1
            : p->dtype == GEMM_COMPLEX64  ? 2
            : p->dtype == GEMM_COMPLEX128 ? 3
                                          : -1;
    if (t < 0 || p->routine < 0 || p->routine > 8 ||
        names[t][p->routine][0] == '\0')
        return nullptr;
    return names[t][p->routine];
}

/* GEMMK_GEMM3 on our GEMM where it outruns cuBLAS's: fp32 at fp32
 * accuracy (3xTF32 on the tensor cores, where cuBLAS's SGEMM runs on the
 * CUDA cores) and complex64 ("auto": the fp32 emulation where the
 * calibrated model says it is faster than CGEMM, else CGEMM), when its
 * leading dimensions and pointers are what gemmk_gemm takes (its
 * check_shape): true with *e its result; false for cuBLAS. */
bool gemm3_ours(gemmk_ctx *ctx, cudaStream_t s, const gemmk_blas3_problem *p,
                gemmk_result *res, gemm_error *e)
{
    if (p->routine != GEMMK_GEMM3 ||
        (p->dtype != GEMM_FP32 && p->dtype != GEMM_COMPLEX64))
        return false;
    const bool cplx = p->dtype == GEMM_COMPLEX64;
    gemmk_problem g = {};
    g.m = p->m;
    g.n = p->n;
    g.k = p->k;
    g.ab_type = p->dtype;
    g.cd_type = p->dtype;
    g.trans_a = p->trans != 0;
    g.trans_b = p->trans_b != 0;
    g.conj_a = cplx && p->trans == 2;
    g.conj_b = cplx && p->trans_b == 2;
    g.a = p->a;
    g.b = p->b;
    g.c = p->c;
    g.d = p->c;
    g.lda = p->lda;
    g.ldb = p->ldb;
    g.ldc = p->ldc;
    g.ldd = p->ldc;
    g.alpha = (float)p->alpha[0];
    g.beta = (float)p->beta[0];
    g.zalpha[0] = p->alpha[0];
    g.zalpha[1] = p->alpha[1];
    g.zbeta[0] = p->beta[0];
    g.zbeta[1] = p->beta[1];
    g.precision = cplx ? GEMM_PRECISION_DEFAULT : GEMM_PRECISION_FP32;
    const char *why = nullptr;
    if (check_shape(&g, &why) != GEMM_OK)
        return false;
    *e = gemmk_gemm(ctx, &g, s, nullptr, res);
    return true;
}

} // namespace
} // namespace gemmk

extern "C" gemm_error gemmk_blas3(gemmk_ctx *ctx, const gemmk_blas3_problem *p,
                                  cudaStream_t stream, gemmk_result *res)
{
    using namespace gemmk;
    gemmk_result dummy;
    if (!res)
        res = &dummy;
    res->msg[0] = '\0';
    res->kernel = p ? kernel_name(p) : nullptr;
    res->moduli = 0;
    if (!ctx || !p || !res->kernel || p->trans < 0 || p->trans > 2 ||
        (p->routine == GEMMK_GEMM3 && (p->trans_b < 0 || p->trans_b > 2))) {
        snprintf(res->msg, sizeof(res->msg),
                 "no such level-3 problem (routine %d, type %d, trans %d)",
                 p ? p->routine : -1, p ? (int)p->dtype : -1,
                 p ? p->trans : -1);
        return GEMM_ERR_INVALID;
    }
    cublasHandle_t h;
    ctx->msg[0] = '\0';
    gemm_error e = wide_handle(ctx, stream, &h);
    if (e != GEMM_OK) {
        snprintf(res->msg, sizeof(res->msg), "%s", ctx->msg);
        return e;
    }
    Col c = colmajor(p);
    switch (p->dtype) {
    case GEMM_FP32:
        if (!gemm3_ours(ctx, stream, p, res, &e))
            e = run_S(h, p, c, res);
        break;
    case GEMM_FP64:
        e = run_D(h, p, c, res);
        break;
    case GEMM_COMPLEX64:
        if (!gemm3_ours(ctx, stream, p, res, &e))
            e = run_C(h, p, c, res);
        break;
    default:
        e = run_Z(h, p, c, res);
    }
    if (e == GEMM_OK) {
        cudaError_t ce = cudaGetLastError();
        if (ce != cudaSuccess) {
            snprintf(res->msg, sizeof(res->msg), "after %s: %s", res->kernel,
                     cudaGetErrorString(ce));
            return cuda_err(ce);
        }
    }
    return e;
}
