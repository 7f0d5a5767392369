/*
 * status_test.c: the daemon's counters as gemm_get_status reports them:
 * configuration echoed (backend, --threads, --max-queue), requests served
 * and failed, GEMM flops, latency percentiles in order, connected clients,
 * registered buffers and bytes, an empty queue when idle. gemmd runs with
 * --threads 3 --max-queue 17.
 */
#include "util/cases.h"
#include "util/daemon.h"
#include "util/data.h"
#include "util/raw.h"

#include <criterion/criterion.h>

#include <string.h>

static void setup(void)
{
    static const char *const args[] = {"--threads", "3", "--max-queue", "17",
                                       NULL};
    fixture_start(args);
}

TestSuite(status, .init = setup, .fini = fixture_teardown, .timeout = 60);

static gemm_status status_now(void)
{
    gemm_status st;
    int rv = gemm_get_status(g_client, &st);
    cr_assert_eq(rv, GEMM_OK, "gemm_get_status: %s (%s)", gemm_strerror(rv),
                 gemm_last_error_message());
    return st;
}

Test(status, configuration_and_idle_state)
{
    gemm_status a = status_now();
    cr_assert_str_eq(a.backend, tu_backend());
    cr_assert_neq(a.device[0], '\0', "empty device name");
    /* GEMM_TEST_GEMMD_ARGS may list several device objects: cuda runs
     * 3 workers per object; several CPU devices compute on one thread
     * each (--threads is for one) */
    gemm_device_status devs[16];
    size_t ndev = 0;
    cr_assert_eq(gemm_get_devices(g_client, devs, 16, &ndev), GEMM_OK);
    cr_assert_geq(ndev, 1, "no device objects");
    size_t want = strcmp(a.backend, "cpu") == 0 && ndev > 1 ? ndev : 3 * ndev;
    cr_assert_eq(a.threads, want,
                 "threads %u, want %zu (--threads 3, %zu %s "
                 "devices)",
                 a.threads, want, ndev, a.backend);
    cr_assert_eq(a.queue_capacity, 17, "queue_capacity %u, want 17",
                 a.queue_capacity);
    cr_assert_eq(a.queue_depth, 0, "queue_depth %u when idle", a.queue_depth);
    cr_assert_geq(a.clients, 1, "clients %u with one connected", a.clients);
    cr_assert_eq(a.buffers, 0, "buffers %u before any allocation", a.buffers);
    cr_assert_eq(a.buffer_bytes, 0);
    cr_assert_gt(a.uptime_s, 0.0, "uptime %g", a.uptime_s);
    gemm_status b;
    double until = tu_now() + 5.0;
    do {
        b = status_now();
    } while (b.uptime_s <= a.uptime_s && tu_now() < until &&
             (tu_sleep_ms(1), 1));
    cr_assert_gt(b.uptime_s, a.uptime_s, "uptime did not advance (%g, %g)",
                 a.uptime_s, b.uptime_s);
}

Test(status, served_failed_flops_latency)
{
    gemm_buffer *buf;
    char why[768];
    uint64_t flops = 0;
    gemm_status before = status_now();
    int rv = gemm_buffer_alloc(g_client, 1 << 20, &buf);
    cr_assert_eq(rv, GEMM_OK, "gemm_buffer_alloc: %s", gemm_strerror(rv));
    for (int i = 0; i < 10; i++) {
        tu_case cs = tu_case_plain(10 + (uint64_t)i, 20, 30 + (uint64_t)i,
                                   GEMM_BF16, GEMM_FP32, 1 + (uint64_t)i);
        rv = tu_case_run(g_client, buf, &cs, why, sizeof(why));
        cr_assert_eq(rv, GEMM_OK, "%s", why);
        flops += 2 * cs.m * cs.n * cs.k;
    }
    /* three failures the client library cannot foresee: unknown ids */
    tu_raw raw;
    Gemm__GemmRequest g;
    Gemm__Operand ops[4];
    Gemm__Reply *rep;
    cr_assert_eq(tu_raw_open(&raw, g_gemmd.url, 10000), 0, "raw dial");
    tu_raw_gemm_init(&g, ops, 0x1234, 4, 4, 4, 0, 64, 128);
    for (int i = 0; i < 3; i++) {
        rv = tu_raw_gemm(&raw, &g, &rep);
        cr_assert_eq(rv, 0, "no reply");
        cr_assert_eq(tu_reply_status(rep), GEMM_ERR_NO_BUFFER, "%s",
                     gemm_strerror(tu_reply_status(rep)));
        gemm__reply__free_unpacked(rep, NULL);
    }
    tu_raw_close(&raw);

    gemm_status after = status_now();
    uint64_t served = after.requests_served - before.requests_served;
    uint64_t failed = after.requests_failed - before.requests_failed;
    cr_assert(served >= 10 && served <= 16,
              "requests_served went up by %llu for 10 GEMMs (and a "
              "few other requests)",
              (unsigned long long)served);
    cr_assert_eq(failed, 3, "requests_failed went up by %llu for 3 failures",
                 (unsigned long long)failed);
    cr_assert_eq(
        after.gemms_served - before.gemms_served, 10,
        "gemms_served went up by %llu for 10 GEMMs",
        (unsigned long long)(after.gemms_served - before.gemms_served));
    cr_assert_eq(
        after.gemms_failed - before.gemms_failed, 3,
        "gemms_failed went up by %llu for 3 failed GEMMs",
        (unsigned long long)(after.gemms_failed - before.gemms_failed));
    cr_assert_eq(after.gemm_flops - before.gemm_flops, flops,
                 "gemm_flops went up by %llu, want %llu",
                 (unsigned long long)(after.gemm_flops - before.gemm_flops),
                 (unsigned long long)flops);
    cr_assert_gt(after.latency_p50_us, 0.0, "p50 %g", after.latency_p50_us);
    cr_assert(after.latency_p50_us <= after.latency_p90_us &&
                  after.latency_p90_us <= after.latency_p99_us &&
                  after.latency_p99_us <= after.latency_max_us,
              "percentiles out of order: p50 %g p90 %g p99 %g max %g",
              after.latency_p50_us, after.latency_p90_us, after.latency_p99_us,
              after.latency_max_us);
    cr_assert_lt(after.latency_max_us, 60e6, "max latency %g us",
                 after.latency_max_us);
    gemm_buffer_free(buf);
}

