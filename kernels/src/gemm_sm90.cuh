/*
 * gemm_sm90.cuh: the warp-specialized Hopper GEMM kernel template.
 *
 * One CTA = 3 warpgroups: WG0 is the producer (one thread issues TMA loads
 * into a ring of STAGES shared-memory stages, 128B-swizzled); WG1 and WG2
 * are consumers, each owning 64 rows of the 128 x BN tile and issuing
 * wgmma m64nBNk16 with fp32 accumulators in registers. Stages are handed
 * over through mbarriers: full[s] (TMA bytes landed) and empty[s] (both
 * consumers done reading). setmaxnreg moves registers from the producer to
 * the consumers. The grid is persistent: each CTA walks work units
 * (tile, k-split) in a grouped order that keeps A and B panels in L2.
 *
 * AB selects the input type: 0 bf16, 1 fp16, 2 fp32 read as tf32 (k8
 * steps over 32-element k-blocks: the same 128-byte swizzled rows, boxes
 * and descriptors; K-major operands only, see api.cu's pre-pass).
 *
 * Transposes: AMN = A is MN-major in shared memory (trans_a), BMN = B is
 * MN-major (!trans_b); both come from the TMA box orientation plus wgmma's
 * transpose immediates, never from a transpose pass. Tails in M, N, K come
 * from TMA out-of-bounds zero fill and bounded stores.
 */
#pragma once

#include <cuda.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <stdint.h>

#include "smem_desc.h"
#include "tf32_frags.cuh"
#include "wgmma_gen.cuh"

namespace gemmk
{

constexpr int BM = 128;
constexpr int BK = 64;
constexpr int SLAB = 64 * BK * 2; /* bytes of one 64 x 64 16-bit box */
/* k-block in elements: 64 16-bit or 32 fp32 (tf32) values, 128 bytes */
template <int AB> constexpr int kblock_elems()
{
    return AB == 2 ? BK / 2 : BK;
}

struct KParams {
    int m, n, k;
    int num_m, num_n; /* tiles */
    int num_mu;       /* M units: tiles / cluster size, rounded up */
    int splits;       /* k-splits per tile (1: no split) */
    int kb_per_split; /* k-blocks of BK per split */
    int nkb;          /* k-blocks in all */
    int units;        /* num_m * num_n * splits */
    int group_m;      /* tile-order group height in tiles */
    int cd_type;      /* gemm_dtype of C and D */
    void *d;
    const void *c;
    long long ldd, ldc;
    float alpha, beta;
    float *ws;     /* split-K partials: splits x m x ldw fp32 */
    long long ldw; /* workspace row pitch, a multiple of 8 */
    /* PR kernels (3xTF32): promoted accumulation, see gemm_ws_kernel */
    float *pws;      /* gridDim.x x BM x BN fp32, fragment order */
    int promo_first; /* k-blocks of the first chunk (the small segments) */
    int promo;       /* k-blocks per chunk after it (>= 1) */
    int promo_skew;  /* consumer 1's chunks are offset by promo / 2, so the
                        two consumers do not drain at the same k-block */
    int d_trans;     /* tf32 TMA-store kernel: the product is D^T, stored
                        transposed (m x n here is D's n x m) */
};

/* This thread's warpgroup, warp-uniform for the compiler (lane 0's value,
 * shuffled): what derives from it, the role branch and the consumers'
 * stage and descriptor arithmetic, can stay on the uniform datapath
 * instead of being moved into uniform registers before each wgmma. */
__device__ __forceinline__ int warpgroup_index()
{
    return __shfl_sync(0xffffffffu, (int)(threadIdx.x / 128), 0);
}

__device__ __forceinline__ uint32_t smem_u32(const void *p)
{
    return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

__device__ __forceinline__ void mbar_init(uint64_t *bar, int count)
{
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" ::"r"(smem_u32(bar)),
                 "r"(count));
}

__device__ __forceinline__ void mbar_expect_tx(uint64_t *bar, uint32_t bytes)
{
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" ::"r"(
                     smem_u32(bar)),
                 "r"(bytes)
                 : "memory");
}

__device__ __forceinline__ void mbar_arrive(uint64_t *bar)
{
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];" ::"r"(smem_u32(bar))
                 : "memory");
}

__device__ __forceinline__ void mbar_wait(uint64_t *bar, uint32_t parity)
{
    asm volatile("{\n"
                 ".reg .pred done;\n"
                 "WAIT_%=:\n"
                 "mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
                 "@!done bra WAIT_%=;\n"
                 "}\n" ::"r"(smem_u32(bar)),
                 "r"(parity)
                 : "memory");
}

__device__ __forceinline__ void tma_load_2d(void *dst, const CUtensorMap *map,
                                            int c0, int c1, uint64_t *bar)
{
    asm volatile(
        "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::"
        "complete_tx::bytes [%0], [%1, {%2, %3}], [%4];" ::"r"(smem_u32(dst)),
        "l"(reinterpret_cast<uint64_t>(map)), "r"(c0), "r"(c1),
        "r"(smem_u32(bar))
        : "memory");
}

/* Shared-memory writes of this thread made visible to the async proxy
 * (wgmma, TMA stores) before it reads them. */
__device__ __forceinline__ void fence_proxy_async_smem()
{
    asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
}

/* tma_load_2d with an L2 cache policy (l2_policy_*). */
__device__ __forceinline__ void tma_load_2d_hint(void *dst,
                                                 const CUtensorMap *map, int c0,
                                                 int c1, uint64_t *bar,
                                                 uint64_t policy)
{
    asm volatile(
        "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::"
        "complete_tx::bytes.L2::cache_hint [%0], [%1, {%2, %3}], [%4], %5;" ::
            "r"(smem_u32(dst)),
        "l"(reinterpret_cast<uint64_t>(map)), "r"(c0), "r"(c1),
        "r"(smem_u32(bar)), "l"(policy)
        : "memory");
}

/* L2 policies for tma_load_2d_hint: lines read once go first, lines
 * every CTA reads again go last. */
