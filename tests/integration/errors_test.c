/*
 * errors_test.c: every bad input of the daemon's validation gets its typed
 * error code and a message, leaves every buffer unchanged, and the daemon
 * still answers and computes correctly afterwards. Requests the public API
 * can express go through libgemmclient; unknown buffer ids, RegisterBuffer
 * abuse and unknown dtype numbers go through a raw nng socket
 * (util/raw.h). gemmd runs with --max-dim 1024.
 */
#include "util/cases.h"
#include "util/daemon.h"
#include "util/data.h"
#include "util/fdpass.h"
#include "util/raw.h"

#include <criterion/criterion.h>

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

static void setup(void)
{
    static const char *const args[] = {"--max-dim", "1024", NULL};
    fixture_start(args);
}

TestSuite(errors, .init = setup, .fini = fixture_teardown, .timeout = 60);

#define BUF_BYTES 65536

static gemm_buffer *g_buf;
static uint8_t *g_snap;

/* A good 8 x 8 x 8 fp32 op: A at 0, B at 1024, D at 2048 of g_buf. */
static void good_op(gemm_op *op)
{
    uint64_t seed = 31337;
    if (g_buf == NULL) {
        int rv = gemm_buffer_alloc(g_client, BUF_BYTES, &g_buf);
        cr_assert_eq(rv, GEMM_OK, "gemm_buffer_alloc: %s", gemm_strerror(rv));
        cr_assert_eq(gemm_buffer_size(g_buf), BUF_BYTES,
                     "a page-multiple size is kept: %zu",
                     gemm_buffer_size(g_buf));
        uint8_t *p = gemm_buffer_data(g_buf);
        memset(p, 0x7f, BUF_BYTES);
        tu_fill(p, GEMM_FP32, 1, BUF_BYTES / 4, BUF_BYTES / 4, &seed);
        g_snap = malloc(BUF_BYTES);
    }
    gemm_op_init(op, 8, 8, 8, GEMM_FP32, GEMM_FP32);
    op->a.buf = op->b.buf = op->d.buf = g_buf;
    op->a.offset = 0;
    op->b.offset = 1024;
    op->d.offset = 2048;
}

/* Runs op through the client, expects code and a message, an unchanged
 * buffer, and a healthy daemon afterwards. */
static void expect(const gemm_op *op, int code, const char *what)
{
    memcpy(g_snap, gemm_buffer_data(g_buf), BUF_BYTES);
    int rv = gemm_run(g_client, op, NULL);
    cr_assert_eq(rv, code, "%s: got %d %s (\"%s\"), want %d %s", what, rv,
                 gemm_strerror(rv), gemm_last_error_message(), code,
                 gemm_strerror(code));
    if (code != GEMM_OK) {
        cr_assert_neq(gemm_last_error_message()[0], '\0',
                      "%s: failed with %s but no message", what,
                      gemm_strerror(rv));
        cr_assert_eq(memcmp(g_snap, gemm_buffer_data(g_buf), BUF_BYTES), 0,
                     "%s: a failed request changed the buffer", what);
    }
    tu_assert_healthy(g_client);
}

Test(errors, good_op_is_accepted)
{
    gemm_op op;
    good_op(&op);
    expect(&op, GEMM_OK, "the good op");
}

Test(errors, dims)
{
    gemm_op op;
    good_op(&op);
    op.m = 0;
    expect(&op, GEMM_ERR_DIMS, "m = 0");
    good_op(&op);
    op.n = 0;
    expect(&op, GEMM_ERR_DIMS, "n = 0");
    good_op(&op);
    op.k = 0;
    expect(&op, GEMM_ERR_DIMS, "k = 0");
    good_op(&op);
    op.m = 1025;
    op.n = op.k = 1;
    expect(&op, GEMM_ERR_DIMS, "m = --max-dim + 1");
    good_op(&op);
    op.n = 1025;
    op.m = op.k = 1;
    expect(&op, GEMM_ERR_DIMS, "n = --max-dim + 1");
    good_op(&op);
    op.k = 1025;
    op.m = op.n = 1;
    expect(&op, GEMM_ERR_DIMS, "k = --max-dim + 1");
    good_op(&op);
    op.m = UINT64_MAX;
    expect(&op, GEMM_ERR_DIMS, "m = 2^64 - 1");
    good_op(&op);
    op.m = 1024; /* A: 1024 x 1 at 0, B: 1 x 1 at 8192, D: 1024 x 1 */
    op.n = op.k = 1;
    op.b.offset = 8192;
    op.d.offset = 16384;
    expect(&op, GEMM_OK, "m = --max-dim");
}

