/*
 * validate_blas3.c: the rules of a well-formed Blas3 request (see
 * validate_blas3.h). Shapes are those of the row-major wire; the messages
 * name the reference routine's argument by its Fortran name and position,
 * as xerbla reports them, and the operand checks themselves are
 * validate.c's (val_operand_check: ld, alignment, overflow-safe bounds).
 */
#include "validate_blas3.h"

#include <gemm/types.h>

#include <stdio.h>
#include <string.h>

/* The reference arguments of one routine family: positions (1-based, as
 * xerbla numbers them) of M, N, K, TRANS, LDA, LDB, LDC; 0 when the
 * routine has no such argument. */
typedef struct args {
    int m, n, k, trans, lda, ldb, ldc;
    const char *trans_name;
} args;

static const args symm_args = {.m = 3, .n = 4, .lda = 7, .ldb = 9, .ldc = 12};
static const args syrk_args = {
    .trans = 2, .n = 3, .k = 4, .lda = 7, .ldc = 10, .trans_name = "TRANS"};
static const args syr2k_args = {.trans = 2,
                                .n = 3,
                                .k = 4,
                                .lda = 7,
                                .ldb = 9,
                                .ldc = 12,
                                .trans_name = "TRANS"};
static const args trmm_args = {
    .trans = 3, .m = 5, .n = 6, .lda = 9, .ldb = 11, .trans_name = "TRANSA"};

static const args *args_of(int r)
{
    switch (r) {
    case VAL_SYMM:
    case VAL_HEMM:
        return &symm_args;
    case VAL_SYRK:
    case VAL_HERK:
        return &syrk_args;
    case VAL_SYR2K:
    case VAL_HER2K:
        return &syr2k_args;
    case VAL_TRMM:
    case VAL_TRSM:
        return &trmm_args;
    }
    return NULL;
}

const char *val_routine_name(int routine)
{
    static const char *const names[VAL_ROUTINES] = {"gemm",  "symm", "hemm",
                                                    "syrk",  "herk", "syr2k",
                                                    "her2k", "trmm", "trsm"};
    return routine >= 0 && routine < VAL_ROUTINES ? names[routine] : "?";
}

void val_blas3_refname(int routine, int dtype, char *buf, size_t len)
{
    char p = dtype == GEMM_FP32         ? 'S'
             : dtype == GEMM_FP64       ? 'D'
             : dtype == GEMM_COMPLEX64  ? 'C'
             : dtype == GEMM_COMPLEX128 ? 'Z'
                                        : '?';
    const char *r = val_routine_name(routine);
    size_t i = 0;
    if (len == 0)
        return;
    if (len > 1)
        buf[i++] = p;
    for (; *r != '\0' && i + 1 < len; r++)
        buf[i++] = (char)(*r >= 'a' && *r <= 'z' ? *r - 'a' + 'A' : *r);
    buf[i] = '\0';
}

static bool hermitian(int r)
{
    return r == VAL_HEMM || r == VAL_HERK || r == VAL_HER2K;
}

static bool rank_update(int r)
{
    return r == VAL_SYRK || r == VAL_HERK || r == VAL_SYR2K || r == VAL_HER2K;
}

static bool triangular(int r)
{
    return r == VAL_TRMM || r == VAL_TRSM;
}

/* The TRANS rules: which ops routine r of a real or complex type takes. */
static int check_trans(const val_blas3 *g, const args *ar, const char *ref,
                       char *msg, size_t len)
{
    bool cplx = gemm_dtype_is_complex(g->dtype);
    int t = g->trans;
    if (ar->trans == 0) {
        if (t == VAL_OP_N)
            return GEMM_OK;
        snprintf(msg, len, "%s takes no TRANS: leave trans unset (N), not %d",
                 ref, t);
        return GEMM_ERR_INVALID;
    }
    bool legal = (t == VAL_OP_N || t == VAL_OP_T || t == VAL_OP_C) &&
                 !(t == VAL_OP_C && !cplx);
    if (legal && rank_update(g->routine))
        legal = hermitian(g->routine) ? t != VAL_OP_T : t != VAL_OP_C;
    if (legal)
        return GEMM_OK;
    const char *allowed =
        rank_update(g->routine)
            ? (hermitian(g->routine) ? "N or C (conjugate transpose)"
                                     : "N or T")
        : cplx ? "N, T or C"
               : "N or T (C is for complex types)";
    snprintf(msg, len,
             "%s: parameter %d (%s) has an illegal value %s: it "
             "may be %s",
             ref, ar->trans, ar->trans_name,
             t == VAL_OP_N   ? "N"
             : t == VAL_OP_T ? "T"
             : t == VAL_OP_C ? "C"
                             : "(unknown op)",
             allowed);
    return GEMM_ERR_INVALID;
}

