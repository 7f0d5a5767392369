/*
 * gemm_s8.cuh: the warp-specialized int8 GEMM (s8 x s8 -> s32)
 * and the Ozaki-II modular products built on it.
 *
 * The pipeline is gemm_sm90.cuh's: one producer warpgroup (one thread
 * issues TMA) fills a ring of 128B-swizzled stages; two consumer
 * warpgroups each own 64 rows of the 128 x BN tile and issue
 * wgmma.mma_async m64nBNk32.s32.s8.s8. int8 wgmma has no transpose
 * immediates: both operands are K-major in shared memory (rows of 128
 * int8 = one 128-byte swizzled row, the bf16 layout byte for byte, so
 * descriptors and boxes carry over; a k-block is 128 values, 4 k32 steps).
 * The grid is persistent over tiles in a grouped order.
 *
 * Each work unit (tile) runs nmod products back to back, product l
 * reading rows (mod0 + l) * rows_a + ... of A's tensor map (likewise B):
 * the residue matrices of all moduli are stacked in one 2-D map. OZ picks
 * what happens at the end of each product:
 *   0  int32 D = alpha acc + beta C (the catalog GEMM, nmod = 1; with
 *      p.reduce, acc mod p raw: the unfused Ozaki path's products);
 *   2  acc mod p_l stored as one byte per output (R[l][i][j]); a separate
 *      pass (ozaki.cu) reconstructs. Keeps BN = 256 tiles.
 * Accumulators hold at most GEMMK_OZ_FLUSH_KB k-blocks of residue
 * products; longer K reduces them mod p in registers and goes on.
 */
#pragma once

#include "gemm_sm90.cuh"
#include "ozaki.h"

