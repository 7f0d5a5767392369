/*
 * launch_ts.cuh: the launch of gemm_ts_kernel (the TMA-store epilogue
 * kernel, gemm_sm90_tstore.cuh) for one tile width and buffer layout,
 * switching on type and transposes; included by the launch units that
 * instantiate a width (kern_n256e.cu, kern_n192e.cu) and by kern_tf32.cu
 * (AB 2: tf32, both operands K-major).
 */
#pragma once

#include "gemm_sm90_tstore.cuh"
#include "launch.h"

namespace gemmk
{

template <int AB, int AMN, int BMN, int NB, int BN>
cudaError_t launch_ts(const Launch &l)
{
    static SmemOptIn opt_in; /* this kernel's (smem_opt_in.h) */
    auto kern = gemm_ts_kernel<AB, AMN, BMN, NB, BN>;
    constexpr int smem = TsCfg<NB, BN>::SMEM;
    cudaError_t e = opt_in.ensure(kern, smem);
    if (e != cudaSuccess)
        return e;
    kern<<<l.grid, 384, smem, l.stream>>>(l.ta, l.tb, l.td, l.p, l.sk);
    return cudaGetLastError();
}

template <int NB, int BN> cudaError_t launch_ts_nb(const Launch &l)
{
    int sel = (l.f16 ? 4 : 0) | (l.amn ? 2 : 0) | (l.bmn ? 1 : 0);
    switch (sel) {
    case 0:
        return launch_ts<0, 0, 0, NB, BN>(l);
    case 1:
        return launch_ts<0, 0, 1, NB, BN>(l);
    case 2:
        return launch_ts<0, 1, 0, NB, BN>(l);
    case 3:
        return launch_ts<0, 1, 1, NB, BN>(l);
    case 4:
        return launch_ts<1, 0, 0, NB, BN>(l);
    case 5:
        return launch_ts<1, 0, 1, NB, BN>(l);
    case 6:
        return launch_ts<1, 1, 0, NB, BN>(l);
    default:
        return launch_ts<1, 1, 1, NB, BN>(l);
    }
}

} // namespace gemmk
