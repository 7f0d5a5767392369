/*
 * bench_ladder.cu: the kernel ladder benchmark (issue 6, point 3). Every
 * ladder rung of the catalog (naive ... wgmma-ws-tf32), the production
 * kernels through "auto", and cuBLAS, on square problems, for bf16 inputs
 * (bf16 out) and for fp32 inputs (fp32 out: rungs 1-4 in true fp32,
 * wgmma-ws-tf32, "auto" and cuBLAS at tf32 and at fp32 precision).
 *
 * Method: the same random inputs (uniform in [-1, 1)) for every kernel of
 * a dtype and size; a warm-up run; then each timed run starts after a
 * 256 MiB memset that flushes L2 (50 MB on the H100), timed alone with
 * CUDA events; the median is reported. A rung whose run is predicted
 * (from its time at the previous size, times the flop ratio) to take more
 * than --max-ms is skipped at that size and the table says so. The error
 * column is max|D - R| / max|R| against an fp64 reference R (cuBLAS DGEMM
 * on the same inputs). The ratio is to cuBLAS of the same input type and
 * precision, measured in the same run.
 *
 * Prints a table last and writes CSV with the header
 *   kernel,rung,dtype,precision,m,n,k,ms,tflops,ratio_vs_ref,max_rel_err
 * (the format of `gemmctl bench`). scripts/plot-ladder.sh draws it.
 *
 * Usage: bench_ladder [--sizes 256,512,...] [--dtype bf16|fp32|all]
 *                     [--csv FILE] [--max-ms MS] [--kernel NAME]
 */
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <algorithm>
#include <string>
#include <vector>

#include "cuda_check.h"
#include "gemm_kernels.h"

/* ---- device helpers ---- */

static __device__ float uniform(uint64_t i, uint64_t seed)
{
    uint64_t x = i + seed * 0x9E3779B97F4A7C15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    x ^= x >> 31;
    return static_cast<float>(x >> 40) * (2.0f / 16777216.0f) - 1.0f;
}

/* p[i] (n elements) = uniform in [-1, 1); w (doubles) gets the same
 * values as stored (after rounding to the element type). */
template <typename T>
__global__ void fill_kernel(T *p, double *w, int64_t n, uint64_t seed)
{
    for (int64_t i =
             blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
         i < n; i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
        T v = static_cast<T>(uniform(i, seed));
        p[i] = v;
        w[i] = static_cast<double>(static_cast<float>(v));
    }
}

static __device__ float load_f(const float *p, int64_t i)
{
    return p[i];
}
static __device__ float load_f(const __nv_bfloat16 *p, int64_t i)
{
    return __bfloat162float(p[i]);
}

/* max |d - r| and max |r| over n elements, as float bits (>= 0, so their
 * order as unsigned ints is their order as floats). */
template <typename T>
__global__ void err_kernel(const T *d, const double *r, int64_t n,
                           unsigned *max_err, unsigned *max_ref)
{
    float e = 0.0f, m = 0.0f;
    for (int64_t i =
             blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
         i < n; i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
        float v = load_f(d, i);
        float x = static_cast<float>(r[i]);
        float diff = fabsf(v - x);
        e = (diff > e || isnan(diff)) ? (isnan(diff) ? INFINITY : diff) : e;
        m = fmaxf(m, fabsf(x));
    }
    atomicMax(max_err, __float_as_uint(e));
    atomicMax(max_ref, __float_as_uint(m));
}

/* ---- the benchmark ---- */

struct Entry {
    std::string name; /* catalog name */
    int rung;         /* ladder rung, 0 for auto / cuBLAS */
    gemm_precision prec;
    bool reference;
};

struct Row {
    std::string kernel;
    int rung;
    const char *dtype, *prec;
    int64_t size;
    double ms, tflops, ratio, err;
    bool skipped;
    std::string note;
};

static const char *prec_name(gemm_dtype ab, gemm_precision p)
{
    if (ab != GEMM_FP32)
        return "default";
    return p == GEMM_PRECISION_TF32 ? "tf32" : "fp32";
}

/* The kernels of one input type: rungs in order, then auto, then cuBLAS;
 * fp32 entries once per precision they serve (tf32, fp32). */
