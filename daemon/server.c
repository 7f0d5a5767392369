/*
 * server.c: gemmd's socket side, on the libuv loop. The daemon listens on a
 * Unix stream socket and speaks the scalability protocols' REP over it
 * itself (the SP IPC mapping: an 8-byte header each way, then frames of
 * 01 + u64 big-endian length + REQ backtrace + body), so any nng req0
 * client talks to it unchanged. It does not use nng's listener because
 * Debian's nng 1.5.2 cannot be made safe for a multi-user service: a peer
 * hanging up mid-handshake stops its listener for good (nng#1518), there is
 * no handshake or partial-message timeout, no cap on connections, and all
 * clients share the REP contexts, so one client that reads no replies
 * blocks every other. Here each connection has its own read state and
 * reply queue:
 *
 *  - greeting and each message must be whole within a deadline, else the
 *    connection is closed; idle connections cost one descriptor and a
 *    small struct, and each uid may hold a bounded number;
 *  - a connection with --client-pending replies unwritten is not read
 *    until they drain, so a client that does not read stalls only itself;
 *    one whose replies make no progress for --send-timeout is dropped;
 *  - connections past the caps are accepted and closed at once (a spare
 *    descriptor covers EMFILE), so the backlog never fills and the loop
 *    never spins on a listener it cannot serve.
 *
 * The same socket takes descriptor channels (see proto/gemm.proto): a
 * client hands over a memfd with SCM_RIGHTS and gets a ticket that its
 * RegisterBuffer names. The peer's uid comes from SO_PEERCRED.
 */
#include "gemmd.h"
#include "log.h"
#include "request.h"
#include "scm.h"
#include "wire.h"

#include <gemm/gemm.h>

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <unistd.h>

#define READS_PER_WAKE 16 /* messages taken from one connection at a time */

static void conn_io(uv_poll_t *h, int status, int events);
static void srv_flush(srv_conn *c);
static void arm(gemmd *d, uint64_t at_ns);

/* ---- the inbox (finished jobs from the workers) ---- */

void srv_push(gemmd *d, gemmd_event *ev)
{
    ev->next = NULL;
    pthread_mutex_lock(&d->inbox_mu);
    if (d->inbox_closed) {
        pthread_mutex_unlock(&d->inbox_mu);
        return;
    }
    if (d->inbox_tail != NULL)
        d->inbox_tail->next = ev;
    else
        d->inbox_head = ev;
    d->inbox_tail = ev;
    uv_async_send(&d->wake);
    pthread_mutex_unlock(&d->inbox_mu);
}

gemmd_event *srv_take_inbox(gemmd *d)
{
    pthread_mutex_lock(&d->inbox_mu);
    gemmd_event *ev = d->inbox_head;
    d->inbox_head = d->inbox_tail = NULL;
    pthread_mutex_unlock(&d->inbox_mu);
    return ev;
}

/* ---- connections ---- */

static void conn_unref(srv_conn *c)
{
    if (--c->refs == 0)
        free(c);
}

static void conn_on_closed(uv_handle_t *h)
{
    srv_conn *c = h->data;
    close(c->fd);
    conn_unref(c); /* the open connection's own reference */
}

/* Polls for what c needs now: reading unless paused or closed, writing
 * while replies are queued. */
static void conn_poll(srv_conn *c)
{
    if (c->closed)
        return;
    int ev = 0;
    if (!c->read_paused)
        ev |= UV_READABLE;
    if (c->out_head != NULL)
        ev |= UV_WRITABLE;
    if (ev == c->events)
        return;
    c->events = ev;
    if (ev != 0)
        uv_poll_start(&c->poll, ev, conn_io);
    else
        uv_poll_stop(&c->poll);
}

/* Closes c: no more I/O; unwritten replies are dropped; what it holds goes
 * (gemmd_conn_closed). c itself lives on while requests hold it. */
