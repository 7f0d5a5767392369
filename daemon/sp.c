/*
 * sp.c: SP framing on a connection: the greeting, frames in, the request
 * backtrace, replies packed behind it; see sp.h.
 */
#include "sp.h"
#include "log.h"
#include "request.h"
#include "wire.h"

#include <gemm/types.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define READS_PER_WAKE 16 /* messages taken from one connection at a time */

_Static_assert(SP_BT_MAX <= CONN_KEEP_MAX,
               "an oversized message keeps its whole backtrace");

sp_client *sp_client_of(conn *c)
{
    return c->up;
}

/* The REQ backtrace at the start of data: 4-byte words up to and including
 * the first with the high bit set (the request id). Returns its length, or
 * 0 when there is none within SP_BT_MAX bytes. */
static unsigned backtrace_len(const uint8_t *data, uint64_t len)
{
    for (unsigned n = 0; n + 4 <= len && n + 4 <= SP_BT_MAX; n += 4)
        if (data[n] & (WIRE_SP_ID_FLAG >> 24))
            return n + 4;
    return 0;
}

/* A whole message: make the request and hand it up. For an oversized
 * message (refused with TOO_LARGE, body discarded) data holds its first
 * bytes only. */
static void sp_request(sp_server *s, conn *c, const uint8_t *data, uint64_t len,
                       bool oversized)
{
    const gemmd_config *cfg = s->set->cfg;
    sp_client *cl = sp_client_of(c);
    unsigned bt = backtrace_len(data, oversized ? c->keep_len : len);
    if (bt == 0) {
        conn_close(c, LOG_INFO, "a message without a request id");
        return;
    }
    sp_req *q = calloc(1, sizeof(*q));
    if (q == NULL) {
        conn_close(c, LOG_ERR, "out of memory for a request");
        return;
    }
    q->conn = c;
    conn_ref(c);
    memcpy(q->bt, data, bt);
    q->bt_len = bt;
    q->t_received = gemmd_now_ns();
    TRACE_SET(q->tr[TR_IO], c->t_io);
    TRACE_SET(q->tr[TR_READ], q->t_received);
    if (oversized) {
        q->decode_status = GEMM_ERR_TOO_LARGE;
        snprintf(q->decode_msg, sizeof(q->decode_msg),
                 "request of %llu bytes exceeds the limit of %zu",
                 (unsigned long long)(len - bt), cfg->max_message_bytes);
    } else {
        q->decode_status =
            req_decode(data + bt, len - bt, cfg->max_message_bytes, &q->req,
                       q->decode_msg, sizeof(q->decode_msg));
        TRACE_AT(q->tr, TR_DECODED);
    }
    q->next = cl->reqs;
    if (cl->reqs != NULL)
        cl->reqs->prev = q;
    cl->reqs = q;
    conn_pending_add(c);
    s->on_request(s->arg, q);
}

