/*
 * dispatch.c: what the loop thread does with each event: a request (Hello,
 * Status, RegisterBuffer, ReleaseBuffer, Gemm, TensorUpload, TensorFree,
 * ListKernels), a finished job, a connection arriving or leaving. Every
 * request ends in exactly one reply; a failure is a reply with a gemm_error
 * and a message, never a crash.
 */
#include "gemmd.h"
#include "log.h"
#include "request.h"

#include <gemm/gemm.h>

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- clients (one per nng pipe) ---- */

static gemmd_client **client_link(gemmd *d, uint32_t pipe)
{
    gemmd_client **l = &d->clients[pipe % GEMMD_CLIENT_BUCKETS];
    while (*l != NULL && (*l)->pipe != pipe)
        l = &(*l)->next;
    return l;
}

static gemmd_client *client_find(gemmd *d, uint32_t pipe)
{
    return *client_link(d, pipe);
}

static void client_add(gemmd *d, const gemmd_event *ev)
{
    gemmd_client **l = client_link(d, ev->pipe);
    if (*l != NULL)
        return;
    gemmd_client *c = calloc(1, sizeof(*c));
    if (c == NULL) {
        gemmd_log(LOG_ERR, "out of memory for client %u", ev->pipe);
        return; /* its requests will be refused: unknown connection */
    }
    c->pipe = ev->pipe;
    c->uid = ev->uid;
    c->has_uid = ev->has_uid;
    c->internal = ev->internal;
    c->listener = ev->listener;
    *l = c;
    if (!c->internal)
        d->nclients++;
    gemmd_log(LOG_DEBUG, "client %u connected (uid %llu)", c->pipe,
              (unsigned long long)c->uid);
}

static bool listener_retired(const gemmd *d, uint32_t id)
{
    for (uint32_t i = 0; i < d->nretired; i++)
        if ((uint32_t)nng_listener_id(d->retired[i]) == id)
            return true;
    return false;
}

static bool listener_in_use(const gemmd *d, uint32_t id)
{
    for (int i = 0; i < GEMMD_CLIENT_BUCKETS; i++)
        for (const gemmd_client *c = d->clients[i]; c != NULL; c = c->next)
            if (c->listener == id)
                return true;
    return false;
}

static void client_remove(gemmd *d, uint32_t pipe)
{
    gemmd_client **l = client_link(d, pipe);
    gemmd_client *c = *l;
    if (c == NULL)
        return;
    uint32_t n = reg_release_owner(&d->reg, pipe);
    gemmd_log(LOG_DEBUG, "client %u disconnected: %u buffers released", pipe,
              n);
    *l = c->next;
    if (!c->internal)
        d->nclients--;
    uint32_t listener = c->listener;
    free(c);
    if (listener_retired(d, listener) && !listener_in_use(d, listener))
        srv_retire_done(d, listener);
}

void gemmd_clients_free(gemmd *d)
{
    for (int i = 0; i < GEMMD_CLIENT_BUCKETS; i++) {
        while (d->clients[i] != NULL) {
            gemmd_client *c = d->clients[i];
            d->clients[i] = c->next;
            free(c);
        }
    }
    d->nclients = 0;
}

/* ---- replies ---- */

static void reply_error(gemmd *d, srv_slot *s, uint64_t id, int status,
                        const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));

static void reply_error(gemmd *d, srv_slot *s, uint64_t id, int status,
                        const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    Gemm__Reply r = GEMM__REPLY__INIT;
    r.has_version = true;
    r.version = GEMM_PROTOCOL_VERSION;
    r.has_id = true;
    r.id = id;
    r.has_status = true;
    r.status = status;
    r.message = msg;
    gemmd_log(LOG_DEBUG, "request %llu from client %u: %s: %s",
              (unsigned long long)id, s->pipe, gemm_strerror(status), msg);
    srv_reply(d, s, &r);
}

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

/* ---- requests ---- */

static void do_hello(gemmd *d, srv_slot *s, uint64_t id)
{
    Gemm__Reply r;
    Gemm__HelloReply h = GEMM__HELLO_REPLY__INIT;
    reply_init(&r, id);
    h.has_protocol_version = true;
    h.protocol_version = GEMM_PROTOCOL_VERSION;
    h.server_version = (char *)GEMM_VERSION_STRING;
    h.backend = (char *)d->be.ops->name;
    h.device = d->be.device;
    r.body_case = GEMM__REPLY__BODY_HELLO;
    r.hello = &h;
    srv_reply(d, s, &r);
}

