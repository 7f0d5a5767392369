/*
 * ozaki.cu: fp64 GEMM (gemmk_gemm_f64): native DGEMM through cuBLASLt, or
 * the Ozaki-II emulation on the int8 tensor cores; and the same emulation
 * from fp32 inputs into fp32 (oz_f32, for run_fp32's "oz2-f32" and fp32
 * "auto"). ozaki.h has the arithmetic and its error model, oz_passes.cuh
 * the device passes, gemm_s8.cuh the modular products.
 *
 * The emulation, step by step:
 *  1. stats: one pass over op(A)'s rows and op(B)'s columns (32 x 128
 *     tiles through shared memory, so row- and column-major operands read
 *     coalesced): per row the largest exponent, the sum of squares scaled
 *     by it, the mean exponent, inf/NaN and subnormal flags. A second tiny
 *     kernel turns them into the scale exponents E (2^E >= the row's
 *     2-norm) and global statistics, which the host reads back (the one
 *     synchronisation) to choose the number of moduli or to fall back.
 *  2. split: a second pass turns each row into integers round(a 2^(beta -
 *     E)) and writes their residues modulo every modulus as int8, K-major
 *     (rows x kp bytes per modulus, kp = K rounded up to 128 with zeros).
 *  3. products: "oz2-bytes" (the default) runs the int8 ping-pong kernel
 *     once per modulus, its epilogue storing each product mod p as one
 *     byte, and a pass reconstructs (reading n bytes an output, exact
 *     integer arithmetic: ozaki.h); "oz2-unfused" stores int32 products
 *     (GEMMul8's structure) for the same reconstruction.
 * fp32 inputs take the same steps with 26 bits a side instead of 55 (7
 * moduli instead of 15) and 3 limbs of 13 bits per integer.
 */
#include <cublasLt.h>
#include <cuda.h>
#include <cuda_runtime_api.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "catalog.h"
#include "ctx_internal.h"
#include "gemm_s8.cuh"
#include "kern_s8.h"
#include "oz_passes.cuh"
#include "oz_recon_mma.cuh"
#include "ozaki.h"

