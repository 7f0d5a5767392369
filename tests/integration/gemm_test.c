/*
 * gemm_test.c: correctness of GEMMs served by a real gemmd (CPU backend)
 * against the fp64 reference: many shapes (1, odd, non-square, up to a few
 * hundred), all four transpose combinations, every supported dtype
 * combination, alpha/beta (C read, C absent, C == D in place, C present but
 * unread), leading dimensions larger than the row and unaligned offsets.
 * Every byte of the buffer that is not an element of D must be unchanged
 * (the region is poisoned with NaN bytes first, see util/cases.h).
 */
#include "util/cases.h"
#include "util/daemon.h"
#include "util/data.h"

#include <criterion/criterion.h>

#include <math.h>
#include <string.h>

TestSuite(gemm, .init = fixture_setup, .fini = fixture_teardown,
          .timeout = 120);

static const uint64_t shapes[][3] = {
    {1, 1, 1},       {1, 1, 7},       {1, 9, 1},      {5, 1, 1},
    {2, 3, 4},       {7, 5, 3},       {16, 16, 16},   {17, 33, 9},
    {31, 1, 64},     {64, 127, 65},   {100, 37, 129}, {128, 128, 128},
    {200, 150, 100}, {257, 129, 311},
};
#define NSHAPES (sizeof(shapes) / sizeof(shapes[0]))

static void case_for(tu_case *cs, size_t idx, gemm_dtype ab, gemm_dtype cd)
{
    size_t s = idx / 4;
    memset(cs, 0, sizeof(*cs));
    cs->m = shapes[s][0];
    cs->n = shapes[s][1];
    cs->k = shapes[s][2];
    cs->ab = ab;
    cs->cd = cd;
    cs->ta = idx & 1;
    cs->tb = (idx >> 1) & 1;
    tu_case_c_mode(cs, (unsigned)(idx + s));
    cs->pad_a = idx % 3 == 0 ? TU_TIGHT : (uint32_t)(idx % 5);
    cs->pad_b = (idx / 3) % 3 == 0 ? TU_TIGHT : (uint32_t)(idx % 4 + 1);
    cs->pad_c = idx % 2 ? 3 : TU_TIGHT;
    cs->pad_d = (idx / 2) % 3 == 0 ? TU_TIGHT : (uint32_t)(idx % 7);
    cs->base = 2 * (idx % 7);
    cs->seed = 0x1234567ULL + idx * 7919;
}

static void sweep(gemm_dtype ab, gemm_dtype cd)
{
    gemm_buffer *buf = NULL;
    char why[768];
    int rv = gemm_buffer_alloc(g_client, 4 << 20, &buf);
    cr_assert_eq(rv, GEMM_OK, "gemm_buffer_alloc: %s", gemm_strerror(rv));
    for (size_t idx = 0; idx < NSHAPES * 4; idx++) {
        tu_case cs;
        case_for(&cs, idx, ab, cd);
        rv = tu_case_run(g_client, buf, &cs, why, sizeof(why));
        cr_assert_eq(rv, GEMM_OK,
                     "case %zu (m=%llu n=%llu k=%llu ta=%d tb=%d c_mode=%d "
                     "%s->%s): %s",
                     idx, (unsigned long long)cs.m, (unsigned long long)cs.n,
                     (unsigned long long)cs.k, cs.ta, cs.tb, cs.c_mode,
                     gemm_dtype_name(ab), gemm_dtype_name(cd), why);
    }
    gemm_buffer_free(buf);
}

Test(gemm, bf16_to_bf16)
{
    sweep(GEMM_BF16, GEMM_BF16);
}
Test(gemm, bf16_to_fp16)
{
    sweep(GEMM_BF16, GEMM_FP16);
}
Test(gemm, bf16_to_fp32)
{
    sweep(GEMM_BF16, GEMM_FP32);
}
Test(gemm, fp16_to_bf16)
{
    sweep(GEMM_FP16, GEMM_BF16);
}
Test(gemm, fp16_to_fp16)
{
    sweep(GEMM_FP16, GEMM_FP16);
}
Test(gemm, fp16_to_fp32)
{
    sweep(GEMM_FP16, GEMM_FP32);
}
Test(gemm, fp32_to_fp32)
{
    sweep(GEMM_FP32, GEMM_FP32);
}

/* Every C mode with a few alpha/beta values (alpha = 0 included), each
 * transpose combination, two dtype combinations. */
