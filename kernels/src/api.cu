/*
 * api.cu: the C API of gemm_kernels.h: context (device properties, the
 * tensor-map cache, the split-K workspace), problem validation, the
 * kernel catalog (production configurations merged with the teaching
 * ladder of src/ladder/ and cuBLAS), the shape heuristic, and the launches.
 * cuTensorMapEncodeTiled is reached through cudaGetDriverEntryPointByVersion
 * so nothing links libcuda.
 */
#include <cuda.h>
#include <cuda_runtime_api.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ctx_internal.h"
#include "gemm_kernels.h"
#include "ladder/ladder.h"
#include "launch.h"
#include "tmap_cache.h"

typedef CUresult (*encode_tiled_fn)(CUtensorMap *, CUtensorMapDataType,
                                    cuuint32_t, void *, const cuuint64_t *,
                                    const cuuint64_t *, const cuuint32_t *,
                                    const cuuint32_t *, CUtensorMapInterleave,
                                    CUtensorMapSwizzle, CUtensorMapL2promotion,
                                    CUtensorMapFloatOOBfill);

struct gemmk_ctx {
    int device;
    int num_sms;
    int max_clusters2; /* co-resident 2-CTA clusters of the 128x256 kernel */
    encode_tiled_fn encode;
    gemmk_tmap_cache cache;
    float *ws; /* split-K workspace */
    size_t ws_bytes;
    float *prep; /* fp32 pre-pass workspace (tf32 operands, K-major) */
    size_t prep_bytes;
    gemmk::ladder::CublasState *cublas; /* the "cublas" entry, made lazily */
    void *slot[gemmk::SLOT_COUNT];      /* int8 / fp64 workspaces */
    size_t slot_bytes[gemmk::SLOT_COUNT];
    gemmk::OzState *oz; /* the fp64 path (ozaki.cu), made lazily */
};