Test(errors, leading_dimension)
{
    gemm_op op;
    good_op(&op);
    op.a.ld = 7;
    expect(&op, GEMM_ERR_LD, "lda = k - 1");
    good_op(&op);
    op.b.ld = 7;
    expect(&op, GEMM_ERR_LD, "ldb = n - 1");
    good_op(&op);
    op.d.ld = 1;
    expect(&op, GEMM_ERR_LD, "ldd = 1 < n");
    good_op(&op);
    op.c.buf = g_buf;
    op.c.offset = 4096;
    op.c.ld = 7;
    op.beta = 1.0f;
    expect(&op, GEMM_ERR_LD, "ldc = n - 1");
    /* transposes decide the stored row length: A^T stored k x m */
    good_op(&op);
    op.m = 16;
    op.trans_a = true;
    op.a.ld = 10; /* >= k = 8 but < m = 16 */
    expect(&op, GEMM_ERR_LD, "trans_a: lda = 10 < m = 16");
    op.trans_a = false; /* stored 16 x 8: lda 10 >= 8 is fine */
    expect(&op, GEMM_OK, "no trans_a: lda = 10 >= k = 8");
    good_op(&op);
    op.n = 16;
    op.d.ld = 16;
    op.trans_b = true;
    op.b.ld = 6; /* B^T stored n x k = 16 x 8 */
    expect(&op, GEMM_ERR_LD, "trans_b: ldb = 6 < k = 8");
    op.b.ld = 8;
    expect(&op, GEMM_OK, "trans_b: ldb = k");
}

Test(errors, bounds)
{
    gemm_op op;
    good_op(&op);
    op.d.offset = BUF_BYTES - 8 * 8 * 4 + 4;
    expect(&op, GEMM_ERR_BOUNDS, "D one element past the end");
    op.d.offset = BUF_BYTES - 8 * 8 * 4;
    expect(&op, GEMM_OK, "D ending exactly at the end");
    good_op(&op);
    op.a.offset = BUF_BYTES;
    expect(&op, GEMM_ERR_BOUNDS, "A starting at the end");
    good_op(&op);
    op.b.offset = BUF_BYTES + 4096;
    expect(&op, GEMM_ERR_BOUNDS, "B beyond the end");
    good_op(&op);
    op.a.offset = 1ULL << 63;
    expect(&op, GEMM_ERR_BOUNDS, "A offset 2^63");
    good_op(&op);
    op.b.offset = UINT64_MAX - 3; /* a multiple of 4 */
    expect(&op, GEMM_ERR_BOUNDS, "B offset 2^64 - 4 (wraps when added)");
    good_op(&op);
    op.a.ld = 1ULL << 62;
    expect(&op, GEMM_ERR_BOUNDS, "lda 2^62");
    good_op(&op);
    op.a.ld = (UINT64_MAX / 4) / 7 + 1; /* 7 * lda * 4 wraps to small */
    expect(&op, GEMM_ERR_BOUNDS, "lda whose extent in bytes wraps");
    good_op(&op);
    op.d.ld = UINT64_MAX / 7 + 2; /* 7 * ldd wraps */
    expect(&op, GEMM_ERR_BOUNDS, "ldd whose extent in elements wraps");
    good_op(&op);
    op.c.buf = g_buf;
    op.c.offset = BUF_BYTES - 4;
    op.beta = 0.5f;
    expect(&op, GEMM_ERR_BOUNDS, "C past the end (beta != 0)");
    /* A of 2 x 64 with lda 64 fits in the last 512 bytes; stored
     * transposed (64 x 2 with lda 64) it does not */
    good_op(&op);
    op.m = 2;
    op.n = 1;
    op.k = 64;
    op.a.ld = 64;
    op.a.offset = BUF_BYTES - 2 * 64 * 4;
    op.b.offset = 0;
    op.d.offset = 1024;
    expect(&op, GEMM_OK, "A 2 x 64 (lda 64) in the last 512 bytes");
    op.trans_a = true;
    expect(&op, GEMM_ERR_BOUNDS, "A^T stored 64 x 2 with lda 64 there");
    good_op(&op);
    op.m = 1;
    op.n = 2;
    op.k = 64;
    op.b.ld = 64;
    op.trans_b = true; /* stored n x k = 2 x 64 */
    op.b.offset = BUF_BYTES - 2 * 64 * 4;
    op.a.offset = 0;
    op.d.offset = 1024;
    expect(&op, GEMM_OK, "B^T 2 x 64 (ldb 64) in the last 512 bytes");
    op.trans_b = false; /* stored k x n = 64 x 2 with ldb 64 */
    expect(&op, GEMM_ERR_BOUNDS, "B stored 64 x 2 with ldb 64 there");
}

