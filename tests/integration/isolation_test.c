/*
 * isolation_test.c: one local user cannot block another user's
 * registrations, keep the workers busy after it left, hold the daemon's
 * descriptors or blind its metrics. Each test replays an attack of the
 * second adversarial review (bench/adversary/attacks.py replays them all
 * with timings; docs/reliability.md has the figures) and checks that the
 * other user is served. The attacker is the user "daemon" where the test
 * runs as root (a forked child that switches uid), else the test's own
 * uid where one uid is enough to show the cap.
 */
#include "util/cases.h"
#include "util/daemon.h"
#include "util/data.h"
#include "util/fdpass.h"
#include "util/hold.h"
#include "util/raw.h"
#include "wire.h"

#include <criterion/criterion.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/falloc.h>
#include <math.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <grp.h>
#include <poll.h>
#include <pwd.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

TestSuite(isolation, .fini = fixture_teardown, .timeout = 90);

/* ---- helpers ---- */

/* Descriptors gemmd has open now (/proc/PID/fd), or -1. */
static int daemon_fds(void)
{
    char path[64];
    snprintf(path, sizeof(path), "/proc/%ld/fd", (long)g_gemmd.pid);
    DIR *d = opendir(path);
    if (d == NULL)
        return -1;
    int n = 0;
    for (struct dirent *e; (e = readdir(d)) != NULL;)
        if (e->d_name[0] != '.')
            n++;
    closedir(d);
    return n;
}

/* Opens a descriptor channel on the fixture's daemon (greeting read, the
 * channel header sent); the socket or -1. */
static int chan_open(void)
{
    int s = tu_sock_connect(g_gemmd.url, 5000);
    uint8_t greet[WIRE_HDR_LEN];
    if (s < 0)
        return -1;
    if (recv(s, greet, sizeof(greet), MSG_WAITALL) != sizeof(greet) ||
        send(s, wire_fd_hdr, WIRE_HDR_LEN, MSG_NOSIGNAL) != WIRE_HDR_LEN) {
        close(s);
        return -1;
    }
    return s;
}

/* Sends len bytes of buf on channel s with n descriptors fds as
 * SCM_RIGHTS. 0 or -1. */
static int chan_send(int s, const void *buf, size_t len, const int *fds, int n)
{
    union {
        struct cmsghdr h;
        char b[CMSG_SPACE(sizeof(int) * 16)];
    } u;
    struct iovec iov = {.iov_base = (void *)buf, .iov_len = len};
    struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1};
    if (n > 0) {
        memset(&u, 0, sizeof(u));
        mh.msg_control = u.b;
        mh.msg_controllen = CMSG_SPACE(sizeof(int) * (size_t)n);
        struct cmsghdr *cm = CMSG_FIRSTHDR(&mh);
        cm->cmsg_level = SOL_SOCKET;
        cm->cmsg_type = SCM_RIGHTS;
        cm->cmsg_len = CMSG_LEN(sizeof(int) * (size_t)n);
        memcpy(CMSG_DATA(cm), fds, sizeof(int) * (size_t)n);
    }
    return sendmsg(s, &mh, MSG_NOSIGNAL) == (ssize_t)len ? 0 : -1;
}

/* Passes fd on channel s as one whole message and reads the answer:
 * the daemon's status (0 with *ticket) or -1. */
static int chan_pass(int s, int fd, uint64_t *ticket)
{
    uint8_t msg[WIRE_FD_MSG_LEN], ans[WIRE_FD_ANSWER_LEN];
    wire_fd_msg_put(msg, WIRE_FD_OP_PASS, 0);
    if (chan_send(s, msg, sizeof(msg), &fd, 1) != 0 ||
        recv(s, ans, sizeof(ans), MSG_WAITALL) != sizeof(ans))
        return -1;
    return wire_fd_answer_get(ans, ticket);
}

/* The attacker's user ("daemon") when the test runs as root and gemmd as
 * a user of its own; NULL otherwise. */
static const struct passwd *attacker_user(void)
{
    static struct passwd pw;
    const struct passwd *du = tu_daemon_user();
    uid_t duid = du != NULL ? du->pw_uid : 0;
    const struct passwd *p = getpwnam("daemon");
    if (geteuid() != 0 || du == NULL || p == NULL || p->pw_uid == duid)
        return NULL;
    pw = *p;
    return &pw;
}

/* In a forked child: becomes the attacker's user, with the daemon's
 * group (the socket's) as its only supplementary group. _exits 125 on
 * failure. */
static void become_attacker(const struct passwd *pw)
{
    gid_t g = tu_daemon_user()->pw_gid;
    if (setgroups(1, &g) != 0 ||
        setresgid(pw->pw_gid, pw->pw_gid, pw->pw_gid) != 0 ||
        setresuid(pw->pw_uid, pw->pw_uid, pw->pw_uid) != 0)
        _exit(125);
}

/* The child's exit code. */
static int child_wait(pid_t pid)
{
    int st;
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
        ;
    return WIFEXITED(st) ? WEXITSTATUS(st) : 200 + WTERMSIG(st);
}

/* Registers a fresh 4 KiB buffer on the fixture's daemon through a raw
 * connection; returns the reply's status. */
static int register_one(void)
{
    tu_raw r;
    tu_shm s = {.fd = -1};
    uint64_t id;
    if (tu_raw_open(&r, g_gemmd.url, 5000) != 0)
        return -1;
    int rv = tu_raw_buffer(&r, &s, 4096, &id);
    tu_raw_close(&r);
    if (s.fd >= 0)
        tu_shm_destroy(&s);
    return rv;
}

/* ---- 1. descriptor tickets per uid ---- */

/* One uid fills its --user-fds with unused tickets (/dev/null, over
 * channels it keeps open): its next descriptor gets LIMIT at once, and
 * (as root) another uid's registrations all succeed meanwhile. Its
 * channels closed, its tickets go within about a second and it is served
 * again. Before: one cap for the whole daemon (the connection cap), so
 * one uid filled it and every other uid got LIMIT for 30 s. */
