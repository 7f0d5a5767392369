/*
 * moduli_test.c: the fp64 Ozaki-II modulus count (gemm_op.moduli) through
 * a real gemmd. On every backend: a count of 2..20 on fp64 computes the
 * right D, and the reply's moduli is 0 (ran natively) or the count asked
 * for; the cpu backend always computes natively and replies 0, with a
 * named kernel too. Refused with GEMM_ERR_INVALID, D untouched and the
 * daemon going on: 1 and 21 (and 2^32 - 1), a count on complex128, int8
 * and bf16 inputs or on fp32 at tf32 precision, and a count in a batch's
 * op. fp32 with a count computes D to fp32's accuracy (the emulation on
 * cuda, "oz2-f32", and auto takes it at 8192^3 once calibrated). On the cuda
 * backend (GEMM_TEST_BACKEND=cuda; elsewhere the test says why it skips): 14
 * moduli on a 512^3 fp64 GEMM run an oz2 kernel, the reply says 14, and a
 * named kernel that does not emulate refuses the count (UNSUPPORTED).
 */
#include "util/daemon.h"
#include "util/data.h"

#include <criterion/criterion.h>

#include <math.h>
#include <stdio.h>
#include <string.h>

TestSuite(moduli, .init = fixture_setup, .fini = fixture_teardown,
          .timeout = 120);

static bool on_cuda(void)
{
    return strcmp(tu_backend(), "cuda") == 0;
}

/* An m x n x k GEMM of type t (C/D of its own type; int32 for int8, fp32
 * for bf16) with A, B and D laid out tightly in one new buffer: A and B
 * random, D poisoned with 0xff bytes. The caller frees op->a.buf. */
static void setup_op(gemm_op *op, uint64_t m, uint64_t n, uint64_t k,
                     gemm_dtype t, uint64_t seed)
{
    gemm_dtype cd = t == GEMM_INT8   ? GEMM_INT32
                    : t == GEMM_BF16 ? GEMM_FP32
                                     : t;
    size_t es = gemm_dtype_size(t), cs = gemm_dtype_size(cd);
    size_t abytes = (m * k * es + 63) & ~(size_t)63;
    size_t bbytes = (k * n * es + 63) & ~(size_t)63;
    gemm_buffer *buf;
    int rv = gemm_buffer_alloc(g_client, abytes + bbytes + m * n * cs, &buf);
    cr_assert_eq(rv, GEMM_OK, "alloc: %s", gemm_strerror(rv));
    char *base = gemm_buffer_data(buf);
    gemm_op_init(op, m, n, k, t, cd);
    if (t == GEMM_INT8) { /* small integers */
        for (size_t i = 0; i < abytes + bbytes; i++)
            base[i] = (char)(tu_rand(&seed) % 7) - 3;
    } else if (t == GEMM_FP64 || t == GEMM_COMPLEX128) {
        /* full-precision doubles (tu_fill stores floats), never 0 */
        size_t per = t == GEMM_FP64 ? 1 : 2;
        double *pa = (double *)base, *pb = (double *)(base + abytes);
        for (size_t i = 0; i < m * k * per; i++)
            pa[i] = tu_rand_uniform(&seed) + 0x1p-30;
        for (size_t i = 0; i < k * n * per; i++)
            pb[i] = tu_rand_uniform(&seed) + 0x1p-30;
    } else {
        tu_fill(base, t, m, k, k, &seed);
        tu_fill(base + abytes, t, k, n, n, &seed);
    }
    memset(base + abytes + bbytes, 0xff, m * n * cs);
    if (t == GEMM_FP64 || t == GEMM_COMPLEX128)
        gemm_op_set_scalars(op, 1.0, 0.0, 0.0, 0.0);
    op->a = (gemm_matrix){buf, 0, 0, 0};
    op->b = (gemm_matrix){buf, abytes, 0, 0};
    op->d = (gemm_matrix){buf, abytes + bbytes, 0, 0};
}

/* Whether every byte of op's D is still the 0xff poison. */
static bool d_untouched(const gemm_op *op)
{
    const unsigned char *d =
        (const unsigned char *)gemm_buffer_data(op->d.buf) + op->d.offset;
    size_t bytes = op->m * op->n * gemm_dtype_size(op->cd_type);
    for (size_t i = 0; i < bytes; i++)
        if (d[i] != 0xff)
            return false;
    return true;
}

