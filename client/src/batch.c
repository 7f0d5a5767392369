/*
 * batch.c: batched GEMM. A gemm_batch goes on the wire as one
 * BatchRequest: its template op as a GemmRequest (the shape and operands
 * of problem 0 too, for a strided batch) with the count and byte strides,
 * or the list of problems of a grouped batch, each with its shape,
 * transposes, (buffer id, offset, ld) or tensor operands and, when it
 * has them, its own scalars. The reply is a GEMM's timings for the whole
 * batch (gemm_wait()); a refused batch names its bad problems, and
 * request.c keeps the first one's index for gemm_last_error_problem().
 * All validation is the daemon's.
 */
#include "internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

GEMM_API void gemm_batch_init(gemm_batch *b, const gemm_op *op)
{
    if (b == NULL)
        return;
    memset(b, 0, sizeof(*b));
    if (op != NULL)
        b->op = *op;
}

static bool present(const gemm_matrix *m)
{
    return m->buf != NULL || m->tensor != 0;
}

/* Whether the template's beta is not 0 (C is read). */
static bool op_beta_nz(const gemm_op *op)
{
    return op->scalars64 ? op->beta_re != 0.0 || op->beta_im != 0.0
                         : op->beta != 0.0f;
}

/* Problem p on the wire into w, its operands in o[0..3]; tmpl_beta: the
 * template's beta is not 0. */
static void wire_problem(Gemm__BatchProblem *w, Gemm__Operand o[4],
                         const gemm_problem *p, bool tmpl_beta)
{
    gemm__batch_problem__init(w);
    w->has_m = w->has_n = w->has_k = true;
    w->m = p->m;
    w->n = p->n;
    w->k = p->k;
    w->has_trans_a = p->trans_a; /* only when set: fewer bytes */
    w->trans_a = p->trans_a;
    w->has_trans_b = p->trans_b;
    w->trans_b = p->trans_b;
    const gemm_matrix *ms[4] = {&p->a, &p->b, &p->c, &p->d};
    Gemm__Operand **slots[4] = {&w->a, &w->b, &w->c, &w->d};
    bool beta = p->scalars ? p->beta_re != 0.0 || p->beta_im != 0.0 : tmpl_beta;
    for (int x = 0; x < 4; x++) {
        gemm__operand__init(&o[x]);
        if (!present(ms[x]) || (x == 2 && !beta))
            continue;
        cli_wire_operand(&o[x], ms[x]);
        *slots[x] = &o[x];
    }
    if (p->scalars) {
        w->has_alpha = w->has_beta = true;
        w->alpha = p->alpha_re;
        w->beta = p->beta_re;
        w->has_alpha_imag = p->alpha_im != 0.0;
        w->alpha_imag = p->alpha_im;
        w->has_beta_imag = p->beta_im != 0.0;
        w->beta_imag = p->beta_im;
    }
}

GEMM_API int gemm_batch_submit(gemm_client *c, const gemm_batch *b,
                               gemm_request **out)
{
    Gemm__Request req = GEMM__REQUEST__INIT;
    Gemm__BatchRequest br = GEMM__BATCH_REQUEST__INIT;
    Gemm__GemmRequest g;
    Gemm__Operand w[4];
    Gemm__BatchProblem *probs = NULL, **ptrs = NULL;
    Gemm__Operand *ops = NULL;
    int rv;

    cli_clear_error();
    if (c == NULL || b == NULL || out == NULL)
        return cli_error(GEMM_ERR_INVALID, "batch: NULL argument");
    bool strided = b->count != 0;
    if (!strided && b->nproblems != 0 && b->problems == NULL)
        return cli_error(GEMM_ERR_INVALID,
                         "batch: nproblems is %zu but problems is NULL",
                         b->nproblems);
    if ((rv = cli_gemm_pack(&b->op, strided, &g, w, "batch")) != GEMM_OK)
        return rv;
    br.op = &g;
    if (strided) {
        br.has_count = true;
        br.count = b->count;
        br.has_stride_a = br.has_stride_b = true;
        br.has_stride_c = br.has_stride_d = true;
        br.stride_a = b->stride_a;
        br.stride_b = b->stride_b;
        br.stride_c = b->stride_c;
        br.stride_d = b->stride_d;
    } else if (b->nproblems != 0) {
        size_t n = b->nproblems;
        probs = calloc(n, sizeof(*probs));
        ptrs = calloc(n, sizeof(*ptrs));
        ops = calloc(4 * n, sizeof(*ops));
        if (probs == NULL || ptrs == NULL || ops == NULL) {
            rv = cli_error(GEMM_ERR_NOMEM,
                           "batch: out of memory for %zu problems", n);
            goto done;
        }
        bool beta = op_beta_nz(&b->op);
        for (size_t i = 0; i < n; i++) {
            wire_problem(&probs[i], &ops[4 * i], &b->problems[i], beta);
            ptrs[i] = &probs[i];
        }
        br.n_problems = n;
        br.problems = ptrs;
    }
    req.body_case = GEMM__REQUEST__BODY_BATCH;
    req.batch = &br;
    rv = cli_req_start(c, &req, "batch", out); /* packed: copied */
done:
    free(probs);
    free(ptrs);
    free(ops);
    return rv;
}

GEMM_API int gemm_batch_run(gemm_client *c, const gemm_batch *b,
                            gemm_timings *t)
{
    gemm_request *r;
    int rv;

    if ((rv = gemm_batch_submit(c, b, &r)) != GEMM_OK)
        return rv;
    return gemm_wait(r, t);
}