namespace gemmk
{

struct OzState {
    cublasLtHandle_t lt;
    void *lt_ws;
    size_t lt_ws_bytes;
    void *host;     /* pinned: two DevStats read back after the stats pass */
    void *host_dev; /* host as the device writes it (mapped) */
};

void oz_free(OzState *st)
{
    if (!st)
        return;
    if (st->lt_ws)
        cudaFree(st->lt_ws);
    if (st->lt)
        cublasLtDestroy(st->lt);
    if (st->host)
        cudaFreeHost(st->host);
    free(st);
}

bool f64_rates(gemmk_ctx *ctx, gemmk_f64_rates *out)
{
    pthread_mutex_lock(&ctx->f64_mu);
    const bool set = ctx->f64_rates_set != 0;
    if (set)
        *out = ctx->f64_rates;
    pthread_mutex_unlock(&ctx->f64_mu);
    return set;
}

namespace
{

constexpr size_t kLtWorkspace = 32u << 20;

/* The residue-byte products in one launch up to this many rounds of
 * tiles over the SMs per modulus (H200, oz2-bytes against a launch per
 * modulus in the same call: 4096^3, 7.8 rounds, 0.92-0.93 -> 0.95-0.96x
 * DGEMM; 8192^3, 31 rounds, equal; 16384^3, 124 rounds, 1.49-1.52 ->
 * 1.46-1.47x; docs/ozaki-notes.md "Twenty-fifth session"). */
constexpr int kOneLaunchRounds = 16;

gemm_error cuerr(cudaError_t e)
{
    if (e == cudaSuccess)
        return GEMM_OK;
    cudaGetLastError();
    return e == cudaErrorMemoryAllocation ? GEMM_ERR_DEVICE_MEMORY
                                          : GEMM_ERR_DEVICE;
}

size_t al256(size_t x)
{
    return (x + 255) & ~(size_t)255;
}

/* The two operands' statistics into host memory (mapped), visible to
 * the host once the stream is synchronized. */
__global__ void stats_out(const DevStats *__restrict__ gs, DevStats *host)
{
    if (threadIdx.x < 2)
        host[threadIdx.x] = gs[threadIdx.x];
    __threadfence_system();
}

gemm_error state(gemmk_ctx *ctx, OzState **out)
{
    OzState **sp = ctx_oz(ctx);
    if (!*sp) {
        OzState *st = static_cast<OzState *>(calloc(1, sizeof(OzState)));
        if (!st)
            return GEMM_ERR_NOMEM;
        if (cudaHostAlloc(&st->host, 2 * sizeof(DevStats),
                          cudaHostAllocMapped) != cudaSuccess ||
            cudaHostGetDevicePointer(&st->host_dev, st->host, 0) !=
                cudaSuccess) {
            cudaGetLastError();
            oz_free(st);
            return GEMM_ERR_NOMEM;
        }
        *sp = st;
    }
    *out = *sp;
    return GEMM_OK;
}

gemm_error lt_status(cublasStatus_t s)
{
    switch (s) {
    case CUBLAS_STATUS_SUCCESS:
        return GEMM_OK;
    case CUBLAS_STATUS_ALLOC_FAILED:
        return GEMM_ERR_DEVICE_MEMORY;
    case CUBLAS_STATUS_NOT_SUPPORTED:
        return GEMM_ERR_UNSUPPORTED;
    default:
        return GEMM_ERR_DEVICE;
    }
}

/* cuBLAS DGEMM (cuBLASLt, its heuristic's first algorithm). Row-major D =
 * op(A) op(B) is column-major D^T = op(B)^T op(A)^T: B in Lt's A slot. */
gemm_error native(OzState *st, const gemmk_problem_f64 *p, cudaStream_t stream)
{
    if (!st->lt) {
        if (cublasLtCreate(&st->lt) != CUBLAS_STATUS_SUCCESS) {
            st->lt = nullptr;
            return GEMM_ERR_DEVICE;
        }
    }
    if (!st->lt_ws) {
        if (cudaMalloc(&st->lt_ws, kLtWorkspace) != cudaSuccess) {
            cudaGetLastError();
            st->lt_ws = nullptr;
            return GEMM_ERR_DEVICE_MEMORY;
        }
        st->lt_ws_bytes = kLtWorkspace;
    }
    cublasLtMatmulDesc_t op = nullptr;
    cublasLtMatrixLayout_t la = nullptr, lb = nullptr, lc = nullptr,
                           ld = nullptr;
    cublasLtMatmulPreference_t pref = nullptr;
    cublasLtMatmulHeuristicResult_t res;
    int found = 0;
    size_t ws = st->lt_ws_bytes;
    cublasOperation_t opa = p->trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
    cublasOperation_t opb = p->trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
    const bool usec = p->beta != 0.0;
    cublasStatus_t s =
        cublasLtMatmulDescCreate(&op, CUBLAS_COMPUTE_64F, CUDA_R_64F);
    if (s == CUBLAS_STATUS_SUCCESS)
        s = cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSA,
                                           &opa, sizeof(opa));
    if (s == CUBLAS_STATUS_SUCCESS)
        s = cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSB,
                                           &opb, sizeof(opb));
    if (s == CUBLAS_STATUS_SUCCESS)
        s = cublasLtMatrixLayoutCreate(&la, CUDA_R_64F,
                                       p->trans_b ? p->k : p->n,
                                       p->trans_b ? p->n : p->k, p->ldb);
    if (s == CUBLAS_STATUS_SUCCESS)
        s = cublasLtMatrixLayoutCreate(&lb, CUDA_R_64F,
                                       p->trans_a ? p->m : p->k,
                                       p->trans_a ? p->k : p->m, p->lda);
    if (s == CUBLAS_STATUS_SUCCESS)
        s = cublasLtMatrixLayoutCreate(&lc, CUDA_R_64F, p->n, p->m,
                                       usec ? p->ldc : p->ldd);
    if (s == CUBLAS_STATUS_SUCCESS)
        s = cublasLtMatrixLayoutCreate(&ld, CUDA_R_64F, p->n, p->m, p->ldd);
    if (s == CUBLAS_STATUS_SUCCESS)
        s = cublasLtMatmulPreferenceCreate(&pref);
    if (s == CUBLAS_STATUS_SUCCESS)
        s = cublasLtMatmulPreferenceSetAttribute(
            pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof(ws));
    if (s == CUBLAS_STATUS_SUCCESS)
        s = cublasLtMatmulAlgoGetHeuristic(st->lt, op, la, lb, lc, ld, pref, 1,
                                           &res, &found);
    if (s == CUBLAS_STATUS_SUCCESS && found < 1)
        s = CUBLAS_STATUS_NOT_SUPPORTED;
    if (s == CUBLAS_STATUS_SUCCESS)
        s = cublasLtMatmul(st->lt, op, &p->alpha, p->b, la, p->a, lb, &p->beta,
                           usec ? (const void *)p->c : p->d, lc, p->d, ld,
                           &res.algo, st->lt_ws, ws, stream);
    if (pref)
        cublasLtMatmulPreferenceDestroy(pref);
    if (op)
        cublasLtMatmulDescDestroy(op);
    if (la)
        cublasLtMatrixLayoutDestroy(la);
    if (lb)
        cublasLtMatrixLayoutDestroy(lb);
    if (lc)
        cublasLtMatrixLayoutDestroy(lc);
    if (ld)
        cublasLtMatrixLayoutDestroy(ld);
    return lt_status(s);
}

gemm_error validate(const gemmk_problem_f64 *p)
{
    if (!p)
        return GEMM_ERR_INVALID;
    const int64_t lim = (int64_t)1 << 30;
    if (p->m < 1 || p->n < 1 || p->k < 1 || p->m > lim || p->n > lim ||
        p->k > lim)
        return GEMM_ERR_INVALID;
    if ((p->trans_a != 0 && p->trans_a != 1) ||
        (p->trans_b != 0 && p->trans_b != 1))
        return GEMM_ERR_INVALID;
    if (!p->a || !p->b || !p->d || (p->beta != 0.0 && !p->c))
        return GEMM_ERR_INVALID;
    if ((reinterpret_cast<uintptr_t>(p->a) | reinterpret_cast<uintptr_t>(p->b) |
         reinterpret_cast<uintptr_t>(p->d) |
         (p->beta != 0.0 ? reinterpret_cast<uintptr_t>(p->c) : 0)) &
        7)
        return GEMM_ERR_INVALID;
    int64_t min_lda = p->trans_a ? p->m : p->k;
    int64_t min_ldb = p->trans_b ? p->k : p->n;
    if (p->lda < min_lda || p->ldb < min_ldb || p->ldd < p->n ||
        (p->beta != 0.0 && p->ldc < p->n))
        return GEMM_ERR_INVALID;
    if (p->moduli != 0 &&
        (p->moduli < GEMMK_OZ_MIN || p->moduli > GEMMK_OZ_MAX))
        return GEMM_ERR_INVALID;
    if (p->method != GEMMK_F64_AUTO && p->method != GEMMK_F64_NATIVE &&
        p->method != GEMMK_F64_EMULATE)
        return GEMM_ERR_INVALID;
    return GEMM_OK;
}

