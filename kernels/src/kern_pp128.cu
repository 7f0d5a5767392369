/* kern_pp128.cu: the ping-pong 128 x 128 (per consumer warpgroup)
 * instantiations (8: type x transposes); docs/kernel-notes.md has its
 * measurements. */
#include "launch.h"

namespace gemmk
{
template <int AB, int AMN, int BMN> cudaError_t launch_pp(const Launch &l)
{
    static SmemOptIn opt_in; /* this kernel's (smem_opt_in.h) */
    auto kern = gemm_pp_kernel<AB, AMN, BMN>;
    cudaError_t e = opt_in.ensure(kern, PP_SMEM);
    if (e != cudaSuccess)
        return e;
    kern<<<l.grid, 384, PP_SMEM, l.stream>>>(l.ta, l.tb, l.p);
    return cudaGetLastError();
}

cudaError_t launch_pp128(const Launch &l)
{
    int sel = (l.f16 ? 4 : 0) | (l.amn ? 2 : 0) | (l.bmn ? 1 : 0);
    switch (sel) {
    case 0:
        return launch_pp<false, 0, 0>(l);
    case 1:
        return launch_pp<false, 0, 1>(l);
    case 2:
        return launch_pp<false, 1, 0>(l);
    case 3:
        return launch_pp<false, 1, 1>(l);
    case 4:
        return launch_pp<true, 0, 0>(l);
    case 5:
        return launch_pp<true, 0, 1>(l);
    case 6:
        return launch_pp<true, 1, 0>(l);
    default:
        return launch_pp<true, 1, 1>(l);
    }
}
} // namespace gemmk
