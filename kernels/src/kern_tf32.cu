/*
 * kern_tf32.cu: fp32 inputs on the tensor cores. The warp-specialized
 * kernel of gemm_sm90.cuh instantiated for tf32 (AB = 2, K-major operands,
 * 128 x {64, 128, 256} tiles, no cluster), and the pre-pass that gives it
 * K-major operands: a tiled transpose for MN-major fp32 operands (tf32
 * mode), and for 3xTF32 the split of each operand into tf32 big and small
 * parts written K-concatenated, A' = [A_small | A_big | A_big] and
 * B' = [B_big ; B_small ; B_big], so one tf32 GEMM over K' = 3 kseg sums
 * A_small B_big + A_big B_small + A_big B_big (small terms first).
 */
#include "launch.h"
#include "tf32.h"

namespace gemmk
{

cudaError_t launch_tf32(const Launch &l, int bn, int promo)
{
    if (promo == 2) { /* accumulator copy in shared memory, 2 stages */
        if (l.p.promo < 1)
            return cudaErrorInvalidValue;
        if (bn == 256)
            return launch_one<256, 2, 0, 0, 1, 2>(l);
        if (bn == 128)
            return launch_one<128, 2, 0, 0, 1, 2>(l);
        if (bn == 64)
            return launch_one<64, 2, 0, 0, 1, 2>(l);
        return cudaErrorInvalidValue;
    }
    if (promo) {
        if (l.p.promo < 1 || !l.p.pws)
            return cudaErrorInvalidValue;
        if (bn == 256)
            return launch_one<256, 2, 0, 0, 1, 1>(l);
        if (bn == 128)
            return launch_one<128, 2, 0, 0, 1, 1>(l);
        if (bn == 64)
            return launch_one<64, 2, 0, 0, 1, 1>(l);
        return cudaErrorInvalidValue;
    }
    switch (bn) {
    case 256:
        return launch_one<256, 2, 0, 0, 1>(l);
    case 128:
        return launch_one<128, 2, 0, 0, 1>(l);
    case 64:
        return launch_one<64, 2, 0, 0, 1>(l);
    default:
        return cudaErrorInvalidValue;
    }
}

namespace
{

/* One 32 x 32 tile of the output (rows r0.., k k0..) per block of 32 x 8
 * threads, through shared memory so that both the read (along x's
 * contiguous dimension) and the write (along k) are coalesced. */
template <int MODE>
__global__ void __launch_bounds__(256)
    tf32_pack_kernel(const float *__restrict__ x, long long ldx, int mn_major,
                     long long rows, long long kdim, float *__restrict__ out,
                     long long kseg)
{
    __shared__ float t[32][33]; /* [row][k], padded against bank conflicts */
    constexpr int NSEG = MODE == 0 ? 1 : 3;
    const long long ldo = NSEG * kseg;
    const int tx = threadIdx.x, ty = threadIdx.y;
    const long long k0 = (long long)blockIdx.x * 32;
    for (long long r0 = (long long)blockIdx.y * 32; r0 < rows;
         r0 += (long long)gridDim.y * 32) {
#pragma unroll
        for (int j = 0; j < 32; j += 8) {
            if (mn_major) { /* x is kdim x rows: read along rows */
                long long r = r0 + tx, k = k0 + ty + j;
                t[tx][ty + j] = (r < rows && k < kdim) ? x[k * ldx + r] : 0.f;
            } else {
                long long r = r0 + ty + j, k = k0 + tx;
                t[ty + j][tx] = (r < rows && k < kdim) ? x[r * ldx + k] : 0.f;
            }
        }
        __syncthreads();
#pragma unroll
        for (int j = 0; j < 32; j += 8) {
            long long r = r0 + ty + j, k = k0 + tx;
            if (r < rows) {
                float v = t[ty + j][tx];
                float *o = out + r * ldo + k;
                if constexpr (MODE == 0) {
                    o[0] = gemmk_tf32_round(v);
                } else {
                    float big, small;
                    gemmk_tf32_split(v, &big, &small);
                    o[0] = MODE == 1 ? small : big;
                    o[kseg] = MODE == 1 ? big : small;
                    o[2 * kseg] = big;
                }
            }
        }
        __syncthreads();
    }
}

} // namespace

cudaError_t tf32_pack(const float *x, long long ldx, int mn_major,
                      long long rows, long long kdim, int mode, float *out,
                      long long kseg, cudaStream_t s)
{
    if (kseg % 32 || kseg < kdim || rows < 1)
        return cudaErrorInvalidValue;
    long long gy = (rows + 31) / 32;
    dim3 grid((unsigned)(kseg / 32), (unsigned)(gy < 65535 ? gy : 65535));
    dim3 block(32, 8);
    if (kseg / 32 > 0x7fffffffLL)
        return cudaErrorInvalidValue;
    if (mode == 0)
        tf32_pack_kernel<0>
            <<<grid, block, 0, s>>>(x, ldx, mn_major, rows, kdim, out, kseg);
    else if (mode == 1)
        tf32_pack_kernel<1>
            <<<grid, block, 0, s>>>(x, ldx, mn_major, rows, kdim, out, kseg);
    else
        tf32_pack_kernel<2>
            <<<grid, block, 0, s>>>(x, ldx, mn_major, rows, kdim, out, kseg);
    return cudaGetLastError();
}

} // namespace gemmk
