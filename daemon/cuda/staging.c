/*
 * staging.c: the one staging path of the CUDA backend. A GEMM of any
 * type takes the same steps on its worker's stream, timed by the
 * worker's events: device memory from the stream-ordered pool for the
 * operands that are not resident, copies in (cudaMemcpy2DAsync into a
 * pitch of 8 elements, so every shape and leading dimension runs on the
 * TMA kernels), the kernel library's multiply (gemmk_gemm: it chooses the
 * kernel, the reply names it), D copied back, the memory given back to
 * the pool. The wide types (fp64, complex) update D in place, so C is
 * staged into D; tiny GEMMs on pinned buffers skip staging and the
 * library reads them over PCIe (not int8: no int8 kernel reads host
 * memory). int8 rows are pitched to 16 bytes, what its kernels need.
 * Resident tensors are uploaded here too.
 */
#include "cuda/staging.h"
#include "cuda/migrate.h"
#include "cuda/pipeline.h"
#include "cuda/slices.h"
#include "log.h"

#include <gemm/types.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* GEMMs up to this m*n*k (64^3 = 2^18, 80^3) skip staging: four copies
 * and their API calls cost more than the kernel reading PCIe itself. */
#define DIRECT_MAX_VOLUME (1ull << 19)

/* One staged operand: device copy with a 16-byte pitch. */
typedef struct staged {
    void *dev;
    size_t bytes;
    uint64_t ld; /* elements */
} staged;

/* Row pitch on the device: the kernels' TMA maps need a leading dimension
 * that is a multiple of 8 elements (16 bytes for 16-bit types) and of 16
 * bytes (int8: 16 elements). */
uint64_t cuda_pitch_elems(uint64_t cols, size_t es)
{
    uint64_t unit = es == 1 ? 16 : 8;
    return (cols + unit - 1) / unit * unit;
}

int cuda_dev_alloc(cuda_worker *w, size_t bytes, void **out, char *msg,
                   size_t len)
{
    cuda_device *d = w->dev;
    int rv = GEMM_OK;
    *out = NULL;
    unsigned long long now = atomic_fetch_add(d->mem, bytes);
    if (d->max_device != 0 && now + bytes > d->max_device) {
        atomic_fetch_sub(d->mem, bytes);
        snprintf(msg, len,
                 "the request needs more device memory than the "
                 "daemon's limit of %llu bytes allows now",
                 d->max_device);
        return GEMM_ERR_DEVICE_MEMORY;
    }
    CK(cudaMallocAsync(out, bytes, w->stream), msg, len);
    return GEMM_OK;
fail:
    atomic_fetch_sub(d->mem, bytes);
    *out = NULL;
    return rv;
}

void cuda_dev_free(cuda_worker *w, void *p, size_t bytes)
{
    if (p != NULL) {
        cudaFreeAsync(p, w->stream);
        atomic_fetch_sub(w->dev->mem, bytes);
    }
}

static int stage_alloc(cuda_worker *w, staged *s, uint64_t rows, uint64_t cols,
                       size_t es, char *msg, size_t len)
{
    s->ld = cuda_pitch_elems(cols, es);
    s->bytes = rows * s->ld * es;
    int rv = cuda_dev_alloc(w, s->bytes, &s->dev, msg, len);
    if (rv != GEMM_OK)
        s->bytes = 0;
    return rv;
}

static void stage_free(cuda_worker *w, staged *s)
{
    cuda_dev_free(w, s->dev, s->bytes);
    s->dev = NULL;
}

/* Copies a rows x cols matrix (es-byte elements) at src (ld elements)
 * into the staged s on w's stream. */
static cudaError_t stage_in(cuda_worker *w, const staged *s, const void *src,
                            uint64_t ld, uint64_t rows, uint64_t cols,
                            size_t es, enum cudaMemcpyKind kind)
{
    return cudaMemcpy2DAsync(s->dev, s->ld * es, src, ld * es, cols * es, rows,
                             kind, w->stream);
}

/* The kernels' view of job j with its operands at a, b, c, d (leading
 * dimensions lda.. in elements): shape, types, transposes, conjugations,
 * alpha, beta (0 without C, which is then never read), precision and
 * (fp64) the Ozaki-II moduli asked for. */
