/*
 * limits_test.c: the daemon's defences against one client taking it all
 * (issue 5, point 4). Per-client caps (--client-buffers, --client-bytes,
 * --client-inflight) refuse the request past the cap with GEMM_ERR_LIMIT
 * and a message, leave other clients untouched, and lift once the client
 * releases what it holds. Request deadlines (gemm_op.timeout_ms) drop a
 * GEMM that has not started in time with GEMM_ERR_TIMEOUT and leave its D
 * unwritten. Fairness: with one worker (--threads 1 on the CPU backend) a
 * flood from one client does not hold back another's GEMM. The global
 * --max-queue ("busy") is tested in concurrency_test.c.
 *
 * The test hold (util/hold.h) keeps the worker busy with one GEMM for as
 * long as a test needs; the tests that need it skip on backends without
 * it, saying so.
 */
#include "util/cases.h"
#include "util/daemon.h"
#include "util/data.h"
#include "util/hold.h"

#include <criterion/criterion.h>

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

TestSuite(limits, .fini = fixture_teardown, .timeout = 60);

/* A small case at byte offset base of a buffer (fits in 16 KiB). */
static tu_case small_case(uint64_t base, uint64_t seed)
{
    tu_case cs = {.m = 17,
                  .n = 13,
                  .k = 9,
                  .ab = GEMM_FP32,
                  .cd = GEMM_FP32,
                  .alpha = 1.0f,
                  .beta = 0.0f,
                  .c_mode = TU_C_NONE,
                  .pad_a = TU_TIGHT,
                  .pad_b = TU_TIGHT,
                  .pad_c = TU_TIGHT,
                  .pad_d = 1,
                  .base = base,
                  .seed = seed};
    return cs;
}

/* Runs a small case on a fresh region of buf; asserts it is correct. */
static void compute_ok(gemm_client *c, gemm_buffer *buf, const char *who)
{
    char why[512];
    tu_case cs = small_case(0, 77);
    int rv = tu_case_run(c, buf, &cs, why, sizeof(why));
    cr_assert_eq(rv, GEMM_OK, "%s: small GEMM: %s (%s)", who,
                 rv < 0 ? "wrong result" : gemm_strerror(rv), why);
}

static void expect_limit(int rv, const char *what)
{
    cr_assert_eq(rv, GEMM_ERR_LIMIT, "%s: got %s (\"%s\"), want %s", what,
                 gemm_strerror(rv), gemm_last_error_message(),
                 gemm_strerror(GEMM_ERR_LIMIT));
    cr_assert(strstr(gemm_last_error_message(), "limit") != NULL,
              "%s: the message does not name the limit: \"%s\"", what,
              gemm_last_error_message());
}

/* Waits until the daemon shows at least n jobs queued or running; when it
 * never does, says how request r (the one expected there) ended. */
static void wait_queued_or(gemm_request *r, unsigned n)
{
    gemm_status st;
    for (int i = 0; i < 2000; i++) {
        cr_assert_eq(gemm_get_status(g_client, &st), GEMM_OK, "status");
        if (st.queue_depth >= n)
            return;
        tu_sleep_ms(1);
    }
    int rv = r != NULL ? gemm_wait(r, NULL) : GEMM_OK;
    cr_assert_fail("queue depth %u, never %u (the request: %s, %s)",
                   st.queue_depth, n, gemm_strerror(rv),
                   gemm_last_error_message());
}

/* Starts the fixture's gemmd with args and the test hold, or skips the
 * test where there is no hold. */
static void start_held(const char *const *args)
{
    tu_hold_setup();
    fixture_start(args);
    tu_hold_need();
}

