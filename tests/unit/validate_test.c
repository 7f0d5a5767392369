/*
 * validate_test.c: every rule of val_gemm_check(), one failing request per
 * rule, plus the shapes that must pass (transposes, lds, offsets, C == D).
 */
#include "validate.h"

#include <gemm/types.h>

#include <criterion/criterion.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

/* Fake buffers: id 1 of 1 MiB, id 2 of 4 KiB, and id 3, a second
 * registration of id 1's memory object (as when a client registers one
 * memfd twice); anything else unknown. */
static char buf1, buf2, buf3;

static void *lookup(void *arg, uint64_t id, size_t *size, uint64_t *object)
{
    (void)arg;
    if (id == 1 || id == 3) {
        *size = 1 << 20;
        *object = 100;
        return id == 1 ? &buf1 : &buf3;
    }
    if (id == 2) {
        *size = 4096;
        *object = 200;
        return &buf2;
    }
    return NULL;
}

/* One resident tensor: id 9, 16x16 fp32, ld 16. */
static char tensor9;

static void *tensors(void *arg, uint64_t id, val_tensor *out)
{
    (void)arg;
    if (id != 9)
        return NULL;
    *out = (val_tensor){.rows = 16, .cols = 16, .ld = 16, .dtype = GEMM_FP32};
    return &tensor9;
}

static const val_limits lim = {.max_dim = 1 << 16, .tensor_lookup = tensors};

/* A valid fp32 16x16x16 GEMM: A at 0, B at 4 KiB, C at 8 KiB, D at 12 KiB,
 * all in buffer 1. */
static val_gemm base(void)
{
    val_gemm g = {
        .m = 16,
        .n = 16,
        .k = 16,
        .ab_type = GEMM_FP32,
        .cd_type = GEMM_FP32,
        .alpha = 1,
        .beta = 0,
        .a = {.present = true, .buffer_id = 1, .offset = 0},
        .b = {.present = true, .buffer_id = 1, .offset = 4096},
        .c = {.present = true, .buffer_id = 1, .offset = 8192},
        .d = {.present = true, .buffer_id = 1, .offset = 12288},
    };
    return g;
}

static int check(const val_gemm *g, val_resolved *r)
{
    char msg[256] = "";
    int rv = val_gemm_check(g, &lim, lookup, NULL, r, msg, sizeof(msg));
    if (rv != GEMM_OK)
        cr_expect(msg[0] != '\0', "an error must come with a message");
    return rv;
}

#define EXPECT_RV(g, want)                                                     \
    do {                                                                       \
        val_resolved r_;                                                       \
        int rv_ = check(&(g), &r_);                                            \
        cr_expect_eq(rv_, (want), "got %s (%d), want %s (%d)",                 \
                     gemm_strerror(rv_), rv_, gemm_strerror(want), (want));    \
    } while (0)

Test(validate, valid_request_resolves)
{
    val_gemm g = base();
    val_resolved r;
    cr_assert_eq(check(&g, &r), GEMM_OK);
    cr_expect_eq(r.a.ld, 16);
    cr_expect_eq(r.a.extent, 16 * 16 * 4);
    cr_expect_eq(r.d.offset, 12288);
    cr_expect_not(r.has_c, "beta == 0: C is not read");
}

Test(validate, dtype_combinations)
{
    int types[] = {GEMM_BF16,      GEMM_FP16,       GEMM_FP32, GEMM_FP64,
                   GEMM_COMPLEX64, GEMM_COMPLEX128, GEMM_INT8, GEMM_INT32};
    for (int i = 0; i < 8; i++)
        for (int j = 0; j < 8; j++) {
            /* 16-bit A/B: any of the three narrow C/D; int8: int32;
             * int32 is no A/B type; else C/D = A/B */
            bool want = types[i] <= GEMM_FP16    ? types[j] <= GEMM_FP32
                        : types[i] == GEMM_INT8  ? types[j] == GEMM_INT32
                        : types[i] == GEMM_INT32 ? false
                                                 : types[j] == types[i];
            cr_expect_eq(val_dtypes_supported(types[i], types[j]), want,
                         "ab %d cd %d", types[i], types[j]);
        }
    val_gemm g = base();
    g.cd_type = GEMM_BF16;
    EXPECT_RV(g, GEMM_ERR_DTYPE);
    g = base();
    g.ab_type = 0;
    EXPECT_RV(g, GEMM_ERR_DTYPE);
    g = base();
    g.cd_type = 99;
    EXPECT_RV(g, GEMM_ERR_DTYPE);
}

