/*
 * validate_blas3_test.c: the rules of val_blas3_check(), one failing
 * request per rule (each message naming the reference argument), and the
 * shapes that must pass: every routine with its stored shapes, the
 * operands it reads and the one it writes.
 */
#include "validate_blas3.h"

#include <gemm/types.h>

#include <criterion/criterion.h>
#include <stdint.h>
#include <string.h>

/* Fake buffers: id 1 of 1 MiB (object 100), id 2 of 4 KiB (object 200). */
static char buf1, buf2;

static void *lookup(void *arg, uint64_t id, size_t *size, uint64_t *object)
{
    (void)arg;
    if (id == 1) {
        *size = 1 << 20;
        *object = 100;
        return &buf1;
    }
    if (id == 2) {
        *size = 4096;
        *object = 200;
        return &buf2;
    }
    return NULL;
}

static const val_limits lim = {.max_dim = 1 << 16};

/* A valid request of routine r: m 8, n 16, k 4, operands 64 KiB apart in
 * buffer 1. */
static val_blas3 base(int r, int dtype)
{
    val_blas3 g = {
        .routine = r,
        .dtype = dtype,
        .m = 8,
        .n = 16,
        .k = 4,
        .alpha = 1,
        .a = {.present = true, .buffer_id = 1, .offset = 0},
        .b = {.present = true, .buffer_id = 1, .offset = 64 << 10},
        .c = {.present = true, .buffer_id = 1, .offset = 128 << 10},
    };
    return g;
}

/* Checks g; when want is not GEMM_OK, that the message contains needle. */
static void expect(const val_blas3 *g, int want, const char *needle)
{
    val_blas3_resolved res;
    char msg[512] = "";
    int rv = val_blas3_check(g, &lim, lookup, NULL, &res, msg, sizeof(msg));
    cr_assert_eq(rv, want, "got %s, want %s: %s", gemm_strerror(rv),
                 gemm_strerror(want), msg);
    if (want != GEMM_OK)
        cr_assert(strstr(msg, needle) != NULL, "'%s' lacks '%s'", msg, needle);
}

Test(validate_blas3, shapes_that_pass)
{
    val_blas3_resolved res;
    char msg[256];
    val_blas3 g = base(VAL_SYMM, GEMM_FP64);
    cr_assert_eq(val_blas3_check(&g, &lim, lookup, NULL, &res, msg, 256),
                 GEMM_OK, "%s", msg);
    cr_assert(res.a.rows == 8 && res.a.cols == 8); /* left: m x m */
    cr_assert(res.has_b && res.b.rows == 8 && res.b.cols == 16);
    cr_assert(res.has_c && !res.reads_out);
    g.right = true;
    g.beta = 2;
    cr_assert_eq(val_blas3_check(&g, &lim, lookup, NULL, &res, msg, 256),
                 GEMM_OK, "%s", msg);
    cr_assert(res.a.rows == 16 && res.reads_out); /* right: n x n */
    g = base(VAL_HERK, GEMM_COMPLEX64);
    g.trans = VAL_OP_C;
    cr_assert_eq(val_blas3_check(&g, &lim, lookup, NULL, &res, msg, 256),
                 GEMM_OK, "%s", msg);
    cr_assert(res.a.rows == 4 && res.a.cols == 16); /* k x n */
    cr_assert(!res.has_b && res.c.rows == 16 && res.c.cols == 16);
    g = base(VAL_SYR2K, GEMM_FP32);
    cr_assert_eq(val_blas3_check(&g, &lim, lookup, NULL, &res, msg, 256),
                 GEMM_OK, "%s", msg);
    cr_assert(res.b.rows == 16 && res.b.cols == 4); /* as A: n x k */
    g = base(VAL_TRSM, GEMM_COMPLEX128);
    g.trans = VAL_OP_C;
    g.unit = true;
    g.c.present = false; /* unused */
    cr_assert_eq(val_blas3_check(&g, &lim, lookup, NULL, &res, msg, 256),
                 GEMM_OK, "%s", msg);
    cr_assert(res.has_b && res.reads_out && !res.has_c);
    cr_assert(res.b.rows == 8 && res.b.cols == 16);
}

Test(validate_blas3, routine_and_type)
{
    val_blas3 g = base(0, GEMM_FP64);
    expect(&g, GEMM_ERR_UNSUPPORTED, "unknown routine 0");
    g.routine = 9;
    expect(&g, GEMM_ERR_UNSUPPORTED, "unknown routine 9");
    g = base(VAL_HEMM, GEMM_FP64);
    expect(&g, GEMM_ERR_DTYPE, "DHEMM");
    g = base(VAL_SYRK, GEMM_BF16);
    expect(&g, GEMM_ERR_DTYPE, "takes fp32, fp64, c64 or c128");
}

