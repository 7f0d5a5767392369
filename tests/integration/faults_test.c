/*
 * faults_test.c: clients that misbehave or die, shared memory pulled from
 * under the daemon, and the daemon itself going away (issue 5, points 2, 3
 * and 6). A client killed mid-request, one that never reads its reply and
 * one that disconnects holding buffers and resident tensors leave the
 * daemon's counters (gemm_get_status) and its open mappings
 * (/proc/PID/maps) back at their baseline, and other clients go on. A
 * buffer's owner cannot shrink it (ftruncate fails: the daemon sealed the
 * memfd) while a GEMM on it is queued or running, and those GEMMs compute
 * correctly. An impossible allocation fails at once, leaving nothing in
 * /dev/shm. A daemon restarted on the same URL: the old client
 * gets GEMM_ERR_CLOSED (and is told to reopen), a new one works.
 *
 * gemmd runs with --threads 1: on the CPU backend one worker runs one GEMM
 * at a time. The test hold (util/hold.h) keeps a GEMM running, and those
 * behind it queued, for as long as the test needs; the tests that need it
 * skip on other backends, saying so.
 */
#include "util/cases.h"
#include "util/daemon.h"
#include "util/data.h"
#include "util/hold.h"
#include "util/raw.h"

#ifndef FAULT_PROBE
#error "FAULT_PROBE must name the fault_probe program"
#endif

#include <criterion/criterion.h>

#include <dirent.h>
#include <errno.h>
#include <math.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

static void setup(void)
{
    static const char *const args[] = {"--threads", "1", NULL};
    tu_hold_setup();
    fixture_start(args);
}

TestSuite(faults, .init = setup, .fini = fixture_teardown, .timeout = 60);

#define MAPS_TOL 8 /* mapping lines allowed above the baseline */

static gemm_status status_now(void)
{
    gemm_status st;
    int rv = gemm_get_status(g_client, &st);
    cr_assert_eq(rv, GEMM_OK, "gemm_get_status: %s", gemm_strerror(rv));
    return st;
}

/* Lines of /proc/<gemmd>/maps: the daemon's open mappings. */
static int maps_count(void)
{
    char path[64], line[512];
    snprintf(path, sizeof(path), "/proc/%d/maps", (int)g_gemmd.pid);
    FILE *f = fopen(path, "r");
    cr_assert_not_null(f, "cannot open %s", path);
    int n = 0;
    while (fgets(line, sizeof(line), f) != NULL)
        n++;
    fclose(f);
    return n;
}

typedef struct baseline {
    gemm_status st;
    int maps;
} baseline;

/* The idle state after a warm-up GEMM (thread stacks, allocator arenas
 * and BLAS buffers exist by then). */
static baseline take_baseline(void)
{
    tu_assert_healthy(g_client);
    baseline b = {status_now(), maps_count()};
    return b;
}

/* Waits up to 10 s for buffers, tensors and clients to fall back to b,
 * then asserts that they did and that the mappings are near b's. */
static void assert_back_to(const baseline *b, const char *what)
{
    gemm_status st;
    double until = tu_now() + 10.0;
    do {
        st = status_now();
        if (st.buffers == b->st.buffers && st.tensors == b->st.tensors &&
            st.clients == b->st.clients && st.queue_depth == 0 &&
            st.pinned_bytes == b->st.pinned_bytes && st.pins_pending == 0)
            break;
        tu_sleep_ms(20);
    } while (tu_now() < until);
    cr_assert_eq(st.buffers, b->st.buffers, "%s: buffers %u, baseline %u", what,
                 st.buffers, b->st.buffers);
    cr_assert_eq(st.buffer_bytes, b->st.buffer_bytes,
                 "%s: buffer_bytes %llu, baseline %llu", what,
                 (unsigned long long)st.buffer_bytes,
                 (unsigned long long)b->st.buffer_bytes);
    cr_assert_eq(st.tensors, b->st.tensors, "%s: tensors %u, baseline %u", what,
                 st.tensors, b->st.tensors);
    cr_assert_eq(st.tensor_bytes, b->st.tensor_bytes,
                 "%s: tensor_bytes %llu, baseline %llu", what,
                 (unsigned long long)st.tensor_bytes,
                 (unsigned long long)b->st.tensor_bytes);
    cr_assert_eq(st.pinned_bytes, b->st.pinned_bytes,
                 "%s: pinned_bytes %llu, baseline %llu", what,
                 (unsigned long long)st.pinned_bytes,
                 (unsigned long long)b->st.pinned_bytes);
    cr_assert_eq(st.clients, b->st.clients, "%s: clients %u, baseline %u", what,
                 st.clients, b->st.clients);
    int maps = maps_count();
    /* cuda: the stream-ordered pool keeps the blocks it grew to (steady
     * state allocates nothing), and each is a mapping */
    int tol = strcmp(tu_backend(), "cuda") == 0 ? 64 : MAPS_TOL;
    cr_assert_leq(maps, b->maps + tol,
                  "%s: gemmd has %d mappings, %d at the baseline", what, maps,
                  b->maps);
    tu_assert_healthy(g_client);
}