Test(validate, dims_zero_or_too_large)
{
    val_gemm g = base();
    g.m = 0;
    EXPECT_RV(g, GEMM_ERR_DIMS);
    g = base();
    g.k = 0;
    EXPECT_RV(g, GEMM_ERR_DIMS);
    g = base();
    g.n = lim.max_dim + 1;
    EXPECT_RV(g, GEMM_ERR_DIMS);
}

Test(validate, unknown_buffer)
{
    val_gemm g = base();
    g.b.buffer_id = 77;
    EXPECT_RV(g, GEMM_ERR_NO_BUFFER);
    g = base();
    g.d.buffer_id = 0;
    EXPECT_RV(g, GEMM_ERR_NO_BUFFER);
}

Test(validate, missing_operand)
{
    val_gemm g = base();
    g.a.present = false;
    EXPECT_RV(g, GEMM_ERR_INVALID);
    g = base();
    g.beta = 0.5f;
    g.c.present = false;
    EXPECT_RV(g, GEMM_ERR_INVALID);
}

Test(validate, leading_dimension_too_small)
{
    val_gemm g = base();
    g.a.ld = 15;
    EXPECT_RV(g, GEMM_ERR_LD);
    /* transposed A is k x m: its rows have m elements */
    g = base();
    g.m = 8;
    g.trans_a = true;
    g.a.ld = 8;
    EXPECT_RV(g, GEMM_OK);
    g.a.ld = 7;
    EXPECT_RV(g, GEMM_ERR_LD);
}

Test(validate, misaligned_offset)
{
    val_gemm g = base();
    g.a.offset = 2; /* fp32 needs 4 */
    EXPECT_RV(g, GEMM_ERR_ALIGN);
    g = base();
    g.ab_type = GEMM_BF16;
    g.a.offset = 2; /* fine for 16-bit */
    EXPECT_RV(g, GEMM_OK);
    g.a.offset = 3;
    EXPECT_RV(g, GEMM_ERR_ALIGN);
}

Test(validate, bounds)
{
    val_gemm g = base();
    g.d.buffer_id = 2; /* 4 KiB: 16x16 fp32 (1 KiB) fits exactly at 3 KiB */
    g.d.offset = 3072;
    EXPECT_RV(g, GEMM_OK);
    g.d.offset = 3076;
    EXPECT_RV(g, GEMM_ERR_BOUNDS);
    g.d.offset = 3072;
    g.d.ld = 17;
    EXPECT_RV(g, GEMM_ERR_BOUNDS);
    /* transposes change the stored shape: B as n x k with n = 64 */
    g = base();
    g.n = 64;
    g.b.buffer_id = 2;
    g.b.offset = 0;
    g.d.offset = 65536;
    g.trans_b = true; /* 64 x 16 fp32 = 4096 bytes: fits */
    EXPECT_RV(g, GEMM_OK);
    g.k = 17; /* 64 x 17 does not */
    g.a.ld = 0;
    EXPECT_RV(g, GEMM_ERR_BOUNDS);
}

Test(validate, overflow_is_out_of_bounds)
{
    val_gemm g = base();
    g.a.ld = UINT64_MAX / 2;
    EXPECT_RV(g, GEMM_ERR_BOUNDS);
    g = base();
    g.a.offset = UINT64_MAX - 3;
    EXPECT_RV(g, GEMM_ERR_BOUNDS);
    g = base();
    val_limits big = {.max_dim = UINT64_MAX};
    g.m = UINT64_MAX / 3;
    val_resolved r;
    char msg[128];
    cr_expect_eq(val_gemm_check(&g, &big, lookup, NULL, &r, msg, sizeof(msg)),
                 GEMM_ERR_BOUNDS);
}