Test(gemm, alpha_beta)
{
    static const struct {
        enum tu_c_mode mode;
        float alpha, beta;
    } ab[] = {
        {TU_C_NONE, 1.0f, 0.0f},      {TU_C_NONE, -3.5f, 0.0f},
        {TU_C_SEPARATE, 1.0f, 1.0f},  {TU_C_SEPARATE, 0.0f, 2.0f},
        {TU_C_SEPARATE, 0.5f, -1.0f}, {TU_C_INPLACE, 1.0f, 1.0f},
        {TU_C_INPLACE, 0.0f, -0.25f}, {TU_C_INPLACE, 2.0f, 3.0f},
        {TU_C_UNREAD, 1.0f, 0.0f},    {TU_C_UNREAD, -1.0f, 0.0f},
    };
    gemm_buffer *buf = NULL;
    char why[768];
    int rv = gemm_buffer_alloc(g_client, 1 << 20, &buf);
    cr_assert_eq(rv, GEMM_OK, "gemm_buffer_alloc: %s", gemm_strerror(rv));
    for (size_t i = 0; i < sizeof(ab) / sizeof(ab[0]); i++) {
        for (int t = 0; t < 8; t++) {
            tu_case cs = {.m = 37,
                          .n = 23,
                          .k = 41,
                          .ab = t < 4 ? GEMM_FP32 : GEMM_BF16,
                          .cd = t < 4 ? GEMM_FP32 : GEMM_FP16,
                          .ta = t & 1,
                          .tb = (t >> 1) & 1,
                          .alpha = ab[i].alpha,
                          .beta = ab[i].beta,
                          .c_mode = ab[i].mode,
                          .pad_a = 2,
                          .pad_b = 0,
                          .pad_c = 5,
                          .pad_d = 1,
                          .base = 4,
                          .seed = 99 + i * 8 + (uint64_t)t};
            rv = tu_case_run(g_client, buf, &cs, why, sizeof(why));
            cr_assert_eq(rv, GEMM_OK, "alpha=%g beta=%g c_mode=%d t=%d: %s",
                         ab[i].alpha, ab[i].beta, ab[i].mode, t, why);
        }
    }
    gemm_buffer_free(buf);
}

/* Large leading dimensions (rows far apart) on every operand. */
Test(gemm, wide_leading_dimensions)
{
    gemm_buffer *buf = NULL;
    char why[768];
    int rv = gemm_buffer_alloc(g_client, 2 << 20, &buf);
    cr_assert_eq(rv, GEMM_OK, "gemm_buffer_alloc: %s", gemm_strerror(rv));
    for (int t = 0; t < 4; t++) {
        tu_case cs = {.m = 19,
                      .n = 45,
                      .k = 33,
                      .ab = GEMM_FP16,
                      .cd = GEMM_FP32,
                      .ta = t & 1,
                      .tb = (t >> 1) & 1,
                      .alpha = 1.0f,
                      .beta = 0.5f,
                      .c_mode = TU_C_SEPARATE,
                      .pad_a = 301,
                      .pad_b = 257,
                      .pad_c = 999,
                      .pad_d = 1001,
                      .base = 6,
                      .seed = 5 + (uint64_t)t};
        rv = tu_case_run(g_client, buf, &cs, why, sizeof(why));
        cr_assert_eq(rv, GEMM_OK, "t=%d: %s", t, why);
    }
    gemm_buffer_free(buf);
}

