/*
 * kern_tf32_ws.cu: rung 6 of the ladder, "wgmma-ws-tf32": seed 001's
 * warp-specialized fp32 GEMM made right. One producer warp (one lane
 * issues TMA) and ONE consumer warpgroup, a 3-stage full/empty mbarrier
 * ring, 64 x 128 x 32 tiles of fp32 read as tf32 by
 * wgmma.m64n128k8.f32.tf32.tf32 (both operands K-major, 128B swizzle: a
 * 32-float row is 128 bytes, so a k8 step is 32 bytes as in seed 000's
 * bf16 kernel), one tile per CTA in a grouped ("block rasterized") order
 * so neighbouring CTAs share A panels in L2. Seed 001's wgmma form
 * (f32 operands with transpose immediates) does not exist in PTX; tf32 has
 * no transpose, so api.cu's pre-pass transposes MN-major operands.
 * The consumer warpgroup is warps 0-3 (a warpgroup must start at a warp
 * index divisible by 4), the producer warp is warp 4.
 */
#include "launch.h"

namespace gemmk
{
namespace
{

constexpr int W6_BM = 64, W6_BN = 128, W6_BK = 32, W6_STAGES = 3;
constexpr int W6_A = W6_BM * W6_BK * 4; /* 8 KB */
constexpr int W6_B = W6_BN * W6_BK * 4; /* 16 KB */
constexpr int W6_SMEM = W6_STAGES * (W6_A + W6_B) + 1024 + 64;

__global__ void __launch_bounds__(160, 1)
    gemm_tf32_ws64_kernel(const __grid_constant__ CUtensorMap tma,
                          const __grid_constant__ CUtensorMap tmb,
                          const __grid_constant__ KParams p)
{
    extern __shared__ uint8_t smem_raw[];
    const SmemRing sm = smem_ring<W6_STAGES, W6_A, W6_B>(smem_raw);
    uint8_t *sa = sm.sa, *sb = sm.sb;
    uint64_t *full = sm.full, *empty = sm.empty;
    ring_init(full, empty, W6_STAGES, 4); /* lane 0 of each consumer warp */

    int mt, nt, split;
    unit_coords(p, blockIdx.x, mt, nt, split);
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    if (warp == 4) { /* producer */
        if (lane == 0) {
            int s = 0;
            uint32_t ph = 0;
            for (int kb = 0; kb < p.nkb; kb++) {
                mbar_wait(&empty[s], ph ^ 1);
                mbar_expect_tx(&full[s], W6_A + W6_B);
                tma_load_2d(sa + s * W6_A, &tma, kb * W6_BK, mt * W6_BM,
                            &full[s]);
                tma_load_2d(sb + s * W6_B, &tmb, kb * W6_BK, nt * W6_BN,
                            &full[s]);
                if (++s == W6_STAGES) {
                    s = 0;
                    ph ^= 1;
                }
            }
        }
        return;
    }
    /* consumer warpgroup */
    float d[W6_BN / 2];
    const uint64_t da0 =
        gemmk_desc_encode(smem_u32(sa), 16, 1024, GEMMK_SWIZZLE_128B);
    const uint64_t db0 =
        gemmk_desc_encode(smem_u32(sb), 16, 1024, GEMMK_SWIZZLE_128B);
    int s = 0;
    uint32_t ph = 0;
    for (int kb = 0; kb < p.nkb; kb++) {
        mbar_wait(&full[s], ph);
        fence_regs(d);
        wgmma_fence();
#pragma unroll
        for (int kk = 0; kk < W6_BK / 8; kk++) /* k8 steps of 32 bytes */
            wgmma_m64n128k8_tf32(d, da0 + ((s * W6_A + kk * 32) >> 4),
                                 db0 + ((s * W6_B + kk * 32) >> 4),
                                 kb != 0 || kk != 0);
        wgmma_commit();
        wgmma_wait<0>();
        fence_regs(d);
        if (lane == 0)
            mbar_arrive(&empty[s]);
        if (++s == W6_STAGES) {
            s = 0;
            ph ^= 1;
        }
    }
    store_any<W6_BN>(p, d, mt * W6_BM, nt * W6_BN, lane, warp, 0);
}

} // namespace

cudaError_t launch_tf32_ws64(const Launch &l)
{
    static SmemOptIn opt_in; /* this kernel's (smem_opt_in.h) */
    cudaError_t e = opt_in.ensure(gemm_tf32_ws64_kernel, W6_SMEM);
    if (e != cudaSuccess)
        return e;
    gemm_tf32_ws64_kernel<<<l.grid, 160, W6_SMEM, l.stream>>>(l.ta, l.tb, l.p);
    return cudaGetLastError();
}

} // namespace gemmk