static void do_status(gemmd *d, srv_slot *s, uint64_t id)
{
    Gemm__Reply r;
    Gemm__StatusReply st = GEMM__STATUS_REPLY__INIT;
    gemmd_latency lat;
    stats_latency(&d->stats, &lat);
    reply_init(&r, id);
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
#undef SET
    r.body_case = GEMM__REPLY__BODY_STATUS_REPLY;
    r.status_reply = &st;
    srv_reply(d, s, &r);
}

static void do_register(gemmd *d, srv_slot *s, uint64_t id,
                        const Gemm__RegisterBufferRequest *rq)
{
    gemmd_client *c = client_find(d, s->pipe);
    if (c == NULL) {
        reply_error(d, s, id, GEMM_ERR_CLOSED, "connection is closing");
        return;
    }
    if (!c->has_uid) {
        reply_error(d, s, id, GEMM_ERR_PERMISSION,
                    "the peer's uid is unknown: buffers can only be "
                    "registered over ipc://");
        return;
    }
    if (rq->name == NULL || !rq->has_size) {
        reply_error(d, s, id, GEMM_ERR_INVALID,
                    "RegisterBuffer needs a name and a size");
        return;
    }
    if (c->buffers >= d->cfg.client_buffers) {
        reply_error(d, s, id, GEMM_ERR_LIMIT,
                    "this connection already holds its limit of %u buffers",
                    d->cfg.client_buffers);
        return;
    }
    if (rq->size > d->cfg.client_bytes - c->bytes) {
        reply_error(d, s, id, GEMM_ERR_LIMIT,
                    "registering %llu more bytes would pass this "
                    "connection's limit of %llu",
                    (unsigned long long)rq->size,
                    (unsigned long long)d->cfg.client_bytes);
        return;
    }
    char msg[512];
    uint64_t bid;
    int rv = reg_register(&d->reg, s->pipe, c->uid, rq->name, rq->size, &bid,
                          msg, sizeof(msg));
    if (rv != GEMM_OK) {
        reply_error(d, s, id, rv, "%s", msg);
        return;
    }
    c->buffers++;
    c->bytes += rq->size;
    Gemm__Reply r;
    Gemm__RegisterBufferReply rb = GEMM__REGISTER_BUFFER_REPLY__INIT;
    reply_init(&r, id);
    rb.has_buffer_id = true;
    rb.buffer_id = bid;
    r.body_case = GEMM__REPLY__BODY_REGISTER_BUFFER;
    r.register_buffer = &rb;
    srv_reply(d, s, &r);
}

static void do_release(gemmd *d, srv_slot *s, uint64_t id,
                       const Gemm__ReleaseBufferRequest *rq)
{
    uint64_t bid = rq->has_buffer_id ? rq->buffer_id : 0;
    reg_buffer *b = reg_lookup(&d->reg, s->pipe, bid);
    size_t size = b != NULL ? b->size : 0;
    if (reg_release(&d->reg, s->pipe, bid) != GEMM_OK) {
        reply_error(d, s, id, GEMM_ERR_NO_BUFFER,
                    "buffer id %#llx is not registered on this connection",
                    (unsigned long long)bid);
        return;
    }
    gemmd_client *c = client_find(d, s->pipe);
    if (c != NULL && c->buffers > 0) {
        c->buffers--;
        c->bytes -= size;
    }
    Gemm__Reply r;
    Gemm__ReleaseBufferReply rr = GEMM__RELEASE_BUFFER_REPLY__INIT;
    reply_init(&r, id);
    r.body_case = GEMM__REPLY__BODY_RELEASE_BUFFER;
    r.release_buffer = &rr;
    srv_reply(d, s, &r);
}

struct lookup_arg {
    gemmd *d;
    uint32_t pipe;
};

static void *lookup(void *arg, uint64_t id, size_t *size)
{
    struct lookup_arg *la = arg;
    reg_buffer *b = reg_lookup(&la->d->reg, la->pipe, id);
    if (b == NULL)
        return NULL;
    *size = b->size;
    return b;
}

static void *tensor_lookup(void *arg, uint64_t id, val_tensor *out)
{
    struct lookup_arg *la = arg;
    reg_buffer *t = reg_find(&la->d->reg, la->pipe, id, REG_TENSOR);
    if (t == NULL)
        return NULL;
    out->rows = t->rows;
    out->cols = t->cols;
    out->ld = t->ld;
    out->dtype = t->dtype;
    return t;
}

/* Admission of work (a GEMM or an upload) from s's connection: it is
 * still known, the queue and the connection's share of it have room.
 * Returns the client, or NULL after replying with the error. */
