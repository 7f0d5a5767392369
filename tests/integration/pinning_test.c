/*
 * pinning_test.c: large buffers are pinned in the background. gemmd_test's
 * CPU backend pins with the test pin (GEMMD_TEST_PIN_MS_PER_MIB: a pin
 * takes that many ms per MiB, as cudaHostRegister would), so on any host:
 * registering a 64 MiB buffer returns while its pin still runs, another
 * client's GEMM is served meanwhile (the loop is not blocked), a GEMM on
 * the not-yet-pinned buffer is correct, releasing a buffer, closing its
 * client or stopping the daemon while the pin is queued or running
 * neither crashes nor leaks its pinned bytes, --max-pinned-bytes still
 * answers at registration, a failed pin leaves the buffer usable, and the
 * Status counters move. The assertions read states (pins pending, pinned
 * bytes), polled with deadlines; the pin's length only keeps the window
 * open.
 */
#include "util/cases.h"
#include "util/daemon.h"

#include <criterion/criterion.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#define MIB            ((size_t)1 << 20)
#define BIG            (64 * MIB) /* above the daemon's PIN_ASYNC_MIN (32 MiB) */
#define PIN_MS_PER_MIB 40         /* a 64 MiB pin takes 2.56 s */
#define FAIL_SIZE      (48 * MIB)

static void start(const char *const *extra)
{
    if (strcmp(tu_backend(), "cpu") != 0)
        cr_skip_test("skipped: the test pin exists on the CPU backend only "
                     "(GEMM_TEST_BACKEND=%s)",
                     tu_backend());
    char ms[16], fail[32];
    snprintf(ms, sizeof(ms), "%d", PIN_MS_PER_MIB);
    snprintf(fail, sizeof(fail), "%zu", FAIL_SIZE);
    setenv("GEMMD_TEST_PIN_MS_PER_MIB", ms, 1);
    setenv("GEMMD_TEST_PIN_FAIL_SIZE", fail, 1);
    fixture_start(extra);
}

static void setup(void)
{
    start(NULL);
}

static void setup_capped(void)
{
    static const char *const args[] = {"--max-pinned-bytes", "104857600", NULL};
    start(args);
}

TestSuite(pinning, .init = setup, .fini = fixture_teardown, .timeout = 90);

static gemm_buffer *alloc(gemm_client *c, size_t size)
{
    gemm_buffer *b;
    int rv = gemm_buffer_alloc(c, size, &b);
    cr_assert_eq(rv, GEMM_OK, "gemm_buffer_alloc(%zu): %s (%s)", size,
                 gemm_strerror(rv), gemm_last_error_message());
    return b;
}

/* Skips unless the daemon pins with the test pin (a gemmd_test; another
 * binary from GEMM_TEST_GEMMD has none): a buffer's bytes show as pinned
 * (reserved) right after its registration. */
static void need_test_pin(const gemm_status *after_alloc, size_t bytes)
{
    if (after_alloc->pinned_bytes < bytes)
        cr_skip_test("skipped: %s has no test pin (pinned_bytes %llu after "
                     "registering %zu bytes): run gemmd_test",
                     tu_gemmd_path(),
                     (unsigned long long)after_alloc->pinned_bytes, bytes);
}

/* Polls until no pin is pending and pinned_bytes is want; asserts it
 * happens within timeout_s and returns the last status. */
static gemm_status wait_settled(gemm_client *c, uint64_t want, double timeout_s)
{
    double until = tu_now() + timeout_s;
    gemm_status st = tu_status(c);
    while ((st.pins_pending != 0 || st.pinned_bytes != want) &&
           tu_now() < until) {
        tu_sleep_ms(10);
        st = tu_status(c);
    }
    cr_assert_eq(st.pins_pending, 0, "%u pins still pending after %.0f s",
                 st.pins_pending, timeout_s);
    cr_assert_eq(st.pinned_bytes, want,
                 "pinned_bytes %llu, want %llu (a leaked reservation?)",
                 (unsigned long long)st.pinned_bytes, (unsigned long long)want);
    return st;
}

/* A 96x80x64 fp32 GEMM laid out from offset base of buf: asserts that it
 * runs and is correct. */
static void gemm_ok(gemm_client *c, gemm_buffer *buf, uint64_t base,
                    uint64_t seed)
{
    char why[768];
    tu_case cs = tu_case_plain(96, 80, 64, GEMM_FP32, GEMM_FP32, seed);
    cs.base = base;
    int rv = tu_case_run(c, buf, &cs, why, sizeof(why));
    cr_assert_eq(rv, GEMM_OK, "gemm: %s", why);
}

