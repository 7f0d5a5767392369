/*
 * cublas.cu: the catalog's reference entry, cuBLASLt with its heuristic's
 * first algorithm (split-K reductions in the compute type only). Row-major D =
 * op(A) op(B) is the column-major product D^T = op(B)^T op(A)^T, so B goes in
 * cuBLASLt's A slot and A in its B slot, with m and n swapped. Type pairs
 * cuBLASLt has no kernel for (bf16 in, fp16 out; fp16 in, bf16 out; fp32 in,
 * 16-bit out) run as an fp32 product into a stream-ordered temporary and a
 * small epilogue kernel. fp32 inputs: precision TF32 ->
 * CUBLAS_COMPUTE_32F_FAST_TF32, FP32 and DEFAULT -> CUBLAS_COMPUTE_32F (true
 * fp32).
 */
#include <cublasLt.h>
#include <stdlib.h>
#include <string.h>

#include "common.cuh"
#include "ladder.h"

namespace gemmk
{
namespace ladder
{

namespace
{

constexpr size_t kWorkspaceBytes = 32u << 20;

/* Everything the cached descriptors depend on. */
struct Key {
    int64_t m, n, k, lda, ldb, ldc, ldd;
    int ab, cd, ta, tb, prec;
    bool operator==(const Key &o) const
    {
        return memcmp(this, &o, sizeof(Key)) == 0;
    }
};

cudaDataType_t cuda_type(gemm_dtype t)
{
    return t == GEMM_BF16   ? CUDA_R_16BF
           : t == GEMM_FP16 ? CUDA_R_16F
                            : CUDA_R_32F;
}

gemm_error from_status(cublasStatus_t st)
{
    switch (st) {
    case CUBLAS_STATUS_SUCCESS:
        return GEMM_OK;
    case CUBLAS_STATUS_ALLOC_FAILED:
        return GEMM_ERR_DEVICE_MEMORY;
    case CUBLAS_STATUS_NOT_SUPPORTED:
    case CUBLAS_STATUS_ARCH_MISMATCH:
        return GEMM_ERR_UNSUPPORTED;
    default:
        return GEMM_ERR_DEVICE;
    }
}

gemm_error from_cuda(cudaError_t e)
{
    if (e == cudaSuccess)
        return GEMM_OK;
    return e == cudaErrorMemoryAllocation ? GEMM_ERR_DEVICE_MEMORY
                                          : GEMM_ERR_DEVICE;
}

/* cuBLASLt has a kernel for these (A/B, C/D) pairs with fp32 compute. */
bool native_pair(gemm_dtype ab, gemm_dtype cd)
{
    return ab == cd || cd == GEMM_FP32;
}

/* D = tmp + beta * C, tmp fp32 (ld n), already scaled by alpha. */
__global__ void finish_kernel(const float *tmp, Epilogue e, int64_t m,
                              int64_t n)
{
    int64_t j = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
    if (j >= n)
        return;
    for (int64_t i = blockIdx.y; i < m; i += gridDim.y)
        e.store(i, j, tmp[i * n + j]);
}

} // namespace

struct CublasState {
    cublasLtHandle_t lt;
    void *ws; /* kWorkspaceBytes of device memory */
    /* The last problem's descriptors and algorithm (valid when have). */
    bool have;
    Key key;
    cublasLtMatmulDesc_t op;
    cublasLtMatrixLayout_t la, lb, lc, ld;
    cublasLtMatmulAlgo_t algo;
};

namespace
{

void drop_cached(CublasState *st)
{
    if (!st->have)
        return;
    cublasLtMatmulDescDestroy(st->op);
    cublasLtMatrixLayoutDestroy(st->la);
    cublasLtMatrixLayoutDestroy(st->lb);
    cublasLtMatrixLayoutDestroy(st->lc);
    cublasLtMatrixLayoutDestroy(st->ld);
    st->have = false;
}

/* Makes st's descriptors and algorithm for p (m, n as cuBLASLt sees them:
 * D^T is n x m column-major). C/D are fp32 when !native. */
gemm_error prepare(CublasState *st, const gemmk_problem &p, bool native)
{
    Key key;
    memset(&key, 0, sizeof(key));
    key.m = p.m;
    key.n = p.n;
    key.k = p.k;
    key.lda = p.lda;
    key.ldb = p.ldb;
    key.ldc = native ? p.ldc : p.n;
    key.ldd = native ? p.ldd : p.n;
    key.ab = p.ab_type;
    key.cd = native ? p.cd_type : GEMM_FP32;
    key.ta = p.trans_a;
    key.tb = p.trans_b;
    key.prec = p.ab_type == GEMM_FP32 ? p.precision : 0;
    if (st->have && st->key == key)
        return GEMM_OK;
    drop_cached(st);

    cublasComputeType_t ct =
        (p.ab_type == GEMM_FP32 && p.precision == GEMM_PRECISION_TF32)
            ? CUBLAS_COMPUTE_32F_FAST_TF32
            : CUBLAS_COMPUTE_32F;
    cudaDataType_t ab = cuda_type(p.ab_type);
    cudaDataType_t cd = cuda_type(static_cast<gemm_dtype>(key.cd));
    cublasOperation_t opa = p.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
    cublasOperation_t opb = p.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
    cublasLtMatmulDesc_t op = nullptr;
    cublasLtMatrixLayout_t la = nullptr, lb = nullptr, lc = nullptr,
                           ld = nullptr;
    cublasLtMatmulPreference_t pref = nullptr;
    cublasLtMatmulHeuristicResult_t res;
    int found = 0;
    size_t ws = kWorkspaceBytes;
    cublasStatus_t s = cublasLtMatmulDescCreate(&op, ct, CUDA_R_32F);
    if (s == CUBLAS_STATUS_SUCCESS)
        s = cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSA,
                                           &opa, sizeof(opa));
    if (s == CUBLAS_STATUS_SUCCESS)
        s = cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSB,
                                           &opb, sizeof(opb));
    /* Lt's A = stored B: N x K column-major, or K x N when trans_b. */
    if (s == CUBLAS_STATUS_SUCCESS)
        s = cublasLtMatrixLayoutCreate(&la, ab, p.trans_b ? p.k : p.n,
                                       p.trans_b ? p.n : p.k, p.ldb);
    /* Lt's B = stored A: K x M column-major, or M x K when trans_a. */
    if (s == CUBLAS_STATUS_SUCCESS)
        s = cublasLtMatrixLayoutCreate(&lb, ab, p.trans_a ? p.m : p.k,
                                       p.trans_a ? p.k : p.m, p.lda);
    if (s == CUBLAS_STATUS_SUCCESS)
        s = cublasLtMatrixLayoutCreate(&lc, cd, p.n, p.m, key.ldc);
    if (s == CUBLAS_STATUS_SUCCESS)
        s = cublasLtMatrixLayoutCreate(&ld, cd, p.n, p.m, key.ldd);
    if (s == CUBLAS_STATUS_SUCCESS)
        s = cublasLtMatmulPreferenceCreate(&pref);
    if (s == CUBLAS_STATUS_SUCCESS)
        s = cublasLtMatmulPreferenceSetAttribute(
            pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof(ws));
    /* Split-K partials reduced in the output type (bf16/fp16) lose
     * ~2^-9 of the partial sums: not what a reference may do. */
    uint32_t schemes =
        CUBLASLT_REDUCTION_SCHEME_MASK & ~CUBLASLT_REDUCTION_SCHEME_OUTPUT_TYPE;
    if (s == CUBLAS_STATUS_SUCCESS)
        s = cublasLtMatmulPreferenceSetAttribute(
            pref, CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK, &schemes,
            sizeof(schemes));
    if (s == CUBLAS_STATUS_SUCCESS)
        s = cublasLtMatmulAlgoGetHeuristic(st->lt, op, la, lb, lc, ld, pref, 1,
                                           &res, &found);
    if (s == CUBLAS_STATUS_SUCCESS && found < 1)
        s = CUBLAS_STATUS_NOT_SUPPORTED;
    if (pref)
        cublasLtMatmulPreferenceDestroy(pref);
    if (s != CUBLAS_STATUS_SUCCESS) {
        if (op)
            cublasLtMatmulDescDestroy(op);
        if (la)
            cublasLtMatrixLayoutDestroy(la);
        if (lb)
            cublasLtMatrixLayoutDestroy(lb);
        if (lc)
            cublasLtMatrixLayoutDestroy(lc);
        if (ld)
            cublasLtMatrixLayoutDestroy(ld);
        return from_status(s);
    }
    st->key = key;
    st->op = op;
    st->la = la;
    st->lb = lb;
    st->lc = lc;
    st->ld = ld;
    st->algo = res.algo;
    st->have = true;
    return GEMM_OK;
}

gemm_error create(CublasState **out)
{
    CublasState *st = static_cast<CublasState *>(calloc(1, sizeof(*st)));
    if (!st)
        return GEMM_ERR_NOMEM;
    cublasStatus_t s = cublasLtCreate(&st->lt);
    if (s != CUBLAS_STATUS_SUCCESS) {
        free(st);
        return from_status(s);
    }
    cudaError_t e = cudaMalloc(&st->ws, kWorkspaceBytes);
    if (e != cudaSuccess) {
        cublasLtDestroy(st->lt);
        free(st);
        return from_cuda(e);
    }
    *out = st;
    return GEMM_OK;
}

} // namespace

