/*
 * selection_test.c: kernels by name and fp32 precisions, through the
 * daemon. The backend's catalog (ListKernels) has one reference and sane
 * entries; every kernel it lists computes correctly by name over every
 * type and transpose it claims, and the reply names it; a request naming
 * an unknown, garbage, overlong or foreign kernel, or an impossible
 * precision, gets its typed error, changes nothing, and the daemon goes
 * on. fp32 inputs are correct as tf32 and as fp32, and fp32 is clearly
 * the more accurate. Runs on the suite's backend (cpu here; cuda with
 * GEMM_TEST_BACKEND=cuda).
 */
#include "util/cases.h"
#include "util/daemon.h"
#include "util/data.h"
#include "util/raw.h"

#include <criterion/criterion.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

TestSuite(selection, .init = fixture_setup, .fini = fixture_teardown,
          .timeout = 120);

static bool on_cpu(void)
{
    return strcmp(tu_backend(), "cpu") == 0;
}

/* Prepares cs in buf, runs it with kernel and precision, verifies D and
 * that nothing else changed. Returns gemm_run's code, or -1 when D is
 * wrong (why says how). */
static int run_case(gemm_buffer *buf, const tu_case *cs, const char *kernel,
                    gemm_precision prec, gemm_timings *t, char *why,
                    size_t whylen)
{
    tu_prepared p;
    if (!tu_case_prepare(cs, buf, &p, why, whylen))
        return -1;
    p.op.kernel = kernel;
    p.op.precision = prec;
    int rv = gemm_run(g_client, &p.op, t);
    if (rv != GEMM_OK)
        snprintf(why, whylen, "%s (%s)", gemm_strerror(rv),
                 gemm_last_error_message());
    else if (!tu_case_verify(&p, why, whylen))
        rv = -1;
    tu_case_free(&p);
    return rv;
}

static const gemm_kernel_info *find(const gemm_kernel_info *ks, size_t n,
                                    const char *name)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(ks[i].name, name) == 0)
            return &ks[i];
    return NULL;
}

/* Bits of every floating-point gemm_dtype: bf16 .. complex128 (what the
 * reference serves); with int8 and int32, every type. */
#define ALL_TYPES                                                              \
    (1u << GEMM_BF16 | 1u << GEMM_FP16 | 1u << GEMM_FP32 | 1u << GEMM_FP64 |   \
     1u << GEMM_COMPLEX64 | 1u << GEMM_COMPLEX128)
#define ANY_TYPE (ALL_TYPES | 1u << GEMM_INT8 | 1u << GEMM_INT32)

