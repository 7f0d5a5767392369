/*
 * bench_gemm.h: what bench_gemm's benches share: the shape of a row, the
 * timing of a run (one call alone or --b2b calls back to back, --clocks),
 * the rows run back to back at the power cap (--sustain), and cuBLASLt
 * plans for the anchors. One file a bench: bench_gemm.cu (16-bit, and
 * main), bench_fp32.cu, bench_int8.cu, bench_fp64.cu.
 */
#pragma once

#include <cublasLt.h>
#include <cuda_runtime.h>
#include <stdio.h>

#include <algorithm>
#include <chrono>
#include <string>
#include <vector>

#include "bench_power.h"
#include "cuda_check.h"
#include "gemm_kernels.h"

struct Shape {
    long long m, n, k;
    int ta, tb;
    const char *group;
    /* leading dims padded to 8 elements, as the daemon does */
    long long r8(long long x) const
    {
        return (x + 7) / 8 * 8;
    }
    long long lda() const
    {
        return r8(ta ? m : k);
    }
    long long ldb() const
    {
        return r8(tb ? k : n);
    }
    long long ldd() const
    {
        return r8(n);
    }
};

inline double median(std::vector<float> v)
{
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
}

/* --b2b N: each timed run is N calls back to back between the events
 * (their inputs rotating as before), its time over N: the kernels' time
 * with the calls' host time hidden behind the GPU's work, where 1 (a
 * call alone) counts the host time before a launch as well. */
inline int g_b2b = 1;

/* --clocks: each timed block's mean SM clock (bench_power.h), summed per
 * side of a row by the callers that report it. */
inline bool g_clocks = false;
inline double g_last_mhz = 0;
/* and the median host time a call took its caller (us), over the block */
inline double g_last_host_us = 0;

struct ClockMean {
    double sum = 0, host = 0;
    int n = 0, nh = 0;
    void add(void)
    {
        if (g_last_mhz > 0)
            sum += g_last_mhz, n++;
        host += g_last_host_us, nh++;
    }
    double mean(void) const
    {
        return n ? sum / n : 0;
    }
    double host_us(void) const
    {
        return nh ? host / nh : 0;
    }
};

/* Median ms of n runs of fn(i), each timed between events e0, e1 on the
 * default stream: one call alone, or g_b2b calls back to back. */
template <typename F>
double time_runs(cudaEvent_t e0, cudaEvent_t e1, F fn, int n)
{
    static ClockSampler cs;
    if (g_clocks)
        cs.start();
    std::vector<float> ts, hs;
    for (int i = 0; i < n; i++) {
        CK(cudaEventRecord(e0));
        const auto h0 = std::chrono::steady_clock::now();
        for (int j = 0; j < g_b2b; j++)
            fn(i * g_b2b + j);
        const auto h1 = std::chrono::steady_clock::now();
        hs.push_back(
            (float)(std::chrono::duration<double, std::micro>(h1 - h0).count() /
                    g_b2b));
        CK(cudaEventRecord(e1));
        CK(cudaEventSynchronize(e1));
        float ms;
        CK(cudaEventElapsedTime(&ms, e0, e1));
        ts.push_back(ms / g_b2b);
    }
    CK(cudaGetLastError());
    g_last_mhz = g_clocks ? cs.stop() : 0;
    g_last_host_us = median(hs);
    return median(ts);
}

/* Ours and its anchor in `blocks` interleaved blocks of n runs each, the
 * side that goes first alternating by block, so that neither gains from
 * a cooler GPU (the anchor's heuristic search, timed before, heats it:
 * its times are for choosing only). The min of each side's block
 * medians into *t_o and *t_a; clocks and host times into co, ca. Blocks
 * are numbered from first (ours goes first in the even ones). */
template <typename F, typename G>
void time_pair(cudaEvent_t e0, cudaEvent_t e1, F ours, G anchor, int n,
               int blocks, double *t_o, double *t_a, ClockMean *co = nullptr,
               ClockMean *ca = nullptr, int first = 0)
{
    *t_o = *t_a = 1e30;
    for (int blk = first; blk < first + blocks; blk++) {
        for (int side = 0; side < 2; side++) {
            if ((side ^ (blk & 1)) == 0) {
                *t_o = std::min(*t_o, time_runs(e0, e1, ours, n));
                if (co)
                    co->add();
            } else {
                *t_a = std::min(*t_a, time_runs(e0, e1, anchor, n));
                if (ca)
                    ca->add();
            }
        }
    }
}

/* --sustain S: every row also runs back to back, S seconds a side, ours
 * against its anchor (bench_power.h); their rows are printed after the
 * main table. */
inline double g_sustain = 0;
inline std::vector<std::string> g_sustained;