/* Checks every element of op's fp64 D against the reference: within
 * rel * (sum of |products|), rel 1e-11 (fp64 with 14 moduli or more
 * keeps ~54 bits a side; DGEMM is far inside). */
static void expect_d_right(const gemm_op *op, double rel)
{
    const char *base = gemm_buffer_data(op->a.buf);
    const double *d = (const double *)(base + op->d.offset); /* tight: ld = n */
    double worst = 0.0;
    for (size_t i = 0; i < op->m; i++)
        for (size_t j = 0; j < op->n; j++) {
            double ref, scale;
            tu_ref_elem(op, base, base + op->b.offset, NULL, i, j, &ref,
                        &scale);
            double got = d[i * op->n + j];
            cr_assert(got == got, "D[%zu][%zu] unwritten (NaN)", i, j);
            double e = fabs(got - ref) / scale;
            if (e > worst)
                worst = e;
            cr_assert(e <= rel,
                      "D[%zu][%zu] = %.17g, want %.17g (error %.3g "
                      "of the scale, tolerance %.3g)",
                      i, j, got, ref, e, rel);
        }
    cr_log_info("%llux%llux%llu fp64: worst error %.3g of the scale",
                (unsigned long long)op->m, (unsigned long long)op->n,
                (unsigned long long)op->k, worst);
}

/* Runs op expecting a refusal with code want and a message that contains
 * needle; D must be untouched. */
static void expect_refused(const gemm_op *op, int want, const char *needle)
{
    gemm_timings t;
    int rv = gemm_run(g_client, op, &t);
    const char *msg = gemm_last_error_message();
    cr_expect_eq(rv, want, "%s with moduli %u: got %s (%s), want %s",
                 gemm_dtype_name(op->ab_type), op->moduli, gemm_strerror(rv),
                 msg, gemm_strerror(want));
    cr_expect(msg != NULL && strstr(msg, needle) != NULL,
              "message '%s' should contain '%s'", msg ? msg : "(null)", needle);
    cr_expect(d_untouched(op), "a refused request wrote D");
}

Test(moduli, fp64_with_moduli_computes_d)
{
    static const uint64_t dims[][3] = {
        {64, 48, 40}, {33, 17, 129}, {1, 1, 1}, {200, 150, 300}};
    static const uint32_t counts[] = {14, GEMM_OZ_MODULI_MIN, 20};
    for (size_t i = 0; i < sizeof(dims) / sizeof(dims[0]); i++) {
        for (size_t c = 0; c < sizeof(counts) / sizeof(counts[0]); c++) {
            gemm_op op;
            setup_op(&op, dims[i][0], dims[i][1], dims[i][2], GEMM_FP64,
                     7 + i * 3 + c);
            op.moduli = counts[c];
            gemm_timings t;
            memset(&t, 0x5a, sizeof(t)); /* every field must be written */
            int rv = gemm_run(g_client, &op, &t);
            cr_assert_eq(rv, GEMM_OK, "moduli %u: %s (%s)", counts[c],
                         gemm_strerror(rv), gemm_last_error_message());
            if (strcmp(tu_backend(), "cpu") == 0)
                cr_expect_eq(t.moduli, 0,
                             "the cpu backend computes fp64 natively: reply "
                             "moduli %u, want 0",
                             t.moduli);
            else
                cr_expect(t.moduli == 0 || t.moduli == counts[c],
                          "reply moduli %u: want %u (emulated) or 0 "
                          "(native)",
                          t.moduli, counts[c]);
            /* 2 moduli keep few bits: only the counts near DGEMM's */
            if (t.moduli == 0 || t.moduli >= 14)
                expect_d_right(&op, 1e-11);
            gemm_buffer_free(op.a.buf);
        }
    }
}

Test(moduli, auto_replies_the_count_used)
{
    gemm_op op;
    setup_op(&op, 96, 80, 64, GEMM_FP64, 99);
    gemm_timings t;
    memset(&t, 0x5a, sizeof(t));
    cr_assert_eq(gemm_run(g_client, &op, &t), GEMM_OK, "%s",
                 gemm_last_error_message());
    if (strcmp(tu_backend(), "cpu") == 0)
        cr_expect_eq(t.moduli, 0, "cpu: reply moduli %u, want 0", t.moduli);
    else
        cr_expect(t.moduli == 0 || (t.moduli >= GEMM_OZ_MODULI_MIN &&
                                    t.moduli <= GEMM_OZ_MODULI_MAX),
                  "auto: reply moduli %u", t.moduli);
    expect_d_right(&op, 1e-11);
    /* other types never report moduli */
    gemm_buffer_free(op.a.buf);
    setup_op(&op, 32, 16, 8, GEMM_FP32, 5);
    memset(&t, 0x5a, sizeof(t));
    cr_assert_eq(gemm_run(g_client, &op, &t), GEMM_OK, "%s",
                 gemm_last_error_message());
    cr_expect_eq(t.moduli, 0, "fp32: reply moduli %u, want 0", t.moduli);
    gemm_buffer_free(op.a.buf);
}

