/*
 * backend_cuda.c: the CUDA backend. One context for the daemon's life;
 * client buffers pinned with cudaHostRegister when they are registered;
 * each GEMM staged to the device with cudaMemcpy2DAsync into a pitch of 8
 * elements (so every shape and leading dimension runs on the TMA kernels),
 * multiplied by our Hopper kernels (kernels/), and D copied back into the
 * client's layout. Three worker threads, each with its own stream and
 * kernel context, so one request's copies in, another's kernel and a
 * third's copy out run at once. Device memory
 * comes from the stream-ordered pool, which keeps freed blocks: in steady
 * state nothing is allocated from the driver. fp32 A/B run on the tensor
 * cores too, as tf32 or as 3xTF32 (fp32 accuracy) per the request's
 * precision. A request may name a kernel of the catalog (gemmk_catalog_*):
 * it is checked against the request (gemmk_check) before it is queued,
 * and the reply names the kernel that ran (gemmk_select for auto).
 * fp64, complex64 and complex128 (gemm_wide) take the same staging and
 * overlap, C staged into D (the kernels update wide D in place). Every
 * kernel choice, wide types included, is the kernel library's
 * (gemmk_gemm): this file names no kernel.
 */
#include "backend.h"
#include "log.h"

#include <gemm/gemm.h>
#include <gemm_kernels.h>

#include <cuda_runtime_api.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CUDA_WORKERS 3 /* one copying in, one computing, one copying out */

/* A freed tensor's range, for a worker to drop from its tensor-map cache. */
typedef struct cuda_forget {
    const void *base;
    size_t bytes;
    struct cuda_forget *next;
} cuda_forget;

typedef struct cuda_worker {
    cudaStream_t stream;
    gemmk_ctx *kctx;   /* used by its worker thread alone */
    cudaEvent_t ev[4]; /* start, copies in done, kernel done, copy out done */
    /* ranges freed by the loop thread, applied to kctx's cache by the
     * worker before its next job (the cache is not thread-safe; its keys
     * hold everything a map encodes, so an entry left over until then is
     * never wrong, only a slot taken) */
    pthread_mutex_t forget_mu;
    cuda_forget *forget;
} cuda_worker;

typedef struct cuda_priv {
    int device;
    cudaMemPool_t pool;
    pthread_mutex_t mu; /* guards workers[] setup */
    cuda_worker workers[CUDA_WORKERS];
    unsigned nworkers;          /* made at start-up */
    unsigned claimed;           /* bound to a worker thread */
    atomic_ullong pinned_bytes; /* cudaHostRegister'ed client memory */
    atomic_ullong device_bytes; /* staging memory in use */
    unsigned long long max_pinned, max_device;
    /* the device reads registered host memory at its host address
     * (cudaDevAttrCanUseHostPointerForRegisteredMem): tiny GEMMs run
     * straight from the client's pinned buffers, see gemm_direct() */
    bool host_direct;
} cuda_priv;

/* GEMMs up to this m*n*k (64^3 = 2^18, 80^3) skip staging: four copies
 * and their API calls cost more than the kernel reading PCIe itself. */
#define DIRECT_MAX_VOLUME (1ull << 19)

static _Thread_local cuda_worker *tls_worker;

static int worker_create(cuda_priv *p, cuda_worker *w, char *msg, size_t len);
static void cuda_fini(gemmd_backend *be);
static void worker_forget(cuda_worker *w);

/* Maps a CUDA error to a gemm_error and a message naming the call. */
static int cuda_fail(cudaError_t e, const char *what, const char *file,
                     int line, char *msg, size_t len)
{
    snprintf(msg, len, "%s failed: %s (%s:%d)", what, cudaGetErrorString(e),
             file, line);
    return e == cudaErrorMemoryAllocation ? GEMM_ERR_DEVICE_MEMORY
                                          : GEMM_ERR_DEVICE;
}

