/*
 * cuda_test.c: what only the CUDA backend does. Runs when the suite targets
 * it (GEMM_TEST_BACKEND=cuda on a GPU host); elsewhere every test says
 * "skipped: no CUDA device" and the program exits 77 (ctest: skipped).
 * Unaligned shapes and leading dimensions
 * (staged into a 16-byte pitch), large shapes checked on a sample, resident
 * device tensors, pinned-memory accounting, and a device-memory cap that
 * turns an oversized GEMM into GEMM_ERR_DEVICE_MEMORY while the daemon
 * goes on. Issue 6: fp32 on the tensor cores as tf32 and 3xTF32 (correct,
 * and fp32 clearly the more accurate), fp32 tensors on the device, every
 * catalog kernel by name, and a kernel refusing what it does not claim.
 */
#include "util/cases.h"
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

static void setup_spares(void)
{
    if (on_cuda())
        fixture_start((const char *const[]){"--max-device-bytes", "4294967296",
                                            "--spare-bytes", "268435456",
                                            NULL});
}

TestSuite(cuda, .init = setup, .fini = teardown, .timeout = 240);

/* Polls the daemon until no pin is pending (within 60 s). */
static void wait_pins(void)
{
    gemm_status st;
    double until = tu_now() + 60.0;
    do {
        cr_assert_eq(gemm_get_status(g_client, &st), GEMM_OK);
    } while (st.pins_pending != 0 && tu_now() < until && (tu_sleep_ms(5), 1));
    cr_assert_eq(st.pins_pending, 0, "%u pins still pending after 60 s",
                 st.pins_pending);
}

/* run_checked_c waits for its buffer's pin before the GEMM (a GEMM on a
 * buffer still being pinned runs whole, not in panels) */
static bool g_settle_pins = false;

/* Runs op on fresh random data in one buffer (with a random C and beta
 * 0.5 when with_c) and checks D on all elements (small) or on a sample
 * of rows (large). */
