/*
 * gpu_test.cu: correctness of the gemm_kernels library on a Hopper GPU.
 * Each case draws fresh random inputs, poisons D (and its row padding) with
 * NaN bytes, runs gemmk_gemm, and compares with cuBLAS (fp32 output, same
 * inputs) element by element and with an fp64 host reference on a sample.
 * Shapes 1, 7, 63, ..., 4096 per dimension across many combinations, all
 * transposes, every output type, alpha/beta (beta = 0 with C = NULL),
 * non-minimal leading dimensions, every kernel configuration; fp32 inputs
 * as tf32 (tolerance ~2^-10 of sum |a||b|) and as 3xTF32 (fp32 accuracy,
 * reference cuBLAS SGEMM in pedantic fp32), and tf32.h's rounding against
 * the hardware's cvt.rna.tf32.f32; the wide types (fp64, complex with
 * conjugate transposes) through gemmk_gemm against a host reference.
 * A plain program (no Criterion) so it runs on a bare GPU host; with no
 * CUDA device it prints "skipped: no CUDA device" and exits 77 (skipped).
 * Usage: kernels_gpu_test [--quick] [--seed N] [--kernel NAME]
 * (--kernel: only the cases whose kernel's name holds NAME, e.g. while
 * working on a kernel on a device whose time is short)
 */
#include <cublas_v2.h>
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <algorithm>
#include <vector>

#include "cuda_check.h"
#include "gemm_kernels.h"
#include "tf32.h"

static __device__ uint32_t hash32(uint64_t x)
{
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ull;
    x ^= x >> 33;
    return (uint32_t)x;
}

/* Fills rows x cols (pitch ld) with uniform values in [-1, 1). */
template <typename T>
__global__ void fill_kernel(T *p, long long rows, long long cols, long long ld,
                            uint64_t seed)
{
    long long total = rows * cols;
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
         i < total; i += (long long)gridDim.x * blockDim.x) {
        long long r = i / cols, c = i % cols;
        float v = (hash32(seed * 0x9E3779B97F4A7C15ull + i) >> 8) *
                      (2.0f / 16777216.0f) -
                  1.0f;
        p[r * ld + c] = (T)v;
    }
}

template <typename T>
__global__ void to_f32_kernel(const T *src, long long rows, long long cols,
                              long long ld, float *dst)
{
    long long total = rows * cols;
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x;
         i < total; i += (long long)gridDim.x * blockDim.x) {
        long long r = i / cols, c = i % cols;
        dst[i] = (float)src[r * ld + c];
    }
}

static size_t esize(gemm_dtype t)
{
    return t == GEMM_FP32 ? 4 : 2;
}

static void fill(void *p, gemm_dtype t, long long rows, long long cols,
                 long long ld, uint64_t seed)
{
    if (t == GEMM_BF16)
        fill_kernel<<<1024, 256>>>((__nv_bfloat16 *)p, rows, cols, ld, seed);
    else if (t == GEMM_FP16)
        fill_kernel<<<1024, 256>>>((__half *)p, rows, cols, ld, seed);
    else
        fill_kernel<<<1024, 256>>>((float *)p, rows, cols, ld, seed);
    CK(cudaGetLastError());
}

static void to_f32(const void *p, gemm_dtype t, long long rows, long long cols,
                   long long ld, float *dst)
{
    if (t == GEMM_BF16)
        to_f32_kernel<<<1024, 256>>>((const __nv_bfloat16 *)p, rows, cols, ld,
                                     dst);
    else if (t == GEMM_FP16)
        to_f32_kernel<<<1024, 256>>>((const __half *)p, rows, cols, ld, dst);
    else
        to_f32_kernel<<<1024, 256>>>((const float *)p, rows, cols, ld, dst);
    CK(cudaGetLastError());
}

static float h2f(const void *p, gemm_dtype t, size_t i)
{
    const uint16_t *u = (const uint16_t *)p;
    if (t == GEMM_FP32)
        return ((const float *)p)[i];
    if (t == GEMM_BF16) {
        uint32_t b = (uint32_t)u[i] << 16;
        float f;
        memcpy(&f, &b, 4);
        return f;
    }
    __half h;
    memcpy(&h, &u[i], 2);
    return __half2float(h);
}

struct Case {
    long long m, n, k;
    gemm_dtype ab, cd;
    int ta, tb;
    float alpha, beta;
    int pad; /* extra elements per leading dimension (multiple of 8) */
    const char *kernel;
    gemm_precision prec; /* fp32 inputs */
};

static cublasHandle_t blas;
static gemmk_ctx *ctx;
static uint64_t seed_base = 12345;
static int failures, passes;

static const char *dn(gemm_dtype t)
{
    return t == GEMM_BF16 ? "bf16" : t == GEMM_FP16 ? "fp16" : "fp32";
}

