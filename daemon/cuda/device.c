/*
 * device.c: the device object of the CUDA backend (device.h): made once
 * per GPU at start-up with its workers, pinned registrations and memory
 * counters, the workers claimed by the scheduler's threads, freed tensor
 * ranges passed to the workers' tensor-map caches.
 */
#include "cuda/device.h"
#include "log.h"

#include <gemm/types.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

static _Thread_local cuda_worker *tls_worker;

int cuda_fail(cudaError_t e, const char *what, const char *file, int line,
              char *msg, size_t len)
{
    snprintf(msg, len, "%s failed: %s (%s:%d)", what, cudaGetErrorString(e),
             file, line);
    return e == cudaErrorMemoryAllocation ? GEMM_ERR_DEVICE_MEMORY
                                          : GEMM_ERR_DEVICE;
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

/* Pays worker w's first-use costs before a request meets them (the
 * kernel modules and cuBLAS's first calls: tens of ms in a first fp64
 * request otherwise); the first worker of a device warms the large shapes
 * too. A failure only costs that first request its time: logged, not
 * fatal. Main thread, at start-up. */
static void worker_warm(cuda_device *d, cuda_worker *w)
{
    char why[256] = "";
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    int rv = gemmk_ctx_warm(w->kctx, w->stream, w == &d->workers[0], why,
                            sizeof(why));
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double ms = (t1.tv_sec - t0.tv_sec) * 1e3 + (t1.tv_nsec - t0.tv_nsec) / 1e6;
    if (rv != GEMM_OK)
        gemmd_log(LOG_WARNING,
                  "cuda backend: device %d worker %td: warm-up failed after "
                  "%.1f ms (%s: %s); its first request pays the rest",
                  d->ordinal, w - d->workers, ms, gemm_strerror(rv), why);
    else
        gemmd_log(LOG_INFO,
                  "cuda backend: device %d worker %td warmed in %.1f ms",
                  d->ordinal, w - d->workers, ms);
}

/* Grows d's memory pool (which keeps what is freed) by
 * --device-warm-bytes, so the first requests' staging does not wait for
 * the driver to make device memory (17 ms for a dgemm 4096's on the
 * H200). Under --max-device-bytes. A failure is logged, not fatal. Main
 * thread, at start-up. */
static void pool_warm(cuda_device *d, const gemmd_config *cfg)
{
    size_t bytes = cfg->device_warm_bytes;
    if (cfg->max_device_bytes != 0 && bytes > cfg->max_device_bytes)
        bytes = cfg->max_device_bytes;
    if (bytes == 0)
        return;
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    void *p = NULL;
    cudaError_t e = cudaMallocAsync(&p, bytes, 0);
    if (e == cudaSuccess)
        e = cudaFreeAsync(p, 0);
    if (e == cudaSuccess)
        e = cudaStreamSynchronize(0);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    if (e != cudaSuccess) {
        cudaGetLastError();
        gemmd_log(LOG_WARNING,
                  "cuda backend: device %d: cannot make %zu MiB of device "
                  "memory ahead (%s); first requests make their own",
                  d->ordinal, bytes >> 20, cudaGetErrorString(e));
        return;
    }
    gemmd_log(LOG_INFO,
              "cuda backend: device %d: %zu MiB of device memory made ahead "
              "in %.1f ms (--device-warm-bytes)",
              d->ordinal, bytes >> 20,
              (t1.tv_sec - t0.tv_sec) * 1e3 + (t1.tv_nsec - t0.tv_nsec) / 1e6);
}

/* Makes a worker's copy streams and panel events (all or none). */
static cudaError_t panels_create(cuda_panels *p)
{
    cudaError_t e;
    memset(p, 0, sizeof(*p));
    if ((e = cudaStreamCreateWithFlags(&p->in, cudaStreamNonBlocking)) ||
        (e = cudaStreamCreateWithFlags(&p->out, cudaStreamNonBlocking)))
        return e;
    for (int i = 0; i < CUDA_PANELS; i++)
        if ((e = cudaEventCreate(&p->in_done[i])) ||
            (e = cudaEventCreate(&p->run_start[i])) ||
            (e = cudaEventCreate(&p->run_done[i])) ||
            (e = cudaEventCreate(&p->out_done[i])))
            return e;
    for (int i = 0; i < PIPE_MAX_STEPS; i++)
        if ((e = cudaEventCreate(&p->step_done[i])))
            return e;
    return cudaSuccess;
}

/* Frees what panels_create made (any part of it). */
static void panels_destroy(cuda_panels *p)
{
    for (int i = 0; i < CUDA_PANELS; i++) {
        if (p->in_done[i] != NULL)
            cudaEventDestroy(p->in_done[i]);
        if (p->run_start[i] != NULL)
            cudaEventDestroy(p->run_start[i]);
        if (p->run_done[i] != NULL)
            cudaEventDestroy(p->run_done[i]);
        if (p->out_done[i] != NULL)
            cudaEventDestroy(p->out_done[i]);
    }
    for (int i = 0; i < PIPE_MAX_STEPS; i++)
        if (p->step_done[i] != NULL)
            cudaEventDestroy(p->step_done[i]);
    if (p->in != NULL)
        cudaStreamDestroy(p->in);
    if (p->out != NULL)
        cudaStreamDestroy(p->out);
    memset(p, 0, sizeof(*p));
}

/* Makes worker w's stream, events and kernel context on device d. */
static int worker_create(cuda_device *d, cuda_worker *w, char *msg, size_t len)
{
    int rv = GEMM_OK;
    w->dev = d;
    pthread_mutex_init(&w->forget_mu, NULL);
    CK(cudaStreamCreateWithFlags(&w->stream, cudaStreamNonBlocking), msg, len);
    for (int e = 0; e < 4; e++)
        CK(cudaEventCreate(&w->ev[e]), msg, len);
    CK(panels_create(&w->panels), msg, len);
    if ((rv = cuda_fill_init(&w->fill, w->panels.in, msg, len)) != GEMM_OK)
        goto fail;
    rv = gemmk_ctx_create(&w->kctx, d->ordinal);
    if (rv != GEMM_OK) {
        snprintf(msg, len, "cannot create the kernel context: %s",
                 gemm_strerror(rv));
        goto fail;
    }
    if (w == &d->workers[0] && d->index == 0)
        log_knobs(w->kctx);
    worker_warm(d, w);
    return GEMM_OK;
fail:
    gemmk_ctx_destroy(w->kctx);
    cuda_fill_destroy(&w->fill);
    panels_destroy(&w->panels);
    for (int e = 0; e < 4; e++)
        if (w->ev[e] != NULL)
            cudaEventDestroy(w->ev[e]);
    if (w->stream != NULL)
        cudaStreamDestroy(w->stream);
    memset(w, 0, sizeof(*w));
    return rv;
}

int cuda_device_create(cuda_device **out, unsigned index, int ordinal,
                       const gemmd_config *cfg, char *msg, size_t len)
{
    int rv;
    struct cudaDeviceProp prop;
    cuda_device *d = calloc(1, sizeof(*d));
    if (d == NULL)
        return GEMM_ERR_NOMEM;
    pthread_mutex_init(&d->mu, NULL);
    pipe_rates_init(&d->rates);
    d->index = index;
    d->ordinal = ordinal;
    d->mem = &d->device_bytes;
    d->max_pinned = cfg->max_pinned_bytes;
    d->max_device = cfg->max_device_bytes;
    CK(cudaSetDevice(d->ordinal), msg, len);
    CK(cudaGetDeviceProperties(&prop, d->ordinal), msg, len);
    if (prop.major != 9) {
        snprintf(msg, len,
                 "device %d (%.100s) is sm_%d%d; the kernels need "
                 "Hopper (sm_90)",
                 d->ordinal, prop.name, prop.major, prop.minor);
        rv = GEMM_ERR_UNSUPPORTED;
        goto fail;
    }
    CK(cudaFree(NULL), msg, len); /* create the context now */
    int direct = 0;
    CK(cudaDeviceGetAttribute(
           &direct, cudaDevAttrCanUseHostPointerForRegisteredMem, d->ordinal),
       msg, len);
    d->host_direct = direct != 0;
    CK(cudaDeviceGetDefaultMemPool(&d->pool, d->ordinal), msg, len);
    unsigned long long keep = ~0ull; /* never give freed blocks back */
    CK(cudaMemPoolSetAttribute(d->pool, cudaMemPoolAttrReleaseThreshold, &keep),
       msg, len);
    pool_warm(d, cfg);
    snprintf(d->name, sizeof(d->name), "%.100s (sm_%d%d, %d SMs)", prop.name,
             prop.major, prop.minor, prop.multiProcessorCount);
    d->sms = (unsigned)prop.multiProcessorCount;
    for (; d->nworkers < CUDA_WORKERS; d->nworkers++) {
        rv = worker_create(d, &d->workers[d->nworkers], msg, len);
        if (rv != GEMM_OK)
            goto fail;
    }
    gemmd_log(LOG_INFO, "cuda backend: device %u: GPU %d, %s, %.1f GiB",
              d->index, d->ordinal, d->name,
              prop.totalGlobalMem / (double)(1u << 30));
    *out = d;
    return GEMM_OK;
fail:
    cuda_device_destroy(d);
    return rv;
}

void cuda_device_destroy(cuda_device *d)
{
    if (d == NULL)
        return;
    for (unsigned i = 0; i < d->nworkers; i++) {
        cuda_worker_forget(&d->workers[i]); /* workers are joined: safe */
        pthread_mutex_destroy(&d->workers[i].forget_mu);
        gemmk_ctx_destroy(d->workers[i].kctx);
        cuda_fill_destroy(&d->workers[i].fill);
        panels_destroy(&d->workers[i].panels);
        for (int e = 0; e < 4; e++)
            cudaEventDestroy(d->workers[i].ev[e]);
        cudaStreamDestroy(d->workers[i].stream);
    }
    pthread_mutex_destroy(&d->mu);
    pipe_rates_destroy(&d->rates);
    free(d);
}

int cuda_device_claim(cuda_device *d, cuda_worker **out, char *msg, size_t len)
{
    int rv = GEMM_OK;
    if (tls_worker != NULL) {
        *out = tls_worker;
        return GEMM_OK;
    }
    pthread_mutex_lock(&d->mu);
    if (d->claimed == d->nworkers) {
        pthread_mutex_unlock(&d->mu);
        snprintf(msg, len, "more GPU worker threads than streams");
        return GEMM_ERR_INTERNAL;
    }
    cuda_worker *w = &d->workers[d->claimed];
    CK(cudaSetDevice(d->ordinal), msg, len);
    d->claimed++;
    tls_worker = w;
    *out = w;
fail:
    pthread_mutex_unlock(&d->mu);
    return rv;
}

cuda_worker *cuda_worker_current(void)
{
    return tls_worker;
}

void cuda_worker_forget(cuda_worker *w)
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

void cuda_device_forget(cuda_device *d, const void *base, size_t bytes)
{
    for (unsigned i = 0; i < d->nworkers; i++) {
        cuda_worker *w = &d->workers[i];
        cuda_forget *f = malloc(sizeof(*f));
        if (f == NULL)
            continue; /* a stale entry is harmless, see cuda_worker */
        f->base = base;
        f->bytes = bytes;
        pthread_mutex_lock(&w->forget_mu);
        f->next = w->forget;
        w->forget = f;
        pthread_mutex_unlock(&w->forget_mu);
    }
}

void cuda_device_share_memory(cuda_device *d, cuda_device *first)
{
    d->mem = first->mem;
}

void cuda_devices_peer(cuda_device *const *devs, unsigned n)
{
    int gpus[GEMMD_MAX_DEVICES];
    unsigned ngpus = 0;
    for (unsigned i = 0; i < n; i++) {
        unsigned k = 0;
        while (k < ngpus && gpus[k] != devs[i]->ordinal)
            k++;
        if (k == ngpus && ngpus < GEMMD_MAX_DEVICES)
            gpus[ngpus++] = devs[i]->ordinal;
    }
    for (unsigned i = 0; i < ngpus; i++) {
        for (unsigned k = 0; k < ngpus; k++) {
            int a = gpus[i], b = gpus[k], can = 0;
            if (a == b)
                continue;
            cudaError_t e = cudaDeviceCanAccessPeer(&can, a, b);
            if (e == cudaSuccess && can) {
                e = cudaSetDevice(a);
                if (e == cudaSuccess)
                    e = cudaDeviceEnablePeerAccess(b, 0);
                if (e == cudaErrorPeerAccessAlreadyEnabled)
                    e = cudaSuccess;
            }
            cudaGetLastError(); /* a failure is not sticky: copies go by
                                   the host */
            gemmd_log(LOG_INFO, "cuda backend: GPU %d -> GPU %d: %s", a, b,
                      e == cudaSuccess && can
                          ? "peer access enabled"
                          : "no peer access; tensors copy through the host");
        }
    }
}

int cuda_device_reserve(cuda_device *d, size_t size, char *msg, size_t len)
{
    unsigned long long now = atomic_fetch_add(&d->pinned_bytes, size);
    if (d->max_pinned != 0 && now + size > d->max_pinned) {
        atomic_fetch_sub(&d->pinned_bytes, size);
        snprintf(msg, len,
                 "pinning %zu more bytes would pass the daemon's "
                 "limit of %llu pinned bytes",
                 size, d->max_pinned);
        return GEMM_ERR_LIMIT;
    }
    return GEMM_OK;
}

void cuda_device_unreserve(cuda_device *d, size_t size)
{
    atomic_fetch_sub(&d->pinned_bytes, size);
}

/* Makes every page of [base, base + size) present and writable, contents
 * unchanged: MADV_POPULATE_WRITE (Linux 5.14; an older kernel refuses it,
 * and the registration faults the pages in itself), 32 MiB at a time: it
 * holds the process's mmap lock for reading, and a thread that maps
 * memory meanwhile (malloc, the driver) waits for it, and every page
 * fault of every thread behind that one. */
static double populate(void *base, size_t size)
{
#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23
#endif
    const size_t step = (size_t)32 << 20;
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (size_t off = 0; off < size; off += step) {
        size_t n = size - off < step ? size - off : step;
        if (madvise((char *)base + off, n, MADV_POPULATE_WRITE) != 0) {
            gemmd_log(LOG_DEBUG, "madvise(MADV_POPULATE_WRITE): %s",
                      strerror(errno));
            break;
        }
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    return (double)(t1.tv_sec - t0.tv_sec) + (t1.tv_nsec - t0.tv_nsec) * 1e-9;
}

/*
 * cudaHostRegister holds a driver lock that stops every copy of every
 * thread (any cudaMemcpy*, from any memory) until it returns, and faulting
 * the pages in is most of its time: a fresh GiB took 0.50 s, every GPU
 * copy of the daemon waiting that long, a buffer's first GEMM included.
 * With the pages made first (outside the lock) the registration took
 * 0.034-0.055 s a GiB (H100, docs/e2e-bench.md). Registering in pieces
 * does not help: a copy spanning two registrations is refused.
 */
int cuda_device_pin(cuda_device *d, void *base, size_t size, void **handle,
                    char *msg, size_t len)
{
    int rv = GEMM_OK;
    CK(cudaSetDevice(d->ordinal), msg, len);
    double pages = populate(base, size);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    CK(cudaHostRegister(base, size,
                        cudaHostRegisterPortable | cudaHostRegisterMapped),
       msg, len);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    gemmd_log(LOG_DEBUG, "pinned %zu bytes: pages %.3f s, registration %.3f s",
              size, pages,
              (double)(t1.tv_sec - t0.tv_sec) +
                  (t1.tv_nsec - t0.tv_nsec) * 1e-9);
    *handle = (void *)(uintptr_t)size;
    return GEMM_OK;
fail:
    return rv;
}

void cuda_device_unpin(cuda_device *d, void *base, void *handle)
{
    cudaError_t e = cudaHostUnregister(base);
    if (e != cudaSuccess)
        gemmd_log(LOG_WARNING, "cudaHostUnregister: %s", cudaGetErrorString(e));
    atomic_fetch_sub(&d->pinned_bytes, (size_t)(uintptr_t)handle);
}

void cuda_device_stats(cuda_device *d, uint64_t *pinned, uint64_t *device,
                       uint64_t *tmap_hits, uint64_t *tmap_misses)
{
    *pinned += atomic_load(&d->pinned_bytes);
    *device += atomic_load(d->mem);
    pthread_mutex_lock(&d->mu);
    for (unsigned i = 0; i < d->nworkers; i++) {
        gemmk_cache_stats cs;
        gemmk_cache_stats_get(d->workers[i].kctx, &cs);
        *tmap_hits += cs.hits;
        *tmap_misses += cs.misses;
    }
    pthread_mutex_unlock(&d->mu);
}
