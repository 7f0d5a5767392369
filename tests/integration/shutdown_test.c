/*
 * shutdown_test.c: SIGTERM and SIGINT. With requests in flight (queued
 * behind one worker thread), SIGTERM lets every accepted request finish
 * with GEMM_OK and a correct result, refuses new ones (GEMM_ERR_SHUTDOWN
 * or a connection error), and gemmd exits 0 within a bounded time. An idle
 * daemon with clients still connected exits promptly on either signal.
 * The requests in flight wait behind a GEMM held by the test hold
 * (util/hold.h) until the daemon has seen the signal (its log says so);
 * without the hold (another backend) that test skips, saying so.
 */
#include "util/cases.h"
#include "util/daemon.h"
#include "util/data.h"
#include "util/hold.h"
#include "util/raw.h"

#include <criterion/criterion.h>

#include <fcntl.h>
#include <math.h>
#include <poll.h>
#include <sys/socket.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include <sys/wait.h>

static void setup(void)
{
    static const char *const args[] = {"--threads", "1", NULL};
    tu_hold_setup();
    fixture_start(args);
}

TestSuite(shutdown, .init = setup, .fini = fixture_teardown, .timeout = 100);

static void assert_exits_zero(double timeout_s, const char *what)
{
    double t0 = tu_now();
    bool exited = gemmd_wait_exit(&g_gemmd, timeout_s);
    if (!exited)
        gemmd_dump_log(&g_gemmd);
    cr_assert(exited, "%s: gemmd still running %.0f s after the signal", what,
              timeout_s);
    int st = g_gemmd.status;
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
        gemmd_dump_log(&g_gemmd);
    cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0,
              "%s: gemmd ended with %s %d, want exit 0", what,
              WIFEXITED(st) ? "exit status" : "signal",
              WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st));
    cr_log_info("%s: exited %.2f s after the wait began", what, tu_now() - t0);
    gemmd_destroy(&g_gemmd); /* removes the directory */
}

static bool is_refusal(int rv)
{
    return rv == GEMM_ERR_SHUTDOWN || rv == GEMM_ERR_CLOSED ||
           rv == GEMM_ERR_CONNECT || rv == GEMM_ERR_TIMEOUT;
}

#define NBIG 6
#define BIG  1024

Test(shutdown, sigterm_completes_requests_in_flight)
{
    tu_hold_need();
    const size_t mat = (size_t)BIG * BIG * 4;
    gemm_buffer *buf, *small;
    gemm_request *req[NBIG];
    gemm_op op[NBIG];
    uint64_t seed = 7;
    int rv = gemm_buffer_alloc(g_client, mat * (2 + NBIG), &buf);
    cr_assert_eq(rv, GEMM_OK, "gemm_buffer_alloc: %s", gemm_strerror(rv));
    rv = gemm_buffer_alloc(g_client, 65536, &small);
    cr_assert_eq(rv, GEMM_OK, "gemm_buffer_alloc: %s", gemm_strerror(rv));
    uint8_t *p = gemm_buffer_data(buf);
    tu_fill(p, GEMM_FP32, 2 * BIG, BIG, BIG, &seed);
    memset(p + 2 * mat, 0xff, NBIG * mat);

    for (int i = 0; i < NBIG; i++) {
        gemm_op_init(&op[i], BIG, BIG, BIG, GEMM_FP32, GEMM_FP32);
        op[i].a.buf = op[i].b.buf = op[i].d.buf = buf;
        op[i].b.offset = mat;
        op[i].trans_b = i & 1;
        op[i].alpha = 1.0f + (float)i;
        op[i].d.offset = (2 + (uint64_t)i) * mat;
        if (i == 0)
            op[i].kernel = TU_HOLD_KERNEL; /* the others queue behind it */
        rv = gemm_submit(g_client, &op[i], &req[i]);
        cr_assert_eq(rv, GEMM_OK, "gemm_submit %d: %s", i, gemm_strerror(rv));
    }

    /* the daemon holds them all: the first running, held; the rest queued */
    tu_hold_wait(10.0);
    cr_assert(tu_wait_queue_depth(g_client, NBIG, 10.0),
              "never saw the %d GEMMs queued", NBIG);

    double t_kill = tu_now();
    int drains = tu_log_count(&g_gemmd, "SIGTERM: finishing");
    cr_assert_eq(kill(g_gemmd.pid, SIGTERM), 0, "kill");
    cr_assert(tu_log_wait(&g_gemmd, "SIGTERM: finishing", drains, 10.0),
              "gemmd did not log that it drains within 10 s of SIGTERM");

    /* a request sent after SIGTERM is refused */
    gemm_op late;
    gemm_op_init(&late, 4, 4, 4, GEMM_FP32, GEMM_FP32);
    late.a.buf = late.b.buf = late.d.buf = small;
    late.b.offset = 1024;
    late.d.offset = 2048;
    gemm_client_set_timeout(g_client, 5000);
    rv = gemm_run(g_client, &late, NULL);
    cr_assert(is_refusal(rv),
              "a GEMM sent after gemmd began to drain got %s (\"%s\"), want "
              "%s or a connection error",
              gemm_strerror(rv), gemm_last_error_message(),
              gemm_strerror(GEMM_ERR_SHUTDOWN));
    tu_hold_release(); /* the accepted ones go on */

    /* every accepted request completes, correctly */
    double tr, ta;
    tu_tolerance(&op[0], &tr, &ta);
    for (int i = 0; i < NBIG; i++) {
        rv = gemm_wait(req[i], NULL);
        cr_assert_eq(rv, GEMM_OK,
                     "in-flight request %d after SIGTERM: %s "
                     "(%s)",
                     i, gemm_strerror(rv), gemm_last_error_message());
        const float *d = (const float *)(p + op[i].d.offset);
        for (int s = 0; s < 24; s++) {
            size_t r = tu_rand(&seed) % BIG, c = tu_rand(&seed) % BIG;
            double ref, scale;
            tu_ref_elem(&op[i], p, p + mat, NULL, r, c, &ref, &scale);
            cr_assert_leq(fabs(d[r * BIG + c] - ref), tr * scale + ta,
                          "request %d: D[%zu][%zu] = %g, reference %g", i, r, c,
                          d[r * BIG + c], ref);
        }
    }
    cr_log_info("in-flight requests done %.2f s after SIGTERM",
                tu_now() - t_kill);
    assert_exits_zero(30, "SIGTERM with requests in flight");
    gemm_client_close(g_client); /* first: no release requests to a */
    g_client = NULL;             /* daemon that is gone */
    gemm_buffer_free(small);
    gemm_buffer_free(buf);
}

