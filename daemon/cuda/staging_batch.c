/*
 * staging_batch.c: the CUDA backend's batch hook. A batch of 16-bit and
 * wide (fp64, complex) problems runs in one gemmk_gemm_grouped call (one
 * launch of the grouped kernel per transpose pair for the 16-bit ones,
 * cuBLAS's batched calls for the wide ones) instead of one staged GEMM
 * per problem.
 *
 * Staging is per distinct host range, not per problem, by the plan of
 * batch_ranges.h: each merged input range is one cudaMemcpyAsync in,
 * its operands read at the same offsets and leading dimensions on the
 * device (a strided batch stays strided, so the library runs it through
 * 3-D tensor maps or one strided-batched cuBLAS call); each merged range
 * of dense Ds is one copy back; operands of other layouts are staged as
 * a single GEMM stages them, pitched. A wide problem's C is staged as
 * the others' (the library copies it into D, which it updates in
 * place). Resident operands are read where they are, this device's
 * copies of them (made first when missing). All of it is one device
 * allocation; when the daemon's device-memory limit does not allow it at
 * once the hook declines and the problems run one by one.
 */
#include "cuda/staging_batch.h"
#include "batch_ranges.h"
#include "cuda/migrate.h"
#include "cuda/staging.h"

#include <gemm/types.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static bool wide_type(int t)
{
    return t > 0 && t < 32 && (GEMMK_WIDE_TYPES & (1u << t)) != 0;
}

/* Whether gemmk_gemm_grouped runs batch j as the problems would run one
 * by one: bf16/fp16 and wide inputs with "auto" (or a grouped kernel
 * named, 16-bit inputs only), or "cublas" on wide inputs alone (for them
 * "auto" is that cuBLAS call). */
static bool batch_fits(const gemmd_job *j)
{
    const bool named = j->kernel[0] != '\0' && !gemmk_is_auto(j->kernel);
    const bool cublas = named && strcmp(j->kernel, "cublas") == 0;
    const bool grouped = named && (strcmp(j->kernel, "grouped128x128") == 0 ||
                                   strcmp(j->kernel, "grouped128x256") == 0);
    if (named && !cublas && !grouped)
        return false;
    for (uint64_t i = 0; i < j->nproblems; i++) {
        const gemmd_job *p = &j->problems[i];
        if (p->m == 0 || p->n == 0) /* not run (nor filled in) */
            continue;
        const bool half = p->ab_type == GEMM_BF16 || p->ab_type == GEMM_FP16;
        const bool wide = wide_type(p->ab_type);
        if (!(half && !cublas) && !(wide && !grouped))
            return false;
    }
    return true;
}

