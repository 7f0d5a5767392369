/*
 * bench_gemm.cu: our Hopper GEMM (gemmk_gemm, shape heuristic) against
 * cuBLASLt (its heuristic's top algorithms, each timed, the fastest kept) on
 * the same random inputs in one process. Inputs rotate among several sets
 * so that L2 (50 MB) never holds them; each run is timed with CUDA events;
 * the median of many runs is reported. D is bf16/fp16 (same as the inputs),
 * fp32 accumulation, alpha = 1, beta = 0, row-major.
 *
 * Usage: bench_gemm [--set all|quick|squares|big|skinny|trans|misc]
 *                   [--shapes MxNxK[tAB],...] [--type bf16|fp16|both]
 *                   [--reps N] [--blocks N] [--csv FILE] [--kernel NAME,...]
 *        bench_gemm --type fp32 [--set fp32|fp32quick|fp32sq|tf32|
 *                                  tf32one|gram] [--shapes ...] [--reps N]
 *                   [--csv FILE] [--kernel NAME,...]
 *        bench_gemm --type int8 [--set int8|int8quick|int8one] [--reps N]
 *        bench_gemm --type fp64 [--set fp64|fp64quick|fp64sq|fp64ksweep|z128|
 *                                c64]
 *                   [--kernel auto,oz2,oz2-bytes,oz2-unfused,oz2-prep]
 *                   [--phi X] [--moduli N] [--reps N]
 *        --sustain S: each row also back to back, S seconds a side, with
 *        joules a call (bench_power.h; 16-bit and tf32 rows: auto or the
 *        named kernels against cuBLASLt's)
 *        --clocks 1: 16-bit and tf32 rows also print the mean SM clock
 *        while ours and cuBLAS's timed blocks ran
 *        --b2b N: each timed run N calls back to back, the calls' host
 *        time hidden (default 1: a call alone, host time included)
 * --shapes replaces the set (tAB: trans_a, trans_b, e.g. 4096x4096x4096t01;
 * with --type fp64 --set z128 or c64 the complex shapes, tb conjugating B).
 * Several kernels (auto: the heuristic) are timed in the same blocks,
 * alternating with cuBLAS, so their ratios share the clock drift; their
 * order is reversed every other block.
 * Prints one line per shape and kernel and a table last.
 *
 * fp32 (issue 6): fp32 A/B and D. Our tf32 (auto at tf32 precision: "ws-tf32",
 * or "ws-decode-tf32" on decode shapes) against cuBLASLt's TF32 mode
 * (CUBLAS_COMPUTE_32F_FAST_TF32), 3xTF32 ("ws-3xtf32", or "ws-decode-3xtf32"
 * on decode shapes) against plain SGEMM
 * (CUBLAS_COMPUTE_32F), each cuBLASLt algorithm the fastest of its
 * heuristic's top 8. Error: on 1024 sampled elements of D, the max over
 * them of |D - ref| / sum_k |a_ik b_kj| with ref in fp64 on the host (a
 * relative error that does not blow up where ref is near 0), for all four.
 * The "gram" set multiplies A^T A (B is A), half the sample on its
 * diagonal: sums of squares, where rounding errors do not cancel.
 * --kernel names tf32 kernels (e.g. ws-tf32,ws-tf32r) to time beside auto
 * in the same blocks, with a table of their own.
 *
 * int8 and fp64 (issue 14): gemmk_gemm_s8 against cuBLASLt int8
 * (CUBLAS_COMPUTE_32I; results compared exactly), and gemmk_gemm_f64 (the
 * Ozaki-II emulation, or native where it decides so; the kernel that ran
 * and its moduli are printed) against cuBLAS DGEMM (cuBLASLt
 * CUBLAS_COMPUTE_64F, fastest of its heuristic's top 8) on inputs x
 * 2^(phi randn), phi = 0.5 by default; errors: max and median over 256
 * sampled elements of |D - ref| / |ref| with ref in double-double.
 */
#include <cublasLt.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <algorithm>
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

static __global__ void fill_kernel(uint16_t *p, long long n, uint64_t seed,
                                   int is_bf16)
{
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n;
         i += (long long)gridDim.x * blockDim.x) {
        uint64_t x = (seed + i) * 0x9E3779B97F4A7C15ull;
        x ^= x >> 31;
        x *= 0xbf58476d1ce4e5b9ull;
        x ^= x >> 29;
        float v = ((uint32_t)(x >> 40) * (2.0f / 16777216.0f)) - 1.0f;
        if (is_bf16) {
            __nv_bfloat16 b = __float2bfloat16(v);
            p[i] = *reinterpret_cast<uint16_t *>(&b);
        } else {
            __half h = __float2half(v);
            p[i] = *reinterpret_cast<uint16_t *>(&h);
        }
    }
}

static float h2f(uint16_t u, bool bf16)
{
    if (bf16) {
        uint32_t b = (uint32_t)u << 16;
        float f;
        memcpy(&f, &b, 4);
        return f;
    }
    __half h;
    memcpy(&h, &u, 2);
    return __half2float(h);
}

static double median(std::vector<float> v)
{
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
}

/* --b2b N: each timed run is N calls back to back between the events
 * (their inputs rotating as before), its time over N: the kernels' time
 * with the calls' host time hidden behind the GPU's work, where 1 (a
 * call alone) counts the host time before a launch as well. */
static int g_b2b = 1;

/* Median ms of n runs of fn(i), each timed between events e0, e1 on the
 * default stream: one call alone, or g_b2b calls back to back. */
/* --clocks: each timed block's mean SM clock (bench_power.h), summed per
 * side of a row by the callers that report it. */
static bool g_clocks = false;
static double g_last_mhz = 0;

struct ClockMean {
    double sum = 0;
    int n = 0;
    void add(void)
    {
        if (g_last_mhz > 0)
            sum += g_last_mhz, n++;
    }
    double mean(void) const
    {
        return n ? sum / n : 0;
    }
};

template <typename F>
static double time_runs(cudaEvent_t e0, cudaEvent_t e1, F fn, int n)
{
    static ClockSampler cs;
    if (g_clocks)
        cs.start();
    std::vector<float> ts;
    for (int i = 0; i < n; i++) {
        CK(cudaEventRecord(e0));
        for (int j = 0; j < g_b2b; j++)
            fn(i * g_b2b + j);
        CK(cudaEventRecord(e1));
        CK(cudaEventSynchronize(e1));
        float ms;
        CK(cudaEventElapsedTime(&ms, e0, e1));
        ts.push_back(ms / g_b2b);
    }
    CK(cudaGetLastError());
    g_last_mhz = g_clocks ? cs.stop() : 0;
    return median(ts);
}

/* --sustain S: every row also runs back to back, S seconds a side, ours
 * against its anchor (bench_power.h); their rows are printed after the
 * main table. */
static double g_sustain = 0;
static std::vector<std::string> g_sustained;

static void print_sustained(void)
{
    if (g_sustained.empty())
        return;
    printf("\nBack to back, %.0f s a side twice (bench_power.h):\n\n%s",
           g_sustain, sustain_header());
    for (auto &r : g_sustained)
        printf("%s", r.c_str());
}

static cublasLtHandle_t lt;
static void *lt_ws;
static const size_t LT_WS = 64ull << 20;

struct LtPlan {
    cublasLtMatmulDesc_t op;
    cublasLtMatrixLayout_t la, lb, ld;
    cublasLtMatmulAlgo_t algo;
};

/* Row-major D(MxN) = op(A) op(B) is column-major D^T = op(B)^T op(A)^T:
 * cuBLASLt's "A" is our B, its "B" is our A. */
static void lt_make(LtPlan &p, const Shape &s, cudaDataType_t t,
                    cublasComputeType_t ct = CUBLAS_COMPUTE_32F)
{
    CB(cublasLtMatmulDescCreate(&p.op, ct, CUDA_R_32F));
    cublasOperation_t opa = s.tb ? CUBLAS_OP_T : CUBLAS_OP_N;
    cublasOperation_t opb = s.ta ? CUBLAS_OP_T : CUBLAS_OP_N;
    CB(cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_TRANSA, &opa,
                                      sizeof(opa)));
    CB(cublasLtMatmulDescSetAttribute(p.op, CUBLASLT_MATMUL_DESC_TRANSB, &opb,
                                      sizeof(opb)));
    /* our B: stored KxN (ld N) or NxK (ld K) row-major */
    if (s.tb)
        CB(cublasLtMatrixLayoutCreate(&p.la, t, s.k, s.n, s.ldb()));
    else
        CB(cublasLtMatrixLayoutCreate(&p.la, t, s.n, s.k, s.ldb()));
    if (s.ta)
        CB(cublasLtMatrixLayoutCreate(&p.lb, t, s.m, s.k, s.lda()));
    else
        CB(cublasLtMatrixLayoutCreate(&p.lb, t, s.k, s.m, s.lda()));
    CB(cublasLtMatrixLayoutCreate(&p.ld, t, s.n, s.m, s.ldd()));
}

static void lt_free(LtPlan &p)
{
    cublasLtMatrixLayoutDestroy(p.la);
    cublasLtMatrixLayoutDestroy(p.lb);
    cublasLtMatrixLayoutDestroy(p.ld);
    cublasLtMatmulDescDestroy(p.op);
}

static void lt_run(LtPlan &p, const void *a, const void *b, void *d,
                   const cublasLtMatmulAlgo_t *algo)
{
    float one = 1, zero = 0;
    CB(cublasLtMatmul(lt, p.op, &one, b, p.la, a, p.lb, &zero, d, p.ld, d, p.ld,
                      algo, lt_ws, LT_WS, 0));
}

struct Row {
    std::string name, type, ours_cfg;
    double ours_tf, blas_tf, ratio, err, ours_tbs, blas_tbs;
    bool skinny;
};

