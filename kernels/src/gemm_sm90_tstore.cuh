/*
 * gemm_sm90_tstore.cuh: the 128 x 256 cooperative kernel of gemm_sm90.cuh
 * with a TMA-store epilogue (docs/kernel-notes.md).
 *
 * The main loop is gemm_ws_kernel's (BN = 256, no cluster). The epilogue
 * differs: each consumer warpgroup converts its 64 x 256 accumulators to
 * the output type, writes them with stmatrix into shared memory in the
 * 128B-swizzled layout of a 64 x 64 TMA box, and one thread stores the
 * boxes with cp.async.bulk.tensor (bounded by the D tensor map, so tails
 * need no checks). The consumer then starts the next tile's main loop while
 * the copy engine drains the stores; before it reuses a buffer, the issuing
 * thread waits (cp.async.bulk.wait_group.read) for the engine to have read
 * it. NB 64 x 64 buffers per consumer: NB = 4 holds a whole 64 x 256 block
 * (one store step per tile, 3 stages fit beside it); NB = 2 is half of it
 * (two steps per tile, 4 stages fit).
 *
 * tf32 (AB 2) with A MN-major reads A's fragments into registers from the
 * stage (consume_tile_rs), where the 16-bit kernels use the transpose
 * bit of a descriptor.
 *
 * Used when the epilogue is a plain conversion: no split-K, beta == 0,
 * bf16 or fp16 D, N a multiple of 8 (tstore_ok). Otherwise the kernel falls
 * back to the register epilogue (store_tile), so every problem runs correctly.
 * * With sk.units the grid is every SM and the last partial wave runs stream-K
 * (gemm_streamk.cuh): segments of units' k-blocks, partials published and
 * summed in a fixed order before the same epilogue.
 */
#pragma once

#include "gemm_sm90.cuh"
#include "gemm_streamk.cuh"
#include "tma_store.cuh"
#include "tstore32.cuh"

