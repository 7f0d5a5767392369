/*
 * validate.c: the rules of a well-formed GEMM request. Every product and
 * sum of client-supplied numbers goes through the overflow builtins: a
 * request whose extent does not fit in 64 bits is out of bounds, not a wrap.
 */
#include "validate.h"

#include <fill.h>
#include <gemm/types.h>

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

bool val_dtypes_supported(int ab, int cd)
{
    bool ab16 = (ab == GEMM_BF16 || ab == GEMM_FP16);
    bool cd_any = (cd == GEMM_BF16 || cd == GEMM_FP16 || cd == GEMM_FP32);
    if (ab16)
        return cd_any;
    if (ab == GEMM_INT8)
        return cd == GEMM_INT32;
    bool same = ab == GEMM_FP32 || ab == GEMM_FP64 || ab == GEMM_COMPLEX64 ||
                ab == GEMM_COMPLEX128;
    return same && cd == ab;
}

int val_dtypes_check(int ab, int cd, char *msg, size_t len)
{
    if (val_dtypes_supported(ab, cd))
        return GEMM_OK;
    const char *an = gemm_dtype_name(ab), *cn = gemm_dtype_name(cd);
    if (ab == GEMM_INT8)
        snprintf(msg, len,
                 "unsupported types: A/B int8 with C/D %s (%d): int8 inputs "
                 "accumulate in int32 and write int32 C and D (set the C/D "
                 "type to int32)",
                 cn, cd);
    else if (ab == GEMM_INT32)
        snprintf(msg, len,
                 "unsupported types: A/B int32: int32 is a C/D type (of "
                 "int8 inputs) only; give int8 A and B when the values fit "
                 "in -128..127, else convert them to fp64");
    else if (cd == GEMM_INT32 || cd == GEMM_INT8)
        snprintf(msg, len,
                 "unsupported types: A/B %s (%d) with C/D %s: integer C and "
                 "D are int32, for int8 A and B only (give int8 inputs, or "
                 "a floating-point C/D type)",
                 an, ab, cn);
    else
        snprintf(msg, len,
                 "unsupported types: A/B %s (%d) with C/D %s (%d); A/B may "
                 "be bf16 or fp16 with C/D bf16, fp16 or fp32, or fp32, "
                 "fp64, c64, c128 with C/D of the same type, or int8 with "
                 "C/D int32",
                 an, ab, cn, cd);
    return GEMM_ERR_DTYPE;
}

/* Whether v is an integer in int32's range (what int8 GEMMs scale by). */
static bool int32_scalar(double v)
{
    return isfinite(v) && v == trunc(v) && v >= (double)INT32_MIN &&
           v <= (double)INT32_MAX;
}

int val_ops_scalars(const val_gemm *g, char *msg, size_t len)
{
    bool cplx = gemm_dtype_is_complex(g->ab_type);
    if ((g->conj_a || g->conj_b) && !cplx) {
        snprintf(msg, len,
                 "conjugate transpose of %s asked for %s inputs: it is for "
                 "complex types only (use the plain transpose)",
                 g->conj_a ? "A" : "B", gemm_dtype_name(g->ab_type));
        return GEMM_ERR_INVALID;
    }
    if ((g->conj_a && !g->trans_a) || (g->conj_b && !g->trans_b)) {
        bool a = g->conj_a && !g->trans_a;
        snprintf(msg, len,
                 "conj_%s without trans_%s: op C is the conjugate "
                 "transpose, set both (a conjugate without transpose is "
                 "no BLAS operation)",
                 a ? "a" : "b", a ? "a" : "b");
        return GEMM_ERR_INVALID;
    }
    if (!cplx && (g->alpha_im != 0.0 || g->beta_im != 0.0)) {
        snprintf(msg, len,
                 "%s has an imaginary part (%g) but the inputs are %s: "
                 "complex scalars are for complex types only",
                 g->alpha_im != 0.0 ? "alpha" : "beta",
                 g->alpha_im != 0.0 ? g->alpha_im : g->beta_im,
                 gemm_dtype_name(g->ab_type));
        return GEMM_ERR_INVALID;
    }
    if (g->ab_type == GEMM_INT8 &&
        (!int32_scalar(g->alpha) || !int32_scalar(g->beta))) {
        bool a = !int32_scalar(g->alpha);
        snprintf(msg, len,
                 "%s is %g but int8 GEMMs scale in int32 arithmetic: alpha "
                 "and beta must be integers in -2147483648..2147483647 "
                 "(scale D afterwards, or convert A and B to fp32 or fp64 "
                 "for a fractional scale)",
                 a ? "alpha" : "beta", a ? g->alpha : g->beta);
        return GEMM_ERR_INVALID;
    }
    return GEMM_OK;
}