namespace
{

struct Config {
    const char *name;
    int bn;      /* 0: any */
    int cluster; /* 0: any, else 1 or 2 */
    int split;   /* 0: heuristic, 1: never, -1: heuristic but at least 2 */
    int pp;      /* 1: ping-pong consumers, 128 x 128 per warpgroup (v5) */
    int epi;     /* TMA-store epilogue (v7): 64 x 64 output buffers per
                    consumer, 2 (4 stages) or 4 (3 stages); 0: registers */
};

const Config kConfigs[] = {
    {"auto", 0, 0, 0, 0, 0},
    {"ws128x256c2", 256, 2, 1, 0, 0},
    {"ws128x256", 256, 1, 1, 0, 0},
    {"ws128x128", 128, 1, 1, 0, 0},
    {"ws128x64", 64, 1, 1, 0, 0},
    {"ws128x256c2_splitk", 256, 2, -1, 0, 0},
    {"ws128x256_splitk", 256, 1, -1, 0, 0},
    {"ws128x128_splitk", 128, 1, -1, 0, 0},
    {"pp128x128", 128, 1, 1, 1, 0},
    {"ws128x256e", 256, 1, 1, 0, 2},
    {"ws128x256e3", 256, 1, 1, 0, 4},
    /* fp32 inputs (tf32 tensor cores); planned as 16-bit with 2x K */
    {"ws-tf32", 0, 1, 0, 0, 0},
    {"ws-3xtf32", 0, 1, 0, 0, 0},
};
const int kNumConfigs = sizeof(kConfigs) / sizeof(kConfigs[0]);

constexpr unsigned kAB16 = (1u << GEMM_BF16) | (1u << GEMM_FP16);
constexpr unsigned kAB32 = 1u << GEMM_FP32;
constexpr unsigned kPrecTF32 = 1u << GEMM_PRECISION_TF32;
constexpr unsigned kPrecFP32 = 1u << GEMM_PRECISION_FP32;
constexpr unsigned kCDAll =
    (1u << GEMM_BF16) | (1u << GEMM_FP16) | (1u << GEMM_FP32);

/* The production entries of the catalog; the order within each group is
 * the listing order (gemmk_catalog_entry). Names are kConfigs' (the
 * daemon and the benchmark use them). */
const gemmk_kernel_desc kProdDescs[] = {
    {"auto", 0, 0, "picks a production kernel by shape, type and precision",
     kAB16 | kAB32, kCDAll, kPrecTF32 | kPrecFP32, GEMMK_TRANS_ALL},
    {"wgmma-ws-tf32", 6, 0,
     "seed 001 made right: TMA producer warp + one wgmma tf32 warpgroup, "
     "3-stage mbarrier ring, 64x128x32 tiles (MN-major operands "
     "transposed by a pre-pass)",
     kAB32, kCDAll, kPrecTF32, GEMMK_TRANS_ALL},
    {"ws128x256", 0, 0, "warp-specialized TMA+WGMMA, 128x256 tiles, persistent",
     kAB16, kCDAll, 0, GEMMK_TRANS_ALL},
    {"ws128x256e", 0, 0,
     "128x256 tiles with a TMA-store epilogue (stmatrix to swizzled smem, "
     "bulk tensor store under the next tile), 4 stages",
     kAB16, kCDAll, 0, GEMMK_TRANS_ALL},
    {"ws128x256e3", 0, 0,
     "128x256 tiles with a TMA-store epilogue, 64 KB output buffer, "
     "3 stages",
     kAB16, kCDAll, 0, GEMMK_TRANS_ALL},
    {"ws128x128", 0, 0, "warp-specialized TMA+WGMMA, 128x128 tiles, persistent",
     kAB16, kCDAll, 0, GEMMK_TRANS_ALL},
    {"ws128x64", 0, 0,
     "warp-specialized TMA+WGMMA, 128x64 tiles (skinny shapes)", kAB16, kCDAll,
     0, GEMMK_TRANS_ALL},
    {"pp128x128", 0, 0, "ping-pong consumers, 128x128 tile per warpgroup",
     kAB16, kCDAll, 0, GEMMK_TRANS_ALL},
    {"ws128x256c2", 0, 0, "128x256 tiles, 2-CTA clusters with B multicast",
     kAB16, kCDAll, 0, GEMMK_TRANS_ALL},
    {"ws128x256_splitk", 0, 0, "128x256 tiles, split-K (fp32 workspace)", kAB16,
     kCDAll, 0, GEMMK_TRANS_ALL},
    {"ws128x128_splitk", 0, 0, "128x128 tiles, split-K (fp32 workspace)", kAB16,
     kCDAll, 0, GEMMK_TRANS_ALL},
    {"ws128x256c2_splitk", 0, 0,
     "128x256 tiles, 2-CTA clusters, split-K (fp32 workspace)", kAB16, kCDAll,
     0, GEMMK_TRANS_ALL},
    {"ws-tf32", 0, 0,
     "fp32 as tf32 (truncated, as cuBLAS): warp-specialized TMA+WGMMA "
     "128xBN; MN-major operands transposed by a pre-pass",
     kAB32, kCDAll, kPrecTF32, GEMMK_TRANS_ALL},
    {"ws-3xtf32", 0, 0,
     "fp32 accuracy, 3xTF32: pre-pass splits A, B into tf32 big+small, "
     "then one tf32 GEMM over 3K",
     kAB32, kCDAll, kPrecFP32, GEMMK_TRANS_ALL},
    /* int8 and fp64 (issue 14): their own entry points, gemmk_gemm_s8
     * and gemmk_gemm_f64; gemmk_gemm refuses them by type */
    {"ws-s8", 0, 0,
     "int8 x int8 -> int32, warp-specialized TMA+WGMMA k32 (pp-s8 by "
     "default); K-major operands in place, others transposed first "
     "(gemmk_gemm_s8)",
     1u << GEMMK_TYPE_S8, 1u << GEMMK_TYPE_S32, 0, GEMMK_TRANS_ALL},
    {"pp-s8", 0, 0,
     "int8 ping-pong: a 128x128 tile per consumer warpgroup, one's "
     "epilogue under the other's main loop (gemmk_gemm_s8)",
     1u << GEMMK_TYPE_S8, 1u << GEMMK_TYPE_S32, 0, GEMMK_TRANS_ALL},
    {"ws-s8x256", 0, 0,
     "int8 cooperative 128x256 tiles, two consumer warpgroups "
     "(gemmk_gemm_s8)",
     1u << GEMMK_TYPE_S8, 1u << GEMMK_TYPE_S32, 0, GEMMK_TRANS_ALL},
    {"ws-s8x128", 0, 0, "int8 cooperative 128x128 tiles (gemmk_gemm_s8)",
     1u << GEMMK_TYPE_S8, 1u << GEMMK_TYPE_S32, 0, GEMMK_TRANS_ALL},
    {"oz2", 0, 0,
     "fp64 as Ozaki-II on int8 tensor cores: all moduli of a 128x128 tile "
     "in one CTA, CRT reconstruction in the epilogue (gemmk_gemm_f64)",
     1u << GEMMK_TYPE_F64, 1u << GEMMK_TYPE_F64, 0, GEMMK_TRANS_ALL},
    {"oz2-bytes", 0, 0,
     "fp64 as Ozaki-II (the default emulation): one int8 ping-pong GEMM "
     "per modulus keeping each product mod p as a byte, then a CRT "
     "reconstruction pass (gemmk_gemm_f64)",
     1u << GEMMK_TYPE_F64, 1u << GEMMK_TYPE_F64, 0, GEMMK_TRANS_ALL},
    {"oz2-unfused", 0, 0,
     "fp64 as Ozaki-II, one int8 GEMM per modulus with int32 products "
     "through memory (GEMMul8's structure; gemmk_gemm_f64)",
     1u << GEMMK_TYPE_F64, 1u << GEMMK_TYPE_F64, 0, GEMMK_TRANS_ALL},
    {"cublas-dgemm", 0, 0, "cuBLAS DGEMM, the fp64 reference (gemmk_gemm_f64)",
     1u << GEMMK_TYPE_F64, 1u << GEMMK_TYPE_F64, 0, GEMMK_TRANS_ALL},
};
const int kNumProdDescs = sizeof(kProdDescs) / sizeof(kProdDescs[0]);

/* The merged listing: "auto", the ladder by rung, the other production
 * entries, then the reference. Built once (thread-safe static init). */
struct Catalog {
    const gemmk_kernel_desc *e[64];
    int n;
    Catalog() : e(), n(0)
    {
        e[n++] = &kProdDescs[0];
        for (int rung = 1; rung < 100; rung++) {
            for (int i = 0; i < gemmk::ladder::kNumDescs; i++)
                if (gemmk::ladder::kDescs[i].ladder == rung && n < 64)
                    e[n++] = &gemmk::ladder::kDescs[i];
            for (int i = 1; i < kNumProdDescs; i++)
                if (kProdDescs[i].ladder == rung && n < 64)
                    e[n++] = &kProdDescs[i];
        }
        for (int i = 1; i < kNumProdDescs; i++)
            if (kProdDescs[i].ladder == 0 && n < 64)
                e[n++] = &kProdDescs[i];
        for (int i = 0; i < gemmk::ladder::kNumDescs; i++)
            if (gemmk::ladder::kDescs[i].ladder == 0 && n < 64)
                e[n++] = &gemmk::ladder::kDescs[i];
    }
};

const Catalog &catalog()
{
    static const Catalog c;
    return c;
}

bool is_ladder_desc(const gemmk_kernel_desc *d)
{
    return d >= gemmk::ladder::kDescs &&
           d < gemmk::ladder::kDescs + gemmk::ladder::kNumDescs;
}

gemm_error cuda_err(cudaError_t e)
{
    if (e == cudaSuccess)
        return GEMM_OK;
    return e == cudaErrorMemoryAllocation ? GEMM_ERR_DEVICE_MEMORY
                                          : GEMM_ERR_DEVICE;
}

int encode_cb(void *user, const gemmk_tmap_key *key, gemmk_tmap *out)
{
    gemmk_ctx *ctx = static_cast<gemmk_ctx *>(user);
    cuuint64_t dims[2] = {key->dim0, key->dim1};
    cuuint64_t strides[1] = {key->stride1};
    cuuint32_t box[2] = {key->box0, key->box1};
    cuuint32_t estr[2] = {1, 1};
    CUtensorMapDataType dt =
        key->dtype == GEMM_BF16       ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16
        : key->dtype == GEMM_FP32     ? CU_TENSOR_MAP_DATA_TYPE_FLOAT32
        : key->dtype == GEMMK_TMAP_U8 ? CU_TENSOR_MAP_DATA_TYPE_UINT8
                                      : CU_TENSOR_MAP_DATA_TYPE_FLOAT16;
    CUresult r = ctx->encode(
        reinterpret_cast<CUtensorMap *>(out), dt, 2,
        reinterpret_cast<void *>(key->addr), dims, strides, box, estr,
        CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
        CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
    return r == CUDA_SUCCESS ? 0 : 1;
}

bool aligned16(const void *p)
{
    return (reinterpret_cast<uintptr_t>(p) & 15) == 0;
}

gemm_error validate(const gemmk_problem *p)
{
    if (!p)
        return GEMM_ERR_INVALID;
    if (p->ab_type != GEMM_BF16 && p->ab_type != GEMM_FP16 &&
        p->ab_type != GEMM_FP32)
        return GEMM_ERR_DTYPE;
    if (p->precision != GEMM_PRECISION_DEFAULT &&
        (p->ab_type != GEMM_FP32 || (p->precision != GEMM_PRECISION_TF32 &&
                                     p->precision != GEMM_PRECISION_FP32)))
        return GEMM_ERR_INVALID;
    if (p->cd_type != GEMM_BF16 && p->cd_type != GEMM_FP16 &&
        p->cd_type != GEMM_FP32)
        return GEMM_ERR_DTYPE;
    const int64_t lim = (int64_t)1 << 30;
    if (p->m < 1 || p->n < 1 || p->k < 1 || p->m > lim || p->n > lim ||
        p->k > lim)
        return GEMM_ERR_INVALID;
    if ((p->trans_a != 0 && p->trans_a != 1) ||
        (p->trans_b != 0 && p->trans_b != 1))
        return GEMM_ERR_INVALID;
    if (!p->a || !p->b || !p->d || (p->beta != 0.f && !p->c))
        return GEMM_ERR_INVALID;
    if (!aligned16(p->a) || !aligned16(p->b) || !aligned16(p->d) ||
        (p->beta != 0.f && !aligned16(p->c)))
        return GEMM_ERR_INVALID;
    int64_t min_lda = p->trans_a ? p->m : p->k;
    int64_t min_ldb = p->trans_b ? p->k : p->n;
    if (p->lda < min_lda || p->lda % 8 || p->ldb < min_ldb || p->ldb % 8 ||
        p->ldd < p->n || p->ldd % 8)
        return GEMM_ERR_INVALID;
    if (p->beta != 0.f && (p->ldc < p->n || p->ldc % 8))
        return GEMM_ERR_INVALID;
    return GEMM_OK;
}

int64_t cdiv(int64_t a, int64_t b)
{
    return (a + b - 1) / b;
}

struct Plan {
    int cfg; /* index into kConfigs */
    int bn;
    int cluster;
    int splits; /* actual number of k-splits */
    int kbps;   /* k-blocks per split */
    int pp;     /* ping-pong kernel */
    int epi;    /* TMA-store epilogue buffers (Config::epi) */
};

/* Estimated seconds for a (bn, cluster, splits) choice: waves of work
 * units over the co-resident CTAs (clusters), each unit bounded by the SM's
 * share of the tensor rate or of L2 bandwidth, never faster than reading
 * A and B once from DRAM; plus split-K workspace traffic and the extra
 * launch. The rates are rough H100 numbers; only their ratios matter. */
double estimate(const gemmk_ctx *ctx, const gemmk_problem *p, int bn, int cl,
                int splits, int *kbps_out, int *splits_out)
{
    int64_t nkb = cdiv(p->k, gemmk::BK);
    int64_t kbps = cdiv(nkb, splits);
    int64_t real = cdiv(nkb, kbps);
    int64_t units = cdiv(cdiv(p->m, gemmk::BM), cl) * cdiv(p->n, bn) * real;
    int64_t slots = cl == 2 ? ctx->max_clusters2 : ctx->num_sms;
    if (slots < 1)
        return 1e30;
    int64_t waves = cdiv(units, slots);
    int64_t active = (units < slots ? units : slots) * cl;
    double eff = bn == 256 ? (cl == 2 ? 1.05 : 1.0) : bn == 128 ? 0.88 : 0.75;
    double flop = 2.0 * gemmk::BM * bn * kbps * gemmk::BK;
    double t_mma = flop / (660e12 * eff / ctx->num_sms);
    double rows = (double)(p->m < gemmk::BM ? p->m : gemmk::BM) + bn / cl;
    double t_l2 = rows * kbps * gemmk::BK * 2.0 / (8e12 / active);
    double t = waves * (t_mma > t_l2 ? t_mma : t_l2);
    double t_dram = (double)(p->m * p->k + p->k * p->n) * 2.0 / 3.0e12;
    if (t < t_dram)
        t = t_dram;
    if (real > 1)
        t += 3.0e-6 + 3.0 * real * p->m * p->n * 4.0 / 3.0e12;
    *kbps_out = (int)kbps;
    *splits_out = (int)real;
    return t;
}

gemm_error plan(const gemmk_ctx *ctx, const gemmk_problem *p, int cfg,
                Plan *out, int max_bn = 256)
{
    const Config &c = kConfigs[cfg];
    int64_t nkb = cdiv(p->k, gemmk::BK);
    double best = 1e30;
    out->pp = c.pp;
    out->epi = c.epi;
    /* candidates in order of preference on near-ties */
    static const int cand[4][2] = {{256, 2}, {256, 1}, {128, 1}, {64, 1}};
    for (int ci = 0; ci < 4; ci++) {
        int bn = cand[ci][0], cl = cand[ci][1];
        if ((c.bn && c.bn != bn) || (c.cluster && c.cluster != cl))
            continue;
        if (bn > max_bn)
            continue;
        /* The 2-CTA cluster kernel runs at the plain one's speed since v5
         * (it was ~0.55x, v2) but has not measured faster: by name only. */
        if (cl == 2 && c.cluster != 2)
            continue;
        /* 128x64 tiles with M < 64: A's TMA box is mostly out-of-bounds
         * fill, which measured slower than split-K on wider tiles (v4). */
        if (bn == 64 && p->m < 64 && c.bn != 64)
            continue;
        int max_split = (c.split == 1 || bn == 64) ? 1 : 32;
        int min_split = c.split == -1 ? 2 : 1;
        for (int s = min_split; s <= max_split && s <= nkb; s++) {
            int kbps = 0, real = 1;
            double t = estimate(ctx, p, bn, cl, s, &kbps, &real);
            if (c.split == -1 && real < 2)
                continue;
            if (t < best * 0.97) { /* prefer earlier, fewer splits on ties */
                best = t;
                out->cfg = cfg;
                out->bn = bn;
                out->cluster = cl;
                out->splits = real;
                out->kbps = kbps;
            }
        }
    }
    /* One partial wave of 128x256 tiles (2048^3: 128 tiles on 132 SMs):
     * the ping-pong kernel's 128x128 tiles give each SM two units, one's
     * epilogue under the other's main loop; measured 0.88-0.92 -> 0.95-0.97
     * at 2048^3 but 0.71 at 4096^3 (v5), so only here. */
    if (cfg == 0 && best < 1e30 && out->bn == 256 && out->cluster == 1 &&
        out->splits == 1 && p->m >= 1024 && p->n >= 1024 &&
        cdiv(p->m, gemmk::BM) * cdiv(p->n, 256) <= ctx->num_sms) {
        out->pp = 1;
        out->bn = 128;
    }
    /* 128 x 256 tiles without split-K and M >= 512: the TMA-store epilogue
     * (v7), so the consumers start the next tile while the stores drain. */
    if (cfg == 0 && best < 1e30 && !out->pp && out->bn == 256 &&
        out->cluster == 1 && out->splits == 1 && p->m >= 512)
        out->epi = 2;
    if (best == 1e30) { /* K too small to split, or no cluster fits */
        out->cfg = cfg;
        out->bn = c.bn ? c.bn : (max_bn < 128 ? max_bn : 128);
        out->cluster = 1;
        out->splits = 1;
        out->kbps = (int)nkb;
    }
    return GEMM_OK;
}

int find_config(const char *name)
{
    if (!name)
        return 0;
    for (int i = 0; i < kNumConfigs; i++)
        if (strcmp(kConfigs[i].name, name) == 0)
            return i;
    return -1;
}

const char *plan_name(const Plan &pl)
{
    if (pl.pp)
        return "pp128x128";
    if (pl.epi)
        return pl.epi == 4 ? "ws128x256e3" : "ws128x256e";
    if (pl.bn == 256 && pl.cluster == 2)
        return pl.splits > 1 ? "ws128x256c2_splitk" : "ws128x256c2";
    if (pl.bn == 256)
        return pl.splits > 1 ? "ws128x256_splitk" : "ws128x256";
    if (pl.bn == 64)
        return "ws128x64";
    return pl.splits > 1 ? "ws128x128_splitk" : "ws128x128";
}

template <typename T>
cudaError_t reduce(const gemmk_problem *p, const float *ws, long long ldw,
                   int splits, cudaStream_t stream, int sms)
{
    long long total = p->m * p->n;
    int blocks = (int)cdiv(total, 256);
    if (blocks > sms * 8)
        blocks = sms * 8;
    gemmk::splitk_reduce_kernel<T><<<blocks, 256, 0, stream>>>(
        ws, ldw, splits, (int)p->m, (int)p->n, p->alpha, p->beta,
        static_cast<const T *>(p->c), p->ldc, static_cast<T *>(p->d), p->ldd);
    return cudaGetLastError();
}

gemm_error set_maps(gemmk_ctx *ctx, const gemmk_tmap_key *ka,
                    const gemmk_tmap_key *kb, gemmk::Launch *l)
{
    const gemmk_tmap *ma = gemmk_tmap_cache_get(&ctx->cache, ka);
    if (!ma)
        return GEMM_ERR_INVALID;
    memcpy(&l->ta, ma, sizeof(l->ta));
    const gemmk_tmap *mb = gemmk_tmap_cache_get(&ctx->cache, kb);
    if (!mb)
        return GEMM_ERR_INVALID;
    memcpy(&l->tb, mb, sizeof(l->tb));
    return GEMM_OK;
}

/* Grows *buf to at least `need` bytes (contents are not kept). cudaFree
 * synchronizes the device, so work still reading the old buffer is done. */
gemm_error grow(float **buf, size_t *bytes, size_t need)
{
    if (need <= *bytes)
        return GEMM_OK;
    if (*buf) {
        cudaError_t ce = cudaFree(*buf);
        *buf = nullptr;
        *bytes = 0;
        if (ce != cudaSuccess)
            return cuda_err(ce);
    }
    cudaError_t ce = cudaMalloc(buf, need);
    if (ce != cudaSuccess) {
        *buf = nullptr;
        cudaGetLastError(); /* an allocation failure is not sticky */
        return GEMM_ERR_DEVICE_MEMORY;
    }
    *bytes = need;
    return GEMM_OK;
}

/* The kernel parameters and grid of plan pl for p, whose K (keff elements,
 * after any pre-pass) runs in k-blocks of kbe elements; allocates the
 * split-K workspace. */
gemm_error fill_params(gemmk_ctx *ctx, const gemmk_problem *p, const Plan &pl,
                       int64_t keff, int kbe, gemmk::Launch *l)
{
    gemmk::KParams &kp = l->p;
    memset(&kp, 0, sizeof(kp));
    kp.m = (int)p->m, kp.n = (int)p->n, kp.k = (int)keff;
    kp.num_m = (int)cdiv(p->m, gemmk::BM);
    kp.num_n = (int)cdiv(p->n, pl.bn);
    kp.num_mu = (int)cdiv(kp.num_m, pl.cluster);
    kp.nkb = (int)cdiv(keff, kbe);
    kp.splits = pl.splits;
    kp.kb_per_split = pl.kbps;
    kp.units = kp.num_mu * kp.num_n * kp.splits;
    kp.group_m = pl.cluster == 2 ? 4 : 8;
    kp.cd_type = p->cd_type;
    kp.d = p->d;
    kp.c = p->beta != 0.f ? p->c : nullptr;
    kp.ldd = p->ldd, kp.ldc = p->ldc;
    kp.alpha = p->alpha, kp.beta = p->beta;
    kp.ldw = (p->n + 7) / 8 * 8;
    if (pl.splits > 1) {
        size_t need = (size_t)pl.splits * p->m * kp.ldw * sizeof(float);
        gemm_error e = grow(&ctx->ws, &ctx->ws_bytes, need);
        if (e != GEMM_OK)
            return e;
        kp.ws = ctx->ws;
    }
    int slots = pl.cluster == 2 ? ctx->max_clusters2 : ctx->num_sms;
    l->grid = (kp.units < slots ? kp.units : slots) * pl.cluster;
    l->cluster = pl.cluster;
    l->f16 = false;
    l->amn = l->bmn = 0;
    return GEMM_OK;
}

/* The split-K reduction after a split plan's kernel (nothing otherwise). */
gemm_error finish_splits(gemmk_ctx *ctx, const gemmk_problem *p, const Plan &pl,
                         const gemmk::KParams &kp, cudaStream_t stream)
{
    if (pl.splits <= 1)
        return GEMM_OK;
    cudaError_t ce;
    if (p->cd_type == GEMM_FP32)
        ce = reduce<float>(p, kp.ws, kp.ldw, pl.splits, stream, ctx->num_sms);
    else if (p->cd_type == GEMM_BF16)
        ce = reduce<__nv_bfloat16>(p, kp.ws, kp.ldw, pl.splits, stream,
                                   ctx->num_sms);
    else
        ce = reduce<__half>(p, kp.ws, kp.ldw, pl.splits, stream, ctx->num_sms);
    return cuda_err(ce);
}

size_t align256(size_t x)
{
    return (x + 255) & ~(size_t)255;
}

/* 3xTF32 promotion chunk in k-blocks of 32 (kernel PR), whether the two
 * consumers' chunks are skewed, and the widest tile; GEMMK_X3_PROMO,
 * GEMMK_X3_SKEW, GEMMK_X3_BN override them for measurement. */
int x3_promo(int64_t k)
{
    static int v = [] {
        const char *e = getenv("GEMMK_X3_PROMO");
        int x = e ? atoi(e) : 0;
        return x >= 1 ? x : 0;
    }();
    if (v)
        return v;
    /* measured error ~3.5e-7 * P / sqrt(K) (random signed data); SGEMM's
     * is ~4e-8..1.4e-7: P = sqrt(K) / 8 in [4, 16] keeps within ~2x. From
     * K = 4096 on, P = 16 (device call 24: 4096^3 1.89x -> 2.03x SGEMM's
     * speed, error 7.7e-8 vs SGEMM 1.4e-7; 8192^3 1.93x -> 2.03x, 5.5e-8
     * vs 3.8e-8) */
    if (k >= 4096)
        return 16;
    int p = (int)(sqrt((double)k) / 8);
    return p < 4 ? 4 : p > 16 ? 16 : p;
}
/* Where the promoted accumulator lives: 1 global slot (L2), 2 shared
 * memory (2-stage ring); GEMMK_X3_WHERE. */
int x3_where()
{
    static int v = [] {
        const char *e = getenv("GEMMK_X3_WHERE");
        return e && atoi(e) == 2 ? 2 : 1;
    }();
    return v;
}
int x3_skew()
{
    static int v = [] {
        const char *e = getenv("GEMMK_X3_SKEW");
        return e ? atoi(e) != 0 : 1;
    }();
    return v;
}
int x3_max_bn()
{
    static int v = [] {
        const char *e = getenv("GEMMK_X3_BN");
        int x = e ? atoi(e) : 0;
        return x == 64 || x == 128 ? x : 256;
    }();
    return v;
}

/*
 * fp32 A/B (tf32 tensor cores). Kernel `name` is "auto", "ws-tf32",
 * "ws-3xtf32" or "wgmma-ws-tf32" (gemmk_check has matched the precision).
 * tf32: K-major operands are read in place (the tensor cores truncate to
 * tf32, as cuBLAS's TF32 mode does); an MN-major one (trans_a, or B not
 * trans_b) is first transposed into the context's pre-pass workspace.
 * 3xTF32: both operands always go through the pre-pass, which splits them
 * into big and small tf32 parts, K-concatenated (kern_tf32.cu); the GEMM
 * then runs over K' = 3 * kseg.
 */
gemm_error gemm_fp32(gemmk_ctx *ctx, const gemmk_problem *p,
                     cudaStream_t stream, const char *name)
{
    const bool rung6 = strcmp(name, "wgmma-ws-tf32") == 0;
    const bool three =
        strcmp(name, "ws-3xtf32") == 0 ||
        (strcmp(name, "auto") == 0 && p->precision != GEMM_PRECISION_TF32);
    const int amn = p->trans_a ? 1 : 0;
    const int bmn = p->trans_b ? 0 : 1;
    const int64_t kseg = cdiv(p->k, 32) * 32;
    const int nseg = three ? 3 : 1;
    const bool pack_a = three || amn, pack_b = three || bmn;
    const int64_t keff = three ? 3 * kseg : p->k;
    size_t bytes_a = pack_a ? align256((size_t)p->m * nseg * kseg * 4) : 0;
    size_t bytes_b = pack_b ? align256((size_t)p->n * nseg * kseg * 4) : 0;
    /* 3xTF32: the promoted accumulators, one 128 x 256 fp32 slot per CTA */
    size_t bytes_p =
        three ? (size_t)ctx->num_sms * gemmk::BM * 256 * sizeof(float) : 0;
    gemm_error e;
    if (pack_a || pack_b) {
        e = grow(&ctx->prep, &ctx->prep_bytes, bytes_a + bytes_b + bytes_p);
        if (e != GEMM_OK)
            return e;
    }
    float *pa = ctx->prep;
    float *pb = reinterpret_cast<float *>(reinterpret_cast<char *>(ctx->prep) +
                                          bytes_a);
    cudaError_t ce;
    if (pack_a) {
        ce = gemmk::tf32_pack(static_cast<const float *>(p->a), p->lda, amn,
                              p->m, p->k, three ? 1 : 0, pa, kseg, stream);
        if (ce != cudaSuccess)
            return cuda_err(ce);
    }
    if (pack_b) {
        ce = gemmk::tf32_pack(static_cast<const float *>(p->b), p->ldb, bmn,
                              p->n, p->k, three ? 2 : 0, pb, kseg, stream);
        if (ce != cudaSuccess)
            return cuda_err(ce);
    }

    Plan pl;
    if (rung6) {
        pl.cfg = -1, pl.bn = 128, pl.cluster = 1, pl.splits = 1, pl.pp = 0;
        pl.kbps = (int)cdiv(keff, 32);
    } else {
        /* A tf32 k-block (32 values) moves the bytes of a 16-bit one (64)
         * in the same tensor time at half the rate: plan as 16-bit, 2K. */
        gemmk_problem q = *p;
        q.k = 2 * keff;
        q.ab_type = GEMM_BF16;
        plan(ctx, &q, find_config("ws-tf32"), &pl, three ? x3_max_bn() : 256);
    }

    gemmk_tmap_key ka = {};
    ka.addr = (uint64_t)(uintptr_t)(pack_a ? (const void *)pa : p->a);
    ka.dtype = GEMM_FP32;
    ka.swizzle = GEMMK_SWIZZLE_128B;
    ka.dim0 = pack_a ? (uint64_t)(nseg * kseg) : (uint64_t)p->k;
    ka.dim1 = p->m;
    ka.stride1 = pack_a ? (uint64_t)(nseg * kseg) * 4 : (uint64_t)p->lda * 4;
    ka.box0 = 32;
    ka.box1 = rung6 ? 64 : gemmk::BM;
    gemmk_tmap_key kb = {};
    kb.addr = (uint64_t)(uintptr_t)(pack_b ? (const void *)pb : p->b);
    kb.dtype = GEMM_FP32;
    kb.swizzle = GEMMK_SWIZZLE_128B;
    kb.dim0 = pack_b ? (uint64_t)(nseg * kseg) : (uint64_t)p->k;
    kb.dim1 = p->n;
    kb.stride1 = pack_b ? (uint64_t)(nseg * kseg) * 4 : (uint64_t)p->ldb * 4;
    kb.box0 = 32;
    kb.box1 = (uint32_t)pl.bn;

    gemmk::Launch l;
    e = set_maps(ctx, &ka, &kb, &l);
    if (e != GEMM_OK)
        return e;
    e = fill_params(ctx, p, pl, keff, 32, &l);
    if (e != GEMM_OK)
        return e;
    l.tf32 = true;
    l.stream = stream;
    if (three) {
        l.p.pws =
            reinterpret_cast<float *>(reinterpret_cast<char *>(pb) + bytes_b);
        l.p.promo_first = (int)(2 * kseg / 32);
        l.p.promo = x3_promo(p->k);
        l.p.promo_skew = x3_skew();
    }
    if (rung6) {
        l.p.num_m = l.p.num_mu = (int)cdiv(p->m, 64);
        l.p.units = l.p.num_m * l.p.num_n;
        l.grid = l.p.units;
        ce = gemmk::launch_tf32_ws64(l);
    } else {
        ce = gemmk::launch_tf32(l, pl.bn, three ? x3_where() : 0);
    }
    if (ce != cudaSuccess)
        return cuda_err(ce);
    return finish_splits(ctx, p, pl, l.p, stream);
}
} // namespace

namespace gemmk
{
int ctx_num_sms(const gemmk_ctx *ctx)
{
    return ctx->num_sms;
}

gemm_error ctx_map(gemmk_ctx *ctx, const gemmk_tmap_key *key, CUtensorMap *out)
{
    const gemmk_tmap *m = gemmk_tmap_cache_get(&ctx->cache, key);
    if (!m)
        return GEMM_ERR_INVALID;
    memcpy(out, m, sizeof(*out));
    return GEMM_OK;
}

gemm_error ctx_workspace(gemmk_ctx *ctx, int slot, size_t bytes, void **out)
{
    if (slot < 0 || slot >= SLOT_COUNT)
        return GEMM_ERR_INVALID;
    float *buf = static_cast<float *>(ctx->slot[slot]);
    gemm_error e =
        grow(&buf, &ctx->slot_bytes[slot], bytes < 256 ? 256 : bytes);
    ctx->slot[slot] = buf;
    if (e != GEMM_OK)
        return e;
    /* maps of the old buffer's addresses must not be reused */
    *out = buf;
    return GEMM_OK;
}

OzState **ctx_oz(gemmk_ctx *ctx)
{
    return &ctx->oz;
}
} // namespace gemmk

extern "C" {

gemm_error gemmk_ctx_create(gemmk_ctx **out, int device)
{
    if (!out)
        return GEMM_ERR_INVALID;
    int count = 0;
    if (cudaGetDeviceCount(&count) != cudaSuccess || device < 0 ||
        device >= count)
        return GEMM_ERR_DEVICE;
    cudaDeviceProp prop;
    if (cudaGetDeviceProperties(&prop, device) != cudaSuccess)
        return GEMM_ERR_DEVICE;
    if (prop.major != 9 || prop.minor != 0)
        return GEMM_ERR_UNSUPPORTED;
    if (cudaSetDevice(device) != cudaSuccess)
        return GEMM_ERR_DEVICE;
    void *fn = nullptr;
    cudaDriverEntryPointQueryResult q;
    if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &fn, 12000,
                                         cudaEnableDefault,
                                         &q) != cudaSuccess ||
        q != cudaDriverEntryPointSuccess || !fn)
        return GEMM_ERR_DEVICE;
    /* gemmk_ctx is 64-byte aligned (the cache's CUtensorMaps, which the
     * driver requires aligned); calloc promises only 16. */
    const size_t ctx_bytes = (sizeof(gemmk_ctx) + 63) / 64 * 64;
    gemmk_ctx *ctx = static_cast<gemmk_ctx *>(aligned_alloc(64, ctx_bytes));
    if (!ctx)
        return GEMM_ERR_NOMEM;
    memset(ctx, 0, ctx_bytes);
    ctx->device = device;
    ctx->num_sms = prop.multiProcessorCount;
    ctx->encode = reinterpret_cast<encode_tiled_fn>(fn);
    ctx->max_clusters2 = gemmk::max_clusters2();
    cudaGetLastError(); /* an occupancy failure only disables clusters */
    const char *env = getenv("GEMMK_MAX_CLUSTERS");
    if (env && atoi(env) >= 0)
        ctx->max_clusters2 = atoi(env);
    gemmk_tmap_cache_init(&ctx->cache, encode_cb, ctx);
    *out = ctx;
    return GEMM_OK;
}

