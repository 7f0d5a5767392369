/*
 * reaper.c: a thread that unmaps large buffers the loop thread let go of
 * (a FIFO under one mutex; started on first use, lives until exit).
 * Thread-safe.
 */
#include "reaper.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <sys/mman.h>

#define REAPER_MIN ((size_t)8 << 20) /* smaller ones: unmapped at once */

typedef struct reaper_item {
    void *base;
    size_t len;
    struct reaper_item *next;
} reaper_item;

static pthread_mutex_t reaper_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t reaper_cv = PTHREAD_COND_INITIALIZER;
static reaper_item *reaper_head, *reaper_tail;
static int reaper_state; /* 0 not started, 1 running, -1 cannot start */

/* The reaper thread: unmaps what is queued, oldest first; never returns. */
static void *reaper_main(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&reaper_mu);
    for (;;) {
        while (reaper_head == NULL)
            pthread_cond_wait(&reaper_cv, &reaper_mu);
        reaper_item *it = reaper_head;
        reaper_head = it->next;
        if (reaper_head == NULL)
            reaper_tail = NULL;
        pthread_mutex_unlock(&reaper_mu);
        munmap(it->base, it->len);
        free(it);
        pthread_mutex_lock(&reaper_mu);
    }
    return NULL;
}

/* Starts the thread unless it runs; under reaper_mu. Whether it runs. */
static bool reaper_start(void)
{
    if (reaper_state == 0) {
        pthread_t t;
        pthread_attr_t a;
        reaper_state = -1;
        if (pthread_attr_init(&a) == 0) {
            pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
            if (pthread_create(&t, &a, reaper_main, NULL) == 0)
                reaper_state = 1;
            pthread_attr_destroy(&a);
        }
    }
    return reaper_state == 1;
}

void reaper_unmap(void *base, size_t len)
{
    reaper_item *it = len >= REAPER_MIN ? malloc(sizeof(*it)) : NULL;
    if (it != NULL) {
        it->base = base;
        it->len = len;
        it->next = NULL;
        pthread_mutex_lock(&reaper_mu);
        bool queued = reaper_start();
        if (queued) {
            if (reaper_tail != NULL)
                reaper_tail->next = it;
            else
                reaper_head = it;
            reaper_tail = it;
            pthread_cond_signal(&reaper_cv);
        }
        pthread_mutex_unlock(&reaper_mu);
        if (queued)
            return;
        free(it);
    }
    munmap(base, len);
}