static void conn_close(srv_conn *c, int level, const char *why)
{
    if (c->closed)
        return;
    gemmd *d = c->d;
    c->closed = true;
    gemmd_log(level, "connection %u (uid %llu, pid %ld) closed: %s", c->id,
              (unsigned long long)c->uid, (long)c->pid, why);
    uv_poll_stop(&c->poll);
    uv_close((uv_handle_t *)&c->poll, conn_on_closed);
    for (srv_out *o = c->out_head, *next; o != NULL; o = next) {
        next = o->next;
        free(o);
    }
    c->out_head = c->out_tail = NULL;
    free(c->msg);
    c->msg = NULL;
    for (unsigned i = 0; i < c->nfdq; i++)
        close(c->fdq[i]);
    c->nfdq = 0;
    for (int b = 0; b < SRV_TICKET_BUCKETS; b++)
        for (srv_ticket *t = d->tickets[b]; t != NULL; t = t->next)
            if (t->chan == c)
                t->chan = NULL; /* the ticket stays good until it expires */
    if (c->prev != NULL)
        c->prev->next = c->next;
    else
        d->conns = c->next;
    if (c->next != NULL)
        c->next->prev = c->prev;
    d->nconns--;
    if (c->user != NULL && --c->user->conns == 0)
        d->users_active--;
    if (c->kind == CONN_SP) {
        d->nclients--;
        gemmd_conn_closed(d, c);
    }
}

/* Appends an output of len bytes to c's queue and tries to write it. */
static void conn_send(srv_conn *c, srv_out *o)
{
    o->next = NULL;
    if (c->out_tail != NULL) {
        c->out_tail->next = o;
    } else {
        c->out_head = o;
        c->out_since = gemmd_now_ns();
        if (c->d->cfg.send_timeout_s > 0)
            arm(c->d,
                c->out_since + (uint64_t)(c->d->cfg.send_timeout_s * 1e9));
    }
    c->out_tail = o;
    if (c->out_head == o)
        srv_flush(c); /* the queue was empty: most replies leave at once */
}

static srv_out *out_new(size_t len, bool reply)
{
    srv_out *o = malloc(sizeof(*o) + len);
    if (o != NULL) {
        o->len = len;
        o->reply = reply;
        o->next = NULL;
    }
    return o;
}

/* Writes what c's queue holds until the socket is full. */
static void srv_flush(srv_conn *c)
{
    gemmd *d = c->d;
    while (c->out_head != NULL && !c->closed) {
        struct iovec iov[16];
        int n = 0;
        size_t off = c->out_off;
        for (srv_out *o = c->out_head; o != NULL && n < 16; o = o->next) {
            iov[n].iov_base = o->data + off;
            iov[n].iov_len = o->len - off;
            off = 0;
            n++;
        }
        struct msghdr mh = {.msg_iov = iov, .msg_iovlen = (size_t)n};
        ssize_t w = sendmsg(c->fd, &mh, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            if (errno == EAGAIN || errno == EWOULDBLOCK)
                break;
            conn_close(c, LOG_DEBUG, strerror(errno));
            return;
        }
        d->metrics.bytes_out += (uint64_t)w;
        c->out_since = gemmd_now_ns();
        size_t left = (size_t)w;
        while (left > 0) {
            srv_out *o = c->out_head;
            size_t rest = o->len - c->out_off;
            if (left < rest) {
                c->out_off += left;
                break;
            }
            left -= rest;
            c->out_head = o->next;
            c->out_off = 0;
            if (o->reply && c->pending > 0)
                c->pending--;
            free(o);
        }
        if (c->out_head == NULL)
            c->out_tail = NULL;
    }
    if (c->read_paused && c->pending < d->cfg.client_pending)
        c->read_paused = false;
    conn_poll(c);
}

/* Reads into buf; returns bytes read, 0 when nothing is there now, -1
 * after closing c (EOF or an error). */
static ssize_t conn_read(srv_conn *c, void *buf, size_t len)
{
    for (;;) {
        ssize_t r = recv(c->fd, buf, len, MSG_DONTWAIT);
        if (r > 0) {
            c->d->metrics.bytes_in += (uint64_t)r;
            return r;
        }
        if (r == 0) {
            conn_close(c, LOG_DEBUG, "peer closed the connection");
            return -1;
        }
        if (errno == EINTR)
            continue;
        if (errno == EAGAIN || errno == EWOULDBLOCK)
            return 0;
        conn_close(c, LOG_DEBUG, strerror(errno));
        return -1;
    }
}

