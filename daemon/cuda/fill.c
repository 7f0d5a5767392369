/*
 * fill.c: see fill.h. The word's values only grow: job i's targets are
 * base_i + need (need >= 1), and a job ends with the word at
 * base_i + parts + 1 (its counter complete, or released), below the next
 * job's base (base_i + parts + 2), so no wait is ever met early.
 */
#include "cuda/fill.h"
#include "cuda/device.h"
#include "log.h"

#include <gemm/types.h>

#include <cudaTypedefs.h>
#include <stdio.h>
#include <string.h>

static PFN_cuStreamWaitValue64_v11070 wait64;
static PFN_cuStreamWriteValue64_v11070 write64;
static pthread_once_t wait64_once = PTHREAD_ONCE_INIT;

static void *entry(const char *name)
{
    void *fn = NULL;
    enum cudaDriverEntryPointQueryResult q;
    if (cudaGetDriverEntryPointByVersion(name, &fn, 11070, cudaEnableDefault,
                                         &q) != cudaSuccess ||
        q != cudaDriverEntryPointSuccess)
        fn = NULL;
    cudaGetLastError();
    return fn;
}

static void wait64_find(void)
{
    wait64 = (PFN_cuStreamWaitValue64_v11070)entry("cuStreamWaitValue64");
    write64 = (PFN_cuStreamWriteValue64_v11070)entry("cuStreamWriteValue64");
}

int cuda_fill_init(cuda_fill *f, cudaStream_t s, char *msg, size_t len)
{
    int rv = GEMM_OK;
    memset(f, 0, sizeof(*f));
    pthread_mutex_init(&f->mu, NULL);
    pthread_cond_init(&f->cv, NULL);
    f->inited = true;
    pthread_once(&wait64_once, wait64_find);
    void *p = NULL, *dp = NULL;
    CK(cudaHostAlloc(&p, 64, cudaHostAllocMapped), msg, len);
    f->word = p;
    *f->word = 0;
    CK(cudaHostGetDevicePointer(&dp, p, 0), msg, len);
    f->word_dev = (uint64_t)(uintptr_t)dp;
    /* a wait that is met at once tells whether this device has them */
    f->ok = wait64 != NULL &&
            wait64((CUstream)s, (CUdeviceptr)f->word_dev, 0,
                   CU_STREAM_WAIT_VALUE_GEQ) == CUDA_SUCCESS &&
            cudaStreamSynchronize(s) == cudaSuccess;
    cudaGetLastError();
    if (!f->ok)
        gemmd_log(LOG_INFO, "cuda backend: no stream waits (cuStreamWait"
                            "Value64): level-3 operands filled by parts are "
                            "waited for whole");
    return GEMM_OK;
fail:
    if (f->word != NULL)
        cudaFreeHost(f->word);
    f->word = NULL;
    return rv;
}

void cuda_fill_destroy(cuda_fill *f)
{
    if (!f->inited)
        return;
    if (f->started) {
        pthread_mutex_lock(&f->mu);
        f->quit = true;
        pthread_cond_broadcast(&f->cv);
        pthread_mutex_unlock(&f->mu);
        pthread_join(f->thread, NULL);
    }
    if (f->word != NULL)
        cudaFreeHost(f->word);
    pthread_cond_destroy(&f->cv);
    pthread_mutex_destroy(&f->mu);
    memset(f, 0, sizeof(*f));
}

static void raise_to(cuda_fill *f, uint64_t v)
{
    if (v > __atomic_load_n(f->word, __ATOMIC_RELAXED))
        __atomic_store_n(f->word, v, __ATOMIC_RELEASE);
}

/* Follows one job: the word up to its counter until complete, or its
 * client gone or late; then every wait released. */
static int follow(cuda_fill *f, gemmd_job *j, uint64_t base)
{
    const uint64_t top = (uint64_t)j->fill_parts + 1,
                   end = job_fill_deadline(j);
    int rv;
    for (unsigned spins = 0;; spins++) {
        uint64_t v = job_fill_now(j);
        raise_to(f, base + (v < top ? v : top));
        rv = job_fill_state(j, v, top, end, f->msg, sizeof(f->msg));
        if (rv == JOB_FILL_PENDING && atomic_load(&f->give_up)) {
            snprintf(f->msg, sizeof(f->msg), "the job failed mid-fill");
            rv = GEMM_ERR_INTERNAL;
        }
        if (rv != JOB_FILL_PENDING)
            break;
        job_fill_pause(spins);
    }
    raise_to(f, base + top);
    return rv;
}