Test(validate_blas3, trans_rules)
{
    val_blas3 g = base(VAL_SYRK, GEMM_FP64);
    g.trans = VAL_OP_C;
    expect(&g, GEMM_ERR_INVALID, "DSYRK: parameter 2 (TRANS)");
    g = base(VAL_SYR2K, GEMM_COMPLEX64);
    g.trans = VAL_OP_C;
    expect(&g, GEMM_ERR_INVALID, "CSYR2K: parameter 2 (TRANS)");
    g = base(VAL_HER2K, GEMM_COMPLEX128);
    g.trans = VAL_OP_T;
    expect(&g, GEMM_ERR_INVALID, "ZHER2K: parameter 2 (TRANS)");
    g = base(VAL_TRMM, GEMM_FP32);
    g.trans = 7;
    expect(&g, GEMM_ERR_INVALID, "STRMM: parameter 3 (TRANSA)");
    g = base(VAL_SYMM, GEMM_FP32);
    g.trans = VAL_OP_T;
    expect(&g, GEMM_ERR_INVALID, "takes no TRANS");
}

Test(validate_blas3, scalars)
{
    val_blas3 g = base(VAL_SYMM, GEMM_FP64);
    g.alpha_im = 1;
    expect(&g, GEMM_ERR_INVALID, "imaginary part");
    g = base(VAL_HERK, GEMM_COMPLEX64);
    g.beta_im = 1;
    expect(&g, GEMM_ERR_INVALID, "beta of a Hermitian");
    g = base(VAL_TRSM, GEMM_FP64);
    g.beta = 1;
    expect(&g, GEMM_ERR_INVALID, "no beta");
}

Test(validate_blas3, dimensions)
{
    val_blas3 g = base(VAL_SYMM, GEMM_FP64);
    g.m = 0;
    expect(&g, GEMM_ERR_DIMS, "DSYMM: parameter 3 (M)");
    g = base(VAL_TRSM, GEMM_FP64);
    g.n = 1 << 17;
    expect(&g, GEMM_ERR_DIMS, "DTRSM: parameter 6 (N)");
    g = base(VAL_SYRK, GEMM_FP64);
    g.k = 0;
    expect(&g, GEMM_ERR_DIMS, "DSYRK: parameter 4 (K)");
}

Test(validate_blas3, leading_dimensions_bounds_overlaps)
{
    val_blas3 g = base(VAL_SYMM, GEMM_FP64);
    g.a.ld = 7;
    expect(&g, GEMM_ERR_LD, "DSYMM: parameter 7 (LDA)");
    g = base(VAL_SYR2K, GEMM_FP64);
    g.b.ld = 3;
    expect(&g, GEMM_ERR_LD, "DSYR2K: parameter 9 (LDB)");
    g = base(VAL_SYRK, GEMM_FP64);
    g.c.ld = 15;
    expect(&g, GEMM_ERR_LD, "DSYRK: parameter 10 (LDC)");
    g = base(VAL_TRMM, GEMM_FP64);
    g.b.ld = 15;
    expect(&g, GEMM_ERR_LD, "DTRMM: parameter 11 (LDB)");
    g = base(VAL_SYMM, GEMM_FP64);
    g.m = 64;
    g.c.buffer_id = 2; /* 64x16 doubles: more than its 4 KiB */
    g.c.offset = 0;
    expect(&g, GEMM_ERR_BOUNDS, "beyond");
    g = base(VAL_SYMM, GEMM_FP64);
    g.c.buffer_id = 7;
    expect(&g, GEMM_ERR_NO_BUFFER, "not registered");
    g = base(VAL_SYMM, GEMM_FP64);
    g.c.offset = 64 << 10; /* on B */
    expect(&g, GEMM_ERR_INVALID, "C (written) overlaps B");
    g = base(VAL_TRSM, GEMM_FP64);
    g.b.offset = 8; /* on A */
    expect(&g, GEMM_ERR_INVALID, "B (written) overlaps A");
    g = base(VAL_SYRK, GEMM_FP64);
    g.c.present = false;
    expect(&g, GEMM_ERR_INVALID, "operand C is missing");
    g = base(VAL_SYMM, GEMM_COMPLEX128);
    g.c.offset = (128 << 10) + 8;
    expect(&g, GEMM_ERR_ALIGN, "offset");
}
