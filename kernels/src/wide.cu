/*
 * wide.cu: the wide types (fp64, complex64, complex128) through
 * gemmk_gemm: cuBLAS DGEMM, CGEMM and ZGEMM ("cublas", and "auto" for
 * the complex types, with conjugate transposes), and fp64 through
 * gemmk_gemm_f64 ("auto": DGEMM or the Ozaki-II emulation by the
 * calibrated cost model; the emulations and cuBLASLt DGEMM by name). D is
 * updated in place: C, when it is not D already, is first copied into D.
 *
 * Row-major D = op(A) op(B) is the column-major D^T = op(B)^T op(A)^T: B
 * goes first and m, n swap; a row-major X seen column-major is X^T, so the
 * ops stay N, T or C as the request says.
 */
#include <cublas_v2.h>
#include <stdlib.h>
#include <string.h>

#include "catalog.h"
#include "ctx_internal.h"
#include "grouped_wide.h"

namespace gemmk
{

struct WideState {
    cublasHandle_t h;
    cudaStream_t stream; /* the stream h is set to */
};

namespace
{

cublasOperation_t blas_op(int trans, int conj)
{
    return !trans ? CUBLAS_OP_N : conj ? CUBLAS_OP_C : CUBLAS_OP_T;
}

bool beta_nonzero(const gemmk_problem *p)
{
    return p->zbeta[0] != 0.0 || p->zbeta[1] != 0.0;
}

} // namespace

gemm_error blas_fail(gemmk_ctx *ctx, cublasStatus_t s, const char *what,
                     const char *file, int line)
{
    const char *base = strrchr(file, '/');
    ctx_say(ctx, "%s failed: %s (%s:%d)", what, cublasGetStatusString(s),
            base ? base + 1 : file, line);
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

/* C into D when C is read and is not D already (D is updated in place). */
gemm_error c_into_d(gemmk_ctx *ctx, const gemmk_problem *p, size_t es,
                    cudaStream_t s)
{
    if (!beta_nonzero(p) || p->c == p->d)
        return GEMM_OK;
    GEMMK_CK(ctx,
             cudaMemcpy2DAsync(p->d, p->ldd * es, p->c, p->ldc * es, p->n * es,
                               p->m, cudaMemcpyDeviceToDevice, s));
    return GEMM_OK;
}

gemm_error wide_create(gemmk_ctx *ctx, WideState **out)
{
    WideState *st = static_cast<WideState *>(calloc(1, sizeof(*st)));
    if (!st)
        return GEMM_ERR_NOMEM;
    gemm_error e = GEMM_OK;
    cublasStatus_t s = cublasCreate(&st->h);
    if (s == CUBLAS_STATUS_SUCCESS)
        s = cublasSetPointerMode(st->h, CUBLAS_POINTER_MODE_HOST);
    if (s != CUBLAS_STATUS_SUCCESS) {
        e = blas_fail(ctx, s, "cublasCreate", __FILE__, __LINE__);
        if (st->h)
            cublasDestroy(st->h);
        free(st);
        return e;
    }
    *out = st;
    return GEMM_OK;
}

void wide_free(WideState *st)
{
    if (!st)
        return;
    cublasDestroy(st->h);
    free(st);
}

/* The wide types' cuBLAS handle, set to stream s, for the other level-3
 * routines (blas3.cu). */
gemm_error wide_handle(gemmk_ctx *ctx, cudaStream_t s, cublasHandle_t *out)
{
    WideState *st = ctx->wide;
    if (st->stream != s || !st->stream) {
        GEMMK_CB(ctx, cublasSetStream(st->h, s));
        st->stream = s;
    }
    *out = st->h;
    return GEMM_OK;
}

/* cuBLAS DGEMM, CGEMM, ZGEMM of a wide problem on s. */
gemm_error wide_blas(gemmk_ctx *ctx, const gemmk_problem *p, cudaStream_t s)
{
    WideState *st = ctx->wide;
    if (st->stream != s || !st->stream) {
        GEMMK_CB(ctx, cublasSetStream(st->h, s));
        st->stream = s;
    }
    cublasOperation_t opb = blas_op(p->trans_b, p->conj_b);
    cublasOperation_t opa = blas_op(p->trans_a, p->conj_a);
    int64_t cm = p->n, cn = p->m, ck = p->k;
    const bool usec = beta_nonzero(p);
    gemm_error e;
    switch (p->ab_type) {
    case GEMM_FP64: {
        if ((e = c_into_d(ctx, p, sizeof(double), s)) != GEMM_OK)
            return e;
        double al = p->zalpha[0], be = usec ? p->zbeta[0] : 0.0;
        GEMMK_CB(ctx, cublasDgemm_64(st->h, opb, opa, cm, cn, ck, &al,
                                     static_cast<const double *>(p->b), p->ldb,
                                     static_cast<const double *>(p->a), p->lda,
                                     &be, static_cast<double *>(p->d), p->ldd));
        break;
    }
    case GEMM_COMPLEX64: {
        if ((e = c_into_d(ctx, p, sizeof(cuComplex), s)) != GEMM_OK)
            return e;
        cuComplex al = {(float)p->zalpha[0], (float)p->zalpha[1]};
        cuComplex be = {usec ? (float)p->zbeta[0] : 0.0f,
                        usec ? (float)p->zbeta[1] : 0.0f};
        GEMMK_CB(ctx,
                 cublasCgemm_64(st->h, opb, opa, cm, cn, ck, &al,
                                static_cast<const cuComplex *>(p->b), p->ldb,
                                static_cast<const cuComplex *>(p->a), p->lda,
                                &be, static_cast<cuComplex *>(p->d), p->ldd));
        break;
    }
    case GEMM_COMPLEX128: {
        if ((e = c_into_d(ctx, p, sizeof(cuDoubleComplex), s)) != GEMM_OK)
            return e;
        cuDoubleComplex al = {p->zalpha[0], p->zalpha[1]};
        cuDoubleComplex be = {usec ? p->zbeta[0] : 0.0,
                              usec ? p->zbeta[1] : 0.0};
        GEMMK_CB(ctx, cublasZgemm_64(
                          st->h, opb, opa, cm, cn, ck, &al,
                          static_cast<const cuDoubleComplex *>(p->b), p->ldb,
                          static_cast<const cuDoubleComplex *>(p->a), p->lda,
                          &be, static_cast<cuDoubleComplex *>(p->d), p->ldd));
        break;
    }
    default:
        ctx_say(ctx, "not a wide type: %d", (int)p->ab_type);
        return GEMM_ERR_INTERNAL;
    }
    GEMMK_CK(ctx, cudaGetLastError());
    return GEMM_OK;
}

gemm_error run_f64(gemmk_ctx *ctx, const gemmk_problem *p, cudaStream_t s,
                   const Row &row, gemmk_result *res)
{
    const bool usec = beta_nonzero(p);
    gemmk_problem_f64 q = {};
    q.m = p->m, q.n = p->n, q.k = p->k;
    q.trans_a = p->trans_a, q.trans_b = p->trans_b;
    q.a = static_cast<const double *>(p->a);
    q.b = static_cast<const double *>(p->b);
    q.c = usec ? static_cast<const double *>(p->c) : nullptr;
    q.d = static_cast<double *>(p->d);
    q.lda = p->lda, q.ldb = p->ldb;
    q.ldc = usec ? p->ldc : p->ldd;
    q.ldd = p->ldd;
    q.alpha = p->zalpha[0];
    q.beta = usec ? p->zbeta[0] : 0.0;
    q.moduli = p->moduli;
    q.method = GEMMK_F64_AUTO;
    gemmk_f64_result r = {};
    gemm_error e = gemmk_gemm_f64(ctx, &q, s, row.d.name, &r);
    res->kernel = r.kernel ? r.kernel : row.d.name;
    res->moduli = r.moduli;
    if (e != GEMM_OK)
        ctx_say(ctx, "fp64 kernel %s failed", res->kernel);
    return e;
}

} // namespace gemmk
