/*
 * metrics_test.c: the operators' view. gemmd serves Prometheus metrics over
 * HTTP (--metrics-listen) and writes them for node-exporter's textfile
 * collector (--metrics-file); both must pass `promtool check metrics`
 * (Debian's prometheus package) and count what happened: GEMMs by status,
 * per-uid usage, the memory budget. Anything but GET /metrics is a 404.
 * Where promtool is missing each test makes its own checks, then skips
 * saying so (tests/util/need.h; CI requires it through $GEMM_REQUIRE).
 */
#include "util/cases.h"
#include "util/daemon.h"
#include "util/need.h"

#include <criterion/criterion.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

TestSuite(metrics, .fini = fixture_teardown, .timeout = 60);

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

/* GETs path from 127.0.0.1:port; returns the whole response (malloc'd). */
static char *http_get(int port, const char *path)
{
    int s = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET,
                            .sin_port = htons((uint16_t)port),
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    struct timeval tv = {5, 0};
    setsockopt(s, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    cr_assert_eq(connect(s, (struct sockaddr *)&a, sizeof(a)), 0,
                 "connect to the metrics port");
    char req[256];
    int n =
        snprintf(req, sizeof(req), "GET %s HTTP/1.1\r\nHost: x\r\n\r\n", path);
    cr_assert_eq(send(s, req, (size_t)n, MSG_NOSIGNAL), n);
    size_t cap = 1 << 16, len = 0;
    char *buf = malloc(cap);
    for (;;) {
        if (len + 4096 > cap)
            buf = realloc(buf, cap *= 2);
        ssize_t r = recv(s, buf + len, cap - len - 1, 0);
        if (r <= 0)
            break;
        len += (size_t)r;
    }
    close(s);
    buf[len] = '\0';
    return buf;
}

/* Runs promtool check metrics on text; asserts it passes. Where promtool
 * is missing (and $GEMM_REQUIRE does not name it) the check is left for
 * promtool_skip_if_missing() to report once the test's own checks ran. */
static bool promtool_missing;
static void promtool_check(const char *text)
{
    if (!tu_have_tool("promtool")) {
        if (tu_required("promtool"))
            tu_need_tool("promtool", "prometheus"); /* fails the test */
        promtool_missing = true;
        return;
    }
    char path[] = "/tmp/gemmd-metrics-XXXXXX";
    int fd = mkstemp(path);
    cr_assert_geq(fd, 0);
    cr_assert_eq(write(fd, text, strlen(text)), (ssize_t)strlen(text));
    close(fd);
    char cmd[256];
    snprintf(cmd, sizeof(cmd), "promtool check metrics < %s > %s.out 2>&1",
             path, path);
    int rc = system(cmd);
    char out[4096] = "";
    snprintf(cmd, sizeof(cmd), "%s.out", path);
    FILE *f = fopen(cmd, "r");
    if (f != NULL) {
        size_t n = fread(out, 1, sizeof(out) - 1, f);
        out[n] = '\0';
        fclose(f);
    }
    unlink(cmd);
    unlink(path);
    cr_assert_eq(rc, 0, "promtool check metrics failed:\n%s", out);
}

/* The test's last step: skips it (ctest: exit 77 when every test did)
 * when promtool_check() could not run promtool. */
static void promtool_skip_if_missing(void)
{
    if (promtool_missing)
        cr_skip_test("skipped: promtool not found, the exposition was not "
                     "checked (install the prometheus package)");
}

/* The value of the sample line starting with series (name{labels}), or
 * none when there is no such line. */
static double sample_or(const char *text, const char *series, double none)
{
    const char *p = text;
    size_t n = strlen(series);
    while ((p = strstr(p, series)) != NULL) {
        if ((p == text || p[-1] == '\n') && p[n] == ' ')
            return strtod(p + n + 1, NULL);
        p += n;
    }
    return none;
}

/* The value of the sample line starting with series (name{labels}). */
static double sample(const char *text, const char *series)
{
    double v = sample_or(text, series, -1.0);
    if (v == -1.0)
        cr_assert_fail("no sample %s in the metrics", series);
    return v;
}

Test(metrics, http_endpoint_passes_promtool_and_counts)
{
    int port = free_port();
    char addr[32];
    snprintf(addr, sizeof(addr), "127.0.0.1:%d", port);
    const char *const args[] = {"--metrics-listen", addr, NULL};
    fixture_start(args);
    gemm_buffer *b;
    char why[512];
    cr_assert_eq(gemm_buffer_alloc(g_client, 1 << 16, &b), GEMM_OK);
    for (int i = 0; i < 3; i++) {
        tu_case cs =
            tu_case_plain(8, 8, 8, GEMM_FP32, GEMM_FP32, (uint64_t)i + 1);
        cr_assert_eq(tu_case_run(g_client, b, &cs, why, sizeof(why)), GEMM_OK,
                     "%s", why);
    }
    gemm_op bad;
    gemm_op_init(&bad, 8, 8, 8, GEMM_FP32, GEMM_FP32);
    bad.a.buf = bad.b.buf = bad.d.buf = b;
    bad.d.offset = 1 << 20; /* beyond the buffer */
    cr_assert_eq(gemm_run(g_client, &bad, NULL), GEMM_ERR_BOUNDS);

    char *resp = http_get(port, "/metrics");
    cr_assert(strncmp(resp, "HTTP/1.0 200", 12) == 0, "%.80s", resp);
    cr_assert_not_null(strstr(resp, "text/plain; version=0.0.4"));
    char *body = strstr(resp, "\r\n\r\n");
    cr_assert_not_null(body);
    body += 4;
    promtool_check(body);
    cr_expect_eq(sample(body, "gemmd_requests_total{kind=\"gemm\",status="
                              "\"ok\"}"),
                 3);
    cr_expect_eq(sample(body, "gemmd_requests_total{kind=\"gemm\",status="
                              "\"bounds\"}"),
                 1);
    cr_expect_eq(sample(body, "gemmd_request_duration_seconds_count{kind="
                              "\"gemm\"}"),
                 4);
    cr_expect_eq(sample(body, "gemmd_buffers"), 1);
    cr_expect_gt(sample(body, "gemmd_memory_budget_bytes"), 0);
    char series[96];
    snprintf(series, sizeof(series), "gemmd_user_buffers{uid=\"%u\"}",
             (unsigned)geteuid());
    cr_expect_eq(sample(body, series), 1);
    cr_expect_eq(sample(body, "gemmd_clients"), 1);
    free(resp);

    resp = http_get(port, "/other");
    cr_expect(strncmp(resp, "HTTP/1.0 404", 12) == 0, "%.80s", resp);
    free(resp);
    gemm_buffer_free(b);
    promtool_skip_if_missing();
}

/* A request that came whole before the 1 s header deadline is answered
 * even when the daemon's loop stalled past the deadline before reading
 * it (libuv runs due timers before it polls for I/O). gemmd_test stops
 * its loop 1.5 s after each metrics accept (GEMMD_TEST_METRICS_STALL_MS);
 * a gemmd without test hooks answers at once, and the test skips. */
Test(metrics, a_request_in_time_survives_a_stalled_loop)
{
    int port = free_port();
    char addr[32];
    snprintf(addr, sizeof(addr), "127.0.0.1:%d", port);
    const char *const args[] = {"--metrics-listen", addr, NULL};
    cr_assert_eq(setenv("GEMMD_TEST_METRICS_STALL_MS", "1500", 1), 0);
    fixture_start(args);
    unsetenv("GEMMD_TEST_METRICS_STALL_MS");
    struct timeval t0, t1;
    gettimeofday(&t0, NULL);
    char *resp = http_get(port, "/metrics");
    gettimeofday(&t1, NULL);
    double took = (t1.tv_sec - t0.tv_sec) + (t1.tv_usec - t0.tv_usec) * 1e-6;
    cr_expect(strncmp(resp, "HTTP/1.0 200", 12) == 0,
              "dropped after a %.2f s stall: %.80s", took, resp);
    free(resp);
    if (took < 1.4)
        cr_skip_test("skipped: the daemon did not stall (%.2f s): a gemmd "
                     "without test hooks (GEMM_TEST_GEMMD)",
                     took);
}

Test(metrics, textfile_for_node_exporter)
{
    char path[300];
    snprintf(path, sizeof(path), "/tmp/gemmd-metrics-%d.prom", (int)getpid());
    unlink(path);
    const char *const args[] = {"--metrics-file", path, "--stats-interval",
                                "0.1", NULL};
    /* the daemon's own user writes it: give it a directory it may use */
    fixture_start(args);
    tu_assert_healthy(g_client);
    /* the file is replaced whole (rename) every --stats-interval: wait,
     * with a deadline, for a copy written after the GEMM above */
    static char text[1 << 18];
    const char *ok = "gemmd_requests_total{kind=\"gemm\",status=\"ok\"}";
    double until = tu_now() + 10.0;
    bool counted = false;
    do {
        FILE *f = fopen(path, "r");
        if (f == NULL) {
            tu_sleep_ms(10);
            continue;
        }
        size_t n = fread(text, 1, sizeof(text) - 1, f);
        text[n] = '\0';
        fclose(f);
        counted = sample_or(text, ok, 0.0) >= 1;
        if (!counted)
            tu_sleep_ms(10);
    } while (!counted && tu_now() < until);
    unlink(path);
    /* /tmp is writable by all, so no file means none was written at all */
    cr_assert(text[0] != '\0', "no metrics file at %s within 10 s", path);
    cr_expect(counted, "%s never reached 1 in %s:\n%.2000s", ok, path, text);
    promtool_check(text);
    promtool_skip_if_missing();
}
