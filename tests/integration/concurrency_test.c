/*
 * concurrency_test.c: many requests at once. 8 threads x 200 requests on
 * one shared gemm_client and on 8 separate clients, with varied small
 * shapes and types, every reply checked against the fp64 reference; many
 * asynchronous requests in flight on one client, from one and from several
 * threads; and backpressure: with --max-queue 2 a burst gets GEMM_ERR_BUSY
 * for some requests, correct results for the others, and the daemon serves
 * normally afterwards.
 */
#include "util/cases.h"
#include "util/daemon.h"
#include "util/data.h"

#include <criterion/criterion.h>

#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

TestSuite(concurrency, .init = fixture_setup, .fini = fixture_teardown,
          .timeout = 120);

#define THREADS    8
#define PER_THREAD 200

typedef struct worker {
    pthread_t tid;
    int index;
    gemm_client *client; /* shared or own */
    bool own_client;
    int done;      /* requests checked */
    int failed_at; /* -1 if none */
    char why[768];
} worker;

static void *worker_main(void *arg)
{
    worker *w = arg;
    gemm_buffer *buf = NULL;
    uint64_t state = 0xABCDEF01ULL * (uint64_t)(w->index + 1);
    w->failed_at = -1;
    if (w->own_client) {
        int rv = gemm_client_open(&w->client, g_gemmd.url);
        if (rv != GEMM_OK) {
            w->failed_at = 0;
            snprintf(w->why, sizeof(w->why), "gemm_client_open: %s",
                     gemm_strerror(rv));
            return NULL;
        }
        gemm_client_set_timeout(w->client, 60000);
    }
    int rv = gemm_buffer_alloc(w->client, 256 << 10, &buf);
    if (rv != GEMM_OK) {
        w->failed_at = 0;
        snprintf(w->why, sizeof(w->why), "gemm_buffer_alloc: %s (%s)",
                 gemm_strerror(rv), gemm_last_error_message());
        goto out;
    }
    for (int i = 0; i < PER_THREAD; i++) {
        tu_case cs;
        tu_case_random(&cs, &state, 32);
        rv = tu_case_run(w->client, buf, &cs, w->why, sizeof(w->why));
        if (rv != GEMM_OK) {
            w->failed_at = i;
            break;
        }
        w->done++;
    }
    gemm_buffer_free(buf);
out:
    if (w->own_client)
        gemm_client_close(w->client);
    return NULL;
}

static void run_workers(bool own_clients)
{
    worker w[THREADS];
    memset(w, 0, sizeof(w));
    for (int i = 0; i < THREADS; i++) {
        w[i].index = i + (own_clients ? 100 : 0);
        w[i].own_client = own_clients;
        w[i].client = own_clients ? NULL : g_client;
        cr_assert_eq(pthread_create(&w[i].tid, NULL, worker_main, &w[i]), 0);
    }
    for (int i = 0; i < THREADS; i++)
        pthread_join(w[i].tid, NULL);
    for (int i = 0; i < THREADS; i++)
        cr_assert_eq(w[i].failed_at, -1, "thread %d, request %d: %s", i,
                     w[i].failed_at, w[i].why);
    for (int i = 0; i < THREADS; i++)
        cr_assert_eq(w[i].done, PER_THREAD);

    gemm_status st;
    int rv = gemm_get_status(g_client, &st);
    cr_assert_eq(rv, GEMM_OK, "gemm_get_status: %s", gemm_strerror(rv));
    cr_assert_geq(st.requests_served, (uint64_t)THREADS * PER_THREAD,
                  "requests_served %llu < %d",
                  (unsigned long long)st.requests_served, THREADS * PER_THREAD);
}

Test(concurrency, shared_client_8_threads)
{
    run_workers(false);
}
Test(concurrency, separate_clients_8_threads)
{
    run_workers(true);
}

/* The reply waits: with the spin off, and with a limit far above any
 * round trip (every repeated request then sleeps until shortly before
 * its reply is due and spins for the rest), 64 requests of 4 shapes and
 * then 8 threads on one client get every result right; bad settings are
 * refused. */
