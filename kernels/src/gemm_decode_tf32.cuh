/*
 * gemm_decode_tf32.cuh: the decode kernel (gemm_decode.cuh) for fp32
 * inputs as tf32: D^T = B^T A^T with B^T on 64-row tiles and A's rows on
 * wgmma's N (BN = 8, 16, 32, 64 or 128: M rounded up, rows past M zero),
 * one read of B, no K split.
 *
 * tf32 wgmma reads K-major operands only, and a row-major B read as N x K
 * is MN-major: elsewhere a pre-pass transposes all of B through memory,
 * which for these shapes costs more than the product. Here B^T is wgmma's
 * A: TMA brings each stage's tile MN-major (two 32-row slabs), and the
 * consumers either read it straight into A's registers (AMN = 2,
 * load_a_frags) or transpose it in shared memory (AMN = 1,
 * transpose_tile: 16 words read and 4 x 16 bytes written a thread into a
 * K-major buffer in the 128B-swizzled layout wgmma reads, both sides free
 * of bank conflicts). A K-major B (AMN = 0) is read in the stage. As tf32
 * both operands arrive rounded: their tensor maps are TFLOAT32, which the
 * TMA unit rounds as it loads (swap.cu). X3 (3xTF32) maps B exactly and
 * splits it in registers, A's two parts coming from the pre-pass.
 *
 * Two consumer warpgroups take alternate k-blocks (each its own
 * accumulators and transposed tile), because one warpgroup's transpose,
 * barrier and wgmma issue take longer than a stage's bytes take to
 * arrive: one transposes while the other's wgmmas run. Each gives its
 * stage back before it waits for its next one, so a ring of two stages
 * cannot stall them; the ring's depth is even, so each stage belongs to
 * one consumer, which sees every phase of its barrier. Their sums are
 * added at the end, in a fixed order. Where the 64-row tiles would
 * outnumber what the SMs hold at once (N = 28672: 448), RS = 1: 128-row
 * tiles, each consumer on its own 64 rows of every stage, two CTAs an SM.
 */
#pragma once

#include "gemm_decode.cuh"
#include "tf32.h"