static std::vector<Entry> entries_for(gemm_dtype ab, const char *only)
{
    std::vector<Entry> v;
    const gemm_precision precs16[] = {GEMM_PRECISION_DEFAULT};
    const gemm_precision precs32[] = {GEMM_PRECISION_FP32, GEMM_PRECISION_TF32};
    const gemm_precision *precs = ab == GEMM_FP32 ? precs32 : precs16;
    int nprec = ab == GEMM_FP32 ? 2 : 1;
    std::vector<const gemmk_kernel_desc *> order;
    for (int rung = 1; rung < 100; rung++)
        for (int i = 0; i < gemmk_catalog_size(); i++)
            if (gemmk_catalog_entry(i)->ladder == rung)
                order.push_back(gemmk_catalog_entry(i));
    order.push_back(gemmk_catalog_find("auto"));
    order.push_back(gemmk_catalog_find("cublas"));
    for (const gemmk_kernel_desc *d : order) {
        if (!d || !(d->ab_types & (1u << ab)))
            continue;
        if (only && strcmp(only, d->name) != 0 &&
            strcmp(d->name, "cublas") != 0)
            continue;
        for (int q = 0; q < nprec; q++) {
            if (ab == GEMM_FP32 && !(d->precisions & (1u << precs[q])))
                continue;
            v.push_back(Entry{d->name, d->ladder, precs[q], d->reference != 0});
        }
    }
    return v;
}

static double median(std::vector<float> t)
{
    std::sort(t.begin(), t.end());
    size_t n = t.size();
    return n % 2 ? t[n / 2] : 0.5 * (t[n / 2 - 1] + t[n / 2]);
}

struct Bench {
    gemmk_ctx *ctx;
    cudaStream_t s;
    cublasHandle_t blas;
    cudaEvent_t e0, e1;
    void *flush;
    size_t flush_bytes;
    double max_ms;
    unsigned *errs; /* device: [max_err, max_ref] */
};

/* Times one run (after an L2 flush); returns ms, or < 0 on error. */
static double time_one(Bench &b, const gemmk_problem &p, const char *name)
{
    CK(cudaMemsetAsync(b.flush, 0, b.flush_bytes, b.s));
    CK(cudaEventRecord(b.e0, b.s));
    gemm_error rv = gemmk_gemm(b.ctx, &p, b.s, name, NULL);
    CK(cudaEventRecord(b.e1, b.s));
    CK(cudaEventSynchronize(b.e1));
    CK(cudaGetLastError());
    if (rv != GEMM_OK) {
        fprintf(stderr, "%s: gemmk_gemm returned %d\n", name, (int)rv);
        return -1.0;
    }
    float ms = 0.0f;
    CK(cudaEventElapsedTime(&ms, b.e0, b.e1));
    return ms;
}

