/*
 * hold.h: the test hold. gemmd_test (gemmd built with GEMMD_TEST_HOOKS)
 * has, on the CPU backend, a kernel "test-hold" (TU_HOLD_KERNEL) that
 * blocks the worker until the test releases it, so a test puts a GEMM in
 * "running" (and those behind it in "queued") and keeps it there exactly
 * as long as it needs, on any host, with no timing.
 *
 * tu_hold_setup() before the daemon starts (a suite's .init): on the CPU
 * backend, makes a socket pair whose one end gemmd_start() hands to gemmd
 * (GEMMD_TEST_HOLD_FD); a test that uses the hold calls tu_hold_need()
 * once the daemon runs. A GEMM with op.kernel = TU_HOLD_KERNEL then writes
 * one byte when the worker takes it (tu_hold_wait() reads it) and runs as
 * openblas once tu_hold_release() writes one back. tu_hold_close()
 * (fixture_stop() calls it) releases every hold for good, so a failing
 * test never leaves the daemon's worker blocked. Not on the cuda backend (the
 * hold exists only on the CPU one): tu_hold_need() skips the test there, saying
 * so. Test's main thread.
 */
#ifndef GEMM_TESTS_UTIL_HOLD_H
#define GEMM_TESTS_UTIL_HOLD_H

#include <gemm/gemm.h>

#include <stdbool.h>

#define TU_HOLD_KERNEL "test-hold"

/* The daemon's end of the hold socket for gemmd_start(), or -1. */
extern int tu_hold_daemon_fd;

/* On the cpu backend, makes the hold socket pair (once); elsewhere does
 * nothing. Call before starting the daemon. */
void tu_hold_setup(void);

/* Whether the hold works: tu_hold_setup() made one and the daemon g_client
 * talks to lists TU_HOLD_KERNEL (it is a gemmd_test). Asked once per test
 * process, after the fixture started. */
bool tu_hold_have(void);

/* Skips the calling test, saying why, unless tu_hold_have(). Call once the
 * fixture's daemon runs. */
void tu_hold_need(void);

/* Waits up to timeout_s for a held GEMM to reach the worker; asserts that
 * one did. */
void tu_hold_wait(double timeout_s);

/* Lets one held GEMM (the one running, else the next to arrive) go on. */
void tu_hold_release(void);

/* Releases every hold, now and later, and closes the test's end. */
void tu_hold_close(void);

/* Polls c's gemm_get_status until at least n jobs are queued or running,
 * for up to timeout_s; returns whether they were (asserts the calls). */
bool tu_wait_queue_depth(gemm_client *c, unsigned n, double timeout_s);

/* The held GEMM: fp32 TU_HELD_N^3 on a fresh buffer of client c with
 * random A and B, kernel TU_HOLD_KERNEL; asserts on failure. */
#define TU_HELD_N 256
void tu_held_op(gemm_client *c, gemm_buffer **buf, gemm_op *op);

/* Spot-checks four elements of the held GEMM's D against fp64; who names
 * the GEMM in a failure. */
void tu_held_check(const gemm_op *op, gemm_buffer *buf, const char *who);

#endif
