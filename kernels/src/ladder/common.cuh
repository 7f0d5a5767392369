/*
 * common.cuh: what the ladder's CUDA-core rungs (naive ... warp-tiled) share:
 * element conversion to fp32, the op(A)/op(B) accessors for the four
 * transposes, the alpha/beta epilogue for bf16/fp16/fp32 C and D, and the
 * dispatch from a gemmk_problem's run-time types and transposes to a rung's
 * template instantiation.
 */
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime_api.h>
#include <stdint.h>
#include <string.h>

#include "gemm_kernels.h"

namespace gemmk
{
namespace ladder
{

__device__ __forceinline__ float to_f(float v)
{
    return v;
}
__device__ __forceinline__ float to_f(__half v)
{
    return __half2float(v);
}
__device__ __forceinline__ float to_f(__nv_bfloat16 v)
{
    return __bfloat162float(v);
}

template <typename O> __device__ __forceinline__ O from_f(float v);
template <> __device__ __forceinline__ float from_f<float>(float v)
{
    return v;
}
template <> __device__ __forceinline__ __half from_f<__half>(float v)
{
    return __float2half_rn(v);
}
template <>
__device__ __forceinline__ __nv_bfloat16 from_f<__nv_bfloat16>(float v)
{
    return __float2bfloat16_rn(v);
}

/*
 * A read-only view of op(X) for X stored row-major with leading dimension
 * ld: at(r, c) is op(X)[r][c], i.e. X[c][r] when TRANS. For A, (r, c) =
 * (m, k); for B, (k, n).
 */
template <typename T, bool TRANS> struct OpView {
    const T *p;
    int64_t ld;
    __device__ __forceinline__ float at(int64_t r, int64_t c) const
    {
        return TRANS ? to_f(p[c * ld + r]) : to_f(p[r * ld + c]);
    }
};

/*
 * Four consecutive elements of row `row` of a row-major matrix (rows x
 * cols, leading dimension ld), from column col (a multiple of 4), as fp32:
 * one 16-byte (fp32) or 8-byte (16-bit) load when all four are in range
 * (ld a multiple of 8 and a 16-byte aligned base make it aligned), else
 * element by element with zeros outside the matrix.
 */
template <typename T>
__device__ __forceinline__ void load4(const T *p, int64_t ld, int64_t rows,
                                      int64_t cols, int64_t row, int64_t col,
                                      float (&v)[4])
{
    if (row < rows && col + 3 < cols) {
        const T *q = p + row * ld + col;
        if constexpr (sizeof(T) == 4) {
            const float4 x = *reinterpret_cast<const float4 *>(q);
            v[0] = x.x;
            v[1] = x.y;
            v[2] = x.z;
            v[3] = x.w;
        } else {
            const uint2 x = *reinterpret_cast<const uint2 *>(q);
            T e[4];
            memcpy(e, &x, sizeof(x));
#pragma unroll
            for (int i = 0; i < 4; i++)
                v[i] = to_f(e[i]);
        }
        return;
    }
#pragma unroll
    for (int i = 0; i < 4; i++)
        v[i] =
            (row < rows && col + i < cols) ? to_f(p[row * ld + col + i]) : 0.0f;
}

/* The epilogue's view of C and D: D[i][j] = alpha * acc + beta * C[i][j];
 * C is not read when beta == 0. */
struct Epilogue {
    void *d;
    const void *c;
    int64_t ldc, ldd;
    float alpha, beta;
    gemm_dtype cd;

    /* The store for C/D of element type O (float, __half, __nv_bfloat16). */
    template <typename O>
    __device__ __forceinline__ void store_as(int64_t i, int64_t j,
                                             float acc) const
    {
        float v = alpha * acc;
        if (beta != 0.0f)
            v += beta * to_f(static_cast<const O *>(c)[i * ldc + j]);
        static_cast<O *>(d)[i * ldd + j] = from_f<O>(v);
    }

    /* The same, with cd chosen at run time. */
    __device__ __forceinline__ void store(int64_t i, int64_t j, float acc) const
    {
        switch (cd) {
        case GEMM_FP32:
            store_as<float>(i, j, acc);
            break;
        case GEMM_FP16:
            store_as<__half>(i, j, acc);
            break;
        default:
            store_as<__nv_bfloat16>(i, j, acc);
            break;
        }
    }

    /* Calls f(O{}) with O the C/D element type: epilogues that store many
     * elements per thread branch once, not per element. */
    template <typename F> __device__ __forceinline__ void with_type(F &&f) const
    {
        switch (cd) {
        case GEMM_FP32:
            f(float{});
            break;
        case GEMM_FP16:
            f(__half{});
            break;
        default:
            f(__nv_bfloat16{});
            break;
        }
    }
};

inline Epilogue make_epilogue(const gemmk_problem &p)
{
    return Epilogue{p.d, p.c, p.ldc, p.ldd, p.alpha, p.beta, p.cd_type};
}

template <typename T, bool TA, bool TB>
inline OpView<T, TA> view_a(const gemmk_problem &p)
{
    return OpView<T, TA>{static_cast<const T *>(p.a), p.lda};
}
template <typename T, bool TA, bool TB>
inline OpView<T, TB> view_b(const gemmk_problem &p)
{
    return OpView<T, TB>{static_cast<const T *>(p.b), p.ldb};
}

/*
 * Calls Rung<T, TA, TB>::launch(p, s) for p's A/B type and transposes.
 * Rung is a class template with a static launch function.
 */
template <template <typename, bool, bool> class Rung, typename T>
cudaError_t dispatch_trans(const gemmk_problem &p, cudaStream_t s)
{
    if (p.trans_a)
        return p.trans_b ? Rung<T, true, true>::launch(p, s)
                         : Rung<T, true, false>::launch(p, s);
    return p.trans_b ? Rung<T, false, true>::launch(p, s)
                     : Rung<T, false, false>::launch(p, s);
}

template <template <typename, bool, bool> class Rung>
cudaError_t dispatch(const gemmk_problem &p, cudaStream_t s)
{
    switch (p.ab_type) {
    case GEMM_BF16:
        return dispatch_trans<Rung, __nv_bfloat16>(p, s);
    case GEMM_FP16:
        return dispatch_trans<Rung, __half>(p, s);
    case GEMM_FP32:
        return dispatch_trans<Rung, float>(p, s);
    default:
        return cudaErrorInvalidValue;
    }
}

/* Ceiling division for grid sizes. */
inline unsigned cdiv(int64_t a, int64_t b)
{
    return static_cast<unsigned>((a + b - 1) / b);
}

/* The rungs' launchers (one translation unit each). */
cudaError_t run_naive(const gemmk_problem &p, cudaStream_t s);
cudaError_t run_smem_tiled(const gemmk_problem &p, cudaStream_t s);
cudaError_t run_reg_tiled_2d(const gemmk_problem &p, cudaStream_t s);
cudaError_t run_warp_tiled(const gemmk_problem &p, cudaStream_t s);
cudaError_t run_wgmma_basic(const gemmk_problem &p, cudaStream_t s);

} // namespace ladder
} // namespace gemmk