__device__ __forceinline__ uint64_t l2_policy_evict_first()
{
    uint64_t p;
    asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;"
                 : "=l"(p));
    return p;
}

__device__ __forceinline__ uint64_t l2_policy_evict_last()
{
    uint64_t p;
    asm volatile("createpolicy.fractional.L2::evict_last.b64 %0, 1.0;"
                 : "=l"(p));
    return p;
}

/* A box of a 3-D map at (c0, c1, c2): one matrix of a strided batch. */
__device__ __forceinline__ void tma_load_3d(void *dst, const CUtensorMap *map,
                                            int c0, int c1, int c2,
                                            uint64_t *bar)
{
    asm volatile(
        "cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::"
        "complete_tx::bytes [%0], [%1, {%2, %3, %4}], [%5];" ::"r"(
            smem_u32(dst)),
        "l"(reinterpret_cast<uint64_t>(map)), "r"(c0), "r"(c1), "r"(c2),
        "r"(smem_u32(bar))
        : "memory");
}

/* tma_load_2d, or with Z3 tma_load_3d at matrix z. */
template <bool Z3>
__device__ __forceinline__ void tma_load(void *dst, const CUtensorMap *map,
                                         int c0, int c1, int z, uint64_t *bar)
{
    if constexpr (Z3)
        tma_load_3d(dst, map, c0, c1, z, bar);
    else
        tma_load_2d(dst, map, c0, c1, bar);
}

__device__ __forceinline__ void tma_load_2d_mc(void *dst,
                                               const CUtensorMap *map, int c0,
                                               int c1, uint64_t *bar,
                                               uint16_t mask)
{
    asm volatile(
        "cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::"
        "complete_tx::bytes.multicast::cluster [%0], [%1, {%2, %3}], [%4], "
        "%5;" ::"r"(smem_u32(dst)),
        "l"(reinterpret_cast<uint64_t>(map)), "r"(c0), "r"(c1),
        "r"(smem_u32(bar)), "h"(mask)
        : "memory");
}

/* tma_load_2d_mc on a 3-D map at matrix c2. */
__device__ __forceinline__ void tma_load_3d_mc(void *dst,
                                               const CUtensorMap *map, int c0,
                                               int c1, int c2, uint64_t *bar,
                                               uint16_t mask)
{
    asm volatile(
        "cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::"
        "complete_tx::bytes.multicast::cluster [%0], [%1, {%2, %3, %4}], "
        "[%5], %6;" ::"r"(smem_u32(dst)),
        "l"(reinterpret_cast<uint64_t>(map)), "r"(c0), "r"(c1), "r"(c2),
        "r"(smem_u32(bar)), "h"(mask)
        : "memory");
}

/* tma_load_2d_mc, or with Z3 tma_load_3d_mc at matrix z. */
template <bool Z3>
__device__ __forceinline__ void tma_load_mc(void *dst, const CUtensorMap *map,
                                            int c0, int c1, int z,
                                            uint64_t *bar, uint16_t mask)
{
    if constexpr (Z3)
        tma_load_3d_mc(dst, map, c0, c1, z, bar, mask);
    else
        tma_load_2d_mc(dst, map, c0, c1, bar, mask);
}

/* The configuration of a launch of grid CTAs of 384 threads in clusters
 * of cl along x (cl = 1: none) on stream; *attr is its one attribute. */
inline cudaLaunchConfig_t cluster_config(cudaLaunchAttribute *attr, int grid,
                                         int smem, int cl, cudaStream_t stream)
{
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = dim3(grid, 1, 1);
    cfg.blockDim = dim3(384, 1, 1);
    cfg.dynamicSmemBytes = smem;
    cfg.stream = stream;
    attr->id = cudaLaunchAttributeClusterDimension;
    attr->val.clusterDim.x = cl;
    attr->val.clusterDim.y = 1;
    attr->val.clusterDim.z = 1;
    cfg.attrs = attr;
    cfg.numAttrs = cl > 1 ? 1 : 0;
    return cfg;
}

/* Launches kern as cluster_config says; returns the launch's error. */
template <typename... P, typename... A>
cudaError_t launch_clusters(void (*kern)(P...), int grid, int smem, int cl,
                            cudaStream_t stream, const A &...args)
{
    cudaLaunchAttribute attr;
    cudaLaunchConfig_t cfg = cluster_config(&attr, grid, smem, cl, stream);
    cudaError_t e = cudaLaunchKernelEx(&cfg, kern, args...);
    if (e != cudaSuccess)
        return e;
    return cudaGetLastError();
}

__device__ __forceinline__ uint32_t cluster_rank()
{
    uint32_t r;
    asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(r));
    return r;
}

__device__ __forceinline__ void cluster_sync()
{
    asm volatile("barrier.cluster.arrive.release;\n"
                 "barrier.cluster.wait.acquire;" ::
                     : "memory");
}

/* A kernel's dynamic shared memory, 1024-byte aligned: the ring's STAGES
 * A stages, its B stages, C_BYTES of output buffers, then the full and
 * empty barriers (STAGES each). */
struct SmemRing {
    uint8_t *sa, *sb, *sc;
    uint64_t *full, *empty;
};
template <int STAGES, int A_BYTES, int B_BYTES, int C_BYTES = 0>
__device__ __forceinline__ SmemRing smem_ring(uint8_t *raw)
{
    SmemRing r;
    r.sa = reinterpret_cast<uint8_t *>(
        (reinterpret_cast<uintptr_t>(raw) + 1023) & ~uintptr_t(1023));
    r.sb = r.sa + STAGES * A_BYTES;
    r.sc = r.sb + STAGES * B_BYTES;
    r.full = reinterpret_cast<uint64_t *>(r.sc + C_BYTES);
    r.empty = r.full + STAGES;
    return r;
}

/* A ring of `stages` barriers made by thread 0 of the CTA: full[s] waits
 * for the producer's one arrival (and its bytes), empty[s] for `releases`
 * arrivals; then the CTA syncs. Every thread. */