/* One emulated problem: fp64 (gemmk_gemm_f64) or fp32 (run_fp32) A, B, C
 * and D, all of the one type. */
struct OzProblem {
    int64_t m, n, k;
    int trans_a, trans_b;
    const void *a, *b, *c; /* c: NULL when beta == 0 */
    void *d;
    int64_t lda, ldb, ldc, ldd;
    double alpha, beta;
    int moduli; /* 0: by the inputs */
    bool f32;
};

/* The emulation's time by r (see gemmk_f64_rates): fp64 or fp32 inputs,
 * whose bytes and preparation rate differ. */
double emulation_s(const gemmk_f64_rates *r, int64_t m, int64_t n, int64_t k,
                   int moduli, int with_c, bool f32)
{
    const double fm = (double)m, fn = (double)n, fk = (double)k;
    const double eb = f32 ? 4.0 : 8.0;
    auto up = [](int64_t x) { return (double)((x + 127) / 128 * 128); };
    const double bytes = (2 * eb + moduli) * (fm + fn) * fk +
                         (2.0 * moduli + eb + (with_c ? eb : 0)) * fm * fn;
    return (f32 ? r->emul32_s : r->emul_s) +
           bytes / (f32 ? r->emul32_bandwidth : r->emul_bandwidth) +
           moduli * 2 * up(m) * up(n) * up(k) / r->int8_ops;
}

/* The emulation's time by r when it is at least 5% faster than what runs
 * otherwise (DGEMM for fp64, 3xTF32 for fp32, with vs_sgemm SGEMM's true
 * fp32), else 0. */
double emulation_pays_s(const gemmk_f64_rates *r, int64_t m, int64_t n,
                        int64_t k, int moduli, int with_c, bool f32,
                        bool vs_sgemm = false)
{
    if (!r || r->int8_ops <= 0 || moduli < 1)
        return 0;
    const double flops = !f32       ? r->native_flops
                         : vs_sgemm ? r->sgemm_flops
                                    : r->x3_flops;
    const double fixed = !f32 ? r->native_s : vs_sgemm ? r->sgemm_s : r->x3_s;
    const double bw = f32 ? r->emul32_bandwidth : r->emul_bandwidth;
    if (flops <= 0 || bw <= 0)
        return 0;
    const double t_other =
        fixed + 2.0 * (double)m * (double)n * (double)k / flops;
    const double t_emul = emulation_s(r, m, n, k, moduli, with_c, f32);
    return t_emul < 0.95 * t_other ? t_emul : 0;
}

enum Variant { V_BYTES, V_UNFUSED, V_PREP };

struct Operand {
    const void *x; /* double, or float when f32 */
    long long ld, rows;
    bool mn; /* stored K x rows */
    bool f32;
};

/* Blocks of a pass kernel resident on the device at once. */
int pass_slots(const void *kern, int sms, cudaError_t *err)
{
    int n = 0;
    *err = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, kern, 256, 0);
    return (n > 0 ? n : 1) * (sms > 0 ? sms : 1);
}

/* The tiles along K a block of a pass takes (rb blocks of rows, at most
 * maxy blocks along K): the fewest rounds of resident blocks, a round
 * costing its tiles and one more (a block's start). */
int pass_tiles_per_block(long long rb, long long ntiles, long long slots,
                         long long maxy)
{
    long long best = ntiles > 1 ? ntiles : 1, bestc = LLONG_MAX;
    for (long long gy = 1; gy <= ntiles && gy <= maxy; gy++) {
        const long long tpb = (ntiles + gy - 1) / gy;
        if ((ntiles + tpb - 1) / tpb != gy)
            continue; /* the same tiles a block as a smaller gy */
        const long long c = (rb * gy + slots - 1) / slots * (tpb + 1);
        if (c < bestc) {
            bestc = c;
            best = tpb;
        }
    }
    return (int)best;
}

template <typename T> const void *stats_kernel(bool mn)
{
    return mn ? (const void *)oz_stats_kernel<true, T>
              : (const void *)oz_stats_kernel<false, T>;
}

template <typename T>
void launch_stats(const Operand &o, long long k, dim3 grid, int tpb,
                  RowPart *part, cudaStream_t stream)
{
    const T *x = static_cast<const T *>(o.x);
    if (o.mn)
        oz_stats_kernel<true, T>
            <<<grid, 256, 0, stream>>>(x, o.ld, o.rows, k, tpb, part);
    else
        oz_stats_kernel<false, T>
            <<<grid, 256, 0, stream>>>(x, o.ld, o.rows, k, tpb, part);
}