namespace gemmk
{

template <int BN, int RS, int X3 = 0> struct DecodeTf32Cfg {
    static constexpr int ROWS = RS ? 128 : 64; /* a tile's rows of B^T */
    static constexpr int A_BYTES = ROWS * 128; /* rows of 32 fp32 */
    /* X3: A's small and big parts, one tile each */
    static constexpr int B_BYTES = (X3 ? 2 : 1) * BN * 128;
    static constexpr int T_BYTES = X3 ? 0 : 2 * 64 * 128; /* per consumer */
    static constexpr int OUT_BYTES = BN * 65 * 4;
    static_assert(OUT_BYTES <= 2 * (A_BYTES + B_BYTES), "out in the ring");
    static constexpr int smem(int stages)
    {
        return stages * (A_BYTES + B_BYTES) + T_BYTES + 1024 + 16 * stages;
    }
};

/* The MN-major 64 x 32 tile at src (two slabs of 32 rows: slab j at j x
 * 4096, k-row k at k x 128, 16-byte chunk c of rows 4c..4c+3 at chunk
 * c ^ (k % 8)) into K-major dst (row n at n x 128, chunk q of k-values
 * 4q..4q+3 at chunk q ^ (n % 8)). Thread tid: rows nb +
 * 16 r (nb = tid % 16, r = 0..3), k-values 4 kq .. 4 kq + 3 (kq = tid /
 * 16): it reads them as 16 words (a warp's 32 words of one load fall in
 * 32 banks: 16 rows of one k-row and 16 of another, 4 apart mod 8, whose
 * chunks the swizzle puts in the other half) and writes each row's 4 as
 * 16 bytes (the 8 threads of a phase: 8 rows mod 8, 8 chunks). */
__device__ __forceinline__ void transpose_tile(const uint8_t *src, uint8_t *dst,
                                               int tid)
{
    const int nb = tid % 16, kq = tid / 16;
    float v[4][4]; /* [row r][k-value i] */
#pragma unroll
    for (int i = 0; i < 4; i++) {
        const int k = 4 * kq + i;
#pragma unroll
        for (int r = 0; r < 4; r++) {
            const int n = nb + 16 * r, j = n / 32, c = (n % 32) / 4;
            v[r][i] = *reinterpret_cast<const float *>(
                src + j * 4096 + k * 128 + ((c ^ (k % 8)) * 16) + (n % 4) * 4);
        }
    }
#pragma unroll
    for (int r = 0; r < 4; r++) {
        const int n = nb + 16 * r;
        *reinterpret_cast<float4 *>(dst + n * 128 + ((kq ^ (n % 8)) * 16)) =
            make_float4(v[r][0], v[r][1], v[r][2], v[r][3]);
    }
}

/* The same fragments from a K-major tile (row n at n x 128, chunk q of
 * k-values 4q..4q+3 at chunk q ^ (n % 8)), for X3 with B transposed: a
 * warp's load is 8 rows n % 8 = g, each its own chunk, 4 words each: 32
 * banks as it stands. */
__device__ __forceinline__ void load_a_frags_k(const uint8_t *src, int tid,
                                               uint32_t (&a)[4][4])
{
    const int w = tid / 32, g = (tid % 32) / 4, t = tid % 4;
#pragma unroll
    for (int kk = 0; kk < 4; kk++)
#pragma unroll
        for (int j = 0; j < 2; j++)
#pragma unroll
            for (int h = 0; h < 2; h++) {
                const int n = 16 * w + g + 8 * h;
                a[kk][h + 2 * j] = *reinterpret_cast<const uint32_t *>(
                    src + n * 128 + (((2 * kk + j) ^ g) * 16) + t * 4);
            }
}

/* fp32 words (in big) into 3xTF32's big and small parts, in place: what
 * tf32.h's split (the pre-pass's own) gives for finite words whose
 * rounding stays finite, two finite roundings and a subtraction. Returns
 * whether a word was not finite or rounded to infinity; the caller then
 * loads the words again and runs split_full. The full split for every
 * word measured 2.3x slower (kernel-notes v20). */
__device__ __forceinline__ bool split_fast(uint32_t (&big)[4][4],
                                           uint32_t (&small)[4][4])
{
    bool odd = false;
#pragma unroll
    for (int kk = 0; kk < 4; kk++)
#pragma unroll
        for (int i = 0; i < 4; i++) {
            const uint32_t u = big[kk][i];
            const uint32_t b = gemmk_tf32_round_finite_bits(u);
            const uint32_t r =
                __float_as_uint(__uint_as_float(u) - __uint_as_float(b));
            big[kk][i] = b;
            small[kk][i] = gemmk_tf32_round_finite_bits(r);
            odd |= (u & 0x7f800000u) == 0x7f800000u ||
                   (b & 0x7f800000u) == 0x7f800000u;
        }
    return odd;
}

__device__ __forceinline__ void split_full(uint32_t (&big)[4][4],
                                           uint32_t (&small)[4][4])
{
#pragma unroll
    for (int kk = 0; kk < 4; kk++)
#pragma unroll
        for (int i = 0; i < 4; i++) {
            float b, sm;
            gemmk_tf32_split(__uint_as_float(big[kk][i]), &b, &sm);
            big[kk][i] = __float_as_uint(b);
            small[kk][i] = __float_as_uint(sm);
        }
}

template <int BN, int AMN, int RS, int X3>
__global__ void __launch_bounds__(288, RS ? 2 : 1)
    gemm_decode_tf32_kernel(const __grid_constant__ CUtensorMap ta,
                            const __grid_constant__ CUtensorMap tb,
                            const __grid_constant__ DecodeParams p)
{
    static_assert(!X3 || AMN != 1, "3xTF32 reads B^T into registers");
    using C = DecodeTf32Cfg<BN, RS, X3>;
    const int stages = p.stages;
    extern __shared__ uint8_t smem_raw[];
    uint8_t *sa = reinterpret_cast<uint8_t *>(
        (reinterpret_cast<uintptr_t>(smem_raw) + 1023) & ~uintptr_t(1023));
    uint8_t *sb = sa + stages * C::A_BYTES;
    uint8_t *st = sb + stages * C::B_BYTES;     /* the transposed tiles */
    float *out = reinterpret_cast<float *>(sa); /* after the main loop */
    uint64_t *full = reinterpret_cast<uint64_t *>(st + C::T_BYTES);
    uint64_t *empty = full + stages;
    const int n0 = blockIdx.x * C::ROWS, m0 = blockIdx.y * BN;
    /* lanes 0 of the consuming warpgroup (RS: of both) */
    ring_init(full, empty, stages, RS ? 8 : 4);

    if (warpgroup_index() == 2) { /* the producer warp */
        if (threadIdx.x != 256)
            return;
        int s = 0;
        uint32_t ph = 0;
        const uint64_t once = l2_policy_evict_first(),
                       again = l2_policy_evict_last();
        for (int kb = 0; kb < p.nkb; kb++) {
            mbar_wait(&empty[s], ph ^ 1);
            mbar_expect_tx(&full[s], C::A_BYTES + C::B_BYTES);
            const int k0 = kb * 32;
            uint8_t *a = sa + s * C::A_BYTES;
            if constexpr (AMN != 0) {
#pragma unroll
                for (int j = 0; j < C::ROWS / 32; j++)
                    decode_load(a + j * 4096, &ta, n0 + 32 * j, k0, &full[s],
                                p.hint, once);
            } else {
                decode_load(a, &ta, k0, n0, &full[s], p.hint, once);
            }
            decode_load(sb + s * C::B_BYTES, &tb, k0, m0, &full[s], p.hint,
                        again);
            if constexpr (X3) /* A's big part, kseg further along */
                decode_load(sb + s * C::B_BYTES + BN * 128, &tb, p.kseg + k0,
                            m0, &full[s], p.hint, again);
            if (++s == stages) {
                s = 0;
                ph ^= 1;
            }
        }
        return;
    }

    /* consumer c takes k-blocks c, c + 2, ... (RS: every k-block, rows
     * 64 c .. 64 c + 63 of the tile) */
    const int c = warpgroup_index(), tid = threadIdx.x % 128;
    const int lane = tid % 32;
    float d[BN / 2];
    /* X3: d restarts every p.promo of this consumer's k-blocks, its sums
     * promoted into acc (fp32 adds, round to nearest), as ws-3xtf32 does
     * (gemm_sm90.cuh) */
    float acc[X3 ? BN / 2 : 1];
    /* X3 up to width 32: the two cross products in accumulators of their
     * own (three chains of four wgmmas instead of one of twelve, each
     * summing smaller terms: 2-3e-8 against 6e-8, kernel-notes v20);
     * wider, they would not fit the registers */
    constexpr bool X3M = X3 && BN <= 32;
    float dx[X3M ? 2 : 1][X3M ? BN / 2 : 1];
#pragma unroll
    for (int i = 0; i < BN / 2; i++)
        d[i] = 0.f;
#pragma unroll
    for (int i = 0; i < (X3 ? BN / 2 : 1); i++)
        acc[i] = 0.f;
#pragma unroll
    for (auto &row : dx)
#pragma unroll
        for (float &v : row)
            v = 0.f;
    /* the accumulators kept in order around the wgmmas that write them */
    auto fence_acc = [&] {
        fence_regs(d);
        if constexpr (X3M) {
            fence_regs(dx[0]);
            fence_regs(dx[1]);
        }
    };
    /* X3: a chunk's sum in element i, the small cross terms first */
    auto chunk = [&](int i) {
        if constexpr (X3M)
            return (dx[0][i] + dx[1][i]) + d[i];
        else
            return d[i];
    };
    const AFrags frags = a_frags_at(tid);
    int prev = -1, it = 0;
    for (int kb = RS ? 0 : c; kb < p.nkb; kb += RS ? 1 : 2, it++) {
        /* this consumer's previous wgmmas (issued while the other one
         * worked) are done: its stage goes back before the wait for the
         * next, so two stages keep both consumers going, and its
         * transposed tile is free */
        wgmma_wait<0>();
        fence_acc();
        if (prev >= 0 && lane == 0)
            mbar_arrive(&empty[prev]);
        int fresh = 0;
        if constexpr (X3) {
            if (it > 0 && it % p.promo == 0) {
#pragma unroll
                for (int i = 0; i < BN / 2; i++)
                    acc[i] += chunk(i);
                fresh = 1;
            }
        }
        const int s = kb % stages;
        mbar_wait(&full[s], (uint32_t)((kb / stages) & 1));
        uint8_t *src = sa + s * C::A_BYTES + (RS ? c * 8192 : 0);
        const uint64_t db = gemmk_desc_encode(smem_u32(sb + s * C::B_BYTES), 16,
                                              1024, GEMMK_SWIZZLE_128B);
        if constexpr (X3) {
            /* [A_small | A_big] . [B_big | B_small | B_big]: the tiles of
             * A's parts are BN x 128 bytes apart */
            uint32_t big[4][4], small[4][4];
            auto load = [&] {
                if constexpr (AMN == 2)
                    load_a_frags(src, frags, big);
                else
                    load_a_frags_k(src, tid, big);
            };
            /* split before the first wgmma: registers written between
             * them would make the compiler fence each one */
            load();
            if (split_fast(big, small)) {
                load();
                split_full(big, small);
            }
            const uint64_t dbig = db + (BN * 128 >> 4);
            fence_acc();
            wgmma_fence();
#pragma unroll
            for (int kk = 0; kk < 4; kk++) {
                const int sc = !(fresh && kk == 0);
                if constexpr (X3M) {
                    wgmma_m64k8_tf32_rs<BN>(dx[0], big[kk], db + kk * 2, sc);
                    wgmma_m64k8_tf32_rs<BN>(dx[1], small[kk], dbig + kk * 2,
                                            sc);
                    wgmma_m64k8_tf32_rs<BN>(d, big[kk], dbig + kk * 2, sc);
                } else {
                    wgmma_m64k8_tf32_rs<BN>(d, big[kk], db + kk * 2, sc);
                    wgmma_m64k8_tf32_rs<BN>(d, small[kk], dbig + kk * 2, 1);
                    wgmma_m64k8_tf32_rs<BN>(d, big[kk], dbig + kk * 2, 1);
                }
            }
        } else if constexpr (AMN == 2) {
            uint32_t af[4][4];
            load_a_frags(src, frags, af);
            fence_regs(d);
            wgmma_fence();
#pragma unroll
            for (int kk = 0; kk < 4; kk++)
                wgmma_m64k8_tf32_rs<BN>(d, af[kk], db + kk * 2, 1);
        } else {
            uint8_t *a = src;
            if constexpr (AMN == 1) {
                a = st + c * 8192;
                transpose_tile(src, a, tid);
                fence_proxy_async_smem();
                asm volatile("bar.sync %0, 128;" ::"r"(1 + c) : "memory");
            }
            const uint64_t da =
                gemmk_desc_encode(smem_u32(a), 16, 1024, GEMMK_SWIZZLE_128B);
            fence_regs(d);
            wgmma_fence();
#pragma unroll
            for (int kk = 0; kk < 4; kk++) /* k8 steps of 32 bytes */
                mma_k16<BN, 2, 0, 0>(d, da + kk * 2, db + kk * 2, 1);
        }
        wgmma_commit();
        prev = s;
    }
    wgmma_wait<0>();
    fence_acc();
    if (prev >= 0 && lane == 0)
        mbar_arrive(&empty[prev]);
    if constexpr (X3) {
#pragma unroll
        for (int i = 0; i < BN / 2; i++)
            d[i] = acc[i] + chunk(i);
    }
    /* every wgmma of both is done before out overwrites the ring */
    asm volatile("bar.sync 3, 256;" ::: "memory");

    /* RS: each consumer stores its own 64 rows in turn; else consumer
     * 1's sums go in first, consumer 0 adds its own and stores */
    for (int pass = 1; pass >= 0; pass--) {
        if (c == pass)
            decode_to_out<BN>(out, d, tid, pass == 0 && !RS);
        asm volatile("bar.sync 3, 256;" ::: "memory");
        if (c == pass && (RS || pass == 0))
            decode_store_cd<BN>(p, out, n0 + (RS ? 64 * c : 0), m0, tid);
        asm volatile("bar.sync 3, 256;" ::: "memory");
    }
}

} // namespace gemmk
