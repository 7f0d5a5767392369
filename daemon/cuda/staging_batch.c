/*
 * staging_batch.c: the CUDA backend's batch hook. A batch of 16-bit
 * problems runs in one gemmk_gemm_grouped call (one launch of the grouped
 * kernel per transpose pair) instead of one staged GEMM per problem.
 *
 * Staging is per distinct host range, not per problem: the inputs (A, B,
 * C) that the kernels can read where they lie (16-byte aligned, leading
 * dimension a multiple of 8) are sorted by address and merged when they
 * overlap, touch, or start in the page after the range's last one; each
 * merged range is copied in with one cudaMemcpyAsync, its operands read
 * at the same offsets and leading dimensions on the device (a strided
 * batch's As are one range, one copy). Ds stored densely (ldd == n, n a
 * multiple of 8, aligned) that touch one another are one range copied back with
 * one copy; a copy back never spans bytes the batch does not write, since
 * another request may be writing them. Operands of other layouts are
 * staged as a single GEMM stages them, with a pitch of 8 elements. All
 * of it is one device allocation; when the daemon's device-memory limit
 * does not allow it at once the hook declines and the problems run one
 * by one.
 */
#include "cuda/staging_batch.h"
#include "cuda/staging.h"

#include <gemm/types.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Input operands within the same or the next page share one copy (the
 * bytes between them then lie in pages the operands touch, so mapped). */
#define RANGE_PAGE 4096

/* Slack allowed in an operand's span over its elements (bytes). */
#define RANGE_GAP 4096

/* Device placement granularity (cudaMalloc's alignment). */
#define DEV_ALIGN 256

enum { OP_A, OP_B, OP_C, OP_D };

/* One operand of one problem, host side and device side. */
typedef struct operand {
    int problem;         /* index in the batch */
    int which;           /* OP_A .. OP_D */
    uintptr_t lo, hi;    /* host bytes it spans */
    const void *src;     /* host address of element (0, 0) */
    uint64_t rows, cols; /* as stored */
    uint64_t ld;         /* host leading dimension, elements */
    size_t es;           /* element bytes */
    bool ranged;         /* copied with its range, else pitched */
    size_t off;          /* in the device block: its range's or its own */
    uint64_t dld;        /* device leading dimension */
    uintptr_t range_lo;  /* ranged: its range's first host byte */
} operand;

/* A merged host range and its place in the device block. */
typedef struct range {
    uintptr_t lo, hi;
    size_t off;
} range;

static size_t round_up(size_t x, size_t to)
{
    return (x + to - 1) / to * to;
}

static int by_lo(const void *x, const void *y)
{
    const operand *a = *(const operand *const *)x;
    const operand *b = *(const operand *const *)y;
    return a->lo < b->lo ? -1 : a->lo > b->lo ? 1 : 0;
}

static void operand_set(operand *o, int problem, int which, const void *src,
                        uint64_t rows, uint64_t cols, uint64_t ld, size_t es)
{
    memset(o, 0, sizeof(*o));
    o->problem = problem;
    o->which = which;
    o->src = src;
    o->rows = rows;
    o->cols = cols;
    o->ld = ld;
    o->es = es;
    o->lo = (uintptr_t)src;
    o->hi = o->lo + ((rows - 1) * ld + cols) * es;
    /* read in place: aligned as the kernels need, and not mostly bytes
     * of others (a narrow slice of a wide matrix is staged pitched) */
    bool fits = ((uintptr_t)src & 15) == 0 && ld % 8 == 0 &&
                o->hi - o->lo <= 2 * rows * cols * es + RANGE_GAP;
    /* a D is ranged only when it is dense: its copy back then writes
     * exactly its elements */
    o->ranged = which == OP_D ? fits && ld == cols : fits;
}

/* Whether o joins range r: it overlaps or touches r, or (near) it
 * starts at most one page past r's last page. */
static bool joins(const operand *o, const range *r, bool near)
{
    if (o->lo <= r->hi)
        return true;
    return near && o->lo / RANGE_PAGE <= (r->hi - 1) / RANGE_PAGE + 1;
}

/*
 * Merges the ranged operands of ops (n, sorted by lo) into ranges (see
 * joins), placed in the device block from *off on; writes each operand's
 * range_lo and off. Returns the number of ranges written to out.
 */
static size_t merge(operand **ops, size_t n, bool near, range *out, size_t *off)
{
    size_t nr = 0;
    for (size_t i = 0; i < n; i++) {
        operand *o = ops[i];
        if (nr == 0 || !joins(o, &out[nr - 1], near)) {
            if (nr > 0)
                *off += round_up(out[nr - 1].hi - out[nr - 1].lo, DEV_ALIGN);
            out[nr].lo = o->lo;
            out[nr].hi = o->hi;
            out[nr].off = *off;
            nr++;
        } else if (o->hi > out[nr - 1].hi) {
            out[nr - 1].hi = o->hi;
        }
    }
    if (nr > 0)
        *off += round_up(out[nr - 1].hi - out[nr - 1].lo, DEV_ALIGN);
    /* every operand's range: the last one starting at or below it */
    size_t r = 0;
    for (size_t i = 0; i < n; i++) {
        while (r + 1 < nr && out[r + 1].lo <= ops[i]->lo)
            r++;
        ops[i]->range_lo = out[r].lo;
        ops[i]->off = out[r].off;
    }
    return nr;
}

/* The device address of operand o's element (0, 0) in block base. */
static void *op_dev(const operand *o, uint8_t *base)
{
    if (o->ranged)
        return base + o->off + (o->lo - o->range_lo);
    return base + o->off;
}

