/*
 * dispatch.c: what the loop thread does with each request: one row per
 * request kind in the handler table below (the body case it answers, the
 * metrics kind it counts as, whether it takes new work, its handler), as
 * Redis keeps its command table. Adding a request kind is one row and its
 * handler. Handlers decode, validate, admit (admit.c) and enqueue; they
 * never block, and each ends its request in exactly one reply
 * (complete.c), at once or when its job finishes.
 */
#include "dispatch.h"
#include "admit.h"
#include "batch.h"
#include "blas3.h"
#include "complete.h"
#include "devstatus.h"
#include "log.h"
#include "pinner.h"
#include "request.h"
#include "spares.h"

#include <gemm/types.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ---- the handlers ---- */

static void do_hello(gemmd *d, sp_req *q, const Gemm__Request *req)
{
    if (req->hello->client_name != NULL)
        gemmd_log(LOG_DEBUG, "hello on connection %u: %.64s", q->conn->id,
                  req->hello->client_name);
    Gemm__Reply r;
    Gemm__HelloReply h = GEMM__HELLO_REPLY__INIT;
    complete_reply_init(&r, q->id);
    h.has_protocol_version = true;
    h.protocol_version = GEMM_PROTOCOL_VERSION;
    h.server_version = (char *)GEMM_VERSION_STRING;
    h.backend = (char *)d->be.ops->name;
    h.device = d->be.device;
    h.has_features = true;
    h.features = GEMM_FEATURE_FILL | GEMM_FEATURE_FILL_GEMM |
                 GEMM_FEATURE_DRAIN | (d->fdc.lend ? GEMM_FEATURE_LEND : 0u);
    r.body_case = GEMM__REPLY__BODY_HELLO;
    r.hello = &h;
    complete_reply(d, q, &r);
}

static void do_status(gemmd *d, sp_req *q, const Gemm__Request *req)
{
    (void)req;
    Gemm__Reply r;
    Gemm__StatusReply st = GEMM__STATUS_REPLY__INIT;
    gemmd_latency lat;
    stats_latency(&d->stats, &lat);
    complete_reply_init(&r, q->id);
#define SET(f, v)                                                              \
    do {                                                                       \
        st.has_##f = true;                                                     \
        st.f = (v);                                                            \
    } while (0)
    SET(uptime_s, (gemmd_now_ns() - d->stats.started_ns) / 1e9);
    st.backend = (char *)d->be.ops->name;
    st.device = d->be.device;
    SET(requests_served, d->stats.served);
    SET(requests_failed, d->stats.failed);
    SET(gemms_served, d->stats.gemms_served);
    SET(gemms_failed, d->stats.gemms_failed);
    SET(batches_served, d->stats.batches_served);
    SET(batch_problems, d->stats.batch_problems);
    st.n_routine_served = GEMMD_ROUTINES;
    st.routine_served = d->stats.routine_served;
    SET(queue_depth, d->inflight);
    SET(queue_capacity, d->cfg.max_queue);
    SET(buffers, d->reg.count);
    SET(buffer_bytes, d->reg.bytes);
    SET(clients, d->sp.nclients);
    SET(latency_p50_us, lat.p50_us);
    SET(latency_p90_us, lat.p90_us);
    SET(latency_p99_us, lat.p99_us);
    SET(latency_max_us, lat.max_us);
    SET(gemm_flops, d->stats.gemm_flops);
    SET(threads, d->be.threads);
    SET(tensors, d->reg.tensors);
    SET(tensor_bytes, d->reg.tensor_bytes);
    gemmd_backend_stats bs = {0};
    if (d->be.ops->stats != NULL)
        d->be.ops->stats(&d->be, &bs);
    SET(pinned_bytes, bs.pinned_bytes);
    SET(device_bytes, bs.device_bytes);
    SET(tmap_hits, bs.tmap_hits);
    SET(tmap_misses, bs.tmap_misses);
    pinner_stats ps;
    pinner_stats_get(&ps);
    SET(pins_pending, ps.pending);
    SET(pins_done, ps.done);
    SET(pins_failed, ps.failed);
    SET(pin_seconds, ps.seconds);
    SET(pin_bytes, ps.bytes);
    spare_stats sps;
    spares_stats_get(&sps);
    SET(spares_ready, sps.ready);
    SET(spare_bytes, sps.ready_bytes);
    SET(spares_lent, sps.lent);
    SET(spares_none, sps.none);
    SET(spares_made, sps.made);
    SET(spares_failed, sps.failed);
    double n = d->stats.stage_count ? (double)d->stats.stage_count : 1.0;
    SET(stage_queue_us, d->stats.ns_queue / n / 1e3);
    SET(stage_h2d_us, d->stats.ns_h2d / n / 1e3);
    SET(stage_kernel_us, d->stats.ns_kernel / n / 1e3);
    SET(stage_d2h_us, d->stats.ns_d2h / n / 1e3);
    SET(connections, d->lsn.nconns);
    SET(memory_budget, d->mem_budget);
    SET(memory_used, d->mem_used);
    SET(users, d->lsn.users_active);
#undef SET
    devstatus_msgs *dm = malloc(sizeof(*dm));
    if (dm != NULL)
        devstatus_reply(d, &st, dm);
    r.body_case = GEMM__REPLY__BODY_STATUS_REPLY;
    r.status_reply = &st;
    complete_reply(d, q, &r);
    free(dm);
}

