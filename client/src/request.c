/*
 * request.c: one request's trip to gemmd and back. Each request gets its own
 * nng context and aio, so many threads (and many gemm_submit()s) may have
 * requests in flight on one client; REQ matches each reply to its context.
 * The envelope (protocol version, request id) is filled and checked here,
 * and Reply.status becomes the return value, with the daemon's message kept
 * in a thread-local buffer for gemm_last_error_message().
 */
#include "internal.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static _Thread_local char cli_errbuf[512];
static _Thread_local int64_t cli_errproblem = -1;

GEMM_API const char *gemm_last_error_message(void)
{
    return cli_errbuf;
}

GEMM_API int64_t gemm_last_error_problem(void)
{
    return cli_errproblem;
}

int cli_error(int err, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(cli_errbuf, sizeof(cli_errbuf), fmt, ap);
    va_end(ap);
    return err;
}

void cli_clear_error(void)
{
    cli_errbuf[0] = '\0';
    cli_errproblem = -1;
}

/* Maps an nng failure of request r to a gemm_error with a message. */
static int req_nng_error(struct gemm_request *r, int rv, const char *stage)
{
    gemm_client *c = r->client;
    bool lost;

    pthread_mutex_lock(&c->mtx);
    lost = c->lost;
    pthread_mutex_unlock(&c->mtx);

    if (lost || rv == NNG_ECLOSED || rv == NNG_ECONNRESET ||
        rv == NNG_ECONNSHUT)
        return cli_error(GEMM_ERR_CLOSED,
                         "%s: connection to gemmd at %s lost while %s "
                         "(gemmd exited or restarted?); buffers registered "
                         "on it are gone, reopen the client",
                         r->what, c->url, stage);
    switch (rv) {
    case NNG_ETIMEDOUT:
        return cli_error(GEMM_ERR_TIMEOUT,
                         "%s: timed out after %d ms %s (gemmd at %s, "
                         "request %" PRIu64 ")",
                         r->what, r->timeout_ms, stage, c->url, r->id);
    case NNG_ENOMEM:
        return cli_error(GEMM_ERR_NOMEM, "%s: out of memory while %s", r->what,
                         stage);
    case NNG_EMSGSIZE:
        return cli_error(GEMM_ERR_TOO_LARGE, "%s: message too large (%s)",
                         r->what, stage);
    default:
        return cli_error(GEMM_ERR_IO, "%s: %s while %s (gemmd at %s)", r->what,
                         nng_strerror(rv), stage, c->url);
    }
}

static void pending_add(gemm_client *c, struct gemm_request *r)
{
    r->prev = NULL;
    r->next = c->pending;
    if (c->pending != NULL)
        c->pending->prev = r;
    c->pending = r;
}

static void pending_remove(gemm_client *c, struct gemm_request *r)
{
    if (r->prev != NULL)
        r->prev->next = r->next;
    else if (c->pending == r)
        c->pending = r->next;
    if (r->next != NULL)
        r->next->prev = r->prev;
    r->prev = r->next = NULL;
}

/* Frees r's nng resources and takes it off the pending list. */
static void req_free(struct gemm_request *r)
{
    gemm_client *c = r->client;

    pthread_mutex_lock(&c->mtx);
    pending_remove(c, r);
    pthread_mutex_unlock(&c->mtx);
    nng_aio_free(r->aio); /* waits for a callback in progress */
    nng_ctx_close(r->ctx);
    pthread_cond_destroy(&r->cv);
    pthread_mutex_destroy(&r->mtx);
    free(r);
}

/*
 * Starts one aio operation (send or receive) unless the connection is known
 * lost. Runs under c->mtx so that the pipe-removal callback, which aborts
 * every pending aio under the same lock, cannot miss an operation started
 * after it ran. Returns 0 or an nng error.
 */
static int req_begin(struct gemm_request *r, bool send)
{
    gemm_client *c = r->client;

    pthread_mutex_lock(&c->mtx);
    if (c->lost) {
        pthread_mutex_unlock(&c->mtx);
        return NNG_ECLOSED;
    }
    nng_aio_set_timeout(r->aio, r->timeout_ms < 0 ? NNG_DURATION_INFINITE
                                                  : r->timeout_ms);
    atomic_store(&r->done, 0);
    if (send)
        nng_ctx_send(r->ctx, r->aio);
    else
        nng_ctx_recv(r->ctx, r->aio);
    pthread_mutex_unlock(&c->mtx);
    return 0;
}