static __global__ void fill_f32_kernel(float *p, long long n, uint64_t seed)
{
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n;
         i += (long long)gridDim.x * blockDim.x) {
        uint64_t x = (seed + i) * 0x9E3779B97F4A7C15ull;
        x ^= x >> 31;
        x *= 0xbf58476d1ce4e5b9ull;
        x ^= x >> 29;
        /* full 24-bit mantissas in [-1, 1) */
        p[i] = ((uint32_t)(x >> 40) * (2.0f / 16777216.0f)) - 1.0f;
    }
}

struct Row32 {
    std::string name, tf32_kernel;
    double tf32_tf, lt_tf32_tf, x3_tf, sgemm_tf, oz_tf;
    double e_tf32, e_lt_tf32, e_x3, e_sgemm, e_oz;
    int oz_moduli;
    std::vector<double> var_tf, var_e; /* the named tf32 kernels */
};

/* fp32 rows (see the file comment). Returns 0, or 1 on a failed call. */
static int bench_fp32(gemmk_ctx *ctx, const char *set, int reps, FILE *f,
                      cudaEvent_t e0, cudaEvent_t e1,
                      const std::vector<Shape> &custom,
                      const std::vector<std::string> &kernels)
{
    /* --kernel names other than auto: tf32 kernels timed in the same
     * blocks, a table of their own */
    std::vector<const char *> var;
    for (const std::string &k : kernels)
        if (k != "auto")
            var.push_back(k.c_str());
    std::vector<Shape> shapes;
    if (!custom.empty()) {
        shapes = custom;
    } else if (!strcmp(set, "fp32quick")) {
        shapes.push_back({4096, 4096, 4096, 0, 0, "fp32"});
        shapes.push_back({8192, 8192, 8192, 0, 0, "fp32"});
        shapes.push_back({8192, 8192, 8192, 0, 1, "fp32"});
    } else if (!strcmp(set, "tf32one")) { /* one row, for profilers */
        shapes.push_back({8192, 8192, 8192, 0, 1, "fp32"});
    } else if (!strcmp(set, "tf32")) { /* issue 23's tf32 rows */
        for (long long v : {4096ll, 8192ll})
            for (int t = 0; t < 4; t++)
                shapes.push_back({v, v, v, t >> 1, t & 1, "fp32"});
    } else if (!strcmp(set, "gram")) { /* A^T A: B is A, TN */
        for (long long v : {4096ll, 8192ll})
            shapes.push_back({v, v, v, 1, 0, "gram"});
    } else if (!strcmp(set, "fp32sq")) { /* the NN squares only */
        for (long long v : {1024ll, 2048ll, 4096ll, 8192ll})
            shapes.push_back({v, v, v, 0, 0, "fp32"});
    } else {
        for (long long v : {1024ll, 2048ll, 4096ll, 8192ll})
            shapes.push_back({v, v, v, 0, 0, "fp32"});
        for (int t = 1; t < 4; t++)
            shapes.push_back({4096, 4096, 4096, t >> 1, t & 1, "fp32"});
        shapes.push_back({8192, 8192, 8192, 0, 1, "fp32"});
        shapes.push_back({3000, 5000, 700, 0, 0, "fp32"});
        shapes.push_back({1000, 1000, 1000, 0, 0, "fp32"});
        shapes.push_back({4095, 4097, 1031, 1, 0, "fp32"});
        shapes.push_back({128, 8192, 8192, 0, 0, "fp32"});
    }
    std::vector<Row32> rows;
    if (f)
        fprintf(f, "shape,ta,tb,tf32_tflops,cublas_tf32_tflops,tf32_ratio,"
                   "x3_tflops,sgemm_tflops,x3_ratio,err_tf32,err_cublas_tf32,"
                   "err_x3,err_sgemm,oz_tflops,oz_moduli,err_oz\n");
    for (const Shape &s : shapes) {
        const std::string st = gpu_state(); /* as the row starts */
        size_t ea = (s.ta ? s.k : s.m) * s.lda();
        size_t eb = (s.tb ? s.n : s.k) * s.ldb();
        size_t ed = s.m * s.ldd();
        size_t set_bytes = (ea + eb) * 4;
        int nsets = (int)std::min<size_t>(
            8, std::max<size_t>(1, (size_t)(400ull << 20) / set_bytes));
        std::vector<float *> A(nsets), B(nsets);
        /* "gram": D = A^T A, every diagonal element a sum of squares */
        const bool gram = !strcmp(s.group, "gram");
        for (int i = 0; i < nsets; i++) {
            CK(cudaMalloc(&A[i], ea * 4));
            fill_f32_kernel<<<1024, 256>>>(A[i], ea, 1000 + 17 * i);
            if (gram) {
                B[i] = A[i];
            } else {
                CK(cudaMalloc(&B[i], eb * 4));
                fill_f32_kernel<<<1024, 256>>>(B[i], eb, 5000 + 31 * i);
            }
            CK(cudaGetLastError());
        }
        float *D;
        CK(cudaMalloc(&D, ed * 4));
        gemmk_problem p;
        memset(&p, 0, sizeof(p));
        p.m = s.m, p.n = s.n, p.k = s.k;
        p.ab_type = GEMM_FP32, p.cd_type = GEMM_FP32;
        p.trans_a = s.ta, p.trans_b = s.tb;
        p.lda = s.lda(), p.ldb = s.ldb(), p.ldc = p.ldd = s.ldd();
        p.alpha = 1, p.beta = 0;
        p.d = D;
        auto time_fn = [&](auto fn, int n) { return time_runs(e0, e1, fn, n); };
        bool fail = false;
        int oz_moduli = 0;
        /* k NULL: auto (at tf32: the tiled kernel, or ws-decode-tf32 on
         * decode shapes); tf32_kernel names what auto ran */
        const char *tf32_kernel = "?";
        auto ours = [&](const char *k, gemm_precision pr, int i) {
            p.a = A[i % nsets], p.b = B[i % nsets], p.precision = pr;
            gemmk_result res;
            int r = gemmk_gemm(ctx, &p, 0, k, &res);
            if (!k)
                tf32_kernel = res.kernel ? res.kernel : "?";
            else if (!strcmp(k, "oz2-f32"))
                oz_moduli = strcmp(res.kernel ? res.kernel : "", "oz2-f32")
                                ? 0
                                : res.moduli;
            if (r != GEMM_OK) {
                fprintf(stderr, "gemmk_gemm %s: %d\n", k ? k : "auto", r);
                fail = true;
            }
        };
        /* 3xTF32: the decode kernel where auto would take it, else the
         * tiled one */
        const char *x3k = "ws-3xtf32";
        {
            const char *sel = nullptr;
            p.precision = GEMM_PRECISION_FP32;
            p.a = A[0], p.b = B[0];
            if (gemmk_select(ctx, &p, &sel) == GEMM_OK && sel &&
                !strcmp(sel, "ws-decode-3xtf32"))
                x3k = sel;
        }
        /* cuBLASLt: fastest of the heuristic's candidates, for ct */
        auto lt_best = [&](cublasComputeType_t ct, LtPlan &lp,
                           cublasLtMatmulAlgo_t &algo) {
            lt_make(lp, s, CUDA_R_32F, ct);
            cublasLtMatmulPreference_t pref;
            CB(cublasLtMatmulPreferenceCreate(&pref));
            CB(cublasLtMatmulPreferenceSetAttribute(
                pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &LT_WS,
                sizeof(LT_WS)));
            cublasLtMatmulHeuristicResult_t heur[8];
            int nres = 0;
            CB(cublasLtMatmulAlgoGetHeuristic(lt, lp.op, lp.la, lp.lb, lp.ld,
                                              lp.ld, pref, 8, heur, &nres));
            cublasLtMatmulPreferenceDestroy(pref);
            if (nres == 0)
                return 1e30;
            double best_ms = 1e30;
            for (int a = 0; a < nres; a++) {
                lt_run(lp, A[0], B[0], D, &heur[a].algo);
                double ms = time_fn(
                    [&](int i) {
                        lt_run(lp, A[i % nsets], B[i % nsets], D,
                               &heur[a].algo);
                    },
                    std::max(3, reps / 5));
                if (ms < best_ms)
                    best_ms = ms, algo = heur[a].algo;
            }
            return best_ms;
        };
        LtPlan lp_tf, lp_sg;
        cublasLtMatmulAlgo_t al_tf, al_sg;
        double ms_lt_tf = lt_best(CUBLAS_COMPUTE_32F_FAST_TF32, lp_tf, al_tf);
        double ms_lt_sg = lt_best(CUBLAS_COMPUTE_32F, lp_sg, al_sg);
        for (int i = 0; i < 3; i++) {
            ours(nullptr, GEMM_PRECISION_TF32, i);
            ours(x3k, GEMM_PRECISION_FP32, i);
            ours("oz2-f32", GEMM_PRECISION_FP32, i);
            for (const char *k : var)
                ours(k, GEMM_PRECISION_TF32, i);
        }
        CK(cudaDeviceSynchronize());
        if (fail)
            return 1;
        /* interleaved blocks; the min of the block medians */
        double t_tf = 1e30, t_x3 = 1e30, t_ltf = 1e30, t_lsg = 1e30,
               t_oz = 1e30;
        std::vector<double> t_var(var.size(), 1e30);
        ClockMean clk_tf, clk_ltf; /* --clocks */
        for (int blk = 0; blk < 2; blk++) {
            /* the named kernels forward, then backward: a GPU that warms
             * (clocks fall at the power cap) favours no position */
            for (size_t w = 0; w < var.size(); w++) {
                const size_t v = blk ? var.size() - 1 - w : w;
                t_var[v] = std::min(
                    t_var[v],
                    time_fn(
                        [&](int i) { ours(var[v], GEMM_PRECISION_TF32, i); },
                        reps / 2));
            }
            t_tf = std::min(
                t_tf,
                time_fn([&](int i) { ours(nullptr, GEMM_PRECISION_TF32, i); },
                        reps / 2));
            clk_tf.add();
            t_ltf = std::min(t_ltf, time_fn(
                                        [&](int i) {
                                            lt_run(lp_tf, A[i % nsets],
                                                   B[i % nsets], D, &al_tf);
                                        },
                                        reps / 2));
            clk_ltf.add();
            t_x3 = std::min(
                t_x3, time_fn([&](int i) { ours(x3k, GEMM_PRECISION_FP32, i); },
                              std::max(3, reps / 4)));
            t_lsg = std::min(t_lsg, time_fn(
                                        [&](int i) {
                                            lt_run(lp_sg, A[i % nsets],
                                                   B[i % nsets], D, &al_sg);
                                        },
                                        std::max(3, reps / 4)));
            t_oz = std::min(
                t_oz,
                time_fn([&](int i) { ours("oz2-f32", GEMM_PRECISION_FP32, i); },
                        std::max(3, reps / 4)));
        }
        t_ltf = std::min(t_ltf, ms_lt_tf);
        t_lsg = std::min(t_lsg, ms_lt_sg);
        if (fail)
            return 1;

        /* errors against fp64 on a sample of set 0 */
        std::vector<float> ha(ea), hb(eb), hd(ed);
        CK(cudaMemcpy(ha.data(), A[0], ea * 4, cudaMemcpyDeviceToHost));
        CK(cudaMemcpy(hb.data(), B[0], eb * 4, cudaMemcpyDeviceToHost));
        const int NS = 1024;
        std::vector<double> ref(NS), mag(NS);
        std::vector<long long> ri(NS), ci(NS);
        for (int q = 0; q < NS; q++) {
            ri[q] = q == 0 ? s.m - 1 : (q * 7919ll) % s.m;
            ci[q] = q == 0 ? s.n - 1 : (q * 104729ll) % s.n;
            if (gram && q % 2) /* half of the sample on the diagonal */
                ci[q] = ri[q];
            double acc = 0, mg = 0;
            for (long long k = 0; k < s.k; k++) {
                double a = ha[s.ta ? k * s.lda() + ri[q] : ri[q] * s.lda() + k];
                double b = hb[s.tb ? ci[q] * s.ldb() + k : k * s.ldb() + ci[q]];
                acc += a * b;
                mg += fabs(a * b);
            }
            ref[q] = acc, mag[q] = mg;
        }
        auto err_of = [&](auto run) {
            CK(cudaMemset(D, 0xFF, ed * 4));
            run();
            CK(cudaDeviceSynchronize());
            CK(cudaMemcpy(hd.data(), D, ed * 4, cudaMemcpyDeviceToHost));
            double mx = 0;
            for (int q = 0; q < NS; q++) {
                double v = hd[ri[q] * s.ldd() + ci[q]];
                double e = isnan(v) ? INFINITY : fabs(v - ref[q]) / mag[q];
                mx = std::max(mx, e);
            }
            return mx;
        };
        Row32 r;
        r.e_tf32 = err_of([&] { ours(nullptr, GEMM_PRECISION_TF32, 0); });
        r.tf32_kernel = tf32_kernel;
        r.e_x3 = err_of([&] { ours(x3k, GEMM_PRECISION_FP32, 0); });
        r.e_lt_tf32 = err_of([&] { lt_run(lp_tf, A[0], B[0], D, &al_tf); });
        r.e_sgemm = err_of([&] { lt_run(lp_sg, A[0], B[0], D, &al_sg); });
        r.e_oz = err_of([&] { ours("oz2-f32", GEMM_PRECISION_FP32, 0); });
        r.oz_moduli = oz_moduli;
        double flop = 2.0 * s.m * s.n * s.k;
        for (size_t v = 0; v < var.size(); v++) {
            r.var_e.push_back(
                err_of([&] { ours(var[v], GEMM_PRECISION_TF32, 0); }));
            r.var_tf.push_back(flop / t_var[v] / 1e9);
        }
        if (fail)
            return 1;
        char nm[96];
        snprintf(nm, sizeof nm, "%lldx%lldx%lld%s", s.m, s.n, s.k,
                 s.ta || s.tb ? (s.ta ? (s.tb ? " TT" : " TN") : " NT") : "");
        r.name = nm;
        r.tf32_tf = flop / t_tf / 1e9;
        r.lt_tf32_tf = flop / t_ltf / 1e9;
        r.x3_tf = flop / t_x3 / 1e9;
        r.sgemm_tf = flop / t_lsg / 1e9;
        r.oz_tf = flop / t_oz / 1e9;
        rows.push_back(r);
        if (g_sustain > 0) {
            std::string sn = std::string(nm) + " tf32";
            g_sustained.push_back(sustain_pair(
                sn.c_str(), tf32_kernel,
                [&](int i) { ours(nullptr, GEMM_PRECISION_TF32, i); },
                [&](int i) {
                    lt_run(lp_tf, A[i % nsets], B[i % nsets], D, &al_tf);
                },
                flop, g_sustain));
        }
        printf("%-22s tf32 %6.1f vs %6.1f (%.3f)  3xtf32 %6.1f vs sgemm %6.1f "
               "(%.2fx)  oz2-f32 %6.1f (%.2fx sgemm, %.2fx 3x, n=%d)  err "
               "tf32 %.1e/%.1e 3x %.1e sgemm %.1e oz %.1e  [%s]\n",
               nm, r.tf32_tf, r.lt_tf32_tf, r.tf32_tf / r.lt_tf32_tf, r.x3_tf,
               r.sgemm_tf, r.x3_tf / r.sgemm_tf, r.oz_tf, r.oz_tf / r.sgemm_tf,
               r.oz_tf / r.x3_tf, r.oz_moduli, r.e_tf32, r.e_lt_tf32, r.e_x3,
               r.e_sgemm, r.e_oz, st.c_str());
        if (g_clocks)
            printf("%-22s tf32 clock: ours %.0f MHz, cuBLAS TF32 %.0f MHz\n",
                   nm, clk_tf.mean(), clk_ltf.mean());
        fflush(stdout);
        if (f)
            fprintf(f,
                    "%lldx%lldx%lld,%d,%d,%.2f,%.2f,%.4f,%.2f,%.2f,%.4f,"
                    "%.3e,%.3e,%.3e,%.3e,%.2f,%d,%.3e\n",
                    s.m, s.n, s.k, s.ta, s.tb, r.tf32_tf, r.lt_tf32_tf,
                    r.tf32_tf / r.lt_tf32_tf, r.x3_tf, r.sgemm_tf,
                    r.x3_tf / r.sgemm_tf, r.e_tf32, r.e_lt_tf32, r.e_x3,
                    r.e_sgemm, r.oz_tf, r.oz_moduli, r.e_oz);
        lt_free(lp_tf);
        lt_free(lp_sg);
        for (int i = 0; i < nsets; i++) {
            cudaFree(A[i]);
            if (!gram)
                cudaFree(B[i]);
        }
        cudaFree(D);
    }
    printf("\n| shape | tf32 kernel | tf32 TF/s | cuBLAS TF32 TF/s | ratio | "
           "3xTF32 "
           "TF/s | cuBLAS SGEMM TF/s | ratio | oz2-f32 TF/s (moduli) | x SGEMM "
           "| x 3xTF32 | err tf32 | err cuBLAS tf32 | err 3xtf32 | err SGEMM "
           "| err oz2-f32 |\n|---|---|---|---|---|---|---|---|---|---|---|---|"
           "---|---|---|---|\n");
    for (auto &r : rows)
        printf(
            "| %s | %s | %.1f | %.1f | %.3f | %.1f | %.1f | %.2f | %.1f (%d) "
            "| %.2f | %.2f | %.1e | %.1e | %.1e | %.1e | %.1e |\n",
            r.name.c_str(), r.tf32_kernel.c_str(), r.tf32_tf, r.lt_tf32_tf,
            r.tf32_tf / r.lt_tf32_tf, r.x3_tf, r.sgemm_tf, r.x3_tf / r.sgemm_tf,
            r.oz_tf, r.oz_moduli, r.oz_tf / r.sgemm_tf, r.oz_tf / r.x3_tf,
            r.e_tf32, r.e_lt_tf32, r.e_x3, r.e_sgemm, r.e_oz);
    print_sustained();
    if (var.empty())
        return 0;
    printf("\n| shape | tf32 kernel | TF/s | cuBLAS TF32 TF/s | ratio | err "
           "| err cuBLAS tf32 |\n|---|---|---|---|---|---|---|\n");
    for (auto &r : rows)
        for (size_t v = 0; v < var.size(); v++)
            printf("| %s | %s | %.1f | %.1f | %.3f | %.1e | %.1e |\n",
                   r.name.c_str(), var[v], r.var_tf[v], r.lt_tf32_tf,
                   r.var_tf[v] / r.lt_tf32_tf, r.var_e[v], r.e_lt_tf32);
    return 0;
}