static void run_checked_c(gemm_op *op, uint64_t seed, bool with_c)
{
    size_t ar, ac, ald, br, bc, bld, cr, cc, cld, dr, dc, dld;
    tu_shape(op, 'a', &ar, &ac, &ald);
    tu_shape(op, 'b', &br, &bc, &bld);
    tu_shape(op, 'c', &cr, &cc, &cld);
    tu_shape(op, 'd', &dr, &dc, &dld);
    size_t es = gemm_dtype_size(op->ab_type);
    size_t cs = gemm_dtype_size(op->cd_type);
    size_t abytes = (tu_extent(ar, ac, ald) * es + 4095) & ~(size_t)4095;
    size_t bbytes = (tu_extent(br, bc, bld) * es + 4095) & ~(size_t)4095;
    size_t cbytes =
        with_c ? (tu_extent(cr, cc, cld) * cs + 4095) & ~(size_t)4095 : 0;
    size_t dbytes = tu_extent(dr, dc, dld) * cs;
    gemm_buffer *buf;
    int rv =
        gemm_buffer_alloc(g_client, abytes + bbytes + cbytes + dbytes, &buf);
    cr_assert_eq(rv, GEMM_OK, "alloc: %s", gemm_strerror(rv));
    char *base = gemm_buffer_data(buf);
    const char *c = with_c ? base + abytes + bbytes : NULL;
    tu_fill(base, op->ab_type, ar, ac, ald, &seed);
    tu_fill(base + abytes, op->ab_type, br, bc, bld, &seed);
    if (with_c) {
        tu_fill(base + abytes + bbytes, op->cd_type, cr, cc, cld, &seed);
        op->c = (gemm_matrix){buf, abytes + bbytes, op->c.ld, 0};
        op->beta = 0.5f;
    }
    memset(base + abytes + bbytes + cbytes, 0xff, dbytes); /* NaN poison */
    if (g_settle_pins)
        wait_pins();
    op->a.buf = op->b.buf = op->d.buf = buf;
    op->a.offset = 0;
    op->b.offset = abytes;
    op->d.offset = abytes + bbytes + cbytes;
    gemm_timings t;
    rv = gemm_run(g_client, op, &t);
    cr_assert_eq(rv, GEMM_OK, "%llux%llux%llu: %s: %s",
                 (unsigned long long)op->m, (unsigned long long)op->n,
                 (unsigned long long)op->k, gemm_strerror(rv),
                 gemm_last_error_message());
    double tol_rel, tol_abs;
    tu_tolerance(op, &tol_rel, &tol_abs);
    const char *d = base + abytes + bbytes + cbytes;
    uint64_t s2 = seed;
    int checked = 0;
    for (size_t i = 0; i < op->m; i += 1 + op->m / 61) {
        for (int q = 0; q < 8; q++) {
            size_t j = (q == 0) ? op->n - 1 : tu_rand(&s2) % op->n;
            double ref, scale;
            tu_ref_elem(op, base, base + abytes, c, i, j, &ref, &scale);
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

static void run_checked(gemm_op *op, uint64_t seed)
{
    run_checked_c(op, seed, false);
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

/* GEMMs of 2^32 flops and more run in panels whose copies overlap the
 * kernels (daemon/cuda/pipeline.c): panels of rows (A streams) and of
 * columns (B the larger), every transpose, ragged last panels, C staged
 * per panel (beta 0.5) for the narrow types and into D for fp64, a B
 * whose ld is no multiple of 8. Each GEMM waits for its buffer's pin. */
Test(cuda, pipelined_panels)
{
    NEED_CUDA();
    g_settle_pins = true;
    static const struct {
        uint64_t m, n, k;
        gemm_dtype ab, cd;
        bool c;
    } cases[] = {
        {3001, 1500, 1000, GEMM_BF16, GEMM_BF16, false}, /* rows */
        {1500, 3001, 1000, GEMM_BF16, GEMM_FP32, false}, /* columns */
        {2049, 2047, 1025, GEMM_FP16, GEMM_FP32, true},
        {1300, 2700, 700, GEMM_FP32, GEMM_FP32, true},
        {2600, 1100, 900, GEMM_FP64, GEMM_FP64, true},
        {1100, 2600, 900, GEMM_FP64, GEMM_FP64, false},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
        for (int tr = 0; tr < 4; tr++) {
            gemm_op op;
            gemm_op_init(&op, cases[i].m, cases[i].n, cases[i].k, cases[i].ab,
                         cases[i].cd);
            op.trans_a = tr & 1;
            op.trans_b = (tr >> 1) & 1;
            op.b.ld = (op.trans_b ? op.k : op.n) + 5;
            run_checked_c(&op, 300 + i * 4 + tr, cases[i].c);
        }
    g_settle_pins = false;
}

/* A buffer's first GEMM, sent while the buffer's pin runs (the pages
 * made first, then cudaHostRegister: daemon/cuda/device.c), is correct,
 * and so is one after the pin. How long the first one takes is
 * bench_pin's to show (docs/e2e-bench.md): whether the pin is still
 * pending when it is answered depends on how fast the host makes pages. */
Test(cuda, first_gemm_while_pinning)
{
    NEED_CUDA();
    gemm_buffer *buf;
    int rv = gemm_buffer_alloc(g_client, (size_t)4 << 30, &buf);
    cr_assert_eq(rv, GEMM_OK, "alloc 4 GiB: %s (%s)", gemm_strerror(rv),
                 gemm_last_error_message());
    gemm_status st;
    cr_assert_eq(gemm_get_status(g_client, &st), GEMM_OK);
    cr_assert_eq(st.pins_pending, 1,
                 "no pin pending right after registering 4 GiB: the window "
                 "this test needs is gone");
    char why[768];
    tu_case cs = tu_case_plain(256, 256, 256, GEMM_BF16, GEMM_BF16, 77);
    rv = tu_case_run(g_client, buf, &cs, why, sizeof(why));
    cr_assert_eq(rv, GEMM_OK, "first GEMM: %s", why);
    cr_assert_eq(gemm_get_status(g_client, &st), GEMM_OK);
    cr_log_info("pins pending when the first GEMM was answered: %u",
                st.pins_pending);
    wait_pins();
    cs.seed = 78; /* pinned now: the usual path, still correct */
    rv = tu_case_run(g_client, buf, &cs, why, sizeof(why));
    cr_assert_eq(rv, GEMM_OK, "second GEMM: %s", why);
    gemm_buffer_free(buf);
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
    /* 64 MiB is pinned in the background: a pin still running when the
     * buffer goes is undone by the pinner once it returns */
    double until = tu_now() + 10.0;
    do {
        cr_assert_eq(gemm_get_status(g_client, &after), GEMM_OK);
    } while ((after.pinned_bytes != before.pinned_bytes ||
              after.pins_pending != 0) &&
             tu_now() < until && (tu_sleep_ms(5), 1));
    cr_expect_eq(after.pinned_bytes, before.pinned_bytes);
    cr_expect_eq(after.pins_pending, 0);
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

/* A pinned buffer is sealed like any other: its owner cannot shrink it
 * (before memfds, pinned pages of a truncated object went on being read
 * and written by the GPU), and GEMMs on it go on computing. */
Test(cuda, pinned_buffer_cannot_shrink)
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
    cr_expect_neq(ftruncate(shm.fd, 4096), 0, "the owner shrank it");
    Gemm__GemmRequest g;
    Gemm__Operand ops[4];
    tu_raw_gemm_init(&g, ops, id, 64, 64, 64, 0, 65536, 131072);
    Gemm__Reply *rep;
    cr_assert_eq(tu_raw_gemm(&r, &g, &rep), 0);
    cr_expect_eq(tu_reply_status(rep), GEMM_OK, "got %s: %s",
                 gemm_strerror(tu_reply_status(rep)),
                 rep->message ? rep->message : "");
    gemm__reply__free_unpacked(rep, NULL);
    tu_raw_close(&r);
    tu_shm_destroy(&shm);
    tu_assert_healthy(g_client);
}

/* ---- kernels by name and fp32 precisions (issue 6) ---- */

/* fp32 inputs on the tensor cores: tf32 and 3xTF32 (fp32) both correct
 * for every transpose and an odd shape, and fp32 clearly the more
 * accurate on the same data (relative Frobenius error over sampled rows
 * against fp64). */
Test(cuda, fp32_precisions)
{
    NEED_CUDA();
    const uint64_t m = 1000, n = 900, k = 2049;
    for (int tr = 0; tr < 4; tr++) {
        gemm_op op;
        gemm_op_init(&op, m, n, k, GEMM_FP32, GEMM_FP32);
        op.trans_a = tr & 1;
        op.trans_b = (tr >> 1) & 1;
        size_t ar, ac, ald, br, bc, bld;
        tu_shape(&op, 'a', &ar, &ac, &ald);
        tu_shape(&op, 'b', &br, &bc, &bld);
        size_t abytes = ar * ac * 4, bbytes = br * bc * 4, dbytes = m * n * 4;
        gemm_buffer *buf;
        cr_assert_eq(
            gemm_buffer_alloc(g_client, abytes + bbytes + 2 * dbytes, &buf),
            GEMM_OK);
        char *base = gemm_buffer_data(buf);
        uint64_t seed = 600 + tr;
        tu_fill(base, GEMM_FP32, ar, ac, ald, &seed);
        tu_fill(base + abytes, GEMM_FP32, br, bc, bld, &seed);
        op.a = (gemm_matrix){buf, 0, 0, 0};
        op.b = (gemm_matrix){buf, abytes, 0, 0};
        double err[2];
        for (int pi = 0; pi < 2; pi++) {
            op.precision = pi == 0 ? GEMM_PRECISION_TF32 : GEMM_PRECISION_FP32;
            op.d = (gemm_matrix){buf, abytes + bbytes + pi * dbytes, 0, 0};
            memset(base + op.d.offset, 0xff, dbytes);
            gemm_timings t;
            int rv = gemm_run(g_client, &op, &t);
            cr_assert_eq(rv, GEMM_OK, "fp32 %s tr %d: %s",
                         gemm_precision_name(op.precision), tr,
                         gemm_last_error_message());
            cr_expect_gt(t.kernel_ns, 0u);
            double tr_, ta_, num = 0, den = 0;
            tu_tolerance(&op, &tr_, &ta_);
            const float *d = (const float *)(base + op.d.offset);
            for (size_t i = 0; i < m; i += 7) {
                for (size_t j = (i * 13) % 11; j < n; j += 11) {
                    double ref, scale;
                    tu_ref_elem(&op, base, base + abytes, NULL, i, j, &ref,
                                &scale);
                    double got = d[i * n + j];
                    cr_assert(fabs(got - ref) <= tr_ * scale + ta_,
                              "%s tr %d: D[%zu][%zu] = %.9g, want %.9g",
                              gemm_precision_name(op.precision), tr, i, j, got,
                              ref);
                    num += (got - ref) * (got - ref);
                    den += ref * ref;
                }
            }
            err[pi] = sqrt(num / den);
            cr_log_info("fp32 tr %d %s (%s): relative error %.3g, kernel "
                        "%.3f ms",
                        tr, gemm_precision_name(op.precision), t.kernel,
                        err[pi], t.kernel_ns / 1e6);
        }
        cr_expect_lt(err[0], 2e-3, "tf32 error %.3g", err[0]);
        cr_expect_lt(err[1], 1e-5, "fp32 error %.3g", err[1]);
        cr_expect_gt(err[0], 20 * err[1],
                     "fp32 (%.3g) clearly more accurate than tf32 (%.3g)",
                     err[1], err[0]);
        gemm_buffer_free(buf);
    }
}

/* fp32 resident tensors live on the device now. */
Test(cuda, fp32_tensor_on_device)
{
    NEED_CUDA();
    gemm_status before, after;
    gemm_buffer *buf;
    uint64_t seed = 8, tid;
    const size_t rows = 512, cols = 300;
    cr_assert_eq(gemm_get_status(g_client, &before), GEMM_OK);
    cr_assert_eq(gemm_buffer_alloc(g_client, rows * cols * 4, &buf), GEMM_OK);
    tu_fill(gemm_buffer_data(buf), GEMM_FP32, rows, cols, cols, &seed);
    gemm_matrix src = {buf, 0, 0, 0};
    cr_assert_eq(
        gemm_tensor_upload(g_client, &src, rows, cols, GEMM_FP32, &tid),
        GEMM_OK, "%s", gemm_last_error_message());
    cr_assert_eq(gemm_get_status(g_client, &after), GEMM_OK);
    cr_expect_geq(after.device_bytes, before.device_bytes + rows * cols * 4,
                  "device bytes %llu -> %llu",
                  (unsigned long long)before.device_bytes,
                  (unsigned long long)after.device_bytes);
    cr_expect_eq(gemm_tensor_free(g_client, tid), GEMM_OK);
    gemm_buffer_free(buf);
}

/* Every catalog kernel by name on an odd shape over the types, precisions
 * and transposes it claims: correct, named in the reply, timed. */
Test(cuda, every_catalog_kernel_by_name)
{
    NEED_CUDA();
    static const gemm_dtype types[] = {GEMM_BF16, GEMM_FP16, GEMM_FP32};
    gemm_kernel_info *ks;
    size_t nk;
    cr_assert_eq(gemm_list_kernels(g_client, &ks, &nk), GEMM_OK);
    cr_assert_geq(nk, 2u, "a catalog: the ladder, production, cublas");
    int runs = 0;
    for (size_t i = 0; i < nk; i++) {
        for (int ti = 0; ti < 3; ti++) {
            gemm_dtype ab = types[ti];
            if (!(ks[i].ab_types & (1u << ab)))
                continue;
            for (int pi = 0; pi < (ab == GEMM_FP32 ? 2 : 1); pi++) {
                gemm_precision prec = ab != GEMM_FP32 ? GEMM_PRECISION_DEFAULT
                                      : pi == 0       ? GEMM_PRECISION_TF32
                                                      : GEMM_PRECISION_FP32;
                if (ab == GEMM_FP32 && !(ks[i].precisions & (1u << prec)))
                    continue;
                for (int tr = 0; tr < 4; tr++) {
                    if (!(ks[i].transposes & (1u << tr)))
                        continue;
                    gemm_dtype cd = (ab == GEMM_FP32 ||
                                     (ks[i].cd_types & (1u << GEMM_FP32)))
                                        ? GEMM_FP32
                                        : ab;
                    gemm_op op;
                    gemm_op_init(&op, 257, 129, 97 + 8 * tr, ab, cd);
                    op.trans_a = tr & 1;
                    op.trans_b = (tr >> 1) & 1;
                    op.precision = prec;
                    op.kernel = ks[i].name;
                    run_checked(&op, 700 + i * 32 + ti * 8 + tr);
                    runs++;
                }
            }
        }
    }
    cr_log_info("%d runs over %zu kernels", runs, nk);
    gemm_kernel_info_free(ks);
}

/* A 4096^3 bf16 GEMM's buffer (128 MiB) borrowed from the spares (made
 * and pinned ahead: 128, 64 and 32 MiB of --spare-bytes 256 MiB) runs
 * correct on its first GEMM with no pin of its own. */
Test(cuda, first_gemm_on_a_lent_spare, .init = setup_spares)
{
    NEED_CUDA();
    gemm_status st;
    double until = tu_now() + 30.0;
    do {
        cr_assert_eq(gemm_get_status(g_client, &st), GEMM_OK);
    } while (st.spares_ready < 3 && tu_now() < until && (tu_sleep_ms(5), 1));
    cr_assert_geq(st.spares_ready, 3,
                  "%u spares ready after 30 s (failed %llu)", st.spares_ready,
                  (unsigned long long)st.spares_failed);
    uint64_t pins = st.pins_done;
    gemm_op op;
    gemm_op_init(&op, 4096, 4096, 4096, GEMM_BF16, GEMM_FP32);
    run_checked_c(&op, 77, false);
    cr_assert_eq(gemm_get_status(g_client, &st), GEMM_OK);
    cr_assert_eq(st.spares_lent, 1, "the buffer was not lent (none %llu)",
                 (unsigned long long)st.spares_none);
    cr_assert_eq(st.pins_done, pins, "the lent buffer was pinned again");
}

/* A kernel asked for a type, precision or transpose it does not claim is
 * refused before any work with GEMM_ERR_UNSUPPORTED and a reason, and the
 * daemon goes on. */
Test(cuda, kernel_refuses_unclaimed)
{
    NEED_CUDA();
    static const gemm_dtype types[] = {GEMM_BF16, GEMM_FP16, GEMM_FP32};
    gemm_kernel_info *ks;
    size_t nk;
    gemm_buffer *buf;
    cr_assert_eq(gemm_list_kernels(g_client, &ks, &nk), GEMM_OK);
    cr_assert_eq(gemm_buffer_alloc(g_client, 1 << 20, &buf), GEMM_OK);
    int refusals = 0;
    for (size_t i = 0; i < nk; i++) {
        for (int ti = 0; ti < 3; ti++) {
            gemm_op op;
            gemm_dtype ab = types[ti];
            gemm_op_init(&op, 64, 64, 64, ab, GEMM_FP32);
            op.a = op.b = op.d = (gemm_matrix){buf, 0, 0, 0};
            op.b.offset = 65536;
            op.d.offset = 131072;
            op.kernel = ks[i].name;
            bool unclaimed = !(ks[i].ab_types & (1u << ab));
            if (!unclaimed && ab == GEMM_FP32 &&
                !(ks[i].precisions & (1u << GEMM_PRECISION_TF32))) {
                op.precision = GEMM_PRECISION_TF32;
                unclaimed = true;
            }
            if (!unclaimed)
                continue;
            memset((char *)gemm_buffer_data(buf) + op.d.offset, 0x5a,
                   64 * 64 * 4);
            int rv = gemm_run(g_client, &op, NULL);
            cr_expect_eq(rv, GEMM_ERR_UNSUPPORTED, "%s with %s (%s): got %s",
                         ks[i].name, gemm_dtype_name(ab),
                         gemm_precision_name(op.precision), gemm_strerror(rv));
            cr_expect(strstr(gemm_last_error_message(), ks[i].name) != NULL,
                      "the reason names the kernel: %s",
                      gemm_last_error_message());
            const unsigned char *d =
                (const unsigned char *)gemm_buffer_data(buf) + op.d.offset;
            cr_expect(d[0] == 0x5a && d[64 * 64 * 4 - 1] == 0x5a,
                      "a refused GEMM wrote D");
            cr_log_info("%s", gemm_last_error_message());
            refusals++;
        }
    }
    cr_expect_gt(refusals, 0, "some catalog kernel leaves a type out");
    gemm_kernel_info_free(ks);
    gemm_buffer_free(buf);
    tu_assert_healthy(g_client);
}
