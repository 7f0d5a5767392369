/*
 * ownership_test.c: a buffer belongs to the connection that registered it.
 * Another connection (another gemm_client, or a raw socket that knows the
 * id) can neither compute with it nor release it, and the owner's data
 * stays intact; when the owner disconnects, the daemon releases its
 * buffers (gemm_get_status's buffers and buffer_bytes go back down).
 */
#include "util/cases.h"
#include "util/daemon.h"
#include "util/data.h"
#include "util/hold.h"
#include "util/raw.h"

#include <criterion/criterion.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* The fixture's gemmd, with the test hold where there is one (the rounds
 * that need a GEMM queued or running). */
static void setup(void)
{
    tu_hold_setup();
    fixture_setup();
}

/* Where the test hold exists, occupies the worker with a held GEMM of
 * g_client's (*r), so that what comes next queues behind it; returns
 * whether it did. */
static bool hold_worker(gemm_buffer **buf, gemm_op *op, gemm_request **r)
{
    if (!tu_hold_have())
        return false;
    tu_held_op(g_client, buf, op);
    int rv = gemm_submit(g_client, op, r);
    cr_assert_eq(rv, GEMM_OK, "submit held: %s", gemm_strerror(rv));
    tu_hold_wait(10.0);
    return true;
}

/* Ends what hold_worker() began: releases the held GEMM and checks it. */
static void unhold_worker(gemm_buffer *buf, gemm_op *op, gemm_request *r)
{
    tu_hold_release();
    int rv = gemm_wait(r, NULL);
    cr_assert_eq(rv, GEMM_OK, "held GEMM: %s (%s)", gemm_strerror(rv),
                 gemm_last_error_message());
    tu_held_check(op, buf, "held GEMM");
    gemm_buffer_free(buf);
}

/* Skips, after the rounds that ran, a test whose queued and running
 * rounds needed the test hold. */
static void skip_unheld_rounds(void)
{
    if (!tu_hold_have())
        cr_skip_test("skipped: the rounds with the GEMM queued or running "
                     "need the CPU backend's test hold (the suite runs on "
                     "%s); the others passed",
                     tu_backend());
}

TestSuite(ownership, .init = setup, .fini = fixture_teardown, .timeout = 60);

static gemm_status status_now(void)
{
    gemm_status st;
    int rv = gemm_get_status(g_client, &st);
    cr_assert_eq(rv, GEMM_OK, "gemm_get_status: %s", gemm_strerror(rv));
    return st;
}

/* Polls status until buffers == want (up to 5 s); returns the last. */
static gemm_status wait_buffers(uint32_t want)
{
    double until = tu_now() + 5.0;
    gemm_status st = status_now();
    while (st.buffers != want && tu_now() < until) {
        tu_sleep_ms(10);
        st = status_now();
    }
    return st;
}

/* Owner's buffer with an 8 x 8 x 8 fp32 problem: A at 0, B at 1024, D at
 * 2048. */
static gemm_buffer *owner_buffer(gemm_client *c, gemm_op *op)
{
    gemm_buffer *b;
    uint64_t seed = 99;
    int rv = gemm_buffer_alloc(c, 8192, &b);
    cr_assert_eq(rv, GEMM_OK, "gemm_buffer_alloc: %s", gemm_strerror(rv));
    tu_fill(gemm_buffer_data(b), GEMM_FP32, 1, 2048, 2048, &seed);
    gemm_op_init(op, 8, 8, 8, GEMM_FP32, GEMM_FP32);
    op->a.buf = op->b.buf = op->d.buf = b;
    op->b.offset = 1024;
    op->d.offset = 2048;
    return b;
}

static void assert_owner_ok(gemm_client *owner, gemm_op *op,
                            const uint8_t *snap, const char *after)
{
    char why[512];
    double ref[64], scale[64];
    uint8_t *p = gemm_buffer_data(op->d.buf);
    cr_assert_eq(memcmp(p, snap, 8192), 0,
                 "after %s: the owner's buffer changed", after);
    tu_ref_gemm(op, p, p + 1024, NULL, ref, scale);
    int rv = gemm_run(owner, op, NULL);
    cr_assert_eq(rv, GEMM_OK, "after %s: the owner's gemm: %s (%s)", after,
                 gemm_strerror(rv), gemm_last_error_message());
    cr_assert(tu_compare(op, p + 2048, ref, scale, why, sizeof(why)),
              "after %s: %s", after, why);
}