#define CK(call, msg, len)                                                     \
    do {                                                                       \
        cudaError_t e_ = (call);                                               \
        if (e_ != cudaSuccess) {                                               \
            rv = cuda_fail(e_, #call, __FILE__, __LINE__, msg, len);           \
            goto fail;                                                         \
        }                                                                      \
    } while (0)

/* The types computed in their own precision (gemm_wide). */
#define WIDE_TYPES GEMMK_WIDE_TYPES

static bool wide_type(int t)
{
    return t > 0 && t < 32 && (WIDE_TYPES & (1u << t)) != 0;
}

static bool cuda_available(void)
{
    int n = 0;
    if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0) {
        cudaGetLastError(); /* clear it */
        return false;
    }
    for (int i = 0; i < n; i++) {
        struct cudaDeviceProp p;
        if (cudaGetDeviceProperties(&p, i) == cudaSuccess && p.major == 9)
            return true;
    }
    return false;
}

static int cuda_init(gemmd_backend *be, const gemmd_config *cfg, char *msg,
                     size_t len)
{
    int rv;
    struct cudaDeviceProp prop;
    cuda_priv *p = calloc(1, sizeof(*p));
    if (p == NULL)
        return GEMM_ERR_NOMEM;
    pthread_mutex_init(&p->mu, NULL);
    p->device = cfg->device;
    p->max_pinned = cfg->max_pinned_bytes;
    p->max_device = cfg->max_device_bytes;
    CK(cudaSetDevice(p->device), msg, len);
    CK(cudaGetDeviceProperties(&prop, p->device), msg, len);
    if (prop.major != 9) {
        snprintf(msg, len,
                 "device %d (%.100s) is sm_%d%d; the kernels need "
                 "Hopper (sm_90)",
                 p->device, prop.name, prop.major, prop.minor);
        rv = GEMM_ERR_UNSUPPORTED;
        goto fail;
    }
    CK(cudaFree(NULL), msg, len); /* create the context now */
    int direct = 0;
    CK(cudaDeviceGetAttribute(
           &direct, cudaDevAttrCanUseHostPointerForRegisteredMem, p->device),
       msg, len);
    p->host_direct = direct != 0;
    CK(cudaDeviceGetDefaultMemPool(&p->pool, p->device), msg, len);
    unsigned long long keep = ~0ull; /* never give freed blocks back */
    CK(cudaMemPoolSetAttribute(p->pool, cudaMemPoolAttrReleaseThreshold, &keep),
       msg, len);
    snprintf(be->device, sizeof(be->device), "%.100s (sm_%d%d, %d SMs)",
             prop.name, prop.major, prop.minor, prop.multiProcessorCount);
    for (; p->nworkers < CUDA_WORKERS; p->nworkers++) {
        rv = worker_create(p, &p->workers[p->nworkers], msg, len);
        if (rv != GEMM_OK)
            goto fail;
    }
    be->priv = p;
    be->workers = CUDA_WORKERS;
    be->threads = CUDA_WORKERS;
    gemmd_log(LOG_INFO, "cuda backend: %s, %.1f GiB", be->device,
              prop.totalGlobalMem / (double)(1u << 30));
    return GEMM_OK;
fail:
    be->priv = p;
    cuda_fini(be);
    return rv;
}

/* Frees the workers made so far and the backend state (init's failure
 * path too). */
static void cuda_fini(gemmd_backend *be)
{
    cuda_priv *p = be->priv;
    if (p == NULL)
        return;
    for (unsigned i = 0; i < p->nworkers; i++) {
        worker_forget(&p->workers[i]); /* workers are joined: safe */
        pthread_mutex_destroy(&p->workers[i].forget_mu);
        gemmk_ctx_destroy(p->workers[i].kctx);
        for (int e = 0; e < 4; e++)
            cudaEventDestroy(p->workers[i].ev[e]);
        cudaStreamDestroy(p->workers[i].stream);
    }
    pthread_mutex_destroy(&p->mu);
    free(p);
    be->priv = NULL;
}