/* The stats pass of one operand: parts, then E and the DevStats. */
gemm_error stats(const Operand &o, long long k, RowPart *part, int nparts,
                 int *E, DevStats *g, cudaStream_t stream)
{
    const long long rb = (o.rows + TR - 1) / TR;
    const long long ntiles = (k + TK - 1) / TK;
    const int tpb = (int)((ntiles + nparts - 1) / nparts);
    const int gy = (int)((ntiles + tpb - 1) / tpb);
    dim3 grid((unsigned)rb, (unsigned)gy);
    if (o.f32)
        launch_stats<float>(o, k, grid, tpb, part, stream);
    else
        launch_stats<double>(o, k, grid, tpb, part, stream);
    cudaError_t e = cudaGetLastError();
    if (e != cudaSuccess)
        return cuerr(e);
    oz_rowfinal_kernel<<<(unsigned)((o.rows + 255) / 256), 256, 0, stream>>>(
        part, gy, o.rows, E, g);
    return cuerr(cudaGetLastError());
}

/* The number of K partials per row of o's statistics (at most 1024),
 * after pass_tiles_per_block. */
int stats_parts(const Operand &o, long long k, int sms, cudaError_t *err)
{
    const long long rb = (o.rows + TR - 1) / TR;
    const long long ntiles = (k + TK - 1) / TK;
    const int slots = pass_slots(o.f32 ? stats_kernel<float>(o.mn)
                                       : stats_kernel<double>(o.mn),
                                 sms, err);
    const long long tpb = pass_tiles_per_block(rb, ntiles, slots, 1024);
    const long long gy = (ntiles + tpb - 1) / tpb;
    return (int)(gy < 1 ? 1 : gy);
}

template <int NL, typename T>
void launch_split(const Operand &o, long long k, long long kp, const int *E,
                  int beta, const ModConsts &mc, uint8_t *out,
                  cudaStream_t stream)
{
    dim3 grid((unsigned)((o.rows + TR - 1) / TR), (unsigned)(kp / TK));
    const long long plane = o.rows * kp;
    const T *x = static_cast<const T *>(o.x);
    if (o.mn)
        oz_split_kernel<true, NL, T><<<grid, 256, 0, stream>>>(
            x, o.ld, o.rows, k, kp, E, beta, mc, out, plane);
    else
        oz_split_kernel<false, NL, T><<<grid, 256, 0, stream>>>(
            x, o.ld, o.rows, k, kp, E, beta, mc, out, plane);
}

/* The residues of one operand; the scaled integers reach 2^(beta+1) (row
 * norms <= 2^beta): signed 64-bit ones to GEMMK_OZ_X64_MAX, 5 or 7 limbs
 * of 13 bits beyond. */
gemm_error split(const Operand &o, long long k, long long kp, const int *E,
                 int beta, const ModConsts &mc, uint8_t *out,
                 cudaStream_t stream)
{
    if (o.f32 && beta <= GEMMK_OZ_X64_MAX)
        launch_split<0, float>(o, k, kp, E, beta, mc, out, stream);
    else if (beta <= GEMMK_OZ_X64_MAX)
        launch_split<0, double>(o, k, kp, E, beta, mc, out, stream);
    else if (o.f32)
        launch_split<5, float>(o, k, kp, E, beta, mc, out, stream);
    else if (beta <= 63)
        launch_split<5, double>(o, k, kp, E, beta, mc, out, stream);
    else
        launch_split<7, double>(o, k, kp, E, beta, mc, out, stream);
    return cuerr(cudaGetLastError());
}

/* D = beta C when alpha == 0 (A and B are not read, as BLAS). */
template <typename T>
gemm_error scale_only(const OzProblem &q, cudaStream_t stream)
{
    long long total = q.m * q.n;
    int blocks = (int)((total + 255) / 256 < 4096 ? (total + 255) / 256 : 4096);
    oz_scale_kernel<T>
        <<<blocks, 256, 0, stream>>>(q.beta, static_cast<const T *>(q.c), q.ldc,
                                     static_cast<T *>(q.d), q.ldd, q.m, q.n);
    return cuerr(cudaGetLastError());
}

/* The reconstruction pass of the variant that ran (planes in pl), on NW
 * limbs. */
template <int NW, typename T>
gemm_error recon(const OzProblem &q, Variant var, bool pp, const S8Params &sp,
                 const uint8_t *pl, long long ldr, long long rplane,
                 long long ldw, const ReconConsts &rc, const int *ea,
                 const int *eb, cudaStream_t stream)
{
    const T *c = static_cast<const T *>(q.c);
    T *d = static_cast<T *>(q.d);
    if constexpr (NW <= 4) {
        if (var == V_BYTES && pp && rc.n <= kMmaModuli) {
            /* fragment-ordered planes, the sums on the tensor pipe */
            oz_recon_mma_kernel<NW, T>
                <<<dim3((unsigned)sp.units, 16), 256, 0, stream>>>(
                    pl, rplane, sp.num_n, rc, ea, eb, q.alpha, q.beta, c, q.ldc,
                    d, q.ldd, q.m, q.n);
            return cuerr(cudaGetLastError());
        }
    }
    if (var == V_BYTES && pp) /* fragment-ordered planes */
        oz_recon_frag_kernel<NW, T>
            <<<dim3((unsigned)sp.units, 8), 256, 0, stream>>>(
                pl, rplane, sp.num_n, rc, ea, eb, q.alpha, q.beta, c, q.ldc, d,
                q.ldd, q.m, q.n);
    else if (var == V_BYTES)
        oz_recon_bytes_kernel<NW, T>
            <<<dim3((unsigned)((q.n + kReconCols * 256 - 1) /
                               (kReconCols * 256)),
                    (unsigned)q.m),
               256, 0, stream>>>(pl, ldr, rplane, rc, ea, eb, q.alpha, q.beta,
                                 c, q.ldc, d, q.ldd, q.m, q.n);
    else
        oz_recon_i32_kernel<NW, T>
            <<<dim3((unsigned)((q.n + 4 * 256 - 1) / (4 * 256)), (unsigned)q.m),
               256, 0, stream>>>(reinterpret_cast<const int32_t *>(pl), ldw,
                                 (long long)q.m * ldw, rc, ea, eb, q.alpha,
                                 q.beta, c, q.ldc, d, q.ldd, q.m, q.n);
    return cuerr(cudaGetLastError());
}