static bool run_case(const Case &c, int idx)
{
    long long lda = (c.ta ? c.m : c.k), ldb = (c.tb ? c.k : c.n);
    lda = (lda + 7) / 8 * 8 + c.pad;
    ldb = (ldb + 7) / 8 * 8 + c.pad;
    long long ldc = (c.n + 7) / 8 * 8 + c.pad, ldd = ldc + 8;
    long long arows = c.ta ? c.k : c.m, brows = c.tb ? c.n : c.k;
    size_t ea = esize(c.ab), ec = esize(c.cd);
    void *A, *B, *C = nullptr, *D;
    float *Ref;
    CK(cudaMalloc(&A, arows * lda * ea));
    CK(cudaMalloc(&B, brows * ldb * ea));
    CK(cudaMalloc(&D, c.m * ldd * ec));
    CK(cudaMalloc(&Ref, c.m * c.n * sizeof(float)));
    uint64_t seed = seed_base + 1000003ull * idx;
    fill(A, c.ab, arows, lda, lda, seed + 1); /* padding random too */
    fill(B, c.ab, brows, ldb, ldb, seed + 2);
    if (c.beta != 0.f) {
        CK(cudaMalloc(&C, c.m * ldc * ec));
        fill(C, c.cd, c.m, c.n, ldc, seed + 3);
        to_f32(C, c.cd, c.m, c.n, ldc, Ref);
    }
    CK(cudaMemset(D, 0xFF, c.m * ldd * ec)); /* NaN poison */

    gemmk_problem p;
    memset(&p, 0, sizeof(p));
    p.m = c.m, p.n = c.n, p.k = c.k;
    p.ab_type = c.ab, p.cd_type = c.cd;
    p.trans_a = c.ta, p.trans_b = c.tb;
    p.a = A, p.b = B, p.c = C, p.d = D;
    p.lda = lda, p.ldb = ldb, p.ldc = ldc, p.ldd = ldd;
    p.alpha = c.alpha, p.beta = c.beta;
    p.precision = c.ab == GEMM_FP32 ? c.prec : GEMM_PRECISION_DEFAULT;
    const bool tf32 = c.ab == GEMM_FP32 && c.prec == GEMM_PRECISION_TF32;
    int rv = gemmk_gemm(ctx, &p, 0, c.kernel, NULL);
    if (rv != GEMM_OK) {
        printf("FAIL case %d: gemmk_gemm returned %d\n", idx, rv);
        failures++;
        return false;
    }
    CK(cudaGetLastError());
    CK(cudaDeviceSynchronize());

    /* cuBLAS reference, column-major view: D^T = op(B)^T op(A)^T */
    cudaDataType_t t = c.ab == GEMM_BF16   ? CUDA_R_16BF
                       : c.ab == GEMM_FP16 ? CUDA_R_16F
                                           : CUDA_R_32F;
    CB(cublasGemmEx(blas, c.tb ? CUBLAS_OP_T : CUBLAS_OP_N,
                    c.ta ? CUBLAS_OP_T : CUBLAS_OP_N, (int)c.n, (int)c.m,
                    (int)c.k, &c.alpha, B, t, (int)ldb, A, t, (int)lda, &c.beta,
                    Ref, CUDA_R_32F, (int)c.n, CUBLAS_COMPUTE_32F,
                    CUBLAS_GEMM_DEFAULT));
    CK(cudaDeviceSynchronize());

    std::vector<uint8_t> hd(c.m * ldd * ec);
    std::vector<float> href(c.m * c.n);
    CK(cudaMemcpy(hd.data(), D, hd.size(), cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(href.data(), Ref, href.size() * 4, cudaMemcpyDeviceToHost));
    /* stream-K, split-K and ws-swap (K split, partials summed in a fixed
     * order), ws-decode: the same bits run to run */
    if (c.kernel && (strstr(c.kernel, "sk") || strstr(c.kernel, "splitk") ||
                     strstr(c.kernel, "swap") || strstr(c.kernel, "decode"))) {
        std::vector<uint8_t> again(hd.size());
        for (int r = 0; r < 3; r++) {
            if (gemmk_gemm(ctx, &p, 0, c.kernel, NULL) != GEMM_OK) {
                printf("FAIL case %d: rerun %d failed\n", idx, r);
                failures++;
                return false;
            }
            CK(cudaMemcpy(again.data(), D, again.size(),
                          cudaMemcpyDeviceToHost));
            if (memcmp(again.data(), hd.data(), hd.size()) != 0) {
                printf("FAIL case %d (%s): rerun %d gave other bits\n", idx,
                       c.kernel, r);
                failures++;
                return false;
            }
        }
    }

    double eps = c.cd == GEMM_FP32 ? 1e-6 : c.cd == GEMM_FP16 ? 1e-3 : 8e-3;
    double ss = 0, se = 0, maxrel = 0;
    for (size_t i = 0; i < href.size(); i++)
        ss += (double)href[i] * href[i];
    double rms = sqrt(ss / href.size()) + 1e-30;
    long long bad = 0, nan = 0, touched_pad = 0;
    for (long long r = 0; r < c.m; r++) {
        for (long long j = 0; j < ldd; j++) {
            size_t off = r * ldd + j;
            if (j >= c.n) {
                for (size_t b = 0; b < ec; b++)
                    touched_pad += hd[off * ec + b] != 0xFF;
                continue;
            }
            float v = h2f(hd.data(), c.cd, off);
            double ref = href[r * c.n + j];
            if (isnan(v)) {
                nan++;
                continue;
            }
            double err = fabs(v - ref);
            se += err * err;
            double tol = eps * fabs(ref) + 2e-5 * sqrt((double)c.k) * rms +
                         (c.cd == GEMM_FP32 ? 1e-5 : eps) * rms;
            if (tf32) /* 2^-10 per product, random signs: ~sqrt(k) */
                tol += 4e-3 * rms + 2e-3 * fabs(ref);
            if (err > tol)
                bad++;
            double rel = err / (fabs(ref) + rms);
            if (rel > maxrel)
                maxrel = rel;
        }
    }
    double relf = sqrt(se) / sqrt(ss + 1e-30);

    /* fp64 host reference on a sample of elements */
    std::vector<uint8_t> ha(arows * lda * ea), hb(brows * ldb * ea);
    CK(cudaMemcpy(ha.data(), A, ha.size(), cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(hb.data(), B, hb.size(), cudaMemcpyDeviceToHost));
    std::vector<uint8_t> hc;
    if (C) {
        hc.resize(c.m * ldc * ec);
        CK(cudaMemcpy(hc.data(), C, hc.size(), cudaMemcpyDeviceToHost));
    }
    long long bad64 = 0;
    double max64 = 0;
    for (int s = 0; s < 48; s++) {
        long long r = s == 0 ? c.m - 1 : (long long)((s * 7919ll) % c.m);
        long long j = s == 0 ? c.n - 1 : (long long)((s * 104729ll) % c.n);
        double acc = 0, mag = 0;
        for (long long q = 0; q < c.k; q++) {
            double a = h2f(ha.data(), c.ab, c.ta ? q * lda + r : r * lda + q);
            double b = h2f(hb.data(), c.ab, c.tb ? j * ldb + q : q * ldb + j);
            acc += a * b;
            mag += fabs(a * b);
        }
        double ref = c.alpha * acc;
        if (C)
            ref += c.beta * h2f(hc.data(), c.cd, r * ldc + j);
        float v = h2f(hd.data(), c.cd, r * ldd + j);
        double err = fabs(v - ref);
        double tol = eps * fabs(ref) +
                     (tf32 ? 2.5e-3 : 1e-5) * fabs(c.alpha) * mag +
                     (c.cd == GEMM_FP32 ? 1e-6 : eps) * (fabs(c.beta) + 1e-3);
        if (!(err <= tol))
            bad64++;
        double rel = err / (fabs(ref) + 1e-3);
        if (rel > max64)
            max64 = rel;
    }
    const char *chosen = c.kernel;
    if (!chosen)
        gemmk_select(ctx, &p, &chosen);
    bool ok = bad == 0 && nan == 0 && touched_pad == 0 && bad64 == 0;
    if (!ok || getenv("GEMMK_VERBOSE"))
        printf("%s case %d: %lldx%lldx%lld %s%s->%s t%d%d a=%.2f b=%.2f "
               "pad=%d %s: bad=%lld nan=%lld pad_touched=%lld bad64=%lld "
               "relF=%.2e maxrel=%.2e max64=%.2e\n",
               ok ? "ok" : "FAIL", idx, c.m, c.n, c.k, dn(c.ab),
               c.ab != GEMM_FP32               ? ""
               : c.prec == GEMM_PRECISION_TF32 ? "(tf32)"
                                               : "(3xtf32)",
               dn(c.cd), c.ta, c.tb, c.alpha, c.beta, c.pad, chosen, bad, nan,
               touched_pad, bad64, relf, maxrel, max64);
    if (ok)
        passes++;
    else
        failures++;
    cudaFree(A);
    cudaFree(B);
    if (C)
        cudaFree(C);
    cudaFree(D);
    cudaFree(Ref);
    return ok;
}

/* tf32.h's rounding (what the pre-pass runs) against cvt.rna.tf32.f32,
 * bit for bit on every non-NaN input */
__global__ void tf32_cmp_kernel(const uint32_t *in, int n, uint32_t *mism,
                                uint32_t *first)
{
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n;
         i += gridDim.x * blockDim.x) {
        float x = __uint_as_float(in[i]);
        uint32_t hw;
        asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(hw) : "f"(x));
        uint32_t sw = gemmk_tf32_round_bits(in[i]);
        /* A NaN input: cvt.rna turns a NaN whose payload lies only in the
         * low 13 bits into an infinity (seen on the H100); tf32.h keeps
         * every NaN a NaN on purpose, so only that is required there. */
        bool ok = isnan(x) ? isnan(__uint_as_float(sw)) : hw == sw;
        if (!ok) {
            uint32_t j = atomicAdd(mism, 1u);
            if (j < 8) {
                first[3 * j] = in[i];
                first[3 * j + 1] = hw;
                first[3 * j + 2] = sw;
            }
        }
    }
}