Test(moduli, cpu_named_kernel_runs_natively)
{
    if (strcmp(tu_backend(), "cpu") != 0)
        cr_skip_test("skipped: the cpu backend's kernel names (backend %s)",
                     tu_backend());
    gemm_op op;
    setup_op(&op, 40, 30, 20, GEMM_FP64, 11);
    op.moduli = 14;
    op.kernel = "openblas";
    gemm_timings t;
    cr_assert_eq(gemm_run(g_client, &op, &t), GEMM_OK, "%s",
                 gemm_last_error_message());
    cr_expect_str_eq(t.kernel, "openblas");
    cr_expect_eq(t.moduli, 0);
    expect_d_right(&op, 1e-11);
    gemm_buffer_free(op.a.buf);
}

Test(moduli, out_of_range_is_invalid)
{
    static const uint32_t bad[] = {1, GEMM_OZ_MODULI_MAX + 1, 0xffffffffu};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        gemm_op op;
        setup_op(&op, 16, 16, 16, GEMM_FP64, 21 + i);
        op.moduli = bad[i];
        expect_refused(&op, GEMM_ERR_INVALID, "2..20");
        gemm_buffer_free(op.a.buf);
    }
    tu_assert_healthy(g_client);
}

Test(moduli, other_types_are_invalid)
{
    static const gemm_dtype types[] = {GEMM_COMPLEX128, GEMM_INT8, GEMM_BF16};
    for (size_t i = 0; i < sizeof(types) / sizeof(types[0]); i++) {
        gemm_op op;
        setup_op(&op, 16, 8, 32, types[i], 31 + i);
        op.moduli = 14;
        expect_refused(&op, GEMM_ERR_INVALID, "for fp64 and fp32 inputs");
        gemm_buffer_free(op.a.buf);
    }
    /* fp32 at tf32 precision: the emulation would not serve it */
    gemm_op op;
    setup_op(&op, 16, 8, 32, GEMM_FP32, 41);
    op.moduli = 7;
    op.precision = GEMM_PRECISION_TF32;
    expect_refused(&op, GEMM_ERR_INVALID, "make C and D fp32");
    gemm_buffer_free(op.a.buf);
    tu_assert_healthy(g_client);
}

/* fp32 with a count: D right to fp32's accuracy on every backend; the
 * reply's moduli is the count on cuda (the emulation, oz2-f32) and 0 on
 * the cpu backend (native SGEMM). */
Test(moduli, fp32_with_moduli_computes_d)
{
    gemm_op op;
    setup_op(&op, 96, 80, 264, GEMM_FP32, 43);
    op.moduli = 7;
    gemm_timings t;
    cr_assert_eq(gemm_run(g_client, &op, &t), GEMM_OK, "%s",
                 gemm_last_error_message());
    if (on_cuda()) {
        cr_expect_eq(t.moduli, 7, "reply moduli %u (kernel %s)", t.moduli,
                     t.kernel);
        cr_expect_str_eq(t.kernel, "oz2-f32");
    } else {
        cr_expect_eq(t.moduli, 0, "the cpu backend replied moduli %u",
                     t.moduli);
    }
    const char *base = gemm_buffer_data(op.a.buf);
    const float *d = (const float *)(base + op.d.offset);
    for (size_t i = 0; i < op.m; i++)
        for (size_t j = 0; j < op.n; j++) {
            double ref, scale;
            tu_ref_elem(&op, base, base + op.b.offset, NULL, i, j, &ref,
                        &scale);
            cr_assert(fabs(d[i * op.n + j] - ref) <= 1e-6 * scale,
                      "D[%zu][%zu] = %.9g, want %.9g", i, j, d[i * op.n + j],
                      ref);
        }
    gemm_buffer_free(op.a.buf);
}