__device__ __forceinline__ void ring_init(uint64_t *full, uint64_t *empty,
                                          int stages, int releases)
{
    if (threadIdx.x == 0) {
        for (int s = 0; s < stages; s++) {
            mbar_init(&full[s], 1);
            mbar_init(&empty[s], releases);
        }
        asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    }
    __syncthreads();
}

/* The stage ring's barriers, made by thread 0 of the CTA: full[s] waits
 * for the producer's one arrival (and its bytes), empty[s] for lane 0 of
 * each consumer warp of the CTA's CL peers (8 * CL). With CL > 1 the
 * cluster then waits until every peer's barriers exist. Every thread;
 * returns the CTA's rank in its cluster (0 without one). */
template <int STAGES, int CL>
__device__ __forceinline__ uint32_t ring_start(uint64_t *full, uint64_t *empty)
{
    ring_init(full, empty, STAGES, 8 * CL);
    if constexpr (CL == 1)
        return 0;
    const uint32_t rank = cluster_rank();
    cluster_sync();
    return rank;
}

/* Arrives on the mbarrier at the same offset in CTA `rank` of the cluster. */
__device__ __forceinline__ void mbar_arrive_cluster(uint64_t *bar,
                                                    uint32_t rank)
{
    uint32_t remote;
    asm volatile("mapa.shared::cluster.u32 %0, %1, %2;"
                 : "=r"(remote)
                 : "r"(smem_u32(bar)), "r"(rank));
    /* default semantics (.release.cta), as CUTLASS's ClusterBarrier: the
     * consumer only read shared memory through wgmma, already waited for.
     * .release.cluster compiled to a cluster-scope MEMBAR per k-block per
     * warp that stalled the consumers ~35% of cycles (ncu). */
    asm volatile("mbarrier.arrive.shared::cluster.b64 _, [%0];" ::"r"(remote)
                 : "memory");
}

__device__ __forceinline__ void wgmma_fence()
{
    asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
}
__device__ __forceinline__ void wgmma_commit()
{
    asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
}
template <int N> __device__ __forceinline__ void wgmma_wait()
{
    asm volatile("wgmma.wait_group.sync.aligned %0;" ::"n"(N) : "memory");
}

template <int R> __device__ __forceinline__ void fence_regs(float (&d)[R])
{
#pragma unroll
    for (int i = 0; i < R; i++)
        asm volatile("" : "+f"(d[i])::"memory");
}

/* One 32-byte k-step of the 128B-swizzled K rows: k16 for 16-bit inputs,
 * k8 for tf32 (AB 2: fp32 words, both operands K-major). AB: 0 bf16,
 * 1 fp16, 2 tf32. */
template <int BN, int AB, int AMN, int BMN>
__device__ __forceinline__ void mma_k16(float (&d)[BN / 2], uint64_t da,
                                        uint64_t db, int scale_d)
{
    static_assert(AB != 2 || (AMN == 0 && BMN == 0),
                  "tf32 wgmma reads K-major operands only");
    if constexpr (AB == 2) {
        wgmma_m64k8_tf32<BN>(d, da, db, scale_d);
    } else if constexpr (BN == 256) {
        if constexpr (AB == 1)
            wgmma_m64n256k16_f16<AMN, BMN>(d, da, db, scale_d);
        else
            wgmma_m64n256k16_bf16<AMN, BMN>(d, da, db, scale_d);
    } else if constexpr (BN == 192) {
        if constexpr (AB == 1)
            wgmma_m64n192k16_f16<AMN, BMN>(d, da, db, scale_d);
        else
            wgmma_m64n192k16_bf16<AMN, BMN>(d, da, db, scale_d);
    } else if constexpr (BN == 128) {
        if constexpr (AB == 1)
            wgmma_m64n128k16_f16<AMN, BMN>(d, da, db, scale_d);
        else
            wgmma_m64n128k16_bf16<AMN, BMN>(d, da, db, scale_d);
    } else {
        if constexpr (AB == 1)
            wgmma_m64n64k16_f16<AMN, BMN>(d, da, db, scale_d);
        else
            wgmma_m64n64k16_bf16<AMN, BMN>(d, da, db, scale_d);
    }
}

/* Work unit -> (tile m, tile n, split), grouped so that consecutive units
 * share A row-panels (group_m tall) and sweep N. */
__device__ __forceinline__ void unit_coords(const KParams &p, int u, int &mt,
                                            int &nt, int &split)
{
    split = u % p.splits;
    int tile = u / p.splits;
    int per_group = p.group_m * p.num_n;
    int g = tile / per_group;
    int first_m = g * p.group_m;
    int gm = min(p.num_mu - first_m, p.group_m);
    int local = tile - g * per_group;
    mt = first_m + local % gm;
    nt = local / gm;
}

template <typename T> __device__ __forceinline__ T from_f32(float x);
template <> __device__ __forceinline__ float from_f32<float>(float x)
{
    return x;
}
template <> __device__ __forceinline__ __nv_bfloat16 from_f32(float x)
{
    return __float2bfloat16_rn(x);
}
template <> __device__ __forceinline__ __half from_f32(float x)
{
    return __float2half_rn(x);
}
__device__ __forceinline__ float to_f32(float x)
{
    return x;
}
__device__ __forceinline__ float to_f32(__nv_bfloat16 x)
{
    return __bfloat162float(x);
}
__device__ __forceinline__ float to_f32(__half x)
{
    return __half2float(x);
}

template <typename T> struct Pair;
template <> struct Pair<float> {
    using type = float2;
};
template <> struct Pair<__nv_bfloat16> {
    using type = __nv_bfloat162;
};
template <> struct Pair<__half> {
    using type = __half2;
};

/*
 * Writes one consumer's 64 x BN accumulator block to D (or to the split-K
 * workspace). Fragment layout of wgmma m64nN f32: thread t of the
 * warpgroup, warp w = t / 32, lane l: d[4j + 2h + e] is row
 * 16w + l/4 + 8h, column 8j + 2(l%4) + e.
 */
