/*
 * conn.h: one connection's life cycle on the loop: its descriptor polled
 * with libuv, the peer's greeting that picks its protocol, a read buffer
 * that grows with the bytes that arrive, a write queue flushed as the
 * socket takes it, reads paused while too many replies are unwritten, and
 * deadlines (greeting, message, unread replies) kept by a sweeper.
 *
 * The connection layer knows no protocol: the layers above install a
 * conn_proto each (the peer greeting that selects it and its callbacks),
 * as nng's transports call their protocol through an ops table. A
 * connection lives while open and while the layers above hold references
 * to it (requests in flight); replies to a closed connection are dropped.
 * Loop thread only, but for conn_write_direct: a worker may write a reply
 * itself while the queue is empty (the set's write lock orders it with
 * the loop's writes and with closing).
 */
#ifndef GEMMD_CONN_H
#define GEMMD_CONN_H

#include "config.h"
#include "listen.h"
#include "users.h"

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <uv.h>

typedef struct conn conn;

/* A protocol spoken on the socket, installed by a layer above. */
typedef struct conn_proto {
    const uint8_t *hdr; /* the peer's greeting that selects it (8 bytes) */
    size_t up_size;     /* its per-connection state (conn->up), zeroed */
    /* the greeting chose this protocol */
    void (*on_open)(void *arg, conn *c);
    /* c is readable and not paused: read what is there */
    void (*on_read)(void *arg, conn *c);
    /* c closed: drop what it holds (c lives on while referenced) */
    void (*on_close)(void *arg, conn *c);
    void *arg;
} conn_proto;

/* One output waiting to be written. */
typedef struct conn_out {
    struct conn_out *next;
    size_t len;     /* bytes in data */
    bool reply;     /* answers a request (counts in conn->pending) */
    int fd;         /* -1, or a descriptor to pass (SCM_RIGHTS) with the
                       first byte; owned, closed once sent or dropped */
    uint8_t data[]; /* the bytes, as they go on the wire */
} conn_out;

#define CONN_KEEP_MAX  32 /* first bytes kept of a message skipped */
#define CONN_PROTO_MAX 4

struct conn {
    uv_poll_t poll; /* first: the handle's data is the conn */
    struct conn_set *set;
    int fd;
    uint32_t id;  /* owner key of buffers, tensors and jobs */
    uint64_t uid; /* SO_PEERCRED */
    pid_t pid;
    gemmd_user *user;        /* per-uid usage */
    const conn_proto *proto; /* NULL until the greeting is read */
    int events;              /* UV_READABLE | UV_WRITABLE polled now */
    bool closed;             /* no more I/O */
    bool read_paused;        /* too many replies outstanding */
    unsigned refs;           /* 1 while open + 1 per holder above */

    /* read side: the header being read (greeting, frame, fd message) */
    uint8_t head[16];
    unsigned head_got;
    uint8_t *msg; /* the message being read: msg_got of msg_len bytes so
                     far, in a buffer of msg_cap that grows as they come */
    uint64_t msg_len, msg_got, msg_cap;
    bool skipping; /* an oversized message: keep its first bytes,
                      discard the rest */
    uint8_t keep[CONN_KEEP_MAX];
    unsigned keep_len;    /* bytes kept (skipping) */
    uint64_t deadline_ns; /* the greeting or message must be whole by
                             then; 0 = idle, no deadline */

    /* write side */
    conn_out *out_head, *out_tail;
    size_t out_off;     /* bytes of out_head already written */
    uint64_t out_since; /* last progress while the queue is non-empty */
    unsigned pending;   /* requests read whose reply is not written */
    /* a worker wrote part of a reply (conn_write_direct): nothing else is
     * written until the loop queues its rest (conn_send_rest); under the
     * set's write lock */
    bool out_stuck;

    void *up;                 /* the protocol's state of this connection */
    uint64_t t_io;            /* the read callback began (trace.h) */
    struct conn *prev, *next; /* all connections */
};