Test(limits, client_buffers)
{
    static const char *const args[] = {"--client-buffers", "3", NULL};
    fixture_start(args);
    gemm_buffer *a[3], *extra = NULL, *o[3];
    for (int i = 0; i < 3; i++) {
        int rv = gemm_buffer_alloc(g_client, 16384, &a[i]);
        cr_assert_eq(rv, GEMM_OK, "buffer %d of 3: %s", i + 1,
                     gemm_strerror(rv));
    }
    expect_limit(gemm_buffer_alloc(g_client, 16384, &extra),
                 "4th buffer with --client-buffers 3");
    cr_assert_null(extra, "a refused alloc wrote *out");

    /* another client has its own count */
    gemm_client *other = tu_client(&g_gemmd, 10000);
    for (int i = 0; i < 3; i++) {
        int rv = gemm_buffer_alloc(other, 16384, &o[i]);
        cr_assert_eq(rv, GEMM_OK, "other client, buffer %d: %s (%s)", i + 1,
                     gemm_strerror(rv), gemm_last_error_message());
    }
    compute_ok(other, o[2], "other client");
    compute_ok(g_client, a[0], "capped client, on a buffer it holds");

    /* releasing one lets the capped client register again */
    gemm_buffer_free(a[1]);
    int rv = gemm_buffer_alloc(g_client, 16384, &a[1]);
    cr_assert_eq(rv, GEMM_OK, "alloc after a free: %s (%s)", gemm_strerror(rv),
                 gemm_last_error_message());
    compute_ok(g_client, a[1], "capped client after a free");
    for (int i = 0; i < 3; i++) {
        gemm_buffer_free(a[i]);
        gemm_buffer_free(o[i]);
    }
    gemm_client_close(other);
}

Test(limits, client_bytes)
{
    static const char *const args[] = {"--client-bytes", "1048576", NULL};
    fixture_start(args);
    gemm_buffer *a1, *a2, *a3 = NULL, *o;
    int rv = gemm_buffer_alloc(g_client, 512 << 10, &a1);
    cr_assert_eq(rv, GEMM_OK, "512 KiB of 1 MiB: %s", gemm_strerror(rv));
    expect_limit(gemm_buffer_alloc(g_client, 768 << 10, &a3),
                 "512 KiB + 768 KiB with --client-bytes 1 MiB");
    cr_assert_null(a3, "a refused alloc wrote *out");
    rv = gemm_buffer_alloc(g_client, 512 << 10, &a2);
    cr_assert_eq(rv, GEMM_OK, "512 KiB + 512 KiB = the cap exactly: %s (%s)",
                 gemm_strerror(rv), gemm_last_error_message());
    expect_limit(gemm_buffer_alloc(g_client, 4096, &a3),
                 "one page more than --client-bytes");

    gemm_client *other = tu_client(&g_gemmd, 10000);
    rv = gemm_buffer_alloc(other, 1 << 20, &o);
    cr_assert_eq(rv, GEMM_OK, "other client, the whole 1 MiB: %s (%s)",
                 gemm_strerror(rv), gemm_last_error_message());
    compute_ok(other, o, "other client");

    gemm_buffer_free(a1);
    rv = gemm_buffer_alloc(g_client, 256 << 10, &a3);
    cr_assert_eq(rv, GEMM_OK, "256 KiB after freeing 512 KiB: %s (%s)",
                 gemm_strerror(rv), gemm_last_error_message());
    compute_ok(g_client, a3, "capped client after a free");
    gemm_buffer_free(a2);
    gemm_buffer_free(a3);
    gemm_buffer_free(o);
    gemm_client_close(other);
}

#define SMALLS 4

/* With --client-pending above --client-inflight, jobs past the cap are
 * read and refused with LIMIT. */
