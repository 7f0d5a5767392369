/*
 * grouped_gpu_test.cu: gemmk_gemm_grouped against gemmk_gemm, bit for bit.
 *
 * Each round draws a batch of problems of different shapes (M 1..300 and
 * a few larger, odd N and K, K up to 1100 so tiles take many k-blocks),
 * input types (bf16, fp16), transposes, output types (fp32, bf16, fp16),
 * alpha and beta (0 with C = NULL, or random with C), padded leading
 * dimensions, and a few problems the grouped kernel does not serve (fp32
 * inputs: they run through gemmk_gemm inside the grouped call) and with
 * M = 0 (skipped); odd rounds are strided batches instead (one shape,
 * rounds 3 and 5 of at most 64 x 64: two matrices per unit; round 9 of
 * an even number of 128-row tiles: clusters of two CTAs with B
 * multicast; round 11 of K from 2048 with a 16-bit D: each consumer's
 * block stored in one TMA step; operands at constant strides: the
 * kernel's 3-D tensor-map mode). The
 * batch runs as one gemmk_gemm_grouped call; then
 * every problem runs alone through gemmk_gemm on a second D: "ws128x128"
 * for the 16-bit ones (the kernel family the grouped kernel shares its
 * main loop and epilogue with: the same wgmma sequence over K and the
 * same stores, so the results must be identical) and "auto" for the
 * others. Both Ds start as 0xFF bytes (NaN), and the whole allocation,
 * row padding included, must compare equal: every element written, no
 * padding touched, every bit the same. It also checks the reply names
 * the grouped kernel, the one-problem catalog entry "grouped128x128",
 * and that a batch with one bad problem is refused as "problem I" before
 * anything runs. Those rounds run without the stream-K tail of strided
 * batches (GEMMK_GROUPED_SK=0: it sums the split tiles in another
 * order); sk_rounds forces it on and checks it against gemmk_gemm within
 * rounding, and the same bits run to run.
 *
 * A plain program: with no CUDA device (or not sm_90) it prints why and
 * exits 77 (skipped). Usage: kernels_grouped_gpu_test [--rounds N]
 * [--seed N]
 */
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <algorithm>
#include <vector>

#include "cuda_check.h"
#include "gemm_kernels.h"

static __device__ uint32_t mix32(uint64_t x)
{
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return static_cast<uint32_t>(x ^ (x >> 31));
}

/* n elements of type t (gemm_dtype) uniform in [-1, 1). */
static __global__ void fill_kernel(void *p, int t, int64_t n, uint64_t seed)
{
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * blockDim.x) {
        float v =
            (mix32(seed + (uint64_t)i) >> 8) * (2.0f / 16777216.0f) - 1.0f;
        if (t == GEMM_BF16)
            static_cast<__nv_bfloat16 *>(p)[i] = __float2bfloat16_rn(v);
        else if (t == GEMM_FP16)
            static_cast<__half *>(p)[i] = __float2half_rn(v);
        else
            static_cast<float *>(p)[i] = v;
    }
}

/* A gemm_error as a number (the kernel library carries no message
 * table). */
static const char *err_name(gemm_error e)
{
    static char buf[32];
    snprintf(buf, sizeof(buf), "gemm_error %d", (int)e);
    return buf;
}

static uint64_t g_rng = 88172645463325252ull;
static uint64_t rnd()
{
    g_rng ^= g_rng << 13;
    g_rng ^= g_rng >> 7;
    g_rng ^= g_rng << 17;
    return g_rng;
}
static int64_t rnd_in(int64_t lo, int64_t hi) /* [lo, hi] */
{
    return lo + (int64_t)(rnd() % (uint64_t)(hi - lo + 1));
}

static size_t esize(int t)
{
    return t == GEMM_FP32 ? 4 : 2;
}

static void *dev_random(int t, int64_t n, uint64_t seed)
{
    void *p;
    CK(cudaMalloc(&p, (size_t)n * esize(t)));
    fill_kernel<<<64, 256>>>(p, t, n, seed);
    CK(cudaGetLastError());
    return p;
}

struct Case {
    gemmk_problem p;
    void *d2; /* gemmk_gemm's D */
    size_t d_bytes;
    const char *alone; /* the kernel gemmk_gemm runs it with */
    bool shared;       /* a, b, c, d lie in a strided batch's buffers */
};

/* Rounds 6 and 7: every N at least 256 (classes of 128 x 256 tiles). */
static bool g_wide = false;
/* make_case draws matrices of at most 64 x 64 (a strided batch of them
 * runs two to a unit) */
static bool g_small = false;
/* make_case draws M of 2 or 4 tiles of 128 rows (a wide strided batch of
 * them runs in clusters of two) */
static bool g_even = false;
/* make_case draws K from 2048 and a 16-bit D with beta 0, N a multiple
 * of 8 (a wide strided batch of them stores whole 64 x 256 blocks, a ring
 * of 3 stages: GEMMK_GROUPED_WHOLE's default) */
static bool g_longk = false;

static int64_t pad8(int64_t x)
{
    return (x + 7) / 8 * 8 + (rnd() % 3 == 0 ? 8 : 0);
}