/* All connections, and the protocols they may speak. */
typedef struct conn_set {
    uv_loop_t *loop;
    const gemmd_config *cfg;
    lsn_listener *lsn;
    const uint8_t *greeting; /* sent to each new connection (8 bytes) */
    const conn_proto *protos[CONN_PROTO_MAX];
    unsigned nprotos;
    size_t up_size; /* the largest protocol state */
    conn *all;
    uint32_t next_id;
    uint64_t bytes_in, bytes_out; /* on client sockets */
    uint64_t timed_out;           /* greeting or message too slow */
    uint64_t dropped;             /* oversized, or not reading replies */
    /* held while a connection's bytes are written or it closes: by the
     * loop, and by a worker writing a reply itself (conn_write_direct) */
    pthread_mutex_t wmu;
} conn_set;

/* Fills s and installs its accept callback and sweeper on lsn. Main
 * thread, before lsn_open. */
void conn_set_init(conn_set *s, uv_loop_t *loop, const gemmd_config *cfg,
                   lsn_listener *lsn);

/* Sets the greeting sent to each new connection (8 bytes, kept). */
void conn_set_greeting(conn_set *s, const uint8_t *greeting);

/* Installs protocol p (kept; at most CONN_PROTO_MAX). Main thread. */
void conn_add_proto(conn_set *s, const conn_proto *p);

/* Reads into buf; returns bytes read, 0 when nothing is there now, -1
 * after closing c (EOF or an error). */
ssize_t conn_read(conn *c, void *buf, size_t len);

/* A new output of len bytes (malloc'd; NULL when out of memory), with no
 * descriptor (fd -1). */
conn_out *conn_out_new(size_t len, bool reply);

/* Frees o and closes its descriptor, if it still has one. */
void conn_out_free(conn_out *o);

/* Queues o (owned by c from now) and writes what the socket takes. */
void conn_send(conn *c, conn_out *o);

/* What conn_write_direct did with a reply. */
enum conn_direct {
    CONN_DIRECT_NONE,    /* nothing written: the loop sends it */
    CONN_DIRECT_SENT,    /* all of it written: conn_reply_written */
    CONN_DIRECT_PARTIAL, /* part written, o holds the rest:
                            conn_send_rest */
};

/* Writes reply o to c now, if c is open and nothing of c's waits to be
 * written; o stays the caller's (on CONN_DIRECT_PARTIAL it holds what is
 * left). *wrote gets the bytes written. Any thread, with the set's write
 * lock held (conn_wlock); c is kept alive by the caller's reference. */
int conn_write_direct(conn *c, conn_out *o, size_t *wrote);

/* Takes and lets go the write lock of s. Any thread. */
void conn_wlock(conn_set *s);
void conn_wunlock(conn_set *s);

/* A reply wrote bytes of itself directly (all of it when done): counts
 * them and, when done, the reply as written. */
void conn_reply_written(conn *c, size_t bytes, bool done);

/* The rest o of a reply a worker began (CONN_DIRECT_PARTIAL) goes first
 * in c's queue (owned by c from now); writing resumes. */
void conn_send_rest(conn *c, conn_out *o);

/* A request was read: counts it as pending, pausing reads at
 * --client-pending. */
void conn_pending_add(conn *c);

/* A reply that will never be written: pending goes down. */
void conn_pending_drop(conn *c);

/* The message being read must be whole by at_ns. */
void conn_deadline(conn *c, uint64_t at_ns);

/* Closes c at level with why: no more I/O, unwritten output dropped, its
 * protocol's on_close called. c lives on while referenced. */
void conn_close(conn *c, int level, const char *why);

void conn_ref(conn *c);
/* Drops a reference; frees c with the last. */
void conn_unref(conn *c);

/* Whether every queued output has been written. */
bool conn_flushed(const conn_set *s);

/* Closes every connection. */
void conn_close_all(conn_set *s);

#endif
