/*
 * proto_util.h: helpers the fuzz targets share over decoded requests.
 */
#ifndef GEMM_FUZZ_PROTO_UTIL_H
#define GEMM_FUZZ_PROTO_UTIL_H

#include "gemm.pb-c.h"

#include <stdbool.h>
#include <stddef.h>

/* Unknown fields anywhere in the request (protobuf-c keeps them as read,
 * even an overlong tag 0, and packs them back in a form it may refuse). */
static inline bool has_unknown(const Gemm__Request *rq)
{
    const ProtobufCMessage *m[6] = {&rq->base};
    size_t k = 1;
    switch (rq->body_case) {
    case GEMM__REQUEST__BODY_HELLO:
        m[k++] = &rq->hello->base;
        break;
    case GEMM__REQUEST__BODY_STATUS:
        m[k++] = &rq->status->base;
        break;
    case GEMM__REQUEST__BODY_REGISTER_BUFFER:
        m[k++] = &rq->register_buffer->base;
        break;
    case GEMM__REQUEST__BODY_RELEASE_BUFFER:
        m[k++] = &rq->release_buffer->base;
        break;
    case GEMM__REQUEST__BODY_GEMM:
        m[k++] = &rq->gemm->base;
        const Gemm__Operand *ops[] = {rq->gemm->a, rq->gemm->b, rq->gemm->c,
                                      rq->gemm->d};
        for (size_t i = 0; i < 4; i++)
            if (ops[i] != NULL)
                m[k++] = &ops[i]->base;
        break;
    case GEMM__REQUEST__BODY_TENSOR_UPLOAD:
        m[k++] = &rq->tensor_upload->base;
        if (rq->tensor_upload->src != NULL)
            m[k++] = &rq->tensor_upload->src->base;
        break;
    case GEMM__REQUEST__BODY_TENSOR_FREE:
        m[k++] = &rq->tensor_free->base;
        break;
    case GEMM__REQUEST__BODY_LIST_KERNELS:
        m[k++] = &rq->list_kernels->base;
        break;
    case GEMM__REQUEST__BODY_CANCEL:
        m[k++] = &rq->cancel->base;
        break;
    case GEMM__REQUEST__BODY_BLAS3: {
        m[k++] = &rq->blas3->base;
        const Gemm__Operand *b3[] = {rq->blas3->a, rq->blas3->b, rq->blas3->c};
        for (size_t i = 0; i < 3; i++)
            if (b3[i] != NULL)
                m[k++] = &b3[i]->base;
        break;
    }
    case GEMM__REQUEST__BODY_BATCH: {
        const Gemm__BatchRequest *b = rq->batch;
        if (b->base.n_unknown_fields != 0)
            return true;
        const Gemm__GemmRequest *op = b->op;
        if (op != NULL) {
            const Gemm__Operand *ops[] = {op->a, op->b, op->c, op->d};
            if (op->base.n_unknown_fields != 0)
                return true;
            for (size_t i = 0; i < 4; i++)
                if (ops[i] != NULL && ops[i]->base.n_unknown_fields != 0)
                    return true;
        }
        for (size_t p = 0; p < b->n_problems; p++) {
            const Gemm__BatchProblem *q = b->problems[p];
            const Gemm__Operand *ops[] = {q->a, q->b, q->c, q->d};
            if (q->base.n_unknown_fields != 0)
                return true;
            for (size_t i = 0; i < 4; i++)
                if (ops[i] != NULL && ops[i]->base.n_unknown_fields != 0)
                    return true;
        }
        break;
    }
    default:
        break;
    }
    for (size_t i = 0; i < k; i++)
        if (m[i]->n_unknown_fields != 0)
            return true;
    return false;
}

#endif