/* ---- SP requests ---- */

/* The REQ backtrace at the start of data: 4-byte words up to and including
 * the first with the high bit set (the request id). Returns its length, or
 * 0 when there is none within SRV_BT_MAX bytes. */
static unsigned backtrace_len(const uint8_t *data, uint64_t len)
{
    for (unsigned n = 0; n + 4 <= len && n + 4 <= SRV_BT_MAX; n += 4)
        if (data[n] & 0x80)
            return n + 4;
    return 0;
}

/* A whole message: make the request and dispatch it. body is NULL for an
 * oversized message (refused with TOO_LARGE, body discarded). */
static void sp_request(srv_conn *c, const uint8_t *data, uint64_t len,
                       bool oversized)
{
    gemmd *d = c->d;
    unsigned bt = backtrace_len(data, oversized ? c->bt_len : len);
    if (bt == 0) {
        conn_close(c, LOG_INFO, "a message without a request id");
        return;
    }
    srv_req *q = calloc(1, sizeof(*q));
    if (q == NULL) {
        conn_close(c, LOG_ERR, "out of memory for a request");
        return;
    }
    q->conn = c;
    c->refs++;
    memcpy(q->bt, data, bt);
    q->bt_len = bt;
    q->t_received = gemmd_now_ns();
    if (oversized) {
        q->decode_status = GEMM_ERR_TOO_LARGE;
        snprintf(q->decode_msg, sizeof(q->decode_msg),
                 "request of %llu bytes exceeds the limit of %zu",
                 (unsigned long long)(len - bt), d->cfg.max_message_bytes);
    } else {
        q->decode_status =
            req_decode(data + bt, len - bt, d->cfg.max_message_bytes, &q->req,
                       q->decode_msg, sizeof(q->decode_msg));
    }
    q->next = c->reqs;
    if (c->reqs != NULL)
        c->reqs->prev = q;
    c->reqs = q;
    if (++c->pending >= d->cfg.client_pending)
        c->read_paused = true;
    gemmd_dispatch(d, q);
    gemmd_spin(d); /* its job may finish within --spin-us */
}

/* Reads SP frames from c: at most READS_PER_WAKE messages. */
static void sp_read(srv_conn *c)
{
    gemmd *d = c->d;
    size_t max = d->cfg.max_message_bytes;
    for (int taken = 0; taken < READS_PER_WAKE;) {
        if (c->closed || c->read_paused)
            return;
        ssize_t r;
        if (c->msg == NULL && !c->skipping) {
            r = conn_read(c, c->head + c->head_got,
                          WIRE_SP_FRAME_HEAD - c->head_got);
            if (r <= 0)
                return;
            if (c->head_got == 0) {
                c->deadline_ns =
                    gemmd_now_ns() + (uint64_t)(d->cfg.message_timeout_s * 1e9);
                arm(d, c->deadline_ns);
            }
            c->head_got += (unsigned)r;
            if (c->head_got < WIRE_SP_FRAME_HEAD)
                continue;
            c->head_got = 0;
            uint64_t len;
            if (!wire_sp_frame_get(c->head, &len) || len < 4) {
                conn_close(c, LOG_INFO, "not an SP message frame");
                return;
            }
            if (len > 2 * (uint64_t)max) {
                d->metrics.conns_dropped++;
                conn_close(c, LOG_INFO, "a message over twice the size limit");
                return;
            }
            c->msg_len = len;
            c->msg_got = 0;
            if (len > max + SRV_BT_MAX) {
                c->skipping = true;
                c->bt_len = 0;
            } else {
                /* the buffer grows with what arrives: a frame header
                 * alone holds no more than its first page */
                c->msg_cap = len < 4096 ? len : 4096;
                if ((c->msg = malloc(c->msg_cap)) == NULL) {
                    conn_close(c, LOG_ERR, "out of memory for a message");
                    return;
                }
            }
            continue;
        }
        if (c->skipping) {
            uint8_t buf[4096];
            uint64_t want = c->msg_len - c->msg_got;
            r = conn_read(c, buf, want < sizeof(buf) ? want : sizeof(buf));
            if (r <= 0)
                return;
            for (ssize_t i = 0; i < r && c->bt_len < SRV_BT_MAX; i++)
                c->bt[c->bt_len++] = buf[i];
            c->msg_got += (uint64_t)r;
            if (c->msg_got == c->msg_len) {
                c->skipping = false;
                c->deadline_ns = 0;
                taken++;
                sp_request(c, c->bt, c->msg_len, true);
            }
            continue;
        }
        if (c->msg_got == c->msg_cap) {
            uint64_t cap =
                c->msg_cap * 4 < c->msg_len ? c->msg_cap * 4 : c->msg_len;
            uint8_t *grown = realloc(c->msg, cap);
            if (grown == NULL) {
                conn_close(c, LOG_ERR, "out of memory for a message");
                return;
            }
            c->msg = grown;
            c->msg_cap = cap;
        }
        r = conn_read(c, c->msg + c->msg_got, c->msg_cap - c->msg_got);
        if (r <= 0)
            return;
        c->msg_got += (uint64_t)r;
        if (c->msg_got < c->msg_len)
            continue;
        uint8_t *msg = c->msg;
        c->msg = NULL;
        c->deadline_ns = 0;
        taken++;
        sp_request(c, msg, c->msg_len, false);
        free(msg);
    }
}

