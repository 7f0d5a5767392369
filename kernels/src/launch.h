/*
 * launch.h: what api.cu hands to the per-tile-width launch units
 * (kern_n256.cu, kern_n128.cu), each compiling its kernel instantiations in
 * its own translation unit so the build runs them in parallel.
 */
#pragma once

#include <cuda.h>
#include <cuda_runtime_api.h>

#include "gemm_sm90.cuh"

namespace gemmk {

struct Launch {
    CUtensorMap ta, tb;
    KParams p;
    int grid;
    bool f16;
    int amn, bmn;
    cudaStream_t stream;
};

cudaError_t launch_n256(const Launch &l);
cudaError_t launch_n128(const Launch &l);
int smem_bytes(int bn);

template <int BN, bool F16, int AMN, int BMN>
cudaError_t launch_one(const Launch &l)
{
    auto kern = gemm_ws_kernel<BN, F16, AMN, BMN>;
    cudaError_t e = cudaFuncSetAttribute(
        kern, cudaFuncAttributeMaxDynamicSharedMemorySize, Cfg<BN>::SMEM);
    if (e != cudaSuccess)
        return e;
    kern<<<l.grid, 384, Cfg<BN>::SMEM, l.stream>>>(l.ta, l.tb, l.p);
    return cudaGetLastError();
}

template <int BN> cudaError_t launch_bn(const Launch &l)
{
    int sel = (l.f16 ? 4 : 0) | (l.amn ? 2 : 0) | (l.bmn ? 1 : 0);
    switch (sel) {
    case 0: return launch_one<BN, false, 0, 0>(l);
    case 1: return launch_one<BN, false, 0, 1>(l);
    case 2: return launch_one<BN, false, 1, 0>(l);
    case 3: return launch_one<BN, false, 1, 1>(l);
    case 4: return launch_one<BN, true, 0, 0>(l);
    case 5: return launch_one<BN, true, 0, 1>(l);
    case 6: return launch_one<BN, true, 1, 0>(l);
    default: return launch_one<BN, true, 1, 1>(l);
    }
}

} // namespace gemmk
