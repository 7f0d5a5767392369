/*
 * oz_calibrate.cu: gemmk_f64_calibrate, the measurements behind fp64
 * "auto" (gemmk_f64_rates in gemm_kernels.h). Native DGEMM, the
 * emulation's preparation ("oz2-prep": statistics, scaling, residues) and
 * the whole emulation ("oz2-bytes") are timed on random n x n x n
 * problems at two sizes, n and n / 2, in rounds (each kernel once a round,
 * the fastest of four rounds kept), and the cost model's constants are
 * the straight lines through the two points: a fixed cost and a rate per
 * flop (DGEMM), per byte (the preparation and the reconstruction's
 * traffic) and per int8 operation (the modular products). Then the same
 * for fp32 at fp32 accuracy: 3xTF32 ("ws-3xtf32") and cuBLAS SGEMM (what
 * complex64's CGEMM runs at) against the emulation from fp32 inputs
 * ("oz2-f32"), whose int8 rate is the one above.
 */
#include <cuda_runtime_api.h>
#include <math.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "catalog.h"
#include "ctx_internal.h"

namespace
{

/* Uniform in [-1, 1) times 2^(phi N(0, 1)): bench_gemm's fp64 inputs. */
__global__ void fill_kernel(double *p, long long n, uint64_t seed, double phi)
{
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n;
         i += (long long)gridDim.x * blockDim.x) {
        uint64_t x = (seed + (uint64_t)i) * 0x9E3779B97F4A7C15ull;
        x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
        x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
        x ^= x >> 31;
        uint64_t y = x * 0xd1342543de82ef95ull + 1;
        y = (y ^ (y >> 29)) * 0xbf58476d1ce4e5b9ull;
        y ^= y >> 32;
        const double u = (double)(x >> 11) * 0x1p-53 * 2.0 - 1.0;
        const double u1 = (double)((y >> 11) + 1) * 0x1p-53;
        const double u2 = (double)((x * 0x9E3779B97F4A7C15ull) >> 11) * 0x1p-53;
        p[i] = u * exp2(phi * sqrt(-2 * log(u1)) * cospi(2 * u2));
    }
}

/* Narrows n doubles at src to floats at dst (separate buffers). */
__global__ void narrow_kernel(const double *src, float *dst, long long n)
{
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n;
         i += (long long)gridDim.x * blockDim.x)
        dst[i] = (float)src[i];
}

/* Device bytes a calibration at size n needs: A, B, D and the emulation's
 * residues and planes (up to 16 moduli). */
size_t bytes_for(long long n)
{
    return (size_t)(3 * 8 + 3 * 16) * (size_t)n * (size_t)n;
}

struct Timer {
    gemmk_ctx *ctx;
    cudaStream_t s;
    cudaEvent_t e0, e1;
    const int *stop;
};

/* Times count kernels in rounds: one unmeasured round, then ROUNDS
 * rounds in which run(0), run(1), .. run(count - 1) each run once, timed
 * alone. sec[j] is run(j)'s fastest. Interleaved, a drift of the clocks
 * over the calibration touches every kernel alike, so the differences
 * and ratios the model is fitted to move less than back-to-back runs'. */
constexpr int ROUNDS = 4;

template <typename F>
gemm_error time_rounds(Timer &t, int count, F run, double *sec)
{
    for (int j = 0; j < count; j++)
        sec[j] = INFINITY;
    for (int r = 0; r <= ROUNDS; r++) {
        for (int j = 0; j < count; j++) {
            if (t.stop && __atomic_load_n(t.stop, __ATOMIC_RELAXED))
                return GEMM_ERR_SHUTDOWN;
            cudaError_t ce = cudaEventRecord(t.e0, t.s);
            if (ce != cudaSuccess)
                return GEMM_ERR_DEVICE;
            gemm_error e = run(j);
            if (e != GEMM_OK)
                return e;
            float ms = 0;
            if ((ce = cudaEventRecord(t.e1, t.s)) != cudaSuccess ||
                (ce = cudaEventSynchronize(t.e1)) != cudaSuccess ||
                (ce = cudaEventElapsedTime(&ms, t.e0, t.e1)) != cudaSuccess)
                return ce == cudaErrorMemoryAllocation ? GEMM_ERR_DEVICE_MEMORY
                                                       : GEMM_ERR_DEVICE;
            if (r > 0 && ms * 1e-3 < sec[j])
                sec[j] = ms * 1e-3;
        }
    }
    return GEMM_OK;
}

