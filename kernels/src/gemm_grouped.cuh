/*
 * gemm_grouped.cuh: the persistent grouped kernel: one launch over the
 * tiles of many 16-bit problems (a batch of different shapes, each with
 * its own operands, leading dimensions, alpha and beta; one input type
 * and transpose pair per launch, C/D types per problem).
 *
 * The grid (at most one CTA per SM) walks work units u = 0 .. units-1,
 * each one 128 x BN tile of one problem with all of its K. A small
 * device table holds, per problem, the first unit (the prefix sum of the
 * tile counts) and what the epilogue needs; unit -> problem is a binary
 * search in it. Each problem's A and B tensor maps were encoded on the
 * host (the context's cache) and copied to the device before the launch
 * in the same stream, 128-byte aligned; the producer takes them from
 * global memory after a tensormap acquire fence. The main loop and the
 * epilogue are gemm_sm90.cuh's (produce_tile, consume_tile, store_any),
 * so a tile computes exactly what gemm_ws_kernel<BN, .., CL = 1> computes
 * for the same problem without split-K.
 *
 * A strided batch (every problem of one shape, operands at constant
 * strides) needs neither table nor per-problem maps: unit u is tile
 * u % per of matrix u / per, A and B are read through two 3-D maps
 * (kernel parameters: the third dimension is the matrix; an operand of
 * stride 0, shared by all, is a 3-D map of one matrix read at 0) and D,
 * C sit at constant byte strides from matrix 0's. With CL = 2 (strided,
 * an even number of M-tiles) a unit is a pair of M-tiles of one N-tile
 * taken by a cluster of two CTAs, B multicast as gemm_ws_kernel's CL = 2
 * does: 32 KB from L2 a k-block per SM instead of 48. Matrices of at most
 * 64 x 64 go two to a unit (pair): a stage holds both matrices' A rows
 * and B columns, each consumer multiplies its own with n64 wgmmas, so
 * the tile is not three quarters padding. When its epilogue is a
 * plain conversion (tstore_ok), D is written through a third 3-D map
 * with gemm_sm90_tstore.cuh's TMA-store epilogue: a consumer stages its
 * 64 x BN block in shared memory and goes on to its next tile while the
 * copy engine stores it; in steps of 64 x 128 through two buffers, or
 * (NB = 4, 128 x 256 tiles of long K) all of it at once through four,
 * with a ring of 3 stages instead of 4 to make room. A strided batch of
 * one CTA a unit may split its last waves' k-blocks over every CTA
 * (stream-K, as gemm_ts_kernel does): a launch of 15.5 waves then takes
 * about 15.5 tiles' time and a fix-up, not 16.
 */
#pragma once

#include "gemm_sm90_tstore.cuh"
#include "gemm_streamk.cuh"

