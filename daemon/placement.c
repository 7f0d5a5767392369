/*
 * placement.c: the device that finishes a job first (placement.h). The
 * estimate is deliberately plain: flops over the backend's rate plus
 * bytes over its copy rate, the same for every device of a backend, so
 * what decides is the work already queued on each device and where the
 * job's resident tensors are.
 */
#include "placement.h"

#include <gemm/types.h>

/* 2*m*n*k real flops (a complex multiply-add is four). */
static double job_flops(const gemmd_job *j)
{
    double f = 2.0 * (double)j->m * (double)j->n * (double)j->k;
    if (j->ab_type == GEMM_COMPLEX64 || j->ab_type == GEMM_COMPLEX128)
        f *= 4.0;
    return f;
}

/* Bytes j moves between the host and the device: operands that are not
 * resident in, D out. */
static double job_bytes(const gemmd_job *j)
{
    if (j->kind == JOB_UPLOAD)
        return (double)j->rows * j->cols * gemm_dtype_size(j->dtype);
    double es = (double)gemm_dtype_size(j->ab_type);
    double cs = (double)gemm_dtype_size(j->cd_type);
    double b = (double)j->m * j->n * cs;
    if (!j->a_dev)
        b += (double)j->m * j->k * es;
    if (!j->b_dev)
        b += (double)j->k * j->n * es;
    if (j->has_c && !j->c_dev)
        b += (double)j->m * j->n * cs;
    return b;
}

void place_work(const gemmd_job *j, double *flops, double *bytes)
{
    *flops = job_flops(j);
    *bytes = job_bytes(j);
}

double place_cost(sched *s, const gemmd_job *j, unsigned dev)
{
    const gemmd_backend *be = s->be;
    if (j->kind == JOB_BATCH) /* its problems' resident tensors not
                                 counted: one batch, one device */
        return (j->work_bytes / be->copy_rate +
                j->work_flops / be->flops_rate) *
               1e9;
    double ns = job_bytes(j) / be->copy_rate * 1e9;
    if (j->kind == JOB_GEMM)
        ns += job_flops(j) / be->flops_rate * 1e9;
    if (be->ops->tensor_devices == NULL)
        return ns;
    for (int i = 0; i < j->nbufs; i++) {
        const reg_buffer *t = j->bufs[i];
        if (t->kind != REG_TENSOR || t->pin == NULL)
            continue;
        uint32_t on = be->ops->tensor_devices(s->be, t->pin);
        if ((on & (1u << dev)) == 0)
            ns += (double)t->size / be->peer_rate * 1e9;
    }
    return ns;
}

unsigned place_healthy(const sched *s)
{
    unsigned n = 0;
    for (unsigned i = 0; i < s->ndevs; i++)
        n += !s->devs[i].out;
    return n;
}

unsigned place_choose(sched *s, gemmd_job *j)
{
    if (s->ndevs == 1) {
        j->cost_ns = place_cost(s, j, 0);
        return 0;
    }
    bool any = place_healthy(s) > 0;
    unsigned best = 0;
    double best_t = 0, best_cost = 0;
    bool found = false;
    for (unsigned k = 0; k < s->ndevs; k++) {
        unsigned i = (s->rr + k) % s->ndevs;
        if (any && s->devs[i].out)
            continue;
        double cost = place_cost(s, j, i);
        double t = s->devs[i].load_ns + cost;
        if (!found || t < best_t) {
            found = true;
            best = i;
            best_t = t;
            best_cost = cost;
        }
    }
    s->rr = (best + 1) % s->ndevs;
    j->cost_ns = best_cost;
    return best;
}
