/*
 * client.c: a connection to gemmd. One nng REQ socket per client, dialed
 * at open within the caller's timeout (dial.c) so that a missing, refused
 * or silent daemon is reported there; requests are
 * never re-sent by REQ (a GEMM must not run twice), and when the daemon's
 * pipe goes away every request in flight fails at once with
 * GEMM_ERR_CLOSED instead of waiting for a new daemon that would not know
 * our buffers. Also: the default URL, ping and status.
 */
#include "internal.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <stddef.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define CLI_DEFAULT_TIMEOUT_MS 60000
#define CLI_SYSTEM_URL         "ipc:///run/gemmd/gemmd.sock"

GEMM_API int gemm_default_url(char *buf, size_t len)
{
    const char *env = getenv("GEMM_URL");
    const char *xdg = getenv("XDG_RUNTIME_DIR");
    char path[CLI_URL_MAX];
    struct stat st;
    int n;

    if (buf == NULL || len == 0)
        return GEMM_ERR_INVALID;
    if (env != NULL && env[0] != '\0') {
        n = snprintf(buf, len, "%s", env);
    } else if (xdg != NULL && xdg[0] != '\0' &&
               snprintf(path, sizeof(path), "%s/gemmd.sock", xdg) <
                   (int)sizeof(path) &&
               stat(path, &st) == 0 && S_ISSOCK(st.st_mode)) {
        n = snprintf(buf, len, "ipc://%s", path);
    } else {
        n = snprintf(buf, len, "%s", CLI_SYSTEM_URL);
    }
    if (n < 0 || (size_t)n >= len) {
        buf[0] = '\0';
        return GEMM_ERR_INVALID;
    }
    return GEMM_OK;
}

/*
 * Pipe-removal callback (an nng thread): the daemon closed the connection or
 * exited. Marks the client lost and aborts every request in flight.
 */
static void client_pipe_removed(nng_pipe p, nng_pipe_ev ev, void *arg)
{
    gemm_client *c = arg;
    (void)p;

    if (ev != NNG_PIPE_EV_REM_POST)
        return;
    pthread_mutex_lock(&c->mtx);
    c->lost = true;
    for (struct gemm_request *r = c->pending; r != NULL; r = r->next)
        nng_aio_abort(r->aio, NNG_ECLOSED);
    pthread_mutex_unlock(&c->mtx);
}

/* Frees an opened client's locks and memory (its socket is closed). */
static void client_free(gemm_client *c)
{
    pthread_mutex_destroy(&c->mtx);
    pthread_mutex_destroy(&c->fd_mtx);
    free(c);
}

GEMM_API int gemm_client_open(gemm_client **out, const char *url)
{
    return gemm_client_open_timeout(out, url, GEMM_CONNECT_TIMEOUT_MS);
}

GEMM_API int gemm_client_open_timeout(gemm_client **out, const char *url,
                                      int timeout_ms)
{
    gemm_client *c;
    bool handed;
    int rv;

    cli_clear_error();
    if (out == NULL)
        return cli_error(GEMM_ERR_INVALID, "gemm_client_open: out is NULL");
    if ((c = calloc(1, sizeof(*c))) == NULL)
        return cli_error(GEMM_ERR_NOMEM, "gemm_client_open: out of memory");
    if (url != NULL) {
        if (strlen(url) >= sizeof(c->url)) {
            free(c);
            return cli_error(GEMM_ERR_INVALID, "URL too long: %s", url);
        }
        strcpy(c->url, url);
    } else if (gemm_default_url(c->url, sizeof(c->url)) != GEMM_OK) {
        free(c);
        return cli_error(GEMM_ERR_INVALID, "default URL too long");
    }
    atomic_init(&c->timeout_ms, CLI_DEFAULT_TIMEOUT_MS);
    atomic_init(&c->next_id, 1);
    atomic_init(&c->spin_us, cli_spin_default());
    pthread_mutex_init(&c->mtx, NULL);
    pthread_mutex_init(&c->fd_mtx, NULL);
    c->fdchan = -1;

    if ((rv = nng_req0_open(&c->sock)) != 0) {
        rv = cli_error(GEMM_ERR_NOMEM, "cannot open an nng req socket: %s",
                       nng_strerror(rv));
        goto fail_mtx;
    }
    /* Never re-send: a request that lost its daemon fails instead. Nor
     * redial: a client that lost its daemon stays lost (callers open a new
     * one), and nng 1.5.2 can deadlock closing a socket whose dialer is
     * busy reconnecting to a daemon that is gone. */
    if ((rv = nng_socket_set_ms(c->sock, NNG_OPT_REQ_RESENDTIME,
                                NNG_DURATION_INFINITE)) != 0 ||
        (rv = nng_socket_set_ms(c->sock, NNG_OPT_RECONNMINT,
                                CLI_NO_REDIAL_MS)) != 0 ||
        (rv = nng_socket_set_ms(c->sock, NNG_OPT_RECONNMAXT,
                                CLI_NO_REDIAL_MS)) != 0 ||
        (rv = nng_pipe_notify(c->sock, NNG_PIPE_EV_REM_POST,
                              client_pipe_removed, c)) != 0) {
        rv = cli_error(GEMM_ERR_INTERNAL, "cannot set up the nng socket: %s",
                       nng_strerror(rv));
        goto fail_sock;
    }
    if ((rv = cli_dial(c, timeout_ms < -1 ? -1 : timeout_ms, client_free,
                       &handed)) != GEMM_OK) {
        if (handed)
            return rv; /* c is the dialing thread's now */
        goto fail_sock;
    }
    *out = c;
    return GEMM_OK;

fail_sock:
    nng_close(c->sock);
fail_mtx:
    client_free(c);
    return rv;
}