/* cli_req_start() with a timeout of its own. */
static int req_start(gemm_client *c, Gemm__Request *req, const char *what,
                     int timeout_ms, struct gemm_request **out)
{
    struct gemm_request *r;
    nng_msg *msg = NULL;
    size_t len;
    int rv;

    if ((r = calloc(1, sizeof(*r))) == NULL)
        return cli_error(GEMM_ERR_NOMEM, "%s: out of memory", what);
    r->client = c;
    r->what = what;
    r->timeout_ms = timeout_ms;
    r->cancelable = req->body_case == GEMM__REQUEST__BODY_GEMM ||
                    req->body_case == GEMM__REQUEST__BODY_BLAS3 ||
                    req->body_case == GEMM__REQUEST__BODY_BATCH ||
                    req->body_case == GEMM__REQUEST__BODY_TENSOR_UPLOAD;
    r->id = atomic_fetch_add(&c->next_id, 1);

    req->has_version = true;
    req->version = GEMM_PROTOCOL_VERSION;
    req->has_id = true;
    req->id = r->id;

    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&r->cv, &ca);
    pthread_condattr_destroy(&ca);
    pthread_mutex_init(&r->mtx, NULL);
    if ((rv = nng_aio_alloc(&r->aio, cli_wait_done, r)) != 0) {
        pthread_cond_destroy(&r->cv);
        pthread_mutex_destroy(&r->mtx);
        free(r);
        return cli_error(GEMM_ERR_NOMEM, "%s: cannot allocate an aio: %s", what,
                         nng_strerror(rv));
    }
    if ((rv = nng_ctx_open(&r->ctx, c->sock)) != 0) {
        nng_aio_free(r->aio);
        pthread_cond_destroy(&r->cv);
        pthread_mutex_destroy(&r->mtx);
        free(r);
        return cli_error(rv == NNG_ECLOSED ? GEMM_ERR_CLOSED : GEMM_ERR_NOMEM,
                         "%s: cannot open an nng context: %s", what,
                         nng_strerror(rv));
    }
    pthread_mutex_lock(&c->mtx);
    pending_add(c, r);
    pthread_mutex_unlock(&c->mtx);

    len = gemm__request__get_packed_size(req);
    if ((rv = nng_msg_alloc(&msg, len)) != 0) {
        rv = req_nng_error(r, rv, "building the request");
        goto fail;
    }
    gemm__request__pack(req, nng_msg_body(msg));
    r->key = cli_wait_key(req, len);

    r->t0_ns = cli_now_ns();
    nng_aio_set_msg(r->aio, msg);
    if ((rv = req_begin(r, true)) == 0) {
        nng_aio_wait(r->aio);
        rv = nng_aio_result(r->aio);
    }
    if (rv != 0) {
        /* On a failed send the message is still ours. */
        if ((msg = nng_aio_get_msg(r->aio)) != NULL)
            nng_msg_free(msg);
        nng_aio_set_msg(r->aio, NULL);
        rv = req_nng_error(r, rv, "sending");
        goto fail;
    }
    if ((rv = req_begin(r, false)) != 0) {
        rv = req_nng_error(r, rv, "waiting for the reply");
        goto fail;
    }
    *out = r;
    return GEMM_OK;

fail:
    req_free(r);
    return rv;
}

int cli_req_start(gemm_client *c, Gemm__Request *req, const char *what,
                  struct gemm_request **out)
{
    return req_start(c, req, what, atomic_load(&c->timeout_ms), out);
}

/* How long a Cancel may wait at least for a request that already started
 * (otherwise as long as the request's own timeout again). */
#define CLI_CANCEL_MIN_MS 1000

/*
 * r (a GEMM or an upload) timed out: asks the daemon to cancel it and
 * returns the outcome: TIMEOUT when it was dropped before it started (it
 * wrote nothing), else its own reply (*out on GEMM_OK), or ABANDONED when
 * the daemon does not tell. Frees r.
 */
static int req_cancel(struct gemm_request *r, Gemm__Reply **out,
                      uint64_t *rtt_us)
{
    gemm_client *c = r->client;
    Gemm__Request req = GEMM__REQUEST__INIT;
    Gemm__CancelRequest cq = GEMM__CANCEL_REQUEST__INIT;
    struct gemm_request *cr;
    Gemm__Reply *rep = NULL, *inner;
    const char *what = r->what;
    uint64_t id = r->id;
    int waited = r->timeout_ms;
    int rv;

    cq.has_request_id = true;
    cq.request_id = id;
    req.body_case = GEMM__REQUEST__BODY_CANCEL;
    req.cancel = &cq;
    rv =
        req_start(c, &req, "cancel",
                  waited > CLI_CANCEL_MIN_MS ? waited : CLI_CANCEL_MIN_MS, &cr);
    if (rtt_us != NULL)
        *rtt_us = (cli_now_ns() - r->t0_ns) / 1000u;
    req_free(r); /* a late reply to r is dropped by nng */
    if (rv == GEMM_OK)
        rv = cli_req_finish(cr, &rep, NULL);
    if (rv == GEMM_ERR_CLOSED)
        return rv;
    if (rv != GEMM_OK || rep->body_case != GEMM__REPLY__BODY_CANCEL ||
        !rep->cancel->found) {
        if (rep != NULL)
            gemm__reply__free_unpacked(rep, NULL);
        return cli_error(GEMM_ERR_ABANDONED,
                         "%s: no reply within %d ms, and gemmd at %s did not "
                         "confirm a cancel in as long again (request "
                         "%" PRIu64 "): it may still run and write its "
                         "output",
                         what, waited, c->url, id);
    }
    if (rep->cancel->canceled) {
        gemm__reply__free_unpacked(rep, NULL);
        return cli_error(GEMM_ERR_TIMEOUT,
                         "%s: not started within %d ms; canceled (nothing "
                         "was written)",
                         what, waited);
    }
    inner = rep->cancel->reply;
    rep->cancel->reply = NULL;
    gemm__reply__free_unpacked(rep, NULL);
    if (inner == NULL)
        return cli_error(GEMM_ERR_ABANDONED,
                         "%s: gemmd at %s gave no outcome for request "
                         "%" PRIu64,
                         what, c->url, id);
    if (inner->has_status && inner->status != GEMM_OK) {
        rv = inner->status;
        cli_error(rv, "%s",
                  inner->message != NULL && inner->message[0]
                      ? inner->message
                      : gemm_strerror(rv));
        gemm__reply__free_unpacked(inner, NULL);
        return rv;
    }
    *out = inner; /* it ran to the end after all: its own reply */
    return GEMM_OK;
}

