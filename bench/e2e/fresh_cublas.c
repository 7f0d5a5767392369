/*
 * fresh_cublas.c: what a user does without gemmd, as one fresh process:
 * create a CUDA context (cudaFree(0)), a cuBLAS handle, allocate device
 * memory, copy A and B from pageable host memory, cublasGemmEx (bf16, fp16
 * or fp32 in, fp32 compute), copy D back. Every stage is timed from main()'s
 * start and printed as a breakdown; the loader's work before main() (mapping
 * libcublas) is not in it, so compare.sh times the whole process from
 * outside. --repeat R runs the copy-multiply-copy part R - 1 more times and
 * reports the warm medians too (the gemm stage timed with CUDA events).
 *
 * Row-major like gemmd: D = op(A) op(B), computed as the column-major
 * D^T = op(B)^T op(A)^T. Random inputs uniform in [-1, 1), never zero;
 * --check compares sampled rows with an fp64 CPU reference (tolerance as
 * gemmctl mm --check). Needs a GPU; says so clearly when there is none.
 */
#include "../bench_util.h"

#include <rnd.h>

#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef enum dtype { BF16, FP16, FP32 } dtype;

static const char *dtype_names[] = {"bf16", "fp16", "fp32"};

static struct {
    long m, n, k;
    dtype ab, cd;
    int cd_given, ta, tb, check, repeat, device;
} opt = {4096, 4096, 4096, BF16, BF16, 0, 0, 0, 0, 1, 0};

static double t_main; /* main()'s start, seconds */

#define CUDA_CHECK(call)                                                       \
    do {                                                                       \
        cudaError_t e_ = (call);                                               \
        if (e_ != cudaSuccess) {                                               \
            fprintf(stderr, "fresh_cublas: %s failed: %s (%s:%d)\n", #call,    \
                    cudaGetErrorString(e_), __FILE__, __LINE__);               \
            exit(1);                                                           \
        }                                                                      \
    } while (0)

#define CUBLAS_CHECK(call)                                                     \
    do {                                                                       \
        cublasStatus_t s_ = (call);                                            \
        if (s_ != CUBLAS_STATUS_SUCCESS) {                                     \
            fprintf(stderr, "fresh_cublas: %s failed: %s (%s:%d)\n", #call,    \
                    cublasGetStatusString(s_), __FILE__, __LINE__);            \
            exit(1);                                                           \
        }                                                                      \
    } while (0)

/* ---- host-side types -------------------------------------------------- */

static size_t dsize(dtype t)
{
    return t == FP32 ? 4 : 2;
}

static cudaDataType_t cuda_type(dtype t)
{
    return t == BF16 ? CUDA_R_16BF : t == FP16 ? CUDA_R_16F : CUDA_R_32F;
}

static uint16_t to_bf16(float f) /* round to nearest even; no NaN here */
{
    uint32_t u;
    memcpy(&u, &f, 4);
    u += 0x7fff + ((u >> 16) & 1);
    return (uint16_t)(u >> 16);
}