/* Packs g into a Request and sends it on r without reading the reply. */
static void raw_send_gemm(tu_raw *r, Gemm__GemmRequest *g)
{
    Gemm__Request req = GEMM__REQUEST__INIT;
    req.has_version = req.has_id = 1;
    req.version = GEMM_PROTOCOL_VERSION;
    req.id = r->next_id++;
    req.body_case = GEMM__REQUEST__BODY_GEMM;
    req.gemm = g;
    size_t len = gemm__request__get_packed_size(&req);
    void *buf = malloc(len);
    cr_assert_not_null(buf);
    gemm__request__pack(&req, buf);
    int rv = nng_send(r->sock, buf, len, 0);
    free(buf);
    cr_assert_eq(rv, 0, "nng_send: %s", nng_strerror(rv));
}

/* Receives and decodes the reply to the request raw_send_gemm sent. */
static int raw_recv_status(tu_raw *r, char *msg, size_t len)
{
    nng_msg *m;
    int rv = nng_recvmsg(r->sock, &m, 0);
    cr_assert_eq(rv, 0, "no reply (%s): did the daemon die?", nng_strerror(rv));
    Gemm__Reply *rep =
        gemm__reply__unpack(NULL, nng_msg_len(m), nng_msg_body(m));
    nng_msg_free(m);
    cr_assert_not_null(rep, "undecodable reply");
    int st = tu_reply_status(rep);
    snprintf(msg, len, "%s", rep->message ? rep->message : "");
    gemm__reply__free_unpacked(rep, NULL);
    return st;
}

/* ---- client faults ---- */

Test(faults, client_killed_mid_request)
{
    baseline b = take_baseline();
    /* held where the hold exists, so the GEMM surely runs when the probe
     * dies; elsewhere a large one, queued or running */
    bool held = tu_hold_have();
    char n[16];
    snprintf(n, sizeof(n), "%d", held ? TU_HELD_N : 1536);
    /* GEMM_TEST_FAULT_PROBE: the probe's path where the suite runs from a
     * bundle (a GPU host) rather than the build tree */
    const char *probe = getenv("GEMM_TEST_FAULT_PROBE");
    if (probe == NULL || *probe == '\0')
        probe = FAULT_PROBE;
    char *const argv[] = {(char *)probe,
                          (char *)"die",
                          g_gemmd.url,
                          n,
                          held ? (char *)TU_HOLD_KERNEL : NULL,
                          NULL};
    fflush(NULL);
    pid_t pid = fork();
    cr_assert_geq(pid, 0, "fork");
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL); /* never outlives the test */
        unsetenv("BXFI_MAP"); /* the probe is not a Criterion worker */
        execv(probe, argv);   /* nng does not survive a fork: exec */
        _exit(101);
    }
    int st;
    if (held) { /* running, held: now the client dies */
        tu_hold_wait(10.0);
        kill(pid, SIGKILL);
    }
    cr_assert_eq(waitpid(pid, &st, 0), pid, "waitpid");
    cr_assert(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL,
              "fault_probe did not reach its SIGKILL: %s %d (exit codes: "
              "10 open, 11 alloc, 12 upload, 13 submit, 14 status)",
              WIFEXITED(st) ? "exit" : "signal",
              WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st));
    if (held)
        tu_hold_release(); /* the dead client's GEMM finishes */
    assert_back_to(&b, "after a client was killed with a GEMM in flight");
}