Test(concurrency, spin_settings)
{
    cr_assert_eq(gemm_client_set_spin(NULL, 10), GEMM_ERR_INVALID);
    cr_assert_eq(gemm_client_set_spin(g_client, -1), GEMM_ERR_INVALID);
    cr_assert(strstr(gemm_last_error_message(), ">= 0") != NULL, "%s",
              gemm_last_error_message());
    for (int spin = 0; spin < 2; spin++) {
        cr_assert_eq(gemm_client_set_spin(g_client, spin ? 100000 : 0),
                     GEMM_OK);
        gemm_buffer *buf = NULL;
        int rv = gemm_buffer_alloc(g_client, 256 << 10, &buf);
        cr_assert_eq(rv, GEMM_OK, "gemm_buffer_alloc: %s", gemm_strerror(rv));
        for (int i = 0; i < 64; i++) {
            char why[768];
            tu_case cs = tu_case_plain((uint64_t)(8 + 8 * (i % 4)), 24, 40,
                                       i % 2 ? GEMM_FP32 : GEMM_BF16, GEMM_FP32,
                                       (uint64_t)i + 1);
            rv = tu_case_run(g_client, buf, &cs, why, sizeof(why));
            cr_assert_eq(rv, GEMM_OK, "spin %d, request %d: %s", spin, i, why);
        }
        gemm_buffer_free(buf);
        run_workers(false);
    }
    cr_assert_eq(gemm_client_set_spin(g_client, 200), GEMM_OK);
}

#define INFLIGHT 64

/* INFLIGHT submits on one client, then waits in a scrambled order. */
Test(concurrency, async_many_in_flight)
{
    static tu_prepared p[INFLIGHT];
    gemm_request *req[INFLIGHT];
    gemm_buffer *buf[INFLIGHT];
    uint64_t state = 0x5EED;
    char why[768];
    for (int i = 0; i < INFLIGHT; i++) {
        tu_case cs;
        int rv = gemm_buffer_alloc(g_client, 128 << 10, &buf[i]);
        cr_assert_eq(rv, GEMM_OK, "gemm_buffer_alloc: %s", gemm_strerror(rv));
        tu_case_random(&cs, &state, 48);
        cr_assert(tu_case_prepare(&cs, buf[i], &p[i], why, sizeof(why)), "%s",
                  why);
    }
    for (int i = 0; i < INFLIGHT; i++) {
        int rv = gemm_submit(g_client, &p[i].op, &req[i]);
        cr_assert_eq(rv, GEMM_OK, "gemm_submit %d: %s (%s)", i,
                     gemm_strerror(rv), gemm_last_error_message());
    }
    for (int j = 0; j < INFLIGHT; j++) {
        int i = (j * 37 + 11) % INFLIGHT; /* 37 is coprime with 64 */
        gemm_timings t;
        int rv = gemm_wait(req[i], &t);
        cr_assert_eq(rv, GEMM_OK, "gemm_wait %d: %s (%s)", i, gemm_strerror(rv),
                     gemm_last_error_message());
        cr_assert(tu_case_verify(&p[i], why, sizeof(why)), "request %d: %s", i,
                  why);
        cr_assert_geq(t.total_us, t.compute_us);
    }
    for (int i = 0; i < INFLIGHT; i++) {
        tu_case_free(&p[i]);
        gemm_buffer_free(buf[i]);
    }
}

typedef struct async_worker {
    pthread_t tid;
    int index;
    int failed_at;
    char why[768];
} async_worker;

#define ASYNC_THREADS    4
#define ASYNC_PER_THREAD 32

static void *async_main(void *arg)
{
    async_worker *w = arg;
    tu_prepared *p = calloc(ASYNC_PER_THREAD, sizeof(*p));
    gemm_request *req[ASYNC_PER_THREAD];
    gemm_buffer *buf = NULL;
    uint64_t state = 0x77777ULL + (uint64_t)w->index;
    int rv, n = 0;
    w->failed_at = -1;
    rv = gemm_buffer_alloc(g_client, 4 << 20, &buf);
    if (rv != GEMM_OK) {
        w->failed_at = 0;
        snprintf(w->why, sizeof(w->why), "alloc: %s", gemm_strerror(rv));
        free(p);
        return NULL;
    }
    /* cases side by side in one buffer, 64 KiB apart */
    for (n = 0; n < ASYNC_PER_THREAD; n++) {
        tu_case cs;
        tu_case_random(&cs, &state, 40);
        cs.base = (uint64_t)n * 65536 + (cs.base % 16);
        if (!tu_case_prepare(&cs, buf, &p[n], w->why, sizeof(w->why)) ||
            (rv = gemm_submit(g_client, &p[n].op, &req[n])) != GEMM_OK) {
            if (w->why[0] == '\0')
                snprintf(w->why, sizeof(w->why), "gemm_submit: %s",
                         gemm_strerror(rv));
            w->failed_at = n;
            break;
        }
    }
    for (int i = 0; i < n; i++) {
        rv = gemm_wait(req[i], NULL);
        if (w->failed_at == -1 && rv != GEMM_OK) {
            w->failed_at = i;
            snprintf(w->why, sizeof(w->why), "gemm_wait: %s (%s)",
                     gemm_strerror(rv), gemm_last_error_message());
        } else if (w->failed_at == -1 &&
                   !tu_case_verify(&p[i], w->why, sizeof(w->why))) {
            w->failed_at = i;
        }
        tu_case_free(&p[i]);
    }
    gemm_buffer_free(buf);
    free(p);
    return NULL;
}