gemm_error cublas_run(CublasState **stp, const gemmk_problem &p, cudaStream_t s)
{
    if (!stp)
        return GEMM_ERR_INVALID;
    if (!*stp) {
        gemm_error rv = create(stp);
        if (rv != GEMM_OK)
            return rv;
    }
    CublasState *st = *stp;
    bool native = native_pair(p.ab_type, p.cd_type);
    gemm_error rv = prepare(st, p, native);
    if (rv != GEMM_OK)
        return rv;
    if (native) {
        float beta = p.beta;
        /* beta == 0: cuBLAS does not read C; give it D so C may be NULL. */
        const void *c = beta != 0.0f ? p.c : p.d;
        cublasStatus_t cs = cublasLtMatmul(
            st->lt, st->op, &p.alpha, p.b, st->la, p.a, st->lb, &beta, c,
            st->lc, p.d, st->ld, &st->algo, st->ws, kWorkspaceBytes, s);
        return from_status(cs);
    }
    /* No native kernel for this pair: fp32 alpha*op(A)op(B), then
     * D = tmp + beta*C in cd_type. */
    void *tmp = nullptr;
    cudaError_t e = cudaMallocAsync(
        &tmp, static_cast<size_t>(p.m) * p.n * sizeof(float), s);
    if (e != cudaSuccess)
        return from_cuda(e);
    float zero = 0.0f;
    cublasStatus_t cs = cublasLtMatmul(
        st->lt, st->op, &p.alpha, p.b, st->la, p.a, st->lb, &zero, tmp, st->lc,
        tmp, st->ld, &st->algo, st->ws, kWorkspaceBytes, s);
    rv = from_status(cs);
    if (rv == GEMM_OK) {
        Epilogue ep = make_epilogue(p);
        ep.alpha = 1.0f;
        dim3 grid(cdiv(p.n, 256),
                  static_cast<unsigned>(p.m < 65535 ? p.m : 65535));
        finish_kernel<<<grid, 256, 0, s>>>(static_cast<float *>(tmp), ep, p.m,
                                           p.n);
        rv = from_cuda(cudaGetLastError());
    }
    e = cudaFreeAsync(tmp, s);
    if (rv == GEMM_OK)
        rv = from_cuda(e);
    return rv;
}

void cublas_free(CublasState *st)
{
    if (!st)
        return;
    drop_cached(st);
    cudaFree(st->ws);
    cublasLtDestroy(st->lt);
    free(st);
}

} // namespace ladder
} // namespace gemmk
