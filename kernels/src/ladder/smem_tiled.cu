/*
 * smem_tiled.cu: rung 2 of the ladder (seed 003 v2): a 32 x 32 block of
 * threads computes a 32 x 32 tile of D, staging 32 x 32 tiles of op(A) and
 * op(B) through shared memory so each global element is read once per
 * block instead of once per thread. threadIdx.x walks N (coalesced B loads
 * and D stores, A values broadcast within a warp). Transposed operands are
 * loaded with threadIdx.x along their contiguous dimension, so global
 * reads stay coalesced for all four transposes; the tiles are padded by
 * one column so the transposed shared-memory stores avoid bank conflicts.
 * Out-of-range elements are loaded as zero.
 */
#include "common.cuh"

namespace gemmk
{
namespace ladder
{
namespace
{

constexpr int kTile = 32;

template <typename T, bool TA, bool TB>
__global__ void __launch_bounds__(kTile *kTile)
    smem_tiled_kernel(OpView<T, TA> a, OpView<T, TB> b, Epilogue e, int64_t m,
                      int64_t n, int64_t k)
{
    __shared__ float sa[kTile][kTile + 1]; /* [m][k] */
    __shared__ float sb[kTile][kTile + 1]; /* [k][n] */
    const int tx = threadIdx.x, ty = threadIdx.y;
    const int64_t row0 = static_cast<int64_t>(blockIdx.y) * kTile;
    const int64_t col0 = static_cast<int64_t>(blockIdx.x) * kTile;
    /* Element of each tile this thread loads: (r, c) in tile coordinates,
     * c along the operand's contiguous dimension in memory. */
    const int ar = TA ? tx : ty, ac = TA ? ty : tx; /* (m, k) */
    const int br = TB ? tx : ty, bc = TB ? ty : tx; /* (k, n) */

    float sum = 0.0f;
    for (int64_t k0 = 0; k0 < k; k0 += kTile) {
        int64_t gm = row0 + ar, gk = k0 + ac;
        sa[ar][ac] = (gm < m && gk < k) ? a.at(gm, gk) : 0.0f;
        int64_t gkb = k0 + br, gn = col0 + bc;
        sb[br][bc] = (gkb < k && gn < n) ? b.at(gkb, gn) : 0.0f;
        __syncthreads();
#pragma unroll
        for (int i = 0; i < kTile; ++i)
            sum += sa[ty][i] * sb[i][tx];
        __syncthreads();
    }
    int64_t row = row0 + ty, col = col0 + tx;
    if (row < m && col < n)
        e.store(row, col, sum);
}

template <typename T, bool TA, bool TB> struct SmemTiled {
    static cudaError_t launch(const gemmk_problem &p, cudaStream_t s)
    {
        dim3 grid(cdiv(p.n, kTile), cdiv(p.m, kTile));
        if (grid.y > 65535)
            return cudaErrorInvalidConfiguration;
        smem_tiled_kernel<T, TA, TB><<<grid, dim3(kTile, kTile), 0, s>>>(
            view_a<T, TA, TB>(p), view_b<T, TA, TB>(p), make_epilogue(p), p.m,
            p.n, p.k);
        return cudaGetLastError();
    }
};

} // namespace

cudaError_t run_smem_tiled(const gemmk_problem &p, cudaStream_t s)
{
    return dispatch<SmemTiled>(p, s);
}

} // namespace ladder
} // namespace gemmk
