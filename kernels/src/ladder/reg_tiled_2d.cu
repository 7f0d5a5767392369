/*
 * reg_tiled_2d.cu: rung 3 of the ladder (seed 003 v3): 2D register tiling.
 * A block of 8 x 8 threads computes a 64 x 64 tile of D, each thread an
 * 8 x 8 block of it held in registers. Per K step the 64 x 64 tiles of
 * op(A) and op(B) go through shared memory (every thread loads 64 elements
 * of each, along the operand's contiguous dimension so global reads are
 * coalesced for every transpose); then, for each k of the tile, a thread
 * reads a column of 8 values of A and a row of 8 of B into registers and
 * adds their outer product: 64 FMAs for 16 shared-memory reads, against 2
 * reads per FMA in rung 2. Rows are padded by one float (bank conflicts).
 */
#include "common.cuh"

namespace gemmk
{
namespace ladder
{
namespace
{

constexpr int kTile = 64;              /* tile of D, and K step */
constexpr int kTs = 8;                 /* each thread: kTs x kTs of D */
constexpr int kThreads1 = kTile / kTs; /* threads per block side */
constexpr int kThreads = kThreads1 * kThreads1;

template <typename T, bool TA, bool TB>
__global__ void __launch_bounds__(kThreads)
    reg_tiled_2d_kernel(OpView<T, TA> a, OpView<T, TB> b, Epilogue e, int64_t m,
                        int64_t n, int64_t k)
{
    __shared__ float sa[kTile][kTile + 1]; /* [m][k] */
    __shared__ float sb[kTile][kTile + 1]; /* [k][n] */
    float ta[kTs], tb[kTs];
    float tc[kTs][kTs] = {};
    const int tx = threadIdx.x, ty = threadIdx.y;
    const int tid = ty * kThreads1 + tx;
    const int64_t block_row = static_cast<int64_t>(blockIdx.y) * kTile;
    const int64_t block_col = static_cast<int64_t>(blockIdx.x) * kTile;

    for (int64_t k0 = 0; k0 < k; k0 += kTile) {
#pragma unroll 4
        for (int i = 0; i < kTile * kTile; i += kThreads) {
            const int id = i + tid;
            /* (fast, slow) index: fast runs along memory. */
            const int f = id % kTile, sl = id / kTile;
            {
                const int r = TA ? f : sl, c = TA ? sl : f; /* (m, k) */
                const int64_t gm = block_row + r, gk = k0 + c;
                sa[r][c] = (gm < m && gk < k) ? a.at(gm, gk) : 0.0f;
            }
            {
                const int r = TB ? f : sl, c = TB ? sl : f; /* (k, n) */
                const int64_t gk = k0 + r, gn = block_col + c;
                sb[r][c] = (gk < k && gn < n) ? b.at(gk, gn) : 0.0f;
            }
        }
        __syncthreads();
#pragma unroll 8
        for (int kk = 0; kk < kTile; ++kk) {
#pragma unroll
            for (int i = 0; i < kTs; ++i)
                ta[i] = sa[ty * kTs + i][kk];
#pragma unroll
            for (int j = 0; j < kTs; ++j)
                tb[j] = sb[kk][tx * kTs + j];
#pragma unroll
            for (int i = 0; i < kTs; ++i)
#pragma unroll
                for (int j = 0; j < kTs; ++j)
                    tc[i][j] += ta[i] * tb[j];
        }
        __syncthreads();
    }

#pragma unroll
    for (int i = 0; i < kTs; ++i) {
        const int64_t row = block_row + ty * kTs + i;
        if (row >= m)
            break;
#pragma unroll
        for (int j = 0; j < kTs; ++j) {
            const int64_t col = block_col + tx * kTs + j;
            if (col < n)
                e.store(row, col, tc[i][j]);
        }
    }
}

template <typename T, bool TA, bool TB> struct RegTiled2d {
    static cudaError_t launch(const gemmk_problem &p, cudaStream_t s)
    {
        dim3 grid(cdiv(p.n, kTile), cdiv(p.m, kTile));
        if (grid.y > 65535)
            return cudaErrorInvalidConfiguration;
        reg_tiled_2d_kernel<T, TA, TB>
            <<<grid, dim3(kThreads1, kThreads1), 0, s>>>(
                view_a<T, TA, TB>(p), view_b<T, TA, TB>(p), make_epilogue(p),
                p.m, p.n, p.k);
        return cudaGetLastError();
    }
};

} // namespace

cudaError_t run_reg_tiled_2d(const gemmk_problem &p, cudaStream_t s)
{
    return dispatch<RegTiled2d>(p, s);
}

} // namespace ladder
} // namespace gemmk
