/*
 * launch.h: what api.cu hands to the per-tile-width launch units
 * (kern_n256.cu, kern_n128.cu), each compiling its kernel instantiations in
 * its own translation unit so the build runs them in parallel.
 */
#pragma once

#include <cuda.h>
#include <cuda_runtime_api.h>

#include "gemm_sm90.cuh"
#include "gemm_streamk.cuh"
#include "smem_opt_in.h"

namespace gemmk
{

struct Launch {
    CUtensorMap ta, tb;
    CUtensorMap td; /* D, for the TMA-store epilogue (launch_n256e) */
    KParams p;
    SkParams sk; /* stream-K tail (launch_n256e; sk.units 0: none) */
    int grid;
    bool f16;
    bool tf32; /* fp32 inputs read as tf32; amn = bmn = 0 */
    int amn, bmn;
    int cluster; /* 1 or 2 (BN=256 only) */
    cudaStream_t stream;
};

cudaError_t launch_n256(const Launch &l);
cudaError_t launch_n256c2(const Launch &l);
cudaError_t launch_n128(const Launch &l);
cudaError_t launch_n64(const Launch &l);
cudaError_t launch_pp128(const Launch &l);
/* fp32 inputs as tf32 (kern_tf32.cu): the 128 x bn warp-specialized kernel
 * (bn 64, 128, 256; no cluster), both operands K-major. promo: the
 * promoted-accumulation variant (3xTF32; l.p.pws, promo_first, promo). */
cudaError_t launch_tf32(const Launch &l, int bn, int promo = 0);
/* The same 128 x 256 tf32 tiles with the TMA-store epilogue (fp32 D or
 * 16-bit D through l.td; nb 64-row output buffers per consumer: 2 with 4
 * stages, 4 with 3) and, with l.sk, a stream-K tail. */
cudaError_t launch_tf32_ts(const Launch &l, int nb);
/* Whether launch_tf32_ts's kernel stores fp32 D through td for p (64 x 32
 * boxes); tstore_applies says it for 16-bit D (64 x 64 boxes). */
bool tstore32_applies(const KParams &p);
/* The ladder's rung 6, "wgmma-ws-tf32" (kern_tf32_ws.cu): seed 001 made
 * right. ta's box is 32 x 64, tb's 32 x 128; both K-major. */
cudaError_t launch_tf32_ws64(const Launch &l);

/* The pre-pass (kern_tf32.cu): writes op(X) of a gemmk_problem operand as
 * rows x (nseg * kseg) fp32, K-major (row r: nseg segments of kseg values,
 * zero beyond kdim). x is stored rows x kdim (ld ldx) or, when mn_major,
 * kdim x rows. mode 0: one segment, rounded to tf32 to nearest
 * (gemmk_tf32_round, cvt.rna); 1: [small | big | big] (A of 3xTF32); 2:
 * [big | small | big] (B of 3xTF32). kseg is a multiple of
 * 32. */
cudaError_t tf32_pack(const float *x, long long ldx, int mn_major,
                      long long rows, long long kdim, int mode, float *out,
                      long long kseg, cudaStream_t s);
/* 128 x 256 with the TMA-store epilogue; nb: 64 x 64 output buffers per
 * consumer, 2 (4 stages) or 4 (3 stages). */
cudaError_t launch_n256e(const Launch &l, int nb);
/* 128 x 192 with the TMA-store epilogue (three 64 x 64 buffers per
 * consumer, 4 stages). */
cudaError_t launch_n192e(const Launch &l);
/* Whether launch_n256e's kernel stores through td for p. */
bool tstore_applies(const KParams &p);

int max_clusters2();

template <int BN, int AB, int AMN, int BMN, int CL, int PR = 0>
cudaError_t launch_one(const Launch &l)
{
    static SmemOptIn opt_in; /* this kernel's (smem_opt_in.h) */
    auto kern = gemm_ws_kernel<BN, AB, AMN, BMN, CL, PR>;
    constexpr int smem = PR == 2 ? CfgP2<BN>::SMEM : Cfg<BN>::SMEM;
    cudaError_t e = opt_in.ensure(kern, smem);
    if (e != cudaSuccess)
        return e;
    return launch_clusters(kern, l.grid, smem, CL, l.stream, l.ta, l.tb, l.p);
}

/* Co-resident clusters of size CL for this kernel (0 on error). */
template <int BN, int CL> int occupancy_clusters()
{
    static SmemOptIn opt_in; /* this kernel's (smem_opt_in.h) */
    auto kern = gemm_ws_kernel<BN, 0, 0, 0, CL>;
    if (opt_in.ensure(kern, Cfg<BN>::SMEM) != cudaSuccess)
        return 0;
    cudaLaunchAttribute attr;
    cudaLaunchConfig_t cfg =
        cluster_config(&attr, CL * 128, Cfg<BN>::SMEM, CL, nullptr);
    int n = 0;
    if (cudaOccupancyMaxActiveClusters(&n, kern, &cfg) != cudaSuccess)
        return 0;
    return n;
}

template <int BN, int CL> cudaError_t launch_bn(const Launch &l)
{
    int sel = (l.f16 ? 4 : 0) | (l.amn ? 2 : 0) | (l.bmn ? 1 : 0);
    switch (sel) {
    case 0:
        return launch_one<BN, false, 0, 0, CL>(l);
    case 1:
        return launch_one<BN, false, 0, 1, CL>(l);
    case 2:
        return launch_one<BN, false, 1, 0, CL>(l);
    case 3:
        return launch_one<BN, false, 1, 1, CL>(l);
    case 4:
        return launch_one<BN, true, 0, 0, CL>(l);
    case 5:
        return launch_one<BN, true, 0, 1, CL>(l);
    case 6:
        return launch_one<BN, true, 1, 0, CL>(l);
    default:
        return launch_one<BN, true, 1, 1, CL>(l);
    }
}

} // namespace gemmk