Test(ownership, foreign_client_cannot_compute)
{
    gemm_op op, mine;
    uint8_t snap[8192];
    gemm_buffer *theirs = owner_buffer(g_client, &op);
    gemm_client *other = tu_client(&g_gemmd, 10000);
    gemm_buffer *own;

    memcpy(snap, gemm_buffer_data(theirs), sizeof(snap));
    int rv = gemm_run(other, &op, NULL);
    cr_assert_eq(rv, GEMM_ERR_NO_BUFFER,
                 "gemm on another client's buffer: %s (\"%s\"), want %s",
                 gemm_strerror(rv), gemm_last_error_message(),
                 gemm_strerror(GEMM_ERR_NO_BUFFER));
    cr_assert_neq(gemm_last_error_message()[0], '\0', "no message");

    /* own D, foreign A: D must stay as it was */
    rv = gemm_buffer_alloc(other, 8192, &own);
    cr_assert_eq(rv, GEMM_OK, "gemm_buffer_alloc: %s", gemm_strerror(rv));
    memset(gemm_buffer_data(own), 0x3c, 8192);
    mine = op;
    mine.d.buf = own;
    mine.d.offset = 0;
    rv = gemm_run(other, &mine, NULL);
    cr_assert_eq(rv, GEMM_ERR_NO_BUFFER, "foreign A, own D: %s, want %s",
                 gemm_strerror(rv), gemm_strerror(GEMM_ERR_NO_BUFFER));
    const uint8_t *o = gemm_buffer_data(own);
    for (int i = 0; i < 8192; i++)
        cr_assert_eq(o[i], 0x3c, "the refused request wrote D (byte %d)", i);

    /* own A and B, foreign D: the owner's memory must not be written */
    mine = op;
    mine.a.buf = mine.b.buf = own;
    rv = gemm_run(other, &mine, NULL);
    cr_assert_eq(rv, GEMM_ERR_NO_BUFFER, "foreign D: %s, want %s",
                 gemm_strerror(rv), gemm_strerror(GEMM_ERR_NO_BUFFER));
    assert_owner_ok(g_client, &op, snap, "foreign gemms");
    tu_assert_healthy(other);
    gemm_buffer_free(own);
    gemm_client_close(other);
    gemm_buffer_free(theirs);
}

Test(ownership, raw_connection_cannot_use_or_release)
{
    gemm_op op;
    uint8_t snap[8192];
    gemm_buffer *theirs = owner_buffer(g_client, &op);
    uint64_t id = gemm_buffer_id(theirs);
    Gemm__GemmRequest g;
    Gemm__Operand ops[4];
    Gemm__Reply *rep;
    tu_raw raw;
    tu_shm shm;
    uint64_t rawid;

    memcpy(snap, gemm_buffer_data(theirs), sizeof(snap));
    int rv = tu_raw_open(&raw, g_gemmd.url, 10000);
    cr_assert_eq(rv, 0, "raw dial: %s", nng_strerror(rv));
    rv = tu_raw_buffer(&raw, &shm, 8192, &rawid);
    cr_assert_eq(rv, GEMM_OK, "raw RegisterBuffer: %s", gemm_strerror(rv));

    /* the raw connection's own inputs, the owner's buffer as D */
    tu_raw_gemm_init(&g, ops, rawid, 8, 8, 8, 0, 1024, 2048);
    ops[3].buffer_id = id;
    rv = tu_raw_gemm(&raw, &g, &rep);
    cr_assert_eq(rv, 0, "no reply");
    cr_assert_eq(tu_reply_status(rep), GEMM_ERR_NO_BUFFER,
                 "D in another connection's buffer: %s, want %s",
                 gemm_strerror(tu_reply_status(rep)),
                 gemm_strerror(GEMM_ERR_NO_BUFFER));
    cr_assert(rep->message && rep->message[0], "no message");
    gemm__reply__free_unpacked(rep, NULL);

    /* the owner's buffer as A */
    tu_raw_gemm_init(&g, ops, rawid, 8, 8, 8, 0, 1024, 2048);
    ops[0].buffer_id = id;
    rv = tu_raw_gemm(&raw, &g, &rep);
    cr_assert_eq(rv, 0, "no reply");
    cr_assert_eq(tu_reply_status(rep), GEMM_ERR_NO_BUFFER,
                 "A in another connection's buffer: %s",
                 gemm_strerror(tu_reply_status(rep)));
    gemm__reply__free_unpacked(rep, NULL);

    rv = tu_raw_release(&raw, id, &rep);
    cr_assert_eq(rv, 0, "no reply");
    cr_assert_eq(tu_reply_status(rep), GEMM_ERR_NO_BUFFER,
                 "release of another connection's buffer: %s, want %s",
                 gemm_strerror(tu_reply_status(rep)),
                 gemm_strerror(GEMM_ERR_NO_BUFFER));
    gemm__reply__free_unpacked(rep, NULL);

    assert_owner_ok(g_client, &op, snap, "a foreign raw connection");

    /* and the other way round: the client cannot release the raw one's */
    tu_raw_gemm_init(&g, ops, rawid, 8, 8, 8, 0, 1024, 2048);
    rv = tu_raw_gemm(&raw, &g, &rep);
    cr_assert_eq(rv, 0, "no reply");
    cr_assert_eq(tu_reply_status(rep), GEMM_OK, "raw owner's gemm: %s",
                 gemm_strerror(tu_reply_status(rep)));
    gemm__reply__free_unpacked(rep, NULL);

    gemm_buffer_free(theirs);
    tu_raw_close(&raw);
    tu_shm_destroy(&shm);
}