Test(limits, client_inflight)
{
    static const char *const args[] = {"--client-inflight",
                                       "2",
                                       "--client-pending",
                                       "16",
                                       "--threads",
                                       "1",
                                       NULL};
    start_held(args);
    gemm_buffer *slow_buf, *buf;
    gemm_op slow;
    gemm_request *rs, *rq[SMALLS];
    int rvs[SMALLS];
    tu_prepared p[SMALLS];
    tu_case cs[SMALLS];
    char why[512];

    tu_held_op(g_client, &slow_buf, &slow);
    int rv = gemm_buffer_alloc(g_client, SMALLS * 16384, &buf);
    cr_assert_eq(rv, GEMM_OK, "gemm_buffer_alloc: %s", gemm_strerror(rv));
    for (int i = 0; i < SMALLS; i++) {
        cs[i] = small_case((uint64_t)i * 16384, 100 + i);
        cr_assert(tu_case_prepare(&cs[i], buf, &p[i], why, sizeof(why)), "%s",
                  why);
    }
    rv = gemm_submit(g_client, &slow, &rs);
    cr_assert_eq(rv, GEMM_OK, "submit held: %s", gemm_strerror(rv));
    tu_hold_wait(10.0);
    for (int i = 0; i < SMALLS; i++) {
        rv = gemm_submit(g_client, &p[i].op, &rq[i]);
        cr_assert_eq(rv, GEMM_OK, "submit %d: %s", i, gemm_strerror(rv));
    }
    /* the last one is past the cap whatever happens: its answer means
     * the daemon has read them all (one connection, in order) */
    rvs[SMALLS - 1] = gemm_wait(rq[SMALLS - 1], NULL);
    expect_limit(rvs[SMALLS - 1], "the last GEMM past --client-inflight 2");

    /* another client is not held to this one's cap: its GEMM is admitted
     * (queued behind the held one) while the capped client is full */
    gemm_client *other = tu_client(&g_gemmd, 30000);
    gemm_buffer *obuf;
    rv = gemm_buffer_alloc(other, 16384, &obuf);
    cr_assert_eq(rv, GEMM_OK, "other: gemm_buffer_alloc: %s",
                 gemm_strerror(rv));
    tu_prepared op;
    gemm_request *orq;
    tu_case ocs = small_case(0, 77);
    cr_assert(tu_case_prepare(&ocs, obuf, &op, why, sizeof(why)), "%s", why);
    rv = gemm_submit(other, &op.op, &orq);
    cr_assert_eq(rv, GEMM_OK, "other: submit: %s", gemm_strerror(rv));
    cr_assert(tu_wait_queue_depth(other, 3, 10.0),
              "the other client's GEMM was not admitted while the capped "
              "one was full");
    tu_hold_release();
    rv = gemm_wait(orq, NULL);
    cr_assert_eq(rv, GEMM_OK,
                 "other client while the capped one is full: "
                 "%s (%s)",
                 gemm_strerror(rv), gemm_last_error_message());
    cr_assert(tu_case_verify(&op, why, sizeof(why)), "other: %s", why);
    tu_case_free(&op);

    int limited = 0;
    for (int i = 0; i < SMALLS; i++) {
        rv = i == SMALLS - 1 ? rvs[i] : gemm_wait(rq[i], NULL);
        if (rv == GEMM_ERR_LIMIT) {
            limited++;
            expect_limit(rv, "GEMM past --client-inflight 2");
            cr_assert_eq(
                memcmp(p[i].data + p[i].lo, p[i].snapshot, p[i].hi - p[i].lo),
                0, "a refused GEMM changed its buffer");
        } else {
            cr_assert_eq(rv, GEMM_OK, "small %d: %s (%s)", i, gemm_strerror(rv),
                         gemm_last_error_message());
            cr_assert(tu_case_verify(&p[i], why, sizeof(why)), "small %d: %s",
                      i, why);
        }
        tu_case_free(&p[i]);
    }
    rv = gemm_wait(rs, NULL);
    cr_assert_eq(rv, GEMM_OK, "held: %s (%s)", gemm_strerror(rv),
                 gemm_last_error_message());
    tu_held_check(&slow, slow_buf, "held GEMM");
    /* the held one and one small fill the cap: the 3 others are refused */
    cr_assert_geq(limited, SMALLS - 2,
                  "%d of %d GEMMs behind a slow one got LIMIT with "
                  "--client-inflight 2; want >= %d",
                  limited, SMALLS, SMALLS - 2);

    /* with nothing in flight the client goes on, 2 at a time */
    tu_case c2[2] = {small_case(0, 5), small_case(16384, 6)};
    for (int i = 0; i < 2; i++) {
        cr_assert(tu_case_prepare(&c2[i], buf, &p[i], why, sizeof(why)), "%s",
                  why);
        rv = gemm_submit(g_client, &p[i].op, &rq[i]);
        cr_assert_eq(rv, GEMM_OK, "submit: %s", gemm_strerror(rv));
    }
    for (int i = 0; i < 2; i++) {
        rv = gemm_wait(rq[i], NULL);
        cr_assert_eq(rv, GEMM_OK, "after the cap lifted, GEMM %d: %s (%s)", i,
                     gemm_strerror(rv), gemm_last_error_message());
        cr_assert(tu_case_verify(&p[i], why, sizeof(why)), "%s", why);
        tu_case_free(&p[i]);
    }
    gemm_buffer_free(obuf);
    gemm_client_close(other);
    gemm_buffer_free(buf);
    gemm_buffer_free(slow_buf);
}