/* recon on the set's nw columns: 2 where P < 2^64 (fp32's 7 moduli), 4
 * where P < 2^128 (fp64's 15), else GEMMK_OZ_NW (gemmk_oz_nw). */
template <typename T>
gemm_error recon_nw(int nw, const OzProblem &q, Variant var, bool pp,
                    const S8Params &sp, const uint8_t *pl, long long ldr,
                    long long rplane, long long ldw, const ReconConsts &rc,
                    const int *ea, const int *eb, cudaStream_t stream)
{
    switch (nw) {
    case 2:
        return recon<2, T>(q, var, pp, sp, pl, ldr, rplane, ldw, rc, ea, eb,
                           stream);
    case 4:
        return recon<4, T>(q, var, pp, sp, pl, ldr, rplane, ldw, rc, ea, eb,
                           stream);
    default:
        return recon<GEMMK_OZ_NW, T>(q, var, pp, sp, pl, ldr, rplane, ldw, rc,
                                     ea, eb, stream);
    }
}

/*
 * Runs q as the Ozaki-II emulation. *declined = NULL when it ran (or
 * failed: the error is returned), else the static reason it did not and
 * the caller's fallback should run (nothing was written to D). rates
 * (may be NULL): decline where they say the fallback is faster for the
 * moduli these inputs need.
 */
