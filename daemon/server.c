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
        if (ev->kind == EV_PIPE_ADD || ev->kind == EV_PIPE_REM)
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
    if (r->status == GEMM_OK)
        d->stats.served++;
    else
        d->stats.failed++;
    size_t n = gemm__reply__get_packed_size(r);
    nng_msg *m;
    if (nng_msg_alloc(&m, n) != 0) {
        /* Cannot answer: drop this request; the client times out. */
        gemmd_log(LOG_ERR, "out of memory for a %zu-byte reply", n);
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
    if (what == NNG_PIPE_EV_ADD_PRE)
        ev->has_uid =
            nng_pipe_get_uint64(p, NNG_OPT_IPC_PEER_UID, &ev->uid) == 0;
    srv_push(d, ev);
}

/* Gives the socket file to cfg.socket_group so its members may connect. */
static int set_group(gemmd *d, char *msg, size_t len)
{
    const char *path = d->cfg.listen + strlen("ipc://");
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
    if ((rv = nng_listener_create(&d->listener, d->sock, d->cfg.listen)) !=
        0) {
        what = "create listener";
        goto fail;
    }
    rv = nng_listener_set_int(d->listener, NNG_OPT_IPC_PERMISSIONS,
                              (int)d->cfg.socket_mode);
    if (rv != 0) {
        what = "set socket permissions";
        goto fail;
    }
    if ((rv = nng_listener_start(d->listener, 0)) != 0) {
        what = "listen";
        goto fail;
    }
    if (d->cfg.socket_group[0] != '\0' && set_group(d, msg, len) != 0)
        return GEMM_ERR_PERMISSION;
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
    /* events left in the inbox (before the slots they live in go): pipe
     * events are ours to free */
    for (gemmd_event *ev = srv_take_inbox(d), *next; ev; ev = next) {
        next = ev->next;
        if (ev->kind == EV_PIPE_ADD || ev->kind == EV_PIPE_REM)
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
