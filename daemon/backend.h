/*
 * backend.h: the compute backends, one ops table each (as Redis' ae picks an
 * event backend, or nng fills protocol ops): `cpu` (OpenBLAS) and `cuda`
 * (our Hopper kernels). The loop thread calls init/fini/pin/unpin and the
 * kernel hooks (listing, checking a named kernel against a request); gemm
 * runs on the scheduler's worker threads.
 */
#ifndef GEMMD_BACKEND_H
#define GEMMD_BACKEND_H

#include "config.h"
#include "job.h"

#include <stdbool.h>
#include <stddef.h>

typedef struct gemmd_backend gemmd_backend;

/* Memory and cache counters a backend reports for Status. */
typedef struct gemmd_backend_stats {
    uint64_t pinned_bytes;
    uint64_t device_bytes;
    uint64_t tmap_hits, tmap_misses;
} gemmd_backend_stats;

/* One device object's counters for Status and the metrics. */
typedef struct gemmd_device_stats {
    char name[128];
    uint64_t memory_bytes; /* device memory in use (cpu: tensor copies) */
    uint64_t pinned_bytes; /* client memory pinned, usable by the device */
    uint32_t tensors;      /* resident tensors with a copy here */
    uint64_t migrations;   /* tensor copies made here from another device */
    uint64_t tmap_hits, tmap_misses;
} gemmd_device_stats;

/* A kernel the backend runs by name, as ListKernels reports it (the
 * fields of gemm_kernel_info; strings static). */
typedef struct gemmd_kernel {
    const char *name;
    const char *summary;
    unsigned ladder;             /* rung on the teaching ladder; 0: not on it */
    bool reference;              /* what the others are compared to */
    unsigned ab_types, cd_types; /* bit (1u << gemm_dtype) per type */
    unsigned precisions;         /* bit (1u << gemm_precision) */
    unsigned transposes;         /* bit (trans_a | trans_b << 1) */
} gemmd_kernel;

typedef struct gemmd_backend_ops {
    const char *name;
    /* true when this backend can run here (auto selection); no side
     * effects */
    bool (*available)(void);
    /* sets be->device, be->ndevices, be->dev_workers (be->workers =
     * their product) and the placement rates; returns a gemm_error and
     * a message */
    int (*init)(gemmd_backend *be, const gemmd_config *cfg, char *msg,
                size_t len);
    void (*fini)(gemmd_backend *be);
    /* optional, used while be->pins: pin client buffers for the device.
     * pin_reserve takes size bytes of --max-pinned-bytes (GEMM_ERR_LIMIT
     * and a message when over), loop thread; pin registers reserved
     * memory (e.g. cudaHostRegister), any thread, the pinner's for large
     * buffers; unpin unregisters it and releases its reservation, and
     * pin_unreserve releases one that was never pinned, any thread */
    int (*pin_reserve)(gemmd_backend *be, size_t size, char *msg, size_t len);
    void (*pin_unreserve)(gemmd_backend *be, size_t size);
    int (*pin)(gemmd_backend *be, void *base, size_t size, void **handle,
               char *msg, size_t len);
    void (*unpin)(gemmd_backend *be, void *base, void *handle);
    /* optional: bytes of host memory job j will allocate while it runs
     * (scratch, conversions), reserved from the daemon's memory budget
     * before it is queued. Loop thread. */
    uint64_t (*job_memory)(gemmd_backend *be, const gemmd_job *j);
    /* runs job (JOB_GEMM, or JOB_BLAS3: symm .. trsm) on device
     * job->device (the calling thread serves only that device); on
     * failure sets job->msg; returns a gemm_error. Worker threads; up to
     * be->workers at once. */
    int (*gemm)(gemmd_backend *be, gemmd_job *job);
    /* optional: runs batch job (JOB_BATCH) whole on device job->device,
     * in as few kernel launches as the backend can (its operands staged
     * once per distinct buffer range, one grouped launch, every D copied
     * back); the launch is one slice (not stopped part way). Sets *declined
     * and returns GEMM_OK having run nothing when it does not take this
     * batch (gemmd_batch_run then runs the problems one by one);
     * otherwise fills job's stage times, nran and ran, and on failure msg
     * and failed, and returns a gemm_error. Worker threads. */
    int (*batch)(gemmd_backend *be, gemmd_job *job, bool *declined);
    /* JOB_UPLOAD: copies the matrix into memory of device job->device
     * (the tensor's home) and fills job->tensor. Worker threads. */
    int (*upload)(gemmd_backend *be, gemmd_job *job);
    /* frees what upload made (its tensor->pin handle). Loop thread. */
    void (*tensor_free)(gemmd_backend *be, void *handle);
    /* optional: memory and cache counters for Status. Loop thread. */
    void (*stats)(gemmd_backend *be, gemmd_backend_stats *out);
    /* the i-th kernel of the backend's catalog into *out; false past the
     * end. Any thread. */
    bool (*kernel_at)(gemmd_backend *be, size_t i, gemmd_kernel *out);
    /* whether job j's kernel (j->kernel, "" = auto) exists here and serves
     * j's types, precision and transposes: GEMM_OK, or
     * GEMM_ERR_UNSUPPORTED with a message. Loop thread, before the job is
     * queued (safe while workers run). */
    int (*kernel_check)(gemmd_backend *be, const gemmd_job *j, char *msg,
                        size_t len);
    /* optional: device i's counters into *out. Loop thread. */
    void (*device_stats)(gemmd_backend *be, unsigned i,
                         gemmd_device_stats *out);
    /* optional: the devices holding a copy of resident tensor `handle`
     * (bit i: device i), for placement. Any thread. */
    uint32_t (*tensor_devices)(gemmd_backend *be, const void *handle);
    /* optional: the kernel the panels of split GEMM j must all run for
     * their results to equal the whole run on one device (into name; ""
     * = any); false when j must not be split (its kernel's result would
     * depend on the panel's shape). Loop thread. */
    bool (*split_kernel)(gemmd_backend *be, const gemmd_job *j, char *name,
                         size_t len);
    /* optional: what the last job run on this worker thread left for
     * after its reply was handed on (the CUDA pipeline's measurements).
     * Worker threads. */
    void (*after)(gemmd_backend *be);
} gemmd_backend_ops;

