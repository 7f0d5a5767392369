/*
 * int8_test.c: int8 A and B with int32 C and D through a real gemmd (the
 * CPU backend in CI; GEMM_TEST_BACKEND=cuda on a GPU host), compared
 * exactly with a reference computed here in 64-bit integers and reduced
 * modulo 2^32 (the service's int32 arithmetic wraps; reduction commutes
 * with sums and products, so the 64-bit result cast to int32 is the
 * answer). Shapes with 1, odd sizes and sizes past the CPU kernel's
 * blocks, all four transposes, every C mode (none, separate, in place as
 * D, given but unread), alpha and beta from 0 to the ends of int32,
 * padded leading dimensions and odd byte offsets; the region is poisoned
 * with 0xff bytes first and every byte that is not an element of D must
 * be unchanged afterwards. Then overflow (sums and scalings past 2^31
 * wrap), float scalars, resident int8 tensors, a batch, and every refusal
 * with its code and a message naming the fix.
 */
#include "util/daemon.h"
#include "util/data.h"

#include <criterion/criterion.h>

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

TestSuite(int8, .init = fixture_setup, .fini = fixture_teardown,
          .timeout = 120);

enum c_mode { C_NONE, C_SEPARATE, C_INPLACE, C_UNREAD };

typedef struct icase {
    uint64_t m, n, k;
    bool ta, tb;
    int32_t alpha, beta; /* beta must be 0 for C_NONE and C_UNREAD */
    enum c_mode c;
    uint32_t pad_a, pad_b, pad_c, pad_d; /* ld = cols + pad */
    uint64_t base;                       /* byte offset of A */
    uint64_t seed;
} icase;

/* The reference: alpha * sum(a b) + beta * c in uint64 (wrapping), cast
 * to int32: the same residue modulo 2^32 as int32 arithmetic gives. */
static int32_t ref_elem(const int8_t *a, uint64_t lda, bool ta, const int8_t *b,
                        uint64_t ldb, bool tb, uint64_t k, uint64_t i,
                        uint64_t q, int32_t alpha, int32_t beta,
                        const int32_t *c)
{
    int64_t acc = 0;
    for (uint64_t l = 0; l < k; l++) {
        int64_t x = ta ? a[l * lda + i] : a[i * lda + l];
        int64_t y = tb ? b[q * ldb + l] : b[l * ldb + q];
        acc += x * y;
    }
    uint64_t r = (uint64_t)(int64_t)alpha * (uint64_t)acc;
    if (c != NULL)
        r += (uint64_t)(int64_t)beta * (uint64_t)(int64_t)*c;
    return (int32_t)(uint32_t)r;
}

/* Every int8, -128 and 127 included. */
static void fill8(int8_t *p, uint64_t rows, uint64_t cols, uint64_t ld,
                  uint64_t *state)
{
    for (uint64_t r = 0; r < rows; r++)
        for (uint64_t c = 0; c < cols; c++)
            p[r * ld + c] = (int8_t)(tu_rand(state) >> 56);
}

/* Lays out, runs and checks one case in buf. Returns GEMM_OK, the
 * gemm_error of the run, or -1 with why. */
