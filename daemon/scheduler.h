/*
 * scheduler.h: the scheduler between the loop and a backend's devices.
 * Each device object has its own worker threads and its own ring of
 * per-client FIFOs, served round-robin, so a client that floods the
 * daemon delays only itself on every device. A job is placed when it is
 * submitted on the device that will finish it first (placement.c), or,
 * when it is large, cut into panels of D that run on several devices at
 * once (split.c). A job whose deadline passed while it waited is dropped
 * with GEMM_ERR_TIMEOUT instead of run. A device that fails
 * --device-fail-limit jobs in a row with GEMM_ERR_DEVICE leaves placement
 * (its queued jobs move to the others). Each finished job goes to the
 * done callback (which hands it back to the loop). Any thread may submit.
 */
#ifndef GEMMD_SCHEDULER_H
#define GEMMD_SCHEDULER_H

#include "backend.h"
#include "job.h"

#include <pthread.h>
#include <semaphore.h>
#include <stdatomic.h>
#include <stdbool.h>

typedef void (*sched_done_fn)(void *arg, gemmd_job *job);

/* One client's waiting jobs on one device; on its ring while it has any. */
typedef struct sched_queue {
    uint32_t owner;
    gemmd_job *head, *tail;
    struct sched_queue *ring_next; /* circular list of non-empty queues */
    struct sched_queue *hash_next;
} sched_queue;

#define SCHED_BUCKETS 64

/* One device object's queues and counters (all under sched.mu, but the
 * atomics pending and spinning, which its workers poll and count
 * themselves in, and the semaphore its sleeping workers wait on). */
typedef struct sched_dev {
    sched_queue *ring; /* the queue served next; NULL when idle */
    sched_queue *queues[SCHED_BUCKETS];
    unsigned queued;      /* jobs waiting here */
    unsigned running;     /* jobs its workers run now */
    double load_ns;       /* estimated time of those queued and running */
    sem_t wake;           /* posted once for each sleeping worker to wake */
    unsigned sleeping;    /* workers asleep on wake, none of them woken yet */
    atomic_uint pending;  /* mirror of queued, polled while spinning */
    atomic_uint spinning; /* workers polling pending (spin_for_work) */
    uint64_t jobs, failed, parts; /* run here; of them failed; panels */
    uint64_t busy_ns;             /* time its workers spent in jobs */
    unsigned fail_streak;         /* GEMM_ERR_DEVICE in a row */
    bool out;                     /* left placement */
} sched_dev;

/* What sched_device reports of one device. */
typedef struct sched_dev_stats {
    unsigned queued, running;
    uint64_t jobs, failed, parts, busy_ns;
    bool placed; /* in placement (not out after failures) */
} sched_dev_stats;

typedef struct sched {
    gemmd_backend *be;
    sched_done_fn done;
    void *done_arg;
    pthread_mutex_t mu;
    sched_dev devs[GEMMD_MAX_DEVICES];
    unsigned ndevs;
    unsigned rr;     /* where placement starts looking among equals */
    unsigned queued; /* jobs waiting, all devices */
    bool stopping;
    atomic_bool stop_flag; /* mirror of stopping, polled while spinning */
    uint64_t spin_ns;
    uint64_t split_volume; /* --split-volume */
    bool split_same_gpu;   /* --split-same-gpu */
    unsigned fail_limit;   /* --device-fail-limit */
    int fail_device;       /* test hooks: every GEMM here fails; -1 */
    /* between two slices of a large job (slice.h) its worker runs small
     * jobs of other clients waiting on its device, for up to this long;
     * 0 = never. Set by the main thread before the first job is
     * submitted. */
    uint64_t between_ns;
    struct sched_worker *workers;
    unsigned nthreads;
} sched;

/*
 * Starts be->dev_workers threads for each of be->ndevices devices.
 * spin_us: after each job a worker polls this long for the next before it
 * sleeps (a sleeping thread takes 5-20 us to wake); 0 = never.
 * split_volume and fail_limit as --split-volume, --device-fail-limit.
 * Returns a gemm_error. Main thread.
 */
int sched_start(sched *s, gemmd_backend *be, sched_done_fn done, void *arg,
                unsigned spin_us);

/* Sets the split volume, whether panels may share a GPU, and the failure
 * limit (before jobs come). Main thread. */
void sched_policy(sched *s, uint64_t split_volume, bool split_same_gpu,
                  unsigned fail_limit);

/* Places the job (or its panels) behind its owner's earlier ones; never
 * blocks on the backend. Returns GEMM_OK or GEMM_ERR_NOMEM. Any thread. */
int sched_submit(sched *s, gemmd_job *job);

/* Takes job off its queue if no worker has started it. Returns whether it
 * did (the job is the caller's again). A split job is never taken back
 * (its panels run). Any thread. */
bool sched_cancel(sched *s, gemmd_job *job);

/* Takes every queued job of owner off the queues; returns them linked by
 * next (the caller's again), NULL if none. Any thread. */
gemmd_job *sched_cancel_owner(sched *s, uint32_t owner);

/* Device i's queue and counters. Any thread. */
void sched_device(sched *s, unsigned i, sched_dev_stats *out);

/* Whether no job is queued or running on any device. Any thread. */
bool sched_idle(sched *s);

/* Lets queued jobs finish, then joins the workers. Main thread. */
void sched_stop(sched *s);

/* ---- inside the scheduler (placement.c, split.c) ---------------------- */

/* Queues job on device dev with its estimated cost: GEMM_OK, or
 * GEMM_ERR_NOMEM (the job is not queued). Under s->mu. */
int sched_enqueue(sched *s, unsigned dev, gemmd_job *job);

/* sched_enqueue for a job that must not fail now (a panel, a job moved
 * off a failing device): without memory for its owner's queue it waits
 * in another owner's. Under s->mu. */
void sched_enqueue_moved(sched *s, unsigned dev, gemmd_job *job);

/* Hands a finished job to the done callback. Worker thread, not under
 * s->mu. */
void sched_finish(sched *s, gemmd_job *job);

#endif