template <typename T, int BN>
__device__ __forceinline__ void
store_tile(const KParams &p, float (&d)[BN / 2], int row0, int col0, int lane,
           int warp, T *out, long long ldo, bool raw, const T *cin,
           long long ldc)
{
    using P = typename Pair<T>::type;
    const float alpha = raw ? 1.f : p.alpha;
    const float beta = raw ? 0.f : p.beta;
#pragma unroll
    for (int h = 0; h < 2; h++) {
        int r = row0 + warp * 16 + (lane >> 2) + 8 * h;
        if (r >= p.m)
            continue;
        T *orow = out + (long long)r * ldo;
        const T *crow = (beta != 0.f) ? cin + (long long)r * ldc : nullptr;
#pragma unroll
        for (int j = 0; j < BN / 8; j++) {
            int col = col0 + 8 * j + 2 * (lane & 3);
            float v0 = alpha * d[4 * j + 2 * h];
            float v1 = alpha * d[4 * j + 2 * h + 1];
            if (col + 1 < p.n) {
                if (crow) {
                    P cv = *reinterpret_cast<const P *>(crow + col);
                    v0 += beta * to_f32(cv.x);
                    v1 += beta * to_f32(cv.y);
                }
                P ov;
                ov.x = from_f32<T>(v0);
                ov.y = from_f32<T>(v1);
                *reinterpret_cast<P *>(orow + col) = ov;
            } else if (col < p.n) {
                if (crow)
                    v0 += beta * to_f32(crow[col]);
                orow[col] = from_f32<T>(v0);
            }
        }
    }
}

/* store_tile for the output type of p (or the split-K workspace). */
template <int BN>
__device__ __forceinline__ void store_any(const KParams &p, float (&d)[BN / 2],
                                          int row0, int col0, int lane,
                                          int warp, int split)
{
    if (p.splits > 1) {
        float *w = p.ws + (long long)split * p.m * p.ldw;
        store_tile<float, BN>(p, d, row0, col0, lane, warp, w, p.ldw, true,
                              nullptr, 0);
    } else if (p.cd_type == 3) {
        store_tile<float, BN>(p, d, row0, col0, lane, warp,
                              static_cast<float *>(p.d), p.ldd, false,
                              static_cast<const float *>(p.c), p.ldc);
    } else if (p.cd_type == 1) {
        store_tile<__nv_bfloat16, BN>(
            p, d, row0, col0, lane, warp, static_cast<__nv_bfloat16 *>(p.d),
            p.ldd, false, static_cast<const __nv_bfloat16 *>(p.c), p.ldc);
    } else {
        store_tile<__half, BN>(p, d, row0, col0, lane, warp,
                               static_cast<__half *>(p.d), p.ldd, false,
                               static_cast<const __half *>(p.c), p.ldc);
    }
}

#ifndef PP_STAGES
#define PP_STAGES 6
#endif
constexpr int PP_SMEM = PP_STAGES * (BM * BK * 2 + 128 * BK * 2) + 1024 + 256;

template <int BN> struct Cfg {
    static constexpr int STAGES = BN == 256 ? 4 : BN == 128 ? 6 : 8;
    static constexpr int A_BYTES = BM * BK * 2;
    static constexpr int B_BYTES = BN * BK * 2;
    static constexpr int SMEM = STAGES * (A_BYTES + B_BYTES) + 1024 + 256;
};

/*
 * CL = cluster size along M (1 or 2). With 2, the CTA pair takes M-tiles
 * 2u and 2u+1 of the same N-tile; each CTA loads its own A and half of B,
 * multicast into both CTAs' shared memory, so each SM pulls 32 KB instead
 * of 48 KB from L2 per k-block. empty[s] then waits for the consumers of
 * both CTAs (16 warp arrivals), since either producer writes both CTAs.
 *
 * PR (3xTF32 only): promoted accumulation. The tensor cores' fp32
 * accumulation truncates each k8 step, an error that grows with the
 * accumulator's magnitude. With PR the k-blocks of a unit run in chunks
 * (global k-block boundaries: promo_first, then every promo, skewed for
 * consumer 1); at a chunk's end the consumer waits for its wgmmas, adds d
 * into an fp32 accumulator in global memory (this CTA's slot of p.pws, L2
 * resident; fragment order, so each thread's 4 values are one float4; only
 * this thread touches them) with round-to-nearest FADDs, and restarts d
 * from zero (scale-d 0 on the chunk's first wgmma). atomicAdd(float4)
 * (red.global) instead measured ~2x slower: L2 fp32 atomics ran at
 * ~0.4 TB/s.
 * The first chunk stores instead of adding; the last one is not written:
 * its d plus the slot (read back through L2) is the result. A 128 x 256
 * tile's second accumulator does not fit in registers (2 x 128 per thread)
 * nor beside the stage ring in shared memory.
 */
/* The promoted kernel with the accumulator copy in shared memory (PR 2):
 * 2 stages + 128 x BN fp32. */
template <int BN> struct CfgP2 {
    static constexpr int STAGES = 2;
    static constexpr int ACC = BM * BN * 4;
    static constexpr int SMEM =
        STAGES * (Cfg<BN>::A_BYTES + Cfg<BN>::B_BYTES) + ACC + 1024 + 256;
    static_assert(SMEM <= 227 * 1024, "over the opt-in shared memory limit");
};

/*
 * The producer's k-blocks [kb0, kb1) of the tile at rows m0, columns n0:
 * waits for each free stage, loads A's and B's boxes through tma, tmb (a
 * kernel parameter's address, or a tensor map in global memory) and
 * advances the ring position (s, ph). Z3: tma, tmb are 3-D maps of a
 * strided batch and the tile reads matrix za of A and zb of B. The
 * producer thread only.
 */