namespace gemmk
{

/* One problem of a grouped launch (device table entry). */
struct GroupProblem {
    int m, n, nkb; /* nkb: k-blocks of BK */
    int num_m;     /* tiles along M */
    int unit0;     /* first work unit (prefix sum of tiles) */
    int cd_type;   /* gemm_dtype of C and D */
    void *d;
    const void *c; /* NULL when beta == 0 */
    long long ldd, ldc;
    float alpha, beta;
};

struct GroupParams {
    const CUtensorMap *maps;   /* 2 per problem: A then B, 128-byte aligned */
    const GroupProblem *probs; /* count entries, unit0 increasing */
    int count;
    int units; /* all problems' tiles */
    /* strided batch (maps and probs unused): count matrices shaped as p0,
     * matrix i's D and C at i * sd, i * sc bytes from p0's */
    int strided;
    int a_shared, b_shared; /* stride 0: one A (B) for all, matrix 0 */
    int per;                /* units per matrix */
    int tstore;             /* D through the 3-D map td3 (TMA stores) */
    int pair; /* m, n <= 64: unit u is matrices 2u and 2u + 1, one per
                 consumer (64 x 64 each, maps of 64-row boxes) */
    long long sd, sc;
    GroupProblem p0;
    /* strided, CL = 1, not pair: with sk.units, units [sk.dp, units) run
     * stream-K (gemm_streamk.cuh), units == sk.dp + sk.units */
    SkParams sk;
};

/* Shared memory: the ring and its barriers, and NB 64 x 64 16-bit store
 * buffers per consumer (the TMA-store epilogue's step: NB = 2, a 64 x 128
 * block, with Cfg<BN>'s ring; NB = 4, a consumer's whole 64 x 256 block
 * in one step, with a ring of 3 stages to make room). */
template <int BN, int NB = 2> struct GroupCfg {
    static_assert(NB == 2 || (NB == 4 && BN == 256), "NB: 2, or 4 at BN 256");
    static constexpr int STAGES = NB == 4 ? 3 : Cfg<BN>::STAGES;
    static constexpr int C_BYTES = 2 * NB * TsCfg<2>::SUB;
    static constexpr int SMEM =
        STAGES * (Cfg<BN>::A_BYTES + Cfg<BN>::B_BYTES) + 1024 + 256 + C_BYTES;
    static_assert(SMEM <= 227 * 1024, "over the opt-in shared memory limit");
};

/* The problem that unit u belongs to: the last with unit0 <= u. */
__device__ __forceinline__ int group_find(const GroupParams &g, int u)
{
    int lo = 0, hi = g.count - 1;
    while (lo < hi) {
        int mid = (lo + hi + 1) >> 1;
        if (__ldg(&g.probs[mid].unit0) <= u)
            lo = mid;
        else
            hi = mid - 1;
    }
    return lo;
}

/* Makes the tensor map at map (written by a host copy before the launch)
 * visible to this thread's TMA loads, and starts fetching it. */
__device__ __forceinline__ void tmap_acquire(const CUtensorMap *map)
{
    asm volatile("fence.proxy.tensormap::generic.acquire.sys [%0], 128;" ::"l"(
                     reinterpret_cast<uint64_t>(map))
                 : "memory");
    tmap_prefetch(map);
}

/* Problem i of a strided batch: p0 with matrix i's D and C. */
__device__ __forceinline__ GroupProblem strided_problem(const GroupParams &g,
                                                        int i)
{
    GroupProblem q = g.p0;
    q.d = static_cast<char *>(q.d) + i * g.sd;
    if (q.c)
        q.c = static_cast<const char *>(q.c) + i * g.sc;
    return q;
}

/* The epilogue's parameters of problem q (gemm_ws_kernel's, no split). */
__device__ __forceinline__ KParams problem_params(const GroupProblem &q)
{
    KParams p;
    p.m = q.m, p.n = q.n;
    p.splits = 1;
    p.cd_type = q.cd_type;
    p.d = q.d, p.c = q.c;
    p.ldd = q.ldd, p.ldc = q.ldc;
    p.alpha = q.alpha, p.beta = q.beta;
    p.ws = nullptr;
    p.ldw = 0;
    return p;
}

__device__ __forceinline__ KParams strided_params(const GroupParams &g, int i)
{
    return problem_params(strided_problem(g, i));
}

/* The producer's k-blocks of a pair unit: matrices z0 and z0 + 1 (past
 * the batch: zero-filled), each one's A rows in slab h of the stage's A
 * and its B columns in slab h of B, 64 x 64 boxes of the 3-D maps. */
template <int AB, int AMN, int BMN, int STAGES>
__device__ __forceinline__ void
produce_pair(const GroupParams &g, const CUtensorMap *ta3,
             const CUtensorMap *tb3, int z0, uint8_t *sa, uint8_t *sb,
             uint64_t *full, uint64_t *empty, int &s, uint32_t &ph)
{
    constexpr int A_BYTES = Cfg<128>::A_BYTES;
    constexpr int B_BYTES = Cfg<128>::B_BYTES;
    for (int kb = 0; kb < g.p0.nkb; kb++) {
        mbar_wait(&empty[s], ph ^ 1);
        mbar_expect_tx(&full[s], A_BYTES + B_BYTES);
        const int k0 = kb * kblock_elems<AB>();
        uint8_t *a = sa + s * A_BYTES;
        uint8_t *b = sb + s * B_BYTES;
#pragma unroll
        for (int h = 0; h < 2; h++) {
            const int za = g.a_shared ? 0 : z0 + h;
            const int zb = g.b_shared ? 0 : z0 + h;
            if constexpr (AMN)
                tma_load_3d(a + h * SLAB, ta3, 0, k0, za, &full[s]);
            else
                tma_load_3d(a + h * SLAB, ta3, k0, 0, za, &full[s]);
            if constexpr (BMN)
                tma_load_3d(b + h * SLAB, tb3, 0, k0, zb, &full[s]);
            else
                tma_load_3d(b + h * SLAB, tb3, k0, 0, zb, &full[s]);
        }
        if (++s == STAGES) {
            s = 0;
            ph ^= 1;
        }
    }
}

/* Unit u of a strided batch: matrix z, tile (mt, nt) of this CTA (rank
 * in its cluster of CL). */
template <int CL>
__device__ __forceinline__ void strided_unit(const GroupParams &g, int u,
                                             uint32_t rank, int &z, int &mt,
                                             int &nt)
{
    z = u / g.per;
    const int local = u - z * g.per, mu = g.p0.num_m / CL;
    mt = (local % mu) * CL + rank;
    nt = local / mu;
}

/* Consumer c's epilogue of tile (mt, nt) of problem q (matrix z of a
 * strided batch): gemm_ws_kernel's, through q's parameters. */
template <int BN, int NB>
__device__ __forceinline__ void
group_store(const GroupParams &g, const GroupProblem &q, const CUtensorMap *td3,
            float (&d)[BN / 2], uint8_t *cbuf, int mt, int nt, int z, int c,
            int tid, int warp, int lane)
{
    KParams p = problem_params(q);
    const int row0 = mt * BM + c * 64, col0 = nt * BN;
    if constexpr (NB == 4) {
        tstore_step<4, 0, BN / 2, true>(p, td3, d, cbuf, row0, col0, tid, warp,
                                        lane, 1 + c, z);
    } else if (g.tstore) {
        tstore_step<2, 0, BN / 2, true>(p, td3, d, cbuf, row0, col0, tid, warp,
                                        lane, 1 + c, z);
        if constexpr (BN == 256)
            tstore_step<2, 1, BN / 2, true>(p, td3, d, cbuf, row0, col0, tid,
                                            warp, lane, 1 + c, z);
    } else {
        store_any<BN>(p, d, row0, col0, lane, warp, 0);
    }
}

/* ta3, tb3, td3: A's, B's and D's 3-D maps of a strided batch (else
 * unused; td3 only with g.tstore). CL = 2: strided batches only. NB: the
 * store buffers a consumer has (GroupCfg). */
template <int BN, int AB, int AMN, int BMN, int CL = 1, int NB = 2>
__global__ void __launch_bounds__(384, 1)
    gemm_grouped_kernel(const __grid_constant__ GroupParams g,
                        const __grid_constant__ CUtensorMap ta3,
                        const __grid_constant__ CUtensorMap tb3,
                        const __grid_constant__ CUtensorMap td3)
{
    constexpr int STAGES = GroupCfg<BN, NB>::STAGES;
    constexpr int A_BYTES = Cfg<BN>::A_BYTES;
    constexpr int B_BYTES = Cfg<BN>::B_BYTES;
    extern __shared__ uint8_t smem_raw[];
    const SmemRing sm =
        smem_ring<STAGES, A_BYTES, B_BYTES, GroupCfg<BN, NB>::C_BYTES>(
            smem_raw);
    uint8_t *sa = sm.sa, *sb = sm.sb, *sc = sm.sc;
    uint64_t *full = sm.full, *empty = sm.empty;

    const int wg = warpgroup_index();
    const int tid = threadIdx.x % 128;
    const uint32_t rank = ring_start<STAGES, CL>(full, empty);
    const int u0 = blockIdx.x / CL, ustep = gridDim.x / CL;
    /* units run whole; with g.sk.units the rest is split */
    const int dp = CL == 1 && g.sk.units ? g.sk.dp : g.units;
    long long it0 = 0, it1 = 0;
    if (CL == 1 && g.sk.units)
        sk_range(g.sk, g.p0.nkb, blockIdx.x, gridDim.x, it0, it1);

    if (wg == 0) {
        asm volatile("setmaxnreg.dec.sync.aligned.u32 40;");
        int s = 0;
        uint32_t ph = 0;
        int seen = -1; /* the problem whose maps were acquired last */
        if (g.strided && tid == 0) {
            tmap_prefetch(&ta3);
            tmap_prefetch(&tb3);
        }
        for (int u = u0; tid == 0 && u < dp; u += ustep) {
            if (CL == 1 && BN == 128 && g.pair) {
                produce_pair<AB, AMN, BMN, STAGES>(g, &ta3, &tb3, 2 * u, sa, sb,
                                                   full, empty, s, ph);
                continue;
            }
            if (CL > 1 || g.strided) {
                int i, mt, nt;
                strided_unit<CL>(g, u, rank, i, mt, nt);
                produce_tile<BN, AB, AMN, BMN, CL, STAGES, true>(
                    &ta3, &tb3, mt * BM, nt * BN, 0, g.p0.nkb, rank, sa, sb,
                    full, empty, s, ph, g.a_shared ? 0 : i, g.b_shared ? 0 : i);
                continue;
            }
            const int i = group_find(g, u);
            const GroupProblem &q = g.probs[i];
            const int local = u - q.unit0;
            const int mt = local % q.num_m, nt = local / q.num_m;
            const CUtensorMap *ma = g.maps + 2 * i;
            if (i != seen) {
                tmap_acquire(ma);
                tmap_acquire(ma + 1);
                seen = i;
            }
            produce_tile<BN, AB, AMN, BMN, 1, STAGES>(ma, ma + 1, mt * BM,
                                                      nt * BN, 0, q.nkb, 0, sa,
                                                      sb, full, empty, s, ph);
        }
        long long pos = it1;
        int u, kb0, kb1;
        while (CL == 1 && tid == 0 &&
               sk_next(g.sk, g.p0.nkb, it0, pos, u, kb0, kb1)) {
            int i, mt, nt;
            strided_unit<1>(g, u, 0, i, mt, nt);
            produce_tile<BN, AB, AMN, BMN, 1, STAGES, true>(
                &ta3, &tb3, mt * BM, nt * BN, kb0, kb1, 0, sa, sb, full, empty,
                s, ph, g.a_shared ? 0 : i, g.b_shared ? 0 : i);
        }
    } else {
        asm volatile("setmaxnreg.inc.sync.aligned.u32 232;");
        const int c = wg - 1;
        const int warp = tid / 32, lane = tid % 32;
        uint8_t *cbuf = sc + c * NB * TsCfg<2>::SUB;
        if (g.tstore && tid == 0)
            tmap_prefetch(&td3);
        float d[BN / 2];
        int s = 0;
        uint32_t ph = 0;
        constexpr uint32_t A_LBO = AMN ? SLAB : 16;
        constexpr uint32_t B_LBO = BMN ? SLAB : 16;
        const uint64_t da0 = gemmk_desc_encode(smem_u32(sa) + c * SLAB, A_LBO,
                                               1024, GEMMK_SWIZZLE_128B);
        const uint64_t db0 =
            gemmk_desc_encode(smem_u32(sb), B_LBO, 1024, GEMMK_SWIZZLE_128B);
        for (int u = blockIdx.x; CL == 1 && BN == 128 && g.pair && u < g.units;
             u += gridDim.x) {
            const int z = 2 * u + c; /* this consumer's matrix */
            float(&d64)[32] = *reinterpret_cast<float(*)[32]>(d);
            consume_tile<64, AB, AMN, BMN, 1, STAGES, BN>(
                d64, da0, db0 + ((c * SLAB) >> 4), 0, g.p0.nkb, lane, 0, full,
                empty, s, ph);
            if (z >= g.count) /* an odd batch's last unit */
                continue;
            const KParams p = strided_params(g, z);
            if (g.tstore)
                tstore_step<1, 0, 32, true>(p, &td3, d64, cbuf, 0, 0, tid, warp,
                                            lane, 1 + c, z);
            else
                store_any<64>(p, d64, 0, 0, lane, warp, 0);
        }
        for (int u = u0; (CL > 1 || !g.pair) && u < dp; u += ustep) {
            GroupProblem q;
            int mt, nt, z = 0;
            if (CL > 1 || g.strided) {
                strided_unit<CL>(g, u, rank, z, mt, nt);
                q = strided_problem(g, z);
            } else {
                q = g.probs[group_find(g, u)];
                const int local = u - q.unit0;
                mt = local % q.num_m, nt = local / q.num_m;
            }
            consume_tile<BN, AB, AMN, BMN, CL, STAGES>(
                d, da0, db0, 0, q.nkb, lane, rank, full, empty, s, ph);
            group_store<BN, NB>(g, q, &td3, d, cbuf, mt, nt, z, c, tid, warp,
                                lane);
        }
        long long pos = it1;
        int u, kb0, kb1;
        bool pending = false; /* a partial published, its flag not raised */
        while (CL == 1 && sk_next(g.sk, g.p0.nkb, it0, pos, u, kb0, kb1)) {
            int z, mt, nt;
            strided_unit<1>(g, u, 0, z, mt, nt);
            consume_tile<BN, AB, AMN, BMN, 1, STAGES>(
                d, da0, db0, kb0, kb1, lane, 0, full, empty, s, ph);
            if (kb1 < g.p0.nkb) { /* a partial: the range's end */
                sk_publish<BN>(g.sk, blockIdx.x, c, d, tid);
                pending = true;
                continue;
            }
            if (kb0 > 0) { /* finishes a unit begun by lower CTAs */
                if (pending)
                    sk_signal(g.sk, blockIdx.x, c, tid, 1 + c);
                pending = false;
                if (tid == 0) /* cbuf: the partials come through it */
                    bulk_wait_read_all();
                sk_collect<BN, NB * 4>(g.sk, g.p0.nkb, blockIdx.x, gridDim.x, c,
                                       (long long)(u - g.sk.dp) * g.p0.nkb, d,
                                       smem_u32(cbuf), tid, 1 + c);
            }
            group_store<BN, NB>(g, strided_problem(g, z), &td3, d, cbuf, mt, nt,
                                z, c, tid, warp, lane);
        }
        if (pending)
            sk_signal(g.sk, blockIdx.x, c, tid, 1 + c);
        /* the shared-memory sources must outlive the stores */
        if (g.tstore && tid == 0)
            bulk_wait_all();
    }
    /* no CTA may leave while its peer can still multicast into its shared
     * memory or arrive on its barriers */
    if constexpr (CL > 1)
        cluster_sync();
}

} // namespace gemmk
