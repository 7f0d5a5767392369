/*
 * tensor_test.c: resident tensors. A matrix uploaded once (gemm_tensor_upload)
 * serves as A, B or C of later GEMMs with the same result as from a buffer;
 * the tensor belongs to its connection (another cannot use or free it),
 * shape and type mismatches are refused, D cannot be a tensor, and freeing
 * or disconnecting releases it (status `tensors` goes back down).
 */
#include "util/daemon.h"
#include "util/data.h"

#include <criterion/criterion.h>

#include <stdlib.h>
#include <string.h>

TestSuite(tensor, .init = fixture_setup, .fini = fixture_teardown,
          .timeout = 60);

static uint32_t tensors_now(gemm_client *c)
{
    gemm_status st;
    int rv = gemm_get_status(c, &st);
    cr_assert_eq(rv, GEMM_OK, "status: %s", gemm_strerror(rv));
    return st.tensors;
}

static uint32_t wait_tensors(gemm_client *c, uint32_t want)
{
    double until = tu_now() + 5.0;
    uint32_t n = tensors_now(c);
    while (n != want && tu_now() < until) {
        tu_sleep_ms(10);
        n = tensors_now(c);
    }
    return n;
}

/* Runs op, compares D with the fp64 reference over the given host copies. */
static void check_result(const gemm_op *op, const void *a, const void *b,
                         const void *c, const void *d)
{
    double *ref = malloc(op->m * op->n * sizeof(double));
    double *scale = malloc(op->m * op->n * sizeof(double));
    char why[512];
    cr_assert(ref && scale);
    tu_ref_gemm(op, a, b, c, ref, scale);
    cr_expect(tu_compare(op, d, ref, scale, why, sizeof(why)), "%s", why);
    free(ref);
    free(scale);
}

/* For each dtype combination and each operand role: a GEMM with that
 * operand resident gives the reference result. */
Test(tensor, resident_operands_match_reference)
{
    static const gemm_dtype ab[] = {GEMM_BF16, GEMM_FP16, GEMM_FP32};
    uint64_t seed = 7;
    for (int t = 0; t < 3; t++) {
        for (int role = 0; role < 3; role++) { /* A, B, C resident */
            gemm_op op;
            gemm_dtype cd = ab[t]; /* 16-bit out for 16-bit in: C too */
            gemm_op_init(&op, 37, 53, 29, ab[t], cd);
            op.trans_a = role == 1;
            op.trans_b = role == 0;
            op.beta = role == 2 ? 0.5f : 0.0f;
            gemm_buffer *buf;
            int rv = gemm_buffer_alloc(g_client, 1 << 20, &buf);
            cr_assert_eq(rv, GEMM_OK, "alloc: %s", gemm_strerror(rv));
            char *base = gemm_buffer_data(buf);
            size_t ar, ac, ald, br, bc, bld, cr_, cc, cld;
            op.a = (gemm_matrix){buf, 0, 0, 0};
            op.b = (gemm_matrix){buf, 65536, 0, 0};
            op.c = (gemm_matrix){buf, 131072, 0, 0};
            op.d = (gemm_matrix){buf, 196608, 0, 0};
            tu_shape(&op, 'a', &ar, &ac, &ald);
            tu_shape(&op, 'b', &br, &bc, &bld);
            tu_shape(&op, 'c', &cr_, &cc, &cld);
            tu_fill(base, ab[t], ar, ac, ald, &seed);
            tu_fill(base + 65536, ab[t], br, bc, bld, &seed);
            tu_fill(base + 131072, cd, cr_, cc, cld, &seed);
            uint64_t tid = 0;
            gemm_matrix *m = role == 0 ? &op.a : role == 1 ? &op.b : &op.c;
            size_t rows = role == 0 ? ar : role == 1 ? br : cr_;
            size_t cols = role == 0 ? ac : role == 1 ? bc : cc;
            rv = gemm_tensor_upload(g_client, m, rows, cols,
                                    role == 2 ? cd : ab[t], &tid);
            cr_assert_eq(rv, GEMM_OK, "upload: %s: %s", gemm_strerror(rv),
                         gemm_last_error_message());
            cr_assert_neq(tid, 0);
            /* the buffer copy may change now: the tensor is a copy */
            void *saved = malloc(65536);
            memcpy(saved, base + m->offset, 65536);
            memset(base + m->offset, 0x7f, 65536);
            m->tensor = tid;
            rv = gemm_run(g_client, &op, NULL);
            cr_assert_eq(rv, GEMM_OK, "gemm with %c resident: %s: %s",
                         "ABC"[role], gemm_strerror(rv),
                         gemm_last_error_message());
            memcpy(base + m->offset, saved, 65536);
            free(saved);
            check_result(&op, base, base + 65536, base + 131072, base + 196608);
            cr_expect_eq(gemm_tensor_free(g_client, tid), GEMM_OK);
            cr_expect_eq(gemm_tensor_free(g_client, tid), GEMM_ERR_NO_BUFFER,
                         "a freed tensor is gone");
            gemm_buffer_free(buf);
        }
    }
    cr_expect_eq(wait_tensors(g_client, 0), 0);
}

