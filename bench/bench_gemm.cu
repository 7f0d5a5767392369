/*
 * bench_gemm.cu: our Hopper GEMM (gemmk_gemm, shape heuristic) against
 * cuBLASLt (its heuristic's top algorithms, each timed, the fastest kept) on
 * the same random inputs in one process. Inputs rotate among several sets
 * so that L2 (50 MB) never holds them; each run is timed with CUDA events;
 * the median of many runs is reported. D is bf16/fp16 (same as the inputs),
 * fp32 accumulation, alpha = 1, beta = 0, row-major.
 *
 * Usage: bench_gemm [--set all|quick|squares|big|skinny|trans|misc|decode|
 *                          mid]
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
 *        while ours and cuBLAS's timed blocks ran, and the median host
 *        time a call took its caller
 *        --b2b N: each timed run N calls back to back, the calls' host
 *        time hidden (default 1: a call alone, host time included)
 * --shapes replaces the set (tAB: trans_a, trans_b, e.g. 4096x4096x4096t01;
 * with --type fp64 --set z128 or c64 the complex shapes, tb conjugating B).
 * Several kernels (auto: the heuristic) are timed in the same blocks,
 * alternating with cuBLAS, so their ratios share the clock drift; their
 * order is reversed every other block.
 * Prints cuBLASLt's fastest algorithm a shape (its tile, cluster, stages
 * and split: lt_describe), one line per shape and kernel, and a table last.
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

#include "bench_fill.h"
#include "bench_gemm.h"

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

struct Row {
    std::string name, type, ours_cfg;
    double ours_tf, blas_tf, ratio, err, ours_tbs, blas_tbs;
    bool skinny;
};

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
    if (!strcmp(set, "decode")) /* issue 23: every M class up to 128 */
        for (long long n : {8192ll, 28672ll})
            for (long long m :
                 {1ll, 2ll, 4ll, 8ll, 12ll, 16ll, 24ll, 32ll, 40ll, 48ll, 56ll,
                  64ll, 80ll, 96ll, 112ll, 128ll})
                shapes.push_back({m, n, 8192, 0, 0, "decode"});
    if (!strcmp(set, "mid")) { /* issue 23 item 2, kernel-notes v27 */
        static const long long mid[][3] = {
            {1024, 1024, 1024}, {1536, 1536, 1536}, {2048, 2048, 2048},
            {2560, 2560, 2560}, {3072, 3072, 3072}, {1536, 1536, 4096},
            {1536, 3072, 2048}, {3072, 2048, 1024}, {384, 6144, 4096},
            {384, 12288, 2048}, {384, 12288, 8192}, {384, 16384, 8192},
            {512, 6144, 8192},  {512, 12288, 2048}, {512, 12288, 8192},
            {640, 4096, 8192},  {640, 8192, 8192},  {768, 3072, 8192},
            {768, 8192, 8192},  {1024, 5120, 8192}, {1024, 6144, 8192},
            {1536, 4096, 8192}, {2048, 3072, 8192}, {3072, 3072, 8192},
            {5120, 1024, 4096}, {384, 6144, 16384}, {512, 5120, 16384},
            {256, 16384, 8192}};
        for (const auto &r : mid)
            shapes.push_back({r[0], r[1], r[2], 0, 0, "mid"});
    }
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
                fill_u16(A[i], ea, 1000 + 17 * i, bf16);
                fill_u16(B[i], eb, 5000 + 31 * i, bf16);
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
            cublasLtMatmulHeuristicResult_t heur[8];
            const int nres = lt_heuristics(lp, heur);
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
            printf("%lldx%lldx%lld %s cuBLASLt's fastest: %s\n", s.m, s.n, s.k,
                   bf16 ? "bf16" : "fp16",
                   lt_describe(heur[best].algo).c_str());
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
             * order (ours, then cuBLAS) reversed every other block (the
             * first timed can run at a clock the GPU's power cap takes
             * back later) */
            std::vector<std::vector<float>> to(nk);
            std::vector<float> tb;
            std::vector<ClockMean> clk_o(nk); /* --clocks */
            ClockMean clk_b;
            auto anchor = [&] {
                tb.push_back((float)time_fn(
                    [&](int i) {
                        lt_run(lp, A[i % nsets], B[i % nsets], Dref,
                               &heur[best].algo);
                    },
                    reps / 2));
                clk_b.add();
            };
            for (int blk = 0; blk < blocks; blk++) {
                if (blk % 2) /* cuBLAS first in odd blocks, last in even */
                    anchor();
                for (size_t w = 0; w < nk; w++) {
                    const size_t ki = blk % 2 ? nk - 1 - w : w;
                    to[ki].push_back((float)time_fn(
                        [&](int i) { ours_k(ki, i); }, reps / 2));
                    clk_o[ki].add();
                }
                if (blk % 2 == 0)
                    anchor();
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
                           "MHz; host: ours %.1f us a call, cuBLAS %.1f\n",
                           r.name.c_str(), r.type.c_str(), kcfg[ki],
                           clk_o[ki].mean(), clk_b.mean(), clk_o[ki].host_us(),
                           clk_b.host_us());
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