/* Reads SP frames from c: at most READS_PER_WAKE messages. */
static void sp_read(void *arg, conn *c)
{
    sp_server *s = arg;
    const gemmd_config *cfg = s->set->cfg;
    size_t max = cfg->max_message_bytes;
    for (int taken = 0; taken < READS_PER_WAKE;) {
        if (c->closed || c->read_paused)
            return;
        ssize_t r;
        if (c->msg == NULL && !c->skipping) {
            r = conn_read(c, c->head + c->head_got,
                          WIRE_SP_FRAME_HEAD - c->head_got);
            if (r <= 0)
                return;
            if (c->head_got == 0)
                conn_deadline(c, gemmd_now_ns() +
                                     (uint64_t)(cfg->message_timeout_s * 1e9));
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
                s->set->dropped++;
                conn_close(c, LOG_INFO, "a message over twice the size limit");
                return;
            }
            c->msg_len = len;
            c->msg_got = 0;
            if (len > max + SP_BT_MAX) {
                c->skipping = true;
                c->keep_len = 0;
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
            for (ssize_t i = 0; i < r && c->keep_len < SP_BT_MAX; i++)
                c->keep[c->keep_len++] = buf[i];
            c->msg_got += (uint64_t)r;
            if (c->msg_got == c->msg_len) {
                c->skipping = false;
                c->deadline_ns = 0;
                taken++;
                sp_request(s, c, c->keep, c->msg_len, true);
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
        sp_request(s, c, msg, c->msg_len, false);
        free(msg);
    }
}

void sp_reply(sp_req *q, const Gemm__Reply *r, int status)
{
    conn *c = q->conn;
    sp_client *cl = sp_client_of(c);
    if (q->prev != NULL)
        q->prev->next = q->next;
    else if (cl->reqs == q)
        cl->reqs = q->next;
    if (q->next != NULL)
        q->next->prev = q->prev;
    sp_recent *rc = &cl->recent[cl->recent_next];
    *rc = (sp_recent){.id = q->id, .status = status};
    const Gemm__GemmReply *g = r->body_case == GEMM__REPLY__BODY_GEMM ? r->gemm
                               : r->body_case == GEMM__REPLY__BODY_BATCH
                                   ? r->batch->gemm
                                   : NULL;
    if (g != NULL) { /* a batch's timings are a GEMM's */
        rc->gemm = true;
        rc->queued_us = g->queued_us;
        rc->compute_us = g->compute_us;
        rc->total_us = g->total_us;
        rc->kernel_ns = g->kernel_ns;
    }
    cl->recent_next = (cl->recent_next + 1) % SP_RECENT_MAX;
    if (c->closed) {
        free(q->direct_rest);
    } else if (q->direct == CONN_DIRECT_SENT) {
        conn_reply_written(c, q->direct_bytes, true);
        trace_keep(q->kind, q->tr);
    } else if (q->direct == CONN_DIRECT_PARTIAL) {
        conn_reply_written(c, q->direct_bytes, false);
        conn_send_rest(c, q->direct_rest);
        trace_keep(q->kind, q->tr);
    } else {
        conn_out *o = sp_reply_pack(q, r);
        if (o == NULL) {
            /* cannot answer: the client's request times out */
            gemmd_log(LOG_ERR, "out of memory for a %zu-byte reply",
                      gemm__reply__get_packed_size(r));
            conn_pending_drop(c);
        } else {
            TRACE_AT(q->tr, TR_PACKED);
            conn_send(c, o);
            TRACE_AT(q->tr, TR_SENT);
            trace_keep(q->kind, q->tr);
        }
    }
    if (q->req != NULL)
        gemm__request__free_unpacked(q->req, NULL);
    free(q);
    conn_unref(c);
}

conn_out *sp_reply_pack(const sp_req *q, const Gemm__Reply *r)
{
    size_t n = gemm__reply__get_packed_size(r);
    conn_out *o = conn_out_new(WIRE_SP_FRAME_HEAD + q->bt_len + n, true);
    if (o == NULL)
        return NULL;
    wire_sp_frame_put(o->data, q->bt_len + n);
    memcpy(o->data + WIRE_SP_FRAME_HEAD, q->bt, q->bt_len);
    gemm__reply__pack(r, o->data + WIRE_SP_FRAME_HEAD + q->bt_len);
    return o;
}

/* The peer greeted as an SP REQ client. */
static void sp_open(void *arg, conn *c)
{
    sp_server *s = arg;
    s->nclients++;
    gemmd_log(LOG_DEBUG, "client %u connected (uid %llu, pid %ld)", c->id,
              (unsigned long long)c->uid, (long)c->pid);
}

static void sp_close(void *arg, conn *c)
{
    sp_server *s = arg;
    s->nclients--;
    s->on_closed(s->arg, c);
}

void sp_init(sp_server *s, conn_set *set, sp_request_fn on_request,
             sp_closed_fn on_closed, void *arg)
{
    s->set = set;
    s->on_request = on_request;
    s->on_closed = on_closed;
    s->arg = arg;
    s->proto = (conn_proto){
        .hdr = wire_sp_req_hdr,
        .up_size = sizeof(sp_client),
        .on_open = sp_open,
        .on_read = sp_read,
        .on_close = sp_close,
        .arg = s,
    };
    conn_set_greeting(set, wire_sp_rep_hdr);
    conn_add_proto(set, &s->proto);
}