template <int BN, int AB, int AMN, int BMN, int CL, int STAGES, bool Z3 = false>
__device__ __forceinline__ void
produce_tile(const CUtensorMap *tma, const CUtensorMap *tmb, int m0, int n0,
             int kb0, int kb1, uint32_t rank, uint8_t *sa, uint8_t *sb,
             uint64_t *full, uint64_t *empty, int &s, uint32_t &ph, int za = 0,
             int zb = 0)
{
    constexpr int A_BYTES = Cfg<BN>::A_BYTES;
    constexpr int B_BYTES = Cfg<BN>::B_BYTES;
    for (int kb = kb0; kb < kb1; kb++) {
        mbar_wait(&empty[s], ph ^ 1);
        mbar_expect_tx(&full[s], A_BYTES + B_BYTES);
        int k0 = kb * kblock_elems<AB>();
        uint8_t *a = sa + s * A_BYTES;
        uint8_t *b = sb + s * B_BYTES;
        if constexpr (AMN && AB == 2) { /* tf32: boxes of 32 M x 32 k */
#pragma unroll
            for (int j = 0; j < 4; j++)
                tma_load<Z3>(a + j * 4096, tma, m0 + 32 * j, k0, za, &full[s]);
        } else if constexpr (AMN) {
            tma_load<Z3>(a, tma, m0, k0, za, &full[s]);
            tma_load<Z3>(a + SLAB, tma, m0 + 64, k0, za, &full[s]);
        } else {
            tma_load<Z3>(a, tma, k0, m0, za, &full[s]);
        }
        if constexpr (CL == 1) {
            if constexpr (BMN) {
#pragma unroll
                for (int j = 0; j < BN / 64; j++)
                    tma_load<Z3>(b + j * SLAB, tmb, n0 + 64 * j, k0, zb,
                                 &full[s]);
            } else {
                tma_load<Z3>(b, tmb, k0, n0, zb, &full[s]);
            }
        } else {
            const uint16_t mask = (1u << CL) - 1;
            if constexpr (BMN) {
#pragma unroll
                for (int j = rank; j < BN / 64; j += CL)
                    tma_load_mc<Z3>(b + j * SLAB, tmb, n0 + 64 * j, k0, zb,
                                    &full[s], mask);
            } else {
                constexpr int part = BN / CL;
                tma_load_mc<Z3>(b + rank * part * 128, tmb, k0,
                                n0 + rank * part, zb, &full[s], mask);
            }
        }
        if (++s == STAGES) {
            s = 0;
            ph ^= 1;
        }
    }
}

/*
 * One consumer's main loop over k-blocks [kb0, kb1) of a tile: wgmma on
 * each landed stage into d (from zero), each stage released once the
 * next one's wgmmas are issued (to both CTAs' producers with a cluster),
 * all drained at the end; advances the ring position (s, ph). da0, db0:
 * descriptors of stage 0 of this consumer's A rows and of B. RN: the
 * tile width the ring's stages are laid out for (BN unless this consumer
 * reads BN of a wider stage's columns, db0 pointing at them).
 */
template <int BN, int AB, int AMN, int BMN, int CL, int STAGES, int RN = BN>
__device__ __forceinline__ void
consume_tile(float (&d)[BN / 2], uint64_t da0, uint64_t db0, int kb0, int kb1,
             int lane, uint32_t rank, uint64_t *full, uint64_t *empty, int &s,
             uint32_t &ph)
{
    constexpr int A_BYTES = Cfg<RN>::A_BYTES;
    constexpr int B_BYTES = Cfg<RN>::B_BYTES;
    constexpr uint32_t A_KSTEP = AMN ? 16 * 128 : 32;
    constexpr uint32_t B_KSTEP = BMN ? 16 * 128 : 32;
    int prev = -1;
    for (int kb = kb0; kb < kb1; kb++) {
        mbar_wait(&full[s], ph);
        fence_regs(d);
        wgmma_fence();
#pragma unroll
        for (int kk = 0; kk < BK / 16; kk++) {
            uint64_t da = da0 + ((s * A_BYTES + kk * A_KSTEP) >> 4);
            uint64_t db = db0 + ((s * B_BYTES + kk * B_KSTEP) >> 4);
            mma_k16<BN, AB, AMN, BMN>(d, da, db, (kb != kb0 || kk != 0));
        }
        wgmma_commit();
        wgmma_wait<1>();
        fence_regs(d);
        if (prev >= 0 && lane == 0) {
            mbar_arrive(&empty[prev]);
            if constexpr (CL > 1)
                mbar_arrive_cluster(&empty[prev], rank ^ 1);
        }
        prev = s;
        if (++s == STAGES) {
            s = 0;
            ph ^= 1;
        }
    }
    wgmma_wait<0>();
    fence_regs(d);
    if (lane == 0) {
        mbar_arrive(&empty[prev]);
        if constexpr (CL > 1)
            mbar_arrive_cluster(&empty[prev], rank ^ 1);
    }
}

/*
 * consume_tile for tf32 with A MN-major: the consumer reads its 64 rows'
 * k8 fragments from the stage into registers (tf32_frags.cuh: the load
 * transposes) and issues register-A wgmmas, B K-major from the stage.
 * A k-block's four k8 steps go as two groups of two, each on its own
 * fragment registers: a group's fragments are loaded once wgmma_wait<1>
 * has seen the same registers' previous group complete, while the other
 * group runs (a second k-block of fragments does not fit beside 128
 * accumulators). A stage goes back once both its groups are done. sa_c:
 * stage 0 of this consumer's rows (two 4 KB boxes), f: the lane's offsets
 * in them. No cluster.
 */
