/*
 * launch_ts.cuh: the launch of gemm_ts_kernel (the TMA-store epilogue
 * kernel, gemm_sm90_tstore.cuh) for one tile width and buffer layout,
 * switching on type and transposes; included by the launch units that
 * instantiate a width (kern_n256e.cu, kern_n192e.cu).
 */
#pragma once

#include "gemm_sm90_tstore.cuh"
#include "launch.h"

namespace gemmk
{

template <bool F16, int AMN, int BMN, int NB, int BN>
cudaError_t launch_ts(const Launch &l)
{
    auto kern = gemm_ts_kernel<F16, AMN, BMN, NB, BN>;
    constexpr int smem = TsCfg<NB, BN>::SMEM;
    cudaError_t e = cudaFuncSetAttribute(
        kern, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
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
        return launch_ts<false, 0, 0, NB, BN>(l);
    case 1:
        return launch_ts<false, 0, 1, NB, BN>(l);
    case 2:
        return launch_ts<false, 1, 0, NB, BN>(l);
    case 3:
        return launch_ts<false, 1, 1, NB, BN>(l);
    case 4:
        return launch_ts<true, 0, 0, NB, BN>(l);
    case 5:
        return launch_ts<true, 0, 1, NB, BN>(l);
    case 6:
        return launch_ts<true, 1, 0, NB, BN>(l);
    default:
        return launch_ts<true, 1, 1, NB, BN>(l);
    }
}

} // namespace gemmk