Test(faults, client_never_reads_reply)
{
    baseline b = take_baseline();
    tu_raw r1, r2;
    tu_shm s1, s2;
    uint64_t id1, id2;
    Gemm__GemmRequest g;
    Gemm__Operand ops[4];

    /* r1 sends and stays connected without reading; r2 sends and closes */
    cr_assert_eq(tu_raw_open(&r1, g_gemmd.url, 10000), 0, "raw dial");
    cr_assert_eq(tu_raw_open(&r2, g_gemmd.url, 10000), 0, "raw dial");
    cr_assert_eq(tu_raw_buffer(&r1, &s1, 1 << 20, &id1), GEMM_OK, "register");
    cr_assert_eq(tu_raw_buffer(&r2, &s2, 1 << 20, &id2), GEMM_OK, "register");
    tu_raw_gemm_init(&g, ops, id1, 256, 256, 256, 0, 262144, 524288);
    raw_send_gemm(&r1, &g);
    tu_raw_gemm_init(&g, ops, id2, 256, 256, 256, 0, 262144, 524288);
    raw_send_gemm(&r2, &g);
    tu_raw_close(&r2);
    tu_assert_healthy(g_client); /* served while r1's reply sits unread */
    tu_raw_close(&r1);
    tu_shm_destroy(&s1);
    tu_shm_destroy(&s2);
    assert_back_to(&b, "after clients that never read their replies");
}

Test(faults, disconnect_with_buffers_and_tensors)
{
    baseline b = take_baseline();
    gemm_client *c = tu_client(&g_gemmd, 10000);
    gemm_buffer *bufs[3];
    uint64_t tids[2];
    for (int i = 0; i < 3; i++) {
        int rv = gemm_buffer_alloc(c, 1 << 20, &bufs[i]);
        cr_assert_eq(rv, GEMM_OK, "gemm_buffer_alloc: %s", gemm_strerror(rv));
    }
    uint64_t seed = 9;
    tu_fill(gemm_buffer_data(bufs[0]), GEMM_FP32, 128, 128, 128, &seed);
    for (int i = 0; i < 2; i++) {
        gemm_matrix src = {.buf = bufs[0]};
        int rv = gemm_tensor_upload(c, &src, 128, 128, GEMM_FP32, &tids[i]);
        cr_assert_eq(rv, GEMM_OK, "gemm_tensor_upload: %s (%s)",
                     gemm_strerror(rv), gemm_last_error_message());
    }
    gemm_status mid = status_now();
    cr_assert_eq(mid.buffers, b.st.buffers + 3, "buffers %u -> %u",
                 b.st.buffers, mid.buffers);
    cr_assert_eq(mid.tensors, b.st.tensors + 2, "tensors %u -> %u",
                 b.st.tensors, mid.tensors);
    cr_assert_eq(mid.clients, b.st.clients + 1, "clients %u -> %u",
                 b.st.clients, mid.clients);
    gemm_client_close(c);
    assert_back_to(&b, "after a client closed holding 3 buffers, 2 tensors");
    for (int i = 0; i < 3; i++)
        gemm_buffer_free(bufs[i]);
}

/* ---- shared-memory faults ---- */

