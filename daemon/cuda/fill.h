/*
 * fill.h: a GEMM or level-3 job whose client is still filling its operands
 * (proto's Fill, common/fill.h) on a device worker. The worker's copies
 * in wait on the GPU (cuStreamWaitValue64) for a word of gemmd's own
 * mapped host memory, which a follower thread raises as the client's
 * counter grows. The client never writes what the GPU waits on: one that
 * stops short or leaves is cut off at its deadline (every wait released,
 * its job failed) and holds up no other job. Where stream waits do not
 * work, the job waits for the whole fill on the host first. The other
 * way, the GPU stores how many of a GEMM's rows of D have landed in a
 * word of the client's (proto's Drain).
 */
#ifndef GEMMD_CUDA_FILL_H
#define GEMMD_CUDA_FILL_H

#include "job.h"

#include <cuda_runtime.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

typedef struct cuda_fill {
    bool inited;    /* by cuda_fill_init (destroy does nothing otherwise) */
    bool ok;        /* stream waits work on this device */
    uint64_t *word; /* mapped host memory the GPU waits on */
    uint64_t word_dev;
    uint64_t base;  /* the current job's targets are base + need */
    uint64_t gated; /* the largest need queued for the current job */
    pthread_t thread;
    bool started; /* the follower runs (made on first use) */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    gemmd_job *job; /* being followed; NULL once done */
    int status;     /* the follow's outcome */
    char msg[200];  /* why it failed */
    bool quit;
    atomic_bool give_up; /* the worker failed: release every wait now */
} cuda_fill;

/* Sets f up for device ordinal's worker (stream s, on that device's
 * context): f->ok says whether stream waits work. Returns a gemm_error
 * for a CUDA failure other than that. */
int cuda_fill_init(cuda_fill *f, cudaStream_t s, char *msg, size_t len);

/* Stops f's follower and frees what init made (nothing for a zeroed
 * f that init never saw). */
void cuda_fill_destroy(cuda_fill *f);

/* Starts following j's counter; false when f cannot (no stream waits, or
 * no follower thread): the caller then waits for the whole fill on the
 * host (job_fill_wait). The worker's thread, before queueing j's work. */
bool cuda_fill_begin(cuda_fill *f, gemmd_job *j);

/* Before j's work is queued: nothing when j has no fill; else follows
 * its counter (cuda_fill_begin) when can_gate (the caller gates every
 * copy in: its buffers pinned) and f can, setting *following, or waits
 * for the whole fill here. GEMM_OK or the wait's error (j->msg). */
int cuda_fill_start(cuda_fill *f, gemmd_job *j, bool can_gate, bool *following);

/* Queues on s a wait until the counter of the job begun reaches need
 * (nothing when an earlier gate of the job waited for as much). */
int cuda_fill_gate(cuda_fill *f, cudaStream_t s, uint64_t need, char *msg,
                   size_t len);

/* After the job's work is queued (and before waiting for it): waits
 * until the follower is done with it (the counter complete, or the
 * client gone or late: every wait is released then). give_up (the
 * worker failed): the follower releases every wait at once. Returns
 * GEMM_OK or the failure, with msg set. */
int cuda_fill_end(cuda_fill *f, bool give_up, char *msg, size_t len);

/* A GEMM drained early (proto's Drain): whether the GPU can store j's
 * drain word (stream writes work here and the word's buffer is pinned),
 * its device address then in *dev. cuda_drain_post queues on s the
 * store of rows there, after everything queued on s before it has
 * landed (a memory barrier precedes the write). */
bool cuda_drain_ok(cuda_fill *f, gemmd_job *j, uint64_t *dev);
int cuda_drain_post(cudaStream_t s, uint64_t dev, uint64_t rows, char *msg,
                    size_t len);

#endif
