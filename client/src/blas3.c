/*
 * blas3.c: the other level-3 routines (symm .. trsm) as Blas3Requests:
 * gemm_blas3_op on the wire (routine, type, side/uplo/trans/diag flags,
 * dimensions, double and complex scalars, (buffer id, offset, ld)
 * operands); the reply is a GEMM's, so gemm_wait() finishes it. All
 * validation is the daemon's; only what the wire cannot carry is refused
 * here.
 */
#include "internal.h"

#include <stdio.h>
#include <string.h>

GEMM_API const char *gemm_routine_name(gemm_routine r)
{
    static const char *const names[GEMM_ROUTINE_COUNT] = {
        "gemm",  "symm",  "hemm", "syrk", "herk",
        "syr2k", "her2k", "trmm", "trsm"};
    return (unsigned)r < GEMM_ROUTINE_COUNT ? names[r] : "?";
}

GEMM_API void gemm_blas3_init(gemm_blas3_op *op, gemm_routine r, gemm_dtype t)
{
    if (op == NULL)
        return;
    memset(op, 0, sizeof(*op));
    op->routine = r;
    op->dtype = t;
    op->trans = 'N';
    op->alpha_re = 1.0;
}

static void operand(Gemm__Operand *w, const gemm_matrix *m)
{
    if (m->tensor != 0) {
        w->has_tensor_id = true;
        w->tensor_id = m->tensor;
        return;
    }
    w->has_buffer_id = true;
    w->buffer_id = m->buf->id;
    w->has_offset = true;
    w->offset = m->offset;
    w->has_ld = true;
    w->ld = m->ld;
}

static bool has(const gemm_matrix *m)
{
    return m->buf != NULL || m->tensor != 0;
}

/* gemm_blas3_submit, filled by parts when fill is non-NULL. */
static int submit(gemm_client *c, const gemm_blas3_op *op,
                  gemm_buffer *fill_buf, uint64_t fill_offset, uint32_t parts,
                  gemm_request **out)
{
    Gemm__Request req = GEMM__REQUEST__INIT;
    Gemm__Blas3Request r = GEMM__BLAS3_REQUEST__INIT;
    Gemm__Operand a = GEMM__OPERAND__INIT, b = GEMM__OPERAND__INIT;
    Gemm__Operand cc = GEMM__OPERAND__INIT;
    Gemm__Fill fill = GEMM__FILL__INIT;

    cli_clear_error();
    if (c == NULL || op == NULL || out == NULL)
        return cli_error(GEMM_ERR_INVALID, "blas3: NULL argument");
    char t = op->trans == 0 ? 'N' : op->trans;
    if (t >= 'a' && t <= 'z')
        t = (char)(t - 'a' + 'A');
    if (t != 'N' && t != 'T' && t != 'C')
        return cli_error(GEMM_ERR_INVALID, "%s: trans '%c' is none of N, T, C",
                         gemm_routine_name(op->routine), op->trans);
    r.has_routine = true;
    r.routine = (Gemm__Routine)op->routine;
    r.has_dtype = true;
    r.dtype = (Gemm__DType)op->dtype; /* the wire's numbers */
    r.has_right = op->right;
    r.right = op->right;
    r.has_lower = op->lower;
    r.lower = op->lower;
    r.has_trans = t != 'N';
    r.trans = t == 'T'   ? GEMM__OP__OP_T
              : t == 'C' ? GEMM__OP__OP_C
                         : GEMM__OP__OP_N;
    r.has_unit_diag = op->unit_diag;
    r.unit_diag = op->unit_diag;
    r.has_m = r.has_n = r.has_k = true;
    r.m = op->m;
    r.n = op->n;
    r.k = op->k;
    r.has_alpha = true;
    r.alpha = op->alpha_re;
    r.has_alpha_imag = op->alpha_im != 0.0;
    r.alpha_imag = op->alpha_im;
    r.has_beta = op->beta_re != 0.0;
    r.beta = op->beta_re;
    r.has_beta_imag = op->beta_im != 0.0;
    r.beta_imag = op->beta_im;
    if (op->timeout_ms != 0) {
        r.has_timeout_ms = true;
        r.timeout_ms = op->timeout_ms;
    }
    if (has(&op->a)) {
        operand(&a, &op->a);
        r.a = &a;
    }
    if (has(&op->b)) {
        operand(&b, &op->b);
        r.b = &b;
    }
    if (has(&op->c)) {
        operand(&cc, &op->c);
        r.c = &cc;
    }
    if (fill_buf != NULL && !(atomic_load(&c->features) & GEMM_FEATURE_FILL))
        return cli_error(GEMM_ERR_UNSUPPORTED,
                         "%s: gemmd at %s has not said it takes operands "
                         "filled by parts (gemm_ping first; an older gemmd "
                         "does not)",
                         gemm_routine_name(op->routine), c->url);
    if (fill_buf != NULL) {
        fill.has_buffer_id = fill.has_offset = fill.has_parts = true;
        fill.buffer_id = fill_buf->id;
        fill.offset = fill_offset;
        fill.parts = parts;
        r.fill = &fill;
    }
    req.body_case = GEMM__REQUEST__BODY_BLAS3;
    req.blas3 = &r;
    return cli_req_start(c, &req, gemm_routine_name(op->routine), out);
}

GEMM_API int gemm_blas3_submit(gemm_client *c, const gemm_blas3_op *op,
                               gemm_request **out)
{
    return submit(c, op, NULL, 0, 0, out);
}

GEMM_API int gemm_blas3_submit_filled(gemm_client *c, const gemm_blas3_op *op,
                                      gemm_buffer *fill, uint64_t fill_offset,
                                      uint32_t parts, gemm_request **out)
{
    if (fill == NULL)
        return cli_error(GEMM_ERR_INVALID, "blas3: NULL fill buffer");
    return submit(c, op, fill, fill_offset, parts, out);
}

GEMM_API int gemm_blas3_run(gemm_client *c, const gemm_blas3_op *op,
                            gemm_timings *t)
{
    gemm_request *r;
    int rv;

    if ((rv = gemm_blas3_submit(c, op, &r)) != GEMM_OK)
        return rv;
    return gemm_wait(r, t);
}