Test(validate, overlaps)
{
    val_gemm g = base();
    g.d.offset = 512; /* inside A (bytes 0..1023) */
    EXPECT_RV(g, GEMM_ERR_INVALID);
    g = base();
    g.d.offset = 4096 + 512; /* inside B */
    EXPECT_RV(g, GEMM_ERR_INVALID);
    g = base();
    g.beta = 1;
    g.c = g.d; /* in place: allowed */
    EXPECT_RV(g, GEMM_OK);
    g.c.offset = g.d.offset + 64; /* partly overlapping: not */
    EXPECT_RV(g, GEMM_ERR_INVALID);
}

Test(validate, overlap_through_a_second_registration)
{
    /* buffer 3 is buffer 1's memory object registered again: D there at
     * A's offset is D on top of A */
    val_gemm g = base();
    g.d.buffer_id = 3;
    g.d.offset = 512;
    EXPECT_RV(g, GEMM_ERR_INVALID);
    g.d.offset = 4096 + 512; /* on top of B */
    EXPECT_RV(g, GEMM_ERR_INVALID);
    g.d.offset = 65536; /* clear of both */
    EXPECT_RV(g, GEMM_OK);
    g.beta = 1; /* C in buffer 1 is D's memory through buffer 3 */
    g.c.buffer_id = 1;
    g.c.offset = 65536 + 64;
    EXPECT_RV(g, GEMM_ERR_INVALID);
}

Test(validate, beta_zero_ignores_c)
{
    val_gemm g = base();
    g.c.buffer_id = 12345; /* bogus, but never read */
    EXPECT_RV(g, GEMM_OK);
    g.beta = 2;
    EXPECT_RV(g, GEMM_ERR_NO_BUFFER);
}

Test(validate, resident_tensors)
{
    val_gemm g = base();
    g.b.tensor_id = 9; /* B from the tensor: buffer fields ignored */
    g.b.buffer_id = 0;
    val_resolved r;
    cr_assert_eq(check(&g, &r), GEMM_OK);
    cr_expect(r.b.tensor);
    cr_expect_eq(r.b.handle, &tensor9);
    cr_expect_eq(r.b.ld, 16);
    g.b.tensor_id = 10;
    EXPECT_RV(g, GEMM_ERR_NO_BUFFER);
    g = base();
    g.a.tensor_id = 9;
    g.k = 8; /* A is 16x8 as stored, the tensor 16x16 */
    EXPECT_RV(g, GEMM_ERR_DIMS);
    g = base();
    g.ab_type = GEMM_BF16;
    g.a.tensor_id = 9; /* fp32 tensor as a bf16 operand */
    EXPECT_RV(g, GEMM_ERR_DTYPE);
    g = base();
    g.d.tensor_id = 9; /* D must be a buffer */
    EXPECT_RV(g, GEMM_ERR_INVALID);
    g = base();
    g.beta = 1;
    g.c.tensor_id = 9; /* C from a tensor, D a buffer */
    EXPECT_RV(g, GEMM_OK);
}

Test(validate, operand_check)
{
    val_operand op = {.present = true, .buffer_id = 2, .offset = 0};
    val_matrix m;
    char msg[128];
    cr_expect_eq(val_operand_check("src", &op, 32, 32, GEMM_FP32, &lim, lookup,
                                   NULL, &m, msg, sizeof(msg)),
                 GEMM_OK);
    cr_expect_eq(val_operand_check("src", &op, 33, 32, GEMM_FP32, &lim, lookup,
                                   NULL, &m, msg, sizeof(msg)),
                 GEMM_ERR_BOUNDS);
    cr_expect_eq(val_operand_check("src", &op, 0, 32, GEMM_FP32, &lim, lookup,
                                   NULL, &m, msg, sizeof(msg)),
                 GEMM_ERR_DIMS);
    cr_expect_eq(val_operand_check("src", &op, 4, 4, 0, &lim, lookup, NULL, &m,
                                   msg, sizeof(msg)),
                 GEMM_ERR_DTYPE);
}

