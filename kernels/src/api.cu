/*
 * api.cu: gemmk_gemm and gemmk_select, the entry of every request: the
 * one validation of a problem (dims, types, leading dimensions,
 * alignment, and the catalog row's check), then the row's path; and the
 * paths of the rows that only route: "auto" by type, the ladder's rungs,
 * and the reference (cuBLASLt, or cuBLAS for the wide types).
 */
#include <stdio.h>
#include <string.h>

#include "catalog.h"
#include "ctx_internal.h"
#include "ladder/ladder.h"
#include "plan.h"

namespace gemmk
{
namespace
{

bool wide(int t)
{
    return t >= 1 && t < 32 && (GEMMK_WIDE_TYPES & (1u << t)) != 0;
}

bool aligned(const void *p, uintptr_t to)
{
    return (reinterpret_cast<uintptr_t>(p) & (to - 1)) == 0;
}

size_t wide_size(int t)
{
    return t == GEMM_COMPLEX128 ? 16 : 8;
}

/* Whether v is an integer in int32's range (int8 alpha and beta). */
bool int32_scalar(double v)
{
    return v == v && v >= -2147483648.0 && v <= 2147483647.0 &&
           v == (double)(int64_t)v;
}

/* int8 A/B, int32 C/D: dims, scalars, pointers, leading dimensions and
 * alignment as gemmk_gemm_s8 needs them. */
gemm_error validate_s8_shape(const gemmk_problem *p, const char **why)
{
    const int64_t lim = (int64_t)1 << 30;
    if (p->cd_type != GEMM_INT32) {
        *why = "int8 inputs need int32 C and D";
        return GEMM_ERR_DTYPE;
    }
    if (p->precision != GEMM_PRECISION_DEFAULT || p->conj_a || p->conj_b)
        return GEMM_ERR_INVALID;
    if (p->m < 1 || p->n < 1 || p->k < 1 || p->m > lim || p->n > lim ||
        p->k > lim) {
        *why = "dimensions out of range";
        return GEMM_ERR_INVALID;
    }
    if ((p->trans_a != 0 && p->trans_a != 1) ||
        (p->trans_b != 0 && p->trans_b != 1))
        return GEMM_ERR_INVALID;
    if (!int32_scalar(p->zalpha[0]) || !int32_scalar(p->zbeta[0]) ||
        p->zalpha[1] != 0.0 || p->zbeta[1] != 0.0) {
        *why = "int8: alpha and beta (zalpha[0], zbeta[0]) must be integers "
               "in int32's range";
        return GEMM_ERR_INVALID;
    }
    if (p->host_mapped) {
        *why = "no int8 kernel reads host-mapped operands";
        return GEMM_ERR_UNSUPPORTED;
    }
    const bool usec = p->zbeta[0] != 0.0;
    if (!p->a || !p->b || !p->d || (usec && !p->c))
        return GEMM_ERR_INVALID;
    if (!aligned(p->a, 16) || !aligned(p->b, 16) || !aligned(p->d, 16) ||
        (usec && !aligned(p->c, 16))) {
        *why = "operand not 16-byte aligned";
        return GEMM_ERR_INVALID;
    }
    int64_t min_lda = p->trans_a ? p->m : p->k;
    int64_t min_ldb = p->trans_b ? p->k : p->n;
    if (p->lda < min_lda || p->lda % 16 || p->ldb < min_ldb || p->ldb % 16 ||
        p->ldd < p->n || p->ldd % 4 ||
        (usec && (p->ldc < p->n || p->ldc % 4))) {
        *why = "int8: lda and ldb must be multiples of 16, ldc and ldd of 4, "
               "none too small";
        return GEMM_ERR_INVALID;
    }
    return GEMM_OK;
}

/* Dims, pointers, leading dimensions and alignment of p (its types are
 * row_check's). */
gemm_error validate_shape(const gemmk_problem *p, const char **why)
{
    const int64_t lim = (int64_t)1 << 30;
    *why = "invalid problem";
    if (p->ab_type == GEMM_INT8)
        return validate_s8_shape(p, why);
    if (!wide(p->ab_type)) { /* the 16/32-bit types, in this order */
        if (p->ab_type != GEMM_BF16 && p->ab_type != GEMM_FP16 &&
            p->ab_type != GEMM_FP32)
            return GEMM_ERR_DTYPE;
        if (p->precision != GEMM_PRECISION_DEFAULT &&
            (p->ab_type != GEMM_FP32 || (p->precision != GEMM_PRECISION_TF32 &&
                                         p->precision != GEMM_PRECISION_FP32)))
            return GEMM_ERR_INVALID;
        if (p->cd_type != GEMM_BF16 && p->cd_type != GEMM_FP16 &&
            p->cd_type != GEMM_FP32)
            return GEMM_ERR_DTYPE;
    }
    if (p->m < 1 || p->n < 1 || p->k < 1 || p->m > lim || p->n > lim ||
        p->k > lim) {
        *why = "dimensions out of range";
        return GEMM_ERR_INVALID;
    }
    if ((p->trans_a != 0 && p->trans_a != 1) ||
        (p->trans_b != 0 && p->trans_b != 1) ||
        (p->conj_a != 0 && p->conj_a != 1) ||
        (p->conj_b != 0 && p->conj_b != 1))
        return GEMM_ERR_INVALID;
    int64_t min_lda = p->trans_a ? p->m : p->k;
    int64_t min_ldb = p->trans_b ? p->k : p->n;
    if (wide(p->ab_type)) {
        const bool usec = p->zbeta[0] != 0.0 || p->zbeta[1] != 0.0;
        const uintptr_t es = wide_size(p->ab_type);
        if (!p->a || !p->b || !p->d || (usec && !p->c))
            return GEMM_ERR_INVALID;
        if (!aligned(p->a, es) || !aligned(p->b, es) || !aligned(p->d, es) ||
            (usec && !aligned(p->c, es))) {
            *why = "operand not aligned to its element";
            return GEMM_ERR_INVALID;
        }
        if (p->lda < min_lda || p->ldb < min_ldb || p->ldd < p->n ||
            (usec && p->ldc < p->n)) {
            *why = "leading dimension too small";
            return GEMM_ERR_INVALID;
        }
        return GEMM_OK;
    }
    if (!p->a || !p->b || !p->d || (p->beta != 0.f && !p->c))
        return GEMM_ERR_INVALID;
    if (!aligned(p->a, 16) || !aligned(p->b, 16) || !aligned(p->d, 16) ||
        (p->beta != 0.f && !aligned(p->c, 16))) {
        *why = "operand not 16-byte aligned";
        return GEMM_ERR_INVALID;
    }
    if (p->lda < min_lda || p->lda % 8 || p->ldb < min_ldb || p->ldb % 8 ||
        p->ldd < p->n || p->ldd % 8) {
        *why = "leading dimension too small or not a multiple of 8";
        return GEMM_ERR_INVALID;
    }
    if (p->beta != 0.f && (p->ldc < p->n || p->ldc % 8)) {
        *why = "leading dimension too small or not a multiple of 8";
        return GEMM_ERR_INVALID;
    }
    return GEMM_OK;
}

/* The one validation: the problem's shape, then that the kernel `name`
 * (NULL: auto) serves it. On success *row is the row to run. */
gemm_error validate(const gemmk_problem *p, const char *name, const Row **row,
                    const char **why)
{
    *why = "no problem given";
    if (!p)
        return GEMM_ERR_INVALID;
    gemm_error e = validate_shape(p, why);
    if (e != GEMM_OK)
        return e;
    const Row *r = row_find(name ? name : row_auto().d.name);
    if (r && (r->flags & ROW_HIDDEN))
        r = nullptr;
    e = row_check(r, p, why);
    if (e != GEMM_OK)
        return e;
    *row = r;
    return GEMM_OK;
}

void say(gemmk_result *res, const char *a, const char *b)
{
    snprintf(res->msg, sizeof(res->msg), "%.40s%s%.200s", a ? a : "",
             a && b ? ": " : "", b ? b : "");
}

} // namespace

gemm_error check_problem(const gemmk_problem *p, const char *name,
                         const Row **row, const char **why)
{
    return validate(p, name, row, why);
}

gemm_error check_shape(const gemmk_problem *p, const char **why)
{
    return validate_shape(p, why);
}

gemm_error run_auto(gemmk_ctx *ctx, const gemmk_problem *p, cudaStream_t s,
                    const Row &row, gemmk_result *res)
{
    if (p->ab_type == GEMM_FP64)
        return run_f64(ctx, p, s, row, res); /* DGEMM or the emulation */
    if (wide(p->ab_type)) {
        const Row *z =
            z_emulation_pays(ctx, p) ? row_find("oz2-complex") : nullptr;
        if (z) /* complex128 where the fp64 emulation beats ZGEMM */
            return run_zemul(ctx, p, s, *z, res);
        res->kernel = row_reference().d.name;
        return wide_blas(ctx, p, s);
    }
    if (p->ab_type == GEMM_INT8)
        return run_s8(ctx, p, s, row, res);
    if (p->host_mapped) {
        const Row *m = row_mapped();
        const char *why = nullptr;
        if (!m || row_check(m, p, &why) != GEMM_OK) {
            ctx_say(ctx, "no kernel serves this on host-mapped operands%s%s",
                    why ? ": " : "", why ? why : "");
            return GEMM_ERR_UNSUPPORTED;
        }
        return m->run(ctx, p, s, *m, res);
    }
    if (p->ab_type == GEMM_FP32)
        return run_fp32(ctx, p, s, row, res);
    return run_tiled16(ctx, p, s, row, res);
}

gemm_error run_ladder(gemmk_ctx *ctx, const gemmk_problem *p, cudaStream_t s,
                      const Row &row, gemmk_result *res)
{
    res->kernel = row.d.name;
    GEMMK_CK(ctx, row.rung(*p, s));
    return GEMM_OK;
}

gemm_error run_reference(gemmk_ctx *ctx, const gemmk_problem *p, cudaStream_t s,
                         const Row &row, gemmk_result *res)
{
    res->kernel = row.d.name;
    if (wide(p->ab_type))
        return wide_blas(ctx, p, s);
    gemm_error e = ladder::cublas_run(&ctx->cublas, *p, s);
    if (e != GEMM_OK)
        ctx_say(ctx, "cuBLASLt matmul failed (error %d)", (int)e);
    return e;
}

} // namespace gemmk

