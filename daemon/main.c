/*
 * main.c: gemmd's start-up and shutdown. Reading order of the daemon:
 * main() -> gemmd_config_parse() -> resolve_limits() ->
 * gemmd_backend_open() -> sched_start() -> open_socket_side() -> uv_run().
 * The socket side is wired bottom up, each layer handing the one below
 * its callbacks: listen.c accepts, conn.c reads and writes a connection,
 * sp.c frames requests and hands each to dispatch_request() (dispatch.c),
 * fdchan.c trades memfds for tickets. Workers hand finished jobs to
 * complete_job_done(), the inbox (loop.c) brings them back to the loop and
 * complete.c answers them, until SIGTERM drains the queue and closes
 * everything.
 */
#include "gemmd.h"
#include "complete.h"
#include "dispatch.h"
#include "log.h"
#include "notify.h"
#include "sysmem.h"
#include "spares.h"
#include "trace.h"

#include <gemm/types.h>

#include <signal.h>
#include <sys/resource.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void close_all(gemmd *d);

/* Registry hook: a released, unreferenced tensor goes back to its backend. */
static void free_tensor(void *arg, void *handle)
{
    gemmd_backend *be = arg;
    be->ops->tensor_free(be, handle);
}

/* Loop thread: the inbox's callback: answers finished jobs; the drain
 * ends when the last one is answered. */
static void on_events(void *arg, gemmd_event *ev)
{
    gemmd *d = arg;
    while (ev != NULL) {
        gemmd_event *next = ev->next;
        complete_event(d, ev);
        ev = next;
    }
    if (d->draining && d->inflight == 0 && !d->stopped)
        close_all(d);
}

/* Logs one stats line. */
static void status_line(gemmd *d)
{
    gemmd_latency lat;
    stats_latency(&d->stats, &lat);
    gemmd_log(LOG_INFO,
              "stats: %u clients (%u connections), %u buffers (%llu bytes), "
              "queue %u/%u, memory %llu/%llu, served %llu, failed %llu, "
              "latency p50 %.0f us p99 %.0f us",
              d->sp.nclients, d->lsn.nconns, d->reg.count,
              (unsigned long long)d->reg.bytes, d->inflight, d->cfg.max_queue,
              (unsigned long long)d->mem_used,
              (unsigned long long)d->mem_budget,
              (unsigned long long)d->stats.served,
              (unsigned long long)d->stats.failed, lat.p50_us, lat.p99_us);
}

/* Wires the socket side bottom up (listener, connections, SP with the
 * dispatcher and completion as its callbacks, descriptor channels) and
 * starts listening. Returns a gemm_error with a message. Main thread. */
static int open_socket_side(gemmd *d, char *msg, size_t len)
{
    lsn_init(&d->lsn, d->loop, &d->cfg, &d->users);
    conn_set_init(&d->conns, d->loop, &d->cfg, &d->lsn);
    sp_init(&d->sp, &d->conns, dispatch_request, complete_closed, d);
    fdc_init(&d->fdc, &d->conns);
    return lsn_open(&d->lsn, msg, len);
}

/* Closes the socket side: the listener and its timer, every connection,
 * every ticket. */
static void close_socket_side(gemmd *d)
{
    lsn_close(&d->lsn);
    conn_close_all(&d->conns);
    fdc_close(&d->fdc);
}

static void on_stats(uv_timer_t *t)
{
    status_line(t->data);
    metrics_write_file(t->data);
}

static void on_drain_timeout(uv_timer_t *t)
{
    gemmd *d = t->data;
    gemmd_log(LOG_WARNING,
              "drain timeout: %u GEMMs still running; exiting anyway",
              d->inflight);
    /* The workers may be deep inside a backend call: do not wait. */
    _exit(0);
}

static void begin_drain(gemmd *d, const char *why)
{
    if (d->draining)
        return;
    d->draining = true;
    gemmd_log(LOG_NOTICE, "%s: finishing %u GEMMs in flight, then exiting", why,
              d->inflight);
    gemmd_notify("STOPPING=1\nSTATUS=draining");
    if (d->cfg.drain_timeout_s > 0)
        uv_timer_start(&d->drain_timer, on_drain_timeout,
                       (uint64_t)(d->cfg.drain_timeout_s * 1000), 0);
    if (d->inflight == 0)
        close_all(d);
}

static void on_signal(uv_signal_t *h, int signum)
{
    gemmd *d = h->data;
    if (signum == SIGHUP) {
        status_line(d); /* nothing to reload: report instead */
        return;
    }
    begin_drain(d, signum == SIGTERM ? "SIGTERM" : "SIGINT");
}

/* Closes every connection and loop handle; uv_run then returns. The last
 * replies get a moment (at most 200 ms) to leave first: a client that reads
 * none does not hold the exit up. */
