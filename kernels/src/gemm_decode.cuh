/*
 * gemm_decode.cuh: the decode kernel, for products with few rows of A
 * (M <= 128) and N, K in the thousands, whose time is reading B once.
 *
 * It computes the transpose, D^T = B^T A^T: B^T's rows (N) run on 64-row
 * tiles, one tile a CTA, and A's rows on wgmma's N: M rounded up to a
 * multiple of 8 (up to 128), so a stage carries at most 7 rows of zero
 * fill. No K split: a tile streams its 64 rows of B over the whole of K,
 * and at N = 8192 the 128 tiles fill the GPU with one read of B each,
 * nothing to sum afterwards. One producer warp issues the TMA loads of
 * a ring whose depth is a launch parameter (decode_stages: where the
 * tiles outnumber the SMs, shallow enough that all of them are resident
 * at once, so the memory system, not the block scheduler, shares out the
 * bandwidth evenly: N = 28672 is 448 tiles, 3.4 an SM); one consumer
 * warpgroup issues wgmma m64nBNk16 and at the end writes its 64 x BN
 * block of D^T as D (transposed through shared memory, so D's rows go
 * out whole), with alpha, beta and C. (More than 128 rows of A: a grid
 * row per 128, each reading B again; only for the catalog's sake.)
 *
 * CW = 2 (the pair): 128-row tiles, a consumer warpgroup on each 64 rows
 * of a stage that also carries A's tile once, so the CTAs read A from L2
 * half as often and hand over a stage of 16 KB of B per handshake.
 * R = 2 with the pair (the quad): 256-row tiles, each consumer on 128
 * rows as two blocks of 64 (two wgmmas a k-step against the same A),
 * stages of 32 KB of B, one CTA an SM: cuBLAS's shape at 64 x 28672.
 *
 * A' (B read as N x K) is MN-major in shared memory when B is K x N
 * (AMN = 1) and K-major when B is stored N x K; B' (A, M x K) is always
 * K-major: the caller takes this kernel only for an untransposed A.
 */
#pragma once

#include <type_traits>

#include "decode.h"
#include "gemm_sm90.cuh"
#include "smem_opt_in.h"

