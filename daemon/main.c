/*
 * main.c: gemmd's start-up and shutdown. Reading order of the daemon:
 * main() -> gemmd_config_parse() -> gemmd_backend_open() -> sched_start()
 * -> srv_open() -> uv_run(): then on_wake() dispatches each event
 * (dispatch.c) until SIGTERM drains the queue and closes everything.
 */
#include "gemmd.h"
#include "log.h"
#include "notify.h"
#include "shmguard.h"

#include <gemm/gemm.h>

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

/* Loop thread: dispatches what the inbox holds; returns whether it held
 * anything. */
static bool run_inbox(gemmd *d)
{
    gemmd_event *ev = srv_take_inbox(d);
    if (ev == NULL)
        return false;
    while (ev != NULL) {
        gemmd_event *next = ev->next;
        gemmd_dispatch(d, ev);
        ev = next;
    }
    if (d->draining && d->inflight == 0 && !d->stopped)
        close_all(d);
    return true;
}

/* Loop thread, while spinning: poll the inbox; stop after spin_us without
 * an event (the loop then sleeps in epoll until the next uv_async_send). */
static void on_spin(uv_idle_t *h)
{
    gemmd *d = h->data;
    uint64_t now = gemmd_now_ns();
    if (run_inbox(d))
        d->spin_until = now + (uint64_t)d->cfg.spin_us * 1000;
    else if (now >= d->spin_until || d->stopped)
        uv_idle_stop(h);
}

/* Loop thread: the inbox has events. */
static void on_wake(uv_async_t *h)
{
    gemmd *d = h->data;
    run_inbox(d);
    if (d->cfg.spin_us != 0 && !d->stopped) {
        d->spin_until = gemmd_now_ns() + (uint64_t)d->cfg.spin_us * 1000;
        if (!uv_is_active((uv_handle_t *)&d->spin))
            uv_idle_start(&d->spin, on_spin);
    }
}

static void on_stats(uv_timer_t *t)
{
    gemmd_status_line(t->data);
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
        gemmd_status_line(d); /* nothing to reload: report instead */
        return;
    }
    begin_drain(d, signum == SIGTERM ? "SIGTERM" : "SIGINT");
}

/* Closes the socket and every loop handle; uv_run then returns. The last
 * replies already handed to nng get a moment to leave first. */
static void on_last_replies(uv_timer_t *t)
{
    gemmd *d = t->data;
    if (atomic_load(&d->sends_pending) != 0 && d->draining) {
        uv_timer_start(t, on_last_replies, 5, 0); /* drain timer bounds it */
        return;
    }
    watchdog_stop(&d->watchdog);
    srv_close(d);
    uv_close((uv_handle_t *)&d->wake, NULL);
    uv_close((uv_handle_t *)&d->spin, NULL);
    uv_close((uv_handle_t *)&d->sig_term, NULL);
    uv_close((uv_handle_t *)&d->sig_int, NULL);
    uv_close((uv_handle_t *)&d->sig_hup, NULL);
    uv_close((uv_handle_t *)&d->stats_timer, NULL);
    uv_close((uv_handle_t *)&d->drain_timer, NULL);
}

static void close_all(gemmd *d)
{
    d->stopped = true;
    uv_timer_stop(&d->stats_timer);
    /* the stats timer doubles as the wait for the last replies */
    uv_timer_start(&d->stats_timer, on_last_replies, 0, 0);
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
    /* one descriptor per registered buffer: allow as many as we may */
    struct rlimit nofile;
    if (getrlimit(RLIMIT_NOFILE, &nofile) == 0 &&
        nofile.rlim_cur < nofile.rlim_max) {
        nofile.rlim_cur = nofile.rlim_max;
        setrlimit(RLIMIT_NOFILE, &nofile);
    }
    if (shmguard_install() != 0) {
        gemmd_log(LOG_ERR, "cannot install the SIGBUS handler");
        return 1;
    }

    stats_init(&d->stats);
    pthread_mutex_init(&d->inbox_mu, NULL);
    if ((rv = gemmd_backend_open(&d->be, &d->cfg, msg, sizeof(msg))) != 0) {
        gemmd_log(LOG_ERR, "backend %s: %s", d->cfg.backend, msg);
        return 1;
    }
    reg_hooks hooks = {0};
    hooks.arg = &d->be;
    hooks.free_tensor = free_tensor;
    if (d->be.ops->pin != NULL) {
        hooks.arg = &d->be;
        hooks.pin = (int (*)(void *, void *, size_t, void **, char *,
                             size_t))d->be.ops->pin;
        hooks.unpin = (void (*)(void *, void *, void *))d->be.ops->unpin;
    }
    if (reg_init(&d->reg, &hooks) != GEMM_OK) {
        gemmd_log(LOG_ERR, "out of memory");
        return 1;
    }

    d->loop = uv_default_loop();
    uv_async_init(d->loop, &d->wake, on_wake);
    d->wake.data = d;
    uv_idle_init(d->loop, &d->spin);
    d->spin.data = d;
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

    if ((rv = sched_start(&d->sched, &d->be, gemmd_job_done, d,
                          d->cfg.spin_us)) != 0) {
        gemmd_log(LOG_ERR, "cannot start workers: %s", gemm_strerror(rv));
        return 1;
    }
    if ((rv = srv_open(d, msg, sizeof(msg))) != 0) {
        gemmd_log(LOG_ERR, "%s", msg);
        sched_stop(&d->sched);
        return 1;
    }
    if (watchdog_start(&d->watchdog, d, d->cfg.watchdog_s) != 0)
        gemmd_log(LOG_WARNING, "cannot start the listener watchdog");
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

    sched_stop(&d->sched);
    gemmd_clients_free(d);
    reg_fini(&d->reg);
    d->be.ops->fini(&d->be);
    uv_loop_close(d->loop);
    pthread_mutex_destroy(&d->inbox_mu);
    gemmd_log(LOG_NOTICE, "gemmd stopped: served %llu, failed %llu",
              (unsigned long long)d->stats.served,
              (unsigned long long)d->stats.failed);
    return 0;
}
