/*
 * bench_host.cu: the host time a GEMM call costs its caller, ours
 * (gemmk_gemm, `auto` and the kernel it resolves to, by name) against
 * cuBLASLt (cublasLtMatmul with its heuristic's first algorithm, chosen
 * before timing) and cublasGemmEx, in one process on the same operands.
 *
 * Host time: the calls issued back to back (the GPU behind, so that no
 * call waits for it), the issuing thread's wall time over their count.
 * Back to back: the same calls until the GPU is done, over their count,
 * which for kernels shorter than their host time is the host time.
 * bench_gemm times each call alone between two events, so a call's host
 * time before its launch is part of what it reports.
 *
 * Usage: bench_host [--shapes MxNxK,...] [--calls N] [--type bf16|fp16]
 * Prints a table (us a call); bf16 or fp16 in and out, row-major, alpha
 * 1, beta 0.
 */
#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <string>
#include <vector>

#include "bench_util.h"
#include "cuda_check.h"
#include "gemm_kernels.h"

struct Times {
    double host_us, b2b_us;
};

/* fn() `calls` times back to back: host and back-to-back us a call. */
template <typename F> static Times time_calls(F fn, int calls)
{
    fn();
    CK(cudaDeviceSynchronize());
    const double t0 = now_s();
    for (int i = 0; i < calls; i++)
        fn();
    const double t1 = now_s();
    CK(cudaDeviceSynchronize());
    const double t2 = now_s();
    CK(cudaGetLastError());
    return {(t1 - t0) * 1e6 / calls, (t2 - t0) * 1e6 / calls};
}

/* cuBLASLt on row-major D = A B as column-major D^T = B^T A^T, with the
 * heuristic's first algorithm. */
struct Lt {
    cublasLtHandle_t h;
    cublasLtMatmulDesc_t op;
    cublasLtMatrixLayout_t la, lb, ld;
    cublasLtMatmulAlgo_t algo;
    void *ws;
    size_t ws_bytes = 32u << 20;
};