Test(moduli, batch_op_is_invalid)
{
    gemm_op op;
    setup_op(&op, 8, 8, 8, GEMM_FP64, 51);
    op.moduli = 14;
    gemm_batch b;
    gemm_batch_init(&b, &op);
    b.count = 1;
    gemm_timings t;
    int rv = gemm_batch_run(g_client, &b, &t);
    const char *msg = gemm_last_error_message();
    cr_expect_eq(rv, GEMM_ERR_INVALID, "got %s (%s)", gemm_strerror(rv), msg);
    cr_expect(msg != NULL && strstr(msg, "single fp64 requests") != NULL,
              "message: %s", msg ? msg : "(null)");
    cr_expect(d_untouched(&op), "a refused batch wrote D");
    /* the same batch without moduli runs */
    b.op.moduli = 0;
    cr_expect_eq(gemm_batch_run(g_client, &b, &t), GEMM_OK, "%s",
                 gemm_last_error_message());
    cr_expect_not(d_untouched(&op), "the batch did not write D");
    gemm_buffer_free(op.a.buf);
}

/* What only the cuda backend does with moduli: the emulation runs. */
Test(moduli, cuda_runs_oz2_with_the_count_asked)
{
    if (!on_cuda())
        cr_skip_test("skipped: the Ozaki-II emulation runs on the cuda "
                     "backend only (this suite runs on %s; set "
                     "GEMM_TEST_BACKEND=cuda on a GPU host)",
                     tu_backend());
    gemm_op op;
    setup_op(&op, 512, 512, 512, GEMM_FP64, 61);
    op.moduli = 14;
    gemm_timings t;
    cr_assert_eq(gemm_run(g_client, &op, &t), GEMM_OK, "%s",
                 gemm_last_error_message());
    cr_expect_eq(t.moduli, 14, "reply moduli %u, want 14 (kernel %s)", t.moduli,
                 t.kernel);
    cr_expect(strncmp(t.kernel, "oz2", 3) == 0,
              "kernel '%s' ran: want an Ozaki-II one (oz2...)", t.kernel);
    expect_d_right(&op, 1e-11);

    /* the reference kernel (cuBLAS) does not emulate: refused, named */
    gemm_kernel_info *ks;
    size_t n;
    cr_assert_eq(gemm_list_kernels(g_client, &ks, &n), GEMM_OK);
    const char *ref = NULL;
    for (size_t i = 0; i < n && ref == NULL; i++)
        if (ks[i].reference)
            ref = ks[i].name;
    cr_assert_not_null(ref, "the cuda backend lists a reference kernel");
    memset((char *)gemm_buffer_data(op.d.buf) + op.d.offset, 0xff,
           op.m * op.n * sizeof(double));
    op.kernel = ref;
    expect_refused(&op, GEMM_ERR_UNSUPPORTED, "moduli");
    gemm_kernel_info_free(ks);
    gemm_buffer_free(op.a.buf);
}

/* Where fp64 is exact (integer inputs whose products and sums stay below
 * 2^53), every backend's result is exact, the emulation's too: auto, and
 * 15 moduli asked for. */
Test(moduli, exact_on_integers)
{
    const uint64_t m = 192, n = 160, k = 2048;
    gemm_op op;
    setup_op(&op, m, n, k, GEMM_FP64, 7);
    char *base = gemm_buffer_data(op.a.buf);
    double *a = (double *)base, *b = (double *)(base + op.b.offset);
    double *d = (double *)(base + op.d.offset);
    uint64_t seed = 17;
    for (uint64_t i = 0; i < m * k; i++)
        a[i] = (double)((int)(tu_rand(&seed) % 1999) - 999);
    for (uint64_t i = 0; i < k * n; i++)
        b[i] = (double)((int)(tu_rand(&seed) % 1999) - 999);
    for (int pass = 0; pass < 2; pass++) {
        op.moduli = pass ? 15 : 0;
        memset(d, 0xff, m * n * sizeof(double));
        gemm_timings t;
        cr_assert_eq(gemm_run(g_client, &op, &t), GEMM_OK, "%s",
                     gemm_last_error_message());
        if (pass && on_cuda())
            cr_expect_eq(t.moduli, 15, "reply moduli %u (kernel %s)", t.moduli,
                         t.kernel);
        for (uint64_t i = 0; i < m; i++)
            for (uint64_t j = 0; j < n; j++) {
                int64_t x = 0;
                for (uint64_t h = 0; h < k; h++)
                    x += (int64_t)a[i * k + h] * (int64_t)b[h * n + j];
                cr_assert_eq(d[i * n + j], (double)x,
                             "moduli %u (%s): D[%llu][%llu] = %.17g, exact "
                             "%lld",
                             op.moduli, t.kernel, (unsigned long long)i,
                             (unsigned long long)j, d[i * n + j], (long long)x);
            }
    }
    gemm_buffer_free(op.a.buf);
}