static Case make_case(bool groupable, uint64_t seed)
{
    Case c = {};
    gemmk_problem &p = c.p;
    int64_t big = rnd() % 8 == 0;
    p.m = big ? rnd_in(301, 700) : rnd_in(1, 300);
    p.n = rnd() % 6 == 0 ? rnd_in(1, 9) : rnd_in(1, big ? 600 : 300);
    if (g_wide)
        p.n = rnd_in(256, 700);
    if (g_small) {
        p.m = rnd_in(1, 64);
        p.n = rnd_in(1, 64);
    }
    if (g_even)
        p.m = rnd() % 2 ? rnd_in(129, 256) : rnd_in(385, 512);
    p.k = rnd() % 5 == 0 ? rnd_in(300, 1100) : rnd_in(1, 200);
    if (g_longk) {
        p.k = rnd_in(2048, 2300);
        p.n = p.n / 8 * 8;
    }
    if (groupable)
        p.ab_type = rnd() % 2 ? GEMM_BF16 : GEMM_FP16;
    else
        p.ab_type = GEMM_FP32;
    const gemm_dtype cds[3] = {GEMM_FP32, GEMM_BF16, GEMM_FP16};
    p.cd_type = g_longk ? cds[1 + rnd() % 2] : cds[rnd() % 3];
    p.trans_a = (int)(rnd() % 2);
    p.trans_b = (int)(rnd() % 2);
    p.precision = GEMM_PRECISION_DEFAULT;
    int64_t ar = p.trans_a ? p.k : p.m, ac = p.trans_a ? p.m : p.k;
    int64_t br = p.trans_b ? p.n : p.k, bc = p.trans_b ? p.k : p.n;
    p.lda = pad8(ac);
    p.ldb = pad8(bc);
    p.ldd = pad8(p.n);
    p.a = dev_random(p.ab_type, ar * p.lda, seed * 4 + 1);
    p.b = dev_random(p.ab_type, br * p.ldb, seed * 4 + 2);
    p.alpha = (float)rnd_in(-200, 200) / 100.0f;
    if (!g_longk && rnd() % 2) {
        p.beta = (float)rnd_in(-200, 200) / 100.0f;
        p.ldc = pad8(p.n);
        p.c = dev_random(p.cd_type, p.m * p.ldc, seed * 4 + 3);
    } else {
        p.beta = 0.f;
        p.c = nullptr;
        p.ldc = p.ldd;
    }
    c.d_bytes = (size_t)(p.m * p.ldd) * esize(p.cd_type);
    CK(cudaMalloc(&p.d, c.d_bytes));
    CK(cudaMalloc(&c.d2, c.d_bytes));
    CK(cudaMemset(p.d, 0xFF, c.d_bytes));
    CK(cudaMemset(c.d2, 0xFF, c.d_bytes));
    c.alone = groupable ? "ws128x128" : "auto";
    return c;
}

static void free_case(Case &c)
{
    CK(cudaFree(c.d2));
    if (c.shared)
        return;
    CK(cudaFree(const_cast<void *>(c.p.a)));
    CK(cudaFree(const_cast<void *>(c.p.b)));
    if (c.p.c)
        CK(cudaFree(const_cast<void *>(c.p.c)));
    CK(cudaFree(c.p.d));
}

/*
 * A strided batch: count problems of one random shape (make_case's), A,
 * B, C and D of problem i at i times constant strides (whole matrices
 * plus 0-2 rows' worth of 8 elements; A's or B's now and then 0, one
 * matrix shared by all) in one allocation each, which bufs collects for
 * the caller to free. The grouped call reads A and B
 * through 3-D tensor maps then.
 */
static std::vector<Case> make_strided(int count, uint64_t seed,
                                      std::vector<void *> &bufs)
{
    Case t = make_case(true, seed);
    const gemmk_problem p = t.p;
    int64_t ar = p.trans_a ? p.k : p.m, br = p.trans_b ? p.n : p.k;
    /* now and then one A or one B shared by all (stride 0: a weight) */
    int shared = (int)(rnd() % 6); /* 0: A shared, 1: B shared */
    int64_t sa = shared == 0 ? 0 : ar * p.lda + 8 * rnd_in(0, 2);
    int64_t sb = shared == 1 ? 0 : br * p.ldb + 8 * rnd_in(0, 2);
    int64_t sd = p.m * p.ldd + 8 * rnd_in(0, 1);
    int64_t sc = p.c ? p.m * p.ldc + 8 * rnd_in(0, 1) : 0;
    size_t es = esize(p.ab_type), cs = esize(p.cd_type);
    uint8_t *A = (uint8_t *)dev_random(p.ab_type, sa ? sa * count : ar * p.lda,
                                       seed * 4 + 1);
    uint8_t *B = (uint8_t *)dev_random(p.ab_type, sb ? sb * count : br * p.ldb,
                                       seed * 4 + 2);
    uint8_t *C =
        p.c ? (uint8_t *)dev_random(p.cd_type, sc * count, seed * 4 + 3)
            : nullptr;
    uint8_t *D;
    CK(cudaMalloc(&D, (size_t)(sd * count) * cs));
    CK(cudaMemset(D, 0xFF, (size_t)(sd * count) * cs));
    bufs.push_back(A), bufs.push_back(B), bufs.push_back(D);
    if (C)
        bufs.push_back(C);
    std::vector<Case> out;
    for (int i = 0; i < count; i++) {
        Case c = t;
        c.shared = true;
        c.p.a = A + (size_t)i * sa * es;
        c.p.b = B + (size_t)i * sb * es;
        c.p.c = C ? C + (size_t)i * sc * cs : nullptr;
        c.p.d = D + (size_t)i * sd * cs;
        CK(cudaMalloc(&c.d2, c.d_bytes));
        CK(cudaMemset(c.d2, 0xFF, c.d_bytes));
        out.push_back(c);
    }
    free_case(t);
    return out;
}

