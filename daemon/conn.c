/*
 * conn.c: one connection's life cycle, read buffer and write queue; see
 * conn.h. Each connection has its own read state and output queue, so a
 * client that does not read stalls only itself: with --client-pending
 * replies unwritten it is not read until they drain, and one whose output
 * makes no progress for --send-timeout is dropped. A worker may write a
 * reply itself while the queue is empty (conn_write_direct), under the
 * set's write lock, which the loop's writes and closing take too.
 */
#include "conn.h"
#include "job.h"
#include "log.h"
#include "scm.h"
#include "trace.h"
#include "wire.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

static void conn_io(uv_poll_t *h, int status, int events);
static void conn_flush(conn *c);

void conn_ref(conn *c)
{
    c->refs++;
}

void conn_unref(conn *c)
{
    if (--c->refs == 0)
        free(c);
}

static void conn_on_closed(uv_handle_t *h)
{
    conn *c = h->data;
    close(c->fd);
    conn_unref(c); /* the open connection's own reference */
}

/* Polls for what c needs now: reading unless paused or closed, writing
 * while output is queued. */
static void conn_poll(conn *c)
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

void conn_close(conn *c, int level, const char *why)
{
    if (c->closed)
        return;
    conn_set *s = c->set;
    gemmd_log(level, "connection %u (uid %llu, pid %ld) closed: %s", c->id,
              (unsigned long long)c->uid, (long)c->pid, why);
    uv_poll_stop(&c->poll);
    uv_close((uv_handle_t *)&c->poll, conn_on_closed);
    pthread_mutex_lock(&s->wmu); /* no worker writes to c from now */
    c->closed = true;
    conn_out *out = c->out_head;
    c->out_head = c->out_tail = NULL;
    pthread_mutex_unlock(&s->wmu);
    for (conn_out *o = out, *next; o != NULL; o = next) {
        next = o->next;
        conn_out_free(o);
    }
    free(c->msg);
    c->msg = NULL;
    if (c->prev != NULL)
        c->prev->next = c->next;
    else
        s->all = c->next;
    if (c->next != NULL)
        c->next->prev = c->prev;
    lsn_release(s->lsn, c->user);
    if (c->proto != NULL && c->proto->on_close != NULL)
        c->proto->on_close(c->proto->arg, c);
}

conn_out *conn_out_new(size_t len, bool reply)
{
    conn_out *o = malloc(sizeof(*o) + len);
    if (o != NULL) {
        o->len = len;
        o->reply = reply;
        o->fd = -1;
        o->next = NULL;
    }
    return o;
}

void conn_out_free(conn_out *o)
{
    if (o->fd >= 0)
        close(o->fd);
    free(o);
}

/* The queue of c was empty and now holds something: its send deadline
 * starts. */
static void out_started(conn *c)
{
    conn_set *s = c->set;
    c->out_since = gemmd_now_ns();
    if (s->cfg->send_timeout_s > 0)
        lsn_arm(s->lsn,
                c->out_since + (uint64_t)(s->cfg->send_timeout_s * 1e9));
}

void conn_send(conn *c, conn_out *o)
{
    conn_set *s = c->set;
    o->next = NULL;
    pthread_mutex_lock(&s->wmu);
    bool first = c->out_tail == NULL;
    if (first)
        c->out_head = o;
    else
        c->out_tail->next = o;
    c->out_tail = o;
    pthread_mutex_unlock(&s->wmu);
    if (first) {
        out_started(c);
        conn_flush(c); /* the queue was empty: most replies leave at once */
    }
}

void conn_send_rest(conn *c, conn_out *o)
{
    conn_set *s = c->set;
    pthread_mutex_lock(&s->wmu);
    c->out_stuck = false;
    bool first = c->out_head == NULL;
    o->next = c->out_head;
    c->out_head = o;
    if (first)
        c->out_tail = o;
    c->out_off = 0;
    pthread_mutex_unlock(&s->wmu);
    if (first)
        out_started(c);
    conn_flush(c);
}

void conn_wlock(conn_set *s)
{
    pthread_mutex_lock(&s->wmu);
}

void conn_wunlock(conn_set *s)
{
    pthread_mutex_unlock(&s->wmu);
}