Test(validate, kernel_names)
{
    char msg[256];
    static const char *const good[] = {
        "naive",
        "wgmma-basic",
        "ws128x256",
        "cpu_naive.v2",
        "tf32+3x",
        "a",
        "abcdefghijklmnopqrstuvwxyz01234", /* 31 bytes */
    };
    for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++)
        cr_expect_eq(val_kernel_name(good[i], msg, sizeof(msg)), GEMM_OK,
                     "'%s': %s", good[i], msg);
    cr_expect_eq(val_kernel_name(NULL, msg, sizeof(msg)), GEMM_OK,
                 "absent: the backend picks");
    static const char *const bad[] = {
        "",
        "abcdefghijklmnopqrstuvwxyz012345", /* 32 bytes */
        "has space",
        "semi;colon",
        "slash/",
        "quote'",
        "new\nline",
        "\x7f",
        "\xc3\xa9t\xc3\xa9",
        "percent%s",
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        msg[0] = '\0';
        cr_expect_eq(val_kernel_name(bad[i], msg, sizeof(msg)),
                     GEMM_ERR_INVALID, "bad name #%zu accepted", i);
        cr_expect(msg[0] != '\0', "bad name #%zu: no message", i);
        /* the message never echoes a byte outside the name charset */
        for (const char *p = msg; *p; p++)
            cr_expect((unsigned char)*p >= 0x20 && (unsigned char)*p < 0x7f,
                      "bad name #%zu: message has byte %#x", i,
                      (unsigned char)*p);
    }
    char huge[4096];
    memset(huge, 'k', sizeof(huge) - 1);
    huge[sizeof(huge) - 1] = '\0';
    cr_expect_eq(val_kernel_name(huge, msg, sizeof(msg)), GEMM_ERR_INVALID);
}

Test(validate, precisions)
{
    char msg[256];
    for (int p = 0; p <= 2; p++)
        cr_expect_eq(val_precision(GEMM_FP32, p, msg, sizeof(msg)), GEMM_OK,
                     "fp32 with precision %d: %s", p, msg);
    cr_expect_eq(val_precision(GEMM_FP32, 3, msg, sizeof(msg)),
                 GEMM_ERR_INVALID);
    cr_expect_eq(val_precision(GEMM_FP32, -1, msg, sizeof(msg)),
                 GEMM_ERR_INVALID);
    cr_expect_eq(val_precision(GEMM_FP32, 1 << 30, msg, sizeof(msg)),
                 GEMM_ERR_INVALID);
    cr_expect_eq(
        val_precision(GEMM_BF16, GEMM_PRECISION_DEFAULT, msg, sizeof(msg)),
        GEMM_OK);
    cr_expect_eq(
        val_precision(GEMM_BF16, GEMM_PRECISION_TF32, msg, sizeof(msg)),
        GEMM_ERR_INVALID);
    cr_expect(strstr(msg, "fp32 inputs only") != NULL, "message: %s", msg);
    cr_expect_eq(
        val_precision(GEMM_FP16, GEMM_PRECISION_FP32, msg, sizeof(msg)),
        GEMM_ERR_INVALID);
}

Test(validate, gemm_checks_kernel_and_precision)
{
    val_gemm g = base();
    g.precision = GEMM_PRECISION_TF32;
    g.kernel = "openblas";
    EXPECT_RV(g, GEMM_OK);
    g.kernel = "bad name";
    EXPECT_RV(g, GEMM_ERR_INVALID);
    g = base();
    g.precision = 7;
    EXPECT_RV(g, GEMM_ERR_INVALID);
    g = base();
    g.ab_type = GEMM_BF16;
    g.precision = GEMM_PRECISION_TF32;
    EXPECT_RV(g, GEMM_ERR_INVALID);
    g.precision = GEMM_PRECISION_DEFAULT;
    EXPECT_RV(g, GEMM_OK);
}

/* Ozaki-II moduli: 0 anywhere; 2..20 on fp64 inputs, and on fp32 inputs
 * with fp32 C/D at fp32 precision; the messages name the fix. */