gemm_error emulate(gemmk_ctx *ctx, OzState *st, const OzProblem &q, Variant var,
                   const gemmk_f64_rates *rates, cudaStream_t stream,
                   gemmk_f64_result *res, const char **declined)
{
    *declined = nullptr;
    const int sms = ctx_num_sms(ctx);
    const Operand oa = {q.a, q.lda, q.m, q.trans_a != 0, q.f32};
    const Operand ob = {q.b, q.ldb, q.n, q.trans_b == 0, q.f32};
    const long long k = q.k;
    cudaError_t ce;
    const int pa = stats_parts(oa, k, sms, &ce);
    if (ce != cudaSuccess)
        return cuerr(ce);
    const int pb = stats_parts(ob, k, sms, &ce);
    if (ce != cudaSuccess)
        return cuerr(ce);
    /* statistics workspace: parts, E, two DevStats */
    const size_t s_parta = al256((size_t)pa * q.m * sizeof(RowPart));
    const size_t s_partb = al256((size_t)pb * q.n * sizeof(RowPart));
    const size_t s_ea = al256((size_t)q.m * sizeof(int));
    const size_t s_eb = al256((size_t)q.n * sizeof(int));
    void *sw;
    gemm_error e = ctx_workspace(
        ctx, SLOT_OZS, s_parta + s_partb + s_ea + s_eb + 2 * sizeof(DevStats),
        &sw, stream);
    if (e != GEMM_OK) {
        *declined = "workspace";
        return GEMM_OK;
    }
    char *sb = static_cast<char *>(sw);
    RowPart *parta = reinterpret_cast<RowPart *>(sb);
    RowPart *partb = reinterpret_cast<RowPart *>(sb + s_parta);
    int *ea = reinterpret_cast<int *>(sb + s_parta + s_partb);
    int *eb = reinterpret_cast<int *>(sb + s_parta + s_partb + s_ea);
    DevStats *gs =
        reinterpret_cast<DevStats *>(sb + s_parta + s_partb + s_ea + s_eb);
    ce = cudaMemsetAsync(gs, 0, 2 * sizeof(DevStats), stream);
    if (ce != cudaSuccess)
        return cuerr(ce);
    e = stats(oa, k, parta, pa, ea, gs, stream);
    if (e == GEMM_OK)
        e = stats(ob, k, partb, pb, eb, gs + 1, stream);
    if (e != GEMM_OK)
        return e;
    /* read back by a kernel's stores to mapped host memory, not a copy:
     * a copy to the host queues behind whatever the copy engine is doing
     * (a pipeline's 67 MB panel going out held each complex64 update of
     * a trsm 1.5-2 ms) */
    stats_out<<<1, 32, 0, stream>>>(gs, static_cast<DevStats *>(st->host_dev));
    ce = cudaGetLastError();
    if (ce == cudaSuccess)
        ce = cudaStreamSynchronize(stream);
    if (ce != cudaSuccess)
        return cuerr(ce);
    const DevStats *hs = static_cast<const DevStats *>(st->host);
    gemmk_oz_stats sa = {hs[0].flags, hs[0].nonzero, hs[0].spread256 / 256.0};
    gemmk_oz_stats sbs = {hs[1].flags, hs[1].nonzero, hs[1].spread256 / 256.0};
    res->spread_a = sa.spread;
    res->spread_b = sbs.spread;
    int nmod = 0, beta_a = 0, beta_b = 0;
    const char *why = gemmk_oz_choose_bits(
        &sa, &sbs, k, q.moduli, q.f32 ? GEMMK_OZ_BETA0_F32 : GEMMK_OZ_BETA0,
        &nmod, &beta_a, &beta_b);
    if (why) {
        *declined = why;
        return GEMM_OK;
    }
    if (rates && nmod > (q.f32 ? rates->moduli_f32 : rates->moduli) &&
        !emulation_pays_s(rates, q.m, q.n, q.k, nmod, q.beta != 0.0, q.f32)) {
        *declined = q.f32 ? "faster as 3xTF32 with the moduli these inputs "
                            "need"
                          : "faster natively with the moduli these inputs "
                            "need";
        return GEMM_OK;
    }
    res->beta_a = beta_a;
    res->beta_b = beta_b;

    gemmk_oz_set set;
    if (gemmk_oz_set_init(&set, nmod) != 0)
        return GEMM_ERR_INTERNAL;
    ModConsts mc;
    memset(&mc, 0, sizeof(mc));
    mc.n = nmod;
    memcpy(mc.mod, set.mod, sizeof(set.mod));
    const long long kp = (k + GEMMK_OZ_KB - 1) / GEMMK_OZ_KB * GEMMK_OZ_KB;
    /* the residue-byte variant runs every modulus in one launch of the
     * ping-pong kernel (modulus-major units) where a product is at most
     * kOneLaunchRounds rounds of tiles over the SMs, else (and the
     * unfused variant, and the cooperative kernel, GEMMK_OZ_PP=0) one
     * launch per modulus; GEMMK_OZ_BYTES_TILE=1 runs
     * all moduli of a tile in one CTA instead (cooperative 128 x 256).
     * Measurement knobs: docs/ozaki-notes.md. */
    const bool tilewise =
        var == V_BYTES && ctx_knob(ctx, KNOB_OZ_BYTES_TILE) != 0;
    /* the ping-pong kernel (128 x 128 a consumer) at every size: with its
     * warpgroup index warp-uniform it runs 1.2-1.4x the cooperative
     * 128 x 256 one (H200, the emulation: 4096^3 0.89 against 0.80x
     * DGEMM, 8192^3 1.20-1.24 against 1.15-1.19x, 16384^3 1.51 against
     * 1.44x; docs/ozaki-notes.md) */
    const bool pp = !tilewise && ctx_knob(ctx, KNOB_OZ_PP) != 0;
    const int bn = pp ? 128 : 256;
    S8Params sp;
    memset(&sp, 0, sizeof(sp));
    s8_tiles(sp, (int)q.m, (int)q.n, bn, ctx_knob(ctx, KNOB_S8_RASTER));
    /* residues of both operands, then the variant's planes */
    const size_t s_ra = al256((size_t)nmod * q.m * kp);
    const size_t s_rb = al256((size_t)nmod * q.n * kp);
    const long long ldr = (long long)sp.num_n * bn;
    const long long rplane = (long long)sp.num_m * BM * ldr;
    const long long ldw = (q.n + 3) / 4 * 4;
    size_t s_pl = 0;
    if (var == V_BYTES)
        s_pl = al256((size_t)nmod * rplane);
    else if (var == V_UNFUSED)
        s_pl = al256((size_t)nmod * q.m * ldw * sizeof(int32_t));
    void *w;
    e = ctx_workspace(ctx, SLOT_OZ, s_ra + s_rb + s_pl, &w, stream);
    if (e != GEMM_OK) {
        *declined = "workspace";
        return GEMM_OK;
    }
    uint8_t *ra = static_cast<uint8_t *>(w);
    uint8_t *rb = ra + s_ra;
    uint8_t *pl = rb + s_rb;
    e = split(oa, k, kp, ea, beta_a, mc, ra, stream);
    if (e == GEMM_OK)
        e = split(ob, k, kp, eb, beta_b, mc, rb, stream);
    if (e != GEMM_OK)
        return e;
    res->emulated = 1;
    res->moduli = nmod;
    res->reason = nullptr;
    res->kernel = q.f32            ? "oz2-f32"
                  : var == V_BYTES ? "oz2-bytes"
                  : var == V_PREP  ? "oz2-prep"
                                   : "oz2-unfused";
    if (var == V_PREP)
        return GEMM_OK;

    /* tensor maps: the moduli stacked, rows x kp bytes each */
    /* kp is a multiple of 128 */
    const int ku = ctx_knob(ctx, KNOB_S8_MAP16) ? 2 : 1;
    gemmk_tmap_key ka = {}, kb = {};
    ka.addr = (uint64_t)(uintptr_t)ra;
    ka.dtype = ku == 2 ? GEMM_BF16 : GEMMK_TMAP_U8;
    ka.swizzle = GEMMK_SWIZZLE_128B;
    ka.dim0 = (uint64_t)(kp / ku);
    ka.dim1 = (uint64_t)nmod * q.m;
    ka.stride1 = (uint64_t)kp;
    ka.box0 = S8_BK / ku;
    ka.box1 = BM;
    kb = ka;
    kb.addr = (uint64_t)(uintptr_t)rb;
    kb.dim1 = (uint64_t)nmod * q.n;
    kb.box1 = (uint32_t)bn;
    CUtensorMap ta, tb;
    e = ctx_map(ctx, &ka, &ta);
    if (e == GEMM_OK)
        e = ctx_map(ctx, &kb, &tb);
    if (e != GEMM_OK)
        return e;
    sp.nkb = (int)(kp / S8_BK);
    sp.kunit = ku;
    sp.rows_a = (int)q.m;
    sp.rows_b = (int)q.n;
    for (int l = 0; l < nmod; l++) {
        sp.p[l] = set.mod[l].p;
        sp.magic[l] = set.mod[l].magic;
        /* a multiple of p with |acc| <= 2^29 + 2^9 -> [0, 2^31) */
        sp.off[l] = (uint32_t)(((1u << 29) + 1024 + set.mod[l].p - 1) /
                               set.mod[l].p * set.mod[l].p);
    }
    ReconConsts rc;
    memset(&rc, 0, sizeof(rc));
    rc.n = nmod;
    rc.ebias = -(beta_a + beta_b);
    rc.pinv = set.pinv;
    memcpy(rc.pw, set.pw, sizeof(rc.pw));
    for (int l = 0; l < nmod; l++)
        memcpy(rc.w[l], set.mod[l].w, sizeof(rc.w[l]));
    const int grid = sp.units < sms ? sp.units : sms;
    if (var == V_BYTES) {
        sp.r = pl;
        sp.ldr = ldr;
        sp.rplane = rplane;
        if (tilewise) {
            sp.nmod = nmod;
            ce = launch_s8(256, 2, ta, tb, sp, grid, stream);
        } else if (pp && sp.units <= kOneLaunchRounds * sms) {
            /* one launch, modulus-major (s8_unit) */
            sp.nmod = nmod;
            sp.mod_major = 1;
            const int units = sp.units * nmod;
            ce = launch_s8_pp(2, ta, tb, sp, units < sms ? units : sms, stream);
        } else {
            sp.nmod = 1;
            ce = cudaSuccess;
            for (int l = 0; l < nmod && ce == cudaSuccess; l++) {
                sp.mod0 = l;
                ce = pp ? launch_s8_pp(2, ta, tb, sp, grid, stream)
                        : launch_s8(256, 2, ta, tb, sp, grid, stream);
            }
        }
    } else { /* unfused: one int8 GEMM per modulus, int32 products */
        int32_t *wp = reinterpret_cast<int32_t *>(pl);
        sp.nmod = 1;
        sp.reduce = 1;
        sp.ldd = ldw;
        ce = cudaSuccess;
        for (int l = 0; l < nmod && ce == cudaSuccess; l++) {
            sp.mod0 = l;
            sp.d = wp + (long long)l * q.m * ldw;
            ce = pp ? launch_s8_pp(0, ta, tb, sp, grid, stream)
                    : launch_s8(256, 0, ta, tb, sp, grid, stream);
        }
    }
    if (ce != cudaSuccess)
        return cuerr(ce);
    const bool frag = pp && !tilewise;
    return q.f32 ? recon_nw<float>(gemmk_oz_nw(set.log2p), q, var, frag, sp, pl,
                                   ldr, rplane, ldw, rc, ea, eb, stream)
                 : recon_nw<double>(gemmk_oz_nw(set.log2p), q, var, frag, sp,
                                    pl, ldr, rplane, ldw, rc, ea, eb, stream);
}

} // namespace