void srv_reply(gemmd *d, srv_req *q, Gemm__Reply *r)
{
    srv_conn *c = q->conn;
    int status = r->has_status ? r->status : GEMM_OK;
    metrics_observe(&d->metrics, q->kind, status,
                    gemmd_now_ns() - q->t_received);
    if (status == GEMM_OK)
        d->stats.served++;
    else
        d->stats.failed++;
    if (c->user != NULL) {
        c->user->requests++;
        c->user->failed += status != GEMM_OK;
    }
    if (q->prev != NULL)
        q->prev->next = q->next;
    else if (c->reqs == q)
        c->reqs = q->next;
    if (q->next != NULL)
        q->next->prev = q->prev;
    c->recent[c->recent_next].id = q->id;
    c->recent[c->recent_next].status = status;
    c->recent_next = (c->recent_next + 1) % SRV_RECENT_MAX;
    if (!c->closed) {
        size_t n = gemm__reply__get_packed_size(r);
        srv_out *o = out_new(WIRE_SP_FRAME_HEAD + q->bt_len + n, true);
        if (o == NULL) {
            /* cannot answer: the client's request times out */
            gemmd_log(LOG_ERR, "out of memory for a %zu-byte reply", n);
            if (c->pending > 0)
                c->pending--;
        } else {
            wire_sp_frame_put(o->data, q->bt_len + n);
            memcpy(o->data + WIRE_SP_FRAME_HEAD, q->bt, q->bt_len);
            gemm__reply__pack(r, o->data + WIRE_SP_FRAME_HEAD + q->bt_len);
            conn_send(c, o);
        }
    }
    if (q->req != NULL)
        gemm__request__free_unpacked(q->req, NULL);
    free(q);
    conn_unref(c);
}

/* ---- descriptor channels ---- */

static srv_ticket **ticket_link(gemmd *d, uint64_t ticket)
{
    srv_ticket **l = &d->tickets[ticket % SRV_TICKET_BUCKETS];
    while (*l != NULL && (*l)->ticket != ticket)
        l = &(*l)->next;
    return l;
}

static void ticket_drop(gemmd *d, srv_ticket **l)
{
    srv_ticket *t = *l;
    *l = t->next;
    if (t->chan != NULL && t->chan->tickets > 0)
        t->chan->tickets--;
    if (t->fd >= 0)
        close(t->fd);
    d->ntickets--;
    free(t);
}

/* Stashes fd under a fresh ticket of c's uid. Returns GEMM_OK and the
 * ticket, or an error (fd closed then). */