/* Small async requests with SIGTERM right behind them: each one either
 * completes correctly or is refused with D untouched; exit 0. */
Test(shutdown, sigterm_racing_a_burst)
{
    enum { N = 32 };
    static tu_prepared p[N];
    gemm_request *req[N];
    int rvs[N];
    gemm_buffer *buf;
    uint64_t state = 31;
    char why[768];
    int rv = gemm_buffer_alloc(g_client, N * 65536, &buf);
    cr_assert_eq(rv, GEMM_OK, "gemm_buffer_alloc: %s", gemm_strerror(rv));
    for (int i = 0; i < N; i++) {
        tu_case cs;
        tu_case_random(&cs, &state, 40);
        cs.base = (uint64_t)i * 65536;
        cr_assert(tu_case_prepare(&cs, buf, &p[i], why, sizeof(why)), "%s",
                  why);
    }
    for (int i = 0; i < N; i++) {
        rvs[i] = gemm_submit(g_client, &p[i].op, &req[i]);
        if (i == N / 2)
            kill(g_gemmd.pid, SIGTERM);
    }
    int ok = 0, refused = 0;
    for (int i = 0; i < N; i++) {
        if (rvs[i] == GEMM_OK)
            rvs[i] = gemm_wait(req[i], NULL);
        if (rvs[i] == GEMM_OK) {
            cr_assert(tu_case_verify(&p[i], why, sizeof(why)), "request %d: %s",
                      i, why);
            ok++;
        } else {
            cr_assert(is_refusal(rvs[i]), "request %d: %s (%s)", i,
                      gemm_strerror(rvs[i]), gemm_last_error_message());
            bool untouched = memcmp(p[i].data + p[i].lo, p[i].snapshot,
                                    p[i].hi - p[i].lo) == 0;
            if (rvs[i] == GEMM_ERR_SHUTDOWN) {
                /* refused by the daemon: never started */
                cr_assert(untouched, "refused request %d changed its buffer",
                          i);
            } else {
                /* the connection went away (CLOSED/CONNECT/TIMEOUT): the
                 * outcome is unknown to the client, but the drain runs
                 * every GEMM it took to the end, so D is either untouched
                 * or the whole, correct result, never partial */
                cr_assert(untouched || tu_case_verify(&p[i], why, sizeof(why)),
                          "request %d (%s) left its buffer neither untouched "
                          "nor correct: %s",
                          i, gemm_strerror(rvs[i]), why);
            }
            refused++;
        }
        tu_case_free(&p[i]);
    }
    cr_log_info("%d served, %d refused", ok, refused);
    assert_exits_zero(30, "SIGTERM racing a burst");
    gemm_client_close(g_client);
    g_client = NULL;
    gemm_buffer_free(buf);
}