template <int BN, int STAGES>
__device__ __forceinline__ void
consume_tile_rs(float (&d)[BN / 2], const uint8_t *sa_c, uint64_t db0,
                const AFrags &f, int kb0, int kb1, int lane, uint64_t *full,
                uint64_t *empty, int &s, uint32_t &ph)
{
    constexpr int A_BYTES = Cfg<BN>::A_BYTES;
    constexpr int B_BYTES = Cfg<BN>::B_BYTES;
    uint32_t a[4][4];
    int prev = -1;
    for (int kb = kb0; kb < kb1; kb++) {
        mbar_wait(&full[s], ph);
        const uint8_t *st = sa_c + s * A_BYTES;
        const uint64_t db = db0 + ((s * B_BYTES) >> 4);
        load_a_frags<0, 2>(st, f, a);
        fence_regs(d);
        wgmma_fence();
        wgmma_m64k8_tf32_rs<BN>(d, a[0], db, kb != kb0);
        wgmma_m64k8_tf32_rs<BN>(d, a[1], db + 2, 1);
        wgmma_commit();
        wgmma_wait<1>(); /* the previous k-block's second group */
        fence_regs(d);
        if (prev >= 0 && lane == 0)
            mbar_arrive(&empty[prev]);
        load_a_frags<2, 4>(st, f, a);
        wgmma_fence();
        wgmma_m64k8_tf32_rs<BN>(d, a[2], db + 4, 1);
        wgmma_m64k8_tf32_rs<BN>(d, a[3], db + 6, 1);
        wgmma_commit();
        wgmma_wait<1>(); /* this k-block's first group */
        fence_regs(d);
        prev = s;
        if (++s == STAGES) {
            s = 0;
            ph ^= 1;
        }
    }
    wgmma_wait<0>();
    fence_regs(d);
    if (lane == 0)
        mbar_arrive(&empty[prev]);
}