Test(isolation, unused_tickets_are_capped_per_uid)
{
    fixture_start((const char *const[]){"--user-fds", "8", NULL});
    int base = daemon_fds();
    const struct passwd *atk = attacker_user();
    chmod(g_gemmd.dir, 0755); /* the socket's mode and group still apply */
    int go[2], ready[2];
    cr_assert_eq(pipe(go), 0);
    cr_assert_eq(pipe(ready), 0);
    fflush(NULL);
    pid_t pid = fork();
    cr_assert_geq(pid, 0);
    if (pid == 0) {
        if (atk != NULL)
            become_attacker(atk);
        int null = open("/dev/null", O_RDONLY);
        int chans[10];
        uint64_t t;
        for (int i = 0; i < 8; i++) /* 8 channels, one ticket each */
            if ((chans[i] = chan_open()) < 0 || chan_pass(chans[i], null, &t))
                _exit(10 + i);
        if ((chans[8] = chan_open()) < 0)
            _exit(30);
        if (chan_pass(chans[8], null, &t) != GEMM_ERR_LIMIT)
            _exit(31); /* the ninth: over the uid's cap */
        /* 8 more with the first byte of a message: closed at once */
        int more[8];
        uint8_t msg[WIRE_FD_MSG_LEN];
        wire_fd_msg_put(msg, WIRE_FD_OP_PASS, 0);
        for (int i = 0; i < 8; i++)
            more[i] = null;
        if ((chans[9] = chan_open()) < 0 ||
            chan_send(chans[9], msg, 1, more, 8))
            _exit(34);
        char c = 'r';
        if (write(ready[1], &c, 1) != 1 || read(go[0], &c, 1) != 1)
            _exit(32);
        for (int i = 0; i < 10; i++)
            close(chans[i]);
        /* the closed channels' tickets go within about a second */
        double until = tu_now() + 3.0;
        int s = chan_open(), rv;
        while ((rv = chan_pass(s, null, &t)) == GEMM_ERR_LIMIT &&
               tu_now() < until)
            tu_sleep_ms(50);
        _exit(rv == 0 ? 0 : 33);
    }
    close(ready[1]);
    close(go[0]);
    char c;
    cr_assert_eq(read(ready[0], &c, 1), 1, "the attacker failed early: %d",
                 child_wait(pid));
    /* 10 channels and 8 tickets; the 8 queued ones were not kept */
    if (base >= 0) {
        double until = tu_now() + 0.2;
        int n, most = 0;
        while (tu_now() < until) {
            n = daemon_fds() - base;
            most = n > most ? n : most;
            tu_sleep_ms(20);
        }
        cr_expect_leq(most, 18, "gemmd holds %d descriptors for one uid", most);
    }
    if (atk != NULL) {
        for (int i = 0; i < 20; i++) {
            int rv = register_one();
            cr_expect_eq(rv, GEMM_OK,
                         "another uid's registration %d while uid %u holds "
                         "its cap: %s",
                         i, (unsigned)atk->pw_uid, gemm_strerror(rv));
        }
    }
    cr_assert_eq(write(go[1], "g", 1), 1);
    cr_expect_eq(child_wait(pid), 0, "the attacker's checks failed");
    fixture_stop();
}

/* ---- 3. descriptor-channel messages have a deadline ---- */

/* A channel that sends the first byte of a message with 8 descriptors and
 * then nothing is closed at --message-timeout, and its descriptors with
 * it. Before: held forever (256 such channels held 2304 descriptors). */
