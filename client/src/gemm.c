/*
 * gemm.c: the GEMM request. gemm_op describes D = alpha*op(A)*op(B) +
 * beta*C over matrices in registered buffers; it goes on the wire as a
 * GemmRequest of (buffer id, byte offset, ld) operands and comes back as a
 * status and the daemon's timings (with the kernel that ran and its own
 * time). The op may name a kernel, for fp32 inputs a precision and for
 * fp64 inputs an Ozaki-II modulus count; all travel as given. Double and
 * complex scalars (scalars64) travel in the request's
 * alpha64/beta64/alpha_imag/beta_imag, with the float fields beside them for
 * older daemons; conjugate transposes as conj_a/conj_b. gemm_run() is
 * gemm_submit() followed by gemm_wait(). All validation of shapes, bounds and
 * ownership is the daemon's; only what cannot be expressed on the wire is
 * refused here.
 */
#include "internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

GEMM_API void gemm_op_init(gemm_op *op, uint64_t m, uint64_t n, uint64_t k,
                           gemm_dtype ab_type, gemm_dtype cd_type)
{
    if (op == NULL)
        return;
    memset(op, 0, sizeof(*op));
    op->m = m;
    op->n = n;
    op->k = k;
    op->ab_type = ab_type;
    op->cd_type = cd_type;
    op->alpha = 1.0f;
    op->beta = 0.0f;
    op->alpha_re = 1.0;
}

GEMM_API void gemm_op_set_scalars(gemm_op *op, double alpha_re, double alpha_im,
                                  double beta_re, double beta_im)
{
    if (op == NULL)
        return;
    op->scalars64 = true;
    op->alpha_re = alpha_re;
    op->alpha_im = alpha_im;
    op->beta_re = beta_re;
    op->beta_im = beta_im;
    op->alpha = (float)alpha_re;
    op->beta = (float)beta_re;
}

static Gemm__DType wire_dtype(gemm_dtype t)
{
    switch (t) {
    case GEMM_BF16:
        return GEMM__DTYPE__BF16;
    case GEMM_FP16:
        return GEMM__DTYPE__FP16;
    case GEMM_FP32:
        return GEMM__DTYPE__FP32;
    case GEMM_FP64:
        return GEMM__DTYPE__FP64;
    case GEMM_COMPLEX64:
        return GEMM__DTYPE__COMPLEX64;
    case GEMM_COMPLEX128:
        return GEMM__DTYPE__COMPLEX128;
    case GEMM_INT8:
        return GEMM__DTYPE__INT8;
    case GEMM_INT32:
        return GEMM__DTYPE__INT32;
    }
    return GEMM__DTYPE__DTYPE_INVALID;
}

void cli_wire_operand(Gemm__Operand *w, const gemm_matrix *m)
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

int cli_gemm_pack(const gemm_op *op, bool operands, Gemm__GemmRequest *g,
                  Gemm__Operand w[4], const char *what)
{
    gemm__gemm_request__init(g);
    for (int i = 0; i < 4; i++)
        gemm__operand__init(&w[i]);
    bool a_none = op->a.buf == NULL && op->a.tensor == 0;
    bool b_none = op->b.buf == NULL && op->b.tensor == 0;
    if (operands && (a_none || b_none || op->d.buf == NULL))
        return cli_error(GEMM_ERR_INVALID, "%s: %s has no buffer", what,
                         a_none   ? "A"
                         : b_none ? "B"
                                  : "D");

    g->has_m = g->has_n = g->has_k = true;
    g->m = op->m;
    g->n = op->n;
    g->k = op->k;
    g->has_ab_type = g->has_cd_type = true;
    g->ab_type = wire_dtype(op->ab_type);
    g->cd_type = wire_dtype(op->cd_type);
    g->has_trans_a = g->has_trans_b = true;
    g->trans_a = op->trans_a;
    g->trans_b = op->trans_b;
    g->has_alpha = g->has_beta = true;
    g->alpha = op->alpha;
    g->beta = op->beta;
    bool beta_nz = op->beta != 0.0f;
    if (op->scalars64) {
        g->alpha = (float)op->alpha_re; /* what an older daemon reads */
        g->beta = (float)op->beta_re;
        g->has_alpha64 = g->has_beta64 = true;
        g->alpha64 = op->alpha_re;
        g->beta64 = op->beta_re;
        g->has_alpha_imag = op->alpha_im != 0.0;
        g->alpha_imag = op->alpha_im;
        g->has_beta_imag = op->beta_im != 0.0;
        g->beta_imag = op->beta_im;
        beta_nz = op->beta_re != 0.0 || op->beta_im != 0.0;
    }
    /* only when set: an older daemon then sees the request it knows */
    g->has_conj_a = op->conj_a;
    g->conj_a = op->conj_a;
    g->has_conj_b = op->conj_b;
    g->conj_b = op->conj_b;
    if (op->timeout_ms != 0) {
        g->has_timeout_ms = true;
        g->timeout_ms = op->timeout_ms;
    }
    if (op->precision != GEMM_PRECISION_DEFAULT) {
        /* any number goes on the wire: the daemon names a bad one */
        g->has_precision = true;
        g->precision = (Gemm__Precision)op->precision;
    }
    if (op->kernel != NULL) {
        if (strlen(op->kernel) > GEMM_KERNEL_NAME_MAX)
            return cli_error(GEMM_ERR_INVALID,
                             "%s: kernel name of %zu bytes is longer "
                             "than %d",
                             what, strlen(op->kernel), GEMM_KERNEL_NAME_MAX);
        g->kernel = (char *)op->kernel; /* packed by the caller: copied */
    }
    if (op->moduli != 0) {
        /* any count goes on the wire: the daemon names a bad one */
        g->has_moduli = true;
        g->moduli = op->moduli;
    }
    if (!operands)
        return GEMM_OK;
    cli_wire_operand(&w[0], &op->a);
    cli_wire_operand(&w[1], &op->b);
    cli_wire_operand(&w[3], &op->d);
    g->a = &w[0];
    g->b = &w[1];
    g->d = &w[3];
    /* C is read only when beta != 0; without a buffer the daemon says so. */
    if (beta_nz && (op->c.buf != NULL || op->c.tensor != 0)) {
        cli_wire_operand(&w[2], &op->c);
        g->c = &w[2];
    }
    return GEMM_OK;
}