static int run_case(gemm_buffer *buf, const icase *cs, char *why, size_t wl)
{
    uint64_t ar = cs->ta ? cs->k : cs->m, ac = cs->ta ? cs->m : cs->k;
    uint64_t br = cs->tb ? cs->n : cs->k, bc = cs->tb ? cs->k : cs->n;
    uint64_t lda = ac + cs->pad_a, ldb = bc + cs->pad_b;
    uint64_t ldc = cs->n + cs->pad_c, ldd = cs->n + cs->pad_d;
    /* bytes: A at base, B right after it (any byte), C and D at the next
     * 4-byte boundaries, one element apart */
    uint64_t oa = cs->base, ob = oa + (ar - 1) * lda + ac + 1;
    uint64_t oc = (ob + (br - 1) * ldb + bc + 4 + 3) / 4 * 4;
    uint64_t od = oc + ((cs->m - 1) * ldc + cs->n + 1) * 4;
    if (cs->c == C_INPLACE)
        ldd = ldc, od = oc;
    uint64_t bytes = od + ((cs->m - 1) * ldd + cs->n) * 4 + 16;
    cr_assert_leq(bytes, gemm_buffer_size(buf), "case too large");
    uint8_t *p = gemm_buffer_data(buf);
    memset(p, 0xff, bytes);
    uint64_t state = cs->seed | 1;
    int8_t *A = (int8_t *)(p + oa), *B = (int8_t *)(p + ob);
    int32_t *C = (int32_t *)(p + oc), *D = (int32_t *)(p + od);
    fill8(A, ar, ac, lda, &state);
    fill8(B, br, bc, ldb, &state);
    if (cs->c == C_SEPARATE || cs->c == C_INPLACE)
        for (uint64_t i = 0; i < cs->m; i++)
            for (uint64_t q = 0; q < cs->n; q++)
                C[i * ldc + q] = (int32_t)(uint32_t)tu_rand(&state);

    size_t mn = cs->m * cs->n;
    int32_t *ref = calloc(mn, sizeof(int32_t));
    uint8_t *snap = malloc(bytes);
    cr_assert(ref != NULL && snap != NULL);
    bool read_c = cs->beta != 0;
    for (uint64_t i = 0; i < cs->m; i++)
        for (uint64_t q = 0; q < cs->n; q++)
            ref[i * cs->n + q] =
                ref_elem(A, lda, cs->ta, B, ldb, cs->tb, cs->k, i, q, cs->alpha,
                         cs->beta, read_c ? &C[i * ldc + q] : NULL);
    memcpy(snap, p, bytes);

    gemm_op op;
    gemm_timings t;
    gemm_op_init(&op, cs->m, cs->n, cs->k, GEMM_INT8, GEMM_INT32);
    op.trans_a = cs->ta;
    op.trans_b = cs->tb;
    gemm_op_set_scalars(&op, cs->alpha, 0.0, cs->beta, 0.0);
    op.a = (gemm_matrix){buf, oa, lda, 0};
    op.b = (gemm_matrix){buf, ob, ldb, 0};
    op.d = (gemm_matrix){buf, od, ldd, 0};
    if (cs->c != C_NONE)
        op.c = (gemm_matrix){buf, oc, ldc, 0};
    int rv = gemm_run(g_client, &op, &t);
    if (rv != GEMM_OK) {
        snprintf(why, wl, "gemm_run: %s (%s)", gemm_strerror(rv),
                 gemm_last_error_message());
        goto done;
    }
    if (strcmp(tu_backend(), "cpu") == 0 && strcmp(t.kernel, "cpu-s8") != 0) {
        snprintf(why, wl, "kernel '%s' ran, not cpu-s8", t.kernel);
        rv = -1;
        goto done;
    }
    for (uint64_t i = 0; i < cs->m && rv == GEMM_OK; i++)
        for (uint64_t q = 0; q < cs->n; q++) {
            int32_t got = D[i * ldd + q], want = ref[i * cs->n + q];
            if (got != want) {
                snprintf(why, wl, "D[%llu][%llu] = %d, want %d",
                         (unsigned long long)i, (unsigned long long)q, got,
                         want);
                rv = -1;
                break;
            }
            memcpy(snap + od + (i * ldd + q) * 4, &D[i * ldd + q], 4);
        }
    for (size_t b = 0; b < bytes && rv == GEMM_OK; b++)
        if (p[b] != snap[b]) {
            snprintf(why, wl, "byte %zu outside D changed: %#04x -> %#04x", b,
                     snap[b], p[b]);
            rv = -1;
        }
done:
    free(ref);
    free(snap);
    return rv;
}