static void do_register(gemmd *d, sp_req *q, const Gemm__Request *req)
{
    const Gemm__RegisterBufferRequest *rq = req->register_buffer;
    conn *c = q->conn;
    char msg[512];
    int rv = req_register_check(rq, msg, sizeof(msg));
    if (rv != GEMM_OK) {
        complete_error(d, q, rv, "%s", msg);
        return;
    }
    spare *loan;
    int fd = fdc_take(&d->fdc, rq->fd_ticket, c->uid, &loan);
    if (fd < 0) {
        complete_error(d, q, GEMM_ERR_INVALID,
                       "descriptor ticket %#llx is unknown, used, expired or "
                       "another user's",
                       (unsigned long long)rq->fd_ticket);
        return;
    }
    if ((rv = admit_buffer(d, c, msg, sizeof(msg))) != GEMM_OK ||
        (rv = admit_bytes(d, c, rq->size, "registering a buffer", msg,
                          sizeof(msg))) != GEMM_OK) {
        close(fd);
        spares_free(loan);
        complete_error(d, q, rv, "%s", msg);
        return;
    }
    uint64_t bid;
    if (loan != NULL) { /* the registry takes its mapping and pin */
        rv = reg_register_lent(&d->reg, c->id, fd, rq->size, loan->base,
                               loan->size, loan->pin, &bid, msg, sizeof(msg));
        spares_disown(loan);
    } else {
        rv = reg_register_fd(&d->reg, c->id, fd, rq->size, &bid, msg,
                             sizeof(msg));
    }
    if (rv != GEMM_OK) {
        complete_error(d, q, rv, "%s", msg);
        return;
    }
    admit_buffer_added(c, rq->size);
    Gemm__Reply r;
    Gemm__RegisterBufferReply rb = GEMM__REGISTER_BUFFER_REPLY__INIT;
    complete_reply_init(&r, q->id);
    rb.has_buffer_id = true;
    rb.buffer_id = bid;
    r.body_case = GEMM__REPLY__BODY_REGISTER_BUFFER;
    r.register_buffer = &rb;
    complete_reply(d, q, &r);
}

static void do_release(gemmd *d, sp_req *q, const Gemm__Request *req)
{
    const Gemm__ReleaseBufferRequest *rq = req->release_buffer;
    uint64_t bid = rq->has_buffer_id ? rq->buffer_id : 0;
    if (admit_release_entry(d, q->conn, bid, REG_BUFFER) != GEMM_OK) {
        complete_error(d, q, GEMM_ERR_NO_BUFFER,
                       "buffer id %#llx is not registered on this connection",
                       (unsigned long long)bid);
        return;
    }
    Gemm__Reply r;
    Gemm__ReleaseBufferReply rr = GEMM__RELEASE_BUFFER_REPLY__INIT;
    complete_reply_init(&r, q->id);
    r.body_case = GEMM__REPLY__BODY_RELEASE_BUFFER;
    r.release_buffer = &rr;
    complete_reply(d, q, &r);
}

/* Hands job j of q to the scheduler (see admit_submit); replies when it
 * cannot. */
static void submit(gemmd *d, sp_req *q, gemmd_job *j, uint64_t mem)
{
    if (admit_submit(d, q, j, mem) != GEMM_OK)
        complete_error(d, q, GEMM_ERR_NOMEM, "out of memory for a queue");
}

