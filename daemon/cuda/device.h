/*
 * device.h: one GPU of the CUDA backend as an object: its CUDA context
 * and stream-ordered memory pool, its workers (a stream, events and a
 * kernel context each, claimed by the scheduler's threads), the client
 * buffers pinned for it, the device memory its staging and resident
 * tensors hold, and each worker's queue of freed ranges to drop from its
 * tensor-map cache. The backend holds a list of these (device.c).
 */
#ifndef GEMMD_CUDA_DEVICE_H
#define GEMMD_CUDA_DEVICE_H

#include "config.h"
#include "cuda/fill.h"
#include "pipe_rates.h"

#include <gemm_kernels.h>

#include <cuda_runtime_api.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>

#define CUDA_WORKERS 3 /* one copying in, one computing, one copying out */

typedef struct cuda_device cuda_device;

/* A freed tensor's range, for a worker to drop from its tensor-map cache. */
typedef struct cuda_forget {
    const void *base;
    size_t bytes;
    struct cuda_forget *next;
} cuda_forget;

/* Panels (blocks) of one job at most (events per worker). */
#define CUDA_PANELS PIPE_MAX_BLOCKS

/* A worker's two copy streams and per-panel events: copies in on one,
 * the kernels on the worker's stream, copies out on the other, so that a
 * large job's panel i+1 comes in and panel i-1 goes out while panel i
 * computes (pipeline.c, staging_blas3.c). */
typedef struct cuda_panels {
    cudaStream_t in, out;
    /* timed: panel i's operands in by in_done[i], its kernel from
     * run_start[i] to run_done[i], its part of D out by out_done[i]
     * (recorded when the run is measured, as step_done) */
    cudaEvent_t in_done[CUDA_PANELS];
    cudaEvent_t run_start[CUDA_PANELS], run_done[CUDA_PANELS];
    cudaEvent_t out_done[CUDA_PANELS];
    /* the copy in of step s (a panel of op(A) or op(B)) done */
    cudaEvent_t step_done[PIPE_MAX_STEPS];
} cuda_panels;

typedef struct cuda_worker {
    cuda_device *dev; /* the device it belongs to */
    cudaStream_t stream;
    cuda_panels panels;
    pipe_cache plans;  /* its pipelined GEMMs' last plans */
    gemmk_ctx *kctx;   /* used by its worker thread alone */
    cudaEvent_t ev[4]; /* start, copies in done, kernel done, copy out done */
    cuda_fill fill;    /* level-3 operands filled by parts (fill.h) */
    /* ranges freed by the loop thread, applied to kctx's cache by the
     * worker before its next job (the cache is not thread-safe; its keys
     * hold everything a map encodes, so an entry left over until then is
     * never wrong, only a slot taken) */
    pthread_mutex_t forget_mu;
    cuda_forget *forget;
} cuda_worker;

struct cuda_device {
    unsigned index; /* in the backend's list (placement's device number) */
    int ordinal;    /* CUDA device number (several objects may share one) */
    char name[128]; /* "H100 ... (sm_90, 132 SMs)" */
    unsigned sms;
    cudaMemPool_t pool;
    pthread_mutex_t mu; /* guards claimed */
    cuda_worker workers[CUDA_WORKERS];
    unsigned nworkers;          /* made at start-up */
    unsigned claimed;           /* bound to a worker thread */
    atomic_ullong pinned_bytes; /* cudaHostRegister'ed client memory */
    atomic_ullong device_bytes; /* staging and resident tensors ... */
    atomic_ullong *mem;         /* ... counted here: device_bytes of the first
                                   object of this GPU (objects of one GPU share
                                   its memory and --max-device-bytes) */
    atomic_uint tensors;        /* resident tensors held (home or copy) */
    atomic_ullong migrations;   /* tensor copies made here */
    unsigned long long max_pinned, max_device; /* 0: no limit */
    /* the device reads registered host memory at its host address
     * (cudaDevAttrCanUseHostPointerForRegisteredMem): tiny GEMMs run
     * straight from the client's pinned buffers (staging.c) */
    bool host_direct;
    /* the link's and the kernels' rates its pipelined GEMMs measured */
    pipe_rates_table rates;
};

