/*
 * gemmd.h: the daemon's state and the functions its modules share. One
 * `gemmd` lives in main(); its fields say which thread may touch them.
 *
 * Threads: the libuv loop thread owns everything not marked otherwise; nng's
 * aio threads only decode and push events onto the inbox (mutex + uv_async);
 * the scheduler's workers run jobs and push them back the same way.
 */
#ifndef GEMMD_GEMMD_H
#define GEMMD_GEMMD_H

#include "backend.h"
#include "config.h"
#include "job.h"
#include "registry.h"
#include "scheduler.h"
#include "stats.h"
#include "watchdog.h"

#include "gemm.pb-c.h"

#include <nng/nng.h>
#include <pthread.h>
#include <stdatomic.h>
#include <uv.h>

/* One nng context: receives one request at a time and sends its reply. */
typedef struct srv_slot {
    gemmd_event ev; /* EV_REQUEST */
    struct gemmd *d;
    nng_ctx ctx;
    nng_aio *aio;
    int state; /* SLOT_*, see server.c */
    /* the received request, filled on the nng thread */
    uint32_t pipe;
    uint64_t t_received;
    Gemm__Request *req; /* decoded, or NULL when decode_status != 0 */
    int decode_status;
    char decode_msg[128];
    bool internal; /* from the watchdog: kept out of the counters */
} srv_slot;

/* A connected client (one nng pipe). */
typedef struct gemmd_client {
    uint32_t pipe;
    uint64_t uid;
    bool has_uid;
    bool internal;     /* the watchdog's probe: not counted as a client */
    uint32_t listener; /* id of the listener that accepted it */
    uint32_t buffers;  /* registered now */
    uint64_t bytes;    /* their total size */
    uint32_t inflight; /* GEMMs queued or running */
    struct gemmd_client *next;
} gemmd_client;

#define GEMMD_CLIENT_BUCKETS 256
#define GEMMD_RETIRED_MAX    32

typedef struct gemmd {
    gemmd_config cfg; /* read-only after start: any thread */
    uv_loop_t *loop;
    uv_async_t wake;
    /* polls the inbox while events keep coming (--spin-us): a loop asleep
     * in epoll takes 5-20 us to notice a worker's uv_async_send */
    uv_idle_t spin;
    uint64_t spin_until; /* ns */
    uv_signal_t sig_term, sig_int, sig_hup;
    uv_timer_t stats_timer, drain_timer;

    /* nng: socket and contexts; slots are touched by nng threads only
     * between a receive and its hand-off */
    nng_socket sock;
    nng_listener listener;                   /* the one accepting now */
    nng_listener retired[GEMMD_RETIRED_MAX]; /* wedged, still serving
                                                 their old connections */
    uint32_t nretired;
    uint32_t relistens; /* listeners made after the first */
    srv_slot *slots;
    uint32_t nslots;
    atomic_uint busy_slots; /* slots holding a request (not receiving) */
    gemmd_watchdog watchdog;

    /* inbox: any thread pushes, the loop drains */
    pthread_mutex_t inbox_mu;
    gemmd_event *inbox_head, *inbox_tail;
    bool inbox_closed; /* under inbox_mu: no more uv_async_send */

    registry reg;
    sched sched;
    gemmd_backend be;
    gemmd_stats stats;
    gemmd_client *clients[GEMMD_CLIENT_BUCKETS];
    uint32_t nclients;

    uint32_t inflight;         /* GEMMs queued or running */
    atomic_uint sends_pending; /* replies handed to nng, not yet sent */
    bool draining;             /* SIGTERM seen: refuse new work */
    bool stopped;              /* handles closing, loop about to end */
} gemmd;

/* server.c: the nng side (any thread unless noted) */
int srv_open(gemmd *d, char *msg, size_t len); /* main thread */
void srv_close(gemmd *d);                      /* loop thread */
/* Closes and re-creates the listener (same URL, mode, group). Loop
 * thread. Returns a gemm_error and a message. */
int srv_relisten(gemmd *d, char *msg, size_t len);
/* A retired listener lost its last connection: close it. Loop thread. */
void srv_retire_done(gemmd *d, uint32_t listener);
void srv_reply(gemmd *d, srv_slot *s, Gemm__Reply *r); /* loop thread */
void srv_push(gemmd *d, gemmd_event *ev);
/* Takes the whole inbox (FIFO order). Loop thread. */
gemmd_event *srv_take_inbox(gemmd *d);
/* The slot that owns an EV_REQUEST event. */
srv_slot *srv_slot_of(gemmd_event *ev);

/* dispatch.c: what each request does (loop thread) */
void gemmd_dispatch(gemmd *d, gemmd_event *ev);
void gemmd_job_done(void *arg, gemmd_job *job); /* worker thread */
void gemmd_status_line(gemmd *d);               /* logs one stats line */
void gemmd_clients_free(gemmd *d);

#endif