static int ticket_add(gemmd *d, srv_conn *c, int fd, uint64_t *out)
{
    if (c->tickets >= d->cfg.fd_tickets || d->ntickets >= d->max_conns) {
        close(fd);
        return GEMM_ERR_LIMIT;
    }
    srv_ticket *t = calloc(1, sizeof(*t));
    if (t == NULL) {
        close(fd);
        return GEMM_ERR_NOMEM;
    }
    do {
        if (getrandom(&t->ticket, sizeof(t->ticket), 0) != sizeof(t->ticket)) {
            free(t);
            close(fd);
            return GEMM_ERR_INTERNAL;
        }
    } while (t->ticket == 0 || *ticket_link(d, t->ticket) != NULL);
    t->fd = fd;
    t->uid = c->uid;
    t->chan = c;
    t->expires_ns = gemmd_now_ns() + 30ull * 1000000000u;
    arm(d, t->expires_ns);
    srv_ticket **l = &d->tickets[t->ticket % SRV_TICKET_BUCKETS];
    t->next = *l;
    *l = t;
    c->tickets++;
    d->ntickets++;
    *out = t->ticket;
    return GEMM_OK;
}

int srv_ticket_take(gemmd *d, uint64_t ticket, uint64_t uid)
{
    if (ticket == 0)
        return -1;
    srv_ticket **l = ticket_link(d, ticket);
    if (*l == NULL || (*l)->uid != uid)
        return -1;
    int fd = (*l)->fd;
    (*l)->fd = -1;
    ticket_drop(d, l);
    return fd;
}

/* Answers one descriptor message on c. */
static void fd_answer(srv_conn *c, int status, uint64_t ticket)
{
    srv_out *o = out_new(WIRE_FD_ANSWER_LEN, true);
    if (o == NULL) {
        conn_close(c, LOG_ERR, "out of memory for an answer");
        return;
    }
    wire_fd_answer_put(o->data, status, ticket);
    conn_send(c, o);
}

static void fd_read(srv_conn *c)
{
    gemmd *d = c->d;
    for (int taken = 0; taken < READS_PER_WAKE;) {
        if (c->closed || c->read_paused)
            return;
        int fds[SRV_FDQ_MAX];
        size_t nfds;
        bool overflow;
        ssize_t r = scm_recv(c->fd, c->head + c->head_got,
                             WIRE_FD_MSG_LEN - c->head_got, fds, SRV_FDQ_MAX,
                             &nfds, &overflow, MSG_DONTWAIT);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            return;
        for (size_t i = 0; i < nfds; i++) {
            if (c->nfdq < SRV_FDQ_MAX) {
                c->fdq[c->nfdq++] = fds[i];
            } else {
                close(fds[i]);
                overflow = true;
            }
        }
        if (r <= 0) {
            conn_close(c, LOG_DEBUG,
                       r == 0 ? "peer closed the channel" : strerror(errno));
            return;
        }
        d->metrics.bytes_in += (uint64_t)r;
        if (overflow) {
            conn_close(c, LOG_INFO, "too many descriptors at once");
            return;
        }
        c->head_got += (unsigned)r;
        if (c->head_got < WIRE_FD_MSG_LEN)
            continue;
        c->head_got = 0;
        taken++;
        if (wire_fd_msg_op(c->head) != WIRE_FD_OP_PASS) {
            conn_close(c, LOG_INFO, "unknown descriptor-channel message");
            return;
        }
        uint64_t ticket = 0;
        int status = GEMM_ERR_INVALID; /* no descriptor came with it */
        if (c->nfdq > 0) {
            int fd = c->fdq[0];
            memmove(c->fdq, c->fdq + 1, --c->nfdq * sizeof(int));
            status = ticket_add(d, c, fd, &ticket);
        }
        if (++c->pending >= d->cfg.client_pending)
            c->read_paused = true;
        fd_answer(c, status, ticket);
    }
}

/* ---- greeting ---- */

static void greet_read(srv_conn *c)
{
    gemmd *d = c->d;
    ssize_t r = conn_read(c, c->head + c->head_got, WIRE_HDR_LEN - c->head_got);
    if (r <= 0)
        return;
    c->head_got += (unsigned)r;
    if (c->head_got < WIRE_HDR_LEN)
        return;
    c->head_got = 0;
    c->deadline_ns = 0;
    if (memcmp(c->head, wire_sp_req_hdr, WIRE_HDR_LEN) == 0) {
        c->kind = CONN_SP;
        d->nclients++;
        gemmd_log(LOG_DEBUG, "client %u connected (uid %llu, pid %ld)", c->id,
                  (unsigned long long)c->uid, (long)c->pid);
    } else if (memcmp(c->head, wire_fd_hdr, WIRE_HDR_LEN) == 0) {
        c->kind = CONN_FD;
    } else {
        conn_close(c, LOG_INFO, "not an SP REQ peer");
    }
}