static void on_last_replies(uv_timer_t *t)
{
    gemmd *d = t->data;
    if (!conn_flushed(&d->conns) && gemmd_now_ns() < d->stop_by_ns) {
        uv_timer_start(t, on_last_replies, 5, 0);
        return;
    }
    close_socket_side(d);
    loop_inbox_close(&d->inbox);
    metrics_stop(d);
    uv_close((uv_handle_t *)&d->sig_term, NULL);
    uv_close((uv_handle_t *)&d->sig_int, NULL);
    uv_close((uv_handle_t *)&d->sig_hup, NULL);
    uv_close((uv_handle_t *)&d->stats_timer, NULL);
    uv_close((uv_handle_t *)&d->drain_timer, NULL);
}

static void close_all(gemmd *d)
{
    d->stopped = true;
    d->stop_by_ns = gemmd_now_ns() + 200 * 1000000ull;
    loop_quiet(&d->inbox);
    lsn_stopping(&d->lsn);
    lsn_stop_listening(&d->lsn);
    uv_timer_stop(&d->stats_timer);
    /* the stats timer doubles as the wait for the last replies */
    uv_timer_start(&d->stats_timer, on_last_replies, 0, 0);
}

/* Fills the limits left at 0 ("from the host") from RAM and the cgroup. */
static void resolve_limits(gemmd *d)
{
    gemmd_config *c = &d->cfg;
    uint64_t ram = sysmem_total();
    uint64_t cg = sysmem_cgroup_limit();
    uint64_t avail = ram != 0 && ram < cg ? ram : cg;
    if (avail == UINT64_MAX)
        avail = 8ull << 30; /* nothing known: assume a small host */
    if (ram == 0)
        ram = avail;
    d->mem_budget = c->memory_budget != 0 ? c->memory_budget : avail / 2;
    d->user_memory = c->user_memory != 0 ? c->user_memory : d->mem_budget / 2;
    if (c->client_pending == 0)
        c->client_pending = c->client_inflight;
    if (c->client_bytes == 0)
        c->client_bytes = ram;
    if (c->user_bytes == 0)
        c->user_bytes = ram;
    if (c->max_pinned_bytes == 0)
        c->max_pinned_bytes = ram / 2;
    else if (c->max_pinned_bytes == UINT64_MAX)
        c->max_pinned_bytes = 0; /* the backend's "no cap" */
    char cgs[32] = "none";
    if (cg != UINT64_MAX)
        snprintf(cgs, sizeof(cgs), "%.2f GiB", (double)cg / (1 << 30));
    gemmd_log(LOG_INFO,
              "memory: RAM %.1f GiB, cgroup limit %s; budget %.2f GiB (%.2f "
              "GiB per user), pinned cap %.1f GiB",
              (double)ram / (1 << 30), cgs, (double)d->mem_budget / (1 << 30),
              (double)d->user_memory / (1 << 30),
              (double)c->max_pinned_bytes / (1 << 30));
}

/* spares_idle_fn: no GEMM queued or running. */
static bool spares_idle(void *arg)
{
    return sched_idle(&((gemmd *)arg)->sched);
}

/* Keeps --spare-bytes of spares (auto: 1 GiB, at most RAM / 16, when the
 * backend pins client buffers: cuda, whose pins cost 0.2 s a GB, or the
 * CPU backend's test pin) and answers LEND from now on. Main thread, last
 * before the loop runs. */
static void start_spares(gemmd *d, const reg_hooks *hooks)
{
    uint64_t b = d->cfg.spare_bytes;
    if (b == GEMMD_SPARE_AUTO) {
        uint64_t ram = sysmem_total();
        b = d->be.pins ? 1ull << 30 : 0;
        if (ram != 0 && b > ram / 16)
            b = ram / 16;
    } else if (b == UINT64_MAX) {
        b = 0;
    }
    spares_start(b, hooks->pin != NULL ? hooks : NULL, spares_idle, d);
    d->fdc.lend = spares_on();
}

