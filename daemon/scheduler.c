/*
 * scheduler.c: per-device rings of per-client FIFOs, each served
 * round-robin by that device's worker threads; placement and splitting
 * at submission (placement.c, split.c); the failure count that takes a
 * device out of placement. The backend decides how many workers a device
 * wants (a CPU device one, a GPU one per stream).
 *
 * Built with GEMMD_TEST_HOOKS (gemmd_test only), GEMMD_TEST_FAIL_DEVICE=N
 * makes every GEMM placed on device N fail with GEMM_ERR_DEVICE, as a
 * device that keeps failing launches would: the tests' forced fault.
 */
#include "scheduler.h"
#include "spinguard.h"
#include "log.h"
#include "placement.h"
#include "slice.h"
#include "split.h"

#include <gemm/types.h>

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A worker thread: the device it serves. */
typedef struct sched_worker {
    sched *s;
    unsigned dev;
    pthread_t thread;
} sched_worker;

static sched_queue **queue_link(sched_dev *dv, uint32_t owner)
{
    sched_queue **l = &dv->queues[owner % SCHED_BUCKETS];
    while (*l != NULL && (*l)->owner != owner)
        l = &(*l)->hash_next;
    return l;
}

/* Counts job off device dv's queue. Under s->mu. */
static void count_off(sched *s, sched_dev *dv)
{
    dv->queued--;
    s->queued--;
    atomic_fetch_sub_explicit(&dv->pending, 1, memory_order_relaxed);
}

/* Takes the head of the queue after prev on dv's ring (which then goes
 * to the back of the ring). Under s->mu. */
static gemmd_job *take_after(sched *s, sched_dev *dv, sched_queue *prev)
{
    sched_queue *q = prev->ring_next;
    gemmd_job *j = q->head;
    q->head = j->next;
    if (q->head != NULL) {
        dv->ring = q; /* q goes to the back of the ring */
    } else {
        /* q is empty: unlink it from the ring and free it */
        if (q == prev)
            dv->ring = NULL;
        else
            prev->ring_next = q->ring_next, dv->ring = prev;
        sched_queue **l = queue_link(dv, q->owner);
        *l = q->hash_next;
        free(q);
    }
    j->next = NULL;
    count_off(s, dv);
    return j;
}

/* Takes the next job of dv round-robin; NULL when none. Under s->mu. */
static gemmd_job *take(sched *s, sched_dev *dv)
{
    /* dv->ring is the last queue served; serve the one after it */
    return dv->ring != NULL ? take_after(s, dv, dv->ring) : NULL;
}

/* Takes the next small job (slice_small) of dv round-robin of an owner
 * other than owner; NULL when none. Under s->mu. */
static gemmd_job *take_small(sched *s, sched_dev *dv, uint32_t owner)
{
    sched_queue *prev = dv->ring;
    if (prev == NULL)
        return NULL;
    do {
        sched_queue *q = prev->ring_next;
        if (q->owner != owner && slice_small(q->head))
            return take_after(s, dv, prev);
        prev = q;
    } while (prev != dv->ring);
    return NULL;
}

/* Polls (without the lock) until a job is pending on dv, the scheduler
 * stops, or spin_ns pass. Counted in dv->spinning meanwhile: the worker
 * takes the lock and looks at the queue before it next sleeps, so a job
 * queued while it is counted needs no wake-up. */
static void spin_for_work(sched *s, sched_dev *dv)
{
    uint64_t now = gemmd_now_ns(), last = now, until = now + s->spin_ns;
    if (!spin_allowed(now))
        return;
    unsigned i = 0;
    bool preempted = false;
    atomic_fetch_add_explicit(&dv->spinning, 1, memory_order_relaxed);
    while (atomic_load_explicit(&dv->pending, memory_order_relaxed) == 0 &&
           !atomic_load_explicit(&s->stop_flag, memory_order_relaxed)) {
        if ((++i & 63) == 0) {
            now = gemmd_now_ns();
            /* 64 polls take microseconds: a longer gap was a preemption
             * (spinguard.h) */
            if (now - last > SPIN_GAP_NS) {
                preempted = true;
                spin_preempted(now);
                break;
            }
            last = now;
            if (now >= until)
                break;
        }
#if defined(__x86_64__) || defined(__i386__)
        __builtin_ia32_pause();
#endif
    }
    atomic_fetch_sub_explicit(&dv->spinning, 1, memory_order_relaxed);
    if (!preempted)
        spin_clean();
}

