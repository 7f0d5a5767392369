/*
 * warp_tiled.cu: rung 4 of the ladder (seed 000 version 1): warp tiling.
 * A block of 128 threads (4 warps, 2 x 2) computes a 128 x 128 tile of D;
 * each warp a 64 x 64 warp tile, which it covers in WMITER x WNITER
 * sub-tiles of WSUBM x WSUBN; within a sub-tile each lane owns a TM x TN
 * thread tile. Per K step of BK the block stages op(A) k-major (As[k][m])
 * and op(B) (Bs[k][n]) in shared memory, loading 4 elements at a time
 * (16 bytes for fp32) as the seed does; per k each lane loads its
 * WMITER*TM values of A and WNITER*TN of B into registers (16-byte shared
 * loads) and accumulates their outer product. Compared with rung 3 the
 * lanes of a warp read few, contiguous shared-memory words (the warp tile
 * is their union), and the bigger tile halves global traffic per FMA.
 * Rows of the staged tiles are padded by 4 floats: fewer bank conflicts on
 * the transposing stores, 16-byte alignment kept for the register loads.
 */
#include "common.cuh"

namespace gemmk
{
namespace ladder
{
namespace
{

constexpr int BM = 128, BN = 128, BK = 16;
constexpr int WM = 64, WN = 64, WNITER = 4;
constexpr int TM = 8, TN = 4;
constexpr int kThreads = 128;
constexpr int kWarpSize = 32;
constexpr int WMITER = (WM * WN) / (kWarpSize * TM * TN * WNITER);
constexpr int WSUBM = WM / WMITER;
constexpr int WSUBN = WN / WNITER;
constexpr int kPad = 4;
constexpr int kLdA = BM + kPad, kLdB = BN + kPad;

static_assert((BM / WM) * (BN / WN) * kWarpSize == kThreads,
              "one warp per warp tile");
static_assert(WMITER * WSUBM == WM && WNITER * WSUBN == WN, "sub-tiles");
static_assert((WSUBM / TM) * (WSUBN / TN) == kWarpSize,
              "a sub-tile is one thread tile per lane");
static_assert(TM % 4 == 0 && TN % 4 == 0, "16-byte register loads");
static_assert(BK % 4 == 0 && (BM * BK / 4) % kThreads == 0 &&
                  (BK * BN / 4) % kThreads == 0,
              "whole 4-element vectors per thread");

/* 3 blocks an SM: caps registers at 168 (no spills), 12 warps to hide the
 * load latency of the unpipelined K loop instead of 8. */
template <typename T, bool TA, bool TB>
__global__ void __launch_bounds__(kThreads, 3)
    warp_tiled_kernel(OpView<T, TA> a, OpView<T, TB> b, Epilogue e, int64_t m,
                      int64_t n, int64_t k)
{
    __shared__ __align__(16) float As[BK * kLdA]; /* [k][m] */
    __shared__ __align__(16) float Bs[BK * kLdB]; /* [k][n] */

    const int tid = threadIdx.x;
    const int warp = tid / kWarpSize, lane = tid % kWarpSize;
    const int warp_col = warp % (BN / WN), warp_row = warp / (BN / WN);
    const int t_col = lane % (WSUBN / TN), t_row = lane / (WSUBN / TN);
    const int64_t block_row = static_cast<int64_t>(blockIdx.y) * BM;
    const int64_t block_col = static_cast<int64_t>(blockIdx.x) * BN;

    float acc[WMITER * TM][WNITER * TN] = {};
    float reg_m[WMITER * TM], reg_n[WNITER * TN];

    for (int64_t k0 = 0; k0 < k; k0 += BK) {
        /* Global -> shared, 4 elements a load along the operand's
         * contiguous dimension (consecutive threads, consecutive
         * vectors); zeros outside the matrices. */
#pragma unroll
        for (int v = tid; v < BM * BK / 4; v += kThreads) {
            float x[4];
            if (!TA) { /* A stored M x K: vectors along k */
                const int r = v / (BK / 4), c = v % (BK / 4) * 4;
                load4(a.p, a.ld, m, k, block_row + r, k0 + c, x);
#pragma unroll
                for (int q = 0; q < 4; q++)
                    As[(c + q) * kLdA + r] = x[q];
            } else { /* A stored K x M: vectors along m */
                const int r = v / (BM / 4), c = v % (BM / 4) * 4;
                load4(a.p, a.ld, k, m, k0 + r, block_row + c, x);
                *reinterpret_cast<float4 *>(&As[r * kLdA + c]) =
                    make_float4(x[0], x[1], x[2], x[3]);
            }
        }
#pragma unroll
        for (int v = tid; v < BK * BN / 4; v += kThreads) {
            float x[4];
            if (!TB) { /* B stored K x N: vectors along n */
                const int r = v / (BN / 4), c = v % (BN / 4) * 4;
                load4(b.p, b.ld, k, n, k0 + r, block_col + c, x);
                *reinterpret_cast<float4 *>(&Bs[r * kLdB + c]) =
                    make_float4(x[0], x[1], x[2], x[3]);
            } else { /* B stored N x K: vectors along k */
                const int r = v / (BK / 4), c = v % (BK / 4) * 4;
                load4(b.p, b.ld, n, k, block_col + r, k0 + c, x);
#pragma unroll
                for (int q = 0; q < 4; q++)
                    Bs[(c + q) * kLdB + r] = x[q];
            }
        }
        __syncthreads();

#pragma unroll
        for (int kk = 0; kk < BK; ++kk) {
#pragma unroll
            for (int ws = 0; ws < WMITER; ++ws)
#pragma unroll
                for (int i = 0; i < TM; i += 4) {
                    const float4 v = *reinterpret_cast<const float4 *>(
                        &As[kk * kLdA + warp_row * WM + ws * WSUBM +
                            t_row * TM + i]);
                    reg_m[ws * TM + i + 0] = v.x;
                    reg_m[ws * TM + i + 1] = v.y;
                    reg_m[ws * TM + i + 2] = v.z;
                    reg_m[ws * TM + i + 3] = v.w;
                }
#pragma unroll
            for (int ws = 0; ws < WNITER; ++ws)
#pragma unroll
                for (int j = 0; j < TN; j += 4) {
                    const float4 v = *reinterpret_cast<const float4 *>(
                        &Bs[kk * kLdB + warp_col * WN + ws * WSUBN +
                            t_col * TN + j]);
                    reg_n[ws * TN + j + 0] = v.x;
                    reg_n[ws * TN + j + 1] = v.y;
                    reg_n[ws * TN + j + 2] = v.z;
                    reg_n[ws * TN + j + 3] = v.w;
                }
#pragma unroll
            for (int i = 0; i < WMITER * TM; ++i)
#pragma unroll
                for (int j = 0; j < WNITER * TN; ++j)
                    acc[i][j] += reg_m[i] * reg_n[j];
        }
        __syncthreads();
    }

    e.with_type([&](auto tag) {
        using O = decltype(tag);
#pragma unroll
        for (int wm = 0; wm < WMITER; ++wm)
#pragma unroll
            for (int i = 0; i < TM; ++i) {
                const int64_t row =
                    block_row + warp_row * WM + wm * WSUBM + t_row * TM + i;
#pragma unroll
                for (int wn = 0; wn < WNITER; ++wn)
#pragma unroll
                    for (int j = 0; j < TN; ++j) {
                        const int64_t col = block_col + warp_col * WN +
                                            wn * WSUBN + t_col * TN + j;
                        if (row < m && col < n)
                            e.store_as<O>(row, col,
                                          acc[wm * TM + i][wn * TN + j]);
                    }
            }
    });
}

template <typename T, bool TA, bool TB> struct WarpTiled {
    static cudaError_t launch(const gemmk_problem &p, cudaStream_t s)
    {
        dim3 grid(cdiv(p.n, BN), cdiv(p.m, BM));
        if (grid.y > 65535)
            return cudaErrorInvalidConfiguration;
        warp_tiled_kernel<T, TA, TB><<<grid, kThreads, 0, s>>>(
            view_a<T, TA, TB>(p), view_b<T, TA, TB>(p), make_epilogue(p), p.m,
            p.n, p.k);
        return cudaGetLastError();
    }
};

} // namespace

cudaError_t run_warp_tiled(const gemmk_problem &p, cudaStream_t s)
{
    return dispatch<WarpTiled>(p, s);
}

} // namespace ladder
} // namespace gemmk
