/*
 * staging_blas3.c: a Blas3 job (symm .. trsm) on a device, in the steps
 * and with the accounting of staging.c's GEMM path: device memory from
 * the stream-ordered pool (counted against --max-device-bytes), copies in
 * on the worker's stream, the kernel library's call (gemmk_blas3: cuBLAS),
 * the output copied back, each stage timed between the worker's events.
 * Operands are staged tightly (cuBLAS takes any leading dimension);
 * resident tensors are read where they are. The output goes in first
 * when its old value is read (beta != 0, trmm, trsm) and always for the
 * rank updates: the whole matrix comes back, so the triangle they do not
 * write must come back as it was.
 */
#include "cuda/staging_blas3.h"
#include "validate_blas3.h"

#include <gemm/types.h>
#include <gemm_kernels_blas3.h>

#include <stdio.h>

/* One staged matrix: rows x cols, tight. */
typedef struct staged3 {
    void *dev;
    size_t bytes;
} staged3;

static int alloc3(cuda_worker *w, staged3 *s, uint64_t rows, uint64_t cols,
                  size_t es, char *msg, size_t len)
{
    cuda_device *d = w->dev;
    int rv = GEMM_OK;
    s->bytes = rows * cols * es;
    unsigned long long now = atomic_fetch_add(&d->device_bytes, s->bytes);
    if (d->max_device != 0 && now + s->bytes > d->max_device) {
        atomic_fetch_sub(&d->device_bytes, s->bytes);
        s->bytes = 0;
        snprintf(msg, len,
                 "the request needs more device memory than the daemon's "
                 "limit of %llu bytes allows now",
                 d->max_device);
        return GEMM_ERR_DEVICE_MEMORY;
    }
    CK(cudaMallocAsync(&s->dev, s->bytes, w->stream), msg, len);
    return GEMM_OK;
fail:
    atomic_fetch_sub(&d->device_bytes, s->bytes);
    s->bytes = 0;
    s->dev = NULL;
    return rv;
}

static void free3(cuda_worker *w, staged3 *s)
{
    if (s->dev != NULL) {
        cudaFreeAsync(s->dev, w->stream);
        atomic_fetch_sub(&w->dev->device_bytes, s->bytes);
        s->dev = NULL;
    }
}

/* Stages the host matrix m (as validated) at src into s, tight. */
static cudaError_t in3(cuda_worker *w, const staged3 *s, const void *src,
                       const val_matrix *m)
{
    return cudaMemcpy2DAsync(s->dev, m->cols * m->esize, src, m->ld * m->esize,
                             m->cols * m->esize, m->rows,
                             cudaMemcpyHostToDevice, w->stream);
}

int cuda_stage_blas3(cuda_worker *w, gemmd_job *j)
{
    int rv = GEMM_OK;
    char *m = j->msg;
    size_t ml = sizeof(j->msg);
    const val_matrix *sa = &j->shape.a, *sb = &j->shape.b, *sd = &j->shape.d;
    size_t es = gemm_dtype_size(j->ab_type);
    bool rank = j->routine >= VAL_SYRK && j->routine <= VAL_HER2K;
    staged3 a = {0}, b = {0}, d = {0};
    const void *da = j->a, *db = j->b;
    int64_t lda = (int64_t)j->lda, ldb = (int64_t)j->ldb;
    if ((!j->a_dev && (rv = alloc3(w, &a, sa->rows, sa->cols, es, m, ml))) ||
        (j->b != NULL && !j->b_dev &&
         (rv = alloc3(w, &b, sb->rows, sb->cols, es, m, ml))) ||
        (rv = alloc3(w, &d, sd->rows, sd->cols, es, m, ml)))
        goto fail;
    CK(cudaEventRecord(w->ev[0], w->stream), m, ml);
    if (!j->a_dev) {
        CK(in3(w, &a, j->a, sa), m, ml);
        da = a.dev;
        lda = (int64_t)sa->cols;
    }
    if (j->b != NULL && !j->b_dev) {
        CK(in3(w, &b, j->b, sb), m, ml);
        db = b.dev;
        ldb = (int64_t)sb->cols;
    }
    if (j->has_c || rank)
        CK(in3(w, &d, j->d, sd), m, ml);
    CK(cudaEventRecord(w->ev[1], w->stream), m, ml);
    gemmk_blas3_problem p = {
        .routine = j->routine,
        .dtype = (gemm_dtype)j->ab_type,
        .right = j->right,
        .lower = j->lower,
        .trans = j->op,
        .unit_diag = j->unit_diag,
        .m = (int64_t)j->m,
        .n = (int64_t)j->n,
        .k = (int64_t)j->k,
        .alpha = {j->alpha, j->alpha_im},
        .beta = {j->has_c ? j->beta : 0.0, j->has_c ? j->beta_im : 0.0},
        .a = da,
        .b = j->b != NULL ? db : NULL,
        .c = d.dev,
        .lda = lda,
        .ldb = ldb,
        .ldc = (int64_t)sd->cols,
    };
    gemmk_result res;
    rv = gemmk_blas3(w->kctx, &p, w->stream, &res);
    snprintf(j->ran, sizeof(j->ran), "%s",
             res.kernel != NULL ? res.kernel : "cublas");
    if (rv != GEMM_OK) {
        snprintf(j->msg, sizeof(j->msg), "%s failed (%s): %.180s", j->ran,
                 gemm_strerror(rv), res.msg);
        goto fail;
    }
    CK(cudaEventRecord(w->ev[2], w->stream), m, ml);
    CK(cudaMemcpy2DAsync(j->d, sd->ld * es, d.dev, sd->cols * es, sd->cols * es,
                         sd->rows, cudaMemcpyDeviceToHost, w->stream),
       m, ml);
    CK(cudaEventRecord(w->ev[3], w->stream), m, ml);
    free3(w, &a);
    free3(w, &b);
    free3(w, &d);
    CK(cudaStreamSynchronize(w->stream), m, ml);
    float ms[3];
    for (int i = 0; i < 3; i++)
        CK(cudaEventElapsedTime(&ms[i], w->ev[i], w->ev[i + 1]), m, ml);
    j->ns_h2d = (uint64_t)(ms[0] * 1e6);
    j->ns_kernel = (uint64_t)(ms[1] * 1e6);
    j->ns_d2h = (uint64_t)(ms[2] * 1e6);
    return GEMM_OK;
fail:
    free3(w, &a);
    free3(w, &b);
    free3(w, &d);
    cudaStreamSynchronize(w->stream);
    return rv;
}
