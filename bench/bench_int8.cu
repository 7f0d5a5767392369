/*
 * bench_int8.cu: bench_gemm --type int8 (bench_gemm.cu's comment): ours
 * (gemmk_gemm_s8) against cuBLASLt int8, results compared exactly.
 */
#include <cuda_runtime.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <algorithm>
#include <string>
#include <vector>

#include "bench_fill.h"
#include "bench_gemm.h"

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
int bench_int8(gemmk_ctx *ctx, const char *set, int reps, FILE *f,
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
            fill_s8(A[i], ea, 7000 + 13 * i);
            fill_s8(B[i], eb, 9000 + 29 * i);
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
        LtPlan lp;
        lt_make_typed(lp, s, CUDA_R_8I, CUDA_R_32I, CUBLAS_COMPUTE_32I,
                      CUDA_R_32I, lda, ldb, ldd);
        cublasLtMatmulHeuristicResult_t heur[8];
        const int nres = lt_heuristics(lp, heur, true);
        const cublasLtMatmulDesc_t op = lp.op;
        const cublasLtMatrixLayout_t la = lp.la, lb = lp.lb, ld = lp.ld;
        int32_t one = 1, zero = 0;
        auto lt_run8 = [&](int a, int i, int32_t *out) {
            CB(cublasLtMatmul(lt, op, &one, B[i % nsets], la, A[i % nsets], lb,
                              &zero, out, ld, out, ld, &heur[a].algo, lt_ws,
                              LT_WS, 0));
        };
        auto time_fn = [&](auto fn, int n) { return time_runs(e0, e1, fn, n); };
        double lt_ms = 1e30;
        int best = -1;
        for (int a = 0; a < nres; a++) {
            if (cublasLtMatmul(lt, op, &one, B[0], la, A[0], lb, &zero, Dr, ld,
                               Dr, ld, &heur[a].algo, lt_ws, LT_WS,
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
            if (best >= 0)
                time_pair(
                    e0, e1, ours, [&](int i) { lt_run8(best, i, Dr); },
                    reps / 2, 2, &t_o, &t_l);
            else
                t_o = time_fn(ours, reps / 2);
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
        lt_free(lp);
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
