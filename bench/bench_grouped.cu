/*
 * bench_grouped.cu: gemmk_gemm_grouped (one launch of the grouped kernel
 * over every problem's tiles) against the alternatives in the same
 * process, bf16 in and out, fp32 accumulation, row-major:
 *
 *   1024 x 64^3      grouped vs 1024 gemmk_gemm calls vs cuBLAS strided
 *   64 x 512^3       grouped vs cublasGemmStridedBatchedEx
 *   16 x 2048^3      grouped vs cublasGemmStridedBatchedEx
 *   MoE 8 / 64       grouped vs cublasGemmGroupedBatchedEx (one group
 *                    per expert), N x K = 4096 x 4096, 7168 x 2048 and
 *                    2048 x 7168, M per expert skewed (Zipf 1.2) summing
 *                    to 4096 and to 16384 tokens
 *
 * and the fp64 rows (a strided batch of the wide types runs as one
 * cuBLAS strided-batched call inside gemmk_gemm_grouped):
 *
 *   fp64 1024 x 64^3   grouped vs 1024 gemmk_gemm calls vs cuBLAS strided
 *   fp64 64 x 512^3    grouped vs cublasDgemmStridedBatched
 *   fp64 16 x 2048^3   grouped vs cublasDgemmStridedBatched
 *
 * Each timing is the median of REPS runs between CUDA events, L2 flushed
 * (a 256 MiB memset) before each, then a 0.5 ms spin kernel that keeps
 * the GPU busy while the host queues the call: the span is the GPU's
 * work, for the grouped call and for cuBLAS alike (a host part longer
 * than the spin, as 1024 gemmk_gemm calls have, still shows). The host's
 * own time per grouped call (validation, tensor-map encoding, the
 * table's copy) is shown apart: "host us", the wall time of the
 * gemmk_gemm_grouped call.
 * Inputs are random in [-1, 1); every row checks the grouped Ds against
 * cuBLAS's (|x - y| <= 1% |y| + 0.02 sqrt(K) / 8: the same fp32 sums in
 * other orders, rounded to bf16; fp64: |x - y| <= 1e-12 max |y|). Ratio =
 * cuBLAS time / grouped time
 * (> 1: grouped faster). A table is printed last. Runs in well under a
 * minute on an H100. Usage: bench_grouped [--reps N] [--rows all|strided|
 * moe|fp64] (strided: the three bf16 strided rows only).
 */
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <algorithm>
#include <string>
#include <vector>

#include "cuda_check.h"
#include "gemm_kernels.h"

static int REPS = 20;

static __global__ void fill_bf16(__nv_bfloat16 *p, size_t n, uint64_t seed)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x) {
        uint64_t x = (seed + i) * 0x9E3779B97F4A7C15ull;
        x ^= x >> 31;
        x *= 0xbf58476d1ce4e5b9ull;
        x ^= x >> 29;
        float v = (float)(x >> 40) * (2.0f / 16777216.0f) - 1.0f;
        p[i] = __float2bfloat16_rn(v);
    }
}

static __nv_bfloat16 *dev_bf16(size_t n, uint64_t seed)
{
    __nv_bfloat16 *p;
    CK(cudaMalloc(&p, n * 2));
    fill_bf16<<<1024, 256>>>(p, n, seed);
    CK(cudaGetLastError());
    return p;
}

static __global__ void fill_f64(double *p, size_t n, uint64_t seed)
{
    for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
         i += (size_t)gridDim.x * blockDim.x) {
        uint64_t x = (seed + i) * 0x9E3779B97F4A7C15ull;
        x ^= x >> 31;
        x *= 0xbf58476d1ce4e5b9ull;
        x ^= x >> 29;
        p[i] = (double)(x >> 11) * (2.0 / 9007199254740992.0) - 1.0;
    }
}

static double *dev_f64(size_t n, uint64_t seed)
{
    double *p;
    CK(cudaMalloc(&p, n * 8));
    fill_f64<<<1024, 256>>>(p, n, seed);
    CK(cudaGetLastError());
    return p;
}

static double now_s()
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

/* Keeps the GPU busy for about `cycles` clocks, so that the host work of
 * the call after it (queued meanwhile) stays out of the timed span. */
__global__ void spin(long long cycles)
{
    const long long t0 = clock64();
    while (clock64() - t0 < cycles) {
    }
}