Test(limits, deadline_expires_in_queue)
{
    static const char *const args[] = {"--threads", "1", NULL};
    start_held(args);
    gemm_buffer *slow_buf, *buf;
    gemm_op slow;
    gemm_request *rs, *rq;
    gemm_timings ts;
    tu_prepared p;
    char why[512];

    tu_held_op(g_client, &slow_buf, &slow);
    int rv = gemm_buffer_alloc(g_client, 32768, &buf);
    cr_assert_eq(rv, GEMM_OK, "gemm_buffer_alloc: %s", gemm_strerror(rv));
    tu_case cs = small_case(0, 99); /* D poisoned by prepare */
    cr_assert(tu_case_prepare(&cs, buf, &p, why, sizeof(why)), "%s", why);
    p.op.timeout_ms = 1;

    rv = gemm_submit(g_client, &slow, &rs);
    cr_assert_eq(rv, GEMM_OK, "submit held: %s", gemm_strerror(rv));
    /* send the small one only once the held one runs, so it waits
     * behind it */
    tu_hold_wait(10.0);
    rv = gemm_submit(g_client, &p.op, &rq);
    cr_assert_eq(rv, GEMM_OK, "submit small: %s", gemm_strerror(rv));
    wait_queued_or(rq, 2);
    /* queued now, so its 1 ms deadline ends before now + 1 ms (the
     * daemon's clock is this one, CLOCK_MONOTONIC): hold until then */
    tu_wait_until(tu_now() + 0.003);
    tu_hold_release();
    rv = gemm_wait(rq, NULL);
    cr_assert_eq(rv, GEMM_ERR_TIMEOUT,
                 "GEMM with timeout_ms 1 behind a slow one: %s (\"%s\"), "
                 "want %s",
                 gemm_strerror(rv), gemm_last_error_message(),
                 gemm_strerror(GEMM_ERR_TIMEOUT));
    cr_assert(strstr(gemm_last_error_message(), "deadline expired") != NULL,
              "TIMEOUT message: \"%s\"", gemm_last_error_message());
    cr_assert_eq(memcmp(p.data + p.lo, p.snapshot, p.hi - p.lo), 0,
                 "the expired GEMM wrote its buffer");
    rv = gemm_wait(rs, &ts);
    cr_assert_eq(rv, GEMM_OK, "slow: %s (%s)", gemm_strerror(rv),
                 gemm_last_error_message());
    tu_held_check(&slow, slow_buf, "held GEMM ahead of the expired one");
    cr_assert_gt(ts.compute_us, 2000,
                 "the held GEMM ran only %llu us: too short to test a 1 ms "
                 "deadline behind it",
                 (unsigned long long)ts.compute_us);
    tu_case_free(&p);

    /* a generous deadline behind the same held GEMM is met */
    cr_assert(tu_case_prepare(&cs, buf, &p, why, sizeof(why)), "%s", why);
    p.op.timeout_ms = 30000;
    rv = gemm_submit(g_client, &slow, &rs);
    cr_assert_eq(rv, GEMM_OK, "submit held: %s", gemm_strerror(rv));
    tu_hold_wait(10.0);
    rv = gemm_submit(g_client, &p.op, &rq);
    cr_assert_eq(rv, GEMM_OK, "submit small: %s", gemm_strerror(rv));
    wait_queued_or(rq, 2);
    tu_hold_release();
    rv = gemm_wait(rq, NULL);
    cr_assert_eq(rv, GEMM_OK, "GEMM with timeout_ms 30000: %s (%s)",
                 gemm_strerror(rv), gemm_last_error_message());
    cr_assert(tu_case_verify(&p, why, sizeof(why)), "%s", why);
    tu_case_free(&p);
    rv = gemm_wait(rs, NULL);
    cr_assert_eq(rv, GEMM_OK, "held (2): %s", gemm_strerror(rv));
    gemm_buffer_free(buf);
    gemm_buffer_free(slow_buf);
}

/* By default (--client-pending = --client-inflight) a client that
 * pipelines past its cap is not refused: the daemon stops reading its
 * connection until jobs finish, and every GEMM completes, right; another
 * client is served meanwhile. */