Test(tensor, refusals_and_ownership)
{
    gemm_buffer *buf;
    uint64_t seed = 3, tid;
    int rv = gemm_buffer_alloc(g_client, 1 << 16, &buf);
    cr_assert_eq(rv, GEMM_OK);
    char *base = gemm_buffer_data(buf);
    tu_fill(base, GEMM_FP16, 16, 16, 16, &seed);
    gemm_matrix src = {buf, 0, 0, 0};
    cr_assert_eq(gemm_tensor_upload(g_client, &src, 16, 16, GEMM_FP16, &tid),
                 GEMM_OK);
    cr_expect_eq(tensors_now(g_client), 1);

    /* out of the source buffer's bounds */
    uint64_t bad;
    cr_expect_eq(
        gemm_tensor_upload(g_client, &src, 1000, 1000, GEMM_FP16, &bad),
        GEMM_ERR_BOUNDS);
    cr_expect_eq(gemm_tensor_upload(g_client, &src, 0, 16, GEMM_FP16, &bad),
                 GEMM_ERR_DIMS);

    gemm_op op;
    gemm_op_init(&op, 16, 16, 16, GEMM_FP16, GEMM_FP32);
    op.a = (gemm_matrix){.tensor = tid};
    op.b = (gemm_matrix){buf, 0, 0, 0};
    op.d = (gemm_matrix){buf, 8192, 0, 0};
    cr_expect_eq(gemm_run(g_client, &op, NULL), GEMM_OK, "%s",
                 gemm_last_error_message());
    op.k = 8; /* A is now 16x8: the 16x16 tensor does not fit */
    cr_expect_eq(gemm_run(g_client, &op, NULL), GEMM_ERR_DIMS);
    op.k = 16;
    op.ab_type = GEMM_BF16; /* the tensor holds fp16 */
    cr_expect_eq(gemm_run(g_client, &op, NULL), GEMM_ERR_DTYPE);
    op.ab_type = GEMM_FP16;
    op.a.tensor = tid ^ 1; /* not a tensor of ours */
    cr_expect_eq(gemm_run(g_client, &op, NULL), GEMM_ERR_NO_BUFFER);
    op.a.tensor = tid;

    /* another connection can neither use nor free it */
    gemm_client *other = tu_client(&g_gemmd, 10000);
    gemm_buffer *obuf;
    cr_assert_eq(gemm_buffer_alloc(other, 1 << 16, &obuf), GEMM_OK);
    gemm_op theirs = op;
    theirs.b = (gemm_matrix){obuf, 0, 0, 0};
    theirs.d = (gemm_matrix){obuf, 8192, 0, 0};
    cr_expect_eq(gemm_run(other, &theirs, NULL), GEMM_ERR_NO_BUFFER);
    cr_expect_eq(gemm_tensor_free(other, tid), GEMM_ERR_NO_BUFFER);
    cr_expect_eq(gemm_run(g_client, &op, NULL), GEMM_OK,
                 "the owner's tensor survived: %s", gemm_last_error_message());

    /* the other connection's own tensor goes away with it */
    uint64_t otid;
    gemm_matrix osrc = {obuf, 0, 0, 0};
    cr_assert_eq(gemm_tensor_upload(other, &osrc, 8, 8, GEMM_FP32, &otid),
                 GEMM_OK);
    cr_expect_eq(tensors_now(g_client), 2);
    gemm_buffer_free(obuf);
    gemm_client_close(other);
    cr_expect_eq(wait_tensors(g_client, 1), 1,
                 "disconnecting frees the client's tensors");
    cr_expect_eq(gemm_tensor_free(g_client, tid), GEMM_OK);
    cr_expect_eq(wait_tensors(g_client, 0), 0);
    gemm_buffer_free(buf);
    tu_assert_healthy(g_client);
}
