/*
 * server.c: gemmd's nng side. A rep0 socket with cfg.contexts contexts, each
 * receiving one request at a time. The aio callbacks run on nng's threads:
 * they only decode the message and push it onto the inbox, waking the loop
 * with uv_async_send; the loop later hands a reply back to the same context.
 * Pipe (connection) events travel the same FIFO, so a connection's requests
 * are always seen after its arrival and before its departure.
 */
#include "gemmd.h"
#include "log.h"
#include "request.h"

#include <gemm/gemm.h>

#include <nng/protocol/reqrep0/rep.h>
#include <nng/transport/ipc/ipc.h>

#include <errno.h>
#include <grp.h>
#include <stddef.h>
#include <sys/stat.h>
#include <unistd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum {
    SLOT_RECV, /* nng_ctx_recv outstanding */
    SLOT_WORK, /* request with the loop or a backend */
    SLOT_SEND, /* nng_ctx_send outstanding */
};

srv_slot *srv_slot_of(gemmd_event *ev)
{
    return (srv_slot *)((char *)ev - offsetof(srv_slot, ev));
}

void srv_push(gemmd *d, gemmd_event *ev)
{
    ev->next = NULL;
    pthread_mutex_lock(&d->inbox_mu);
    if (d->inbox_closed) {
        pthread_mutex_unlock(&d->inbox_mu);
        if (ev->kind != EV_REQUEST && ev->kind != EV_DONE)
            free(ev);
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

static void arm_recv(srv_slot *s)
{
    s->state = SLOT_RECV;
    nng_ctx_recv(s->ctx, s->aio);
}

/* nng thread: a request arrived; decode it and hand it to the loop. */
static void on_recv(srv_slot *s)
{
    gemmd *d = s->d;
    int rv = nng_aio_result(s->aio);
    if (rv != 0) {
        if (rv != NNG_ECLOSED && rv != NNG_ECANCELED)
            arm_recv(s); /* transient (e.g. a pipe closed): go on */
        return;
    }
    nng_msg *m = nng_aio_get_msg(s->aio);
    nng_aio_set_msg(s->aio, NULL);
    s->t_received = gemmd_now_ns();
    s->pipe = nng_pipe_id(nng_msg_get_pipe(m));
    s->req = NULL;
    s->decode_status = GEMM_OK;
    s->decode_msg[0] = '\0';
    s->decode_status =
        req_decode(nng_msg_body(m), nng_msg_len(m), d->cfg.max_message_bytes,
                   &s->req, s->decode_msg, sizeof(s->decode_msg));
    nng_msg_free(m);
    s->state = SLOT_WORK;
    atomic_fetch_add(&d->busy_slots, 1);
    s->ev.kind = EV_REQUEST;
    srv_push(d, &s->ev);
}

static void on_sent(srv_slot *s)
{
    gemmd *d = s->d;
    int rv = nng_aio_result(s->aio);
    if (rv != 0) {
        /* the client went away, or we are closing: the message is ours */
        nng_msg_free(nng_aio_get_msg(s->aio));
        nng_aio_set_msg(s->aio, NULL);
    }
    atomic_fetch_sub(&d->sends_pending, 1);
    atomic_fetch_sub(&d->busy_slots, 1);
    if (rv != NNG_ECLOSED)
        arm_recv(s);
}

static void on_aio(void *arg)
{
    srv_slot *s = arg;
    if (s->state == SLOT_SEND)
        on_sent(s);
    else
        on_recv(s);
}

void srv_reply(gemmd *d, srv_slot *s, Gemm__Reply *r)
{
    if (s->req != NULL) {
        gemm__request__free_unpacked(s->req, NULL);
        s->req = NULL;
    }
    if (s->internal)
        ; /* the watchdog's probes are not traffic */
    else if (r->status == GEMM_OK)
        d->stats.served++;
    else
        d->stats.failed++;
    size_t n = gemm__reply__get_packed_size(r);
    nng_msg *m;
    if (nng_msg_alloc(&m, n) != 0) {
        /* Cannot answer: drop this request; the client times out. */
        gemmd_log(LOG_ERR, "out of memory for a %zu-byte reply", n);
        atomic_fetch_sub(&d->busy_slots, 1);
        arm_recv(s);
        return;
    }
    gemm__reply__pack(r, nng_msg_body(m));
    s->state = SLOT_SEND;
    atomic_fetch_add(&d->sends_pending, 1);
    nng_aio_set_msg(s->aio, m);
    nng_ctx_send(s->ctx, s->aio);
}

/* nng thread: a connection arrived (before any of its messages) or left. */
static void on_pipe(nng_pipe p, nng_pipe_ev what, void *arg)
{
    gemmd *d = arg;
    gemmd_event *ev = calloc(1, sizeof(*ev));
    if (ev == NULL) {
        gemmd_log(LOG_ERR, "out of memory for a connection event");
        if (what == NNG_PIPE_EV_ADD_PRE)
            nng_pipe_close(p); /* refuse rather than lose track of it */
        return;
    }
    ev->kind = (what == NNG_PIPE_EV_ADD_PRE) ? EV_PIPE_ADD : EV_PIPE_REM;
    ev->pipe = nng_pipe_id(p);
    if (what == NNG_PIPE_EV_ADD_PRE) {
        ev->has_uid =
            nng_pipe_get_uint64(p, NNG_OPT_IPC_PEER_UID, &ev->uid) == 0;
        uint64_t pid;
        ev->internal =
            nng_pipe_get_uint64(p, NNG_OPT_IPC_PEER_PID, &pid) == 0 &&
            pid == (uint64_t)getpid();
        ev->listener = (uint32_t)nng_listener_id(nng_pipe_listener(p));
    }
    srv_push(d, ev);
}

/* Gives the socket file at path to cfg.socket_group so its members may
 * connect. */
static int set_group(gemmd *d, const char *path, char *msg, size_t len)
{
    struct group *g = getgrnam(d->cfg.socket_group);
    if (g == NULL) {
        snprintf(msg, len, "no group named '%s'", d->cfg.socket_group);
        return -1;
    }
    if (chown(path, (uid_t)-1, g->gr_gid) != 0 ||
        chmod(path, d->cfg.socket_mode) != 0) {
        snprintf(msg, len, "cannot give %s to group %s: %s", path,
                 d->cfg.socket_group, strerror(errno));
        return -1;
    }
    return 0;
}

static const char *sock_path(const gemmd *d)
{
    return d->cfg.listen + strlen("ipc://");
}

/* Creates and starts an ipc listener on url (the socket file at path) with
 * the socket's mode and group; *out is the listener. */
static int start_listener(gemmd *d, const char *url, const char *path,
                          nng_listener *out, char *msg, size_t len)
{
    int rv;
    const char *what;
    nng_listener l;
    if ((rv = nng_listener_create(&l, d->sock, url)) != 0) {
        what = "create listener";
        goto fail;
    }
    rv = nng_listener_set_int(l, NNG_OPT_IPC_PERMISSIONS,
                              (int)d->cfg.socket_mode);
    if (rv != 0) {
        what = "set socket permissions";
        goto fail;
    }
    if ((rv = nng_listener_start(l, 0)) != 0) {
        what = "listen";
        goto fail;
    }
    if (d->cfg.socket_group[0] != '\0' && set_group(d, path, msg, len) != 0) {
        nng_listener_close(l);
        return GEMM_ERR_PERMISSION;
    }
    *out = l;
    return GEMM_OK;
fail:
    snprintf(msg, len, "cannot %s on %s: %s", what, url, nng_strerror(rv));
    return rv == NNG_EADDRINUSE ? GEMM_ERR_PERMISSION : GEMM_ERR_INTERNAL;
}

/*
 * The new listener is bound to a temporary name beside the socket and
 * renamed over it, so new clients reach it at once. Closing the wedged one
 * would drop its connections (and unlink the path), so it is retired
 * instead: it keeps serving its clients until the last one leaves.
 */
int srv_relisten(gemmd *d, char *msg, size_t len)
{
    char tmp[600], url[620];
    const char *path = sock_path(d);
    if (d->nretired == GEMMD_RETIRED_MAX) {
        snprintf(msg, len, "%d wedged listeners still hold connections",
                 GEMMD_RETIRED_MAX);
        return GEMM_ERR_LIMIT;
    }
    snprintf(tmp, sizeof(tmp), "%s.%u.%u", path, (unsigned)getpid(),
             d->relistens + 1);
    snprintf(url, sizeof(url), "ipc://%s", tmp);
    nng_listener l;
    int rv = start_listener(d, url, tmp, &l, msg, len);
    if (rv != GEMM_OK)
        return rv;
    if (rename(tmp, path) != 0) {
        snprintf(msg, len, "cannot rename %s to %s: %s", tmp, path,
                 strerror(errno));
        nng_listener_close(l);
        return GEMM_ERR_INTERNAL;
    }
    d->retired[d->nretired++] = d->listener;
    d->listener = l;
    d->relistens++;
    return GEMM_OK;
}

void srv_retire_done(gemmd *d, uint32_t id)
{
    for (uint32_t i = 0; i < d->nretired; i++) {
        if ((uint32_t)nng_listener_id(d->retired[i]) != id)
            continue;
        /* nng unlinks the path it bound on close, which is now the live
         * socket's: step the live one aside for that moment */
        char hold[600];
        const char *path = sock_path(d);
        snprintf(hold, sizeof(hold), "%s.hold.%u", path, (unsigned)getpid());
        bool moved = rename(path, hold) == 0;
        nng_listener_close(d->retired[i]);
        if (moved && rename(hold, path) != 0)
            gemmd_log(LOG_ERR, "cannot move %s back to %s: %s", hold, path,
                      strerror(errno));
        d->retired[i] = d->retired[--d->nretired];
        return;
    }
}

int srv_open(gemmd *d, char *msg, size_t len)
{
    int rv;
    const char *what = "";
    if ((rv = nng_rep0_open(&d->sock)) != 0) {
        what = "open socket";
        goto fail;
    }
    /* No unbounded allocation from a claimed length: nng drops anything
     * past twice the limit; between the two we answer TOO_LARGE. */
    size_t hard = d->cfg.max_message_bytes * 2;
    if ((rv = nng_socket_set_size(d->sock, NNG_OPT_RECVMAXSZ, hard)) != 0) {
        what = "set recv-size-max";
        goto fail;
    }
    nng_pipe_notify(d->sock, NNG_PIPE_EV_ADD_PRE, on_pipe, d);
    nng_pipe_notify(d->sock, NNG_PIPE_EV_REM_POST, on_pipe, d);

    d->nslots = d->cfg.contexts;
    d->slots = calloc(d->nslots, sizeof(*d->slots));
    if (d->slots == NULL) {
        rv = NNG_ENOMEM;
        what = "allocate contexts";
        goto fail;
    }
    for (uint32_t i = 0; i < d->nslots; i++) {
        srv_slot *s = &d->slots[i];
        s->d = d;
        if ((rv = nng_ctx_open(&s->ctx, d->sock)) != 0 ||
            (rv = nng_aio_alloc(&s->aio, on_aio, s)) != 0) {
            what = "open context";
            goto fail;
        }
    }
    if ((rv = start_listener(d, d->cfg.listen, sock_path(d), &d->listener, msg,
                             len)) != GEMM_OK)
        return rv;
    for (uint32_t i = 0; i < d->nslots; i++)
        arm_recv(&d->slots[i]);
    return GEMM_OK;

fail:
    snprintf(msg, len, "cannot %s on %s: %s", what, d->cfg.listen,
             nng_strerror(rv));
    return rv == NNG_EADDRINUSE ? GEMM_ERR_PERMISSION : GEMM_ERR_INTERNAL;
}

void srv_close(gemmd *d)
{
    pthread_mutex_lock(&d->inbox_mu);
    d->inbox_closed = true;
    pthread_mutex_unlock(&d->inbox_mu);
    nng_close(d->sock);
    if (d->relistens > 0) /* the live listener's own name was renamed */
        unlink(sock_path(d));
    /* events left in the inbox (before the slots they live in go): pipe
     * events are ours to free */
    for (gemmd_event *ev = srv_take_inbox(d), *next; ev; ev = next) {
        next = ev->next;
        if (ev->kind != EV_REQUEST && ev->kind != EV_DONE)
            free(ev);
    }
    for (uint32_t i = 0; d->slots != NULL && i < d->nslots; i++) {
        srv_slot *s = &d->slots[i];
        if (s->aio != NULL) {
            nng_aio_stop(s->aio); /* waits for a running callback */
            nng_msg *m = nng_aio_get_msg(s->aio);
            if (m != NULL)
                nng_msg_free(m);
            nng_aio_free(s->aio);
        }
        if (s->req != NULL)
            gemm__request__free_unpacked(s->req, NULL);
    }
    free(d->slots);
    d->slots = NULL;
}