struct Timer {
    cudaEvent_t a, b;
    void *flush;
    size_t flush_bytes = (size_t)256 << 20;
    Timer()
    {
        CK(cudaEventCreate(&a));
        CK(cudaEventCreate(&b));
        CK(cudaMalloc(&flush, flush_bytes));
    }
    /* median ms of fn over REPS runs (after one warm-up) */
    template <typename F> double median(cudaStream_t s, F fn)
    {
        fn();
        CK(cudaStreamSynchronize(s));
        std::vector<double> t;
        for (int r = 0; r < REPS; r++) {
            CK(cudaMemsetAsync(flush, r & 0xff, flush_bytes, s));
            spin<<<1, 1, 0, s>>>(1000000); /* ~0.5 ms: longer than any host
                                              part of fn */
            CK(cudaGetLastError());
            CK(cudaEventRecord(a, s));
            fn();
            CK(cudaEventRecord(b, s));
            CK(cudaEventSynchronize(b));
            float ms;
            CK(cudaEventElapsedTime(&ms, a, b));
            t.push_back(ms);
        }
        std::sort(t.begin(), t.end());
        return t[t.size() / 2];
    }
};

struct Row {
    std::string name, other;
    double flop, ours_ms, other_ms, host_us;
    double err; /* worst |x - y| / bound over the checked elements */
};

static std::vector<Row> g_rows;

/* The problems of a batch, row-major bf16, beta 0. */
static gemmk_problem bf16_problem(const void *a, const void *b, void *d,
                                  int64_t m, int64_t n, int64_t k)
{
    gemmk_problem p;
    memset(&p, 0, sizeof(p));
    p.m = m, p.n = n, p.k = k;
    p.ab_type = GEMM_BF16;
    p.cd_type = GEMM_BF16;
    p.a = a, p.b = b, p.d = d;
    p.lda = k, p.ldb = n, p.ldd = n, p.ldc = n;
    p.alpha = 1.f;
    p.precision = GEMM_PRECISION_DEFAULT;
    return p;
}

static void grouped(gemmk_ctx *ctx, const std::vector<gemmk_problem> &ps,
                    cudaStream_t s)
{
    gemmk_result res;
    gemm_error e = gemmk_gemm_grouped(ctx, ps.data(), (int)ps.size(), s, &res);
    if (e != GEMM_OK) {
        fprintf(stderr, "gemmk_gemm_grouped: error %d: %s\n", (int)e, res.msg);
        exit(2);
    }
}

/* Host wall time of one gemmk_gemm_grouped call, microseconds (median). */
static double host_us(gemmk_ctx *ctx, const std::vector<gemmk_problem> &ps,
                      cudaStream_t s)
{
    std::vector<double> t;
    for (int r = 0; r < REPS; r++) {
        CK(cudaStreamSynchronize(s));
        double t0 = now_s();
        grouped(ctx, ps, s);
        t.push_back((now_s() - t0) * 1e6);
    }
    CK(cudaStreamSynchronize(s));
    std::sort(t.begin(), t.end());
    return t[t.size() / 2];
}

