/*
 * fdchan.c: descriptor channels (memfds in with SCM_RIGHTS, tickets out)
 * and the ticket table; see fdchan.h.
 */
#include "fdchan.h"
#include "job.h"
#include "log.h"
#include "scm.h"
#include "wire.h"

#include <gemm/types.h>

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <unistd.h>

#define READS_PER_WAKE 16 /* messages taken from one channel at a time */

static fdc_ticket **ticket_link(fdc_table *t, uint64_t ticket)
{
    fdc_ticket **l = &t->buckets[ticket % FDC_BUCKETS];
    while (*l != NULL && (*l)->ticket != ticket)
        l = &(*l)->next;
    return l;
}

/* A descriptor held for user u (a ticket's or a queued one) goes. */
static void fd_release(fdc_table *t, gemmd_user *u)
{
    t->count--;
    if (u != NULL && u->fds > 0)
        u->fds--;
}

/* Takes k's loan, if any, off it (registered, or to be freed): its user
 * holds one loan fewer. */
static spare *loan_take(fdc_ticket *k)
{
    spare *s = k->loan;
    k->loan = NULL;
    if (s != NULL && k->user != NULL && k->user->loans > 0)
        k->user->loans--;
    return s;
}

static void ticket_drop(fdc_table *t, fdc_ticket **l)
{
    fdc_ticket *k = *l;
    *l = k->next;
    if (k->chan != NULL) {
        fdc_chan *ch = k->chan->up;
        if (ch->tickets > 0)
            ch->tickets--;
    }
    if (k->fd >= 0)
        close(k->fd);
    spares_free(loan_take(k)); /* a loan never registered */
    fd_release(t, k->user);
    free(k);
}

/* Stashes fd (already counted for c's user) under a fresh ticket of c's
 * uid. Returns GEMM_OK and the ticket, or an error (fd closed and
 * uncounted then). */
static int ticket_add(fdc_table *t, conn *c, int fd, uint64_t *out)
{
    fdc_chan *ch = c->up;
    fdc_ticket *k = NULL;
    int rv = GEMM_ERR_LIMIT;
    if (ch->tickets >= t->set->cfg->fd_tickets)
        goto fail;
    rv = GEMM_ERR_NOMEM;
    if ((k = calloc(1, sizeof(*k))) == NULL)
        goto fail;
    do {
        if (getrandom(&k->ticket, sizeof(k->ticket), 0) != sizeof(k->ticket)) {
            rv = GEMM_ERR_INTERNAL;
            goto fail;
        }
    } while (k->ticket == 0 || *ticket_link(t, k->ticket) != NULL);
    k->fd = fd;
    k->uid = c->uid;
    k->user = c->user;
    k->chan = c;
    k->expires_ns = gemmd_now_ns() + FDC_TICKET_TTL * 1000000000ull;
    lsn_arm(t->set->lsn, k->expires_ns);
    fdc_ticket **l = &t->buckets[k->ticket % FDC_BUCKETS];
    k->next = *l;
    *l = k;
    ch->tickets++;
    *out = k->ticket;
    return GEMM_OK;
fail:
    free(k);
    close(fd);
    fd_release(t, c->user);
    return rv;
}

/* Queues descriptor fd received on c, or closes it and queues a refusal
 * (-1) when c's user or the daemon holds its limit of descriptors. False
 * when c's queue is full (fd closed). */
static bool fd_queue(fdc_table *t, conn *c, int fd)
{
    fdc_chan *ch = c->up;
    gemmd_user *u = c->user;
    if (ch->nfdq >= FDC_FDQ_MAX) {
        close(fd);
        return false;
    }
    if (u->fds >= t->set->cfg->user_fds || t->count >= t->set->lsn->max_conns) {
        close(fd);
        t->refused++;
        fd = -1;
    } else {
        u->fds++;
        t->count++;
    }
    ch->fdq[ch->nfdq++] = fd;
    return true;
}

/* The message deadline of channel c: while a message is partly read or
 * descriptors wait for theirs, from the first byte (or descriptor) on. */