Test(ownership, free_releases_at_once)
{
    gemm_status before = status_now(), mid, after;
    gemm_buffer *b;
    int rv = gemm_buffer_alloc(g_client, 1 << 20, &b);
    cr_assert_eq(rv, GEMM_OK, "gemm_buffer_alloc: %s", gemm_strerror(rv));
    mid = status_now();
    cr_assert_eq(mid.buffers, before.buffers + 1, "buffers %u -> %u",
                 before.buffers, mid.buffers);
    cr_assert_geq(mid.buffer_bytes, before.buffer_bytes + (1 << 20),
                  "buffer_bytes %llu -> %llu",
                  (unsigned long long)before.buffer_bytes,
                  (unsigned long long)mid.buffer_bytes);
    gemm_buffer_free(b);
    after = status_now();
    cr_assert_eq(after.buffers, before.buffers,
                 "after free: buffers %u, "
                 "was %u",
                 after.buffers, before.buffers);
    cr_assert_eq(after.buffer_bytes, before.buffer_bytes,
                 "after free: buffer_bytes %llu, was %llu",
                 (unsigned long long)after.buffer_bytes,
                 (unsigned long long)before.buffer_bytes);
}

Test(ownership, disconnect_releases_client_buffers)
{
    gemm_status before = status_now(), mid, after;
    gemm_client *other = tu_client(&g_gemmd, 10000);
    gemm_buffer *bufs[3];
    for (int i = 0; i < 3; i++) {
        int rv = gemm_buffer_alloc(other, 1 << 20, &bufs[i]);
        cr_assert_eq(rv, GEMM_OK, "gemm_buffer_alloc: %s", gemm_strerror(rv));
    }
    mid = status_now();
    cr_assert_eq(mid.buffers, before.buffers + 3, "buffers %u -> %u",
                 before.buffers, mid.buffers);
    cr_assert_geq(mid.buffer_bytes, before.buffer_bytes + (3 << 20),
                  "buffer_bytes %llu -> %llu",
                  (unsigned long long)before.buffer_bytes,
                  (unsigned long long)mid.buffer_bytes);
    uint64_t id0 = gemm_buffer_id(bufs[0]);

    gemm_client_close(other); /* buffers still mapped here */
    after = wait_buffers(before.buffers);
    cr_assert_eq(after.buffers, before.buffers,
                 "5 s after the client closed: buffers %u, want %u",
                 after.buffers, before.buffers);
    cr_assert_eq(after.buffer_bytes, before.buffer_bytes,
                 "after the client closed: buffer_bytes %llu, want %llu",
                 (unsigned long long)after.buffer_bytes,
                 (unsigned long long)before.buffer_bytes);
    /* the mapping stays usable in this process until freed */
    memset(gemm_buffer_data(bufs[1]), 1, 1 << 20);
    for (int i = 0; i < 3; i++)
        gemm_buffer_free(bufs[i]);

    /* the old id means nothing on a new connection */
    tu_raw raw;
    Gemm__Reply *rep;
    cr_assert_eq(tu_raw_open(&raw, g_gemmd.url, 10000), 0, "raw dial");
    int rv = tu_raw_release(&raw, id0, &rep);
    cr_assert_eq(rv, 0, "no reply");
    cr_assert_eq(tu_reply_status(rep), GEMM_ERR_NO_BUFFER,
                 "release of a disconnected client's id: %s",
                 gemm_strerror(tu_reply_status(rep)));
    gemm__reply__free_unpacked(rep, NULL);
    tu_raw_close(&raw);
    tu_assert_healthy(g_client);
}

