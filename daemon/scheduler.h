/*
 * scheduler.h: the scheduler between the loop and a backend. A FIFO of
 * validated jobs and the backend's worker threads; each finished job goes to
 * the done callback (which hands it back to the loop). The loop thread calls
 * sched_submit and counts depth; workers only run jobs.
 */
#ifndef GEMMD_SCHEDULER_H
#define GEMMD_SCHEDULER_H

#include "backend.h"
#include "job.h"

#include <pthread.h>
#include <stdbool.h>

typedef void (*sched_done_fn)(void *arg, gemmd_job *job);

typedef struct sched {
    gemmd_backend *be;
    sched_done_fn done;
    void *done_arg;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    gemmd_job *head, *tail; /* queued, not started */
    bool stopping;
    pthread_t *threads;
    unsigned nthreads;
} sched;

/* Starts be->workers threads. Returns a gemm_error. Main thread. */
int sched_start(sched *s, gemmd_backend *be, sched_done_fn done, void *arg);

/* Queues a job; never blocks on the backend. Any thread. */
void sched_submit(sched *s, gemmd_job *job);

/* Lets queued jobs finish, then joins the workers. Main thread. */
void sched_stop(sched *s);

#endif
