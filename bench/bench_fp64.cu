/*
 * bench_fp64.cu: bench_gemm --type fp64 (bench_gemm.cu's comment): ours
 * (gemmk_gemm_f64: the Ozaki-II emulation or DGEMM) against cuBLAS DGEMM,
 * the calibration's rows, and complex128 / complex64 against ZGEMM and
 * CGEMM.
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
            fill_f64(A, ea, 31337 + k, phi);
            fill_f64(B, eb, 73313 + k, phi);
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
    fill_f64(p, n, seed, 0.5);
}
static void fill_real(float *p, size_t n, uint64_t seed)
{
    fill_f32(p, n, seed);
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
        run("cublas");
        std::vector<R> hz(2 * e), hd(2 * e);
        CK(cudaMemcpy(hz.data(), Z, e * es, cudaMemcpyDeviceToHost));
        double zmax = 0;
        for (R v : hz)
            zmax = fabs((double)v) > zmax ? fabs((double)v) : zmax;
        for (const char *kn : {"auto", "oz2-complex"}) {
            /* ours into D and ZGEMM into Z, in interleaved blocks */
            double tk, tz;
            time_pair(
                e0, e1,
                [&](int) {
                    p.d = D;
                    run(kn);
                },
                [&](int) {
                    p.d = Z;
                    run("cublas");
                },
                std::max(2, reps / 2), 2, &tk, &tz);
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

int bench_fp64(gemmk_ctx *ctx, const char *set, int reps, FILE *f,
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
        fill_f64(A, ea, 1234567, phi);
        fill_f64(B, eb, 7654321, phi);
        CK(cudaGetLastError());
        gemmk_problem_f64 p;
        memset(&p, 0, sizeof(p));
        p.m = s.m, p.n = s.n, p.k = s.k, p.trans_a = s.ta, p.trans_b = s.tb;
        p.a = A, p.b = B, p.d = D;
        p.lda = lda, p.ldb = ldb, p.ldc = p.ldd = ldd;
        p.alpha = 1, p.beta = 0;
        p.moduli = moduli;
        /* cuBLAS DGEMM: cuBLASLt, its heuristic's top 8 timed */
        LtPlan lp;
        lt_make_typed(lp, s, CUDA_R_64F, CUDA_R_64F, CUBLAS_COMPUTE_64F,
                      CUDA_R_64F, lda, ldb, ldd);
        cublasLtMatmulHeuristicResult_t heur[8];
        const int nres = lt_heuristics(lp, heur);
        const cublasLtMatmulDesc_t op = lp.op;
        const cublasLtMatrixLayout_t la = lp.la, lb = lp.lb, ld = lp.ld;
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
            double t_o, tb2;
            time_pair(
                e0, e1, ours, [&](int) { dg(best); }, nrep, 2, &t_o, &tb2);
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
        lt_free(lp);
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
