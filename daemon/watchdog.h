/*
 * watchdog.h: keeps the listener accepting. nng 1.5.2 (Debian's) stops
 * accepting new connections for good once a peer hangs up during the SP
 * handshake (nanomsg/nng#1518, fixed in 1.6.0): clients already connected
 * go on, every new one waits forever. Any local user who can open the
 * socket could do that. A thread dials the daemon's own URL every interval
 * and asks Hello; when a fresh connection is not served, it asks the loop
 * to re-create the listener (EV_RELISTEN). Its own connection is
 * recognised by peer pid and not counted as a client.
 */
#ifndef GEMMD_WATCHDOG_H
#define GEMMD_WATCHDOG_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>

struct gemmd;

typedef struct gemmd_watchdog {
    struct gemmd *d;
    pthread_t thread;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool stop;
    bool running;
    double interval_s;
    atomic_ullong probes, failures, restarts;
} gemmd_watchdog;

/* Starts the thread (interval_s > 0). Returns 0 or -1. Main thread. */
int watchdog_start(gemmd_watchdog *w, struct gemmd *d, double interval_s);

/* Stops and joins it. Loop/main thread. */
void watchdog_stop(gemmd_watchdog *w);

#endif