Test(ownership, raw_disconnect_releases)
{
    gemm_status before = status_now(), mid, after;
    tu_raw raw;
    tu_shm shm[2];
    uint64_t id;
    cr_assert_eq(tu_raw_open(&raw, g_gemmd.url, 10000), 0, "raw dial");
    for (int i = 0; i < 2; i++) {
        int rv = tu_raw_buffer(&raw, &shm[i], 65536, &id);
        cr_assert_eq(rv, GEMM_OK, "raw RegisterBuffer: %s", gemm_strerror(rv));
    }
    mid = status_now();
    cr_assert_eq(mid.buffers, before.buffers + 2, "buffers %u -> %u",
                 before.buffers, mid.buffers);
    tu_raw_close(&raw);
    after = wait_buffers(before.buffers);
    cr_assert_eq(after.buffers, before.buffers,
                 "5 s after the raw socket closed: buffers %u, want %u",
                 after.buffers, before.buffers);
    for (int i = 0; i < 2; i++)
        tu_shm_destroy(&shm[i]);
}

Test(ownership, many_clients_come_and_go)
{
    gemm_status before = status_now(), after;
    for (int i = 0; i < 20; i++) {
        gemm_client *c = tu_client(&g_gemmd, 10000);
        gemm_buffer *b;
        int rv = gemm_buffer_alloc(c, 65536, &b);
        cr_assert_eq(rv, GEMM_OK, "round %d: gemm_buffer_alloc: %s", i,
                     gemm_strerror(rv));
        if (i % 2 == 0)
            gemm_buffer_free(b); /* released explicitly */
        gemm_client_close(c);
        if (i % 2 == 1)
            gemm_buffer_free(b); /* released by the disconnect */
    }
    after = wait_buffers(before.buffers);
    cr_assert_eq(after.buffers, before.buffers, "buffers %u, want %u",
                 after.buffers, before.buffers);
    tu_assert_healthy(g_client);
}

/* A connection that sends a big GEMM and goes away before the reply: the
 * daemon finishes (or drops) the work without touching unmapped memory,
 * releases the buffer once the request is done, and serves the rest. */
