/*
 * oz_complex.cu: complex128 GEMM on the fp64 emulation ("oz2-complex",
 * and "auto" where the calibrated cost model says it beats ZGEMM). The
 * four real products of D = op(A) op(B) are one real GEMM:
 *
 *   [Ar]                [Ar Br  Ar Bi]
 *   [Ai] x [Br  Bi]  =  [Ai Br  Ai Bi]      (2m x k times k x 2n)
 *
 * so op(A) is split into its real and imaginary parts stacked as 2m rows,
 * op(B) into 2n columns side by side (conjugation negating the imaginary
 * part), the real product runs through gemmk_gemm_f64 (the emulation, or
 * DGEMM where the inputs need it: inf/NaN, subnormals, wide spreads), and
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

/* out (2 rows x cols, ld cols) = [Re op(X); s Im op(X)] for op(X) of
 * rows x cols, X stored with leading dimension ld (transposed: X is
 * cols x rows); s = -1 conjugates. by_cols: out is rows x 2 cols (ld
 * 2 cols) = [Re op(X), s Im op(X)] instead. */
__global__ void split_kernel(const cuDoubleComplex *__restrict__ x,
                             long long ld, int trans, double s, long long rows,
                             long long cols, int by_cols,
                             double *__restrict__ out)
{
    const long long total = rows * cols;
    for (long long e = blockIdx.x * (long long)blockDim.x + threadIdx.x;
         e < total; e += (long long)gridDim.x * blockDim.x) {
        const long long i = e / cols, j = e % cols;
        const cuDoubleComplex v = trans ? x[j * ld + i] : x[i * ld + j];
        if (by_cols) {
            out[i * 2 * cols + j] = v.x;
            out[i * 2 * cols + cols + j] = s * v.y;
        } else {
            out[i * cols + j] = v.x;
            out[(rows + i) * cols + j] = s * v.y;
        }
    }
}

/* D = alpha (P11 - P22 + i (P12 + P21)) + beta C, P of 2m x 2n. */
__global__ void combine_kernel(const double *__restrict__ pm, long long m,
                               long long n, cuDoubleComplex alpha,
                               cuDoubleComplex beta, const cuDoubleComplex *c,
                               long long ldc, cuDoubleComplex *d, long long ldd)
{
    const long long total = m * n, ldp = 2 * n;
    for (long long e = blockIdx.x * (long long)blockDim.x + threadIdx.x;
         e < total; e += (long long)gridDim.x * blockDim.x) {
        const long long i = e / n, j = e % n;
        const double re = pm[i * ldp + j] - pm[(m + i) * ldp + n + j];
        const double im = pm[i * ldp + n + j] + pm[(m + i) * ldp + j];
        cuDoubleComplex v = cuCmul(alpha, make_cuDoubleComplex(re, im));
        if (c)
            v = cuCadd(v, cuCmul(beta, c[i * ldc + j]));
        d[i * ldd + j] = v;
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
    if (p->ab_type != GEMM_COMPLEX128 || p->host_mapped || !f64_rates(ctx, &r))
        return false;
    /* the real product has ZGEMM's 8mnk flops; the split and combine
     * passes are a few bytes an element besides */
    return gemmk_f64_emulation_pays(&r, 2 * p->m, 2 * p->n, p->k, r.moduli,
                                    0) != 0;
}

gemm_error run_zemul(gemmk_ctx *ctx, const gemmk_problem *p, cudaStream_t s,
                     const Row &row, gemmk_result *res)
{
    const long long m = p->m, n = p->n, k = p->k;
    const size_t sa = ((size_t)2 * m * k * 8 + 255) / 256 * 256;
    const size_t sb = ((size_t)2 * k * n * 8 + 255) / 256 * 256;
    const size_t sp = (size_t)4 * m * n * 8;
    void *w;
    gemm_error e = ctx_workspace(ctx, SLOT_ZOZ, sa + sb + sp, &w);
    if (e != GEMM_OK)
        return e;
    double *a2 = static_cast<double *>(w);
    double *b2 = reinterpret_cast<double *>(static_cast<char *>(w) + sa);
    double *pm = reinterpret_cast<double *>(static_cast<char *>(w) + sa + sb);
    split_kernel<<<blocks_for(m * k), 256, 0, s>>>(
        static_cast<const cuDoubleComplex *>(p->a), p->lda, p->trans_a,
        p->conj_a ? -1.0 : 1.0, m, k, 0, a2);
    GEMMK_CK(ctx, cudaGetLastError());
    split_kernel<<<blocks_for(k * n), 256, 0, s>>>(
        static_cast<const cuDoubleComplex *>(p->b), p->ldb, p->trans_b,
        p->conj_b ? -1.0 : 1.0, k, n, 1, b2);
    GEMMK_CK(ctx, cudaGetLastError());
    gemmk_problem_f64 q;
    memset(&q, 0, sizeof(q));
    q.m = 2 * m, q.n = 2 * n, q.k = k;
    q.a = a2, q.b = b2, q.d = pm;
    q.lda = k, q.ldb = 2 * n, q.ldc = q.ldd = 2 * n;
    q.alpha = 1.0;
    q.method = GEMMK_F64_EMULATE;
    gemmk_f64_result r;
    e = gemmk_gemm_f64(ctx, &q, s, "oz2-bytes", &r);
    if (e != GEMM_OK) {
        ctx_say(ctx, "the real product of %s failed", row.d.name);
        return e;
    }
    const bool usec = p->zbeta[0] != 0.0 || p->zbeta[1] != 0.0;
    combine_kernel<<<blocks_for(m * n), 256, 0, s>>>(
        pm, m, n, make_cuDoubleComplex(p->zalpha[0], p->zalpha[1]),
        make_cuDoubleComplex(p->zbeta[0], p->zbeta[1]),
        usec ? static_cast<const cuDoubleComplex *>(p->c) : nullptr, p->ldc,
        static_cast<cuDoubleComplex *>(p->d), p->ldd);
    GEMMK_CK(ctx, cudaGetLastError());
    /* named as the row that ran it; a real product that fell back to
     * DGEMM still gave D (moduli 0 says so) */
    res->kernel = row.d.name;
    res->moduli = r.moduli;
    return GEMM_OK;
}

} // namespace gemmk
