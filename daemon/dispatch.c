/*
 * dispatch.c: what the loop thread does with each request (Hello, Status,
 * RegisterBuffer, ReleaseBuffer, Gemm, TensorUpload, TensorFree,
 * ListKernels, Cancel), with each finished job, and with a connection that
 * closed. Every request ends in exactly one reply; a failure is a reply
 * with a gemm_error and a message, never a crash.
 *
 * Limits are checked here, per connection, per user (uid) and for the
 * whole daemon: registered buffers and bytes (resident tensors count as
 * bytes too), jobs queued or running, and the daemon's memory budget (the
 * scratch a job needs and tensors held in host memory), which is reserved
 * when a job is admitted and given back when it ends.
 */
#include "gemmd.h"
#include "log.h"
#include "request.h"

#include <gemm/gemm.h>

#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ---- replies ---- */

static void reply_init(Gemm__Reply *r, uint64_t id)
{
    gemm__reply__init(r);
    r->has_version = true;
    r->version = GEMM_PROTOCOL_VERSION;
    r->has_id = true;
    r->id = id;
    r->has_status = true;
    r->status = GEMM_OK;
}

static void reply_error(gemmd *d, srv_req *q, int status, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static void reply_error(gemmd *d, srv_req *q, int status, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    Gemm__Reply r;
    reply_init(&r, q->id);
    r.status = status;
    r.message = msg;
    gemmd_log(LOG_DEBUG, "request %llu on connection %u: %s: %s",
              (unsigned long long)q->id, q->conn->id, gemm_strerror(status),
              msg);
    srv_reply(d, q, &r);
}

/* ---- requests ---- */

static void do_hello(gemmd *d, srv_req *q)
{
    Gemm__Reply r;
    Gemm__HelloReply h = GEMM__HELLO_REPLY__INIT;
    reply_init(&r, q->id);
    h.has_protocol_version = true;
    h.protocol_version = GEMM_PROTOCOL_VERSION;
    h.server_version = (char *)GEMM_VERSION_STRING;
    h.backend = (char *)d->be.ops->name;
    h.device = d->be.device;
    r.body_case = GEMM__REPLY__BODY_HELLO;
    r.hello = &h;
    srv_reply(d, q, &r);
}

static void do_status(gemmd *d, srv_req *q)
{
    Gemm__Reply r;
    Gemm__StatusReply st = GEMM__STATUS_REPLY__INIT;
    gemmd_latency lat;
    stats_latency(&d->stats, &lat);
    reply_init(&r, q->id);
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
    SET(queue_depth, d->inflight);
    SET(queue_capacity, d->cfg.max_queue);
    SET(buffers, d->reg.count);
    SET(buffer_bytes, d->reg.bytes);
    SET(clients, d->nclients);
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
    double n = d->stats.stage_count ? (double)d->stats.stage_count : 1.0;
    SET(stage_queue_us, d->stats.ns_queue / n / 1e3);
    SET(stage_h2d_us, d->stats.ns_h2d / n / 1e3);
    SET(stage_kernel_us, d->stats.ns_kernel / n / 1e3);
    SET(stage_d2h_us, d->stats.ns_d2h / n / 1e3);
    SET(connections, d->nconns);
    SET(memory_budget, d->mem_budget);
    SET(memory_used, d->mem_used);
    SET(users, d->users_active);
#undef SET
    r.body_case = GEMM__REPLY__BODY_STATUS_REPLY;
    r.status_reply = &st;
    srv_reply(d, q, &r);
}

/* Whether bytes more fit under the connection's and the user's byte caps;
 * if not, replies LIMIT and returns false. */
static bool bytes_fit(gemmd *d, srv_req *q, uint64_t bytes, const char *what)
{
    srv_conn *c = q->conn;
    if (bytes > d->cfg.client_bytes - c->bytes) {
        reply_error(d, q, GEMM_ERR_LIMIT,
                    "%s of %llu bytes would pass this connection's limit of "
                    "%llu bytes (buffers and tensors; %llu in use)",
                    what, (unsigned long long)bytes,
                    (unsigned long long)d->cfg.client_bytes,
                    (unsigned long long)c->bytes);
        return false;
    }
    if (bytes > d->cfg.user_bytes - c->user->bytes) {
        reply_error(d, q, GEMM_ERR_LIMIT,
                    "%s of %llu bytes would pass this user's limit of %llu "
                    "bytes (buffers and tensors, all connections; %llu in "
                    "use)",
                    what, (unsigned long long)bytes,
                    (unsigned long long)d->cfg.user_bytes,
                    (unsigned long long)c->user->bytes);
        return false;
    }
    return true;
}

static void charge_bytes(srv_conn *c, int64_t bytes)
{
    c->bytes += (uint64_t)bytes;
    c->user->bytes += (uint64_t)bytes;
}

static void do_register(gemmd *d, srv_req *q,
                        const Gemm__RegisterBufferRequest *rq)
{
    srv_conn *c = q->conn;
    char msg[512];
    int rv = req_register_check(rq, msg, sizeof(msg));
    if (rv != GEMM_OK) {
        reply_error(d, q, rv, "%s", msg);
        return;
    }
    int fd = srv_ticket_take(d, rq->fd_ticket, c->uid);
    if (fd < 0) {
        reply_error(d, q, GEMM_ERR_INVALID,
                    "descriptor ticket %#llx is unknown, used, expired or "
                    "another user's",
                    (unsigned long long)rq->fd_ticket);
        return;
    }
    const char *cap = NULL;
    uint32_t n = 0;
    if (c->buffers >= d->cfg.client_buffers)
        cap = "this connection", n = d->cfg.client_buffers;
    else if (c->user->buffers >= d->cfg.user_buffers)
        cap = "this user", n = d->cfg.user_buffers;
    if (cap != NULL) {
        close(fd);
        reply_error(d, q, GEMM_ERR_LIMIT,
                    "%s already holds its limit of %u buffers", cap, n);
        return;
    }
    if (!bytes_fit(d, q, rq->size, "registering a buffer")) {
        close(fd);
        return;
    }
    uint64_t bid;
    rv = reg_register_fd(&d->reg, c->id, fd, rq->size, &bid, msg, sizeof(msg));
    if (rv != GEMM_OK) {
        reply_error(d, q, rv, "%s", msg);
        return;
    }
    c->buffers++;
    c->user->buffers++;
    charge_bytes(c, (int64_t)rq->size);
    Gemm__Reply r;
    Gemm__RegisterBufferReply rb = GEMM__REGISTER_BUFFER_REPLY__INIT;
    reply_init(&r, q->id);
    rb.has_buffer_id = true;
    rb.buffer_id = bid;
    r.body_case = GEMM__REPLY__BODY_REGISTER_BUFFER;
    r.register_buffer = &rb;
    srv_reply(d, q, &r);
}

/* Takes entry id of kind from q's connection and gives back what it
 * counted. GEMM_OK or GEMM_ERR_NO_BUFFER. */
static int release_entry(gemmd *d, srv_conn *c, uint64_t id, int kind)
{
    reg_buffer *b = reg_find(&d->reg, c->id, id, kind);
    if (b == NULL)
        return GEMM_ERR_NO_BUFFER;
    size_t size = b->size;
    uint64_t charge = b->charge;
    reg_release_kind(&d->reg, c->id, id, kind);
    charge_bytes(c, -(int64_t)size);
    if (kind == REG_BUFFER) {
        c->buffers--;
        c->user->buffers--;
    }
    d->mem_used -= charge;
    c->user->memory -= charge;
    return GEMM_OK;
}

static void do_release(gemmd *d, srv_req *q,
                       const Gemm__ReleaseBufferRequest *rq)
{
    uint64_t bid = rq->has_buffer_id ? rq->buffer_id : 0;
    if (release_entry(d, q->conn, bid, REG_BUFFER) != GEMM_OK) {
        reply_error(d, q, GEMM_ERR_NO_BUFFER,
                    "buffer id %#llx is not registered on this connection",
                    (unsigned long long)bid);
        return;
    }
    Gemm__Reply r;
    Gemm__ReleaseBufferReply rr = GEMM__RELEASE_BUFFER_REPLY__INIT;
    reply_init(&r, q->id);
    r.body_case = GEMM__REPLY__BODY_RELEASE_BUFFER;
    r.release_buffer = &rr;
    srv_reply(d, q, &r);
}

struct lookup_arg {
    gemmd *d;
    uint32_t owner;
};

static void *lookup(void *arg, uint64_t id, size_t *size, uint64_t *object)
{
    struct lookup_arg *la = arg;
    reg_buffer *b = reg_lookup(&la->d->reg, la->owner, id);
    if (b == NULL)
        return NULL;
    *size = b->size;
    *object = b->object;
    return b;
}

static void *tensor_lookup(void *arg, uint64_t id, val_tensor *out)
{
    struct lookup_arg *la = arg;
    reg_buffer *t = reg_find(&la->d->reg, la->owner, id, REG_TENSOR);
    if (t == NULL)
        return NULL;
    out->rows = t->rows;
    out->cols = t->cols;
    out->ld = t->ld;
    out->dtype = t->dtype;
    return t;
}

/* Admission of work (a GEMM or an upload) from q's connection that needs
 * mem bytes of the memory budget: the queue, the connection's and the
 * user's shares of it, and the budget have room. Replies with the error
 * and returns false otherwise. */
static bool admit(gemmd *d, srv_req *q, uint64_t mem)
{
    srv_conn *c = q->conn;
    gemmd_user *u = c->user;
    if (d->inflight >= d->cfg.max_queue) {
        reply_error(d, q, GEMM_ERR_BUSY,
                    "queue full: %u requests queued or running", d->inflight);
        return false;
    }
    if (c->inflight >= d->cfg.client_inflight) {
        reply_error(d, q, GEMM_ERR_LIMIT,
                    "this connection already has its limit of %u requests "
                    "queued or running",
                    d->cfg.client_inflight);
        return false;
    }
    if (d->cfg.user_inflight != 0 && u->inflight >= d->cfg.user_inflight) {
        reply_error(d, q, GEMM_ERR_LIMIT,
                    "this user already has its limit of %u requests queued "
                    "or running (all connections)",
                    d->cfg.user_inflight);
        return false;
    }
    /* fair share: with several users connected, none holds more than its
     * part of the queue, so one cannot fill it against the others */
    uint32_t n = d->users_active ? d->users_active : 1;
    uint32_t share = d->cfg.max_queue / n ? d->cfg.max_queue / n : 1;
    if (n > 1 && u->inflight >= share) {
        reply_error(d, q, GEMM_ERR_BUSY,
                    "this user holds its share of the queue (%u of %u, %u "
                    "users connected): try again later",
                    u->inflight, d->cfg.max_queue, d->users_active);
        return false;
    }
    if (mem > d->user_memory || mem > d->mem_budget) {
        reply_error(d, q, GEMM_ERR_LIMIT,
                    "this request needs %llu bytes of the daemon's memory, "
                    "more than a user's share (%llu of a %llu-byte budget)",
                    (unsigned long long)mem, (unsigned long long)d->user_memory,
                    (unsigned long long)d->mem_budget);
        return false;
    }
    if (mem > d->user_memory - u->memory || mem > d->mem_budget - d->mem_used) {
        reply_error(d, q, GEMM_ERR_BUSY,
                    "the daemon's memory budget is in use (needs %llu bytes; "
                    "this user holds %llu of %llu, all users %llu of %llu): "
                    "try again later",
                    (unsigned long long)mem, (unsigned long long)u->memory,
                    (unsigned long long)d->user_memory,
                    (unsigned long long)d->mem_used,
                    (unsigned long long)d->mem_budget);
        return false;
    }
    return true;
}

/* Hands job j (its buffers held) of q to the scheduler with mem bytes of
 * the budget; on failure drops the references, frees j (and an upload's
 * tensor) and replies. */
static void submit(gemmd *d, srv_req *q, gemmd_job *j, uint64_t mem)
{
    srv_conn *c = q->conn;
    j->t_received = q->t_received;
    j->owner = c->id;
    j->slot = q;
    j->req_id = q->id;
    j->mem = mem;
    if (sched_submit(&d->sched, j) != GEMM_OK) {
        for (int i = 0; i < j->nbufs; i++)
            reg_put(&d->reg, j->bufs[i]);
        free(j->tensor);
        free(j);
        reply_error(d, q, GEMM_ERR_NOMEM, "out of memory for a queue");
        return;
    }
    q->job = j;
    d->inflight++;
    c->inflight++;
    c->user->inflight++;
    d->mem_used += mem;
    c->user->memory += mem;
}

/* Gives back what an admitted job holds (queue places, budget, buffer
 * references). */
static void job_release(gemmd *d, gemmd_job *j)
{
    srv_req *q = j->slot;
    srv_conn *c = q->conn;
    for (int i = 0; i < j->nbufs; i++)
        reg_put(&d->reg, j->bufs[i]);
    j->nbufs = 0;
    d->inflight--;
    c->inflight--;
    c->user->inflight--;
    d->mem_used -= j->mem;
    c->user->memory -= j->mem;
    q->job = NULL;
}

static void do_gemm(gemmd *d, srv_req *q, const Gemm__GemmRequest *g)
{
    srv_conn *c = q->conn;
    val_gemm v;
    req_gemm_desc(g, &v);
    val_limits lim = {.max_dim = d->cfg.max_dim,
                      .tensor_lookup = tensor_lookup};
    struct lookup_arg la = {d, c->id};
    val_resolved res;
    char msg[512];
    int rv = val_gemm_check(&v, &lim, lookup, &la, &res, msg, sizeof(msg));
    if (rv != GEMM_OK) {
        reply_error(d, q, rv, "%s", msg);
        return;
    }
    const val_matrix *ms[4] = {&res.a, &res.b, &res.d,
                               res.has_c ? &res.c : NULL};
    gemmd_job *j = calloc(1, sizeof(*j));
    if (j == NULL) {
        reply_error(d, q, GEMM_ERR_NOMEM, "out of memory for a job");
        return;
    }
    if ((rv = job_fill_gemm(j, &v, &res)) != GEMM_OK) {
        reply_error(d, q, rv, "%s", j->msg);
        free(j);
        return;
    }
    if (d->be.ops->kernel_check != NULL &&
        (rv = d->be.ops->kernel_check(&d->be, j, msg, sizeof(msg))) !=
            GEMM_OK) {
        free(j);
        reply_error(d, q, rv, "%s", msg);
        return;
    }
    uint64_t mem =
        d->be.ops->job_memory != NULL ? d->be.ops->job_memory(&d->be, j) : 0;
    if (!admit(d, q, mem)) {
        free(j);
        return;
    }
    for (int i = 0; i < 4; i++) {
        if (ms[i] == NULL)
            continue;
        j->bufs[j->nbufs] = ms[i]->handle;
        reg_hold(j->bufs[j->nbufs++]);
    }
    if (g->has_timeout_ms && g->timeout_ms > 0)
        j->deadline_ns = q->t_received + (uint64_t)g->timeout_ms * 1000000u;
    submit(d, q, j, mem);
}

static void do_upload(gemmd *d, srv_req *q, const Gemm__TensorUploadRequest *rq)
{
    srv_conn *c = q->conn;
    if (rq->src != NULL && rq->src->has_tensor_id && rq->src->tensor_id) {
        reply_error(d, q, GEMM_ERR_INVALID,
                    "a tensor is uploaded from a buffer, not a tensor");
        return;
    }
    val_gemm v; /* only to borrow the operand translation */
    Gemm__GemmRequest g = GEMM__GEMM_REQUEST__INIT;
    g.a = rq->src;
    req_gemm_desc(&g, &v);
    val_limits lim = {.max_dim = d->cfg.max_dim};
    struct lookup_arg la = {d, c->id};
    val_matrix src;
    char msg[512];
    uint64_t rows = rq->has_rows ? rq->rows : 0;
    uint64_t cols = rq->has_cols ? rq->cols : 0;
    int dtype = rq->has_dtype ? (int)rq->dtype : 0;
    int rv = val_operand_check("src", &v.a, rows, cols, dtype, &lim, lookup,
                               &la, &src, msg, sizeof(msg));
    if (rv != GEMM_OK) {
        reply_error(d, q, rv, "%s", msg);
        return;
    }
    /* the tensor counts against the byte caps (and, held in host memory,
     * the budget) from now on; its copy's exact size is the backend's */
    uint64_t bytes = rows * cols * src.esize;
    uint64_t mem = d->be.host_tensors ? bytes : 0;
    if (!bytes_fit(d, q, bytes, "a resident tensor") || !admit(d, q, mem))
        return;
    gemmd_job *j = calloc(1, sizeof(*j));
    reg_buffer *t = calloc(1, sizeof(*t));
    if (j == NULL || t == NULL) {
        free(j);
        free(t);
        reply_error(d, q, GEMM_ERR_NOMEM, "out of memory for a job");
        return;
    }
    j->kind = JOB_UPLOAD;
    j->rows = t->rows = rows;
    j->cols = t->cols = cols;
    j->dtype = t->dtype = dtype;
    j->tensor = t;
    j->a = job_operand_ptr(&src);
    j->lda = src.ld;
    j->bufs[j->nbufs] = src.handle;
    reg_hold(j->bufs[j->nbufs++]);
    charge_bytes(c, (int64_t)bytes); /* given back if the upload fails */
    submit(d, q, j, mem);
    if (q->job == NULL)
        charge_bytes(c, -(int64_t)bytes);
}

/* ListKernels: the backend's catalog, answered at once. */
static void do_list_kernels(gemmd *d, srv_req *q)
{
    size_t n = 0;
    gemmd_kernel k;
    while (d->be.ops->kernel_at != NULL && d->be.ops->kernel_at(&d->be, n, &k))
        n++;
    Gemm__KernelInfo *infos = calloc(n ? n : 1, sizeof(*infos));
    Gemm__KernelInfo **ptrs = calloc(n ? n : 1, sizeof(*ptrs));
    if (infos == NULL || ptrs == NULL) {
        free(infos);
        free(ptrs);
        reply_error(d, q, GEMM_ERR_NOMEM, "out of memory for the kernel list");
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
    reply_init(&r, q->id);
    lk.n_kernels = filled;
    lk.kernels = ptrs;
    r.body_case = GEMM__REPLY__BODY_LIST_KERNELS;
    r.list_kernels = &lk;
    srv_reply(d, q, &r);
    free(infos);
    free(ptrs);
}

static void do_tensor_free(gemmd *d, srv_req *q,
                           const Gemm__TensorFreeRequest *rq)
{
    uint64_t tid = rq->has_tensor_id ? rq->tensor_id : 0;
    if (release_entry(d, q->conn, tid, REG_TENSOR) != GEMM_OK) {
        reply_error(d, q, GEMM_ERR_NO_BUFFER,
                    "tensor id %#llx is not resident on this connection",
                    (unsigned long long)tid);
        return;
    }
    Gemm__Reply r;
    Gemm__TensorFreeReply tf = GEMM__TENSOR_FREE_REPLY__INIT;
    reply_init(&r, q->id);
    r.body_case = GEMM__REPLY__BODY_TENSOR_FREE;
    r.tensor_free = &tf;
    srv_reply(d, q, &r);
}

/* Answers Cancel q with its target's outcome: not found, canceled before
 * it started, or the reply it got (r, or only its status). */
static void reply_cancel(gemmd *d, srv_req *q, bool found, bool canceled,
                         Gemm__Reply *target)
{
    Gemm__Reply r;
    Gemm__CancelReply cr = GEMM__CANCEL_REPLY__INIT;
    reply_init(&r, q->id);
    cr.has_found = cr.has_canceled = true;
    cr.found = found;
    cr.canceled = canceled;
    cr.reply = target;
    r.body_case = GEMM__REPLY__BODY_CANCEL;
    r.cancel = &cr;
    srv_reply(d, q, &r);
}

static void finish_job(gemmd *d, gemmd_job *j);

static void do_cancel(gemmd *d, srv_req *q, const Gemm__CancelRequest *rq)
{
    srv_conn *c = q->conn;
    uint64_t target = rq->has_request_id ? rq->request_id : 0;
    srv_req *t = c->reqs;
    while (t != NULL && (t == q || t->id != target || t->job == NULL))
        t = t->next;
    if (t != NULL) {
        if (t->cancel != NULL) {
            reply_error(d, q, GEMM_ERR_INVALID,
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
            finish_job(d, j);
            return;
        }
        t->cancel = q; /* answered when the running job finishes */
        return;
    }
    for (unsigned i = 0; i < SRV_RECENT_MAX; i++) {
        if (c->recent[i].id == target && target != 0) {
            Gemm__Reply r;
            reply_init(&r, target);
            r.status = c->recent[i].status;
            reply_cancel(d, q, true, false, &r);
            return;
        }
    }
    reply_cancel(d, q, false, false, NULL);
}

static int request_kind(const Gemm__Request *rq)
{
    if (rq == NULL)
        return MK_INVALID;
    switch (rq->body_case) {
    case GEMM__REQUEST__BODY_HELLO:
        return MK_HELLO;
    case GEMM__REQUEST__BODY_STATUS:
        return MK_STATUS;
    case GEMM__REQUEST__BODY_REGISTER_BUFFER:
        return MK_REGISTER;
    case GEMM__REQUEST__BODY_RELEASE_BUFFER:
        return MK_RELEASE;
    case GEMM__REQUEST__BODY_GEMM:
        return MK_GEMM;
    case GEMM__REQUEST__BODY_TENSOR_UPLOAD:
        return MK_UPLOAD;
    case GEMM__REQUEST__BODY_TENSOR_FREE:
        return MK_TENSOR_FREE;
    case GEMM__REQUEST__BODY_LIST_KERNELS:
        return MK_LIST_KERNELS;
    case GEMM__REQUEST__BODY_CANCEL:
        return MK_CANCEL;
    default:
        return MK_INVALID;
    }
}

void gemmd_dispatch(gemmd *d, srv_req *q)
{
    const Gemm__Request *rq = q->req;
    q->kind = request_kind(rq);
    if (q->decode_status != GEMM_OK) {
        reply_error(d, q, q->decode_status, "%s", q->decode_msg);
        return;
    }
    q->id = rq->has_id ? rq->id : 0;
    char msg[256];
    int rv = req_check_envelope(rq, msg, sizeof(msg));
    if (rv != GEMM_OK) {
        reply_error(d, q, rv, "%s", msg);
        return;
    }
    bool work =
        q->kind == MK_GEMM || q->kind == MK_REGISTER || q->kind == MK_UPLOAD;
    if (d->draining && work) {
        reply_error(d, q, GEMM_ERR_SHUTDOWN,
                    "gemmd is shutting down and takes no new work");
        return;
    }
    switch (rq->body_case) {
    case GEMM__REQUEST__BODY_HELLO:
        if (rq->hello->client_name != NULL)
            gemmd_log(LOG_DEBUG, "hello on connection %u: %.64s", q->conn->id,
                      rq->hello->client_name);
        do_hello(d, q);
        return;
    case GEMM__REQUEST__BODY_STATUS:
        do_status(d, q);
        return;
    case GEMM__REQUEST__BODY_REGISTER_BUFFER:
        do_register(d, q, rq->register_buffer);
        return;
    case GEMM__REQUEST__BODY_RELEASE_BUFFER:
        do_release(d, q, rq->release_buffer);
        return;
    case GEMM__REQUEST__BODY_GEMM:
        do_gemm(d, q, rq->gemm);
        return;
    case GEMM__REQUEST__BODY_TENSOR_UPLOAD:
        do_upload(d, q, rq->tensor_upload);
        return;
    case GEMM__REQUEST__BODY_TENSOR_FREE:
        do_tensor_free(d, q, rq->tensor_free);
        return;
    case GEMM__REQUEST__BODY_LIST_KERNELS:
        do_list_kernels(d, q);
        return;
    case GEMM__REQUEST__BODY_CANCEL:
        do_cancel(d, q, rq->cancel);
        return;
    default:
        reply_error(d, q, GEMM_ERR_PROTOCOL,
                    "request has no body (or one this gemmd does not "
                    "know)");
        return;
    }
}

/* Worker thread: hand the finished job back to the loop. */
void gemmd_job_done(void *arg, gemmd_job *job)
{
    gemmd *d = arg;
    job->ev.kind = EV_DONE;
    srv_push(d, &job->ev);
}

/* Replies r to the job's request and, when a Cancel waits for it, to the
 * Cancel with r inside. */
static void reply_job(gemmd *d, srv_req *q, Gemm__Reply *r, bool canceled)
{
    srv_req *cancel = q->cancel;
    srv_reply(d, q, r);
    if (cancel != NULL)
        reply_cancel(d, cancel, true, canceled, canceled ? NULL : r);
}

static void reply_job_error(gemmd *d, srv_req *q, gemmd_job *j)
{
    Gemm__Reply r;
    reply_init(&r, q->id);
    r.status = j->status;
    r.message = j->msg[0] ? j->msg : (char *)gemm_strerror(j->status);
    gemmd_log(LOG_DEBUG, "request %llu on connection %u: %s: %s",
              (unsigned long long)q->id, q->conn->id, gemm_strerror(j->status),
              r.message);
    reply_job(d, q, &r, j->canceled);
}

/* Loop thread: an upload finished; the tensor joins the registry. */
static void finish_upload(gemmd *d, srv_req *q, gemmd_job *j)
{
    srv_conn *c = q->conn;
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
            charge_bytes(c, -(int64_t)bytes);
        reply_job_error(d, q, j);
        free(j);
        return;
    }
    /* the tensor now holds its bytes (charged at admission) and, in host
     * memory, its part of the budget */
    t->charge = d->be.host_tensors ? bytes : 0;
    d->mem_used += t->charge;
    c->user->memory += t->charge;
    if (t->size != bytes) /* the backend's copy may be padded */
        charge_bytes(c, (int64_t)t->size - (int64_t)bytes);
    Gemm__Reply r;
    Gemm__TensorUploadReply u = GEMM__TENSOR_UPLOAD_REPLY__INIT;
    reply_init(&r, q->id);
    u.has_tensor_id = u.has_bytes = true;
    u.tensor_id = tid;
    u.bytes = t->size;
    r.body_case = GEMM__REPLY__BODY_TENSOR_UPLOAD;
    r.tensor_upload = &u;
    free(j);
    reply_job(d, q, &r, false);
}

static void finish_job(gemmd *d, gemmd_job *j)
{
    srv_req *q = j->slot;
    job_release(d, j);
    if (j->kind == JOB_UPLOAD) {
        finish_upload(d, q, j);
        return;
    }
    if (j->status != GEMM_OK) {
        reply_job_error(d, q, j);
        free(j);
        return;
    }
    uint64_t now = gemmd_now_ns();
    stats_record_latency(&d->stats, now - j->t_received);
    d->stats.gemm_flops += 2 * j->m * j->n * j->k;
    d->stats.stage_count++;
    d->stats.ns_queue += j->t_started - j->t_received;
    d->stats.ns_h2d += j->ns_h2d;
    d->stats.ns_d2h += j->ns_d2h;
    d->stats.ns_kernel +=
        j->ns_kernel ? j->ns_kernel : j->t_finished - j->t_started;
    Gemm__Reply r;
    Gemm__GemmReply g = GEMM__GEMM_REPLY__INIT;
    reply_init(&r, q->id);
    g.has_queued_us = g.has_compute_us = g.has_total_us = true;
    g.queued_us = (j->t_started - j->t_received) / 1000;
    g.compute_us = (j->t_finished - j->t_started) / 1000;
    g.total_us = (now - j->t_received) / 1000;
    if (j->ran[0] != '\0')
        g.kernel = j->ran;
    if (j->ns_kernel != 0) {
        g.has_kernel_ns = true;
        g.kernel_ns = j->ns_kernel;
    }
    r.body_case = GEMM__REPLY__BODY_GEMM;
    r.gemm = &g;
    reply_job(d, q, &r, false); /* packs g, which points into j */
    free(j);
}

void gemmd_on_event(gemmd *d, gemmd_event *ev)
{
    if (ev->kind == EV_DONE)
        finish_job(d, (gemmd_job *)((char *)ev - offsetof(gemmd_job, ev)));
}

void gemmd_conn_closed(gemmd *d, srv_conn *c)
{
    /* work not yet started is dropped: nobody waits for it */
    for (gemmd_job *j = sched_cancel_owner(&d->sched, c->id), *next; j;
         j = next) {
        next = j->next;
        d->metrics.jobs_canceled++;
        j->status = GEMM_ERR_CLOSED;
        snprintf(j->msg, sizeof(j->msg), "connection closed");
        j->t_started = j->t_finished = gemmd_now_ns();
        finish_job(d, j);
    }
    uint64_t charges;
    uint32_t n = reg_release_owner(&d->reg, c->id, &charges);
    gemmd_log(LOG_DEBUG, "client %u gone: %u buffers and tensors released",
              c->id, n);
    c->user->buffers -= c->buffers;
    c->user->bytes -= c->bytes;
    c->buffers = 0;
    c->bytes = 0;
    d->mem_used -= charges; /* tensors in host memory held budget */
    c->user->memory -= charges;
}

void gemmd_status_line(gemmd *d)
{
    gemmd_latency lat;
    stats_latency(&d->stats, &lat);
    gemmd_log(
        LOG_INFO,
        "stats: %u clients (%u connections), %u buffers (%llu bytes), "
        "queue %u/%u, memory %llu/%llu, served %llu, failed %llu, "
        "latency p50 %.0f us p99 %.0f us",
        d->nclients, d->nconns, d->reg.count, (unsigned long long)d->reg.bytes,
        d->inflight, d->cfg.max_queue, (unsigned long long)d->mem_used,
        (unsigned long long)d->mem_budget, (unsigned long long)d->stats.served,
        (unsigned long long)d->stats.failed, lat.p50_us, lat.p99_us);
}