static gemmk_problem job_problem(const gemmd_job *j, const void *a,
                                 uint64_t lda, const void *b, uint64_t ldb,
                                 const void *c, uint64_t ldc, void *d,
                                 uint64_t ldd)
{
    gemmk_problem kp = {
        .m = (int64_t)j->m,
        .n = (int64_t)j->n,
        .k = (int64_t)j->k,
        .ab_type = j->ab_type,
        .cd_type = j->cd_type,
        .trans_a = j->trans_a,
        .trans_b = j->trans_b,
        .a = a,
        .b = b,
        .c = j->has_c ? c : NULL,
        .d = d,
        .lda = (int64_t)lda,
        .ldb = (int64_t)ldb,
        .ldc = (int64_t)(j->has_c ? ldc : ldd),
        .ldd = (int64_t)ldd,
        .alpha = (float)j->alpha,
        .beta = j->has_c ? (float)j->beta : 0.0f,
        .precision = (gemm_precision)j->precision,
        .conj_a = j->conj_a,
        .conj_b = j->conj_b,
        .zalpha = {j->alpha, j->alpha_im},
        .zbeta = {j->has_c ? j->beta : 0.0, j->has_c ? j->beta_im : 0.0},
        .moduli = j->moduli,
    };
    return kp;
}

gemmk_problem cuda_job_problem(const gemmd_job *j)
{
    return job_problem(j, NULL, 0, NULL, 0, NULL, 0, NULL, 0);
}

static bool wide_type(int t)
{
    return t > 0 && t < 32 && (GEMMK_WIDE_TYPES & (1u << t)) != 0;
}

static bool aligned_ld(const void *ptr, uint64_t ld)
{
    return ((uintptr_t)ptr & 15) == 0 && ld % 8 == 0;
}

/* Whether j may run straight from the client's pinned buffers: tiny,
 * "auto", every buffer operand pinned and laid out as the kernels need
 * (16-byte aligned, ld a multiple of 8), not wide, and not tf32 (the
 * kernel used computes in full fp32, which is what fp32 and 16-bit inputs
 * ask for). */
static bool direct_ok(const cuda_device *d, const gemmd_job *j)
{
    if (!d->host_direct || j->kind != JOB_GEMM || wide_type(j->ab_type) ||
        j->ab_type == GEMM_INT8 ||
        (j->kernel[0] != '\0' && !gemmk_is_auto(j->kernel)) ||
        (j->ab_type == GEMM_FP32 && j->precision == GEMM_PRECISION_TF32) ||
        j->moduli != 0) /* a count asks for the emulation */
        return false;
    if (j->m * j->n > DIRECT_MAX_VOLUME ||
        j->m * j->n * j->k > DIRECT_MAX_VOLUME)
        return false;
    if (!cuda_job_pinned(j))
        return false;
    return aligned_ld(j->a, j->lda) && aligned_ld(j->b, j->ldb) &&
           aligned_ld(j->d, j->ldd) && (!j->has_c || aligned_ld(j->c, j->ldc));
}

bool cuda_job_pinned(const gemmd_job *j)
{
    for (int i = 0; i < j->nbufs; i++)
        if (j->bufs[i]->kind == REG_BUFFER && j->bufs[i]->pin == NULL)
            return false;
    return true;
}

/*
 * Enqueues kp, job j's problem, on w's stream with the kernel j names
 * ("" = the library's choice); sets j->ran to what ran and raises
 * j->ran_moduli to the moduli its emulation used (a job runs as several
 * panels or slices: the reply reports the largest), and on failure
 * j->msg to why (the library's message: the CUDA or cuBLAS call, its
 * error and file:line). Returns a gemm_error.
 */
static int run_kernel(cuda_worker *w, gemmd_job *j, const gemmk_problem *kp)
{
    gemmk_result res = {0};
    const char *kname = j->kernel[0] != '\0' ? j->kernel : NULL;
    int rv = gemmk_gemm(w->kctx, kp, w->stream, kname, &res);
    snprintf(j->ran, sizeof(j->ran), "%s",
             res.kernel != NULL ? res.kernel
             : kname != NULL    ? kname
                                : "auto");
    if (rv == GEMM_OK && res.moduli > j->ran_moduli)
        j->ran_moduli = res.moduli;
    if (rv != GEMM_OK)
        snprintf(j->msg, sizeof(j->msg), "kernel %s failed (%s): %.180s",
                 j->ran, gemm_strerror(rv), res.msg);
    return rv;
}