static int cuda_pin(gemmd_backend *be, void *base, size_t size, void **handle,
                    char *msg, size_t len)
{
    cuda_priv *p = be->priv;
    int rv = GEMM_OK;
    unsigned long long now = atomic_fetch_add(&p->pinned_bytes, size);
    if (p->max_pinned != 0 && now + size > p->max_pinned) {
        atomic_fetch_sub(&p->pinned_bytes, size);
        snprintf(msg, len,
                 "pinning %zu more bytes would pass the daemon's "
                 "limit of %llu pinned bytes",
                 size, p->max_pinned);
        return GEMM_ERR_LIMIT;
    }
    CK(cudaSetDevice(p->device), msg, len);
    CK(cudaHostRegister(base, size,
                        cudaHostRegisterPortable | cudaHostRegisterMapped),
       msg, len);
    *handle = (void *)(uintptr_t)size;
    return GEMM_OK;
fail:
    atomic_fetch_sub(&p->pinned_bytes, size);
    return rv;
}

static void cuda_unpin(gemmd_backend *be, void *base, void *handle)
{
    cuda_priv *p = be->priv;
    cudaError_t e = cudaHostUnregister(base);
    if (e != cudaSuccess)
        gemmd_log(LOG_WARNING, "cudaHostUnregister: %s", cudaGetErrorString(e));
    atomic_fetch_sub(&p->pinned_bytes, (size_t)(uintptr_t)handle);
}

/* Logs the kernels' tuning knobs set in the environment (measurement
 * switches that change what runs). */
static void log_knobs(const gemmk_ctx *kctx)
{
    gemmk_knob k;
    for (int i = 0; gemmk_ctx_knob(kctx, i, &k); i++)
        gemmd_log(LOG_NOTICE, "cuda backend: kernel knob %s=%s (value %d): %s",
                  k.name, k.text, k.value, k.description);
}

/* Makes worker w's stream, events and kernel context. Main
 * thread, at start-up: nothing is created later, so the daemon's memory
 * and mappings are the same after the first request as before it. */
static int worker_create(cuda_priv *p, cuda_worker *w, char *msg, size_t len)
{
    int rv = GEMM_OK;
    pthread_mutex_init(&w->forget_mu, NULL);
    CK(cudaStreamCreateWithFlags(&w->stream, cudaStreamNonBlocking), msg, len);
    for (int e = 0; e < 4; e++)
        CK(cudaEventCreate(&w->ev[e]), msg, len);
    rv = gemmk_ctx_create(&w->kctx, p->device);
    if (rv != GEMM_OK) {
        snprintf(msg, len, "cannot create the kernel context: %s",
                 gemm_strerror(rv));
        goto fail;
    }
    if (w == &p->workers[0])
        log_knobs(w->kctx);
    return GEMM_OK;
fail:
    gemmk_ctx_destroy(w->kctx);
    for (int e = 0; e < 4; e++)
        if (w->ev[e] != NULL)
            cudaEventDestroy(w->ev[e]);
    if (w->stream != NULL)
        cudaStreamDestroy(w->stream);
    memset(w, 0, sizeof(*w));
    return rv;
}

/* The calling worker thread's stream and kernel context: the first call
 * on a thread claims one of those made at start-up. */
static int worker_state(cuda_priv *p, cuda_worker **out, char *msg, size_t len)
{
    int rv = GEMM_OK;
    if (tls_worker != NULL) {
        *out = tls_worker;
        return GEMM_OK;
    }
    pthread_mutex_lock(&p->mu);
    if (p->claimed == p->nworkers) {
        pthread_mutex_unlock(&p->mu);
        snprintf(msg, len, "more GPU worker threads than streams");
        return GEMM_ERR_INTERNAL;
    }
    cuda_worker *w = &p->workers[p->claimed];
    CK(cudaSetDevice(p->device), msg, len);
    p->claimed++;
    tls_worker = w;
    *out = w;
fail:
    pthread_mutex_unlock(&p->mu);
    return rv;
}