static float from_bf16(uint16_t h)
{
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

static uint16_t to_fp16(float f) /* finite |f| < 65504, nearest even */
{
    uint32_t u;
    memcpy(&u, &f, 4);
    uint16_t sign = (uint16_t)((u >> 16) & 0x8000);
    float a = fabsf(f);
    if (a < ldexpf(1, -14)) { /* subnormal: multiples of 2^-24 */
        float q = nearbyintf(a * ldexpf(1, 24));
        return sign | (uint16_t)q;
    }
    int e;
    float mant = frexpf(a, &e);        /* a = mant * 2^e, mant in [0.5, 1) */
    float q = nearbyintf(mant * 2048); /* 11 significant bits */
    if (q == 2048) {
        q = 1024;
        e++;
    }
    return sign | (uint16_t)((e + 14) << 10) | ((uint16_t)q & 0x3ff);
}

static float from_fp16(uint16_t h)
{
    int e = (h >> 10) & 0x1f, mant = h & 0x3ff;
    float v = e == 0 ? ldexpf((float)mant, -24)
                     : ldexpf((float)(mant | 0x400), e - 25);
    return (h & 0x8000) ? -v : v;
}

static float load(const void *p, dtype t, size_t i)
{
    if (t == FP32)
        return ((const float *)p)[i];
    uint16_t h = ((const uint16_t *)p)[i];
    return t == BF16 ? from_bf16(h) : from_fp16(h);
}

/* n random values uniform in [-1, 1), never 0, stored as t: four 16-bit
 * values a splitmix64 draw, or one fp32 (common/rnd.h), the same values
 * as gemmctl's (client/gemmctl/util.c), filled by as many threads, so
 * neither side of the one-shot comparison spends more on its inputs than
 * the other. */
typedef struct fill_arg {
    void *p;
    dtype t;
    uint64_t s;
} fill_arg;

static void fill_part(void *arg, size_t lo, size_t hi)
{
    const fill_arg *f = arg;
    if (f->t != FP32) {
        uint16_t *h = f->p;
        for (size_t i = lo; i < hi; i += 4) {
            uint64_t z = rnd_at(f->s, i / 4);
            for (size_t q = 0; q < 4 && i + q < hi; q++) {
                float x = rnd_lane16(z, (unsigned)q);
                h[i + q] = f->t == BF16 ? to_bf16(x) : to_fp16(x);
            }
        }
        return;
    }
    for (size_t i = lo; i < hi; i++) {
        float x = rnd_f24(rnd_at(f->s, i));
        ((float *)f->p)[i] = x == 0.0f ? 0.5f : x;
    }
}

static void fill(void *p, dtype t, size_t n, uint64_t *rng)
{
    fill_arg f = {.p = p, .t = t, .s = *rng};
    rnd_parallel(n, t != FP32 ? 4 : 1, fill_part, &f);
    *rng += (t != FP32 ? (n + 3) / 4 : n) * RND_GAMMA;
}

/* ---- check ------------------------------------------------------------ */

/* Relative Frobenius error of 8 rows of D against fp64. */
static double check(const void *a, const void *b, const void *d)
{
    long m = opt.m, n = opt.n, k = opt.k, rows = m < 8 ? m : 8;
    double num = 0, den = 0;
    for (long r = 0; r < rows; r++) {
        long i = rows == 1 ? 0 : r * (m - 1) / (rows - 1);
        for (long x = 0; x < n; x++) {
            double s = 0;
            for (long p = 0; p < k; p++) {
                size_t ai = opt.ta ? (size_t)p * m + i : (size_t)i * k + p;
                size_t bi = opt.tb ? (size_t)x * k + p : (size_t)p * n + x;
                s += (double)load(a, opt.ab, ai) * load(b, opt.ab, bi);
            }
            double e = load(d, opt.cd, (size_t)i * n + x) - s;
            num += e * e;
            den += s * s;
        }
    }
    return sqrt(num / (den > 0 ? den : 1));
}

/* ---- main ------------------------------------------------------------- */

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof(double), cmp_double);
    return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

static void usage(FILE *f)
{
    fprintf(
        f,
        "usage: fresh_cublas [-m M] [-n N] [-k K] [--dtype T] [--cd-dtype T]\n"
        "                    [--ta] [--tb] [--repeat R] [--check] "
        "[--device N]\n"
        "A fresh process doing one GEMM with the CUDA runtime and cuBLAS:\n"
        "context, handle, allocation, copies from pageable memory, GEMM,\n"
        "copy back, each stage timed. Default 4096^3 bf16 -> bf16.\n");
}

static int parse_args(int argc, char **argv)
{
    enum { O_DT = 256, O_CDT, O_TA, O_TB, O_REP, O_CHECK, O_DEV };
    static const struct option lo[] = {{"dtype", 1, 0, O_DT},
                                       {"cd-dtype", 1, 0, O_CDT},
                                       {"ta", 0, 0, O_TA},
                                       {"tb", 0, 0, O_TB},
                                       {"repeat", 1, 0, O_REP},
                                       {"check", 0, 0, O_CHECK},
                                       {"device", 1, 0, O_DEV},
                                       {"help", 0, 0, 'h'},
                                       {0, 0, 0, 0}};
    int ch;
    while ((ch = getopt_long(argc, argv, "m:n:k:h", lo, NULL)) != -1) {
        switch (ch) {
        case 'm':
            opt.m = atol(optarg);
            break;
        case 'n':
            opt.n = atol(optarg);
            break;
        case 'k':
            opt.k = atol(optarg);
            break;
        case O_DT:
        case O_CDT: {
            int t = -1;
            for (int i = 0; i < 3; i++)
                if (strcmp(optarg, dtype_names[i]) == 0)
                    t = i;
            if (t < 0) {
                fprintf(stderr, "fresh_cublas: unknown dtype '%s'\n", optarg);
                return -1;
            }
            if (ch == O_DT)
                opt.ab = (dtype)t;
            else
                opt.cd = (dtype)t, opt.cd_given = 1;
            break;
        }
        case O_TA:
            opt.ta = 1;
            break;
        case O_TB:
            opt.tb = 1;
            break;
        case O_REP:
            opt.repeat = atoi(optarg);
            break;
        case O_CHECK:
            opt.check = 1;
            break;
        case O_DEV:
            opt.device = atoi(optarg);
            break;
        case 'h':
            usage(stdout);
            exit(0);
        default:
            usage(stderr);
            return -1;
        }
    }
    if (!opt.cd_given)
        opt.cd = opt.ab;
    if (opt.m < 1 || opt.n < 1 || opt.k < 1 || opt.repeat < 1 ||
        optind != argc) {
        usage(stderr);
        return -1;
    }
    return 0;
}