/* ---- int8 (issue 14): ours (gemmk_gemm_s8) against cuBLASLt int8 ---- */

static __global__ void fill_s8_kernel(int8_t *p, long long n, uint64_t seed)
{
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n;
         i += (long long)gridDim.x * blockDim.x) {
        uint64_t x = (seed + i) * 0x9E3779B97F4A7C15ull;
        x ^= x >> 31;
        x *= 0xbf58476d1ce4e5b9ull;
        x ^= x >> 29;
        p[i] = (int8_t)(x >> 56);
    }
}

struct RowI8 {
    std::string name, kernel;
    double ours_tops, lt_tops;
    long long mismatches;
};

/* int8 rows: both operands K-major (A M x K, B N x K: "NT" row-major, the
 * layout int8 tensor cores read and cuBLASLt's IMMA kernels want), plus an
 * NN row through our transpose pre-pass. Ours vs cuBLASLt (CUBLAS_COMPUTE_32I,
 * its heuristic's top 8 each timed, the fastest kept), interleaved blocks;
 * D compared element for element (both exact). */
static int bench_int8(gemmk_ctx *ctx, const char *set, int reps, FILE *f,
                      cudaEvent_t e0, cudaEvent_t e1)
{
    std::vector<Shape> shapes;
    if (!strcmp(set, "int8quick")) {
        shapes.push_back({4096, 4096, 4096, 0, 1, "int8"});
        shapes.push_back({8192, 8192, 8192, 0, 1, "int8"});
    } else if (!strcmp(set, "int8one")) { /* for a profiler */
        shapes.push_back({8192, 8192, 8192, 0, 1, "int8"});
    } else {
        for (long long v : {2048ll, 4096ll, 8192ll, 16384ll})
            shapes.push_back({v, v, v, 0, 1, "int8"});
        shapes.push_back({8192, 8192, 2048, 0, 1, "int8"});
        shapes.push_back({4096, 4096, 4096, 0, 0, "int8"});
    }
    const char *kernels[3] = {"pp-s8", "ws-s8x256", "ws-s8x128"};
    std::vector<RowI8> rows;
    if (f)
        fprintf(f, "shape,ta,tb,kernel,ours_tops,cublaslt_tops,ratio,"
                   "mismatches\n");
    for (const Shape &s : shapes) {
        long long lda = ((s.ta ? s.m : s.k) + 15) / 16 * 16;
        long long ldb = ((s.tb ? s.k : s.n) + 15) / 16 * 16;
        long long ldd = (s.n + 3) / 4 * 4;
        size_t ea = (size_t)(s.ta ? s.k : s.m) * lda;
        size_t eb = (size_t)(s.tb ? s.n : s.k) * ldb;
        size_t ed = (size_t)s.m * ldd;
        int nsets = (int)std::min<size_t>(
            8, std::max<size_t>(1, (size_t)(400ull << 20) / (ea + eb)));
        std::vector<int8_t *> A(nsets), B(nsets);
        for (int i = 0; i < nsets; i++) {
            CK(cudaMalloc(&A[i], ea));
            CK(cudaMalloc(&B[i], eb));
            fill_s8_kernel<<<1024, 256>>>(A[i], ea, 7000 + 13 * i);
            fill_s8_kernel<<<1024, 256>>>(B[i], eb, 9000 + 29 * i);
            CK(cudaGetLastError());
        }
        int32_t *D, *Dr;
        CK(cudaMalloc(&D, ed * 4));
        CK(cudaMalloc(&Dr, ed * 4));
        gemmk_problem_s8 p;
        memset(&p, 0, sizeof(p));
        p.m = s.m, p.n = s.n, p.k = s.k, p.trans_a = s.ta, p.trans_b = s.tb;
        p.lda = lda, p.ldb = ldb, p.ldc = p.ldd = ldd;
        p.alpha = 1, p.beta = 0, p.d = D;
        /* cuBLASLt: row-major D = A B^T is column-major D^T = B' A with
         * our B in Lt's A slot */
        cublasLtMatmulDesc_t op;
        cublasLtMatrixLayout_t la, lb, ld;
        CB(cublasLtMatmulDescCreate(&op, CUBLAS_COMPUTE_32I, CUDA_R_32I));
        cublasOperation_t opa = s.tb ? CUBLAS_OP_T : CUBLAS_OP_N;
        cublasOperation_t opb = s.ta ? CUBLAS_OP_T : CUBLAS_OP_N;
        CB(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSA, &opa,
                                          sizeof(opa)));
        CB(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSB, &opb,
                                          sizeof(opb)));
        CB(cublasLtMatrixLayoutCreate(&la, CUDA_R_8I, s.tb ? s.k : s.n,
                                      s.tb ? s.n : s.k, ldb));
        CB(cublasLtMatrixLayoutCreate(&lb, CUDA_R_8I, s.ta ? s.m : s.k,
                                      s.ta ? s.k : s.m, lda));
        CB(cublasLtMatrixLayoutCreate(&ld, CUDA_R_32I, s.n, s.m, ldd));
        cublasLtMatmulPreference_t pref;
        CB(cublasLtMatmulPreferenceCreate(&pref));
        CB(cublasLtMatmulPreferenceSetAttribute(
            pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &LT_WS,
            sizeof(LT_WS)));
        cublasLtMatmulHeuristicResult_t heur[8];
        int nres = 0;
        cublasStatus_t hs = cublasLtMatmulAlgoGetHeuristic(
            lt, op, la, lb, ld, ld, pref, 8, heur, &nres);
        cublasLtMatmulPreferenceDestroy(pref);
        int32_t one = 1, zero = 0;
        auto lt_run8 = [&](int a, int i, int32_t *out) {
            CB(cublasLtMatmul(lt, op, &one, B[i % nsets], la, A[i % nsets], lb,
                              &zero, out, ld, out, ld, &heur[a].algo, lt_ws,
                              LT_WS, 0));
        };
        auto time_fn = [&](auto fn, int n) { return time_runs(e0, e1, fn, n); };
        double lt_ms = 1e30;
        int best = -1;
        if (hs == CUBLAS_STATUS_SUCCESS)
            for (int a = 0; a < nres; a++) {
                if (cublasLtMatmul(lt, op, &one, B[0], la, A[0], lb, &zero, Dr,
                                   ld, Dr, ld, &heur[a].algo, lt_ws, LT_WS,
                                   0) != CUBLAS_STATUS_SUCCESS)
                    continue;
                double ms = time_fn([&](int i) { lt_run8(a, i, Dr); },
                                    std::max(3, reps / 5));
                if (ms < lt_ms)
                    lt_ms = ms, best = a;
            }
        char nm[96];
        snprintf(nm, sizeof nm, "%lldx%lldx%lld%s", s.m, s.n, s.k,
                 s.ta || s.tb ? (s.ta ? (s.tb ? " TT" : " TN") : " NT") : "");
        for (int ki = 0; ki < 3; ki++) {
            auto ours = [&](int i) {
                p.a = A[i % nsets], p.b = B[i % nsets];
                int r = gemmk_gemm_s8(ctx, &p, 0, kernels[ki]);
                if (r != GEMM_OK) {
                    fprintf(stderr, "gemmk_gemm_s8: %d\n", r);
                    exit(1);
                }
            };
            for (int i = 0; i < 3; i++)
                ours(i);
            CK(cudaDeviceSynchronize());
            double t_o = 1e30, t_l = lt_ms;
            for (int blk = 0; blk < 2; blk++) {
                t_o = std::min(t_o, time_fn(ours, reps / 2));
                if (best >= 0)
                    t_l = std::min(t_l,
                                   time_fn([&](int i) { lt_run8(best, i, Dr); },
                                           reps / 2));
            }
            /* exactness: ours against cuBLASLt on set 0 */
            long long mism = -1;
            if (best >= 0) {
                ours(0);
                lt_run8(best, 0, Dr);
                CK(cudaDeviceSynchronize());
                std::vector<int32_t> h1(ed), h2(ed);
                CK(cudaMemcpy(h1.data(), D, ed * 4, cudaMemcpyDeviceToHost));
                CK(cudaMemcpy(h2.data(), Dr, ed * 4, cudaMemcpyDeviceToHost));
                mism = 0;
                for (long long i = 0; i < s.m; i++)
                    for (long long j = 0; j < s.n; j++)
                        mism += h1[i * ldd + j] != h2[i * ldd + j];
            }
            double ops = 2.0 * s.m * s.n * s.k;
            RowI8 r;
            r.name = nm;
            r.kernel = kernels[ki];
            r.ours_tops = ops / t_o / 1e9;
            r.lt_tops = best >= 0 ? ops / t_l / 1e9 : 0;
            r.mismatches = mism;
            rows.push_back(r);
            if (g_sustain > 0 && best >= 0)
                g_sustained.push_back(sustain_pair(
                    nm, kernels[ki], ours, [&](int i) { lt_run8(best, i, Dr); },
                    ops, g_sustain));
            printf("%-20s %-10s ours %7.1f TOPS  cuBLASLt %7.1f TOPS  ratio "
                   "%.3f  mismatches %lld\n",
                   nm, kernels[ki], r.ours_tops, r.lt_tops,
                   r.lt_tops > 0 ? r.ours_tops / r.lt_tops : 0.0, mism);
            fflush(stdout);
            if (f)
                fprintf(f, "%lldx%lldx%lld,%d,%d,%s,%.2f,%.2f,%.4f,%lld\n", s.m,
                        s.n, s.k, s.ta, s.tb, kernels[ki], r.ours_tops,
                        r.lt_tops, r.lt_tops > 0 ? r.ours_tops / r.lt_tops : 0,
                        mism);
        }
        cublasLtMatrixLayoutDestroy(la);
        cublasLtMatrixLayoutDestroy(lb);
        cublasLtMatrixLayoutDestroy(ld);
        cublasLtMatmulDescDestroy(op);
        for (int i = 0; i < nsets; i++) {
            cudaFree(A[i]);
            cudaFree(B[i]);
        }
        cudaFree(D);
        cudaFree(Dr);
    }
    printf("\n| shape | kernel | ours TOPS | cuBLASLt TOPS | ratio | "
           "mismatches |\n|---|---|---|---|---|---|\n");
    for (auto &r : rows)
        printf("| %s | %s | %.1f | %.1f | %.3f | %lld |\n", r.name.c_str(),
               r.kernel.c_str(), r.ours_tops, r.lt_tops,
               r.lt_tops > 0 ? r.ours_tops / r.lt_tops : 0.0, r.mismatches);
    print_sustained();
    return 0;
}