Test(errors, alignment)
{
    gemm_op op;
    good_op(&op);
    op.a.offset = 2;
    expect(&op, GEMM_ERR_ALIGN, "fp32 A at offset 2");
    good_op(&op);
    op.d.offset = 2049;
    expect(&op, GEMM_ERR_ALIGN, "fp32 D at offset 2049");
    good_op(&op);
    op.ab_type = GEMM_BF16;
    op.b.offset = 1025;
    expect(&op, GEMM_ERR_ALIGN, "bf16 B at offset 1025");
    op.b.offset = 1026;
    expect(&op, GEMM_OK, "bf16 B at offset 1026");
    good_op(&op);
    op.ab_type = GEMM_FP16;
    op.cd_type = GEMM_FP16;
    op.c.buf = g_buf;
    op.c.offset = 4097;
    op.beta = 1.0f;
    expect(&op, GEMM_ERR_ALIGN, "fp16 C at offset 4097");
}

Test(errors, dtype)
{
    gemm_op op;
    good_op(&op);
    op.cd_type = GEMM_BF16;
    expect(&op, GEMM_ERR_DTYPE, "fp32 in, bf16 out");
    good_op(&op);
    op.cd_type = GEMM_FP16;
    expect(&op, GEMM_ERR_DTYPE, "fp32 in, fp16 out");
    good_op(&op);
    op.ab_type = (gemm_dtype)0;
    expect(&op, GEMM_ERR_DTYPE, "A/B dtype 0");
    good_op(&op);
    op.ab_type = (gemm_dtype)7;
    expect(&op, GEMM_ERR_DTYPE, "A/B dtype 7");
    good_op(&op);
    op.cd_type = (gemm_dtype)9;
    expect(&op, GEMM_ERR_DTYPE, "C/D dtype 9");
}

Test(errors, invalid_c_and_overlaps)
{
    gemm_op op;
    good_op(&op);
    op.beta = 1.0f;
    expect(&op, GEMM_ERR_INVALID, "beta != 0 with no C");
    good_op(&op);
    op.d.offset = op.a.offset + 16;
    expect(&op, GEMM_ERR_INVALID, "D overlapping A");
    good_op(&op);
    op.d.offset = op.b.offset;
    expect(&op, GEMM_ERR_INVALID, "D on top of B");
    good_op(&op);
    op.d.offset = op.b.offset - 8 * 8 * 4 + 4; /* last element on B's first */
    expect(&op, GEMM_ERR_INVALID, "D's last element on B's first");
    good_op(&op);
    op.c.buf = g_buf;
    op.c.offset = op.d.offset + 4;
    op.beta = 1.0f;
    expect(&op, GEMM_ERR_INVALID, "C partially overlapping D");
    good_op(&op);
    op.c.buf = g_buf;
    op.c.offset = op.d.offset;
    op.c.ld = 9;
    op.beta = 1.0f;
    expect(&op, GEMM_ERR_INVALID, "C at D's offset with another ld");
    op.c.ld = 0;
    expect(&op, GEMM_OK, "C identical to D");
    good_op(&op);
    op.d.offset = op.b.offset + 8 * 8 * 4; /* adjacent, not overlapping */
    expect(&op, GEMM_OK, "D right after B");
}

