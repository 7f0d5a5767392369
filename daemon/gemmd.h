/*
 * gemmd.h: the daemon's state. One `gemmd` lives in main(); its fields say
 * which thread may touch them. Each room keeps its own types in its own
 * header; this one only gathers them.
 *
 * Threads: the libuv loop thread owns everything not marked otherwise: it
 * accepts connections (listen.c, conn.c), reads requests (sp.c, fdchan.c),
 * dispatches them (dispatch.c, admit.c) and answers them (complete.c). The
 * scheduler's workers run jobs and push them back onto the inbox (loop.c).
 */
#ifndef GEMMD_GEMMD_H
#define GEMMD_GEMMD_H

#include "backend.h"
#include "config.h"
#include "conn.h"
#include "fdchan.h"
#include "listen.h"
#include "loop.h"
#include "metrics.h"
#include "registry.h"
#include "scheduler.h"
#include "sp.h"
#include "stats.h"
#include "users.h"

#include <stdbool.h>
#include <stdint.h>
#include <uv.h>

typedef struct gemmd {
    gemmd_config cfg; /* read-only after start: any thread */
    uv_loop_t *loop;
    loop_inbox inbox; /* finished jobs from the workers (any thread) */
    uv_signal_t sig_term, sig_int, sig_hup;
    uv_timer_t stats_timer, drain_timer;

    /* the socket side, bottom up */
    lsn_listener lsn; /* listening socket, caps, sweep timer */
    conn_set conns;   /* connections */
    sp_server sp;     /* SP requests and replies */
    fdc_table fdc;    /* descriptor channels and tickets */

    registry reg;
    sched sched;
    gemmd_backend be;
    gemmd_stats stats;
    gemmd_metrics metrics;
    gemmd_users users;

    uint32_t inflight;    /* jobs queued or running */
    uint64_t mem_budget;  /* --memory-budget, resolved */
    uint64_t user_memory; /* each uid's share of it */
    uint64_t mem_used;    /* reserved by jobs and host tensors */
    bool draining;        /* SIGTERM seen: refuse new work */
    bool stopped;         /* closing, loop about to end */
    uint64_t stop_by_ns;  /* last replies get until then */
} gemmd;

#endif
