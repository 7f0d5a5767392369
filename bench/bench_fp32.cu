/*
 * bench_fp32.cu: bench_gemm --type fp32 (bench_gemm.cu's comment): our
 * tf32, 3xTF32 and fp32 emulation against cuBLASLt's TF32 and SGEMM,
 * with their errors against fp64 on a sample.
 */
#include <cuda_runtime.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <algorithm>
#include <string>
#include <vector>

#include "bench_gemm.h"
#include "bench_fill.h"

struct Row32 {
    std::string name, tf32_kernel;
    double tf32_tf, lt_tf32_tf, x3_tf, sgemm_tf, oz_tf;
    double e_tf32, e_lt_tf32, e_x3, e_sgemm, e_oz;
    int oz_moduli;
    std::vector<double> var_tf, var_e; /* the named tf32 kernels */
};

/* fp32 rows (see the file comment). Returns 0, or 1 on a failed call. */
int bench_fp32(gemmk_ctx *ctx, const char *set, int reps, FILE *f,
               cudaEvent_t e0, cudaEvent_t e1, const std::vector<Shape> &custom,
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
            fill_f32(A[i], ea, 1000 + 17 * i);
            if (gram) {
                B[i] = A[i];
            } else {
                CK(cudaMalloc(&B[i], eb * 4));
                fill_f32(B[i], eb, 5000 + 31 * i);
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
        /* cuBLASLt: fastest of the heuristic's candidates, for ct (its
         * time for the choice only: time_pair) */
        auto lt_best = [&](cublasComputeType_t ct, LtPlan &lp,
                           cublasLtMatmulAlgo_t &algo) {
            lt_make(lp, s, CUDA_R_32F, ct);
            cublasLtMatmulHeuristicResult_t heur[8];
            const int nres = lt_heuristics(lp, heur);
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
        lt_best(CUBLAS_COMPUTE_32F_FAST_TF32, lp_tf, al_tf);
        lt_best(CUBLAS_COMPUTE_32F, lp_sg, al_sg);
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
            /* ours and its anchor, which goes first alternating by block */
            double t, ta;
            time_pair(
                e0, e1, [&](int i) { ours(nullptr, GEMM_PRECISION_TF32, i); },
                [&](int i) {
                    lt_run(lp_tf, A[i % nsets], B[i % nsets], D, &al_tf);
                },
                reps / 2, 1, &t, &ta, &clk_tf, &clk_ltf, blk);
            t_tf = std::min(t_tf, t), t_ltf = std::min(t_ltf, ta);
            time_pair(
                e0, e1, [&](int i) { ours(x3k, GEMM_PRECISION_FP32, i); },
                [&](int i) {
                    lt_run(lp_sg, A[i % nsets], B[i % nsets], D, &al_sg);
                },
                std::max(3, reps / 4), 1, &t, &ta, nullptr, nullptr, blk);
            t_x3 = std::min(t_x3, t), t_lsg = std::min(t_lsg, ta);
            t_oz = std::min(
                t_oz,
                time_fn([&](int i) { ours("oz2-f32", GEMM_PRECISION_FP32, i); },
                        std::max(3, reps / 4)));
        }
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
            printf("%-22s tf32 clock: ours %.0f MHz, cuBLAS TF32 %.0f MHz; "
                   "host: ours %.1f us a call, cuBLAS %.1f\n",
                   nm, clk_tf.mean(), clk_ltf.mean(), clk_tf.host_us(),
                   clk_ltf.host_us());
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
