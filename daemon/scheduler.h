/*
 * scheduler.h: the scheduler between the loop and a backend. Jobs wait in
 * one FIFO per client, and the backend's worker threads take them round-robin
 * across clients, so a client that floods the daemon delays only itself.
 * A job whose deadline passed while it waited is dropped with
 * GEMM_ERR_TIMEOUT instead of run. Each finished job goes to the done
 * callback (which hands it back to the loop). Any thread may submit.
 */
#ifndef GEMMD_SCHEDULER_H
#define GEMMD_SCHEDULER_H

#include "backend.h"
#include "job.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>

typedef void (*sched_done_fn)(void *arg, gemmd_job *job);

/* One client's waiting jobs; on the ring while it has any. */
typedef struct sched_queue {
    uint32_t owner;
    gemmd_job *head, *tail;
    struct sched_queue *ring_next; /* circular list of non-empty queues */
    struct sched_queue *hash_next;
} sched_queue;

#define SCHED_BUCKETS 64

typedef struct sched {
    gemmd_backend *be;
    sched_done_fn done;
    void *done_arg;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    sched_queue *ring; /* the queue served next; NULL when idle */
    sched_queue *queues[SCHED_BUCKETS];
    unsigned queued; /* jobs waiting, all clients */
    bool stopping;
    /* mirrors of queued and stopping that a worker polls without the lock
     * for spin_ns after each job before it sleeps on cv */
    atomic_uint pending;
    atomic_bool stop_flag;
    uint64_t spin_ns;
    /* between two slices of a large job (slice.h) its worker runs small
     * jobs of other clients that wait, for up to this long; 0 = never.
     * Set by the main thread before the first job is submitted. */
    uint64_t between_ns;
    pthread_t *threads;
    unsigned nthreads;
} sched;

/* Starts be->workers threads. Returns a gemm_error. Main thread.
 * spin_us: after each job a worker polls this long for the next before it
 * sleeps (a sleeping thread takes 5-20 us to wake); 0 = never. */
int sched_start(sched *s, gemmd_backend *be, sched_done_fn done, void *arg,
                unsigned spin_us);

/* Queues a job behind its owner's earlier ones; never blocks on the
 * backend. Returns GEMM_OK or GEMM_ERR_NOMEM. Any thread. */
int sched_submit(sched *s, gemmd_job *job);

/* Takes job off its queue if no worker has started it. Returns whether it
 * did (the job is the caller's again). Any thread. */
bool sched_cancel(sched *s, gemmd_job *job);

/* Takes every queued job of owner off the queues; returns them linked by
 * next (the caller's again), NULL if none. Any thread. */
gemmd_job *sched_cancel_owner(sched *s, uint32_t owner);

/* Lets queued jobs finish, then joins the workers. Main thread. */
void sched_stop(sched *s);

#endif