int cli_req_finish(struct gemm_request *r, Gemm__Reply **out, uint64_t *rtt_us)
{
    gemm_client *c = r->client;
    Gemm__Reply *rep = NULL;
    nng_msg *msg;
    int rv;

    cli_wait_near(r);
    nng_aio_wait(r->aio);
    if ((rv = nng_aio_result(r->aio)) != 0) {
        if (rv == NNG_ETIMEDOUT && r->cancelable && !c->lost)
            return req_cancel(r, out, rtt_us);
        rv = req_nng_error(r, rv, "waiting for the reply");
        goto fail;
    }
    const uint64_t rtt = (cli_now_ns() - r->t0_ns) / 1000u;
    if (rtt_us != NULL)
        *rtt_us = rtt;
    cli_wait_learn(c, r->key, rtt);
    msg = nng_aio_get_msg(r->aio);
    nng_aio_set_msg(r->aio, NULL);
    rep = gemm__reply__unpack(NULL, nng_msg_len(msg), nng_msg_body(msg));
    nng_msg_free(msg);
    if (rep == NULL) {
        rv = cli_error(GEMM_ERR_PROTOCOL,
                       "%s: undecodable reply from gemmd at %s", r->what,
                       c->url);
        goto fail;
    }
    if (rep->has_status && rep->status == GEMM_ERR_VERSION) {
        rv = cli_error(GEMM_ERR_VERSION,
                       "%s: gemmd at %s speaks protocol version %u, this "
                       "library speaks %d: %s",
                       r->what, c->url, rep->has_version ? rep->version : 0,
                       GEMM_PROTOCOL_VERSION, rep->message ? rep->message : "");
        goto fail;
    }
    if (!rep->has_version || rep->version != GEMM_PROTOCOL_VERSION) {
        rv = cli_error(GEMM_ERR_VERSION,
                       "%s: reply from gemmd at %s has protocol version %u, "
                       "expected %d",
                       r->what, c->url, rep->has_version ? rep->version : 0,
                       GEMM_PROTOCOL_VERSION);
        goto fail;
    }
    if (!rep->has_id || rep->id != r->id) {
        rv = cli_error(GEMM_ERR_PROTOCOL,
                       "%s: reply id %" PRIu64 " does not match request id "
                       "%" PRIu64,
                       r->what, rep->has_id ? rep->id : 0, r->id);
        goto fail;
    }
    if (rep->has_status && rep->status != GEMM_OK) {
        rv = rep->status;
        /* a refused batch names its bad problems, the first one first */
        if (rep->body_case == GEMM__REPLY__BODY_BATCH &&
            rep->batch->n_errors > 0 && rep->batch->errors[0]->has_index &&
            rep->batch->errors[0]->index <= INT64_MAX)
            cli_errproblem = (int64_t)rep->batch->errors[0]->index;
        if (rep->message != NULL && rep->message[0] != '\0')
            cli_error(rv, "%s", rep->message);
        else
            cli_error(rv, "%s: %s", r->what, gemm_strerror(rv));
        goto fail;
    }
    req_free(r);
    *out = rep;
    return GEMM_OK;

fail:
    if (rep != NULL)
        gemm__reply__free_unpacked(rep, NULL);
    req_free(r);
    return rv;
}

int cli_call(gemm_client *c, Gemm__Request *req, const char *what,
             Gemm__Reply **out, uint64_t *rtt_us)
{
    struct gemm_request *r;
    int rv;

    if ((rv = cli_req_start(c, req, what, &r)) != GEMM_OK)
        return rv;
    return cli_req_finish(r, out, rtt_us);
}