static void idle_signal(int sig, const char *what)
{
    gemm_client *c[3];
    gemm_buffer *b[3];
    for (int i = 0; i < 3; i++) {
        c[i] = tu_client(&g_gemmd, 5000);
        cr_assert_eq(gemm_buffer_alloc(c[i], 65536, &b[i]), GEMM_OK);
    }
    tu_assert_healthy(g_client);
    cr_assert_eq(kill(g_gemmd.pid, sig), 0, "kill");
    assert_exits_zero(5, what);
    for (int i = 0; i < 3; i++) {
        gemm_client_close(c[i]); /* before the free: no daemon to ask */
        gemm_buffer_free(b[i]);
    }
}

Test(shutdown, sigterm_idle_with_clients_connected)
{
    idle_signal(SIGTERM, "SIGTERM, idle, 4 clients connected");
}

Test(shutdown, sigint_idle_with_clients_connected)
{
    idle_signal(SIGINT, "SIGINT, idle, 4 clients connected");
}

/* SIGHUP is the daemon's (reload/log reopen), not a reason to exit. */
/* A client that sends and reads nothing back, with nothing in flight: its
 * unwritten replies do not hold the exit up (they used to, for the whole
 * --drain-timeout). */
Test(shutdown, sigterm_with_a_client_that_reads_nothing)
{
    int sent;
    int s = tu_raw_unread_flood(g_gemmd.url, 300, &sent);
    cr_assert_geq(s, 0);
    double t0 = tu_now();
    kill(g_gemmd.pid, SIGTERM);
    assert_exits_zero(5.0, "SIGTERM with a client reading nothing");
    cr_expect_lt(tu_now() - t0, 2.0, "exit took %.1f s", tu_now() - t0);
    close(s);
}

Test(shutdown, sighup_keeps_serving)
{
    int lines = tu_log_count(&g_gemmd, "stats: ");
    cr_assert_eq(kill(g_gemmd.pid, SIGHUP), 0, "kill");
    /* SIGHUP reloads nothing: gemmd answers it with a status line */
    cr_assert(tu_log_wait(&g_gemmd, "stats: ", lines, 10.0),
              "no status line in the log within 10 s of SIGHUP");
    cr_assert_eq(waitpid(g_gemmd.pid, &g_gemmd.status, WNOHANG), 0,
                 "gemmd exited on SIGHUP");
    tu_assert_healthy(g_client);
}

/* Runs the gemmd under test with args; returns its exit status (-1 if it ran
 * for more than 5 s or died of a signal). Output goes to /dev/null. */
static int run_gemmd(const char *const *args)
{
    const char *argv[16] = {tu_gemmd_path()};
    int n = 1;
    for (; *args && n < 15; args++)
        argv[n++] = *args;
    argv[n] = NULL;
    pid_t pid = fork();
    cr_assert_geq(pid, 0, "fork");
    if (pid == 0) {
        int fd = open("/dev/null", O_WRONLY);
        dup2(fd, 1);
        dup2(fd, 2);
        tu_exec_gemmd((char *const *)argv);
    }
    gemmd_proc p = {.pid = pid};
    if (!gemmd_wait_exit(&p, 5.0)) {
        kill(pid, SIGKILL);
        waitpid(pid, NULL, 0);
        return -1;
    }
    return WIFEXITED(p.status) ? WEXITSTATUS(p.status) : -1;
}

Test(shutdown, command_line)
{
    static const char *const version[] = {"--version", NULL};
    static const char *const help[] = {"--help", NULL};
    char url[300];
    snprintf(url, sizeof(url), "ipc://%s/other.sock", g_gemmd.dir);
    const char *const bad_backend[] = {"--listen", url, "--backend", "nope",
                                       NULL};
    const char *const bad_threads[] = {"--listen", url, "--threads", "x", NULL};
    const char *const bad_option[] = {"--listen", url, "--no-such-option",
                                      NULL};
    /* the fixture's socket is taken: a second daemon there must fail */
    const char *const taken[] = {"--listen", g_gemmd.url, "--backend",
                                 tu_backend(), NULL};
    cr_assert_eq(run_gemmd(version), 0, "gemmd --version");
    cr_assert_eq(run_gemmd(help), 0, "gemmd --help");
    int rv = run_gemmd(bad_backend);
    cr_assert(rv > 0, "gemmd --backend nope: exit %d, want nonzero", rv);
    rv = run_gemmd(bad_threads);
    cr_assert(rv > 0, "gemmd --threads x: exit %d, want nonzero", rv);
    rv = run_gemmd(bad_option);
    cr_assert(rv > 0, "gemmd --no-such-option: exit %d, want nonzero", rv);
    rv = run_gemmd(taken);
    cr_assert(rv > 0,
              "a second gemmd on a socket in use: exit %d, want "
              "nonzero",
              rv);
    tu_assert_healthy(g_client);
}