int main(int argc, char **argv)
{
    static gemmd g; /* large (stats window): not on the stack */
    gemmd *d = &g;
    char msg[512];
    int rv;

    gemmd_config_defaults(&d->cfg);
    rv = gemmd_config_parse(&d->cfg, argc, argv);
    if (rv != 0)
        return rv == 1 ? 0 : 2;
    gemmd_log_level = d->cfg.log_level;
    signal(SIGPIPE, SIG_IGN);
    /* one descriptor per connection: allow as many as we may */
    struct rlimit nofile;
    if (getrlimit(RLIMIT_NOFILE, &nofile) == 0 &&
        nofile.rlim_cur < nofile.rlim_max) {
        nofile.rlim_cur = nofile.rlim_max;
        setrlimit(RLIMIT_NOFILE, &nofile);
    }
    resolve_limits(d);

    stats_init(&d->stats);
    if ((rv = gemmd_backend_open(&d->be, &d->cfg, msg, sizeof(msg))) != 0) {
        gemmd_log(LOG_ERR, "backend %s: %s", d->cfg.backend, msg);
        return 1;
    }
    reg_hooks hooks = {0};
    hooks.arg = &d->be;
    hooks.free_tensor = free_tensor;
    if (d->be.pins && d->be.ops->pin != NULL) {
        hooks.reserve =
            (int (*)(void *, size_t, char *, size_t))d->be.ops->pin_reserve;
        hooks.unreserve = (void (*)(void *, size_t))d->be.ops->pin_unreserve;
        hooks.pin = (int (*)(void *, void *, size_t, void **, char *,
                             size_t))d->be.ops->pin;
        hooks.unpin = (void (*)(void *, void *, void *))d->be.ops->unpin;
    }
    /* past here a failure closes the backend too: its threads (the
     * workers, the cuda backend's calibration) must not outlive main */
    if (reg_init(&d->reg, &hooks) != GEMM_OK) {
        gemmd_log(LOG_ERR, "out of memory");
        d->be.ops->fini(&d->be);
        return 1;
    }

    d->loop = uv_default_loop();
    if (loop_inbox_init(&d->inbox, d->loop, d->cfg.spin_us, on_events, d) !=
        GEMM_OK) {
        gemmd_log(LOG_ERR, "cannot make the inbox");
        d->be.ops->fini(&d->be);
        return 1;
    }
    uv_signal_init(d->loop, &d->sig_term);
    uv_signal_init(d->loop, &d->sig_int);
    uv_signal_init(d->loop, &d->sig_hup);
    d->sig_term.data = d->sig_int.data = d->sig_hup.data = d;
    uv_signal_start(&d->sig_term, on_signal, SIGTERM);
    uv_signal_start(&d->sig_int, on_signal, SIGINT);
    uv_signal_start(&d->sig_hup, on_signal, SIGHUP);
    uv_timer_init(d->loop, &d->stats_timer);
    uv_timer_init(d->loop, &d->drain_timer);
    d->stats_timer.data = d->drain_timer.data = d;
    if (d->cfg.stats_interval_s > 0) {
        uint64_t ms = (uint64_t)(d->cfg.stats_interval_s * 1000);
        uv_timer_start(&d->stats_timer, on_stats, ms, ms);
    }

    if ((rv = sched_start(&d->sched, &d->be, complete_job_done, d,
                          d->cfg.spin_us)) != 0) {
        gemmd_log(LOG_ERR, "cannot start workers: %s", gemm_strerror(rv));
        d->be.ops->fini(&d->be);
        return 1;
    }
    sched_policy(&d->sched, d->cfg.split_volume, d->cfg.split_same_gpu,
                 d->cfg.device_fail_limit);
    if (d->be.ndevices > 1)
        gemmd_log(LOG_NOTICE,
                  "%u devices, %u workers each; GEMMs from %llu (m*n*k) "
                  "split across them; a device leaves placement after %u "
                  "failures in a row",
                  d->be.ndevices, d->be.dev_workers,
                  (unsigned long long)d->cfg.split_volume,
                  d->cfg.device_fail_limit);
    d->sched.between_ns = (uint64_t)d->cfg.slice_ms * 1000000;
    gemmd_log(LOG_INFO,
              "work: slices of %u ms%s, large GEMMs in %u panels, GEMMs "
              "(and batches) up to %.3g flops, batches of up to %llu "
              "problems; %u unregistered descriptors per user",
              d->cfg.slice_ms, d->cfg.slice_ms ? "" : " (off: whole GEMMs)",
              d->cfg.gemm_panels, (double)d->cfg.max_gemm_flops,
              (unsigned long long)d->cfg.max_batch, d->cfg.user_fds);
    if ((rv = open_socket_side(d, msg, sizeof(msg))) != 0) {
        gemmd_log(LOG_ERR, "%s", msg);
        sched_stop(&d->sched);
        d->be.ops->fini(&d->be);
        return 1;
    }
    if ((rv = metrics_start(d, msg, sizeof(msg))) != 0) {
        gemmd_log(LOG_ERR, "%s", msg);
        close_socket_side(d);
        sched_stop(&d->sched);
        d->be.ops->fini(&d->be);
        return 1;
    }
    start_spares(d, &hooks);
    gemmd_log(LOG_NOTICE, "gemmd %s listening on %s (backend %s: %s)",
              GEMM_VERSION_STRING, d->cfg.listen, d->be.ops->name,
              d->be.device);
    char ready[1024];
    snprintf(ready, sizeof(ready),
             "READY=1\nSTATUS=serving on %.512s (%s: "
             "%.127s)",
             d->cfg.listen, d->be.ops->name, d->be.device);
    gemmd_notify(ready);

    uv_run(d->loop, UV_RUN_DEFAULT);

    spares_stop();
    sched_stop(&d->sched);
    reg_fini(&d->reg);
    users_fini(&d->users);
    d->be.ops->fini(&d->be);
    uv_loop_close(d->loop);
    loop_inbox_fini(&d->inbox);
    trace_report();
    gemmd_log(LOG_NOTICE, "gemmd stopped: served %llu, failed %llu",
              (unsigned long long)d->stats.served,
              (unsigned long long)d->stats.failed);
    return 0;
}
