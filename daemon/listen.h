/*
 * listen.h: the listening socket. Binds the Unix socket with its final
 * mode (and group), accepts connections and applies the caps: the
 * daemon's connection limit (from --max-connections and RLIMIT_NOFILE) and
 * each uid's (--user-connections). A connection past a cap is accepted and
 * closed at once, and at EMFILE a spare descriptor is spent to take one
 * off the backlog, so the backlog never fills and the loop never spins on
 * a listener it cannot serve. Also the sweep timer: one timer, armed only
 * while a deadline is pending, that runs the sweepers the layers above
 * installed. Loop thread unless noted.
 */
#ifndef GEMMD_LISTEN_H
#define GEMMD_LISTEN_H

#include "config.h"
#include "users.h"

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>
#include <uv.h>

/* A connection passed the caps: take fd (the callee owns it then) of
 * uid/pid, whose per-user entry is u. Returns NULL, or why it cannot be
 * served (the listener then closes fd and counts a refusal). */
typedef const char *(*lsn_accept_fn)(void *arg, int fd, uint64_t uid, pid_t pid,
                                     gemmd_user *u);

/* Acts on what is due at now; returns the next deadline (ns), or
 * UINT64_MAX when none is pending. */
typedef uint64_t (*lsn_sweep_fn)(void *arg, uint64_t now);

#define LSN_SWEEPERS 4

typedef struct lsn_listener {
    uv_loop_t *loop;
    const gemmd_config *cfg;
    gemmd_users *users;
    lsn_accept_fn on_accept;
    void *accept_arg;

    int fd; /* -1 when not listening */
    uv_poll_t poll;
    int reserve_fd; /* spent to refuse a connection at EMFILE */
    char path[512];
    dev_t dev; /* the socket file we bound (unlinked only if so) */
    ino_t ino;
    bool stopped; /* the daemon is stopping: refuse, arm nothing */

    uint32_t nconns;       /* open connections, all kinds */
    uint32_t max_conns;    /* from cfg and RLIMIT_NOFILE */
    uint32_t users_active; /* uids with a connection open */
    uint64_t accepted;     /* connections taken, all time */
    uint64_t refused;      /* past a cap, at once */

    uv_timer_t sweep_timer; /* the next deadline of any sweeper */
    uint64_t sweep_at_ns;   /* when it fires; 0 = not armed */
    struct {
        lsn_sweep_fn fn;
        void *arg;
    } sweepers[LSN_SWEEPERS];
    unsigned nsweepers;
} lsn_listener;

/* Fills l; nothing is opened yet. Main thread. */
void lsn_init(lsn_listener *l, uv_loop_t *loop, const gemmd_config *cfg,
              gemmd_users *users);

/* Installs what takes accepted connections. Main thread, before lsn_open. */
void lsn_set_accept(lsn_listener *l, lsn_accept_fn on_accept, void *arg);

/* Adds a sweeper (at most LSN_SWEEPERS). Main thread, before lsn_open. */
void lsn_add_sweeper(lsn_listener *l, lsn_sweep_fn fn, void *arg);

/* Binds and listens on cfg->listen, and starts accepting. Returns a
 * gemm_error with a message. Main thread. */
int lsn_open(lsn_listener *l, char *msg, size_t len);

/* A connection was taken (counts toward the caps until lsn_release). */
void lsn_admitted(lsn_listener *l, gemmd_user *u);

/* A connection of user u closed. */
void lsn_release(lsn_listener *l, gemmd_user *u);

/* Makes sure the sweepers run by at_ns. */
void lsn_arm(lsn_listener *l, uint64_t at_ns);

/* Runs the sweepers now and arms the timer for the next deadline. */
void lsn_sweep(lsn_listener *l);

/* The daemon stops: connections are refused and no deadline is armed. */
void lsn_stopping(lsn_listener *l);

/* Stops accepting and removes the socket file (only ours). */
void lsn_stop_listening(lsn_listener *l);

/* Stops listening and closes the sweep timer. */
void lsn_close(lsn_listener *l);

#endif