Test(limits, client_inflight_backpressure)
{
    static const char *const args[] = {"--client-inflight", "2", "--threads",
                                       "1", NULL};
    start_held(args);
    gemm_buffer *slow_buf, *buf;
    gemm_op slow;
    gemm_request *rs, *rq[SMALLS];
    tu_prepared p[SMALLS];
    char why[512];
    tu_held_op(g_client, &slow_buf, &slow);
    int rv = gemm_buffer_alloc(g_client, SMALLS * 16384, &buf);
    cr_assert_eq(rv, GEMM_OK, "gemm_buffer_alloc: %s", gemm_strerror(rv));
    cr_assert_eq(gemm_submit(g_client, &slow, &rs), GEMM_OK);
    tu_hold_wait(10.0);
    for (int i = 0; i < SMALLS; i++) {
        tu_case cs = small_case((uint64_t)i * 16384, 200 + i);
        cr_assert(tu_case_prepare(&cs, buf, &p[i], why, sizeof(why)), "%s",
                  why);
        cr_assert_eq(gemm_submit(g_client, &p[i].op, &rq[i]), GEMM_OK);
    }
    gemm_client *other = tu_client(&g_gemmd, 30000);
    /* the held one and the first small fill the cap */
    cr_assert(tu_wait_queue_depth(other, 2, 10.0), "the cap was not reached");
    gemm_status st;
    cr_assert_eq(gemm_get_status(other, &st), GEMM_OK);
    cr_expect_leq(st.queue_depth, 2, "%u jobs admitted past a cap of 2",
                  st.queue_depth);
    /* the other client's GEMM is admitted while the capped one waits */
    gemm_buffer *obuf;
    cr_assert_eq(gemm_buffer_alloc(other, 16384, &obuf), GEMM_OK);
    tu_prepared op;
    gemm_request *orq;
    tu_case ocs = small_case(0, 77);
    cr_assert(tu_case_prepare(&ocs, obuf, &op, why, sizeof(why)), "%s", why);
    cr_assert_eq(gemm_submit(other, &op.op, &orq), GEMM_OK);
    cr_assert(tu_wait_queue_depth(other, 3, 10.0),
              "the other client's GEMM was not admitted while the capped "
              "one waited");
    cr_assert_eq(gemm_get_status(other, &st), GEMM_OK);
    cr_expect_eq(st.queue_depth, 3,
                 "%u jobs queued, want the held one, one "
                 "small and the other client's",
                 st.queue_depth);
    tu_hold_release();
    rv = gemm_wait(orq, NULL);
    cr_assert_eq(rv, GEMM_OK,
                 "other client while the capped one waits: %s "
                 "(%s)",
                 gemm_strerror(rv), gemm_last_error_message());
    cr_assert(tu_case_verify(&op, why, sizeof(why)), "other: %s", why);
    tu_case_free(&op);
    for (int i = 0; i < SMALLS; i++) {
        rv = gemm_wait(rq[i], NULL);
        cr_assert_eq(rv, GEMM_OK, "small %d past the cap: %s (%s)", i,
                     gemm_strerror(rv), gemm_last_error_message());
        cr_assert(tu_case_verify(&p[i], why, sizeof(why)), "small %d: %s", i,
                  why);
        tu_case_free(&p[i]);
    }
    cr_assert_eq(gemm_wait(rs, NULL), GEMM_OK);
    tu_held_check(&slow, slow_buf, "held GEMM");
    gemm_buffer_free(obuf);
    gemm_client_close(other);
    gemm_buffer_free(buf);
    gemm_buffer_free(slow_buf);
}

/* Releases the test hold 100 ms after it starts (client_timeout_...). */
static void *release_later(void *arg)
{
    (void)arg;
    tu_wait_until(tu_now() + 0.1);
    tu_hold_release();
    return NULL;
}

/* A client-side timeout is the daemon's too: the client cancels, a GEMM
 * that had not started is dropped and writes nothing, ever (it used to go
 * on in the daemon and write D after the client had been told TIMEOUT);
 * one that had started is waited for and its real outcome returned. */
