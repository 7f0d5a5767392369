/*
 * metrics.c: the Prometheus text exposition of gemmd's counters, and the
 * small HTTP/1.0 server that hands it out (GET /metrics, anything else
 * 404; one request per connection, the request's header whole within
 * METRICS_HEADER_MS and the answer written within 5 s). Places: at most
 * METRICS_HTTP_MAX connections at once, METRICS_PEER_MAX of one share; a
 * share is a local uid for a peer at a loopback address (the owner of the
 * peer's socket, peeruid.c: every local user connects from 127.0.0.1) and
 * the address for others. A new connection that finds its own share full
 * closes that share's oldest connection still sending its request; one
 * that finds the server full closes the oldest such connection of the
 * share holding the most (never of a share below its fair part), so one
 * user's half requests cannot keep another user's scraper out. Loop
 * thread only.
 */
#include "devstatus.h"
#include "gemmd.h"
#include "log.h"
#include "peeruid.h"
#include "pinner.h"
#include "spares.h"

#include <gemm/types.h>

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

/* connections the kernel queues before accept: a flood of other users'
 * connects must not fill it (a dropped SYN is retried only a second
 * later); each user's share then closes only its own */
#define METRICS_BACKLOG   1024
#define METRICS_HTTP_MAX  32
#define METRICS_PEER_MAX  16   /* of one share (local uid or address) */
#define METRICS_HEADER_MS 1000 /* the request, first byte to blank line */
#define METRICS_WRITE_MS  5000 /* the answer written */
#define METRICS_REQ_MAX   4096

/* Upper bounds of the latency buckets, seconds (+Inf is implied). */
static const double bucket_le[METRICS_BUCKETS] = {
    50e-6, 100e-6, 250e-6, 500e-6, 1e-3,   2.5e-3, 5e-3, 10e-3,
    25e-3, 50e-3,  100e-3, 250e-3, 500e-3, 1.0,    5.0,  30.0,
};

static const char *kind_names[MK_COUNT] = {
    "invalid",        "hello",  "status", "register_buffer",
    "release_buffer", "gemm",   "upload", "tensor_free",
    "list_kernels",   "cancel", "blas3",  "batch",
};

void metrics_observe(gemmd_metrics *m, int kind, int status, uint64_t ns)
{
    if (kind < 0 || kind >= MK_COUNT)
        kind = MK_INVALID;
    if (status < 0 || status >= METRICS_STATUS_MAX)
        status = GEMM_ERR_INTERNAL;
    m->requests[kind][status]++;
    double s = (double)ns / 1e9;
    m->lat_sum[kind] += s;
    int b = 0;
    while (b < METRICS_BUCKETS && s > bucket_le[b])
        b++;
    if (b < METRICS_BUCKETS) /* beyond the last: only in +Inf (the total) */
        m->lat_count[kind][b]++;
}

/* "ok", "invalid", "busy", ...: the gemm_error's name in lower case. */
static const char *status_name(int status, char *buf, size_t len)
{
    const char *n = NULL;
    switch (status) {
#define GEMM_X_NAME(name, num, msg)                                            \
    case num:                                                                  \
        n = #name;                                                             \
        break;
        GEMM_ERROR_MAP(GEMM_X_NAME)
#undef GEMM_X_NAME
    }
    if (n == NULL) {
        snprintf(buf, len, "code_%d", status);
        return buf;
    }
    if (strncmp(n, "GEMM_ERR_", 9) == 0)
        n += 9;
    else if (strncmp(n, "GEMM_", 5) == 0)
        n += 5;
    size_t i = 0;
    for (; n[i] != '\0' && i + 1 < len; i++)
        buf[i] = (char)tolower((unsigned char)n[i]);
    buf[i] = '\0';
    return buf;
}

/* A label value with \, " and newlines escaped. */
static void put_label(FILE *f, const char *s)
{
    for (; *s != '\0'; s++) {
        if (*s == '\\' || *s == '"')
            fprintf(f, "\\%c", *s);
        else if (*s == '\n')
            fputs("\\n", f);
        else
            fputc(*s, f);
    }
}