namespace gemmk
{

/* Whether the TMA-store epilogue applies; api.cu encodes the D tensor map
 * exactly when this holds. N a multiple of 8: a TMA store clips a box at
 * D's edge only to 16-byte granularity (measured: with N = 300 it wrote
 * columns 300..303 of the row padding), so rows must end on 16 bytes. */
__host__ __device__ inline bool tstore_ok(const KParams &p)
{
    return p.splits == 1 && p.beta == 0.f &&
           (p.cd_type == 1 || p.cd_type == 2) && p.n % 8 == 0;
}

/* BN 256: NB 2 (two store steps, 4 stages) or 4 (one, 3 stages); BN 192:
 * NB 3 (one step, 4 stages). */
template <int NB, int BN_ = 256> struct TsCfg {
    static constexpr int BN = BN_;
    static constexpr int STAGES = NB == 4 ? 3 : 4;
    static constexpr int A_BYTES = BM * BK * 2;
    static constexpr int B_BYTES = BN * BK * 2;
    static constexpr int SUB = 64 * 64 * 2; /* one 64 x 64 16-bit box */
    static constexpr int C_BYTES = 2 * NB * SUB;
    static constexpr int SMEM =
        STAGES * (A_BYTES + B_BYTES) + C_BYTES + 1024 + 256;
    static_assert((BN == 256 && (NB == 2 || NB == 4)) || (BN == 192 && NB == 3),
                  "NB: half or whole consumer block");
    static_assert(SMEM <= 227 * 1024, "over the opt-in shared memory limit");
};

/* alpha * (x, y) as two 16-bit values, x in the low half. */
template <bool OUT_F16>
__device__ __forceinline__ uint32_t pack2(float x, float y, float alpha)
{
    uint32_t u;
    if constexpr (OUT_F16) {
        __half2 h = __floats2half2_rn(alpha * x, alpha * y);
        u = *reinterpret_cast<uint32_t *>(&h);
    } else {
        __nv_bfloat162 h = __floats2bfloat162_rn(alpha * x, alpha * y);
        u = *reinterpret_cast<uint32_t *>(&h);
    }
    return u;
}

/*
 * Writes the 64 x 64 block of columns 64*J.. of one consumer's
 * accumulators into the swizzled box at buf (1024-aligned). Fragment
 * layout (store_tile): d[4j + 2h + e] is row 16w + l/4 + 8h, column
 * 8j + 2(l%4) + e, which is stmatrix's layout of the 8 x 8 matrix
 * (rows 16w + 8h.., columns 8j..). One stmatrix.x4 per pair of 8-column
 * blocks: matrices (h0, j), (h1, j), (h0, j+1), (h1, j+1); lane L gives the
 * address of row L%8 of matrix L/8. 128B swizzle: 16-byte chunk c of row r
 * lies at r * 128 + ((c ^ r % 8) * 16).
 */
template <bool OUT_F16, int J, int R>
__device__ __forceinline__ void stage_box(const float (&d)[R], uint32_t buf,
                                          int warp, int lane, float alpha)
{
    const int mi = lane >> 3;
    const int r = 16 * warp + 8 * (mi & 1) + (lane & 7);
#pragma unroll
    for (int q = 0; q < 4; q++) {
        constexpr int j0 = 8 * J;
        const int j = j0 + 2 * q;
        uint32_t r0 = pack2<OUT_F16>(d[4 * j], d[4 * j + 1], alpha);
        uint32_t r1 = pack2<OUT_F16>(d[4 * j + 2], d[4 * j + 3], alpha);
        uint32_t r2 = pack2<OUT_F16>(d[4 * j + 4], d[4 * j + 5], alpha);
        uint32_t r3 = pack2<OUT_F16>(d[4 * j + 6], d[4 * j + 7], alpha);
        const int chunk = 2 * q + (mi >> 1);
        stmatrix_x4(buf + r * 128 + ((chunk ^ (r & 7)) << 4), r0, r1, r2, r3);
    }
}

/* The NB (1 to 4) boxes of step S (columns 64 * NB * S..) into the
 * buffers; R: the accumulators of a 64 x 2R block (128: 64 x 256, 64:
 * 64 x 128, 32: 64 x 64). */
template <bool OUT_F16, int NB, int S, int R>
__device__ __forceinline__ void stage_step(const float (&d)[R], uint32_t buf,
                                           int warp, int lane, float alpha)
{
    static_assert(64 * NB * (S + 1) <= 2 * R, "a box past the block");
    stage_box<OUT_F16, NB * S, R>(d, buf, warp, lane, alpha);
    if constexpr (NB >= 2)
        stage_box<OUT_F16, NB * S + 1, R>(d, buf + 8192, warp, lane, alpha);
    if constexpr (NB >= 3)
        stage_box<OUT_F16, NB * S + 2, R>(d, buf + 2 * 8192, warp, lane, alpha);
    if constexpr (NB == 4)
        stage_box<OUT_F16, NB * S + 3, R>(d, buf + 3 * 8192, warp, lane, alpha);
}

/*
 * Step S of one consumer's TMA-store epilogue (2R / 64 / NB steps of NB
 * boxes, or with F32 2R / 32 / NB steps of NB fp32 boxes; Z3: tmd is a
 * 3-D map and the block goes to its matrix z):
 * the issuing thread (tid 0) waits until the engine has read the buffers'
 * previous contents, a warpgroup barrier publishes that, every thread
 * writes its fragments and fences them to the async proxy, a second
 * barrier, and tid 0 issues the NB stores as one bulk group. Boxes
 * entirely outside D are not issued; partial ones are clipped by TMA.
 */
template <int NB, int S, int R, bool Z3 = false, bool F32 = false>
__device__ __forceinline__ void
tstore_step(const KParams &p, const CUtensorMap *tmd, const float (&d)[R],
            uint8_t *cbuf, int row0, int col0, int tid, int warp, int lane,
            int bar_id, int z = 0)
{
    constexpr int BW = F32 ? 32 : 64; /* a box's columns */
    const uint32_t buf = smem_u32(cbuf);
    if (tid == 0)
        bulk_wait_read_all();
    wg_bar(bar_id);
    if constexpr (F32)
        stage_step32<NB, S, R>(d, buf, warp, lane, p.alpha);
    else if (p.cd_type == 2)
        stage_step<true, NB, S, R>(d, buf, warp, lane, p.alpha);
    else
        stage_step<false, NB, S, R>(d, buf, warp, lane, p.alpha);
    fence_proxy_async_smem();
    wg_bar(bar_id);
    if (tid == 0) {
        if (row0 < p.m) {
#pragma unroll
            for (int b = 0; b < NB; b++) {
                int col = col0 + BW * (NB * S + b);
                if (col >= p.n)
                    continue;
                if constexpr (Z3)
                    tma_store_3d(tmd, cbuf + b * 8192, col, row0, z);
                else
                    tma_store_2d(tmd, cbuf + b * 8192, col, row0);
            }
        }
        bulk_commit();
    }
}

/* Steps S.. of an fp32 block's TMA-store epilogue (NB boxes a step). */
template <int NB, int S, int R>
__device__ __forceinline__ void
tstore32_steps(const KParams &p, const CUtensorMap *tmd, const float (&d)[R],
               uint8_t *cbuf, int row0, int col0, int tid, int warp, int lane,
               int bar_id)
{
    tstore_step<NB, S, R, false, true>(p, tmd, d, cbuf, row0, col0, tid, warp,
                                       lane, bar_id);
    if constexpr (32 * NB * (S + 1) < 2 * R)
        tstore32_steps<NB, S + 1, R>(p, tmd, d, cbuf, row0, col0, tid, warp,
                                     lane, bar_id);
}

/* One consumer's epilogue of the tile at (mt, nt): TMA stores when
 * tstore (16-bit D) or ts32 (fp32 D, tf32 kernels: AB 2), else from
 * registers; DT (tf32 with A MN-major): with p.d_trans the block is
 * D^T's, stored transposed. */
template <int AB, int NB, int BN, bool DT = false>
__device__ __forceinline__ void
ts_store(const KParams &p, const CUtensorMap *tmd, float (&d)[BN / 2],
         uint8_t *cbuf, bool tstore, bool ts32, int mt, int nt, int split,
         int c, int tid, int warp, int lane)
{
    const int row0 = mt * BM + c * 64, col0 = nt * BN;
    if constexpr (DT) {
        if (p.d_trans) {
            if (ts32)
                tstore32t_steps<NB, 0, BN / 2>(p, tmd, d, cbuf, row0, col0, tid,
                                               warp, lane, 1 + c);
            else
                store_any_t<BN>(p, d, row0, col0, lane, warp);
            return;
        }
    }
    if constexpr (AB == 2) {
        if (ts32) {
            tstore32_steps<NB, 0, BN / 2>(p, tmd, d, cbuf, row0, col0, tid,
                                          warp, lane, 1 + c);
            return;
        }
    }
    if (tstore) {
        tstore_step<NB, 0, BN / 2>(p, tmd, d, cbuf, row0, col0, tid, warp, lane,
                                   1 + c);
        if constexpr (NB * 64 < BN)
            tstore_step<NB, 1, BN / 2>(p, tmd, d, cbuf, row0, col0, tid, warp,
                                       lane, 1 + c);
    } else {
        store_any<BN>(p, d, row0, col0, lane, warp, split);
    }
}

/* One consumer's k-blocks [kb0, kb1) of a unit: consume_tile, or for
 * tf32 with A MN-major consume_tile_rs (A's fragments from registers;
 * sa_c: this consumer's rows of stage 0). */
template <int BN, int AB, int AMN, int BMN, int STAGES>
__device__ __forceinline__ void
ts_consume(float (&d)[BN / 2], const uint8_t *sa_c, uint64_t da0, uint64_t db0,
           int kb0, int kb1, int tid, int lane, uint64_t *full, uint64_t *empty,
           int &s, uint32_t &ph)
{
    if constexpr (AB == 2 && AMN)
        consume_tile_rs<BN, STAGES>(d, sa_c, db0, a_frags_at(tid), kb0, kb1,
                                    lane, full, empty, s, ph);
    else
        consume_tile<BN, AB, AMN, BMN, 1, STAGES>(d, da0, db0, kb0, kb1, lane,
                                                  0, full, empty, s, ph);
}

template <int AB, int AMN, int BMN, int NB, int BN_ = 256>
__global__ void __launch_bounds__(384, 1)
    gemm_ts_kernel(const __grid_constant__ CUtensorMap tma,
                   const __grid_constant__ CUtensorMap tmb,
                   const __grid_constant__ CUtensorMap tmd,
                   const __grid_constant__ KParams p,
                   const __grid_constant__ SkParams sk)
{
    using C = TsCfg<NB, BN_>;
    constexpr int BN = C::BN;
    constexpr int STAGES = C::STAGES;
    constexpr int A_BYTES = C::A_BYTES;
    constexpr int B_BYTES = C::B_BYTES;
    extern __shared__ uint8_t smem_raw[];
    const SmemRing sm =
        smem_ring<STAGES, A_BYTES, B_BYTES, C::C_BYTES>(smem_raw);
    uint8_t *sa = sm.sa, *sb = sm.sb, *sc = sm.sc;
    uint64_t *full = sm.full, *empty = sm.empty;

    const int wg = warpgroup_index();
    const int tid = threadIdx.x % 128;
    ring_start<STAGES, 1>(full, empty);
    /* units run whole; with sk.units the rest is split (gemm_streamk.cuh) */
    const int dp = sk.units ? sk.dp : p.units;
    long long it0 = 0, it1 = 0;
    if (sk.units)
        sk_range(sk, p.nkb, blockIdx.x, gridDim.x, it0, it1);

    if (wg == 0) {
        asm volatile("setmaxnreg.dec.sync.aligned.u32 40;");
        int s = 0;
        uint32_t ph = 0;
        if (tid == 0) {
            tmap_prefetch(&tma);
            tmap_prefetch(&tmb);
        }
        for (int u = blockIdx.x; tid == 0 && u < dp; u += gridDim.x) {
            int mt, nt, split;
            unit_coords(p, u, mt, nt, split);
            int kb0 = split * p.kb_per_split;
            int kb1 = min(p.nkb, kb0 + p.kb_per_split);
            produce_tile<BN, AB, AMN, BMN, 1, STAGES>(&tma, &tmb, mt * BM,
                                                      nt * BN, kb0, kb1, 0, sa,
                                                      sb, full, empty, s, ph);
        }
        long long pos = it1;
        int u, kb0, kb1;
        while (tid == 0 && sk_next(sk, p.nkb, it0, pos, u, kb0, kb1)) {
            int mt, nt, split;
            unit_coords(p, u, mt, nt, split);
            produce_tile<BN, AB, AMN, BMN, 1, STAGES>(&tma, &tmb, mt * BM,
                                                      nt * BN, kb0, kb1, 0, sa,
                                                      sb, full, empty, s, ph);
        }
    } else {
        asm volatile("setmaxnreg.inc.sync.aligned.u32 232;");
        const int c = wg - 1;
        const int warp = tid / 32, lane = tid % 32;
        /* fp32 D through TMA: tf32 only; D^T stored transposed: tf32 with
         * A MN-major only */
        const bool tstore = tstore_ok(p) && !(AB == 2 && AMN && p.d_trans);
        const bool ts32 = AB == 2 && tstore32_ok(p);
        uint8_t *cbuf = sc + c * NB * C::SUB;
        if ((tstore || ts32) && tid == 0)
            tmap_prefetch(&tmd);
        float d[BN / 2];
        int s = 0;
        uint32_t ph = 0;
        constexpr uint32_t A_LBO = AMN ? SLAB : 16;
        constexpr uint32_t B_LBO = BMN ? SLAB : 16;
        const uint64_t da0 = gemmk_desc_encode(smem_u32(sa) + c * SLAB, A_LBO,
                                               1024, GEMMK_SWIZZLE_128B);
        const uint64_t db0 =
            gemmk_desc_encode(smem_u32(sb), B_LBO, 1024, GEMMK_SWIZZLE_128B);
        for (int u = blockIdx.x; u < dp; u += gridDim.x) {
            int mt, nt, split;
            unit_coords(p, u, mt, nt, split);
            int kb0 = split * p.kb_per_split;
            int kb1 = min(p.nkb, kb0 + p.kb_per_split);
            ts_consume<BN, AB, AMN, BMN, STAGES>(d, sa + c * 8192, da0, db0,
                                                 kb0, kb1, tid, lane, full,
                                                 empty, s, ph);
            ts_store<AB, NB, BN, AB == 2 && AMN == 1>(p, &tmd, d, cbuf, tstore,
                                                      ts32, mt, nt, split, c,
                                                      tid, warp, lane);
        }
        long long pos = it1;
        int u, kb0, kb1;
        bool pending = false; /* a partial published, its flag not raised */
        while (sk_next(sk, p.nkb, it0, pos, u, kb0, kb1)) {
            int mt, nt, split;
            unit_coords(p, u, mt, nt, split);
            ts_consume<BN, AB, AMN, BMN, STAGES>(d, sa + c * 8192, da0, db0,
                                                 kb0, kb1, tid, lane, full,
                                                 empty, s, ph);
            if (kb1 < p.nkb) { /* a partial: the range's end */
                sk_publish<BN>(sk, blockIdx.x, c, d, tid);
                pending = true;
                continue;
            }
            if (kb0 > 0) { /* finishes a unit begun by lower CTAs */
                if (pending)
                    sk_signal(sk, blockIdx.x, c, tid, 1 + c);
                pending = false;
                if (tid == 0) /* cbuf: the partials come through it */
                    bulk_wait_read_all();
                sk_collect<BN, NB * 4>(sk, p.nkb, blockIdx.x, gridDim.x, c,
                                       (long long)(u - sk.dp) * p.nkb, d,
                                       smem_u32(cbuf), tid, 1 + c);
            }
            ts_store<AB, NB, BN, AB == 2 && AMN == 1>(p, &tmd, d, cbuf, tstore,
                                                      ts32, mt, nt, split, c,
                                                      tid, warp, lane);
        }
        if (pending)
            sk_signal(sk, blockIdx.x, c, tid, 1 + c);
        /* the shared-memory sources must outlive the stores */
        if ((tstore || ts32) && tid == 0)
            bulk_wait_all();
    }
}

} // namespace gemmk