/* Whether the grouped kernel takes batch j as it is. */
static bool batch_fits(const gemmd_job *j)
{
    if (j->kernel[0] != '\0' && !gemmk_is_auto(j->kernel) &&
        strcmp(j->kernel, "grouped128x128") != 0 &&
        strcmp(j->kernel, "grouped128x256") != 0)
        return false;
    for (uint64_t i = 0; i < j->nproblems; i++) {
        const gemmd_job *p = &j->problems[i];
        if (p->ab_type != GEMM_BF16 && p->ab_type != GEMM_FP16)
            return false;
        if (p->a_dev || p->b_dev || p->c_dev)
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
    operand *ops = calloc(4 * np, sizeof(*ops));
    operand **in = calloc(4 * np, sizeof(*in));
    range *ranges = calloc(4 * np, sizeof(*ranges));
    gemmk_problem *kp = calloc(np, sizeof(*kp));
    int *index = calloc(np, sizeof(*index)); /* kp's problem in the batch */
    uint8_t *base = NULL;
    size_t bytes = 0, nops = 0, nin = 0, nout = 0;
    if (!ops || !in || !ranges || !kp || !index) {
        snprintf(m, ml, "out of host memory for a batch of %zu problems", np);
        rv = GEMM_ERR_NOMEM;
        goto out;
    }

    /* the operands, their ranges and places in the device block */
    for (uint64_t i = 0, q = 0; i < j->nproblems; i++) {
        const gemmd_job *p = &j->problems[i];
        if (p->m == 0 || p->n == 0)
            continue;
        size_t es = gemm_dtype_size(p->ab_type);
        size_t cs = gemm_dtype_size(p->cd_type);
        index[q++] = (int)i;
        operand_set(&ops[nops++], (int)i, OP_A, p->a, p->shape.a.rows,
                    p->shape.a.cols, p->lda, es);
        operand_set(&ops[nops++], (int)i, OP_B, p->b, p->shape.b.rows,
                    p->shape.b.cols, p->ldb, es);
        if (p->has_c)
            operand_set(&ops[nops++], (int)i, OP_C, p->c, p->m, p->n, p->ldc,
                        cs);
        operand_set(&ops[nops++], (int)i, OP_D, p->d, p->m, p->n, p->ldd, cs);
    }
    for (size_t i = 0; i < nops; i++)
        if (ops[i].ranged && ops[i].which != OP_D)
            in[nin++] = &ops[i];
    qsort(in, nin, sizeof(*in), by_lo);
    size_t nrin = merge(in, nin, true, ranges, &bytes);
    for (size_t i = 0; i < nops; i++)
        if (ops[i].ranged && ops[i].which == OP_D)
            in[nout++] = &ops[i];
    qsort(in, nout, sizeof(*in), by_lo);
    size_t nrout = merge(in, nout, false, ranges + nrin, &bytes);
    for (size_t i = 0; i < nops; i++) {
        operand *o = &ops[i];
        if (o->ranged)
            continue;
        o->dld = cuda_pitch_elems(o->cols, o->es);
        o->off = bytes;
        bytes += round_up(o->rows * o->dld * o->es, DEV_ALIGN);
    }

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
        const operand *o = &ops[i];
        if (o->ranged || o->which == OP_D)
            continue;
        CK(cudaMemcpy2DAsync(base + o->off, o->dld * o->es, o->src,
                             o->ld * o->es, o->cols * o->es, o->rows,
                             cudaMemcpyHostToDevice, w->stream),
           m, ml);
    }
    CK(cudaEventRecord(w->ev[1], w->stream), m, ml);

    /* the problems on the staged copies, in batch order */
    for (size_t i = 0, q = 0; i < nops; q++) {
        const gemmd_job *p = &j->problems[ops[i].problem];
        gemmk_problem *k = &kp[q];
        *k = cuda_job_problem(p);
        for (; i < nops && ops[i].problem == index[q]; i++) {
            const operand *o = &ops[i];
            void *dev = op_dev(o, base);
            int64_t ld = (int64_t)(o->ranged ? o->ld : o->dld);
            if (o->which == OP_A)
                k->a = dev, k->lda = ld;
            else if (o->which == OP_B)
                k->b = dev, k->ldb = ld;
            else if (o->which == OP_C)
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
        const operand *o = &ops[i];
        if (o->ranged || o->which != OP_D)
            continue;
        CK(cudaMemcpy2DAsync((void *)o->src, o->ld * o->es, base + o->off,
                             o->dld * o->es, o->cols * o->es, o->rows,
                             cudaMemcpyDeviceToHost, w->stream),
           m, ml);
    }
    CK(cudaEventRecord(w->ev[3], w->stream), m, ml);
    CK(cudaStreamSynchronize(w->stream), m, ml);
    float ms[3];
    for (int i = 0; i < 3; i++)
        CK(cudaEventElapsedTime(&ms[i], w->ev[i], w->ev[i + 1]), m, ml);
    j->ns_h2d = (uint64_t)(ms[0] * 1e6);
    j->ns_kernel = (uint64_t)(ms[1] * 1e6);
    j->ns_d2h = (uint64_t)(ms[2] * 1e6);
    j->nran = np;
out:
fail:
    cuda_dev_free(w, base, bytes);
    if (rv != GEMM_OK || *declined)
        cudaStreamSynchronize(w->stream);
    free(ops);
    free(in);
    free(ranges);
    free(kp);
    free(index);
    return rv;
}