void gemmk_ctx_destroy(gemmk_ctx *ctx)
{
    if (!ctx)
        return;
    cudaDeviceSynchronize();
    if (ctx->ws)
        cudaFree(ctx->ws);
    if (ctx->prep)
        cudaFree(ctx->prep);
    if (ctx->cublas)
        gemmk::ladder::cublas_free(ctx->cublas);
    for (int i = 0; i < gemmk::SLOT_COUNT; i++)
        if (ctx->slot[i])
            cudaFree(ctx->slot[i]);
    gemmk::oz_free(ctx->oz);
    free(ctx);
}

void gemmk_ctx_info(const gemmk_ctx *ctx, int *num_sms, int *max_clusters2)
{
    if (!ctx)
        return;
    if (num_sms)
        *num_sms = ctx->num_sms;
    if (max_clusters2)
        *max_clusters2 = ctx->max_clusters2;
}

int gemmk_catalog_size(void)
{
    return catalog().n;
}

const gemmk_kernel_desc *gemmk_catalog_entry(int i)
{
    const Catalog &c = catalog();
    return i >= 0 && i < c.n ? c.e[i] : nullptr;
}

const gemmk_kernel_desc *gemmk_catalog_find(const char *name)
{
    if (!name)
        return nullptr;
    const Catalog &c = catalog();
    for (int i = 0; i < c.n; i++)
        if (strcmp(c.e[i]->name, name) == 0)
            return c.e[i];
    return nullptr;
}