static void conn_io(uv_poll_t *h, int status, int events)
{
    srv_conn *c = h->data;
    if (status < 0) {
        conn_close(c, LOG_DEBUG, uv_strerror(status));
        return;
    }
    /* c is freed only after its handle's close callback: safe here */
    if (events & UV_WRITABLE)
        srv_flush(c);
    if ((events & UV_READABLE) && !c->closed && !c->read_paused) {
        if (c->kind == CONN_NEW)
            greet_read(c); /* the first message may follow at once */
        if (c->kind == CONN_SP)
            sp_read(c);
        else if (c->kind == CONN_FD)
            fd_read(c);
    }
    conn_poll(c);
}

/* ---- accepting ---- */

/* At EMFILE: spends the spare descriptor to take one connection off the
 * backlog and close it, so the listener does not stay readable forever. */
static void refuse_one(gemmd *d)
{
    if (d->reserve_fd >= 0) {
        close(d->reserve_fd);
        d->reserve_fd = -1;
    }
    int fd = accept4(d->listen_fd, NULL, NULL, SOCK_CLOEXEC);
    if (fd >= 0)
        close(fd);
    d->metrics.conns_refused++;
    d->reserve_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
}

static void conn_accept(gemmd *d, int fd)
{
    struct ucred cr;
    socklen_t cl = sizeof(cr);
    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &cl) != 0) {
        close(fd);
        return;
    }
    gemmd_user *u = users_get(&d->users, (uint64_t)cr.uid);
    const char *why = NULL;
    if (u == NULL)
        why = "out of memory";
    else if (d->stopped)
        why = "gemmd is stopping";
    else if (d->nconns >= d->max_conns)
        why = "the daemon's connection limit is reached";
    else if (u->conns >= d->cfg.user_connections)
        why = "this user's connection limit is reached";
    srv_conn *c = why == NULL ? calloc(1, sizeof(*c)) : NULL;
    if (why == NULL && c == NULL)
        why = "out of memory";
    if (why == NULL && uv_poll_init(d->loop, &c->poll, fd) != 0)
        why = "cannot poll it";
    if (why != NULL) {
        if (u != NULL)
            u->refused++;
        d->metrics.conns_refused++;
        gemmd_log(LOG_DEBUG, "connection from uid %u (pid %ld) refused: %s",
                  (unsigned)cr.uid, (long)cr.pid, why);
        free(c);
        close(fd);
        return;
    }
    c->poll.data = c;
    c->d = d;
    c->fd = fd;
    if (++d->next_conn_id == 0)
        d->next_conn_id = 1;
    c->id = d->next_conn_id;
    c->uid = (uint64_t)cr.uid;
    c->pid = cr.pid;
    c->user = u;
    c->kind = CONN_NEW;
    c->refs = 1;
    c->deadline_ns =
        gemmd_now_ns() + (uint64_t)(d->cfg.handshake_timeout_s * 1e9);
    arm(d, c->deadline_ns);
    c->next = d->conns;
    if (d->conns != NULL)
        d->conns->prev = c;
    d->conns = c;
    d->nconns++;
    if (u->conns++ == 0)
        d->users_active++;
    d->metrics.conns_accepted++;
    srv_out *o = out_new(WIRE_HDR_LEN, false);
    if (o == NULL) {
        conn_close(c, LOG_ERR, "out of memory");
        return;
    }
    memcpy(o->data, wire_sp_rep_hdr, WIRE_HDR_LEN);
    conn_send(c, o);
    conn_poll(c);
}