/* y = a + x / r through (x1, y1) and (x2, y2), a >= 0; where the two
 * points do not give a positive slope (timings disturbed by other work
 * on the GPU), the line through the origin and the larger point, whose
 * time the fixed cost disturbs least. False unless r comes out positive
 * and finite. */
bool fit(double x1, double y1, double x2, double y2, double *a, double *r)
{
    *a = 0;
    *r = x2 / y2;
    if (x2 > x1 && y2 > y1) {
        const double slope = (x2 - x1) / (y2 - y1);
        const double icpt = y1 - x1 / slope;
        if (isfinite(slope) && slope > 0 && icpt >= 0) {
            *r = slope;
            *a = icpt;
        }
    }
    return isfinite(*r) && *r > 0;
}

/* The fp32 lines of r: 3xTF32, SGEMM and the emulation from fp32 inputs, on
 * the fp64 inputs narrowed (buf holds 3 elems doubles: A, B and D of the
 * fp64 runs). The rates are the slopes between n1 and n2; the fixed costs
 * come from a small cube (n2 / 8), where they dominate and the long
 * lines would extrapolate them badly (3xTF32's launch and the
 * emulation's read-back of the statistics). Left zero where anything
 * fails ("auto" then keeps fp32 on 3xTF32). */
void calibrate_f32(Timer &t, double *buf, size_t elems, long long n1,
                   long long n2, gemmk_f64_rates *r)
{
    float *a = reinterpret_cast<float *>(buf + 2 * elems);
    float *b = a + elems;
    float *d = reinterpret_cast<float *>(buf);
    narrow_kernel<<<2048, 256, 0, t.s>>>(buf, a, (long long)elems);
    narrow_kernel<<<2048, 256, 0, t.s>>>(buf + elems, b, (long long)elems);
    if (cudaGetLastError() != cudaSuccess)
        return;
    const long long ns[3] = {n2 / 8, n1, n2};
    double t3[3], tp[3], te[3], ts[3];
    int moduli = 0;
    for (int i = 0; i < 3; i++) {
        const long long n = ns[i];
        gemmk_problem p;
        memset(&p, 0, sizeof(p));
        p.m = p.n = p.k = n;
        p.ab_type = p.cd_type = GEMM_FP32;
        p.precision = GEMM_PRECISION_FP32;
        p.a = a, p.b = b, p.d = d;
        p.lda = p.ldb = p.ldc = p.ldd = n;
        p.alpha = 1.0f;
        const char *declined = nullptr;
        tp[i] = 0;
        /* 3xTF32, SGEMM, the emulation, then its preparation (not at the
         * small cube, whose fixed costs alone are wanted) */
        double sec[4];
        const int count = i > 0 ? 4 : 3;
        gemm_error e = time_rounds(
            t, count,
            [&](int j) -> gemm_error {
                gemmk_result res;
                if (j == 0)
                    return gemmk_gemm(t.ctx, &p, t.s, "ws-3xtf32", &res);
                if (j == 1)
                    return gemmk_gemm(t.ctx, &p, t.s, "cublas", &res);
                if (j == 2) {
                    gemm_error ee = gemmk_gemm(t.ctx, &p, t.s, "oz2-f32", &res);
                    if (ee == GEMM_OK && res.moduli == 0)
                        return GEMM_ERR_INTERNAL;
                    moduli = res.moduli;
                    return ee;
                }
                gemm_error ee =
                    gemmk::oz_f32(t.ctx, &p, t.s, false, true, &res, &declined);
                return ee == GEMM_OK && declined ? GEMM_ERR_INTERNAL : ee;
            },
            sec);
        if (e != GEMM_OK)
            return;
        t3[i] = sec[0], ts[i] = sec[1], te[i] = sec[2];
        if (i > 0)
            tp[i] = sec[3];
    }
    auto flops = [](long long n) { return 2.0 * n * n * n; };
    auto prep = [&](long long n) { return (8.0 + moduli) * 2 * n * n; };
    auto recon = [&](long long n) { return (2.0 * moduli + 4) * n * n; };
    double icpt, x3_flops, sg_flops, bw;
    if (!fit(flops(ns[1]), t3[1], flops(ns[2]), t3[2], &icpt, &x3_flops) ||
        !fit(flops(ns[1]), ts[1], flops(ns[2]), ts[2], &icpt, &sg_flops) ||
        !fit(prep(ns[1]), tp[1], prep(ns[2]), tp[2], &icpt, &bw))
        return;
    const double x3_s = t3[0] - flops(ns[0]) / x3_flops;
    const double e_s = te[0] - (prep(ns[0]) + recon(ns[0])) / bw -
                       moduli * flops(ns[0]) / r->int8_ops;
    const double sg_s = ts[0] - flops(ns[0]) / sg_flops;
    r->sgemm_s = sg_s > 0 ? sg_s : 0;
    r->sgemm_flops = sg_flops;
    r->x3_s = x3_s > 0 ? x3_s : 0;
    r->x3_flops = x3_flops;
    r->emul32_bandwidth = bw;
    r->emul32_s = e_s > 0 ? e_s : 0;
    r->moduli_f32 = moduli;
}

} // namespace