Test(concurrency, async_from_threads)
{
    async_worker w[ASYNC_THREADS];
    memset(w, 0, sizeof(w));
    for (int i = 0; i < ASYNC_THREADS; i++) {
        w[i].index = i;
        cr_assert_eq(pthread_create(&w[i].tid, NULL, async_main, &w[i]), 0);
    }
    for (int i = 0; i < ASYNC_THREADS; i++)
        pthread_join(w[i].tid, NULL);
    for (int i = 0; i < ASYNC_THREADS; i++)
        cr_assert_eq(w[i].failed_at, -1, "thread %d, request %d: %s", i,
                     w[i].failed_at, w[i].why);
}

/* ---- backpressure ---- */

static void busy_setup(void)
{
    static const char *const args[] = {"--threads", "1", "--max-queue", "2",
                                       NULL};
    fixture_start(args);
}

TestSuite(backpressure, .init = busy_setup, .fini = fixture_teardown,
          .timeout = 120);

#define BURST 24
#define BN    768

Test(backpressure, burst_gets_busy_and_correct_results)
{
    const size_t mat = (size_t)BN * BN * 4;
    gemm_buffer *buf;
    gemm_request *req[BURST];
    int rvs[BURST], busy = 0, ok = 0;
    uint64_t seed = 2024;
    gemm_op op[BURST];
    int rv = gemm_buffer_alloc(g_client, mat * (2 + BURST), &buf);
    cr_assert_eq(rv, GEMM_OK, "gemm_buffer_alloc: %s", gemm_strerror(rv));
    uint8_t *p = gemm_buffer_data(buf);
    tu_fill(p, GEMM_FP32, 2 * BN, BN, BN, &seed);
    memset(p + 2 * mat, 0xff, mat * BURST);

    gemm_status st;
    rv = gemm_get_status(g_client, &st);
    cr_assert_eq(rv, GEMM_OK, "gemm_get_status: %s", gemm_strerror(rv));
    cr_assert_eq(st.queue_capacity, 2,
                 "queue_capacity %u, want 2 "
                 "(--max-queue 2)",
                 st.queue_capacity);

    for (int i = 0; i < BURST; i++) {
        gemm_op_init(&op[i], BN, BN, BN, GEMM_FP32, GEMM_FP32);
        op[i].a.buf = op[i].b.buf = op[i].d.buf = buf;
        op[i].b.offset = mat;
        op[i].d.offset = (2 + (uint64_t)i) * mat;
        rvs[i] = gemm_submit(g_client, &op[i], &req[i]);
        cr_assert(rvs[i] == GEMM_OK || rvs[i] == GEMM_ERR_BUSY,
                  "gemm_submit %d: %s", i, gemm_strerror(rvs[i]));
    }
    for (int i = 0; i < BURST; i++) {
        if (rvs[i] == GEMM_OK)
            rvs[i] = gemm_wait(req[i], NULL);
        cr_assert(rvs[i] == GEMM_OK || rvs[i] == GEMM_ERR_BUSY,
                  "request %d: %s (%s)", i, gemm_strerror(rvs[i]),
                  gemm_last_error_message());
        if (rvs[i] == GEMM_ERR_BUSY) {
            busy++;
            cr_assert_neq(gemm_last_error_message()[0], '\0',
                          "BUSY without a message");
        } else {
            ok++;
        }
    }
    cr_assert_geq(ok, 2, "only %d of %d requests were served", ok, BURST);
    cr_assert_gt(busy, 0,
                 "a burst of %d %dx%dx%d GEMMs against --threads 1 "
                 "--max-queue 2 got no GEMM_ERR_BUSY",
                 BURST, BN, BN, BN);

    /* served results are right, refused ones left D alone */
    double tr, ta;
    tu_tolerance(&op[0], &tr, &ta);
    for (int i = 0; i < BURST; i++) {
        const uint8_t *d = p + op[i].d.offset;
        if (rvs[i] == GEMM_ERR_BUSY) {
            for (size_t b = 0; b < mat; b += 4093)
                cr_assert_eq(d[b], 0xff, "refused request %d wrote D", i);
            continue;
        }
        for (int s = 0; s < 16; s++) {
            size_t r = tu_rand(&seed) % BN, c = tu_rand(&seed) % BN;
            double ref, scale;
            tu_ref_elem(&op[i], p, p + mat, NULL, r, c, &ref, &scale);
            double got = ((const float *)d)[r * BN + c];
            cr_assert_leq(fabs(got - ref), tr * scale + ta,
                          "request %d: D[%zu][%zu] = %g, reference %g", i, r, c,
                          got, ref);
        }
    }

    /* the queue drains; then requests are served again */
    double until = tu_now() + 10;
    do {
        rv = gemm_get_status(g_client, &st);
        cr_assert_eq(rv, GEMM_OK, "gemm_get_status: %s", gemm_strerror(rv));
    } while (st.queue_depth != 0 && tu_now() < until && (tu_sleep_ms(5), 1));
    cr_assert_eq(st.queue_depth, 0, "queue_depth %u 10 s after the burst",
                 st.queue_depth);
    cr_assert_geq(st.requests_failed, (uint64_t)busy,
                  "requests_failed %llu < %d refused",
                  (unsigned long long)st.requests_failed, busy);
    tu_assert_healthy(g_client);
    gemm_buffer_free(buf);
}

