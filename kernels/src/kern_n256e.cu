/* kern_n256e.cu: the 128 x 256 tile instantiations with the TMA-store
 * epilogue (8 per buffer layout: type x transposes). */
#include "gemm_sm90_tstore.cuh"
#include "launch.h"

namespace gemmk
{
namespace
{
template <bool F16, int AMN, int BMN, int NB>
cudaError_t launch_ts(const Launch &l)
{
    auto kern = gemm_ts_kernel<F16, AMN, BMN, NB>;
    cudaError_t e = cudaFuncSetAttribute(
        kern, cudaFuncAttributeMaxDynamicSharedMemorySize, TsCfg<NB>::SMEM);
    if (e != cudaSuccess)
        return e;
    kern<<<l.grid, 384, TsCfg<NB>::SMEM, l.stream>>>(l.ta, l.tb, l.td, l.p,
                                                     l.sk);
    return cudaGetLastError();
}

template <int NB> cudaError_t launch_ts_nb(const Launch &l)
{
    int sel = (l.f16 ? 4 : 0) | (l.amn ? 2 : 0) | (l.bmn ? 1 : 0);
    switch (sel) {
    case 0:
        return launch_ts<false, 0, 0, NB>(l);
    case 1:
        return launch_ts<false, 0, 1, NB>(l);
    case 2:
        return launch_ts<false, 1, 0, NB>(l);
    case 3:
        return launch_ts<false, 1, 1, NB>(l);
    case 4:
        return launch_ts<true, 0, 0, NB>(l);
    case 5:
        return launch_ts<true, 0, 1, NB>(l);
    case 6:
        return launch_ts<true, 1, 0, NB>(l);
    default:
        return launch_ts<true, 1, 1, NB>(l);
    }
}
} // namespace

cudaError_t launch_n256e(const Launch &l, int nb)
{
    return nb == 4 ? launch_ts_nb<4>(l) : launch_ts_nb<2>(l);
}

bool tstore_applies(const KParams &p)
{
    return tstore_ok(p);
}
} // namespace gemmk