/* One staged operand: device copy with a 16-byte pitch. */
typedef struct staged {
    void *dev;
    size_t bytes;
    uint64_t ld; /* elements */
} staged;

/* Row pitch on the device: the kernels' TMA maps need a leading dimension
 * that is a multiple of 8 elements (16 bytes for 16-bit types). */
static uint64_t pitch_elems(uint64_t cols)
{
    return (cols + 7) / 8 * 8;
}

static int stage_alloc(cuda_priv *p, cuda_worker *w, staged *s, uint64_t rows,
                       uint64_t cols, size_t es, char *msg, size_t len)
{
    int rv = GEMM_OK;
    s->ld = pitch_elems(cols);
    s->bytes = rows * s->ld * es;
    unsigned long long now = atomic_fetch_add(&p->device_bytes, s->bytes);
    if (p->max_device != 0 && now + s->bytes > p->max_device) {
        atomic_fetch_sub(&p->device_bytes, s->bytes);
        s->bytes = 0;
        snprintf(msg, len,
                 "the GEMM needs more device memory than the "
                 "daemon's limit of %llu bytes allows now",
                 p->max_device);
        return GEMM_ERR_DEVICE_MEMORY;
    }
    CK(cudaMallocAsync(&s->dev, s->bytes, w->stream), msg, len);
    return GEMM_OK;
fail:
    atomic_fetch_sub(&p->device_bytes, s->bytes);
    s->bytes = 0;
    s->dev = NULL;
    return rv;
}

static void stage_free(cuda_priv *p, cuda_worker *w, staged *s)
{
    if (s->dev != NULL) {
        cudaFreeAsync(s->dev, w->stream);
        atomic_fetch_sub(&p->device_bytes, s->bytes);
        s->dev = NULL;
    }
}

/* The kernels' view of job j with its operands at a, b, c, d (leading
 * dimensions lda.. in elements): shape, types, transposes, alpha, beta (0
 * without C, which is then never read) and precision. */
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
    };
    return kp;
}

static bool aligned_ld(const void *ptr, uint64_t ld)
{
    return ((uintptr_t)ptr & 15) == 0 && ld % 8 == 0;
}

/*
 * Enqueues kp, job j's problem, on w's stream with the kernel j names
 * ("" = the library's choice); sets j->ran to what ran, and on failure
 * j->msg to why (the library's message: the CUDA or cuBLAS call, its
 * error and file:line). Returns a gemm_error. Worker thread.
 */
static int run_kernel(cuda_worker *w, gemmd_job *j, const gemmk_problem *kp)
{
    gemmk_result res;
    const char *kname = j->kernel[0] != '\0' ? j->kernel : NULL;
    int rv = gemmk_gemm(w->kctx, kp, w->stream, kname, &res);
    snprintf(j->ran, sizeof(j->ran), "%s",
             res.kernel != NULL ? res.kernel
             : kname != NULL    ? kname
                                : "auto");
    if (rv != GEMM_OK)
        snprintf(j->msg, sizeof(j->msg), "kernel %s failed (%s): %.180s",
                 j->ran, gemm_strerror(rv), res.msg);
    return rv;
}

/* Whether j may run straight from the client's pinned buffers: tiny,
 * "auto", every buffer operand pinned and laid out as the kernels need
 * (16-byte aligned, ld a multiple of 8), and not tf32 (the kernel used
 * computes in full fp32, which is what fp32 and 16-bit inputs ask for). */
static bool direct_ok(const cuda_priv *p, const gemmd_job *j)
{
    if (!p->host_direct || j->kind != JOB_GEMM ||
        (j->kernel[0] != '\0' && !gemmk_is_auto(j->kernel)) ||
        (j->ab_type == GEMM_FP32 && j->precision == GEMM_PRECISION_TF32))
        return false;
    if (j->m * j->n > DIRECT_MAX_VOLUME ||
        j->m * j->n * j->k > DIRECT_MAX_VOLUME)
        return false;
    for (int i = 0; i < j->nbufs; i++)
        if (j->bufs[i]->kind == REG_BUFFER && j->bufs[i]->pin == NULL)
            return false;
    return aligned_ld(j->a, j->lda) && aligned_ld(j->b, j->ldb) &&
           aligned_ld(j->d, j->ldd) && (!j->has_c || aligned_ld(j->c, j->ldc));
}