Test(selection, list_kernels)
{
    gemm_kernel_info *ks;
    size_t n = 0;
    int rv = gemm_list_kernels(g_client, &ks, &n);
    cr_assert_eq(rv, GEMM_OK, "%s: %s", gemm_strerror(rv),
                 gemm_last_error_message());
    cr_assert_geq(n, 1u);
    int refs = 0;
    for (size_t i = 0; i < n; i++) {
        const gemm_kernel_info *k = &ks[i];
        cr_expect(k->name[0] != '\0', "entry %zu has no name", i);
        cr_expect(k->summary[0] != '\0', "%s has no summary", k->name);
        cr_expect_neq(k->ab_types & ANY_TYPE, 0u, "%s serves no A/B type",
                      k->name);
        cr_expect_eq(k->ab_types & ~(ANY_TYPE & ~(1u << GEMM_INT32)), 0u,
                     "%s: stray A/B type bits %#x", k->name, k->ab_types);
        cr_expect_neq(k->cd_types, 0u, "%s serves no C/D type", k->name);
        cr_expect_eq(k->cd_types & ~(ANY_TYPE & ~(1u << GEMM_INT8)), 0u,
                     "%s: stray C/D type bits %#x", k->name, k->cd_types);
        /* int8 inputs and int32 outputs come together */
        cr_expect_eq(!(k->ab_types & 1u << GEMM_INT8),
                     !(k->cd_types & 1u << GEMM_INT32), "%s", k->name);
        cr_expect_neq(k->transposes & 0xfu, 0u, "%s: no transposes", k->name);
        if (k->ab_types & (1u << GEMM_FP32))
            cr_expect_neq(k->precisions, 0u, "%s: fp32 but no precision",
                          k->name);
        refs += k->reference;
        for (size_t j = 0; j < i; j++)
            cr_expect_str_neq(ks[j].name, k->name, "listed twice");
    }
    cr_expect_eq(refs, 1, "one reference kernel, not %d", refs);
    const gemm_kernel_info *ref = find(ks, n, on_cpu() ? "openblas" : "cublas");
    cr_assert_not_null(ref, "the reference is listed");
    cr_expect(ref->reference);
    cr_expect_eq(ref->ab_types, ALL_TYPES, "the reference serves all: %#x",
                 ref->ab_types);
    cr_expect_eq(ref->cd_types, ALL_TYPES, "the reference serves all: %#x",
                 ref->cd_types);
    cr_expect_eq(ref->transposes, 0xfu);
    int int8_rows = 0;
    for (size_t i = 0; i < n; i++)
        int8_rows += (ks[i].ab_types & 1u << GEMM_INT8) != 0;
    cr_expect_geq(int8_rows, 1, "no kernel serves int8");
    if (on_cpu()) {
        cr_expect_eq(n, 3u);
        const gemm_kernel_info *s8 = find(ks, n, "cpu-s8");
        cr_assert_not_null(s8);
        cr_expect_eq(s8->ab_types, 1u << GEMM_INT8);
        cr_expect_eq(s8->cd_types, 1u << GEMM_INT32);
        cr_expect_eq(s8->transposes, 0xfu);
        cr_expect_eq(s8->ladder, 0u);
        const gemm_kernel_info *naive = find(ks, n, "cpu-naive");
        cr_assert_not_null(naive);
        cr_expect_eq(naive->ladder, 1u);
        cr_expect_not(naive->reference);
        cr_expect_eq(ref->ladder, 0u);
        cr_expect_eq(ref->precisions, 1u << GEMM_PRECISION_DEFAULT |
                                          1u << GEMM_PRECISION_TF32 |
                                          1u << GEMM_PRECISION_FP32);
    }
    gemm_kernel_info_free(ks);
    gemm_kernel_info_free(NULL);
}

/* Every listed kernel by name over each A/B type, precision and
 * transpose it claims, on small odd shapes with padded lds and C. */
Test(selection, every_kernel_by_name, .timeout = 240)
{
    static const gemm_dtype types[] = {GEMM_BF16, GEMM_FP16, GEMM_FP32};
    gemm_kernel_info *ks;
    size_t n;
    gemm_buffer *buf;
    char why[512];
    cr_assert_eq(gemm_list_kernels(g_client, &ks, &n), GEMM_OK);
    cr_assert_eq(gemm_buffer_alloc(g_client, 1 << 20, &buf), GEMM_OK);
    int runs = 0;
    for (size_t i = 0; i < n; i++) {
        const gemm_kernel_info *k = &ks[i];
        for (int ti = 0; ti < 3; ti++) {
            gemm_dtype ab = types[ti];
            if (!(k->ab_types & (1u << ab)))
                continue;
            /* fp32 D where served (and always for fp32 inputs) */
            gemm_dtype cd = ab == GEMM_FP32 || (k->cd_types & 1u << GEMM_FP32)
                                ? GEMM_FP32
                                : ab;
            if (!(k->cd_types & (1u << cd)))
                continue;
            for (unsigned tr = 0; tr < 4; tr++) {
                if (!(k->transposes & (1u << tr)))
                    continue;
                gemm_precision prec = GEMM_PRECISION_DEFAULT;
                if (ab == GEMM_FP32 &&
                    !(k->precisions & (1u << GEMM_PRECISION_DEFAULT |
                                       1u << GEMM_PRECISION_FP32)))
                    prec = GEMM_PRECISION_TF32;
                tu_case cs = {.m = 37,
                              .n = 29,
                              .k = 19 + 8 * tr,
                              .ab = ab,
                              .cd = cd,
                              .ta = tr & 1,
                              .tb = (tr >> 1) & 1,
                              .pad_a = 3,
                              .pad_b = TU_TIGHT,
                              .pad_c = 1,
                              .pad_d = 5,
                              .base = 2 * ti,
                              .seed = 1000 + i * 16 + tr};
                tu_case_c_mode(&cs, tr + ti);
                gemm_timings t;
                int rv =
                    run_case(buf, &cs, k->name, prec, &t, why, sizeof(why));
                cr_expect_eq(rv, GEMM_OK, "%s %s->%s %s%s: %s", k->name,
                             gemm_dtype_name(ab), gemm_dtype_name(cd),
                             cs.ta ? "t" : "n", cs.tb ? "t" : "n", why);
                if (rv == GEMM_OK && strcmp(k->name, "auto") == 0)
                    cr_expect(t.kernel[0] != '\0' &&
                                  strcmp(t.kernel, "auto") != 0,
                              "auto is resolved in the reply: '%s'", t.kernel);
                else if (rv == GEMM_OK)
                    cr_expect_str_eq(t.kernel, k->name,
                                     "the reply names the kernel that ran");
                if (rv == GEMM_OK)
                    cr_expect_gt(t.kernel_ns, 0u, "%s: kernel time", k->name);
                runs++;
            }
        }
    }
    cr_log_info("%d runs over %zu kernels", runs, n);
    cr_expect_geq(runs, (int)n);
    gemm_kernel_info_free(ks);
    gemm_buffer_free(buf);
    tu_assert_healthy(g_client);
}

