/*
 * catalog_gpu_test.cu: every entry of the kernel catalog (the ladder, the
 * production kernels, "auto" and cuBLAS; iterated through
 * gemmk_catalog_*, so new entries are covered when they land) against
 * references, over the issue-3 shape set: dims 1, 7, 63, 64, 65, 127, 129,
 * 255, 1000, 1024, 4095, 4096 in many combinations, every transpose, input
 * type, output type and fp32 precision the entry claims, alpha/beta (beta
 * = 0 with C = NULL), non-minimal leading dimensions.
 *
 * Each case draws fresh random inputs in [-1, 1), poisons the padding of
 * A, B and C with NaN (a kernel that reads past a row's end fails) and all
 * of D with 0xFF bytes (NaN in every type), runs the entry by name, then
 * checks (1) every element of D was written and D's row padding was not,
 * (2) every element against alpha * (cuBLAS fp32 product, true fp32) +
 * beta * C, (3) a sample (first and last rows and columns, random
 * elements) against an fp64 host reference. Bounds are per input type and
 * precision (see tol()). The naive and tiled rungs skip the largest
 * products to keep the run short (said in the output).
 *
 * It also checks that gemmk_check and gemmk_gemm refuse every type,
 * transpose and precision combination an entry does not claim. Entries
 * of int8 inputs (int32 C and D) run through gemmk_gemm on a few shapes,
 * every transpose and integer alpha/beta, compared exactly with a 64-bit
 * host reference reduced modulo 2^32 (the int32 arithmetic wraps).
 *
 * A plain program (no Criterion) so it runs on a bare GPU host; with no
 * CUDA device it prints "skipped: no CUDA device" and exits 77 (skipped).
 * Usage: kernels_catalog_gpu_test [--quick] [--kernel NAME] [--seed N]
 */
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <vector>

#include "cuda_check.h"
#include "gemm_kernels.h"

/* ---- random inputs on the device ---- */

static __device__ uint32_t mix32(uint64_t x)
{
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return static_cast<uint32_t>(x ^ (x >> 31));
}

template <typename T> __device__ T from_float(float v);
template <> __device__ float from_float<float>(float v)
{
    return v;
}
template <> __device__ __half from_float<__half>(float v)
{
    return __float2half_rn(v);
}
template <> __device__ __nv_bfloat16 from_float<__nv_bfloat16>(float v)
{
    return __float2bfloat16_rn(v);
}

/* rows x cols (pitch ld) uniform in [-1, 1); the padding is left alone. */
template <typename T>
__global__ void fill_kernel(T *p, int64_t rows, int64_t cols, int64_t ld,
                            uint64_t seed)
{
    int64_t total = rows * cols;
    for (int64_t i =
             blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
         i < total; i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
        int64_t r = i / cols, c = i % cols;
        float v = (mix32(seed + static_cast<uint64_t>(i)) >> 8) *
                      (2.0f / 16777216.0f) -
                  1.0f;
        p[r * ld + c] = from_float<T>(v);
    }
}

/* ---- host helpers ---- */

static size_t esize(gemm_dtype t)
{
    return t == GEMM_FP32 ? 4 : 2;
}

static const char *tname(gemm_dtype t)
{
    return t == GEMM_BF16 ? "bf16" : t == GEMM_FP16 ? "fp16" : "fp32";
}

static const char *pname(gemm_precision p)
{
    return p == GEMM_PRECISION_TF32   ? "tf32"
           : p == GEMM_PRECISION_FP32 ? "fp32"
                                      : "default";
}

static double to_double(const void *base, gemm_dtype t, size_t i)
{
    if (t == GEMM_FP32)
        return static_cast<const float *>(base)[i];
    uint16_t bits;
    memcpy(&bits, static_cast<const char *>(base) + 2 * i, 2);
    if (t == GEMM_BF16) {
        uint32_t u = static_cast<uint32_t>(bits) << 16;
        float f;
        memcpy(&f, &u, 4);
        return f;
    }
    __half_raw raw;
    raw.x = bits;
    return __half2float(__half(raw));
}