int cuda_stage_batch(cuda_worker *w, gemmd_job *j, bool *declined)
{
    int rv = GEMM_OK;
    char *m = j->msg;
    size_t ml = sizeof(j->msg);
    *declined = false;
    if (!batch_fits(j)) {
        *declined = true;
        return GEMM_OK;
    }
    size_t np = 0; /* problems that run */
    for (uint64_t i = 0; i < j->nproblems; i++)
        np += j->problems[i].m != 0 && j->problems[i].n != 0;
    if (np == 0 || np > 0x7fffffff) {
        *declined = true;
        return GEMM_OK;
    }
    brange_op *ops = calloc(4 * np, sizeof(*ops));
    brange_op **scratch = calloc(4 * np, sizeof(*scratch));
    brange *ranges = calloc(4 * np, sizeof(*ranges));
    gemmk_problem *kp = calloc(np, sizeof(*kp));
    int *index = calloc(np, sizeof(*index)); /* kp's problem in the batch */
    cuda_local *loc = calloc(j->nproblems, sizeof(*loc));
    uint64_t began = 0; /* problems whose loc needs cuda_local_end */
    uint8_t *base = NULL;
    size_t bytes = 0, nops = 0, nrin = 0, nrout = 0;
    if (!ops || !scratch || !ranges || !kp || !index || !loc) {
        snprintf(m, ml, "out of host memory for a batch of %zu problems", np);
        rv = GEMM_ERR_NOMEM;
        goto out;
    }

    /* resident operands at this device's copies for the batch's run */
    while (began < j->nproblems) {
        gemmd_job *p = &j->problems[began];
        if ((rv = cuda_local_begin(w, p, &loc[began++])) != GEMM_OK) {
            j->failed = began - 1;
            snprintf(m, ml, "problem %llu: %.200s",
                     (unsigned long long)j->failed, p->msg);
            goto out;
        }
    }

    /* the operands, their ranges and places in the device block */
    for (uint64_t i = 0, q = 0; i < j->nproblems; i++) {
        const gemmd_job *p = &j->problems[i];
        if (p->m == 0 || p->n == 0)
            continue;
        size_t es = gemm_dtype_size(p->ab_type);
        size_t cs = gemm_dtype_size(p->cd_type);
        index[q++] = (int)i;
        /* a copy never spans two buffers (two mappings, and two pinned
         * registrations, even where their addresses touch); resident
         * operands are not copied */
        if (!p->a_dev) {
            brange_op_set(&ops[nops], (int)i, BRANGE_A, p->a, p->shape.a.rows,
                          p->shape.a.cols, p->lda, es);
            ops[nops++].region = (uintptr_t)p->shape.a.handle;
        }
        if (!p->b_dev) {
            brange_op_set(&ops[nops], (int)i, BRANGE_B, p->b, p->shape.b.rows,
                          p->shape.b.cols, p->ldb, es);
            ops[nops++].region = (uintptr_t)p->shape.b.handle;
        }
        if (p->has_c && !p->c_dev) {
            brange_op_set(&ops[nops], (int)i, BRANGE_C, p->c, p->m, p->n,
                          p->ldc, cs);
            ops[nops++].region = (uintptr_t)p->shape.c.handle;
        }
        brange_op_set(&ops[nops], (int)i, BRANGE_D, p->d, p->m, p->n, p->ldd,
                      cs);
        ops[nops++].region = (uintptr_t)p->shape.d.handle;
    }
    bytes = brange_plan(ops, nops, scratch, ranges, &nrin, &nrout);

    rv = cuda_dev_alloc(w, bytes, (void **)&base, m, ml);
    if (rv == GEMM_ERR_DEVICE_MEMORY) { /* one by one needs less at once */
        *declined = true;
        m[0] = '\0';
        rv = GEMM_OK;
        goto out;
    }
    if (rv != GEMM_OK)
        goto out;

    CK(cudaEventRecord(w->ev[0], w->stream), m, ml);
    for (size_t r = 0; r < nrin; r++)
        CK(cudaMemcpyAsync(base + ranges[r].off, (const void *)ranges[r].lo,
                           ranges[r].hi - ranges[r].lo, cudaMemcpyHostToDevice,
                           w->stream),
           m, ml);
    for (size_t i = 0; i < nops; i++) {
        const brange_op *o = &ops[i];
        if (o->ranged || o->which == BRANGE_D)
            continue;
        CK(cudaMemcpy2DAsync(base + o->off, o->dld * o->es, o->src,
                             o->ld * o->es, o->cols * o->es, o->rows,
                             cudaMemcpyHostToDevice, w->stream),
           m, ml);
    }
    CK(cudaEventRecord(w->ev[1], w->stream), m, ml);

    /* the problems on the staged copies (every problem has its D's op),
     * in batch order; resident operands as cuda_job_problem has them */
    for (size_t i = 0, q = 0; i < nops; q++) {
        const gemmd_job *p = &j->problems[ops[i].problem];
        gemmk_problem *k = &kp[q];
        *k = cuda_job_problem(p);
        if (p->a_dev)
            k->a = p->a, k->lda = (int64_t)p->lda;
        if (p->b_dev)
            k->b = p->b, k->ldb = (int64_t)p->ldb;
        if (p->c_dev)
            k->c = p->c, k->ldc = (int64_t)p->ldc;
        for (; i < nops && ops[i].problem == index[q]; i++) {
            const brange_op *o = &ops[i];
            void *dev = brange_dev(o, base);
            int64_t ld = (int64_t)o->dld;
            if (o->which == BRANGE_A)
                k->a = dev, k->lda = ld;
            else if (o->which == BRANGE_B)
                k->b = dev, k->ldb = ld;
            else if (o->which == BRANGE_C)
                k->c = dev, k->ldc = ld;
            else
                k->d = dev, k->ldd = ld;
        }
        if (!p->has_c)
            k->ldc = k->ldd;
    }
    gemmk_result res;
    rv = gemmk_gemm_grouped(w->kctx, kp, (int)np, w->stream, &res);
    snprintf(j->ran, sizeof(j->ran), "%s",
             res.kernel != NULL ? res.kernel : "grouped128x128");
    if (rv != GEMM_OK) {
        int at = -1;
        const char *why = res.msg;
        if (sscanf(res.msg, "problem %d:", &at) == 1 && at >= 0 &&
            (size_t)at < np) {
            j->failed = (uint64_t)index[at];
            why = strchr(res.msg, ':') + 1;
        }
        snprintf(m, ml, "problem %llu: kernel %s failed (%s):%.160s",
                 (unsigned long long)j->failed, j->ran, gemm_strerror(rv), why);
        goto out;
    }
    CK(cudaEventRecord(w->ev[2], w->stream), m, ml);

    for (size_t r = nrin; r < nrin + nrout; r++)
        CK(cudaMemcpyAsync((void *)ranges[r].lo, base + ranges[r].off,
                           ranges[r].hi - ranges[r].lo, cudaMemcpyDeviceToHost,
                           w->stream),
           m, ml);
    for (size_t i = 0; i < nops; i++) {
        const brange_op *o = &ops[i];
        if (o->ranged || o->which != BRANGE_D)
            continue;
        CK(cudaMemcpy2DAsync((void *)o->src, o->ld * o->es, base + o->off,
                             o->dld * o->es, o->cols * o->es, o->rows,
                             cudaMemcpyDeviceToHost, w->stream),
           m, ml);
    }
    CK(cudaEventRecord(w->ev[3], w->stream), m, ml);
    CK(cudaStreamSynchronize(w->stream), m, ml);
    if ((rv = cuda_stage_times(w, j)) != GEMM_OK)
        goto fail;
    j->nran = np;
out:
fail:
    cuda_dev_free(w, base, bytes);
    if (rv != GEMM_OK || *declined)
        cudaStreamSynchronize(w->stream);
    free(ops);
    free(scratch);
    free(ranges);
    free(kp);
    free(index);
    for (uint64_t i = 0; i < began; i++)
        cuda_local_end(w, &j->problems[i], &loc[i]);
    free(loc);
    return rv;
}