static const uint64_t shapes[][3] = {
    {1, 1, 1},   {1, 1, 7},     {1, 9, 1},       {5, 1, 1},
    {2, 3, 4},   {7, 5, 3},     {17, 33, 9},     {31, 1, 64},
    {6, 16, 2},  {64, 127, 65}, {100, 37, 129},  {33, 2, 1},
    {3, 65, 17}, {13, 17, 513}, {150, 40, 1030}, {145, 1030, 3},
};
#define NSHAPES (sizeof(shapes) / sizeof(shapes[0]))

Test(int8, every_shape_transpose_and_c_mode)
{
    static const int32_t alphas[] = {1, -3, 2147483647, -2147483647 - 1, 0, 7};
    static const int32_t betas[] = {1, -1, 5, -2147483647 - 1, 2147483647};
    gemm_buffer *buf = NULL;
    char why[512];
    int rv = gemm_buffer_alloc(g_client, 8 << 20, &buf);
    cr_assert_eq(rv, GEMM_OK, "gemm_buffer_alloc: %s", gemm_strerror(rv));
    unsigned idx = 0;
    for (size_t s = 0; s < NSHAPES; s++)
        for (int t = 0; t < 4; t++, idx++) {
            icase cs = {
                .m = shapes[s][0],
                .n = shapes[s][1],
                .k = shapes[s][2],
                .ta = t & 1,
                .tb = t >> 1,
                .alpha = alphas[idx % 6],
                .c = (enum c_mode)(idx % 4),
                .pad_a = idx % 3,
                .pad_b = (idx / 3) % 4,
                .pad_c = idx % 2 ? 5 : 0,
                .pad_d = (idx / 2) % 3,
                .base = idx % 5,
                .seed = 0x5eed + idx * 7919,
            };
            if (cs.c == C_SEPARATE || cs.c == C_INPLACE)
                cs.beta = betas[idx % 5];
            rv = run_case(buf, &cs, why, sizeof(why));
            cr_assert_eq(rv, GEMM_OK,
                         "%llux%llux%llu ta %d tb %d c_mode %d alpha %d beta "
                         "%d: %s",
                         (unsigned long long)cs.m, (unsigned long long)cs.n,
                         (unsigned long long)cs.k, cs.ta, cs.tb, cs.c, cs.alpha,
                         cs.beta, why);
        }
    gemm_buffer_free(buf);
}

/* A 1 x 1 x k product of rows of 127s: 16129 k passes 2^31 for k >=
 * 133144 and wraps, as does alpha times a large sum, and beta times C. */
Test(int8, overflow_wraps_modulo_2_32)
{
    const uint64_t k = 140000;
    gemm_buffer *buf = NULL;
    cr_assert_eq(gemm_buffer_alloc(g_client, 2 * k + 64, &buf), GEMM_OK);
    uint8_t *p = gemm_buffer_data(buf);
    memset(p, 127, 2 * k);
    int32_t *cd = (int32_t *)(p + 2 * k + 16);
    const struct {
        int32_t alpha, beta, c;
    } sc[] = {{1, 0, 0}, {-1, 0, 0}, {3, 0, 0}, {1, 2, 2000000000}};
    for (size_t i = 0; i < sizeof(sc) / sizeof(sc[0]); i++) {
        cd[0] = sc[i].c;
        gemm_op op;
        gemm_op_init(&op, 1, 1, k, GEMM_INT8, GEMM_INT32);
        op.trans_b = i % 2; /* a column of B either way */
        gemm_op_set_scalars(&op, sc[i].alpha, 0, sc[i].beta, 0);
        op.a = (gemm_matrix){buf, 0, k, 0};
        op.b = (gemm_matrix){buf, k, op.trans_b ? k : 1, 0};
        op.c = (gemm_matrix){buf, 2 * k + 16, 1, 0};
        op.d = op.c;
        int rv = gemm_run(g_client, &op, NULL);
        cr_assert_eq(rv, GEMM_OK, "%s (%s)", gemm_strerror(rv),
                     gemm_last_error_message());
        uint64_t want =
            (uint64_t)(int64_t)sc[i].alpha * 16129u * k +
            (uint64_t)(int64_t)sc[i].beta * (uint64_t)(int64_t)sc[i].c;
        cr_expect_eq(cd[0], (int32_t)(uint32_t)want, "case %zu: %d, want %d", i,
                     cd[0], (int32_t)(uint32_t)want);
    }
    cr_expect_eq((int64_t)16129 * (int64_t)k > INT32_MAX, 1,
                 "the sum itself passes int32");
    gemm_buffer_free(buf);
}