static void fill(void *p, gemm_dtype t, int64_t rows, int64_t cols, int64_t ld,
                 uint64_t seed)
{
    int blocks = static_cast<int>((rows * cols + 255) / 256);
    if (blocks > 4096)
        blocks = 4096;
    if (t == GEMM_FP32)
        fill_kernel<<<blocks, 256>>>(static_cast<float *>(p), rows, cols, ld,
                                     seed);
    else if (t == GEMM_FP16)
        fill_kernel<<<blocks, 256>>>(static_cast<__half *>(p), rows, cols, ld,
                                     seed);
    else
        fill_kernel<<<blocks, 256>>>(static_cast<__nv_bfloat16 *>(p), rows,
                                     cols, ld, seed);
    CK(cudaGetLastError());
}

/* A device buffer that only grows. */
struct DevBuf {
    void *p = nullptr;
    size_t cap = 0;
    void *get(size_t bytes)
    {
        if (bytes > cap) {
            if (p)
                CK(cudaFree(p));
            CK(cudaMalloc(&p, bytes));
            cap = bytes;
        }
        return p;
    }
};

/* ---- cases ---- */

struct Combo {
    gemm_dtype ab, cd;
    int ta, tb;
    gemm_precision prec;
};

struct Case {
    int64_t m, n, k;
    Combo c;
    float alpha, beta;
    int pad; /* extra elements of leading dimension (multiple of 8) */
};

static bool claims(const gemmk_kernel_desc *d, const Combo &c)
{
    if (!(d->ab_types & (1u << c.ab)) || !(d->cd_types & (1u << c.cd)))
        return false;
    if (c.ab == GEMM_FP32) {
        gemm_precision p =
            c.prec == GEMM_PRECISION_DEFAULT ? GEMM_PRECISION_FP32 : c.prec;
        if (!(d->precisions & (1u << p)))
            return false;
    }
    return (d->transposes >> (c.ta | c.tb << 1)) & 1u;
}

/* Every valid combination (16-bit inputs take the default precision). */
static std::vector<Combo> all_combos()
{
    std::vector<Combo> v;
    const gemm_dtype types[3] = {GEMM_BF16, GEMM_FP16, GEMM_FP32};
    for (gemm_dtype ab : types)
        for (gemm_dtype cd : types)
            for (int t = 0; t < 4; t++)
                for (int p = 0; p < 3; p++) {
                    if (ab != GEMM_FP32 && p != GEMM_PRECISION_DEFAULT)
                        continue;
                    v.push_back(Combo{ab, cd, t & 1, t >> 1,
                                      static_cast<gemm_precision>(p)});
                }
    return v;
}

/*
 * Per-element bound on |D - expected| for expected = alpha * acc + beta *
 * cv: input/product rounding of the precision (a random walk over k
 * products of magnitude <= 1); fp32 accumulation (k additions, each off by
 * at most an ulp of a partial sum, and partial sums are about sqrt(k) or
 * |acc|); rounding to the output type of the result and of its two terms
 * (an epilogue may round alpha * acc before adding beta * C); a small
 * absolute floor.
 */
static double tol(const Combo &c, int64_t k, double alpha, double beta,
                  double acc, double cv)
{
    double e_in;
    if (c.ab != GEMM_FP32)
        e_in = ldexp(1.0, -24); /* 16-bit products are exact in fp32 */
    else if (c.prec == GEMM_PRECISION_TF32)
        e_in = ldexp(1.0, -9); /* both operands to 10-bit mantissas */
    else
        e_in = ldexp(1.0, -20); /* true fp32 or 3xTF32 */
    double e_out = c.cd == GEMM_BF16   ? ldexp(1.0, -8)
                   : c.cd == GEMM_FP16 ? ldexp(1.0, -10)
                                       : ldexp(1.0, -22);
    double kd = static_cast<double>(k), sk = sqrt(kd);
    double x = alpha * acc + beta * cv;
    return fabs(alpha) * (4.0 * e_in * sk +
                          ldexp(1.0, -22) * kd * (1.0 + fabs(acc) / sk)) +
           fabs(beta) * ldexp(1.0, -22) +
           e_out * (fabs(x) + fabs(alpha * acc) + fabs(beta * cv)) + 1e-6;
}