Test(selection, auto_names_what_ran)
{
    gemm_buffer *buf;
    char why[512];
    gemm_timings t;
    tu_case cs = {.m = 40,
                  .n = 24,
                  .k = 16,
                  .ab = GEMM_BF16,
                  .cd = GEMM_BF16,
                  .pad_a = TU_TIGHT,
                  .pad_b = TU_TIGHT,
                  .pad_c = TU_TIGHT,
                  .pad_d = TU_TIGHT,
                  .seed = 77};
    tu_case_c_mode(&cs, 0);
    cr_assert_eq(gemm_buffer_alloc(g_client, 65536, &buf), GEMM_OK);
    const char *names[] = {NULL, "auto"};
    for (int i = 0; i < 2; i++) {
        int rv = run_case(buf, &cs, names[i], GEMM_PRECISION_DEFAULT, &t, why,
                          sizeof(why));
        cr_assert_eq(rv, GEMM_OK, "%s", why);
        cr_expect(t.kernel[0] != '\0', "the reply names a kernel");
        cr_expect_str_neq(t.kernel, "auto", "auto is resolved");
        if (on_cpu())
            cr_expect_str_eq(t.kernel, "openblas");
        cr_expect_gt(t.kernel_ns, 0u);
        cr_expect_leq(t.kernel_ns / 1000, t.compute_us + 1,
                      "kernel %llu ns within compute %llu us",
                      (unsigned long long)t.kernel_ns,
                      (unsigned long long)t.compute_us);
    }
    gemm_buffer_free(buf);
}

/* The errors of this suite: a good fp32 op with one thing wrong. */
#define EBUF 65536
static gemm_buffer *e_buf;
static uint8_t e_snap[EBUF];

static void good_op(gemm_op *op, gemm_dtype ab)
{
    uint64_t seed = 4242;
    if (e_buf == NULL) {
        cr_assert_eq(gemm_buffer_alloc(g_client, EBUF, &e_buf), GEMM_OK);
        tu_fill(gemm_buffer_data(e_buf), GEMM_FP32, 1, EBUF / 4, EBUF / 4,
                &seed);
    }
    gemm_op_init(op, 8, 8, 8, ab, GEMM_FP32);
    op->a.buf = op->b.buf = op->d.buf = e_buf;
    op->b.offset = 1024;
    op->d.offset = 2048;
}

static void expect_fail(const gemm_op *op, int code, const char *needle,
                        const char *what)
{
    memcpy(e_snap, gemm_buffer_data(e_buf), EBUF);
    int rv = gemm_run(g_client, op, NULL);
    cr_assert_eq(rv, code, "%s: got %s (\"%s\"), want %s", what,
                 gemm_strerror(rv), gemm_last_error_message(),
                 gemm_strerror(code));
    const char *msg = gemm_last_error_message();
    cr_expect(msg[0] != '\0', "%s: no message", what);
    if (needle != NULL)
        cr_expect(strstr(msg, needle) != NULL, "%s: message '%s' lacks '%s'",
                  what, msg, needle);
    cr_assert_eq(memcmp(e_snap, gemm_buffer_data(e_buf), EBUF), 0,
                 "%s: a refused request changed the buffer", what);
    tu_assert_healthy(g_client);
}