/* A tight 4x4x4 int8 GEMM at 0 (A), 16 (B), 32 (C) and 96 (D) of a fresh
 * buffer, A and B all 1 and C all 10; op set up with beta 0. */
static gemm_buffer *small_op(gemm_op *op)
{
    gemm_buffer *buf = NULL;
    cr_assert_eq(gemm_buffer_alloc(g_client, 4096, &buf), GEMM_OK);
    uint8_t *p = gemm_buffer_data(buf);
    memset(p, 1, 32);
    for (int i = 0; i < 16; i++)
        ((int32_t *)(p + 32))[i] = 10;
    gemm_op_init(op, 4, 4, 4, GEMM_INT8, GEMM_INT32);
    op->a = (gemm_matrix){buf, 0, 0, 0};
    op->b = (gemm_matrix){buf, 16, 0, 0};
    op->c = (gemm_matrix){buf, 32, 0, 0};
    op->d = (gemm_matrix){buf, 96, 0, 0};
    return buf;
}

/* The float scalars of gemm_op (no scalars64) carry small integers. */
Test(int8, float_scalars)
{
    gemm_op op;
    gemm_buffer *buf = small_op(&op);
    op.alpha = -2.0f;
    op.beta = 3.0f;
    int rv = gemm_run(g_client, &op, NULL);
    cr_assert_eq(rv, GEMM_OK, "%s (%s)", gemm_strerror(rv),
                 gemm_last_error_message());
    const int32_t *d = (const int32_t *)((char *)gemm_buffer_data(buf) + 96);
    for (int i = 0; i < 16; i++)
        cr_expect_eq(d[i], -2 * 4 + 3 * 10, "D[%d] = %d", i, d[i]);
    gemm_buffer_free(buf);
}

/* Runs op, expects rv and a message containing want. */
static void expect_refused(const gemm_op *op, int want_rv, const char *want)
{
    int rv = gemm_run(g_client, op, NULL);
    const char *msg = gemm_last_error_message();
    cr_expect_eq(rv, want_rv, "got %s (%d), want %s: %s", gemm_strerror(rv), rv,
                 gemm_strerror(want_rv), msg);
    cr_expect(strstr(msg, want) != NULL, "message '%s' lacks '%s'", msg, want);
}