int val_kernel_name(const char *name, char *msg, size_t len)
{
    if (name == NULL)
        return GEMM_OK;
    size_t n = 0;
    for (; name[n] != '\0' && n <= GEMM_KERNEL_NAME_MAX; n++) {
        unsigned char ch = (unsigned char)name[n];
        bool ok = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
                  (ch >= '0' && ch <= '9') || ch == '-' || ch == '_' ||
                  ch == '.' || ch == '+';
        if (!ok) {
            snprintf(msg, len,
                     "kernel name has byte %#04x at position %zu; names "
                     "are letters, digits and . _ + - (gemmctl kernels "
                     "lists them)",
                     ch, n);
            return GEMM_ERR_INVALID;
        }
    }
    if (n == 0) {
        snprintf(msg, len,
                 "kernel name is empty: leave it out or say 'auto' to let "
                 "the daemon pick");
        return GEMM_ERR_INVALID;
    }
    if (n > GEMM_KERNEL_NAME_MAX) {
        snprintf(msg, len, "kernel name '%.*s...' is longer than %d bytes", 16,
                 name, GEMM_KERNEL_NAME_MAX);
        return GEMM_ERR_INVALID;
    }
    return GEMM_OK;
}

int val_precision(int ab_type, int precision, char *msg, size_t len)
{
    if (precision != GEMM_PRECISION_DEFAULT &&
        precision != GEMM_PRECISION_TF32 && precision != GEMM_PRECISION_FP32) {
        snprintf(msg, len,
                 "unknown precision %d: it may be default (0), tf32 (1) or "
                 "fp32 (2)",
                 precision);
        return GEMM_ERR_INVALID;
    }
    if (ab_type != GEMM_FP32 && precision != GEMM_PRECISION_DEFAULT) {
        snprintf(msg, len,
                 "precision %s applies to fp32 inputs only; %s inputs take "
                 "the default",
                 gemm_precision_name(precision), gemm_dtype_name(ab_type));
        return GEMM_ERR_INVALID;
    }
    return GEMM_OK;
}

int val_moduli(int ab_type, int cd_type, int precision, uint32_t moduli,
               char *msg, size_t len)
{
    if (moduli == 0)
        return GEMM_OK;
    if (ab_type != GEMM_FP64 && ab_type != GEMM_FP32) {
        snprintf(msg, len,
                 "moduli (%u) is for fp64 and fp32 inputs, the Ozaki-II "
                 "emulation's modulus count: leave it 0 for %s inputs",
                 moduli, gemm_dtype_name(ab_type));
        return GEMM_ERR_INVALID;
    }
    if (ab_type == GEMM_FP32 &&
        (cd_type != GEMM_FP32 || precision == GEMM_PRECISION_TF32)) {
        snprintf(msg, len,
                 "moduli (%u) on fp32 inputs asks for the Ozaki-II "
                 "emulation, which writes fp32 C and D at fp32 precision: "
                 "make C and D fp32 and leave precision default or fp32, or "
                 "leave moduli 0",
                 moduli);
        return GEMM_ERR_INVALID;
    }
    if (moduli < GEMM_OZ_MODULI_MIN || moduli > GEMM_OZ_MODULI_MAX) {
        snprintf(msg, len,
                 "moduli %u is out of range: give %d..%d (fewer is faster "
                 "and less accurate), or 0 to let the daemon pick",
                 moduli, GEMM_OZ_MODULI_MIN, GEMM_OZ_MODULI_MAX);
        return GEMM_ERR_INVALID;
    }
    return GEMM_OK;
}