/*
 * Sets each case's kernel alone: ws128x128, or ws128x256 for a class
 * gemmk_gemm_grouped runs with 128 x 256 tiles (its documented rule:
 * every problem of the class, one input type and transpose pair, at
 * least 256 wide and at least one such tile per SM); fp32 ones "auto".
 * Returns the name the reply must give.
 */
static const char *expect_kernels(std::vector<Case> &cs, int sms)
{
    bool any256 = false;
    for (int cls = 0; cls < 8; cls++) {
        bool wide = true, some = false;
        int64_t tiles = 0;
        for (const Case &c : cs) {
            const gemmk_problem &p = c.p;
            if (p.ab_type == GEMM_FP32 || ((p.ab_type == GEMM_FP16) * 4 +
                                           p.trans_a * 2 + p.trans_b) != cls)
                continue;
            some = true;
            wide = wide && p.n >= 256;
            tiles += (p.m + 127) / 128 * ((p.n + 255) / 256);
        }
        bool w = some && wide && tiles >= sms;
        any256 = any256 || w;
        for (Case &c : cs)
            if (c.p.ab_type != GEMM_FP32 &&
                ((c.p.ab_type == GEMM_FP16) * 4 + c.p.trans_a * 2 +
                 c.p.trans_b) == cls)
                c.alone = w ? "ws128x256" : "ws128x128";
    }
    return any256 ? "grouped128x256" : "grouped128x128";
}

static const char *tname(int t)
{
    return t == GEMM_BF16 ? "bf16" : t == GEMM_FP16 ? "fp16" : "fp32";
}