Test(int8, refusals_name_the_fix)
{
    gemm_op op;
    gemm_buffer *buf = small_op(&op);
    uint8_t *p = gemm_buffer_data(buf);
    memset(p + 96, 0xee, 64);

    op.alpha = 0.5f;
    expect_refused(&op, GEMM_ERR_INVALID, "integers in");
    gemm_op_set_scalars(&op, 1.0, 0.0, 2147483648.0, 0.0);
    expect_refused(&op, GEMM_ERR_INVALID, "beta is");
    gemm_op_set_scalars(&op, 1.0, 1.0, 0.0, 0.0);
    expect_refused(&op, GEMM_ERR_INVALID, "complex");

    gemm_op_init(&op, 4, 4, 4, GEMM_INT8, GEMM_FP32);
    op.a = (gemm_matrix){buf, 0, 0, 0};
    op.b = (gemm_matrix){buf, 16, 0, 0};
    op.d = (gemm_matrix){buf, 96, 0, 0};
    expect_refused(&op, GEMM_ERR_DTYPE, "int32 C and D");
    op.ab_type = GEMM_INT32;
    op.cd_type = GEMM_INT32;
    expect_refused(&op, GEMM_ERR_DTYPE, "give int8 A and B");
    op.ab_type = GEMM_FP32;
    expect_refused(&op, GEMM_ERR_DTYPE, "for int8 A and B only");
    op.ab_type = GEMM_INT8;
    op.cd_type = GEMM_INT8;
    expect_refused(&op, GEMM_ERR_DTYPE, "set the C/D type to int32");

    op.cd_type = GEMM_INT32;
    op.precision = GEMM_PRECISION_TF32;
    expect_refused(&op, GEMM_ERR_INVALID, "fp32 inputs only");
    op.precision = GEMM_PRECISION_DEFAULT;
    op.trans_a = op.conj_a = true;
    expect_refused(&op, GEMM_ERR_INVALID, "complex types only");
    op.trans_a = op.conj_a = false;
    if (strcmp(tu_backend(), "cpu") == 0) {
        op.kernel = "openblas";
        expect_refused(&op, GEMM_ERR_UNSUPPORTED, "cpu-s8 has");
        op.kernel = "cpu-naive";
        expect_refused(&op, GEMM_ERR_UNSUPPORTED, "cpu-s8 has");
    }
    op.kernel = NULL;
    op.d.offset = 98; /* int32 D: 4-byte elements */
    expect_refused(&op, GEMM_ERR_ALIGN, "element size 4");
    op.d.offset = 96;

    /* zero dimensions are refused as for every type (the Python package
     * answers them without the daemon) */
    for (int z = 0; z < 3; z++) {
        gemm_op e = op;
        if (z == 0)
            e.m = 0;
        else if (z == 1)
            e.n = 0;
        else
            e.k = 0;
        expect_refused(&e, GEMM_ERR_DIMS, "must be in 1..");
    }
    for (int i = 0; i < 64; i++)
        cr_expect_eq(p[96 + i], 0xee, "a refused request wrote D");
    /* and the daemon goes on */
    cr_assert_eq(gemm_run(g_client, &op, NULL), GEMM_OK, "%s",
                 gemm_last_error_message());
    cr_expect_eq(((int32_t *)(p + 96))[0], 4);
    tu_assert_healthy(g_client);
    gemm_buffer_free(buf);
}

/* A resident int8 A (uploaded once, used transposed and not) and the
 * kernel listing. */