Test(selection, unknown_and_foreign_kernels)
{
    gemm_op op;
    good_op(&op, GEMM_FP32);
    op.kernel = "no-such-kernel";
    expect_fail(&op, GEMM_ERR_UNSUPPORTED, "no-such-kernel", "unknown");
    if (on_cpu()) {
        op.kernel = "wgmma-basic";
        expect_fail(&op, GEMM_ERR_UNSUPPORTED,
                    "kernel 'wgmma-basic' is not available on the cpu "
                    "backend",
                    "a GPU kernel on the cpu backend");
        op.kernel = "cublas";
        expect_fail(&op, GEMM_ERR_UNSUPPORTED, "cpu backend", "cublas on cpu");
    } else {
        op.kernel = "openblas";
        expect_fail(&op, GEMM_ERR_UNSUPPORTED, "not available",
                    "a CPU kernel on the cuda backend");
    }
    op.kernel = "AUTO"; /* names are case-sensitive */
    expect_fail(&op, GEMM_ERR_UNSUPPORTED, NULL, "AUTO");
}

Test(selection, garbage_kernel_names)
{
    gemm_op op;
    good_op(&op, GEMM_FP32);
    static const char *const bad[] = {
        "",          "two words", "semi;colon", "../../etc/passwd",
        "tab\tname", "\xff\xfe",  "nl\n",       "%s%s%s%n",
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        char what[64];
        snprintf(what, sizeof(what), "bad name #%zu", i);
        op.kernel = bad[i];
        expect_fail(&op, GEMM_ERR_INVALID, "kernel name", what);
    }
    /* the library refuses what cannot be a name at all */
    char longname[GEMM_KERNEL_NAME_MAX + 2];
    memset(longname, 'k', sizeof(longname) - 1);
    longname[sizeof(longname) - 1] = '\0';
    op.kernel = longname;
    expect_fail(&op, GEMM_ERR_INVALID, "longer than", "32-byte name");
    longname[GEMM_KERNEL_NAME_MAX] = '\0'; /* 31: a name, just unknown */
    expect_fail(&op, GEMM_ERR_UNSUPPORTED, NULL, "31-byte name");
}

/* Below the library: what the daemon does with names the library would
 * not send. */
Test(selection, raw_overlong_names)
{
    tu_raw r;
    tu_shm shm;
    uint64_t id;
    Gemm__GemmRequest g;
    Gemm__Operand ops[4];
    Gemm__Reply *rep;
    cr_assert_eq(tu_raw_open(&r, g_gemmd.url, 10000), 0);
    cr_assert_eq(tu_raw_buffer(&r, &shm, 1 << 16, &id), GEMM_OK);
    static char name[8192];
    size_t lens[] = {32, 33, 255, 4000, sizeof(name) - 1};
    for (size_t i = 0; i < sizeof(lens) / sizeof(lens[0]); i++) {
        memset(name, 'a', lens[i]);
        name[lens[i]] = '\0';
        tu_raw_gemm_init(&g, ops, id, 8, 8, 8, 0, 1024, 2048);
        g.kernel = name;
        cr_assert_eq(tu_raw_gemm(&r, &g, &rep), 0);
        cr_expect_eq(tu_reply_status(rep), GEMM_ERR_INVALID,
                     "%zu-byte name: %s: %s", lens[i],
                     gemm_strerror(tu_reply_status(rep)),
                     rep->message ? rep->message : "");
        cr_expect(rep->message != NULL && strlen(rep->message) < 200,
                  "the message does not echo the whole name");
        gemm__reply__free_unpacked(rep, NULL);
    }
    /* a precision number the enum does not have */
    tu_raw_gemm_init(&g, ops, id, 8, 8, 8, 0, 1024, 2048);
    g.has_precision = true;
    g.precision = (Gemm__Precision)99;
    cr_assert_eq(tu_raw_gemm(&r, &g, &rep), 0);
    cr_expect_eq(tu_reply_status(rep), GEMM_ERR_INVALID);
    cr_expect(rep->message && strstr(rep->message, "unknown precision 99"),
              "message: %s", rep->message ? rep->message : "");
    gemm__reply__free_unpacked(rep, NULL);
    tu_raw_close(&r);
    tu_shm_destroy(&shm);
    tu_assert_healthy(g_client);
}

