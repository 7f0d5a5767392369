/*
 * daemon.h: the integration tests' fixture. gemmd_start() makes a private
 * directory (mkdtemp), runs the real gemmd (GEMMD_PATH, from CMake) with the
 * CPU backend (or $GEMM_TEST_GEMMD, to test another build) listening on
 * ipc://DIR/gemmd.sock and its stderr in DIR/gemmd.log, and waits until
 * gemm_ping answers. gemmd_stop() sends SIGTERM, waits for the exit and removes
 * the directory.
 *
 * gemmd runs as its own unprivileged user, as the shipped unit runs it: when
 * the tests run as root, as "nobody" (so every client of the suite is of
 * another uid than the daemon, and every buffer crosses users through the
 * descriptor channel); GEMM_TEST_DAEMON_USER names another user, or "" for
 * the tests' own. It is exec'ed through a descriptor opened before the
 * switch (fexecve), so the clone may sit in a 0700 home directory.
 *
 * When the test made a hold (hold.h), gemmd gets its end of the hold
 * socket. Environment: GEMM_TEST_GEMMD (another gemmd binary),
 * GEMM_TEST_GEMMD_ARGS (options added to every gemmd the suite starts,
 * unless a test gives the same option: "--devices 0,0"),
 * GEMM_TEST_LOG_LEVEL (gemmd's --log-level, default info), GEMM_TEST_KEEP=1
 * (keep each private directory and its gemmd.log), GEMM_TEST_DAEMON_USER
 * (above).
 *
 * The Criterion helpers fixture_start()/fixture_stop() keep one daemon and
 * one connected client (g_client) per test and assert on every step
 * (exit status 0 included). Criterion runs each test in its own process,
 * so these globals are per test. Not thread-safe: call from the test's main
 * thread.
 */
#ifndef GEMM_TESTS_UTIL_DAEMON_H
#define GEMM_TESTS_UTIL_DAEMON_H

#include <gemm/gemm.h>

#include <pwd.h>
#include <stdbool.h>
#include <sys/types.h>

typedef struct gemmd_proc {
    pid_t pid;      /* 0 once reaped */
    int status;     /* waitpid status once reaped */
    char dir[128];  /* private directory */
    char sock[192]; /* DIR/gemmd.sock */
    char url[224];  /* ipc://DIR/gemmd.sock */
    char log[192];  /* DIR/gemmd.log: gemmd's stderr */
} gemmd_proc;

/* When non-zero, gemmd_start() runs gemmd with RLIMIT_NOFILE (soft and
 * hard) of this many descriptors. */
extern unsigned tu_daemon_nofile;

/* The user gemmd runs as (see above), or NULL for the tests' own. */
const struct passwd *tu_daemon_user(void);

/* In a forked child: opens path, becomes uid:gid with supplementary groups
 * (when uid is not already ours) and execs it through the descriptor with
 * argv. Returns only on failure (then _exits 125..127). */
void tu_exec_as(uid_t uid, gid_t gid, const gid_t *groups, int ngroups,
                const char *path, char *const argv[]);

/* In a forked child: execs gemmd (argv[0] ignored: tu_gemmd_path()) as
 * tu_daemon_user(). Returns only on failure. */
void tu_exec_gemmd(char *const argv[]);

/* Starts gemmd with the default options plus extra (NULL-terminated; an
 * option given there replaces the default one). Returns 0 when it answers a
 * ping, else -1 with why filled (the daemon is killed and the directory
 * removed). */
int gemmd_start(gemmd_proc *p, const char *const *extra, char *why,
                size_t whylen);

/* Waits up to timeout_s for the daemon to exit; true if it did (status in
 * p->status). */
bool gemmd_wait_exit(gemmd_proc *p, double timeout_s);

/* SIGTERM, wait up to timeout_s (then SIGKILL), remove the directory.
 * Returns the waitpid status, or -1 if it had to be killed. */
int gemmd_stop(gemmd_proc *p, double timeout_s);

/* Kills (if still running) and removes the directory. */
void gemmd_destroy(gemmd_proc *p);

/* Prints the last bytes of gemmd's log to stderr. */
void gemmd_dump_log(const gemmd_proc *p);

/* Lines of p's log that contain needle. */
int tu_log_count(const gemmd_proc *p, const char *needle);

/* Polls p's log for up to timeout_s until more than `after` lines contain
 * needle (after: tu_log_count() taken before the event); returns whether
 * they did. For what only the log shows (a signal handled). */
bool tu_log_wait(const gemmd_proc *p, const char *needle, int after,
                 double timeout_s);

/* Opens a client on p with a request timeout; asserts success. */
gemm_client *tu_client(const gemmd_proc *p, int timeout_ms);

/* The daemon's counters through c; asserts gemm_get_status succeeds. */
gemm_status tu_status(gemm_client *c);

/* The backend the suite runs on ($GEMM_TEST_BACKEND, else "cpu") and the
 * gemmd binary it runs ($GEMM_TEST_GEMMD, else the one just built). */
const char *tu_backend(void);
const char *tu_gemmd_path(void);

/* Seconds since an arbitrary start (CLOCK_MONOTONIC). */
double tu_now(void);
/* Returns once tu_now() >= t: for a test whose state is time itself (a
 * request's deadline that must have passed). */
void tu_wait_until(double t);

/* Pauses between two looks at some state in a poll with a deadline;
 * never a way to let something happen. */
void tu_sleep_ms(int ms);

/* ---- Criterion fixture ---- */
extern gemmd_proc g_gemmd;
extern gemm_client *g_client;

/* Starts gemmd with extra options and connects g_client; asserts. */
void fixture_start(const char *const *extra);
/* Releases the test hold for good (hold.h), closes g_client, SIGTERMs
 * gemmd, asserts that it exits 0 within 20 s. */
void fixture_stop(void);
/* .init/.fini for suites with the default options. */
void fixture_setup(void);
void fixture_teardown(void);

/* Asserts that the daemon answers a ping and computes a small GEMM
 * correctly on a fresh buffer of client c. */
void tu_assert_healthy(gemm_client *c);

/* Waits for rq, which must fail with GEMM_ERR_TIMEOUT, its message
 * containing needle; returns the seconds the wait took. */
double tu_wait_timeout(gemm_request *rq, const char *needle);

/* Polls c's status until no job is queued or running, and asserts that
 * happens within seconds. */
void tu_assert_queue_drains(gemm_client *c, double seconds);

#endif