/* A, B, C and D each in their own buffer at offset 0, tight. */
Test(gemm, separate_buffers)
{
    const uint64_t m = 45, n = 67, k = 89;
    gemm_buffer *a, *b, *c, *d;
    gemm_op op;
    uint64_t seed = 777;
    char why[768];
    int rv;
    cr_assert_eq(gemm_buffer_alloc(g_client, m * k * 2, &a), GEMM_OK);
    cr_assert_eq(gemm_buffer_alloc(g_client, k * n * 2, &b), GEMM_OK);
    cr_assert_eq(gemm_buffer_alloc(g_client, m * n * 2, &c), GEMM_OK);
    cr_assert_eq(gemm_buffer_alloc(g_client, m * n * 2, &d), GEMM_OK);
    gemm_op_init(&op, m, n, k, GEMM_FP16, GEMM_BF16);
    op.a.buf = a;
    op.b.buf = b;
    op.c.buf = c;
    op.d.buf = d;
    op.alpha = 0.5f;
    op.beta = 2.0f;
    tu_fill(gemm_buffer_data(a), GEMM_FP16, m, k, k, &seed);
    tu_fill(gemm_buffer_data(b), GEMM_FP16, k, n, n, &seed);
    tu_fill(gemm_buffer_data(c), GEMM_BF16, m, n, n, &seed);
    memset(gemm_buffer_data(d), 0xff, gemm_buffer_size(d));
    double ref[m * n], scale[m * n];
    tu_ref_gemm(&op, gemm_buffer_data(a), gemm_buffer_data(b),
                gemm_buffer_data(c), ref, scale);
    gemm_timings t;
    rv = gemm_run(g_client, &op, &t);
    cr_assert_eq(rv, GEMM_OK, "gemm_run: %s (%s)", gemm_strerror(rv),
                 gemm_last_error_message());
    cr_assert(
        tu_compare(&op, gemm_buffer_data(d), ref, scale, why, sizeof(why)),
        "%s", why);
    const uint8_t *dd = gemm_buffer_data(d);
    for (size_t i = m * n * 2; i < gemm_buffer_size(d); i++)
        cr_assert_eq(dd[i], 0xff, "byte %zu after D changed", i);
    cr_assert_geq(t.total_us, t.compute_us,
                  "timings: total %llu < compute "
                  "%llu",
                  (unsigned long long)t.total_us,
                  (unsigned long long)t.compute_us);
    cr_assert_geq(t.round_trip_us, t.total_us,
                  "timings: round trip %llu < "
                  "daemon total %llu",
                  (unsigned long long)t.round_trip_us,
                  (unsigned long long)t.total_us);
    gemm_buffer_free(a);
    gemm_buffer_free(b);
    gemm_buffer_free(c);
    gemm_buffer_free(d);
}

/* Operands that end exactly at the end of their buffer are in bounds. */
Test(gemm, operands_end_at_buffer_end)
{
    const uint64_t m = 33, n = 21, k = 17;
    gemm_buffer *buf;
    gemm_op op;
    uint64_t seed = 4242;
    char why[768];
    int rv = gemm_buffer_alloc(g_client, 8192, &buf);
    cr_assert_eq(rv, GEMM_OK, "gemm_buffer_alloc: %s", gemm_strerror(rv));
    size_t size = gemm_buffer_size(buf);
    uint8_t *p = gemm_buffer_data(buf);
    gemm_op_init(&op, m, n, k, GEMM_FP32, GEMM_FP32);
    op.trans_a = true;
    op.a.buf = op.b.buf = op.d.buf = buf;
    op.d.offset = size - m * n * 4; /* D is the last bytes */
    op.a.offset = 0;
    op.b.offset = k * m * 4;
    memset(p, 0xff, size);
    tu_fill(p, GEMM_FP32, k, m, m, &seed);
    tu_fill(p + op.b.offset, GEMM_FP32, k, n, n, &seed);
    double ref[m * n], scale[m * n];
    tu_ref_gemm(&op, p, p + op.b.offset, NULL, ref, scale);
    rv = gemm_run(g_client, &op, NULL);
    cr_assert_eq(rv, GEMM_OK, "D ending at the buffer's last byte: %s (%s)",
                 gemm_strerror(rv), gemm_last_error_message());
    cr_assert(tu_compare(&op, p + op.d.offset, ref, scale, why, sizeof(why)),
              "%s", why);
    /* and B as the last bytes, with a wide ldb */
    op.b.ld = n + 3;
    op.b.offset = size - ((k - 1) * (n + 3) + n) * 4;
    op.d.offset = k * m * 4 + 64;
    tu_fill(p + op.b.offset, GEMM_FP32, k, n, n + 3, &seed);
    tu_ref_gemm(&op, p, p + op.b.offset, NULL, ref, scale);
    rv = gemm_run(g_client, &op, NULL);
    cr_assert_eq(rv, GEMM_OK, "B ending at the buffer's last byte: %s (%s)",
                 gemm_strerror(rv), gemm_last_error_message());
    cr_assert(tu_compare(&op, p + op.d.offset, ref, scale, why, sizeof(why)),
              "%s", why);
    gemm_buffer_free(buf);
}

/* A run of random small cases (shapes, types, modes, lds) on one buffer. */
Test(gemm, random_small)
{
    gemm_buffer *buf = NULL;
    uint64_t state = 0xC0FFEE;
    char why[768];
    int rv = gemm_buffer_alloc(g_client, 1 << 20, &buf);
    cr_assert_eq(rv, GEMM_OK, "gemm_buffer_alloc: %s", gemm_strerror(rv));
    for (int i = 0; i < 300; i++) {
        tu_case cs;
        tu_case_random(&cs, &state, 40);
        rv = tu_case_run(g_client, buf, &cs, why, sizeof(why));
        cr_assert_eq(rv, GEMM_OK, "random case %d: %s", i, why);
    }
    gemm_buffer_free(buf);
}