/* Resolves an operand that names a resident tensor. */
static int check_tensor(const char *what, const val_operand *op, uint64_t rows,
                        uint64_t cols, int dtype, const val_limits *lim,
                        void *arg, val_matrix *out, char *msg, size_t len)
{
    val_tensor t;
    void *h = lim->tensor_lookup != NULL
                  ? lim->tensor_lookup(arg, op->tensor_id, &t)
                  : NULL;
    if (h == NULL) {
        snprintf(msg, len,
                 "operand %s: tensor id %#llx is not resident on this "
                 "connection",
                 what, (unsigned long long)op->tensor_id);
        return GEMM_ERR_NO_BUFFER;
    }
    if (t.dtype != dtype) {
        snprintf(msg, len, "operand %s: tensor %#llx holds %s, not %s", what,
                 (unsigned long long)op->tensor_id, gemm_dtype_name(t.dtype),
                 gemm_dtype_name(dtype));
        return GEMM_ERR_DTYPE;
    }
    if (t.rows != rows || t.cols != cols) {
        snprintf(msg, len,
                 "operand %s: tensor %#llx is %llux%llu, the operand as "
                 "stored is %llux%llu",
                 what, (unsigned long long)op->tensor_id,
                 (unsigned long long)t.rows, (unsigned long long)t.cols,
                 (unsigned long long)rows, (unsigned long long)cols);
        return GEMM_ERR_DIMS;
    }
    memset(out, 0, sizeof(*out));
    out->handle = h;
    out->tensor = true;
    out->ld = t.ld;
    out->rows = rows;
    out->cols = cols;
    out->esize = gemm_dtype_size(dtype);
    return GEMM_OK;
}

/* Resolves and checks one operand stored rows x cols of dtype. */
static int check_matrix(const char *what, const val_operand *op, uint64_t rows,
                        uint64_t cols, int dtype, const val_limits *lim,
                        val_lookup_fn lookup, void *arg, val_matrix *out,
                        char *msg, size_t len)
{
    size_t esize = gemm_dtype_size(dtype);
    if (!op->present) {
        snprintf(msg, len, "operand %s is missing", what);
        return GEMM_ERR_INVALID;
    }
    if (op->tensor_id != 0) {
        if (what[0] == 'D') {
            snprintf(msg, len,
                     "operand D must be in a buffer, not a "
                     "resident tensor");
            return GEMM_ERR_INVALID;
        }
        return check_tensor(what, op, rows, cols, dtype, lim, arg, out, msg,
                            len);
    }
    size_t size = 0;
    uint64_t object = 0;
    void *h = lookup(arg, op->buffer_id, &size, &object);
    if (h == NULL) {
        snprintf(msg, len,
                 "operand %s: buffer id %#llx is not registered on this "
                 "connection",
                 what, (unsigned long long)op->buffer_id);
        return GEMM_ERR_NO_BUFFER;
    }
    uint64_t ld = op->ld ? op->ld : cols;
    if (ld < cols) {
        snprintf(msg, len,
                 "operand %s: leading dimension %llu is smaller than its "
                 "row length %llu",
                 what, (unsigned long long)ld, (unsigned long long)cols);
        return GEMM_ERR_LD;
    }
    if (op->offset % esize != 0) {
        snprintf(msg, len,
                 "operand %s: offset %llu is not a multiple of the element "
                 "size %zu",
                 what, (unsigned long long)op->offset, esize);
        return GEMM_ERR_ALIGN;
    }
    /* extent = ((rows - 1) * ld + cols) * esize; end = offset + extent */
    uint64_t elems, extent, end;
    if (__builtin_mul_overflow(rows - 1, ld, &elems) ||
        __builtin_add_overflow(elems, cols, &elems) ||
        __builtin_mul_overflow(elems, (uint64_t)esize, &extent) ||
        __builtin_add_overflow(op->offset, extent, &end) || end > size) {
        snprintf(msg, len,
                 "operand %s: %llux%llu with ld %llu at offset %llu extends "
                 "beyond its %zu-byte buffer",
                 what, (unsigned long long)rows, (unsigned long long)cols,
                 (unsigned long long)ld, (unsigned long long)op->offset, size);
        return GEMM_ERR_BOUNDS;
    }
    out->handle = h;
    out->object = object;
    out->tensor = false;
    out->offset = op->offset;
    out->ld = ld;
    out->rows = rows;
    out->cols = cols;
    out->extent = extent;
    out->esize = esize;
    return GEMM_OK;
}

