/*
 * waitspin.c: waiting for a reply without the wake-up at its end.
 *
 * A thread asleep in nng_aio_wait() is woken by nng's own thread when the
 * reply has come in; on a virtual machine that wake-up of an idle vCPU
 * costs tens of microseconds (measured on the H200 host: 8-49 us of a
 * round trip, more for longer waits). So the client remembers how long
 * recent requests of each kind and shape took (a small table, last value
 * wins) and, for one it has seen, sleeps until a margin before the reply
 * is due (the margin: half the expected time, at least CLI_SPIN_MIN_US,
 * at most the client's spin limit), then spins on the aio's completion
 * flag until the reply comes or the margin has passed twice over, and
 * only then sleeps in nng_aio_wait(). A request of a new shape waits as
 * before and fills the table. A spin that ends before its reply (a loaded
 * host, where the spinning takes the CPU the daemon needs) makes the next
 * 2, 4, .. up to 64 requests of that key wait without one; a spin that
 * sees its reply ends the back-off. The limit (default 200 us) is
 * GEMM_CLIENT_SPIN_US, read when a client opens, or
 * gemm_client_set_spin(); 0 turns the spinning off.
 */
#include "internal.h"

#include <errno.h>
#include <stdlib.h>
#include <time.h>

/* The least margin: a timed sleep on such a host ends up to ~100 us late
 * (the timer's slack and the vCPU's wake-up), and a sleep that ends after
 * the reply has come saves nothing. */
#define CLI_SPIN_MIN_US 100u
/* The default limit of a margin, us. */
#define CLI_SPIN_DEFAULT_US 200

int cli_spin_default(void)
{
    const char *e = getenv("GEMM_CLIENT_SPIN_US");
    char *end;
    if (e == NULL || *e == '\0')
        return CLI_SPIN_DEFAULT_US;
    long v = strtol(e, &end, 10);
    return *end == '\0' && v >= 0 && v <= 1000000 ? (int)v
                                                  : CLI_SPIN_DEFAULT_US;
}

static inline void cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield");
#endif
}

uint64_t cli_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

uint64_t cli_wait_key(const Gemm__Request *req, size_t packed)
{
    uint64_t h = 0x9E3779B97F4A7C15ull ^ (uint64_t)req->body_case;
    uint64_t v[4] = {packed, 0, 0, 0};
    if (req->body_case == GEMM__REQUEST__BODY_GEMM && req->gemm != NULL) {
        v[1] = req->gemm->m, v[2] = req->gemm->n, v[3] = req->gemm->k;
    } else if (req->body_case == GEMM__REQUEST__BODY_BLAS3 &&
               req->blas3 != NULL) {
        v[1] = req->blas3->m, v[2] = req->blas3->n, v[3] = req->blas3->k;
    }
    for (int i = 0; i < 4; i++) {
        h ^= v[i] + 0x9E3779B97F4A7C15ull + (h << 6) + (h >> 2);
        h *= 0xbf58476d1ce4e5b9ull;
    }
    return h | 1; /* 0 marks a free slot */
}

/* The most requests of a key that wait without spinning after misses. */
#define CLI_SPIN_BACKOFF_MAX 64

/* The remembered round trip of key, us (0: none, or the key is backing
 * off its spins: this request waits without one). */
static uint32_t lookup(gemm_client *c, uint64_t key)
{
    uint32_t us = 0;
    pthread_mutex_lock(&c->mtx);
    for (int i = 0; i < CLI_RTT_SLOTS; i++)
        if (c->rtt[i].key == key) {
            if (c->rtt[i].skip > 0)
                c->rtt[i].skip--;
            else
                us = c->rtt[i].us;
            c->rtt[i].used = ++c->rtt_clock;
            break;
        }
    pthread_mutex_unlock(&c->mtx);
    return us;
}

/* How key's last spin ended: with its reply (the back-off ends) or
 * before it (the next 2^misses requests, at most CLI_SPIN_BACKOFF_MAX,
 * wait without spinning). */
static void spun(gemm_client *c, uint64_t key, bool hit)
{
    pthread_mutex_lock(&c->mtx);
    for (int i = 0; i < CLI_RTT_SLOTS; i++)
        if (c->rtt[i].key == key) {
            struct cli_rtt *e = &c->rtt[i];
            if (hit) {
                e->misses = 0;
            } else {
                if (e->misses < 6)
                    e->misses++;
                e->skip = (uint16_t)(1u << e->misses);
                if (e->skip > CLI_SPIN_BACKOFF_MAX)
                    e->skip = CLI_SPIN_BACKOFF_MAX;
            }
            break;
        }
    pthread_mutex_unlock(&c->mtx);
}

void cli_wait_learn(gemm_client *c, uint64_t key, uint64_t rtt_us)
{
    if (key == 0 || rtt_us == 0)
        return;
    uint32_t us = rtt_us > UINT32_MAX ? UINT32_MAX : (uint32_t)rtt_us;
    pthread_mutex_lock(&c->mtx);
    int slot = 0;
    for (int i = 0; i < CLI_RTT_SLOTS; i++) {
        if (c->rtt[i].key == key) {
            slot = i;
            break;
        }
        if (c->rtt[i].used < c->rtt[slot].used)
            slot = i; /* the least recently used, or a free one */
    }
    if (c->rtt[slot].key != key) { /* a new key: no back-off */
        c->rtt[slot].skip = 0;
        c->rtt[slot].misses = 0;
    }
    c->rtt[slot].key = key;
    c->rtt[slot].us = us;
    c->rtt[slot].used = ++c->rtt_clock;
    pthread_mutex_unlock(&c->mtx);
}

static void until(struct timespec *ts, uint64_t ns)
{
    ts->tv_sec = (time_t)(ns / 1000000000u);
    ts->tv_nsec = (long)(ns % 1000000000u);
}

static bool done(struct gemm_request *r)
{
    return atomic_load_explicit(&r->done, memory_order_acquire) != 0;
}

void cli_wait_near(struct gemm_request *r)
{
    gemm_client *c = r->client;
    const uint32_t limit = (uint32_t)atomic_load(&c->spin_us);
    if (limit == 0 || done(r))
        return;
    const uint32_t expect = lookup(c, r->key);
    if (expect == 0)
        return;
    uint64_t margin = expect / 2;
    if (margin < CLI_SPIN_MIN_US)
        margin = CLI_SPIN_MIN_US;
    if (margin > limit)
        margin = limit;
    const uint64_t due = r->t0_ns + (uint64_t)expect * 1000u;
    const uint64_t wake = due - margin * 1000u;
    if (cli_now_ns() < wake) {
        struct timespec ts;
        until(&ts, wake);
        pthread_mutex_lock(&r->mtx);
        while (!done(r) &&
               pthread_cond_timedwait(&r->cv, &r->mtx, &ts) != ETIMEDOUT) {
        }
        pthread_mutex_unlock(&r->mtx);
    }
    const uint64_t end = due + margin * 1000u;
    bool spins = false;
    while (!done(r) && cli_now_ns() < end) {
        cpu_relax();
        spins = true;
    }
    if (spins)
        spun(c, r->key, done(r));
}

void cli_wait_done(void *arg)
{
    struct gemm_request *r = arg;
    pthread_mutex_lock(&r->mtx);
    atomic_store_explicit(&r->done, 1, memory_order_release);
    pthread_cond_signal(&r->cv);
    pthread_mutex_unlock(&r->mtx);
}