/* ---- fp64 (issue 14): ours (gemmk_gemm_f64) against cuBLAS DGEMM ---- */

/* x 2^(phi g), x uniform in [-1, 1) with 53 random bits, g ~ N(0, 1) */
static __global__ void fill_f64_kernel(double *p, long long n, uint64_t seed,
                                       double phi)
{
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n;
         i += (long long)gridDim.x * blockDim.x) {
        uint64_t x = (seed + i) * 0x9E3779B97F4A7C15ull;
        x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
        x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
        x ^= x >> 31;
        uint64_t y = x * 0xd1342543de82ef95ull + 1;
        y = (y ^ (y >> 29)) * 0xbf58476d1ce4e5b9ull;
        y ^= y >> 32;
        double u = (double)(x >> 11) * 0x1p-53 * 2.0 - 1.0;
        double v = phi;
        if (phi > 0) {
            double u1 = ((y >> 11) + 1) * 0x1p-53;
            double u2 = (double)((x * 0x9E3779B97F4A7C15ull) >> 11) * 0x1p-53;
            v = exp2(phi * sqrt(-2 * log(u1)) * cospi(2 * u2));
        } else {
            v = 1.0;
        }
        p[i] = u * v;
    }
}

struct RowF64 {
    std::string name, kernel;
    int moduli;
    double ours_tf, blas_tf;
    double e_max, e_med, b_max, b_med; /* relative errors, ours / cuBLAS */
};

