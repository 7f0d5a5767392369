/*
 * kern_tf32.cu: fp32 inputs on the tensor cores. The warp-specialized
 * kernel of gemm_sm90.cuh instantiated for tf32 (AB = 2, K-major operands,
 * 128 x {64, 128, 256} tiles, no cluster), its 128 x 256 TMA-store
 * epilogue kernel (gemm_sm90_tstore.cuh: fp32 or 16-bit D staged in
 * shared memory and stored under the next tile; a stream-K tail), and the
 * pre-pass that gives it
 * K-major operands: a tiled transpose for MN-major fp32 operands (tf32
 * mode), and for 3xTF32 the split of each operand into tf32 big and small
 * parts written K-concatenated, A' = [A_small | A_big | A_big] and
 * B' = [B_big ; B_small ; B_big], so one tf32 GEMM over K' = 3 kseg sums
 * A_small B_big + A_big B_small + A_big B_big (small terms first).
 */
#include "launch_ts.cuh"
#include "tf32.h"

namespace gemmk
{

cudaError_t launch_tf32_ts(const Launch &l, int nb)
{
    if (l.amn)
        return nb == 4 ? launch_ts<2, 1, 0, 4, 256>(l)
                       : launch_ts<2, 1, 0, 2, 256>(l);
    return nb == 4 ? launch_ts<2, 0, 0, 4, 256>(l)
                   : launch_ts<2, 0, 0, 2, 256>(l);
}

bool tstore32_applies(const KParams &p)
{
    return tstore32_ok(p);
}

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

/* tf32(v) of four consecutive values, one 16-byte store (o aligned). */
__device__ __forceinline__ void round4(float *o, float4 v)
{
    *reinterpret_cast<float4 *>(o) =
        make_float4(gemmk_tf32_round(v.x), gemmk_tf32_round(v.y),
                    gemmk_tf32_round(v.z), gemmk_tf32_round(v.w));
}

/* Four values of x from p on (n of them valid, zeros after), one 16-byte
 * load when all four are valid and p is 16-byte aligned. */
__device__ __forceinline__ float4 get4(const float *p, long long n)
{
    if (n >= 4 && (reinterpret_cast<uintptr_t>(p) & 15) == 0)
        return __ldg(reinterpret_cast<const float4 *>(p));
    float4 v = make_float4(0.f, 0.f, 0.f, 0.f);
    if (n > 0)
        v.x = p[0];
    if (n > 1)
        v.y = p[1];
    if (n > 2)
        v.z = p[2];
    if (n > 3)
        v.w = p[3];
    return v;
}

/* tf32 (mode 0) of an MN-major x (stored kdim x rows): one 32-row x 64-k
 * tile per block iteration through shared memory, read along rows and
 * written along k, both 16 bytes a thread and step (256 threads: 2 loads,
 * then 2 stores): 8 KB in flight a block, 1.27x the scalar tile kernel's
 * rate at 4096^2 (docs/kernel-notes.md v12). */
__global__ void __launch_bounds__(256)
    tf32_round_mn_kernel(const float *__restrict__ x, long long ldx,
                         long long rows, long long kdim,
                         float *__restrict__ out, long long kseg)
{
    __shared__ float t[32][65]; /* [row][k]: 65 keeps both phases spread */
    const int tid = threadIdx.x;
    const long long k0 = (long long)blockIdx.x * 64;
    for (long long r0 = (long long)blockIdx.y * 32; r0 < rows;
         r0 += (long long)gridDim.y * 32) {
        float4 v[2];
#pragma unroll
        for (int j = 0; j < 2; j++) { /* k row kk, rows rr..rr+3 */
            const long long kk = k0 + tid / 8 + 32 * j;
            const long long rr = r0 + 4 * (tid % 8);
            v[j] = kk < kdim ? get4(x + kk * ldx + rr, rows - rr)
                             : make_float4(0.f, 0.f, 0.f, 0.f);
        }
#pragma unroll
        for (int j = 0; j < 2; j++) {
            const int kl = tid / 8 + 32 * j, rl = 4 * (tid % 8);
            t[rl][kl] = v[j].x;
            t[rl + 1][kl] = v[j].y;
            t[rl + 2][kl] = v[j].z;
            t[rl + 3][kl] = v[j].w;
        }
        __syncthreads();
#pragma unroll
        for (int j = 0; j < 2; j++) { /* row rl, k kl..kl+3 */
            const int rl = tid / 16 + 16 * j, kl = 4 * (tid % 16);
            const long long r = r0 + rl;
            if (r < rows && k0 + kl < kseg)
                round4(out + r * kseg + k0 + kl,
                       make_float4(t[rl][kl], t[rl][kl + 1], t[rl][kl + 2],
                                   t[rl][kl + 3]));
        }
        __syncthreads();
    }
}

/* The 3xTF32 split (MODE 1, 2) of either layout, and MODE 0 of a K-major
 * x: one 32 x 32 tile of the output (rows r0.., k k0..) per block of 32 x
 * 8 threads, through shared memory so that both the read (along x's
 * contiguous dimension) and the write (along k) are coalesced. For the
 * split this measured faster than 16-byte accesses in
 * tf32_round_mn_kernel's layout (docs/kernel-notes.md v12). */
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

template <int MODE>
cudaError_t pack_mode(const float *x, long long ldx, int mn_major,
                      long long rows, long long kdim, float *out,
                      long long kseg, cudaStream_t s)
{
    long long gy = (rows + 31) / 32;
    gy = gy < 65535 ? gy : 65535;
    if (MODE == 0 && mn_major)
        tf32_round_mn_kernel<<<dim3((unsigned)((kseg + 63) / 64), (unsigned)gy),
                               256, 0, s>>>(x, ldx, rows, kdim, out, kseg);
    else
        tf32_pack_kernel<MODE>
            <<<dim3((unsigned)(kseg / 32), (unsigned)gy), dim3(32, 8), 0, s>>>(
                x, ldx, mn_major, rows, kdim, out, kseg);
    return cudaGetLastError();
}

} // namespace

cudaError_t tf32_pack(const float *x, long long ldx, int mn_major,
                      long long rows, long long kdim, int mode, float *out,
                      long long kseg, cudaStream_t s)
{
    if (kseg % 32 || kseg < kdim || rows < 1 || kseg / 32 > 0x7fffffffLL)
        return cudaErrorInvalidValue;
    if (mode == 0)
        return pack_mode<0>(x, ldx, mn_major, rows, kdim, out, kseg, s);
    if (mode == 1)
        return pack_mode<1>(x, ldx, mn_major, rows, kdim, out, kseg, s);
    return pack_mode<2>(x, ldx, mn_major, rows, kdim, out, kseg, s);
}

} // namespace gemmk