static void fd_deadline(conn *c)
{
    fdc_chan *ch = c->up;
    if (c->head_got == 0 && ch->nfdq == 0)
        c->deadline_ns = 0;
    else if (c->deadline_ns == 0)
        conn_deadline(c, gemmd_now_ns() +
                             (uint64_t)(c->set->cfg->message_timeout_s * 1e9));
}

int fdc_take(fdc_table *t, uint64_t ticket, uint64_t uid, spare **loan)
{
    *loan = NULL;
    if (ticket == 0)
        return -1;
    fdc_ticket **l = ticket_link(t, ticket);
    if (*l == NULL || (*l)->uid != uid)
        return -1;
    int fd = (*l)->fd;
    (*l)->fd = -1;
    *loan = loan_take(*l); /* its bytes count once registered */
    ticket_drop(t, l);     /* the descriptor is the caller's now */
    return fd;
}

/* Answers one descriptor message on c, passing fd (>= 0; closed once
 * sent) with it. */
static void fd_answer(conn *c, int status, uint64_t ticket, int fd)
{
    conn_out *o = conn_out_new(WIRE_FD_ANSWER_LEN, true);
    if (o == NULL) {
        if (fd >= 0)
            close(fd);
        conn_close(c, LOG_ERR, "out of memory for an answer");
        return;
    }
    wire_fd_answer_put(o->data, status, ticket);
    o->fd = fd;
    conn_send(c, o);
}

/* Answers LEND of mib MiB on c: a spare's memfd and a ticket holding it,
 * or GEMM_ERR_NO_BUFFER (none fits: the client makes its own memfd),
 * GEMM_ERR_UNSUPPORTED (no spares kept), GEMM_ERR_LIMIT (c's user holds
 * its descriptors or FDC_LOANS loans, or the size would pass its
 * --user-bytes). */
static void fd_lend(fdc_table *t, conn *c, uint32_t mib)
{
    gemmd_user *u = c->user;
    if (!t->lend) {
        fd_answer(c, GEMM_ERR_UNSUPPORTED, 0, -1);
        return;
    }
    if (u->fds >= t->set->cfg->user_fds || t->count >= t->set->lsn->max_conns ||
        u->loans >= FDC_LOANS ||
        u->bytes + ((uint64_t)mib << 20) > t->set->cfg->user_bytes) {
        t->refused++;
        fd_answer(c, GEMM_ERR_LIMIT, 0, -1);
        return;
    }
    spare *s = spares_take((size_t)mib << 20);
    if (s == NULL) {
        fd_answer(c, GEMM_ERR_NO_BUFFER, 0, -1);
        return;
    }
    int mine = dup(s->fd), theirs = dup(s->fd);
    if (mine < 0 || theirs < 0) {
        if (mine >= 0)
            close(mine);
        if (theirs >= 0)
            close(theirs);
        spares_free(s);
        fd_answer(c, GEMM_ERR_NOMEM, 0, -1);
        return;
    }
    u->fds++;
    t->count++;
    uint64_t ticket = 0;
    int rv = ticket_add(t, c, mine, &ticket); /* takes mine either way */
    if (rv != GEMM_OK) {
        close(theirs);
        spares_free(s);
        fd_answer(c, rv, 0, -1);
        return;
    }
    (*ticket_link(t, ticket))->loan = s;
    u->loans++;
    fd_answer(c, GEMM_OK, ticket, theirs);
}

