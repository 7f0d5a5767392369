/*
 * sp.h: the scalability protocols' REP side, spoken by gemmd itself (the
 * SP IPC mapping: an 8-byte greeting each way, then frames of 01 + u64
 * big-endian length + REQ backtrace + body; see common/wire.h), so any nng
 * req0 client talks to it unchanged. SP installs itself on the connection
 * layer as a protocol; it reads frames into requests, hands each to the
 * on_request callback that the daemon installed, and packs replies with
 * the request's backtrace. Loop thread only.
 */
#ifndef GEMMD_SP_H
#define GEMMD_SP_H

#include "conn.h"
#include "job.h"
#include "trace.h"

#include "gemm.pb-c.h"

#include <stdbool.h>
#include <stdint.h>

#define SP_BT_MAX     32 /* SP backtrace bytes kept (8 hops) */
#define SP_RECENT_MAX 64 /* answered request ids kept for Cancel */

/* A request answered recently, for Cancel lookups: its status and, for a
 * GEMM answered OK, the timings of its reply (a Cancel that arrives after
 * it finished answers with them). */
typedef struct sp_recent {
    uint64_t id;
    int status;
    bool gemm; /* the reply had a GEMM body: the timings below */
    uint64_t queued_us, compute_us, total_us, kernel_ns;
} sp_recent;

/* The SP state of one connection (its conn->up). */
typedef struct sp_client {
    /* what this connection holds (limits; counted by admit) */
    uint32_t buffers;    /* registered now */
    uint64_t bytes;      /* their size + resident tensors' */
    uint32_t inflight;   /* jobs queued or running */
    struct sp_req *reqs; /* requests in flight (Cancel finds them) */
    sp_recent recent[SP_RECENT_MAX];
    unsigned recent_next;
} sp_client;

/* A request read from a connection, until its reply is queued. */
typedef struct sp_req {
    conn *conn; /* holds a reference */
    uint8_t bt[SP_BT_MAX];
    unsigned bt_len;
    uint64_t t_received;
    uint64_t id;        /* Request.id */
    int kind;           /* metrics request kind */
    Gemm__Request *req; /* decoded; NULL if decode_status != 0 */
    int decode_status;
    char decode_msg[128];
    gemmd_job *job; /* queued or running work */
    /* its reply as a worker wrote it (enum conn_direct), the bytes it
     * wrote, and on CONN_DIRECT_PARTIAL the rest; set by the loop from
     * the finished job before sp_reply */
    int direct;
    size_t direct_bytes;
    conn_out *direct_rest;
    struct sp_req *cancel;      /* a Cancel waiting for this one to finish */
    struct sp_req *prev, *next; /* the client's reqs */
    uint64_t tr[TR_NPOINTS];    /* time stamps (trace.h) */
} sp_req;

/* A request arrived: the callee answers it with exactly one sp_reply. */
typedef void (*sp_request_fn)(void *arg, sp_req *q);
/* An SP connection closed: drop what it holds. */
typedef void (*sp_closed_fn)(void *arg, conn *c);

typedef struct sp_server {
    conn_set *set;
    conn_proto proto;
    sp_request_fn on_request;
    sp_closed_fn on_closed;
    void *arg;
    uint32_t nclients; /* SP connections open */
} sp_server;

/* Installs SP on set (and its greeting as the daemon's), with the
 * callbacks of the layer above. Main thread, before lsn_open. */
void sp_init(sp_server *s, conn_set *set, sp_request_fn on_request,
             sp_closed_fn on_closed, void *arg);

/* The SP state of connection c (an SP connection). */
sp_client *sp_client_of(conn *c);

/* Queues r (status its status) as q's reply: q leaves its client's
 * requests, is remembered for Cancel and freed; its connection may be
 * closed (then nothing is sent). A reply that a worker wrote (q->direct)
 * is only counted, or its rest queued. */
void sp_reply(sp_req *q, const Gemm__Reply *r, int status);

/* r packed as q's reply, framed with its backtrace (malloc'd; NULL when
 * out of memory). Any thread: reads only what q keeps from its read. */
conn_out *sp_reply_pack(const sp_req *q, const Gemm__Reply *r);

#endif
