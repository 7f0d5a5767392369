/*
 * split.c: a large GEMM cut into panels of D across the devices
 * (split.h). Panels are whole multiples of the backend's split_align
 * rows (a tile height on the GPU), as equal as that allows, one on each
 * physical unit (GPU) in placement: device objects of one GPU share its
 * SMs and PCIe link, and each panel copies all of B, so splitting across
 * them only adds traffic (measured: 165 against 171 TFLOP/s at 16384^3
 * bf16 with two objects on one H100). --split-same-gpu splits across
 * every object, to test the split on a host of one GPU.
 */
#include "split.h"
#include "placement.h"
#include "log.h"

#include <gemm/types.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The devices a split GEMM's panels go to, into out: of each physical
 * unit in placement its least loaded object (every object in placement
 * with --split-same-gpu). Returns how many. Under s->mu. */
static unsigned split_targets(sched *s, unsigned out[GEMMD_MAX_DEVICES])
{
    unsigned n = 0;
    for (unsigned i = 0; i < s->ndevs; i++) {
        if (s->devs[i].out)
            continue;
        unsigned g = s->be->group[i], k = 0;
        while (!s->split_same_gpu && k < n && s->be->group[out[k]] != g)
            k++;
        if (s->split_same_gpu || k == n)
            out[n++] = i;
        else if (s->devs[i].load_ns < s->devs[out[k]].load_ns)
            out[k] = i;
    }
    return n;
}

bool split_wanted(sched *s, const gemmd_job *j)
{
    unsigned targets[GEMMD_MAX_DEVICES];
    /* a GEMM filled by parts runs whole: its parts are counted in its
     * rows */
    if (j->kind != JOB_GEMM || s->split_volume == 0 || j->split != NULL ||
        j->fill != NULL || split_targets(s, targets) < 2)
        return false;
    uint64_t align = s->be->split_align ? s->be->split_align : 1;
    if (j->m < 2 * align)
        return false;
    /* m*n*k >= volume, without overflow */
    double vol = (double)j->m * (double)j->n * (double)j->k;
    return vol >= (double)s->split_volume;
}

/* Makes panel p of whole j: rows [r0, r0 + rows) of D. */
static void make_part(gemmd_job *p, const gemmd_job *j, uint64_t r0,
                      uint64_t rows, split_parent *sp)
{
    size_t es = gemm_dtype_size(j->ab_type), cs = gemm_dtype_size(j->cd_type);
    *p = *j;
    memset(&p->ev, 0, sizeof(p->ev));
    p->next = NULL;
    p->split = sp;
    p->slot = NULL;
    p->m = rows;
    if (j->trans_a) { /* A is k x m: the panel is columns r0.. */
        p->a = (const char *)j->a + r0 * es;
        p->shape.a.cols = rows;
    } else {
        p->a = (const char *)j->a + r0 * j->lda * es;
        p->shape.a.rows = rows;
    }
    if (j->has_c) {
        p->c = (const char *)j->c + r0 * j->ldc * cs;
        p->shape.c.rows = rows;
    }
    p->d = (char *)j->d + r0 * j->ldd * cs;
    p->shape.d.rows = rows;
    p->drain = NULL; /* a hint: a part's rows are not the whole's prefix */
}

int split_submit(sched *s, gemmd_job *j)
{
    gemmd_backend *be = s->be;
    char kname[sizeof(j->kernel)] = "";
    if (be->ops->split_kernel != NULL &&
        !be->ops->split_kernel(be, j, kname, sizeof(kname)))
        return GEMM_ERR_UNSUPPORTED; /* placed whole */
    unsigned targets[GEMMD_MAX_DEVICES];
    unsigned ndev = split_targets(s, targets);
    uint64_t align = be->split_align ? be->split_align : 1;
    uint64_t per = (j->m + ndev - 1) / ndev;
    per = (per + align - 1) / align * align;
    unsigned nparts = (unsigned)((j->m + per - 1) / per);
    split_parent *sp = calloc(1, sizeof(*sp));
    gemmd_job *parts = calloc(nparts, sizeof(*parts));
    if (sp == NULL || parts == NULL) {
        free(sp);
        free(parts);
        return GEMM_ERR_NOMEM;
    }
    sp->whole = j;
    sp->parts = parts;
    sp->nparts = nparts;
    sp->left = nparts;
    atomic_init(&sp->fate, SPLIT_UNDECIDED);
    j->split = sp;
    for (unsigned i = 0; i < nparts; i++) {
        uint64_t r0 = i * per;
        uint64_t rows = r0 + per <= j->m ? per : j->m - r0;
        make_part(&parts[i], j, r0, rows, sp);
        if (kname[0] != '\0')
            snprintf(parts[i].kernel, sizeof(parts[i].kernel), "%s", kname);
        parts[i].device = targets[i];
        parts[i].cost_ns = place_cost(s, &parts[i], targets[i]);
    }
    gemmd_log(LOG_DEBUG, "split a %llux%llux%llu GEMM into %u panels of %llu",
              (unsigned long long)j->m, (unsigned long long)j->n,
              (unsigned long long)j->k, nparts, (unsigned long long)per);
    return GEMM_OK;
}

bool split_part_runs(gemmd_job *j, uint64_t now_ns)
{
    int want = j->deadline_ns != 0 && now_ns > j->deadline_ns ? SPLIT_EXPIRED
                                                              : SPLIT_RUN;
    int fate = SPLIT_UNDECIDED;
    if (atomic_compare_exchange_strong(&j->split->fate, &fate, want))
        return want == SPLIT_RUN;
    return fate == SPLIT_RUN; /* decided by another panel */
}

gemmd_job *split_part_done(sched *s, gemmd_job *part)
{
    split_parent *sp = part->split;
    pthread_mutex_lock(&s->mu);
    bool last = --sp->left == 0;
    pthread_mutex_unlock(&s->mu);
    if (!last)
        return NULL;
    gemmd_job *j = sp->whole;
    j->status = GEMM_OK;
    j->t_started = UINT64_MAX;
    j->t_finished = 0;
    j->ns_h2d = j->ns_kernel = j->ns_d2h = 0;
    j->ran_moduli = 0;
    for (unsigned i = 0; i < sp->nparts; i++) {
        gemmd_job *p = &sp->parts[i];
        if (p->status != GEMM_OK && j->status == GEMM_OK) {
            j->status = p->status;
            snprintf(j->msg, sizeof(j->msg),
                     "panel %u of %u on device %u: %.200s", i, sp->nparts,
                     p->device, p->msg);
        }
        if (p->t_started < j->t_started)
            j->t_started = p->t_started;
        if (p->t_finished > j->t_finished)
            j->t_finished = p->t_finished;
        /* the panels overlap: the whole's stages are the longest */
        if (p->ns_h2d > j->ns_h2d)
            j->ns_h2d = p->ns_h2d;
        if (p->ns_kernel > j->ns_kernel)
            j->ns_kernel = p->ns_kernel;
        if (p->ns_d2h > j->ns_d2h)
            j->ns_d2h = p->ns_d2h;
        /* panels of one shape class use the same count; if the auto
         * choice differed between them, the largest */
        if (p->ran_moduli > j->ran_moduli)
            j->ran_moduli = p->ran_moduli;
    }
    snprintf(j->ran, sizeof(j->ran), "%s", sp->parts[0].ran);
    j->device = sp->parts[0].device;
    j->split = NULL;
    free(sp->parts);
    free(sp);
    return j;
}