bool f32_emulation_beats_sgemm(const gemmk_f64_rates *r, int64_t m, int64_t n,
                               int64_t k)
{
    return emulation_pays_s(r, m, n, k, r->moduli_f32, 0, true, true) > 0;
}

gemm_error oz_f32(gemmk_ctx *ctx, const gemmk_problem *p, cudaStream_t stream,
                  bool by_model, bool prep_only, gemmk_result *res,
                  const char **declined)
{
    *declined = nullptr;
    OzState *st;
    gemm_error e = state(ctx, &st);
    if (e != GEMM_OK)
        return e;
    gemmk_f64_rates rates;
    const bool usec = p->beta != 0.0f;
    if (by_model) {
        if (!f64_rates(ctx, &rates)) {
            *declined = "not calibrated";
            return GEMM_OK;
        }
        if (!emulation_pays_s(&rates, p->m, p->n, p->k, rates.moduli_f32, usec,
                              true)) {
            *declined = "faster as 3xTF32 at this size";
            return GEMM_OK;
        }
    }
    OzProblem q = {};
    q.m = p->m, q.n = p->n, q.k = p->k;
    q.trans_a = p->trans_a, q.trans_b = p->trans_b;
    q.a = p->a, q.b = p->b, q.c = usec ? p->c : nullptr, q.d = p->d;
    q.lda = p->lda, q.ldb = p->ldb, q.ldc = usec ? p->ldc : p->ldd;
    q.ldd = p->ldd;
    q.alpha = p->alpha;
    q.beta = usec ? p->beta : 0.0;
    q.moduli = p->moduli;
    q.f32 = true;
    if (q.alpha == 0.0) { /* BLAS: A and B are not read */
        res->kernel = "scale";
        return scale_only<float>(q, stream);
    }
    if (!isfinite(q.alpha) || !isfinite(q.beta)) {
        *declined = "alpha or beta not finite";
        return GEMM_OK;
    }
    gemmk_f64_result r = {};
    e = emulate(ctx, st, q, prep_only ? V_PREP : V_BYTES,
                by_model ? &rates : nullptr, stream, &r, declined);
    if (e == GEMM_OK && !*declined) {
        res->kernel = r.kernel;
        res->moduli = r.moduli;
    }
    return e;
}

} // namespace gemmk

using namespace gemmk;

