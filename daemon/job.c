/*
 * job.c: from a validated GEMM request to a gemmd_job: the problem (shape,
 * types, transposes, scalars, precision, requested kernel and moduli) and
 * the operands' addresses in the mapped buffers or resident tensors. Kept
 * out of dispatch.c so that what a job holds can grow (new types, scalars)
 * without touching the request plumbing.
 */
#include "job.h"

#include <gemm/types.h>

#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

void *job_operand_ptr(const val_matrix *m)
{
    const reg_buffer *b = m->handle;
    if (m->tensor)
        return b->data;
    return (char *)b->base + m->offset;
}

/* Whether operand m is a resident tensor held in device memory. */
static bool operand_on_device(const val_matrix *m)
{
    return m->tensor && ((const reg_buffer *)m->handle)->on_device;
}

int job_fill_gemm(gemmd_job *j, const val_gemm *v, const val_resolved *res)
{
    j->kind = JOB_GEMM;
    j->precision = v->precision;
    j->moduli = (int)v->moduli; /* validated: 0 or 2..20 */
    if (v->kernel != NULL && strcmp(v->kernel, "auto") != 0)
        snprintf(j->kernel, sizeof(j->kernel), "%s", v->kernel);
    j->m = v->m;
    j->n = v->n;
    j->k = v->k;
    j->ab_type = v->ab_type;
    j->cd_type = v->cd_type;
    j->trans_a = v->trans_a;
    j->trans_b = v->trans_b;
    j->conj_a = v->conj_a;
    j->conj_b = v->conj_b;
    j->has_c = res->has_c;
    j->alpha = v->alpha;
    j->beta = v->beta;
    j->alpha_im = v->alpha_im;
    j->beta_im = v->beta_im;
    j->shape = *res;
    j->a = job_operand_ptr(&res->a);
    j->b = job_operand_ptr(&res->b);
    j->d = job_operand_ptr(&res->d);
    j->c = res->has_c ? job_operand_ptr(&res->c) : NULL;
    j->a_dev = operand_on_device(&res->a);
    j->b_dev = operand_on_device(&res->b);
    j->c_dev = res->has_c && operand_on_device(&res->c);
    j->lda = res->a.ld;
    j->ldb = res->b.ld;
    j->ldc = res->has_c ? res->c.ld : 0;
    j->ldd = res->d.ld;
    if (res->has_fill) {
        j->fill = job_operand_ptr(&res->fill);
        j->fill_parts = v->fill_parts;
        j->fill_cut = gemm_fill_cut_of(0, false, false, v->trans_a, v->m, v->n,
                                       v->fill_parts);
        j->fill_cut_b = gemm_fill_cut_gemm_b(v->trans_b, v->k, v->fill_parts);
    }
    if (res->has_drain)
        j->drain = job_operand_ptr(&res->drain);
    return GEMM_OK;
}

void job_request_stop(gemmd_job *j, int why)
{
    atomic_store(&j->stop, why);
    if (j->kind == JOB_BATCH)
        for (uint64_t i = 0; i < j->nproblems; i++)
            atomic_store(&j->problems[i].stop, why);
}

void job_hold(gemmd_job *j, const val_matrix *const *ms, int n)
{
    for (int i = 0; i < n; i++) {
        if (ms[i] == NULL)
            continue;
        j->bufs[j->nbufs] = ms[i]->handle;
        reg_hold(j->bufs[j->nbufs++]);
    }
}

void job_hold_gemm(gemmd_job *j)
{
    const val_matrix *ms[6] = {&j->shape.a,
                               &j->shape.b,
                               &j->shape.d,
                               j->shape.has_c ? &j->shape.c : NULL,
                               j->shape.has_fill ? &j->shape.fill : NULL,
                               j->shape.has_drain ? &j->shape.drain : NULL};
    job_hold(j, ms, 6);
}

void job_set_timeout(gemmd_job *j, uint64_t t_received, bool has,
                     uint32_t timeout_ms)
{
    if (has && timeout_ms > 0)
        j->deadline_ns = t_received + (uint64_t)timeout_ms * 1000000u;
}

uint64_t job_fill_now(const gemmd_job *j)
{
    if (j->fill == NULL)
        return UINT64_MAX;
    return __atomic_load_n(j->fill, __ATOMIC_ACQUIRE);
}

uint64_t job_fill_deadline(const gemmd_job *j)
{
    if (j->deadline_ns != 0)
        return j->deadline_ns;
    return j->t_started + (uint64_t)JOB_FILL_WAIT_MS * 1000000u;
}

int job_fill_state(const gemmd_job *j, uint64_t v, uint64_t need, uint64_t end,
                   char *msg, size_t len)
{
    if (v >= need)
        return GEMM_OK;
    int stop = atomic_load(&j->stop);
    if (stop != 0) {
        snprintf(msg, len,
                 "%s before its operands were filled (fill counter %llu of "
                 "%llu)",
                 stop == JOB_CANCELED ? "canceled" : "the client left",
                 (unsigned long long)v, (unsigned long long)need);
        return stop == JOB_CANCELED ? GEMM_ERR_TIMEOUT : GEMM_ERR_ABANDONED;
    }
    if (gemmd_now_ns() >= end) {
        snprintf(msg, len,
                 "the operands were not filled in time: the fill counter "
                 "stayed at %llu of %llu (the request's timeout_ms, or %d ms "
                 "without one)",
                 (unsigned long long)v, (unsigned long long)need,
                 JOB_FILL_WAIT_MS);
        return GEMM_ERR_TIMEOUT;
    }
    return JOB_FILL_PENDING;
}

void job_fill_pause(unsigned spins)
{
    if (spins < 64) {
        sched_yield();
    } else {
        struct timespec ts = {0, 20000};
        nanosleep(&ts, NULL);
    }
}

int job_fill_wait(gemmd_job *j, uint64_t need)
{
    const uint64_t end = job_fill_deadline(j);
    int rv;
    for (unsigned spins = 0;
         (rv = job_fill_state(j, job_fill_now(j), need, end, j->msg,
                              sizeof(j->msg))) == JOB_FILL_PENDING;
         spins++)
        job_fill_pause(spins);
    return rv;
}