/* A tiny GEMM in one launch: the kernel the library runs on host-mapped
 * operands reads A, B (and C) from pinned host memory (or resident
 * tensors) over PCIe and writes D into the client's buffer; no staging,
 * no copies. */
static int gemm_direct(cuda_worker *w, gemmd_job *j)
{
    int rv = GEMM_OK;
    char *m = j->msg;
    size_t ml = sizeof(j->msg);
    gemmk_problem kp =
        job_problem(j, j->a, j->lda, j->b, j->ldb, j->c, j->ldc, j->d, j->ldd);
    /* the kernel computes in full fp32 (direct_ok keeps tf32 away) */
    kp.precision =
        j->ab_type == GEMM_FP32 ? GEMM_PRECISION_FP32 : GEMM_PRECISION_DEFAULT;
    kp.host_mapped = 1;
    CK(cudaEventRecord(w->ev[1], w->stream), m, ml);
    if ((rv = run_kernel(w, j, &kp)) != GEMM_OK)
        goto fail;
    CK(cudaEventRecord(w->ev[2], w->stream), m, ml);
    CK(cudaStreamSynchronize(w->stream), m, ml);
    float ms;
    CK(cudaEventElapsedTime(&ms, w->ev[1], w->ev[2]), m, ml);
    j->ns_h2d = j->ns_d2h = 0;
    j->ns_kernel = (uint64_t)(ms * 1e6);
    return GEMM_OK;
fail:
    cudaStreamSynchronize(w->stream);
    return rv;
}

/*
 * fp64, complex64, complex128: A and B staged (unless resident) as the
 * 16-bit path stages them, C copied into D's staging (the kernels update
 * wide D in place), the kernel, D copied back; the same events time each stage,
 * and the three workers overlap one request's copies with another's
 * multiply. Worker thread.
 */
static int gemm_wide(cuda_priv *p, cuda_worker *w, gemmd_job *j)
{
    int rv = GEMM_OK;
    size_t es = gemm_dtype_size(j->ab_type);
    const val_matrix *sa = &j->shape.a, *sb = &j->shape.b;
    staged a = {0}, b = {0}, d = {0};
    char *m = j->msg;
    size_t ml = sizeof(j->msg);
    const void *da = j->a, *db = j->b;
    uint64_t lda = j->lda, ldb = j->ldb;
    if ((!j->a_dev &&
         (rv = stage_alloc(p, w, &a, sa->rows, sa->cols, es, m, ml))) ||
        (!j->b_dev &&
         (rv = stage_alloc(p, w, &b, sb->rows, sb->cols, es, m, ml))) ||
        (rv = stage_alloc(p, w, &d, j->m, j->n, es, m, ml)))
        goto fail;
    CK(cudaEventRecord(w->ev[0], w->stream), m, ml);
    if (!j->a_dev) {
        CK(cudaMemcpy2DAsync(a.dev, a.ld * es, j->a, j->lda * es, sa->cols * es,
                             sa->rows, cudaMemcpyHostToDevice, w->stream),
           m, ml);
        da = a.dev;
        lda = a.ld;
    }
    if (!j->b_dev) {
        CK(cudaMemcpy2DAsync(b.dev, b.ld * es, j->b, j->ldb * es, sb->cols * es,
                             sb->rows, cudaMemcpyHostToDevice, w->stream),
           m, ml);
        db = b.dev;
        ldb = b.ld;
    }
    if (j->has_c)
        CK(cudaMemcpy2DAsync(
               d.dev, d.ld * es, j->c, j->ldc * es, j->n * es, j->m,
               j->c_dev ? cudaMemcpyDeviceToDevice : cudaMemcpyHostToDevice,
               w->stream),
           m, ml);
    CK(cudaEventRecord(w->ev[1], w->stream), m, ml);
    gemmk_problem kp =
        job_problem(j, da, lda, db, ldb, d.dev, d.ld, d.dev, d.ld);
    if ((rv = run_kernel(w, j, &kp)) != GEMM_OK)
        goto fail;
    CK(cudaEventRecord(w->ev[2], w->stream), m, ml);
    CK(cudaMemcpy2DAsync(j->d, j->ldd * es, d.dev, d.ld * es, j->n * es, j->m,
                         cudaMemcpyDeviceToHost, w->stream),
       m, ml);
    CK(cudaEventRecord(w->ev[3], w->stream), m, ml);
    stage_free(p, w, &a);
    stage_free(p, w, &b);
    stage_free(p, w, &d);
    CK(cudaStreamSynchronize(w->stream), m, ml);
    float ms[3];
    for (int i = 0; i < 3; i++)
        CK(cudaEventElapsedTime(&ms[i], w->ev[i], w->ev[i + 1]), m, ml);
    j->ns_h2d = (uint64_t)(ms[0] * 1e6);
    j->ns_kernel = (uint64_t)(ms[1] * 1e6);
    j->ns_d2h = (uint64_t)(ms[2] * 1e6);
    return GEMM_OK;
fail:
    stage_free(p, w, &a);
    stage_free(p, w, &b);
    stage_free(p, w, &d);
    cudaStreamSynchronize(w->stream);
    return rv;
}