Test(limits, client_timeout_cancels_queued_work)
{
    static const char *const args[] = {"--threads", "1", NULL};
    start_held(args);
    gemm_buffer *slow_buf, *buf;
    gemm_op slow;
    gemm_request *rs;
    tu_prepared p;
    char why[512];
    gemm_client *c2 = tu_client(&g_gemmd, 30000);

    tu_held_op(g_client, &slow_buf, &slow);
    int rv = gemm_buffer_alloc(c2, 32768, &buf);
    cr_assert_eq(rv, GEMM_OK, "gemm_buffer_alloc: %s", gemm_strerror(rv));
    tu_case cs = small_case(0, 99); /* D poisoned by prepare */
    cr_assert(tu_case_prepare(&cs, buf, &p, why, sizeof(why)), "%s", why);

    /* queued behind the held GEMM, the client gives up after 20 ms */
    rv = gemm_submit(g_client, &slow, &rs);
    cr_assert_eq(rv, GEMM_OK, "submit held: %s", gemm_strerror(rv));
    tu_hold_wait(10.0);
    cr_assert_eq(gemm_client_set_timeout(c2, 20), GEMM_OK);
    rv = gemm_run(c2, &p.op, NULL);
    cr_assert_eq(rv, GEMM_ERR_TIMEOUT,
                 "GEMM behind a held one, client timeout 20 ms: %s (\"%s\")",
                 gemm_strerror(rv), gemm_last_error_message());
    cr_assert(strstr(gemm_last_error_message(), "nothing was written"),
              "TIMEOUT message: \"%s\"", gemm_last_error_message());
    tu_hold_release();
    rv = gemm_wait(rs, NULL);
    cr_assert_eq(rv, GEMM_OK, "held: %s (%s)", gemm_strerror(rv),
                 gemm_last_error_message());
    tu_held_check(&slow, slow_buf, "held GEMM");
    cr_assert_eq(gemm_client_set_timeout(c2, 30000), GEMM_OK);
    gemm_status st;
    cr_assert_eq(gemm_get_status(c2, &st), GEMM_OK);
    cr_assert_eq(st.queue_depth, 0, "the canceled GEMM is still queued");
    /* one worker, in order: a GEMM of c2's that completes now went after
     * anything left of the canceled one */
    tu_assert_healthy(c2);
    cr_assert_eq(memcmp(p.data + p.lo, p.snapshot, p.hi - p.lo), 0,
                 "the canceled GEMM wrote its D after all");
    tu_case_free(&p);

    /* started: the client's timeout passes while it runs; the call waits
     * for it and returns its outcome, with D whole and right. The hold
     * ends from another thread once the waiting call has long passed its
     * 1 ms (had it not, the daemon still answers the cancel with the
     * outcome it keeps for recent requests). */
    cr_assert_eq(gemm_client_set_timeout(g_client, 1), GEMM_OK);
    rv = gemm_submit(g_client, &slow, &rs);
    cr_assert_eq(rv, GEMM_OK, "submit held: %s", gemm_strerror(rv));
    tu_hold_wait(10.0);
    pthread_t rel;
    cr_assert_eq(pthread_create(&rel, NULL, release_later, NULL), 0);
    rv = gemm_wait(rs, NULL);
    pthread_join(rel, NULL);
    cr_assert_eq(rv, GEMM_OK,
                 "a started GEMM past the client's timeout: "
                 "%s (%s)",
                 gemm_strerror(rv), gemm_last_error_message());
    tu_held_check(&slow, slow_buf, "held GEMM run past its timeout");
    cr_assert_eq(gemm_client_set_timeout(g_client, 30000), GEMM_OK);
    /* the late replies went nowhere: the next requests get their own */
    for (int i = 0; i < 20; i++)
        cr_assert_eq(gemm_ping(c2, NULL), GEMM_OK, "ping %d", i);
    tu_assert_healthy(c2);
    gemm_buffer_free(buf);
    gemm_buffer_free(slow_buf);
    gemm_client_close(c2);
}

/* ---- fairness ---- */

#define FLOOD   40
#define FLOOD_N 384 /* fp32 FLOOD_N^3: a few ms each on one core */

typedef struct flood {
    gemm_request *r[FLOOD];
    int rv[FLOOD];
    double done_at[FLOOD]; /* tu_now() when its wait returned */
} flood;

static void *flood_waiter(void *arg)
{
    flood *f = arg;
    for (int i = 0; i < FLOOD; i++) {
        f->rv[i] = gemm_wait(f->r[i], NULL);
        f->done_at[i] = tu_now();
    }
    return NULL;
}