GEMM_API void gemm_client_close(gemm_client *c)
{
    if (c == NULL)
        return;
    /* a finished close has run every pipe callback; one left running may
     * still call client_pipe_removed(c), so c stays allocated then */
    bool closed = cli_close_socket(c);
    cli_fdchan_close(c);
    pthread_mutex_lock(&c->mtx);
    for (struct gemm_buffer *b = c->buffers; b != NULL; b = b->next)
        b->client = NULL;
    c->buffers = NULL;
    pthread_mutex_unlock(&c->mtx);
    if (!closed)
        return;
    pthread_mutex_destroy(&c->mtx);
    pthread_mutex_destroy(&c->fd_mtx);
    free(c);
}

GEMM_API int gemm_client_set_timeout(gemm_client *c, int ms)
{
    if (c == NULL || ms < -1)
        return cli_error(GEMM_ERR_INVALID, "gemm_client_set_timeout: %s",
                         c == NULL ? "client is NULL" : "ms must be >= -1");
    atomic_store(&c->timeout_ms, ms);
    return GEMM_OK;
}

GEMM_API int gemm_client_set_spin(gemm_client *c, int us)
{
    if (c == NULL || us < 0)
        return cli_error(GEMM_ERR_INVALID, "gemm_client_set_spin: %s",
                         c == NULL ? "client is NULL" : "us must be >= 0");
    atomic_store(&c->spin_us, us);
    return GEMM_OK;
}

/* Copies a reply string into a fixed field, truncating, always terminated. */
static void copy_str(char *dst, size_t len, const char *src)
{
    snprintf(dst, len, "%s", src != NULL ? src : "");
}

GEMM_API uint32_t gemm_server_features(gemm_client *c)
{
    return c != NULL ? atomic_load(&c->features) : 0u;
}

GEMM_API int gemm_ping(gemm_client *c, gemm_server_info *info)
{
    Gemm__Request req = GEMM__REQUEST__INIT;
    Gemm__HelloRequest hello = GEMM__HELLO_REQUEST__INIT;
    Gemm__Reply *rep;
    char name[64];
    int rv;

    cli_clear_error();
    if (c == NULL)
        return cli_error(GEMM_ERR_INVALID, "gemm_ping: client is NULL");
    snprintf(name, sizeof(name), "libgemmclient %s pid %ld",
             GEMM_VERSION_STRING, (long)getpid());
    hello.client_name = name;
    req.body_case = GEMM__REQUEST__BODY_HELLO;
    req.hello = &hello;
    if ((rv = cli_call(c, &req, "ping", &rep, NULL)) != GEMM_OK)
        return rv;
    if (rep->body_case != GEMM__REPLY__BODY_HELLO) {
        gemm__reply__free_unpacked(rep, NULL);
        return cli_error(GEMM_ERR_PROTOCOL, "ping: reply has no hello body");
    }
    atomic_store(&c->features,
                 rep->hello->has_features
                     ? rep->hello->features &
                           (GEMM_FEATURE_FILL | GEMM_FEATURE_FILL_GEMM |
                            GEMM_FEATURE_DRAIN | GEMM_FEATURE_LEND)
                     : 0u);
    atomic_store(&c->pinged, true);
    if (info != NULL) {
        Gemm__HelloReply *h = rep->hello;
        memset(info, 0, sizeof(*info));
        info->protocol_version =
            h->has_protocol_version ? h->protocol_version : 0;
        copy_str(info->server_version, sizeof(info->server_version),
                 h->server_version);
        copy_str(info->backend, sizeof(info->backend), h->backend);
        copy_str(info->device, sizeof(info->device), h->device);
    }
    gemm__reply__free_unpacked(rep, NULL);
    return GEMM_OK;
}