using namespace gemmk;

extern "C" {

gemm_error gemmk_select(const gemmk_ctx *ctx, const gemmk_problem *p,
                        const char **name)
{
    if (!ctx || !name)
        return GEMM_ERR_INVALID;
    const Row *row;
    const char *why;
    gemm_error e = validate(p, nullptr, &row, &why);
    if (e != GEMM_OK)
        return e;
    if (wide(p->ab_type)) {
        *name = row_reference().d.name;
        return GEMM_OK;
    }
    if (p->ab_type == GEMM_INT8) {
        const Row *r = row_s8(ctx_knob(ctx, KNOB_S8_KERNEL));
        *name = (r ? r : row_s8(2))->d.name;
        return GEMM_OK;
    }
    if (p->host_mapped) {
        *name = row_mapped()->d.name;
        return GEMM_OK;
    }
    if (p->ab_type == GEMM_FP32) {
        const char *dec = decode_fp32_auto(p);
        *name = row_find(dec                                   ? dec
                         : p->precision == GEMM_PRECISION_TF32 ? "ws-tf32"
                                                               : "ws-3xtf32")
                    ->d.name;
        return GEMM_OK;
    }
    Plan pl;
    const Row *r = tiled16_choice(ctx, p, *row, &pl);
    *name = r ? r->d.name : row->d.name;
    return GEMM_OK;
}

unsigned gemmk_prepass(const gemmk_problem *p, const char *name)
{
    const Row *row;
    const char *why;
    if (!p || validate(p, name, &row, &why) != GEMM_OK || p->host_mapped)
        return 0;
    const unsigned both = GEMMK_PREPASS_A | GEMMK_PREPASS_B;
    const unsigned mn = (p->trans_a ? GEMMK_PREPASS_A : 0u) |
                        (p->trans_b ? 0u : GEMMK_PREPASS_B);
    if (p->ab_type == GEMM_INT8)
        return mn;
    const bool autorow = (row->flags & ROW_AUTO) != 0;
    if (p->ab_type == GEMM_FP32) {
        if (autorow)
            return p->precision == GEMM_PRECISION_TF32 ? mn : both;
        if (row->run != run_fp32)
            return 0;
        return row->variant == F32_3X || row->variant == F32_OZ ? both : mn;
    }
    if (p->ab_type == GEMM_FP64 && autorow) /* explicit moduli: splits */
        return p->moduli != 0 ? both : 0;
    if (wide(p->ab_type)) /* named: Ozaki-II splits, or cuBLAS */
        return autorow || row->run == run_reference ||
                       row->variant == F64_NATIVE
                   ? 0
                   : both;
    return 0;
}

gemm_error gemmk_gemm(gemmk_ctx *ctx, const gemmk_problem *p,
                      cudaStream_t stream, const char *kernel,
                      gemmk_result *res)
{
    gemmk_result dummy;
    if (!res)
        res = &dummy;
    res->kernel = nullptr;
    res->msg[0] = '\0';
    res->moduli = 0;
    if (!ctx) {
        say(res, "no kernel context", nullptr);
        return GEMM_ERR_INVALID;
    }
    const Row *row;
    const char *why = nullptr;
    gemm_error e = validate(p, kernel, &row, &why);
    if (e != GEMM_OK) {
        say(res, kernel ? kernel : "auto", why);
        return e;
    }
    res->kernel = row->d.name;
    ctx->msg[0] = '\0';
    e = row->run(ctx, p, stream, *row, res);
    if (e != GEMM_OK)
        say(res, res->kernel,
            ctx->msg[0] ? ctx->msg : "failed without a CUDA error");
    return e;
}

} /* extern "C" */