Test(limits, fairness_between_clients)
{
    static const char *const args[] = {"--threads", "1", NULL};
    start_held(args);
    size_t nn = (size_t)FLOOD_N * FLOOD_N;
    gemm_buffer *abuf, *bbuf;
    uint64_t seed = 555;
    static flood f;
    char why[512];
    pthread_t tid;

    int rv = gemm_buffer_alloc(g_client, (2 + FLOOD) * nn * 4, &abuf);
    cr_assert_eq(rv, GEMM_OK, "flood buffer: %s", gemm_strerror(rv));
    char *base = gemm_buffer_data(abuf);
    tu_fill(base, GEMM_FP32, 2 * FLOOD_N, FLOOD_N, FLOOD_N, &seed);
    gemm_op ops[FLOOD];
    for (int i = 0; i < FLOOD; i++) {
        gemm_op_init(&ops[i], FLOOD_N, FLOOD_N, FLOOD_N, GEMM_FP32, GEMM_FP32);
        ops[i].a.buf = ops[i].b.buf = ops[i].d.buf = abuf;
        ops[i].b.offset = nn * 4;
        ops[i].d.offset = (2 + (uint64_t)i) * nn * 4;
    }
    ops[0].kernel = TU_HOLD_KERNEL; /* the flood waits behind it */
    gemm_client *b = tu_client(&g_gemmd, 30000);
    rv = gemm_buffer_alloc(b, 16384, &bbuf);
    cr_assert_eq(rv, GEMM_OK, "B's buffer: %s", gemm_strerror(rv));
    tu_prepared p;
    tu_case cs = small_case(0, 31);
    cr_assert(tu_case_prepare(&cs, bbuf, &p, why, sizeof(why)), "%s", why);

    for (int i = 0; i < FLOOD; i++) {
        rv = gemm_submit(g_client, &ops[i], &f.r[i]);
        cr_assert_eq(rv, GEMM_OK, "flood submit %d: %s", i, gemm_strerror(rv));
    }
    cr_assert_eq(pthread_create(&tid, NULL, flood_waiter, &f), 0);
    /* A's whole flood is queued behind its held first GEMM, then B's
     * single GEMM arrives; only then does the worker go on */
    tu_hold_wait(10.0);
    cr_assert(tu_wait_queue_depth(b, FLOOD, 10.0), "A's flood never queued");
    gemm_request *rb;
    rv = gemm_submit(b, &p.op, &rb);
    cr_assert_eq(rv, GEMM_OK, "B's submit: %s", gemm_strerror(rv));
    cr_assert(tu_wait_queue_depth(b, FLOOD + 1, 10.0), "B's GEMM never queued");
    tu_hold_release();
    rv = gemm_wait(rb, NULL);
    double b_done = tu_now();
    cr_assert_eq(rv, GEMM_OK, "B's GEMM: %s (%s)", gemm_strerror(rv),
                 gemm_last_error_message());
    cr_assert(tu_case_verify(&p, why, sizeof(why)), "B's GEMM: %s", why);
    tu_case_free(&p);
    pthread_join(tid, NULL);

    int before_b = 0;
    for (int i = 0; i < FLOOD; i++) {
        cr_assert_eq(f.rv[i], GEMM_OK, "flood GEMM %d: %s", i,
                     gemm_strerror(f.rv[i]));
        if (f.done_at[i] < b_done)
            before_b++;
    }
    double drain = f.done_at[FLOOD - 1] - b_done;
    cr_assert_leq(before_b, FLOOD - 30,
                  "B's single GEMM waited for %d of A's %d queued ones "
                  "(want <= %d): no round-robin between clients",
                  before_b, FLOOD, FLOOD - 30);
    cr_assert_gt(drain, 0.0, "A's flood drained before B was served");
    /* spot-check the flood's results */
    for (int i = 0; i < FLOOD; i += 13) {
        const float *d = (const float *)(base + ops[i].d.offset);
        double ref, scale;
        tu_ref_elem(&ops[i], base, base + nn * 4, NULL, 5, 300, &ref, &scale);
        double err = d[5 * FLOOD_N + 300] - ref;
        cr_assert(err < 1e-4 * scale + 1e-5 && err > -1e-4 * scale - 1e-5,
                  "flood GEMM %d: D[5][300] = %g, want %g", i,
                  (double)d[5 * FLOOD_N + 300], ref);
    }
    gemm_buffer_free(bbuf);
    gemm_client_close(b);
    gemm_buffer_free(abuf);
}