static void on_listen(uv_poll_t *h, int status, int events)
{
    gemmd *d = h->data;
    (void)events;
    if (status < 0)
        return;
    for (int i = 0; i < 64; i++) {
        int fd =
            accept4(d->listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
        if (fd >= 0) {
            conn_accept(d, fd);
            continue;
        }
        if (errno == EINTR || errno == ECONNABORTED)
            continue;
        if (errno == EMFILE || errno == ENFILE) {
            refuse_one(d);
            continue;
        }
        if (errno != EAGAIN && errno != EWOULDBLOCK)
            gemmd_log(LOG_WARNING, "accept: %s", strerror(errno));
        return;
    }
}

static void on_sweep(uv_timer_t *t)
{
    gemmd *d = t->data;
    d->sweep_at_ns = 0;
    srv_sweep(d);
}

/* Makes sure the sweep runs by at_ns. The timer runs only when a deadline
 * is pending: an idle daemon does not wake. */
static void arm(gemmd *d, uint64_t at_ns)
{
    if (d->stopped || (d->sweep_at_ns != 0 && d->sweep_at_ns <= at_ns))
        return;
    d->sweep_at_ns = at_ns;
    uint64_t now = gemmd_now_ns();
    uint64_t ms = at_ns > now ? (at_ns - now + 999999) / 1000000 : 0;
    uv_timer_start(&d->sweep_timer, on_sweep, ms, 0);
}

void srv_sweep(gemmd *d)
{
    uint64_t now = gemmd_now_ns();
    uint64_t send_ns = (uint64_t)(d->cfg.send_timeout_s * 1e9);
    uint64_t next = UINT64_MAX;
    char why[96];
    for (srv_conn *c = d->conns, *nx; c != NULL; c = nx) {
        nx = c->next;
        if (c->deadline_ns != 0 && now >= c->deadline_ns) {
            d->metrics.conns_timed_out++;
            snprintf(why, sizeof(why), "%s not whole within %.3g s",
                     c->kind == CONN_NEW ? "greeting" : "message",
                     c->kind == CONN_NEW ? d->cfg.handshake_timeout_s
                                         : d->cfg.message_timeout_s);
            conn_close(c, LOG_INFO, why);
            continue;
        }
        if (c->out_head != NULL && send_ns != 0 &&
            now - c->out_since >= send_ns) {
            d->metrics.conns_dropped++;
            snprintf(why, sizeof(why), "its replies were not read for %.3g s",
                     d->cfg.send_timeout_s);
            conn_close(c, LOG_NOTICE, why);
            continue;
        }
        if (c->deadline_ns != 0 && c->deadline_ns < next)
            next = c->deadline_ns;
        if (c->out_head != NULL && send_ns != 0 &&
            c->out_since + send_ns < next)
            next = c->out_since + send_ns;
    }
    for (int b = 0; b < SRV_TICKET_BUCKETS; b++) {
        srv_ticket **l = &d->tickets[b];
        while (*l != NULL) {
            if (now >= (*l)->expires_ns) {
                ticket_drop(d, l);
                continue;
            }
            if ((*l)->expires_ns < next)
                next = (*l)->expires_ns;
            l = &(*l)->next;
        }
    }
    if (next != UINT64_MAX)
        arm(d, next);
}

/* ---- the listening socket ---- */

/* How many connections the descriptors allow: half of what is left after
 * a reserve for the rest of the daemon (the other half covers descriptor
 * tickets). */
static uint32_t conn_cap(const gemmd *d)
{
    struct rlimit rl;
    uint64_t fds = 1024;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY)
        fds = rl.rlim_cur;
    uint64_t cap = fds > 512 ? (fds - 256) / 2 : fds / 4;
    if (d->cfg.max_connections != 0 && d->cfg.max_connections < cap)
        cap = d->cfg.max_connections;
    return cap > UINT32_MAX ? UINT32_MAX : (uint32_t)cap;
}

/* Whether something listens on path (a live daemon): connect() to it. */
static bool socket_alive(const char *path)
{
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return false;
    bool alive = connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0 ||
                 errno != ECONNREFUSED;
    close(fd);
    return alive;
}