/* ---- through the raw protocol ---- */

static tu_raw g_raw;

static void raw_open(void)
{
    int rv = tu_raw_open(&g_raw, g_gemmd.url, 10000);
    cr_assert_eq(rv, 0, "raw dial %s: %s", g_gemmd.url, nng_strerror(rv));
}

/* Checks a raw reply's code and message, then that the raw connection and
 * g_client are served. Frees rep. */
static void expect_raw2(int rv, Gemm__Reply *rep, int code, int code2,
                        const char *what)
{
    cr_assert_eq(rv, 0, "%s: no reply (%s)", what,
                 rv > 0 ? nng_strerror(rv) : "undecodable reply");
    int st = tu_reply_status(rep);
    cr_assert(st == code || st == code2, "%s: got %d %s (\"%s\"), want %s",
              what, st, gemm_strerror(st), rep->message ? rep->message : "",
              gemm_strerror(code));
    if (code != GEMM_OK)
        cr_assert(rep->message != NULL && rep->message[0] != '\0',
                  "%s: %s without a message", what, gemm_strerror(st));
    gemm__reply__free_unpacked(rep, NULL);
    rv = tu_raw_ping(&g_raw, &rep);
    cr_assert_eq(rv, 0, "%s: raw ping afterwards got no reply", what);
    cr_assert_eq(tu_reply_status(rep), GEMM_OK, "%s: raw ping: %s", what,
                 gemm_strerror(tu_reply_status(rep)));
    gemm__reply__free_unpacked(rep, NULL);
    tu_assert_healthy(g_client);
}

static void expect_raw(int rv, Gemm__Reply *rep, int code, const char *what)
{
    expect_raw2(rv, rep, code, code, what);
}

Test(errors, unknown_buffer_ids)
{
    Gemm__GemmRequest g;
    Gemm__Operand ops[4];
    Gemm__Reply *rep;
    tu_shm shm;
    uint64_t id = 0;
    int rv;

    raw_open();
    rv = tu_raw_buffer(&g_raw, &shm, 65536, &id);
    cr_assert_eq(rv, GEMM_OK, "raw RegisterBuffer: %s", gemm_strerror(rv));
    tu_raw_gemm_init(&g, ops, id, 8, 8, 8, 0, 1024, 2048);
    rv = tu_raw_gemm(&g_raw, &g, &rep);
    expect_raw(rv, rep, GEMM_OK, "raw gemm on the raw buffer");

    ops[1].buffer_id = id ^ 0x5a5a5a5a5a5a5a5aULL;
    rv = tu_raw_gemm(&g_raw, &g, &rep);
    expect_raw(rv, rep, GEMM_ERR_NO_BUFFER, "B in an unknown buffer id");
    ops[1].buffer_id = id;
    ops[3].buffer_id = 0;
    rv = tu_raw_gemm(&g_raw, &g, &rep);
    expect_raw(rv, rep, GEMM_ERR_NO_BUFFER, "D in buffer id 0");
    ops[3].buffer_id = id + 1;
    rv = tu_raw_gemm(&g_raw, &g, &rep);
    expect_raw(rv, rep, GEMM_ERR_NO_BUFFER, "D in buffer id + 1");
    ops[3].buffer_id = id;

    /* C in an unknown buffer is an error only when C is read */
    g.c = &ops[2];
    ops[2].buffer_id = id + 7;
    ops[2].offset = 4096;
    g.beta = 1.0f;
    rv = tu_raw_gemm(&g_raw, &g, &rep);
    expect_raw(rv, rep, GEMM_ERR_NO_BUFFER, "C in an unknown buffer id");

    rv = tu_raw_release(&g_raw, id ^ 0xffff0000ULL, &rep);
    expect_raw(rv, rep, GEMM_ERR_NO_BUFFER, "release of an unknown id");
    rv = tu_raw_release(&g_raw, id, &rep);
    expect_raw(rv, rep, GEMM_OK, "release of the raw buffer");
    rv = tu_raw_release(&g_raw, id, &rep);
    expect_raw(rv, rep, GEMM_ERR_NO_BUFFER, "second release of the same id");
    g.beta = 0.0f;
    g.c = NULL;
    rv = tu_raw_gemm(&g_raw, &g, &rep);
    expect_raw(rv, rep, GEMM_ERR_NO_BUFFER, "gemm on a released buffer");

    tu_shm_destroy(&shm);
    tu_raw_close(&g_raw);
}