static int cuda_gemm(gemmd_backend *be, gemmd_job *j)
{
    cuda_priv *p = be->priv;
    cuda_worker *w;
    int rv;
    if ((rv = worker_state(p, &w, j->msg, sizeof(j->msg))) != GEMM_OK)
        return rv;
    worker_forget(w);
    if (wide_type(j->ab_type))
        return gemm_wide(p, w, j);
    if (direct_ok(p, j))
        return gemm_direct(w, j);

    size_t es = gemm_dtype_size(j->ab_type), cs = gemm_dtype_size(j->cd_type);
    const val_matrix *sa = &j->shape.a, *sb = &j->shape.b;
    staged a = {0}, b = {0}, c = {0}, d = {0};
    char *m = j->msg;
    size_t ml = sizeof(j->msg);
    /* resident operands are already on the device, pitched */
    const void *da = j->a, *db = j->b, *dc = j->c;
    uint64_t lda = j->lda, ldb = j->ldb, ldc = j->ldc;
    if ((!j->a_dev &&
         (rv = stage_alloc(p, w, &a, sa->rows, sa->cols, es, m, ml))) ||
        (!j->b_dev &&
         (rv = stage_alloc(p, w, &b, sb->rows, sb->cols, es, m, ml))) ||
        (rv = stage_alloc(p, w, &d, j->m, j->n, cs, m, ml)) ||
        (j->has_c && !j->c_dev &&
         (rv = stage_alloc(p, w, &c, j->m, j->n, cs, m, ml))))
        goto fail;
    CK(cudaEventRecord(w->ev[0], w->stream), m, ml);
    if (!j->a_dev) {
        CK(cudaMemcpy2DAsync(a.dev, a.ld * es, j->a, j->lda * es, sa->cols * es,
                             sa->rows, cudaMemcpyHostToDevice, w->stream),
           m, ml);
        da = a.dev;
        lda = a.ld;
    }
    if (!j->b_dev) {
        CK(cudaMemcpy2DAsync(b.dev, b.ld * es, j->b, j->ldb * es, sb->cols * es,
                             sb->rows, cudaMemcpyHostToDevice, w->stream),
           m, ml);
        db = b.dev;
        ldb = b.ld;
    }
    if (j->has_c && !j->c_dev) {
        CK(cudaMemcpy2DAsync(c.dev, c.ld * cs, j->c, j->ldc * cs, j->n * cs,
                             j->m, cudaMemcpyHostToDevice, w->stream),
           m, ml);
        dc = c.dev;
        ldc = c.ld;
    }
    CK(cudaEventRecord(w->ev[1], w->stream), m, ml);
    gemmk_problem kp = job_problem(j, da, lda, db, ldb, dc, ldc, d.dev, d.ld);
    if ((rv = run_kernel(w, j, &kp)) != GEMM_OK)
        goto fail;
    CK(cudaEventRecord(w->ev[2], w->stream), m, ml);
    CK(cudaMemcpy2DAsync(j->d, j->ldd * cs, d.dev, d.ld * cs, j->n * cs, j->m,
                         cudaMemcpyDeviceToHost, w->stream),
       m, ml);
    CK(cudaEventRecord(w->ev[3], w->stream), m, ml);
    stage_free(p, w, &a);
    stage_free(p, w, &b);
    stage_free(p, w, &c);
    stage_free(p, w, &d);
    CK(cudaStreamSynchronize(w->stream), m, ml);
    float ms[3];
    for (int i = 0; i < 3; i++)
        CK(cudaEventElapsedTime(&ms[i], w->ev[i], w->ev[i + 1]), m, ml);
    j->ns_h2d = (uint64_t)(ms[0] * 1e6);
    j->ns_kernel = (uint64_t)(ms[1] * 1e6);
    j->ns_d2h = (uint64_t)(ms[2] * 1e6);
    return GEMM_OK;
fail:
    stage_free(p, w, &a);
    stage_free(p, w, &b);
    stage_free(p, w, &c);
    stage_free(p, w, &d);
    cudaStreamSynchronize(w->stream);
    return rv;
}