Test(selection, bad_precisions)
{
    gemm_op op;
    good_op(&op, GEMM_FP32);
    op.precision = (gemm_precision)3;
    expect_fail(&op, GEMM_ERR_INVALID, "unknown precision 3", "precision 3");
    op.precision = (gemm_precision)-1;
    expect_fail(&op, GEMM_ERR_INVALID, "unknown precision", "precision -1");
    good_op(&op, GEMM_BF16);
    op.precision = GEMM_PRECISION_TF32;
    expect_fail(&op, GEMM_ERR_INVALID, "fp32 inputs only", "tf32 on bf16");
    good_op(&op, GEMM_FP16);
    op.precision = GEMM_PRECISION_FP32;
    expect_fail(&op, GEMM_ERR_INVALID, "fp32 inputs only", "fp32 on fp16");
    op.precision = GEMM_PRECISION_DEFAULT;
    op.kernel = "auto";
    int rv = gemm_run(g_client, &op, NULL);
    cr_expect_eq(rv, GEMM_OK, "fp16 with the default: %s",
                 gemm_last_error_message());
}

/* Relative Frobenius error of D (fp32, ld n) against ref. */
static double frob_err(const float *d, const double *ref, size_t count)
{
    double num = 0, den = 0;
    for (size_t i = 0; i < count; i++) {
        double e = (double)d[i] - ref[i];
        num += e * e;
        den += ref[i] * ref[i];
    }
    return sqrt(num / den);
}

Test(selection, fp32_precisions)
{
    const size_t m = 96, n = 80, k = 512;
    gemm_buffer *buf;
    size_t abytes = m * k * 4, bbytes = k * n * 4, dbytes = m * n * 4;
    cr_assert_eq(
        gemm_buffer_alloc(g_client, abytes + bbytes + 3 * dbytes, &buf),
        GEMM_OK);
    char *base = gemm_buffer_data(buf);
    uint64_t seed = 99;
    tu_fill(base, GEMM_FP32, m, k, k, &seed);
    tu_fill(base + abytes, GEMM_FP32, k, n, n, &seed);
    gemm_op op;
    gemm_op_init(&op, m, n, k, GEMM_FP32, GEMM_FP32);
    op.a = (gemm_matrix){buf, 0, 0, 0};
    op.b = (gemm_matrix){buf, abytes, 0, 0};
    double *ref = malloc(m * n * sizeof(double));
    double *scale = malloc(m * n * sizeof(double));
    cr_assert(ref != NULL && scale != NULL);
    tu_ref_gemm(&op, base, base + abytes, NULL, ref, scale);
    static const gemm_precision precs[] = {
        GEMM_PRECISION_TF32, GEMM_PRECISION_FP32, GEMM_PRECISION_DEFAULT};
    double err[3];
    for (int i = 0; i < 3; i++) {
        char why[512];
        op.precision = precs[i];
        op.d = (gemm_matrix){buf, abytes + bbytes + i * dbytes, 0, 0};
        memset(base + op.d.offset, 0xff, dbytes);
        int rv = gemm_run(g_client, &op, NULL);
        cr_assert_eq(rv, GEMM_OK, "precision %s: %s",
                     gemm_precision_name(precs[i]), gemm_last_error_message());
        cr_expect(
            tu_compare(&op, base + op.d.offset, ref, scale, why, sizeof(why)),
            "precision %s: %s", gemm_precision_name(precs[i]), why);
        err[i] = frob_err((const float *)(base + op.d.offset), ref, m * n);
        cr_log_info("precision %s: relative error %.3g",
                    gemm_precision_name(precs[i]), err[i]);
    }
    cr_expect_lt(err[1], 1e-5, "fp32: %.3g", err[1]);
    cr_expect_lt(err[0], 2e-3, "tf32: %.3g", err[0]);
    cr_expect_gt(err[0], 1e-5, "tf32 really rounds: %.3g", err[0]);
    cr_expect_gt(err[0], 20 * err[1],
                 "fp32 (%.3g) is clearly more accurate than tf32 (%.3g)",
                 err[1], err[0]);
    cr_expect_lt(err[2], 1e-5, "default is fp32: %.3g", err[2]);
    free(ref);
    free(scale);
    gemm_buffer_free(buf);
    tu_assert_healthy(g_client);
}

