/*
 * mm_stack.c: `gemmctl mm` on 3-D .npy stacks, numpy's matmul for the two
 * cases a strided batch expresses: a stack times a stack (equal counts,
 * or a count of 1 broadcast) and a stack times a matrix (the matrix
 * broadcast, either side). The stacks go into one buffer each, the batch
 * strides are one matrix each (0 for a broadcast operand), and one batch
 * request computes every product; D is written as a 3-D .npy. --check
 * compares every product with a long double reference over the inputs
 * as the daemon saw them.
 */
#include "mm.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* One element as long double (real, imaginary). */
typedef struct lcx {
    long double re, im;
} lcx;

static lcx elem(const void *p, gemm_dtype t, size_t i)
{
    if (t == GEMM_COMPLEX64) {
        const float *f = p;
        return (lcx){f[2 * i], f[2 * i + 1]};
    }
    if (t == GEMM_COMPLEX128) {
        const double *f = p;
        return (lcx){f[2 * i], f[2 * i + 1]};
    }
    double v;
    gemm_convert(&v, GEMM_FP64, (const char *)p + i * gemm_dtype_size(t), t, 1);
    return (lcx){v, 0};
}

/* The shape of one product and where each operand's matrices are. */
typedef struct stack_job {
    uint64_t count, m, n, k;
    size_t na, nb, nc; /* matrices in each buffer */
    size_t ea, eb, ec; /* elements of one matrix */
    gemm_buffer *a, *b, *c, *d;
    gemm_dtype ab, cd;
} stack_job;

/* How many products a stack of x and a stack of y make (numpy: equal,
 * or one of them 1); 0 when they do not broadcast. */
static uint64_t broadcast(size_t x, size_t y)
{
    return x == y || y == 1 ? x : x == 1 ? y : 0;
}

/* ||D - ref|| / ||ref|| (Frobenius) over every product, ref in long
 * double from the buffers. */
static double stack_error(const stack_job *j, const struct mm_args *a)
{
    long double num = 0, den = 0;
    const char *A = gemm_buffer_data(j->a), *B = gemm_buffer_data(j->b);
    const char *C = j->c ? gemm_buffer_data(j->c) : NULL;
    const char *D = gemm_buffer_data(j->d);
    size_t es = gemm_dtype_size(j->ab), cs = gemm_dtype_size(j->cd);
    uint64_t lda = a->ta ? j->m : j->k, ldb = a->tb ? j->k : j->n;
    lcx al = {a->alpha, a->alpha_im}, be = {a->beta, a->beta_im};
    for (uint64_t p = 0; p < j->count; p++) {
        const char *Ap = A + (j->na > 1 ? p : 0) * j->ea * es;
        const char *Bp = B + (j->nb > 1 ? p : 0) * j->eb * es;
        const char *Cp = C ? C + (j->nc > 1 ? p : 0) * j->m * j->n * cs : NULL;
        const char *Dp = D + p * j->m * j->n * cs;
        for (uint64_t i = 0; i < j->m; i++)
            for (uint64_t q = 0; q < j->n; q++) {
                lcx s = {0, 0};
                for (uint64_t l = 0; l < j->k; l++) {
                    lcx x = elem(Ap, j->ab, a->ta ? l * lda + i : i * lda + l);
                    lcx y = elem(Bp, j->ab, a->tb ? q * ldb + l : l * ldb + q);
                    if (a->ca)
                        x.im = -x.im;
                    if (a->cb)
                        y.im = -y.im;
                    s.re += x.re * y.re - x.im * y.im;
                    s.im += x.re * y.im + x.im * y.re;
                }
                lcx r = {al.re * s.re - al.im * s.im,
                         al.re * s.im + al.im * s.re};
                if (Cp != NULL) {
                    lcx c = elem(Cp, j->cd, i * j->n + q);
                    r.re += be.re * c.re - be.im * c.im;
                    r.im += be.re * c.im + be.im * c.re;
                }
                lcx d = elem(Dp, j->cd, i * j->n + q);
                num += (d.re - r.re) * (d.re - r.re) +
                       (d.im - r.im) * (d.im - r.im);
                den += r.re * r.re + r.im * r.im;
            }
    }
    return den > 0 ? (double)sqrtl(num / den) : (double)sqrtl(num);
}

/* int8: the fraction of D's elements, over every product, that differ
 * from the exact reference modulo 2^32 (0 when all agree). */
