/*
 * blas3.c: the Blas3 request kind, from the body to a queued job (see
 * blas3.h). It follows do_gemm in dispatch.c step by step: describe,
 * validate (validate_blas3.c), build the job, admit, hold the buffers,
 * submit. The job's reply is the GEMM's (complete.c), in the `blas3`
 * body.
 */
#include "blas3.h"
#include "admit.h"
#include "complete.h"
#include "request.h"

#include <gemm/types.h>

#include <stdlib.h>
#include <string.h>

void blas3_desc(const Gemm__Blas3Request *r, val_blas3 *v)
{
    memset(v, 0, sizeof(*v));
    v->routine = r->has_routine ? (int)r->routine : 0;
    v->dtype = r->has_dtype ? (int)r->dtype : 0;
    v->right = r->has_right && r->right;
    v->lower = r->has_lower && r->lower;
    v->trans = r->has_trans ? (int)r->trans : VAL_OP_N;
    v->unit = r->has_unit_diag && r->unit_diag;
    v->m = r->has_m ? r->m : 0;
    v->n = r->has_n ? r->n : 0;
    v->k = r->has_k ? r->k : 0;
    v->alpha = r->alpha; /* protobuf-c applies the default 1 */
    v->alpha_im = r->has_alpha_imag ? r->alpha_imag : 0.0;
    v->beta = r->has_beta ? r->beta : 0.0;
    v->beta_im = r->has_beta_imag ? r->beta_imag : 0.0;
    req_operand_desc(&v->a, r->a);
    req_operand_desc(&v->b, r->b);
    req_operand_desc(&v->c, r->c);
    req_fill_desc(&v->fill, &v->fill_parts, r->fill);
}

static bool on_device(const val_matrix *m)
{
    return m->tensor && ((const reg_buffer *)m->handle)->on_device;
}

void blas3_job_fill(gemmd_job *j, const val_blas3 *v,
                    const val_blas3_resolved *res)
{
    bool tri = v->routine == VAL_TRMM || v->routine == VAL_TRSM;
    bool rank = !tri && v->routine != VAL_SYMM && v->routine != VAL_HEMM;
    j->kind = JOB_BLAS3;
    j->routine = v->routine;
    j->right = v->right;
    j->lower = v->lower;
    j->unit_diag = v->unit;
    j->op = v->trans;
    j->ab_type = j->cd_type = v->dtype;
    j->m = rank ? v->n : v->m;
    j->n = v->n;
    /* k: the inner dimension, so that 2mnk counts the GEMM-equivalent
     * work in the daemon's flop counter */
    j->k = rank ? v->k : (v->right ? v->n : v->m);
    j->alpha = v->alpha;
    j->alpha_im = v->alpha_im;
    j->beta = v->beta;
    j->beta_im = v->beta_im;
    j->has_c = res->reads_out;
    j->a = job_operand_ptr(&res->a);
    j->lda = res->a.ld;
    j->a_dev = on_device(&res->a);
    j->shape.a = res->a;
    const val_matrix *out = tri ? &res->b : &res->c;
    if (!tri && res->has_b) {
        j->b = job_operand_ptr(&res->b);
        j->ldb = res->b.ld;
        j->b_dev = on_device(&res->b);
        j->shape.b = res->b;
    }
    j->d = job_operand_ptr(out);
    j->ldd = out->ld;
    j->shape.d = *out;
    j->shape.has_c = res->reads_out;
    if (res->has_fill) {
        j->fill = job_operand_ptr(&res->fill);
        j->fill_parts = v->fill_parts;
        j->fill_cut = gemm_fill_cut_of(v->routine, v->right, v->lower, v->trans,
                                       j->m, j->n, v->fill_parts);
    }
}

void blas3_handle(gemmd *d, sp_req *q, const Gemm__Request *req)
{
    const Gemm__Blas3Request *r = req->blas3;
    conn *c = q->conn;
    val_blas3 v;
    blas3_desc(r, &v);
    val_limits lim = {.max_dim = d->cfg.max_dim,
                      .tensor_lookup = reg_scope_tensor};
    reg_scope la = {&d->reg, c->id};
    val_blas3_resolved res;
    char msg[512];
    int rv = val_blas3_check(&v, &lim, reg_scope_buffer, &la, &res, msg,
                             sizeof(msg));
    if (rv != GEMM_OK) {
        complete_error(d, q, rv, "%s", msg);
        return;
    }
    gemmd_job *j = calloc(1, sizeof(*j));
    if (j == NULL) {
        complete_error(d, q, GEMM_ERR_NOMEM, "out of memory for a job");
        return;
    }
    blas3_job_fill(j, &v, &res);
    uint64_t mem =
        d->be.ops->job_memory != NULL ? d->be.ops->job_memory(&d->be, j) : 0;
    if ((rv = admit_work(d, c, mem, msg, sizeof(msg))) != GEMM_OK) {
        free(j);
        complete_error(d, q, rv, "%s", msg);
        return;
    }
    const val_matrix *ms[4] = {&res.a, res.has_b ? &res.b : NULL,
                               res.has_c ? &res.c : NULL,
                               res.has_fill ? &res.fill : NULL};
    job_hold(j, ms, 4);
    job_set_timeout(j, q->t_received, r->has_timeout_ms, r->timeout_ms);
    if (admit_submit(d, q, j, mem) != GEMM_OK)
        complete_error(d, q, GEMM_ERR_NOMEM, "out of memory for a queue");
}