extern "C" gemm_error gemmk_f64_calibrate(gemmk_ctx *ctx, cudaStream_t stream,
                                          size_t max_bytes, const int *stop,
                                          gemmk_f64_rates *out, char *msg,
                                          size_t len)
{
    char dummy[8];
    if (!msg || !len) {
        msg = dummy;
        len = sizeof(dummy);
    }
    msg[0] = '\0';
    if (!ctx || !out) {
        snprintf(msg, len, "no context or result given");
        return GEMM_ERR_INVALID;
    }
    struct timespec w0, w1;
    clock_gettime(CLOCK_MONOTONIC, &w0);
    size_t free_b = 0, total_b = 0;
    if (cudaMemGetInfo(&free_b, &total_b) != cudaSuccess) {
        cudaGetLastError();
        snprintf(msg, len, "cudaMemGetInfo failed");
        return GEMM_ERR_DEVICE;
    }
    size_t cap = free_b / 10 * 9;
    if (max_bytes && max_bytes < cap)
        cap = max_bytes;
    long long n2 = 0;
    for (long long n : {8192ll, 6144ll, 4096ll})
        if (!n2 && bytes_for(n) <= cap)
            n2 = n;
    if (!n2) {
        snprintf(msg, len,
                 "%zu MB of device memory free for it, %zu MB needed at the "
                 "least",
                 cap >> 20, bytes_for(4096) >> 20);
        return GEMM_ERR_DEVICE_MEMORY;
    }
    const long long n1 = n2 / 2;
    const size_t elems = (size_t)n2 * (size_t)n2;
    double *buf = nullptr;
    Timer t = {ctx, stream, nullptr, nullptr, stop};
    gemm_error e = GEMM_OK;
    double tn[2], tp[2], te[2];
    int moduli = 0;
    cudaError_t ce = cudaMalloc(&buf, 3 * elems * sizeof(double));
    if (ce == cudaSuccess)
        ce = cudaEventCreate(&t.e0);
    if (ce == cudaSuccess)
        ce = cudaEventCreate(&t.e1);
    if (ce == cudaSuccess) {
        fill_kernel<<<2048, 256, 0, stream>>>(buf, (long long)elems, 31337,
                                              0.5);
        fill_kernel<<<2048, 256, 0, stream>>>(buf + elems, (long long)elems,
                                              73313, 0.5);
        ce = cudaGetLastError();
    }
    if (ce != cudaSuccess) {
        cudaGetLastError();
        snprintf(msg, len, "device buffers: %s", cudaGetErrorString(ce));
        e = ce == cudaErrorMemoryAllocation ? GEMM_ERR_DEVICE_MEMORY
                                            : GEMM_ERR_DEVICE;
        goto done;
    }
    for (int i = 0; i < 2 && e == GEMM_OK; i++) {
        const long long n = i ? n2 : n1;
        gemmk_problem_f64 p;
        memset(&p, 0, sizeof(p));
        p.m = p.n = p.k = n;
        p.a = buf, p.b = buf + elems, p.d = buf + 2 * elems;
        p.lda = p.ldb = p.ldc = p.ldd = n;
        p.alpha = 1.0;
        p.method = GEMMK_F64_EMULATE;
        /* DGEMM, the preparation and the whole emulation, in rounds */
        static const char *const kernels[3] = {"cublas-dgemm", "oz2-prep",
                                               "oz2-bytes"};
        int failed = 0;
        double sec[3];
        e = time_rounds(
            t, 3,
            [&](int j) -> gemm_error {
                gemmk_f64_result res;
                failed = j;
                gemm_error ee =
                    gemmk_gemm_f64(t.ctx, &p, t.s, kernels[j], &res);
                if (ee == GEMM_OK && j == 2) {
                    if (!res.emulated) {
                        snprintf(msg, len, "the emulation ran natively (%s)",
                                 res.reason ? res.reason : "?");
                        return GEMM_ERR_INTERNAL;
                    }
                    moduli = res.moduli;
                }
                return ee;
            },
            sec);
        tn[i] = sec[0], tp[i] = sec[1], te[i] = sec[2];
        const char *what = failed == 0   ? "cuBLAS DGEMM"
                           : failed == 1 ? "the emulation's preparation"
                                         : "the emulation";
        if (e == GEMM_ERR_SHUTDOWN)
            snprintf(msg, len, "stopped");
        else if (e != GEMM_OK && !msg[0])
            snprintf(msg, len, "%s at %lld^3 failed (error %d)", what, n,
                     (int)e);
    }
    if (e == GEMM_OK) {
        gemmk_f64_rates r;
        memset(&r, 0, sizeof(r));
        const double f1 = 2.0 * n1 * n1 * n1, f2 = 2.0 * n2 * n2 * n2;
        /* bytes of the preparation and of the planes and D at each size */
        const double bp1 = (16.0 + moduli) * 2 * n1 * n1;
        const double bp2 = (16.0 + moduli) * 2 * n2 * n2;
        const double br1 = (2.0 * moduli + 8) * n1 * n1;
        const double br2 = (2.0 * moduli + 8) * n2 * n2;
        double fp = 0, fg = 0;
        bool ok = fit(f1, tn[0], f2, tn[1], &r.native_s, &r.native_flops) &&
                  fit(bp1, tp[0], bp2, tp[1], &fp, &r.emul_bandwidth);
        const double g1 = te[0] - tp[0] - br1 / r.emul_bandwidth;
        const double g2 = te[1] - tp[1] - br2 / r.emul_bandwidth;
        ok = ok && fit(moduli * f1, g1, moduli * f2, g2, &fg, &r.int8_ops);
        if (!ok) {
            snprintf(msg, len,
                     "the times do not fit the model (DGEMM %.3g/%.3g s, "
                     "preparation %.3g/%.3g s, emulation %.3g/%.3g s at "
                     "%lld^3/%lld^3)",
                     tn[0], tn[1], tp[0], tp[1], te[0], te[1], n1, n2);
            e = GEMM_ERR_INTERNAL;
        } else {
            r.emul_s = fp + fg;
            r.moduli = moduli;
            r.size = (int)n2;
            calibrate_f32(t, buf, elems, n1, n2, &r);
            clock_gettime(CLOCK_MONOTONIC, &w1);
            r.ms =
                (w1.tv_sec - w0.tv_sec) * 1e3 + (w1.tv_nsec - w0.tv_nsec) / 1e6;
            *out = r;
        }
    }
done:
    if (buf) {
        cudaStreamSynchronize(stream);
        cudaFree(buf);
    }
    if (t.e0)
        cudaEventDestroy(t.e0);
    if (t.e1)
        cudaEventDestroy(t.e1);
    cudaGetLastError();
    return e;
}