/* An s^3 GEMM of type t on resident tensors, run until "auto" takes an
 * emulation whose kernel name starts with kernel (the start-up
 * calibration runs in the background) or 120 s pass; then the count is
 * in lo..hi and a sample of D within tol of the scale. */
static void auto_emulates_resident(gemm_dtype t, uint64_t seed,
                                   const char *kernel, unsigned lo, unsigned hi,
                                   double tol)
{
    const uint64_t s = 8192;
    gemm_op op;
    setup_op(&op, s, s, s, t, seed);
    uint64_t ta, tb;
    cr_assert_eq(gemm_tensor_upload(g_client, &op.a, s, s, t, &ta), GEMM_OK,
                 "%s", gemm_last_error_message());
    cr_assert_eq(gemm_tensor_upload(g_client, &op.b, s, s, t, &tb), GEMM_OK,
                 "%s", gemm_last_error_message());
    gemm_op r = op;
    r.a = (gemm_matrix){.tensor = ta};
    r.b = (gemm_matrix){.tensor = tb};
    gemm_timings tm;
    double t0 = tu_now();
    bool emulated = false;
    while (!emulated && tu_now() - t0 < 120.0) {
        cr_assert_eq(gemm_run(g_client, &r, &tm), GEMM_OK, "%s",
                     gemm_last_error_message());
        emulated = strncmp(tm.kernel, kernel, strlen(kernel)) == 0;
    }
    cr_assert(emulated, "still %s after %.0f s: no calibration?", tm.kernel,
              tu_now() - t0);
    cr_expect(tm.moduli >= lo && tm.moduli <= hi, "moduli %u", tm.moduli);
    cr_log_info("auto ran %s with %u moduli after %.1f s (kernel %.2f ms)",
                tm.kernel, tm.moduli, tu_now() - t0, tm.kernel_ns / 1e6);
    const char *base = gemm_buffer_data(op.a.buf);
    uint64_t rs = 5;
    for (int q = 0; q < 64; q++) {
        uint64_t i = tu_rand(&rs) % s, j = tu_rand(&rs) % s;
        double ref, scale;
        tu_ref_elem(&op, base, base + op.b.offset, NULL, i, j, &ref, &scale);
        const char *d = base + op.d.offset;
        double got = t == GEMM_FP64 ? ((const double *)d)[i * s + j]
                                    : ((const float *)d)[i * s + j];
        cr_assert(fabs(got - ref) <= tol * scale,
                  "D[%llu][%llu] = %.17g, want %.17g", (unsigned long long)i,
                  (unsigned long long)j, got, ref);
    }
    gemm_tensor_free(g_client, ta);
    gemm_tensor_free(g_client, tb);
    gemm_buffer_free(op.a.buf);
}

/* On the cuda backend, "auto" runs a large fp64 GEMM on resident operands
 * as the emulation once the daemon has measured its cost model (it does
 * at start-up, in the background: polled here with a deadline). */
Test(moduli, cuda_auto_emulates_once_calibrated, .timeout = 240)
{
    if (!on_cuda())
        cr_skip_test("skipped: the Ozaki-II emulation runs on the cuda "
                     "backend only (this suite runs on %s)",
                     tu_backend());
    auto_emulates_resident(GEMM_FP64, 23, "oz2", 14, 16, 1e-13);
}

/* fp32 (default precision, fp32 D) on resident operands: once the start-up
 * calibration has measured the fp32 lines, "auto" runs the emulation at
 * 8192^3 (where it beats 3xTF32 on an H100/H200) with ~7 moduli, and D is
 * right to fp32's accuracy. */
Test(moduli, cuda_fp32_auto_emulates_once_calibrated, .timeout = 240)
{
    if (!on_cuda())
        cr_skip_test("skipped: the Ozaki-II emulation runs on the cuda "
                     "backend only (this suite runs on %s)",
                     tu_backend());
    auto_emulates_resident(GEMM_FP32, 29, "oz2-f32", 6, 8, 1e-6);
}