int conn_write_direct(conn *c, conn_out *o, size_t *wrote)
{
    *wrote = 0;
    if (c->closed || c->out_head != NULL || c->out_stuck)
        return CONN_DIRECT_NONE;
    ssize_t w;
    do
        w = send(c->fd, o->data, o->len, MSG_NOSIGNAL | MSG_DONTWAIT);
    while (w < 0 && errno == EINTR);
    if (w <= 0) /* full, or an error that the loop meets and handles */
        return CONN_DIRECT_NONE;
    *wrote = (size_t)w;
    if ((size_t)w == o->len)
        return CONN_DIRECT_SENT;
    memmove(o->data, o->data + w, o->len - (size_t)w);
    o->len -= (size_t)w;
    c->out_stuck = true; /* the rest goes before anything else */
    return CONN_DIRECT_PARTIAL;
}

void conn_reply_written(conn *c, size_t bytes, bool done)
{
    conn_set *s = c->set;
    s->bytes_out += bytes;
    if (!done)
        return;
    if (c->pending > 0)
        c->pending--;
    if (c->read_paused && c->pending < s->cfg->client_pending) {
        c->read_paused = false;
        conn_poll(c);
    }
}

/* Writes what c's queue holds until the socket is full. */
static void conn_flush(conn *c)
{
    conn_set *s = c->set;
    int err = 0;
    pthread_mutex_lock(&s->wmu);
    while (c->out_head != NULL && !c->closed && !c->out_stuck) {
        struct iovec iov[16];
        int n = 0;
        size_t off = c->out_off;
        /* a descriptor goes with its output's first byte: such an
         * output starts a sendmsg of its own */
        int pass = off == 0 ? c->out_head->fd : -1;
        for (conn_out *o = c->out_head; o != NULL && n < 16; o = o->next) {
            if (n > 0 && o->fd >= 0)
                break;
            iov[n].iov_base = o->data + off;
            iov[n].iov_len = o->len - off;
            off = 0;
            n++;
        }
        ssize_t w = scm_sendv(c->fd, iov, n, pass, MSG_DONTWAIT);
        if (w > 0 && pass >= 0) { /* the peer has its copy now */
            close(pass);
            c->out_head->fd = -1;
        }
        if (w < 0) {
            if (errno == EINTR)
                continue;
            if (errno != EAGAIN && errno != EWOULDBLOCK)
                err = errno;
            break;
        }
        s->bytes_out += (uint64_t)w;
        c->out_since = gemmd_now_ns();
        size_t left = (size_t)w;
        while (left > 0) {
            conn_out *o = c->out_head;
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
            conn_out_free(o);
        }
        if (c->out_head == NULL)
            c->out_tail = NULL;
    }
    pthread_mutex_unlock(&s->wmu);
    if (err != 0) {
        conn_close(c, LOG_DEBUG, strerror(err));
        return;
    }
    if (c->read_paused && c->pending < s->cfg->client_pending)
        c->read_paused = false;
    conn_poll(c);
}