/* A resident tensor: on the device with a row pitch of 8 elements (what
 * the kernels read). */
typedef struct cuda_tensor {
    void *dev;    /* device memory */
    size_t bytes; /* counted against --max-device-bytes */
} cuda_tensor;

static int cuda_upload(gemmd_backend *be, gemmd_job *j)
{
    cuda_priv *p = be->priv;
    cuda_worker *w;
    int rv;
    if ((rv = worker_state(p, &w, j->msg, sizeof(j->msg))) != GEMM_OK)
        return rv;
    cuda_tensor *t = calloc(1, sizeof(*t));
    if (t == NULL)
        return GEMM_ERR_NOMEM;
    size_t es = gemm_dtype_size(j->dtype);
    staged s = {0};
    rv = stage_alloc(p, w, &s, j->rows, j->cols, es, j->msg, sizeof(j->msg));
    if (rv != GEMM_OK)
        goto fail;
    CK(cudaMemcpy2DAsync(s.dev, s.ld * es, j->a, j->lda * es, j->cols * es,
                         j->rows, cudaMemcpyHostToDevice, w->stream),
       j->msg, sizeof(j->msg));
    CK(cudaStreamSynchronize(w->stream), j->msg, sizeof(j->msg));
    t->dev = s.dev;
    t->bytes = s.bytes;
    j->tensor->pin = t;
    j->tensor->data = s.dev;
    j->tensor->size = s.bytes;
    j->tensor->ld = s.ld;
    j->tensor->on_device = true;
    return GEMM_OK;
fail:
    stage_free(p, w, &s);
    free(t);
    return rv;
}

/* Worker thread: drops the freed ranges queued for w from its cache. */
static void worker_forget(cuda_worker *w)
{
    pthread_mutex_lock(&w->forget_mu);
    cuda_forget *f = w->forget;
    w->forget = NULL;
    pthread_mutex_unlock(&w->forget_mu);
    while (f != NULL) {
        cuda_forget *next = f->next;
        gemmk_cache_forget(w->kctx, f->base, f->bytes);
        free(f);
        f = next;
    }
}

/* Loop thread: frees a tensor's device memory; each worker forgets its
 * tensor maps on its own thread (worker_forget). */
