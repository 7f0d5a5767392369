/*
 * spinguard.c: the back-off of gemmd's spinning on a contended host; see
 * spinguard.h.
 */
#include "spinguard.h"

#include <host.h>

#include <stdatomic.h>
#include <time.h>

#define SPIN_QUIET_NS    10000000ull /* the first back-off, 10 ms */
#define SPIN_STRIKES_MAX 7           /* 10 ms << 7: 1.28 s */
#define SPIN_SAMPLE_NS   10000000ull /* /proc/loadavg read at most this often */

static _Atomic uint64_t quiet_until; /* ns: no spin starts before */
static _Atomic unsigned strikes;     /* preemptions in a row */
static _Atomic uint64_t next_sample; /* ns: when the load is read again */
static atomic_bool crowded;          /* as many runnable threads as CPUs */

/* Once per SPIN_SAMPLE_NS, by the thread that claims the sample: crowded
 * when the kernel counts no CPU left for a spinner (common/host.h;
 * unreadable: never crowded). */
static void sample(uint64_t now)
{
    uint64_t due = atomic_load_explicit(&next_sample, memory_order_relaxed);
    if (now < due || !atomic_compare_exchange_strong(&next_sample, &due,
                                                     now + SPIN_SAMPLE_NS))
        return;
    atomic_store_explicit(&crowded, host_idle_cpus() == 0,
                          memory_order_relaxed);
}

bool spin_allowed(uint64_t now)
{
    sample(now);
    return !atomic_load_explicit(&crowded, memory_order_relaxed) &&
           now >= atomic_load_explicit(&quiet_until, memory_order_relaxed);
}

void spin_preempted(uint64_t now)
{
    unsigned s = atomic_load_explicit(&strikes, memory_order_relaxed);
    if (s < SPIN_STRIKES_MAX)
        atomic_store_explicit(&strikes, s + 1, memory_order_relaxed);
    atomic_store_explicit(&quiet_until, now + (SPIN_QUIET_NS << s),
                          memory_order_relaxed);
}

void spin_clean(void)
{
    if (atomic_load_explicit(&strikes, memory_order_relaxed) != 0)
        atomic_store_explicit(&strikes, 0, memory_order_relaxed);
}

uint64_t spin_thread_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}