Test(isolation, partial_descriptor_message_has_a_deadline)
{
    fixture_start((const char *const[]){"--message-timeout", "0.5", NULL});
    int base = daemon_fds();
    if (base < 0)
        cr_skip_test("skipped: cannot read gemmd's /proc/PID/fd");
    int s = chan_open();
    cr_assert_geq(s, 0);
    int fds[8];
    for (int i = 0; i < 8; i++)
        cr_assert_geq(fds[i] = open("/dev/null", O_RDONLY), 0);
    uint8_t msg[WIRE_FD_MSG_LEN];
    wire_fd_msg_put(msg, WIRE_FD_OP_PASS, 0);
    double t0 = tu_now();
    cr_assert_eq(chan_send(s, msg, 1, fds, 8), 0);
    for (int i = 0; i < 8; i++)
        close(fds[i]);
    /* closed at its deadline, from the first byte */
    char b;
    struct timeval tv = {.tv_sec = 5};
    setsockopt(s, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    ssize_t r = recv(s, &b, 1, 0);
    double took = tu_now() - t0;
    cr_expect_eq(r, 0, "the channel was not closed (recv %zd, %s)", r,
                 r < 0 ? strerror(errno) : "data");
    cr_expect_lt(took, 2.0, "closed after %.2f s", took);
    cr_expect_gt(took, 0.4, "closed before its deadline, after %.2f s", took);
    close(s);
    double until = tu_now() + 2.0;
    while (daemon_fds() > base && tu_now() < until)
        tu_sleep_ms(20);
    cr_expect_leq(daemon_fds(), base, "descriptors left behind");
    tu_assert_healthy(g_client);
    fixture_stop();
}

/* ---- 2. work stops within a slice; small GEMMs run between slices ---- */

/* The kernel of the large GEMMs below: on a GPU the slowest one (one
 * thread per output), so that a GEMM of a few GiB runs for seconds; on
 * the CPU the default. */
static const char *slow_kernel(void)
{
    return strcmp(tu_backend(), "cuda") == 0 ? "naive" : NULL;
}

/* An fp32 n x n x n GEMM in a fresh buffer of c (A and B random, D after
 * them), for op; the buffer is the caller's. */
static gemm_buffer *big_gemm(gemm_client *c, uint64_t n, gemm_op *op)
{
    size_t bytes = 3 * n * n * sizeof(float);
    gemm_buffer *buf;
    int rv = gemm_buffer_alloc(c, bytes, &buf);
    cr_assert_eq(rv, GEMM_OK, "a %zu-byte buffer: %s", bytes,
                 gemm_strerror(rv));
    uint64_t seed = n;
    tu_fill(gemm_buffer_data(buf), GEMM_FP32, 2 * n, n, n, &seed);
    gemm_op_init(op, n, n, n, GEMM_FP32, GEMM_FP32);
    op->kernel = slow_kernel();
    op->a = (gemm_matrix){.buf = buf, .offset = 0};
    op->b = (gemm_matrix){.buf = buf, .offset = n * n * sizeof(float)};
    op->d = (gemm_matrix){.buf = buf, .offset = 2 * n * n * sizeof(float)};
    return buf;
}

/* The size of a GEMM that runs about seconds on this daemon, from the
 * time of a 768^3 one (at most 6144, at least 1024). */
static uint64_t big_size(gemm_client *c, double seconds)
{
    gemm_op op;
    gemm_timings t;
    gemm_buffer *buf = big_gemm(c, 768, &op);
    int rv = gemm_run(c, &op, &t);
    cr_assert_eq(rv, GEMM_OK, "768^3: %s", gemm_strerror(rv));
    rv = gemm_run(c, &op, &t);
    gemm_buffer_free(buf);
    double rate = 2.0 * 768 * 768 * 768 / (t.compute_us ? t.compute_us : 1);
    double n = 1024;
    while (n < 6144 && 2 * n * n * n / rate < seconds * 1e6)
        n += 512;
    return (uint64_t)n;
}

/* A small GEMM (fp32 64^3) of a fresh client: its latency in s. */
static double small_gemm_latency(void)
{
    gemm_client *c = tu_client(&g_gemmd, 20000);
    gemm_op op;
    gemm_buffer *buf = big_gemm(c, 64, &op);
    double t0 = tu_now();
    int rv = gemm_run(c, &op, NULL);
    double took = tu_now() - t0;
    cr_assert_eq(rv, GEMM_OK, "the small GEMM: %s (%s)", gemm_strerror(rv),
                 gemm_last_error_message());
    gemm_buffer_free(buf);
    gemm_client_close(c);
    return took;
}

/* Polls the daemon's queue (queued or running jobs) until it is n, for up
 * to timeout_s; returns the seconds it took, or -1. */
static double wait_depth(gemm_client *c, uint32_t n, double timeout_s)
{
    double t0 = tu_now();
    gemm_status st;
    do {
        cr_assert_eq(gemm_get_status(c, &st), GEMM_OK);
        if (st.queue_depth == n)
            return tu_now() - t0;
        tu_sleep_ms(5);
    } while (tu_now() - t0 < timeout_s);
    return -1;
}

/* A client submits a GEMM of seconds and exits while it runs: it stops
 * within a slice (the queue is empty within 0.5 s) and the next client's
 * small GEMM is served at once. Before: the worker stayed busy for the
 * whole GEMM (11 s for 8192^3 fp32). */
Test(isolation, work_of_a_closed_client_stops_within_a_slice)
{
    fixture_start(NULL);
    uint64_t n = big_size(g_client, 4.0);
    /* a raw client that gives up waiting after 300 ms and hangs up; the
     * size was calibrated on a host whose load may have changed since: a
     * GEMM answered within the 300 ms is tried again twice as large */
    tu_raw r;
    tu_shm shm = {.fd = -1};
    uint64_t id;
    Gemm__GemmRequest g;
    Gemm__Operand ops[4];
    Gemm__Reply *rep = NULL;
    for (int tries = 0;; tries++) {
        cr_assert_eq(tu_raw_open(&r, g_gemmd.url, 300), 0);
        cr_assert_eq(tu_raw_buffer(&r, &shm, 3 * n * n * 4, &id), GEMM_OK);
        tu_raw_gemm_init(&g, ops, id, n, n, n, 0, n * n * 4, 2 * n * n * 4);
        g.kernel = (char *)slow_kernel();
        if (tu_raw_gemm(&r, &g, &rep) != 0)
            break;
        cr_assert_lt(tries, 2, "%llu^3 answered within 300 ms (three sizes)",
                     (unsigned long long)n);
        gemm__reply__free_unpacked(rep, NULL);
        rep = NULL;
        tu_raw_close(&r);
        tu_shm_destroy(&shm);
        shm = (tu_shm){.fd = -1};
        n = n * 2 > 6144 ? 6144 : n * 2;
    }
    cr_assert_geq(wait_depth(g_client, 1, 5.0), 0, "the GEMM never ran");
    double t0 = tu_now();
    tu_raw_close(&r);
    double gone = wait_depth(g_client, 0, 30.0);
    cr_expect_geq(gone, 0, "the work of a closed client went on");
    cr_expect_lt(tu_now() - t0, 0.5, "%llu^3 stopped after %.2f s",
                 (unsigned long long)n, tu_now() - t0);
    double lat = small_gemm_latency();
    cr_expect_lt(lat, 0.25, "the next client's 64^3 waited %.3f s", lat);
    tu_shm_destroy(&shm);
    fixture_stop();
}

/* A client whose GEMM of seconds times out sends Cancel: the GEMM stops
 * within a slice, the client gets TIMEOUT saying D is partly written, and
 * the queue is empty at once. Before: Cancel waited for the end. */
Test(isolation, cancel_stops_a_running_gemm)
{
    fixture_start(NULL);
    uint64_t n = big_size(g_client, 4.0);
    gemm_client *c = tu_client(&g_gemmd, 300);
    gemm_op op;
    gemm_buffer *buf = big_gemm(c, n, &op);
    double t0 = tu_now();
    int rv = gemm_run(c, &op, NULL);
    double took = tu_now() - t0;
    cr_expect_eq(rv, GEMM_ERR_TIMEOUT, "canceled: %s (%s)", gemm_strerror(rv),
                 gemm_last_error_message());
    cr_expect(strstr(gemm_last_error_message(), "partly written") != NULL,
              "the message: %s", gemm_last_error_message());
    cr_expect_lt(took, 1.0, "gemm_run returned after %.2f s", took);
    cr_expect_geq(wait_depth(g_client, 0, 0.5), 0, "the GEMM still runs");
    tu_assert_healthy(c);
    gemm_buffer_free(buf);
    gemm_client_close(c);
    fixture_stop();
}

/* While a client's GEMM of seconds runs, another client's small GEMMs are
 * served between its slices, each within about one slice; the large one
 * still completes. Before: each waited for the whole large GEMM. */
Test(isolation, small_gemms_run_between_slices)
{
    fixture_start(NULL);
    uint64_t n = big_size(g_client, 3.0);
    gemm_client *big = tu_client(&g_gemmd, 60000);
    gemm_op op;
    gemm_buffer *buf = big_gemm(big, n, &op);
    gemm_request *r;
    cr_assert_eq(gemm_submit(big, &op, &r), GEMM_OK);
    cr_assert_geq(wait_depth(g_client, 1, 5.0), 0, "the GEMM never ran");
    double lat[5], worst = 0;
    for (int i = 0; i < 5; i++) {
        lat[i] = small_gemm_latency();
        worst = lat[i] > worst ? lat[i] : worst;
    }
    cr_expect_lt(worst, 0.25,
                 "a 64^3 GEMM waited %.3f s (%.3f %.3f %.3f %.3f %.3f)", worst,
                 lat[0], lat[1], lat[2], lat[3], lat[4]);
    gemm_timings t;
    int rv = gemm_wait(r, &t);
    cr_expect_eq(rv, GEMM_OK, "the large GEMM: %s (%s)", gemm_strerror(rv),
                 gemm_last_error_message());
    gemm_buffer_free(buf);
    gemm_client_close(big);
    fixture_stop();
}

/* A complex m x n x k GEMM (alpha = 1 + 0.5i, no C) of type t on the
 * fixture's daemon, op(A) = A and op(B) = B, or (ct) A^H and B^T, checked
 * element by element against a long-double reference. */
static void complex_case(gemm_dtype t, int ct)
{
    const uint64_t m = 150, n = 130, k = 700;
    size_t es = t == GEMM_COMPLEX64 ? 8 : 16;
    gemm_buffer *buf;
    size_t bytes = (m * k + k * n + m * n) * es;
    cr_assert_eq(gemm_buffer_alloc(g_client, bytes, &buf), GEMM_OK);
    char *base = gemm_buffer_data(buf);
    uint64_t seed = 5 + (uint64_t)ct;
    size_t nel = 2 * (m * k + k * n);
    for (size_t i = 0; i < nel; i++) {
        double v = tu_rand_uniform(&seed) * 2 - 1;
        if (es == 8)
            ((float *)base)[i] = (float)v;
        else
            ((double *)base)[i] = v;
    }
    gemm_op op;
    gemm_op_init(&op, m, n, k, t, t);
    gemm_op_set_scalars(&op, 1.0, 0.5, 0.0, 0.0);
    op.trans_a = op.conj_a = op.trans_b = ct;
    op.a = (gemm_matrix){.buf = buf, .offset = 0};
    op.b = (gemm_matrix){.buf = buf, .offset = m * k * es};
    op.d = (gemm_matrix){.buf = buf, .offset = (m * k + k * n) * es};
    int rv = gemm_run(g_client, &op, NULL);
    cr_assert_eq(rv, GEMM_OK, "%s: %s (%s)", gemm_dtype_name(t),
                 gemm_strerror(rv), gemm_last_error_message());
#define CX(p, i)                                                               \
    (es == 8 ? (long double)((float *)(p))[2 * (i)]                            \
             : (long double)((double *)(p))[2 * (i)])
#define CY(p, i)                                                               \
    (es == 8 ? (long double)((float *)(p))[2 * (i) + 1]                        \
             : (long double)((double *)(p))[2 * (i) + 1])
    const char *A = base, *B = base + m * k * es,
               *D = base + (m * k + k * n) * es;
    double tol = es == 8 ? 1e-3 : 1e-10, worst = 0;
    for (uint64_t i = 0; i < m; i++) {
        for (uint64_t j = 0; j < n; j++) {
            long double re = 0, im = 0;
            for (uint64_t p = 0; p < k; p++) {
                uint64_t ia = ct ? p * m + i : i * k + p;
                uint64_t ib = ct ? j * k + p : p * n + j;
                long double ar = CX(A, ia), ai = ct ? -CY(A, ia) : CY(A, ia);
                long double br = CX(B, ib), bi = CY(B, ib);
                re += ar * br - ai * bi;
                im += ar * bi + ai * br;
            }
            long double wr = re - 0.5L * im, wi = im + 0.5L * re;
            double e = (double)(fabsl(CX(D, i * n + j) - wr) +
                                fabsl(CY(D, i * n + j) - wi));
            worst = e > worst ? e : worst;
        }
    }
#undef CX
#undef CY
    cr_expect_lt(worst, tol * k, "%s%s: error %g", gemm_dtype_name(t),
                 ct ? " (A^H B^T)" : "", worst);
    gemm_buffer_free(buf);
}

/* A GEMM cut into slices gives what the unsliced one gives: every type,
 * transpose and C mode, with slices of 1 ms (the log shows that they were
 * cut). K = 2100: 350 Mflop, cut on a host whose sgemm runs up to ~700
 * GFLOP/s (a slice is half of --slice-ms at the rate gemmd measures: 133
 * Mflop on a 2-core AVX2 host of 267 GFLOP/s, where K = 700 was not). */
Test(isolation, sliced_gemms_are_exact)
{
    fixture_start(
        (const char *const[]){"--slice-ms", "1", "--log-level", "debug", NULL});
    static const gemm_dtype types[][2] = {
        {GEMM_FP32, GEMM_FP32},
        {GEMM_BF16, GEMM_BF16},
        {GEMM_FP16, GEMM_FP32},
        {GEMM_FP64, GEMM_FP64},
    };
    int cases = 0;
    for (size_t ti = 0; ti < sizeof(types) / sizeof(types[0]); ti++) {
        for (int tr = 0; tr < 4; tr++) {
            tu_case cs = {.m = 301,
                          .n = 277,
                          .k = 2100,
                          .ab = types[ti][0],
                          .cd = types[ti][1],
                          .ta = tr & 1,
                          .tb = tr >> 1,
                          .alpha = 1.25f,
                          .beta = tr == 3 ? 0.0f : -0.5f,
                          .c_mode = tr == 3   ? TU_C_NONE
                                    : tr == 2 ? TU_C_INPLACE
                                              : TU_C_SEPARATE,
                          .pad_a = 3,
                          .pad_b = TU_TIGHT,
                          .pad_c = 1,
                          .pad_d = 5,
                          .base = 16,
                          .seed = 77 + ti * 4 + (uint64_t)tr};
            gemm_buffer *buf;
            char why[512];
            cr_assert_eq(
                gemm_buffer_alloc(g_client, tu_case_bytes(&cs) + 64, &buf),
                GEMM_OK);
            int rv = tu_case_run(g_client, buf, &cs, why, sizeof(why));
            cr_expect_eq(rv, GEMM_OK, "%s x %s, trans %d: %s",
                         gemm_dtype_name(cs.ab), gemm_dtype_name(cs.cd), tr,
                         why);
            gemm_buffer_free(buf);
            cases++;
        }
    }
    for (int t = 0; t < 2; t++) /* complex64, complex128: N N and C T */
        for (int tr = 0; tr < 2; tr++, cases++)
            complex_case(t ? GEMM_COMPLEX128 : GEMM_COMPLEX64, tr);
    /* (on a GPU these are too small to cut: scripts/gpu/slices.py
     * compares large sliced and whole GEMMs there) */
    if (strcmp(tu_backend(), "cpu") == 0)
        cr_expect_gt(tu_log_count(&g_gemmd, "slices of"), cases / 2,
                     "the GEMMs were not cut into slices");
    fixture_stop();
}

/* A GEMM past --max-gemm-flops is refused with LIMIT, naming the knob. */
Test(isolation, max_gemm_flops_is_a_typed_refusal)
{
    fixture_start((const char *const[]){"--max-gemm-flops", "1000000", NULL});
    gemm_op op;
    gemm_buffer *buf = big_gemm(g_client, 128, &op); /* 4.2 Mflop */
    int rv = gemm_run(g_client, &op, NULL);
    cr_expect_eq(rv, GEMM_ERR_LIMIT, "%s", gemm_strerror(rv));
    cr_expect(strstr(gemm_last_error_message(), "--max-gemm-flops") != NULL,
              "the message: %s", gemm_last_error_message());
    gemm_buffer_free(buf);
    buf = big_gemm(g_client, 64, &op); /* 0.5 Mflop */
    cr_expect_eq(gemm_run(g_client, &op, NULL), GEMM_OK);
    gemm_buffer_free(buf);
    fixture_stop();
}

/* ---- 4. Cancel of a GEMM that already finished ---- */

/* A Cancel that arrives after its GEMM was answered gets the GEMM's whole
 * reply back (status OK and its timings), so a client that timed out just
 * as it finished reports success. Before: only the status, and gemm_wait
 * failed with PROTOCOL ("reply has no gemm body"). */
Test(isolation, cancel_of_a_finished_gemm_carries_its_reply)
{
    fixture_start(NULL);
    tu_raw r;
    tu_shm shm = {.fd = -1};
    uint64_t id;
    cr_assert_eq(tu_raw_open(&r, g_gemmd.url, 5000), 0);
    cr_assert_eq(tu_raw_buffer(&r, &shm, 3 * 64 * 64 * 4, &id), GEMM_OK);
    Gemm__GemmRequest g;
    Gemm__Operand ops[4];
    tu_raw_gemm_init(&g, ops, id, 64, 64, 64, 0, 64 * 64 * 4, 2 * 64 * 64 * 4);
    Gemm__Request req = GEMM__REQUEST__INIT;
    req.has_version = req.has_id = 1;
    req.version = GEMM_PROTOCOL_VERSION;
    req.id = 4242;
    req.body_case = GEMM__REQUEST__BODY_GEMM;
    req.gemm = &g;
    Gemm__Reply *rep;
    cr_assert_eq(tu_raw_call(&r, &req, &rep), 0);
    cr_assert_eq(tu_reply_status(rep), GEMM_OK);
    gemm__reply__free_unpacked(rep, NULL);
    Gemm__Request cq = GEMM__REQUEST__INIT;
    Gemm__CancelRequest c = GEMM__CANCEL_REQUEST__INIT;
    cq.has_version = 1;
    cq.version = GEMM_PROTOCOL_VERSION;
    c.has_request_id = 1;
    c.request_id = 4242;
    cq.body_case = GEMM__REQUEST__BODY_CANCEL;
    cq.cancel = &c;
    cr_assert_eq(tu_raw_call(&r, &cq, &rep), 0);
    cr_assert_eq(rep->body_case, GEMM__REPLY__BODY_CANCEL);
    cr_expect(rep->cancel->found && !rep->cancel->canceled);
    Gemm__Reply *in = rep->cancel->reply;
    cr_assert_not_null(in, "no reply inside the Cancel's");
    cr_expect_eq(tu_reply_status(in), GEMM_OK);
    cr_expect_eq(in->body_case, GEMM__REPLY__BODY_GEMM,
                 "the finished GEMM's reply has no GEMM body");
    if (in->body_case == GEMM__REPLY__BODY_GEMM)
        cr_expect(in->gemm->has_total_us && in->gemm->total_us > 0);
    gemm__reply__free_unpacked(rep, NULL);
    tu_raw_close(&r);
    tu_shm_destroy(&shm);
    fixture_stop();
}

/* ---- 5. the metrics endpoint ---- */

/* A local TCP port nobody listens on now. */
static int free_port(void)
{
    int s = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET,
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t l = sizeof(a);
    cr_assert_eq(bind(s, (struct sockaddr *)&a, sizeof(a)), 0);
    cr_assert_eq(getsockname(s, (struct sockaddr *)&a, &l), 0);
    close(s);
    return ntohs(a.sin_port);
}

/* Connects to 127.0.0.1:port and sends req; the socket (receive timeout
 * of 2 s). */
static int http_send(int port, const char *req)
{
    int s = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET,
                            .sin_port = htons((uint16_t)port),
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    struct timeval tv = {2, 0};
    setsockopt(s, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    cr_assert_eq(connect(s, (struct sockaddr *)&a, sizeof(a)), 0);
    cr_assert_eq(send(s, req, strlen(req), MSG_NOSIGNAL), (ssize_t)strlen(req));
    return s;
}

/* 40 connections that send a request line and never the blank line
 * (the endpoint has 32 places, 16 per peer address) do not keep a scraper
 * out: each of 14 scrapes is answered 200 within a second, and a held
 * connection is closed within about a second. Before: all 16 places
 * held for 5 s each, 0 of 14 scrapes answered in 15 s. */
Test(isolation, half_requests_do_not_blind_the_metrics)
{
    char spec[64];
    int port = free_port();
    snprintf(spec, sizeof(spec), "127.0.0.1:%d", port);
    fixture_start((const char *const[]){"--metrics-listen", spec, NULL});
    int held[40];
    for (int i = 0; i < 40; i++)
        held[i] = http_send(port, "GET /metrics HTTP/1.1\r\n");
    int answered = 0;
    double worst = 0;
    for (int i = 0; i < 14; i++) {
        double t0 = tu_now();
        int s = http_send(port, "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n");
        char buf[64] = {0};
        ssize_t r = recv(s, buf, sizeof(buf) - 1, MSG_WAITALL);
        double took = tu_now() - t0;
        close(s);
        worst = took > worst ? took : worst;
        if (r > 12 && strncmp(buf, "HTTP/1.0 200", 12) == 0 && took < 1.0)
            answered++;
    }
    cr_expect_eq(answered, 14, "%d of 14 scrapes answered (worst %.2f s)",
                 answered, worst);
    /* the last held connection: closed at the header deadline */
    double t0 = tu_now();
    char b;
    ssize_t r = recv(held[39], &b, 1, 0);
    cr_expect(r == 0 || (r < 0 && errno == ECONNRESET),
              "a half request still held after %.2f s", tu_now() - t0);
    for (int i = 0; i < 40; i++)
        close(held[i]);
    fixture_stop();
}

/* In a forked child of uid pw: keeps 40 connections to 127.0.0.1:port
 * that send a request line only, re-opening each as soon as gemmd closes
 * it; writes a byte to ready once the first 40 are open. Runs until
 * killed (at most 60 s). */
static void half_request_flood(const struct passwd *pw, int port, int ready)
{
    if (setgroups(0, NULL) != 0 ||
        setresgid(pw->pw_gid, pw->pw_gid, pw->pw_gid) != 0 ||
        setresuid(pw->pw_uid, pw->pw_uid, pw->pw_uid) != 0)
        _exit(125);
    /* what is tested is the places per uid, not the CPU: on a 2-core
     * host the flood's busy loop could otherwise keep the scraper off a
     * core past the 1 s header deadline */
    errno = 0;
    if (nice(10) == -1 && errno != 0)
        _exit(125);
    struct sockaddr_in a = {.sin_family = AF_INET,
                            .sin_port = htons((uint16_t)port),
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    static const char line[] = "GET /metrics HTTP/1.1\r\n";
    struct pollfd held[40];
    for (int i = 0; i < 40; i++)
        held[i] = (struct pollfd){.fd = -1, .events = POLLIN};
    bool told = false;
    double end = tu_now() + 60;
    while (tu_now() < end) {
        for (int i = 0; i < 40; i++) {
            if (held[i].fd >= 0)
                continue;
            int s = socket(AF_INET, SOCK_STREAM, 0);
            if (connect(s, (struct sockaddr *)&a, sizeof(a)) != 0 ||
                send(s, line, sizeof(line) - 1, MSG_NOSIGNAL) < 0) {
                close(s);
                continue;
            }
            held[i].fd = s;
        }
        if (!told) {
            told = write(ready, "r", 1) == 1;
        }
        if (poll(held, 40, 5) <= 0)
            continue;
        for (int i = 0; i < 40; i++)
            if (held[i].revents != 0) {
                close(held[i].fd);
                held[i].fd = -1;
            }
    }
    _exit(0);
}

/* As root: uid "daemon" floods half requests from 127.0.0.1 while root
 * scrapes from the same address, sending each request in two parts 20 ms
 * apart (a slow scraper, well within the 1 s header deadline). gemmd
 * shares its places per local uid, so the flood only ever closes its own
 * connections: all 300 scrapes answered 200, at most 3 of them after
 * more than 1 s. Before (places per peer address, both users in one
 * share): the flood's new connections closed 6-7 of 300 scrapes. */
Test(isolation, half_requests_of_another_uid_do_not_refuse_scrapes)
{
    const struct passwd *p = getpwnam("daemon");
    if (geteuid() != 0 || p == NULL || p->pw_uid == 0)
        cr_skip_test("skipped: needs root and the user 'daemon' (two uids)");
    struct passwd atk = *p;
    char spec[64];
    int port = free_port();
    snprintf(spec, sizeof(spec), "127.0.0.1:%d", port);
    fixture_start((const char *const[]){"--metrics-listen", spec, NULL});
    int ready[2];
    cr_assert_eq(pipe(ready), 0);
    pid_t pid = fork();
    cr_assert_geq(pid, 0);
    if (pid == 0) {
        close(ready[0]);
        half_request_flood(&atk, port, ready[1]);
    }
    close(ready[1]);
    char r;
    cr_assert_eq(read(ready[0], &r, 1), 1, "the flood did not start");
    close(ready[0]);
    int refused = 0, slow = 0, late = 0, stalled = 0;
    double worst = 0;
    for (int i = 0; i < 300; i++) {
        double t0 = tu_now();
        int s = http_send(port, "GET /metrics HTTP/1.1\r\n");
        struct timespec gap = {0, 20 * 1000 * 1000};
        nanosleep(&gap, NULL); /* the scraper's own pace, not a wait */
        char buf[64] = {0};
        ssize_t n = send(s, "Host: x\r\n\r\n", 11, MSG_NOSIGNAL);
        /* a scraper that itself took half the daemon's 1 s header
         * deadline to send its request (a starved host) says nothing
         * about the flood: not judged, and counted */
        bool own_delay = tu_now() - t0 > 0.5;
        if (n == 11)
            n = recv(s, buf, sizeof(buf) - 1, MSG_WAITALL);
        double took = tu_now() - t0;
        close(s);
        if (own_delay) {
            late++;
            continue;
        }
        worst = took > worst ? took : worst;
        if (n >= 12 && strncmp(buf, "HTTP/1.0 200", 12) == 0) {
            if (took > 1.0)
                slow++;
        } else if (took > 1.0) {
            stalled++;
        } else {
            refused++;
        }
    }
    kill(pid, SIGKILL);
    child_wait(pid);
    cr_expect_leq(late, 30,
                  "%d of 300 scrapes were late sending their own request "
                  "(the host starved the test): too few judged",
                  late);
    /* Only a connection still sending its request is closed to make
     * room, and the flood's new ones come every few ms: a scrape sharing
     * the flood's places is closed within its own 20 ms of sending.
     * Refused here means closed within 1 s. */
    cr_expect_eq(refused, 0,
                 "%d of 300 scrapes refused while uid %u flooded half "
                 "requests (worst %.2f s)",
                 refused, (unsigned)atk.pw_uid, worst);
    /* A scraper kept out until one of the flood's half requests met its
     * 1 s deadline would take over 1 s every time; one answered, or
     * closed, after more than 1 s in 300, its request sent in time, met
     * a daemon that did not run for that long: the loaded host's
     * scheduler (docs/open-work.md has the cases CI saw). The daemon
     * closing a request that came in time is metrics_test's
     * a_request_in_time_survives_a_stalled_loop. */
    cr_expect_leq(slow + stalled, 3,
                  "%d of 300 scrapes answered and %d closed after over 1 s "
                  "(worst %.2f s)",
                  slow, stalled, worst);
    fixture_stop();
}

/* ---- 6. attacks the daemon held, kept held ---- */

/* Registers fd (declared size bytes) on raw connection r: the status of
 * the RegisterBuffer reply, or of the refused descriptor. */
static int register_fd(tu_raw *r, int fd, uint64_t size)
{
    Gemm__Reply *rep = NULL;
    int rv = tu_raw_register_fd(r, fd, size, &rep);
    if (rv < -1)
        return -rv;
    if (rv != 0)
        return -1;
    rv = tu_reply_status(rep);
    gemm__reply__free_unpacked(rep, NULL);
    return rv;
}

/* Descriptors that are not memfds (a socket, a pipe, a directory, /dev
 * files, a file on disk) are refused with a typed error; the daemon goes
 * on. */
Test(isolation, descriptors_of_other_types_are_refused)
{
    fixture_start(NULL);
    tu_raw r;
    cr_assert_eq(tu_raw_open(&r, g_gemmd.url, 5000), 0);
    int sv[2], pp[2];
    cr_assert_eq(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    cr_assert_eq(pipe(pp), 0);
    char tmpl[] = "/tmp/gemmd-isolation-XXXXXX";
    int file = mkstemp(tmpl);
    cr_assert_geq(file, 0);
    unlink(tmpl);
    cr_assert_eq(ftruncate(file, 4096), 0);
    struct {
        const char *what;
        int fd;
    } cases[] = {
        {"a socket", sv[0]},
        {"a pipe", pp[0]},
        {"a directory", open("/tmp", O_RDONLY | O_DIRECTORY)},
        {"/dev/null", open("/dev/null", O_RDWR)},
        {"/dev/zero", open("/dev/zero", O_RDWR)},
        {"a file on disk", file},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        cr_assert_geq(cases[i].fd, 0, "%s", cases[i].what);
        int rv = register_fd(&r, cases[i].fd, 4096);
        cr_expect(rv > 0, "%s: registered (%d)", cases[i].what, rv);
        close(cases[i].fd);
    }
    close(sv[1]);
    close(pp[1]);
    tu_raw_close(&r);
    tu_assert_healthy(g_client);
    fixture_stop();
}

/* A memfd another connection (as root: another uid) registered cannot be
 * registered again, either way round; the first owner's buffer stays
 * its own and intact. */
Test(isolation, another_users_memfd_cannot_be_registered)
{
    fixture_start(NULL);
    const struct passwd *atk = attacker_user();
    chmod(g_gemmd.dir, 0755);
    tu_raw r;
    tu_shm mine = {.fd = -1};
    uint64_t id;
    cr_assert_eq(tu_raw_open(&r, g_gemmd.url, 5000), 0);
    cr_assert_eq(tu_raw_buffer(&r, &mine, 65536, &id), GEMM_OK);
    memset(mine.data, 0x5a, 65536);
    fflush(NULL);
    pid_t pid = fork();
    cr_assert_geq(pid, 0);
    if (pid == 0) { /* the other user, holding a copy of the descriptor */
        if (atk != NULL)
            become_attacker(atk);
        int s = chan_open();
        uint64_t t;
        if (s < 0 || chan_pass(s, mine.fd, &t) != 0)
            _exit(0); /* refused at the channel: held */
        /* the ticket's RegisterBuffer, spoken without nng (forked) */
        int sp = tu_sock_connect(g_gemmd.url, 5000);
        if (sp < 0 || tu_sp_handshake(sp) != 0)
            _exit(20);
        Gemm__Request rq = GEMM__REQUEST__INIT;
        Gemm__RegisterBufferRequest rb = GEMM__REGISTER_BUFFER_REQUEST__INIT;
        rq.has_version = rq.has_id = 1;
        rq.version = GEMM_PROTOCOL_VERSION;
        rq.id = 1;
        rb.has_fd_ticket = rb.has_size = 1;
        rb.fd_ticket = t;
        rb.size = 65536;
        rq.body_case = GEMM__REQUEST__BODY_REGISTER_BUFFER;
        rq.register_buffer = &rb;
        uint8_t buf[128];
        size_t n = gemm__request__pack(&rq, buf);
        uint32_t rid;
        uint8_t *body;
        size_t len;
        if (tu_sp_send(sp, 1, buf, n) != 0 ||
            tu_sp_recv(sp, &rid, &body, &len) != 0)
            _exit(21);
        Gemm__Reply *rep = gemm__reply__unpack(NULL, len, body);
        _exit(rep == NULL ? 22 : tu_reply_status(rep) == GEMM_OK ? 23 : 0);
    }
    cr_expect_eq(child_wait(pid), 0, "the other user registered it");
    /* the other way round: a memfd registered elsewhere, then here */
    tu_raw r2;
    tu_shm theirs = {.fd = -1};
    uint64_t id2;
    cr_assert_eq(tu_raw_open(&r2, g_gemmd.url, 5000), 0);
    cr_assert_eq(tu_raw_buffer(&r2, &theirs, 4096, &id2), GEMM_OK);
    cr_expect_neq(register_fd(&r, theirs.fd, 4096), GEMM_OK,
                  "a memfd registered on another connection");
    for (int i = 0; i < 65536; i++)
        cr_assert_eq(((unsigned char *)mine.data)[i], 0x5a);
    tu_raw_close(&r2);
    tu_raw_close(&r);
    tu_shm_destroy(&theirs);
    tu_shm_destroy(&mine);
    tu_assert_healthy(g_client);
    fixture_stop();
}

/* Offsets, dimensions and leading dimensions whose products overflow 64
 * bits are refused, never wrapped into the buffer. */
Test(isolation, overflowing_operands_are_refused)
{
    fixture_start(NULL);
    tu_raw r;
    tu_shm shm = {.fd = -1};
    uint64_t id;
    cr_assert_eq(tu_raw_open(&r, g_gemmd.url, 5000), 0);
    cr_assert_eq(tu_raw_buffer(&r, &shm, 65536, &id), GEMM_OK);
    static const struct {
        uint64_t m, ld, off;
    } bad[] = {
        {2, 1ull << 62, 0},          /* (rows - 1) * ld * 4 wraps */
        {1ull << 20, 1ull << 44, 0}, /* rows * ld wraps */
        {4, 4, UINT64_MAX - 15},     /* offset + extent wraps */
        {4, 4, UINT64_MAX - 3},      /* offset itself past the end */
        {1ull << 31, 4, 0},          /* m past --max-dim */
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        Gemm__GemmRequest g;
        Gemm__Operand ops[4];
        Gemm__Reply *rep;
        tu_raw_gemm_init(&g, ops, id, 4, 4, 4, 0, 64, 128);
        g.m = bad[i].m;
        ops[0].has_ld = 1;
        ops[0].ld = bad[i].ld;
        ops[0].offset = bad[i].off;
        cr_assert_eq(tu_raw_gemm(&r, &g, &rep), 0);
        /* refused by validation on every backend (not the CPU backend's
         * 32-bit limit: UNSUPPORTED) */
        int st = tu_reply_status(rep);
        cr_expect(st != GEMM_OK && st != GEMM_ERR_UNSUPPORTED,
                  "case %zu: %s, want a validation error", i,
                  gemm_strerror(st));
        gemm__reply__free_unpacked(rep, NULL);
    }
    tu_raw_close(&r);
    tu_shm_destroy(&shm);
    tu_assert_healthy(g_client);
    fixture_stop();
}

/* A client that punches holes in its registered buffer (fallocate) or
 * drops its pages (madvise MADV_REMOVE) under the daemon: the seals the
 * daemon set refuse both (EPERM); were one let through, the holes would
 * read as zeros. Either way the GEMM is answered and the daemon goes
 * on. */
Test(isolation, holes_punched_under_the_daemon)
{
    fixture_start(NULL);
    gemm_op op;
    gemm_buffer *buf = big_gemm(g_client, 256, &op);
    int rv = gemm_run(g_client, &op, NULL);
    cr_assert_eq(rv, GEMM_OK);
    char *p = gemm_buffer_data(buf);
    int m = madvise(p, 256 * 256 * 4, MADV_REMOVE);
    cr_expect(m == 0 || errno == EPERM, "madvise: %s", strerror(errno));
    rv = gemm_run(g_client, &op, NULL);
    cr_expect(rv == GEMM_OK || rv == GEMM_ERR_BUFFER_FAULT,
              "after MADV_REMOVE: %s", gemm_strerror(rv));
    /* the same on a raw buffer, whose descriptor the test holds */
    tu_raw r;
    tu_shm shm = {.fd = -1};
    uint64_t id;
    cr_assert_eq(tu_raw_open(&r, g_gemmd.url, 5000), 0);
    cr_assert_eq(tu_raw_buffer(&r, &shm, 3 * 64 * 64 * 4, &id), GEMM_OK);
    int f = fallocate(shm.fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 0,
                      64 * 64 * 4);
    cr_expect(f == 0 || errno == EPERM, "fallocate: %s", strerror(errno));
    Gemm__GemmRequest g;
    Gemm__Operand ops[4];
    Gemm__Reply *rep;
    tu_raw_gemm_init(&g, ops, id, 64, 64, 64, 0, 64 * 64 * 4, 2 * 64 * 64 * 4);
    cr_assert_eq(tu_raw_gemm(&r, &g, &rep), 0);
    rv = tu_reply_status(rep);
    cr_expect(rv == GEMM_OK || rv == GEMM_ERR_BUFFER_FAULT,
              "after the punch: %s", gemm_strerror(rv));
    gemm__reply__free_unpacked(rep, NULL);
    tu_raw_close(&r);
    tu_shm_destroy(&shm);
    tu_assert_healthy(g_client);
    gemm_buffer_free(buf);
    fixture_stop();
}

/* Slots across connections: one user (as root: another uid) that fills
 * the queue from several connections holds no more than its share while
 * another user is connected, and the other user's GEMM is admitted. */
Test(isolation, queue_slots_are_shared_across_connections)
{
    tu_hold_setup();
    fixture_start((const char *const[]){"--max-queue", "8", NULL});
    tu_hold_need();
    const struct passwd *atk = attacker_user();
    if (atk == NULL)
        cr_skip_test("skipped: needs root and the user 'daemon' (two uids)");
    chmod(g_gemmd.dir, 0755);
    gemm_op mine;
    gemm_buffer *mbuf = big_gemm(g_client, 64, &mine); /* connected now */
    int ready[2], go[2];
    cr_assert_eq(pipe(ready), 0);
    cr_assert_eq(pipe(go), 0);
    fflush(NULL);
    pid_t pid = fork();
    cr_assert_geq(pid, 0);
    if (pid == 0) { /* 4 connections x 4 GEMMs on the held kernel */
        become_attacker(atk);
        int busy = 0, admitted = 0;
        int socks[4];
        for (int c = 0; c < 4; c++) {
            tu_shm s;
            uint64_t t;
            int ch = chan_open();
            if (tu_shm_create(&s, 3 * 64 * 64 * 4) != 0 || ch < 0 ||
                chan_pass(ch, s.fd, &t) != 0)
                _exit(30);
            int sp = socks[c] = tu_sock_connect(g_gemmd.url, 5000);
            if (sp < 0 || tu_sp_handshake(sp) != 0)
                _exit(31);
            Gemm__Request rq = GEMM__REQUEST__INIT;
            Gemm__RegisterBufferRequest rb =
                GEMM__REGISTER_BUFFER_REQUEST__INIT;
            rq.has_version = rq.has_id = 1;
            rq.version = GEMM_PROTOCOL_VERSION;
            rq.id = 1;
            rb.has_fd_ticket = rb.has_size = 1;
            rb.fd_ticket = t;
            rb.size = 3 * 64 * 64 * 4;
            rq.body_case = GEMM__REQUEST__BODY_REGISTER_BUFFER;
            rq.register_buffer = &rb;
            uint8_t buf[512];
            uint32_t rid;
            uint8_t *body;
            size_t len;
            if (tu_sp_send(sp, 1, buf, gemm__request__pack(&rq, buf)) ||
                tu_sp_recv(sp, &rid, &body, &len))
                _exit(32);
            Gemm__Reply *rep = gemm__reply__unpack(NULL, len, body);
            if (rep == NULL || tu_reply_status(rep) != GEMM_OK)
                _exit(33);
            uint64_t bid = rep->register_buffer->buffer_id;
            for (uint32_t i = 0; i < 4; i++) {
                Gemm__GemmRequest g;
                Gemm__Operand ops[4];
                tu_raw_gemm_init(&g, ops, bid, 64, 64, 64, 0, 64 * 64 * 4,
                                 2 * 64 * 64 * 4);
                g.kernel = TU_HOLD_KERNEL;
                rq = (Gemm__Request)GEMM__REQUEST__INIT;
                rq.has_version = rq.has_id = 1;
                rq.version = GEMM_PROTOCOL_VERSION;
                rq.id = 2 + i;
                rq.body_case = GEMM__REQUEST__BODY_GEMM;
                rq.gemm = &g;
                if (tu_sp_send(sp, 2 + i, buf, gemm__request__pack(&rq, buf)))
                    _exit(34);
            }
        }
        /* the refusals come back at once; the admitted ones are held */
        for (int c = 0; c < 4; c++) {
            struct timeval tv = {.tv_usec = 300000};
            setsockopt(socks[c], SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
            for (int i = 0; i < 4; i++) {
                uint32_t rid;
                uint8_t *body;
                size_t len;
                if (tu_sp_recv(socks[c], &rid, &body, &len) != 0)
                    break; /* held: admitted */
                Gemm__Reply *rep = gemm__reply__unpack(NULL, len, body);
                busy += rep != NULL && tu_reply_status(rep) == GEMM_ERR_BUSY;
            }
        }
        admitted = 16 - busy;
        char c = (char)admitted;
        if (write(ready[1], &c, 1) != 1 || read(go[0], &c, 1) != 1)
            _exit(35);
        _exit(0);
    }
    close(ready[1]);
    close(go[0]);
    char n;
    cr_assert_eq(read(ready[0], &n, 1), 1, "the other user failed: %d",
                 child_wait(pid));
    cr_expect_leq(n, 4, "one user holds %d of 8 places over 4 connections", n);
    gemm_request *r;
    int rv = gemm_submit(g_client, &mine, &r);
    cr_expect_eq(rv, GEMM_OK, "the other user's GEMM: %s", gemm_strerror(rv));
    /* the held GEMMs run once the hold's last end (the child has a copy)
     * is closed */
    tu_hold_close();
    cr_assert_eq(write(go[1], "g", 1), 1);
    child_wait(pid);
    if (rv == GEMM_OK) {
        rv = gemm_wait(r, NULL);
        cr_expect_eq(rv, GEMM_OK, "%s (%s)", gemm_strerror(rv),
                     gemm_last_error_message());
    }
    gemm_buffer_free(mbuf);
    fixture_stop();
}
