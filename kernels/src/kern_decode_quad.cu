/* kern_decode_quad.cu: the 16-bit decode kernel's quad (gemm_decode.cuh:
 * 256-row tiles, two consumers on 128 rows each) at tile widths 8 to 64
 * in steps of 8 x bf16 and fp16 x B read either way; a unit of its own
 * so that it compiles beside kern_decode.cu. */
#include "gemm_decode.cuh"

namespace gemmk
{
namespace
{

template <int BN> cudaError_t launch_quad_bn(const DecodeLaunch &l)
{
    switch ((l.f16 ? 2 : 0) | (l.amn ? 1 : 0)) {
    case 0:
        return launch_decode_cw<BN, 0, 0, 2, 2>(l);
    case 1:
        return launch_decode_cw<BN, 0, 1, 2, 2>(l);
    case 2:
        return launch_decode_cw<BN, 1, 0, 2, 2>(l);
    default:
        return launch_decode_cw<BN, 1, 1, 2, 2>(l);
    }
}

} // namespace

cudaError_t launch_decode_quad(const DecodeLaunch &l)
{
    return decode_widths<64>(
        l.bn, [&](auto w) { return launch_quad_bn<decltype(w)::value>(l); });
}

} // namespace gemmk