static void do_gemm(gemmd *d, sp_req *q, const Gemm__Request *req)
{
    const Gemm__GemmRequest *g = req->gemm;
    conn *c = q->conn;
    val_gemm v;
    req_gemm_desc(g, &v);
    val_limits lim = {.max_dim = d->cfg.max_dim,
                      .tensor_lookup = reg_scope_tensor};
    reg_scope la = {&d->reg, c->id};
    val_resolved res;
    char msg[512];
    int rv =
        val_gemm_check(&v, &lim, reg_scope_buffer, &la, &res, msg, sizeof(msg));
    if (rv != GEMM_OK) {
        complete_error(d, q, rv, "%s", msg);
        return;
    }
    gemmd_job *j = calloc(1, sizeof(*j));
    if (j == NULL) {
        complete_error(d, q, GEMM_ERR_NOMEM, "out of memory for a job");
        return;
    }
    if ((rv = job_fill_gemm(j, &v, &res)) != GEMM_OK) {
        complete_error(d, q, rv, "%s", j->msg);
        free(j);
        return;
    }
    if ((rv = admit_flops(d, j, msg, sizeof(msg))) != GEMM_OK ||
        (d->be.ops->kernel_check != NULL &&
         (rv = d->be.ops->kernel_check(&d->be, j, msg, sizeof(msg))) !=
             GEMM_OK)) {
        free(j);
        complete_error(d, q, rv, "%s", msg);
        return;
    }
    uint64_t mem =
        d->be.ops->job_memory != NULL ? d->be.ops->job_memory(&d->be, j) : 0;
    if ((rv = admit_work(d, c, mem, msg, sizeof(msg))) != GEMM_OK) {
        free(j);
        complete_error(d, q, rv, "%s", msg);
        return;
    }
    job_hold_gemm(j);
    job_set_timeout(j, q->t_received, g->has_timeout_ms, g->timeout_ms);
    TRACE_AT(q->tr, TR_ADMITTED);
    submit(d, q, j, mem);
}

static void do_upload(gemmd *d, sp_req *q, const Gemm__Request *req)
{
    const Gemm__TensorUploadRequest *rq = req->tensor_upload;
    conn *c = q->conn;
    if (rq->src != NULL && rq->src->has_tensor_id && rq->src->tensor_id) {
        complete_error(d, q, GEMM_ERR_INVALID,
                       "a tensor is uploaded from a buffer, not a tensor");
        return;
    }
    val_gemm v; /* only to borrow the operand translation */
    Gemm__GemmRequest g = GEMM__GEMM_REQUEST__INIT;
    g.a = rq->src;
    req_gemm_desc(&g, &v);
    val_limits lim = {.max_dim = d->cfg.max_dim};
    reg_scope la = {&d->reg, c->id};
    val_matrix src;
    char msg[512];
    uint64_t rows = rq->has_rows ? rq->rows : 0;
    uint64_t cols = rq->has_cols ? rq->cols : 0;
    int dtype = rq->has_dtype ? (int)rq->dtype : 0;
    int rv = val_operand_check("src", &v.a, rows, cols, dtype, &lim,
                               reg_scope_buffer, &la, &src, msg, sizeof(msg));
    if (rv != GEMM_OK) {
        complete_error(d, q, rv, "%s", msg);
        return;
    }
    /* the tensor counts against the byte caps (and, held in host memory,
     * the budget) from now on; its copy's exact size is the backend's */
    uint64_t bytes = rows * cols * src.esize;
    uint64_t mem = d->be.host_tensors ? bytes : 0;
    if ((rv = admit_bytes(d, c, bytes, "a resident tensor", msg,
                          sizeof(msg))) != GEMM_OK ||
        (rv = admit_work(d, c, mem, msg, sizeof(msg))) != GEMM_OK) {
        complete_error(d, q, rv, "%s", msg);
        return;
    }
    gemmd_job *j = calloc(1, sizeof(*j));
    reg_buffer *t = calloc(1, sizeof(*t));
    if (j == NULL || t == NULL) {
        free(j);
        free(t);
        complete_error(d, q, GEMM_ERR_NOMEM, "out of memory for a job");
        return;
    }
    j->kind = JOB_UPLOAD;
    j->rows = t->rows = rows;
    j->cols = t->cols = cols;
    j->dtype = t->dtype = dtype;
    j->tensor = t;
    j->a = job_operand_ptr(&src);
    j->lda = src.ld;
    const val_matrix *held = &src;
    job_hold(j, &held, 1);
    admit_charge_bytes(c, (int64_t)bytes); /* given back if it fails */
    if (admit_submit(d, q, j, mem) != GEMM_OK) {
        admit_charge_bytes(c, -(int64_t)bytes); /* before q is answered */
        complete_error(d, q, GEMM_ERR_NOMEM, "out of memory for a queue");
    }
}