static void head(FILE *f, const char *name, const char *type, const char *help)
{
    fprintf(f, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

static void gauge(FILE *f, const char *name, const char *help, double v)
{
    head(f, name, "gauge", help);
    fprintf(f, "%s %.17g\n", name, v);
}

static void counter(FILE *f, const char *name, const char *help, double v)
{
    head(f, name, "counter", help);
    fprintf(f, "%s %.17g\n", name, v);
}

struct user_rows {
    FILE *f;
    const char *name; /* metric */
    int field;
};

enum {
    UF_CONNS,
    UF_BUFFERS,
    UF_BYTES,
    UF_MEMORY,
    UF_INFLIGHT,
    UF_REQUESTS,
    UF_FAILED,
    UF_REFUSED
};

static void user_row(void *arg, const gemmd_user *u)
{
    struct user_rows *r = arg;
    uint64_t v = 0;
    switch (r->field) {
    case UF_CONNS:
        v = u->conns;
        break;
    case UF_BUFFERS:
        v = u->buffers;
        break;
    case UF_BYTES:
        v = u->bytes;
        break;
    case UF_MEMORY:
        v = u->memory;
        break;
    case UF_INFLIGHT:
        v = u->inflight;
        break;
    case UF_REQUESTS:
        v = u->requests;
        break;
    case UF_FAILED:
        v = u->failed;
        break;
    case UF_REFUSED:
        v = u->refused;
        break;
    }
    fprintf(r->f, "%s{uid=\"%llu\"} %llu\n", r->name,
            (unsigned long long)u->uid, (unsigned long long)v);
}

static void users(FILE *f, const gemmd *d, const char *name, const char *type,
                  const char *help, int field)
{
    struct user_rows r = {f, name, field};
    head(f, name, type, help);
    users_each(&d->users, user_row, &r);
}

char *metrics_render(gemmd *d, size_t *len)
{
    char *buf = NULL;
    size_t n = 0;
    FILE *f = open_memstream(&buf, &n);
    if (f == NULL)
        return NULL;
    const gemmd_metrics *m = &d->metrics;
    char sn[32];

    head(f, "gemmd_build_info", "gauge",
         "gemmd's version, backend and device (always 1).");
    fprintf(f, "gemmd_build_info{version=\"%s\",backend=\"",
            GEMM_VERSION_STRING);
    put_label(f, d->be.ops->name);
    fputs("\",device=\"", f);
    put_label(f, d->be.device);
    fputs("\"} 1\n", f);
    gauge(f, "gemmd_uptime_seconds", "Seconds since gemmd started.",
          (double)(gemmd_now_ns() - d->stats.started_ns) / 1e9);

    head(f, "gemmd_requests_total", "counter",
         "Requests answered, by kind and status.");
    for (int k = 0; k < MK_COUNT; k++)
        for (int s = 0; s < METRICS_STATUS_MAX; s++)
            if (m->requests[k][s] != 0 || (s == 0 && k == MK_GEMM))
                fprintf(f,
                        "gemmd_requests_total{kind=\"%s\",status=\"%s\"} "
                        "%llu\n",
                        kind_names[k], status_name(s, sn, sizeof(sn)),
                        (unsigned long long)m->requests[k][s]);

    head(f, "gemmd_request_duration_seconds", "histogram",
         "Time from a request's arrival to its reply, by kind.");
    for (int k = 0; k < MK_COUNT; k++) {
        uint64_t total = 0, cum = 0;
        for (int s = 0; s < METRICS_STATUS_MAX; s++)
            total += m->requests[k][s];
        for (int b = 0; b < METRICS_BUCKETS; b++) {
            cum += m->lat_count[k][b];
            fprintf(f,
                    "gemmd_request_duration_seconds_bucket{kind=\"%s\","
                    "le=\"%g\"} %llu\n",
                    kind_names[k], bucket_le[b], (unsigned long long)cum);
        }
        fprintf(f,
                "gemmd_request_duration_seconds_bucket{kind=\"%s\","
                "le=\"+Inf\"} %llu\n",
                kind_names[k], (unsigned long long)total);
        fprintf(f, "gemmd_request_duration_seconds_sum{kind=\"%s\"} %.9g\n",
                kind_names[k], m->lat_sum[k]);
        fprintf(f, "gemmd_request_duration_seconds_count{kind=\"%s\"} %llu\n",
                kind_names[k], (unsigned long long)total);
    }

    head(f, "gemmd_socket_bytes_total", "counter",
         "Bytes read from and written to client sockets.");
    fprintf(f, "gemmd_socket_bytes_total{direction=\"in\"} %llu\n",
            (unsigned long long)d->conns.bytes_in);
    fprintf(f, "gemmd_socket_bytes_total{direction=\"out\"} %llu\n",
            (unsigned long long)d->conns.bytes_out);
    head(f, "gemmd_connections_total", "counter",
         "Connections by outcome: accepted; refused at once (past a "
         "cap); closed for a greeting or message not whole in time; "
         "dropped (oversized message, replies not read).");
    fprintf(f, "gemmd_connections_total{outcome=\"accepted\"} %llu\n",
            (unsigned long long)d->lsn.accepted);
    fprintf(f, "gemmd_connections_total{outcome=\"refused\"} %llu\n",
            (unsigned long long)d->lsn.refused);
    fprintf(f, "gemmd_connections_total{outcome=\"timed_out\"} %llu\n",
            (unsigned long long)d->conns.timed_out);
    fprintf(f, "gemmd_connections_total{outcome=\"dropped\"} %llu\n",
            (unsigned long long)d->conns.dropped);
    gauge(f, "gemmd_connections", "Open connections (all kinds).",
          d->lsn.nconns);
    gauge(f, "gemmd_connections_limit",
          "Most connections at once (--max-connections, descriptors).",
          d->lsn.max_conns);
    gauge(f, "gemmd_clients", "Connected clients (SP connections).",
          d->sp.nclients);
    gauge(f, "gemmd_queue_depth", "Jobs queued or running.", d->inflight);
    gauge(f, "gemmd_queue_capacity", "--max-queue.", d->cfg.max_queue);
    counter(f, "gemmd_jobs_canceled_total",
            "Jobs dropped before they started (client cancel or gone).",
            (double)m->jobs_canceled);
    gauge(f, "gemmd_buffers", "Registered buffers, all clients.", d->reg.count);
    gauge(f, "gemmd_buffer_bytes", "Bytes of registered buffers.",
          (double)d->reg.bytes);
    gauge(f, "gemmd_tensors", "Resident tensors, all clients.", d->reg.tensors);
    gauge(f, "gemmd_tensor_bytes", "Bytes of resident tensors.",
          (double)d->reg.tensor_bytes);
    gauge(f, "gemmd_memory_budget_bytes",
          "The daemon's budget of its own memory for client work.",
          (double)d->mem_budget);
    gauge(f, "gemmd_memory_used_bytes", "Of the budget, in use now.",
          (double)d->mem_used);
    counter(f, "gemmd_gemm_flops_total", "2*M*N*K summed over GEMMs served.",
            (double)d->stats.gemm_flops);
    pinner_stats ps;
    pinner_stats_get(&ps);
    gauge(f, "gemmd_pins_pending",
          "Large buffers being pinned in the background (queued or "
          "running).",
          ps.pending);
    counter(f, "gemmd_pins_total", "Large buffers pinned in the background.",
            (double)ps.done);
    counter(f, "gemmd_pins_failed_total",
            "Background pins that failed (the buffers stay unpinned).",
            (double)ps.failed);
    counter(f, "gemmd_pin_seconds_total",
            "Time the background pins done took (per byte: divide by "
            "gemmd_pin_bytes_total).",
            ps.seconds);
    counter(f, "gemmd_pin_bytes_total",
            "Bytes the background pins done covered.", (double)ps.bytes);
    spare_stats sps;
    spares_stats_get(&sps);
    gauge(f, "gemmd_spares_ready",
          "Spares (memfds made and pinned ahead) ready to lend.", sps.ready);
    gauge(f, "gemmd_spare_bytes", "Bytes of the spares ready to lend.",
          (double)sps.ready_bytes);
    counter(f, "gemmd_spares_lent_total",
            "Spares lent to new buffers (their first GEMM waits for no "
            "pin).",
            (double)sps.lent);
    counter(f, "gemmd_spares_none_total",
            "Spares asked for when none fitted (the client made its own "
            "memfd).",
            (double)sps.none);
    counter(f, "gemmd_spares_failed_total",
            "Spares that could not be made (their size is no longer kept).",
            (double)sps.failed);
    counter(f, "gemmd_batch_problems_total",
            "Problems of the batches served (each batch is one request "
            "of kind batch).",
            (double)d->stats.batch_problems);

    users(f, d, "gemmd_user_connections", "gauge",
          "Open connections of each uid.", UF_CONNS);
    gauge(f, "gemmd_user_connections_limit", "--user-connections.",
          d->cfg.user_connections);
    users(f, d, "gemmd_user_buffers", "gauge",
          "Registered buffers of each uid.", UF_BUFFERS);
    gauge(f, "gemmd_user_buffers_limit", "--user-buffers.",
          d->cfg.user_buffers);
    users(f, d, "gemmd_user_bytes", "gauge",
          "Registered and resident bytes of each uid.", UF_BYTES);
    gauge(f, "gemmd_user_bytes_limit", "--user-bytes.",
          (double)d->cfg.user_bytes);
    users(f, d, "gemmd_user_memory_bytes", "gauge",
          "The daemon's memory budget in use for each uid.", UF_MEMORY);
    gauge(f, "gemmd_user_memory_limit_bytes",
          "Each uid's share of the memory budget.", (double)d->user_memory);
    users(f, d, "gemmd_user_inflight", "gauge",
          "Jobs queued or running for each uid.", UF_INFLIGHT);
    users(f, d, "gemmd_user_requests_total", "counter",
          "Requests answered for each uid.", UF_REQUESTS);
    users(f, d, "gemmd_user_failed_total", "counter",
          "Of them, answered with an error.", UF_FAILED);
    users(f, d, "gemmd_user_connections_refused_total", "counter",
          "Connections of each uid refused at a cap.", UF_REFUSED);

    devstatus_metrics(d, f);
    if (fclose(f) != 0) {
        free(buf);
        return NULL;
    }
    *len = n;
    return buf;
}

void metrics_write_file(gemmd *d)
{
    if (d->cfg.metrics_file[0] == '\0')
        return;
    size_t n;
    char *text = metrics_render(d, &n);
    if (text == NULL)
        return;
    char tmp[sizeof(d->cfg.metrics_file) + 16];
    snprintf(tmp, sizeof(tmp), "%s.tmp", d->cfg.metrics_file);
    FILE *f = fopen(tmp, "we");
    bool ok = f != NULL && fwrite(text, 1, n, f) == n;
    if (f != NULL && fclose(f) != 0)
        ok = false;
    if (!ok || rename(tmp, d->cfg.metrics_file) != 0) {
        gemmd_log(LOG_WARNING, "cannot write %s: %s", d->cfg.metrics_file,
                  strerror(errno));
        unlink(tmp);
    }
    free(text);
}

/* ---- HTTP ---- */

typedef struct http_conn {
    uv_tcp_t tcp;
    uv_timer_t timer;
    uv_write_t wr;
    gemmd *d;
    char req[METRICS_REQ_MAX];
    size_t got;
    char *resp;
    int closing;    /* handles still to close */
    bool answering; /* the request is whole: being answered */
    struct sockaddr_storage peer;
    bool by_uid; /* shares by uid (a local peer whose owner is known) */
    uid_t uid;
    struct http_conn *prev, *next;
} http_conn;

static int http_open;
static int http_live;         /* on the list (not closing) */
static http_conn *http_conns; /* open ones, newest first; closed by
                                 metrics_stop */

static void http_closed(uv_handle_t *h)
{
    http_conn *c = h->data;
    if (--c->closing == 0) {
        free(c->resp);
        free(c);
        http_open--;
    }
}

static void http_close(http_conn *c)
{
    if (c->closing != 0)
        return;
    if (c->prev != NULL)
        c->prev->next = c->next;
    else
        http_conns = c->next;
    if (c->next != NULL)
        c->next->prev = c->prev;
    c->closing = 2;
    http_live--;
    uv_close((uv_handle_t *)&c->tcp, http_closed);
    uv_close((uv_handle_t *)&c->timer, http_closed);
}

static void http_answer(http_conn *c);

/* Whether c's request is whole: its header ends in a blank line, or it
 * fills the buffer. */
static bool http_whole(const http_conn *c)
{
    return strstr(c->req, "\r\n\r\n") != NULL ||
           strstr(c->req, "\n\n") != NULL || c->got >= sizeof(c->req) - 1;
}

/* The header deadline (or, answering, the write deadline). libuv runs
 * due timers before it polls for I/O, so after a stall of the loop the
 * deadline can come before the read of a request that arrived in time:
 * what the socket already holds is read first, and a whole request is
 * answered, not dropped for the loop's own lateness. */
static void http_timeout(uv_timer_t *t)
{
    http_conn *c = t->data;
    uv_os_fd_t fd;
    if (!c->answering && uv_fileno((uv_handle_t *)&c->tcp, &fd) == 0) {
        ssize_t n = 1;
        while (n > 0 && c->got < sizeof(c->req) - 1) {
            n = recv(fd, c->req + c->got, sizeof(c->req) - 1 - c->got,
                     MSG_DONTWAIT);
            if (n > 0)
                c->got += (size_t)n;
        }
        c->req[c->got] = '\0';
        if (http_whole(c)) {
            http_answer(c);
            return;
        }
    }
    http_close(c);
}

static void http_written(uv_write_t *w, int status)
{
    (void)status;
    http_close(w->data);
}

static void http_alloc(uv_handle_t *h, size_t hint, uv_buf_t *b)
{
    http_conn *c = h->data;
    (void)hint;
    *b = uv_buf_init(c->req + c->got, (unsigned)(sizeof(c->req) - 1 - c->got));
}

static void http_answer(http_conn *c)
{
    uv_read_stop((uv_stream_t *)&c->tcp);
    c->answering = true;
    uv_timer_start(&c->timer, http_timeout, METRICS_WRITE_MS, 0);
    c->req[c->got] = '\0';
    size_t n = 0;
    char *body = NULL;
    const char *status = "404 Not Found";
    const char *type = "text/plain; charset=utf-8";
    if (strncmp(c->req, "GET /metrics ", 13) == 0 ||
        strncmp(c->req, "GET /metrics?", 13) == 0) {
        body = metrics_render(c->d, &n);
        status = body != NULL ? "200 OK" : "500 Internal Server Error";
        type = "text/plain; version=0.0.4; charset=utf-8";
    }
    if (body == NULL) {
        body = strdup("not found: try /metrics\n");
        n = body != NULL ? strlen(body) : 0;
    }
    char hdr[256];
    int h = snprintf(hdr, sizeof(hdr),
                     "HTTP/1.0 %s\r\nContent-Type: %s\r\n"
                     "Content-Length: %zu\r\nConnection: close\r\n\r\n",
                     status, type, n);
    c->resp = malloc((size_t)h + n);
    if (c->resp == NULL) {
        free(body);
        http_close(c);
        return;
    }
    memcpy(c->resp, hdr, (size_t)h);
    if (body != NULL)
        memcpy(c->resp + h, body, n);
    free(body);
    uv_buf_t b = uv_buf_init(c->resp, (unsigned)((size_t)h + n));
    c->wr.data = c;
    if (uv_write(&c->wr, (uv_stream_t *)&c->tcp, &b, 1, http_written) != 0)
        http_close(c);
}

static void http_read(uv_stream_t *s, ssize_t nread, const uv_buf_t *b)
{
    http_conn *c = s->data;
    (void)b;
    if (nread < 0) {
        http_close(c);
        return;
    }
    c->got += (size_t)nread;
    c->req[c->got] = '\0';
    if (http_whole(c))
        http_answer(c);
}

/* Whether a and b are the same peer address (the port aside). */
static bool same_addr(const struct sockaddr_storage *a,
                      const struct sockaddr_storage *b)
{
    if (a->ss_family != b->ss_family)
        return false;
    if (a->ss_family == AF_INET)
        return memcmp(&((const struct sockaddr_in *)a)->sin_addr,
                      &((const struct sockaddr_in *)b)->sin_addr,
                      sizeof(struct in_addr)) == 0;
    if (a->ss_family == AF_INET6)
        return memcmp(&((const struct sockaddr_in6 *)a)->sin6_addr,
                      &((const struct sockaddr_in6 *)b)->sin6_addr,
                      sizeof(struct in6_addr)) == 0;
    return true;
}

/* Whether a and b hold places of one share: one local uid, or one
 * address. */
static bool same_share(const http_conn *a, const http_conn *b)
{
    if (a->by_uid != b->by_uid)
        return false;
    return a->by_uid ? a->uid == b->uid : same_addr(&a->peer, &b->peer);
}

/* Sets c's share from its peer: by the owning uid when the peer is at a
 * loopback address and the kernel names it, else by address. */
static void http_share(http_conn *c)
{
    c->by_uid = false;
    if (!peeruid_is_loopback(&c->peer))
        return;
    struct sockaddr_storage local;
    int llen = sizeof(local);
    if (uv_tcp_getsockname(&c->tcp, (struct sockaddr *)&local, &llen) != 0)
        return;
    int rv = peeruid_lookup(&c->peer, &local, &c->uid);
    if (rv == 0) {
        c->by_uid = true;
        return;
    }
    static bool said;
    if (!said) {
        said = true;
        gemmd_log(LOG_WARNING,
                  "metrics: cannot find which user a local connection is "
                  "from (%s): local users share one place count; allow "
                  "AF_NETLINK (RestrictAddressFamilies=) to part them",
                  strerror(-rv));
    }
}

/* In conns, the number of connections of x's share, and its oldest one
 * still sending its request (NULL when none). */
static int share_count(const http_conn *x, http_conn **oldest)
{
    int n = 0;
    *oldest = NULL;
    for (http_conn *c = http_conns; c != NULL; c = c->next)
        if (same_share(c, x)) {
            n++;
            if (!c->answering)
                *oldest = c;
        }
    return n;
}

/* Makes room for the new connection nc (not on the list yet): when its
 * share is full, closes that share's oldest connection still sending its
 * request; when the server is full, the oldest such connection of the
 * share holding the most, as long as that share holds more than its fair
 * part and more than nc's. Returns whether there is room now. */
static bool http_make_room(const http_conn *nc)
{
    http_conn *victim;
    int mine = share_count(nc, &victim);
    if (mine >= METRICS_PEER_MAX) {
        if (victim == NULL)
            return false;
        http_close(victim);
        return true;
    }
    if (http_live < METRICS_HTTP_MAX)
        return true;
    /* the shares present, nc's counted even when it holds none */
    int shares = mine == 0 ? 1 : 0;
    for (http_conn *c = http_conns; c != NULL; c = c->next) {
        bool first = true;
        for (http_conn *e = http_conns; e != c; e = e->next)
            if (same_share(e, c)) {
                first = false;
                break;
            }
        shares += first;
    }
    int fair = METRICS_HTTP_MAX / shares;
    int most = 0;
    victim = NULL;
    for (http_conn *c = http_conns; c != NULL; c = c->next) {
        http_conn *old;
        int n = share_count(c, &old);
        if (old != NULL && n > most && n >= fair &&
            (n > mine || same_share(c, nc))) {
            most = n;
            victim = old;
        }
    }
    if (victim == NULL)
        return false;
    http_close(victim);
    return true;
}

#ifdef GEMMD_TEST_HOOKS
/* GEMMD_TEST_METRICS_STALL_MS=N (gemmd_test only): the loop stops N ms
 * after it accepts a metrics connection, as a loaded host's scheduler can
 * stop it; the test of http_timeout's reading (metrics_test.c). */
static void http_test_stall(void)
{
    const char *e = getenv("GEMMD_TEST_METRICS_STALL_MS");
    long ms = e != NULL ? strtol(e, NULL, 10) : 0;
    if (ms > 0 && ms <= 10000) {
        struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
        while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
            ;
    }
}
#else
static void http_test_stall(void)
{
}
#endif

static void http_accept(uv_stream_t *server, int status)
{
    gemmd *d = server->data;
    if (status < 0)
        return;
    http_conn *c = calloc(1, sizeof(*c));
    if (c == NULL || uv_tcp_init(d->loop, &c->tcp) != 0) {
        free(c);
        return;
    }
    c->d = d;
    c->tcp.data = c;
    http_open++;
    int plen = sizeof(c->peer);
    bool ok =
        uv_accept(server, (uv_stream_t *)&c->tcp) == 0 &&
        uv_tcp_getpeername(&c->tcp, (struct sockaddr *)&c->peer, &plen) == 0;
    if (ok)
        http_share(c);
    if (!ok || !http_make_room(c)) {
        c->closing = 1;
        uv_close((uv_handle_t *)&c->tcp, http_closed);
        return;
    }
    uv_timer_init(d->loop, &c->timer);
    c->timer.data = c;
    c->next = http_conns;
    if (http_conns != NULL)
        http_conns->prev = c;
    http_conns = c;
    http_live++;
    uv_timer_start(&c->timer, http_timeout, METRICS_HEADER_MS, 0);
    uv_read_start((uv_stream_t *)&c->tcp, http_alloc, http_read);
    http_test_stall();
}

int metrics_start(gemmd *d, char *msg, size_t len)
{
    const char *spec = d->cfg.metrics_listen;
    if (spec[0] == '\0')
        return GEMM_OK;
    char host[128];
    const char *colon = strrchr(spec, ':');
    if (colon == NULL || (size_t)(colon - spec) >= sizeof(host)) {
        snprintf(msg, len, "--metrics-listen needs HOST:PORT, got '%s'", spec);
        return GEMM_ERR_INVALID;
    }
    memcpy(host, spec, (size_t)(colon - spec));
    host[colon - spec] = '\0';
    int port = atoi(colon + 1);
    struct sockaddr_storage ss;
    int rv;
    if (host[0] == '[') {
        size_t hl = strlen(host);
        if (hl < 2 || host[hl - 1] != ']') {
            snprintf(msg, len, "--metrics-listen: bad address '%s'", spec);
            return GEMM_ERR_INVALID;
        }
        host[hl - 1] = '\0';
        rv = uv_ip6_addr(host + 1, port, (struct sockaddr_in6 *)&ss);
    } else {
        rv = uv_ip4_addr(host, port, (struct sockaddr_in *)&ss);
    }
    if (rv != 0 || port <= 0 || port > 65535) {
        snprintf(msg, len, "--metrics-listen: bad address '%s'", spec);
        return GEMM_ERR_INVALID;
    }
    uv_tcp_init(d->loop, &d->metrics.http);
    d->metrics.http.data = d;
    d->metrics.http_on = 1;
    if ((rv = uv_tcp_bind(&d->metrics.http, (struct sockaddr *)&ss, 0)) != 0 ||
        (rv = uv_listen((uv_stream_t *)&d->metrics.http, METRICS_BACKLOG,
                        http_accept)) != 0) {
        snprintf(msg, len, "cannot serve metrics on %s: %s", spec,
                 uv_strerror(rv));
        return GEMM_ERR_PERMISSION;
    }
    return GEMM_OK;
}

void metrics_stop(gemmd *d)
{
    while (http_conns != NULL)
        http_close(http_conns);
    if (d->metrics.http_on) {
        d->metrics.http_on = 0;
        uv_close((uv_handle_t *)&d->metrics.http, NULL);
    }
}