namespace gemmk
{

constexpr int S8_BK = 128;    /* int8 per k-block: one 128-byte row */
constexpr int S8_FLUSH = 256; /* k-blocks between reductions: |acc| <= 2^29 */

struct S8Params {
    int m, n;
    int num_m, num_n, units, group_m;
    int nkb;       /* k-blocks per product */
    int kunit;     /* bytes per tensor-map element along K: 1 or 2 */
    int nmod;      /* products per tile */
    int mod0;      /* modulus of the first product (moduli constants) */
    int mod_major; /* ping-pong: units ordered modulus-major (s8_unit) */
    int rows_a;    /* A map rows between moduli (0: one matrix) */
    int rows_b;
    int reduce; /* OZ 0: store acc mod p (Ozaki unfused) */
    /* OZ 0: int32 D */
    int32_t *d;
    const int32_t *c;
    long long ldd, ldc;
    int32_t alpha, beta;
    /* OZ 2: residue planes */
    uint8_t *r;
    long long ldr, rplane;
    /* moduli constants (ozaki.h), by modulus index */
    uint32_t p[GEMMK_OZ_MAX];
    uint32_t magic[GEMMK_OZ_MAX];
    uint32_t off[GEMMK_OZ_MAX]; /* a multiple of p >= 2^29 + 2^9 */
};

template <int BN> struct S8Cfg {
    static constexpr int STAGES = BN == 256 ? 4 : 6;
    static constexpr int A_BYTES = BM * S8_BK;
    static constexpr int B_BYTES = BN * S8_BK;
    static constexpr int SMEM = STAGES * (A_BYTES + B_BYTES) + 1024 + 256;
    static_assert(SMEM <= 227 * 1024, "over the opt-in shared memory limit");
};

template <int R> __device__ __forceinline__ void fence_iregs(int32_t (&d)[R])
{
#pragma unroll
    for (int i = 0; i < R; i++)
        asm volatile("" : "+r"(d[i])::"memory");
}

template <int BN>
__device__ __forceinline__ void mma_s8(int32_t (&d)[BN / 2], uint64_t da,
                                       uint64_t db, int scale_d)
{
    if constexpr (BN == 256)
        wgmma_m64n256k32_s8(d, da, db, scale_d);
    else
        wgmma_m64n128k32_s8(d, da, db, scale_d);
}

/* Tile t -> (mt, nt), grouped: group_m M-tiles per group sweep N. */
__device__ __forceinline__ void s8_coords(const S8Params &p, int t, int &mt,
                                          int &nt)
{
    int per_group = p.group_m * p.num_n;
    int g = t / per_group;
    int first_m = g * p.group_m;
    int gm = min(p.num_m - first_m, p.group_m);
    int local = t - g * per_group;
    mt = first_m + local % gm;
    nt = local / gm;
}

/*
 * The ping-pong kernel's unit i of this CTA: its tile (mt, nt) and
 * product l. A tile's products back to back (products innermost), or
 * with p.mod_major every CTA on one modulus at a time: unit g = blockIdx.x
 * + i gridDim.x of units x nmod, modulus g / units, so one launch runs
 * every modulus with a single tail (a launch per modulus has one each)
 * while the CTAs share one modulus' operands in L2, as separate launches
 * do.
 */
__device__ __forceinline__ int s8_units(const S8Params &p)
{
    const int total = p.mod_major ? p.units * p.nmod : p.units;
    const int mine = total > (int)blockIdx.x
                         ? (total - blockIdx.x + gridDim.x - 1) / gridDim.x
                         : 0;
    return p.mod_major ? mine : mine * p.nmod;
}

__device__ __forceinline__ void s8_unit(const S8Params &p, int i, int &mt,
                                        int &nt, int &l)
{
    if (p.mod_major) {
        const int g = blockIdx.x + i * gridDim.x;
        l = g / p.units;
        s8_coords(p, g - l * p.units, mt, nt);
    } else {
        l = i % p.nmod;
        s8_coords(p, blockIdx.x + (i / p.nmod) * gridDim.x, mt, nt);
    }
}

/* acc mod p in [0, p), for |acc| < 2^29 + 2^9 (ozaki.h's magic division) */
__device__ __forceinline__ int32_t s8_mod(int32_t acc, uint32_t off,
                                          uint32_t magic, uint32_t p)
{
    uint32_t v = (uint32_t)acc + off;
    uint32_t q = __umulhi(v, magic) >> 7;
    return (int32_t)(v - q * p);
}

template <int BN, int OZ>
__global__ void __launch_bounds__(384, 1)
    gemm_s8_kernel(const __grid_constant__ CUtensorMap tma,
                   const __grid_constant__ CUtensorMap tmb,
                   const __grid_constant__ S8Params p)
{
    static_assert(OZ == 0 || OZ == 2, "int32 D or residue bytes");
    using C = S8Cfg<BN>;
    constexpr int STAGES = C::STAGES;
    constexpr int A_BYTES = C::A_BYTES;
    constexpr int B_BYTES = C::B_BYTES;
    extern __shared__ uint8_t smem_raw[];
    const SmemRing sm = smem_ring<STAGES, A_BYTES, B_BYTES>(smem_raw);
    uint8_t *sa = sm.sa, *sb = sm.sb;
    uint64_t *full = sm.full, *empty = sm.empty;

    const int wg = warpgroup_index();
    const int tid = threadIdx.x % 128;
    ring_start<STAGES, 1>(full, empty);

    if (wg == 0) {
        asm volatile("setmaxnreg.dec.sync.aligned.u32 40;");
        int s = 0;
        uint32_t ph = 0;
        for (int u = blockIdx.x; tid == 0 && u < p.units; u += gridDim.x) {
            int mt, nt;
            s8_coords(p, u, mt, nt);
            for (int l = 0; l < p.nmod; l++) {
                const int ra = (p.mod0 + l) * p.rows_a + mt * BM;
                const int rb = (p.mod0 + l) * p.rows_b + nt * BN;
                for (int kb = 0; kb < p.nkb; kb++) {
                    mbar_wait(&empty[s], ph ^ 1);
                    mbar_expect_tx(&full[s], A_BYTES + B_BYTES);
                    const int k0 = kb * (S8_BK / p.kunit);
                    tma_load_2d(sa + s * A_BYTES, &tma, k0, ra, &full[s]);
                    tma_load_2d(sb + s * B_BYTES, &tmb, k0, rb, &full[s]);
                    if (++s == STAGES) {
                        s = 0;
                        ph ^= 1;
                    }
                }
            }
        }
    } else {
        asm volatile("setmaxnreg.inc.sync.aligned.u32 232;");
        const int c = wg - 1;
        const int warp = tid / 32, lane = tid % 32;
        int32_t acc[BN / 2];
        int s = 0;
        uint32_t ph = 0;
        /* K-major, 128B swizzle: SBO = 8 rows of 128 B; k32 step = 32 B */
        const uint64_t da0 = gemmk_desc_encode(smem_u32(sa) + c * 64 * S8_BK,
                                               16, 1024, GEMMK_SWIZZLE_128B);
        const uint64_t db0 =
            gemmk_desc_encode(smem_u32(sb), 16, 1024, GEMMK_SWIZZLE_128B);
        for (int u = blockIdx.x; u < p.units; u += gridDim.x) {
            int mt, nt;
            s8_coords(p, u, mt, nt);
            const int row0 = mt * BM + c * 64, col0 = nt * BN;
            for (int l = 0; l < p.nmod; l++) {
                const int md = p.mod0 + l;
                int prev = -1;
                int fresh = 1; /* next wgmma starts the accumulator */
                for (int kb = 0; kb < p.nkb; kb++) {
                    mbar_wait(&full[s], ph);
                    fence_iregs(acc);
                    wgmma_fence();
#pragma unroll
                    for (int kk = 0; kk < S8_BK / 32; kk++) {
                        uint64_t da = da0 + ((s * A_BYTES + kk * 32) >> 4);
                        uint64_t db = db0 + ((s * B_BYTES + kk * 32) >> 4);
                        mma_s8<BN>(acc, da, db, (fresh && kk == 0) ? 0 : 1);
                    }
                    wgmma_commit();
                    fresh = 0;
                    wgmma_wait<1>();
                    fence_iregs(acc);
                    if (prev >= 0 && lane == 0)
                        mbar_arrive(&empty[prev]);
                    prev = s;
                    if (++s == STAGES) {
                        s = 0;
                        ph ^= 1;
                    }
                    if ((OZ != 0 || p.reduce) && (kb + 1) % S8_FLUSH == 0 &&
                        kb + 1 < p.nkb) {
                        /* keep |acc| bounded: reduce mod p, go on */
                        wgmma_wait<0>();
                        fence_iregs(acc);
                        if (lane == 0)
                            mbar_arrive(&empty[prev]);
                        prev = -1;
#pragma unroll
                        for (int i = 0; i < BN / 2; i++)
                            acc[i] =
                                s8_mod(acc[i], p.off[md], p.magic[md], p.p[md]);
                    }
                }
                wgmma_wait<0>();
                fence_iregs(acc);
                if (prev >= 0 && lane == 0)
                    mbar_arrive(&empty[prev]);

                if constexpr (OZ == 2) {
                    /* fragment: acc[4j + 2h + e] is row 16 warp + lane/4
                     * + 8h, column 8j + 2 (lane % 4) + e; the planes are
                     * padded to whole tiles, so no bounds */
                    uint8_t *pl = p.r + (long long)md * p.rplane;
#pragma unroll
                    for (int h = 0; h < 2; h++) {
                        const int r = row0 + warp * 16 + (lane >> 2) + 8 * h;
                        uint8_t *rowp =
                            pl + (long long)r * p.ldr + col0 + 2 * (lane & 3);
#pragma unroll
                        for (int j = 0; j < BN / 8; j++) {
                            uint32_t v0 =
                                (uint32_t)s8_mod(acc[4 * j + 2 * h], p.off[md],
                                                 p.magic[md], p.p[md]);
                            uint32_t v1 = (uint32_t)s8_mod(
                                acc[4 * j + 2 * h + 1], p.off[md], p.magic[md],
                                p.p[md]);
                            *reinterpret_cast<uint16_t *>(rowp + 8 * j) =
                                (uint16_t)(v0 | (v1 << 8));
                        }
                    }
                } else {
                    /* int32 D (bounded) */
#pragma unroll
                    for (int h = 0; h < 2; h++) {
                        const int r = row0 + warp * 16 + (lane >> 2) + 8 * h;
                        if (r >= p.m)
                            continue;
                        int32_t *orow = p.d + (long long)r * p.ldd;
                        const int32_t *crow =
                            p.beta ? p.c + (long long)r * p.ldc : nullptr;
#pragma unroll
                        for (int j = 0; j < BN / 8; j++) {
#pragma unroll
                            for (int e = 0; e < 2; e++) {
                                const int col =
                                    col0 + 8 * j + 2 * (lane & 3) + e;
                                if (col >= p.n)
                                    continue;
                                int32_t a = acc[4 * j + 2 * h + e];
                                uint32_t v;
                                if (p.reduce)
                                    v = (uint32_t)s8_mod(a, p.off[md],
                                                         p.magic[md], p.p[md]);
                                else
                                    v = (uint32_t)p.alpha * (uint32_t)a +
                                        (crow ? (uint32_t)p.beta *
                                                    (uint32_t)crow[col]
                                              : 0u);
                                orow[col] = (int32_t)v;
                            }
                        }
                    }
                }
            }
        }
    }
}

/*
 * One warpgroup's 64 x 128 block of a ping-pong unit: int32 D (OZ 0,
 * bounded) or residue bytes (OZ 2) in fragment order: plane md holds the
 * 128 x 128 tiles in (mt, nt) order, 16 KB each; in a tile, block half
 * (rows 64 half ..) at 8192 half, then for q = 0..3 the 16 bytes of
 * accumulators 16q..16q+15 of every thread at 2048 q + 16 tid: each store
 * is 16 bytes and a warp's 512 contiguous (row-major bytes would be 2-byte
 * stores into 8 rows). oz_recon_frag_kernel (ozaki.cu) reads it back.
 */
template <int OZ>
__device__ __forceinline__ void
s8_pp_store(const S8Params &p, const int32_t (&acc)[64], int mt, int nt,
            int half, int md, int warp, int lane)
{
    constexpr int BN = 128;
    const int row0 = mt * BM + 64 * half, col0 = nt * BN;
    if constexpr (OZ == 2) {
        uint8_t *tile = p.r + (long long)md * p.rplane +
                        ((long long)mt * p.num_n + nt) * (BM * BN) +
                        8192 * half + 16 * (warp * 32 + lane);
#pragma unroll
        for (int q = 0; q < 4; q++) {
            uint32_t w[4];
#pragma unroll
            for (int b = 0; b < 4; b++) {
                uint32_t x = 0;
#pragma unroll
                for (int e = 0; e < 4; e++)
                    x |= (uint32_t)s8_mod(acc[16 * q + 4 * b + e], p.off[md],
                                          p.magic[md], p.p[md])
                         << (8 * e);
                w[b] = x;
            }
            *reinterpret_cast<uint4 *>(tile + 2048 * q) =
                make_uint4(w[0], w[1], w[2], w[3]);
        }
    } else {
#pragma unroll
        for (int h = 0; h < 2; h++) {
            const int r = row0 + warp * 16 + (lane >> 2) + 8 * h;
            if (r >= p.m)
                continue;
            int32_t *orow = p.d + (long long)r * p.ldd;
            const int32_t *crow = p.beta ? p.c + (long long)r * p.ldc : nullptr;
#pragma unroll
            for (int jj = 0; jj < BN / 8; jj++) {
                const int col = col0 + 8 * jj + 2 * (lane & 3);
                uint32_t v[2];
#pragma unroll
                for (int e = 0; e < 2; e++) {
                    const int32_t a = acc[4 * jj + 2 * h + e];
                    if (p.reduce)
                        v[e] = (uint32_t)s8_mod(a, p.off[md], p.magic[md],
                                                p.p[md]);
                    else
                        v[e] = (uint32_t)p.alpha * (uint32_t)a +
                               (crow && col + e < p.n
                                    ? (uint32_t)p.beta * (uint32_t)crow[col + e]
                                    : 0u);
                }
                if (col + 1 < p.n && (p.ldd & 1) == 0) {
                    *reinterpret_cast<int2 *>(orow + col) =
                        make_int2((int32_t)v[0], (int32_t)v[1]);
                } else {
                    if (col < p.n)
                        orow[col] = (int32_t)v[0];
                    if (col + 1 < p.n)
                        orow[col + 1] = (int32_t)v[1];
                }
            }
        }
    }
}

/*
 * Ping-pong variant (what cuBLASLt's fastest int8 kernels are: 128 x 128
 * x 128 tiles, one warpgroup per tile): each consumer warpgroup owns a
 * whole 128 x 128 tile (two m64n128k32 per k32 step, 2 x 64 int32
 * accumulators a thread). Work units are (tile, product) pairs in the
 * CTA's order (s8_unit); the two consumers take alternate
 * units, so one's epilogue (OZ 0: int32 D; OZ 2: residue bytes) runs
 * under the other's main loop. The producer fills the ring in unit order;
 * a consumer skips the other's ring positions; turn[] orders the
 * hand-off as in gemm_pp_kernel (gemm_sm90.cuh).
 */
template <int OZ>
__global__ void __launch_bounds__(384, 1)
    gemm_s8_pp_kernel(const __grid_constant__ CUtensorMap tma,
                      const __grid_constant__ CUtensorMap tmb,
                      const __grid_constant__ S8Params p)
{
    static_assert(OZ == 0 || OZ == 2, "ping-pong: int32 or residue bytes");
    constexpr int BN = 128;
    using C = S8Cfg<128>;
    constexpr int STAGES = C::STAGES;
    constexpr int A_BYTES = C::A_BYTES;
    constexpr int B_BYTES = C::B_BYTES;
    extern __shared__ uint8_t smem_raw[];
    const SmemRing sm = smem_ring<STAGES, A_BYTES, B_BYTES>(smem_raw);
    uint8_t *sa = sm.sa, *sb = sm.sb;
    uint64_t *full = sm.full, *empty = sm.empty;
    uint64_t *turn = empty + STAGES;

    const int wg = warpgroup_index();
    const int tid = threadIdx.x % 128;
    if (threadIdx.x == 0) {
        for (int s = 0; s < STAGES; s++) {
            mbar_init(&full[s], 1);
            mbar_init(&empty[s], 4); /* the 4 warps of the stage's consumer */
        }
        mbar_init(&turn[0], 1);
        mbar_init(&turn[1], 1);
        asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    }
    __syncthreads();
    const int nunits = s8_units(p);

    if (wg == 0) {
        asm volatile("setmaxnreg.dec.sync.aligned.u32 40;");
        int s = 0;
        uint32_t ph = 0;
        for (int i = 0; tid == 0 && i < nunits; i++) {
            int mt, nt, l;
            s8_unit(p, i, mt, nt, l);
            const int ra = (p.mod0 + l) * p.rows_a + mt * BM;
            const int rb = (p.mod0 + l) * p.rows_b + nt * BN;
            for (int kb = 0; kb < p.nkb; kb++) {
                mbar_wait(&empty[s], ph ^ 1);
                mbar_expect_tx(&full[s], A_BYTES + B_BYTES);
                const int k0 = kb * (S8_BK / p.kunit);
                tma_load_2d(sa + s * A_BYTES, &tma, k0, ra, &full[s]);
                tma_load_2d(sb + s * B_BYTES, &tmb, k0, rb, &full[s]);
                if (++s == STAGES) {
                    s = 0;
                    ph ^= 1;
                }
            }
        }
    } else {
        asm volatile("setmaxnreg.inc.sync.aligned.u32 232;");
        const int c = wg - 1;
        const int warp = tid / 32, lane = tid % 32;
        int32_t d0[BN / 2], d1[BN / 2];
        int s = 0;
        uint32_t ph = 0;
        const uint64_t da0 =
            gemmk_desc_encode(smem_u32(sa), 16, 1024, GEMMK_SWIZZLE_128B);
        const uint64_t da1 = gemmk_desc_encode(smem_u32(sa) + 64 * S8_BK, 16,
                                               1024, GEMMK_SWIZZLE_128B);
        const uint64_t db0 =
            gemmk_desc_encode(smem_u32(sb), 16, 1024, GEMMK_SWIZZLE_128B);
        int j = 0; /* units this consumer has run */
        for (int i = 0; i < nunits; i++) {
            if ((i & 1) != c) { /* the other consumer's unit */
                for (int n = p.nkb; n > 0;) {
                    int step = min(n, STAGES - s);
                    n -= step;
                    s += step;
                    if (s == STAGES) {
                        s = 0;
                        ph ^= 1;
                    }
                }
                continue;
            }
            int mt, nt, l;
            s8_unit(p, i, mt, nt, l);
            const int md = p.mod0 + l;
            if (c == 1)
                mbar_wait(&turn[1], j & 1);
            else if (j > 0)
                mbar_wait(&turn[0], (j - 1) & 1);
            j++;
            int prev = -1;
            for (int kb = 0; kb < p.nkb; kb++) {
                mbar_wait(&full[s], ph);
                fence_iregs(d0);
                fence_iregs(d1);
                wgmma_fence();
#pragma unroll
                for (int kk = 0; kk < S8_BK / 32; kk++) {
                    const uint32_t oa = (s * A_BYTES + kk * 32) >> 4;
                    const uint64_t db = db0 + ((s * B_BYTES + kk * 32) >> 4);
                    const int sc = (kb == 0 && kk == 0) ? 0 : 1;
                    wgmma_m64n128k32_s8(d0, da0 + oa, db, sc);
                    wgmma_m64n128k32_s8(d1, da1 + oa, db, sc);
                }
                wgmma_commit();
                if (kb == p.nkb - 1 && tid == 0)
                    mbar_arrive(&turn[c ^ 1]);
                wgmma_wait<1>();
                fence_iregs(d0);
                fence_iregs(d1);
                if (prev >= 0 && lane == 0)
                    mbar_arrive(&empty[prev]);
                prev = s;
                if (++s == STAGES) {
                    s = 0;
                    ph ^= 1;
                }
                if ((OZ != 0 || p.reduce) && (kb + 1) % S8_FLUSH == 0 &&
                    kb + 1 < p.nkb) {
                    wgmma_wait<0>();
                    fence_iregs(d0);
                    fence_iregs(d1);
                    if (lane == 0)
                        mbar_arrive(&empty[prev]);
                    prev = -1;
#pragma unroll
                    for (int t = 0; t < BN / 2; t++) {
                        d0[t] = s8_mod(d0[t], p.off[md], p.magic[md], p.p[md]);
                        d1[t] = s8_mod(d1[t], p.off[md], p.magic[md], p.p[md]);
                    }
                }
            }
            wgmma_wait<0>();
            fence_iregs(d0);
            fence_iregs(d1);
            if (prev >= 0 && lane == 0)
                mbar_arrive(&empty[prev]);

            s8_pp_store<OZ>(p, d0, mt, nt, 0, md, warp, lane);
            s8_pp_store<OZ>(p, d1, mt, nt, 1, md, warp, lane);
        }
    }
}

} // namespace gemmk