/* ListKernels: the backend's catalog, answered at once. */
static void do_list_kernels(gemmd *d, sp_req *q, const Gemm__Request *req)
{
    (void)req;
    size_t n = 0;
    gemmd_kernel k;
    while (d->be.ops->kernel_at != NULL && d->be.ops->kernel_at(&d->be, n, &k))
        n++;
    Gemm__KernelInfo *infos = calloc(n ? n : 1, sizeof(*infos));
    Gemm__KernelInfo **ptrs = calloc(n ? n : 1, sizeof(*ptrs));
    if (infos == NULL || ptrs == NULL) {
        free(infos);
        free(ptrs);
        complete_error(d, q, GEMM_ERR_NOMEM,
                       "out of memory for the kernel list");
        return;
    }
    size_t filled = 0;
    for (size_t i = 0; i < n && d->be.ops->kernel_at(&d->be, i, &k); i++) {
        Gemm__KernelInfo *w = &infos[i];
        gemm__kernel_info__init(w);
        w->name = (char *)k.name;
        w->summary = (char *)(k.summary != NULL ? k.summary : "");
        w->has_ladder = w->has_reference = true;
        w->ladder = k.ladder;
        w->reference = k.reference;
        w->has_ab_types = w->has_cd_types = true;
        w->has_precisions = w->has_transposes = true;
        w->ab_types = k.ab_types;
        w->cd_types = k.cd_types;
        w->precisions = k.precisions;
        w->transposes = k.transposes;
        ptrs[filled++] = w;
    }
    Gemm__Reply r;
    Gemm__ListKernelsReply lk = GEMM__LIST_KERNELS_REPLY__INIT;
    complete_reply_init(&r, q->id);
    lk.n_kernels = filled;
    lk.kernels = ptrs;
    r.body_case = GEMM__REPLY__BODY_LIST_KERNELS;
    r.list_kernels = &lk;
    complete_reply(d, q, &r);
    free(infos);
    free(ptrs);
}

static void do_tensor_free(gemmd *d, sp_req *q, const Gemm__Request *req)
{
    const Gemm__TensorFreeRequest *rq = req->tensor_free;
    uint64_t tid = rq->has_tensor_id ? rq->tensor_id : 0;
    if (admit_release_entry(d, q->conn, tid, REG_TENSOR) != GEMM_OK) {
        complete_error(d, q, GEMM_ERR_NO_BUFFER,
                       "tensor id %#llx is not resident on this connection",
                       (unsigned long long)tid);
        return;
    }
    Gemm__Reply r;
    Gemm__TensorFreeReply tf = GEMM__TENSOR_FREE_REPLY__INIT;
    complete_reply_init(&r, q->id);
    r.body_case = GEMM__REPLY__BODY_TENSOR_FREE;
    r.tensor_free = &tf;
    complete_reply(d, q, &r);
}

static void do_cancel(gemmd *d, sp_req *q, const Gemm__Request *req)
{
    const Gemm__CancelRequest *rq = req->cancel;
    sp_client *cl = sp_client_of(q->conn);
    uint64_t target = rq->has_request_id ? rq->request_id : 0;
    sp_req *t = cl->reqs;
    while (t != NULL && (t == q || t->id != target || t->job == NULL))
        t = t->next;
    if (t != NULL) {
        if (t->cancel != NULL) {
            complete_error(d, q, GEMM_ERR_INVALID,
                           "request %llu already has a cancel waiting",
                           (unsigned long long)target);
            return;
        }
        gemmd_job *j = t->job;
        if (sched_cancel(&d->sched, j)) {
            /* not started: it ends here, having written nothing */
            d->metrics.jobs_canceled++;
            j->canceled = true;
            j->status = GEMM_ERR_TIMEOUT;
            snprintf(j->msg, sizeof(j->msg),
                     "canceled by the client before it started");
            j->t_started = j->t_finished = gemmd_now_ns();
            t->cancel = q;
            complete_job(d, j);
            return;
        }
        /* running: it stops at its next slice (slice.h); the Cancel is
         * answered with its reply then */
        t->cancel = q;
        job_request_stop(j, JOB_CANCELED);
        gemmd_log(LOG_DEBUG,
                  "request %llu on connection %u: cancel asked while it "
                  "runs; it stops at its next slice",
                  (unsigned long long)target, q->conn->id);
        return;
    }
    for (unsigned i = 0; i < SP_RECENT_MAX; i++) {
        const sp_recent *rc = &cl->recent[i];
        if (rc->id == target && target != 0) {
            /* it finished before the Cancel came: its reply again */
            Gemm__Reply r;
            Gemm__GemmReply g = GEMM__GEMM_REPLY__INIT;
            complete_reply_init(&r, target);
            r.status = rc->status;
            if (rc->gemm) {
                g.has_queued_us = g.has_compute_us = g.has_total_us = true;
                g.queued_us = rc->queued_us;
                g.compute_us = rc->compute_us;
                g.total_us = rc->total_us;
                g.has_kernel_ns = rc->kernel_ns != 0;
                g.kernel_ns = rc->kernel_ns;
                r.body_case = GEMM__REPLY__BODY_GEMM;
                r.gemm = &g;
            }
            complete_cancel_reply(d, q, true, false, &r);
            return;
        }
    }
    complete_cancel_reply(d, q, false, false, NULL);
}

