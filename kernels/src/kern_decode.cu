/* kern_decode.cu: the decode kernels' instantiations: gemm_decode.cuh's
 * tile widths 8 to 128 in steps of 8 x bf16 and fp16 x B read either way
 * (and the pair, two consumers on 128-row tiles, to width 64; the quad
 * is kern_decode_quad.cu's),
 * gemm_decode_tf32.cuh's widths 8, 16, 32, 64 and 128 x B read either
 * way x 64- or 128-row tiles. */
#include "gemm_decode_tf32.cuh"

namespace gemmk
{
namespace
{

/* one consumer on 64-row tiles, or the pair (two consumers, 128-row
 * tiles) for widths up to 64 */
template <int BN, int AB, int AMN>
cudaError_t launch_decode_one(const DecodeLaunch &l)
{
    if constexpr (BN <= 64) {
        if (l.rows == 128)
            return launch_decode_cw<BN, AB, AMN, 2>(l);
    }
    if (l.rows != 64)
        return cudaErrorInvalidValue;
    return launch_decode_cw<BN, AB, AMN, 1>(l);
}

template <int BN, int AMN, int RS, int X3 = 0>
cudaError_t launch_decode_tf32(const DecodeLaunch &l)
{
    static SmemOptIn opt_in; /* this kernel's (smem_opt_in.h) */
    auto kern = gemm_decode_tf32_kernel<BN, AMN, RS, X3>;
    const int smem = DecodeTf32Cfg<BN, RS, X3>::smem(l.p.stages);
    cudaError_t e = opt_in.ensure(kern, smem);
    if (e != cudaSuccess)
        return e;
    kern<<<dim3(l.grid, l.grid_y), 288, smem, l.stream>>>(l.ta, l.tb, l.p);
    return cudaGetLastError();
}

template <int BN> cudaError_t launch_decode_tf32_bn(const DecodeLaunch &l)
{
    if (l.x3) { /* B^T into registers, either way */
        if (l.amn == 1 || (l.rs && BN > 16))
            return cudaErrorInvalidValue;
        if constexpr (BN <= 16) {
            if (l.rs)
                return l.amn ? launch_decode_tf32<BN, 2, 1, 1>(l)
                             : launch_decode_tf32<BN, 0, 1, 1>(l);
        }
        return l.amn ? launch_decode_tf32<BN, 2, 0, 1>(l)
                     : launch_decode_tf32<BN, 0, 0, 1>(l);
    }
    switch (l.amn * 2 + (l.rs ? 1 : 0)) {
    case 0:
        return launch_decode_tf32<BN, 0, 0>(l);
    case 1:
        return launch_decode_tf32<BN, 0, 1>(l);
    case 2:
        return launch_decode_tf32<BN, 1, 0>(l);
    case 3:
        return launch_decode_tf32<BN, 1, 1>(l);
    case 4:
        return launch_decode_tf32<BN, 2, 0>(l);
    default:
        return launch_decode_tf32<BN, 2, 1>(l);
    }
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

int decode_stages(int bn, long long tiles, int sms, int rows)
{
    /* bytes of B in flight that keep HBM busy (about its bandwidth x
     * latency: more measured slower at N = 28672, kernel-notes v13) */
    constexpr long long kInFlight = 12ll << 20;
    constexpr int kSmemSm = 228 * 1024, kReserved = 1024;
    const int tile = rows / 64 * DecodeCfg<8>::A_BYTES; /* B's, a stage */
    const int stage = tile + bn * BK * 2;
    long long per_sm = (tiles + sms - 1) / (sms > 0 ? sms : 1);
    per_sm = per_sm < 1 ? 1 : per_sm > 8 ? 8 : per_sm;
    int most = (kSmemSm / (int)per_sm - kReserved - 1024) / (stage + 16);
    const int cap = (int)(kInFlight / ((tiles > 0 ? tiles : 1) * tile));
    most = most < cap ? most : cap;
    most = most < 16 ? most : 16;
    const int one_sm = (227 * 1024 - 1024) / (stage + 16);
    most = most < one_sm ? most : one_sm;
    return most > 2 ? most : 2;
}

int decode_tf32_stages(int bn, int rows, long long tiles, int sms, int forced,
                       bool x3)
{
    /* decode_stages with the transposed tiles (16 KB) beside the ring's
     * stages of rows x 128 + bn x 128 (x3: two of the latter, no
     * transposed tiles) */
    int st = forced >= 2 ? forced : decode_stages(bn, tiles, sms);
    const int stage = rows * 128 + (x3 ? 2 : 1) * bn * 128 + 16;
    long long per_sm = (tiles + sms - 1) / (sms > 0 ? sms : 1);
    per_sm = per_sm < 1 ? 1 : per_sm > 8 ? 8 : per_sm;
    const int room = (int)((227 * 1024) / per_sm) - 1024 - (x3 ? 0 : 2 * 8192);
    while (st > 2 && st * stage > room)
        st--;
    /* 64-row tiles: the two consumers take alternate k-blocks, so an even
     * depth keeps each stage with one consumer, which then waits on every
     * phase of its barrier. With an odd one a consumer's parity wait
     * could pass on the phase before last, while the other consumer's
     * load into that stage has not landed (3 stages crashed, v20). */
    if (rows == 64 && st % 2)
        st--;
    return st;
}

cudaError_t launch_decode(const DecodeLaunch &l)
{
    if (l.tf32) {
        switch (l.bn) {
        case 8:
            return launch_decode_tf32_bn<8>(l);
        case 16:
            return launch_decode_tf32_bn<16>(l);
        case 32:
            return launch_decode_tf32_bn<32>(l);
        case 64:
            return launch_decode_tf32_bn<64>(l);
        case 128:
            return launch_decode_tf32_bn<128>(l);
        default:
            return cudaErrorInvalidValue;
        }
    }
    if (l.rows == 256)
        return launch_decode_quad(l);
    return decode_widths<128>(
        l.bn, [&](auto w) { return launch_decode_bn<decltype(w)::value>(l); });
}

} // namespace gemmk