namespace gemmk
{

/* CW consumer warpgroups, each on its own 64 R of a tile's 64 CW R rows
 * (R blocks of 64, a wgmma each a k-step) */
template <int BN, int CW = 1, int R = 1> struct DecodeCfg {
    static constexpr int BLOCKS = CW * R; /* 64-row blocks of B^T a tile */
    static constexpr int A_BYTES = BLOCKS * 64 * BK * 2;
    static constexpr int B_BYTES = BN * BK * 2;
    static constexpr int OUT_BYTES = BN * 65 * 4; /* D^T block, padded */
    static_assert(BLOCKS * OUT_BYTES <= 2 * (A_BYTES + B_BYTES),
                  "out in the ring");
    /* dynamic shared memory for a ring of `stages` (the block of D^T
     * reuses the ring once the main loop is done) */
    static constexpr int smem(int stages)
    {
        return stages * (A_BYTES + B_BYTES) + 1024 + 16 * stages;
    }
};

/* A decode producer's TMA load, with L2 policy `policy` where hint
 * (DecodeParams.hint: B's lines, read once, evict first; A's, read by
 * every CTA, last), else plain. */
__device__ __forceinline__ void decode_load(void *dst, const CUtensorMap *map,
                                            int c0, int c1, uint64_t *bar,
                                            int hint, uint64_t policy)
{
    if (hint)
        tma_load_2d_hint(dst, map, c0, c1, bar, policy);
    else
        tma_load_2d(dst, map, c0, c1, bar);
}

template <int BN, int AB, int AMN>
__device__ __forceinline__ void decode_mma(float (&d)[BN / 2], uint64_t da,
                                           uint64_t db, int scale_d)
{
    if constexpr (AB == 1)
        wgmma_m64k16_f16<BN, AMN, 0>(d, da, db, scale_d);
    else
        wgmma_m64k16_bf16<BN, AMN, 0>(d, da, db, scale_d);
}

/* D[m][n0 + r] = alpha * out[m][r] + beta * C[m][n0 + r] for the block's
 * columns m < cols and rows r < 64 within D; consumer threads (128). */
template <typename T, int BN>
__device__ __forceinline__ void
decode_store(const DecodeParams &p, const float *out, int n0, int m0, int tid)
{
    T *d = static_cast<T *>(p.d);
    const T *c = static_cast<const T *>(p.c);
    for (int i = tid; i < BN * 64; i += 128) {
        const int j = i / 64, r = i % 64, n = n0 + r;
        const long long m = m0 + j;
        if (m >= p.cols || n >= p.rows)
            continue;
        float v = p.alpha * out[j * 65 + r];
        if (p.beta != 0.f)
            v += p.beta * to_f32(c[m * p.ldc + n]);
        d[m * p.ldd + n] = from_f32<T>(v);
    }
}

/* decode_store in D's type (p.cd_type). */
template <int BN>
__device__ __forceinline__ void decode_store_cd(const DecodeParams &p,
                                                const float *out, int n0,
                                                int m0, int tid)
{
    if (p.cd_type == 3)
        decode_store<float, BN>(p, out, n0, m0, tid);
    else if (p.cd_type == 1)
        decode_store<__nv_bfloat16, BN>(p, out, n0, m0, tid);
    else
        decode_store<__half, BN>(p, out, n0, m0, tid);
}

/* The consumer warpgroup's accumulators d (a 64 x BN block of D^T) into
 * out as [m][n] (rows of 65), or added to what out holds (add).
 * d[4j + 2h + e] is row 16 warp + lane / 4 + 8h of the block (n), column
 * 8j + 2 (lane % 4) + e (m); tid the thread's index in the warpgroup. */
template <int BN>
__device__ __forceinline__ void
decode_to_out(float *out, const float (&d)[BN / 2], int tid, bool add)
{
    const int warp = tid / 32, lane = tid % 32;
#pragma unroll
    for (int j = 0; j < BN / 8; j++)
#pragma unroll
        for (int h = 0; h < 2; h++)
#pragma unroll
            for (int e = 0; e < 2; e++) {
                const int r = 16 * warp + lane / 4 + 8 * h;
                const int m = 8 * j + 2 * (lane % 4) + e;
                const float v = d[4 * j + 2 * h + e];
                out[m * 65 + r] = add ? out[m * 65 + r] + v : v;
            }
}

template <int BN, int AB, int AMN, int CW, int R = 1>
__global__ void __launch_bounds__(128 * CW + 32, R > 1 ? 1 : CW)
    gemm_decode_kernel(const __grid_constant__ CUtensorMap ta,
                       const __grid_constant__ CUtensorMap tb,
                       const __grid_constant__ DecodeParams p)
{
    using C = DecodeCfg<BN, CW, R>;
    const int stages = p.stages;
    extern __shared__ uint8_t smem_raw[];
    uint8_t *sa = reinterpret_cast<uint8_t *>(
        (reinterpret_cast<uintptr_t>(smem_raw) + 1023) & ~uintptr_t(1023));
    uint8_t *sb = sa + stages * C::A_BYTES;
    float *out = reinterpret_cast<float *>(sa); /* after the main loop */
    uint64_t *full = reinterpret_cast<uint64_t *>(sb + stages * C::B_BYTES);
    uint64_t *empty = full + stages;
    const int n0 = blockIdx.x * 64 * C::BLOCKS, m0 = blockIdx.y * BN;
    /* lane 0 of each consumer warp */
    ring_init(full, empty, stages, 4 * CW);

    if (warpgroup_index() == CW) { /* the producer warp */
        if (threadIdx.x != 128 * CW)
            return;
        int s = 0;
        uint32_t ph = 0;
        const uint64_t once = l2_policy_evict_first(),
                       again = l2_policy_evict_last();
        for (int kb = 0; kb < p.nkb; kb++) {
            mbar_wait(&empty[s], ph ^ 1);
            mbar_expect_tx(&full[s], C::A_BYTES + C::B_BYTES);
            const int k0 = kb * BK;
            uint8_t *a = sa + s * C::A_BYTES;
#pragma unroll
            for (int c = 0; c < C::BLOCKS; c++) { /* 64 rows each */
                const int c0 = AMN ? n0 + 64 * c : k0,
                          c1 = AMN ? k0 : n0 + 64 * c;
                decode_load(a + c * 64 * BK * 2, &ta, c0, c1, &full[s], p.hint,
                            once);
            }
            decode_load(sb + s * C::B_BYTES, &tb, k0, m0, &full[s], p.hint,
                        again);
            if (++s == stages) {
                s = 0;
                ph ^= 1;
            }
        }
        return;
    }

    /* a consumer warpgroup: rows 64 R wg .. 64 R (wg + 1) - 1 of the tile,
     * block r of them 64 (R wg + r) on */
    const int wg = CW > 1 ? warpgroup_index() : 0;
    const int tid = CW > 1 ? threadIdx.x % 128 : threadIdx.x, lane = tid % 32;
    constexpr uint32_t A_KSTEP = AMN ? 16 * 128 : 32;
    const uint64_t da0 =
        gemmk_desc_encode(smem_u32(sa + wg * R * 64 * BK * 2), AMN ? SLAB : 16,
                          1024, GEMMK_SWIZZLE_128B);
    const uint64_t db0 =
        gemmk_desc_encode(smem_u32(sb), 16, 1024, GEMMK_SWIZZLE_128B);
    float d[R][BN / 2];
#pragma unroll
    for (int r = 0; r < R; r++)
#pragma unroll
        for (int i = 0; i < BN / 2; i++)
            d[r][i] = 0.f;
    auto fence_d = [&] {
#pragma unroll
        for (int r = 0; r < R; r++)
            fence_regs(d[r]);
    };
    int s = 0, prev = -1;
    uint32_t ph = 0;
    for (int kb = 0; kb < p.nkb; kb++) {
        mbar_wait(&full[s], ph);
        fence_d();
        wgmma_fence();
#pragma unroll
        for (int kk = 0; kk < BK / 16; kk++) {
            const uint64_t db = db0 + ((s * C::B_BYTES + kk * 32) >> 4);
#pragma unroll
            for (int r = 0; r < R; r++) {
                const uint64_t da =
                    da0 +
                    ((s * C::A_BYTES + r * 64 * BK * 2 + kk * A_KSTEP) >> 4);
                decode_mma<BN, AB, AMN>(d[r], da, db, 1);
            }
        }
        wgmma_commit();
        wgmma_wait<1>();
        fence_d();
        if (prev >= 0 && lane == 0)
            mbar_arrive(&empty[prev]);
        prev = s;
        if (++s == stages) {
            s = 0;
            ph ^= 1;
        }
    }
    wgmma_wait<0>();
    fence_d();

    /* the blocks of D^T go into the ring once every consumer is done
     * reading it */
    if constexpr (CW > 1)
        asm volatile("bar.sync 2, %0;" ::"n"(128 * CW) : "memory");
    float *mine = out + wg * R * BN * 65;
#pragma unroll
    for (int r = 0; r < R; r++)
        decode_to_out<BN>(mine + r * BN * 65, d[r], tid, false);
    if (wg == 0)
        asm volatile("bar.sync 1, 128;" ::: "memory");
    else /* the second consumer */
        asm volatile("bar.sync 3, 128;" ::: "memory");
    for (int r = 0; r < R; r++)
        decode_store_cd<BN>(p, mine + r * BN * 65, n0 + 64 * (wg * R + r), m0,
                            tid);
}

/* f(std::integral_constant<int, bn>) for the 16-bit kernel's tile widths
 * bn = W, W + 8, .. MAX; cudaErrorInvalidValue for any other. */
template <int MAX, int W = 8, typename F>
cudaError_t decode_widths(int bn, F &&f)
{
    if (bn == W)
        return f(std::integral_constant<int, W>{});
    if constexpr (W < MAX)
        return decode_widths<MAX, W + 8>(bn, f);
    return cudaErrorInvalidValue;
}

/* gemm_decode_kernel<BN, AB, AMN, CW, R> on l's grid and stream. */
template <int BN, int AB, int AMN, int CW, int R = 1>
cudaError_t launch_decode_cw(const DecodeLaunch &l)
{
    static SmemOptIn opt_in; /* this kernel's (smem_opt_in.h) */
    auto kern = gemm_decode_kernel<BN, AB, AMN, CW, R>;
    const int smem = DecodeCfg<BN, CW, R>::smem(l.p.stages);
    cudaError_t e = opt_in.ensure(kern, smem);
    if (e != cudaSuccess)
        return e;
    kern<<<dim3(l.grid, l.grid_y), 128 * CW + 32, smem, l.stream>>>(l.ta, l.tb,
                                                                    l.p);
    return cudaGetLastError();
}

} // namespace gemmk
