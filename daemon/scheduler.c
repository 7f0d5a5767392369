/*
 * scheduler.c: per-client FIFOs on a ring, served round-robin by the worker
 * threads. The backend decides how many workers it wants (the CPU backend
 * one, a GPU backend one per stream).
 */
#include "scheduler.h"
#include "log.h"
#include "slice.h"

#include <gemm/types.h>

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static sched_queue **queue_link(sched *s, uint32_t owner)
{
    sched_queue **l = &s->queues[owner % SCHED_BUCKETS];
    while (*l != NULL && (*l)->owner != owner)
        l = &(*l)->hash_next;
    return l;
}

/* Takes the head of the queue after prev on the ring. Under s->mu. */
static gemmd_job *take_after(sched *s, sched_queue *prev)
{
    sched_queue *q = prev->ring_next;
    gemmd_job *j = q->head;
    q->head = j->next;
    s->queued--;
    if (q->head != NULL) {
        q->tail = q->head ? q->tail : NULL;
        s->ring = q; /* q goes to the back of the ring */
    } else {
        /* q is empty: unlink it from the ring and free it */
        if (q == prev)
            s->ring = NULL;
        else
            prev->ring_next = q->ring_next, s->ring = prev;
        sched_queue **l = queue_link(s, q->owner);
        *l = q->hash_next;
        free(q);
    }
    j->next = NULL;
    atomic_fetch_sub_explicit(&s->pending, 1, memory_order_relaxed);
    return j;
}

/* Takes the next job round-robin; NULL when none. Under s->mu. */
static gemmd_job *take(sched *s)
{
    /* s->ring is the last queue served; serve the one after it */
    return s->ring != NULL ? take_after(s, s->ring) : NULL;
}

/* Takes the next small job (slice_small) round-robin of an owner other
 * than owner; NULL when none. Under s->mu. */
static gemmd_job *take_small(sched *s, uint32_t owner)
{
    sched_queue *prev = s->ring;
    if (prev == NULL)
        return NULL;
    do {
        sched_queue *q = prev->ring_next;
        if (q->owner != owner && slice_small(q->head))
            return take_after(s, prev);
        prev = q;
    } while (prev != s->ring);
    return NULL;
}

static void run_job(sched *s, gemmd_job *j, bool outer);

/* A job's between hook (slice.h), on the worker running it: runs small
 * jobs of other clients that wait, for up to about one slice. */
static void run_between(void *arg, gemmd_job *cur)
{
    sched *s = arg;
    uint64_t until = gemmd_now_ns() + s->between_ns;
    while (atomic_load_explicit(&s->pending, memory_order_relaxed) != 0 &&
           gemmd_now_ns() < until) {
        pthread_mutex_lock(&s->mu);
        gemmd_job *j = take_small(s, cur->owner);
        pthread_mutex_unlock(&s->mu);
        if (j == NULL)
            return;
        run_job(s, j, false);
    }
}

/* Runs job j on this worker and hands it to the done callback; an outer
 * job (not itself run between slices) gets the between hook. */
static void run_job(sched *s, gemmd_job *j, bool outer)
{
    j->t_started = gemmd_now_ns();
    j->between = outer && s->between_ns != 0 ? run_between : NULL;
    j->between_arg = s;
    if (j->deadline_ns != 0 && j->t_started > j->deadline_ns) {
        j->status = GEMM_ERR_TIMEOUT;
        snprintf(j->msg, sizeof(j->msg),
                 "deadline expired after %.1f ms in the queue",
                 (j->t_started - j->t_received) / 1e6);
    } else {
        j->status = j->kind == JOB_UPLOAD ? s->be->ops->upload(s->be, j)
                                          : s->be->ops->gemm(s->be, j);
    }
    j->t_finished = gemmd_now_ns();
    s->done(s->done_arg, j);
}

/* Polls (without the lock) until a job is pending, the scheduler stops, or
 * spin_ns pass. */
static void spin_for_work(sched *s)
{
    uint64_t until = gemmd_now_ns() + s->spin_ns;
    unsigned i = 0;
    while (atomic_load_explicit(&s->pending, memory_order_relaxed) == 0 &&
           !atomic_load_explicit(&s->stop_flag, memory_order_relaxed)) {
        if ((++i & 63) == 0 && gemmd_now_ns() >= until)
            return;
#if defined(__x86_64__) || defined(__i386__)
        __builtin_ia32_pause();
#endif
    }
}

static void *worker(void *arg)
{
    sched *s = arg;
    for (bool first = true;; first = false) {
        if (!first && s->spin_ns != 0)
            spin_for_work(s);
        pthread_mutex_lock(&s->mu);
        gemmd_job *j;
        while ((j = take(s)) == NULL && !s->stopping)
            pthread_cond_wait(&s->cv, &s->mu);
        pthread_mutex_unlock(&s->mu);
        if (j == NULL)
            return NULL; /* stopping and nothing left */
        run_job(s, j, true);
    }
}