/* Whether the jobs queued on dv need a sleeping worker woken: more of
 * them wait than workers poll for them, and a worker sleeps. If so that
 * worker counts as woken, and the caller posts dv->wake once. A wake-up
 * costs a system call, and the woken thread otherwise only races the
 * spinning one for the lock. Under s->mu. */
static bool wake_one(sched_dev *dv)
{
    if (dv->sleeping == 0 ||
        dv->queued <= atomic_load_explicit(&dv->spinning, memory_order_relaxed))
        return false;
    dv->sleeping--;
    return true;
}

/* Queues job on device dev, waking no worker; see sched_enqueue. */
static int enqueue_quiet(sched *s, unsigned dev, gemmd_job *job)
{
    sched_dev *dv = &s->devs[dev];
    job->next = NULL;
    job->device = dev;
    sched_queue **l = queue_link(dv, job->owner);
    sched_queue *q = *l;
    if (q == NULL) {
        if ((q = calloc(1, sizeof(*q))) == NULL)
            return GEMM_ERR_NOMEM;
        q->owner = job->owner;
        *l = q;
        /* join the ring just before the queue served next */
        if (dv->ring == NULL) {
            q->ring_next = q;
            dv->ring = q;
        } else {
            q->ring_next = dv->ring->ring_next;
            dv->ring->ring_next = q;
            dv->ring = q;
        }
    }
    if (q->tail != NULL)
        q->tail->next = job;
    else
        q->head = job;
    q->tail = job;
    dv->queued++;
    s->queued++;
    dv->load_ns += job->cost_ns;
    atomic_fetch_add_explicit(&dv->pending, 1, memory_order_relaxed);
    return GEMM_OK;
}

int sched_enqueue(sched *s, unsigned dev, gemmd_job *job)
{
    int rv = enqueue_quiet(s, dev, job);
    if (rv == GEMM_OK && wake_one(&s->devs[dev]))
        sem_post(&s->devs[dev].wake);
    return rv;
}

void sched_enqueue_moved(sched *s, unsigned dev, gemmd_job *job)
{
    if (sched_enqueue(s, dev, job) == GEMM_OK)
        return;
    /* no memory for a queue of its own: behind any queue of the device
     * (fairness bends, the job is not lost) */
    for (unsigned i = 0; i < s->ndevs; i++) {
        sched_dev *dv = &s->devs[(dev + i) % s->ndevs];
        if (dv->ring == NULL)
            continue;
        uint32_t owner = job->owner;
        job->owner = dv->ring->owner;
        sched_enqueue(s, (dev + i) % s->ndevs, job); /* its queue exists */
        job->owner = owner;
        return;
    }
    gemmd_log(LOG_CRIT, "scheduler: out of memory for a queue");
    abort();
}

/* Device dev left placement: every job queued on it goes where placement
 * puts it now. Under s->mu. */
static void move_queued(sched *s, unsigned dev)
{
    sched_dev *dv = &s->devs[dev];
    gemmd_job *j, *all = NULL, **tail = &all;
    while ((j = take(s, dv)) != NULL) {
        dv->load_ns -= j->cost_ns;
        *tail = j;
        tail = &j->next;
    }
    if (dv->load_ns < 0)
        dv->load_ns = 0;
    for (gemmd_job *next; all != NULL; all = next) {
        next = all->next;
        sched_enqueue_moved(s, place_choose(s, all), all);
    }
}

/* Counts job j's outcome against its device: GEMM_ERR_DEVICE in a row
 * past the limit takes the device out of placement, while another is in
 * it. Under s->mu. */
static void count_outcome(sched *s, sched_dev *dv, unsigned dev,
                          const gemmd_job *j)
{
    dv->jobs++;
    if (j->status != GEMM_OK)
        dv->failed++;
    if (j->status == GEMM_OK) {
        dv->fail_streak = 0;
        return;
    }
    if (j->status != GEMM_ERR_DEVICE)
        return;
    if (++dv->fail_streak < s->fail_limit || dv->out)
        return;
    if (place_healthy(s) < 2) {
        if (dv->fail_streak == s->fail_limit)
            gemmd_log(LOG_ERR,
                      "device %u keeps failing (%u in a row: %s) but is the "
                      "last one in placement; it stays",
                      dev, dv->fail_streak, j->msg);
        return;
    }
    dv->out = true;
    gemmd_log(LOG_ERR,
              "device %u left placement after %u failures in a row (last: "
              "%s); its %u queued jobs move to the other devices",
              dev, dv->fail_streak, j->msg, dv->queued);
    move_queued(s, dev);
}

