/*
 * pinner.c: the pinner thread (a FIFO under one mutex, as the reaper's;
 * started on first use, lives until exit). The mutex also orders the
 * hand-offs with the loop thread: a buffer leaves the queue, starts
 * running, or is handed over by its last release only under it.
 * Thread-safe where pinner.h says so.
 */
#include "pinner.h"

#include "log.h"

#include <gemm/types.h>

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <time.h>

static pthread_mutex_t pin_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t pin_cv = PTHREAD_COND_INITIALIZER;   /* work queued */
static pthread_cond_t pin_idle = PTHREAD_COND_INITIALIZER; /* pending 0 */
static reg_buffer *pin_head, *pin_tail;
static reg_hooks pin_hooks; /* the registry's, copied on queueing */
static int pin_thread;      /* 0 not started, 1 running, -1 cannot start */
static pinner_stats pin_st; /* under pin_mu */

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* Pins b (state PIN_RUNNING, taken off the queue) and publishes the
 * result; frees b when its last release came meanwhile. Pinner thread. */
static void pin_one(reg_buffer *b, const reg_hooks *h)
{
    char msg[256] = "";
    void *handle = NULL;
    double t0 = now_s();
    int rv = h->pin(h->arg, b->base, b->size, &handle, msg, sizeof(msg));
    double dt = now_s() - t0;
    if (rv == GEMM_OK && handle == NULL)
        rv = GEMM_ERR_INTERNAL; /* a pin hook always gives a handle */
    if (rv != GEMM_OK) {
        if (h->unreserve != NULL)
            h->unreserve(h->arg, b->size);
        gemmd_log(LOG_WARNING,
                  "pinning a buffer of %zu bytes in the background failed "
                  "after %.3f s (%s): it stays usable, unpinned (slower "
                  "copies); pass --max-pinned-bytes lower or free host "
                  "memory",
                  b->size, dt, msg[0] != '\0' ? msg : gemm_strerror(rv));
    }
    pthread_mutex_lock(&pin_mu);
    if (rv == GEMM_OK) {
        atomic_store_explicit(&b->pin, handle, memory_order_release);
        atomic_store(&b->pin_state, PIN_DONE);
        pin_st.done++;
        pin_st.seconds += dt;
        pin_st.bytes += b->size;
    } else {
        atomic_store(&b->pin_state, PIN_FAILED);
        pin_st.failed++;
    }
    bool orphan = b->pin_orphan;
    pthread_mutex_unlock(&pin_mu);
    if (orphan) { /* released while pinning: the last owner is us */
        if (handle != NULL && h->unpin != NULL)
            h->unpin(h->arg, b->base, handle);
        munmap(b->base, b->size);
        free(b);
    }
}

/* The pinner thread: pins what is queued, oldest first; never returns. */
static void *pinner_main(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&pin_mu);
    for (;;) {
        while (pin_head == NULL)
            pthread_cond_wait(&pin_cv, &pin_mu);
        reg_buffer *b = pin_head;
        pin_head = b->pin_next;
        if (pin_head == NULL)
            pin_tail = NULL;
        b->pin_next = NULL;
        atomic_store(&b->pin_state, PIN_RUNNING);
        reg_hooks h = pin_hooks;
        pthread_mutex_unlock(&pin_mu);
        pin_one(b, &h);
        pthread_mutex_lock(&pin_mu);
        if (--pin_st.pending == 0)
            pthread_cond_broadcast(&pin_idle);
    }
    return NULL;
}

/* Starts the thread unless it runs; under pin_mu. Whether it runs. */
static bool pinner_start(void)
{
    if (pin_thread == 0) {
        pthread_t t;
        pthread_attr_t a;
        pin_thread = -1;
        if (pthread_attr_init(&a) == 0) {
            pthread_attr_setdetachstate(&a, PTHREAD_CREATE_DETACHED);
            if (pthread_create(&t, &a, pinner_main, NULL) == 0)
                pin_thread = 1;
            pthread_attr_destroy(&a);
        }
    }
    return pin_thread == 1;
}

bool pinner_queue(reg_buffer *b, const reg_hooks *hooks)
{
    pthread_mutex_lock(&pin_mu);
    bool queued = pinner_start();
    if (queued) {
        pin_hooks = *hooks;
        b->pin_next = NULL;
        b->pin_orphan = false;
        atomic_store(&b->pin_state, PIN_QUEUED);
        if (pin_tail != NULL)
            pin_tail->pin_next = b;
        else
            pin_head = b;
        pin_tail = b;
        pin_st.pending++;
        pthread_cond_signal(&pin_cv);
    }
    pthread_mutex_unlock(&pin_mu);
    return queued;
}

bool pinner_release(reg_buffer *b)
{
    bool handed = false;
    pthread_mutex_lock(&pin_mu);
    int st = atomic_load(&b->pin_state);
    if (st == PIN_QUEUED) { /* cancel: out of the queue, unreserved */
        reg_buffer **l = &pin_head;
        reg_buffer *prev = NULL;
        while (*l != b) {
            prev = *l;
            l = &(*l)->pin_next;
        }
        *l = b->pin_next;
        if (pin_tail == b)
            pin_tail = prev;
        b->pin_next = NULL;
        atomic_store(&b->pin_state, PIN_NONE);
        if (pin_hooks.unreserve != NULL)
            pin_hooks.unreserve(pin_hooks.arg, b->size);
        if (--pin_st.pending == 0)
            pthread_cond_broadcast(&pin_idle);
    } else if (st == PIN_RUNNING) {
        b->pin_orphan = true;
        handed = true;
    }
    pthread_mutex_unlock(&pin_mu);
    return handed;
}

void pinner_drain(void)
{
    pthread_mutex_lock(&pin_mu);
    while (pin_st.pending != 0)
        pthread_cond_wait(&pin_idle, &pin_mu);
    pthread_mutex_unlock(&pin_mu);
}

void pinner_stats_get(pinner_stats *out)
{
    pthread_mutex_lock(&pin_mu);
    *out = pin_st;
    pthread_mutex_unlock(&pin_mu);
}