Test(errors, unknown_dtype_numbers)
{
    Gemm__GemmRequest g;
    Gemm__Operand ops[4];
    Gemm__Reply *rep;
    tu_shm shm;
    uint64_t id = 0;
    int rv;

    raw_open();
    rv = tu_raw_buffer(&g_raw, &shm, 65536, &id);
    cr_assert_eq(rv, GEMM_OK, "raw RegisterBuffer: %s", gemm_strerror(rv));
    tu_raw_gemm_init(&g, ops, id, 8, 8, 8, 0, 1024, 2048);
    g.ab_type = (Gemm__DType)5;
    rv = tu_raw_gemm(&g_raw, &g, &rep);
    expect_raw(rv, rep, GEMM_ERR_DTYPE, "ab_type 5 on the wire");
    g.ab_type = GEMM__DTYPE__FP32;
    g.cd_type = (Gemm__DType)-1;
    rv = tu_raw_gemm(&g_raw, &g, &rep);
    expect_raw(rv, rep, GEMM_ERR_DTYPE, "cd_type -1 on the wire");
    g.cd_type = GEMM__DTYPE__DTYPE_INVALID;
    rv = tu_raw_gemm(&g_raw, &g, &rep);
    expect_raw(rv, rep, GEMM_ERR_DTYPE, "cd_type DTYPE_INVALID");
    g.cd_type = GEMM__DTYPE__FP32;
    g.has_ab_type = 0;
    rv = tu_raw_gemm(&g_raw, &g, &rep);
    expect_raw(rv, rep, GEMM_ERR_DTYPE, "ab_type absent");
    tu_shm_destroy(&shm);
    tu_raw_close(&g_raw);
}

/* Registers fd with size on g_raw; returns the reply's status, or the
 * daemon's refusal of the descriptor itself. */
static int register_fd(int fd, uint64_t size, uint64_t *id)
{
    Gemm__Reply *rep;
    int rv = tu_raw_register_fd(&g_raw, fd, size, &rep);
    if (rv < -1)
        return -rv;
    cr_assert_eq(rv, 0, "RegisterBuffer: no reply");
    int st = tu_reply_status(rep);
    if (st == GEMM_OK && id != NULL)
        *id = rep->register_buffer->buffer_id;
    cr_expect(st == GEMM_OK || (rep->message && rep->message[0]),
              "refusal without a message");
    gemm__reply__free_unpacked(rep, NULL);
    return st;
}

