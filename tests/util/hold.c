/*
 * hold.c: the test's end of the CPU backend's test hold, and the held GEMM
 * (see hold.h).
 */
#include "util/hold.h"
#include "util/cases.h"
#include "util/daemon.h"
#include "util/data.h"

#include <criterion/criterion.h>

#include <errno.h>
#include <poll.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

int tu_hold_daemon_fd = -1;
static int hold_fd = -1; /* the test's end */

void tu_hold_setup(void)
{
    int sv[2];
    if (strcmp(tu_backend(), "cpu") != 0 || hold_fd >= 0)
        return;
    cr_assert_eq(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv), 0,
                 "socketpair: %s", strerror(errno));
    hold_fd = sv[0];
    tu_hold_daemon_fd = sv[1];
}

bool tu_hold_have(void)
{
    static int listed; /* 1: the daemon lists the kernel, -1: it does not */
    if (hold_fd < 0)
        return false;
    if (listed == 0 && g_client != NULL) {
        gemm_kernel_info *k = NULL;
        size_t n = 0;
        listed = -1;
        if (gemm_list_kernels(g_client, &k, &n) == GEMM_OK)
            for (size_t i = 0; i < n; i++)
                if (strcmp(k[i].name, TU_HOLD_KERNEL) == 0)
                    listed = 1;
        gemm_kernel_info_free(k);
    }
    return listed > 0;
}

void tu_hold_need(void)
{
    if (hold_fd < 0)
        cr_skip_test("skipped: needs the CPU backend's test hold (the "
                     "test-hold kernel of gemmd_test); the suite runs on %s",
                     tu_backend());
    if (!tu_hold_have())
        cr_skip_test("skipped: needs the test hold, and %s has none (not a "
                     "gemmd_test build: see GEMM_TEST_GEMMD)",
                     tu_gemmd_path());
}

void tu_hold_wait(double timeout_s)
{
    char c;
    cr_assert_geq(hold_fd, 0, "tu_hold_wait without tu_hold_setup");
    double until = tu_now() + timeout_s;
    for (;;) {
        struct pollfd p = {.fd = hold_fd, .events = POLLIN};
        int ms = (int)((until - tu_now()) * 1000.0);
        int n = poll(&p, 1, ms > 0 ? ms : 0);
        if (n < 0 && errno == EINTR)
            continue;
        cr_assert_eq(n, 1, "no held GEMM reached the worker within %g s",
                     timeout_s);
        ssize_t r = read(hold_fd, &c, 1);
        if (r < 0 && errno == EINTR)
            continue;
        cr_assert_eq(r, 1, "the hold socket closed (gemmd_test gone?)");
        return;
    }
}

void tu_hold_release(void)
{
    char c = 'r';
    cr_assert_geq(hold_fd, 0, "tu_hold_release without tu_hold_setup");
    ssize_t r;
    while ((r = send(hold_fd, &c, 1, MSG_NOSIGNAL)) < 0 && errno == EINTR)
        ;
    cr_assert_eq(r, 1, "release: %s", strerror(errno));
}

void tu_hold_close(void)
{
    if (hold_fd >= 0)
        close(hold_fd);
    if (tu_hold_daemon_fd >= 0)
        close(tu_hold_daemon_fd);
    hold_fd = tu_hold_daemon_fd = -1;
}

bool tu_wait_queue_depth(gemm_client *c, unsigned n, double timeout_s)
{
    gemm_status st;
    double until = tu_now() + timeout_s;
    for (;;) {
        int rv = gemm_get_status(c, &st);
        cr_assert_eq(rv, GEMM_OK, "gemm_get_status: %s", gemm_strerror(rv));
        if (st.queue_depth >= n)
            return true;
        if (tu_now() > until)
            return false;
        tu_sleep_ms(1);
    }
}

void tu_held_op(gemm_client *c, gemm_buffer **buf, gemm_op *op)
{
    size_t nn = (size_t)TU_HELD_N * TU_HELD_N;
    uint64_t seed = 4242;
    int rv = gemm_buffer_alloc(c, 3 * nn * 4, buf);
    cr_assert_eq(rv, GEMM_OK, "held buffer: %s", gemm_strerror(rv));
    tu_fill(gemm_buffer_data(*buf), GEMM_FP32, 2 * TU_HELD_N, TU_HELD_N,
            TU_HELD_N, &seed);
    gemm_op_init(op, TU_HELD_N, TU_HELD_N, TU_HELD_N, GEMM_FP32, GEMM_FP32);
    op->a.buf = op->b.buf = op->d.buf = *buf;
    op->b.offset = nn * 4;
    op->d.offset = 2 * nn * 4;
    op->kernel = TU_HOLD_KERNEL;
}

void tu_held_check(const gemm_op *op, gemm_buffer *buf, const char *who)
{
    const size_t n = TU_HELD_N;
    const char *base = gemm_buffer_data(buf);
    const float *d = (const float *)(base + op->d.offset);
    size_t pts[4][2] = {{0, 0}, {n - 1, n - 1}, {7, n - 9}, {n - 57, 3}};
    for (int i = 0; i < 4; i++) {
        double ref, scale;
        size_t r = pts[i][0], col = pts[i][1];
        tu_ref_elem(op, base + op->a.offset, base + op->b.offset, NULL, r, col,
                    &ref, &scale);
        double err = d[r * n + col] - ref;
        cr_assert(err < 1e-4 * scale + 1e-5 && err > -1e-4 * scale - 1e-5,
                  "%s: D[%zu][%zu] = %g, want %g", who, r, col,
                  (double)d[r * n + col], ref);
    }
}
