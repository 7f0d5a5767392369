/*
 * loop.h: the loop's inbox. Workers push finished jobs from any thread
 * (mutex + uv_async_send); the loop thread takes them all at once, in FIFO
 * order, and hands them to the callback the daemon installed. After an
 * event the loop polls the inbox for --spin-us with an idle handle before
 * it sleeps: a loop asleep in epoll takes 5-20 us to notice a worker's
 * uv_async_send. While it polls, a push sends nothing (no system call,
 * and no second pass of the loop for the wake-up). Not while the host has
 * no core to spare (spinguard.h).
 */
#ifndef GEMMD_LOOP_H
#define GEMMD_LOOP_H

#include "job.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <uv.h>

/* Loop thread: events (a non-empty FIFO list linked by next) came in. */
typedef void (*loop_events_fn)(void *arg, gemmd_event *evs);

typedef struct loop_inbox {
    uv_async_t wake;
    uv_idle_t spin;      /* polls the inbox while events keep coming */
    uint64_t spin_ns;    /* --spin-us; 0 = never spin */
    uint64_t spin_until; /* ns */
    uint64_t spin_wall0; /* the spin's start, ns */
    uint64_t spin_cpu0;  /* the loop thread's CPU time then, ns */
    bool quiet;          /* stopping: no more spinning */
    loop_events_fn on_events;
    void *arg;

    pthread_mutex_t mu; /* guards what follows */
    gemmd_event *head, *tail;
    bool closed;   /* no more uv_async_send */
    bool spinning; /* the spin handle polls the inbox: no wake-up needed */
} loop_inbox;

/* Makes the inbox's handles on loop; on_events(arg, ...) gets what
 * workers push. Returns a gemm_error. Main thread, before uv_run. */
int loop_inbox_init(loop_inbox *ib, uv_loop_t *loop, unsigned spin_us,
                    loop_events_fn on_events, void *arg);

/* Any thread: queues ev and wakes the loop; dropped once closed. */
void loop_push(loop_inbox *ib, gemmd_event *ev);

/* Loop thread: hands what the inbox holds to on_events now. */
void loop_drain(loop_inbox *ib);

/* Loop thread: after an event, poll the inbox for --spin-us before
 * sleeping. */
void loop_spin(loop_inbox *ib);

/* Loop thread: the daemon is stopping; spinning ends for good. */
void loop_quiet(loop_inbox *ib);

/* Loop thread: takes no more pushes and closes the handles. */
void loop_inbox_close(loop_inbox *ib);

/* Main thread, after uv_run: frees what the inbox holds. */
void loop_inbox_fini(loop_inbox *ib);

#endif