/* Median relative error and max on ns x ns sampled elements of D against
 * a double-double reference (rows of op(A), columns of op(B) copied). */
struct Sampler {
    std::vector<long long> ri, cj;
    std::vector<double> ar, bc; /* ns rows of op(A) (k each), ns columns */
    std::vector<double> ref;
    long long k;
    void make(const Shape &s, const double *A, long long lda, const double *B,
              long long ldb, int ns)
    {
        k = s.k;
        ri.resize(ns);
        cj.resize(ns);
        for (int q = 0; q < ns; q++) {
            ri[q] = q == 0 ? s.m - 1 : (q * 7919ll + 3) % s.m;
            cj[q] = q == 0 ? s.n - 1 : (q * 104729ll + 11) % s.n;
        }
        ar.resize((size_t)ns * k);
        bc.resize((size_t)ns * k);
        for (int q = 0; q < ns; q++) {
            if (s.ta) /* column ri of stored K x M */
                CK(cudaMemcpy2D(&ar[(size_t)q * k], 8, A + ri[q], lda * 8, 8, k,
                                cudaMemcpyDeviceToHost));
            else
                CK(cudaMemcpy(&ar[(size_t)q * k], A + ri[q] * lda, k * 8,
                              cudaMemcpyDeviceToHost));
            if (s.tb)
                CK(cudaMemcpy(&bc[(size_t)q * k], B + cj[q] * ldb, k * 8,
                              cudaMemcpyDeviceToHost));
            else
                CK(cudaMemcpy2D(&bc[(size_t)q * k], 8, B + cj[q], ldb * 8, 8, k,
                                cudaMemcpyDeviceToHost));
        }
        ref.resize((size_t)ns * ns);
        for (int a = 0; a < ns; a++)
            for (int b = 0; b < ns; b++) {
                double hi = 0, lo = 0;
                const double *x = &ar[(size_t)a * k], *y = &bc[(size_t)b * k];
                for (long long h = 0; h < k; h++) {
                    double pr = x[h] * y[h], pe = fma(x[h], y[h], -pr);
                    double t = hi + pr, z = t - hi;
                    lo += ((hi - (t - z)) + (pr - z)) + pe;
                    hi = t;
                }
                ref[(size_t)a * ns + b] = hi + lo;
            }
    }
    /* max and median of |D - ref| / |ref| */
    void errors(const double *D, long long ldd, double *mx, double *md)
    {
        int ns = (int)ri.size();
        std::vector<double> e;
        for (int a = 0; a < ns; a++)
            for (int b = 0; b < ns; b++) {
                double v;
                CK(cudaMemcpy(&v, D + ri[a] * ldd + cj[b], 8,
                              cudaMemcpyDeviceToHost));
                double r = ref[(size_t)a * ns + b];
                if (r != 0)
                    e.push_back(isnan(v) ? INFINITY : fabs(v - r) / fabs(r));
            }
        std::sort(e.begin(), e.end());
        *mx = e.empty() ? 0 : e.back();
        *md = e.empty() ? 0 : e[e.size() / 2];
    }
};

/* Calibration of the accuracy model (docs/ozaki-notes.md): errors of the
 * emulation for explicit moduli 12..17 next to cuBLAS DGEMM's and the
 * automatic choice, for several spreads and depths; no timing. */
static int bench_fp64_cal(gemmk_ctx *ctx, FILE *f)
{
    if (f)
        fprintf(f, "phi,k,moduli,kernel,err_max,err_med,dgemm_err_max,"
                   "dgemm_err_med,spread_a,spread_b\n");
    printf("| phi | K | DGEMM max / med | auto (n) max / med | n=12 | 13 | 14 "
           "| 15 | 16 | 17 (max / med) |\n|---|---|---|---|---|---|---|---|"
           "---|---|\n");
    for (double phi : {0.0, 0.5, 1.0, 2.0, 4.0})
        for (long long k : {1024ll, 4096ll, 16384ll}) {
            Shape s = {2048, 2048, k, 0, 0, "cal"};
            size_t ea = (size_t)s.m * k, eb = (size_t)k * s.n,
                   ed = (size_t)s.m * s.n;
            double *A, *B, *D;
            CK(cudaMalloc(&A, ea * 8));
            CK(cudaMalloc(&B, eb * 8));
            CK(cudaMalloc(&D, ed * 8));
            fill_f64_kernel<<<2048, 256>>>(A, ea, 31337 + k, phi);
            fill_f64_kernel<<<2048, 256>>>(B, eb, 73313 + k, phi);
            CK(cudaGetLastError());
            Sampler smp;
            smp.make(s, A, k, B, s.n, 24);
            gemmk_problem_f64 p;
            memset(&p, 0, sizeof(p));
            p.m = s.m, p.n = s.n, p.k = k, p.a = A, p.b = B, p.d = D;
            p.lda = k, p.ldb = p.ldc = p.ldd = s.n;
            p.alpha = 1;
            gemmk_f64_result res;
            double mx, md, bmx, bmd;
            if (gemmk_gemm_f64(ctx, &p, 0, "cublas-dgemm", &res) != GEMM_OK) {
                fprintf(stderr, "cuBLAS DGEMM failed\n");
                return 1;
            }
            CK(cudaDeviceSynchronize());
            smp.errors(D, s.n, &bmx, &bmd);
            printf("| %.1f | %lld | %.1e / %.1e |", phi, k, bmx, bmd);
            for (int nm = 0; nm <= 17; nm = nm ? nm + 1 : 12) {
                p.moduli = nm;
                p.method = GEMMK_F64_EMULATE;
                CK(cudaMemset(D, 0xff, ed * 8));
                if (gemmk_gemm_f64(ctx, &p, 0, "oz2-bytes", &res) != GEMM_OK)
                    return 1;
                CK(cudaDeviceSynchronize());
                smp.errors(D, s.n, &mx, &md);
                if (nm == 0)
                    printf(" %.1e / %.1e (%s%d) |", mx, md,
                           res.emulated ? "" : "native ", res.moduli);
                else
                    printf(" %.1e / %.1e |", mx, md);
                if (f)
                    fprintf(f,
                            "%.2f,%lld,%d,%s,%.3e,%.3e,%.3e,%.3e,%.2f,%.2f\n",
                            phi, k, nm ? nm : res.moduli, res.kernel, mx, md,
                            bmx, bmd, res.spread_a, res.spread_b);
            }
            printf("\n");
            fflush(stdout);
            cudaFree(A);
            cudaFree(B);
            cudaFree(D);
        }
    return 0;
}

/* complex128 (R double) or complex64 (R float): cuBLAS ZGEMM (CGEMM)
 * against "auto" (the calibrated choice) and the emulation
 * ("oz2-complex"), 8 n^3 flops; the emulation's D against cuBLAS's as
 * max |difference| / max |cuBLAS|. */
static void fill_real(double *p, size_t n, uint64_t seed)
{
    fill_f64_kernel<<<2048, 256>>>(p, n, seed, 0.5);
}
static void fill_real(float *p, size_t n, uint64_t seed)
{
    fill_f32_kernel<<<1024, 256>>>(p, n, seed);
}

template <typename R>
static int bench_zc(gemmk_ctx *ctx, int reps, cudaEvent_t e0, cudaEvent_t e1,
                    const std::vector<Shape> &custom)
{
    const bool c64 = sizeof(R) == 4;
    const size_t es = 2 * sizeof(R);
    printf("| shape | kernel | moduli | TF/s | %s TF/s | ratio | max diff "
           "/ max abs |\n|---|---|---|---|---|---|---|\n",
           c64 ? "CGEMM" : "ZGEMM");
    std::vector<Shape> shapes = custom;
    if (shapes.empty()) /* cubes, B plain and conjugate-transposed */
        for (long long n : {4096ll, 6144ll, 8192ll})
            for (int t = 0; t < 2; t++)
                shapes.push_back({n, n, n, 0, t, "zc"});
    for (const Shape &s : shapes) {
        const long long m = s.m, n = s.n, k = s.k;
        const int t = s.tb;
        const size_t ea = (size_t)m * k, eb = (size_t)k * n, e = (size_t)m * n;
        R *A, *B, *D, *Z;
        CK(cudaMalloc(&A, ea * es));
        CK(cudaMalloc(&B, eb * es));
        CK(cudaMalloc(&D, e * es));
        CK(cudaMalloc(&Z, e * es));
        fill_real(A, 2 * ea, 4242 + n);
        fill_real(B, 2 * eb, 2424 + n);
        CK(cudaGetLastError());
        gemmk_problem p;
        memset(&p, 0, sizeof(p));
        p.m = m, p.n = n, p.k = k;
        p.ab_type = p.cd_type = c64 ? GEMM_COMPLEX64 : GEMM_COMPLEX128;
        p.trans_b = p.conj_b = t;
        p.a = A, p.b = B, p.d = Z;
        p.lda = k, p.ldb = t ? k : n, p.ldc = p.ldd = n;
        p.zalpha[0] = 1.0;
        gemmk_result res;
        auto run = [&](const char *k) {
            if (gemmk_gemm(ctx, &p, 0, k, &res) != GEMM_OK) {
                fprintf(stderr, "%s failed: %s\n", k, res.msg);
                exit(1);
            }
        };
        const double flop = 8.0 * m * n * k;
        const double tz = time_runs(
            e0, e1, [&](int) { run("cublas"); }, reps);
        std::vector<R> hz(2 * e), hd(2 * e);
        CK(cudaMemcpy(hz.data(), Z, e * es, cudaMemcpyDeviceToHost));
        double zmax = 0;
        for (R v : hz)
            zmax = fabs((double)v) > zmax ? fabs((double)v) : zmax;
        p.d = D;
        for (const char *kn : {"auto", "oz2-complex"}) {
            const double tk = time_runs(
                e0, e1, [&](int) { run(kn); }, reps);
            CK(cudaMemcpy(hd.data(), D, e * es, cudaMemcpyDeviceToHost));
            double dmax = 0;
            for (size_t i = 0; i < 2 * e; i++)
                dmax = fmax(dmax, fabs((double)hd[i] - (double)hz[i]));
            printf("| %lldx%lldx%lld%s | %s | %d | %.2f | %.2f | %.3f | "
                   "%.1e |\n",
                   m, n, k, t ? " NC" : "", res.kernel, res.moduli,
                   flop / tk / 1e9, flop / tz / 1e9, tz / tk, dmax / zmax);
            fflush(stdout);
        }
        p.d = Z;
        cudaFree(A);
        cudaFree(B);
        cudaFree(D);
        cudaFree(Z);
    }
    return 0;
}

