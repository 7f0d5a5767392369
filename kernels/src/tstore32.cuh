/*
 * tstore32.cuh: the tf32 kernel's fp32 TMA-store epilogue pieces
 * (gemm_sm90_tstore.cuh runs them): fp32 D staged in 64 x 32 boxes
 * (8 KB, a 128-byte swizzled row holding 32 values), and D^T (the
 * product of D^T = B^T A^T, which runs NN with no pre-pass) staged
 * transposed, or stored transposed from registers where TMA cannot.
 */
#pragma once

#include "tma_store.cuh"

namespace gemmk
{

/* Whether the fp32 TMA-store epilogue applies (the tf32 kernel's; D's rows
 * end on 16 bytes: its column count a multiple of 4, n, or m of a D^T
 * product). Its boxes are 64 rows x 32 fp32 columns: a 128-byte swizzled
 * row holds 32 of them, so a box is 8 KB like a 16-bit one. */
__host__ __device__ inline bool tstore32_ok(const KParams &p)
{
    return p.splits == 1 && p.beta == 0.f && p.cd_type == 3 &&
           (p.d_trans ? p.m : p.n) % 4 == 0;
}

/*
 * Writes the 64 x 32 fp32 box of columns 32*J.. of one consumer's
 * accumulators into the swizzled box at buf: fragments j = 4J..4J+3, row
 * r = 16w + l/4 + 8h, 8 bytes at column 8j + 2(l%4), i.e. 16-byte chunk
 * c = 2(j%4) + (l%4)/2 of the 128-byte row, at r * 128 + ((c ^ r%8) * 16)
 * + 8(l%2). A half-warp's four rows r%8 = 0..3 (or 4..7) would put chunk
 * pairs c/2 ^ (r%8)/2 two on each pair of banks; lanes of odd l/4 store
 * fragment j ^ 2 when the others store j, which spreads the four rows
 * over four pairs: one wavefront a half-warp.
 */
template <int J, int R>
__device__ __forceinline__ void stage_box32(const float (&d)[R], uint32_t buf,
                                            int warp, int lane, float alpha)
{
    const bool odd = (lane >> 2) & 1;
#pragma unroll
    for (int h = 0; h < 2; h++) {
        const int r = 16 * warp + (lane >> 2) + 8 * h;
        const uint32_t row = buf + r * 128 + ((lane & 1) << 3);
#pragma unroll
        for (int q = 0; q < 4; q++) {
            constexpr int j0 = 4 * J;
            const int ja = 4 * (j0 + q) + 2 * h;
            const int jb = 4 * (j0 + (q ^ 2)) + 2 * h;
            const float x = odd ? d[jb] : d[ja];
            const float y = odd ? d[jb + 1] : d[ja + 1];
            const int c = 2 * (odd ? q ^ 2 : q) + ((lane & 3) >> 1);
            asm volatile("st.shared.v2.f32 [%0], {%1, %2};" ::"r"(
                             row + ((c ^ (r & 7)) << 4)),
                         "f"(alpha * x), "f"(alpha * y)
                         : "memory");
        }
    }
}

/* The NB fp32 boxes of step S (columns 32 * NB * S..) into the buffers. */
template <int NB, int S, int R>
__device__ __forceinline__ void stage_step32(const float (&d)[R], uint32_t buf,
                                             int warp, int lane, float alpha)
{
    static_assert(32 * NB * (S + 1) <= 2 * R, "a box past the block");
    stage_box32<NB * S, R>(d, buf, warp, lane, alpha);
    if constexpr (NB >= 2)
        stage_box32<NB * S + 1, R>(d, buf + 8192, warp, lane, alpha);
    if constexpr (NB >= 3)
        stage_box32<NB * S + 2, R>(d, buf + 2 * 8192, warp, lane, alpha);
    if constexpr (NB == 4)
        stage_box32<NB * S + 3, R>(d, buf + 3 * 8192, warp, lane, alpha);
}

/*
 * d_trans: one consumer's 64 x 256 block is D^T's, i.e. D's columns
 * row0.. (64) and rows col0.. (256): 2 x 4 boxes of 64 D rows x 32 D
 * columns. Writes columns 64 MQ.. of the block (D rows 64 MQ..) as two
 * boxes, D columns 0..31 of the block at buf and 32..63 at buf + 8192:
 * warp w's 16 rows of the block go to box w / 2. Element (i, j) of the
 * block (row i = 16w + l/4 + 8h, column j = 8jj + 2(l%4) + e of the
 * quarter) lands at row j, word i % 32 of its box: chunk (i % 32) / 4 ^
 * j % 8. A warp's store (one jj, h, e) is 8 consecutive i (two chunks, 4
 * words each) on 4 rows j whose j % 8 = 2(l%4) + e differ: 32 banks.
 */
template <int MQ, int R>
__device__ __forceinline__ void stage_quarter32t(const float (&d)[R],
                                                 uint32_t buf, int warp,
                                                 int lane, float alpha)
{
    const uint32_t box = buf + (warp >> 1) * 8192;
    const int t = lane & 3;
#pragma unroll
    for (int h = 0; h < 2; h++) {
        const int i = (16 * warp + (lane >> 2) + 8 * h) % 32;
        const uint32_t col = box + (i % 4) * 4;
#pragma unroll
        for (int jj = 0; jj < 8; jj++)
#pragma unroll
            for (int e = 0; e < 2; e++) {
                const int j = 8 * jj + 2 * t + e;
                asm volatile("st.shared.f32 [%0], %1;" ::"r"(
                                 col + j * 128 + (((i / 4) ^ (j & 7)) << 4)),
                             "f"(alpha * d[4 * (8 * MQ + jj) + 2 * h + e])
                             : "memory");
            }
    }
}

/* Step S of a d_trans block's TMA-store epilogue: NB / 2 quarters (D rows
 * 64 (NB / 2) S..), each two boxes; boxes wholly outside D not issued. */
template <int NB, int S, int R>
__device__ __forceinline__ void
tstore32t_step(const KParams &p, const CUtensorMap *tmd, const float (&d)[R],
               uint8_t *cbuf, int row0, int col0, int tid, int warp, int lane,
               int bar_id)
{
    constexpr int Q = NB / 2; /* quarters a step */
    const uint32_t buf = smem_u32(cbuf);
    if (tid == 0)
        bulk_wait_read_all();
    wg_bar(bar_id);
    stage_quarter32t<Q * S, R>(d, buf, warp, lane, p.alpha);
    if constexpr (Q == 2)
        stage_quarter32t<Q * S + 1, R>(d, buf + 16384, warp, lane, p.alpha);
    fence_proxy_async_smem();
    wg_bar(bar_id);
    if (tid == 0) {
#pragma unroll
        for (int b = 0; b < NB; b++) {
            const int dc = row0 + 32 * (b & 1);         /* D's column */
            const int dr = col0 + 64 * (Q * S + b / 2); /* D's row */
            if (dc < p.m && dr < p.n)
                tma_store_2d(tmd, cbuf + b * 8192, dc, dr);
        }
        bulk_commit();
    }
}

/* Steps S.. of a d_trans block's TMA-store epilogue. */
template <int NB, int S, int R>
__device__ __forceinline__ void
tstore32t_steps(const KParams &p, const CUtensorMap *tmd, const float (&d)[R],
                uint8_t *cbuf, int row0, int col0, int tid, int warp, int lane,
                int bar_id)
{
    tstore32t_step<NB, S, R>(p, tmd, d, cbuf, row0, col0, tid, warp, lane,
                             bar_id);
    if constexpr (32 * NB * (S + 1) < 2 * R)
        tstore32t_steps<NB, S + 1, R>(p, tmd, d, cbuf, row0, col0, tid, warp,
                                      lane, bar_id);
}

/* A d_trans block from registers (beta != 0, 16-bit D, or D's rows not
 * ending on 16 bytes): element (i, j) of the block to D's row col0 + j,
 * column row0 + i. A warp's store is 8 consecutive columns of 4 rows. */
template <typename T, int BN>
__device__ __forceinline__ void store_tile_t(const KParams &p,
                                             const float (&d)[BN / 2], int row0,
                                             int col0, int lane, int warp)
{
    T *out = static_cast<T *>(p.d);
    const T *cin = static_cast<const T *>(p.c);
#pragma unroll
    for (int h = 0; h < 2; h++) {
        const int i = row0 + 16 * warp + (lane >> 2) + 8 * h;
        if (i >= p.m)
            continue;
#pragma unroll
        for (int jj = 0; jj < BN / 8; jj++)
#pragma unroll
            for (int e = 0; e < 2; e++) {
                const long long j = col0 + 8 * jj + 2 * (lane & 3) + e;
                if (j >= p.n)
                    continue;
                float v = p.alpha * d[4 * jj + 2 * h + e];
                if (p.beta != 0.f)
                    v += p.beta * to_f32(cin[j * p.ldc + i]);
                out[j * p.ldd + i] = from_f32<T>(v);
            }
    }
}

template <int BN>
__device__ __forceinline__ void store_any_t(const KParams &p,
                                            const float (&d)[BN / 2], int row0,
                                            int col0, int lane, int warp)
{
    if (p.cd_type == 3)
        store_tile_t<float, BN>(p, d, row0, col0, lane, warp);
    else if (p.cd_type == 1)
        store_tile_t<__nv_bfloat16, BN>(p, d, row0, col0, lane, warp);
    else
        store_tile_t<__half, BN>(p, d, row0, col0, lane, warp);
}

} // namespace gemmk
