/* kern_grouped.cu: the grouped kernel's instantiations (8: input type x
 * transposes, 128 x 128 tiles) and their launch. */
#include "grouped.h"

namespace gemmk
{
namespace
{

template <int AB, int AMN, int BMN> cudaError_t launch_g(const GroupLaunch &l)
{
    auto kern = gemm_grouped_kernel<GROUP_BN, AB, AMN, BMN>;
    constexpr int smem = Cfg<GROUP_BN>::SMEM;
    cudaError_t e = cudaFuncSetAttribute(
        kern, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
    if (e != cudaSuccess)
        return e;
    kern<<<l.grid, 384, smem, l.stream>>>(l.g);
    return cudaGetLastError();
}

} // namespace

cudaError_t launch_grouped(const GroupLaunch &l)
{
    int sel = (l.f16 ? 4 : 0) | (l.amn ? 2 : 0) | (l.bmn ? 1 : 0);
    switch (sel) {
    case 0:
        return launch_g<0, 0, 0>(l);
    case 1:
        return launch_g<0, 0, 1>(l);
    case 2:
        return launch_g<0, 1, 0>(l);
    case 3:
        return launch_g<0, 1, 1>(l);
    case 4:
        return launch_g<1, 0, 0>(l);
    case 5:
        return launch_g<1, 0, 1>(l);
    case 6:
        return launch_g<1, 1, 0>(l);
    default:
        return launch_g<1, 1, 1>(l);
    }
}

} // namespace gemmk
