/*
 * gemmd.h: the daemon's state and the functions its modules share. One
 * `gemmd` lives in main(); its fields say which thread may touch them.
 *
 * Threads: the libuv loop thread owns everything not marked otherwise: it
 * accepts connections, reads and answers requests (server.c) and dispatches
 * them (dispatch.c). The scheduler's workers run jobs and push them back
 * onto the inbox (mutex + uv_async).
 */
#ifndef GEMMD_GEMMD_H
#define GEMMD_GEMMD_H

#include "backend.h"
#include "config.h"
#include "job.h"
#include "metrics.h"
#include "registry.h"
#include "scheduler.h"
#include "stats.h"
#include "users.h"

#include "gemm.pb-c.h"

#include <pthread.h>
#include <stdatomic.h>
#include <sys/types.h>
#include <uv.h>

/* One reply waiting to be written to a connection. */
typedef struct srv_out {
    struct srv_out *next;
    size_t len;     /* bytes in data */
    bool reply;     /* answers a request (counts in conn->pending) */
    uint8_t data[]; /* frame header + backtrace + body */
} srv_out;

#define SRV_BT_MAX     32 /* SP backtrace bytes kept (8 hops) */
#define SRV_FDQ_MAX    8  /* descriptors received, not yet matched */
#define SRV_RECENT_MAX 64 /* answered request ids kept for Cancel */

enum srv_conn_kind {
    CONN_NEW, /* greeting sent, the peer's header not yet read */
    CONN_SP,  /* an SP REQ peer: requests and replies */
    CONN_FD,  /* a descriptor channel: memfds in, tickets out */
};

/* A request answered recently, for Cancel lookups. */
typedef struct srv_recent {
    uint64_t id;
    int status;
} srv_recent;

/*
 * One connection. It lives while open and while requests received on it are
 * in flight (refs); replies to a closed connection are dropped.
 */
typedef struct srv_conn {
    uv_poll_t poll; /* first: the handle's data is the conn */
    struct gemmd *d;
    int fd;
    uint32_t id;  /* owner key of buffers, tensors and jobs */
    uint64_t uid; /* SO_PEERCRED */
    pid_t pid;
    gemmd_user *user; /* per-uid usage */
    int kind;         /* enum srv_conn_kind */
    int events;       /* UV_READABLE | UV_WRITABLE polled now */
    bool closed;      /* no more I/O */
    bool read_paused; /* too many replies outstanding */
    unsigned refs;    /* 1 while open + 1 per request in flight */

    /* read side: the header being read (greeting, frame, fd message) */
    uint8_t head[16];
    unsigned head_got, head_want;
    uint8_t *msg; /* the message being read: msg_got of msg_len bytes so
                     far, in a buffer of msg_cap that grows as they come */
    uint64_t msg_len, msg_got, msg_cap;
    bool skipping; /* an oversized message: keep its backtrace,
                      discard the rest, answer TOO_LARGE */
    uint8_t bt[SRV_BT_MAX];
    unsigned bt_len;      /* backtrace bytes seen (skipping) */
    uint64_t deadline_ns; /* the greeting or message must be whole by
                             then; 0 = idle, no deadline */

    /* write side */
    srv_out *out_head, *out_tail;
    size_t out_off;     /* bytes of out_head already written */
    uint64_t out_since; /* last progress while the queue is non-empty */
    unsigned pending;   /* requests read whose reply is not written */

    /* what this connection holds (limits) */
    uint32_t buffers;     /* registered now */
    uint64_t bytes;       /* their size + resident tensors' */
    uint32_t inflight;    /* jobs queued or running */
    struct srv_req *reqs; /* requests in flight (Cancel finds them) */
    srv_recent recent[SRV_RECENT_MAX];
    unsigned recent_next;

    /* descriptor channel */
    int fdq[SRV_FDQ_MAX];
    unsigned nfdq;
    unsigned tickets; /* tickets of this channel not yet used */

    struct srv_conn *prev, *next; /* all connections */
} srv_conn;