/* Static reasons only: the caller knows the kernel's name. A non-default
 * precision for 16-bit inputs is a malformed request (GEMM_ERR_INVALID),
 * as gemmk_gemm's validation says too; everything else a kernel cannot
 * serve is GEMM_ERR_UNSUPPORTED. */
gemm_error gemmk_check(const char *name, const gemmk_problem *p,
                       const char **why)
{
    const char *dummy;
    if (!why)
        why = &dummy;
    *why = nullptr;
    if (!p) {
        *why = "no problem given";
        return GEMM_ERR_INVALID;
    }
    const gemmk_kernel_desc *d = gemmk_catalog_find(name ? name : "auto");
    if (!d) {
        *why = "unknown kernel";
        return GEMM_ERR_UNSUPPORTED;
    }
    if (p->ab_type < 1 || p->ab_type > 3 || p->cd_type < 1 || p->cd_type > 3) {
        *why = "unknown element type";
        return GEMM_ERR_DTYPE;
    }
    if (p->precision != GEMM_PRECISION_DEFAULT && p->ab_type != GEMM_FP32) {
        *why = "a precision applies to fp32 inputs only (bf16/fp16 inputs "
               "take the default)";
        return GEMM_ERR_INVALID;
    }
    if (p->precision < GEMM_PRECISION_DEFAULT ||
        p->precision > GEMM_PRECISION_FP32) {
        *why = "unknown precision";
        return GEMM_ERR_INVALID;
    }
    if (!(d->ab_types & (1u << p->ab_type))) {
        *why = d->ab_types == kAB16 ? "the kernel serves bf16/fp16 inputs only"
               : d->ab_types == (1u << GEMM_FP32)
                   ? "the kernel serves fp32 inputs only"
                   : "the kernel does not serve this input type";
        return GEMM_ERR_UNSUPPORTED;
    }
    if (!(d->cd_types & (1u << p->cd_type))) {
        *why = "the kernel does not serve this output type";
        return GEMM_ERR_UNSUPPORTED;
    }
    if (p->ab_type == GEMM_FP32) {
        gemm_precision pr = p->precision == GEMM_PRECISION_DEFAULT
                                ? GEMM_PRECISION_FP32
                                : p->precision;
        if (!(d->precisions & (1u << pr))) {
            *why = pr == GEMM_PRECISION_FP32
                       ? "the kernel does not serve fp32 precision (ask for "
                         "tf32, or name another kernel)"
                       : "the kernel does not serve tf32 precision";
            return GEMM_ERR_UNSUPPORTED;
        }
    }
    unsigned t = (unsigned)(p->trans_a != 0) | (unsigned)(p->trans_b != 0) << 1;
    if (!(d->transposes & (1u << t))) {
        *why = "the kernel does not serve this transpose combination";
        return GEMM_ERR_UNSUPPORTED;
    }
    return GEMM_OK;
}

