/*
 * blas3_whole.cu: symm and hemm as GEMMs. The reference reads one
 * triangle of A; written out whole (the other triangle mirrored or
 * conjugated), A is an operand our GEMMs take, and in fp32 and complex64
 * those (3xTF32 on the tensor cores, the fp32 emulation) run 2-3x faster
 * than cuBLAS's symm and hemm on the CUDA cores, at no extra flops. The
 * daemon (staging_blas3.c) makes A whole once per job and runs each
 * panel of the output as one GEMMK_GEMM3. (trmm runs by blocks instead:
 * a whole triangle would double its flops.)
 *
 * The kernel works on 32 x 32 tiles of the output, 32 x 8 threads: tile
 * (bi, bj) reads its mirror tile (bj, bi) through shared memory, so that
 * both the reads and the writes run along rows.
 */
#include <stdio.h>

#include "ctx_internal.h"
#include "gemm_kernels_blas3.h"
#include "knobs.h"

namespace gemmk
{
namespace
{

enum Fill {
    FILL_SYM,  /* symm: A[j][i] = A[i][j] */
    FILL_HERM, /* hemm: conj, a real diagonal */
};

__device__ float conj_of(float x)
{
    return x;
}
__device__ double conj_of(double x)
{
    return x;
}
__device__ float2 conj_of(float2 x)
{
    return make_float2(x.x, -x.y);
}
__device__ double2 conj_of(double2 x)
{
    return make_double2(x.x, -x.y);
}

__device__ float real_of(float x)
{
    return x;
}
__device__ double real_of(double x)
{
    return x;
}
__device__ float2 real_of(float2 x)
{
    return make_float2(x.x, 0.f);
}
__device__ double2 real_of(double2 x)
{
    return make_double2(x.x, 0.0);
}

template <typename T>
__global__ void whole_kernel(const T *src, int64_t lds, T *dst, int64_t ldd,
                             int64_t n, int lower, int fill)
{
    __shared__ T t[32][33];
    const int64_t bi = blockIdx.y, bj = blockIdx.x;
    const int tx = threadIdx.x, ty = threadIdx.y;
    const bool in_place = (const void *)src == (const void *)dst;
    /* the output tile lies wholly in the referenced triangle: in place,
     * nothing in it changes */
    const bool tile_ref = lower ? bj < bi : bj > bi;
    if (tile_ref && in_place)
        return;
    if (bi != bj && !tile_ref) { /* the mirror tile, referenced */
        for (int r = ty; r < 32; r += 8) {
            const int64_t i = bj * 32 + r, j = bi * 32 + tx;
            if (i < n && j < n)
                t[r][tx] = src[i * lds + j];
        }
    } else if (bi == bj) { /* its own referenced half */
        for (int r = ty; r < 32; r += 8) {
            const int64_t i = bj * 32 + r, j = bi * 32 + tx;
            if (i < n && j < n && (lower ? j <= i : j >= i))
                t[r][tx] = src[i * lds + j];
        }
    }
    __syncthreads();
    for (int r = ty; r < 32; r += 8) {
        const int64_t i = bi * 32 + r, j = bj * 32 + tx;
        if (i >= n || j >= n)
            continue;
        T v;
        if (i == j) {
            if (fill == FILL_HERM)
                v = real_of(src[i * lds + j]);
            else if (in_place)
                continue;
            else
                v = src[i * lds + j];
        } else if (lower ? j < i : j > i) {
            if (in_place)
                continue;
            v = src[i * lds + j];
        } else {
            const T m = t[tx][r]; /* src[j][i] */
            v = fill == FILL_HERM ? conj_of(m) : m;
        }
        dst[i * ldd + j] = v;
    }
}

template <typename T>
gemm_error launch(gemmk_ctx *ctx, const void *src, int64_t lds, void *dst,
                  int64_t ldd, int64_t n, int lower, int fill, cudaStream_t s)
{
    const dim3 grid((unsigned)((n + 31) / 32), (unsigned)((n + 31) / 32));
    whole_kernel<T><<<grid, dim3(32, 8), 0, s>>>(static_cast<const T *>(src),
                                                 lds, static_cast<T *>(dst),
                                                 ldd, n, lower, fill);
    GEMMK_CK(ctx, cudaGetLastError());
    return GEMM_OK;
}

using Launch = gemm_error (*)(gemmk_ctx *, const void *, int64_t, void *,
                              int64_t, int64_t, int, int, cudaStream_t);

/* The kernel's launch for an element type; nullptr for another type. */
Launch launcher(gemm_dtype t)
{
    switch (t) {
    case GEMM_FP32:
        return launch<float>;
    case GEMM_FP64:
        return launch<double>;
    case GEMM_COMPLEX64:
        return launch<float2>;
    case GEMM_COMPLEX128:
        return launch<double2>;
    default:
        return nullptr;
    }
}

bool alpha_zero(const gemmk_blas3_problem *p)
{
    return p->alpha[0] == 0.0 && p->alpha[1] == 0.0;
}

} // namespace
} // namespace gemmk

using namespace gemmk;

extern "C" int gemmk_blas3_whole_pays(const gemmk_ctx *ctx,
                                      const gemmk_blas3_problem *p)
{
    if (!ctx || !p || (p->routine != GEMMK_SYMM && p->routine != GEMMK_HEMM) ||
        alpha_zero(p))
        return 0;
    const int knob = ctx_knob(ctx, KNOB_BLAS3_WHOLE);
    if (knob >= 0)
        return knob;
    return p->dtype == GEMM_FP32 || p->dtype == GEMM_COMPLEX64;
}

extern "C" gemm_error gemmk_blas3_whole(gemmk_ctx *ctx,
                                        const gemmk_blas3_problem *p, void *dst,
                                        int64_t ldd, cudaStream_t stream,
                                        gemmk_result *res)
{
    gemmk_result dummy;
    if (!res)
        res = &dummy;
    res->msg[0] = '\0';
    res->kernel = "blas3-whole";
    res->moduli = 0;
    if (!ctx || !p || !p->a || !dst ||
        (p->routine != GEMMK_SYMM && p->routine != GEMMK_HEMM) ||
        (p->routine == GEMMK_HEMM && p->dtype != GEMM_COMPLEX64 &&
         p->dtype != GEMM_COMPLEX128)) {
        snprintf(res->msg, sizeof(res->msg),
                 "no whole matrix for routine %d, type %d", p ? p->routine : -1,
                 p ? (int)p->dtype : -1);
        return GEMM_ERR_INVALID;
    }
    const int64_t n = p->right ? p->n : p->m;
    if (n < 1 || p->lda < n || ldd < n || n > 32 * 65535LL) {
        snprintf(res->msg, sizeof(res->msg),
                 "whole matrix of order %lld (lda %lld, ldd %lld)",
                 (long long)n, (long long)p->lda, (long long)ldd);
        return GEMM_ERR_INVALID;
    }
    const int fill = p->routine == GEMMK_SYMM ? FILL_SYM : FILL_HERM;
    const Launch run = launcher(p->dtype);
    if (!run) {
        snprintf(res->msg, sizeof(res->msg), "no whole matrix of type %d",
                 (int)p->dtype);
        return GEMM_ERR_INVALID;
    }
    ctx->msg[0] = '\0';
    const gemm_error e =
        run(ctx, p->a, p->lda, dst, ldd, n, p->lower, fill, stream);
    if (e != GEMM_OK)
        snprintf(res->msg, sizeof(res->msg), "%s", ctx->msg);
    return e;
}