/* One dimension: 1..max_dim, named as the reference names it. */
static int check_dim(const char *ref, int pos, const char *name, uint64_t v,
                     const val_limits *lim, char *msg, size_t len)
{
    if (v >= 1 && v <= lim->max_dim)
        return GEMM_OK;
    snprintf(msg, len,
             "%s: parameter %d (%s) is %llu: it must be in 1..%llu (a "
             "zero dimension is settled by the caller without a request)",
             ref, pos, name, (unsigned long long)v,
             (unsigned long long)lim->max_dim);
    return GEMM_ERR_DIMS;
}

/* One operand through validate.c, a bad leading dimension named as the
 * reference names it. */
static int check_operand(const char *ref, const char *what, int ldpos,
                         const val_operand *op, uint64_t rows, uint64_t cols,
                         int dtype, const val_limits *lim, val_lookup_fn lookup,
                         void *arg, val_matrix *out, char *msg, size_t len)
{
    char inner[384];
    int rv = val_operand_check(what, op, rows, cols, dtype, lim, lookup, arg,
                               out, inner, sizeof(inner));
    if (rv == GEMM_OK)
        return GEMM_OK;
    if (rv == GEMM_ERR_LD)
        snprintf(msg, len, "%s: parameter %d (LD%s) is illegal: %s", ref, ldpos,
                 what, inner);
    else
        snprintf(msg, len, "%s: %s", ref, inner);
    return rv;
}

/* The fill counter, when the request has one (validate.h). */
static int check_fill(const val_blas3 *g, const char *ref,
                      const val_limits *lim, val_lookup_fn lookup, void *arg,
                      val_blas3_resolved *out, char *msg, size_t len)
{
    if (!g->fill.present)
        return GEMM_OK;
    const val_matrix *ops[3] = {&out->a, out->has_b ? &out->b : NULL,
                                out->has_c ? &out->c : NULL};
    static const char *const names[3] = {"A", "B", "C"};
    int rv = val_fill_check(&g->fill, g->fill_parts, ref, ops, names, 3, lim,
                            lookup, arg, &out->fill, msg, len);
    out->has_fill = rv == GEMM_OK;
    return rv;
}

static int check_scalars(const val_blas3 *g, const char *ref, char *msg,
                         size_t len)
{
    bool cplx = gemm_dtype_is_complex(g->dtype);
    const char *bad = NULL;
    if (!cplx && g->alpha_im != 0.0)
        bad = "alpha has an imaginary part but the type is real";
    else if (!cplx && g->beta_im != 0.0)
        bad = "beta has an imaginary part but the type is real";
    else if (g->routine == VAL_HERK && g->alpha_im != 0.0)
        bad = "alpha of a Hermitian rank-k update is real";
    else if ((g->routine == VAL_HERK || g->routine == VAL_HER2K) &&
             g->beta_im != 0.0)
        bad = "beta of a Hermitian rank update is real (the diagonal of C "
              "stays real)";
    else if (triangular(g->routine) && (g->beta != 0.0 || g->beta_im != 0.0))
        bad = "a triangular multiply or solve takes no beta";
    if (bad == NULL)
        return GEMM_OK;
    snprintf(msg, len, "%s: %s", ref, bad);
    return GEMM_ERR_INVALID;
}