GEMM_API int gemm_get_status_sized(gemm_client *c, gemm_status *dst,
                                   size_t size)
{
    Gemm__Request req = GEMM__REQUEST__INIT;
    Gemm__StatusRequest status = GEMM__STATUS_REQUEST__INIT;
    Gemm__StatusReply *s;
    Gemm__Reply *rep;
    int rv;

    gemm_status all, *out = &all;

    cli_clear_error();
    if (c == NULL || dst == NULL)
        return cli_error(GEMM_ERR_INVALID, "gemm_get_status: NULL argument");
    if (size == 0)
        return cli_error(GEMM_ERR_INVALID,
                         "gemm_get_status_sized: size 0 (pass "
                         "sizeof(gemm_status))");
    req.body_case = GEMM__REQUEST__BODY_STATUS;
    req.status = &status;
    if ((rv = cli_call(c, &req, "status", &rep, NULL)) != GEMM_OK)
        return rv;
    if (rep->body_case != GEMM__REPLY__BODY_STATUS_REPLY) {
        gemm__reply__free_unpacked(rep, NULL);
        return cli_error(GEMM_ERR_PROTOCOL, "status: reply has no status body");
    }
    s = rep->status_reply;
    memset(out, 0, sizeof(*out));
    out->uptime_s = s->uptime_s;
    copy_str(out->backend, sizeof(out->backend), s->backend);
    copy_str(out->device, sizeof(out->device), s->device);
    out->requests_served = s->requests_served;
    out->requests_failed = s->requests_failed;
    out->queue_depth = s->queue_depth;
    out->queue_capacity = s->queue_capacity;
    out->buffers = s->buffers;
    out->buffer_bytes = s->buffer_bytes;
    out->clients = s->clients;
    out->threads = s->threads;
    out->latency_p50_us = s->latency_p50_us;
    out->latency_p90_us = s->latency_p90_us;
    out->latency_p99_us = s->latency_p99_us;
    out->latency_max_us = s->latency_max_us;
    out->gemm_flops = s->gemm_flops;
    out->tensors = s->tensors;
    out->tensor_bytes = s->tensor_bytes;
    out->pinned_bytes = s->pinned_bytes;
    out->device_bytes = s->device_bytes;
    out->tmap_hits = s->tmap_hits;
    out->tmap_misses = s->tmap_misses;
    out->stage_queue_us = s->stage_queue_us;
    out->stage_h2d_us = s->stage_h2d_us;
    out->stage_kernel_us = s->stage_kernel_us;
    out->stage_d2h_us = s->stage_d2h_us;
    out->connections = s->connections;
    out->users = s->users;
    out->memory_budget = s->memory_budget;
    out->memory_used = s->memory_used;
    out->gemms_served = s->gemms_served;
    out->gemms_failed = s->gemms_failed;
    for (size_t i = 0; i < s->n_routine_served && i < GEMM_ROUTINE_COUNT; i++)
        out->routine_served[i] = s->routine_served[i];
    out->batches_served = s->batches_served;
    out->batch_problems = s->batch_problems;
    out->pins_pending = s->pins_pending;
    out->pins_done = s->pins_done;
    out->pins_failed = s->pins_failed;
    out->pin_seconds = s->pin_seconds;
    out->pin_bytes = s->pin_bytes;
    out->spares_ready = s->spares_ready;
    out->spare_bytes = s->spare_bytes;
    out->spares_lent = s->spares_lent;
    out->spares_none = s->spares_none;
    out->spares_made = s->spares_made;
    out->spares_failed = s->spares_failed;
    gemm__reply__free_unpacked(rep, NULL);
    memcpy(dst, &all, size < sizeof(all) ? size : sizeof(all));
    return GEMM_OK;
}

/* The symbol of callers built before gemm_get_status_sized: their struct
 * ended after routine_served. */
GEMM_API int(gemm_get_status)(gemm_client *c, gemm_status *out)
{
    return gemm_get_status_sized(c, out, offsetof(gemm_status, batches_served));
}
