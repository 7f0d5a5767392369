/*
 * watchdog.c: the self-probe. One req0 socket per probe (a fresh
 * connection is the thing being tested), non-blocking dial, Hello with
 * send and receive timeouts. A failed probe while the daemon has a free
 * context to answer with means the listener is wedged (a false alarm costs
 * only a re-created listener: connected clients are not touched).
 */
#include "watchdog.h"
#include "gemmd.h"
#include "log.h"

#include <gemm/gemm.h>

#include <nng/protocol/reqrep0/req.h>

#include <errno.h>
#include <stdlib.h>
#include <time.h>

/* One probe: true when a fresh connection got its Hello answered. */
static bool probe(gemmd *d)
{
    nng_socket s;
    bool ok = false;
    if (nng_req0_open(&s) != 0)
        return true; /* cannot test: do not blame the listener */
    nng_socket_set_ms(s, NNG_OPT_SENDTIMEO, 500);
    nng_socket_set_ms(s, NNG_OPT_RECVTIMEO, 2000);
    nng_socket_set_ms(s, NNG_OPT_REQ_RESENDTIME, NNG_DURATION_INFINITE);
    Gemm__Request rq = GEMM__REQUEST__INIT;
    Gemm__HelloRequest h = GEMM__HELLO_REQUEST__INIT;
    rq.has_version = rq.has_id = true;
    rq.version = GEMM_PROTOCOL_VERSION;
    rq.id = 1;
    h.client_name = "gemmd-watchdog";
    rq.body_case = GEMM__REQUEST__BODY_HELLO;
    rq.hello = &h;
    uint8_t buf[64];
    size_t n = gemm__request__pack(&rq, buf);
    void *reply = NULL;
    size_t rlen = 0;
    if (nng_dial(s, d->cfg.listen, NULL, NNG_FLAG_NONBLOCK) == 0 &&
        nng_send(s, buf, n, 0) == 0 &&
        nng_recv(s, &reply, &rlen, NNG_FLAG_ALLOC) == 0) {
        ok = true;
        nng_free(reply, rlen);
    }
    nng_close(s);
    return ok;
}

static void *run(void *arg)
{
    gemmd_watchdog *w = arg;
    gemmd *d = w->d;
    pthread_mutex_lock(&w->mu);
    while (!w->stop) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        double t = ts.tv_sec + ts.tv_nsec / 1e9 + w->interval_s;
        ts.tv_sec = (time_t)t;
        ts.tv_nsec = (long)((t - (double)ts.tv_sec) * 1e9);
        pthread_cond_timedwait(&w->cv, &w->mu, &ts);
        if (w->stop)
            break;
        /* every context busy with long work: a timeout would prove
         * nothing */
        if (atomic_load(&d->busy_slots) >= d->nslots)
            continue;
        pthread_mutex_unlock(&w->mu);
        bool ok = probe(d);
        pthread_mutex_lock(&w->mu);
        atomic_fetch_add(&w->probes, 1);
        if (ok)
            continue;
        atomic_fetch_add(&w->failures, 1);
        if (w->stop)
            continue;
        gemmd_event *ev = calloc(1, sizeof(*ev));
        if (ev != NULL) {
            ev->kind = EV_RELISTEN;
            srv_push(d, ev);
        }
    }
    pthread_mutex_unlock(&w->mu);
    return NULL;
}

int watchdog_start(gemmd_watchdog *w, gemmd *d, double interval_s)
{
    w->d = d;
    w->stop = false;
    w->running = false;
    w->interval_s = interval_s;
    pthread_mutex_init(&w->mu, NULL);
    pthread_cond_init(&w->cv, NULL);
    if (interval_s <= 0)
        return 0;
    if (pthread_create(&w->thread, NULL, run, w) != 0)
        return -1;
    w->running = true;
    return 0;
}

void watchdog_stop(gemmd_watchdog *w)
{
    pthread_mutex_lock(&w->mu);
    w->stop = true;
    pthread_cond_signal(&w->cv);
    pthread_mutex_unlock(&w->mu);
    if (w->running)
        pthread_join(w->thread, NULL);
    w->running = false;
    pthread_cond_destroy(&w->cv);
    pthread_mutex_destroy(&w->mu);
}