Test(validate, moduli)
{
    char msg[256];
    int types[] = {GEMM_BF16,      GEMM_FP16,       GEMM_FP32, GEMM_FP64,
                   GEMM_COMPLEX64, GEMM_COMPLEX128, GEMM_INT8};
    for (size_t i = 0; i < sizeof(types) / sizeof(types[0]); i++)
        cr_expect_eq(val_moduli(types[i], types[i], 0, 0, msg, sizeof(msg)),
                     GEMM_OK, "%s with moduli 0: %s", gemm_dtype_name(types[i]),
                     msg);
    for (uint32_t n = GEMM_OZ_MODULI_MIN; n <= GEMM_OZ_MODULI_MAX; n++) {
        cr_expect_eq(val_moduli(GEMM_FP64, GEMM_FP64, 0, n, msg, sizeof(msg)),
                     GEMM_OK, "fp64 with moduli %u: %s", n, msg);
        cr_expect_eq(val_moduli(GEMM_FP32, GEMM_FP32, GEMM_PRECISION_FP32, n,
                                msg, sizeof(msg)),
                     GEMM_OK, "fp32 with moduli %u: %s", n, msg);
    }
    uint32_t bad[] = {1, GEMM_OZ_MODULI_MAX + 1, 64, UINT32_MAX};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        msg[0] = '\0';
        cr_expect_eq(
            val_moduli(GEMM_FP64, GEMM_FP64, 0, bad[i], msg, sizeof(msg)),
            GEMM_ERR_INVALID, "fp64 with moduli %u", bad[i]);
        cr_expect(strstr(msg, "2..20") != NULL, "message: %s", msg);
    }
    for (size_t i = 0; i < sizeof(types) / sizeof(types[0]); i++) {
        if (types[i] == GEMM_FP64 || types[i] == GEMM_FP32)
            continue;
        msg[0] = '\0';
        cr_expect_eq(val_moduli(types[i], types[i], 0, 14, msg, sizeof(msg)),
                     GEMM_ERR_INVALID, "%s with moduli 14",
                     gemm_dtype_name(types[i]));
        cr_expect(strstr(msg, "fp64 and fp32 inputs") != NULL &&
                      strstr(msg, "leave it 0") != NULL &&
                      strstr(msg, gemm_dtype_name(types[i])) != NULL,
                  "message: %s", msg);
    }
    /* fp32: only where the emulation can serve it */
    msg[0] = '\0';
    cr_expect_eq(val_moduli(GEMM_FP32, GEMM_BF16, 0, 7, msg, sizeof(msg)),
                 GEMM_ERR_INVALID);
    cr_expect(strstr(msg, "make C and D fp32") != NULL, "message: %s", msg);
    msg[0] = '\0';
    cr_expect_eq(val_moduli(GEMM_FP32, GEMM_FP32, GEMM_PRECISION_TF32, 7, msg,
                            sizeof(msg)),
                 GEMM_ERR_INVALID);
    cr_expect(strstr(msg, "precision") != NULL, "message: %s", msg);
}

Test(validate, gemm_checks_moduli)
{
    val_gemm g = base();
    g.ab_type = g.cd_type = GEMM_FP64;
    g.moduli = 14;
    EXPECT_RV(g, GEMM_OK);
    g.kernel = "openblas"; /* a kernel that does not emulate: the backend's
                              call */
    EXPECT_RV(g, GEMM_OK);
    g.kernel = NULL;
    g.moduli = 1;
    EXPECT_RV(g, GEMM_ERR_INVALID);
    g.moduli = 21;
    EXPECT_RV(g, GEMM_ERR_INVALID);
    g = base(); /* fp32 with fp32 C/D: the emulation's count */
    g.moduli = 7;
    EXPECT_RV(g, GEMM_OK);
    g.precision = GEMM_PRECISION_TF32;
    EXPECT_RV(g, GEMM_ERR_INVALID);
    g.precision = GEMM_PRECISION_DEFAULT;
    g.moduli = 0;
    EXPECT_RV(g, GEMM_OK);
    g.ab_type = g.cd_type = GEMM_COMPLEX128;
    g.moduli = 14;
    EXPECT_RV(g, GEMM_ERR_INVALID);
}

/* The wide types: fp64, complex64 and complex128 with C/D of their own
 * type; offsets in multiples of their element size; extents by it. */
