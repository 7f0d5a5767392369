/*
 * naive.cu: rung 1 of the ladder (seed 003 v1): one thread per element of
 * D, each a K-long dot product straight from global memory. As in the seed,
 * threadIdx.x walks M: a warp's 32 threads read 32 different rows of A
 * (one cache line each, per k) and all read the same element of B. Rung 2
 * turns this around (x walks N) as well as tiling through shared memory.
 */
#include "common.cuh"

namespace gemmk
{
namespace ladder
{
namespace
{

constexpr int kBlockX = 32, kBlockY = 8;

template <typename T, bool TA, bool TB>
__global__ void naive_kernel(OpView<T, TA> a, OpView<T, TB> b, Epilogue e,
                             int64_t m, int64_t n, int64_t k)
{
    int64_t row = static_cast<int64_t>(blockIdx.x) * kBlockX + threadIdx.x;
    int64_t col = static_cast<int64_t>(blockIdx.y) * kBlockY + threadIdx.y;
    if (row >= m || col >= n)
        return;
    float sum = 0.0f;
    for (int64_t i = 0; i < k; ++i)
        sum += a.at(row, i) * b.at(i, col);
    e.store(row, col, sum);
}

template <typename T, bool TA, bool TB> struct Naive {
    static cudaError_t launch(const gemmk_problem &p, cudaStream_t s)
    {
        dim3 grid(cdiv(p.m, kBlockX), cdiv(p.n, kBlockY));
        if (grid.y > 65535)
            return cudaErrorInvalidConfiguration;
        naive_kernel<T, TA, TB><<<grid, dim3(kBlockX, kBlockY), 0, s>>>(
            view_a<T, TA, TB>(p), view_b<T, TA, TB>(p), make_epilogue(p), p.m,
            p.n, p.k);
        return cudaGetLastError();
    }
};

} // namespace

cudaError_t run_naive(const gemmk_problem &p, cudaStream_t s)
{
    return dispatch<Naive>(p, s);
}

} // namespace ladder
} // namespace gemmk