extern "C" void gemmk_ctx_set_f64_rates(gemmk_ctx *ctx,
                                        const gemmk_f64_rates *r)
{
    if (!ctx || !r)
        return;
    pthread_mutex_lock(&ctx->f64_mu);
    ctx->f64_rates = *r;
    ctx->f64_rates_set = 1;
    pthread_mutex_unlock(&ctx->f64_mu);
}

extern "C" int gemmk_f64_emulation_pays(const gemmk_f64_rates *r, int64_t m,
                                        int64_t n, int64_t k, int moduli,
                                        int with_c)
{
    return emulation_pays_s(r, m, n, k, moduli, with_c, false) > 0;
}

extern "C" int gemmk_f32_emulation_pays(const gemmk_f64_rates *r, int64_t m,
                                        int64_t n, int64_t k, int moduli,
                                        int with_c)
{
    return emulation_pays_s(r, m, n, k, moduli, with_c, true) > 0;
}

extern "C" int64_t gemmk_f64_crossover(const gemmk_f64_rates *r)
{
    for (int64_t n = 256; r && n <= 32768; n += 256)
        if (gemmk_f64_emulation_pays(r, n, n, n, r->moduli, 0))
            return n;
    return 0;
}

extern "C" int64_t gemmk_f32_crossover(const gemmk_f64_rates *r)
{
    for (int64_t n = 256; r && n <= 32768; n += 256)
        if (gemmk_f32_emulation_pays(r, n, n, n, r->moduli_f32, 0))
            return n;
    return 0;
}

extern "C" double gemmk_auto_emulation_s(gemmk_ctx *ctx, const gemmk_problem *p)
{
    gemmk_f64_rates r;
    if (!ctx || !p || p->host_mapped || p->moduli != 0)
        return 0;
    const bool f32 = p->ab_type == GEMM_FP32 && p->cd_type == GEMM_FP32 &&
                     p->precision != GEMM_PRECISION_TF32;
    if ((p->ab_type != GEMM_FP64 && !f32) || !f64_rates(ctx, &r))
        return 0;
    return emulation_pays_s(&r, p->m, p->n, p->k, f32 ? r.moduli_f32 : r.moduli,
                            f32 ? p->beta != 0.0f : p->zbeta[0] != 0.0, f32);
}

extern "C" gemm_error gemmk_gemm_f64(gemmk_ctx *ctx, const gemmk_problem_f64 *p,
                                     cudaStream_t stream, const char *kernel,
                                     gemmk_f64_result *res)
{
    gemmk_f64_result dummy;
    if (!res)
        res = &dummy;
    memset(res, 0, sizeof(*res));
    if (!ctx)
        return GEMM_ERR_INVALID;
    gemm_error e = validate(p);
    if (e != GEMM_OK)
        return e;
    OzState *st;
    e = state(ctx, &st);
    if (e != GEMM_OK)
        return e;

    bool want_native = p->method == GEMMK_F64_NATIVE;
    bool named = false;
    Variant var = V_BYTES; /* what auto runs (docs/ozaki-notes.md) */
    if (!gemmk_is_auto(kernel)) {
        named = true;
        const Row *r = row_find(kernel);
        if (!r || r->d.ab_types != (1u << GEMM_FP64) || r->variant == 0)
            return GEMM_ERR_UNSUPPORTED;
        switch (r->variant) {
        case F64_NATIVE:
            want_native = true;
            break;
        case F64_UNFUSED:
            var = V_UNFUSED;
            break;
        case F64_PREP:
            var = V_PREP;
            break;
        default:
            var = V_BYTES;
        }
    }
    auto run_native = [&](const char *why) {
        res->emulated = 0;
        res->moduli = 0;
        res->kernel = "cublas-dgemm";
        res->reason = why;
        return native(st, p, stream);
    };
    OzProblem q = {};
    q.m = p->m, q.n = p->n, q.k = p->k;
    q.trans_a = p->trans_a, q.trans_b = p->trans_b;
    q.a = p->a, q.b = p->b, q.c = p->c, q.d = p->d;
    q.lda = p->lda, q.ldb = p->ldb, q.ldc = p->ldc, q.ldd = p->ldd;
    q.alpha = p->alpha, q.beta = p->beta;
    q.moduli = p->moduli;
    q.f32 = false;
    if (p->alpha == 0.0) { /* BLAS: A and B are not read */
        res->kernel = "scale";
        res->reason = "alpha == 0";
        return scale_only<double>(q, stream);
    }
    if (want_native)
        return run_native(named ? "named" : "asked");
    if (!isfinite(p->alpha) || !isfinite(p->beta))
        return run_native("alpha or beta not finite");
    /* auto: the cost model decides, first with the moduli typical inputs
     * need, then with the count these inputs need */
    const bool by_model =
        p->method == GEMMK_F64_AUTO && !named && p->moduli == 0;
    gemmk_f64_rates rates;
    if (by_model) {
        if (!f64_rates(ctx, &rates))
            return run_native("not calibrated (gemmk_f64_calibrate)");
        if (!gemmk_f64_emulation_pays(&rates, p->m, p->n, p->k, rates.moduli,
                                      p->beta != 0.0))
            return run_native("faster natively at this size");
    }
    const char *declined = nullptr;
    e = emulate(ctx, st, q, var, by_model ? &rates : nullptr, stream, res,
                &declined);
    if (e == GEMM_OK && declined)
        return run_native(declined);
    return e;
}