Test(faults, buffer_cannot_shrink_while_queued_or_running)
{
    enum { HELD_N = TU_HELD_N };
    tu_hold_need();
    gemm_buffer *held_buf;
    gemm_op held_op;
    gemm_request *rs;
    Gemm__GemmRequest g;
    Gemm__Operand ops[4];
    tu_raw r;
    tu_shm x, y;
    uint64_t idx, idy;
    char msg[512];
    uint64_t seed = 3;

    tu_held_op(g_client, &held_buf, &held_op);
    cr_assert_eq(tu_raw_open(&r, g_gemmd.url, 20000), 0, "raw dial");
    cr_assert_eq(tu_raw_buffer(&r, &x, 1 << 20, &idx), GEMM_OK, "register");
    tu_fill(x.data, GEMM_FP32, 1, 65536, 65536, &seed);

    /* queued: X's GEMM waits behind another client's held one */
    int rv = gemm_submit(g_client, &held_op, &rs);
    cr_assert_eq(rv, GEMM_OK, "submit held: %s", gemm_strerror(rv));
    tu_hold_wait(10.0);
    tu_raw_gemm_init(&g, ops, idx, 64, 64, 64, 0, 65536, 131072);
    raw_send_gemm(&r, &g);
    cr_assert(tu_wait_queue_depth(g_client, 2, 10.0),
              "X's GEMM never queued behind the held one");
    cr_assert_neq(ftruncate(x.fd, 4096), 0,
                  "the owner shrank a registered buffer under a queued GEMM");
    cr_assert_eq(errno, EPERM, "ftruncate: %s", strerror(errno));
    tu_hold_release();
    int st = raw_recv_status(&r, msg, sizeof(msg));
    cr_assert_eq(st, GEMM_OK, "GEMM queued on the buffer: %s (\"%s\")",
                 gemm_strerror(st), msg);
    rv = gemm_wait(rs, NULL);
    cr_assert_eq(rv, GEMM_OK, "the other client's held GEMM: %s (%s)",
                 gemm_strerror(rv), gemm_last_error_message());
    tu_held_check(&held_op, held_buf, "the other client's held GEMM");

    /* running: Y's own held GEMM computes while its owner tries */
    size_t nn = (size_t)HELD_N * HELD_N;
    cr_assert_eq(tu_raw_buffer(&r, &y, 3 * nn * 4, &idy), GEMM_OK, "register");
    tu_fill(y.data, GEMM_FP32, 1, 2 * nn, 2 * nn, &seed);
    tu_raw_gemm_init(&g, ops, idy, HELD_N, HELD_N, HELD_N, 0, nn * 4,
                     2 * nn * 4);
    g.kernel = (char *)TU_HOLD_KERNEL;
    raw_send_gemm(&r, &g);
    tu_hold_wait(10.0);
    cr_assert_neq(ftruncate(y.fd, 4096), 0,
                  "the owner shrank a buffer under a running GEMM");
    cr_assert_neq(fallocate(y.fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 0,
                            (off_t)(3 * nn * 4)),
                  0, "the owner punched a hole under a running GEMM");
    tu_hold_release();
    st = raw_recv_status(&r, msg, sizeof(msg));
    cr_assert_eq(st, GEMM_OK, "GEMM on the buffer while it ran: %s (\"%s\")",
                 gemm_strerror(st), msg);
    /* spot-check D[0][0] and D[last][last] of Y against fp64 */
    const float *ya = y.data, *yb = ya + nn, *yd = ya + 2 * nn;
    for (int c = 0; c < 2; c++) {
        size_t i = c ? HELD_N - 1 : 0;
        double want = 0;
        for (size_t k = 0; k < HELD_N; k++)
            want += (double)ya[i * HELD_N + k] * yb[k * HELD_N + i];
        double got = yd[i * HELD_N + i];
        cr_assert(fabs(got - want) <= 1e-4 * (fabs(want) + 1),
                  "D[%zu][%zu] = %g, want %g", i, i, got, want);
    }

    tu_assert_healthy(g_client);
    Gemm__Reply *rep;
    cr_assert_eq(tu_raw_release(&r, idx, &rep), 0, "release X: no reply");
    gemm__reply__free_unpacked(rep, NULL);
    cr_assert_eq(tu_raw_release(&r, idy, &rep), 0, "release Y: no reply");
    gemm__reply__free_unpacked(rep, NULL);
    tu_raw_close(&r);
    tu_shm_destroy(&x);
    tu_shm_destroy(&y);
    gemm_buffer_free(held_buf);
}

/* Entries of /dev/shm named like this process's client buffers. */
static int own_shm_entries(void)
{
    char prefix[32];
    snprintf(prefix, sizeof(prefix), "gemm-%ld-", (long)getpid());
    DIR *d = opendir("/dev/shm");
    cr_assert_not_null(d, "opendir /dev/shm");
    struct dirent *e;
    int n = 0;
    while ((e = readdir(d)) != NULL)
        if (strncmp(e->d_name, prefix, strlen(prefix)) == 0)
            n++;
    closedir(d);
    return n;
}

Test(faults, impossible_allocation)
{
    gemm_status before = status_now();
    gemm_buffer *b = NULL;
    int rv = gemm_buffer_alloc(g_client, (size_t)1 << 40, &b); /* 1 TiB */
    cr_assert(rv == GEMM_ERR_SHM || rv == GEMM_ERR_NOMEM,
              "1 TiB buffer: %s (\"%s\"), want %s or %s", gemm_strerror(rv),
              gemm_last_error_message(), gemm_strerror(GEMM_ERR_SHM),
              gemm_strerror(GEMM_ERR_NOMEM));
    cr_assert_null(b, "a failed alloc wrote *out");
    cr_assert(strstr(gemm_last_error_message(), "shared memory") != NULL,
              "the message does not say what ran out: \"%s\"",
              gemm_last_error_message());
    cr_assert_eq(own_shm_entries(), 0,
                 "the failed allocation left an shm object in /dev/shm");
    gemm_status after = status_now();
    cr_assert_eq(after.buffers, before.buffers, "buffers %u -> %u",
                 before.buffers, after.buffers);
    tu_assert_healthy(g_client);
}

/* ---- the daemon restarts ---- */

/* Starts gemmd again on g_gemmd's URL, appending to its log; waits for a
 * ping. The new process replaces g_gemmd.pid (the fixture stops it). */