static gemmd_client *admit(gemmd *d, srv_slot *s, uint64_t id)
{
    gemmd_client *c = client_find(d, s->pipe);
    if (c == NULL) {
        reply_error(d, s, id, GEMM_ERR_CLOSED, "connection is closing");
        return NULL;
    }
    if (d->inflight >= d->cfg.max_queue) {
        reply_error(d, s, id, GEMM_ERR_BUSY,
                    "queue full: %u requests queued or running", d->inflight);
        return NULL;
    }
    if (c->inflight >= d->cfg.client_inflight) {
        reply_error(d, s, id, GEMM_ERR_LIMIT,
                    "this connection already has its limit of %u requests "
                    "queued or running",
                    d->cfg.client_inflight);
        return NULL;
    }
    return c;
}

/* Hands job j (its buffers held) of client c to the scheduler; on failure
 * drops the references, frees j (and an upload's tensor) and replies. */
static void submit(gemmd *d, srv_slot *s, gemmd_client *c, gemmd_job *j,
                   uint64_t id)
{
    j->t_received = s->t_received;
    j->owner = s->pipe;
    j->slot = s;
    j->req_id = id;
    if (sched_submit(&d->sched, j) != GEMM_OK) {
        for (int i = 0; i < j->nbufs; i++)
            reg_put(&d->reg, j->bufs[i]);
        free(j->tensor);
        free(j);
        reply_error(d, s, id, GEMM_ERR_NOMEM, "out of memory for a queue");
        return;
    }
    d->inflight++;
    c->inflight++;
}

static void do_gemm(gemmd *d, srv_slot *s, uint64_t id,
                    const Gemm__GemmRequest *g)
{
    gemmd_client *c = admit(d, s, id);
    if (c == NULL)
        return;
    val_gemm v;
    req_gemm_desc(g, &v);
    val_limits lim = {.max_dim = d->cfg.max_dim,
                      .tensor_lookup = tensor_lookup};
    struct lookup_arg la = {d, s->pipe};
    val_resolved res;
    char msg[512];
    int rv = val_gemm_check(&v, &lim, lookup, &la, &res, msg, sizeof(msg));
    if (rv != GEMM_OK) {
        reply_error(d, s, id, rv, "%s", msg);
        return;
    }
    const val_matrix *ms[4] = {&res.a, &res.b, &res.d,
                               res.has_c ? &res.c : NULL};
    for (int i = 0; i < 4; i++) {
        if (ms[i] != NULL && reg_faulted(ms[i]->handle)) {
            reply_error(d, s, id, GEMM_ERR_BUFFER_FAULT,
                        "buffer %#llx was shrunk by its owner under the "
                        "mapping; its contents are lost: release it",
                        (unsigned long long)((reg_buffer *)ms[i]->handle)->id);
            return;
        }
    }
    gemmd_job *j = calloc(1, sizeof(*j));
    if (j == NULL) {
        reply_error(d, s, id, GEMM_ERR_NOMEM, "out of memory for a job");
        return;
    }
    if ((rv = job_fill_gemm(j, &v, &res)) != GEMM_OK) {
        reply_error(d, s, id, rv, "%s", j->msg);
        free(j);
        return;
    }
    if (d->be.ops->kernel_check != NULL &&
        (rv = d->be.ops->kernel_check(&d->be, j, msg, sizeof(msg))) !=
            GEMM_OK) {
        free(j);
        reply_error(d, s, id, rv, "%s", msg);
        return;
    }
    for (int i = 0; i < 4; i++) {
        if (ms[i] == NULL)
            continue;
        j->bufs[j->nbufs] = ms[i]->handle;
        reg_hold(j->bufs[j->nbufs++]);
    }
    if (g->has_timeout_ms && g->timeout_ms > 0)
        j->deadline_ns = s->t_received + (uint64_t)g->timeout_ms * 1000000u;
    submit(d, s, c, j, id);
}