static int bench_fp64(gemmk_ctx *ctx, const char *set, int reps, FILE *f,
                      cudaEvent_t e0, cudaEvent_t e1, double phi,
                      const std::vector<std::string> &kernels_in, int moduli,
                      const std::vector<Shape> &custom)
{
    if (!strcmp(set, "fp64cal"))
        return bench_fp64_cal(ctx, f);
    std::vector<Shape> shapes;
    std::vector<std::string> kernels = kernels_in;
    if (kernels.size() == 1 && kernels[0] == "auto")
        kernels = {"auto"};
    if (!strcmp(set, "fp64quick")) {
        shapes.push_back({4096, 4096, 4096, 0, 0, "fp64"});
        shapes.push_back({8192, 8192, 8192, 0, 0, "fp64"});
    } else if (!strcmp(set, "fp64ksweep")) {
        for (long long k :
             {256ll, 512ll, 1024ll, 2048ll, 4096ll, 8192ll, 16384ll})
            shapes.push_back({8192, 8192, k, 0, 0, "fp64"});
    } else if (!strcmp(set, "fp64sq")) {
        for (long long v : {1024ll, 2048ll, 4096ll, 8192ll, 16384ll})
            shapes.push_back({v, v, v, 0, 0, "fp64"});
    } else { /* fp64: squares, transposes, the K sweep */
        for (long long v : {1024ll, 2048ll, 4096ll, 8192ll, 16384ll})
            shapes.push_back({v, v, v, 0, 0, "fp64"});
        shapes.push_back({8192, 8192, 8192, 0, 1, "fp64"});
        shapes.push_back({8192, 8192, 8192, 1, 0, "fp64"});
        for (long long k : {256ll, 512ll, 1024ll, 2048ll, 4096ll, 16384ll})
            shapes.push_back({8192, 8192, k, 0, 0, "fp64"});
        shapes.push_back({3000, 5000, 7000, 0, 0, "fp64"});
    }
    {
        /* "auto" decides by the measured cost model, as gemmd's does */
        gemmk_f64_rates r;
        char why[256];
        if (gemmk_f64_calibrate(ctx, 0, 0, nullptr, &r, why, sizeof(why)) !=
            GEMM_OK) {
            fprintf(stderr, "fp64 calibration failed: %s\n", why);
            return 1;
        }
        gemmk_ctx_set_f64_rates(ctx, &r);
        const long long x = (long long)gemmk_f64_crossover(&r);
        printf("calibration (%.0f ms, %d^3): DGEMM %.1f TFLOP/s + %.0f us; "
               "emulation, %d moduli: int8 %.0f TOPS, %.2f TB/s, + %.0f us; "
               "auto emulates cubes from %lld\n\n",
               r.ms, r.size, r.native_flops / 1e12, r.native_s * 1e6, r.moduli,
               r.int8_ops / 1e12, r.emul_bandwidth / 1e12, r.emul_s * 1e6, x);
    }
    if (!strcmp(set, "z128"))
        return bench_zc<double>(ctx, reps, e0, e1, custom);
    if (!strcmp(set, "c64"))
        return bench_zc<float>(ctx, reps, e0, e1, custom);
    if (!custom.empty())
        shapes = custom;
    std::vector<RowF64> rows;
    if (f)
        fprintf(f, "shape,ta,tb,kernel,moduli,ours_tflops,dgemm_tflops,ratio,"
                   "err_max,err_med,dgemm_err_max,dgemm_err_med,phi\n");
    for (const Shape &s : shapes) {
        long long lda = s.ta ? s.m : s.k, ldb = s.tb ? s.k : s.n, ldd = s.n;
        size_t ea = (size_t)(s.ta ? s.k : s.m) * lda;
        size_t eb = (size_t)(s.tb ? s.n : s.k) * ldb;
        size_t ed = (size_t)s.m * ldd;
        double *A, *B, *D, *Dr;
        CK(cudaMalloc(&A, ea * 8));
        CK(cudaMalloc(&B, eb * 8));
        CK(cudaMalloc(&D, ed * 8));
        CK(cudaMalloc(&Dr, ed * 8));
        fill_f64_kernel<<<2048, 256>>>(A, ea, 1234567, phi);
        fill_f64_kernel<<<2048, 256>>>(B, eb, 7654321, phi);
        CK(cudaGetLastError());
        gemmk_problem_f64 p;
        memset(&p, 0, sizeof(p));
        p.m = s.m, p.n = s.n, p.k = s.k, p.trans_a = s.ta, p.trans_b = s.tb;
        p.a = A, p.b = B, p.d = D;
        p.lda = lda, p.ldb = ldb, p.ldc = p.ldd = ldd;
        p.alpha = 1, p.beta = 0;
        p.moduli = moduli;
        /* cuBLAS DGEMM: cuBLASLt, its heuristic's top 8 timed */
        cublasLtMatmulDesc_t op;
        cublasLtMatrixLayout_t la, lb, ld;
        CB(cublasLtMatmulDescCreate(&op, CUBLAS_COMPUTE_64F, CUDA_R_64F));
        cublasOperation_t opa = s.tb ? CUBLAS_OP_T : CUBLAS_OP_N;
        cublasOperation_t opb = s.ta ? CUBLAS_OP_T : CUBLAS_OP_N;
        CB(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSA, &opa,
                                          sizeof(opa)));
        CB(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSB, &opb,
                                          sizeof(opb)));
        CB(cublasLtMatrixLayoutCreate(&la, CUDA_R_64F, s.tb ? s.k : s.n,
                                      s.tb ? s.n : s.k, ldb));
        CB(cublasLtMatrixLayoutCreate(&lb, CUDA_R_64F, s.ta ? s.m : s.k,
                                      s.ta ? s.k : s.m, lda));
        CB(cublasLtMatrixLayoutCreate(&ld, CUDA_R_64F, s.n, s.m, ldd));
        cublasLtMatmulPreference_t pref;
        CB(cublasLtMatmulPreferenceCreate(&pref));
        CB(cublasLtMatmulPreferenceSetAttribute(
            pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &LT_WS,
            sizeof(LT_WS)));
        cublasLtMatmulHeuristicResult_t heur[8];
        int nres = 0;
        CB(cublasLtMatmulAlgoGetHeuristic(lt, op, la, lb, ld, ld, pref, 8, heur,
                                          &nres));
        cublasLtMatmulPreferenceDestroy(pref);
        double one = 1, zero = 0;
        auto dg = [&](int a) {
            CB(cublasLtMatmul(lt, op, &one, B, la, A, lb, &zero, Dr, ld, Dr, ld,
                              &heur[a].algo, lt_ws, LT_WS, 0));
        };
        auto time_fn = [&](auto fn, int n) { return time_runs(e0, e1, fn, n); };
        const int big = s.m * s.n * s.k >= (1ll << 40);
        const int nrep = big ? std::max(3, reps / 6) : reps;
        double t_b = 1e30;
        int best = 0;
        for (int a = 0; a < nres; a++) {
            dg(a);
            double ms = time_fn([&](int) { dg(a); }, big ? 2 : 3);
            if (ms < t_b)
                t_b = ms, best = a;
        }
        Sampler smp;
        smp.make(s, A, lda, B, ldb, 16);
        double bmx, bmd;
        dg(best);
        CK(cudaDeviceSynchronize());
        smp.errors(Dr, ldd, &bmx, &bmd);
        char nm[96];
        snprintf(nm, sizeof nm, "%lldx%lldx%lld%s", s.m, s.n, s.k,
                 s.ta || s.tb ? (s.ta ? (s.tb ? " TT" : " TN") : " NT") : "");
        for (const std::string &kn : kernels) {
            const char *kname = kn == "auto" ? nullptr : kn.c_str();
            gemmk_f64_result res;
            auto ours = [&](int) {
                int r = gemmk_gemm_f64(ctx, &p, 0, kname, &res);
                if (r != GEMM_OK) {
                    fprintf(stderr, "gemmk_gemm_f64: %d\n", r);
                    exit(1);
                }
            };
            ours(0);
            CK(cudaDeviceSynchronize());
            double t_o = 1e30, tb2 = t_b;
            for (int blk = 0; blk < 2; blk++) {
                t_o = std::min(t_o, time_fn(ours, nrep));
                tb2 = std::min(tb2, time_fn([&](int) { dg(best); }, nrep));
            }
            double mx = 0, md = 0;
            if (kn != "oz2-prep") {
                CK(cudaMemset(D, 0xff, ed * 8));
                ours(0);
                CK(cudaDeviceSynchronize());
                smp.errors(D, ldd, &mx, &md);
            }
            double flop = 2.0 * s.m * s.n * s.k;
            RowF64 r;
            r.name = nm;
            r.kernel = res.kernel ? res.kernel : "?";
            r.moduli = res.moduli;
            r.ours_tf = flop / t_o / 1e9;
            r.blas_tf = flop / tb2 / 1e9;
            r.e_max = mx, r.e_med = md, r.b_max = bmx, r.b_med = bmd;
            rows.push_back(r);
            if (g_sustain > 0)
                g_sustained.push_back(sustain_pair(
                    nm, r.kernel.c_str(), ours, [&](int) { dg(best); }, flop,
                    g_sustain));
            printf("%-20s %-12s n=%2d ours %6.2f TF/s (%.3f ms)  DGEMM %6.2f "
                   "TF/s  ratio %.3f  err max %.2e med %.2e (DGEMM %.2e "
                   "%.2e)%s%s\n",
                   nm, r.kernel.c_str(), r.moduli, r.ours_tf, t_o, r.blas_tf,
                   r.ours_tf / r.blas_tf, mx, md, bmx, bmd,
                   res.reason ? "  native: " : "",
                   res.reason ? res.reason : "");
            fflush(stdout);
            if (f)
                fprintf(f,
                        "%lldx%lldx%lld,%d,%d,%s,%d,%.3f,%.3f,%.4f,%.3e,%.3e,"
                        "%.3e,%.3e,%.2f\n",
                        s.m, s.n, s.k, s.ta, s.tb, r.kernel.c_str(), r.moduli,
                        r.ours_tf, r.blas_tf, r.ours_tf / r.blas_tf, mx, md,
                        bmx, bmd, phi);
        }
        cublasLtMatrixLayoutDestroy(la);
        cublasLtMatrixLayoutDestroy(lb);
        cublasLtMatrixLayoutDestroy(ld);
        cublasLtMatmulDescDestroy(op);
        cudaFree(A);
        cudaFree(B);
        cudaFree(D);
        cudaFree(Dr);
    }
    printf("\n| shape | kernel | moduli | ours TF/s | DGEMM TF/s | ratio | "
           "max err ours / DGEMM | median err ours / DGEMM |\n"
           "|---|---|---|---|---|---|---|---|\n");
    for (auto &r : rows)
        printf("| %s | %s | %d | %.2f | %.2f | %.3f | %.1e / %.1e | %.1e / "
               "%.1e |\n",
               r.name.c_str(), r.kernel.c_str(), r.moduli, r.ours_tf, r.blas_tf,
               r.ours_tf / r.blas_tf, r.e_max, r.b_max, r.e_med, r.b_med);
    print_sustained();
    return 0;
}