Test(ownership, disconnect_with_request_in_flight)
{
    const uint64_t n = 768;
    const size_t mat = n * n * 4;
    gemm_status before = status_now(), after;
    for (int round = 0; round < 3; round++) {
        gemm_buffer *hbuf = NULL;
        gemm_op hop;
        gemm_request *hr = NULL;
        bool held = false;
        if (round > 0 && !tu_hold_have())
            continue; /* skip_unheld_rounds() says so */
        tu_raw raw;
        tu_shm shm;
        uint64_t id;
        Gemm__GemmRequest g;
        Gemm__Operand ops[4];
        cr_assert_eq(tu_raw_open(&raw, g_gemmd.url, 10000), 0, "raw dial");
        int rv = tu_raw_buffer(&raw, &shm, 3 * mat, &id);
        cr_assert_eq(rv, GEMM_OK, "raw RegisterBuffer: %s", gemm_strerror(rv));
        uint64_t seed = 5 + (uint64_t)round;
        tu_fill(shm.data, GEMM_FP32, 2 * n, n, n, &seed);
        tu_raw_gemm_init(&g, ops, id, n, n, n, 0, mat, 2 * mat);
        if (round == 1) /* queued behind a held GEMM */
            held = hold_worker(&hbuf, &hop, &hr);
        else if (round == 2) /* running, held */
            g.kernel = (char *)TU_HOLD_KERNEL;
        Gemm__Request req = GEMM__REQUEST__INIT;
        req.has_version = req.has_id = 1;
        req.version = 1;
        req.id = 1;
        req.body_case = GEMM__REQUEST__BODY_GEMM;
        req.gemm = &g;
        size_t len = gemm__request__get_packed_size(&req);
        uint8_t *bytes = malloc(len);
        gemm__request__pack(&req, bytes);
        nng_msg *msg;
        cr_assert_eq(nng_msg_alloc(&msg, 0), 0);
        cr_assert_eq(nng_msg_append(msg, bytes, len), 0);
        free(bytes);
        cr_assert_eq(nng_sendmsg(raw.sock, msg, 0), 0, "send");
        if (round == 1)
            cr_assert(tu_wait_queue_depth(g_client, 2, 10.0),
                      "the GEMM never queued behind the held one");
        else if (round == 2)
            tu_hold_wait(10.0);
        tu_raw_close(&raw); /* no one waits for the reply */
        /* the client's side goes too: unlinked and unmapped */
        tu_shm_destroy(&shm);
        if (held)
            unhold_worker(hbuf, &hop, hr);
        else if (round == 2)
            tu_hold_release();
    }
    after = wait_buffers(before.buffers);
    cr_assert_eq(after.buffers, before.buffers,
                 "buffers %u 5 s after the connections closed, want %u",
                 after.buffers, before.buffers);
    tu_assert_healthy(g_client);
    skip_unheld_rounds();
}

/* Packs req and sends it on ctx through aio (waits for the send only). */
static void ctx_send(nng_ctx ctx, nng_aio *aio, Gemm__Request *req)
{
    size_t len = gemm__request__get_packed_size(req);
    nng_msg *msg;
    cr_assert_eq(nng_msg_alloc(&msg, len), 0);
    gemm__request__pack(req, nng_msg_body(msg));
    nng_aio_set_msg(aio, msg);
    nng_ctx_send(ctx, aio);
    nng_aio_wait(aio);
    cr_assert_eq(nng_aio_result(aio), 0, "ctx send: %s",
                 nng_strerror(nng_aio_result(aio)));
}

/* Receives the reply on ctx; returns its status. */
static int ctx_status(nng_ctx ctx, nng_aio *aio, const char *what)
{
    nng_aio_set_timeout(aio, 30000);
    nng_ctx_recv(ctx, aio);
    nng_aio_wait(aio);
    int rv = nng_aio_result(aio);
    cr_assert_eq(rv, 0, "%s: no reply (%s)", what, nng_strerror(rv));
    nng_msg *msg = nng_aio_get_msg(aio);
    Gemm__Reply *rep =
        gemm__reply__unpack(NULL, nng_msg_len(msg), nng_msg_body(msg));
    nng_msg_free(msg);
    cr_assert_not_null(rep, "%s: undecodable reply", what);
    int st = tu_reply_status(rep);
    gemm__reply__free_unpacked(rep, NULL);
    return st;
}

/* The owner releases a buffer while a GEMM on it is queued or running (two
 * contexts on one connection). The daemon must not unmap memory under the
 * GEMM: either the GEMM completes (correctly) or it fails cleanly, the
 * release is answered, and the buffer count goes back down. */