static void run_dtype(Bench &b, gemm_dtype ab, const std::vector<int> &sizes,
                      const char *only, std::vector<Row> &rows)
{
    const char *dt = ab == GEMM_FP32 ? "fp32" : "bf16";
    const size_t es = ab == GEMM_FP32 ? 4 : 2;
    std::vector<Entry> ents = entries_for(ab, only);
    std::vector<double> last_ms(ents.size(), -1.0);
    std::vector<int64_t> last_size(ents.size(), 0);
    for (int sz : sizes) {
        const int64_t n = sz;
        const int64_t nn = n * n;
        void *A, *B, *D;
        double *A64, *B64, *R64;
        CK(cudaMalloc(&A, nn * es));
        CK(cudaMalloc(&B, nn * es));
        CK(cudaMalloc(&D, nn * es));
        CK(cudaMalloc(&A64, nn * sizeof(double)));
        CK(cudaMalloc(&B64, nn * sizeof(double)));
        CK(cudaMalloc(&R64, nn * sizeof(double)));
        uint64_t seed = 1000 + static_cast<uint64_t>(sz) * 2 + (es == 4);
        if (ab == GEMM_FP32) {
            fill_kernel<<<1024, 256, 0, b.s>>>(static_cast<float *>(A), A64, nn,
                                               seed);
            fill_kernel<<<1024, 256, 0, b.s>>>(static_cast<float *>(B), B64, nn,
                                               seed + 7);
        } else {
            fill_kernel<<<1024, 256, 0, b.s>>>(static_cast<__nv_bfloat16 *>(A),
                                               A64, nn, seed);
            fill_kernel<<<1024, 256, 0, b.s>>>(static_cast<__nv_bfloat16 *>(B),
                                               B64, nn, seed + 7);
        }
        CK(cudaGetLastError());
        /* Row-major R = A B is column-major R^T = B^T A^T. */
        const double one = 1.0, zero = 0.0;
        CB(cublasDgemm(b.blas, CUBLAS_OP_N, CUBLAS_OP_N, (int)n, (int)n, (int)n,
                       &one, B64, (int)n, A64, (int)n, &zero, R64, (int)n));
        CK(cudaStreamSynchronize(b.s));
        CK(cudaFree(A64));
        CK(cudaFree(B64));

        gemmk_problem p;
        memset(&p, 0, sizeof(p));
        p.m = p.n = p.k = n;
        p.ab_type = ab;
        p.cd_type = ab;
        p.a = A;
        p.b = B;
        p.d = D;
        p.lda = p.ldb = p.ldc = p.ldd = n;
        p.alpha = 1.0f;
        p.beta = 0.0f;
        const double flop = 2.0 * n * n * n;

        size_t first = rows.size();
        for (size_t ei = 0; ei < ents.size(); ei++) {
            const Entry &e = ents[ei];
            Row r{e.name, e.rung, dt, prec_name(ab, e.prec), n, 0, 0, 0,
                  0,      false,  ""};
            if (last_ms[ei] > 0) {
                double f = static_cast<double>(n) / last_size[ei];
                double predicted = last_ms[ei] * f * f * f;
                if (predicted > b.max_ms) {
                    char note[96];
                    snprintf(note, sizeof(note),
                             "skipped: predicted %.1f s a run",
                             predicted / 1000.0);
                    r.skipped = true;
                    r.note = note;
                    rows.push_back(r);
                    printf("%-16s %-5s %-7s %5lld  %s\n", e.name.c_str(), dt,
                           r.prec, (long long)n, note);
                    fflush(stdout);
                    continue;
                }
            }
            p.precision = e.prec;
            CK(cudaMemsetAsync(D, 0xFF, nn * es, b.s)); /* NaN */
            double warm = time_one(b, p, e.name.c_str());
            if (warm < 0) {
                r.skipped = true;
                r.note = "failed";
                rows.push_back(r);
                continue;
            }
            CK(cudaMemsetAsync(b.errs, 0, 2 * sizeof(unsigned), b.s));
            if (ab == GEMM_FP32)
                err_kernel<<<1024, 256, 0, b.s>>>(static_cast<float *>(D), R64,
                                                  nn, b.errs, b.errs + 1);
            else
                err_kernel<<<1024, 256, 0, b.s>>>(
                    static_cast<__nv_bfloat16 *>(D), R64, nn, b.errs,
                    b.errs + 1);
            CK(cudaGetLastError());
            unsigned h[2];
            CK(cudaMemcpy(h, b.errs, sizeof(h), cudaMemcpyDeviceToHost));
            float fe, fr;
            memcpy(&fe, &h[0], 4);
            memcpy(&fr, &h[1], 4);
            r.err = fr > 0 ? fe / fr : INFINITY;

            /* Enough runs for ~300 ms, 3 to 15 of them. */
            int reps = static_cast<int>(300.0 / std::max(warm, 1e-3));
            reps = std::min(15, std::max(3, reps));
            std::vector<float> ts;
            for (int i = 0; i < reps; i++) {
                double t = time_one(b, p, e.name.c_str());
                if (t < 0)
                    break;
                ts.push_back(static_cast<float>(t));
            }
            if (ts.empty()) {
                r.skipped = true;
                r.note = "failed";
                rows.push_back(r);
                continue;
            }
            r.ms = median(ts);
            r.tflops = flop / (r.ms * 1e-3) / 1e12;
            last_ms[ei] = r.ms;
            last_size[ei] = n;
            rows.push_back(r);
            printf("%-16s %-5s %-7s %5lld  %10.4f ms %9.2f TFLOP/s  err "
                   "%.2e  (%d runs)\n",
                   e.name.c_str(), dt, r.prec, (long long)n, r.ms, r.tflops,
                   r.err, (int)ts.size());
            fflush(stdout);
        }
        /* Ratios to cuBLAS of the same precision at this size. */
        for (size_t i = first; i < rows.size(); i++) {
            for (size_t j = first; j < rows.size(); j++)
                if (rows[j].kernel == "cublas" &&
                    strcmp(rows[j].prec, rows[i].prec) == 0 &&
                    !rows[j].skipped && !rows[i].skipped)
                    rows[i].ratio = rows[i].tflops / rows[j].tflops;
        }
        CK(cudaFree(A));
        CK(cudaFree(B));
        CK(cudaFree(D));
        CK(cudaFree(R64));
    }
}