int main(int argc, char **argv)
{
    t_main = now_s();
    if (parse_args(argc, argv) != 0)
        return 2;
    size_t m = (size_t)opt.m, n = (size_t)opt.n, k = (size_t)opt.k;
    size_t sa = m * k * dsize(opt.ab), sb = k * n * dsize(opt.ab);
    size_t sd = m * n * dsize(opt.cd);
    double flop = 2.0 * (double)m * (double)n * (double)k;
    double t, ms_fill, ms_ctx, ms_handle, ms_alloc, ms_h2d, ms_gemm, ms_d2h,
        ms_free;

    /* the user's data, in ordinary (pageable) memory */
    t = now_s();
    uint64_t rng = 42;
    void *ha = malloc(sa), *hb = malloc(sb), *hd = malloc(sd);
    if (ha == NULL || hb == NULL || hd == NULL) {
        fprintf(stderr, "fresh_cublas: out of host memory\n");
        return 1;
    }
    fill(ha, opt.ab, m * k, &rng);
    fill(hb, opt.ab, k * n, &rng);
    ms_fill = (now_s() - t) * 1e3;

    t = now_s();
    cudaError_t e = cudaSetDevice(opt.device);
    if (e == cudaSuccess)
        e = cudaFree(0);
    if (e != cudaSuccess) {
        fprintf(stderr, "fresh_cublas: no usable CUDA device %d: %s (%s)\n",
                opt.device, cudaGetErrorString(e), cudaGetErrorName(e));
        return 1;
    }
    ms_ctx = (now_s() - t) * 1e3;

    t = now_s();
    cublasHandle_t h;
    CUBLAS_CHECK(cublasCreate(&h));
    ms_handle = (now_s() - t) * 1e3;

    t = now_s();
    void *da, *db, *dd;
    CUDA_CHECK(cudaMalloc(&da, sa));
    CUDA_CHECK(cudaMalloc(&db, sb));
    CUDA_CHECK(cudaMalloc(&dd, sd));
    ms_alloc = (now_s() - t) * 1e3;

    cudaEvent_t e0, e1;
    CUDA_CHECK(cudaEventCreate(&e0));
    CUDA_CHECK(cudaEventCreate(&e1));
    const float alpha = 1.0f, beta = 0.0f;
    /* row-major D = op(A) op(B) as column-major D^T = op(B)^T op(A)^T */
    cublasOperation_t opa = opt.ta ? CUBLAS_OP_T : CUBLAS_OP_N;
    cublasOperation_t opb = opt.tb ? CUBLAS_OP_T : CUBLAS_OP_N;
    int lda = (int)(opt.ta ? m : k), ldb = (int)(opt.tb ? k : n);

    int reps = opt.repeat;
    double t_first = 0; /* end of the first pass */
    double *w_h2d = calloc((size_t)reps, sizeof(double));
    double *w_gemm = calloc((size_t)reps, sizeof(double));
    double *w_ev = calloc((size_t)reps, sizeof(double));
    double *w_d2h = calloc((size_t)reps, sizeof(double));
    for (int r = 0; r < reps; r++) {
        t = now_s();
        CUDA_CHECK(cudaMemcpy(da, ha, sa, cudaMemcpyHostToDevice));
        CUDA_CHECK(cudaMemcpy(db, hb, sb, cudaMemcpyHostToDevice));
        w_h2d[r] = (now_s() - t) * 1e3;

        t = now_s();
        CUDA_CHECK(cudaEventRecord(e0, 0));
        CUBLAS_CHECK(cublasGemmEx(
            h, opb, opa, (int)n, (int)m, (int)k, &alpha, db, cuda_type(opt.ab),
            ldb, da, cuda_type(opt.ab), lda, &beta, dd, cuda_type(opt.cd),
            (int)n, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
        CUDA_CHECK(cudaEventRecord(e1, 0));
        CUDA_CHECK(cudaEventSynchronize(e1));
        w_gemm[r] = (now_s() - t) * 1e3;
        float ev;
        CUDA_CHECK(cudaEventElapsedTime(&ev, e0, e1));
        w_ev[r] = ev;

        t = now_s();
        CUDA_CHECK(cudaMemcpy(hd, dd, sd, cudaMemcpyDeviceToHost));
        w_d2h[r] = (now_s() - t) * 1e3;
        if (r == 0)
            t_first = now_s();
    }
    ms_h2d = w_h2d[0];
    ms_gemm = w_gemm[0];
    ms_d2h = w_d2h[0];
    double ev_first = w_ev[0];

    t = now_s();
    CUDA_CHECK(cudaFree(da));
    CUDA_CHECK(cudaFree(db));
    CUDA_CHECK(cudaFree(dd));
    CUBLAS_CHECK(cublasDestroy(h));
    ms_free = (now_s() - t) * 1e3;
    /* the one-shot user's whole job: the first pass and the teardown */
    double ms_total = (t_first - t_main) * 1e3 + ms_free;

    double rel = opt.check ? check(ha, hb, hd) : -1;
    double tol = (opt.ab == BF16 || opt.cd == BF16)   ? 1e-2
                 : (opt.ab == FP16 || opt.cd == FP16) ? 2e-3
                                                      : 1e-5;
    struct cudaDeviceProp prop;
    CUDA_CHECK(cudaGetDeviceProperties(&prop, opt.device));

    printf("fresh_cublas: %ldx%ldx%ld (m x n x k)%s%s, %s -> %s, fp32 "
           "compute, on %s; A+B %.1f MiB in, D %.1f MiB out, pageable\n",
           opt.m, opt.n, opt.k, opt.ta ? " ta" : "", opt.tb ? " tb" : "",
           dtype_names[opt.ab], dtype_names[opt.cd], prop.name,
           (double)(sa + sb) / 1048576.0, (double)sd / 1048576.0);
    if (opt.check)
        printf("check: relative error %.3g over 8 rows vs fp64, tolerance "
               "%.0e: %s\n",
               rel, tol, rel <= tol ? "PASS" : "FAIL");
    printf("| stage | first (ms) | warm median of %d (ms) | note |\n"
           "|---|---|---|---|\n",
           reps > 1 ? reps - 1 : 0);
    double wh = reps > 1 ? median(w_h2d + 1, reps - 1) : NAN;
    double wg = reps > 1 ? median(w_gemm + 1, reps - 1) : NAN;
    double we = reps > 1 ? median(w_ev + 1, reps - 1) : NAN;
    double wd = reps > 1 ? median(w_d2h + 1, reps - 1) : NAN;
    printf("| fill | %.2f | - | random A, B on the host |\n", ms_fill);
    printf("| context | %.2f | - | cudaFree(0) |\n", ms_ctx);
    printf("| handle | %.2f | - | cublasCreate |\n", ms_handle);
    printf("| alloc | %.2f | - | cudaMalloc x3 |\n", ms_alloc);
    printf("| h2d | %.2f | %.2f | %.1f GB/s first |\n", ms_h2d, wh,
           (double)(sa + sb) / (ms_h2d * 1e-3) * 1e-9);
    printf("| gemm | %.3f | %.3f | events: %.3f first, %.3f warm = %.1f "
           "TFLOP/s |\n",
           ms_gemm, wg, ev_first, we,
           flop / ((reps > 1 ? we : ev_first) * 1e-3) * 1e-12);
    printf("| d2h | %.2f | %.2f | %.1f GB/s first |\n", ms_d2h, wd,
           (double)sd / (ms_d2h * 1e-3) * 1e-9);
    printf("| teardown | %.2f | - | cudaFree x3, cublasDestroy |\n", ms_free);
    printf("| total | %.2f | - | main() to D back, plus teardown (not the "
           "repeats) |\n",
           ms_total);
    free(ha);
    free(hb);
    free(hd);
    return opt.check && !(rel <= tol) ? 1 : 0;
}