/* Threads that allocate, compute, free, ping and read status at once, and
 * others that connect and disconnect: the registry and the connection
 * bookkeeping under contention. */
typedef struct churn {
    pthread_t tid;
    int index;
    int failed_at;
    char why[768];
} churn;

static void *churn_main(void *arg)
{
    churn *w = arg;
    uint64_t state = 0xC4A2ULL + (uint64_t)w->index;
    w->failed_at = -1;
    for (int i = 0; i < 60; i++) {
        gemm_client *c = g_client;
        gemm_buffer *b = NULL;
        int rv;
        if (w->index % 2 == 1 &&
            (rv = gemm_client_open(&c, g_gemmd.url)) != GEMM_OK) {
            snprintf(w->why, sizeof(w->why), "open: %s", gemm_strerror(rv));
            w->failed_at = i;
            return NULL;
        }
        rv = gemm_buffer_alloc(c, 64 << 10, &b);
        if (rv == GEMM_OK) {
            tu_case cs;
            tu_case_random(&cs, &state, 16);
            rv = tu_case_run(c, b, &cs, w->why, sizeof(w->why));
        } else {
            snprintf(w->why, sizeof(w->why), "alloc: %s", gemm_strerror(rv));
        }
        gemm_status st;
        if (rv == GEMM_OK && (rv = gemm_get_status(c, &st)) != GEMM_OK)
            snprintf(w->why, sizeof(w->why), "status: %s", gemm_strerror(rv));
        if (rv == GEMM_OK && (rv = gemm_ping(c, NULL)) != GEMM_OK)
            snprintf(w->why, sizeof(w->why), "ping: %s", gemm_strerror(rv));
        if (w->index % 4 == 3 && c != g_client) {
            gemm_client_close(c); /* the daemon releases b */
            gemm_buffer_free(b);
        } else {
            gemm_buffer_free(b);
            if (c != g_client)
                gemm_client_close(c);
        }
        if (rv != GEMM_OK) {
            w->failed_at = i;
            return NULL;
        }
    }
    return NULL;
}

Test(concurrency, churn)
{
    churn w[8];
    gemm_status before, after;
    cr_assert_eq(gemm_get_status(g_client, &before), GEMM_OK);
    memset(w, 0, sizeof(w));
    for (int i = 0; i < 8; i++) {
        w[i].index = i;
        cr_assert_eq(pthread_create(&w[i].tid, NULL, churn_main, &w[i]), 0);
    }
    for (int i = 0; i < 8; i++)
        pthread_join(w[i].tid, NULL);
    for (int i = 0; i < 8; i++)
        cr_assert_eq(w[i].failed_at, -1, "thread %d, round %d: %s", i,
                     w[i].failed_at, w[i].why);
    /* every churned connection gone: only g_client is left (the
     * fixture's start-up ping may still have been closing in `before`) */
    double until = tu_now() + 5;
    do {
        cr_assert_eq(gemm_get_status(g_client, &after), GEMM_OK);
    } while ((after.buffers != before.buffers || after.clients != 1) &&
             tu_now() < until && (tu_sleep_ms(10), 1));
    cr_assert_eq(after.buffers, before.buffers, "buffers %u, want %u",
                 after.buffers, before.buffers);
    cr_assert_eq(after.clients, 1, "clients %u, want 1 (g_client)",
                 after.clients);
}