void sched_finish(sched *s, gemmd_job *job)
{
    s->done(s->done_arg, job);
}

/* Runs job j on device dev: the deadline, the test fault, the backend. */
static void run_job(sched *s, unsigned dev, gemmd_job *j)
{
    j->device = dev;
    j->t_started = gemmd_now_ns();
    /* the panels of a split GEMM start all or none */
    bool expired = j->split != NULL
                       ? !split_part_runs(j, j->t_started)
                       : j->deadline_ns != 0 && j->t_started > j->deadline_ns;
    if (expired) {
        j->status = GEMM_ERR_TIMEOUT;
        snprintf(j->msg, sizeof(j->msg),
                 "deadline expired after %.1f ms in the queue",
                 (j->t_started - j->t_received) / 1e6);
    } else if (s->fail_device == (int)dev && j->kind == JOB_GEMM) {
        j->status = GEMM_ERR_DEVICE;
        snprintf(j->msg, sizeof(j->msg),
                 "device %u: forced fault (GEMMD_TEST_FAIL_DEVICE)", dev);
    } else {
        j->status = j->kind == JOB_UPLOAD  ? s->be->ops->upload(s->be, j)
                    : j->kind == JOB_BATCH ? gemmd_batch_run(s->be, j)
                                           : s->be->ops->gemm(s->be, j);
    }
    j->t_finished = gemmd_now_ns();
}

/* A panel that failed with a device error runs once more, on the least
 * loaded other device in placement: whether it was queued again. Under
 * s->mu. */
static bool retry_panel(sched *s, unsigned dev, gemmd_job *j)
{
    if (j->split == NULL || j->status != GEMM_ERR_DEVICE || j->retried)
        return false;
    int best = -1;
    for (unsigned i = 0; i < s->ndevs; i++)
        if (i != dev && !s->devs[i].out &&
            (best < 0 || s->devs[i].load_ns < s->devs[best].load_ns))
            best = (int)i;
    if (best < 0)
        return false;
    gemmd_log(LOG_WARNING,
              "a panel failed on device %u (%s); it runs again "
              "on device %d",
              dev, j->msg, best);
    j->retried = true;
    j->status = GEMM_OK;
    j->msg[0] = '\0';
    j->cost_ns = place_cost(s, j, (unsigned)best);
    sched_enqueue_moved(s, (unsigned)best, j);
    return true;
}

static void serve(sched *s, unsigned dev, gemmd_job *j, bool outer);

/* A job's between hook (slice.h), on the worker running it: runs small
 * jobs of other clients waiting on the same device, for up to about one
 * slice. */
static void run_between(void *arg, gemmd_job *cur)
{
    sched *s = arg;
    sched_dev *dv = &s->devs[cur->device];
    uint64_t until = gemmd_now_ns() + s->between_ns;
    while (atomic_load_explicit(&dv->pending, memory_order_relaxed) != 0 &&
           gemmd_now_ns() < until) {
        pthread_mutex_lock(&s->mu);
        gemmd_job *j = take_small(s, dv, cur->owner);
        if (j != NULL) {
            dv->running++;
            j->crowded = true;
        }
        pthread_mutex_unlock(&s->mu);
        if (j == NULL)
            return;
        serve(s, cur->device, j, false);
    }
}

/* Runs job j (taken off device dev's queue, counted running) on this
 * worker and hands it on: the device's counters, a failed panel's second
 * try, the split's completion or the done callback. An outer job (not
 * itself run between another's slices) gets the between hook. Worker
 * thread of dev. */
static void serve(sched *s, unsigned dev, gemmd_job *j, bool outer)
{
    sched_dev *dv = &s->devs[dev];
    j->between = outer && s->between_ns != 0 ? run_between : NULL;
    j->between_arg = s;
    run_job(s, dev, j);

    pthread_mutex_lock(&s->mu);
    dv->running--;
    dv->load_ns -= j->cost_ns;
    if (dv->load_ns < 0 || (dv->running == 0 && dv->queued == 0))
        dv->load_ns = 0; /* no drift */
    dv->busy_ns += j->t_finished - j->t_started;
    dv->parts += j->split != NULL;
    count_outcome(s, dv, dev, j);
    bool again = retry_panel(s, dev, j);
    pthread_mutex_unlock(&s->mu);
    if (!again && j->split != NULL)
        j = split_part_done(s, j); /* the whole after its last panel */
    if (!again && j != NULL)
        sched_finish(s, j);
    /* off the reply's path, and before this thread runs another job */
    if (s->be->ops->after != NULL)
        s->be->ops->after(s->be);
}