int val_blas3_check(const val_blas3 *g, const val_limits *lim,
                    val_lookup_fn lookup, void *arg, val_blas3_resolved *out,
                    char *msg, size_t len)
{
    int rv;
    char ref[16];
    const args *ar = args_of(g->routine);
    memset(out, 0, sizeof(*out));
    if (ar == NULL) {
        snprintf(msg, len,
                 "unknown routine %d: a Blas3 request is symm (1), hemm, "
                 "syrk, herk, syr2k, her2k, trmm or trsm (8)",
                 g->routine);
        return GEMM_ERR_UNSUPPORTED;
    }
    val_blas3_refname(g->routine, g->dtype, ref, sizeof(ref));
    int t = g->dtype;
    bool cplx = t == GEMM_COMPLEX64 || t == GEMM_COMPLEX128;
    if (!(t == GEMM_FP32 || t == GEMM_FP64 || cplx) ||
        (hermitian(g->routine) && !cplx)) {
        snprintf(msg, len, "%s: type %s (%d) is not served: %s takes %s", ref,
                 gemm_dtype_name(t), t, val_routine_name(g->routine),
                 hermitian(g->routine) ? "c64 or c128"
                                       : "fp32, fp64, c64 or c128");
        return GEMM_ERR_DTYPE;
    }
    if ((rv = check_trans(g, ar, ref, msg, len)) != GEMM_OK ||
        (rv = check_scalars(g, ref, msg, len)) != GEMM_OK)
        return rv;
    if ((ar->m && (rv = check_dim(ref, ar->m, "M", g->m, lim, msg, len))) ||
        (rv = check_dim(ref, ar->n, "N", g->n, lim, msg, len)) ||
        (ar->k && (rv = check_dim(ref, ar->k, "K", g->k, lim, msg, len))))
        return rv;

    /* stored shapes (row-major): A, B and the output */
    uint64_t ar_rows, ar_cols, out_rows, out_cols;
    if (rank_update(g->routine)) {
        bool nt = g->trans == VAL_OP_N;
        ar_rows = nt ? g->n : g->k;
        ar_cols = nt ? g->k : g->n;
        out_rows = out_cols = g->n;
    } else {
        ar_rows = ar_cols = g->right ? g->n : g->m;
        out_rows = g->m;
        out_cols = g->n;
    }
    if ((rv = check_operand(ref, "A", ar->lda, &g->a, ar_rows, ar_cols, t, lim,
                            lookup, arg, &out->a, msg, len)) != GEMM_OK)
        return rv;
    bool beta_nz = g->beta != 0.0 || g->beta_im != 0.0;
    if (triangular(g->routine)) {
        /* B is the output, read and written */
        out->has_b = true;
        out->reads_out = true;
        if ((rv = check_operand(ref, "B", ar->ldb, &g->b, out_rows, out_cols, t,
                                lim, lookup, arg, &out->b, msg, len)))
            return rv;
        if (out->b.tensor) {
            snprintf(msg, len,
                     "%s: B is written: it must be in a buffer, not a "
                     "resident tensor",
                     ref);
            return GEMM_ERR_INVALID;
        }
        if (val_overlap(&out->a, &out->b)) {
            snprintf(msg, len, "%s: B (written) overlaps A", ref);
            return GEMM_ERR_INVALID;
        }
        return check_fill(g, ref, lim, lookup, arg, out, msg, len);
    }
    if (ar->ldb != 0) {
        uint64_t br = rank_update(g->routine) ? ar_rows : out_rows;
        uint64_t bc = rank_update(g->routine) ? ar_cols : out_cols;
        out->has_b = true;
        if ((rv = check_operand(ref, "B", ar->ldb, &g->b, br, bc, t, lim,
                                lookup, arg, &out->b, msg, len)))
            return rv;
    }
    out->has_c = true;
    out->reads_out = beta_nz;
    if ((rv = check_operand(ref, "C", ar->ldc, &g->c, out_rows, out_cols, t,
                            lim, lookup, arg, &out->c, msg, len)))
        return rv;
    if (out->c.tensor) {
        snprintf(msg, len,
                 "%s: C is written: it must be in a buffer, not a resident "
                 "tensor",
                 ref);
        return GEMM_ERR_INVALID;
    }
    if (val_overlap(&out->c, &out->a) ||
        (out->has_b && val_overlap(&out->c, &out->b))) {
        snprintf(msg, len, "%s: C (written) overlaps %s", ref,
                 val_overlap(&out->c, &out->a) ? "A" : "B");
        return GEMM_ERR_INVALID;
    }
    return check_fill(g, ref, lim, lookup, arg, out, msg, len);
}