int sched_start(sched *s, gemmd_backend *be, sched_done_fn done, void *arg,
                unsigned spin_us)
{
    memset(s, 0, sizeof(*s));
    atomic_init(&s->pending, 0);
    atomic_init(&s->stop_flag, false);
    s->spin_ns = (uint64_t)spin_us * 1000;
    s->be = be;
    s->done = done;
    s->done_arg = arg;
    pthread_mutex_init(&s->mu, NULL);
    pthread_cond_init(&s->cv, NULL);
    unsigned n = be->workers ? be->workers : 1;
    s->threads = calloc(n, sizeof(*s->threads));
    if (s->threads == NULL)
        return GEMM_ERR_NOMEM;
    for (unsigned i = 0; i < n; i++) {
        if (pthread_create(&s->threads[i], NULL, worker, s) != 0) {
            gemmd_log(LOG_ERR, "cannot start worker thread %u", i);
            sched_stop(s);
            return GEMM_ERR_INTERNAL;
        }
        s->nthreads++;
    }
    return GEMM_OK;
}

int sched_submit(sched *s, gemmd_job *job)
{
    job->next = NULL;
    pthread_mutex_lock(&s->mu);
    sched_queue **l = queue_link(s, job->owner);
    sched_queue *q = *l;
    if (q == NULL) {
        if ((q = calloc(1, sizeof(*q))) == NULL) {
            pthread_mutex_unlock(&s->mu);
            return GEMM_ERR_NOMEM;
        }
        q->owner = job->owner;
        *l = q;
        /* join the ring just before the queue served next */
        if (s->ring == NULL) {
            q->ring_next = q;
            s->ring = q;
        } else {
            q->ring_next = s->ring->ring_next;
            s->ring->ring_next = q;
            s->ring = q;
        }
    }
    if (q->tail != NULL)
        q->tail->next = job;
    else
        q->head = job;
    q->tail = job;
    s->queued++;
    atomic_fetch_add_explicit(&s->pending, 1, memory_order_relaxed);
    pthread_cond_signal(&s->cv);
    pthread_mutex_unlock(&s->mu);
    return GEMM_OK;
}

/* Unlinks queue q (empty now) from the ring and the hash and frees it.
 * Under s->mu. */
static void queue_drop(sched *s, sched_queue *q)
{
    sched_queue *p = s->ring;
    while (p->ring_next != q)
        p = p->ring_next;
    if (p == q)
        s->ring = NULL; /* it was the only one */
    else {
        p->ring_next = q->ring_next;
        if (s->ring == q)
            s->ring = p;
    }
    sched_queue **l = queue_link(s, q->owner);
    *l = q->hash_next;
    free(q);
}

/* Removes job (found in q) from q; under s->mu. */
static void queue_unlink(sched *s, sched_queue *q, gemmd_job *job)
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
    s->queued--;
    atomic_fetch_sub_explicit(&s->pending, 1, memory_order_relaxed);
    if (q->head == NULL)
        queue_drop(s, q);
}

bool sched_cancel(sched *s, gemmd_job *job)
{
    bool found = false;
    pthread_mutex_lock(&s->mu);
    sched_queue *q = *queue_link(s, job->owner);
    for (gemmd_job *j = q != NULL ? q->head : NULL; j != NULL; j = j->next) {
        if (j == job) {
            queue_unlink(s, q, job);
            found = true;
            break;
        }
    }
    pthread_mutex_unlock(&s->mu);
    return found;
}

gemmd_job *sched_cancel_owner(sched *s, uint32_t owner)
{
    pthread_mutex_lock(&s->mu);
    sched_queue *q = *queue_link(s, owner);
    gemmd_job *jobs = NULL;
    if (q != NULL) {
        jobs = q->head;
        unsigned n = 0;
        for (gemmd_job *j = jobs; j != NULL; j = j->next)
            n++;
        s->queued -= n;
        atomic_fetch_sub_explicit(&s->pending, n, memory_order_relaxed);
        q->head = q->tail = NULL;
        queue_drop(s, q);
    }
    pthread_mutex_unlock(&s->mu);
    return jobs;
}

void sched_stop(sched *s)
{
    pthread_mutex_lock(&s->mu);
    s->stopping = true;
    atomic_store(&s->stop_flag, true);
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->mu);
    for (unsigned i = 0; i < s->nthreads; i++)
        pthread_join(s->threads[i], NULL);
    free(s->threads);
    s->threads = NULL;
    s->nthreads = 0;
    pthread_cond_destroy(&s->cv);
    pthread_mutex_destroy(&s->mu);
}