struct gemmd_backend {
    const gemmd_backend_ops *ops;
    char device[128];     /* what Hello and Status report */
    unsigned workers;     /* worker threads the scheduler runs, all devices */
    unsigned ndevices;    /* device objects (at least 1) */
    unsigned dev_workers; /* worker threads per device */
    unsigned split_align; /* rows of D a split panel is a multiple of */
    double flops_rate;    /* one device's GEMM rate, flop/s (placement) */
    double copy_rate;     /* host <-> device bytes/s */
    double peer_rate;     /* device -> device bytes/s */
    /* the physical unit of each device: the index of the first device
     * object on the same GPU (its own index on the CPU). A GEMM is split
     * across units, not across objects of one GPU (they share its SMs
     * and its PCIe link, and each panel would copy B again) */
    unsigned group[GEMMD_MAX_DEVICES];
    unsigned threads;  /* compute threads (CPU backend) */
    bool host_tensors; /* resident tensors live in host memory (they count
                          against the daemon's memory budget) */
    bool pins;         /* client buffers are pinned (the pin hooks are used) */
    void *priv;
};

extern const gemmd_backend_ops gemmd_backend_cpu;
#ifdef GEMM_HAVE_CUDA
extern const gemmd_backend_ops gemmd_backend_cuda;
#endif

/*
 * Runs batch job j (JOB_BATCH) on device j->device: through be's batch
 * hook when it has one that takes j (unless j was asked to stop first);
 * else its problems in order, each through be's gemm hook as a GEMM of its own
 * (slices, staging, kernel choice unchanged), skipping those with m or n 0;
 * stops between two problems when j is asked to (each running problem stops at
 * its own next slice), and lets the scheduler run others' small jobs between
 * problems (j->between) about every BATCH_YIELD_NS. Fills j's stage
 * times (sums), nran, ran (the first problem's kernel) and, on failure,
 * failed and msg ("problem I: ..."). Returns a gemm_error. Worker thread
 * (batch_run.c).
 */
int gemmd_batch_run(gemmd_backend *be, gemmd_job *j);
#define BATCH_YIELD_NS 10000000ull

/*
 * Picks the backend named in cfg->backend ("auto": cuda if available, else
 * cpu) and initialises it into *be. Returns a gemm_error and a message.
 * Main thread.
 */
int gemmd_backend_open(gemmd_backend *be, const gemmd_config *cfg, char *msg,
                       size_t len);

#endif