/* Maps a CUDA error to a gemm_error and writes "what failed: message
 * (file:line)" into msg. Any thread. */
int cuda_fail(cudaError_t e, const char *what, const char *file, int line,
              char *msg, size_t len);

/* Checks a CUDA call; on failure sets rv and msg and jumps to fail. */
#define CK(call, msg, len)                                                     \
    do {                                                                       \
        cudaError_t e_ = (call);                                               \
        if (e_ != cudaSuccess) {                                               \
            rv = cuda_fail(e_, #call, __FILE__, __LINE__, msg, len);           \
            goto fail;                                                         \
        }                                                                      \
    } while (0)

/*
 * Makes device object `index` of CUDA device `ordinal`: its context, pool,
 * CUDA_WORKERS workers, limits from cfg. Logs the kernels' tuning knobs
 * set (at notice level) when the first kernel context is made. On
 * success *out is freed with cuda_device_destroy; on failure nothing is
 * left and msg says why. Returns a gemm_error. Main thread, at start-up:
 * nothing is created later, so the daemon's memory and mappings are the
 * same after the first request as before it.
 */
int cuda_device_create(cuda_device **out, unsigned index, int ordinal,
                       const gemmd_config *cfg, char *msg, size_t len);

/* Frees the workers and the object (their threads are joined). NULL is a
 * no-op. Main thread. */
void cuda_device_destroy(cuda_device *d);

/* The calling thread's worker, claimed on its first call from d's
 * workers (and d made current on the thread); GEMM_ERR_INTERNAL with msg
 * when all are claimed. Worker threads. */
int cuda_device_claim(cuda_device *d, cuda_worker **out, char *msg, size_t len);
/* The worker the calling thread claimed before, or NULL. */
cuda_worker *cuda_worker_current(void);

/* Worker thread: drops the freed ranges queued for w from its cache. */
void cuda_worker_forget(cuda_worker *w);

/* Loop thread: queues [base, base + bytes) for every worker of d to drop
 * from its tensor-map cache before its next job. */
void cuda_device_forget(cuda_device *d, const void *base, size_t bytes);

/* Reserves size bytes of d's pinned-memory limit: GEMM_ERR_LIMIT and a
 * message past it. Loop thread. unreserve gives them back, any thread. */
int cuda_device_reserve(cuda_device *d, size_t size, char *msg, size_t len);
void cuda_device_unreserve(cuda_device *d, size_t size);

/* Pins a client buffer whose bytes are reserved (cudaHostRegister,
 * portable and mapped); on failure the reservation stays the caller's.
 * *handle is what cuda_device_unpin takes; unpin unregisters and releases
 * the reservation. Any thread (the pinner's for large buffers). */
int cuda_device_pin(cuda_device *d, void *base, size_t size, void **handle,
                    char *msg, size_t len);
void cuda_device_unpin(cuda_device *d, void *base, void *handle);

/* Enables peer access between the distinct GPUs of devs (where the
 * hardware allows; logged either way). Main thread, at start-up. */
void cuda_devices_peer(cuda_device *const *devs, unsigned n);

/* Makes d count its device memory with `first` (an object of the same
 * GPU made before it). Main thread, at start-up. */
void cuda_device_share_memory(cuda_device *d, cuda_device *first);

/* Adds d's memory counters (its GPU's device memory) and its workers'
 * tensor-map cache counters to *out. Loop thread. */
void cuda_device_stats(cuda_device *d, uint64_t *pinned, uint64_t *device,
                       uint64_t *tmap_hits, uint64_t *tmap_misses);

#endif