template <int BN, int AB, int AMN, int BMN, int CL, int PR = 0>
__global__ void __launch_bounds__(384, 1)
    gemm_ws_kernel(const __grid_constant__ CUtensorMap tma,
                   const __grid_constant__ CUtensorMap tmb,
                   const __grid_constant__ KParams p)
{
    constexpr int STAGES = PR == 2 ? CfgP2<BN>::STAGES : Cfg<BN>::STAGES;
    constexpr int A_BYTES = Cfg<BN>::A_BYTES;
    constexpr int B_BYTES = Cfg<BN>::B_BYTES;
    extern __shared__ uint8_t smem_raw[];
    const SmemRing sm = smem_ring<STAGES, A_BYTES, B_BYTES>(smem_raw);
    uint8_t *sa = sm.sa, *sb = sm.sb;
    uint64_t *full = sm.full, *empty = sm.empty;

    const int wg = warpgroup_index();
    const int tid = threadIdx.x % 128;
    const uint32_t rank = ring_start<STAGES, CL>(full, empty);
    const int u0 = blockIdx.x / CL, ustep = gridDim.x / CL;

    if (wg == 0) {
        asm volatile("setmaxnreg.dec.sync.aligned.u32 40;");
        int s = 0;
        uint32_t ph = 0;
        for (int u = u0; tid == 0 && u < p.units; u += ustep) {
            int mt, nt, split;
            unit_coords(p, u, mt, nt, split);
            mt = mt * CL + rank;
            int kb0 = split * p.kb_per_split;
            int kb1 = min(p.nkb, kb0 + p.kb_per_split);
            produce_tile<BN, AB, AMN, BMN, CL, STAGES>(
                &tma, &tmb, mt * BM, nt * BN, kb0, kb1, rank, sa, sb, full,
                empty, s, ph);
        }
    } else {
        asm volatile("setmaxnreg.inc.sync.aligned.u32 232;");
        const int c = wg - 1;
        const int warp = tid / 32, lane = tid % 32;
        float d[BN / 2];
        static_assert(!PR || CL == 1, "promotion: no clusters");
        /* PR: this consumer's 64 x BN slot, [BN / 8][128 threads][4] */
        float4 *pslot = nullptr;
        if constexpr (PR == 1)
            pslot = reinterpret_cast<float4 *>(p.pws) +
                    ((long long)blockIdx.x * 2 + c) * (16 * BN) + tid;
        else if constexpr (PR == 2) /* after the barriers */
            pslot = reinterpret_cast<float4 *>(sb + STAGES * B_BYTES + 256) +
                    c * (16 * BN) + tid;
        int s = 0;
        uint32_t ph = 0;
        /* descriptor constants (bytes) */
        constexpr uint32_t A_LBO = AMN ? SLAB : 16;
        constexpr uint32_t B_LBO = BMN ? SLAB : 16;
        constexpr uint32_t A_KSTEP = AMN ? 16 * 128 : 32;
        constexpr uint32_t B_KSTEP = BMN ? 16 * 128 : 32;
        const uint64_t da0 = gemmk_desc_encode(smem_u32(sa) + c * SLAB, A_LBO,
                                               1024, GEMMK_SWIZZLE_128B);
        const uint64_t db0 =
            gemmk_desc_encode(smem_u32(sb), B_LBO, 1024, GEMMK_SWIZZLE_128B);
        for (int u = u0; u < p.units; u += ustep) {
            int mt, nt, split;
            unit_coords(p, u, mt, nt, split);
            mt = mt * CL + rank;
            int kb0 = split * p.kb_per_split;
            int kb1 = min(p.nkb, kb0 + p.kb_per_split);
            if constexpr (!PR) {
                consume_tile<BN, AB, AMN, BMN, CL, STAGES>(
                    d, da0, db0, kb0, kb1, lane, rank, full, empty, s, ph);
            } else {
                int prev = -1;
                /* PR: chunk ends after k-block kb when kb + 1 - pfirst is a
                 * positive multiple of promo (or kb + 1 == pfirst) */
                /* warp-uniform for the compiler: control flow that depends on
                 * threadIdx (c) around wgmma makes ptxas serialize them */
                const int pskew = __shfl_sync(
                    0xffffffffu,
                    (p.promo_skew && c == 1 && p.promo > 1) ? p.promo / 2 : 0,
                    0);
                const int pfirst = p.promo_first;
                bool fresh = true; /* PR: the slot not yet written this unit */
                int chunk0 = kb0;  /* PR: first k-block of the chunk */
                for (int kb = kb0; kb < kb1; kb++) {
                    mbar_wait(&full[s], ph);
                    fence_regs(d);
                    wgmma_fence();
#pragma unroll
                    for (int kk = 0; kk < BK / 16; kk++) {
                        uint64_t da = da0 + ((s * A_BYTES + kk * A_KSTEP) >> 4);
                        uint64_t db = db0 + ((s * B_BYTES + kk * B_KSTEP) >> 4);
                        mma_k16<BN, AB, AMN, BMN>(
                            d, da, db, (kb != (PR ? chunk0 : kb0) || kk != 0));
                    }
                    wgmma_commit();
                    if constexpr (PR) {
                        const int e = kb + 1 - pfirst;
                        const bool last = kb == kb1 - 1;
                        if (e == 0 || (e > 0 && (e + pskew) % p.promo == 0) ||
                            last) {
                            /* promote: drain, release both stages */
                            wgmma_wait<0>();
                            fence_regs(d);
                            if (lane == 0) {
                                if (prev >= 0)
                                    mbar_arrive(&empty[prev]);
                                mbar_arrive(&empty[s]);
                            }
                            prev = -1;
                            if (last) {
                                if (!fresh) { /* d += slot */
                                    if constexpr (PR == 1)
                                        __threadfence();
#pragma unroll
                                    for (int i = 0; i < BN / 8; i++) {
                                        float4 w = PR == 1
                                                       ? __ldcg(pslot + i * 128)
                                                       : pslot[i * 128];
                                        d[4 * i] = __fadd_rn(d[4 * i], w.x);
                                        d[4 * i + 1] =
                                            __fadd_rn(d[4 * i + 1], w.y);
                                        d[4 * i + 2] =
                                            __fadd_rn(d[4 * i + 2], w.z);
                                        d[4 * i + 3] =
                                            __fadd_rn(d[4 * i + 3], w.w);
                                    }
                                }
                            } else if (fresh) {
#pragma unroll
                                for (int i = 0; i < BN / 8; i++) {
                                    float4 w =
                                        make_float4(d[4 * i], d[4 * i + 1],
                                                    d[4 * i + 2], d[4 * i + 3]);
                                    if constexpr (PR == 1)
                                        __stcg(pslot + i * 128, w);
                                    else
                                        pslot[i * 128] = w;
                                }
                                fresh = false;
                            } else { /* slot += d */
#pragma unroll
                                for (int i = 0; i < BN / 8; i++) {
                                    float4 w = PR == 1 ? __ldcg(pslot + i * 128)
                                                       : pslot[i * 128];
                                    w.x = __fadd_rn(w.x, d[4 * i]);
                                    w.y = __fadd_rn(w.y, d[4 * i + 1]);
                                    w.z = __fadd_rn(w.z, d[4 * i + 2]);
                                    w.w = __fadd_rn(w.w, d[4 * i + 3]);
                                    if constexpr (PR == 1)
                                        __stcg(pslot + i * 128, w);
                                    else
                                        pslot[i * 128] = w;
                                }
                            }
                            chunk0 = kb + 1;
                            if (++s == STAGES) {
                                s = 0;
                                ph ^= 1;
                            }
                            continue;
                        }
                    }
                    wgmma_wait<1>();
                    fence_regs(d);
                    if (prev >= 0 && lane == 0) {
                        mbar_arrive(&empty[prev]);
                        if constexpr (CL > 1)
                            mbar_arrive_cluster(&empty[prev], rank ^ 1);
                    }
                    prev = s;
                    if (++s == STAGES) {
                        s = 0;
                        ph ^= 1;
                    }
                }
            }

            int row0 = mt * BM + c * 64, col0 = nt * BN;
            if (p.splits > 1) {
                float *w = p.ws + (long long)split * p.m * p.ldw;
                store_tile<float, BN>(p, d, row0, col0, lane, warp, w, p.ldw,
                                      true, nullptr, 0);
            } else if (p.cd_type == 3) {
                store_tile<float, BN>(p, d, row0, col0, lane, warp,
                                      static_cast<float *>(p.d), p.ldd, false,
                                      static_cast<const float *>(p.c), p.ldc);
            } else if (p.cd_type == 1) {
                store_tile<__nv_bfloat16, BN>(
                    p, d, row0, col0, lane, warp,
                    static_cast<__nv_bfloat16 *>(p.d), p.ldd, false,
                    static_cast<const __nv_bfloat16 *>(p.c), p.ldc);
            } else {
                store_tile<__half, BN>(p, d, row0, col0, lane, warp,
                                       static_cast<__half *>(p.d), p.ldd, false,
                                       static_cast<const __half *>(p.c), p.ldc);
            }
        }
    }
    /* no CTA may leave while its peer can still multicast into its shared
     * memory or arrive on its barriers */
    if constexpr (CL > 1)
        cluster_sync();
}

/*
 * Ping-pong variant: each consumer warpgroup owns a whole 128 x 128
 * tile (two m64n128k16 per k16 step, 2 x 64 accumulators per thread); the
 * two consumers take alternate work units of the CTA, so one's epilogue
 * (stores straight from registers) overlaps the other's main loop instead
 * of idling the tensor cores. The producer fills the ring in the CTA's unit
 * order; each consumer walks the ring positions of its own units and skips
 * the other's. empty[s] counts the 4 warps of the one consumer of stage s.
 */