Test(errors, register_buffer)
{
    Gemm__Reply *rep;
    tu_shm small, ok, sparse;
    uint64_t ticket;
    int rv;

    raw_open();
    /* names are no longer served, whatever they are */
    rv = tu_raw_register(&g_raw, "/gemm-1-0123", 0, 0, 1, 4096, &rep);
    expect_raw(rv, rep, GEMM_ERR_INVALID, "registration by name");
    rv = tu_raw_register(&g_raw, NULL, 0, 0, 1, 4096, &rep);
    expect_raw(rv, rep, GEMM_ERR_INVALID, "neither name nor ticket");
    rv = tu_raw_register(&g_raw, NULL, 1, 0x1234567890abcdefULL, 1, 4096, &rep);
    expect_raw(rv, rep, GEMM_ERR_INVALID, "a ticket nobody issued");

    cr_assert_eq(tu_shm_create(&small, 4096), 0, "memfd");
    cr_expect_eq(register_fd(small.fd, 8192, NULL), GEMM_ERR_SHM,
                 "object smaller than declared");
    cr_expect_eq(register_fd(small.fd, 0, NULL), GEMM_ERR_INVALID,
                 "declared size 0");
    cr_assert_eq(tu_fd_ticket(g_raw.url, small.fd, &ticket), 0);
    rv = tu_raw_register(&g_raw, NULL, 1, ticket, 0, 0, &rep);
    expect_raw(rv, rep, GEMM_ERR_INVALID, "no size");
    cr_expect_eq(register_fd(small.fd, 1ULL << 30, NULL), GEMM_ERR_SHM,
                 "declared size 1 GiB, object 4 KiB");
    /* beyond off_t or any limit: refused as invalid, over a limit, or too
     * small an object; but refused */
    rv = register_fd(small.fd, UINT64_MAX, NULL);
    cr_expect(rv == GEMM_ERR_SHM || rv == GEMM_ERR_INVALID ||
                  rv == GEMM_ERR_LIMIT,
              "declared size 2^64 - 1: %s", gemm_strerror(rv));
    tu_shm_destroy(&small);

    cr_assert_eq(tu_shm_create(&ok, 8192), 0, "memfd");
    cr_assert_eq(tu_fd_ticket(g_raw.url, ok.fd, &ticket), 0);
    rv = tu_raw_register(&g_raw, NULL, 1, ticket, 1, 4096, &rep);
    expect_raw(rv, rep, GEMM_OK, "object larger than declared");
    rv = tu_raw_register(&g_raw, NULL, 1, ticket, 1, 4096, &rep);
    expect_raw(rv, rep, GEMM_ERR_INVALID, "a ticket used once already");
    /* the same memfd again: refused (sealed, it could alias D onto A) */
    cr_expect_eq(register_fd(ok.fd, 4096, NULL), GEMM_ERR_SHM,
                 "a registered memfd registered again");
    tu_shm_destroy(&ok);

    /* a sparse object would make the daemon allocate (and pay for) the
     * client's pages: refused */
    cr_assert_eq(tu_shm_create_sparse(&sparse, 1 << 20), 0, "memfd");
    cr_expect_eq(register_fd(sparse.fd, 1 << 20, NULL), GEMM_ERR_SHM,
                 "a sparse memfd");
    tu_shm_destroy(&sparse);

    /* not a memfd: a plain file cannot be sealed */
    char path[] = "/tmp/gemmd-test-file-XXXXXX";
    int fd = mkstemp(path);
    cr_assert_geq(fd, 0);
    unlink(path);
    cr_assert_eq(posix_fallocate(fd, 0, 4096), 0);
    cr_expect_eq(register_fd(fd, 4096, NULL), GEMM_ERR_SHM, "a plain file");
    close(fd);

    /* a memfd sealed against writes cannot be written by the daemon */
    cr_assert_eq(tu_shm_create(&ok, 4096), 0, "memfd");
    munmap(ok.data, ok.size);
    ok.data = NULL;
    cr_assert_eq(fcntl(ok.fd, F_ADD_SEALS, F_SEAL_WRITE), 0);
    cr_expect_eq(register_fd(ok.fd, 4096, NULL), GEMM_ERR_SHM,
                 "a memfd sealed against writing");
    tu_shm_destroy(&ok);
    tu_raw_close(&g_raw);
    tu_assert_healthy(g_client);
}

Test(errors, missing_fields)
{
    Gemm__GemmRequest g;
    Gemm__Operand ops[4];
    Gemm__Reply *rep;
    tu_shm shm;
    uint64_t id = 0;
    int rv;

    raw_open();
    rv = tu_raw_buffer(&g_raw, &shm, 65536, &id);
    cr_assert_eq(rv, GEMM_OK, "raw RegisterBuffer: %s", gemm_strerror(rv));
    tu_raw_gemm_init(&g, ops, id, 8, 8, 8, 0, 1024, 2048);
    g.has_m = 0;
    rv = tu_raw_gemm(&g_raw, &g, &rep);
    expect_raw(rv, rep, GEMM_ERR_DIMS, "Gemm without m");
    tu_raw_gemm_init(&g, ops, id, 8, 8, 8, 0, 1024, 2048);
    g.a = NULL;
    rv = tu_raw_gemm(&g_raw, &g, &rep);
    expect_raw2(rv, rep, GEMM_ERR_INVALID, GEMM_ERR_NO_BUFFER,
                "Gemm without operand A");
    tu_raw_gemm_init(&g, ops, id, 8, 8, 8, 0, 1024, 2048);
    g.d = NULL;
    rv = tu_raw_gemm(&g_raw, &g, &rep);
    expect_raw2(rv, rep, GEMM_ERR_INVALID, GEMM_ERR_NO_BUFFER,
                "Gemm without operand D");
    tu_raw_gemm_init(&g, ops, id, 8, 8, 8, 0, 1024, 2048);
    ops[1].has_buffer_id = 0;
    rv = tu_raw_gemm(&g_raw, &g, &rep);
    expect_raw2(rv, rep, GEMM_ERR_INVALID, GEMM_ERR_NO_BUFFER,
                "operand B without a buffer id");
    tu_shm_destroy(&shm);
    tu_raw_close(&g_raw);
}

