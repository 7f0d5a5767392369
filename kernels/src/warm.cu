/*
 * warm.cu: gemmk_ctx_warm, the first-use costs of a context paid before
 * a client's request meets them: the CUDA modules of the kernels "auto"
 * picks (loaded lazily on first launch), cuBLAS's first DGEMM, ZGEMM and
 * CGEMM (its kernels and workspace), the fp64 emulation's (the int8
 * kernel, its passes, its cuBLASLt handle), the tensor-map encoder. It runs
 * representative products on zeroed scratch and frees it again.
 */
#include <stdio.h>
#include <string.h>

#include "ctx_internal.h"
#include "knobs.h"

namespace
{

struct WarmShape {
    const char *name;
    gemm_dtype ab, cd;
    size_t esize;    /* bytes per element of A, B and D */
    int64_t n;       /* m = n = k */
    bool full_only;  /* only in the full warm-up (the big shapes) */
    int host_mapped; /* the direct path's choice (gemmk_problem) */
    int moduli;      /* fp64: the Ozaki-II emulation with that many */
};

/* The shapes whose kernels a first request most likely meets: the
 * large-square and small-square choices of each type family. */
const WarmShape kShapes[] = {
    {"bf16", GEMM_BF16, GEMM_BF16, 2, 4096, true, 0, 0},
    {"bf16", GEMM_BF16, GEMM_BF16, 2, 64, false, 0, 0},
    {"bf16", GEMM_BF16, GEMM_BF16, 2, 64, false, 1, 0},
    {"fp16", GEMM_FP16, GEMM_FP16, 2, 4096, true, 0, 0},
    {"fp32", GEMM_FP32, GEMM_FP32, 4, 1024, true, 0, 0},
    {"fp64", GEMM_FP64, GEMM_FP64, 8, 4096, true, 0, 0},
    {"fp64", GEMM_FP64, GEMM_FP64, 8, 1024, true, 0, 0},
    {"fp64", GEMM_FP64, GEMM_FP64, 8, 64, false, 0, 0},
    {"fp64 emulated", GEMM_FP64, GEMM_FP64, 8, 1024, true, 0, 15},
    {"complex128", GEMM_COMPLEX128, GEMM_COMPLEX128, 16, 1024, true, 0, 0},
    {"complex64", GEMM_COMPLEX64, GEMM_COMPLEX64, 8, 1024, true, 0, 0},
};

size_t shape_bytes(const WarmShape &s)
{
    return (size_t)s.n * (size_t)s.n * s.esize;
}

} // namespace

extern "C" gemm_error gemmk_ctx_warm(gemmk_ctx *ctx, cudaStream_t stream,
                                     int full, char *msg, size_t len)
{
    if (!ctx)
        return GEMM_ERR_INVALID;
    if (!gemmk::ctx_knob(ctx, gemmk::KNOB_WARM))
        return GEMM_OK;
    size_t need = 0;
    for (const WarmShape &s : kShapes)
        if (full || !s.full_only)
            need = shape_bytes(s) > need ? shape_bytes(s) : need;
    /* A, B and D apart, each 256-byte aligned */
    const size_t slot = (need + 255) / 256 * 256;
    char *buf = nullptr;
    cudaError_t ce = cudaMalloc(&buf, 3 * slot);
    if (ce != cudaSuccess) {
        cudaGetLastError();
        snprintf(msg, len, "cudaMalloc(%zu bytes of warm-up scratch): %s",
                 3 * slot, cudaGetErrorString(ce));
        return gemmk::cuda_err(ce);
    }
    gemm_error e = GEMM_OK;
    ce = cudaMemsetAsync(buf, 0, 3 * slot, stream);
    if (ce != cudaSuccess) {
        snprintf(msg, len, "cudaMemsetAsync(warm-up scratch): %s",
                 cudaGetErrorString(ce));
        e = gemmk::cuda_err(ce);
    }
    for (const WarmShape &s : kShapes) {
        if (e != GEMM_OK)
            break;
        if (!full && s.full_only)
            continue;
        gemmk_problem p;
        memset(&p, 0, sizeof(p));
        p.m = p.n = p.k = s.n;
        p.ab_type = s.ab;
        p.cd_type = s.cd;
        p.a = buf;
        p.b = buf + slot;
        p.d = buf + 2 * slot;
        p.lda = p.ldb = p.ldd = p.ldc = s.n;
        p.alpha = 1.0f;
        p.zalpha[0] = 1.0;
        p.host_mapped = s.host_mapped;
        p.moduli = s.moduli;
        gemmk_result res;
        e = gemmk_gemm(ctx, &p, stream, "auto", &res);
        if (e != GEMM_OK)
            snprintf(msg, len, "%lld^3 %s: %s", (long long)s.n, s.name,
                     res.msg);
    }
    if (e == GEMM_OK && (ce = cudaStreamSynchronize(stream)) != cudaSuccess) {
        snprintf(msg, len, "cudaStreamSynchronize: %s", cudaGetErrorString(ce));
        e = gemmk::cuda_err(ce);
    }
    if (e != GEMM_OK)
        cudaStreamSynchronize(stream); /* nothing may still use buf */
    gemmk_cache_forget(ctx, buf, 3 * slot);
    ce = cudaFree(buf);
    if (ce != cudaSuccess && e == GEMM_OK) {
        snprintf(msg, len, "cudaFree(warm-up scratch): %s",
                 cudaGetErrorString(ce));
        e = gemmk::cuda_err(ce);
    }
    return e;
}