struct Ctx {
    gemmk_ctx *ctx;
    cudaStream_t s;
    DevBuf a, b, c, d, ref;
    std::vector<char> ha, hb, hc, hd;
    std::vector<float> href;
    uint64_t seed;
    int failures, cases, skipped;
};

static void fail_msg(Ctx &t, const char *name, const Case &cs, const char *what)
{
    t.failures++;
    if (t.failures <= 40)
        fprintf(stderr,
                "FAIL %s %lldx%lldx%lld ab=%s cd=%s ta=%d tb=%d prec=%s "
                "alpha=%g beta=%g pad=%d: %s\n",
                name, (long long)cs.m, (long long)cs.n, (long long)cs.k,
                tname(cs.c.ab), tname(cs.c.cd), cs.c.ta, cs.c.tb,
                pname(cs.c.prec), cs.alpha, cs.beta, cs.pad, what);
}

/* Runs one case; returns true when it passed. */
static bool run_case(Ctx &t, const char *name, const Case &cs)
{
    const Combo &c = cs.c;
    const int64_t m = cs.m, n = cs.n, k = cs.k;
    auto ld_of = [&](int64_t cols) { return (cols + 7) / 8 * 8 + cs.pad; };
    const int64_t arows = c.ta ? k : m, acols = c.ta ? m : k;
    const int64_t brows = c.tb ? n : k, bcols = c.tb ? k : n;
    const int64_t lda = ld_of(acols), ldb = ld_of(bcols);
    const int64_t ldc = ld_of(n), ldd = ld_of(n);
    const size_t ea = esize(c.ab), ec = esize(c.cd);
    const size_t abytes = arows * lda * ea, bbytes = brows * ldb * ea;
    const size_t cbytes = m * ldc * ec, dbytes = m * ldd * ec;
    const bool use_c = cs.beta != 0.0f;

    void *a = t.a.get(abytes), *b = t.b.get(bbytes);
    void *cc = use_c ? t.c.get(cbytes) : nullptr;
    void *d = t.d.get(dbytes);
    const int64_t ldr = (n + 7) / 8 * 8; /* the reference's ld */
    float *ref = static_cast<float *>(t.ref.get(m * ldr * sizeof(float)));
    /* NaN padding (0xFF bytes), then the values. */
    CK(cudaMemsetAsync(a, 0xFF, abytes, t.s));
    CK(cudaMemsetAsync(b, 0xFF, bbytes, t.s));
    if (use_c)
        CK(cudaMemsetAsync(cc, 0xFF, cbytes, t.s));
    CK(cudaMemsetAsync(d, 0xFF, dbytes, t.s));
    CK(cudaStreamSynchronize(t.s));
    fill(a, c.ab, arows, acols, lda, t.seed += 0x1000003);
    fill(b, c.ab, brows, bcols, ldb, t.seed += 0x1000003);
    if (use_c)
        fill(cc, c.cd, m, n, ldc, t.seed += 0x1000003);
    CK(cudaDeviceSynchronize());

    gemmk_problem p;
    memset(&p, 0, sizeof(p));
    p.m = m;
    p.n = n;
    p.k = k;
    p.ab_type = c.ab;
    p.cd_type = c.cd;
    p.trans_a = c.ta;
    p.trans_b = c.tb;
    p.a = a;
    p.b = b;
    p.c = cc;
    p.d = d;
    p.lda = lda;
    p.ldb = ldb;
    p.ldc = ldc;
    p.ldd = ldd;
    p.alpha = cs.alpha;
    p.beta = cs.beta;
    p.precision = c.prec;
    gemm_error rv = gemmk_gemm(t.ctx, &p, t.s, name, NULL);
    if (rv != GEMM_OK) {
        char msg[128];
        snprintf(msg, sizeof(msg), "gemmk_gemm returned %d", (int)rv);
        fail_msg(t, name, cs, msg);
        return false;
    }
    cudaError_t e = cudaStreamSynchronize(t.s);
    if (e != cudaSuccess) {
        fprintf(stderr, "FATAL %s: %s (context is lost)\n", name,
                cudaGetErrorString(e));
        exit(2);
    }

    /* The reference product op(A) op(B), fp32 out, true fp32. */
    gemmk_problem r = p;
    r.cd_type = GEMM_FP32;
    r.c = nullptr;
    r.d = ref;
    r.ldc = r.ldd = ldr;
    r.alpha = 1.0f;
    r.beta = 0.0f;
    r.precision =
        c.ab == GEMM_FP32 ? GEMM_PRECISION_FP32 : GEMM_PRECISION_DEFAULT;
    rv = gemmk_gemm(t.ctx, &r, t.s, "cublas", NULL);
    if (rv != GEMM_OK) {
        fail_msg(t, name, cs, "the cublas reference failed");
        return false;
    }
    CK(cudaStreamSynchronize(t.s));

    t.ha.resize(abytes);
    t.hb.resize(bbytes);
    t.hd.resize(dbytes);
    t.href.resize(m * ldr);
    CK(cudaMemcpy(t.ha.data(), a, abytes, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(t.hb.data(), b, bbytes, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(t.hd.data(), d, dbytes, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(t.href.data(), ref, m * ldr * sizeof(float),
                  cudaMemcpyDeviceToHost));
    if (use_c) {
        t.hc.resize(cbytes);
        CK(cudaMemcpy(t.hc.data(), cc, cbytes, cudaMemcpyDeviceToHost));
    }
    const double alpha = cs.alpha, beta = cs.beta;
    auto cval = [&](int64_t i, int64_t j) {
        return use_c ? to_double(t.hc.data(), c.cd, i * ldc + j) : 0.0;
    };
    char msg[256];

    /* (1) all written, padding untouched; (2) against cuBLAS. */
    double worst = 0.0;
    int64_t wi = -1, wj = -1;
    for (int64_t i = 0; i < m; i++) {
        for (int64_t j = 0; j < n; j++) {
            double v = to_double(t.hd.data(), c.cd, i * ldd + j);
            double acc = t.href[i * ldr + j], cv = cval(i, j);
            double x = alpha * acc + beta * cv;
            double err = fabs(v - x), bound = tol(c, k, alpha, beta, acc, cv);
            if (!(err <= bound)) { /* NaN (unwritten) fails too */
                double ratio = isnan(err) ? INFINITY : err / bound;
                if (wi < 0 || ratio > worst) {
                    worst = ratio;
                    wi = i;
                    wj = j;
                }
            }
        }
        const unsigned char *pad =
            reinterpret_cast<unsigned char *>(t.hd.data() + (i * ldd + n) * ec);
        for (size_t q = 0; q < (ldd - n) * ec; q++)
            if (pad[q] != 0xFF) {
                snprintf(msg, sizeof(msg), "row %lld: padding overwritten",
                         (long long)i);
                fail_msg(t, name, cs, msg);
                return false;
            }
    }
    if (wi >= 0) {
        double v = to_double(t.hd.data(), c.cd, wi * ldd + wj);
        double acc = t.href[wi * ldr + wj], cv = cval(wi, wj);
        double x = alpha * acc + beta * cv;
        snprintf(msg, sizeof(msg),
                 "vs cuBLAS: D[%lld][%lld] = %.6g, expected %.6g (bound %.3g)",
                 (long long)wi, (long long)wj, v, x,
                 tol(c, k, alpha, beta, acc, cv));
        fail_msg(t, name, cs, msg);
        return false;
    }

    /* (3) fp64 on a sample: rows 0 and m-1, column n-1, random. */
    auto aval = [&](int64_t i, int64_t q) {
        return to_double(t.ha.data(), c.ab, c.ta ? q * lda + i : i * lda + q);
    };
    auto bval = [&](int64_t q, int64_t j) {
        return to_double(t.hb.data(), c.ab, c.tb ? j * ldb + q : q * ldb + j);
    };
    std::vector<std::pair<int64_t, int64_t>> pts;
    int64_t step = n > 512 ? n / 512 : 1;
    for (int64_t j = 0; j < n; j += step) {
        pts.push_back({0, j});
        pts.push_back({m - 1, j});
    }
    pts.push_back({0, n - 1});
    pts.push_back({m - 1, n - 1});
    step = m > 512 ? m / 512 : 1;
    for (int64_t i = 0; i < m; i += step)
        pts.push_back({i, n - 1});
    uint64_t rs = t.seed;
    for (int q = 0; q < 256; q++) {
        rs = rs * 6364136223846793005ull + 1442695040888963407ull;
        pts.push_back({static_cast<int64_t>((rs >> 33) % m),
                       static_cast<int64_t>((rs >> 11) % n)});
    }
    for (auto &pt : pts) {
        int64_t i = pt.first, j = pt.second;
        double acc = 0.0;
        for (int64_t q = 0; q < k; q++)
            acc += aval(i, q) * bval(q, j);
        double cv = cval(i, j);
        double x = alpha * acc + beta * cv;
        double v = to_double(t.hd.data(), c.cd, i * ldd + j);
        double bound = tol(c, k, alpha, beta, acc, cv);
        if (!(fabs(v - x) <= bound)) {
            snprintf(msg, sizeof(msg),
                     "vs fp64: D[%lld][%lld] = %.6g, expected %.6g (bound "
                     "%.3g)",
                     (long long)i, (long long)j, v, x, bound);
            fail_msg(t, name, cs, msg);
            return false;
        }
    }
    return true;
}

/* ---- the shape set ---- */

static const int64_t kDims[] = {1,   7,   63,   64,   65,   127,
                                129, 255, 1000, 1024, 4095, 4096};

struct Shape {
    int64_t m, n, k;
};

static std::vector<Shape> shapes(bool quick)
{
    std::vector<Shape> v;
    /* Small dims in all (m, n) pairs, k rotating over the whole set. */
    const int small = 8; /* 1 .. 255 */
    int r = 0;
    for (int i = 0; i < small; i++)
        for (int j = 0; j < small; j += quick ? 3 : 1)
            v.push_back({kDims[i], kDims[j], kDims[(r++) % 10]});
    /* One dimension large, the others small or mid. */
    const Shape mid[] = {
        {1000, 1024, 1000}, {1024, 1000, 1024}, {129, 1000, 4095},
        {4095, 7, 1024},    {7, 4095, 4096},    {1, 4096, 4096},
        {4096, 1, 4096},    {4096, 4096, 1},    {4095, 4095, 65},
        {255, 4096, 1024},  {1024, 4096, 255},  {63, 64, 4095},
        {1000, 1000, 1000}, {4096, 64, 4096},   {65, 4096, 127},
    };
    for (const Shape &s : mid)
        if (!quick || s.m * s.n * s.k < (1ll << 26))
            v.push_back(s);
    if (!quick) {
        v.push_back({4095, 4096, 4095});
        v.push_back({4096, 4096, 4096});
    }
    return v;
}

/* Largest m*n*k a rung runs here (the slow rungs would dominate). */
static int64_t max_volume(const gemmk_kernel_desc *d)
{
    if (d->ladder >= 1 && d->ladder <= 2)
        return 1ll << 33;
    if (d->ladder == 3)
        return 1ll << 35;
    return INT64_MAX;
}

/* ---- int8 entries ---- */

/* D (m x n, ldd) of one int8 problem against the host reference; returns
 * the number of wrong elements (first one printed). */
static int s8_case(Ctx &t, const char *name, int64_t m, int64_t n, int64_t k,
                   int ta, int tb, int32_t alpha, int32_t beta)
{
    int64_t ar = ta ? k : m, ac = ta ? m : k, br = tb ? n : k, bc = tb ? k : n;
    int64_t lda = (ac + 15) / 16 * 16 + 16, ldb = (bc + 15) / 16 * 16;
    int64_t ldc = (n + 3) / 4 * 4 + 4, ldd = (n + 3) / 4 * 4;
    std::vector<int8_t> ha(ar * lda), hb(br * ldb);
    std::vector<int32_t> hc(m * ldc), hd(m * ldd);
    uint64_t x = t.seed + (uint64_t)(m * 31 + n * 7 + k + ta * 3 + tb);
    for (auto &v : ha)
        v = (int8_t)((x = x * 6364136223846793005ull + 1) >> 56);
    for (auto &v : hb)
        v = (int8_t)((x = x * 6364136223846793005ull + 1) >> 56);
    for (auto &v : hc)
        v = (int32_t)((x = x * 6364136223846793005ull + 1) >> 32);
    void *da = t.a.get(ha.size()), *db = t.b.get(hb.size()),
         *dc = t.c.get(hc.size() * 4), *dd = t.d.get(hd.size() * 4);
    CK(cudaMemcpy(da, ha.data(), ha.size(), cudaMemcpyHostToDevice));
    CK(cudaMemcpy(db, hb.data(), hb.size(), cudaMemcpyHostToDevice));
    CK(cudaMemcpy(dc, hc.data(), hc.size() * 4, cudaMemcpyHostToDevice));
    CK(cudaMemset(dd, 0xff, hd.size() * 4));
    gemmk_problem p;
    memset(&p, 0, sizeof(p));
    p.m = m;
    p.n = n;
    p.k = k;
    p.ab_type = GEMM_INT8;
    p.cd_type = GEMM_INT32;
    p.trans_a = ta;
    p.trans_b = tb;
    p.a = da;
    p.b = db;
    p.c = beta != 0 ? dc : nullptr;
    p.d = dd;
    p.lda = lda;
    p.ldb = ldb;
    p.ldc = ldc;
    p.ldd = ldd;
    p.zalpha[0] = alpha;
    p.zbeta[0] = beta;
    gemmk_result res;
    gemm_error rv = gemmk_gemm(t.ctx, &p, t.s, name, &res);
    CK(cudaStreamSynchronize(t.s));
    if (rv != GEMM_OK) {
        fprintf(stderr, "FAIL %s: int8 %lldx%lldx%lld ta=%d tb=%d -> %d: %s\n",
                name, (long long)m, (long long)n, (long long)k, ta, tb, (int)rv,
                res.msg);
        return 1;
    }
    CK(cudaMemcpy(hd.data(), dd, hd.size() * 4, cudaMemcpyDeviceToHost));
    int bad = 0;
    /* every row up to 64, then every 7th */
    for (int64_t i = 0; i < m; i += i < 64 ? 1 : 7)
        for (int64_t j = 0; j < n; j++) {
            int64_t acc = 0;
            for (int64_t l = 0; l < k; l++)
                acc += (int64_t)(ta ? ha[l * lda + i] : ha[i * lda + l]) *
                       (tb ? hb[j * ldb + l] : hb[l * ldb + j]);
            uint64_t r = (uint64_t)(int64_t)alpha * (uint64_t)acc;
            if (beta != 0)
                r += (uint64_t)(int64_t)beta *
                     (uint64_t)(int64_t)hc[i * ldc + j];
            int32_t want = (int32_t)(uint32_t)r, got = hd[i * ldd + j];
            if (got != want && bad++ == 0)
                fprintf(stderr,
                        "FAIL %s: int8 %lldx%lldx%lld ta=%d tb=%d alpha %d "
                        "beta %d: D[%lld][%lld] = %d, want %d\n",
                        name, (long long)m, (long long)n, (long long)k, ta, tb,
                        alpha, beta, (long long)i, (long long)j, got, want);
        }
    return bad != 0;
}

/* Every transpose of a few shapes (tails, a K past one stage, a large
 * one) with integer alpha and beta. Returns the failed cases. */
static int s8_entry(Ctx &t, const char *name, bool quick, int *cases)
{
    const int64_t shp[][3] = {{1, 1, 1},        {7, 1, 63},
                              {65, 129, 127},   {128, 256, 64},
                              {300, 200, 1000}, {1024, 1000, 4096}};
    const int32_t sc[][2] = {{1, 0}, {-3, 2}, {2147483647, -1}, {5, 1}};
    int failed = 0, n = quick ? 5 : 6;
    for (int s = 0; s < n; s++)
        for (int tr = 0; tr < 4; tr++) {
            const int32_t *ab = sc[(s + tr) % 4];
            failed += s8_case(t, name, shp[s][0], shp[s][1], shp[s][2], tr & 1,
                              tr >> 1, ab[0], ab[1]);
            (*cases)++;
        }
    return failed;
}

/* ---- refusals ---- */

static int check_refusals(Ctx &t, const gemmk_kernel_desc *d)
{
    int bad = 0;
    const char *why = nullptr;
    void *buf = t.d.get(8 * 8 * 4 * 3);
    for (const Combo &c : all_combos()) {
        gemmk_problem p;
        memset(&p, 0, sizeof(p));
        p.m = p.n = p.k = 8;
        p.ab_type = c.ab;
        p.cd_type = c.cd;
        p.trans_a = c.ta;
        p.trans_b = c.tb;
        p.precision = c.prec;
        p.a = buf;
        p.b = static_cast<char *>(buf) + 256;
        p.d = static_cast<char *>(buf) + 512;
        p.lda = p.ldb = p.ldc = p.ldd = 8;
        p.alpha = 1.0f;
        gemm_error rv = gemmk_check(d->name, &p, &why);
        bool claimed = claims(d, c);
        if (claimed != (rv == GEMM_OK) ||
            (!claimed && (rv != GEMM_ERR_UNSUPPORTED || !why))) {
            fprintf(stderr,
                    "FAIL %s: gemmk_check ab=%s cd=%s ta=%d tb=%d prec=%s "
                    "-> %d, claimed %d\n",
                    d->name, tname(c.ab), tname(c.cd), c.ta, c.tb,
                    pname(c.prec), (int)rv, (int)claimed);
            bad++;
            continue;
        }
        if (!claimed) {
            rv = gemmk_gemm(t.ctx, &p, t.s, d->name, NULL);
            if (rv != GEMM_ERR_UNSUPPORTED) {
                fprintf(stderr,
                        "FAIL %s: gemmk_gemm ran an unclaimed combination "
                        "(ab=%s cd=%s ta=%d tb=%d prec=%s) -> %d\n",
                        d->name, tname(c.ab), tname(c.cd), c.ta, c.tb,
                        pname(c.prec), (int)rv);
                bad++;
            }
        }
    }
    CK(cudaStreamSynchronize(t.s));
    return bad;
}

int main(int argc, char **argv)
{
    bool quick = false;
    const char *only = nullptr;
    uint64_t seed = 12345;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--quick") == 0)
            quick = true;
        else if (strcmp(argv[i], "--kernel") == 0 && i + 1 < argc)
            only = argv[++i];
        else if (strcmp(argv[i], "--seed") == 0 && i + 1 < argc)
            seed = strtoull(argv[++i], nullptr, 0);
        else {
            fprintf(stderr, "usage: %s [--quick] [--kernel NAME] [--seed N]\n",
                    argv[0]);
            return 2;
        }
    }
    int count = 0;
    if (cudaGetDeviceCount(&count) != cudaSuccess || count == 0) {
        printf("skipped: no CUDA device\n");
        return 77;
    }
    Ctx t;
    t.seed = seed;
    t.failures = t.cases = t.skipped = 0;
    gemm_error rv = gemmk_ctx_create(&t.ctx, 0);
    if (rv != GEMM_OK) {
        fprintf(stderr, "gemmk_ctx_create: %d\n", (int)rv);
        return 1;
    }
    CK(cudaStreamCreate(&t.s));

    int refusal_failures = 0;
    if (gemmk_gemm(t.ctx, nullptr, t.s, "naive", NULL) == GEMM_OK) {
        fprintf(stderr, "FAIL: gemmk_gemm accepted a NULL problem\n");
        refusal_failures++;
    }

    const std::vector<Shape> shp = shapes(quick);
    const std::vector<Combo> combos = all_combos();
    const Shape tails[] = {{65, 129, 127}, {7, 1, 63}};
    const float ab[][2] = {
        {1.0f, 0.0f}, {0.5f, -1.5f}, {-2.0f, 0.25f}, {1.0f, 1.0f}};
    const int pads[] = {0, 8, 64};

    printf("%-20s %6s %6s %8s  %s\n", "kernel", "cases", "failed", "skipped",
           "(largest products skipped: slow rungs)");
    for (int ei = 0; ei < gemmk_catalog_size(); ei++) {
        const gemmk_kernel_desc *d = gemmk_catalog_entry(ei);
        if (!d) {
            fprintf(stderr, "FAIL: catalog entry %d is NULL\n", ei);
            refusal_failures++;
            continue;
        }
        if (only && strcmp(only, d->name) != 0)
            continue;
        refusal_failures += check_refusals(t, d);
        std::vector<Combo> mine;
        for (const Combo &c : combos)
            if (claims(d, c))
                mine.push_back(c);
        if (mine.empty() && (d->ab_types & (1u << GEMM_INT8)) != 0) {
            int n = 0, f = s8_entry(t, d->name, quick, &n);
            t.failures += f;
            t.cases += n;
            printf("%-20s %6d %6d %8d  (int8 -> int32, exact)\n", d->name, n, f,
                   0);
            fflush(stdout);
            continue;
        }
        if (mine.empty() && (d->ab_types & GEMMK_WIDE_TYPES) != 0) {
            /* fp64 / complex only: ozaki_gpu_test covers them */
            printf("%-20s (wide types only: kernels_ozaki_gpu_test)\n",
                   d->name);
            continue;
        }
        if (mine.empty()) {
            fprintf(stderr, "FAIL %s: claims no combination\n", d->name);
            refusal_failures++;
            continue;
        }
        int before = t.failures, n = 0, skipped = 0;
        /* Every claimed combination on two tail shapes... */
        int ci = 0;
        for (const Shape &s : tails)
            for (const Combo &c : mine) {
                Case cs{s.m,           s.n,           s.k,         c,
                        ab[ci % 4][0], ab[ci % 4][1], pads[ci % 3]};
                ci++;
                n++;
                run_case(t, d->name, cs);
            }
        /* ...and the shape set, combinations, alpha/beta and lds
         * rotating. */
        for (size_t si = 0; si < shp.size(); si++) {
            const Shape &s = shp[si];
            if (s.m * s.n * s.k > max_volume(d)) {
                skipped++;
                continue;
            }
            const Combo &c = mine[(si * 7 + ei) % mine.size()];
            Case cs{s.m,           s.n,           s.k,         c,
                    ab[si % 4][0], ab[si % 4][1], pads[si % 3]};
            n++;
            run_case(t, d->name, cs);
        }
        t.cases += n;
        t.skipped += skipped;
        printf("%-20s %6d %6d %8d\n", d->name, n, t.failures - before, skipped);
        fflush(stdout);
    }
    gemmk_ctx_destroy(t.ctx);
    int total = t.failures + refusal_failures;
    printf("%d cases, %d failed, %d skipped (slow rungs, large products); "
           "%d refusal failures\n",
           t.cases, t.failures, t.skipped, refusal_failures);
    printf(total ? "FAILED\n" : "PASSED\n");
    return total ? 1 : 0;
}
