/*
 * loop.c: the loop's inbox and its wake-ups (uv_async for a sleeping loop,
 * an idle handle that spins on it for --spin-us after each event); see
 * loop.h.
 */
#include "loop.h"
#include "spinguard.h"

#include <gemm/types.h>

/* Loop thread: hands what the inbox holds to on_events; returns whether it
 * held anything. */
static bool run_inbox(loop_inbox *ib)
{
    pthread_mutex_lock(&ib->mu);
    gemmd_event *ev = ib->head;
    ib->head = ib->tail = NULL;
    pthread_mutex_unlock(&ib->mu);
    if (ev == NULL)
        return false;
    ib->on_events(ib->arg, ev);
    return true;
}

/* Loop thread, while spinning: poll the inbox; stop after spin_ns without
 * an event (the loop then sleeps in epoll until the next uv_async_send).
 * Pushes wake the loop again from the moment spinning is cleared, which
 * happens only with the inbox seen empty under the lock. */
static void on_spin(uv_idle_t *h)
{
    loop_inbox *ib = h->data;
    uint64_t now = gemmd_now_ns();
    /* off the core for long since the spin (re)started, not busy in
     * callbacks (which use CPU time): the host has no core to spare. The
     * thread's CPU clock (a system call) is read only once that long has
     * passed at all. */
    bool preempted =
        now - ib->spin_wall0 > SPIN_GAP_NS &&
        now - ib->spin_wall0 > spin_thread_ns() - ib->spin_cpu0 + SPIN_GAP_NS;
    if (preempted)
        spin_preempted(now);
    if (run_inbox(ib) && !preempted) {
        ib->spin_until = now + ib->spin_ns;
        ib->spin_wall0 = now;
        ib->spin_cpu0 = spin_thread_ns();
        return;
    }
    if (now < ib->spin_until && !ib->quiet && !preempted)
        return;
    if (!preempted)
        spin_clean();
    pthread_mutex_lock(&ib->mu);
    bool empty = ib->head == NULL;
    if (empty)
        ib->spinning = false;
    pthread_mutex_unlock(&ib->mu);
    if (empty) /* else the next pass takes what came meanwhile */
        uv_idle_stop(h);
}

/* Loop thread: the inbox has events. */
static void on_wake(uv_async_t *h)
{
    loop_inbox *ib = h->data;
    run_inbox(ib);
    loop_spin(ib);
}

int loop_inbox_init(loop_inbox *ib, uv_loop_t *loop, unsigned spin_us,
                    loop_events_fn on_events, void *arg)
{
    ib->spin_ns = (uint64_t)spin_us * 1000;
    ib->on_events = on_events;
    ib->arg = arg;
    if (pthread_mutex_init(&ib->mu, NULL) != 0)
        return GEMM_ERR_INTERNAL;
    uv_async_init(loop, &ib->wake, on_wake);
    ib->wake.data = ib;
    uv_idle_init(loop, &ib->spin);
    ib->spin.data = ib;
    return GEMM_OK;
}

void loop_push(loop_inbox *ib, gemmd_event *ev)
{
    ev->next = NULL;
    pthread_mutex_lock(&ib->mu);
    if (ib->closed) {
        pthread_mutex_unlock(&ib->mu);
        return;
    }
    if (ib->tail != NULL)
        ib->tail->next = ev;
    else
        ib->head = ev;
    ib->tail = ev;
    if (!ib->spinning)
        uv_async_send(&ib->wake);
    pthread_mutex_unlock(&ib->mu);
}

void loop_drain(loop_inbox *ib)
{
    run_inbox(ib);
}

void loop_spin(loop_inbox *ib)
{
    if (ib->spin_ns == 0 || ib->quiet)
        return;
    uint64_t now = gemmd_now_ns();
    if (uv_is_active((uv_handle_t *)&ib->spin)) {
        ib->spin_until = now + ib->spin_ns;
        return;
    }
    if (!spin_allowed(now))
        return;
    ib->spin_until = now + ib->spin_ns;
    ib->spin_wall0 = now;
    ib->spin_cpu0 = spin_thread_ns();
    pthread_mutex_lock(&ib->mu);
    ib->spinning = true;
    pthread_mutex_unlock(&ib->mu);
    uv_idle_start(&ib->spin, on_spin);
}

void loop_quiet(loop_inbox *ib)
{
    ib->quiet = true;
}

void loop_inbox_close(loop_inbox *ib)
{
    pthread_mutex_lock(&ib->mu);
    ib->closed = true;
    pthread_mutex_unlock(&ib->mu);
    uv_close((uv_handle_t *)&ib->wake, NULL);
    uv_close((uv_handle_t *)&ib->spin, NULL);
}

void loop_inbox_fini(loop_inbox *ib)
{
    pthread_mutex_destroy(&ib->mu);
}
