/*
 * connect_test.c: connecting within the caller's timeout. A gemmd stopped
 * with SIGSTOP still accepts connections (the kernel queues them) but
 * never answers: gemm_client_open_timeout() gives up at its timeout, and
 * gemm_client_open() at GEMM_CONNECT_TIMEOUT_MS, with
 * GEMM_ERR_NOT_ANSWERING, not "not running"; a client connected before the
 * stop gets GEMM_ERR_TIMEOUT from the descriptor channel. A missing socket
 * fails at once with GEMM_ERR_CONNECT, and a plain path is refused with
 * the ipc:// URL it should have been.
 */
#include "util/daemon.h"

#include <criterion/criterion.h>

#include <signal.h>
#include <stdio.h>
#include <string.h>

TestSuite(connect, .timeout = 60);

/* Starts gemmd and stops it (SIGSTOP). */
static void start_stopped(gemmd_proc *d)
{
    char why[512];
    cr_assert_eq(gemmd_start(d, NULL, why, sizeof(why)), 0, "%s", why);
    cr_assert_eq(kill(d->pid, SIGSTOP), 0);
}

/* Lets gemmd go on (SIGCONT), stops it for good, asserts a clean exit. */
static void resume_and_stop(gemmd_proc *d)
{
    cr_assert_eq(kill(d->pid, SIGCONT), 0);
    cr_expect_eq(gemmd_stop(d, 20.0), 0);
    gemmd_destroy(d);
}

/* Lets gemmd go on (SIGCONT): a new client is served; then stops it. */
static void resume_and_serve(gemmd_proc *d)
{
    gemm_client *c = NULL;
    cr_assert_eq(kill(d->pid, SIGCONT), 0);
    int rv = gemm_client_open_timeout(&c, d->url, 10000);
    cr_assert_eq(rv, GEMM_OK, "open after SIGCONT: %s (%s)", gemm_strerror(rv),
                 gemm_last_error_message());
    tu_assert_healthy(c);
    gemm_client_close(c);
    cr_expect_eq(gemmd_stop(d, 20.0), 0);
    gemmd_destroy(d);
}

Test(connect, stopped_daemon_is_not_answering_within_the_timeout)
{
    gemmd_proc d;
    gemm_client *c = NULL;
    start_stopped(&d);
    double t0 = tu_now();
    int rv = gemm_client_open_timeout(&c, d.url, 300);
    double dt = tu_now() - t0;
    cr_expect_eq(rv, GEMM_ERR_NOT_ANSWERING, "open: %s (%s)", gemm_strerror(rv),
                 gemm_last_error_message());
    cr_expect(dt >= 0.25 && dt < 3.0, "open waited %.2f s for 0.3 s", dt);
    cr_expect(strstr(gemm_last_error_message(), "did not answer") != NULL,
              "message: %s", gemm_last_error_message());
    cr_expect(strstr(gemm_last_error_message(), "running") == NULL,
              "message says 'running': %s", gemm_last_error_message());
    resume_and_stop(&d);
}

Test(connect, default_open_waits_the_default_connect_timeout)
{
    gemmd_proc d;
    gemm_client *c = NULL;
    start_stopped(&d);
    double t0 = tu_now();
    int rv = gemm_client_open(&c, d.url);
    double dt = tu_now() - t0;
    cr_expect_eq(rv, GEMM_ERR_NOT_ANSWERING, "open: %s (%s)", gemm_strerror(rv),
                 gemm_last_error_message());
    cr_expect(dt < GEMM_CONNECT_TIMEOUT_MS / 1000.0 + 3.0, "open waited %.2f s",
              dt);
    resume_and_stop(&d);
}

Test(connect, the_daemon_answers_again_after_sigcont)
{
    gemmd_proc d;
    gemm_client *c = NULL;
    start_stopped(&d);
    cr_expect_eq(gemm_client_open_timeout(&c, d.url, 200),
                 GEMM_ERR_NOT_ANSWERING);
    resume_and_serve(&d);
}

Test(connect, descriptor_channel_timeout_is_a_timeout)
{
    gemmd_proc d;
    char why[512];
    cr_assert_eq(gemmd_start(&d, NULL, why, sizeof(why)), 0, "%s", why);
    gemm_client *c = tu_client(&d, 300);
    cr_assert_eq(kill(d.pid, SIGSTOP), 0);
    gemm_buffer *b = NULL;
    double t0 = tu_now();
    int rv = gemm_buffer_alloc(c, 4096, &b);
    double dt = tu_now() - t0;
    cr_expect_eq(rv, GEMM_ERR_TIMEOUT, "alloc: %s (%s)", gemm_strerror(rv),
                 gemm_last_error_message());
    cr_expect(dt < 3.0, "alloc waited %.2f s for 0.3 s", dt);
    if (rv == GEMM_OK)
        gemm_buffer_free(b);
    gemm_client_close(c);
    resume_and_stop(&d);
}

/* Opens that give up at every point of a dial (timeouts of 0-3 ms against
 * a stopped daemon) leave the dial to its own thread, which closes the
 * socket only once the dial returns: closing it under the dial crashed
 * nng 1.5.2 (a panic in nng_dial seen under load). The program survives
 * them all, and the daemon, resumed, serves a new client. */
Test(connect, abandoned_dials_close_safely)
{
    gemmd_proc d;
    gemm_client *c = NULL;
    char why[512];
    cr_assert_eq(gemmd_start(&d, NULL, why, sizeof(why)), 0, "%s", why);
    for (int i = 0; i < 600; i++) /* a running daemon: dials end anywhere */
        if (gemm_client_open_timeout(&c, d.url, i % 2) == GEMM_OK)
            gemm_client_close(c);
    cr_assert_eq(kill(d.pid, SIGSTOP), 0);
    for (int i = 0; i < 120; i++)
        cr_expect_neq(gemm_client_open_timeout(&c, d.url, i % 4), GEMM_OK);
    resume_and_serve(&d);
}

Test(connect, missing_socket_fails_at_once)
{
    gemm_client *c = NULL;
    double t0 = tu_now();
    int rv =
        gemm_client_open_timeout(&c, "ipc:///nonexistent/gemmd.sock", 30000);
    cr_expect_eq(rv, GEMM_ERR_CONNECT, "open: %s", gemm_strerror(rv));
    cr_expect(tu_now() - t0 < 2.0, "a missing socket took %.2f s",
              tu_now() - t0);
    cr_expect(strstr(gemm_last_error_message(), "no socket") != NULL,
              "message: %s", gemm_last_error_message());
}

Test(connect, plain_path_suggests_ipc_url)
{
    gemm_client *c = NULL;
    int rv = gemm_client_open(&c, "/run/gemmd/gemmd.sock");
    cr_expect_eq(rv, GEMM_ERR_INVALID, "open: %s", gemm_strerror(rv));
    cr_expect(strstr(gemm_last_error_message(),
                     "ipc:///run/gemmd/gemmd.sock") != NULL,
              "message: %s", gemm_last_error_message());
}
