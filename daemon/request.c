/*
 * request.c: decoding and envelope checks of incoming requests.
 */
#include "request.h"

#include <gemm/types.h>

#include <stdio.h>
#include <string.h>

int req_decode(const uint8_t *data, size_t len, size_t max, Gemm__Request **out,
               char *msg, size_t msglen)
{
    *out = NULL;
    if (len > max) {
        snprintf(msg, msglen, "request of %zu bytes exceeds the limit of %zu",
                 len, max);
        return GEMM_ERR_TOO_LARGE;
    }
    *out = gemm__request__unpack(NULL, len, data);
    if (*out == NULL) {
        snprintf(msg, msglen,
                 "cannot decode a %zu-byte request as gemm.Request", len);
        return GEMM_ERR_PROTOCOL;
    }
    return GEMM_OK;
}

int req_check_envelope(const Gemm__Request *rq, char *msg, size_t msglen)
{
    uint32_t ver = rq->has_version ? rq->version : 0;
    if (ver != GEMM_PROTOCOL_VERSION) {
        snprintf(msg, msglen,
                 "protocol version %u is not supported; this gemmd speaks "
                 "version %d",
                 ver, GEMM_PROTOCOL_VERSION);
        return GEMM_ERR_VERSION;
    }
    switch (rq->body_case) {
    case GEMM__REQUEST__BODY_HELLO:
    case GEMM__REQUEST__BODY_STATUS:
    case GEMM__REQUEST__BODY_REGISTER_BUFFER:
    case GEMM__REQUEST__BODY_RELEASE_BUFFER:
    case GEMM__REQUEST__BODY_GEMM:
    case GEMM__REQUEST__BODY_TENSOR_UPLOAD:
    case GEMM__REQUEST__BODY_TENSOR_FREE:
    case GEMM__REQUEST__BODY_LIST_KERNELS:
    case GEMM__REQUEST__BODY_CANCEL:
    case GEMM__REQUEST__BODY_BLAS3:
    case GEMM__REQUEST__BODY_BATCH:
        return GEMM_OK;
    default:
        snprintf(msg, msglen,
                 "request has no body (or one this gemmd does not know)");
        return GEMM_ERR_PROTOCOL;
    }
}

int req_register_check(const Gemm__RegisterBufferRequest *r, char *msg,
                       size_t msglen)
{
    if (!r->has_fd_ticket) {
        snprintf(msg, msglen, "%s",
                 r->name != NULL
                     ? "registration by shm name is no longer served: pass "
                       "the memfd over the descriptor channel and name its "
                       "ticket (libgemmclient 0.2 does)"
                     : "RegisterBuffer needs a descriptor ticket and a size");
        return GEMM_ERR_INVALID;
    }
    if (!r->has_size || r->size == 0) {
        snprintf(msg, msglen, "RegisterBuffer needs a size of at least 1");
        return GEMM_ERR_INVALID;
    }
    return GEMM_OK;
}

void req_operand_desc(val_operand *o, const Gemm__Operand *p)
{
    memset(o, 0, sizeof(*o));
    if (p == NULL)
        return;
    o->present = true;
    o->tensor_id = p->has_tensor_id ? p->tensor_id : 0;
    o->buffer_id = p->has_buffer_id ? p->buffer_id : 0;
    o->offset = p->has_offset ? p->offset : 0;
    o->ld = p->has_ld ? p->ld : 0;
}

void req_fill_desc(val_operand *o, uint32_t *parts, const Gemm__Fill *f)
{
    memset(o, 0, sizeof(*o));
    *parts = 0;
    if (f == NULL)
        return;
    o->present = true;
    o->buffer_id = f->has_buffer_id ? f->buffer_id : 0;
    o->offset = f->has_offset ? f->offset : 0;
    *parts = f->has_parts ? f->parts : 0;
}