int srv_open(gemmd *d, char *msg, size_t len)
{
    const char *path = d->cfg.listen + strlen("ipc://");
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    struct stat st;
    d->listen_fd = d->reserve_fd = -1;
    if (strlen(path) >= sizeof(sa.sun_path)) {
        snprintf(msg, len, "socket path too long (at most %zu bytes): %s",
                 sizeof(sa.sun_path) - 1, path);
        return GEMM_ERR_INVALID;
    }
    snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
    snprintf(d->sock_path, sizeof(d->sock_path), "%s", path);
    if (lstat(path, &st) == 0) {
        if (!S_ISSOCK(st.st_mode)) {
            snprintf(msg, len, "%s exists and is not a socket", path);
            return GEMM_ERR_PERMISSION;
        }
        if (socket_alive(path)) {
            snprintf(msg, len, "another daemon listens on %s", path);
            return GEMM_ERR_PERMISSION;
        }
        unlink(path); /* a stale socket of a daemon that died */
    }
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        snprintf(msg, len, "socket: %s", strerror(errno));
        return GEMM_ERR_INTERNAL;
    }
    /* created with the final mode: no moment with wider permissions */
    mode_t old = umask(0777 & ~(mode_t)d->cfg.socket_mode);
    int rv = bind(fd, (struct sockaddr *)&sa, sizeof(sa));
    int err = errno;
    umask(old);
    if (rv != 0) {
        snprintf(msg, len, "cannot listen on %s: %s", path, strerror(err));
        close(fd);
        return err == EADDRINUSE || err == EACCES ? GEMM_ERR_PERMISSION
                                                  : GEMM_ERR_INTERNAL;
    }
    if (d->cfg.socket_group[0] != '\0') {
        struct group *g = getgrnam(d->cfg.socket_group);
        if (g == NULL || chown(path, (uid_t)-1, g->gr_gid) != 0) {
            snprintf(msg, len, "cannot give %s to group %s: %s", path,
                     d->cfg.socket_group,
                     g == NULL ? "no such group" : strerror(errno));
            unlink(path);
            close(fd);
            return GEMM_ERR_PERMISSION;
        }
    }
    if (listen(fd, SOMAXCONN) != 0) {
        snprintf(msg, len, "listen on %s: %s", path, strerror(errno));
        unlink(path);
        close(fd);
        return GEMM_ERR_INTERNAL;
    }
    if (stat(path, &st) == 0) {
        d->sock_dev = st.st_dev;
        d->sock_ino = st.st_ino;
    }
    d->listen_fd = fd;
    d->reserve_fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
    uv_timer_init(d->loop, &d->sweep_timer);
    d->sweep_timer.data = d;
    d->max_conns = conn_cap(d);
    uv_poll_init(d->loop, &d->listen_poll, fd);
    d->listen_poll.data = d;
    uv_poll_start(&d->listen_poll, UV_READABLE, on_listen);
    return GEMM_OK;
}

void srv_stop_listening(gemmd *d)
{
    if (d->listen_fd < 0)
        return;
    uv_poll_stop(&d->listen_poll);
    uv_close((uv_handle_t *)&d->listen_poll, NULL);
    close(d->listen_fd);
    d->listen_fd = -1;
    /* only our own socket: a daemon started meanwhile may have taken the
     * path over */
    struct stat st;
    if (lstat(d->sock_path, &st) == 0 && st.st_dev == d->sock_dev &&
        st.st_ino == d->sock_ino)
        unlink(d->sock_path);
    if (d->reserve_fd >= 0)
        close(d->reserve_fd);
    d->reserve_fd = -1;
}

bool srv_flushed(const gemmd *d)
{
    for (const srv_conn *c = d->conns; c != NULL; c = c->next)
        if (c->out_head != NULL)
            return false;
    return true;
}

void srv_close(gemmd *d)
{
    srv_stop_listening(d);
    uv_close((uv_handle_t *)&d->sweep_timer, NULL);
    while (d->conns != NULL)
        conn_close(d->conns, LOG_DEBUG, "gemmd is stopping");
    for (int b = 0; b < SRV_TICKET_BUCKETS; b++)
        while (d->tickets[b] != NULL)
            ticket_drop(d, &d->tickets[b]);
    pthread_mutex_lock(&d->inbox_mu);
    d->inbox_closed = true;
    pthread_mutex_unlock(&d->inbox_mu);
}