int cuda_stage_times(cuda_worker *w, gemmd_job *j)
{
    int rv = GEMM_OK;
    float ms[3];
    for (int i = 0; i < 3; i++)
        CK(cudaEventElapsedTime(&ms[i], w->ev[i], w->ev[i + 1]), j->msg,
           sizeof(j->msg));
    j->ns_h2d = ms[0] > 0 ? (uint64_t)(ms[0] * 1e6) : 0;
    j->ns_kernel = ms[1] > 0 ? (uint64_t)(ms[1] * 1e6) : 0;
    j->ns_d2h = ms[2] > 0 ? (uint64_t)(ms[2] * 1e6) : 0;
    return GEMM_OK;
fail:
    return rv;
}

int cuda_stage_gemm(cuda_worker *w, gemmd_job *j)
{
    int rv = GEMM_OK;
    const bool direct = direct_ok(w->dev, j);
    const bool wide = wide_type(j->ab_type);
    size_t es = gemm_dtype_size(j->ab_type), cs = gemm_dtype_size(j->cd_type);
    const val_matrix *sa = &j->shape.a, *sb = &j->shape.b;
    staged a = {0}, b = {0}, c = {0}, d = {0};
    char *m = j->msg;
    size_t ml = sizeof(j->msg);
    /* resident operands are already on the device, pitched; direct ones
     * are read where they are */
    const void *da = j->a, *db = j->b, *dc = j->c;
    void *dd = j->d;
    uint64_t lda = j->lda, ldb = j->ldb, ldc = j->ldc, ldd = j->ldd;
    unsigned panels = 0;
    pipe_plan plan = {0};
    bool measure = false, following = false;
    const uint64_t t_begin = gemmd_now_ns();
    if (!direct) {
        if ((!j->a_dev &&
             (rv = stage_alloc(w, &a, sa->rows, sa->cols, es, m, ml))) ||
            (!j->b_dev &&
             (rv = stage_alloc(w, &b, sb->rows, sb->cols, es, m, ml))) ||
            (rv = stage_alloc(w, &d, j->m, j->n, cs, m, ml)) ||
            (!wide && j->has_c && !j->c_dev &&
             (rv = stage_alloc(w, &c, j->m, j->n, cs, m, ml))))
            goto fail;
        if (!j->a_dev)
            da = a.dev, lda = a.ld;
        if (!j->b_dev)
            db = b.dev, ldb = b.ld;
        if (wide && j->has_c) /* D is updated in place: C into D */
            dc = d.dev, ldc = d.ld;
        else if (j->has_c && !j->c_dev)
            dc = c.dev, ldc = c.ld;
        dd = d.dev;
        ldd = d.ld;
        gemmk_problem whole =
            job_problem(j, da, lda, db, ldb, dc, ldc, dd, ldd);
        panels = cuda_pipe_plan(w, j, &whole, &plan, &measure);
    }
    /* operands the client still fills: the pipeline's copies wait for
     * each part on the GPU (pinned buffers), any other path for all of
     * them here */
    if ((rv = cuda_fill_start(&w->fill, j, panels > 0 && cuda_job_pinned(j),
                              &following)) != GEMM_OK)
        goto fail;
    if (panels > 0) {
        cuda_pipe p = {
            .kp = job_problem(j, da, lda, db, ldb, dc, ldc, dd, ldd),
            .copy_a = !j->a_dev,
            .copy_b = !j->b_dev,
            .copy_c = j->has_c && (wide || !j->c_dev),
            .c_dst = wide ? d.dev : c.dev,
            .c_dst_ld = wide ? d.ld : c.ld,
            .c_kind = wide && j->c_dev ? cudaMemcpyDeviceToDevice
                                       : cudaMemcpyHostToDevice,
            .plan = plan,
            .measure = measure,
            .gated = following,
        };
        p.drain = cuda_drain_ok(&w->fill, j, &p.drain_dev);
        const uint64_t t_run = gemmd_now_ns();
        rv = cuda_pipe_run(w, j, &p, run_kernel);
        following = false; /* ended by the pipeline when it failed */
        if (rv != GEMM_OK)
            goto fail;
        const uint64_t t_queued = gemmd_now_ns();
        if (p.gated && (rv = cuda_fill_end(&w->fill, false, m, ml)) != GEMM_OK)
            goto fail;
        stage_free(w, &a);
        stage_free(w, &b);
        stage_free(w, &c);
        stage_free(w, &d);
        CK(cudaStreamSynchronize(w->stream), m, ml);
        /* the stages overlap: copies in to the last one's end, the
         * kernels' own time, copies out after the last kernel */
        rv = cuda_stage_times(w, j);
        const uint64_t t_done = gemmd_now_ns();
        j->ns_kernel = cuda_pipe_finish(w, j, &p);
        gemmd_log(LOG_DEBUG,
                  "staged in blocks: %.3f ms to plan and allocate, %.3f ms "
                  "to queue, %.3f ms until done",
                  (t_run - t_begin) / 1e6, (t_queued - t_run) / 1e6,
                  (t_done - t_queued) / 1e6);
        return rv;
    }
    if (!direct) {
        CK(cudaEventRecord(w->ev[0], w->stream), m, ml);
        if (!j->a_dev)
            CK(stage_in(w, &a, j->a, j->lda, sa->rows, sa->cols, es,
                        cudaMemcpyHostToDevice),
               m, ml);
        if (!j->b_dev)
            CK(stage_in(w, &b, j->b, j->ldb, sb->rows, sb->cols, es,
                        cudaMemcpyHostToDevice),
               m, ml);
        if (wide && j->has_c)
            CK(stage_in(w, &d, j->c, j->ldc, j->m, j->n, cs,
                        j->c_dev ? cudaMemcpyDeviceToDevice
                                 : cudaMemcpyHostToDevice),
               m, ml);
        else if (j->has_c && !j->c_dev)
            CK(stage_in(w, &c, j->c, j->ldc, j->m, j->n, cs,
                        cudaMemcpyHostToDevice),
               m, ml);
    }
    CK(cudaEventRecord(w->ev[1], w->stream), m, ml);
    gemmk_problem kp = job_problem(j, da, lda, db, ldb, dc, ldc, dd, ldd);
    if (direct) {
        /* the kernel computes in full fp32 (direct_ok keeps tf32 away) */
        kp.precision = j->ab_type == GEMM_FP32 ? GEMM_PRECISION_FP32
                                               : GEMM_PRECISION_DEFAULT;
        kp.host_mapped = 1;
    }
    if ((rv = direct ? run_kernel(w, j, &kp)
                     : cuda_slices_run(w, j, &kp, run_kernel)) != GEMM_OK)
        goto fail;
    CK(cudaEventRecord(w->ev[2], w->stream), m, ml);
    if (!direct) {
        CK(cudaMemcpy2DAsync(j->d, j->ldd * cs, d.dev, d.ld * cs, j->n * cs,
                             j->m, cudaMemcpyDeviceToHost, w->stream),
           m, ml);
        CK(cudaEventRecord(w->ev[3], w->stream), m, ml);
        stage_free(w, &a);
        stage_free(w, &b);
        stage_free(w, &c);
        stage_free(w, &d);
    }
    CK(cudaStreamSynchronize(w->stream), m, ml);
    if (direct) {
        float ms;
        CK(cudaEventElapsedTime(&ms, w->ev[1], w->ev[2]), m, ml);
        j->ns_h2d = j->ns_d2h = 0;
        j->ns_kernel = (uint64_t)(ms * 1e6);
        return GEMM_OK;
    }
    return cuda_stage_times(w, j);
fail:
    if (following) { /* its waits released before the streams are */
        char why[200];
        cuda_fill_end(&w->fill, true, why, sizeof(why));
    }
    stage_free(w, &a);
    stage_free(w, &b);
    stage_free(w, &c);
    stage_free(w, &d);
    cudaStreamSynchronize(w->stream);
    return rv;
}

int cuda_stage_upload(cuda_worker *w, gemmd_job *j)
{
    int rv;
    size_t es = gemm_dtype_size(j->dtype);
    staged s = {0};
    cuda_tensor *t = NULL;
    rv = stage_alloc(w, &s, j->rows, j->cols, es, j->msg, sizeof(j->msg));
    if (rv != GEMM_OK)
        goto fail;
    CK(stage_in(w, &s, j->a, j->lda, j->rows, j->cols, es,
                cudaMemcpyHostToDevice),
       j->msg, sizeof(j->msg));
    CK(cudaStreamSynchronize(w->stream), j->msg, sizeof(j->msg));
    if ((t = cuda_tensor_new(w, s.dev, s.bytes)) == NULL) {
        rv = GEMM_ERR_NOMEM;
        snprintf(j->msg, sizeof(j->msg), "out of memory for a tensor");
        goto fail;
    }
    j->tensor->pin = t;
    j->tensor->data = s.dev;
    j->tensor->size = s.bytes;
    j->tensor->ld = s.ld;
    j->tensor->on_device = true;
    return GEMM_OK;
fail:
    stage_free(w, &s);
    return rv;
}