ssize_t conn_read(conn *c, void *buf, size_t len)
{
    for (;;) {
        ssize_t r = recv(c->fd, buf, len, MSG_DONTWAIT);
        if (r > 0) {
            c->set->bytes_in += (uint64_t)r;
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

void conn_pending_add(conn *c)
{
    if (++c->pending >= c->set->cfg->client_pending)
        c->read_paused = true;
}

void conn_pending_drop(conn *c)
{
    if (c->pending > 0)
        c->pending--;
}

void conn_deadline(conn *c, uint64_t at_ns)
{
    c->deadline_ns = at_ns;
    if (at_ns != 0)
        lsn_arm(c->set->lsn, at_ns);
}

/* ---- greeting ---- */

/* Reads the peer's greeting; once whole, the protocol it names takes c. */
static void greet_read(conn *c)
{
    conn_set *s = c->set;
    ssize_t r = conn_read(c, c->head + c->head_got, WIRE_HDR_LEN - c->head_got);
    if (r <= 0)
        return;
    c->head_got += (unsigned)r;
    if (c->head_got < WIRE_HDR_LEN)
        return;
    c->head_got = 0;
    c->deadline_ns = 0;
    for (unsigned i = 0; i < s->nprotos; i++) {
        if (memcmp(c->head, s->protos[i]->hdr, WIRE_HDR_LEN) == 0) {
            c->proto = s->protos[i];
            if (c->proto->on_open != NULL)
                c->proto->on_open(c->proto->arg, c);
            return;
        }
    }
    conn_close(c, LOG_INFO, "not an SP REQ peer");
}

static void conn_io(uv_poll_t *h, int status, int events)
{
    conn *c = h->data;
    TRACE_SET(c->t_io, gemmd_now_ns());
    if (status < 0) {
        conn_close(c, LOG_DEBUG, uv_strerror(status));
        return;
    }
    /* c is freed only after its handle's close callback: safe here */
    if (events & UV_WRITABLE)
        conn_flush(c);
    if ((events & UV_READABLE) && !c->closed && !c->read_paused) {
        if (c->proto == NULL)
            greet_read(c); /* the first message may follow at once */
        if (c->proto != NULL && !c->closed)
            c->proto->on_read(c->proto->arg, c);
    }
    conn_poll(c);
}

/* ---- accepting and sweeping (called by the listener) ---- */

/* Takes a connection that passed the listener's caps; see lsn_accept_fn. */
static const char *on_accept(void *arg, int fd, uint64_t uid, pid_t pid,
                             gemmd_user *u)
{
    conn_set *s = arg;
    size_t off = (sizeof(conn) + 15) & ~(size_t)15; /* the protocol state */
    conn *c = calloc(1, off + s->up_size);
    if (c == NULL)
        return "out of memory";
    if (uv_poll_init(s->loop, &c->poll, fd) != 0) {
        free(c);
        return "cannot poll it";
    }
    c->poll.data = c;
    c->set = s;
    c->fd = fd;
    if (++s->next_id == 0)
        s->next_id = 1;
    c->id = s->next_id;
    c->uid = uid;
    c->pid = pid;
    c->user = u;
    c->refs = 1;
    c->up = (char *)c + off;
    conn_deadline(c, gemmd_now_ns() +
                         (uint64_t)(s->cfg->handshake_timeout_s * 1e9));
    c->next = s->all;
    if (s->all != NULL)
        s->all->prev = c;
    s->all = c;
    lsn_admitted(s->lsn, u);
    conn_out *o = conn_out_new(WIRE_HDR_LEN, false);
    if (o == NULL) {
        conn_close(c, LOG_ERR, "out of memory");
        return NULL;
    }
    memcpy(o->data, s->greeting, WIRE_HDR_LEN);
    conn_send(c, o);
    conn_poll(c);
    return NULL;
}

/* Closes connections past their deadlines (greeting, message, unread
 * output); returns the next deadline. See lsn_sweep_fn. */
static uint64_t conn_sweep(void *arg, uint64_t now)
{
    conn_set *s = arg;
    const gemmd_config *cfg = s->cfg;
    uint64_t send_ns = (uint64_t)(cfg->send_timeout_s * 1e9);
    uint64_t next = UINT64_MAX;
    char why[96];
    for (conn *c = s->all, *nx; c != NULL; c = nx) {
        nx = c->next;
        if (c->deadline_ns != 0 && now >= c->deadline_ns) {
            s->timed_out++;
            snprintf(why, sizeof(why), "%s not whole within %.3g s",
                     c->proto == NULL ? "greeting" : "message",
                     c->proto == NULL ? cfg->handshake_timeout_s
                                      : cfg->message_timeout_s);
            conn_close(c, LOG_INFO, why);
            continue;
        }
        if (c->out_head != NULL && send_ns != 0 &&
            now - c->out_since >= send_ns) {
            s->dropped++;
            snprintf(why, sizeof(why), "its replies were not read for %.3g s",
                     cfg->send_timeout_s);
            conn_close(c, LOG_NOTICE, why);
            continue;
        }
        if (c->deadline_ns != 0 && c->deadline_ns < next)
            next = c->deadline_ns;
        if (c->out_head != NULL && send_ns != 0 &&
            c->out_since + send_ns < next)
            next = c->out_since + send_ns;
    }
    return next;
}

void conn_set_init(conn_set *s, uv_loop_t *loop, const gemmd_config *cfg,
                   lsn_listener *lsn)
{
    s->loop = loop;
    s->cfg = cfg;
    s->lsn = lsn;
    pthread_mutex_init(&s->wmu, NULL);
    lsn_set_accept(lsn, on_accept, s);
    lsn_add_sweeper(lsn, conn_sweep, s);
}

void conn_set_greeting(conn_set *s, const uint8_t *greeting)
{
    s->greeting = greeting;
}

void conn_add_proto(conn_set *s, const conn_proto *p)
{
    if (s->nprotos < CONN_PROTO_MAX) {
        s->protos[s->nprotos++] = p;
        if (p->up_size > s->up_size)
            s->up_size = p->up_size;
    }
}

bool conn_flushed(const conn_set *s)
{
    for (const conn *c = s->all; c != NULL; c = c->next)
        if (c->out_head != NULL)
            return false;
    return true;
}

void conn_close_all(conn_set *s)
{
    while (s->all != NULL)
        conn_close(s->all, LOG_DEBUG, "gemmd is stopping");
}