static void cuda_tensor_free(gemmd_backend *be, void *handle)
{
    cuda_priv *p = be->priv;
    cuda_tensor *t = handle;
    if (t->dev != NULL) {
        for (unsigned i = 0; i < p->nworkers; i++) {
            cuda_worker *w = &p->workers[i];
            cuda_forget *f = malloc(sizeof(*f));
            if (f == NULL)
                continue; /* a stale entry is harmless, see cuda_worker */
            f->base = t->dev;
            f->bytes = t->bytes;
            pthread_mutex_lock(&w->forget_mu);
            f->next = w->forget;
            w->forget = f;
            pthread_mutex_unlock(&w->forget_mu);
        }
        cudaError_t e = cudaFree(t->dev); /* waits for work using it */
        if (e != cudaSuccess)
            gemmd_log(LOG_WARNING, "cudaFree of a tensor: %s",
                      cudaGetErrorString(e));
        atomic_fetch_sub(&p->device_bytes, t->bytes);
    }
    free(t);
}

static void cuda_stats(gemmd_backend *be, gemmd_backend_stats *out)
{
    cuda_priv *p = be->priv;
    out->pinned_bytes = atomic_load(&p->pinned_bytes);
    out->device_bytes = atomic_load(&p->device_bytes);
    pthread_mutex_lock(&p->mu);
    for (unsigned i = 0; i < p->nworkers; i++) {
        gemmk_cache_stats cs;
        gemmk_cache_stats_get(p->workers[i].kctx, &cs);
        out->tmap_hits += cs.hits;
        out->tmap_misses += cs.misses;
    }
    pthread_mutex_unlock(&p->mu);
}

static bool cuda_kernel_at(gemmd_backend *be, size_t i, gemmd_kernel *out)
{
    (void)be;
    const gemmk_kernel_desc *k =
        i < (size_t)gemmk_catalog_size() ? gemmk_catalog_entry((int)i) : NULL;
    if (k == NULL)
        return false;
    *out = (gemmd_kernel){
        .name = k->name,
        .summary = k->summary,
        .ladder = k->ladder > 0 ? (unsigned)k->ladder : 0,
        .reference = k->reference != 0,
        .ab_types = k->ab_types,
        .cd_types = k->cd_types,
        .precisions = k->precisions,
        .transposes = k->transposes,
    };
    return true;
}

static int cuda_kernel_check(gemmd_backend *be, const gemmd_job *j, char *msg,
                             size_t len)
{
    (void)be;
    const char *name = j->kernel[0] != '\0' ? j->kernel : NULL;
    if (name != NULL && gemmk_catalog_find(name) == NULL) {
        snprintf(msg, len,
                 "kernel '%s' is not available on the cuda backend "
                 "(gemmctl kernels lists them)",
                 name);
        return GEMM_ERR_UNSUPPORTED;
    }
    /* no operands yet: gemmk_check looks at types, precision, transposes
     * and conjugations only */
    gemmk_problem kp = job_problem(j, NULL, 0, NULL, 0, NULL, 0, NULL, 0);
    const char *why = NULL;
    if (gemmk_check(name, &kp, &why) != GEMM_OK) {
        snprintf(msg, len, "kernel '%s' cannot serve this request: %s",
                 name != NULL ? name : "auto",
                 why != NULL ? why : "unsupported");
        return GEMM_ERR_UNSUPPORTED;
    }
    return GEMM_OK;
}

const gemmd_backend_ops gemmd_backend_cuda = {
    .name = "cuda",
    .available = cuda_available,
    .init = cuda_init,
    .fini = cuda_fini,
    .pin = cuda_pin,
    .unpin = cuda_unpin,
    .gemm = cuda_gemm,
    .upload = cuda_upload,
    .tensor_free = cuda_tensor_free,
    .stats = cuda_stats,
    .kernel_at = cuda_kernel_at,
    .kernel_check = cuda_kernel_check,
};
