/*
 * oz_complex.cu: complex128 GEMM on the fp64 emulation and complex64 on
 * the fp32 one ("oz2-complex", and "auto" where the calibrated cost model
 * says it beats ZGEMM, or CGEMM, which runs at SGEMM's rate). The four
 * real products of D = op(A) op(B) are one real GEMM:
 *
 *   [Ar]                [Ar Br  Ar Bi]
 *   [Ai] x [Br  Bi]  =  [Ai Br  Ai Bi]      (2m x k times k x 2n)
 *
 * so op(A) is split into its real and imaginary parts stacked as 2m rows,
 * op(B) into 2n columns side by side (conjugation negating the imaginary
 * part), the real product runs through gemmk_gemm_f64 (the emulation, or
 * DGEMM where the inputs need it: inf/NaN, subnormals, wide spreads; for
 * complex64 "oz2-f32", or 3xTF32 where the inputs need it), and
 * D = alpha (P11 - P22 + i (P12 + P21)) + beta C. The operands' residues
 * are made once for all four products, and where the real products are
 * exact (integer parts) the result is too, up to the one rounding of each
 * sum.
 */
#include <cuComplex.h>
#include <string.h>

#include "catalog.h"
#include "ctx_internal.h"

namespace gemmk
{
namespace
{

/* out (2 rows x cols, ld ldo) = [Re op(X); s Im op(X)] for op(X) of
 * rows x cols, X stored with leading dimension ld (transposed: X is
 * cols x rows); s = -1 conjugates. by_cols: out is rows x 2 cols (ld
 * ldo) = [Re op(X), s Im op(X)] instead. */
template <typename C, typename R>
__global__ void split_kernel(const C *__restrict__ x, long long ld, int trans,
                             R s, long long rows, long long cols, int by_cols,
                             R *__restrict__ out, long long ldo)
{
    const long long total = rows * cols;
    for (long long e = blockIdx.x * (long long)blockDim.x + threadIdx.x;
         e < total; e += (long long)gridDim.x * blockDim.x) {
        const long long i = e / cols, j = e % cols;
        const C v = trans ? x[j * ld + i] : x[i * ld + j];
        if (by_cols) {
            out[i * ldo + j] = v.x;
            out[i * ldo + cols + j] = s * v.y;
        } else {
            out[i * ldo + j] = v.x;
            out[(rows + i) * ldo + j] = s * v.y;
        }
    }
}

/* D = alpha (P11 - P22 + i (P12 + P21)) + beta C, P of 2m x 2n (ld
 * ldp), in double, rounded once to D's type C. */
template <typename C, typename R>
__global__ void combine_kernel(const R *__restrict__ pm, long long ldp,
                               long long m, long long n, cuDoubleComplex alpha,
                               cuDoubleComplex beta, const C *c, long long ldc,
                               C *d, long long ldd)
{
    const long long total = m * n;
    for (long long e = blockIdx.x * (long long)blockDim.x + threadIdx.x;
         e < total; e += (long long)gridDim.x * blockDim.x) {
        const long long i = e / n, j = e % n;
        const double re =
            (double)pm[i * ldp + j] - (double)pm[(m + i) * ldp + n + j];
        const double im =
            (double)pm[i * ldp + n + j] + (double)pm[(m + i) * ldp + j];
        cuDoubleComplex v = cuCmul(alpha, make_cuDoubleComplex(re, im));
        if (c)
            v = cuCadd(v, cuCmul(beta, make_cuDoubleComplex(
                                           (double)c[i * ldc + j].x,
                                           (double)c[i * ldc + j].y)));
        C out;
        out.x = (R)v.x;
        out.y = (R)v.y;
        d[i * ldd + j] = out;
    }
}

int blocks_for(long long n)
{
    const long long b = (n + 255) / 256;
    return (int)(b < 8192 ? b : 8192);
}

} // namespace

bool z_emulation_pays(gemmk_ctx *ctx, const gemmk_problem *p)
{
    gemmk_f64_rates r;
    if ((p->ab_type != GEMM_COMPLEX128 && p->ab_type != GEMM_COMPLEX64) ||
        p->host_mapped || !f64_rates(ctx, &r))
        return false;
    /* the real product has ZGEMM's 8mnk flops; the split and combine
     * passes are a few bytes an element besides */
    if (p->ab_type == GEMM_COMPLEX64)
        return f32_emulation_beats_sgemm(&r, 2 * p->m, 2 * p->n, p->k);
    return gemmk_f64_emulation_pays(&r, 2 * p->m, 2 * p->n, p->k, r.moduli,
                                    0) != 0;
}

namespace
{

/* The leading dimensions of the split operands and of P: fp32 GEMMs want
 * multiples of 8. */
template <typename R> long long pad_ld(long long x)
{
    return sizeof(R) == 4 ? (x + 7) / 8 * 8 : x;
}

/* The real product P = [Ar; Ai] [Br, Bi] of 2m x k (ld lda) times k x 2n
 * (ld ldb) into P (ld ldp), R the real type: through the fp64 or the fp32
 * emulation (moduli: 0, or the count asked for). Sets *moduli to the
 * count that ran (0: the fallback). */
gemm_error real_product(gemmk_ctx *ctx, const double *a2, const double *b2,
                        double *pm, long long m, long long n, long long k,
                        long long lda, long long ldb, long long ldp,
                        int moduli_asked, cudaStream_t s, int *moduli)
{
    gemmk_problem_f64 q;
    memset(&q, 0, sizeof(q));
    q.m = 2 * m, q.n = 2 * n, q.k = k;
    q.a = a2, q.b = b2, q.d = pm;
    q.lda = lda, q.ldb = ldb, q.ldc = q.ldd = ldp;
    q.alpha = 1.0;
    q.moduli = moduli_asked;
    q.method = GEMMK_F64_EMULATE;
    gemmk_f64_result r;
    gemm_error e = gemmk_gemm_f64(ctx, &q, s, "oz2-bytes", &r);
    *moduli = r.moduli;
    return e;
}

gemm_error real_product(gemmk_ctx *ctx, const float *a2, const float *b2,
                        float *pm, long long m, long long n, long long k,
                        long long lda, long long ldb, long long ldp,
                        int moduli_asked, cudaStream_t s, int *moduli)
{
    gemmk_problem q;
    memset(&q, 0, sizeof(q));
    q.m = 2 * m, q.n = 2 * n, q.k = k;
    q.ab_type = q.cd_type = GEMM_FP32;
    q.precision = GEMM_PRECISION_FP32;
    q.a = a2, q.b = b2, q.d = pm;
    q.lda = lda, q.ldb = ldb, q.ldc = q.ldd = ldp;
    q.alpha = 1.0f;
    q.moduli = moduli_asked;
    gemmk_result r;
    gemm_error e = gemmk_gemm(ctx, &q, s, "oz2-f32", &r);
    *moduli = r.moduli;
    return e;
}

template <typename C, typename R>
gemm_error zemul(gemmk_ctx *ctx, const gemmk_problem *p, cudaStream_t s,
                 const Row &row, gemmk_result *res)
{
    const long long m = p->m, n = p->n, k = p->k;
    const size_t es = sizeof(R);
    const long long lda = pad_ld<R>(k), ldb = pad_ld<R>(2 * n), ldp = ldb;
    const size_t sa = ((size_t)2 * m * lda * es + 255) / 256 * 256;
    const size_t sb = ((size_t)k * ldb * es + 255) / 256 * 256;
    const size_t sp = (size_t)2 * m * ldp * es;
    void *w;
    gemm_error e = ctx_workspace(ctx, SLOT_ZOZ, sa + sb + sp, &w, s);
    if (e != GEMM_OK)
        return e;
    R *a2 = static_cast<R *>(w);
    R *b2 = reinterpret_cast<R *>(static_cast<char *>(w) + sa);
    R *pm = reinterpret_cast<R *>(static_cast<char *>(w) + sa + sb);
    split_kernel<C, R><<<blocks_for(m * k), 256, 0, s>>>(
        static_cast<const C *>(p->a), p->lda, p->trans_a,
        p->conj_a ? (R)-1 : (R)1, m, k, 0, a2, lda);
    GEMMK_CK(ctx, cudaGetLastError());
    split_kernel<C, R><<<blocks_for(k * n), 256, 0, s>>>(
        static_cast<const C *>(p->b), p->ldb, p->trans_b,
        p->conj_b ? (R)-1 : (R)1, k, n, 1, b2, ldb);
    GEMMK_CK(ctx, cudaGetLastError());
    int moduli = 0;
    e = real_product(ctx, a2, b2, pm, m, n, k, lda, ldb, ldp, p->moduli, s,
                     &moduli);
    if (e != GEMM_OK) {
        ctx_say(ctx, "the real product of %s failed", row.d.name);
        return e;
    }
    const bool usec = p->zbeta[0] != 0.0 || p->zbeta[1] != 0.0;
    combine_kernel<C, R><<<blocks_for(m * n), 256, 0, s>>>(
        pm, ldp, m, n, make_cuDoubleComplex(p->zalpha[0], p->zalpha[1]),
        make_cuDoubleComplex(p->zbeta[0], p->zbeta[1]),
        usec ? static_cast<const C *>(p->c) : nullptr, p->ldc,
        static_cast<C *>(p->d), p->ldd);
    GEMMK_CK(ctx, cudaGetLastError());
    /* named as the row that ran it; a real product that fell back to
     * DGEMM or 3xTF32 still gave D (moduli 0 says so) */
    res->kernel = row.d.name;
    res->moduli = moduli;
    return GEMM_OK;
}

} // namespace

gemm_error run_zemul(gemmk_ctx *ctx, const gemmk_problem *p, cudaStream_t s,
                     const Row &row, gemmk_result *res)
{
    if (p->ab_type == GEMM_COMPLEX64)
        return zemul<cuComplex, float>(ctx, p, s, row, res);
    return zemul<cuDoubleComplex, double>(ctx, p, s, row, res);
}

} // namespace gemmk