static double stack_mismatches(const stack_job *j, const struct mm_args *a)
{
    const int8_t *A = gemm_buffer_data(j->a), *B = gemm_buffer_data(j->b);
    const int32_t *C = j->c ? gemm_buffer_data(j->c) : NULL;
    const int32_t *D = gemm_buffer_data(j->d);
    uint64_t bad = 0, all = 0, mn = j->m * j->n;
    for (uint64_t p = 0; p < j->count; p++) {
        uint64_t seen = 0;
        bad += mm_s8_mismatches(
            A + (j->na > 1 ? p : 0) * j->ea, B + (j->nb > 1 ? p : 0) * j->eb,
            C ? C + (j->nc > 1 ? p : 0) * mn : NULL, D + p * mn, j->m, j->n,
            j->k, a->ta, a->tb, (int32_t)a->alpha, (int32_t)a->beta, 1, &seen);
        all += seen;
    }
    return all ? (double)bad / (double)all : 0.0;
}

int mm_stack(const char *url, struct mm_args *a, const npy_matrix *A,
             const npy_matrix *B, const npy_matrix *C)
{
    stack_job j = {0};
    gemm_client *cl = NULL;
    gemm_timings t;
    void *out = NULL;
    char err[512];
    int rv, code = EXIT_USAGE;

    if (a->out_path == NULL && !a->check)
        return ctl_error(EXIT_USAGE,
                         "mm: stacked operands make a 3-D D: write it with "
                         "--out D.npy (or --check it)");
    j.na = A->batch;
    j.nb = B->batch;
    if ((j.count = broadcast(j.na, j.nb)) == 0)
        return ctl_error(EXIT_USAGE,
                         "mm: stacks of %zu and %zu matrices do not "
                         "broadcast (numpy's rule: the same count, or one "
                         "of them 1)",
                         j.na, j.nb);
    j.m = a->ta ? A->cols : A->rows;
    j.k = a->ta ? A->rows : A->cols;
    j.n = a->tb ? B->rows : B->cols;
    uint64_t kb = a->tb ? B->cols : B->rows;
    if (j.k != kb)
        return ctl_error(EXIT_USAGE,
                         "mm: A's matrices are %zux%zu but B's are %zux%zu: "
                         "inner dimensions differ (%" PRIu64 " vs %" PRIu64 ")",
                         A->rows, A->cols, B->rows, B->cols, j.k, kb);
    if (C != NULL) {
        j.nc = C->batch;
        if (C->rows != j.m || C->cols != j.n || (j.nc != 1 && j.nc != j.count))
            return ctl_error(EXIT_USAGE,
                             "mm: C is %zu of %zux%zu but D is %" PRIu64
                             " of %" PRIu64 "x%" PRIu64,
                             j.nc, C->rows, C->cols, j.count, j.m, j.n);
    }
    j.ea = A->rows * A->cols;
    j.eb = B->rows * B->cols;
    j.ec = j.m * j.n;
    j.ab = a->have_dtype ? a->dtype : mm_file_type(A, B);
    j.cd = a->have_cd ? a->cd : mm_cd_default(j.ab);
    bool cplx = gemm_dtype_is_complex(j.ab);
    if ((a->ca || a->cb) && !cplx)
        return ctl_error(EXIT_USAGE, "mm: op C (conjugate transpose) is for "
                                     "complex inputs");
    if ((a->alpha_im != 0.0 || a->beta_im != 0.0) && !cplx)
        return ctl_error(EXIT_USAGE, "mm: --alpha-im/--beta-im are for "
                                     "complex inputs");
    if (j.ab != GEMM_FP32 && a->precision != GEMM_PRECISION_DEFAULT)
        return ctl_error(EXIT_USAGE, "mm: --precision is for fp32 inputs");
    if (a->moduli != 0)
        return ctl_error(EXIT_USAGE,
                         "mm: --moduli applies to one fp64 GEMM, not to "
                         "stacks (one batch request): leave it out, or "
                         "multiply the matrices one by one");
    gemm_dtype outt = a->have_out_dtype ? a->out_dtype : mm_out_default(j.cd);
    if ((code = mm_check_out_type(outt, j.cd)) != EXIT_OK)
        return code;
    if (!mm_scalars64(j.ab)) { /* what the daemon computes with */
        a->alpha = (float)a->alpha;
        a->beta = (float)a->beta;
    }
    size_t cs = gemm_dtype_size(j.cd), es = gemm_dtype_size(j.ab);

    if ((code = ctl_open(url, &cl)) != EXIT_OK)
        goto out;
    if ((code = mm_alloc(cl, j.na * j.ea, j.ab, "A", &j.a)) != EXIT_OK ||
        (code = mm_alloc(cl, j.nb * j.eb, j.ab, "B", &j.b)) != EXIT_OK ||
        (code = mm_alloc(cl, j.count * j.ec, j.cd, "D", &j.d)) != EXIT_OK ||
        (C != NULL &&
         (code = mm_alloc(cl, j.nc * j.ec, j.cd, "C", &j.c)) != EXIT_OK))
        goto out;
    if ((code = mm_load_input("A", gemm_buffer_data(j.a), j.ab, A,
                              j.na * j.ea)) != EXIT_OK ||
        (code = mm_load_input("B", gemm_buffer_data(j.b), j.ab, B,
                              j.nb * j.eb)) != EXIT_OK ||
        (C != NULL && (code = mm_load_input("C", gemm_buffer_data(j.c), j.cd, C,
                                            j.nc * j.ec)) != EXIT_OK))
        goto out;

    gemm_op op;
    gemm_op_init(&op, j.m, j.n, j.k, j.ab, j.cd);
    op.trans_a = a->ta;
    op.trans_b = a->tb;
    op.conj_a = a->ca;
    op.conj_b = a->cb;
    gemm_op_set_scalars(&op, a->alpha, a->alpha_im, C ? a->beta : 0.0,
                        C ? a->beta_im : 0.0);
    op.a.buf = j.a;
    op.b.buf = j.b;
    op.c.buf = j.c;
    op.d.buf = j.d;
    op.kernel = a->kernel;
    op.precision = a->precision;
    gemm_batch b;
    gemm_batch_init(&b, &op);
    b.count = j.count;
    b.stride_a = j.na > 1 ? j.ea * es : 0;
    b.stride_b = j.nb > 1 ? j.eb * es : 0;
    b.stride_c = j.nc > 1 ? j.ec * cs : 0;
    b.stride_d = j.ec * cs;
    if ((rv = gemm_batch_run(cl, &b, &t)) != GEMM_OK) {
        code = ctl_fail(rv, "mm");
        goto out;
    }
    double flops = (cplx ? 8.0 : 2.0) * (double)j.count * (double)j.m *
                   (double)j.n * (double)j.k;
    mm_note(a,
            "mm %" PRIu64 " x %" PRIu64 "x%" PRIu64 "x%" PRIu64
            " (count x m x n x k) in one batch, %s in, %s out%s%s%s\n",
            j.count, j.m, j.n, j.k, gemm_dtype_name(j.ab),
            gemm_dtype_name(j.cd), a->ta ? ", A^T" : "", a->tb ? ", B^T" : "",
            j.na == 1 || j.nb == 1 ? " (broadcast)" : "");
    mm_note(a,
            "kernel: %s; time: round trip %.3f ms, daemon compute %.3f ms "
            "(queued %.3f); %.3g TFLOP/s round trip\n",
            t.kernel[0] ? t.kernel : "?", (double)t.round_trip_us / 1e3,
            (double)t.compute_us / 1e3, (double)t.queued_us / 1e3,
            t.round_trip_us ? flops / ((double)t.round_trip_us * 1e-6) / 1e12
                            : 0.0);
    code = EXIT_OK;
    if (a->check) {
        const char *what;
        double tol = mm_tolerance(j.ab, j.cd, a->precision, 0, &what);
        double e =
            j.ab == GEMM_INT8 ? stack_mismatches(&j, a) : stack_error(&j, a);
        bool ok = e <= tol;
        printf("check: relative error %.3g over %" PRIu64
               " products (%s tolerance %.0e): %s\n",
               e, j.count, what, tol, ok ? "PASS" : "FAIL");
        if (!ok)
            code = EXIT_RUNTIME;
    }
    if (a->out_path != NULL) {
        size_t count = j.count * j.ec;
        if ((out = malloc(count * gemm_dtype_size(outt))) == NULL) {
            code = ctl_error(EXIT_RUNTIME, "mm: out of memory");
            goto out;
        }
        gemm_convert(out, outt, gemm_buffer_data(j.d), j.cd, count);
        if (npy_write_stack(a->out_path, out, outt, j.count, j.m, j.n, err,
                            sizeof(err))) {
            code = ctl_error(EXIT_RUNTIME, "mm: %s", err);
            goto out;
        }
        mm_note(a, "wrote D (%" PRIu64 "x%" PRIu64 "x%" PRIu64 ", %s) to %s\n",
                j.count, j.m, j.n, npy_type_name(outt), a->out_path);
    }
out:
    free(out);
    gemm_buffer_free(j.a);
    gemm_buffer_free(j.b);
    gemm_buffer_free(j.c);
    gemm_buffer_free(j.d);
    gemm_client_close(cl);
    return code;
}