gemm_error gemmk_select(const gemmk_ctx *ctx, const gemmk_problem *p,
                        const char **name)
{
    if (!ctx || !name)
        return GEMM_ERR_INVALID;
    gemm_error e = validate(p);
    if (e != GEMM_OK)
        return e;
    e = gemmk_check(nullptr, p, nullptr);
    if (e != GEMM_OK)
        return e;
    if (p->ab_type == GEMM_FP32) {
        *name = p->precision == GEMM_PRECISION_TF32 ? "ws-tf32" : "ws-3xtf32";
        return GEMM_OK;
    }
    Plan pl;
    plan(ctx, p, 0, &pl);
    *name = plan_name(pl);
    return GEMM_OK;
}

void gemmk_cache_stats_get(const gemmk_ctx *ctx, gemmk_cache_stats *out)
{
    if (!ctx || !out)
        return;
    out->hits = ctx->cache.hits;
    out->misses = ctx->cache.misses;
    out->evictions = ctx->cache.evictions;
    out->entries = ctx->cache.entries;
    out->capacity = GEMMK_TMAP_CACHE_CAP;
}

void gemmk_cache_forget(gemmk_ctx *ctx, const void *base, size_t bytes)
{
    if (ctx)
        gemmk_tmap_cache_forget(&ctx->cache, (uint64_t)(uintptr_t)base, bytes);
}

