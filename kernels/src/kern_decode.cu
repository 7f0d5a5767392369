/* kern_decode.cu: the decode kernel's instantiations (gemm_decode.cuh):
 * tile widths 8, 16, 32 and 64 x bf16 and fp16 x B read either way. */
#include "launch.h"

#include "gemm_decode.cuh"

namespace gemmk
{
namespace
{

template <int BN, int AB, int AMN>
cudaError_t launch_decode_one(const DecodeLaunch &l)
{
    auto kern = gemm_decode_kernel<BN, AB, AMN>;
    constexpr int smem = DecodeCfg<BN>::SMEM;
    cudaError_t e = cudaFuncSetAttribute(
        kern, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
    if (e != cudaSuccess)
        return e;
    kern<<<dim3(l.grid, l.grid_y), 160, smem, l.stream>>>(l.ta, l.tb, l.p);
    return cudaGetLastError();
}

template <int BN> cudaError_t launch_decode_bn(const DecodeLaunch &l)
{
    switch ((l.f16 ? 2 : 0) | (l.amn ? 1 : 0)) {
    case 0:
        return launch_decode_one<BN, 0, 0>(l);
    case 1:
        return launch_decode_one<BN, 0, 1>(l);
    case 2:
        return launch_decode_one<BN, 1, 0>(l);
    default:
        return launch_decode_one<BN, 1, 1>(l);
    }
}

} // namespace

cudaError_t launch_decode(const DecodeLaunch &l)
{
    switch (l.bn) {
    case 8:
        return launch_decode_bn<8>(l);
    case 16:
        return launch_decode_bn<16>(l);
    case 32:
        return launch_decode_bn<32>(l);
    case 64:
        return launch_decode_bn<64>(l);
    }
    return cudaErrorInvalidValue;
}

} // namespace gemmk