/* Compares bf16 arrays x (ours) and y (cuBLAS) of n elements. */
static double compare(const __nv_bfloat16 *x, const __nv_bfloat16 *y, size_t n,
                      int64_t k)
{
    std::vector<__nv_bfloat16> hx(n), hy(n);
    CK(cudaMemcpy(hx.data(), x, n * 2, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(hy.data(), y, n * 2, cudaMemcpyDeviceToHost));
    double worst = 0;
    for (size_t i = 0; i < n; i++) {
        double a = __bfloat162float(hx[i]), b = __bfloat162float(hy[i]);
        double bound = 0.01 * fabs(b) + 0.02 * sqrt((double)k) / 8;
        double r = fabs(a - b) / bound;
        if (!(r <= worst))
            worst = r; /* NaN too */
    }
    return worst;
}

/*
 * The rows of one batch ps: the grouped call against `other` (cuBLAS in
 * the same process, `against` naming it), both timed, run once more each
 * and compared by `check` (its worst error over its bound); with loop,
 * a second row against one gemmk_gemm call per problem.
 */
template <typename Other, typename Check>
static void add_rows(gemmk_ctx *ctx, Timer &tm, cudaStream_t s,
                     const char *name, const char *against, double flop,
                     const std::vector<gemmk_problem> &ps, Other other,
                     Check check, bool loop)
{
    Row r;
    r.name = name;
    r.other = against;
    r.flop = flop;
    r.ours_ms = tm.median(s, [&] { grouped(ctx, ps, s); });
    r.other_ms = tm.median(s, other);
    r.host_us = host_us(ctx, ps, s);
    grouped(ctx, ps, s);
    other();
    CK(cudaStreamSynchronize(s));
    r.err = check();
    g_rows.push_back(r);
    if (!loop)
        return;
    Row l = r;
    l.other = "gemmk_gemm x batch";
    l.other_ms = tm.median(s, [&] {
        for (auto &p : ps) {
            gemmk_result res;
            gemm_error e = gemmk_gemm(ctx, &p, s, nullptr, &res);
            if (e != GEMM_OK) {
                fprintf(stderr, "gemmk_gemm: %s\n", res.msg);
                exit(2);
            }
        }
    });
    g_rows.push_back(l);
}

/* batch x (m, n, k), strided: grouped against cuBLAS strided batched;
 * with loop, also 'batch' gemmk_gemm calls. */
static void strided(gemmk_ctx *ctx, cublasHandle_t h, Timer &tm, cudaStream_t s,
                    int batch, int64_t m, int64_t n, int64_t k, bool loop)
{
    __nv_bfloat16 *A = dev_bf16((size_t)batch * m * k, 1);
    __nv_bfloat16 *B = dev_bf16((size_t)batch * k * n, 2);
    __nv_bfloat16 *D, *Dc;
    CK(cudaMalloc(&D, (size_t)batch * m * n * 2));
    CK(cudaMalloc(&Dc, (size_t)batch * m * n * 2));
    std::vector<gemmk_problem> ps;
    for (int i = 0; i < batch; i++)
        ps.push_back(bf16_problem(A + (size_t)i * m * k, B + (size_t)i * k * n,
                                  D + (size_t)i * m * n, m, n, k));
    const float one = 1.f, zero = 0.f;
    auto cub = [&] {
        CB(cublasGemmStridedBatchedEx(
            h, CUBLAS_OP_N, CUBLAS_OP_N, (int)n, (int)m, (int)k, &one, B,
            CUDA_R_16BF, (int)n, k * n, A, CUDA_R_16BF, (int)k, m * k, &zero,
            Dc, CUDA_R_16BF, (int)n, m * n, batch, CUBLAS_COMPUTE_32F,
            CUBLAS_GEMM_DEFAULT));
    };
    char name[64];
    snprintf(name, sizeof(name), "%d x %lld^3", batch, (long long)m);
    add_rows(
        ctx, tm, s, name, "cuBLAS strided", 2.0 * batch * m * n * k, ps, cub,
        [&] { return compare(D, Dc, (size_t)batch * m * n, k); }, loop);
    CK(cudaFree(A));
    CK(cudaFree(B));
    CK(cudaFree(D));
    CK(cudaFree(Dc));
}

/* Compares fp64 arrays x (ours) and y (cuBLAS) of n elements: the worst
 * |x - y| over 1e-12 max |y|. */
static double compare_f64(const double *x, const double *y, size_t n)
{
    std::vector<double> hx(n), hy(n);
    CK(cudaMemcpy(hx.data(), x, n * 8, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(hy.data(), y, n * 8, cudaMemcpyDeviceToHost));
    double big = 0, worst = 0;
    for (size_t i = 0; i < n; i++)
        big = std::max(big, fabs(hy[i]));
    for (size_t i = 0; i < n; i++) {
        double r = fabs(hx[i] - hy[i]) / (1e-12 * big);
        if (!(r <= worst))
            worst = r; /* NaN too */
    }
    return worst;
}

/* batch x (m, n, k) fp64, strided: grouped (one strided-batched cuBLAS
 * call inside) against cublasDgemmStridedBatched; with loop, also
 * 'batch' gemmk_gemm calls. */
static void strided_f64(gemmk_ctx *ctx, cublasHandle_t h, Timer &tm,
                        cudaStream_t s, int batch, int64_t m, int64_t n,
                        int64_t k, bool loop)
{
    double *A = dev_f64((size_t)batch * m * k, 5);
    double *B = dev_f64((size_t)batch * k * n, 6);
    double *D, *Dc;
    CK(cudaMalloc(&D, (size_t)batch * m * n * 8));
    CK(cudaMalloc(&Dc, (size_t)batch * m * n * 8));
    std::vector<gemmk_problem> ps;
    for (int i = 0; i < batch; i++) {
        gemmk_problem p =
            bf16_problem(A + (size_t)i * m * k, B + (size_t)i * k * n,
                         D + (size_t)i * m * n, m, n, k);
        p.ab_type = p.cd_type = GEMM_FP64;
        p.zalpha[0] = 1.0;
        ps.push_back(p);
    }
    const double one = 1.0, zero = 0.0;
    auto cub = [&] {
        CB(cublasDgemmStridedBatched(
            h, CUBLAS_OP_N, CUBLAS_OP_N, (int)n, (int)m, (int)k, &one, B,
            (int)n, k * n, A, (int)k, m * k, &zero, Dc, (int)n, m * n, batch));
    };
    char name[64];
    snprintf(name, sizeof(name), "fp64 %d x %lld^3", batch, (long long)m);
    add_rows(
        ctx, tm, s, name, "cuBLAS strided", 2.0 * batch * m * n * k, ps, cub,
        [&] { return compare_f64(D, Dc, (size_t)batch * m * n); }, loop);
    CK(cudaFree(A));
    CK(cudaFree(B));
    CK(cudaFree(D));
    CK(cudaFree(Dc));
}

/* Mixture of experts: `experts` problems (M_i x K) (K x N), M_i skewed,
 * summing to tokens; grouped against cublasGemmGroupedBatchedEx. */
static void moe(gemmk_ctx *ctx, cublasHandle_t h, Timer &tm, cudaStream_t s,
                int experts, int tokens, int64_t n, int64_t k)
{
    std::vector<int> ms(experts);
    double wsum = 0;
    for (int i = 0; i < experts; i++)
        wsum += 1.0 / pow(i + 1, 1.2);
    int left = tokens;
    for (int i = experts - 1; i >= 0; i--) { /* smallest first, >= 1 each */
        ms[i] = std::max(1, (int)(tokens / pow(i + 1, 1.2) / wsum));
        if (i == 0)
            ms[i] = left;
        left -= ms[i];
    }
    __nv_bfloat16 *X = dev_bf16((size_t)tokens * k, 3);
    __nv_bfloat16 *W = dev_bf16((size_t)experts * k * n, 4);
    __nv_bfloat16 *Y, *Yc;
    CK(cudaMalloc(&Y, (size_t)tokens * n * 2));
    CK(cudaMalloc(&Yc, (size_t)tokens * n * 2));
    std::vector<gemmk_problem> ps;
    std::vector<const void *> pa, pb;
    std::vector<void *> pc;
    std::vector<int> vm, vn, vk, lda, ldb, ldc, gsize;
    std::vector<cublasOperation_t> op;
    std::vector<float> alpha, beta;
    size_t off = 0;
    for (int i = 0; i < experts; i++) {
        ps.push_back(bf16_problem(X + off * k, W + (size_t)i * k * n,
                                  Y + off * n, ms[i], n, k));
        /* column-major: D^T (n x m) = B^T (n x k) A^T (k x m) */
        pa.push_back(W + (size_t)i * k * n);
        pb.push_back(X + off * k);
        pc.push_back(Yc + off * n);
        vm.push_back((int)n), vn.push_back(ms[i]), vk.push_back((int)k);
        lda.push_back((int)n), ldb.push_back((int)k), ldc.push_back((int)n);
        gsize.push_back(1);
        op.push_back(CUBLAS_OP_N);
        alpha.push_back(1.f), beta.push_back(0.f);
        off += ms[i];
    }
    void **dptr;
    CK(cudaMalloc(&dptr, 3 * experts * sizeof(void *)));
    CK(cudaMemcpy(dptr, pa.data(), experts * sizeof(void *),
                  cudaMemcpyHostToDevice));
    CK(cudaMemcpy(dptr + experts, pb.data(), experts * sizeof(void *),
                  cudaMemcpyHostToDevice));
    CK(cudaMemcpy(dptr + 2 * experts, pc.data(), experts * sizeof(void *),
                  cudaMemcpyHostToDevice));
    auto cub = [&] {
        CB(cublasGemmGroupedBatchedEx(
            h, op.data(), op.data(), vm.data(), vn.data(), vk.data(),
            alpha.data(), (const void *const *)dptr, CUDA_R_16BF, lda.data(),
            (const void *const *)(dptr + experts), CUDA_R_16BF, ldb.data(),
            beta.data(), dptr + 2 * experts, CUDA_R_16BF, ldc.data(), experts,
            gsize.data(), CUBLAS_COMPUTE_32F));
    };
    char name[64];
    snprintf(name, sizeof(name), "MoE %d/%d %ldx%ld (M %d..%d)", experts,
             tokens, (long)n, (long)k, ms[experts - 1], ms[0]);
    add_rows(
        ctx, tm, s, name, "cuBLAS grouped", 2.0 * tokens * n * k, ps, cub,
        [&] { return compare(Y, Yc, (size_t)tokens * n, k); }, false);
    CK(cudaFree(dptr));
    CK(cudaFree(X));
    CK(cudaFree(W));
    CK(cudaFree(Y));
    CK(cudaFree(Yc));
}

int main(int argc, char **argv)
{
    const char *rows = "all";
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--reps") && i + 1 < argc) {
            REPS = std::max(1, atoi(argv[++i]));
        } else if (!strcmp(argv[i], "--rows") && i + 1 < argc) {
            rows = argv[++i];
        } else {
            fprintf(stderr, "usage: bench_grouped [--reps N] [--rows "
                            "all|strided|moe|fp64]\n");
            return 2;
        }
    }
    const bool all = !strcmp(rows, "all");
    const bool do_strided = all || !strcmp(rows, "strided");
    const bool do_moe = all || !strcmp(rows, "moe");
    const bool do_f64 = all || !strcmp(rows, "fp64");
    if (!do_strided && !do_moe && !do_f64) {
        fprintf(stderr,
                "bench_grouped: --rows %s: all, strided, moe or "
                "fp64\n",
                rows);
        return 2;
    }
    int ndev = 0;
    if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev == 0) {
        printf("no CUDA device: nothing to measure\n");
        return 77;
    }
    double t0 = now_s();
    gemmk_ctx *ctx;
    gemm_error e = gemmk_ctx_create(&ctx, 0);
    if (e != GEMM_OK) {
        fprintf(stderr, "gemmk_ctx_create: error %d\n", (int)e);
        return 2;
    }
    cudaStream_t s;
    CK(cudaStreamCreate(&s));
    cublasHandle_t h;
    CB(cublasCreate(&h));
    CB(cublasSetStream(h, s));
    Timer tm;

    if (do_strided) {
        strided(ctx, h, tm, s, 1024, 64, 64, 64, true);
        strided(ctx, h, tm, s, 64, 512, 512, 512, false);
        strided(ctx, h, tm, s, 16, 2048, 2048, 2048, false);
    }
    if (do_moe) {
        const int64_t moe_nk[3][2] = {{4096, 4096}, {7168, 2048}, {2048, 7168}};
        for (const auto &nk : moe_nk)
            for (int tokens : {4096, 16384})
                for (int experts : {8, 64})
                    moe(ctx, h, tm, s, experts, tokens, nk[0], nk[1]);
    }
    if (do_f64) {
        strided_f64(ctx, h, tm, s, 1024, 64, 64, 64, true);
        strided_f64(ctx, h, tm, s, 64, 512, 512, 512, false);
        strided_f64(ctx, h, tm, s, 16, 2048, 2048, 2048, false);
    }

    cudaDeviceProp prop;
    CK(cudaGetDeviceProperties(&prop, 0));
    printf("\nbench_grouped on %s, bf16 in/out with fp32 accumulation (fp64 "
           "rows: fp64), median of %d, L2 flushed (%.1f s)\n\n",
           prop.name, REPS, now_s() - t0);
    printf("%-38s %-20s %10s %9s %10s %9s %7s %9s %7s\n", "case", "against",
           "grouped ms", "TFLOP/s", "other ms", "TFLOP/s", "ratio", "host us",
           "check");
    bool bad = false;
    for (const Row &r : g_rows) {
        bool ok = r.err <= 1.0;
        bad = bad || !ok;
        printf("%-38s %-20s %10.4f %9.1f %10.4f %9.1f %6.3fx %9.1f %7s\n",
               r.name.c_str(), r.other.c_str(), r.ours_ms,
               r.flop / r.ours_ms * 1e-9, r.other_ms,
               r.flop / r.other_ms * 1e-9, r.other_ms / r.ours_ms, r.host_us,
               ok ? "ok" : "FAIL");
    }
    printf("\nratio: the other's time / the grouped call's (> 1: grouped "
           "faster); host us: the gemmk_gemm_grouped call's host time\n");
    CB(cublasDestroy(h));
    CK(cudaStreamDestroy(s));
    gemmk_ctx_destroy(ctx);
    return bad ? 1 : 0;
}