Test(validate, wide_types)
{
    val_gemm g = base();
    g.ab_type = g.cd_type = GEMM_FP64;
    val_resolved r;
    cr_assert_eq(check(&g, &r), GEMM_OK);
    cr_expect_eq(r.a.esize, 8);
    cr_expect_eq(r.a.extent, 16 * 16 * 8);
    g.cd_type = GEMM_FP32;
    EXPECT_RV(g, GEMM_ERR_DTYPE);
    g = base();
    g.ab_type = g.cd_type = GEMM_COMPLEX128;
    cr_assert_eq(check(&g, &r), GEMM_OK);
    cr_expect_eq(r.d.extent, 16 * 16 * 16);
    g.a.offset = 8; /* half a complex128 */
    EXPECT_RV(g, GEMM_ERR_ALIGN);
    g.a.offset = 16;
    EXPECT_RV(g, GEMM_OK);
    g = base();
    g.ab_type = GEMM_COMPLEX64;
    g.cd_type = GEMM_COMPLEX128;
    EXPECT_RV(g, GEMM_ERR_DTYPE);
    g.cd_type = GEMM_COMPLEX64;
    g.d.buffer_id = 2; /* 4 KiB: 16x16 complex64 is 2 KiB */
    g.d.offset = 2048;
    EXPECT_RV(g, GEMM_OK);
    g.d.offset = 2056;
    EXPECT_RV(g, GEMM_ERR_BOUNDS);
    g = base();
    g.ab_type = g.cd_type = GEMM_FP64;
    g.precision = GEMM_PRECISION_TF32;
    EXPECT_RV(g, GEMM_ERR_INVALID);
}

/* Conjugate transposes: complex types only, and only with the transpose;
 * the message says which rule. */
Test(validate, conjugate_rules)
{
    char msg[256];
    val_gemm g = base();
    g.ab_type = g.cd_type = GEMM_COMPLEX64;
    g.trans_a = g.conj_a = true;
    g.trans_b = g.conj_b = true;
    EXPECT_RV(g, GEMM_OK);
    g.trans_b = false; /* conj_b alone */
    cr_expect_eq(val_ops_scalars(&g, msg, sizeof(msg)), GEMM_ERR_INVALID);
    cr_expect(strstr(msg, "conj_b without trans_b") != NULL, "%s", msg);
    EXPECT_RV(g, GEMM_ERR_INVALID);
    g = base(); /* fp32 */
    g.trans_a = g.conj_a = true;
    cr_expect_eq(val_ops_scalars(&g, msg, sizeof(msg)), GEMM_ERR_INVALID);
    cr_expect(strstr(msg, "complex types only") != NULL, "%s", msg);
    EXPECT_RV(g, GEMM_ERR_INVALID);
    g.ab_type = g.cd_type = GEMM_FP64;
    EXPECT_RV(g, GEMM_ERR_INVALID);
    g.ab_type = g.cd_type = GEMM_COMPLEX128;
    EXPECT_RV(g, GEMM_OK);
}

/* Imaginary scalars only on complex types; beta's imaginary part alone
 * makes C read (and required). */
Test(validate, complex_scalars)
{
    char msg[256];
    val_gemm g = base();
    g.alpha_im = 0.5;
    cr_expect_eq(val_ops_scalars(&g, msg, sizeof(msg)), GEMM_ERR_INVALID);
    cr_expect(strstr(msg, "alpha has an imaginary part") != NULL, "%s", msg);
    EXPECT_RV(g, GEMM_ERR_INVALID);
    g.ab_type = g.cd_type = GEMM_FP64;
    EXPECT_RV(g, GEMM_ERR_INVALID);
    g.ab_type = g.cd_type = GEMM_COMPLEX64;
    EXPECT_RV(g, GEMM_OK);
    g = base();
    g.ab_type = g.cd_type = GEMM_COMPLEX128;
    g.beta = 0.0;
    g.beta_im = -1.0;
    val_resolved r;
    cr_assert_eq(check(&g, &r), GEMM_OK);
    cr_expect(r.has_c, "beta = -i: C is read");
    g.c.present = false;
    EXPECT_RV(g, GEMM_ERR_INVALID);
    g.beta_im = 0.0;
    cr_assert_eq(check(&g, &r), GEMM_OK);
    cr_expect_not(r.has_c);
}

/* A valid int8 16x16x16 GEMM (int32 C and D) in buffer 1. */
static val_gemm base_s8(void)
{
    val_gemm g = base();
    g.ab_type = GEMM_INT8;
    g.cd_type = GEMM_INT32;
    return g;
}