gemm_error gemmk_gemm(gemmk_ctx *ctx, const gemmk_problem *p,
                      cudaStream_t stream, const char *kernel)
{
    if (!ctx)
        return GEMM_ERR_INVALID;
    gemm_error e = validate(p);
    if (e != GEMM_OK)
        return e;
    const char *why = nullptr;
    e = gemmk_check(kernel, p, &why);
    if (e != GEMM_OK)
        return e;
    const gemmk_kernel_desc *desc =
        gemmk_catalog_find(kernel ? kernel : "auto");
    if (desc->reference)
        return gemmk::ladder::cublas_run(&ctx->cublas, *p, stream);
    if (is_ladder_desc(desc))
        return cuda_err(gemmk::ladder::run(desc->name, *p, stream));
    if (p->ab_type == GEMM_FP32)
        return gemm_fp32(ctx, p, stream, desc->name);
    int cfg = find_config(kernel);
    if (cfg < 0)
        return GEMM_ERR_UNSUPPORTED;
    Plan pl;
    plan(ctx, p, cfg, &pl);

    const int amn = p->trans_a ? 1 : 0;
    const int bmn = p->trans_b ? 0 : 1;
    gemmk_tmap_key ka = {};
    ka.addr = (uint64_t)(uintptr_t)p->a;
    ka.dtype = p->ab_type;
    ka.swizzle = GEMMK_SWIZZLE_128B;
    ka.stride1 = (uint64_t)p->lda * 2;
    if (amn) {
        ka.dim0 = p->m, ka.dim1 = p->k, ka.box0 = 64, ka.box1 = 64;
    } else {
        ka.dim0 = p->k, ka.dim1 = p->m, ka.box0 = 64, ka.box1 = gemmk::BM;
    }
    gemmk_tmap_key kb = {};
    kb.addr = (uint64_t)(uintptr_t)p->b;
    kb.dtype = p->ab_type;
    kb.swizzle = GEMMK_SWIZZLE_128B;
    kb.stride1 = (uint64_t)p->ldb * 2;
    if (bmn) {
        kb.dim0 = p->n, kb.dim1 = p->k, kb.box0 = 64, kb.box1 = 64;
    } else {
        kb.dim0 = p->k, kb.dim1 = p->n, kb.box0 = 64,
        kb.box1 = (uint32_t)(pl.bn / pl.cluster);
    }

    gemmk::Launch l;
    e = set_maps(ctx, &ka, &kb, &l);
    if (e != GEMM_OK)
        return e;
    e = fill_params(ctx, p, pl, p->k, gemmk::BK, &l);
    if (e != GEMM_OK)
        return e;
    memset(&l.td, 0, sizeof(l.td));
    if (pl.epi && gemmk::tstore_applies(l.p)) {
        gemmk_tmap_key kd = {};
        kd.addr = (uint64_t)(uintptr_t)p->d;
        kd.dtype = p->cd_type;
        kd.swizzle = GEMMK_SWIZZLE_128B;
        kd.stride1 = (uint64_t)p->ldd * 2;
        kd.dim0 = p->n, kd.dim1 = p->m, kd.box0 = 64, kd.box1 = 64;
        const gemmk_tmap *md = gemmk_tmap_cache_get(&ctx->cache, &kd);
        if (!md)
            return GEMM_ERR_INVALID;
        memcpy(&l.td, md, sizeof(l.td));
    }
    l.f16 = p->ab_type == GEMM_FP16;
    l.amn = amn;
    l.bmn = bmn;
    l.stream = stream;
    cudaError_t ce = pl.epi            ? gemmk::launch_n256e(l, pl.epi)
                     : pl.pp           ? gemmk::launch_pp128(l)
                     : pl.bn == 64     ? gemmk::launch_n64(l)
                     : pl.bn == 128    ? gemmk::launch_n128(l)
                     : pl.cluster == 2 ? gemmk::launch_n256c2(l)
                                       : gemmk::launch_n256(l);
    if (ce != cudaSuccess)
        return cuda_err(ce);
    return finish_splits(ctx, p, pl, l.p, stream);
}

} /* extern "C" */