/* A request read from a connection, until its reply is queued. */
typedef struct srv_req {
    srv_conn *conn; /* holds a reference */
    uint8_t bt[SRV_BT_MAX];
    unsigned bt_len;
    uint64_t t_received;
    uint64_t id;        /* Request.id */
    int kind;           /* metrics request kind */
    Gemm__Request *req; /* decoded; NULL if decode_status != 0 */
    int decode_status;
    char decode_msg[128];
    gemmd_job *job;              /* queued or running work */
    struct srv_req *cancel;      /* a Cancel waiting for this one to finish */
    struct srv_req *prev, *next; /* conn->reqs */
} srv_req;

/* A descriptor handed over on a descriptor channel, until RegisterBuffer
 * names it. */
typedef struct srv_ticket {
    uint64_t ticket;
    int fd;
    uint64_t uid;
    srv_conn *chan; /* the channel it came on (NULL once closed) */
    uint64_t expires_ns;
    struct srv_ticket *next;
} srv_ticket;

#define SRV_TICKET_BUCKETS 64

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
    uv_timer_t sweep_timer; /* the next deadline of a connection or ticket */
    uint64_t sweep_at_ns;   /* when it fires; 0 = not armed */

    /* the listening socket and the connections */
    int listen_fd;
    uv_poll_t listen_poll;
    int reserve_fd; /* spent to refuse a connection at EMFILE */
    char sock_path[512];
    dev_t sock_dev; /* the socket file we bound (unlinked only if so) */
    ino_t sock_ino;
    srv_conn *conns;
    uint32_t nconns;    /* open connections, all kinds */
    uint32_t max_conns; /* from cfg and RLIMIT_NOFILE */
    uint32_t next_conn_id;
    srv_ticket *tickets[SRV_TICKET_BUCKETS];
    uint32_t ntickets;

    /* inbox: workers push finished jobs, the loop drains */
    pthread_mutex_t inbox_mu;
    gemmd_event *inbox_head, *inbox_tail;
    bool inbox_closed; /* under inbox_mu: no more uv_async_send */

    registry reg;
    sched sched;
    gemmd_backend be;
    gemmd_stats stats;
    gemmd_metrics metrics;
    gemmd_users users;

    uint32_t nclients;     /* SP connections */
    uint32_t users_active; /* uids with a connection open */
    uint32_t inflight;     /* jobs queued or running */
    uint64_t mem_budget;   /* --memory-budget, resolved */
    uint64_t user_memory;  /* each uid's share of it */
    uint64_t mem_used;     /* reserved by jobs and host tensors */
    bool draining;         /* SIGTERM seen: refuse new work */
    bool stopped;          /* closing, loop about to end */
    uint64_t stop_by_ns;   /* last replies get until then */
} gemmd;

/* server.c: connections and the wire (loop thread unless noted) */
int srv_open(gemmd *d, char *msg, size_t len); /* main thread */
/* Stops accepting and removes the socket file. */
void srv_stop_listening(gemmd *d);
/* Closes every connection. */
void srv_close(gemmd *d);
/* Whether every queued reply has been written. */
bool srv_flushed(const gemmd *d);
/* Queues r as q's reply (q is freed; its connection may be gone). */
void srv_reply(gemmd *d, srv_req *q, Gemm__Reply *r);
/* Closes connections past their deadlines (greeting, message, unread
 * replies) and drops expired tickets; arms the timer for the next one. */
void srv_sweep(gemmd *d);
/* Takes descriptor `ticket` for a RegisterBuffer of uid: the fd, or -1. */
int srv_ticket_take(gemmd *d, uint64_t ticket, uint64_t uid);
/* Any thread: pushes a finished job onto the inbox. */
void srv_push(gemmd *d, gemmd_event *ev);
/* Takes the whole inbox (FIFO order). */
gemmd_event *srv_take_inbox(gemmd *d);

/* main.c: after an event, poll the inbox for --spin-us before sleeping. */
void gemmd_spin(gemmd *d);

/* dispatch.c: what each request does (loop thread) */
void gemmd_dispatch(gemmd *d, srv_req *q);
void gemmd_on_event(gemmd *d, gemmd_event *ev); /* finished jobs */
/* A connection closed: its buffers and tensors go, its queued work is
 * dropped; work running finishes and its replies are dropped. */
void gemmd_conn_closed(gemmd *d, srv_conn *c);
void gemmd_job_done(void *arg, gemmd_job *job); /* worker thread */
void gemmd_status_line(gemmd *d);               /* logs one stats line */

#endif