static void lt_make(Lt &l, long long m, long long n, long long k,
                    cudaDataType_t t)
{
    CB(cublasLtCreate(&l.h));
    CB(cublasLtMatmulDescCreate(&l.op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    CB(cublasLtMatrixLayoutCreate(&l.lb, t, n, k, n)); /* B^T: n x k */
    CB(cublasLtMatrixLayoutCreate(&l.la, t, k, m, k)); /* A^T: k x m */
    CB(cublasLtMatrixLayoutCreate(&l.ld, t, n, m, n));
    CK(cudaMalloc(&l.ws, l.ws_bytes));
    cublasLtMatmulPreference_t pref;
    CB(cublasLtMatmulPreferenceCreate(&pref));
    CB(cublasLtMatmulPreferenceSetAttribute(
        pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &l.ws_bytes,
        sizeof(l.ws_bytes)));
    cublasLtMatmulHeuristicResult_t r;
    int got = 0;
    CB(cublasLtMatmulAlgoGetHeuristic(l.h, l.op, l.lb, l.la, l.ld, l.ld, pref,
                                      1, &r, &got));
    if (got < 1) {
        fprintf(stderr, "cuBLASLt: no algorithm\n");
        exit(1);
    }
    l.algo = r.algo;
    CB(cublasLtMatmulPreferenceDestroy(pref));
}

static void lt_free(Lt &l)
{
    cublasLtMatrixLayoutDestroy(l.la);
    cublasLtMatrixLayoutDestroy(l.lb);
    cublasLtMatrixLayoutDestroy(l.ld);
    cublasLtMatmulDescDestroy(l.op);
    cublasLtDestroy(l.h);
    CK(cudaFree(l.ws));
}

int main(int argc, char **argv)
{
    std::string shapes = "1x8192x8192,64x8192x8192,128x8192x8192,"
                         "64x28672x8192,512x512x512,2048x2048x2048,"
                         "4096x4096x4096";
    int calls = 200;
    bool f16 = false;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--shapes") && i + 1 < argc)
            shapes = argv[++i];
        else if (!strcmp(argv[i], "--calls") && i + 1 < argc)
            calls = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--type") && i + 1 < argc)
            f16 = !strcmp(argv[++i], "fp16");
        else {
            fprintf(stderr,
                    "usage: bench_host [--shapes MxNxK,...] [--calls N] "
                    "[--type bf16|fp16]\n");
            return 2;
        }
    }
    if (calls < 1)
        calls = 1;
    gemmk_ctx *ctx;
    if (gemmk_ctx_create(&ctx, 0) != GEMM_OK) {
        fprintf(stderr, "bench_host: no Hopper GPU (gemmk_ctx_create)\n");
        return 1;
    }
    cublasHandle_t blas;
    CB(cublasCreate(&blas));
    const cudaDataType_t t = f16 ? CUDA_R_16F : CUDA_R_16BF;
    printf("| shape | type | kernel | auto host | by name host | cuBLASLt "
           "host | GemmEx host | auto back to back | cuBLASLt back to back "
           "|\n|---|---|---|---|---|---|---|---|---|\n");
    size_t pos = 0;
    while (pos < shapes.size()) {
        size_t end = shapes.find(',', pos);
        if (end == std::string::npos)
            end = shapes.size();
        long long m, n, k;
        if (sscanf(shapes.substr(pos, end - pos).c_str(), "%lldx%lldx%lld", &m,
                   &n, &k) != 3) {
            fprintf(stderr, "bad shape %s\n",
                    shapes.substr(pos, end - pos).c_str());
            return 2;
        }
        pos = end + 1;
        void *A, *B, *D;
        CK(cudaMalloc(&A, m * k * 2));
        CK(cudaMalloc(&B, k * n * 2));
        CK(cudaMalloc(&D, m * n * 2));
        CK(cudaMemset(A, 0x3c, m * k * 2)); /* small finite values */
        CK(cudaMemset(B, 0x3c, k * n * 2));
        gemmk_problem p = {};
        p.m = m, p.n = n, p.k = k;
        p.ab_type = p.cd_type = f16 ? GEMM_FP16 : GEMM_BF16;
        p.a = A, p.b = B, p.d = D;
        p.lda = k, p.ldb = n, p.ldd = n;
        p.alpha = 1.f, p.beta = 0.f;
        gemmk_result r = {};
        if (gemmk_gemm(ctx, &p, 0, "auto", &r) != GEMM_OK) {
            fprintf(stderr, "gemmk_gemm %lldx%lldx%lld: %s\n", m, n, k, r.msg);
            return 1;
        }
        const char *name = r.kernel;
        auto ours = [&](const char *kn) {
            if (gemmk_gemm(ctx, &p, 0, kn, nullptr) != GEMM_OK) {
                fprintf(stderr, "gemmk_gemm %s failed\n", kn);
                exit(1);
            }
        };
        Lt lt;
        lt_make(lt, m, n, k, t);
        const float one = 1.f, zero = 0.f;
        const Times ta = time_calls([&] { ours("auto"); }, calls);
        const Times tn = time_calls([&] { ours(name); }, calls);
        const Times tl = time_calls(
            [&] {
                CB(cublasLtMatmul(lt.h, lt.op, &one, B, lt.lb, A, lt.la, &zero,
                                  D, lt.ld, D, lt.ld, &lt.algo, lt.ws,
                                  lt.ws_bytes, 0));
            },
            calls);
        const Times tg = time_calls(
            [&] {
                CB(cublasGemmEx(blas, CUBLAS_OP_N, CUBLAS_OP_N, (int)n, (int)m,
                                (int)k, &one, B, t, (int)n, A, t, (int)k, &zero,
                                D, t, (int)n, CUBLAS_COMPUTE_32F,
                                CUBLAS_GEMM_DEFAULT));
            },
            calls);
        printf("| %lldx%lldx%lld | %s | %s | %.2f | %.2f | %.2f | %.2f | %.2f "
               "| %.2f |\n",
               m, n, k, f16 ? "fp16" : "bf16", name, ta.host_us, tn.host_us,
               tl.host_us, tg.host_us, ta.b2b_us, tl.b2b_us);
        fflush(stdout);
        lt_free(lt);
        CK(cudaFree(A));
        CK(cudaFree(B));
        CK(cudaFree(D));
    }
    cublasDestroy(blas);
    gemmk_ctx_destroy(ctx);
    return 0;
}
