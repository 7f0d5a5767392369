/*
 * ozaki_gpu_test.cu: the int8 GEMM (gemmk_gemm_s8) and the fp64 GEMM
 * (gemmk_gemm_f64: Ozaki-II emulation and its native fallback) on a Hopper
 * GPU.
 *
 * int8: random int8 inputs over tails, transposes, padded leading
 * dimensions and alpha/beta, D poisoned first, checked element by element
 * (small) or on a sample (large) against exact integer arithmetic on the
 * host (int32 wrap-around, as the API defines).
 *
 * fp64: inputs x 2^(phi randn) (x uniform in [-1, 1), 53 random bits) for
 * phi = 0 (uniform), 0.5, 1, 2, 8, every shape class (tails, transposes,
 * odd leading dimensions, alpha/beta, C == D, K past the int32 flush),
 * the emulation variants, explicit moduli, inputs where fp64 is exact
 * (integers, small integers times powers of two, sparse 0/1: the
 * emulation must be exact too), and inputs that must run
 * natively (inf, NaN, subnormals, huge spreads). Every sampled element is
 * checked against a double-double reference: an emulated result must lie
 * within the a-priori bound of the emulation (ozaki.h: 2^(E_i - beta_a -
 * 1) ||b_j||_1 + 2^(E_j - beta_b - 1) ||a_i||_1 + reconstruction and
 * rounding terms); with the default moduli its max and median errors must
 * stay within small factors of cuBLAS DGEMM's on the same inputs (both
 * are printed); a fallback must say why and give cuBLAS's bits.
 *
 * A plain program (no Criterion) so it runs on a bare GPU host; with no
 * CUDA device it prints "skipped: no CUDA device" and exits 77 (skipped).
 * fp32 at fp32 accuracy on the same engine ("oz2-f32"): shapes, spreads,
 * alpha/beta, explicit counts, integer inputs (exact), the fallback to
 * 3xTF32 for inf/NaN/subnormals, and "auto" by the cost model; errors
 * against a double-double reference next to cuBLAS SGEMM's and 3xTF32's.
 *
 * Usage: kernels_ozaki_gpu_test [--quick] [--seed N] [--s8 | --f64]
 */
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

static gemmk_ctx *ctx;
static int failures, passes;
static uint64_t seed = 20261124;
static bool quick, only_s8, only_f64;
static gemmk_f64_rates rates; /* the calibration's, once it ran */
static bool have_rates;

static bool calibrated(gemmk_f64_rates *r)
{
    *r = rates;
    return have_rates;
}

static uint64_t rnd64(void)
{
    uint64_t x = (seed += 0x9E3779B97F4A7C15ull);
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}
static double runit(void) /* [-1, 1), 53 random bits */
{
    return (double)(rnd64() >> 11) * 0x1p-53 * 2.0 - 1.0;
}
static double gauss(void)
{
    double u1 = ((rnd64() >> 11) + 1) * 0x1p-53;
    double u2 = (rnd64() >> 11) * 0x1p-53;
    return sqrt(-2 * log(u1)) * cos(6.283185307179586 * u2);
}

#define FAIL(...)                                                              \
    do {                                                                       \
        printf("FAIL ");                                                       \
        printf(__VA_ARGS__);                                                   \
        printf("\n");                                                          \
        failures++;                                                            \
        ok = false;                                                            \
    } while (0)

/* ------------------------------------------------------------------ int8 */

struct S8Case {
    long long m, n, k;
    int ta, tb;
    int32_t alpha, beta;
    int pad; /* extra elements per ld (multiple of 16) */
    const char *kernel;
};

