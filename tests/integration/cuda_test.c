/*
 * cuda_test.c: what only the CUDA backend does. Runs when the suite targets
 * it (GEMM_TEST_BACKEND=cuda on a GPU host); elsewhere every test says
 * "skipped: no CUDA device". Unaligned shapes and leading dimensions
 * (staged into a 16-byte pitch), large shapes checked on a sample, resident
 * device tensors, pinned-memory accounting, and a device-memory cap that
 * turns an oversized GEMM into GEMM_ERR_DEVICE_MEMORY while the daemon
 * goes on.
 */
#include "util/daemon.h"
#include "util/data.h"
#include "util/raw.h"

#include <criterion/criterion.h>

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <fcntl.h>
#include <unistd.h>

static bool on_cuda(void)
{
    const char *b = getenv("GEMM_TEST_BACKEND");
    return b != NULL && strcmp(b, "cuda") == 0;
}

#define NEED_CUDA()                                                            \
    do {                                                                       \
        if (!on_cuda())                                                        \
            cr_skip_test("skipped: no CUDA device (set GEMM_TEST_BACKEND="     \
                         "cuda on a GPU host)");                               \
    } while (0)

static void setup(void)
{
    if (on_cuda())
        fixture_start(
            (const char *const[]){"--max-device-bytes", "4294967296", NULL});
}

static void teardown(void)
{
    if (on_cuda())
        fixture_stop();
}

TestSuite(cuda, .init = setup, .fini = teardown, .timeout = 240);

/* Runs op on fresh random data in one buffer and checks D on all
 * elements (small) or on a sample of rows (large). */
static void run_checked(gemm_op *op, uint64_t seed)
{
    size_t ar, ac, ald, br, bc, bld, dr, dc, dld;
    tu_shape(op, 'a', &ar, &ac, &ald);
    tu_shape(op, 'b', &br, &bc, &bld);
    tu_shape(op, 'd', &dr, &dc, &dld);
    size_t es = gemm_dtype_size(op->ab_type);
    size_t cs = gemm_dtype_size(op->cd_type);
    size_t abytes = (tu_extent(ar, ac, ald) * es + 4095) & ~(size_t)4095;
    size_t bbytes = (tu_extent(br, bc, bld) * es + 4095) & ~(size_t)4095;
    size_t dbytes = tu_extent(dr, dc, dld) * cs;
    gemm_buffer *buf;
    int rv = gemm_buffer_alloc(g_client, abytes + bbytes + dbytes, &buf);
    cr_assert_eq(rv, GEMM_OK, "alloc: %s", gemm_strerror(rv));
    char *base = gemm_buffer_data(buf);
    tu_fill(base, op->ab_type, ar, ac, ald, &seed);
    tu_fill(base + abytes, op->ab_type, br, bc, bld, &seed);
    memset(base + abytes + bbytes, 0xff, dbytes); /* NaN poison */
    op->a.buf = op->b.buf = op->d.buf = buf;
    op->a.offset = 0;
    op->b.offset = abytes;
    op->d.offset = abytes + bbytes;
    gemm_timings t;
    rv = gemm_run(g_client, op, &t);
    cr_assert_eq(rv, GEMM_OK, "%llux%llux%llu: %s: %s",
                 (unsigned long long)op->m, (unsigned long long)op->n,
                 (unsigned long long)op->k, gemm_strerror(rv),
                 gemm_last_error_message());
    double tol_rel, tol_abs;
    tu_tolerance(op, &tol_rel, &tol_abs);
    const char *d = base + abytes + bbytes;
    uint64_t s2 = seed;
    int checked = 0;
    for (size_t i = 0; i < op->m; i += 1 + op->m / 61) {
        for (int q = 0; q < 8; q++) {
            size_t j = (q == 0) ? op->n - 1 : tu_rand(&s2) % op->n;
            double ref, scale;
            tu_ref_elem(op, base, base + abytes, NULL, i, j, &ref, &scale);
            double got = tu_load(d, op->cd_type, i * dld + j);
            cr_assert(got == got, "D[%zu][%zu] unwritten (NaN)", i, j);
            cr_assert(fabs(got - ref) <= tol_rel * scale + tol_abs,
                      "D[%zu][%zu] = %g, want %g", i, j, got, ref);
            checked++;
        }
    }
    cr_log_info("%llux%llux%llu %s: %d elements checked, compute %llu us",
                (unsigned long long)op->m, (unsigned long long)op->n,
                (unsigned long long)op->k, gemm_dtype_name(op->ab_type),
                checked, (unsigned long long)t.compute_us);
    gemm_buffer_free(buf);
}