int val_operand_check(const char *what, const val_operand *op, uint64_t rows,
                      uint64_t cols, int dtype, const val_limits *lim,
                      val_lookup_fn lookup, void *arg, val_matrix *out,
                      char *msg, size_t len)
{
    if (gemm_dtype_size(dtype) == 0) {
        snprintf(msg, len, "operand %s: unknown type %d", what, dtype);
        return GEMM_ERR_DTYPE;
    }
    if (rows == 0 || cols == 0 || rows > lim->max_dim || cols > lim->max_dim) {
        snprintf(msg, len, "operand %s: %llux%llu: each must be in 1..%llu",
                 what, (unsigned long long)rows, (unsigned long long)cols,
                 (unsigned long long)lim->max_dim);
        return GEMM_ERR_DIMS;
    }
    return check_matrix(what, op, rows, cols, dtype, lim, lookup, arg, out, msg,
                        len);
}

bool val_overlap(const val_matrix *x, const val_matrix *y)
{
    if (x->tensor || y->tensor)
        return x->handle == y->handle;
    if (x->handle != y->handle && x->object != y->object)
        return false;
    return x->offset < y->offset + y->extent &&
           y->offset < x->offset + x->extent;
}

int val_word_check(const char *what, const val_operand *word, const char *ref,
                   const val_matrix *const ops[], const char *const names[],
                   int nops, const val_limits *lim, val_lookup_fn lookup,
                   void *arg, val_matrix *out, char *msg, size_t len)
{
    if (word->tensor_id != 0) {
        snprintf(msg, len,
                 "%s: the %s is in the client's memory: it must be in a "
                 "buffer, not a resident tensor",
                 ref, what);
        return GEMM_ERR_INVALID;
    }
    val_operand w = *word;
    w.ld = 1;
    char inner[384];
    int rv = val_operand_check(what, &w, 1, 1, GEMM_FP64, lim, lookup, arg, out,
                               inner, sizeof(inner));
    if (rv != GEMM_OK) {
        snprintf(msg, len, "%s: %s", ref, inner);
        return rv;
    }
    for (int i = 0; i < nops; i++)
        if (ops[i] != NULL && val_overlap(out, ops[i])) {
            snprintf(msg, len,
                     "%s: the %s overlaps %s: put it outside every operand",
                     ref, what, names[i]);
            return GEMM_ERR_INVALID;
        }
    return GEMM_OK;
}

int val_fill_check(const val_operand *fill, uint32_t parts, const char *ref,
                   const val_matrix *const ops[], const char *const names[],
                   int nops, const val_limits *lim, val_lookup_fn lookup,
                   void *arg, val_matrix *out, char *msg, size_t len)
{
    if (parts < 1 || parts > GEMM_FILL_MAX_PARTS) {
        snprintf(msg, len, "%s: fill parts is %u: it must be in 1..%d", ref,
                 parts, GEMM_FILL_MAX_PARTS);
        return GEMM_ERR_INVALID;
    }
    return val_word_check("fill counter", fill, ref, ops, names, nops, lim,
                          lookup, arg, out, msg, len);
}