/* A resident fp32 tensor multiplies at either precision. */
Test(selection, resident_fp32_tensor_precisions)
{
    const size_t m = 33, n = 40, k = 64;
    gemm_buffer *buf;
    size_t abytes = m * k * 4, bbytes = k * n * 4, dbytes = m * n * 4;
    cr_assert_eq(gemm_buffer_alloc(g_client, abytes + bbytes + dbytes, &buf),
                 GEMM_OK);
    char *base = gemm_buffer_data(buf);
    uint64_t seed = 5, tid;
    tu_fill(base, GEMM_FP32, m, k, k, &seed);
    tu_fill(base + abytes, GEMM_FP32, k, n, n, &seed);
    gemm_matrix src = {buf, abytes, 0, 0};
    cr_assert_eq(gemm_tensor_upload(g_client, &src, k, n, GEMM_FP32, &tid),
                 GEMM_OK, "%s", gemm_last_error_message());
    gemm_op op;
    gemm_op_init(&op, m, n, k, GEMM_FP32, GEMM_FP32);
    op.a = (gemm_matrix){buf, 0, 0, 0};
    op.b = (gemm_matrix){buf, abytes, 0, 0};
    double *ref = malloc(m * n * sizeof(double));
    double *scale = malloc(m * n * sizeof(double));
    cr_assert(ref != NULL && scale != NULL);
    tu_ref_gemm(&op, base, base + abytes, NULL, ref, scale);
    op.b = (gemm_matrix){.tensor = tid};
    op.d = (gemm_matrix){buf, abytes + bbytes, 0, 0};
    for (int p = GEMM_PRECISION_DEFAULT; p <= GEMM_PRECISION_FP32; p++) {
        char why[512];
        op.precision = (gemm_precision)p;
        memset(base + op.d.offset, 0xff, dbytes);
        cr_assert_eq(gemm_run(g_client, &op, NULL), GEMM_OK, "%s",
                     gemm_last_error_message());
        cr_expect(
            tu_compare(&op, base + op.d.offset, ref, scale, why, sizeof(why)),
            "precision %s: %s", gemm_precision_name(op.precision), why);
    }
    cr_expect_eq(gemm_tensor_free(g_client, tid), GEMM_OK);
    free(ref);
    free(scale);
    gemm_buffer_free(buf);
}

/* tf32 has 10 mantissa bits: 1 + 2^-11 is not one of its numbers. As
 * tf32 it becomes 1 + 2^-10 (round to nearest, ties away: the cpu
 * backend and cvt.rna) or 1 (truncation); as fp32 it stays. */
Test(selection, tf32_rounds_inputs)
{
    gemm_buffer *buf;
    cr_assert_eq(gemm_buffer_alloc(g_client, 4096, &buf), GEMM_OK);
    float *f = gemm_buffer_data(buf);
    gemm_op op;
    gemm_op_init(&op, 1, 1, 1, GEMM_FP32, GEMM_FP32);
    op.a = (gemm_matrix){buf, 0, 0, 0};
    op.b = (gemm_matrix){buf, 64, 0, 0};
    op.d = (gemm_matrix){buf, 128, 0, 0};
    f[0] = 1.0f + 0x1p-11f;
    f[16] = 1.0f;
    for (int p = GEMM_PRECISION_DEFAULT; p <= GEMM_PRECISION_FP32; p++) {
        op.precision = (gemm_precision)p;
        f[32] = -7.0f;
        cr_assert_eq(gemm_run(g_client, &op, NULL), GEMM_OK, "%s",
                     gemm_last_error_message());
        if (p == GEMM_PRECISION_TF32 && on_cpu())
            cr_expect_eq(f[32], 1.0f + 0x1p-10f, "tf32: %a", (double)f[32]);
        else if (p == GEMM_PRECISION_TF32)
            cr_expect(f[32] == 1.0f + 0x1p-10f || f[32] == 1.0f, "tf32: %a",
                      (double)f[32]);
        else
            cr_expect_eq(f[32], 1.0f + 0x1p-11f, "%s: %a",
                         gemm_precision_name(op.precision), (double)f[32]);
    }
    gemm_buffer_free(buf);
}
