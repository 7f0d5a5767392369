/*
 * complete.c: replies, finished jobs, Cancel's answers and closed
 * connections; see complete.h.
 */
#include "complete.h"
#include "admit.h"
#include "log.h"
#include "slice.h"

#include <gemm/types.h>

#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>

void complete_reply_init(Gemm__Reply *r, uint64_t id)
{
    gemm__reply__init(r);
    r->has_version = true;
    r->version = GEMM_PROTOCOL_VERSION;
    r->has_id = true;
    r->id = id;
    r->has_status = true;
    r->status = GEMM_OK;
}

void complete_reply(gemmd *d, sp_req *q, Gemm__Reply *r)
{
    conn *c = q->conn;
    int status = r->has_status ? r->status : GEMM_OK;
    metrics_observe(&d->metrics, q->kind, status,
                    gemmd_now_ns() - q->t_received);
    if (status == GEMM_OK)
        d->stats.served++;
    else
        d->stats.failed++;
    if (q->kind == MK_GEMM) {
        if (status == GEMM_OK)
            d->stats.gemms_served++;
        else
            d->stats.gemms_failed++;
    }
    if (c->user != NULL) {
        c->user->requests++;
        c->user->failed += status != GEMM_OK;
    }
    sp_reply(q, r, status);
}

void complete_error(gemmd *d, sp_req *q, int status, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    Gemm__Reply r;
    complete_reply_init(&r, q->id);
    r.status = status;
    r.message = msg;
    gemmd_log(LOG_DEBUG, "request %llu on connection %u: %s: %s",
              (unsigned long long)q->id, q->conn->id, gemm_strerror(status),
              msg);
    complete_reply(d, q, &r);
}

void complete_cancel_reply(gemmd *d, sp_req *q, bool found, bool canceled,
                           Gemm__Reply *target)
{
    Gemm__Reply r;
    Gemm__CancelReply cr = GEMM__CANCEL_REPLY__INIT;
    complete_reply_init(&r, q->id);
    cr.has_found = cr.has_canceled = true;
    cr.found = found;
    cr.canceled = canceled;
    cr.reply = target;
    r.body_case = GEMM__REPLY__BODY_CANCEL;
    r.cancel = &cr;
    complete_reply(d, q, &r);
}

/* Replies r to the job's request and, when a Cancel waits for it, to the
 * Cancel with r inside. */
static void reply_job(gemmd *d, sp_req *q, Gemm__Reply *r, bool canceled)
{
    sp_req *cancel = q->cancel;
    complete_reply(d, q, r);
    if (cancel != NULL)
        complete_cancel_reply(d, cancel, true, canceled, canceled ? NULL : r);
}

static void reply_job_error(gemmd *d, sp_req *q, gemmd_job *j)
{
    Gemm__Reply r;
    complete_reply_init(&r, q->id);
    r.status = j->status;
    r.message = j->msg[0] ? j->msg : (char *)gemm_strerror(j->status);
    gemmd_log(LOG_DEBUG, "request %llu on connection %u: %s: %s",
              (unsigned long long)q->id, q->conn->id, gemm_strerror(j->status),
              r.message);
    reply_job(d, q, &r, j->canceled);
}

/* An upload finished; the tensor joins the registry. */
static void finish_upload(gemmd *d, sp_req *q, gemmd_job *j)
{
    conn *c = q->conn;
    reg_buffer *t = j->tensor;
    uint64_t bytes = j->rows * j->cols * gemm_dtype_size(j->dtype);
    uint64_t tid = 0;
    int rv = j->status;
    if (rv == GEMM_OK && c->closed) {
        rv = GEMM_ERR_CLOSED; /* the client left meanwhile */
        snprintf(j->msg, sizeof(j->msg), "connection closed");
    }
    if (rv == GEMM_OK && (rv = reg_add_tensor(&d->reg, c->id, t, &tid)))
        snprintf(j->msg, sizeof(j->msg), "cannot draw a tensor id");
    if (rv != GEMM_OK) {
        if (t->pin != NULL) /* the backend made it: not kept */
            d->be.ops->tensor_free(&d->be, t->pin);
        free(t);
        j->status = rv;
        if (!c->closed) /* a closed connection gave its bytes back */
            admit_charge_bytes(c, -(int64_t)bytes);
        reply_job_error(d, q, j);
        free(j);
        return;
    }
    /* the tensor now holds its bytes (charged at admission) and, in host
     * memory, its part of the budget */
    admit_tensor_added(d, c, t, bytes);
    Gemm__Reply r;
    Gemm__TensorUploadReply u = GEMM__TENSOR_UPLOAD_REPLY__INIT;
    complete_reply_init(&r, q->id);
    u.has_tensor_id = u.has_bytes = true;
    u.tensor_id = tid;
    u.bytes = t->size;
    r.body_case = GEMM__REPLY__BODY_TENSOR_UPLOAD;
    r.tensor_upload = &u;
    free(j);
    reply_job(d, q, &r, false);
}