/* The counters of ov, onto g. */
static int overlap_pack(gemm_client *c, const gemm_overlap *ov,
                        Gemm__GemmRequest *g, Gemm__Fill *fill,
                        Gemm__Drain *drain)
{
    if (ov == NULL || (ov->fill_parts == 0 && !ov->drain))
        return GEMM_OK;
    if (ov->buf == NULL)
        return cli_error(GEMM_ERR_INVALID, "gemm: overlap without a buffer");
    uint32_t have = atomic_load(&c->features);
    if ((ov->fill_parts > 0 && !(have & GEMM_FEATURE_FILL_GEMM)) ||
        (ov->drain && !(have & GEMM_FEATURE_DRAIN)))
        return cli_error(GEMM_ERR_UNSUPPORTED,
                         "gemm: gemmd at %s has not said it %s (gemm_ping "
                         "first; an older gemmd does not)",
                         c->url,
                         ov->fill_parts > 0 && !(have & GEMM_FEATURE_FILL_GEMM)
                             ? "takes operands filled by parts"
                             : "says D's rows as they land");
    if (ov->fill_parts > 0) {
        fill->has_buffer_id = fill->has_offset = fill->has_parts = true;
        fill->buffer_id = ov->buf->id;
        fill->offset = ov->fill_offset;
        fill->parts = ov->fill_parts;
        g->fill = fill;
    }
    if (ov->drain) {
        drain->has_buffer_id = drain->has_offset = true;
        drain->buffer_id = ov->buf->id;
        drain->offset = ov->drain_offset;
        g->drain = drain;
    }
    return GEMM_OK;
}

GEMM_API int gemm_submit_overlapped(gemm_client *c, const gemm_op *op,
                                    const gemm_overlap *ov, gemm_request **out)
{
    Gemm__Request req = GEMM__REQUEST__INIT;
    Gemm__GemmRequest g;
    Gemm__Operand w[4];
    Gemm__Fill fill = GEMM__FILL__INIT;
    Gemm__Drain drain = GEMM__DRAIN__INIT;
    int rv;

    cli_clear_error();
    if (c == NULL || op == NULL || out == NULL)
        return cli_error(GEMM_ERR_INVALID, "gemm: NULL argument");
    if ((rv = cli_gemm_pack(op, true, &g, w, "gemm")) != GEMM_OK ||
        (rv = overlap_pack(c, ov, &g, &fill, &drain)) != GEMM_OK)
        return rv;
    req.body_case = GEMM__REQUEST__BODY_GEMM;
    req.gemm = &g;
    return cli_req_start(c, &req, "gemm", out);
}

GEMM_API int gemm_submit(gemm_client *c, const gemm_op *op, gemm_request **out)
{
    return gemm_submit_overlapped(c, op, NULL, out);
}