/* Compares problem i's two Ds; prints the first difference. */
static bool same(const Case &c, int round, int i)
{
    std::vector<uint8_t> x(c.d_bytes), y(c.d_bytes);
    CK(cudaMemcpy(x.data(), c.p.d, c.d_bytes, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(y.data(), c.d2, c.d_bytes, cudaMemcpyDeviceToHost));
    if (memcmp(x.data(), y.data(), c.d_bytes) == 0)
        return true;
    size_t es = esize(c.p.cd_type), at = 0;
    while (x[at] == y[at])
        at++;
    int64_t e = (int64_t)(at / es);
    const gemmk_problem &p = c.p;
    printf("FAIL round %d problem %d: %s in, %s out, m %lld n %lld k %lld "
           "ta %d tb %d beta %g: D differs from gemmk_gemm(%s) at row %lld "
           "col %lld (ldd %lld)\n",
           round, i, tname(p.ab_type), tname(p.cd_type), (long long)p.m,
           (long long)p.n, (long long)p.k, p.trans_a, p.trans_b, p.beta,
           c.alone, (long long)(e / p.ldd), (long long)(e % p.ldd),
           (long long)p.ldd);
    return false;
}

/* ---- the stream-K tail of strided batches ---- */

static double hval(const uint8_t *d, int t, int64_t e)
{
    if (t == GEMM_FP32)
        return reinterpret_cast<const float *>(d)[e];
    if (t == GEMM_BF16)
        return __bfloat162float(reinterpret_cast<const __nv_bfloat16 *>(d)[e]);
    return __half2float(reinterpret_cast<const __half *>(d)[e]);
}

/* Problem i of a stream-K batch against gemmk_gemm alone: the split units
 * sum their k-blocks in another order, so each element within a rounding
 * of the output type plus fp32 reordering (a lost or doubled partial is
 * off by a sum of many products); row padding untouched in both. */
static bool close_to_alone(const Case &c, int i)
{
    const gemmk_problem &p = c.p;
    std::vector<uint8_t> x(c.d_bytes), y(c.d_bytes);
    CK(cudaMemcpy(x.data(), p.d, c.d_bytes, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(y.data(), c.d2, c.d_bytes, cudaMemcpyDeviceToHost));
    const size_t es = esize(p.cd_type);
    const double ulp = p.cd_type == GEMM_BF16   ? 1.0 / 128
                       : p.cd_type == GEMM_FP16 ? 1.0 / 1024
                                                : 1e-6;
    const double abs_tol =
        1e-4 * (fabs(p.alpha) * sqrt((double)p.k) + fabs(p.beta) + 1);
    for (int64_t r = 0; r < p.m; r++)
        for (int64_t col = 0; col < p.ldd; col++) {
            const int64_t e = r * p.ldd + col;
            if (col >= p.n) {
                if (memcmp(&x[e * es], &y[e * es], es) == 0)
                    continue;
            } else {
                const double a = hval(x.data(), p.cd_type, e);
                const double b = hval(y.data(), p.cd_type, e);
                if (fabs(a - b) <= ulp * fabs(b) + abs_tol)
                    continue;
            }
            printf("FAIL stream-K problem %d: %s in, %s out, m %lld n %lld k "
                   "%lld: %s at row %lld col %lld: %g against %g alone\n",
                   i, tname(p.ab_type), tname(p.cd_type), (long long)p.m,
                   (long long)p.n, (long long)p.k,
                   col >= p.n ? "padding written" : "value differs",
                   (long long)r, (long long)col, hval(x.data(), p.cd_type, e),
                   hval(y.data(), p.cd_type, e));
            return false;
        }
    return true;
}

/*
 * Strided batches of 128 x 256 tiles with the stream-K tail forced on
 * (a context made with GEMMK_GROUPED_SK=1): each batch runs twice and
 * must give the same bits (the partials are summed in a fixed order),
 * and every problem must be close to gemmk_gemm's ws128x256 alone.
 * Rounds alternate K of a few k-blocks (two store steps or register
 * stores) and K from 2048 (whole-block stores). Returns the failures.
 */
static int sk_rounds(cudaStream_t s, int *checked, uint64_t seed)
{
    setenv("GEMMK_GROUPED_SK", "1", 1);
    /* the rounds compare bits with gemmk_gemm: no stream-K tail there
     * (sk_rounds judges it) */
    setenv("GEMMK_GROUPED_SK", "0", 1);
    gemmk_ctx *ctx = nullptr;
    gemm_error e = gemmk_ctx_create(&ctx, 0);
    setenv("GEMMK_GROUPED_SK", "0", 1);
    if (e != GEMM_OK) {
        printf("FAIL gemmk_ctx_create (stream-K): %s\n", err_name(e));
        return 1;
    }
    int fails = 0;
    for (int r = 0; r < 4; r++) {
        g_wide = true;
        g_longk = r % 2 == 1;
        std::vector<void *> bufs;
        int n = (int)rnd_in(70, 300);
        std::vector<Case> cs = make_strided(n, seed * 7000 + r, bufs);
        g_longk = false;
        std::vector<gemmk_problem> ps;
        for (auto &c : cs)
            ps.push_back(c.p);
        gemmk_result res;
        std::vector<uint8_t> first;
        const gemmk_problem &last = cs.back().p;
        const size_t span =
            (size_t)((const uint8_t *)last.d - (const uint8_t *)cs[0].p.d) +
            cs.back().d_bytes;
        bool bad = false;
        for (int run = 0; run < 2 && !bad; run++) {
            CK(cudaMemset(cs[0].p.d, 0xFF, span));
            e = gemmk_gemm_grouped(ctx, ps.data(), (int)ps.size(), s, &res);
            CK(cudaStreamSynchronize(s));
            if (e != GEMM_OK) {
                printf("FAIL stream-K round %d: %s: %s\n", r, err_name(e),
                       res.msg);
                bad = true;
                break;
            }
            std::vector<uint8_t> now(span);
            CK(cudaMemcpy(now.data(), cs[0].p.d, span, cudaMemcpyDeviceToHost));
            if (run == 0)
                first.swap(now);
            else if (now != first) {
                printf("FAIL stream-K round %d: two runs differ\n", r);
                bad = true;
            }
        }
        fails += bad;
        for (auto &c : cs) {
            gemmk_problem q = c.p;
            q.d = c.d2;
            gemmk_result r1;
            if (gemmk_gemm(ctx, &q, s, "ws128x256", &r1) != GEMM_OK) {
                printf("FAIL gemmk_gemm(ws128x256): %s\n", r1.msg);
                fails++;
            }
        }
        CK(cudaStreamSynchronize(s));
        for (int i = 0; i < n; i++) {
            fails += !close_to_alone(cs[i], i);
            (*checked)++;
        }
        printf("stream-K round %d: %d problems, m %lld n %lld k %lld, %s out, "
               "%s: %s\n",
               r, n, (long long)cs[0].p.m, (long long)cs[0].p.n,
               (long long)cs[0].p.k, tname(cs[0].p.cd_type),
               res.kernel ? res.kernel : "(none)",
               fails ? "FAILURES so far" : "deterministic, close to alone");
        for (auto &c : cs)
            free_case(c);
        for (void *b : bufs)
            CK(cudaFree(b));
    }
    g_wide = false;
    gemmk_ctx_destroy(ctx);
    return fails;
}

/* ---- the wide types: cuBLAS's batched calls ---- */

/* n scalars (doubles, or floats when f32) uniform in [-1, 1). */
static __global__ void fill_wide_kernel(void *p, bool f32, int64_t n,
                                        uint64_t seed)
{
    for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
         i += (int64_t)gridDim.x * blockDim.x) {
        double v = (mix32(seed + (uint64_t)i) >> 8) * (2.0 / 16777216.0) - 1.0 +
                   (mix32(~seed + (uint64_t)i) >> 8) * 0x1p-47;
        if (f32)
            static_cast<float *>(p)[i] = (float)v;
        else
            static_cast<double *>(p)[i] = v;
    }
}

static size_t wsize(int t)
{
    return t == GEMM_COMPLEX128 ? 16 : t == GEMM_FP32 ? 4 : 8;
}

/* Scalars per element and whether they are floats. */
static int wparts(int t)
{
    return t == GEMM_COMPLEX64 || t == GEMM_COMPLEX128 ? 2 : 1;
}
static bool wf32(int t)
{
    return t == GEMM_FP32 || t == GEMM_COMPLEX64;
}

static void wide_random(void *p, int t, int64_t elems, uint64_t seed)
{
    fill_wide_kernel<<<64, 256>>>(p, wf32(t), elems * wparts(t), seed);
    CK(cudaGetLastError());
}

static const char *wname(int t)
{
    return t == GEMM_FP64         ? "fp64"
           : t == GEMM_COMPLEX64  ? "complex64"
           : t == GEMM_COMPLEX128 ? "complex128"
                                  : "fp32";
}

/* A wide problem's shape, transposes, scalars and leading dimensions
 * (pointers unset): lds padded by 0..2 elements, op(A), op(B) conjugated
 * now and then for the complex types. c: beta != 0. */
static gemmk_problem wide_shape(int t, int64_t m, int64_t n, int64_t k, bool c)
{
    gemmk_problem p = {};
    p.m = m, p.n = n, p.k = k;
    p.ab_type = p.cd_type = (gemm_dtype)t;
    p.trans_a = (int)(rnd() % 2);
    p.trans_b = (int)(rnd() % 2);
    if (wparts(t) == 2) {
        p.conj_a = p.trans_a && rnd() % 2;
        p.conj_b = p.trans_b && rnd() % 2;
    }
    p.precision = t == GEMM_FP32 ? GEMM_PRECISION_FP32 : GEMM_PRECISION_DEFAULT;
    int64_t ac = p.trans_a ? m : k, bc = p.trans_b ? k : n;
    int64_t pad = t == GEMM_FP32 ? 8 : 1; /* fp32: multiples of 8 */
    p.lda = t == GEMM_FP32 ? pad8(ac) : ac + pad * rnd_in(0, 2);
    p.ldb = t == GEMM_FP32 ? pad8(bc) : bc + pad * rnd_in(0, 2);
    p.ldd = t == GEMM_FP32 ? pad8(n) : n + pad * rnd_in(0, 2);
    p.ldc = p.ldd;
    p.zalpha[0] = (double)rnd_in(-200, 200) / 100.0;
    p.zalpha[1] = wparts(t) == 2 ? (double)rnd_in(-100, 100) / 100.0 : 0.0;
    p.alpha = (float)p.zalpha[0];
    if (c) {
        p.zbeta[0] = (double)rnd_in(-200, 200) / 100.0;
        p.zbeta[1] = wparts(t) == 2 ? (double)rnd_in(-100, 100) / 100.0 : 0.0;
        if (p.zbeta[0] == 0.0 && p.zbeta[1] == 0.0)
            p.zbeta[0] = 0.5;
        p.beta = (float)p.zbeta[0];
    }
    return p;
}

/* One wide problem of a batch, and gemmk_gemm's D for it. */
struct WCase {
    gemmk_problem p;
    void *d2;       /* gemmk_gemm(p, "auto")'s D: D as it was, then run */
    size_t d_bytes; /* m rows of ldd */
};

/* count problems of shape q at constant strides (whole matrices plus 0..1
 * rows; A or B now and then shared, stride 0) in one allocation per
 * operand, kept in bufs; C (when read) apart from D, contiguous when
 * tight. */
static void wide_strided(const gemmk_problem &q, int count, bool tight,
                         uint64_t seed, std::vector<WCase> &out,
                         std::vector<void *> &bufs)
{
    const int t = q.ab_type;
    const size_t es = wsize(t);
    int64_t ar = q.trans_a ? q.k : q.m, br = q.trans_b ? q.n : q.k;
    int shared = (int)(rnd() % 6);
    int64_t gap = tight ? 0 : rnd_in(0, 1);
    int64_t sa = shared == 0 ? 0 : (ar + gap) * q.lda;
    int64_t sb = shared == 1 ? 0 : (br + gap) * q.ldb;
    int64_t sd = (q.m + gap) * q.ldd, sc = (q.m + gap) * q.ldc;
    const bool c = q.zbeta[0] != 0.0 || q.zbeta[1] != 0.0;
    void *A, *B, *C = nullptr, *D;
    CK(cudaMalloc(&A, (size_t)(sa ? sa * count : ar * q.lda) * es));
    CK(cudaMalloc(&B, (size_t)(sb ? sb * count : br * q.ldb) * es));
    CK(cudaMalloc(&D, (size_t)(sd * count) * es));
    wide_random(A, t, sa ? sa * count : ar * q.lda, seed + 1);
    wide_random(B, t, sb ? sb * count : br * q.ldb, seed + 2);
    CK(cudaMemset(D, 0xFF, (size_t)(sd * count) * es));
    if (c) {
        CK(cudaMalloc(&C, (size_t)(sc * count) * es));
        wide_random(C, t, sc * count, seed + 3);
        bufs.push_back(C);
    }
    bufs.push_back(A), bufs.push_back(B), bufs.push_back(D);
    for (int i = 0; i < count; i++) {
        WCase w = {q, nullptr, (size_t)(q.m * q.ldd) * es};
        w.p.a = static_cast<uint8_t *>(A) + (size_t)(i * sa) * es;
        w.p.b = static_cast<uint8_t *>(B) + (size_t)(i * sb) * es;
        w.p.c = c ? static_cast<uint8_t *>(C) + (size_t)(i * sc) * es : nullptr;
        w.p.d = static_cast<uint8_t *>(D) + (size_t)(i * sd) * es;
        out.push_back(w);
    }
}

/* One problem of shape q in allocations of its own (kept in bufs): C
 * apart from D, or D itself (in place: D starts as C). */
static void wide_alone(const gemmk_problem &q, bool in_place, uint64_t seed,
                       std::vector<WCase> &out, std::vector<void *> &bufs)
{
    const int t = q.ab_type;
    const size_t es = wsize(t);
    int64_t ar = q.trans_a ? q.k : q.m, br = q.trans_b ? q.n : q.k;
    WCase w = {q, nullptr, (size_t)(q.m * q.ldd) * es};
    void *A, *B, *D;
    CK(cudaMalloc(&A, (size_t)(ar * q.lda) * es));
    CK(cudaMalloc(&B, (size_t)(br * q.ldb) * es));
    CK(cudaMalloc(&D, w.d_bytes));
    wide_random(A, t, ar * q.lda, seed + 1);
    wide_random(B, t, br * q.ldb, seed + 2);
    CK(cudaMemset(D, 0xFF, w.d_bytes));
    bufs.push_back(A), bufs.push_back(B), bufs.push_back(D);
    w.p.a = A, w.p.b = B, w.p.d = D;
    if (q.zbeta[0] != 0.0 || q.zbeta[1] != 0.0) {
        if (in_place) {
            wide_random(D, t, q.m * q.ldd, seed + 3);
            w.p.c = D;
            w.p.ldc = q.ldd;
        } else {
            void *C;
            w.p.ldc = t == GEMM_FP32 ? pad8(q.n) : q.n + rnd_in(0, 2);
            CK(cudaMalloc(&C, (size_t)(q.m * w.p.ldc) * es));
            wide_random(C, t, q.m * w.p.ldc, seed + 3);
            bufs.push_back(C);
            w.p.c = C;
        }
    }
    out.push_back(w);
}

/*
 * Compares problem i's D against gemmk_gemm's: every element within
 * tol * (the largest |component| of gemmk_gemm's D), every padding byte
 * the same; counts the Ds identical bit for bit in *bits.
 */
static bool wide_same(const WCase &w, const char *what, int i, double tol,
                      int *bits)
{
    std::vector<uint8_t> x(w.d_bytes), y(w.d_bytes);
    CK(cudaMemcpy(x.data(), w.p.d, w.d_bytes, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(y.data(), w.d2, w.d_bytes, cudaMemcpyDeviceToHost));
    if (memcmp(x.data(), y.data(), w.d_bytes) == 0) {
        (*bits)++;
        return true;
    }
    const gemmk_problem &p = w.p;
    const int parts = wparts(p.ab_type);
    const bool f = wf32(p.ab_type);
    const size_t es = wsize(p.ab_type);
    auto at = [&](const std::vector<uint8_t> &v, int64_t e, int c) {
        return f ? (double)reinterpret_cast<const float *>(
                       v.data())[e * parts + c]
                 : reinterpret_cast<const double *>(v.data())[e * parts + c];
    };
    double big = 0;
    for (int64_t r = 0; r < p.m; r++)
        for (int64_t j = 0; j < p.n; j++)
            for (int c = 0; c < parts; c++)
                big = std::max(big, fabs(at(y, r * p.ldd + j, c)));
    for (int64_t r = 0; r < p.m; r++)
        for (int64_t j = 0; j < p.ldd; j++) {
            const int64_t e = r * p.ldd + j;
            bool ok = true;
            double err = 0;
            if (j >= p.n) {
                ok = memcmp(&x[e * es], &y[e * es], es) == 0;
            } else {
                for (int c = 0; c < parts; c++)
                    err = std::max(err, fabs(at(x, e, c) - at(y, e, c)));
                ok = err <= tol * big;
            }
            if (!ok) {
                printf("FAIL %s problem %d: %s m %lld n %lld k %lld ta %d%s "
                       "tb %d%s beta %g%+gi C %s: D[%lld][%lld] %s (error "
                       "%.3g, scale %.3g)\n",
                       what, i, wname(p.ab_type), (long long)p.m,
                       (long long)p.n, (long long)p.k, p.trans_a,
                       p.conj_a ? "H" : "", p.trans_b, p.conj_b ? "H" : "",
                       p.zbeta[0], p.zbeta[1],
                       !p.c         ? "none"
                       : p.c == p.d ? "in D"
                                    : "apart",
                       (long long)r, (long long)j,
                       j >= p.n ? "padding changed" : "differs", err, big);
                return false;
            }
        }
    return true;
}

/*
 * Runs cs as one gemmk_gemm_grouped call and each alone through
 * gemmk_gemm(p, "auto") on a copy of its D as it was (C in place read
 * from the copy); compares them (wide_same) and the kernel the reply
 * names with want. Returns the failures; counts checked and identical.
 */
static int wide_round(gemmk_ctx *ctx, cudaStream_t s, const char *what,
                      std::vector<WCase> &cs, const char *want, int *checked)
{
    int fails = 0, bits = 0;
    std::vector<gemmk_problem> ps;
    for (WCase &w : cs) {
        CK(cudaMalloc(&w.d2, w.d_bytes));
        CK(cudaMemcpy(w.d2, w.p.d, w.d_bytes, cudaMemcpyDeviceToDevice));
        ps.push_back(w.p);
    }
    gemmk_problem empty = cs[0].p;
    empty.n = 0;
    ps.push_back(empty);
    CK(cudaDeviceSynchronize());
    gemmk_result res;
    gemm_error e = gemmk_gemm_grouped(ctx, ps.data(), (int)ps.size(), s, &res);
    if (e != GEMM_OK) {
        printf("FAIL %s: gemmk_gemm_grouped: %s: %s\n", what, err_name(e),
               res.msg);
        return 1;
    }
    if (!res.kernel || strcmp(res.kernel, want) != 0) {
        printf("FAIL %s: the reply names %s, not %s\n", what,
               res.kernel ? res.kernel : "(none)", want);
        fails++;
    }
    for (WCase &w : cs) {
        gemmk_problem q = w.p;
        if (q.c == q.d)
            q.c = w.d2;
        q.d = w.d2;
        gemmk_result r1;
        e = gemmk_gemm(ctx, &q, s, "auto", &r1);
        if (e != GEMM_OK) {
            printf("FAIL %s: gemmk_gemm(auto): %s: %s\n", what, err_name(e),
                   r1.msg);
            return fails + 1;
        }
    }
    CK(cudaStreamSynchronize(s));
    CK(cudaGetLastError());
    for (size_t i = 0; i < cs.size(); i++) {
        const int t = cs[i].p.ab_type;
        const double tol =
            t == GEMM_FP64 || t == GEMM_COMPLEX128 ? 1e-12 : 1e-5;
        fails += !wide_same(cs[i], what, (int)i, tol, &bits);
        (*checked)++;
    }
    printf("%s: %zu problems, %s; %d of them bit-identical to gemmk_gemm\n",
           what, cs.size(), fails ? "FAILURES" : "within tolerance", bits);
    for (WCase &w : cs)
        CK(cudaFree(w.d2));
    return fails;
}

/* The wide batches: strided fp64, complex128 and fp32; fp64 and complex
 * of mixed shapes; C apart (contiguous, strided or not) and in place. */
static int wide_batches(gemmk_ctx *ctx, cudaStream_t s, int *checked)
{
    int fails = 0;
    g_rng ^= 4242;
    struct Strided {
        const char *what;
        int t;
        int count;
        bool c, tight;
    } st[] = {
        {"strided fp64, beta 0", GEMM_FP64, 40, false, true},
        {"strided fp64, C apart", GEMM_FP64, 24, true, false},
        {"strided complex128, C apart", GEMM_COMPLEX128, 20, true, true},
        {"strided complex64", GEMM_COMPLEX64, 12, true, false},
        {"strided fp32 (one by one: ws-3xtf32)", GEMM_FP32, 16, true, true},
    };
    for (const Strided &x : st) {
        for (int rep = 0; rep < 2; rep++) {
            std::vector<WCase> cs;
            std::vector<void *> bufs;
            gemmk_problem q = wide_shape(x.t, rnd_in(1, 200), rnd_in(1, 200),
                                         rnd_in(1, 300), x.c);
            wide_strided(q, x.count, x.tight, rnd(), cs, bufs);
            fails +=
                wide_round(ctx, s, x.what, cs,
                           x.t == GEMM_FP32 ? "ws-3xtf32" : "cublas", checked);
            for (void *b : bufs)
                CK(cudaFree(b));
        }
    }
    /* several shapes: fp64 (one grouped-batched call), complex (one
     * batched call per shape, a lone one alone), C none, apart or in D */
    const int types[2] = {GEMM_FP64, GEMM_COMPLEX128};
    for (int ti = 0; ti < 3; ti++) {
        std::vector<WCase> cs;
        std::vector<void *> bufs;
        for (int sh = 0; sh < 6; sh++) {
            const int t =
                ti < 2 ? types[ti] : (sh % 2 ? GEMM_FP64 : GEMM_COMPLEX64);
            const bool c = rnd() % 2;
            gemmk_problem q = wide_shape(t, rnd_in(1, 150), rnd_in(1, 150),
                                         rnd_in(1, 200), c);
            int reps = sh == 5 ? 1 : (int)rnd_in(2, 7);
            for (int i = 0; i < reps; i++)
                wide_alone(q, rnd() % 2, rnd(), cs, bufs);
        }
        const char *what = ti == 0   ? "fp64 of 6 shapes"
                           : ti == 1 ? "complex128 of 6 shapes"
                                     : "fp64 and complex64 of 6 shapes";
        fails += wide_round(ctx, s, what, cs, "cublas", checked);
        for (void *b : bufs)
            CK(cudaFree(b));
    }
    return fails;
}

int main(int argc, char **argv)
{
    int rounds = 12;
    uint64_t seed = 1;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--rounds") && i + 1 < argc)
            rounds = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--seed") && i + 1 < argc)
            seed = strtoull(argv[++i], nullptr, 10);
    }
    g_rng ^= seed * 0x9E3779B97F4A7C15ull;
    int ndev = 0;
    if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev == 0) {
        printf("skipped: no CUDA device\n");
        return 77;
    }
    cudaDeviceProp prop;
    CK(cudaGetDeviceProperties(&prop, 0));
    if (prop.major != 9) {
        printf("skipped: the kernels need sm_90, device 0 is sm_%d%d\n",
               prop.major, prop.minor);
        return 77;
    }
    gemmk_ctx *ctx = nullptr;
    gemm_error e = gemmk_ctx_create(&ctx, 0);
    if (e != GEMM_OK) {
        printf("FAIL gemmk_ctx_create: %s\n", err_name(e));
        return 1;
    }
    cudaStream_t s;
    CK(cudaStreamCreate(&s));
    int sms = 0;
    gemmk_ctx_info(ctx, &sms, nullptr);
    int fails = 0, checked = 0;

    for (int r = 0; r < rounds; r++) {
        /* round 0: a few problems (maps through the cache); odd rounds: a
         * strided batch of 2..300 (3-D maps, no table); the others up to
         * 150 problems of different shapes (more maps than the cache
         * holds: encoded directly) */
        int n = r == 0 ? 5 : (int)rnd_in(20, 150);
        std::vector<Case> cs;
        std::vector<void *> bufs;
        g_wide = r >= 6;
        g_small = r == 3 || r == 5; /* strided: two matrices per unit */
        g_even = r == 9;            /* strided: clusters of two */
        g_longk = r == 11;          /* strided: whole-block stores */
        if (g_wide) /* enough tiles for a full wave of 128 x 256 */
            n = (int)rnd_in(80, 150);
        if (r % 2 == 1) {
            n = (int)rnd_in(g_wide ? 70 : 2, 300);
            cs = make_strided(n, seed * 100000 + r * 1000, bufs);
        }
        for (int i = 0; r % 2 == 0 && i < n; i++)
            cs.push_back(make_case(i == 0 || rnd() % 12 != 0,
                                   seed * 100000 + r * 1000 + (uint64_t)i));
        const char *want = expect_kernels(cs, sms);
        std::vector<gemmk_problem> ps;
        for (auto &c : cs)
            ps.push_back(c.p);
        /* an expert with no tokens: skipped, its D untouched */
        gemmk_problem empty = cs[0].p;
        empty.m = 0;
        ps.push_back(empty);
        CK(cudaDeviceSynchronize());
        gemmk_result res;
        e = gemmk_gemm_grouped(ctx, ps.data(), (int)ps.size(), s, &res);
        if (e != GEMM_OK) {
            printf("FAIL round %d: gemmk_gemm_grouped: %s: %s\n", r,
                   err_name(e), res.msg);
            return 1;
        }
        if (!res.kernel || strcmp(res.kernel, want) != 0) {
            printf("FAIL round %d: the reply names %s, not %s\n", r,
                   res.kernel ? res.kernel : "(none)", want);
            fails++;
        }
        for (auto &c : cs) {
            gemmk_problem q = c.p;
            q.d = c.d2;
            gemmk_result r1;
            e = gemmk_gemm(ctx, &q, s, c.alone, &r1);
            if (e != GEMM_OK) {
                printf("FAIL gemmk_gemm(%s): %s: %s\n", c.alone, err_name(e),
                       r1.msg);
                return 1;
            }
        }
        CK(cudaStreamSynchronize(s));
        CK(cudaGetLastError());
        for (int i = 0; i < n; i++) {
            fails += !same(cs[i], r, i);
            checked++;
        }
        printf("round %d: %d problems%s (%d through the grouped kernel): "
               "%s\n",
               r, n, r % 2 ? ", strided" : "",
               (int)std::count_if(
                   cs.begin(), cs.end(),
                   [](const Case &c) { return c.p.ab_type != GEMM_FP32; }),
               fails ? "FAILURES so far" : "identical");
        for (auto &c : cs)
            free_case(c);
        for (void *b : bufs)
            CK(cudaFree(b));
    }

    /* the catalog entries: one problem through gemmk_gemm by name */
    for (int w = 0; w < 2; w++) {
        const char *g = w ? "grouped128x256" : "grouped128x128";
        const char *ws = w ? "ws128x256" : "ws128x128";
        g_rng ^= 12345;
        Case c = make_case(true, 777 + w);
        c.alone = ws;
        gemmk_problem q = c.p;
        q.d = c.d2;
        gemmk_result r1, r2;
        r2.msg[0] = '\0';
        e = gemmk_gemm(ctx, &c.p, s, g, &r1);
        if (e == GEMM_OK)
            e = gemmk_gemm(ctx, &q, s, ws, &r2);
        CK(cudaStreamSynchronize(s));
        if (e != GEMM_OK) {
            printf("FAIL catalog entry %s: %s: %s / %s\n", g, err_name(e),
                   r1.msg, r2.msg);
            fails++;
        } else {
            fails += !same(c, -1, w);
            checked++;
        }
        free_case(c);
    }

    /* a bad problem refused by index, nothing run */
    {
        Case a = make_case(true, 901), b = make_case(true, 902);
        gemmk_problem ps[2] = {a.p, b.p};
        ps[1].ldd = ps[1].n > 1 ? 1 : 0; /* too small a leading dimension */
        gemmk_result res;
        e = gemmk_gemm_grouped(ctx, ps, 2, s, &res);
        CK(cudaStreamSynchronize(s));
        std::vector<uint8_t> x(a.d_bytes);
        CK(cudaMemcpy(x.data(), a.p.d, a.d_bytes, cudaMemcpyDeviceToHost));
        bool untouched = true;
        for (uint8_t v : x)
            untouched = untouched && v == 0xFF;
        if (e != GEMM_ERR_INVALID || strncmp(res.msg, "problem 1:", 10) != 0 ||
            !untouched) {
            printf("FAIL bad batch: got %s \"%s\", problem 0's D %s\n",
                   err_name(e), res.msg, untouched ? "untouched" : "WRITTEN");
            fails++;
        }
        free_case(a);
        free_case(b);
    }

    fails += wide_batches(ctx, s, &checked);
    fails += sk_rounds(s, &checked, seed);

    CK(cudaStreamDestroy(s));
    gemmk_ctx_destroy(ctx);
    if (fails) {
        printf("FAIL: %d of %d problems differ\n", fails, checked);
        return 1;
    }
    printf("ok: %d problems identical to gemmk_gemm (the wide ones within "
           "tolerance)\n",
           checked);
    return 0;
}