/* A batch finished (or was dropped): one reply with the whole's timings
 * and how many problems ran; its problems go. */
static void finish_batch(gemmd *d, sp_req *q, gemmd_job *j)
{
    uint64_t now = gemmd_now_ns();
    Gemm__Reply r;
    Gemm__GemmReply g = GEMM__GEMM_REPLY__INIT;
    Gemm__BatchReply br = GEMM__BATCH_REPLY__INIT;
    complete_reply_init(&r, q->id);
    if (j->status != GEMM_OK) {
        r.status = j->status;
        r.message = j->msg[0] ? j->msg : (char *)gemm_strerror(j->status);
        gemmd_log(LOG_DEBUG, "request %llu on connection %u: %s: %s",
                  (unsigned long long)q->id, q->conn->id,
                  gemm_strerror(j->status), r.message);
    } else {
        stats_record_latency(&d->stats, now - j->t_received);
        for (uint64_t i = 0; i < j->nproblems; i++)
            d->stats.gemm_flops += slice_flops(&j->problems[i]);
        d->stats.batches_served++;
        d->stats.batch_problems += j->nproblems;
    }
    g.has_queued_us = g.has_compute_us = g.has_total_us = true;
    g.queued_us = (j->t_started - j->t_received) / 1000;
    g.compute_us = (j->t_finished - j->t_started) / 1000;
    g.total_us = (now - j->t_received) / 1000;
    if (j->ran[0] != '\0')
        g.kernel = j->ran;
    g.has_kernel_ns = j->ns_kernel != 0;
    g.kernel_ns = j->ns_kernel;
    br.gemm = &g;
    br.has_problems = br.has_ran = true;
    br.problems = j->nproblems;
    br.ran = j->nran;
    r.body_case = GEMM__REPLY__BODY_BATCH;
    r.batch = &br;
    reply_job(d, q, &r, j->canceled);
    free(j->problems);
    free(j);
}

/* Fills r (body g) with the reply to GEMM or BLAS3 job j, finished with
 * GEMM_OK, to request id, its total time up to now; both point into j.
 * Any thread. */
static void gemm_reply(gemmd_job *j, uint64_t id, uint64_t now, Gemm__Reply *r,
                       Gemm__GemmReply *g)
{
    complete_reply_init(r, id);
    gemm__gemm_reply__init(g);
    g->has_queued_us = g->has_compute_us = g->has_total_us = true;
    g->queued_us = (j->t_started - j->t_received) / 1000;
    g->compute_us = (j->t_finished - j->t_started) / 1000;
    g->total_us = (now - j->t_received) / 1000;
    if (j->ran[0] != '\0')
        g->kernel = j->ran;
    if (j->ns_kernel != 0) {
        g->has_kernel_ns = true;
        g->kernel_ns = j->ns_kernel;
    }
    if (j->ran_moduli != 0) { /* through the Ozaki-II emulation */
        g->has_moduli = true;
        g->moduli = (uint32_t)j->ran_moduli;
    }
    if (j->kind == JOB_BLAS3) {
        r->body_case = GEMM__REPLY__BODY_BLAS3;
        r->blas3 = g;
    } else {
        r->body_case = GEMM__REPLY__BODY_GEMM;
        r->gemm = g;
    }
}