inline void print_sustained(void)
{
    if (g_sustained.empty())
        return;
    printf("\nBack to back, %.0f s a side twice (bench_power.h):\n\n%s",
           g_sustain, sustain_header());
    for (auto &r : g_sustained)
        printf("%s", r.c_str());
}

/* cuBLASLt: the handle and workspace main() makes for every bench */
inline cublasLtHandle_t lt;
inline void *lt_ws;
constexpr size_t LT_WS = 64ull << 20;

struct LtPlan {
    cublasLtMatmulDesc_t op;
    cublasLtMatrixLayout_t la, lb, ld;
    cublasLtMatmulAlgo_t algo;
};

/* Row-major D(MxN) = op(A) op(B) is column-major D^T = op(B)^T op(A)^T:
 * cuBLASLt's "A" is our B, its "B" is our A. A and B of type ab with
 * leading dims lda, ldb, D of type d with ldd; ct and its scale type. */
inline void lt_make_typed(LtPlan &p, const Shape &s, cudaDataType_t ab,
                          cudaDataType_t d, cublasComputeType_t ct,
                          cudaDataType_t scale, long long lda, long long ldb,
                          long long ldd)
{
    CB(cublasLtMatmulDescCreate(&p.op, ct, scale));
    cublasOperation_t opa = s.tb ? CUBLAS_OP_T : CUBLAS_OP_N;
    cublasOperation_t opb = s.ta ? CUBLAS_OP_T : CUBLAS_OP_N;
    CB(cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_TRANSA, &opa,
                                      sizeof(opa)));
    CB(cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_TRANSB, &opb,
                                      sizeof(opb)));
    /* our B: stored KxN (ld N) or NxK (ld K) row-major */
    if (s.tb)
        CB(cublasLtMatrixLayoutCreate(&p.la, ab, s.k, s.n, ldb));
    else
        CB(cublasLtMatrixLayoutCreate(&p.la, ab, s.n, s.k, ldb));
    if (s.ta)
        CB(cublasLtMatrixLayoutCreate(&p.lb, ab, s.m, s.k, lda));
    else
        CB(cublasLtMatrixLayoutCreate(&p.lb, ab, s.k, s.m, lda));
    CB(cublasLtMatrixLayoutCreate(&p.ld, d, s.n, s.m, ldd));
}

/* The same with every operand of type t, the shape's leading dims and
 * fp32 scalars (16-bit and fp32 rows). */
inline void lt_make(LtPlan &p, const Shape &s, cudaDataType_t t,
                    cublasComputeType_t ct = CUBLAS_COMPUTE_32F)
{
    lt_make_typed(p, s, t, t, ct, CUDA_R_32F, s.lda(), s.ldb(), s.ldd());
}

/* cuBLASLt's heuristic's top 8 algorithms for p (workspace up to LT_WS):
 * how many it gave; where the query fails, 0 if tolerate, else exit. */
inline int lt_heuristics(const LtPlan &p,
                         cublasLtMatmulHeuristicResult_t (&heur)[8],
                         bool tolerate = false)
{
    cublasLtMatmulPreference_t pref;
    CB(cublasLtMatmulPreferenceCreate(&pref));
    CB(cublasLtMatmulPreferenceSetAttribute(
        pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &LT_WS, sizeof(LT_WS)));
    int nres = 0;
    const cublasStatus_t st = cublasLtMatmulAlgoGetHeuristic(
        lt, p.op, p.la, p.lb, p.ld, p.ld, pref, 8, heur, &nres);
    cublasLtMatmulPreferenceDestroy(pref);
    if (!tolerate)
        CB(st);
    return st == CUBLAS_STATUS_SUCCESS ? nres : 0;
}

inline void lt_free(LtPlan &p)
{
    cublasLtMatrixLayoutDestroy(p.la);
    cublasLtMatrixLayoutDestroy(p.lb);
    cublasLtMatrixLayoutDestroy(p.ld);
    cublasLtMatmulDescDestroy(p.op);
}

/* The names of the tiles and cluster shapes cuBLASLt's sm_90 kernels were
 * seen to use (cublasLt.h has some 600 tiles); others print as numbers. */
struct LtName {
    uint64_t v;
    const char *name;
};
#define LT_TILE(t)                                                             \
    {                                                                          \
        CUBLASLT_MATMUL_TILE_##t, #t                                           \
    }
#define LT_CLUSTER(c)                                                          \
    {                                                                          \
        CUBLASLT_CLUSTER_SHAPE_##c, #c                                         \
    }
static const LtName kLtTiles[] = {
    LT_TILE(64x8),    LT_TILE(64x16),   LT_TILE(64x32),   LT_TILE(64x64),
    LT_TILE(64x128),  LT_TILE(64x256),  LT_TILE(128x16),  LT_TILE(128x32),
    LT_TILE(128x64),  LT_TILE(128x80),  LT_TILE(128x96),  LT_TILE(128x128),
    LT_TILE(128x160), LT_TILE(128x192), LT_TILE(128x256), LT_TILE(192x96),
    LT_TILE(192x128), LT_TILE(192x192), LT_TILE(256x64),  LT_TILE(256x96),
    LT_TILE(256x128), LT_TILE(320x64),  LT_TILE(320x128)};