int main(int argc, char **argv)
{
    const char *set = "all", *type = "both", *csv = "bench_gemm.csv";
    const char *kernel_list = "auto", *shape_list = NULL;
    int reps = 30, blocks = 2, moduli = 0;
    double phi = 0.5;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--set"))
            set = argv[i + 1];
        else if (!strcmp(argv[i], "--type"))
            type = argv[i + 1];
        else if (!strcmp(argv[i], "--reps"))
            reps = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--csv"))
            csv = argv[i + 1];
        else if (!strcmp(argv[i], "--blocks"))
            blocks = std::max(1, atoi(argv[i + 1]));
        else if (!strcmp(argv[i], "--kernel"))
            kernel_list = argv[i + 1];
        else if (!strcmp(argv[i], "--shapes"))
            shape_list = argv[i + 1];
        else if (!strcmp(argv[i], "--phi"))
            phi = atof(argv[i + 1]);
        else if (!strcmp(argv[i], "--moduli"))
            moduli = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--sustain"))
            g_sustain = atof(argv[i + 1]);
        else if (!strcmp(argv[i], "--clocks"))
            g_clocks = atoi(argv[i + 1]) != 0;
        else if (!strcmp(argv[i], "--b2b"))
            g_b2b = std::max(1, atoi(argv[i + 1]));
    }
    std::vector<std::string> kernels;
    for (const char *q = kernel_list; *q;) {
        const char *e = strchr(q, ',');
        size_t n = e ? (size_t)(e - q) : strlen(q);
        if (n)
            kernels.push_back(std::string(q, n));
        q += n + (e ? 1 : 0);
    }
    if (kernels.empty())
        kernels.push_back("auto");
    std::vector<Shape> shapes;
    auto want = [&](const char *g) {
        return !strcmp(set, "all") || !strcmp(set, g) ||
               (!strcmp(set, "quick") && !strcmp(g, "quick"));
    };
    if (shape_list) {
        /* fp64's sets z128 and c64 take the shapes too */
        if (strcmp(type, "fp64") || (strcmp(set, "z128") && strcmp(set, "c64")))
            set = "";
        for (const char *q = shape_list; *q;) {
            Shape sh = {0, 0, 0, 0, 0, "custom"};
            int used = 0;
            if (sscanf(q, "%lldx%lldx%lld%n", &sh.m, &sh.n, &sh.k, &used) !=
                    3 ||
                sh.m < 1 || sh.n < 1 || sh.k < 1) {
                fprintf(stderr, "bad --shapes entry: %s\n", q);
                return 1;
            }
            q += used;
            if (q[0] == 't' && (q[1] == '0' || q[1] == '1') &&
                (q[2] == '0' || q[2] == '1')) {
                sh.ta = q[1] - '0', sh.tb = q[2] - '0';
                q += 3;
            }
            shapes.push_back(sh);
            if (*q == ',')
                q++;
            else if (*q) {
                fprintf(stderr, "bad --shapes entry near: %s\n", q);
                return 1;
            }
        }
    }
    if (!strcmp(set, "quick")) {
        shapes.push_back({2048, 2048, 2048, 0, 0, "quick"});
        shapes.push_back({4096, 4096, 4096, 0, 0, "quick"});
        shapes.push_back({8192, 8192, 8192, 0, 0, "quick"});
        shapes.push_back({8192, 8192, 8192, 0, 1, "quick"});
        shapes.push_back({128, 8192, 8192, 0, 0, "quick"});
        shapes.push_back({512, 8192, 8192, 0, 0, "quick"});
    }
    if (want("squares"))
        for (long long s = 512; s <= 16384; s *= 2)
            shapes.push_back({s, s, s, 0, 0, "squares"});
    if (want("big")) {
        shapes.push_back({8192, 6144, 4096, 0, 0, "big"});
        shapes.push_back({4096, 14336, 4096, 0, 0, "big"});
    }
    if (want("skinny"))
        for (long long n : {8192ll, 28672ll})
            for (long long m : {1ll, 16ll, 64ll, 128ll, 256ll, 512ll})
                shapes.push_back({m, n, 8192, 0, 0, "skinny"});
    if (want("misc"))
        shapes.push_back({3000, 5000, 700, 0, 0, "misc"});
    if (want("trans"))
        for (long long s : {4096ll, 8192ll})
            for (int t = 1; t < 4; t++) /* t = 0 is in squares */
                shapes.push_back({s, s, s, t >> 1, t & 1, "trans"});

    gemmk_ctx *ctx;
    int rv = gemmk_ctx_create(&ctx, 0);
    if (rv != GEMM_OK) {
        fprintf(stderr, "gemmk_ctx_create: %d\n", rv);
        return 1;
    }
    int sms = 0, mc2 = 0;
    gemmk_ctx_info(ctx, &sms, &mc2);
    printf("device: %d SMs, %d co-resident 2-CTA clusters\n", sms, mc2);
    if (g_b2b > 1)
        printf("timing: %d calls back to back a run (host time hidden)\n",
               g_b2b);
    else
        printf("timing: one call alone a run (host time before the launch "
               "included)\n");
    CB(cublasLtCreate(&lt));
    CK(cudaMalloc(&lt_ws, LT_WS));
    cudaEvent_t e0, e1;
    CK(cudaEventCreate(&e0));
    CK(cudaEventCreate(&e1));
    std::vector<Row> rows;
    FILE *f = fopen(csv, "w");
    if (!strcmp(type, "int8") || !strcmp(type, "fp64")) {
        int r = !strcmp(type, "int8")
                    ? bench_int8(ctx, !strcmp(set, "all") ? "int8" : set, reps,
                                 f, e0, e1)
                    : bench_fp64(ctx, !strcmp(set, "all") ? "fp64" : set, reps,
                                 f, e0, e1, phi, kernels, moduli, shapes);
        if (f)
            fclose(f);
        gemmk_ctx_destroy(ctx);
        return r;
    }
    if (!strcmp(type, "fp32")) {
        int r32 =
            bench_fp32(ctx, set, reps, f, e0, e1,
                       shape_list ? shapes : std::vector<Shape>(), kernels);
        if (f)
            fclose(f);
        gemmk_ctx_destroy(ctx);
        return r32;
    }
    if (f)
        fprintf(f, "shape,ta,tb,type,kernel,ours_tflops,cublas_tflops,ratio,"
                   "max_err,ours_tbs,cublas_tbs\n");

    for (int ti = 0; ti < 2; ti++) {
        bool bf16 = ti == 0;
        if (!strcmp(type, "bf16") && !bf16)
            continue;
        if (!strcmp(type, "fp16") && bf16)
            continue;
        cudaDataType_t ct = bf16 ? CUDA_R_16BF : CUDA_R_16F;
        for (const Shape &s : shapes) {
            const std::string st = gpu_state(); /* as the row starts */
            size_t ea = (s.ta ? s.k : s.m) * s.lda();
            size_t eb = (s.tb ? s.n : s.k) * s.ldb();
            size_t ed = s.m * s.ldd();
            size_t set_bytes = (ea + eb) * 2;
            int nsets = (int)std::min<size_t>(
                8, std::max<size_t>(1, (size_t)(400ull << 20) / set_bytes));
            std::vector<uint16_t *> A(nsets), B(nsets);
            for (int i = 0; i < nsets; i++) {
                CK(cudaMalloc(&A[i], ea * 2));
                CK(cudaMalloc(&B[i], eb * 2));
                fill_kernel<<<1024, 256>>>(A[i], ea, 1000 + 17 * i, bf16);
                fill_kernel<<<1024, 256>>>(B[i], eb, 5000 + 31 * i, bf16);
                CK(cudaGetLastError());
            }
            uint16_t *D, *Dref;
            CK(cudaMalloc(&D, ed * 2));
            CK(cudaMalloc(&Dref, ed * 2));

            gemmk_problem p;
            memset(&p, 0, sizeof(p));
            p.m = s.m, p.n = s.n, p.k = s.k;
            p.ab_type = bf16 ? GEMM_BF16 : GEMM_FP16;
            p.cd_type = p.ab_type;
            p.trans_a = s.ta, p.trans_b = s.tb;
            p.lda = s.lda(), p.ldb = s.ldb();
            p.ldc = p.ldd = s.ldd();
            p.alpha = 1, p.beta = 0;
            p.d = D;
            p.a = A[0], p.b = B[0];
            /* the kernel names to run (NULL: the heuristic) and what they
             * resolve to */
            const size_t nk = kernels.size();
            std::vector<const char *> kname(nk), kcfg(nk);
            for (size_t ki = 0; ki < nk; ki++) {
                kname[ki] = kernels[ki] == "auto" ? NULL : kernels[ki].c_str();
                kcfg[ki] = kname[ki];
                if (!kcfg[ki] && gemmk_select(ctx, &p, &kcfg[ki]) != GEMM_OK)
                    kcfg[ki] = "?";
            }

            std::vector<const char *> kran(nk); /* what last ran */
            auto ours_k = [&](size_t ki, int i) {
                p.a = A[i % nsets];
                p.b = B[i % nsets];
                gemmk_result res;
                int r = gemmk_gemm(ctx, &p, 0, kname[ki], &res);
                if (r != GEMM_OK) {
                    fprintf(stderr, "gemmk_gemm(%s): %d\n", kcfg[ki], r);
                    exit(1);
                }
                kran[ki] = res.kernel;
            };

            LtPlan lp;
            lt_make(lp, s, ct);
            cublasLtMatmulPreference_t pref;
            CB(cublasLtMatmulPreferenceCreate(&pref));
            CB(cublasLtMatmulPreferenceSetAttribute(
                pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &LT_WS,
                sizeof(LT_WS)));
            cublasLtMatmulHeuristicResult_t heur[8];
            int nres = 0;
            CB(cublasLtMatmulAlgoGetHeuristic(lt, lp.op, lp.la, lp.lb, lp.ld,
                                              lp.ld, pref, 8, heur, &nres));
            cublasLtMatmulPreferenceDestroy(pref);
            if (nres == 0) {
                fprintf(stderr, "no cuBLASLt algorithm\n");
                return 1;
            }
            auto time_fn = [&](auto fn, int n) {
                return time_runs(e0, e1, fn, n);
            };
            /* pick cuBLASLt's fastest of its heuristic's candidates */
            int best = 0;
            double best_ms = 1e30;
            for (int a = 0; a < nres; a++) {
                lt_run(lp, A[0], B[0], Dref, &heur[a].algo); /* warm */
                double ms = time_fn(
                    [&](int i) {
                        lt_run(lp, A[i % nsets], B[i % nsets], Dref,
                               &heur[a].algo);
                    },
                    std::max(3, reps / 5));
                if (ms < best_ms)
                    best_ms = ms, best = a;
            }
            for (size_t ki = 0; ki < nk; ki++) {
                for (int i = 0; i < 3; i++)
                    ours_k(ki, i); /* warm-up */
                if (!kname[ki] && kran[ki] && strcmp(kran[ki], kcfg[ki]))
                    fprintf(stderr,
                            "warning: gemmk_select named %s, auto ran %s\n",
                            kcfg[ki], kran[ki]);
            }
            CK(cudaDeviceSynchronize());
            /* interleave the measurements in blocks to share drift, the
             * kernels' order reversed every other block (the first timed
             * can run at a clock the GPU's power cap takes back later) */
            std::vector<std::vector<float>> to(nk);
            std::vector<float> tb;
            std::vector<ClockMean> clk_o(nk); /* --clocks */
            ClockMean clk_b;
            for (int blk = 0; blk < blocks; blk++) {
                for (size_t w = 0; w < nk; w++) {
                    const size_t ki = blk % 2 ? nk - 1 - w : w;
                    to[ki].push_back((float)time_fn(
                        [&](int i) { ours_k(ki, i); }, reps / 2));
                    clk_o[ki].add();
                }
                tb.push_back((float)time_fn(
                    [&](int i) {
                        lt_run(lp, A[i % nsets], B[i % nsets], Dref,
                               &heur[best].algo);
                    },
                    reps / 2));
                clk_b.add();
            }
            double ms_b = *std::min_element(tb.begin(), tb.end());

            /* cuBLAS's result on set 0, the reference for the errors */
            lt_run(lp, A[0], B[0], Dref, &heur[best].algo);
            CK(cudaDeviceSynchronize());
            std::vector<uint16_t> hd(ed), hr(ed);
            CK(cudaMemcpy(hr.data(), Dref, ed * 2, cudaMemcpyDeviceToHost));
            double ss = 0;
            for (size_t i = 0; i < ed; i++) {
                if ((long long)(i % s.ldd()) >= s.n)
                    continue;
                float r = h2f(hr[i], bf16);
                ss += (double)r * r;
            }
            double rms = sqrt(ss / ed) + 1e-30;
            for (size_t ki = 0; ki < nk; ki++) {
                double ms_o = *std::min_element(to[ki].begin(), to[ki].end());
                /* error: ours vs cuBLAS on set 0 */
                p.a = A[0], p.b = B[0];
                CK(cudaMemset(D, 0xFF, ed * 2));
                if (gemmk_gemm(ctx, &p, 0, kname[ki], NULL) != GEMM_OK)
                    return 1;
                CK(cudaDeviceSynchronize());
                CK(cudaMemcpy(hd.data(), D, ed * 2, cudaMemcpyDeviceToHost));
                double maxerr = 0;
                for (size_t i = 0; i < ed; i++) {
                    if ((long long)(i % s.ldd()) >= s.n)
                        continue; /* row padding: written by neither */
                    float o = h2f(hd[i], bf16), r = h2f(hr[i], bf16);
                    double e = isnan(o) ? INFINITY : fabs(o - r) / rms;
                    if (e > maxerr)
                        maxerr = e;
                }
                double flop = 2.0 * s.m * s.n * s.k;
                double bytes = (s.m * s.k + s.k * s.n + s.m * s.n) * 2.0;
                Row r;
                char nm[96];
                snprintf(nm, sizeof nm, "%lldx%lldx%lld%s", s.m, s.n, s.k,
                         s.ta || s.tb ? (s.ta ? (s.tb ? " TT" : " TN") : " NT")
                                      : "");
                r.name = nm;
                r.type = bf16 ? "bf16" : "fp16";
                r.ours_cfg = kcfg[ki];
                r.ours_tf = flop / ms_o / 1e9;
                r.blas_tf = flop / ms_b / 1e9;
                r.ratio = ms_b / ms_o;
                r.err = maxerr;
                r.ours_tbs = bytes / ms_o / 1e9;
                r.blas_tbs = bytes / ms_b / 1e9;
                r.skinny = s.m <= 128;
                rows.push_back(r);
                if (g_sustain > 0) {
                    std::string sn = r.name + " " + r.type;
                    g_sustained.push_back(sustain_pair(
                        sn.c_str(), kcfg[ki], [&](int i) { ours_k(ki, i); },
                        [&](int i) {
                            lt_run(lp, A[i % nsets], B[i % nsets], Dref,
                                   &heur[best].algo);
                        },
                        flop, g_sustain));
                }
                printf("%-22s %s %-17s ours %7.1f TF/s  cublas %7.1f TF/s  "
                       "ratio %.3f  err %.1e  (%.2f / %.2f TB/s)  [%s]\n",
                       r.name.c_str(), r.type.c_str(), kcfg[ki], r.ours_tf,
                       r.blas_tf, r.ratio, r.err, r.ours_tbs, r.blas_tbs,
                       st.c_str());
                if (g_clocks)
                    printf("%-22s %s %-17s clock: ours %.0f MHz, cuBLAS %.0f "
                           "MHz\n",
                           r.name.c_str(), r.type.c_str(), kcfg[ki],
                           clk_o[ki].mean(), clk_b.mean());
                fflush(stdout);
                if (f)
                    fprintf(f,
                            "%lldx%lldx%lld,%d,%d,%s,%s,%.2f,%.2f,%.4f,%.3e,"
                            "%.3f,%.3f\n",
                            s.m, s.n, s.k, s.ta, s.tb, r.type.c_str(), kcfg[ki],
                            r.ours_tf, r.blas_tf, r.ratio, r.err, r.ours_tbs,
                            r.blas_tbs);
            }
            lt_free(lp);
            for (int i = 0; i < nsets; i++) {
                cudaFree(A[i]);
                cudaFree(B[i]);
            }
            cudaFree(D);
            cudaFree(Dref);
        }
    }
    if (f)
        fclose(f);
    printf("\n| shape | type | kernel | ours TF/s | cuBLAS TF/s | ratio | "
           "max err (/rms) | ours TB/s |\n|---|---|---|---|---|---|---|---|\n");
    double lg = 0, lgs = 0, worst = 1e9;
    int ns = 0;
    for (auto &r : rows) {
        printf("| %s | %s | %s | %.1f | %.1f | %.3f | %.1e | %.2f |\n",
               r.name.c_str(), r.type.c_str(), r.ours_cfg.c_str(), r.ours_tf,
               r.blas_tf, r.ratio, r.err, r.ours_tbs);
        lg += log(r.ratio);
        if (r.skinny)
            lgs += log(r.ratio), ns++;
        worst = std::min(worst, r.ratio);
    }
    if (!rows.empty())
        printf("\ngeomean ratio %.3f over %zu shapes; skinny (M<=128) geomean "
               "%.3f over %d; worst %.3f\n",
               exp(lg / rows.size()), rows.size(), ns ? exp(lgs / ns) : 0.0, ns,
               worst);
    print_sustained();
    gemmk_ctx_destroy(ctx);
    return 0;
}