static int tf32_round_check(void)
{
    std::vector<uint32_t> v = {
        0x00000000u, 0x80000000u, 0x3f801000u, 0x3f803000u, 0xbf801000u,
        0x3fffffffu, 0x7f7fe000u, 0x7f7fefffu, 0x7f7ff000u, 0x7f7fffffu,
        0xff7fffffu, 0x7f800000u, 0xff800000u, 0x7f800001u, 0x7fc00000u,
        0x00000001u, 0x00001000u, 0x007ff000u, 0x00400fffu, 0x80001000u};
    uint32_t x = 0x12345678u;
    for (int i = 0; i < (1 << 20); i++) {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        v.push_back(x);
    }
    uint32_t *din, *dm, mism = 0, first[24] = {0};
    CK(cudaMalloc(&din, v.size() * 4));
    CK(cudaMalloc(&dm, 4 * 25));
    CK(cudaMemcpy(din, v.data(), v.size() * 4, cudaMemcpyHostToDevice));
    CK(cudaMemset(dm, 0, 4));
    tf32_cmp_kernel<<<256, 256>>>(din, (int)v.size(), dm, dm + 1);
    CK(cudaGetLastError());
    CK(cudaMemcpy(&mism, dm, 4, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(first, dm + 1, sizeof(first), cudaMemcpyDeviceToHost));
    for (uint32_t j = 0; j < mism && j < 8; j++)
        printf("tf32 rounding mismatch: x=0x%08x cvt.rna=0x%08x ours=0x%08x\n",
               first[3 * j], first[3 * j + 1], first[3 * j + 2]);
    cudaFree(din);
    cudaFree(dm);
    printf("tf32 rounding vs cvt.rna: %s (%u mismatches of %zu)\n",
           mism ? "FAIL" : "ok", mism, v.size());
    return mism ? 1 : 0;
}

/* tf32 with K = 1: D = op(a) op(b) exactly, each operand as the tensor
 * cores read it: rounded ties away where the pre-pass wrote it
 * ("ws-tf32r": every MN-major operand, trans_a or B not trans_b;
 * "ws-tf32": B in TN only, since it reads an MN-major A into registers
 * and runs NN as D^T = B^T A^T, B^T then the MN-major A), ties to even
 * where the TMA unit rounded it on the way in (read in place;
 * "ws-decode-tf32": both). Every fourth value is a tie, where the two
 * roundings differ; tails of the pre-pass's tiles in both dimensions.
 * "ws-tf32" reads in place on 128 x 256 plans only: m x n large enough
 * that the plan takes them (2053 x 4099: two waves). */
static int tf32_k1_check(const char *kernel, int64_t m, int64_t n)
{
    const bool both =
        strcmp(kernel, "ws-tf32") != 0 && strcmp(kernel, "ws-tf32r") != 0;
    const bool a_prepass = strcmp(kernel, "ws-tf32r") == 0;
    int bad = 0;
    const int64_t ld = ((m > n ? m : n) + 3 + 7) / 8 * 8;
    std::vector<float> ha(m * ld), hb(n * ld), hd(m * ld);
    uint32_t x = 0x9e3779b9u;
    /* values in [1, 2) with random low bits, every fourth a tie */
    int drawn = 0;
    auto draw = [&]() {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        uint32_t u = 0x3f800000u | (x & 0x007fffffu);
        if (drawn++ % 4 == 0)
            u = (u & 0xffffe000u) | 0x1000u;
        return gemmk_bits_f32(u);
    };
    for (float &v : ha)
        v = draw();
    for (float &v : hb)
        v = draw();
    float *A, *B, *D;
    CK(cudaMalloc(&A, ha.size() * 4));
    CK(cudaMalloc(&B, hb.size() * 4));
    CK(cudaMalloc(&D, hd.size() * 4));
    CK(cudaMemcpy(A, ha.data(), ha.size() * 4, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(B, hb.data(), hb.size() * 4, cudaMemcpyHostToDevice));
    for (int t = 0; t < (both ? 2 : 4); t++) {
        gemmk_problem p;
        memset(&p, 0, sizeof(p));
        p.m = m, p.n = n, p.k = 1;
        p.ab_type = p.cd_type = GEMM_FP32;
        p.trans_a = t >> 1, p.trans_b = t & 1;
        p.a = A, p.b = B, p.d = D;
        /* stored A: m x 1 (ld 8) or 1 x m (ld); B: 1 x n (ld) or n x 1 */
        p.lda = p.trans_a ? ld : 8;
        p.ldb = p.trans_b ? 8 : ld;
        p.ldd = ld;
        p.alpha = 1;
        p.precision = GEMM_PRECISION_TF32;
        CK(cudaMemset(D, 0xff, hd.size() * 4));
        int rv = gemmk_gemm(ctx, &p, 0, kernel, NULL);
        CK(cudaDeviceSynchronize());
        CK(cudaMemcpy(hd.data(), D, hd.size() * 4, cudaMemcpyDeviceToHost));
        int wrong = rv != GEMM_OK;
        for (int64_t i = 0; i < m && !wrong; i++)
            for (int64_t j = 0; j < n; j++) {
                uint32_t ua = gemmk_f32_bits(ha[p.trans_a ? i : i * 8]);
                uint32_t ub = gemmk_f32_bits(hb[p.trans_b ? j * 8 : j]);
                float a = gemmk_bits_f32(a_prepass && p.trans_a
                                             ? gemmk_tf32_round_bits(ua)
                                             : gemmk_tf32_round_even_bits(ua));
                const bool b_prepass =
                    !both && !p.trans_b && (a_prepass || p.trans_a);
                float b =
                    gemmk_bits_f32(b_prepass ? gemmk_tf32_round_bits(ub)
                                             : gemmk_tf32_round_even_bits(ub));
                if (gemmk_f32_bits(hd[i * ld + j]) != gemmk_f32_bits(a * b)) {
                    printf("tf32 k=1 t%d%d: D[%lld][%lld] = %.9g, want %.9g\n",
                           p.trans_a, p.trans_b, (long long)i, (long long)j,
                           hd[i * ld + j], a * b);
                    wrong = 1;
                    break;
                }
            }
        bad += wrong;
    }
    cudaFree(A);
    cudaFree(B);
    cudaFree(D);
    printf("tf32 k=1 exact, %s %lldx%lld (%s): %s\n", kernel, (long long)m,
           (long long)n,
           both        ? "both ties to even"
           : a_prepass ? "pre-pass ties away, in place to even"
                       : "TN's B pre-passed ties away, the rest to even",
           bad ? "FAIL" : "ok");
    return bad;
}

/* Two kernels (k1, k2; NULL: auto) on the same fp32 operands: row-major
 * A (m x k) and B (k x n, or n x k with tb), their D (m x n) into h1 and
 * h2. Returns how many of the two calls failed. */
static int f32_two_runs(const std::vector<float> &ha,
                        const std::vector<float> &hb, int64_t m, int64_t n,
                        int64_t k, int tb, gemm_precision pr, const char *k1,
                        const char *k2, std::vector<float> &h1,
                        std::vector<float> &h2)
{
    float *A, *B, *D1, *D2;
    CK(cudaMalloc(&A, ha.size() * 4));
    CK(cudaMalloc(&B, hb.size() * 4));
    CK(cudaMalloc(&D1, (size_t)(m * n) * 4));
    CK(cudaMalloc(&D2, (size_t)(m * n) * 4));
    CK(cudaMemcpy(A, ha.data(), ha.size() * 4, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(B, hb.data(), hb.size() * 4, cudaMemcpyHostToDevice));
    gemmk_problem p;
    memset(&p, 0, sizeof(p));
    p.m = m, p.n = n, p.k = k;
    p.ab_type = p.cd_type = GEMM_FP32;
    p.trans_b = tb;
    p.a = A, p.b = B, p.lda = k, p.ldb = tb ? k : n, p.ldd = n, p.alpha = 1;
    p.precision = pr;
    p.d = D1;
    int bad = gemmk_gemm(ctx, &p, 0, k1, NULL) != GEMM_OK;
    p.d = D2;
    bad += gemmk_gemm(ctx, &p, 0, k2, NULL) != GEMM_OK;
    CK(cudaDeviceSynchronize());
    h1.resize((size_t)(m * n));
    h2.resize((size_t)(m * n));
    CK(cudaMemcpy(h1.data(), D1, h1.size() * 4, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(h2.data(), D2, h2.size() * 4, cudaMemcpyDeviceToHost));
    cudaFree(A);
    cudaFree(B);
    cudaFree(D1);
    cudaFree(D2);
    return bad;
}

/* Values the 3xTF32 split treats apart (inf, NaN, and a finite value
 * whose tf32 rounding would be infinite): "ws-decode-3xtf32" splits B in
 * registers and must give what "ws-3xtf32" (the pre-pass's split) gives
 * on the same data: the same inf / NaN / finite class everywhere, finite
 * values within 1e-5 of each other relative to sum |a b|. */
static int x3_special_check(void)
{
    const int64_t m = 16, n = 1024, k = 1024;
    std::vector<float> ha(m * k), hb(k * n), h1(m * n), h2(m * n);
    uint32_t x = 0x2545f491u;
    auto draw = [&]() {
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        return x;
    };
    for (float &v : ha) /* [1.5, 2) or (-2, -1.5], random low bits */
        v = gemmk_bits_f32(0x3fc00000u | (draw() & 0x003fffffu) |
                           (draw() & 0x80000000u));
    for (float &v : hb)
        v = gemmk_bits_f32(0x3f800000u | (draw() & 0x007fffffu)) - 1.5f;
    hb[5 * n + 7] = INFINITY;
    hb[9 * n + 100] = NAN;
    hb[3 * n + 200] = gemmk_bits_f32(0x7f7ff800u); /* rounds to inf */
    hb[8 * n + 300] = -gemmk_bits_f32(0x7f7fffffu);
    int bad = f32_two_runs(ha, hb, m, n, k, 0, GEMM_PRECISION_FP32,
                           "ws-decode-3xtf32", "ws-3xtf32", h1, h2);
    long long wrong = 0, special = 0;
    auto cls = [](float v) {
        return isnan(v) ? 3 : isinf(v) ? (v > 0 ? 1 : 2) : 0;
    };
    for (int64_t i = 0; i < m * n; i++) {
        special += cls(h2[i]) != 0;
        if (cls(h1[i]) != cls(h2[i]) ||
            (cls(h1[i]) == 0 && fabs(h1[i] - h2[i]) > 1e-5 * 2.0 * k)) {
            if (wrong++ < 4)
                printf("3xtf32 specials: D[%lld] = %g, ws-3xtf32 %g\n",
                       (long long)i, h1[i], h2[i]);
        }
    }
    /* every row meets the four special columns */
    bad += wrong != 0 || special < 4 * m;
    printf("3xtf32 specials, ws-decode-3xtf32 against ws-3xtf32: %s (%lld "
           "special, %lld differ)\n",
           bad ? "FAIL" : "ok", special, wrong);
    return bad;
}

/* ws-tf32's stream-K tail beyond the model (run_fp32.cu tf32_tail): at
 * 4096 x 12800 (1600 tiles of 128 x 256: 12.1 waves, the last 12% full)
 * auto must give ws-tf32sk's bits, NT and NN (D^T), the tail's partials
 * being summed in a fixed order; at 4096 x 4096 (3.9 waves) it must not
 * (no tail there), which shows the comparison tells the plans apart. */
static int tf32_tail_check(void)
{
    const int64_t k = 160, mn[2][2] = {{4096, 12800}, {4096, 4096}};
    int bad = 0;
    for (int w = 0; w < 2; w++)
        for (int tb = 0; tb < 2; tb++) {
            const int64_t m = mn[w][0], n = mn[w][1];
            std::vector<float> ha(m * k), hb(k * n), h1(m * n), h2(m * n);
            uint32_t x = 0x9e3779b9u + 17u * (uint32_t)(2 * w + tb);
            auto draw = [&]() {
                x ^= x << 13;
                x ^= x >> 17;
                x ^= x << 5;
                return gemmk_bits_f32(0x3f800000u | (x & 0x007fffffu)) - 1.5f;
            };
            for (float &v : ha)
                v = draw();
            for (float &v : hb)
                v = draw();
            bad += f32_two_runs(ha, hb, m, n, k, tb, GEMM_PRECISION_TF32, NULL,
                                "ws-tf32sk", h1, h2);
            const bool same = memcmp(h1.data(), h2.data(), h1.size() * 4) == 0;
            const bool want = w == 0;
            bad += same != want;
            printf("tf32 tail, %lldx%lldx%lld %s: auto %s ws-tf32sk's bits "
                   "(want %s): %s\n",
                   (long long)m, (long long)n, (long long)k, tb ? "NT" : "NN",
                   same ? "gives" : "differs from", want ? "gives" : "differs",
                   same == want ? "ok" : "FAIL");
        }
    return bad;
}

/* auto's tile choice past L2 (plan.cu auto_192, sk256_beats): the kernel
 * each shape resolved to on the H200 in kernel-notes v27's closing run,
 * where it was the faster plan. The choice depends on the SM count, so
 * other GPUs skip it (saying so). */
static int plan_192_check(void)
{
    struct {
        int64_t m, n, k;
        const char *want;
    } rows[] = {
        {512, 12288, 2048, "ws128x192e"},  /* 192 past L2 */
        {384, 16384, 8192, "ws128x192e"},  /* from M = 384 */
        {384, 6144, 16384, "ws128x192e"},  /* one partial wave: no tail */
        {384, 12288, 4096, "ws128x256sk"}, /* the tail beats 192 */
        {640, 8192, 8192, "ws128x256sk"},  /* ditto, within kSkDram */
        {256, 16384, 8192, "ws128x256e"},  /* M = 256 stays on 256 */
        {512, 28672, 8192, "ws128x256sk"},
    };
    int sms = 0, bad = 0;
    gemmk_ctx_info(ctx, &sms, NULL);
    if (sms != 132) {
        printf("plan 192: skipped, %d SMs (the rows were measured on 132)\n",
               sms);
        return 0;
    }
    size_t na = 0, nb = 0, nd = 0; /* bf16 elements, the largest row's */
    for (const auto &r : rows) {
        na = std::max(na, (size_t)(r.m * r.k));
        nb = std::max(nb, (size_t)(r.k * r.n));
        nd = std::max(nd, (size_t)(r.m * r.n));
    }
    void *a, *b, *d;
    CK(cudaMalloc(&a, na * 2));
    CK(cudaMalloc(&b, nb * 2));
    CK(cudaMalloc(&d, nd * 2));
    CK(cudaMemset(a, 0, na * 2));
    CK(cudaMemset(b, 0, nb * 2));
    for (const auto &r : rows) {
        gemmk_problem p;
        memset(&p, 0, sizeof(p));
        p.m = r.m, p.n = r.n, p.k = r.k;
        p.ab_type = p.cd_type = GEMM_BF16;
        p.a = a, p.b = b, p.d = d;
        p.lda = r.k, p.ldb = r.n, p.ldd = r.n;
        p.alpha = 1.f;
        gemmk_result res;
        memset(&res, 0, sizeof(res));
        const gemm_error rv = gemmk_gemm(ctx, &p, 0, NULL, &res);
        CK(cudaDeviceSynchronize());
        const bool ok =
            rv == GEMM_OK && res.kernel && !strcmp(res.kernel, r.want);
        bad += !ok;
        printf("plan 192, %lldx%lldx%lld: auto ran %s (want %s): %s\n",
               (long long)r.m, (long long)r.n, (long long)r.k,
               res.kernel ? res.kernel : "-", r.want, ok ? "ok" : "FAIL");
    }
    cudaFree(a);
    cudaFree(b);
    cudaFree(d);
    return bad;
}

static int api_checks(void)
{
    int bad = 0;
    gemmk_problem p;
    memset(&p, 0, sizeof(p));
    void *buf;
    CK(cudaMalloc(&buf, 1 << 20));
    p.m = p.n = p.k = 64;
    p.ab_type = GEMM_BF16, p.cd_type = GEMM_FP32;
    p.a = p.b = p.d = buf;
    p.lda = p.ldb = p.ldc = p.ldd = 64;
    p.alpha = 1;
    bad +=
        gemmk_gemm(ctx, &p, 0, "no-such-kernel", NULL) != GEMM_ERR_UNSUPPORTED;
    p.lda = 60;
    bad += gemmk_gemm(ctx, &p, 0, NULL, NULL) != GEMM_ERR_INVALID;
    p.lda = 64;
    p.ab_type = (gemm_dtype)9;
    bad += gemmk_gemm(ctx, &p, 0, NULL, NULL) != GEMM_ERR_DTYPE;
    p.ab_type = GEMM_BF16;
    p.precision = GEMM_PRECISION_TF32; /* only for fp32 inputs */
    bad += gemmk_gemm(ctx, &p, 0, NULL, NULL) != GEMM_ERR_INVALID;
    bad += gemmk_gemm(ctx, &p, 0, "ws-tf32", NULL) != GEMM_ERR_INVALID;
    p.precision = GEMM_PRECISION_DEFAULT;
    bad += gemmk_gemm(ctx, &p, 0, "ws-tf32", NULL) != GEMM_ERR_UNSUPPORTED;
    p.ab_type = GEMM_FP32;
    bad += gemmk_gemm(ctx, &p, 0, "ws128x256", NULL) != GEMM_ERR_UNSUPPORTED;
    bad += gemmk_gemm(ctx, &p, 0, "ws-tf32", NULL) != GEMM_ERR_UNSUPPORTED;
    bad +=
        gemmk_gemm(ctx, &p, 0, "wgmma-ws-tf32", NULL) != GEMM_ERR_UNSUPPORTED;
    p.precision = (gemm_precision)7;
    bad += gemmk_gemm(ctx, &p, 0, NULL, NULL) != GEMM_ERR_INVALID;
    p.precision = GEMM_PRECISION_TF32;
    bad += gemmk_gemm(ctx, &p, 0, "ws-3xtf32", NULL) != GEMM_ERR_UNSUPPORTED;
    bad += gemmk_gemm(ctx, &p, 0, "ws-tf32", NULL) != GEMM_OK;
    p.precision = GEMM_PRECISION_DEFAULT;
    const char *sel = nullptr;
    bad += gemmk_select(ctx, &p, &sel) != GEMM_OK || !sel ||
           strcmp(sel, "ws-3xtf32") != 0;
    p.lda = 60; /* multiple of 4 fp32 (16 B) but not of 8: refused */
    bad += gemmk_gemm(ctx, &p, 0, NULL, NULL) != GEMM_ERR_INVALID;
    p.lda = 64;
    CK(cudaDeviceSynchronize());
    p.ab_type = GEMM_BF16;
    p.k = 0;
    bad += gemmk_gemm(ctx, &p, 0, NULL, NULL) != GEMM_ERR_INVALID;
    p.k = 64;
    p.beta = 1; /* C NULL with beta != 0 */
    bad += gemmk_gemm(ctx, &p, 0, NULL, NULL) != GEMM_ERR_INVALID;
    p.beta = 0;
    p.a = (char *)buf + 8;
    bad += gemmk_gemm(ctx, &p, 0, NULL, NULL) != GEMM_ERR_INVALID;
    p.a = buf;
    gemmk_cache_stats st0, st1;
    gemmk_cache_stats_get(ctx, &st0);
    bad += gemmk_gemm(ctx, &p, 0, NULL, NULL) != GEMM_OK;
    bad += gemmk_gemm(ctx, &p, 0, NULL, NULL) != GEMM_OK;
    CK(cudaDeviceSynchronize());
    gemmk_cache_stats_get(ctx, &st1);
    bad += st1.hits < st0.hits + 2; /* second call hits for A and B */
    printf("api checks: %s (cache hits %llu misses %llu entries %u)\n",
           bad ? "FAIL" : "ok", (unsigned long long)st1.hits,
           (unsigned long long)st1.misses, st1.entries);
    cudaFree(buf);
    return bad;
}

/* The wide types through gemmk_gemm: fp64 and complex64/complex128 (with
 * conjugate transposes) by "auto" and "cublas", fp64 by an Ozaki-II name,
 * C distinct from D and in place, against a host reference; and a
 * refusal names the kernel and says why. */
static int wide_checks(void)
{
    int bad = 0;
    const int64_t m = 37, n = 29, k = 19, ld = 40;
    const gemm_dtype types[3] = {GEMM_FP64, GEMM_COMPLEX64, GEMM_COMPLEX128};
    const char *names[4] = {NULL, "cublas", "oz2-bytes", "cublas-dgemm"};
    const char *tnames[3] = {"fp64", "complex64", "complex128"};
    for (int ti = 0; ti < 3; ti++)
        for (int ni = 0; ni < 4; ni++)
            for (int tr = 0; tr < 4; tr++)
                for (int inplace = 0; inplace < 2; inplace++) {
                    gemm_dtype t = types[ti];
                    bool cplx = t != GEMM_FP64;
                    if (ni >= 2 && cplx)
                        continue;
                    int ta = tr & 1, tb = tr >> 1;
                    int conj = cplx && (ta || tb);
                    int parts = cplx ? 2 : 1;
                    size_t cnt = (size_t)(ld * ld) * parts;
                    std::vector<double> ha(cnt), hb(cnt), hc(cnt), hd(cnt);
                    for (size_t i = 0; i < cnt; i++) {
                        ha[i] = (double)((i * 7919 + tr) % 97) / 48.0 - 1.0;
                        hb[i] = (double)((i * 104729 + ti) % 89) / 44.0 - 1.0;
                        hc[i] = (double)((i * 31 + ni) % 53) / 26.0 - 1.0;
                    }
                    /* device copies in the type (complex64: floats) */
                    auto up = [&](const std::vector<double> &h) {
                        void *dp;
                        CK(cudaMalloc(&dp, cnt * (t == GEMM_COMPLEX64
                                                      ? sizeof(float)
                                                      : sizeof(double))));
                        if (t == GEMM_COMPLEX64) {
                            std::vector<float> f(h.begin(), h.end());
                            CK(cudaMemcpy(dp, f.data(), cnt * 4,
                                          cudaMemcpyHostToDevice));
                        } else {
                            CK(cudaMemcpy(dp, h.data(), cnt * 8,
                                          cudaMemcpyHostToDevice));
                        }
                        return dp;
                    };
                    void *da = up(ha), *db = up(hb), *dc = up(hc);
                    void *dd = inplace ? dc : up(hd);
                    gemmk_problem p;
                    memset(&p, 0, sizeof(p));
                    p.m = m, p.n = n, p.k = k;
                    p.ab_type = p.cd_type = t;
                    p.trans_a = ta, p.trans_b = tb;
                    p.conj_a = cplx && ta, p.conj_b = cplx && tb;
                    p.a = da, p.b = db, p.c = dc, p.d = dd;
                    p.lda = p.ldb = p.ldc = p.ldd = ld;
                    p.zalpha[0] = 1.25, p.zalpha[1] = cplx ? -0.5 : 0.0;
                    p.zbeta[0] = -0.75, p.zbeta[1] = cplx ? 0.25 : 0.0;
                    gemmk_result res;
                    gemm_error rv = gemmk_gemm(ctx, &p, 0, names[ni], &res);
                    CK(cudaDeviceSynchronize());
                    std::vector<double> out(cnt);
                    if (t == GEMM_COMPLEX64) {
                        std::vector<float> f(cnt);
                        CK(cudaMemcpy(f.data(), dd, cnt * 4,
                                      cudaMemcpyDeviceToHost));
                        out.assign(f.begin(), f.end());
                    } else {
                        CK(cudaMemcpy(out.data(), dd, cnt * 8,
                                      cudaMemcpyDeviceToHost));
                    }
                    double worst = 0;
                    for (int64_t i = 0; i < m && rv == GEMM_OK; i++)
                        for (int64_t j = 0; j < n; j++) {
                            double sr = 0, si = 0;
                            for (int64_t l = 0; l < k; l++) {
                                size_t ia = (ta ? l * ld + i : i * ld + l);
                                size_t ib = (tb ? j * ld + l : l * ld + j);
                                double ar = ha[ia * parts], br = hb[ib * parts];
                                double ai = cplx ? ha[ia * 2 + 1] : 0;
                                double bi = cplx ? hb[ib * 2 + 1] : 0;
                                if (p.conj_a)
                                    ai = -ai;
                                if (p.conj_b)
                                    bi = -bi;
                                sr += ar * br - ai * bi;
                                si += ar * bi + ai * br;
                            }
                            size_t ic = (size_t)(i * ld + j);
                            double cr = hc[ic * parts];
                            double ci = cplx ? hc[ic * 2 + 1] : 0;
                            double wr = p.zalpha[0] * sr - p.zalpha[1] * si +
                                        p.zbeta[0] * cr - p.zbeta[1] * ci;
                            double wi = p.zalpha[0] * si + p.zalpha[1] * sr +
                                        p.zbeta[0] * ci + p.zbeta[1] * cr;
                            double er = fabs(out[ic * parts] - wr);
                            if (cplx)
                                er = fmax(er, fabs(out[ic * 2 + 1] - wi));
                            worst = fmax(worst, er);
                        }
                    double tol = t == GEMM_COMPLEX64 ? 1e-4 : 1e-11;
                    if (rv != GEMM_OK || worst > tol || !res.kernel) {
                        printf("FAIL wide %s kernel %s ta %d tb %d conj %d "
                               "in place %d: rv %d (%s) ran %s, error %.3g\n",
                               tnames[ti], names[ni] ? names[ni] : "auto", ta,
                               tb, conj, inplace, (int)rv, res.msg,
                               res.kernel ? res.kernel : "-", worst);
                        bad++;
                    }
                    cudaFree(da);
                    cudaFree(db);
                    cudaFree(dc);
                    if (!inplace)
                        cudaFree(dd);
                }
    /* a 16-bit kernel refuses fp64 and says which and why */
    gemmk_problem p;
    memset(&p, 0, sizeof(p));
    void *buf;
    CK(cudaMalloc(&buf, 1 << 16));
    p.m = p.n = p.k = 8;
    p.ab_type = p.cd_type = GEMM_FP64;
    p.a = p.b = p.d = buf;
    p.lda = p.ldb = p.ldd = 8;
    p.zalpha[0] = 1;
    gemmk_result res;
    bad += gemmk_gemm(ctx, &p, 0, "ws128x256", &res) != GEMM_ERR_UNSUPPORTED ||
           strstr(res.msg, "ws128x256") == NULL;
    cudaFree(buf);
    printf("wide checks: %s\n", bad ? "FAIL" : "ok");
    return bad;
}

int main(int argc, char **argv)
{
    bool quick = false;
    const char *only = nullptr;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--quick"))
            quick = true;
        else if (!strcmp(argv[i], "--kernel") && i + 1 < argc)
            only = argv[++i];
        else if (!strcmp(argv[i], "--seed") && i + 1 < argc)
            seed_base = strtoull(argv[++i], nullptr, 10);
    }
    int count = 0;
    if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
        printf("skipped: no CUDA device\n");
        return 77;
    }
    cudaDeviceProp prop;
    CK(cudaGetDeviceProperties(&prop, 0));
    if (prop.major != 9 || prop.minor != 0) {
        printf("skipped: device is sm_%d%d, kernels need sm_90\n", prop.major,
               prop.minor);
        return 77;
    }
    int rv = gemmk_ctx_create(&ctx, 0);
    if (rv != GEMM_OK) {
        printf("FAIL: gemmk_ctx_create returned %d\n", rv);
        return 1;
    }
    CB(cublasCreate(&blas));
    CB(cublasSetMathMode(blas, CUBLAS_PEDANTIC_MATH));

    int api_bad = api_checks() + tf32_round_check() +
                  tf32_k1_check("ws-tf32", 2053, 4099) +
                  tf32_k1_check("ws-tf32r", 133, 70) +
                  tf32_k1_check("ws-decode-tf32", 133, 70) +
                  x3_special_check() + tf32_tail_check() + plan_192_check() +
                  wide_checks();
    std::vector<Case> cases;
    const gemm_dtype abs_[2] = {GEMM_BF16, GEMM_FP16};
    const gemm_dtype cds[3] = {GEMM_FP32, GEMM_BF16, GEMM_FP16};
    const char *kernels[] = {NULL,
                             "ws128x256",
                             "ws128x128",
                             "ws128x128_splitk",
                             "ws128x256_splitk",
                             "ws128x256c2",
                             "ws128x256c2_splitk",
                             "ws128x64"};
    if (quick) {
        int q = 0;
        const long long qs[][3] = {
            {1, 7, 63}, {65, 129, 127}, {127, 64, 255}, {200, 300, 1000}};
        for (auto &s : qs)
            for (int t = 0; t < 4; t++, q++)
                cases.push_back({s[0], s[1], s[2], abs_[q % 2], cds[q % 3],
                                 t >> 1, t & 1, 1.5f, (q % 2) ? 0.5f : 0.f,
                                 (q % 3) * 8, kernels[q % 8]});
        /* the ping-pong kernel (v5) */
        cases.push_back({200, 300, 1000, GEMM_BF16, GEMM_BF16, 0, 0, 1.5f, 0.5f,
                         8, "pp128x128"});
        cases.push_back({65, 129, 127, GEMM_FP16, GEMM_FP32, 1, 1, 1.0f, 0.f, 0,
                         "pp128x128"});
        /* the TMA-store epilogue (v7): its path (16-bit D, beta 0) and
         * the register fallback (beta != 0) */
        cases.push_back({200, 304, 1000, GEMM_BF16, GEMM_BF16, 0, 0, 1.5f, 0.f,
                         8, "ws128x256e"});
        cases.push_back({65, 136, 127, GEMM_FP16, GEMM_FP16, 1, 1, 1.0f, 0.f, 0,
                         "ws128x256e3"});
        cases.push_back({65, 129, 127, GEMM_BF16, GEMM_FP16, 0, 1, 1.0f, 0.f, 8,
                         "ws128x256e"}); /* N % 8: register fallback */
        cases.push_back({127, 64, 255, GEMM_FP16, GEMM_BF16, 1, 0, 1.0f, 0.5f,
                         8, "ws128x256e"});
        cases.push_back({200, 400, 1000, GEMM_BF16, GEMM_BF16, 1, 0, 1.5f, 0.f,
                         8, "ws128x192e"});
        /* the stream-K tail: partials over several CTAs, the fallback */
        cases.push_back({1536, 1536, 1536, GEMM_BF16, GEMM_BF16, 0, 0, 1.5f,
                         0.f, 8, "ws128x256sk"});
        cases.push_back({300, 520, 4000, GEMM_FP16, GEMM_FP32, 1, 1, 1.0f, 0.5f,
                         0, "ws128x256sk"});
        cases.push_back({1536, 1536, 4096, GEMM_FP16, GEMM_FP16, 1, 0, 1.0f,
                         0.f, 8, "ws128x192sk"});
        cases.push_back({300, 520, 4000, GEMM_BF16, GEMM_FP32, 0, 1, 1.0f, 0.5f,
                         0, "ws128x192sk"});
        /* decode shapes as their transpose (ws-swap) */
        cases.push_back({7, 1000, 4096, GEMM_BF16, GEMM_BF16, 0, 0, 1.5f, 0.5f,
                         8, "ws-swap"});
        cases.push_back({65, 2048, 200, GEMM_FP16, GEMM_FP32, 1, 1, 1.0f, 0.f,
                         0, "ws-swap"});
        cases.push_back({5, 1000, 300, GEMM_BF16, GEMM_BF16, 0, 1, 1.5f, 0.5f,
                         8, "ws-decode"});
        cases.push_back({40, 2048, 1000, GEMM_FP16, GEMM_FP32, 0, 0, 1.0f, 0.f,
                         0, "ws-decode"});
        cases.push_back({12, 9000, 700, GEMM_BF16, GEMM_FP16, 0, 0, 1.0f, 0.5f,
                         8, "ws-decode"});
    } else {
        const long long sz[] = {1,   7,   63,   64,   65,   127,
                                129, 255, 1000, 1024, 4095, 4096};
        int q = 0;
        /* each size in each dimension, the others moderate */
        for (long long v : sz) {
            for (int dim = 0; dim < 3; dim++, q++) {
                long long d3[3] = {200 + 8 * (q % 5), 300 - (q % 7), 129};
                d3[dim] = v;
                if (v >= 4095) /* keep the large ones affordable */
                    d3[(dim + 1) % 3] = 65;
                for (int t = 0; t < 4; t++)
                    cases.push_back({d3[0], d3[1], d3[2], abs_[(q + t) % 2],
                                     cds[(q + t) % 3], t >> 1, t & 1,
                                     (t == 3) ? -0.75f : 1.0f,
                                     (q + t) % 3 == 1 ? 0.f : 0.25f * (t + 1),
                                     8 * ((q + t) % 3), kernels[(q + t) % 8]});
            }
        }
        /* cross combinations of the awkward sizes */
        const long long odd[] = {1, 7, 63, 65, 127, 129, 255, 1000};
        for (int i = 0; i < 8; i++)
            for (int j = 0; j < 8; j++, q++) {
                int t = q % 4;
                cases.push_back({odd[i], odd[j], odd[(i + j + 3) % 8],
                                 abs_[q % 2], cds[q % 3], t >> 1, t & 1, 1.0f,
                                 q % 2 ? 0.f : 1.0f, 8 * (q % 2),
                                 kernels[q % 8]});
            }
        /* large squares, every transpose, both types, every config */
        for (int t = 0; t < 4; t++)
            for (int a = 0; a < 2; a++, q++)
                cases.push_back({4096, 4096, 4096, abs_[a], cds[q % 3], t >> 1,
                                 t & 1, 1.0f, q % 2 ? 0.f : -1.0f, 0,
                                 kernels[(q % 2) ? 5 : 1]});
        /* the ping-pong kernel (v5): tails, transposes, types, outputs */
        const long long pps[][3] = {{1, 7, 63},        {65, 129, 127},
                                    {127, 255, 1000},  {1000, 1000, 1000},
                                    {3000, 5000, 700}, {4096, 4096, 4096}};
        for (auto &s : pps)
            for (int t = 0; t < 4; t++, q++)
                cases.push_back({s[0], s[1], s[2], abs_[q % 2], cds[q % 3],
                                 t >> 1, t & 1, (t == 2) ? -0.75f : 1.0f,
                                 q % 2 ? 0.f : 0.5f, 8 * (q % 2), "pp128x128"});
        /* the TMA-store epilogue (v7), both buffer layouts: tails (boxes
         * clipped by TMA, whole consumer blocks outside D), transposes,
         * types; mostly its own path (16-bit D, beta 0, N % 8 == 0), one
         * fallback per shape (fp32 D, beta != 0), two shapes with N % 8 */
        const long long tss[][3] = {
            {1, 8, 63},         {65, 136, 127},    {127, 264, 1000},
            {1000, 1000, 1000}, {3000, 5000, 700}, {4096, 4096, 4096},
            {200, 72, 64},      {127, 255, 1000},  {257, 4095, 129}};
        const gemm_dtype tcd[4] = {GEMM_BF16, GEMM_FP16, GEMM_FP16, GEMM_BF16};
        /* and the 128 x 192 tiles' (e 2: three boxes a consumer, N not a
         * multiple of 192 in most shapes) */
        const char *const tsk[3] = {"ws128x256e", "ws128x256e3", "ws128x192e"};
        for (auto &s : tss)
            for (int e = 0; e < 3; e++)
                for (int t = 0; t < 4; t++, q++) {
                    bool fb = e >= 1 && t == 3;
                    cases.push_back({s[0], s[1], s[2], abs_[(t + e) % 2],
                                     fb ? GEMM_FP32 : tcd[t], t >> 1, t & 1,
                                     (t == 2) ? -0.75f : 1.0f, fb ? 0.5f : 0.f,
                                     8 * (q % 2), tsk[e]});
                }
        /* the stream-K tail: one partial wave split (1536^3: 72 tiles),
         * whole waves and a split tail (3072^3, 3000x5000x700), K of a
         * few k-blocks per CTA, tails in M and N, every transpose, the
         * register fallback (fp32 D, beta != 0); one case in three on
         * 128 x 192 tiles */
        const long long sks[][3] = {{1536, 1536, 1536}, {3072, 3072, 3072},
                                    {3000, 5000, 700},  {129, 264, 200},
                                    {1000, 1000, 1000}, {257, 4095, 129},
                                    {2560, 2560, 2560}};
        for (auto &s : sks)
            for (int t = 0; t < 4; t++, q++) {
                bool fb = t == 3;
                cases.push_back(
                    {s[0], s[1], s[2], abs_[q % 2], fb ? GEMM_FP32 : tcd[t],
                     t >> 1, t & 1, (t == 2) ? -0.75f : 1.0f, fb ? 0.5f : 0.f,
                     8 * (q % 2), q % 3 ? "ws128x256sk" : "ws128x192sk"});
            }
        /* skinny and split-K shapes (auto: 24 x 28672 x 1024 swapped by
         * GEMMK_SWAP_ANY_M, its plain plan one partial wave) */
        const long long skinny[][3] = {
            {1, 8192, 8192},     {16, 4096, 8192},  {64, 1000, 8192},
            {128, 2048, 4096},   {256, 4095, 4096}, {3000, 5000, 700},
            {1024, 1024, 16384}, {24, 28672, 1024}, {80, 8192, 1024}};
        for (auto &s : skinny)
            for (int t = 0; t < 4; t++, q++)
                cases.push_back({s[0], s[1], s[2], abs_[q % 2], cds[q % 3],
                                 t >> 1, t & 1, 1.0f, q % 2 ? 0.f : 0.5f,
                                 8 * (q % 2), NULL});
        /* decode shapes as their transpose (ws-swap): M 1..200 (one and
         * two 64-wide, 128- and 256-wide tiles), tails in N and K, K of
         * two k-blocks, every transpose, output type, beta, padding */
        const long long sws[][3] = {{1, 8192, 8192},  {7, 4095, 1000},
                                    {16, 4096, 8192}, {63, 1000, 4096},
                                    {65, 2048, 2048}, {128, 28672, 1024},
                                    {200, 1000, 129}, {33, 777, 65}};
        for (auto &s : sws)
            for (int t = 0; t < 4; t++, q++)
                cases.push_back({s[0], s[1], s[2], abs_[q % 2], cds[q % 3],
                                 t >> 1, t & 1, (t == 2) ? -0.75f : 1.0f,
                                 q % 2 ? 0.f : 0.5f, 8 * (q % 3), "ws-swap"});
        /* the decode kernel: tile widths M rounded up to 8 (M 1..128,
         * at and past the multiples of 8; M > 128: grid rows), tails in N
         * and K, K of one and two k-blocks, A untransposed, B either way */
        const long long dec[][3] = {
            {1, 8192, 8192},  {7, 4095, 1000},    {8, 1000, 65},
            {9, 2048, 4096},  {16, 777, 129},     {17, 4096, 2048},
            {32, 1000, 8192}, {33, 28672, 1024},  {63, 4095, 1000},
            {64, 8192, 4096}, {1, 28672, 8192},   {5, 9000, 777},
            {20, 9000, 100},  {64, 9000, 4096},   {65, 8192, 1000},
            {100, 4095, 777}, {128, 28672, 1024}, {129, 1000, 200},
            {50, 4096, 1000}, {90, 2048, 777},    {24, 1088, 640},
            {40, 17088, 256}};
        for (auto &s : dec)
            for (int t = 0; t < 2; t++, q++)
                cases.push_back({s[0], s[1], s[2], abs_[q % 2], cds[q % 3], 0,
                                 t, (q % 3 == 2) ? -0.75f : 1.0f,
                                 q % 2 ? 0.f : 0.5f, 8 * (q % 3), "ws-decode"});
        /* the pair (128-row tiles, a consumer on each 64; ws-decode's at
         * N = 28672) everywhere it serves, one consumer where ws-decode
         * takes the pair */
        for (auto &s : dec)
            for (int t = 0; t < 2 && s[0] <= 64; t++, q++) {
                const char *k =
                    s[1] > 20000 ? "ws-decode-single" : "ws-decode-pair";
                cases.push_back({s[0], s[1], s[2], abs_[q % 2], cds[q % 3], 0,
                                 t, (q % 3 == 2) ? -0.75f : 1.0f,
                                 q % 2 ? 0.f : 0.5f, 8 * (q % 3), k});
                if (s[1] > 20000)
                    cases.push_back({s[0], s[1], s[2], abs_[q % 2], cds[q % 3],
                                     0, t, 1.0f, 0.f, 0, "ws-decode-pair"});
                /* the quad (256-row tiles, a consumer on each 128) */
                cases.push_back(
                    {s[0], s[1], s[2], abs_[(q + 1) % 2], cds[(q + 1) % 3], 0,
                     t, (q % 3 == 1) ? -0.75f : 1.0f, q % 2 ? 0.5f : 0.f,
                     8 * ((q + 1) % 3), "ws-decode-quad"});
            }
    }
    /* fp32 inputs: (kernel, precision) pairs */
    struct KP {
        const char *k;
        gemm_precision p;
    };
    const KP f32k[] = {{NULL, GEMM_PRECISION_DEFAULT},
                       {NULL, GEMM_PRECISION_TF32},
                       {"ws-tf32", GEMM_PRECISION_TF32},
                       {"ws-3xtf32", GEMM_PRECISION_FP32},
                       {"wgmma-ws-tf32", GEMM_PRECISION_TF32},
                       {"ws-3xtf32", GEMM_PRECISION_DEFAULT}};
    {
        int q = 0;
        auto add = [&](long long m, long long n, long long k, int t, float al,
                       float be, int pad, int kk) {
            cases.push_back({m, n, k, GEMM_FP32, cds[q % 3], t >> 1, t & 1, al,
                             be, pad, f32k[kk % 6].k, f32k[kk % 6].p});
            q++;
        };
        if (quick) {
            const long long qs[][3] = {
                {1, 7, 63}, {65, 129, 127}, {127, 64, 255}, {200, 300, 1000}};
            for (auto &s : qs)
                for (int t = 0; t < 4; t++)
                    add(s[0], s[1], s[2], t, 1.5f, (q % 2) ? 0.5f : 0.f,
                        (q % 3) * 8, q);
        } else {
            const long long sz[] = {1,   7,   63,   64,   65,   127,
                                    129, 255, 1000, 1024, 4095, 4096};
            for (long long v : sz)
                for (int dim = 0; dim < 3; dim++) {
                    long long d3[3] = {200 + 8 * (q % 5), 300 - (q % 7), 129};
                    d3[dim] = v;
                    if (v >= 4095)
                        d3[(dim + 1) % 3] = 65;
                    for (int t = 0; t < 4; t++)
                        add(d3[0], d3[1], d3[2], t, (t == 3) ? -0.75f : 1.0f,
                            q % 3 == 1 ? 0.f : 0.25f * (t + 1), 8 * (q % 3), q);
                }
            const long long odd[] = {1, 7, 63, 65, 127, 129, 255, 1000};
            for (int i = 0; i < 8; i++)
                for (int j = 0; j < 8; j++)
                    add(odd[i], odd[j], odd[(i + j + 3) % 8], q % 4, 1.0f,
                        q % 2 ? 0.f : 1.0f, 8 * (q % 2), q);
            for (int t = 0; t < 4; t++)
                for (int kk = 2; kk < 5; kk++)
                    add(4096, 4096, 4096, t, 1.0f, t % 2 ? 0.f : -1.0f, 0, kk);
            const long long sk[][3] = {{1, 8192, 8192},
                                       {64, 1000, 8192},
                                       {3000, 5000, 700},
                                       {1024, 1024, 16384}};
            for (auto &s : sk)
                for (int t = 0; t < 4; t++)
                    add(s[0], s[1], s[2], t, 1.0f, q % 2 ? 0.f : 0.5f,
                        8 * (q % 2), q % 2);
        }
        /* the tf32 decode kernel by name and through auto: tile widths 64
         * and 128 (M up to 64, up to 128), tails in N and K, B either way,
         * M > 128 (grid rows), K of one k-block */
        const long long dt[][3] = {{1, 8192, 8192},  {7, 4095, 1000},
                                   {64, 8192, 4096}, {65, 1000, 2048},
                                   {128, 2048, 777}, {100, 28672, 1024},
                                   {200, 1000, 129}, {33, 777, 20},
                                   {16, 1024, 1024}, {96, 4096, 2048}};
        for (auto &s : dt)
            for (int t = 0; t < 2; t++)
                for (int named = 0; named < 2; named++, q++)
                    cases.push_back({s[0], s[1], s[2], GEMM_FP32, cds[q % 3], 0,
                                     t, (q % 3 == 2) ? -0.75f : 1.0f,
                                     q % 2 ? 0.f : 0.5f, 8 * (q % 3),
                                     named ? "ws-decode-tf32" : NULL,
                                     GEMM_PRECISION_TF32});
        /* the same shapes at fp32 accuracy: B split in registers
         * (ws-decode-3xtf32), by name and through auto */
        for (auto &s : dt)
            for (int t = 0; t < 2; t++)
                for (int named = 0; named < 2; named++, q++)
                    cases.push_back(
                        {s[0], s[1], s[2], GEMM_FP32, cds[q % 3], 0, t,
                         (q % 3 == 2) ? -0.75f : 1.0f, q % 2 ? 0.f : 0.5f,
                         8 * (q % 3), named ? "ws-decode-3xtf32" : NULL,
                         named ? GEMM_PRECISION_FP32 : GEMM_PRECISION_DEFAULT});
        /* tf32 tiles stored through TMA (fp32 D in 64 x 32 boxes, 16-bit D
         * in 64 x 64), the 3-stage layout, a stream-K tail always, the
         * register epilogue, and auto: unsplit 128 x 256 plans with tails in
         * M and N; N % 4 != 0 (fp32) or % 8 != 0 (16-bit) and beta != 0
         * store from registers inside the same kernel */
        const char *tsn[] = {"ws-tf32", "ws-tf32e3", "ws-tf32sk", "ws-tf32r",
                             NULL};
        const long long ts[][3] = {{2048, 2048, 2048}, {4096, 1028, 96},
                                   {1536, 3000, 777},  {3000, 5004, 700},
                                   {2100, 2052, 1100}, {1200, 2050, 513}};
        for (auto &s : ts)
            for (int t = 0; t < 4; t++)
                for (int r = 0; r < 5; r++, q++)
                    cases.push_back({s[0], s[1], s[2], GEMM_FP32, cds[q % 3],
                                     t >> 1, t & 1, (t == 3) ? -0.75f : 1.0f,
                                     (q % 7 == 3) ? 0.5f : 0.f, 8 * (q % 3),
                                     tsn[r], GEMM_PRECISION_TF32});
    }
    for (size_t i = 0; i < cases.size(); i++)
        if (!only || (cases[i].kernel && strstr(cases[i].kernel, only)))
            run_case(cases[i], (int)i);
    gemmk_cache_stats st;
    gemmk_cache_stats_get(ctx, &st);
    printf("gpu tests: %d passed, %d failed, api checks %s; tensor-map "
           "cache: %llu hits, %llu misses, %u entries\n",
           passes, failures, api_bad ? "FAILED" : "ok",
           (unsigned long long)st.hits, (unsigned long long)st.misses,
           st.entries);
    cublasDestroy(blas);
    gemmk_ctx_destroy(ctx);
    return failures || api_bad ? 1 : 0;
}