/* Refused with rv and a message that contains want. */
static void expect_msg(const val_gemm *g, int rv, const char *want)
{
    val_resolved r;
    char msg[256] = "";
    int got = val_gemm_check(g, &lim, lookup, NULL, &r, msg, sizeof(msg));
    cr_expect_eq(got, rv, "got %s (%d), want %s: %s", gemm_strerror(got), got,
                 gemm_strerror(rv), msg);
    cr_expect(strstr(msg, want) != NULL, "message '%s' lacks '%s'", msg, want);
}

Test(validate, int8_resolves_every_transpose)
{
    for (int t = 0; t < 4; t++) {
        val_gemm g = base_s8();
        g.trans_a = t & 1;
        g.trans_b = t >> 1;
        g.alpha = -7;
        g.beta = 2147483647.0;
        val_resolved r;
        cr_assert_eq(check(&g, &r), GEMM_OK, "transposes %d", t);
        cr_expect_eq(r.a.esize, 1);
        cr_expect_eq(r.a.extent, 16 * 16, "A: 256 bytes of int8");
        cr_expect_eq(r.d.esize, 4);
        cr_expect_eq(r.d.extent, 16 * 16 * 4);
        cr_expect(r.has_c);
    }
    val_gemm g = base_s8();
    g.a.offset = 3; /* int8: any byte */
    g.a.ld = 17;
    g.beta = INT32_MIN;
    val_resolved r;
    cr_expect_eq(check(&g, &r), GEMM_OK);
}

Test(validate, int8_type_combinations_name_the_fix)
{
    val_gemm g = base_s8();
    g.cd_type = GEMM_FP32;
    expect_msg(&g, GEMM_ERR_DTYPE, "int32 C and D");
    g = base_s8();
    g.cd_type = GEMM_INT8;
    expect_msg(&g, GEMM_ERR_DTYPE, "set the C/D type to int32");
    g = base_s8();
    g.ab_type = GEMM_INT32;
    expect_msg(&g, GEMM_ERR_DTYPE, "give int8 A and B");
    g = base();
    g.cd_type = GEMM_INT32;
    expect_msg(&g, GEMM_ERR_DTYPE, "for int8 A and B only");
    g = base();
    g.ab_type = GEMM_BF16;
    g.cd_type = GEMM_INT8;
    expect_msg(&g, GEMM_ERR_DTYPE, "for int8 A and B only");
}

Test(validate, int8_scalars_are_int32_integers)
{
    const double bad[] = {0.5,      -1.25, 2147483648.0, -2147483649.0,
                          INFINITY, NAN,   1e300};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        val_gemm g = base_s8();
        g.alpha = bad[i];
        expect_msg(&g, GEMM_ERR_INVALID, "alpha is");
        g = base_s8();
        g.beta = bad[i];
        expect_msg(&g, GEMM_ERR_INVALID, "integers in");
    }
    val_gemm g = base_s8();
    g.alpha_im = 1;
    EXPECT_RV(g, GEMM_ERR_INVALID);
    g = base_s8();
    g.alpha = 0; /* alpha 0, beta 0: D = 0, still valid */
    EXPECT_RV(g, GEMM_OK);
}

Test(validate, int8_other_rules)
{
    val_gemm g = base_s8();
    g.precision = GEMM_PRECISION_TF32;
    EXPECT_RV(g, GEMM_ERR_INVALID);
    g = base_s8();
    g.trans_a = g.conj_a = true;
    expect_msg(&g, GEMM_ERR_INVALID, "complex types only");
    g = base_s8();
    g.d.offset = 12288 + 2; /* int32 D: 4-byte elements */
    EXPECT_RV(g, GEMM_ERR_ALIGN);
    g = base_s8();
    g.m = 0;
    EXPECT_RV(g, GEMM_ERR_DIMS);
    g = base_s8();
    g.k = 0;
    EXPECT_RV(g, GEMM_ERR_DIMS);
    g = base_s8();
    g.b.buffer_id = 2; /* 4 KiB */
    g.b.offset = 4096 - 255;
    EXPECT_RV(g, GEMM_ERR_BOUNDS);
    g.b.offset = 4096 - 256;
    EXPECT_RV(g, GEMM_OK);
}
