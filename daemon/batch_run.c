/*
 * batch_run.c: a batch on a worker (gemmd_batch_run in backend.h). The
 * problems run one after another through the backend's own GEMM path, so
 * every type, transpose, resident tensor and kernel a single GEMM serves
 * a batch serves the same way, on both backends. A backend with a batch
 * hook (the CUDA backend's grouped kernel) may take the whole batch in
 * one launch first; the loop here is the fallback when it declines.
 */
#include "backend.h"
#include "slice.h"

#include <gemm/types.h>

#include <stdio.h>

/* Whether batch j must stop now (its client left or canceled); if so
 * sets j->msg. Runs j's between hook first when due. */
static bool batch_yield(gemmd_job *j, uint64_t i, uint64_t *t_yield)
{
    uint64_t now = gemmd_now_ns();
    if (j->between != NULL && now - *t_yield >= BATCH_YIELD_NS &&
        atomic_load(&j->stop) == JOB_RUN) {
        j->between(j->between_arg, j);
        *t_yield = gemmd_now_ns();
    }
    int why = atomic_load(&j->stop);
    if (why == JOB_RUN)
        return false;
    snprintf(j->msg, sizeof(j->msg),
             "%s while running, after %llu of %llu problems: their Ds "
             "are written, the others' not",
             why == JOB_CLOSED ? "its connection closed" : "canceled",
             (unsigned long long)i, (unsigned long long)j->nproblems);
    return true;
}

int gemmd_batch_run(gemmd_backend *be, gemmd_job *j)
{
    uint64_t t_yield = gemmd_now_ns();
    j->nran = 0;
    j->ns_h2d = j->ns_kernel = j->ns_d2h = 0;
    if (be->ops->batch != NULL) {
        if (batch_yield(j, 0, &t_yield))
            return slice_stopped(j);
        bool declined = false;
        int rv = be->ops->batch(be, j, &declined);
        if (!declined)
            return rv;
        j->nran = 0;
        j->msg[0] = '\0';
    }
    for (uint64_t i = 0; i < j->nproblems; i++) {
        gemmd_job *p = &j->problems[i];
        if (p->m == 0 || p->n == 0)
            continue;
        if (batch_yield(j, i, &t_yield))
            return slice_stopped(j);
        p->device = j->device;
        p->owner = j->owner;
        p->t_received = j->t_received;
        p->between = j->between;
        p->between_arg = j->between_arg;
        p->t_started = gemmd_now_ns();
        int rv = be->ops->gemm(be, p);
        p->t_finished = gemmd_now_ns();
        if (rv != GEMM_OK) {
            j->failed = i;
            snprintf(j->msg, sizeof(j->msg), "problem %llu: %.200s",
                     (unsigned long long)i,
                     p->msg[0] ? p->msg : gemm_strerror(rv));
            return rv;
        }
        if (j->nran++ == 0)
            snprintf(j->ran, sizeof(j->ran), "%s", p->ran);
        j->ns_h2d += p->ns_h2d;
        j->ns_kernel += p->ns_kernel;
        j->ns_d2h += p->ns_d2h;
    }
    return GEMM_OK;
}