static const LtName kLtClusters[] = {{CUBLASLT_CLUSTER_SHAPE_AUTO, "auto"},
                                     LT_CLUSTER(1x1x1),
                                     LT_CLUSTER(2x1x1),
                                     LT_CLUSTER(1x2x1),
                                     LT_CLUSTER(2x2x1),
                                     LT_CLUSTER(4x1x1),
                                     LT_CLUSTER(1x4x1),
                                     LT_CLUSTER(4x2x1),
                                     LT_CLUSTER(2x4x1),
                                     LT_CLUSTER(4x4x1),
                                     LT_CLUSTER(8x1x1),
                                     LT_CLUSTER(1x8x1)};
#undef LT_TILE
#undef LT_CLUSTER

template <size_t N>
inline const char *lt_name(const LtName (&names)[N], uint64_t v)
{
    for (const LtName &n : names)
        if (n.v == v)
            return n.name;
    return NULL;
}

/* What cuBLASLt's algorithm is, as its config (cublasLt.h's enums: the
 * tile is cublasLtMatmulTile_t in its column-major view, where its M is
 * our N: "tile 128x160" is 160 of our rows by 128 of our columns; the
 * cluster cublasLtClusterShape_t, the same way round; the reduction
 * cublasLtReductionScheme_t), for the rows where it is ahead. */
inline std::string lt_describe(const cublasLtMatmulAlgo_t &a)
{
    static const struct {
        cublasLtMatmulAlgoConfigAttributes_t at;
        const char *name;
    } attrs[] = {{CUBLASLT_ALGO_CONFIG_ID, "algo"},
                 {CUBLASLT_ALGO_CONFIG_TILE_ID, "tile"},
                 {CUBLASLT_ALGO_CONFIG_STAGES_ID, "stages"},
                 {CUBLASLT_ALGO_CONFIG_SPLITK_NUM, "splitk"},
                 {CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME, "reduction"},
                 {CUBLASLT_ALGO_CONFIG_CTA_SWIZZLING, "swizzle"},
                 {CUBLASLT_ALGO_CONFIG_CUSTOM_OPTION, "custom"},
                 {CUBLASLT_ALGO_CONFIG_CLUSTER_SHAPE_ID, "cluster"}};
    std::string s;
    for (const auto &t : attrs) {
        uint64_t v = 0; /* read at the attribute's own size (<= 8) */
        size_t size = 0;
        if (cublasLtMatmulAlgoConfigGetAttribute(&a, t.at, NULL, 0, &size) !=
                CUBLAS_STATUS_SUCCESS ||
            size > sizeof v ||
            cublasLtMatmulAlgoConfigGetAttribute(&a, t.at, &v, size, &size) !=
                CUBLAS_STATUS_SUCCESS)
            continue;
        const char *nm = t.at == CUBLASLT_ALGO_CONFIG_TILE_ID
                             ? lt_name(kLtTiles, v)
                         : t.at == CUBLASLT_ALGO_CONFIG_CLUSTER_SHAPE_ID
                             ? lt_name(kLtClusters, v)
                             : NULL;
        char b[64];
        if (nm)
            snprintf(b, sizeof b, "%s%s %s", s.empty() ? "" : ", ", t.name, nm);
        else
            snprintf(b, sizeof b, "%s%s %llu", s.empty() ? "" : ", ", t.name,
                     (unsigned long long)v);
        s += b;
    }
    return s;
}

inline void lt_run(LtPlan &p, const void *a, const void *b, void *d,
                   const cublasLtMatmulAlgo_t *algo)
{
    float one = 1, zero = 0;
    CB(cublasLtMatmul(lt, p.op, &one, b, p.la, a, p.lb, &zero, d, p.ld, d, p.ld,
                      algo, lt_ws, LT_WS, 0));
}

/* The benches of the other types (their files); each returns 0, or 1
 * where a call failed. custom: --shapes (empty: the set's). */
int bench_fp32(gemmk_ctx *ctx, const char *set, int reps, FILE *f,
               cudaEvent_t e0, cudaEvent_t e1, const std::vector<Shape> &custom,
               const std::vector<std::string> &kernels);
int bench_int8(gemmk_ctx *ctx, const char *set, int reps, FILE *f,
               cudaEvent_t e0, cudaEvent_t e1);
int bench_fp64(gemmk_ctx *ctx, const char *set, int reps, FILE *f,
               cudaEvent_t e0, cudaEvent_t e1, double phi,
               const std::vector<std::string> &kernels_in, int moduli,
               const std::vector<Shape> &custom);