Test(ownership, release_while_gemm_in_flight)
{
    const uint64_t n = 512;
    const size_t mat = n * n * 4;
    gemm_status before = status_now();
    for (int round = 0; round < 4; round++) {
        gemm_buffer *hbuf = NULL;
        gemm_op hop;
        gemm_request *hr = NULL;
        bool held = false;
        if (round % 2 == 1 && !tu_hold_have())
            continue; /* skip_unheld_rounds() says so */
        tu_raw raw;
        tu_shm shm;
        uint64_t id;
        nng_ctx c1, c2;
        nng_aio *a1, *a2;
        Gemm__GemmRequest g;
        Gemm__Operand ops[4];
        Gemm__Request req = GEMM__REQUEST__INIT;
        Gemm__Request rel = GEMM__REQUEST__INIT;
        Gemm__ReleaseBufferRequest rb = GEMM__RELEASE_BUFFER_REQUEST__INIT;
        cr_assert_eq(tu_raw_open(&raw, g_gemmd.url, 30000), 0, "raw dial");
        int rv = tu_raw_buffer(&raw, &shm, 3 * mat, &id);
        cr_assert_eq(rv, GEMM_OK, "RegisterBuffer: %s", gemm_strerror(rv));
        uint64_t seed = 77 + (uint64_t)round;
        tu_fill(shm.data, GEMM_FP32, 2 * n, n, n, &seed);
        memset((uint8_t *)shm.data + 2 * mat, 0xff, mat);
        cr_assert_eq(nng_ctx_open(&c1, raw.sock), 0);
        cr_assert_eq(nng_ctx_open(&c2, raw.sock), 0);
        cr_assert_eq(nng_aio_alloc(&a1, NULL, NULL), 0);
        cr_assert_eq(nng_aio_alloc(&a2, NULL, NULL), 0);

        tu_raw_gemm_init(&g, ops, id, n, n, n, 0, mat, 2 * mat);
        req.has_version = req.has_id = 1;
        req.version = 1;
        req.id = 10;
        req.body_case = GEMM__REQUEST__BODY_GEMM;
        req.gemm = &g;
        rb.has_buffer_id = 1;
        rb.buffer_id = id;
        rel.has_version = rel.has_id = 1;
        rel.version = 1;
        rel.id = 11;
        rel.body_case = GEMM__REQUEST__BODY_RELEASE_BUFFER;
        rel.release_buffer = &rb;

        if (round == 1) /* queued behind a held GEMM */
            held = hold_worker(&hbuf, &hop, &hr);
        else if (round == 3) /* running, held */
            g.kernel = (char *)TU_HOLD_KERNEL;
        ctx_send(c1, a1, &req);
        if (round == 1)
            cr_assert(tu_wait_queue_depth(g_client, 2, 10.0),
                      "the GEMM never queued behind the held one");
        else if (round == 3)
            tu_hold_wait(10.0);
        ctx_send(c2, a2, &rel);
        int st_rel = ctx_status(c2, a2, "release during a GEMM");
        if (held)
            unhold_worker(hbuf, &hop, hr);
        else if (round == 3)
            tu_hold_release();
        int st_gemm = ctx_status(c1, a1, "GEMM whose buffer is released");
        cr_log_info("round %d: gemm %s, release %s", round,
                    gemm_strerror(st_gemm), gemm_strerror(st_rel));
        cr_assert(st_rel == GEMM_OK || st_rel == GEMM_ERR_BUSY ||
                      st_rel == GEMM_ERR_NO_BUFFER,
                  "release during a GEMM: %s", gemm_strerror(st_rel));
        if (st_gemm == GEMM_OK) {
            double tr, ta, ref, scale;
            gemm_op op;
            gemm_op_init(&op, n, n, n, GEMM_FP32, GEMM_FP32);
            tu_tolerance(&op, &tr, &ta);
            const uint8_t *p = shm.data;
            const float *d = (const float *)(p + 2 * mat);
            for (int s = 0; s < 16; s++) {
                size_t r = tu_rand(&seed) % n, c = tu_rand(&seed) % n;
                tu_ref_elem(&op, p, p + mat, NULL, r, c, &ref, &scale);
                cr_assert_leq(fabs(d[r * n + c] - ref), tr * scale + ta,
                              "round %d: D[%zu][%zu] = %g, reference %g", round,
                              r, c, d[r * n + c], ref);
            }
        } else {
            cr_assert(st_gemm == GEMM_ERR_NO_BUFFER ||
                          st_gemm == GEMM_ERR_BUFFER_FAULT,
                      "GEMM whose buffer was released: %s",
                      gemm_strerror(st_gemm));
        }
        if (st_rel != GEMM_OK) {
            Gemm__Reply *rep;
            rv = tu_raw_release(&raw, id, &rep);
            cr_assert_eq(rv, 0);
            gemm__reply__free_unpacked(rep, NULL);
        }
        nng_ctx_close(c1);
        nng_ctx_close(c2);
        nng_aio_free(a1);
        nng_aio_free(a2);
        tu_raw_close(&raw);
        tu_shm_destroy(&shm);
    }
    gemm_status after = wait_buffers(before.buffers);
    cr_assert_eq(after.buffers, before.buffers, "buffers %u, want %u",
                 after.buffers, before.buffers);
    tu_assert_healthy(g_client);
    skip_unheld_rounds();
}