static void restart_same_url(void)
{
    const char *argv[] = {
        tu_gemmd_path(), "--listen", g_gemmd.url,   "--backend", tu_backend(),
        "--threads",     "1",        "--log-level", "info",      NULL};
    fflush(NULL);
    pid_t pid = fork();
    cr_assert_geq(pid, 0, "fork");
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        int fd = open(g_gemmd.log, O_WRONLY | O_CREAT | O_APPEND, 0600);
        if (fd >= 0) {
            dup2(fd, STDERR_FILENO);
            dup2(fd, STDOUT_FILENO);
            close(fd);
        }
        sigset_t none;
        sigemptyset(&none);
        sigprocmask(SIG_SETMASK, &none, NULL);
        tu_exec_gemmd((char *const *)argv);
    }
    g_gemmd.pid = pid;
    double until = tu_now() + 10.0;
    int rv = GEMM_ERR_CONNECT;
    while (tu_now() < until) {
        gemm_client *c;
        if ((rv = gemm_client_open(&c, g_gemmd.url)) == GEMM_OK) {
            gemm_client_set_timeout(c, 1000);
            rv = gemm_ping(c, NULL);
            gemm_client_close(c);
            if (rv == GEMM_OK)
                return;
        }
        tu_sleep_ms(10);
    }
    gemmd_dump_log(&g_gemmd);
    cr_assert_fail("gemmd restarted on %s did not answer: %s", g_gemmd.url,
                   gemm_strerror(rv));
}

static void expect_closed(int rv, const char *what)
{
    cr_assert_eq(rv, GEMM_ERR_CLOSED, "%s: %s (\"%s\"), want %s", what,
                 gemm_strerror(rv), gemm_last_error_message(),
                 gemm_strerror(GEMM_ERR_CLOSED));
    cr_assert(strstr(gemm_last_error_message(), "reopen") != NULL,
              "%s: the message does not say to reopen the client: \"%s\"", what,
              gemm_last_error_message());
}

Test(faults, daemon_restart_same_url)
{
    gemm_buffer *buf;
    char why[512];
    tu_case cs = tu_case_plain(9, 7, 5, GEMM_FP32, GEMM_FP32, 8);
    gemm_client_set_timeout(g_client, 5000);
    int rv = gemm_buffer_alloc(g_client, 16384, &buf);
    cr_assert_eq(rv, GEMM_OK, "gemm_buffer_alloc: %s", gemm_strerror(rv));
    rv = tu_case_run(g_client, buf, &cs, why, sizeof(why));
    cr_assert_eq(rv, GEMM_OK, "before the restart: %s", why);

    kill(g_gemmd.pid, SIGTERM);
    cr_assert(gemmd_wait_exit(&g_gemmd, 20.0), "gemmd ignored SIGTERM");
    cr_assert(WIFEXITED(g_gemmd.status) && WEXITSTATUS(g_gemmd.status) == 0,
              "gemmd exit status 0x%x", g_gemmd.status);
    expect_closed(tu_case_run(g_client, buf, &cs, why, sizeof(why)),
                  "GEMM with the daemon gone");
    expect_closed(gemm_ping(g_client, NULL), "ping with the daemon gone");

    restart_same_url();
    expect_closed(gemm_ping(g_client, NULL),
                  "old client's ping after the restart");
    expect_closed(tu_case_run(g_client, buf, &cs, why, sizeof(why)),
                  "old client's GEMM after the restart");
    gemm_buffer *dead = NULL;
    expect_closed(gemm_buffer_alloc(g_client, 16384, &dead),
                  "old client's alloc after the restart");
    gemm_buffer_free(buf); /* its daemon side is gone: must not hang */

    /* a new client works; its buffers are registered afresh */
    gemm_client *fresh = tu_client(&g_gemmd, 10000);
    tu_assert_healthy(fresh);
    rv = gemm_buffer_alloc(fresh, 16384, &buf);
    cr_assert_eq(rv, GEMM_OK, "new client's alloc: %s", gemm_strerror(rv));
    rv = tu_case_run(fresh, buf, &cs, why, sizeof(why));
    cr_assert_eq(rv, GEMM_OK, "new client's GEMM: %s", why);
    gemm_status st;
    cr_assert_eq(gemm_get_status(fresh, &st), GEMM_OK, "status");
    cr_assert_eq(st.buffers, 1, "the new daemon holds %u buffers, want 1",
                 st.buffers);
    gemm_buffer_free(buf);
    gemm_client_close(fresh);
}