static std::vector<int> parse_sizes(const char *s)
{
    std::vector<int> v;
    while (*s) {
        char *end;
        long x = strtol(s, &end, 10);
        if (end == s || x < 1 || x > 32768) {
            fprintf(stderr, "bad --sizes\n");
            exit(2);
        }
        v.push_back(static_cast<int>(x));
        s = *end == ',' ? end + 1 : end;
        if (*end && *end != ',') {
            fprintf(stderr, "bad --sizes\n");
            exit(2);
        }
    }
    return v;
}

int main(int argc, char **argv)
{
    std::vector<int> sizes = {256, 512, 1024, 2048, 4096, 8192};
    const char *csv = "ladder.csv", *dtype = "all", *only = nullptr;
    double max_ms = 2000.0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--sizes") == 0 && i + 1 < argc)
            sizes = parse_sizes(argv[++i]);
        else if (strcmp(argv[i], "--csv") == 0 && i + 1 < argc)
            csv = argv[++i];
        else if (strcmp(argv[i], "--dtype") == 0 && i + 1 < argc)
            dtype = argv[++i];
        else if (strcmp(argv[i], "--max-ms") == 0 && i + 1 < argc)
            max_ms = atof(argv[++i]);
        else if (strcmp(argv[i], "--kernel") == 0 && i + 1 < argc)
            only = argv[++i];
        else {
            fprintf(stderr,
                    "usage: %s [--sizes 256,512,...] [--dtype bf16|fp32|all] "
                    "[--csv FILE] [--max-ms MS] [--kernel NAME]\n",
                    argv[0]);
            return 2;
        }
    }
    int count = 0;
    if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
        printf("skipped: no CUDA device\n");
        return 0;
    }
    Bench b;
    b.max_ms = max_ms;
    gemm_error rv = gemmk_ctx_create(&b.ctx, 0);
    if (rv != GEMM_OK) {
        fprintf(stderr, "gemmk_ctx_create: %d\n", (int)rv);
        return 1;
    }
    CK(cudaStreamCreate(&b.s));
    CB(cublasCreate(&b.blas));
    CB(cublasSetStream(b.blas, b.s));
    CK(cudaEventCreate(&b.e0));
    CK(cudaEventCreate(&b.e1));
    b.flush_bytes = 256u << 20;
    CK(cudaMalloc(&b.flush, b.flush_bytes));
    CK(cudaMalloc(&b.errs, 2 * sizeof(unsigned)));
    cudaDeviceProp prop;
    CK(cudaGetDeviceProperties(&prop, 0));
    printf("device: %s, %d SMs, L2 %d MB\n", prop.name,
           prop.multiProcessorCount, prop.l2CacheSize >> 20);

    std::vector<Row> rows;
    if (strcmp(dtype, "all") == 0 || strcmp(dtype, "bf16") == 0)
        run_dtype(b, GEMM_BF16, sizes, only, rows);
    if (strcmp(dtype, "all") == 0 || strcmp(dtype, "fp32") == 0)
        run_dtype(b, GEMM_FP32, sizes, only, rows);

    FILE *f = fopen(csv, "w");
    if (!f) {
        perror(csv);
        return 1;
    }
    fprintf(f, "kernel,rung,dtype,precision,m,n,k,ms,tflops,ratio_vs_ref,"
               "max_rel_err\n");
    for (const Row &r : rows)
        if (!r.skipped)
            fprintf(f, "%s,%d,%s,%s,%lld,%lld,%lld,%.5f,%.3f,%.4f,%.3e\n",
                    r.kernel.c_str(), r.rung, r.dtype, r.prec,
                    (long long)r.size, (long long)r.size, (long long)r.size,
                    r.ms, r.tflops, r.ratio, r.err);
    fclose(f);

    printf("\n%-16s %4s %-5s %-7s %5s %11s %9s %7s %10s\n", "kernel", "rung",
           "dtype", "prec", "size", "ms", "TFLOP/s", "vs ref", "max rel err");
    for (const Row &r : rows) {
        if (r.skipped)
            printf("%-16s %4d %-5s %-7s %5lld  %s\n", r.kernel.c_str(), r.rung,
                   r.dtype, r.prec, (long long)r.size, r.note.c_str());
        else
            printf("%-16s %4d %-5s %-7s %5lld %11.4f %9.2f %7.3f %10.2e\n",
                   r.kernel.c_str(), r.rung, r.dtype, r.prec, (long long)r.size,
                   r.ms, r.tflops, r.ratio, r.err);
    }
    printf("CSV: %s\n", csv);
    CK(cudaFree(b.flush));
    CK(cudaFree(b.errs));
    cublasDestroy(b.blas);
    gemmk_ctx_destroy(b.ctx);
    return 0;
}
