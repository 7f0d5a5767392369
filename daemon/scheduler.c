/*
 * scheduler.c: worker threads pulling jobs from one FIFO. The backend decides
 * how many workers it wants (the CPU backend one, a GPU backend per stream).
 */
#include "scheduler.h"
#include "log.h"

#include <gemm/gemm.h>

#include <stdlib.h>
#include <string.h>

static void *worker(void *arg)
{
    sched *s = arg;
    for (;;) {
        pthread_mutex_lock(&s->mu);
        while (s->head == NULL && !s->stopping)
            pthread_cond_wait(&s->cv, &s->mu);
        gemmd_job *j = s->head;
        if (j == NULL) { /* stopping and nothing left */
            pthread_mutex_unlock(&s->mu);
            return NULL;
        }
        s->head = j->next;
        if (s->head == NULL)
            s->tail = NULL;
        pthread_mutex_unlock(&s->mu);

        j->next = NULL;
        j->t_started = gemmd_now_ns();
        j->status = s->be->ops->gemm(s->be, j);
        j->t_finished = gemmd_now_ns();
        s->done(s->done_arg, j);
    }
}

int sched_start(sched *s, gemmd_backend *be, sched_done_fn done, void *arg)
{
    memset(s, 0, sizeof(*s));
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

void sched_submit(sched *s, gemmd_job *job)
{
    job->next = NULL;
    pthread_mutex_lock(&s->mu);
    if (s->tail != NULL)
        s->tail->next = job;
    else
        s->head = job;
    s->tail = job;
    pthread_cond_signal(&s->cv);
    pthread_mutex_unlock(&s->mu);
}

void sched_stop(sched *s)
{
    pthread_mutex_lock(&s->mu);
    s->stopping = true;
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
