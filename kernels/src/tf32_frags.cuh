/*
 * tf32_frags.cuh: tf32 wgmma's A operand from registers, read from an
 * MN-major tile in shared memory: the transposing load that lets a
 * k-block whose A (or, swapped, B^T) is stored MN-major feed wgmma with no
 * transposed copy. The tile is a TMA load of boxes of 32 MN x 32 k fp32
 * with the 128-byte swizzle: box j (MN values 32 j..) at j x 4096, k-row
 * k at k x 128, the 16-byte chunk c of MN values 4c..4c+3 at chunk
 * c ^ (k % 8). Used by the tf32 decode kernel (gemm_decode_tf32.cuh,
 * AMN = 2) and the tiled tf32 kernel with A MN-major (gemm_sm90.cuh).
 */
#pragma once

#include <stdint.h>

namespace gemmk
{

/* The k-block's four k8 fragments of tf32 m64k8 (warp w: rows 16 w ..
 * 16 w + 15; lane g t = lane / 4, lane % 4 holds row g + 8 h, k-value
 * t + 4 j as word h + 2 j) read straight from a 64-row MN-major tile (the
 * layout above): no second copy, no fence, no barrier. Load i of a k8 step
 * takes word i, so a warp's 32 words fall on 16 banks twice (a 2-way
 * conflict). An order free of conflicts exists (lane t takes word i ^ x,
 * x = t ^ (t >> 1) ^ 2 (w % 2)) but needs 8 selects a k8 step to put the
 * words in place: 1.5x the kernel's instructions, and 2-4% slower on the
 * H200 at 4096^3 and 8192^3 than the conflicts (kernel-notes v26). */
struct AFrags {
    uint32_t off[4]; /* byte offset of word i in the tile */
};

__device__ __forceinline__ AFrags a_frags_at(int tid)
{
    const int w = tid / 32, g = (tid % 32) / 4, t = tid % 4;
    AFrags f;
#pragma unroll
    for (int i = 0; i < 4; i++) {
        const int h = i & 1, j = i >> 1;
        const int n = 16 * w + g + 8 * h, k = t + 4 * j;
        f.off[i] = (uint32_t)((n / 32) * 4096 + k * 128 +
                              ((((n % 32) / 4) ^ k) * 16) + (n % 4) * 4);
    }
    return f;
}

/* The k-block's fragments KK0 .. KK1 - 1 into a[KK0 .. KK1 - 1]. */
template <int KK0 = 0, int KK1 = 4>
__device__ __forceinline__ void
load_a_frags(const uint8_t *src, const AFrags &f, uint32_t (&a)[4][4])
{
#pragma unroll
    for (int kk = KK0; kk < KK1; kk++) /* k + 8 kk: the same swizzle */
#pragma unroll
        for (int i = 0; i < 4; i++)
            a[kk][i] =
                *reinterpret_cast<const uint32_t *>(src + f.off[i] + kk * 1024);
}

} // namespace gemmk