int val_gemm_check(const val_gemm *g, const val_limits *lim,
                   val_lookup_fn lookup, void *arg, val_resolved *out,
                   char *msg, size_t len)
{
    int rv;
    if ((rv = val_dtypes_check(g->ab_type, g->cd_type, msg, len)) != GEMM_OK ||
        (rv = val_precision(g->ab_type, g->precision, msg, len)) != GEMM_OK ||
        (rv = val_moduli(g->ab_type, g->cd_type, g->precision, g->moduli, msg,
                         len)) != GEMM_OK ||
        (rv = val_ops_scalars(g, msg, len)) != GEMM_OK ||
        (rv = val_kernel_name(g->kernel, msg, len)) != GEMM_OK)
        return rv;
    if (g->m == 0 || g->n == 0 || g->k == 0 || g->m > lim->max_dim ||
        g->n > lim->max_dim || g->k > lim->max_dim) {
        snprintf(msg, len,
                 "dimensions m=%llu n=%llu k=%llu: each must be in 1..%llu",
                 (unsigned long long)g->m, (unsigned long long)g->n,
                 (unsigned long long)g->k, (unsigned long long)lim->max_dim);
        return GEMM_ERR_DIMS;
    }
    int ab = g->ab_type, cd = g->cd_type;
    /* stored shapes: A is m x k (k x m transposed), B is k x n (n x k) */
    rv = check_matrix("A", &g->a, g->trans_a ? g->k : g->m,
                      g->trans_a ? g->m : g->k, ab, lim, lookup, arg, &out->a,
                      msg, len);
    if (rv != GEMM_OK)
        return rv;
    rv = check_matrix("B", &g->b, g->trans_b ? g->n : g->k,
                      g->trans_b ? g->k : g->n, ab, lim, lookup, arg, &out->b,
                      msg, len);
    if (rv != GEMM_OK)
        return rv;
    rv = check_matrix("D", &g->d, g->m, g->n, cd, lim, lookup, arg, &out->d,
                      msg, len);
    if (rv != GEMM_OK)
        return rv;
    out->has_c = g->beta != 0.0 || g->beta_im != 0.0;
    if (out->has_c) {
        if (!g->c.present) {
            snprintf(msg, len, "beta is %g%+gi but operand C is missing",
                     g->beta, g->beta_im);
            return GEMM_ERR_INVALID;
        }
        rv = check_matrix("C", &g->c, g->m, g->n, cd, lim, lookup, arg, &out->c,
                          msg, len);
        if (rv != GEMM_OK)
            return rv;
    }
    if (val_overlap(&out->d, &out->a) || val_overlap(&out->d, &out->b)) {
        snprintf(msg, len, "operand D overlaps %s in the same buffer",
                 val_overlap(&out->d, &out->a) ? "A" : "B");
        return GEMM_ERR_INVALID;
    }
    if (out->has_c && val_overlap(&out->c, &out->d) &&
        !(out->c.offset == out->d.offset && out->c.ld == out->d.ld)) {
        snprintf(msg, len,
                 "operand C partly overlaps D: it must be the same matrix "
                 "(same offset and ld) or separate");
        return GEMM_ERR_INVALID;
    }
    const val_matrix *ops[5] = {&out->a, &out->b, &out->d,
                                out->has_c ? &out->c : NULL, NULL};
    static const char *const names[5] = {"A", "B", "D", "C",
                                         "the fill counter"};
    if (g->fill.present &&
        (rv = val_fill_check(&g->fill, g->fill_parts, "gemm", ops, names, 4,
                             lim, lookup, arg, &out->fill, msg, len)) !=
            GEMM_OK)
        return rv;
    out->has_fill = g->fill.present;
    ops[4] = out->has_fill ? &out->fill : NULL;
    if (g->drain.present &&
        (rv = val_word_check("drain counter", &g->drain, "gemm", ops, names, 5,
                             lim, lookup, arg, &out->drain, msg, len)) !=
            GEMM_OK)
        return rv;
    out->has_drain = g->drain.present;
    return GEMM_OK;
}