void req_gemm_desc(const Gemm__GemmRequest *g, val_gemm *v)
{
    memset(v, 0, sizeof(*v));
    v->m = g->has_m ? g->m : 0;
    v->n = g->has_n ? g->n : 0;
    v->k = g->has_k ? g->k : 0;
    v->ab_type = g->has_ab_type ? (int)g->ab_type : 0;
    v->cd_type = g->has_cd_type ? (int)g->cd_type : 0;
    v->trans_a = g->has_trans_a && g->trans_a;
    v->trans_b = g->has_trans_b && g->trans_b;
    /* alpha64/beta64 over the float fields, to which protobuf-c applies
     * the defaults 1 and 0 */
    v->alpha = g->has_alpha64 ? g->alpha64 : (double)g->alpha;
    v->beta = g->has_beta64 ? g->beta64 : (double)g->beta;
    v->alpha_im = g->has_alpha_imag ? g->alpha_imag : 0.0;
    v->beta_im = g->has_beta_imag ? g->beta_imag : 0.0;
    v->conj_a = g->has_conj_a && g->conj_a;
    v->conj_b = g->has_conj_b && g->conj_b;
    v->precision = g->has_precision ? (int)g->precision : 0;
    v->kernel = g->kernel;
    v->moduli = g->has_moduli ? g->moduli : 0;
    req_operand_desc(&v->a, g->a);
    req_operand_desc(&v->b, g->b);
    req_operand_desc(&v->c, g->c);
    req_operand_desc(&v->d, g->d);
    req_fill_desc(&v->fill, &v->fill_parts, g->fill);
    if (g->drain != NULL) {
        v->drain.present = true;
        v->drain.buffer_id = g->drain->has_buffer_id ? g->drain->buffer_id : 0;
        v->drain.offset = g->drain->has_offset ? g->drain->offset : 0;
    }
}

int req_batch_check(const Gemm__BatchRequest *r, uint64_t *n, char *msg,
                    size_t msglen)
{
    uint64_t count = r->has_count ? r->count : 0;
    if (r->op == NULL) {
        snprintf(msg, msglen,
                 "batch has no op: it gives the types, scalars and (strided) "
                 "the shape and operands of its problems");
        return GEMM_ERR_INVALID;
    }
    if (count != 0 && r->n_problems != 0) {
        snprintf(msg, msglen,
                 "batch has both a count (strided) and %zu problems "
                 "(grouped): give one",
                 r->n_problems);
        return GEMM_ERR_INVALID;
    }
    if (count == 0 && r->n_problems == 0) {
        snprintf(msg, msglen,
                 "batch is empty: give a count (strided) or problems "
                 "(grouped)");
        return GEMM_ERR_INVALID;
    }
    const Gemm__Operand *ops[4] = {r->op->a, r->op->b, r->op->c, r->op->d};
    uint64_t strides[4] = {r->stride_a, r->stride_b, r->stride_c, r->stride_d};
    for (int i = 0; count != 0 && i < 4; i++) {
        if (ops[i] != NULL && ops[i]->has_tensor_id && ops[i]->tensor_id &&
            strides[i] != 0) {
            snprintf(msg, msglen,
                     "operand %c is a resident tensor, one matrix: its "
                     "stride must be 0 (shared by every problem), not %llu",
                     "ABCD"[i], (unsigned long long)strides[i]);
            return GEMM_ERR_INVALID;
        }
    }
    *n = count != 0 ? count : r->n_problems;
    return GEMM_OK;
}

/* o moved by i strides of s bytes; false when the offset overflows. */
static bool operand_at(val_operand *o, uint64_t i, uint64_t s)
{
    uint64_t step;
    if (!o->present || o->tensor_id != 0 || s == 0)
        return true;
    return !__builtin_mul_overflow(i, s, &step) &&
           !__builtin_add_overflow(o->offset, step, &o->offset);
}

int req_batch_problem(const Gemm__BatchRequest *r, const val_gemm *t,
                      uint64_t i, val_gemm *v, char *msg, size_t msglen)
{
    *v = *t;
    if (r->has_count && r->count != 0) {
        val_operand *ops[4] = {&v->a, &v->b, &v->c, &v->d};
        uint64_t strides[4] = {r->stride_a, r->stride_b, r->stride_c,
                               r->stride_d};
        for (int x = 0; x < 4; x++) {
            if (!operand_at(ops[x], i, strides[x])) {
                snprintf(msg, msglen,
                         "operand %c: offset %llu + %llu strides of %llu "
                         "bytes overflows",
                         "ABCD"[x], (unsigned long long)ops[x] -> offset,
                         (unsigned long long)i, (unsigned long long)strides[x]);
                return GEMM_ERR_BOUNDS;
            }
        }
        return GEMM_OK;
    }
    const Gemm__BatchProblem *p = r->problems[i];
    v->m = p->has_m ? p->m : 0;
    v->n = p->has_n ? p->n : 0;
    v->k = p->has_k ? p->k : 0;
    v->trans_a = p->has_trans_a && p->trans_a;
    v->trans_b = p->has_trans_b && p->trans_b;
    req_operand_desc(&v->a, p->a);
    req_operand_desc(&v->b, p->b);
    req_operand_desc(&v->c, p->c);
    req_operand_desc(&v->d, p->d);
    if (p->has_alpha) {
        v->alpha = p->alpha;
        v->beta = p->has_beta ? p->beta : 0.0;
        v->alpha_im = p->has_alpha_imag ? p->alpha_imag : 0.0;
        v->beta_im = p->has_beta_imag ? p->beta_imag : 0.0;
    }
    return GEMM_OK;
}