static void *worker(void *arg)
{
    sched_worker *w = arg;
    sched *s = w->s;
    sched_dev *dv = &s->devs[w->dev];
    for (bool first = true;; first = false) {
        if (!first && s->spin_ns != 0)
            spin_for_work(s, dv);
        pthread_mutex_lock(&s->mu);
        gemmd_job *j;
        while ((j = take(s, dv)) == NULL && !s->stopping) {
            /* asleep without the lock: waking from a condition variable
             * takes the lock in its contended state, and letting it go
             * then costs one more system call before the job starts */
            dv->sleeping++;
            pthread_mutex_unlock(&s->mu);
            while (sem_wait(&dv->wake) != 0 && errno == EINTR)
                ;
            pthread_mutex_lock(&s->mu);
        }
        if (j != NULL) {
            dv->running++;
            j->crowded = dv->queued > 0;
        }
        pthread_mutex_unlock(&s->mu);
        if (j == NULL)
            return NULL; /* stopping and nothing left */
        serve(s, w->dev, j, true);
    }
}

/* The test fault's device, from the environment (test builds only). */
static int fail_device_from_env(void)
{
#ifdef GEMMD_TEST_HOOKS
    const char *e = getenv("GEMMD_TEST_FAIL_DEVICE");
    if (e != NULL && *e != '\0') {
        int dev = atoi(e);
        gemmd_log(LOG_NOTICE, "test hook: GEMMs on device %d fail", dev);
        return dev;
    }
#endif
    return -1;
}

int sched_start(sched *s, gemmd_backend *be, sched_done_fn done, void *arg,
                unsigned spin_us)
{
    memset(s, 0, sizeof(*s));
    atomic_init(&s->stop_flag, false);
    s->spin_ns = (uint64_t)spin_us * 1000;
    s->be = be;
    s->done = done;
    s->done_arg = arg;
    s->fail_limit = 3;
    s->fail_device = fail_device_from_env();
    s->ndevs = be->ndevices ? be->ndevices : 1;
    if (s->ndevs > GEMMD_MAX_DEVICES)
        s->ndevs = GEMMD_MAX_DEVICES;
    pthread_mutex_init(&s->mu, NULL);
    for (unsigned i = 0; i < s->ndevs; i++) {
        sem_init(&s->devs[i].wake, 0, 0);
        atomic_init(&s->devs[i].pending, 0);
        atomic_init(&s->devs[i].spinning, 0);
    }
    unsigned per = be->dev_workers ? be->dev_workers : 1;
    unsigned n = per * s->ndevs;
    s->workers = calloc(n, sizeof(*s->workers));
    if (s->workers == NULL)
        return GEMM_ERR_NOMEM;
    /* device by device, so each device's first worker starts first */
    for (unsigned i = 0; i < n; i++) {
        sched_worker *w = &s->workers[i];
        w->s = s;
        w->dev = i / per;
        if (pthread_create(&w->thread, NULL, worker, w) != 0) {
            gemmd_log(LOG_ERR, "cannot start worker thread %u", i);
            sched_stop(s);
            return GEMM_ERR_INTERNAL;
        }
        s->nthreads++;
    }
    return GEMM_OK;
}

void sched_policy(sched *s, uint64_t split_volume, bool split_same_gpu,
                  unsigned fail_limit)
{
    pthread_mutex_lock(&s->mu);
    s->split_volume = split_volume;
    s->split_same_gpu = split_same_gpu;
    s->fail_limit = fail_limit ? fail_limit : 1;
    pthread_mutex_unlock(&s->mu);
}

int sched_submit(sched *s, gemmd_job *job)
{
    job->next = NULL;
    job->split = NULL;
    pthread_mutex_lock(&s->mu);
    if (split_wanted(s, job) && split_submit(s, job) == GEMM_OK) {
        for (unsigned i = 0; i < job->split->nparts; i++) {
            gemmd_job *p = &job->split->parts[i];
            sched_enqueue_moved(s, p->device, p);
        }
        pthread_mutex_unlock(&s->mu);
        return GEMM_OK;
    }
    /* the worker is woken after the lock is let go, so that it does not
     * wake only to wait for it */
    unsigned dev = place_choose(s, job);
    int rv = enqueue_quiet(s, dev, job);
    bool wake = rv == GEMM_OK && wake_one(&s->devs[dev]);
    pthread_mutex_unlock(&s->mu);
    if (wake)
        sem_post(&s->devs[dev].wake);
    return rv;
}