static void *follower(void *arg)
{
    cuda_fill *f = arg;
    pthread_mutex_lock(&f->mu);
    for (;;) {
        while (f->job == NULL && !f->quit)
            pthread_cond_wait(&f->cv, &f->mu);
        if (f->quit)
            break;
        gemmd_job *j = f->job;
        uint64_t base = f->base;
        pthread_mutex_unlock(&f->mu);
        int rv = follow(f, j, base);
        pthread_mutex_lock(&f->mu);
        f->status = rv;
        f->job = NULL;
        pthread_cond_broadcast(&f->cv);
    }
    pthread_mutex_unlock(&f->mu);
    return NULL;
}

bool cuda_fill_begin(cuda_fill *f, gemmd_job *j)
{
    if (!f->ok || j->fill == NULL)
        return false;
    if (!f->started) {
        if (pthread_create(&f->thread, NULL, follower, f) != 0)
            return false;
        f->started = true;
    }
    pthread_mutex_lock(&f->mu);
    f->msg[0] = '\0';
    f->status = GEMM_OK;
    f->gated = 0;
    atomic_store(&f->give_up, false);
    f->job = j;
    pthread_cond_broadcast(&f->cv);
    pthread_mutex_unlock(&f->mu);
    return true;
}

int cuda_fill_start(cuda_fill *f, gemmd_job *j, bool can_gate, bool *following)
{
    *following = false;
    if (j->fill == NULL)
        return GEMM_OK;
    if (can_gate && cuda_fill_begin(f, j)) {
        *following = true;
        return GEMM_OK;
    }
    return job_fill_wait(j, j->fill_parts + 1u);
}

int cuda_fill_gate(cuda_fill *f, cudaStream_t s, uint64_t need, char *msg,
                   size_t len)
{
    if (need <= f->gated)
        return GEMM_OK;
    f->gated = need;
    CUresult r = wait64((CUstream)s, (CUdeviceptr)f->word_dev, f->base + need,
                        CU_STREAM_WAIT_VALUE_GEQ);
    if (r == CUDA_SUCCESS)
        return GEMM_OK;
    snprintf(msg, len, "cuStreamWaitValue64 failed (CUresult %d)", (int)r);
    return GEMM_ERR_DEVICE;
}

int cuda_fill_end(cuda_fill *f, bool give_up, char *msg, size_t len)
{
    if (give_up)
        atomic_store(&f->give_up, true);
    pthread_mutex_lock(&f->mu);
    while (f->job != NULL)
        pthread_cond_wait(&f->cv, &f->mu);
    int rv = f->status;
    f->base = __atomic_load_n(f->word, __ATOMIC_RELAXED) + 1;
    pthread_mutex_unlock(&f->mu);
    if (rv != GEMM_OK)
        snprintf(msg, len, "%s", f->msg);
    return rv;
}

bool cuda_drain_ok(cuda_fill *f, gemmd_job *j, uint64_t *dev)
{
    void *dp = NULL;
    pthread_once(&wait64_once, wait64_find);
    if (!f->ok || write64 == NULL || j->drain == NULL)
        return false;
    if (cudaHostGetDevicePointer(&dp, j->drain, 0) != cudaSuccess) {
        cudaGetLastError(); /* not pinned: no early word */
        return false;
    }
    *dev = (uint64_t)(uintptr_t)dp;
    return true;
}

int cuda_drain_post(cudaStream_t s, uint64_t dev, uint64_t rows, char *msg,
                    size_t len)
{
    CUresult r = write64((CUstream)s, (CUdeviceptr)dev, rows,
                         CU_STREAM_WRITE_VALUE_DEFAULT);
    if (r == CUDA_SUCCESS)
        return GEMM_OK;
    snprintf(msg, len, "cuStreamWriteValue64 failed (CUresult %d)", (int)r);
    return GEMM_ERR_DEVICE;
}