/* A FIFO is not a buffer, and handling it must not hang the daemon. */
Test(errors, register_fifo)
{
    char path[96];
    snprintf(path, sizeof(path), "/tmp/gemmd-test-fifo-%d", (int)getpid());
    unlink(path);
    cr_assert_eq(mkfifo(path, 0600), 0, "mkfifo %s", path);
    int fd = open(path, O_RDWR | O_NONBLOCK);
    unlink(path);
    cr_assert_geq(fd, 0);
    raw_open();
    int st = register_fd(fd, 4096, NULL);
    close(fd);
    cr_assert(st == GEMM_ERR_SHM || st == GEMM_ERR_INVALID,
              "RegisterBuffer of a FIFO: %s", gemm_strerror(st));
    tu_raw_close(&g_raw);
    tu_assert_healthy(g_client);
}

/* Once registered, a buffer keeps its size and its pages whatever its
 * owner does: the daemon sealed it. (Before memfds, a client could
 * ftruncate its shm object under the daemon: SIGBUS.) */
Test(errors, registered_buffer_cannot_shrink)
{
    Gemm__GemmRequest g;
    Gemm__Operand ops[4];
    Gemm__Reply *rep;
    tu_shm shm;
    uint64_t id = 0;
    int rv;

    raw_open();
    rv = tu_raw_buffer(&g_raw, &shm, 1 << 20, &id);
    cr_assert_eq(rv, GEMM_OK, "raw RegisterBuffer: %s", gemm_strerror(rv));
    cr_expect_neq(ftruncate(shm.fd, 4096), 0, "ftruncate succeeded");
    cr_expect_neq(ftruncate(shm.fd, 2 << 20), 0, "growing succeeded");
    cr_expect_neq(fallocate(shm.fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
                            0, 1 << 20),
                  0, "punching a hole succeeded");
    cr_expect_neq(madvise(shm.data, 1 << 20, MADV_REMOVE), 0,
                  "MADV_REMOVE succeeded");
    cr_expect_eq(
        mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, shm.fd, 0),
        MAP_FAILED, "a new writable mapping succeeded");
    struct stat st;
    cr_assert_eq(fstat(shm.fd, &st), 0);
    cr_expect_eq(st.st_size, 1 << 20);
    /* the old mapping still works both ways */
    float *p = shm.data;
    for (int i = 0; i < 64 * 64 * 2; i++)
        p[i] = (float)(i % 7) - 3.0f;
    tu_raw_gemm_init(&g, ops, id, 64, 64, 64, 0, 65536, 131072);
    rv = tu_raw_gemm(&g_raw, &g, &rep);
    expect_raw(rv, rep, GEMM_OK, "GEMM on the sealed buffer");
    float *dd = (float *)((char *)shm.data + 131072);
    double want = 0;
    for (int k = 0; k < 64; k++)
        want += (double)p[k] * p[16384 + k * 64];
    cr_expect_float_eq(dd[0], (float)want, 1e-4, "D[0] %g want %g", dd[0],
                       want);
    rv = tu_raw_release(&g_raw, id, &rep);
    expect_raw(rv, rep, GEMM_OK, "release");
    tu_shm_destroy(&shm);
    tu_raw_close(&g_raw);
    tu_assert_healthy(g_client);
}