/* Reads descriptor messages from c: at most READS_PER_WAKE. */
static void fd_read(void *arg, conn *c)
{
    fdc_table *t = arg;
    fdc_chan *ch = c->up;
    for (int taken = 0; taken < READS_PER_WAKE;) {
        if (c->closed || c->read_paused)
            return;
        int fds[FDC_FDQ_MAX];
        size_t nfds;
        bool overflow;
        ssize_t r = scm_recv(c->fd, c->head + c->head_got,
                             WIRE_FD_MSG_LEN - c->head_got, fds, FDC_FDQ_MAX,
                             &nfds, &overflow, MSG_DONTWAIT);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            return;
        for (size_t i = 0; i < nfds; i++)
            if (!fd_queue(t, c, fds[i]))
                overflow = true;
        if (r <= 0) {
            conn_close(c, LOG_DEBUG,
                       r == 0 ? "peer closed the channel" : strerror(errno));
            return;
        }
        t->set->bytes_in += (uint64_t)r;
        if (overflow) {
            conn_close(c, LOG_INFO, "too many descriptors at once");
            return;
        }
        c->head_got += (unsigned)r;
        fd_deadline(c);
        if (c->head_got < WIRE_FD_MSG_LEN)
            continue;
        c->head_got = 0;
        taken++;
        uint32_t op = wire_fd_msg_op(c->head);
        if (op == WIRE_FD_OP_LEND) {
            fd_deadline(c);
            conn_pending_add(c);
            fd_lend(t, c, wire_fd_msg_arg(c->head));
            continue;
        }
        if (op != WIRE_FD_OP_PASS) {
            conn_close(c, LOG_INFO, "unknown descriptor-channel message");
            return;
        }
        uint64_t ticket = 0;
        int status = GEMM_ERR_INVALID; /* no descriptor came with it */
        if (ch->nfdq > 0) {
            int fd = ch->fdq[0];
            memmove(ch->fdq, ch->fdq + 1, --ch->nfdq * sizeof(int));
            status = fd < 0 ? GEMM_ERR_LIMIT : ticket_add(t, c, fd, &ticket);
        }
        fd_deadline(c);
        conn_pending_add(c);
        fd_answer(c, status, ticket, -1);
    }
}

/* The channel closed: descriptors not yet matched go, and its tickets
 * expire within FDC_CLOSED_TTL (time enough for a RegisterBuffer already
 * on its way). */
static void fd_close(void *arg, conn *c)
{
    fdc_table *t = arg;
    fdc_chan *ch = c->up;
    for (unsigned i = 0; i < ch->nfdq; i++) {
        if (ch->fdq[i] >= 0) {
            close(ch->fdq[i]);
            fd_release(t, c->user);
        }
    }
    ch->nfdq = 0;
    uint64_t soon = gemmd_now_ns() + FDC_CLOSED_TTL * 1000000000ull;
    bool any = false;
    for (int b = 0; b < FDC_BUCKETS; b++) {
        for (fdc_ticket *k = t->buckets[b]; k != NULL; k = k->next) {
            if (k->chan == c) {
                k->chan = NULL;
                if (k->expires_ns > soon)
                    k->expires_ns = soon;
                any = true;
            }
        }
    }
    if (any)
        lsn_arm(t->set->lsn, soon);
}

/* Drops expired tickets; returns the next expiry. See lsn_sweep_fn. */
static uint64_t fd_sweep(void *arg, uint64_t now)
{
    fdc_table *t = arg;
    uint64_t next = UINT64_MAX;
    for (int b = 0; b < FDC_BUCKETS; b++) {
        fdc_ticket **l = &t->buckets[b];
        while (*l != NULL) {
            if (now >= (*l)->expires_ns) {
                ticket_drop(t, l);
                continue;
            }
            if ((*l)->expires_ns < next)
                next = (*l)->expires_ns;
            l = &(*l)->next;
        }
    }
    return next;
}

void fdc_init(fdc_table *t, conn_set *set)
{
    t->set = set;
    t->proto = (conn_proto){
        .hdr = wire_fd_hdr,
        .up_size = sizeof(fdc_chan),
        .on_read = fd_read,
        .on_close = fd_close,
        .arg = t,
    };
    conn_add_proto(set, &t->proto);
    lsn_add_sweeper(set->lsn, fd_sweep, t);
}

void fdc_close(fdc_table *t)
{
    for (int b = 0; b < FDC_BUCKETS; b++)
        while (t->buckets[b] != NULL)
            ticket_drop(t, &t->buckets[b]);
}