static gemm_status wait_clients(uint32_t want)
{
    double until = tu_now() + 5.0;
    gemm_status st = status_now();
    while (st.clients != want && tu_now() < until) {
        tu_sleep_ms(10);
        st = status_now();
    }
    return st;
}

Test(status, clients_and_buffers)
{
    /* only g_client: the fixture's start-up ping connection may still be
     * closing */
    gemm_status before = wait_clients(1), st;
    gemm_client *c[3];
    gemm_buffer *b[3];
    for (int i = 0; i < 3; i++) {
        c[i] = tu_client(&g_gemmd, 10000);
        int rv = gemm_buffer_alloc(c[i], (size_t)(i + 1) << 20, &b[i]);
        cr_assert_eq(rv, GEMM_OK, "gemm_buffer_alloc: %s", gemm_strerror(rv));
    }
    st = wait_clients(before.clients + 3);
    cr_assert_eq(st.clients, before.clients + 3,
                 "clients %u -> %u after 3 "
                 "connected",
                 before.clients, st.clients);
    cr_assert_eq(st.buffers, before.buffers + 3, "buffers %u -> %u",
                 before.buffers, st.buffers);
    cr_assert_eq(st.buffer_bytes, before.buffer_bytes + (6u << 20),
                 "buffer_bytes %llu -> %llu for 1+2+3 MiB",
                 (unsigned long long)before.buffer_bytes,
                 (unsigned long long)st.buffer_bytes);
    for (int i = 0; i < 3; i++) {
        gemm_buffer_free(b[i]);
        gemm_client_close(c[i]);
    }
    st = wait_clients(before.clients);
    cr_assert_eq(st.clients, before.clients,
                 "clients %u after they closed, "
                 "was %u",
                 st.clients, before.clients);
    cr_assert_eq(st.buffers, before.buffers);
    cr_assert_eq(st.buffer_bytes, before.buffer_bytes);
}

/* A worker writes a GEMM's reply itself and the loop counts the job
 * afterwards (complete.h): a request sent after the reply, on the same
 * connection or another, must still find the GEMM counted as served and
 * off the queue. */
Test(status, a_reply_is_counted_before_the_next_request)
{
    gemm_buffer *buf;
    char why[768];
    gemm_client *other = tu_client(&g_gemmd, 10000);
    int rv = gemm_buffer_alloc(g_client, 1 << 16, &buf);
    cr_assert_eq(rv, GEMM_OK, "gemm_buffer_alloc: %s", gemm_strerror(rv));
    gemm_status before = status_now();
    for (uint64_t i = 1; i <= 100; i++) {
        tu_case cs = tu_case_plain(4, 4, 4, GEMM_FP32, GEMM_FP32, i);
        rv = tu_case_run(g_client, buf, &cs, why, sizeof(why));
        cr_assert_eq(rv, GEMM_OK, "%s", why);
        gemm_status st;
        rv = gemm_get_status(i % 2 ? other : g_client, &st);
        cr_assert_eq(rv, GEMM_OK, "gemm_get_status: %s", gemm_strerror(rv));
        cr_assert_eq(
            st.gemms_served - before.gemms_served, i,
            "after GEMM %llu's reply, status on the %s connection "
            "counts %llu served",
            (unsigned long long)i, i % 2 ? "other" : "same",
            (unsigned long long)(st.gemms_served - before.gemms_served));
        cr_assert_eq(st.queue_depth, 0,
                     "after GEMM %llu's reply, queue_depth %u",
                     (unsigned long long)i, st.queue_depth);
    }
    gemm_buffer_free(buf);
    gemm_client_close(other);
}