/* Unlinks queue q (empty now) from dv's ring and hash and frees it.
 * Under s->mu. */
static void queue_drop(sched_dev *dv, sched_queue *q)
{
    sched_queue *p = dv->ring;
    while (p->ring_next != q)
        p = p->ring_next;
    if (p == q)
        dv->ring = NULL; /* it was the only one */
    else {
        p->ring_next = q->ring_next;
        if (dv->ring == q)
            dv->ring = p;
    }
    sched_queue **l = queue_link(dv, q->owner);
    *l = q->hash_next;
    free(q);
}

/* Removes job (found in q of dv) from q and takes its load back; under
 * s->mu. */
static void queue_unlink(sched *s, sched_dev *dv, sched_queue *q,
                         gemmd_job *job)
{
    gemmd_job **l = &q->head, *prev = NULL;
    while (*l != job) {
        prev = *l;
        l = &(*l)->next;
    }
    *l = job->next;
    if (q->tail == job)
        q->tail = prev;
    job->next = NULL;
    count_off(s, dv);
    dv->load_ns -= job->cost_ns;
    if (dv->load_ns < 0)
        dv->load_ns = 0;
    if (q->head == NULL)
        queue_drop(dv, q);
}

bool sched_cancel(sched *s, gemmd_job *job)
{
    bool found = false;
    pthread_mutex_lock(&s->mu);
    if (job->split == NULL && job->device < s->ndevs) {
        sched_dev *dv = &s->devs[job->device];
        sched_queue *q = *queue_link(dv, job->owner);
        for (gemmd_job *j = q != NULL ? q->head : NULL; j != NULL;
             j = j->next) {
            if (j == job) {
                queue_unlink(s, dv, q, job);
                found = true;
                break;
            }
        }
    }
    pthread_mutex_unlock(&s->mu);
    return found;
}

gemmd_job *sched_cancel_owner(sched *s, uint32_t owner)
{
    gemmd_job *jobs = NULL, **tail = &jobs;
    pthread_mutex_lock(&s->mu);
    for (unsigned i = 0; i < s->ndevs; i++) {
        sched_dev *dv = &s->devs[i];
        sched_queue *q = *queue_link(dv, owner);
        if (q == NULL)
            continue;
        /* panels of a split GEMM stay: their whole finishes when they do */
        for (;;) {
            gemmd_job *j = q->head;
            while (j != NULL && j->split != NULL)
                j = j->next;
            if (j == NULL)
                break;
            bool emptied = q->head == j && j->next == NULL;
            queue_unlink(s, dv, q, j); /* frees q when emptied */
            *tail = j;
            tail = &j->next;
            if (emptied)
                break;
        }
    }
    pthread_mutex_unlock(&s->mu);
    return jobs;
}

bool sched_idle(sched *s)
{
    pthread_mutex_lock(&s->mu);
    bool idle = s->queued == 0;
    for (unsigned i = 0; idle && i < s->ndevs; i++)
        idle = s->devs[i].queued == 0 && s->devs[i].running == 0;
    pthread_mutex_unlock(&s->mu);
    return idle;
}

void sched_device(sched *s, unsigned i, sched_dev_stats *out)
{
    memset(out, 0, sizeof(*out));
    if (i >= s->ndevs)
        return;
    pthread_mutex_lock(&s->mu);
    const sched_dev *dv = &s->devs[i];
    out->queued = dv->queued;
    out->running = dv->running;
    out->jobs = dv->jobs;
    out->failed = dv->failed;
    out->parts = dv->parts;
    out->busy_ns = dv->busy_ns;
    out->placed = !dv->out;
    pthread_mutex_unlock(&s->mu);
}

void sched_stop(sched *s)
{
    pthread_mutex_lock(&s->mu);
    s->stopping = true;
    atomic_store(&s->stop_flag, true);
    for (unsigned i = 0; i < s->ndevs; i++)
        for (; s->devs[i].sleeping > 0; s->devs[i].sleeping--)
            sem_post(&s->devs[i].wake);
    pthread_mutex_unlock(&s->mu);
    for (unsigned i = 0; i < s->nthreads; i++)
        pthread_join(s->workers[i].thread, NULL);
    free(s->workers);
    s->workers = NULL;
    s->nthreads = 0;
    for (unsigned i = 0; i < s->ndevs; i++)
        sem_destroy(&s->devs[i].wake);
    pthread_mutex_destroy(&s->mu);
}