Test(pinning, register_returns_before_the_pin_and_the_loop_serves)
{
    gemm_status before = tu_status(g_client);
    cr_assert_eq(before.pins_pending, 0);
    gemm_buffer *big = alloc(g_client, BIG);
    gemm_status st = tu_status(g_client);
    need_test_pin(&st, BIG);
    /* registered, its pin still running: registration did not wait */
    cr_assert_eq(st.pins_pending, 1,
                 "pins_pending %u right after registering %zu MiB (a pin "
                 "of %.2f s): was it pinned during registration?",
                 st.pins_pending, BIG / MIB, PIN_MS_PER_MIB * 64 / 1e3);
    cr_assert_eq(st.pins_done, before.pins_done);
    cr_assert_eq(st.buffers, 1);

    /* another client is served while the pin runs */
    gemm_client *other = tu_client(&g_gemmd, 10000);
    gemm_buffer *small = alloc(other, MIB);
    gemm_ok(other, small, 0, 1);
    st = tu_status(other);
    cr_assert_eq(st.pins_pending, 1,
                 "the pin ended before the other client's GEMM was "
                 "served: the window proves nothing");

    /* a GEMM on the buffer being pinned runs, unpinned, and is correct */
    gemm_ok(g_client, big, 40 * MIB + 64, 2);

    /* the pin finishes: counters, seconds and bytes (the small buffer
     * was pinned at registration) */
    st = wait_settled(g_client, BIG + MIB, 30.0);
    cr_assert_eq(st.pins_done, before.pins_done + 1, "pins_done %llu",
                 (unsigned long long)st.pins_done);
    cr_assert_eq(st.pin_bytes - before.pin_bytes, BIG, "pin_bytes %llu",
                 (unsigned long long)st.pin_bytes);
    double want_s = PIN_MS_PER_MIB * 64 / 1e3;
    cr_assert_geq(st.pin_seconds - before.pin_seconds, 0.9 * want_s,
                  "pin_seconds %.3f for a %.2f s pin", st.pin_seconds, want_s);
    cr_assert_eq(st.pins_failed, before.pins_failed);

    /* pinned now: still correct, and unregistering unpins */
    gemm_ok(g_client, big, 3 * MIB, 3);
    gemm_buffer_free(big);
    gemm_buffer_free(small);
    wait_settled(g_client, 0, 10.0);
    gemm_client_close(other);
}

Test(pinning, release_while_queued_or_running_leaks_nothing)
{
    gemm_client *c = tu_client(&g_gemmd, 10000);
    gemm_buffer *a = alloc(c, BIG);
    gemm_status st = tu_status(c);
    need_test_pin(&st, BIG);
    gemm_buffer *b = alloc(c, BIG); /* queued behind a's pin */
    st = tu_status(c);
    cr_assert_eq(st.pins_pending, 2, "pins_pending %u", st.pins_pending);
    cr_assert_eq(st.pinned_bytes, 2 * BIG);
    gemm_buffer_free(b); /* cancelled in the queue */
    st = tu_status(c);
    cr_assert_eq(st.pins_pending, 1, "a queued pin was not cancelled");
    cr_assert_eq(st.pinned_bytes, BIG, "the cancelled pin kept its bytes");
    gemm_buffer_free(a); /* running: the pinner finishes and cleans up */
    st = tu_status(c);
    cr_assert_eq(st.buffers, 0);

    /* a client that goes away with a pin running */
    gemm_buffer *d = alloc(c, BIG);
    gemm_buffer *e = alloc(c, BIG);
    gemm_client_close(c);
    gemm_buffer_free(d);
    gemm_buffer_free(e);
    st = wait_settled(g_client, 0, 30.0);
    cr_assert_eq(st.buffers, 0, "buffers %u after the client left", st.buffers);
    tu_assert_healthy(g_client);
}

Test(pinning, stop_while_pinning_exits_cleanly)
{
    /* a client that stays connected: its buffers are still registered
     * when gemmd stops, one pin running and one queued */
    gemm_client *c = tu_client(&g_gemmd, 10000);
    gemm_buffer *a = alloc(c, BIG);
    gemm_status st = tu_status(c);
    need_test_pin(&st, BIG);
    gemm_buffer *b = alloc(c, BIG);
    st = tu_status(c);
    cr_assert_eq(st.pins_pending, 2, "pins_pending %u", st.pins_pending);
    int ws = gemmd_stop(&g_gemmd, 20.0);
    cr_assert_neq(ws, -1, "gemmd did not exit within 20 s of SIGTERM");
    cr_assert(WIFEXITED(ws) && WEXITSTATUS(ws) == 0,
              "gemmd did not exit 0 with a pin in flight (waitpid status "
              "0x%x)",
              ws);
    gemm_buffer_free(a);
    gemm_buffer_free(b);
    gemm_client_close(c);
}

/* Its own suite: a test's .init runs after its suite's, so a capped
 * daemon started there would leave the suite's running. */
TestSuite(pinning_capped, .init = setup_capped, .fini = fixture_teardown,
          .timeout = 90);

Test(pinning_capped, limit_answers_at_registration)
{
    gemm_buffer *a = alloc(g_client, BIG);
    gemm_status st = tu_status(g_client);
    need_test_pin(&st, BIG);
    cr_assert_eq(st.pins_pending, 1);
    gemm_buffer *b;
    int rv = gemm_buffer_alloc(g_client, BIG, &b);
    cr_assert_eq(rv, GEMM_ERR_LIMIT,
                 "a second 64 MiB over --max-pinned-bytes 100 MiB: %s, want "
                 "GEMM_ERR_LIMIT at registration",
                 gemm_strerror(rv));
    cr_assert(strstr(gemm_last_error_message(), "pinned") != NULL,
              "message: %s", gemm_last_error_message());
    gemm_buffer_free(a);
    wait_settled(g_client, 0, 30.0);
    b = alloc(g_client, BIG); /* the bytes came back */
    gemm_buffer_free(b);
    wait_settled(g_client, 0, 30.0);
}

Test(pinning, failed_pin_leaves_the_buffer_usable)
{
    gemm_status before = tu_status(g_client);
    gemm_buffer *a = alloc(g_client, FAIL_SIZE);
    gemm_status st = tu_status(g_client);
    need_test_pin(&st, FAIL_SIZE);
    st = wait_settled(g_client, 0, 30.0); /* failed: reservation released */
    cr_assert_eq(st.pins_failed, before.pins_failed + 1, "pins_failed %llu",
                 (unsigned long long)st.pins_failed);
    cr_assert_eq(st.pins_done, before.pins_done);
    gemm_ok(g_client, a, 20 * MIB, 4);
    gemm_buffer_free(a);
    st = tu_status(g_client);
    cr_assert_eq(st.pinned_bytes, 0);
    cr_assert_eq(st.buffers, 0);
}