GEMM_API bool gemm_request_done(gemm_request *r)
{
    return r != NULL && atomic_load(&r->done) != 0;
}

GEMM_API int gemm_wait(gemm_request *r, gemm_timings *t)
{
    Gemm__Reply *rep;
    uint64_t rtt = 0;
    int rv;

    cli_clear_error();
    if (r == NULL)
        return cli_error(GEMM_ERR_INVALID, "gemm_wait: request is NULL");
    if ((rv = cli_req_finish(r, &rep, &rtt)) != GEMM_OK)
        return rv;
    /* a GEMM's reply, a Blas3's or a Batch's (the same timings) */
    const Gemm__GemmReply *g =
        rep->body_case == GEMM__REPLY__BODY_GEMM    ? rep->gemm
        : rep->body_case == GEMM__REPLY__BODY_BLAS3 ? rep->blas3
        : rep->body_case == GEMM__REPLY__BODY_BATCH ? rep->batch->gemm
                                                    : NULL;
    if (g == NULL) {
        gemm__reply__free_unpacked(rep, NULL);
        return cli_error(GEMM_ERR_PROTOCOL, "gemm: reply has no gemm body");
    }
    if (t != NULL) {
        t->queued_us = g->queued_us;
        t->compute_us = g->compute_us;
        t->total_us = g->total_us;
        t->round_trip_us = rtt;
        snprintf(t->kernel, sizeof(t->kernel), "%s",
                 g->kernel != NULL ? g->kernel : "");
        t->kernel_ns = g->has_kernel_ns ? g->kernel_ns : 0;
        t->moduli = g->has_moduli ? g->moduli : 0;
    }
    gemm__reply__free_unpacked(rep, NULL);
    return GEMM_OK;
}

GEMM_API int gemm_run(gemm_client *c, const gemm_op *op, gemm_timings *t)
{
    gemm_request *r;
    int rv;

    if ((rv = gemm_submit(c, op, &r)) != GEMM_OK)
        return rv;
    return gemm_wait(r, t);
}

GEMM_API int gemm_tensor_upload(gemm_client *c, const gemm_matrix *src,
                                uint64_t rows, uint64_t cols, gemm_dtype t,
                                uint64_t *tensor_id)
{
    Gemm__Request req = GEMM__REQUEST__INIT;
    Gemm__TensorUploadRequest u = GEMM__TENSOR_UPLOAD_REQUEST__INIT;
    Gemm__Operand o = GEMM__OPERAND__INIT;
    Gemm__Reply *rep;
    int rv;

    cli_clear_error();
    if (c == NULL || src == NULL || tensor_id == NULL)
        return cli_error(GEMM_ERR_INVALID, "tensor upload: NULL argument");
    if (src->buf == NULL)
        return cli_error(GEMM_ERR_INVALID,
                         "tensor upload: the source must be in a buffer");
    cli_wire_operand(&o, &(gemm_matrix){src->buf, src->offset, src->ld, 0});
    u.src = &o;
    u.has_rows = u.has_cols = u.has_dtype = true;
    u.rows = rows;
    u.cols = cols;
    u.dtype = wire_dtype(t);
    req.body_case = GEMM__REQUEST__BODY_TENSOR_UPLOAD;
    req.tensor_upload = &u;
    if ((rv = cli_call(c, &req, "tensor upload", &rep, NULL)) != GEMM_OK)
        return rv;
    if (rep->body_case != GEMM__REPLY__BODY_TENSOR_UPLOAD) {
        gemm__reply__free_unpacked(rep, NULL);
        return cli_error(GEMM_ERR_PROTOCOL,
                         "tensor upload: reply has no tensor_upload body");
    }
    *tensor_id = rep->tensor_upload->tensor_id;
    gemm__reply__free_unpacked(rep, NULL);
    return GEMM_OK;
}

GEMM_API int gemm_tensor_free(gemm_client *c, uint64_t tensor_id)
{
    Gemm__Request req = GEMM__REQUEST__INIT;
    Gemm__TensorFreeRequest f = GEMM__TENSOR_FREE_REQUEST__INIT;
    Gemm__Reply *rep;
    int rv;

    cli_clear_error();
    if (c == NULL)
        return cli_error(GEMM_ERR_INVALID, "tensor free: NULL client");
    f.has_tensor_id = true;
    f.tensor_id = tensor_id;
    req.body_case = GEMM__REQUEST__BODY_TENSOR_FREE;
    req.tensor_free = &f;
    if ((rv = cli_call(c, &req, "tensor free", &rep, NULL)) != GEMM_OK)
        return rv;
    gemm__reply__free_unpacked(rep, NULL);
    return GEMM_OK;
}