void complete_job(gemmd *d, gemmd_job *j)
{
    sp_req *q = j->slot;
    TRACE_SET(q->tr[TR_STARTED], j->t_started);
    TRACE_SET(q->tr[TR_COMPUTED], j->t_finished);
    TRACE_SET(q->tr[TR_PUSHED], j->t_pushed);
    if (j->direct == CONN_DIRECT_NONE)
        TRACE_AT(q->tr, TR_INBOX);
    admit_release_job(d, j);
    if (j->kind == JOB_UPLOAD) {
        finish_upload(d, q, j);
        return;
    }
    if (j->kind == JOB_BATCH) {
        finish_batch(d, q, j);
        return;
    }
    if (j->status != GEMM_OK) {
        reply_job_error(d, q, j);
        free(j);
        return;
    }
    /* a reply its worker wrote left then */
    uint64_t now =
        j->direct != CONN_DIRECT_NONE ? j->t_replied : gemmd_now_ns();
    stats_record_latency(&d->stats, now - j->t_received);
    d->stats.gemm_flops += 2 * j->m * j->n * j->k;
    d->stats.routine_served[j->kind == JOB_BLAS3 ? j->routine : 0]++;
    d->stats.stage_count++;
    d->stats.ns_queue += j->t_started - j->t_received;
    d->stats.ns_h2d += j->ns_h2d;
    d->stats.ns_d2h += j->ns_d2h;
    d->stats.ns_kernel +=
        j->ns_kernel ? j->ns_kernel : j->t_finished - j->t_started;
    Gemm__Reply r;
    Gemm__GemmReply g;
    gemm_reply(j, q->id, now, &r, &g);
    /* a reply its worker wrote is only counted here (and rebuilt for a
     * Cancel that waits for it) */
    q->direct = j->direct;
    q->direct_bytes = j->direct_bytes;
    q->direct_rest = j->direct_rest;
    reply_job(d, q, &r, false); /* packs g, which points into j */
    free(j);
}

void complete_event(gemmd *d, gemmd_event *ev)
{
    if (ev->kind == EV_DONE)
        complete_job(d, (gemmd_job *)((char *)ev - offsetof(gemmd_job, ev)));
}

/* Worker thread: writes the reply of GEMM or BLAS3 job j (finished OK)
 * to its client now, instead of after a hop to the loop, and hands j to
 * the loop for the rest (counters, references, a waiting Cancel). The
 * job is pushed before the write lock goes: the loop takes that lock
 * before it reads a request (dispatch_request), so a request sent after
 * this reply finds the job counted as done. */
static void reply_direct(gemmd *d, gemmd_job *j)
{
    sp_req *q = j->slot;
    Gemm__Reply r;
    Gemm__GemmReply g;
    j->t_replied = gemmd_now_ns();
    gemm_reply(j, j->req_id, j->t_replied, &r, &g);
    conn_out *o = sp_reply_pack(q, &r);
    TRACE_AT(q->tr, TR_PACKED);
    conn_wlock(&d->conns);
    int st = o != NULL ? conn_write_direct(q->conn, o, &j->direct_bytes)
                       : CONN_DIRECT_NONE;
    TRACE_AT(q->tr, TR_SENT);
    j->direct = st;
    j->direct_rest = st == CONN_DIRECT_PARTIAL ? o : NULL;
    loop_push(&d->inbox, &j->ev);
    conn_wunlock(&d->conns);
    if (st != CONN_DIRECT_PARTIAL)
        free(o);
}

void complete_job_done(void *arg, gemmd_job *job)
{
    gemmd *d = arg;
    job->ev.kind = EV_DONE;
    if (job->status == GEMM_OK &&
        (job->kind == JOB_GEMM || job->kind == JOB_BLAS3)) {
        reply_direct(d, job);
        return;
    }
    TRACE_SET(job->t_pushed, gemmd_now_ns());
    loop_push(&d->inbox, &job->ev);
}

void complete_closed(void *arg, conn *c)
{
    gemmd *d = arg;
    /* work running stops at its next slice (slice.h) */
    for (sp_req *q = sp_client_of(c)->reqs; q != NULL; q = q->next)
        if (q->job != NULL)
            job_request_stop(q->job, JOB_CLOSED);
    /* work not yet started is dropped: nobody waits for it */
    for (gemmd_job *j = sched_cancel_owner(&d->sched, c->id), *next; j;
         j = next) {
        next = j->next;
        d->metrics.jobs_canceled++;
        j->status = GEMM_ERR_CLOSED;
        snprintf(j->msg, sizeof(j->msg), "connection closed");
        j->t_started = j->t_finished = gemmd_now_ns();
        complete_job(d, j);
    }
    admit_release_owner(d, c);
}