static bool run_s8(const S8Case &c)
{
    bool ok = true;
    long long lda = (c.ta ? c.m : c.k), ldb = (c.tb ? c.k : c.n);
    lda = (lda + 15) / 16 * 16 + c.pad;
    ldb = (ldb + 15) / 16 * 16 + c.pad;
    long long ldd = (c.n + 3) / 4 * 4 + c.pad, ldc = ldd;
    size_t ea = (size_t)(c.ta ? c.k : c.m) * lda;
    size_t eb = (size_t)(c.tb ? c.n : c.k) * ldb;
    size_t ed = (size_t)c.m * ldd;
    std::vector<int8_t> ha(ea), hb(eb);
    std::vector<int32_t> hc(ed), hd(ed);
    for (auto &v : ha)
        v = (int8_t)(rnd64() >> 56);
    for (auto &v : hb)
        v = (int8_t)(rnd64() >> 56);
    for (auto &v : hc)
        v = (int32_t)(rnd64() >> 32);
    int8_t *da, *db;
    int32_t *dc, *dd;
    CK(cudaMalloc(&da, ea));
    CK(cudaMalloc(&db, eb));
    CK(cudaMalloc(&dc, ed * 4));
    CK(cudaMalloc(&dd, ed * 4));
    CK(cudaMemcpy(da, ha.data(), ea, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(db, hb.data(), eb, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(dc, hc.data(), ed * 4, cudaMemcpyHostToDevice));
    CK(cudaMemset(dd, 0x7f, ed * 4));
    gemmk_problem_s8 p;
    memset(&p, 0, sizeof(p));
    p.m = c.m, p.n = c.n, p.k = c.k;
    p.trans_a = c.ta, p.trans_b = c.tb;
    p.a = da, p.b = db, p.c = c.beta ? dc : nullptr, p.d = dd;
    p.lda = lda, p.ldb = ldb, p.ldc = ldc, p.ldd = ldd;
    p.alpha = c.alpha, p.beta = c.beta;
    gemm_error rv = gemmk_gemm_s8(ctx, &p, 0, c.kernel);
    CK(cudaDeviceSynchronize());
    CK(cudaGetLastError());
    char name[160];
    snprintf(name, sizeof name, "s8 %lldx%lldx%lld t%d%d a%d b%d pad%d %s", c.m,
             c.n, c.k, c.ta, c.tb, c.alpha, c.beta, c.pad,
             c.kernel ? c.kernel : "auto");
    if (rv != GEMM_OK) {
        FAIL("%s: gemmk_gemm_s8 %d", name, rv);
    } else {
        CK(cudaMemcpy(hd.data(), dd, ed * 4, cudaMemcpyDeviceToHost));
        auto want = [&](long long i, long long j) {
            int64_t s = 0;
            for (long long h = 0; h < c.k; h++) {
                int a = ha[c.ta ? h * lda + i : i * lda + h];
                int b = hb[c.tb ? j * ldb + h : h * ldb + j];
                s += a * b;
            }
            uint32_t v = (uint32_t)c.alpha * (uint32_t)(int32_t)s;
            if (c.beta)
                v += (uint32_t)c.beta * (uint32_t)hc[i * ldc + j];
            return (int32_t)v;
        };
        bool full = (double)c.m * c.n * c.k <= 2e8;
        long long bad = 0, checked = 0;
        auto check = [&](long long i, long long j) {
            checked++;
            int32_t w = want(i, j), g = hd[i * ldd + j];
            if (w != g && bad++ < 3)
                FAIL("%s: D[%lld][%lld] = %d, want %d", name, i, j, g, w);
        };
        if (full) {
            for (long long i = 0; i < c.m; i++)
                for (long long j = 0; j < c.n; j++)
                    check(i, j);
        } else {
            for (int t = 0; t < 600; t++)
                check(t == 0 ? c.m - 1 : (long long)(rnd64() % c.m),
                      t == 1 ? c.n - 1 : (long long)(rnd64() % c.n));
        }
        /* row padding untouched */
        for (long long i = 0; i < c.m && ldd > c.n; i += (c.m + 7) / 8)
            if (hd[i * ldd + c.n] != 0x7f7f7f7f)
                FAIL("%s: row padding of row %lld written", name, i);
        if (!bad && ok)
            passes++;
        printf("%s %s (%lld checked)\n", ok ? "ok  " : "FAIL", name, checked);
    }
    cudaFree(da);
    cudaFree(db);
    cudaFree(dc);
    cudaFree(dd);
    return ok;
}

/* ------------------------------------------------------------------ fp64 */

/* s + c = exact-ish sum; Dot2 of Ogita, Rump and Oishi */
struct DD {
    double s = 0, c = 0;
    void add_prod(double a, double b)
    {
        double p = a * b, pe = fma(a, b, -p);
        double t = s + p;
        double z = t - s;
        double te = (s - (t - z)) + (p - z);
        s = t;
        c += te + pe;
    }
    double value() const
    {
        return s + c;
    }
};

enum Special {
    SP_NONE,
    SP_INF,
    SP_NAN,
    SP_SUB,
    SP_ZEROROW,
    SP_HUGE,  /* a row of A and a column of B spanning 2^-400..2^400,
                 large where the other is small: must run natively */
    SP_HUGE1, /* the same row of A only: the products stay aligned,
                 emulation keeps DGEMM's accuracy */
    /* exact in fp64 (every product and partial sum an integer times a
     * power of two below 2^53): the emulation must give the exact result,
     * as DGEMM does */
    SP_INT,   /* integers in (-1000, 1000) */
    SP_INT2,  /* integers in (-16, 16) times 2^(-8..8) */
    SP_BINARY /* sparse 0/1 (one in 7) */
};

static bool exact_kind(Special s)
{
    return s == SP_INT || s == SP_INT2 || s == SP_BINARY;
}

static double exact_value(Special s)
{
    const int v = (int)(rnd64() % 1999) - 999;
    if (s == SP_INT)
        return v;
    if (s == SP_INT2)
        return ldexp(v % 16, (int)(rnd64() % 17) - 8);
    return (double)(rnd64() % 7 == 0);
}

struct F64Case {
    long long m, n, k;
    int ta, tb;
    double alpha, beta;
    int pad; /* extra elements per ld (any) */
    double phi;
    const char *kernel; /* NULL: auto */
    gemmk_f64_method method;
    int moduli;
    Special special;
    bool in_place; /* C == D */
    bool expect_native;
};

struct ErrStats {
    double max_rel = 0, med_rel = 0, max_norm = 0, med_norm = 0;
};

static ErrStats err_stats(std::vector<double> rel, std::vector<double> nrm)
{
    ErrStats e;
    if (rel.empty())
        return e;
    std::sort(rel.begin(), rel.end());
    std::sort(nrm.begin(), nrm.end());
    e.max_rel = rel.back();
    e.med_rel = rel[rel.size() / 2];
    e.max_norm = nrm.back();
    e.med_norm = nrm[nrm.size() / 2];
    return e;
}

static bool same_bits_or_nan(double a, double b)
{
    if (isnan(a) || isnan(b))
        return isnan(a) && isnan(b);
    return a == b;
}

static bool run_f64(const F64Case &c, const char *label)
{
    bool ok = true;
    long long lda = (c.ta ? c.m : c.k) + c.pad;
    long long ldb = (c.tb ? c.k : c.n) + c.pad;
    long long ldd = c.n + c.pad, ldc = ldd;
    size_t ea = (size_t)(c.ta ? c.k : c.m) * lda;
    size_t eb = (size_t)(c.tb ? c.n : c.k) * ldb;
    size_t ed = (size_t)c.m * ldd;
    std::vector<double> ha(ea), hb(eb), hc(ed), hd(ed), hr(ed);
    for (auto &v : ha)
        v = runit() * (c.phi > 0 ? exp2(c.phi * gauss()) : 1.0);
    for (auto &v : hb)
        v = runit() * (c.phi > 0 ? exp2(c.phi * gauss()) : 1.0);
    for (auto &v : hc)
        v = runit();
    if (exact_kind(c.special)) {
        for (auto &v : ha)
            v = exact_value(c.special);
        for (auto &v : hb)
            v = exact_value(c.special);
    }
    auto A = [&](long long i, long long h) -> double & {
        return ha[c.ta ? h * lda + i : i * lda + h];
    };
    auto B = [&](long long h, long long j) -> double & {
        return hb[c.tb ? j * ldb + h : h * ldb + j];
    };
    const long long si = c.m / 2, sj = c.n / 3;
    switch (c.special) {
    case SP_INF:
        A(si, c.k / 2) = INFINITY;
        break;
    case SP_NAN:
        B(c.k - 1, sj) = NAN;
        break;
    case SP_SUB:
        for (long long h = 0; h < c.k; h += 3)
            A(si, h) = ldexp(runit(), -1040);
        break;
    case SP_ZEROROW:
        for (long long h = 0; h < c.k; h++)
            A(si, h) = 0.0;
        for (long long h = 0; h < c.k; h++)
            B(h, sj) = 0.0;
        break;
    case SP_HUGE:
        for (long long h = 0; h < c.k; h++) {
            A(si, h) = ldexp(runit(), h % 2 ? 400 : -400);
            B(h, sj) = ldexp(runit(), h % 2 ? -400 : 400);
        }
        break;
    case SP_HUGE1:
        for (long long h = 0; h < c.k; h++)
            A(si, h) = ldexp(runit(), h % 2 ? 400 : -400);
        break;
    default:
        break;
    }
    double *da, *db, *dc, *dd, *dr;
    CK(cudaMalloc(&da, ea * 8));
    CK(cudaMalloc(&db, eb * 8));
    CK(cudaMalloc(&dc, ed * 8));
    CK(cudaMalloc(&dd, ed * 8));
    CK(cudaMalloc(&dr, ed * 8));
    CK(cudaMemcpy(da, ha.data(), ea * 8, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(db, hb.data(), eb * 8, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(dc, hc.data(), ed * 8, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(dr, hc.data(), ed * 8, cudaMemcpyHostToDevice));
    if (c.in_place)
        CK(cudaMemcpy(dd, hc.data(), ed * 8, cudaMemcpyHostToDevice));
    else
        CK(cudaMemset(dd, 0xff, ed * 8)); /* NaN everywhere */
    gemmk_problem_f64 p;
    memset(&p, 0, sizeof(p));
    p.m = c.m, p.n = c.n, p.k = c.k;
    p.trans_a = c.ta, p.trans_b = c.tb;
    p.a = da, p.b = db;
    p.c = c.beta != 0 ? (c.in_place ? dd : dc) : nullptr;
    p.d = dd;
    p.lda = lda, p.ldb = ldb, p.ldc = ldc, p.ldd = ldd;
    p.alpha = c.alpha, p.beta = c.beta;
    p.moduli = c.moduli;
    p.method = c.method;
    gemmk_f64_result res;
    gemm_error rv = gemmk_gemm_f64(ctx, &p, 0, c.kernel, &res);
    CK(cudaDeviceSynchronize());
    CK(cudaGetLastError());
    /* cuBLAS DGEMM on the same inputs (C in dr) */
    gemmk_problem_f64 q = p;
    q.c = c.beta != 0 ? (c.in_place ? dr : dc) : nullptr;
    q.d = dr;
    q.method = GEMMK_F64_NATIVE;
    q.moduli = 0;
    gemmk_f64_result qres;
    gemm_error rq = gemmk_gemm_f64(ctx, &q, 0, nullptr, &qres);
    CK(cudaDeviceSynchronize());
    char name[200];
    snprintf(name, sizeof name,
             "f64 %s %lldx%lldx%lld t%d%d a%g b%g pad%d phi%g %s%s%s", label,
             c.m, c.n, c.k, c.ta, c.tb, c.alpha, c.beta, c.pad, c.phi,
             c.kernel ? c.kernel : "auto", c.in_place ? " C=D" : "",
             c.moduli ? " explicit" : "");
    if (rv != GEMM_OK || rq != GEMM_OK) {
        FAIL("%s: gemmk_gemm_f64 %d, native %d", name, rv, rq);
        goto done;
    }
    CK(cudaMemcpy(hd.data(), dd, ed * 8, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(hr.data(), dr, ed * 8, cudaMemcpyDeviceToHost));
    if (c.expect_native && res.emulated)
        FAIL("%s: emulated, expected native", name);
    if (!c.expect_native && !res.emulated && c.method != GEMMK_F64_NATIVE)
        FAIL("%s: ran natively (%s), expected emulation", name,
             res.reason ? res.reason : "?");
    if (!res.emulated && !res.reason)
        FAIL("%s: native without a reason", name);
    if (res.emulated && (res.moduli < 2 || res.moduli > 20 ||
                         (c.moduli && res.moduli != c.moduli)))
        FAIL("%s: moduli %d", name, res.moduli);
    {
        /* samples: corners, the special row/column, random */
        std::vector<std::pair<long long, long long>> smp;
        if (c.m * c.n <= 4096) {
            for (long long i = 0; i < c.m; i++)
                for (long long j = 0; j < c.n; j++)
                    smp.push_back({i, j});
        } else {
            smp.push_back({0, 0});
            smp.push_back({c.m - 1, c.n - 1});
            smp.push_back({si, sj});
            smp.push_back({si, c.n - 1});
            for (int t = 0; t < (quick ? 200 : 500); t++)
                smp.push_back(
                    {(long long)(rnd64() % c.m), (long long)(rnd64() % c.n)});
        }
        std::vector<double> rel_o, nrm_o, rel_r, nrm_r;
        int bad = 0;
        /* E as the library computes it: 2^E > ||row||_2 (1 + 2^-20) */
        auto Eof = [&](bool isA, long long idx) {
            long double ss = 0;
            for (long long h = 0; h < c.k; h++) {
                double v = isA ? A(idx, h) : B(h, idx);
                ss += (long double)v * v;
            }
            if (ss == 0)
                return 0;
            int e;
            frexp((double)sqrtl(ss) * (1 + 0x1p-20), &e);
            return e;
        };
        for (auto &ij : smp) {
            long long i = ij.first, j = ij.second;
            DD s;
            double mag = 0, n1a = 0, n1b = 0;
            for (long long h = 0; h < c.k; h++) {
                s.add_prod(A(i, h), B(h, j));
                mag += fabs(A(i, h) * B(h, j));
                n1a += fabs(A(i, h));
                n1b += fabs(B(h, j));
            }
            double cin = c.beta != 0 ? hc[i * ldc + j] : 0.0;
            DD t;
            t.s = s.s * c.alpha;
            t.c = s.c * c.alpha + fma(s.s, c.alpha, -t.s);
            t.add_prod(c.beta, cin);
            double ref = t.value();
            double got = hd[i * ldd + j], nat = hr[i * ldd + j];
            if (!res.emulated) {
                if (!same_bits_or_nan(got, nat) && bad++ < 3)
                    FAIL("%s: native D[%lld][%lld] %.17g vs cuBLAS %.17g", name,
                         i, j, got, nat);
                continue;
            }
            if (exact_kind(c.special)) {
                /* ref is exact here; so must the emulation be (and DGEMM) */
                if ((got != ref || nat != ref) && bad++ < 3)
                    FAIL("%s: D[%lld][%lld] = %.17g, exact %.17g (cuBLAS "
                         "%.17g)",
                         name, i, j, got, ref, nat);
            }
            if (!isfinite(ref))
                continue;
            double scale = fabs(c.alpha) * mag + fabs(c.beta * cin);
            double eo = fabs(got - ref), er = fabs(nat - ref);
            if (isnan(got))
                eo = INFINITY;
            if (ref != 0) {
                rel_o.push_back(eo / fabs(ref));
                rel_r.push_back(er / fabs(ref));
            }
            if (scale > 0) {
                nrm_o.push_back(eo / scale);
                nrm_r.push_back(er / scale);
            }
            /* the a-priori bound (ozaki.h), times alpha, and a few output
             * roundings (the reconstruction is exact) */
            if (res.emulated) {
                int Ei = Eof(true, i), Ej = Eof(false, j);
                /* x2: the host's E may exceed the library's by one where
                 * a norm sits on a power of two */
                double bnd =
                    2 * fabs(c.alpha) *
                        (ldexp(n1b, Ei - res.beta_a - 1) +
                         ldexp(n1a, Ej - res.beta_b - 1) +
                         ldexp((double)c.k,
                               Ei + Ej - res.beta_a - res.beta_b - 2)) +
                    4 * 0x1p-53 * (fabs(ref) + fabs(c.beta * cin)) + 1e-300;
                if (!(eo <= bnd) && bad++ < 3)
                    FAIL("%s: D[%lld][%lld] = %.17g, ref %.17g: error %.3g "
                         "over the bound %.3g",
                         name, i, j, got, ref, eo, bnd);
            }
            if (c.special == SP_ZEROROW && i == si && c.beta == 0 &&
                got != 0.0 && bad++ < 3)
                FAIL("%s: zero row gives %.3g", name, got);
        }
        ErrStats so = err_stats(rel_o, nrm_o), sr = err_stats(rel_r, nrm_r);
        if (res.emulated && c.moduli == 0 && !nrm_o.empty()) {
            /* the default moduli: DGEMM's error or better, with room for
             * a sample's noise and the last ulp (k = 1: cuBLAS is exact) */
            if (so.max_norm > 4 * sr.max_norm + 0x1p-52)
                FAIL("%s: max error %.3g vs cuBLAS %.3g", name, so.max_norm,
                     sr.max_norm);
            if (so.med_norm > 2 * sr.med_norm + 0x1p-52)
                FAIL("%s: median error %.3g vs cuBLAS %.3g", name, so.med_norm,
                     sr.med_norm);
        }
        /* D's row padding untouched */
        for (long long i = 0; i < c.m && ldd > c.n && !c.in_place;
             i += (c.m + 7) / 8) {
            double v = hd[i * ldd + c.n];
            uint64_t u;
            memcpy(&u, &v, 8);
            if (u != ~0ull)
                FAIL("%s: row padding of row %lld written", name, i);
        }
        if (ok)
            passes++;
        printf("%s %s: %s n=%d%s%s | rel max %.2e med %.2e (cuBLAS %.2e "
               "%.2e) | /|a||b| max %.2e med %.2e (cuBLAS %.2e %.2e)\n",
               ok ? "ok  " : "FAIL", name, res.kernel ? res.kernel : "?",
               res.moduli, res.reason ? " native: " : "",
               res.reason ? res.reason : "", so.max_rel, so.med_rel, sr.max_rel,
               sr.med_rel, so.max_norm, so.med_norm, sr.max_norm, sr.med_norm);
    }
done:
    cudaFree(da);
    cudaFree(db);
    cudaFree(dc);
    cudaFree(dd);
    cudaFree(dr);
    return ok;
}

/* --------------------------------------------------------- complex128 */

struct ZCase {
    long long m, n, k;
    int ta, tb, ca, cb;    /* transposes and conjugations */
    double ar, ai, br, bi; /* alpha, beta */
    bool integers;         /* integer parts: the result must be exact */
    const char *kernel;    /* "oz2-complex", or NULL: auto (calibrated) */
    bool expect_emulated;
};

/* The complex cases (both types): named and auto, transposes,
 * conjugates, alpha/beta, integer parts. */
static const ZCase kZCases[] = {
    {300, 260, 500, 0, 0, 0, 0, 1.0, 0.0, 0.0, 0.0, false, "oz2-complex", true},
    {300, 260, 500, 1, 1, 1, 0, 0.5, -1.5, 0.25, 2.0, false, "oz2-complex",
     true},
    {129, 257, 700, 0, 1, 0, 1, 1.0, 1.0, 1.0, 0.0, false, "oz2-complex", true},
    {192, 160, 1024, 1, 0, 1, 1, 1.0, 0.0, -1.0, 0.0, true, "oz2-complex",
     true},
    {256, 256, 256, 0, 0, 0, 0, 1.0, 0.0, 0.0, 0.0, false, nullptr,
     false}, /* auto, small: cuBLAS */
};

/* complex128 (T double) or complex64 (T float) through gemmk_gemm: the
 * emulation ("oz2-complex", or auto where the model picks it) against a
 * double-double reference on samples (normwise: within 4x cuBLAS
 * ZGEMM's (CGEMM's) error plus the type's unit roundoff) and, for integer
 * parts, exactly. */
template <typename T> static bool run_z(const ZCase &c)
{
    bool ok = true;
    const bool c64 = sizeof(T) == 4;
    const long long lda = c.ta ? c.m : c.k, ldb = c.tb ? c.k : c.n, ldd = c.n;
    const size_t ea = (size_t)(c.ta ? c.k : c.m) * lda,
                 eb = (size_t)(c.tb ? c.n : c.k) * ldb, ed = (size_t)c.m * ldd;
    std::vector<T> ha(2 * ea), hb(2 * eb), hc(2 * ed), hd(2 * ed), hr(2 * ed);
    /* integers: every product and sum exact in T */
    const int imax = c64 ? 31 : 999;
    auto val = [&]() {
        return (T)(c.integers ? (double)((int)(rnd64() % (2 * imax + 1)) - imax)
                              : runit() * exp2(0.5 * gauss()));
    };
    for (auto &v : ha)
        v = val();
    for (auto &v : hb)
        v = val();
    for (auto &v : hc)
        v = (T)(c.integers ? (double)((int)(rnd64() % 19) - 9) : runit());
    const size_t es = sizeof(T);
    T *da, *db, *dc, *dd, *dr;
    CK(cudaMalloc(&da, ha.size() * es));
    CK(cudaMalloc(&db, hb.size() * es));
    CK(cudaMalloc(&dc, hc.size() * es));
    CK(cudaMalloc(&dd, hd.size() * es));
    CK(cudaMalloc(&dr, hr.size() * es));
    CK(cudaMemcpy(da, ha.data(), ha.size() * es, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(db, hb.data(), hb.size() * es, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(dc, hc.data(), hc.size() * es, cudaMemcpyHostToDevice));
    CK(cudaMemset(dd, 0xff, hd.size() * es));
    gemmk_problem p;
    memset(&p, 0, sizeof(p));
    p.m = c.m, p.n = c.n, p.k = c.k;
    p.ab_type = p.cd_type = c64 ? GEMM_COMPLEX64 : GEMM_COMPLEX128;
    p.trans_a = c.ta, p.trans_b = c.tb, p.conj_a = c.ca, p.conj_b = c.cb;
    p.a = da, p.b = db, p.c = dc, p.d = dd;
    p.lda = lda, p.ldb = ldb, p.ldc = ldd, p.ldd = ldd;
    p.zalpha[0] = c.ar, p.zalpha[1] = c.ai;
    p.zbeta[0] = c.br, p.zbeta[1] = c.bi;
    gemmk_result res;
    gemm_error rv = gemmk_gemm(ctx, &p, 0, c.kernel, &res);
    CK(cudaDeviceSynchronize());
    gemmk_problem q = p;
    q.d = dr;
    gemmk_result qres;
    gemm_error rq = gemmk_gemm(ctx, &q, 0, "cublas", &qres);
    CK(cudaDeviceSynchronize());
    char name[160];
    snprintf(name, sizeof name, "%s %lldx%lldx%lld t%d%d c%d%d %s%s",
             c64 ? "c64" : "z", c.m, c.n, c.k, c.ta, c.tb, c.ca, c.cb,
             c.kernel ? c.kernel : "auto", c.integers ? " integers" : "");
    if (rv != GEMM_OK || rq != GEMM_OK) {
        FAIL("%s: gemmk_gemm %d (%s), cuBLAS %d", name, rv, res.msg, rq);
    } else {
        const bool emulated = res.kernel && !strcmp(res.kernel, "oz2-complex");
        if (emulated != c.expect_emulated)
            FAIL("%s: ran %s", name, res.kernel ? res.kernel : "?");
        CK(cudaMemcpy(hd.data(), dd, hd.size() * es, cudaMemcpyDeviceToHost));
        CK(cudaMemcpy(hr.data(), dr, hr.size() * es, cudaMemcpyDeviceToHost));
        auto A = [&](long long i, long long h, int part) {
            double v = c.ta ? ha[2 * (h * lda + i) + part]
                            : ha[2 * (i * lda + h) + part];
            return part && c.ca ? -v : v;
        };
        auto B = [&](long long h, long long j, int part) {
            double v = c.tb ? hb[2 * (j * ldb + h) + part]
                            : hb[2 * (h * ldb + j) + part];
            return part && c.cb ? -v : v;
        };
        double worst_o = 0, worst_r = 0;
        int bad = 0;
        for (int t = 0; t < 300; t++) {
            long long i = (long long)(rnd64() % c.m),
                      j = (long long)(rnd64() % c.n);
            DD re, im;
            double mag = 0;
            for (long long h = 0; h < c.k; h++) {
                re.add_prod(A(i, h, 0), B(h, j, 0));
                re.add_prod(-A(i, h, 1), B(h, j, 1));
                im.add_prod(A(i, h, 0), B(h, j, 1));
                im.add_prod(A(i, h, 1), B(h, j, 0));
                mag += hypot(A(i, h, 0), A(i, h, 1)) *
                       hypot(B(h, j, 0), B(h, j, 1));
            }
            /* alpha (re + i im) + beta C, in double-double */
            const double cr = hc[2 * (i * ldd + j)],
                         ci = hc[2 * (i * ldd + j) + 1];
            DD xr, xi;
            xr.add_prod(c.ar, re.s), xr.add_prod(c.ar, re.c);
            xr.add_prod(-c.ai, im.s), xr.add_prod(-c.ai, im.c);
            xr.add_prod(c.br, cr), xr.add_prod(-c.bi, ci);
            xi.add_prod(c.ar, im.s), xi.add_prod(c.ar, im.c);
            xi.add_prod(c.ai, re.s), xi.add_prod(c.ai, re.c);
            xi.add_prod(c.br, ci), xi.add_prod(c.bi, cr);
            const double gr = hd[2 * (i * ldd + j)],
                         gi = hd[2 * (i * ldd + j) + 1];
            const double nr = hr[2 * (i * ldd + j)],
                         ni = hr[2 * (i * ldd + j) + 1];
            if (c.integers) {
                if ((gr != xr.value() || gi != xi.value()) && bad++ < 3)
                    FAIL("%s: D[%lld][%lld] = %.17g%+.17gi, exact %.17g%+.17gi",
                         name, i, j, gr, gi, xr.value(), xi.value());
                continue;
            }
            const double scale = hypot(c.ar, c.ai) * mag +
                                 hypot(c.br, c.bi) * hypot(cr, ci) + 1e-300;
            const double eo = hypot(gr - xr.value(), gi - xi.value()) / scale;
            const double er = hypot(nr - xr.value(), ni - xi.value()) / scale;
            worst_o = eo > worst_o ? eo : worst_o;
            worst_r = er > worst_r ? er : worst_r;
            if (!(eo <= 4 * er + (c64 ? 0x1p-23 : 0x1p-52)) && bad++ < 3)
                FAIL("%s: D[%lld][%lld] error %.3g of the scale, ZGEMM %.3g",
                     name, i, j, eo, er);
        }
        if (ok)
            passes++;
        printf("%s %s: %s n=%d | /|a||b| max %.2e (cuBLAS %.2e)\n",
               ok ? "ok  " : "FAIL", name, res.kernel ? res.kernel : "?",
               res.moduli, worst_o, worst_r);
    }
    cudaFree(da);
    cudaFree(db);
    cudaFree(dc);
    cudaFree(dd);
    cudaFree(dr);
    return ok;
}

/* ----------------------------------------------------------------- fp32 */

/* fp32 A/B/C/D at fp32 accuracy on the emulation ("oz2-f32", or "auto"
 * with an explicit count or by the cost model), against cuBLAS SGEMM
 * (true fp32) and 3xTF32 on the same inputs. */
struct F32Case {
    long long m, n, k;
    int ta, tb;
    double alpha, beta;
    double phi;
    const char *kernel; /* NULL: auto */
    int moduli;
    Special special; /* SP_NONE, SP_INT, SP_INF, SP_NAN, SP_SUB */
    int expect;      /* 1: emulated, 0: 3xTF32, -1: as the model says */
};

static bool run_f32(const F32Case &c, const char *label,
                    const gemmk_f64_rates *r)
{
    bool ok = true;
    const long long lda = c.ta ? c.m : c.k, ldb = c.tb ? c.k : c.n, ldd = c.n;
    const size_t ea = (size_t)(c.ta ? c.k : c.m) * lda,
                 eb = (size_t)(c.tb ? c.n : c.k) * ldb, ed = (size_t)c.m * ldd;
    std::vector<float> ha(ea), hb(eb), hc(ed), hd(ed), hs(ed), h3(ed);
    auto val = [&]() -> float {
        if (c.special == SP_INT) /* |sums| < 2^24: exact in fp32 */
            return (float)((int)(rnd64() % 63) - 31);
        return (float)(runit() * exp2(c.phi * gauss()));
    };
    for (auto &v : ha)
        v = val();
    for (auto &v : hb)
        v = val();
    for (auto &v : hc)
        v = c.special == SP_INT ? (float)((int)(rnd64() % 19) - 9)
                                : (float)runit();
    if (c.special == SP_INF)
        ha[ea / 2] = INFINITY;
    if (c.special == SP_NAN)
        hb[eb / 3] = NAN;
    if (c.special == SP_SUB)
        ha[ea / 2] = 1e-40f;
    float *da, *db, *dc, *dd, *ds, *d3;
    CK(cudaMalloc(&da, ea * 4));
    CK(cudaMalloc(&db, eb * 4));
    CK(cudaMalloc(&dc, ed * 4));
    CK(cudaMalloc(&dd, ed * 4));
    CK(cudaMalloc(&ds, ed * 4));
    CK(cudaMalloc(&d3, ed * 4));
    CK(cudaMemcpy(da, ha.data(), ea * 4, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(db, hb.data(), eb * 4, cudaMemcpyHostToDevice));
    CK(cudaMemcpy(dc, hc.data(), ed * 4, cudaMemcpyHostToDevice));
    CK(cudaMemset(dd, 0xff, ed * 4));
    gemmk_problem p;
    memset(&p, 0, sizeof(p));
    p.m = c.m, p.n = c.n, p.k = c.k;
    p.ab_type = p.cd_type = GEMM_FP32;
    p.precision = GEMM_PRECISION_FP32;
    p.trans_a = c.ta, p.trans_b = c.tb;
    p.a = da, p.b = db, p.c = dc, p.d = dd;
    p.lda = lda, p.ldb = ldb, p.ldc = ldd, p.ldd = ldd;
    p.alpha = (float)c.alpha, p.beta = (float)c.beta;
    p.moduli = c.moduli;
    gemmk_result res, rs, r3;
    gemm_error rv = gemmk_gemm(ctx, &p, 0, c.kernel, &res);
    CK(cudaDeviceSynchronize());
    gemmk_problem q = p;
    q.moduli = 0;
    q.d = ds;
    gemm_error rq = gemmk_gemm(ctx, &q, 0, "cublas", &rs);
    q.d = d3;
    gemm_error r3q = gemmk_gemm(ctx, &q, 0, "ws-3xtf32", &r3);
    CK(cudaDeviceSynchronize());
    char name[160];
    snprintf(name, sizeof name, "f32 %s %lldx%lldx%lld t%d%d phi %.1f %s n=%d",
             label, c.m, c.n, c.k, c.ta, c.tb, c.phi,
             c.kernel ? c.kernel : "auto", c.moduli);
    if (rv != GEMM_OK || rq != GEMM_OK || r3q != GEMM_OK) {
        FAIL("%s: gemmk_gemm %d (%s), SGEMM %d, 3xTF32 %d", name, rv, res.msg,
             rq, r3q);
    } else {
        const bool emulated = res.kernel && !strcmp(res.kernel, "oz2-f32");
        int expect = c.expect;
        if (expect < 0)
            expect = r && gemmk_f32_emulation_pays(r, c.m, c.n, c.k,
                                                   r->moduli_f32, c.beta != 0);
        if (emulated != (expect != 0))
            FAIL("%s: ran %s (%s expected)", name,
                 res.kernel ? res.kernel : "?",
                 expect ? "the emulation" : "3xTF32");
        if (emulated && res.moduli < 2)
            FAIL("%s: emulated with %d moduli", name, res.moduli);
        CK(cudaMemcpy(hd.data(), dd, ed * 4, cudaMemcpyDeviceToHost));
        CK(cudaMemcpy(hs.data(), ds, ed * 4, cudaMemcpyDeviceToHost));
        CK(cudaMemcpy(h3.data(), d3, ed * 4, cudaMemcpyDeviceToHost));
        auto A = [&](long long i, long long h) {
            return (double)(c.ta ? ha[h * lda + i] : ha[i * lda + h]);
        };
        auto B = [&](long long h, long long j) {
            return (double)(c.tb ? hb[j * ldb + h] : hb[h * ldb + j]);
        };
        std::vector<double> eo, es, e3;
        int bad = 0;
        const bool special =
            c.special == SP_INF || c.special == SP_NAN || c.special == SP_SUB;
        const int samples = c.m * c.n < 300 ? (int)(c.m * c.n) : 300;
        for (int t = 0; t < samples && !special; t++) {
            long long i =
                c.m * c.n < 300 ? t / c.n : (long long)(rnd64() % c.m);
            long long j =
                c.m * c.n < 300 ? t % c.n : (long long)(rnd64() % c.n);
            DD x;
            double mag = 0;
            for (long long h = 0; h < c.k; h++) {
                x.add_prod(A(i, h), B(h, j));
                mag += fabs(A(i, h) * B(h, j));
            }
            const double cij = hc[i * ldd + j];
            DD y;
            y.add_prod(c.alpha, x.s), y.add_prod(c.alpha, x.c);
            y.add_prod(c.beta, cij);
            const double ref = y.value();
            const double got = hd[i * ldd + j];
            if (c.special == SP_INT) {
                if (got != ref && bad++ < 3)
                    FAIL("%s: D[%lld][%lld] = %.9g, exact %.9g", name, i, j,
                         got, ref);
                continue;
            }
            const double scale =
                fabs(c.alpha) * mag + fabs(c.beta * cij) + 1e-300;
            eo.push_back(fabs(got - ref) / scale);
            es.push_back(fabs(hs[i * ldd + j] - ref) / scale);
            e3.push_back(fabs(h3[i * ldd + j] - ref) / scale);
        }
        if (special) { /* the fallback: 3xTF32's own bits */
            for (size_t i = 0; i < ed && bad < 3; i++)
                if (!same_bits_or_nan(hd[i], h3[i]) && bad++ < 3)
                    FAIL("%s: D[%zu] = %.9g, 3xTF32 %.9g", name, i, hd[i],
                         h3[i]);
        }
        std::sort(eo.begin(), eo.end());
        std::sort(es.begin(), es.end());
        std::sort(e3.begin(), e3.end());
        const double mo = eo.empty() ? 0 : eo.back(),
                     ms = es.empty() ? 0 : es.back(),
                     m3 = e3.empty() ? 0 : e3.back();
        const double do_ = eo.empty() ? 0 : eo[eo.size() / 2],
                     ds_ = es.empty() ? 0 : es[es.size() / 2];
        /* at the default count (or 7 and more) no worse than SGEMM's
         * and 3xTF32's worst by more than 2x, plus fp32's rounding */
        const bool bounded = c.moduli == 0 || c.moduli >= 7;
        if (emulated && bounded && !eo.empty() &&
            !(mo <= 2 * fmax(ms, m3) + 0x1p-24))
            FAIL("%s: max error %.3g of sum |a b|, SGEMM %.3g, 3xTF32 %.3g",
                 name, mo, ms, m3);
        if (ok)
            passes++;
        printf("%s %s: %s n=%d | /sum|ab| max %.2e med %.2e (SGEMM %.2e / "
               "%.2e, 3xTF32 %.2e)\n",
               ok ? "ok  " : "FAIL", name, res.kernel ? res.kernel : "?",
               res.moduli, mo, do_, ms, ds_, m3);
    }
    cudaFree(da);
    cudaFree(db);
    cudaFree(dc);
    cudaFree(dd);
    cudaFree(ds);
    cudaFree(d3);
    return ok;
}

int main(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--quick"))
            quick = true;
        else if (!strcmp(argv[i], "--seed") && i + 1 < argc)
            seed = strtoull(argv[++i], nullptr, 10);
        else if (!strcmp(argv[i], "--s8"))
            only_s8 = true;
        else if (!strcmp(argv[i], "--f64"))
            only_f64 = true;
    }
    int ndev = 0;
    if (cudaGetDeviceCount(&ndev) != cudaSuccess || ndev == 0) {
        cudaGetLastError();
        printf("skipped: no CUDA device\n");
        return 77;
    }
    gemm_error rv = gemmk_ctx_create(&ctx, 0);
    if (rv == GEMM_ERR_UNSUPPORTED) {
        printf("skipped: not an sm_90 device\n");
        return 77;
    }
    if (rv != GEMM_OK) {
        printf("FAIL gemmk_ctx_create: %d\n", rv);
        return 1;
    }

    /* int8 */
    std::vector<S8Case> s8;
    const long long dims[][3] = {
        {1, 1, 1},       {7, 13, 5},       {64, 64, 64},      {127, 129, 300},
        {128, 256, 128}, {300, 200, 1000}, {1000, 1000, 1000}};
    for (auto &d : dims)
        for (int t = 0; t < 4; t++)
            s8.push_back({d[0], d[1], d[2], t >> 1, t & 1, 1, 0, 0, nullptr});
    s8.push_back({257, 513, 129, 0, 1, 3, -2, 16, nullptr});
    s8.push_back({257, 513, 129, 1, 0, -1, 5, 32, "ws-s8x128"});
    s8.push_back({1000, 1000, 1000, 0, 1, 1, 0, 0, "ws-s8x128"});
    s8.push_back({1000, 1000, 1000, 1, 1, 2, 3, 16, "ws-s8x256"});
    s8.push_back({127, 129, 300, 0, 0, 1, 0, 0, "ws-s8x256"});
    s8.push_back({300, 700, 1000, 0, 1, -1, 1, 0, "pp-s8"});
    s8.push_back({4096, 4096, 4096, 0, 1, 1, 0, 0, nullptr});
    s8.push_back({2048, 4096, 8192, 1, 1, 2, 1, 16, nullptr});
    if (!quick)
        s8.push_back({8192, 8192, 8192, 0, 1, 1, 0, 0, nullptr});
    if (!only_f64)
        for (auto &c : s8)
            run_s8(c);

    /* fp64 */
    const gemmk_f64_method EM = GEMMK_F64_EMULATE, AU = GEMMK_F64_AUTO;
    struct Named {
        const char *label;
        F64Case c;
    };
    std::vector<Named> f;
    const long long sh[][3] = {{1, 1, 1},       {7, 13, 5},
                               {64, 64, 64},    {127, 129, 300},
                               {129, 127, 257}, {300, 200, 1000}};
    for (auto &d : sh)
        for (int t = 0; t < 4; t++)
            f.push_back({"shape",
                         {d[0], d[1], d[2], t >> 1, t & 1, 1.0, 0.0, t, 0.5,
                          nullptr, EM, 0, SP_NONE, false, false}});
    for (double phi : {0.0, 0.5, 1.0, 2.0})
        for (long long k : {1024ll, 8192ll})
            f.push_back({"phi",
                         {512, 384, k, 0, 0, 1.0, 0.0, 0, phi, nullptr, EM, 0,
                          SP_NONE, false, false}});
    f.push_back({"alpha-beta",
                 {200, 300, 400, 0, 1, -1.5, 0.25, 3, 0.5, nullptr, EM, 0,
                  SP_NONE, false, false}});
    f.push_back({"alpha-beta",
                 {200, 300, 400, 1, 0, 2.0, -1.0, 1, 0.5, nullptr, EM, 0,
                  SP_NONE, true, false}});
    f.push_back({"alpha0",
                 {100, 100, 100, 0, 0, 0.0, 0.5, 0, 0.5, nullptr, EM, 0,
                  SP_NONE, false, true}});
    for (const char *v : {"oz2-bytes", "oz2-unfused"})
        for (int t = 0; t < 4; t += 3)
            f.push_back({"variant",
                         {333, 517, 700, t >> 1, t & 1, 1.0, 0.5, 5, 0.5, v, AU,
                          0, SP_NONE, false, false}});
    f.push_back({"flush",
                 {200, 136, 70000, 0, 1, 1.0, 0.0, 0, 0.5, nullptr, EM, 0,
                  SP_NONE, false, false}});
    f.push_back({"flush",
                 {130, 260, 40000, 1, 0, 1.0, 0.0, 0, 0.5, "oz2-bytes", AU, 0,
                  SP_NONE, false, false}});
    for (int nm : {4, 8, 12})
        f.push_back({"moduli",
                     {256, 256, 2048, 0, 0, 1.0, 0.0, 0, 0.5, nullptr, AU, nm,
                      SP_NONE, false, false}});
    for (Special sp : {SP_INT, SP_INT2, SP_BINARY})
        for (const char *v : {"oz2-bytes", "oz2-unfused"})
            f.push_back({"exact",
                         {300, 260, 2048, 0, 1, 1.0, 0.0, 0, 0.0, v, AU, 0, sp,
                          false, false}});
    f.push_back({"exact",
                 {1024, 1024, 4096, 1, 0, 1.0, 0.0, 0, 0.0, nullptr, EM, 0,
                  SP_INT, false, false}});
    /* past 16 rounds of tiles over the SMs (2400 tiles here) the
     * products run one launch per modulus, below in one launch */
    f.push_back({"exact",
                 {6144, 6400, 1024, 0, 0, 1.0, 0.0, 0, 0.0, nullptr, EM, 0,
                  SP_INT2, false, false}});
    f.push_back({"zero-row",
                 {256, 256, 512, 0, 0, 1.0, 0.0, 0, 0.5, nullptr, EM, 0,
                  SP_ZEROROW, false, false}});
    f.push_back({"inf",
                 {256, 256, 512, 0, 0, 1.0, 0.0, 0, 0.5, nullptr, EM, 0, SP_INF,
                  false, true}});
    f.push_back({"nan",
                 {256, 256, 512, 1, 1, 1.0, 0.5, 0, 0.5, nullptr, EM, 0, SP_NAN,
                  false, true}});
    f.push_back({"nan",
                 {256, 256, 512, 0, 0, 1.0, 0.0, 0, 0.5, nullptr, EM, 9, SP_NAN,
                  false, true}});
    f.push_back({"subnormal",
                 {256, 256, 512, 0, 0, 1.0, 0.0, 0, 0.5, nullptr, EM, 0, SP_SUB,
                  false, true}});
    f.push_back({"subnormal",
                 {256, 256, 512, 0, 0, 1.0, 0.0, 0, 0.5, nullptr, EM, 14,
                  SP_SUB, false, false}});
    f.push_back({"huge",
                 {256, 256, 512, 0, 0, 1.0, 0.0, 0, 0.5, nullptr, EM, 0,
                  SP_HUGE, false, true}});
    f.push_back({"huge-one-side",
                 {256, 256, 512, 0, 1, 1.0, 0.0, 0, 0.5, nullptr, EM, 0,
                  SP_HUGE1, false, false}});
    f.push_back({"phi8",
                 {512, 512, 2048, 0, 0, 1.0, 0.0, 0, 8.0, nullptr, EM, 0,
                  SP_NONE, false, true}});
    f.push_back({"auto-small",
                 {128, 128, 128, 0, 0, 1.0, 0.0, 0, 0.5, nullptr, AU, 0,
                  SP_NONE, false, true}});
    f.push_back({"emulate",
                 {2048, 2048, 2048, 0, 0, 1.0, 0.0, 0, 0.5, nullptr, EM, 0,
                  SP_NONE, false, false}});
    /* the cost model: at 2048^3 native DGEMM is faster */
    f.push_back({"auto-2048",
                 {2048, 2048, 2048, 1, 1, 1.0, 0.0, 0, 0.5, nullptr, AU, 0,
                  SP_NONE, false, true}});
    if (!quick) {
        f.push_back({"emulate",
                     {4096, 4096, 4096, 0, 1, 1.0, 0.0, 0, 0.5, nullptr, EM, 0,
                      SP_NONE, false, false}});
        f.push_back({"auto",
                     {4096, 4096, 4096, 1, 0, 1.0, 0.0, 0, 0.5, "oz2-bytes", AU,
                      0, SP_NONE, false, false}});
        f.push_back({"phi",
                     {2048, 2048, 16384, 0, 0, 1.0, 0.0, 0, 1.0, nullptr, EM, 0,
                      SP_NONE, false, false}});
        /* the cost model: at 8192 x 8192 x 8192 emulation */
        f.push_back({"auto-8192",
                     {8192, 8192, 8192, 0, 0, 1.0, 0.0, 0, 0.5, nullptr, AU, 0,
                      SP_NONE, false, false}});
    }
    if (!only_s8) {
        /* the cost model "auto" uses: measured, plausible, then set */
        gemmk_f64_rates r;
        char why[256];
        gemm_error ce =
            gemmk_f64_calibrate(ctx, 0, 0, nullptr, &r, why, sizeof why);
        if (ce != GEMM_OK) {
            printf("FAIL gemmk_f64_calibrate: %d: %s\n", ce, why);
            failures++;
        } else {
            printf("calibration %.0f ms at %d^3: DGEMM %.1f TFLOP/s +%.0f us, "
                   "%d moduli: int8 %.0f TOPS, %.2f TB/s, +%.0f us\n",
                   r.ms, r.size, r.native_flops / 1e12, r.native_s * 1e6,
                   r.moduli, r.int8_ops / 1e12, r.emul_bandwidth / 1e12,
                   r.emul_s * 1e6);
            /* an H100's DGEMM runs at 40-67 TFLOP/s, its int8 at 0.5-2
             * POPS, its memory at 0.5-3.4 TB/s */
            bool sane = r.native_flops > 20e12 && r.native_flops < 80e12 &&
                        r.int8_ops > 3e14 && r.int8_ops < 2.5e15 &&
                        r.emul_bandwidth > 2e11 && r.emul_bandwidth < 4e12 &&
                        r.moduli >= 14 && r.moduli <= 16 && r.emul_s < 5e-3;
            if (!sane) {
                printf("FAIL calibration: rates out of an H100's range\n");
                failures++;
            } else {
                passes++;
            }
            gemmk_ctx_set_f64_rates(ctx, &r);
            rates = r;
            have_rates = true;
            printf("fp32 calibration: 3xTF32 %.1f TFLOP/s +%.0f us, SGEMM "
                   "%.1f TFLOP/s +%.0f us, %d moduli: %.2f TB/s, +%.0f us; the "
                   "emulation pays from %lld^3\n",
                   r.x3_flops / 1e12, r.x3_s * 1e6, r.sgemm_flops / 1e12,
                   r.sgemm_s * 1e6, r.moduli_f32, r.emul32_bandwidth / 1e12,
                   r.emul32_s * 1e6, (long long)gemmk_f32_crossover(&r));
            if (r.moduli_f32 < 6 || r.moduli_f32 > 8 || r.x3_flops < 3e13) {
                printf("FAIL fp32 calibration: out of an H100's range\n");
                failures++;
            }
        }
        for (auto &x : f)
            run_f64(x.c, x.label);
        /* complex128 on the emulation */
        for (const ZCase &zc : kZCases)
            run_z<double>(zc);
        if (!quick)
            run_z<double>({6144, 6144, 6144, 0, 1, 0, 1, 1.0, 0.0, 0.0, 0.0,
                           false, nullptr, true}); /* auto, large: emulated */
    }
    if (!only_s8) {
        gemmk_f64_rates r;
        const bool have = calibrated(&r);
        const char *oz = "oz2-f32";
        std::vector<std::pair<const char *, F32Case>> g;
        /* every leading dimension a multiple of 8 (fp32 operands) */
        const long long sh[][3] = {
            {8, 8, 8}, {8, 16, 24}, {128, 136, 304}, {304, 200, 1000}};
        for (auto &d : sh)
            for (int t = 0; t < 4; t++)
                g.push_back({"shape",
                             {d[0], d[1], d[2], t >> 1, t & 1, 1.0, 0.0, 0.5,
                              oz, 0, SP_NONE, 1}});
        for (double phi : {0.0, 0.5, 1.0, 2.0})
            for (long long k : {1024ll, 8192ll})
                g.push_back(
                    {"phi",
                     {512, 384, k, 0, 0, 1.0, 0.0, phi, oz, 0, SP_NONE, 1}});
        g.push_back(
            {"alpha-beta",
             {200, 296, 400, 0, 1, -1.5, 0.25, 0.5, oz, 0, SP_NONE, 1}});
        for (int nm : {4, 6, 7, 9})
            g.push_back({"moduli",
                         {256, 256, 2048, 0, 0, 1.0, 0.0, 0.5, nullptr, nm,
                          SP_NONE, 1}});
        g.push_back(
            {"exact", {304, 264, 2048, 0, 1, 1.0, 0.0, 0, oz, 0, SP_INT, 1}});
        g.push_back(
            {"exact", {6144, 6400, 1024, 1, 0, 1.0, 1.0, 0, oz, 0, SP_INT, 1}});
        for (Special sp : {SP_INF, SP_NAN, SP_SUB})
            g.push_back({"fallback",
                         {256, 256, 512, 0, 0, 1.0, 0.0, 0.5, oz, 0, sp, 0}});
        g.push_back(
            {"auto-small",
             {256, 256, 256, 0, 0, 1.0, 0.0, 0.5, nullptr, 0, SP_NONE, 0}});
        g.push_back(
            {"auto",
             {4096, 4096, 4096, 0, 0, 1.0, 0.0, 0.5, nullptr, 0, SP_NONE, -1}});
        if (!quick)
            g.push_back({"auto",
                         {8192, 8192, 8192, 1, 0, 1.0, 0.0, 0.5, nullptr, 0,
                          SP_NONE, -1}});
        for (auto &x : g)
            run_f32(x.second, x.first, have ? &r : nullptr);
        /* complex64 on the fp32 emulation: the same cases */
        for (const ZCase &zc : kZCases)
            run_z<float>(zc);
        if (!quick) /* auto, large: the emulation once calibrated (its
                       real product pays even against 3xTF32) */
            run_z<float>({6144, 6144, 6144, 0, 1, 0, 1, 1.0, 0.0, 0.0, 0.0,
                          false, nullptr, have});
    }

    gemmk_ctx_destroy(ctx);
    printf("ozaki gpu tests: %d passed, %d failed\n", passes, failures);
    return failures ? 1 : 0;
}