Test(int8, resident_tensor_and_listing)
{
    const uint64_t m = 24, k = 40, n = 9;
    gemm_buffer *buf = NULL;
    cr_assert_eq(gemm_buffer_alloc(g_client, 1 << 16, &buf), GEMM_OK);
    uint8_t *p = gemm_buffer_data(buf);
    uint64_t state = 99;
    fill8((int8_t *)p, m, k, k, &state);        /* A: m x k at 0 */
    fill8((int8_t *)p + 4096, k, n, n, &state); /* B: k x n */
    fill8((int8_t *)p + 8192, m, n, n, &state); /* B2: m x n (for A^T) */
    uint64_t id = 0;
    int rv = gemm_tensor_upload(g_client, &(gemm_matrix){buf, 0, k, 0}, m, k,
                                GEMM_INT8, &id);
    cr_assert_eq(rv, GEMM_OK, "upload: %s (%s)", gemm_strerror(rv),
                 gemm_last_error_message());
    memset(p, 0, m * k); /* the tensor is a copy */
    /* D = A B, then D2 = A^T B2 (k x n), A from the tensor both times */
    for (int t = 0; t < 2; t++) {
        gemm_op op;
        uint64_t om = t ? k : m, ok = t ? m : k;
        gemm_op_init(&op, om, n, ok, GEMM_INT8, GEMM_INT32);
        op.trans_a = t;
        op.a = (gemm_matrix){NULL, 0, 0, id};
        op.b = (gemm_matrix){buf, t ? 8192 : 4096, n, 0};
        op.d = (gemm_matrix){buf, 16384, n, 0};
        rv = gemm_run(g_client, &op, NULL);
        cr_assert_eq(rv, GEMM_OK, "%s (%s)", gemm_strerror(rv),
                     gemm_last_error_message());
        /* the reference from a fresh copy of A */
        int8_t a[24 * 40];
        state = 99;
        fill8(a, m, k, k, &state);
        const int8_t *b = (const int8_t *)p + (t ? 8192 : 4096);
        const int32_t *d = (const int32_t *)(p + 16384);
        for (uint64_t i = 0; i < om; i++)
            for (uint64_t q = 0; q < n; q++)
                cr_assert_eq(
                    d[i * n + q],
                    ref_elem(a, k, t, b, n, false, ok, i, q, 1, 0, NULL),
                    "t %d D[%llu][%llu]", t, (unsigned long long)i,
                    (unsigned long long)q);
    }
    cr_expect_eq(gemm_tensor_free(g_client, id), GEMM_OK);

    gemm_kernel_info *ks = NULL;
    size_t nk = 0;
    cr_assert_eq(gemm_list_kernels(g_client, &ks, &nk), GEMM_OK);
    bool int8_listed = false;
    for (size_t i = 0; i < nk; i++)
        if ((ks[i].ab_types & (1u << GEMM_INT8)) != 0) {
            int8_listed = true;
            cr_expect(ks[i].cd_types & (1u << GEMM_INT32), "%s", ks[i].name);
            cr_expect_eq(ks[i].transposes, 0xfu, "%s", ks[i].name);
        }
    cr_expect(int8_listed, "no kernel lists int8 inputs");
    gemm_kernel_info_free(ks);
    gemm_buffer_free(buf);
}

/* A strided batch of int8 GEMMs, one shared B. */
Test(int8, batch)
{
    const uint64_t m = 5, n = 7, k = 11, count = 4;
    gemm_buffer *buf = NULL;
    cr_assert_eq(gemm_buffer_alloc(g_client, 1 << 16, &buf), GEMM_OK);
    uint8_t *p = gemm_buffer_data(buf);
    uint64_t state = 5;
    fill8((int8_t *)p, count * m, k, k, &state); /* A_i at i * m * k */
    fill8((int8_t *)p + 4096, k, n, n, &state);  /* B */
    gemm_op op;
    gemm_op_init(&op, m, n, k, GEMM_INT8, GEMM_INT32);
    gemm_op_set_scalars(&op, -5, 0, 0, 0);
    op.a = (gemm_matrix){buf, 0, k, 0};
    op.b = (gemm_matrix){buf, 4096, n, 0};
    op.d = (gemm_matrix){buf, 8192, n, 0};
    gemm_batch b;
    gemm_batch_init(&b, &op);
    b.count = count;
    b.stride_a = m * k;
    b.stride_d = m * n * 4;
    int rv = gemm_batch_run(g_client, &b, NULL);
    cr_assert_eq(rv, GEMM_OK, "%s (%s)", gemm_strerror(rv),
                 gemm_last_error_message());
    for (uint64_t x = 0; x < count; x++) {
        const int8_t *a = (const int8_t *)p + x * m * k;
        const int32_t *d = (const int32_t *)(p + 8192 + x * m * n * 4);
        for (uint64_t i = 0; i < m; i++)
            for (uint64_t q = 0; q < n; q++)
                cr_assert_eq(d[i * n + q],
                             ref_elem(a, k, false, (const int8_t *)p + 4096, n,
                                      false, k, i, q, -5, 0, NULL),
                             "problem %llu D[%llu][%llu]",
                             (unsigned long long)x, (unsigned long long)i,
                             (unsigned long long)q);
    }
    gemm_buffer_free(buf);
}