template <int AB, int AMN, int BMN>
__global__ void __launch_bounds__(384, 1)
    gemm_pp_kernel(const __grid_constant__ CUtensorMap tma,
                   const __grid_constant__ CUtensorMap tmb,
                   const __grid_constant__ KParams p)
{
    constexpr int BN = 128;
    constexpr int STAGES = PP_STAGES;
    constexpr int A_BYTES = BM * BK * 2;
    constexpr int B_BYTES = BN * BK * 2;
    extern __shared__ uint8_t smem_raw[];
    const SmemRing sm = smem_ring<STAGES, A_BYTES, B_BYTES>(smem_raw);
    uint8_t *sa = sm.sa, *sb = sm.sb;
    uint64_t *full = sm.full, *empty = sm.empty;
    /* turn[c]: the other consumer has issued its last k-block of the unit
     * before this consumer's next one. Keeps each consumer within one ring
     * lap of the producer (a parity wait cannot tell laps apart). */
    uint64_t *turn = empty + STAGES;

    const int wg = warpgroup_index();
    const int tid = threadIdx.x % 128;
    if (threadIdx.x == 0) {
        for (int s = 0; s < STAGES; s++) {
            mbar_init(&full[s], 1);
            mbar_init(&empty[s], 4);
        }
        mbar_init(&turn[0], 1);
        mbar_init(&turn[1], 1);
        asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    }
    __syncthreads();

    if (wg == 0) {
        asm volatile("setmaxnreg.dec.sync.aligned.u32 40;");
        int s = 0;
        uint32_t ph = 0;
        for (int u = blockIdx.x; tid == 0 && u < p.units; u += gridDim.x) {
            int mt, nt, split;
            unit_coords(p, u, mt, nt, split);
            int kb0 = split * p.kb_per_split;
            int kb1 = min(p.nkb, kb0 + p.kb_per_split);
            int m0 = mt * BM, n0 = nt * BN;
            for (int kb = kb0; kb < kb1; kb++) {
                mbar_wait(&empty[s], ph ^ 1);
                mbar_expect_tx(&full[s], A_BYTES + B_BYTES);
                int k0 = kb * kblock_elems<AB>();
                uint8_t *a = sa + s * A_BYTES;
                uint8_t *b = sb + s * B_BYTES;
                if constexpr (AMN) {
                    tma_load_2d(a, &tma, m0, k0, &full[s]);
                    tma_load_2d(a + SLAB, &tma, m0 + 64, k0, &full[s]);
                } else {
                    tma_load_2d(a, &tma, k0, m0, &full[s]);
                }
                if constexpr (BMN) {
                    tma_load_2d(b, &tmb, n0, k0, &full[s]);
                    tma_load_2d(b + SLAB, &tmb, n0 + 64, k0, &full[s]);
                } else {
                    tma_load_2d(b, &tmb, k0, n0, &full[s]);
                }
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
        float d0[BN / 2], d1[BN / 2];
        int s = 0;
        uint32_t ph = 0;
        constexpr uint32_t A_LBO = AMN ? SLAB : 16;
        constexpr uint32_t B_LBO = BMN ? SLAB : 16;
        constexpr uint32_t A_KSTEP = AMN ? 16 * 128 : 32;
        constexpr uint32_t B_KSTEP = BMN ? 16 * 128 : 32;
        const uint64_t da0 =
            gemmk_desc_encode(smem_u32(sa), A_LBO, 1024, GEMMK_SWIZZLE_128B);
        const uint64_t da1 = gemmk_desc_encode(smem_u32(sa) + SLAB, A_LBO, 1024,
                                               GEMMK_SWIZZLE_128B);
        const uint64_t db0 =
            gemmk_desc_encode(smem_u32(sb), B_LBO, 1024, GEMMK_SWIZZLE_128B);
        int i = 0, j = 0;
        for (int u = blockIdx.x; u < p.units; u += gridDim.x, i++) {
            int mt, nt, split;
            unit_coords(p, u, mt, nt, split);
            int kb0 = split * p.kb_per_split;
            int kb1 = min(p.nkb, kb0 + p.kb_per_split);
            if ((i & 1) != c) { /* the other consumer's unit: skip its stages */
                for (int n = kb1 - kb0; n > 0;) {
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
            if (c == 1)
                mbar_wait(&turn[1], j & 1);
            else if (j > 0)
                mbar_wait(&turn[0], (j - 1) & 1);
            j++;
            int prev = -1;
            for (int kb = kb0; kb < kb1; kb++) {
                mbar_wait(&full[s], ph);
                fence_regs(d0);
                fence_regs(d1);
                wgmma_fence();
#pragma unroll
                for (int kk = 0; kk < BK / 16; kk++) {
                    uint32_t oa = (s * A_BYTES + kk * A_KSTEP) >> 4;
                    uint64_t db = db0 + ((s * B_BYTES + kk * B_KSTEP) >> 4);
                    int sc = (kb != kb0 || kk != 0);
                    mma_k16<BN, AB, AMN, BMN>(d0, da0 + oa, db, sc);
                    mma_k16<BN, AB, AMN, BMN>(d1, da1 + oa, db, sc);
                }
                wgmma_commit();
                wgmma_wait<1>();
                fence_regs(d0);
                fence_regs(d1);
                if (prev >= 0 && lane == 0)
                    mbar_arrive(&empty[prev]);
                prev = s;
                if (++s == STAGES) {
                    s = 0;
                    ph ^= 1;
                }
            }
            if (tid == 0)
                mbar_arrive(&turn[c ^ 1]);
            wgmma_wait<0>();
            fence_regs(d0);
            fence_regs(d1);
            if (lane == 0)
                mbar_arrive(&empty[prev]);

            int col0 = nt * BN;
            store_any<BN>(p, d0, mt * BM, col0, lane, warp, split);
            store_any<BN>(p, d1, mt * BM + 64, col0, lane, warp, split);
        }
    }
}

/* Split-K reduction: D = alpha * sum_s ws[s] + beta * C. */
template <typename T>
__global__ void splitk_reduce_kernel(const float *ws, long long ldw, int splits,
                                     int m, int n, float alpha, float beta,
                                     const T *c, long long ldc, T *d,
                                     long long ldd)
{
    long long total = (long long)m * n;
    long long plane = (long long)m * ldw;
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
         i < total; i += (long long)gridDim.x * blockDim.x) {
        float acc = 0.f;
        long long r = i / n, col = i % n;
        for (int s = 0; s < splits; s++)
            acc += ws[s * plane + r * ldw + col];
        float v = alpha * acc;
        if (beta != 0.f)
            v += beta * to_f32(c[r * ldc + col]);
        d[r * ldd + col] = from_f32<T>(v);
    }
}

} // namespace gemmk