/* ---- the table ---- */

/* One request kind. */
typedef struct dispatch_cmd {
    int kind;  /* enum metrics_kind */
    bool work; /* takes new work: refused while draining */
    void (*handler)(gemmd *d, sp_req *q, const Gemm__Request *req);
} dispatch_cmd;

/* Indexed by the request's body case. */
static const dispatch_cmd dispatch_table[] = {
    [GEMM__REQUEST__BODY_HELLO] = {.kind = MK_HELLO, .handler = do_hello},
    [GEMM__REQUEST__BODY_STATUS] = {.kind = MK_STATUS, .handler = do_status},
    [GEMM__REQUEST__BODY_REGISTER_BUFFER] = {.kind = MK_REGISTER,
                                             .work = true,
                                             .handler = do_register},
    [GEMM__REQUEST__BODY_RELEASE_BUFFER] = {.kind = MK_RELEASE,
                                            .handler = do_release},
    [GEMM__REQUEST__BODY_GEMM] = {.kind = MK_GEMM,
                                  .work = true,
                                  .handler = do_gemm},
    [GEMM__REQUEST__BODY_TENSOR_UPLOAD] = {.kind = MK_UPLOAD,
                                           .work = true,
                                           .handler = do_upload},
    [GEMM__REQUEST__BODY_TENSOR_FREE] = {.kind = MK_TENSOR_FREE,
                                         .handler = do_tensor_free},
    [GEMM__REQUEST__BODY_LIST_KERNELS] = {.kind = MK_LIST_KERNELS,
                                          .handler = do_list_kernels},
    [GEMM__REQUEST__BODY_CANCEL] = {.kind = MK_CANCEL, .handler = do_cancel},
    [GEMM__REQUEST__BODY_BLAS3] = {.kind = MK_BLAS3,
                                   .work = true,
                                   .handler = blas3_handle},
    [GEMM__REQUEST__BODY_BATCH] = {.kind = MK_BATCH,
                                   .work = true,
                                   .handler = batch_handle},
};

/* The row of rq's body, or NULL (no body, or one this gemmd does not
 * know). */
static const dispatch_cmd *dispatch_find(const Gemm__Request *rq)
{
    size_t n = sizeof(dispatch_table) / sizeof(dispatch_table[0]);
    if (rq == NULL || rq->body_case < 0 || (size_t)rq->body_case >= n ||
        dispatch_table[rq->body_case].handler == NULL)
        return NULL;
    return &dispatch_table[rq->body_case];
}

void dispatch_request(void *arg, sp_req *q)
{
    gemmd *d = arg;
    const Gemm__Request *rq = q->req;
    const dispatch_cmd *cmd = dispatch_find(rq);
    q->kind = cmd != NULL ? cmd->kind : MK_INVALID;
    /* a worker may have written a reply (complete_job_done) whose job is
     * not yet counted as done; it pushed that job before letting go of
     * the write lock, so after taking the lock the inbox holds every such
     * job: finish them first, and this request sees what its client saw */
    conn_wlock(&d->conns);
    conn_wunlock(&d->conns);
    loop_drain(&d->inbox);
    if (q->conn->closed) /* by what finished meanwhile */
        complete_error(d, q, GEMM_ERR_CLOSED, "connection closed");
    else if (q->decode_status != GEMM_OK) {
        complete_error(d, q, q->decode_status, "%s", q->decode_msg);
    } else {
        q->id = rq->has_id ? rq->id : 0;
        char msg[256];
        int rv = req_check_envelope(rq, msg, sizeof(msg));
        if (rv != GEMM_OK)
            complete_error(d, q, rv, "%s", msg);
        else if (cmd == NULL)
            complete_error(d, q, GEMM_ERR_PROTOCOL,
                           "request has no body (or one this gemmd does not "
                           "know)");
        else if (d->draining && cmd->work)
            complete_error(d, q, GEMM_ERR_SHUTDOWN,
                           "gemmd is shutting down and takes no new work");
        else {
            TRACE_AT(q->tr, TR_HANDLER);
            cmd->handler(d, q, rq);
        }
    }
    loop_spin(&d->inbox); /* its job may finish within --spin-us */
}