static void do_upload(gemmd *d, srv_slot *s, uint64_t id,
                      const Gemm__TensorUploadRequest *rq)
{
    gemmd_client *c = admit(d, s, id);
    if (c == NULL)
        return;
    if (rq->src != NULL && rq->src->has_tensor_id && rq->src->tensor_id) {
        reply_error(d, s, id, GEMM_ERR_INVALID,
                    "a tensor is uploaded from a buffer, not a tensor");
        return;
    }
    val_gemm v; /* only to borrow the operand translation */
    Gemm__GemmRequest g = GEMM__GEMM_REQUEST__INIT;
    g.a = rq->src;
    req_gemm_desc(&g, &v);
    val_limits lim = {.max_dim = d->cfg.max_dim};
    struct lookup_arg la = {d, s->pipe};
    val_matrix src;
    char msg[512];
    uint64_t rows = rq->has_rows ? rq->rows : 0;
    uint64_t cols = rq->has_cols ? rq->cols : 0;
    int dtype = rq->has_dtype ? (int)rq->dtype : 0;
    int rv = val_operand_check("src", &v.a, rows, cols, dtype, &lim, lookup,
                               &la, &src, msg, sizeof(msg));
    if (rv != GEMM_OK) {
        reply_error(d, s, id, rv, "%s", msg);
        return;
    }
    gemmd_job *j = calloc(1, sizeof(*j));
    reg_buffer *t = calloc(1, sizeof(*t));
    if (j == NULL || t == NULL) {
        free(j);
        free(t);
        reply_error(d, s, id, GEMM_ERR_NOMEM, "out of memory for a job");
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
    submit(d, s, c, j, id);
}

/* ListKernels: the backend's catalog, answered at once. */
static void do_list_kernels(gemmd *d, srv_slot *s, uint64_t id)
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
        reply_error(d, s, id, GEMM_ERR_NOMEM,
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
    reply_init(&r, id);
    lk.n_kernels = filled;
    lk.kernels = ptrs;
    r.body_case = GEMM__REPLY__BODY_LIST_KERNELS;
    r.list_kernels = &lk;
    srv_reply(d, s, &r);
    free(infos);
    free(ptrs);
}

static void do_tensor_free(gemmd *d, srv_slot *s, uint64_t id,
                           const Gemm__TensorFreeRequest *rq)
{
    uint64_t tid = rq->has_tensor_id ? rq->tensor_id : 0;
    if (reg_release_kind(&d->reg, s->pipe, tid, REG_TENSOR) != GEMM_OK) {
        reply_error(d, s, id, GEMM_ERR_NO_BUFFER,
                    "tensor id %#llx is not resident on this connection",
                    (unsigned long long)tid);
        return;
    }
    Gemm__Reply r;
    Gemm__TensorFreeReply tf = GEMM__TENSOR_FREE_REPLY__INIT;
    reply_init(&r, id);
    r.body_case = GEMM__REPLY__BODY_TENSOR_FREE;
    r.tensor_free = &tf;
    srv_reply(d, s, &r);
}

static void handle_request(gemmd *d, srv_slot *s)
{
    gemmd_client *c = client_find(d, s->pipe);
    s->internal = c != NULL && c->internal;
    if (s->decode_status != GEMM_OK) {
        reply_error(d, s, 0, s->decode_status, "%s", s->decode_msg);
        return;
    }
    const Gemm__Request *rq = s->req;
    uint64_t id = rq->has_id ? rq->id : 0;
    char msg[256];
    int rv = req_check_envelope(rq, msg, sizeof(msg));
    if (rv != GEMM_OK) {
        reply_error(d, s, id, rv, "%s", msg);
        return;
    }
    bool work = rq->body_case == GEMM__REQUEST__BODY_GEMM ||
                rq->body_case == GEMM__REQUEST__BODY_REGISTER_BUFFER ||
                rq->body_case == GEMM__REQUEST__BODY_TENSOR_UPLOAD;
    if (d->draining && work) {
        reply_error(d, s, id, GEMM_ERR_SHUTDOWN,
                    "gemmd is shutting down and takes no new work");
        return;
    }
    switch (rq->body_case) {
    case GEMM__REQUEST__BODY_HELLO:
        if (rq->hello->client_name != NULL)
            gemmd_log(LOG_DEBUG, "hello from client %u (%.64s)", s->pipe,
                      rq->hello->client_name);
        do_hello(d, s, id);
        return;
    case GEMM__REQUEST__BODY_STATUS:
        do_status(d, s, id);
        return;
    case GEMM__REQUEST__BODY_REGISTER_BUFFER:
        do_register(d, s, id, rq->register_buffer);
        return;
    case GEMM__REQUEST__BODY_RELEASE_BUFFER:
        do_release(d, s, id, rq->release_buffer);
        return;
    case GEMM__REQUEST__BODY_GEMM:
        do_gemm(d, s, id, rq->gemm);
        return;
    case GEMM__REQUEST__BODY_TENSOR_UPLOAD:
        do_upload(d, s, id, rq->tensor_upload);
        return;
    case GEMM__REQUEST__BODY_TENSOR_FREE:
        do_tensor_free(d, s, id, rq->tensor_free);
        return;
    case GEMM__REQUEST__BODY_LIST_KERNELS:
        do_list_kernels(d, s, id);
        return;
    default:
        reply_error(d, s, id, GEMM_ERR_PROTOCOL,
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

/* Loop thread: an upload finished; the tensor joins the registry. */
static void finish_upload(gemmd *d, srv_slot *s, gemmd_job *j)
{
    reg_buffer *t = j->tensor;
    uint64_t tid = 0;
    int rv = j->status;
    if (rv == GEMM_OK && client_find(d, s->pipe) == NULL) {
        rv = GEMM_ERR_CLOSED; /* the client left meanwhile */
        snprintf(j->msg, sizeof(j->msg), "connection closed");
    }
    if (rv == GEMM_OK && (rv = reg_add_tensor(&d->reg, s->pipe, t, &tid))) {
        snprintf(j->msg, sizeof(j->msg), "cannot draw a tensor id");
    }
    if (rv != GEMM_OK) {
        if (t->pin != NULL) /* the backend made it: not kept */
            d->be.ops->tensor_free(&d->be, t->pin);
        free(t);
        reply_error(d, s, j->req_id, rv, "%s",
                    j->msg[0] ? j->msg : gemm_strerror(rv));
        free(j);
        return;
    }
    Gemm__Reply r;
    Gemm__TensorUploadReply u = GEMM__TENSOR_UPLOAD_REPLY__INIT;
    reply_init(&r, j->req_id);
    u.has_tensor_id = u.has_bytes = true;
    u.tensor_id = tid;
    u.bytes = t->size;
    r.body_case = GEMM__REPLY__BODY_TENSOR_UPLOAD;
    r.tensor_upload = &u;
    free(j);
    srv_reply(d, s, &r);
}

static void finish_job(gemmd *d, gemmd_job *j)
{
    srv_slot *s = j->slot;
    for (int i = 0; i < j->nbufs && j->status == GEMM_OK; i++) {
        if (reg_faulted(j->bufs[i])) {
            j->status = GEMM_ERR_BUFFER_FAULT;
            snprintf(j->msg, sizeof(j->msg),
                     "buffer %#llx was shrunk by its owner while the "
                     "request ran; the result is lost",
                     (unsigned long long)j->bufs[i]->id);
        }
    }
    for (int i = 0; i < j->nbufs; i++)
        reg_put(&d->reg, j->bufs[i]);
    d->inflight--;
    gemmd_client *c = client_find(d, s->pipe);
    if (c != NULL && c->inflight > 0)
        c->inflight--;
    uint64_t now = gemmd_now_ns();
    if (j->kind == JOB_UPLOAD) {
        finish_upload(d, s, j);
        return;
    }
    if (j->status != GEMM_OK) {
        reply_error(d, s, j->req_id, j->status, "%s",
                    j->msg[0] ? j->msg : gemm_strerror(j->status));
        free(j);
        return;
    }
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
    reply_init(&r, j->req_id);
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
    srv_reply(d, s, &r); /* packs g, which points into j */
    free(j);
}

void gemmd_dispatch(gemmd *d, gemmd_event *ev)
{
    switch (ev->kind) {
    case EV_REQUEST:
        handle_request(d, srv_slot_of(ev));
        break;
    case EV_DONE:
        finish_job(d, (gemmd_job *)((char *)ev - offsetof(gemmd_job, ev)));
        break;
    case EV_PIPE_ADD:
        client_add(d, ev);
        free(ev);
        break;
    case EV_PIPE_REM:
        client_remove(d, ev->pipe);
        free(ev);
        break;
    case EV_RELISTEN: {
        char msg[512];
        free(ev);
        if (d->draining)
            break;
        atomic_fetch_add(&d->watchdog.restarts, 1);
        uint32_t old = (uint32_t)nng_listener_id(d->listener);
        int rv = srv_relisten(d, msg, sizeof(msg));
        if (rv != GEMM_OK) {
            gemmd_log(LOG_ERR, "re-creating the listener failed: %s", msg);
            break;
        }
        gemmd_log(LOG_WARNING,
                  "new connections were not being served (nng 1.5.2 "
                  "listener wedge, nng#1518): listener re-created");
        if (!listener_in_use(d, old))
            srv_retire_done(d, old);
        break;
    }
    }
}

void gemmd_status_line(gemmd *d)
{
    gemmd_latency lat;
    stats_latency(&d->stats, &lat);
    gemmd_log(LOG_INFO,
              "stats: %u clients, %u buffers (%llu bytes), queue %u/%u, "
              "served %llu, failed %llu, latency p50 %.0f us p99 %.0f us",
              d->nclients, d->reg.count, (unsigned long long)d->reg.bytes,
              d->inflight, d->cfg.max_queue,
              (unsigned long long)d->stats.served,
              (unsigned long long)d->stats.failed, lat.p50_us, lat.p99_us);
}