Test(cuda, unaligned_shapes_and_lds)
{
    NEED_CUDA();
    static const uint64_t dims[][3] = {{1, 1, 1},       {7, 13, 5},
                                       {127, 129, 65},  {1000, 1, 4095},
                                       {1, 1000, 1000}, {513, 257, 1023}};
    for (size_t i = 0; i < sizeof(dims) / sizeof(dims[0]); i++) {
        for (int tr = 0; tr < 4; tr++) {
            gemm_op op;
            gemm_op_init(&op, dims[i][0], dims[i][1], dims[i][2], GEMM_BF16,
                         tr == 3 ? GEMM_FP32 : GEMM_BF16);
            op.trans_a = tr & 1;
            op.trans_b = (tr >> 1) & 1;
            op.a.ld = (op.trans_a ? op.m : op.k) + 3; /* never 16-byte */
            run_checked(&op, 100 + i * 4 + tr);
        }
    }
}

Test(cuda, large_unaligned)
{
    NEED_CUDA();
    gemm_op op;
    gemm_op_init(&op, 8191, 8191, 8191, GEMM_BF16, GEMM_BF16);
    run_checked(&op, 42);
    gemm_op_init(&op, 4096, 4096, 4096, GEMM_FP16, GEMM_FP32);
    op.trans_b = true;
    run_checked(&op, 43);
}

Test(cuda, pinned_accounting)
{
    NEED_CUDA();
    gemm_status before, after;
    cr_assert_eq(gemm_get_status(g_client, &before), GEMM_OK);
    gemm_buffer *buf;
    cr_assert_eq(gemm_buffer_alloc(g_client, 64 << 20, &buf), GEMM_OK);
    cr_assert_eq(gemm_get_status(g_client, &after), GEMM_OK);
    cr_expect_geq(after.pinned_bytes, before.pinned_bytes + (64 << 20),
                  "pinned %llu -> %llu",
                  (unsigned long long)before.pinned_bytes,
                  (unsigned long long)after.pinned_bytes);
    gemm_buffer_free(buf);
    cr_assert_eq(gemm_get_status(g_client, &after), GEMM_OK);
    cr_expect_eq(after.pinned_bytes, before.pinned_bytes);
}

Test(cuda, device_memory_cap)
{
    NEED_CUDA();
    /* 3 x 16384^2 bf16 = 1.5 GiB staged: fine under the 4 GiB cap; a
     * tensor of 3 GiB plus that is not */
    gemm_buffer *buf;
    size_t big = (size_t)3 << 30;
    cr_assert_eq(gemm_buffer_alloc(g_client, big, &buf), GEMM_OK, "%s",
                 gemm_last_error_message());
    uint64_t tid;
    gemm_matrix src = {buf, 0, 0, 0};
    int rv = gemm_tensor_upload(g_client, &src, 49152, 32768, GEMM_BF16, &tid);
    cr_assert_eq(rv, GEMM_OK, "3 GiB tensor: %s", gemm_last_error_message());
    gemm_status st;
    cr_assert_eq(gemm_get_status(g_client, &st), GEMM_OK);
    cr_expect_geq(st.device_bytes, big);
    gemm_op op;
    gemm_op_init(&op, 16384, 16384, 16384, GEMM_BF16, GEMM_BF16);
    op.a = op.b = op.d = (gemm_matrix){buf, 0, 0, 0};
    op.b.offset = (size_t)16384 * 16384 * 2;
    op.d.offset = 2 * op.b.offset;
    rv = gemm_run(g_client, &op, NULL);
    cr_expect_eq(rv, GEMM_ERR_DEVICE_MEMORY, "over the cap: got %s: %s",
                 gemm_strerror(rv), gemm_last_error_message());
    cr_expect_eq(gemm_tensor_free(g_client, tid), GEMM_OK);
    rv = gemm_run(g_client, &op, NULL);
    cr_expect_eq(rv, GEMM_OK, "under the cap again: %s",
                 gemm_last_error_message());
    gemm_buffer_free(buf);
    tu_assert_healthy(g_client);
}

