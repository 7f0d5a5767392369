/*
 * oz_recon_mma.cuh: the reconstruction of D from residue bytes in the
 * int8 kernel's fragment order (s8_pp_store), for sets of at most 16
 * moduli and P < 2^128, with its sums on the tensor pipe: the column
 * sums S_i = sum_l r_l w_l[i] (ozaki.h) are a small integer product, the
 * residues of each output (a row of 16 bytes, one a modulus) times the
 * bytes of the CRT weights W_l, which `mma.m16n8k16` (u8 x u8 -> s32)
 * computes exactly (each sum below 16 * 255^2 < 2^20), where the
 * integer pipe took four 32 x 32 -> 64-bit multiply-adds an output and
 * modulus. For oz_passes.cuh's finish.
 */
#ifndef GEMMK_OZ_RECON_MMA_CUH
#define GEMMK_OZ_RECON_MMA_CUH

#include <stdint.h>

#include "oz_passes.cuh"

namespace gemmk
{
namespace
{

/* The moduli one product sums (its k). */
constexpr int kMmaModuli = 16;

/* Each thread's columns in its warp's shared memory: a row of 16 64-bit
 * sums a thread (32 words, padded to 40) and 4 rows a group of 4 threads
 * (160 words, padded to 164), so that both the row-wise writes and the
 * column-wise reads of 16 bytes fall on distinct banks in each quarter
 * warp. */
constexpr int kMmaRowWords = 40, kMmaGroupWords = 164;

/* Word i of v. */
__device__ __forceinline__ uint32_t word_of(const uint4 &v, int i)
{
    return i == 0 ? v.x : i == 1 ? v.y : i == 2 ? v.z : v.w;
}

/* out[e] byte i = in[i] byte e. */
__device__ __forceinline__ void transpose_bytes4(const uint32_t (&in)[4],
                                                 uint32_t (&out)[4])
{
    const uint32_t lo01 = __byte_perm(in[0], in[1], 0x5140);
    const uint32_t hi01 = __byte_perm(in[0], in[1], 0x7362);
    const uint32_t lo23 = __byte_perm(in[2], in[3], 0x5140);
    const uint32_t hi23 = __byte_perm(in[2], in[3], 0x7362);
    out[0] = __byte_perm(lo01, lo23, 0x5410);
    out[1] = __byte_perm(lo01, lo23, 0x7632);
    out[2] = __byte_perm(hi01, hi23, 0x5410);
    out[3] = __byte_perm(hi01, hi23, 0x7632);
}

/* d = a b, 16 x 16 u8 times 16 x 8 u8 into s32 (rows groupID and
 * groupID + 8 of A, k = 4 threadID_in_group + byte; column groupID of B,
 * the same k; d[0..1] row groupID, d[2..3] row groupID + 8, columns 2
 * threadID_in_group + 0, 1). */
__device__ __forceinline__ void mma_u8(uint32_t (&d)[4], uint32_t a0,
                                       uint32_t a1, uint32_t b)
{
    asm("mma.sync.aligned.m16n8k16.row.col.s32.u8.u8.s32 "
        "{%0, %1, %2, %3}, {%4, %5}, {%6}, {%7, %7, %7, %7};\n"
        : "=r"(d[0]), "=r"(d[1]), "=r"(d[2]), "=r"(d[3])
        : "r"(a0), "r"(a1), "r"(b), "r"(0u));
}

/* The 64-bit column from its four byte sums, b0 + 2^8 b1 + 2^16 b2 + 2^24
 * b3 (each below 2^20: the column stays below 2^45). */
__device__ __forceinline__ uint64_t byte_sums(uint32_t b0, uint32_t b1,
                                              uint32_t b2, uint32_t b3)
{
    return (uint64_t)(b0 + (b1 << 8)) + ((uint64_t)(b2 + (b3 << 8)) << 16);
}

/*
 * Block (tile, 16 groups of half x q x 64 of the int8 kernel's 128
 * threads), 256 threads: each group of 4 threads (gl, tig) sums the 16
 * outputs that one int8 thread G stored (16 bytes a plane). Thread tig
 * loads planes 4 tig .. 4 tig + 3 and transposes them into A's rows
 * (output J: its 4 moduli); mma m takes outputs 2m and 2m + 1, and its
 * two B tiles put byte 2h + e of limb tig of every W_k in column 2 tig
 * + e of tile h, so the thread gets limb tig of S for both outputs. Each
 * thread's 16 limbs go through shared memory to the thread that finishes
 * their output: thread tig takes J = 4 tig .. 4 tig + 3 (two rows, two
 * columns of D).
 */
template <int NW, typename T>
__global__ void __launch_bounds__(256)
    oz_recon_mma_kernel(const uint8_t *__restrict__ R, long long plane,
                        int num_n, const __grid_constant__ ReconConsts rc,
                        const int *__restrict__ ea, const int *__restrict__ eb,
                        double alpha, double beta, const T *c, long long ldc,
                        T *d, long long ldd, long long m, long long n)
{
    static_assert(NW <= 4, "4 limbs of S at most (P < 2^128)");
    __shared__ ReconRcp rcp;
    __shared__ __align__(16) uint32_t xs[8][8 * kMmaGroupWords];
    rcp_fill(rcp);
    const long long t = blockIdx.x;
    const int half = blockIdx.y >> 3, q = (blockIdx.y >> 1) & 3;
    const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    const int gl = lane >> 2, tig = lane & 3;
    const int G = 64 * (blockIdx.y & 1) + 8 * warp + gl;
    const uint8_t *src = R + t * (128 * 128) + 8192 * half + 2048 * q + 16 * G;
    uint4 v[4];
    uint32_t bw[2] = {0u, 0u};
#pragma unroll
    for (int i = 0; i < 4; i++) {
        const int k = 4 * tig + i;
        v[i] = k < rc.n ? __ldg(reinterpret_cast<const uint4 *>(
                              src + (long long)k * plane))
                        : make_uint4(0u, 0u, 0u, 0u);
        const uint32_t w = k < rc.n && (gl >> 1) < NW ? rc.w[k][gl >> 1] : 0u;
#pragma unroll
        for (int h = 0; h < 2; h++)
            bw[h] |= ((w >> (8 * (2 * h + (gl & 1)))) & 0xffu) << (8 * i);
    }
    uint32_t a[16];
#pragma unroll
    for (int cw = 0; cw < 4; cw++) {
        const uint32_t in[4] = {word_of(v[0], cw), word_of(v[1], cw),
                                word_of(v[2], cw), word_of(v[3], cw)};
        uint32_t out[4];
        transpose_bytes4(in, out);
#pragma unroll
        for (int e = 0; e < 4; e++)
            a[4 * cw + e] = out[e];
    }
    uint32_t *xw = &xs[warp][0];
    uint32_t *row = xw + gl * kMmaGroupWords + tig * kMmaRowWords;
#pragma unroll
    for (int mm = 0; mm < 8; mm++) {
        uint32_t d0[4], d1[4];
        mma_u8(d0, a[2 * mm], a[2 * mm + 1], bw[0]);
        mma_u8(d1, a[2 * mm], a[2 * mm + 1], bw[1]);
        *reinterpret_cast<ulonglong2 *>(row + 4 * mm) =
            make_ulonglong2(byte_sums(d0[0], d0[1], d1[0], d1[1]),
                            byte_sums(d0[2], d0[3], d1[2], d1[3]));
    }
    __syncwarp();
    uint64_t sum[4][NW];
#pragma unroll
    for (int ci = 0; ci < NW; ci++) {
        const ulonglong2 *col = reinterpret_cast<const ulonglong2 *>(
            xw + gl * kMmaGroupWords + ci * kMmaRowWords + 8 * tig);
        const ulonglong2 lo = col[0], hi = col[1];
        sum[0][ci] = lo.x;
        sum[1][ci] = lo.y;
        sum[2][ci] = hi.x;
        sum[3][ci] = hi.y;
    }
    /* output J = 4 tig + s of int8 thread G (its warp Gw, lane Gl) is
     * accumulator 16 q + J: row 16 Gw + Gl / 4 + 8 (s / 2), column 8 (4
     * q + tig) + 2 (Gl % 4) + s % 2 of the tile's half */
    const int Gw = G >> 5, Gl = G & 31;
    const long long mt = t / num_n, nt = t % num_n;
    const long long row0 = mt * 128 + 64 * half + 16 * Gw + (Gl >> 2);
    const long long col0 = nt * 128 + 8 * (4 * q + tig) + 2 * (Gl & 3);
    int er[2], ec[2];
#pragma unroll
    for (int h = 0; h < 2; h++) {
        er[h] = row0 + 8 * h < m ? ea[row0 + 8 * h] : 0;
        ec[h] = col0 + h < n ? eb[col0 + h] : 0;
    }
#pragma unroll
    for (int s = 0; s < 4; s++) {
        const long long r = row0 + 8 * (s >> 1), cl = col0 + (s & 1);
        if (r < m && cl < n)
            d[r * ldd + cl] =
                finish<NW>(sum[s], rc, rcp, er[s >> 1], ec[s & 1], alpha, beta,
                           beta != 0.0 ? c + r * ldc + cl : c);
    }
}

} // namespace
} // namespace gemmk

#endif /* GEMMK_OZ_RECON_MMA_CUH */