Test(cuda, resident_weights)
{
    NEED_CUDA();
    gemm_op op;
    gemm_op_init(&op, 256, 4096, 2048, GEMM_BF16, GEMM_BF16);
    op.trans_b = true; /* B stored n x k: weights as in a linear layer */
    size_t wbytes = (size_t)4096 * 2048 * 2;
    gemm_buffer *w;
    uint64_t seed = 5, tid;
    cr_assert_eq(gemm_buffer_alloc(g_client, wbytes, &w), GEMM_OK);
    tu_fill(gemm_buffer_data(w), GEMM_BF16, 4096, 2048, 2048, &seed);
    gemm_matrix src = {w, 0, 0, 0};
    cr_assert_eq(
        gemm_tensor_upload(g_client, &src, 4096, 2048, GEMM_BF16, &tid),
        GEMM_OK, "%s", gemm_last_error_message());
    gemm_buffer *x;
    size_t xbytes = (size_t)256 * 2048 * 2, dbytes = (size_t)256 * 4096 * 2;
    cr_assert_eq(gemm_buffer_alloc(g_client, xbytes + dbytes, &x), GEMM_OK);
    char *xb = gemm_buffer_data(x);
    tu_fill(xb, GEMM_BF16, 256, 2048, 2048, &seed);
    op.a = (gemm_matrix){x, 0, 0, 0};
    op.b = (gemm_matrix){.tensor = tid};
    op.d = (gemm_matrix){x, xbytes, 0, 0};
    for (int rep = 0; rep < 3; rep++) {
        memset(xb + xbytes, 0xff, dbytes);
        cr_assert_eq(gemm_run(g_client, &op, NULL), GEMM_OK, "%s",
                     gemm_last_error_message());
        for (size_t i = 0; i < 256; i += 37)
            for (size_t j = 0; j < 4096; j += 511) {
                gemm_op ref = op;
                ref.b = (gemm_matrix){w, 0, 0, 0};
                double r, sc, tr, ta;
                tu_ref_elem(&ref, xb, gemm_buffer_data(w), NULL, i, j, &r, &sc);
                tu_tolerance(&ref, &tr, &ta);
                double got = tu_load(xb + xbytes, GEMM_BF16, i * 4096 + j);
                cr_assert(fabs(got - r) <= tr * sc + ta,
                          "D[%zu][%zu] = %g want %g", i, j, got, r);
            }
    }
    cr_expect_eq(gemm_tensor_free(g_client, tid), GEMM_OK);
    gemm_buffer_free(x);
    gemm_buffer_free(w);
}

/* Pinned pages never raise SIGBUS: a buffer its owner shrinks must still
 * fail its GEMMs with GEMM_ERR_BUFFER_FAULT (the daemon compares the
 * object's size with its mapping), and the daemon goes on. */
Test(cuda, shrunk_pinned_buffer)
{
    NEED_CUDA();
    tu_raw r;
    tu_shm shm;
    uint64_t id;
    cr_assert_eq(tu_raw_open(&r, g_gemmd.url, 10000), 0);
    cr_assert_eq(tu_raw_buffer(&r, &shm, 1 << 20, &id), GEMM_OK);
    gemm_status st;
    cr_assert_eq(gemm_get_status(g_client, &st), GEMM_OK);
    cr_expect_geq(st.pinned_bytes, 1 << 20, "the buffer is pinned");
    int fd = shm_open(shm.name, O_RDWR, 0);
    cr_assert(fd >= 0);
    cr_assert_eq(ftruncate(fd, 4096), 0);
    close(fd);
    Gemm__GemmRequest g;
    Gemm__Operand ops[4];
    tu_raw_gemm_init(&g, ops, id, 64, 64, 64, 0, 65536, 131072);
    Gemm__Reply *rep;
    cr_assert_eq(tu_raw_gemm(&r, &g, &rep), 0);
    cr_expect_eq(tu_reply_status(rep), GEMM_ERR_BUFFER_FAULT, "got %s: %s",
                 gemm_strerror(tu_reply_status(rep)),
                 rep->message ? rep->message : "");
    gemm__reply__free_unpacked(rep, NULL);
    tu_raw_close(&r);
    tu_shm_destroy(&shm);
    tu_assert_healthy(g_client);
}
