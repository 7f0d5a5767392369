/*
 * gemm64_test.c: the wide types through a real gemmd (the CPU backend in
 * CI; GEMM_TEST_BACKEND=cuda on a GPU host): fp64, complex64 and
 * complex128 against a long double reference, over shapes with 1 and odd
 * sizes, every operator pair (N, T and, for complex, C), real and complex
 * alpha/beta with every C mode (none, separate, in place as D, given but
 * unread with beta = 0), padded leading dimensions and unaligned-but-legal
 * offsets. The whole region is poisoned with 0xff bytes (NaN in every
 * type) first: a daemon that reads padding or an unread C gives NaN, and
 * every byte that is not an element of D must be unchanged afterwards.
 * Then the rules over the wire (conj on a real type, imaginary scalars,
 * mixed types, kernels that cannot serve), a resident fp64 operand, and
 * the float scalars of clients that do not set scalars64.
 */
#include "util/daemon.h"
#include "util/data.h"

#include <criterion/criterion.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

TestSuite(gemm64, .init = fixture_setup, .fini = fixture_teardown,
          .timeout = 120);

enum c_mode { C_NONE, C_SEPARATE, C_INPLACE, C_UNREAD };

typedef struct wcase {
    uint64_t m, n, k;
    gemm_dtype t;
    char opa, opb;             /* 'N', 'T' or 'C' */
    double are, aim, bre, bim; /* alpha, beta */
    enum c_mode c;             /* beta must be 0 for NONE and UNREAD */
    uint32_t pad_a, pad_b, pad_c, pad_d; /* ld = cols + pad */
    uint64_t base;                       /* offset of A, in elements */
    uint64_t seed;
} wcase;

/* A complex number in long double (fp64: imaginary part 0). */
typedef struct lcx {
    long double re, im;
} lcx;

static lcx get(const void *p, gemm_dtype t, size_t i)
{
    switch (t) {
    case GEMM_FP64:
        return (lcx){((const double *)p)[i], 0.0L};
    case GEMM_COMPLEX64:
        return (lcx){((const float *)p)[2 * i], ((const float *)p)[2 * i + 1]};
    default:
        return (lcx){((const double *)p)[2 * i],
                     ((const double *)p)[2 * i + 1]};
    }
}

static void put(void *p, gemm_dtype t, size_t i, double re, double im)
{
    switch (t) {
    case GEMM_FP64:
        ((double *)p)[i] = re;
        return;
    case GEMM_COMPLEX64:
        ((float *)p)[2 * i] = (float)re;
        ((float *)p)[2 * i + 1] = (float)im;
        return;
    default:
        ((double *)p)[2 * i] = re;
        ((double *)p)[2 * i + 1] = im;
    }
}

static lcx mul(lcx x, lcx y)
{
    return (lcx){x.re * y.re - x.im * y.im, x.re * y.im + x.im * y.re};
}

static long double mag(lcx x)
{
    return fabsl(x.re) + fabsl(x.im);
}

/* Fills rows x cols (ld) with values in [-1, 1), never 0. */
static void fill(void *p, gemm_dtype t, uint64_t rows, uint64_t cols,
                 uint64_t ld, uint64_t *state)
{
    for (uint64_t r = 0; r < rows; r++)
        for (uint64_t c = 0; c < cols; c++) {
            double re = tu_rand_uniform(state), im = tu_rand_uniform(state);
            put(p, t, r * ld + c, re != 0.0 ? re : 0.5, im != 0.0 ? im : 0.5);
        }
}

/* Element (i, l) of op(X) for X stored with leading dimension ld. */
static lcx op_elem(const void *x, gemm_dtype t, char op, uint64_t ld,
                   uint64_t i, uint64_t l)
{
    if (op == 'N')
        return get(x, t, i * ld + l);
    lcx z = get(x, t, l * ld + i);
    if (op == 'C')
        z.im = -z.im;
    return z;
}

/* Lays out, runs and checks one case in buf. Returns GEMM_OK, the
 * gemm_error of the run, or -1 with why. */
static int run_case(gemm_buffer *buf, const wcase *cs, char *why, size_t wl)
{
    gemm_dtype t = cs->t;
    size_t es = gemm_dtype_size(t);
    bool ta = cs->opa != 'N', tb = cs->opb != 'N';
    uint64_t ar = ta ? cs->k : cs->m, ac = ta ? cs->m : cs->k;
    uint64_t br = tb ? cs->n : cs->k, bc = tb ? cs->k : cs->n;
    uint64_t lda = ac + cs->pad_a, ldb = bc + cs->pad_b;
    uint64_t ldc = cs->n + cs->pad_c, ldd = cs->n + cs->pad_d;
    /* element offsets: A at base, then B, C, D, each one element apart */
    uint64_t oa = cs->base, ob = oa + (ar - 1) * lda + ac + 1;
    uint64_t oc = ob + (br - 1) * ldb + bc + 1;
    uint64_t od = oc + (cs->m - 1) * ldc + cs->n + 1;
    if (cs->c == C_INPLACE)
        ldd = ldc, od = oc;
    uint64_t end = od + (cs->m - 1) * ldd + cs->n;
    size_t bytes = (end + 8) * es;
    cr_assert_leq(bytes, gemm_buffer_size(buf), "case too large");
    uint8_t *p = gemm_buffer_data(buf);
    memset(p, 0xff, bytes);
    uint64_t state = cs->seed | 1;
    fill(p + oa * es, t, ar, ac, lda, &state);
    fill(p + ob * es, t, br, bc, ldb, &state);
    if (cs->c == C_SEPARATE || cs->c == C_INPLACE)
        fill(p + oc * es, t, cs->m, cs->n, ldc, &state);

    /* reference and its scale (sum of magnitudes) per element */
    size_t mn = cs->m * cs->n;
    lcx *ref = calloc(mn, sizeof(lcx));
    long double *scale = calloc(mn, sizeof(long double));
    uint8_t *snap = malloc(bytes);
    cr_assert(ref != NULL && scale != NULL && snap != NULL);
    lcx alpha = {cs->are, cs->aim}, beta = {cs->bre, cs->bim};
    bool read_c = cs->bre != 0.0 || cs->bim != 0.0;
    for (uint64_t i = 0; i < cs->m; i++)
        for (uint64_t q = 0; q < cs->n; q++) {
            lcx acc = {0.0L, 0.0L};
            long double sc = 0.0L;
            for (uint64_t l = 0; l < cs->k; l++) {
                lcx x = op_elem(p + oa * es, t, cs->opa, lda, i, l);
                lcx y = op_elem(p + ob * es, t, cs->opb, ldb, l, q);
                lcx pr = mul(x, y);
                acc.re += pr.re;
                acc.im += pr.im;
                sc += mag(x) * mag(y);
            }
            lcx r = mul(alpha, acc);
            sc *= mag(alpha);
            if (read_c) {
                lcx cv = get(p + oc * es, t, i * ldc + q);
                lcx bcv = mul(beta, cv);
                r.re += bcv.re;
                r.im += bcv.im;
                sc += mag(beta) * mag(cv);
            }
            ref[i * cs->n + q] = r;
            scale[i * cs->n + q] = sc;
        }
    memcpy(snap, p, bytes);

    gemm_op op;
    gemm_op_init(&op, cs->m, cs->n, cs->k, t, t);
    op.trans_a = ta;
    op.trans_b = tb;
    op.conj_a = cs->opa == 'C';
    op.conj_b = cs->opb == 'C';
    gemm_op_set_scalars(&op, cs->are, cs->aim, cs->bre, cs->bim);
    op.a = (gemm_matrix){buf, oa * es, lda, 0};
    op.b = (gemm_matrix){buf, ob * es, ldb, 0};
    op.d = (gemm_matrix){buf, od * es, ldd, 0};
    if (cs->c != C_NONE)
        op.c = (gemm_matrix){buf, oc * es, ldc, 0};
    int rv = gemm_run(g_client, &op, NULL);
    if (rv != GEMM_OK) {
        snprintf(why, wl, "gemm_run: %s (%s)", gemm_strerror(rv),
                 gemm_last_error_message());
        goto done;
    }
    /* each element within a few roundings per term of its scale */
    long double eps = t == GEMM_COMPLEX64 ? 0x1p-24L : 0x1p-53L;
    long double tol = 4.0L * (long double)(cs->k + 2) * eps;
    for (uint64_t i = 0; i < cs->m && rv == GEMM_OK; i++)
        for (uint64_t q = 0; q < cs->n; q++) {
            lcx g = get(p + od * es, t, i * ldd + q), r = ref[i * cs->n + q];
            long double err = fabsl(g.re - r.re) + fabsl(g.im - r.im);
            long double lim = tol * scale[i * cs->n + q] + 1e-300L;
            if (!(err <= lim)) {
                snprintf(why, wl,
                         "D[%llu][%llu] = %.17Lg%+.17Lgi, want "
                         "%.17Lg%+.17Lgi (error %.3Lg > %.3Lg)",
                         (unsigned long long)i, (unsigned long long)q, g.re,
                         g.im, r.re, r.im, err, lim);
                rv = -1;
                break;
            }
            /* D's element is checked: take it out of the byte compare */
            memcpy(snap + (od + i * ldd + q) * es, p + (od + i * ldd + q) * es,
                   es);
        }
    for (size_t b = 0; b < bytes && rv == GEMM_OK; b++)
        if (p[b] != snap[b]) {
            snprintf(why, wl,
                     "byte %zu (element %zu) outside D changed: %#04x -> "
                     "%#04x",
                     b, b / es, snap[b], p[b]);
            rv = -1;
        }
done:
    free(ref);
    free(scale);
    free(snap);
    return rv;
}

static const uint64_t shapes[][3] = {
    {1, 1, 1},     {1, 1, 7},      {1, 9, 1},   {5, 1, 1},
    {2, 3, 4},     {7, 5, 3},      {17, 33, 9}, {31, 1, 64},
    {64, 127, 65}, {100, 37, 129}, {33, 2, 1},  {3, 65, 17},
};
#define NSHAPES (sizeof(shapes) / sizeof(shapes[0]))

/* Every shape with every operator pair of the type, cycling through the
 * C modes, scalars, paddings and offsets. */
static void sweep(gemm_dtype t)
{
    static const char ops[] = "NTC";
    int nops = gemm_dtype_is_complex(t) ? 3 : 2;
    bool cplx = gemm_dtype_is_complex(t);
    gemm_buffer *buf = NULL;
    char why[512];
    int rv = gemm_buffer_alloc(g_client, 4 << 20, &buf);
    cr_assert_eq(rv, GEMM_OK, "gemm_buffer_alloc: %s", gemm_strerror(rv));
    unsigned idx = 0;
    for (size_t s = 0; s < NSHAPES; s++)
        for (int x = 0; x < nops; x++)
            for (int y = 0; y < nops; y++, idx++) {
                wcase cs = {
                    .m = shapes[s][0],
                    .n = shapes[s][1],
                    .k = shapes[s][2],
                    .t = t,
                    .opa = ops[x],
                    .opb = ops[y],
                    .c = (enum c_mode)(idx % 4),
                    .pad_a = idx % 3,
                    .pad_b = (idx / 3) % 4,
                    .pad_c = idx % 2 ? 5 : 0,
                    .pad_d = (idx / 2) % 3,
                    .base = idx % 5,
                    .seed = 0x5eed + idx * 7919,
                };
                cs.are = idx % 5 == 1 ? -0.75 : 1.25;
                cs.aim = cplx && idx % 3 ? 0.5 : 0.0;
                if (cs.c == C_SEPARATE || cs.c == C_INPLACE) {
                    cs.bre = idx % 2 ? -2.0 : 0.5;
                    cs.bim = cplx && idx % 5 != 2 ? -1.5 : 0.0;
                }
                rv = run_case(buf, &cs, why, sizeof(why));
                cr_assert_eq(rv, GEMM_OK,
                             "%s %llux%llux%llu op %c%c c_mode %d alpha "
                             "%g%+gi beta %g%+gi: %s",
                             gemm_dtype_name(t), (unsigned long long)cs.m,
                             (unsigned long long)cs.n, (unsigned long long)cs.k,
                             cs.opa, cs.opb, cs.c, cs.are, cs.aim, cs.bre,
                             cs.bim, why);
            }
    gemm_buffer_free(buf);
}

Test(gemm64, fp64)
{
    sweep(GEMM_FP64);
}

Test(gemm64, complex64)
{
    sweep(GEMM_COMPLEX64);
}

Test(gemm64, complex128)
{
    sweep(GEMM_COMPLEX128);
}

/* Pure imaginary and zero scalars: alpha = i, beta = -i (C read for its
 * imaginary part alone); alpha = 0 gives beta * C. */
Test(gemm64, complex_scalars)
{
    gemm_buffer *buf = NULL;
    char why[512];
    cr_assert_eq(gemm_buffer_alloc(g_client, 1 << 20, &buf), GEMM_OK);
    const double sc[][4] = {
        {0, 1, 0, -1}, {0, 0, 0, 2}, {0, 0, 1, 0}, {-1, -1, 0, 0}};
    for (size_t i = 0; i < sizeof(sc) / sizeof(sc[0]); i++)
        for (int t = 0; t < 2; t++) {
            wcase cs = {.m = 13,
                        .n = 11,
                        .k = 9,
                        .t = t ? GEMM_COMPLEX128 : GEMM_COMPLEX64,
                        .opa = 'C',
                        .opb = 'N',
                        .are = sc[i][0],
                        .aim = sc[i][1],
                        .bre = sc[i][2],
                        .bim = sc[i][3],
                        .c = sc[i][2] != 0 || sc[i][3] != 0 ? C_SEPARATE
                                                            : C_UNREAD,
                        .pad_a = 1,
                        .pad_d = 2,
                        .seed = 31 + i};
            int rv = run_case(buf, &cs, why, sizeof(why));
            cr_assert_eq(rv, GEMM_OK, "scalars %zu %s: %s", i,
                         gemm_dtype_name(cs.t), why);
        }
    gemm_buffer_free(buf);
}

/* A fresh buffer with a tight 8x8 fp64 A, B, C, D at 0, 512, 1024,
 * 1536 bytes, op set up on it with type t. */
static gemm_buffer *small_op(gemm_op *op, gemm_dtype t)
{
    gemm_buffer *buf;
    cr_assert_eq(gemm_buffer_alloc(g_client, 8192, &buf), GEMM_OK);
    size_t es = gemm_dtype_size(t);
    gemm_op_init(op, 8, 8, 8, t, t);
    op->a = (gemm_matrix){buf, 0, 0, 0};
    op->b = (gemm_matrix){buf, 64 * es, 0, 0};
    op->c = (gemm_matrix){buf, 128 * es, 0, 0};
    op->d = (gemm_matrix){buf, 192 * es, 0, 0};
    uint64_t st = 77;
    fill(gemm_buffer_data(buf), t, 24, 8, 8, &st);
    return buf;
}

#define EXPECT_REFUSED(op, code, text)                                         \
    do {                                                                       \
        int rv_ = gemm_run(g_client, &(op), NULL);                             \
        cr_expect_eq(rv_, (code), "got %s: %s", gemm_strerror(rv_),            \
                     gemm_last_error_message());                               \
        cr_expect(strstr(gemm_last_error_message(), (text)) != NULL,           \
                  "message '%s' lacks '%s'", gemm_last_error_message(),        \
                  (text));                                                     \
    } while (0)

Test(gemm64, refusals)
{
    gemm_op op;
    gemm_buffer *buf = small_op(&op, GEMM_FP64);
    op.trans_a = op.conj_a = true;
    EXPECT_REFUSED(op, GEMM_ERR_INVALID, "complex types only");
    op.ab_type = op.cd_type = GEMM_FP32;
    EXPECT_REFUSED(op, GEMM_ERR_INVALID, "complex types only");
    op.ab_type = op.cd_type = GEMM_COMPLEX64;
    op.trans_a = false;
    EXPECT_REFUSED(op, GEMM_ERR_INVALID, "conj_a without trans_a");
    op.conj_a = false;
    op.ab_type = op.cd_type = GEMM_FP64;
    gemm_op_set_scalars(&op, 1.0, 0.5, 0.0, 0.0);
    EXPECT_REFUSED(op, GEMM_ERR_INVALID, "imaginary part");
    gemm_op_set_scalars(&op, 1.0, 0.0, 0.0, 0.0);
    op.cd_type = GEMM_FP32;
    EXPECT_REFUSED(op, GEMM_ERR_DTYPE, "unsupported types");
    op.cd_type = GEMM_COMPLEX128;
    op.ab_type = GEMM_COMPLEX64;
    EXPECT_REFUSED(op, GEMM_ERR_DTYPE, "unsupported types");
    op.ab_type = op.cd_type = GEMM_COMPLEX128;
    op.d.offset = 8; /* half a complex128 */
    EXPECT_REFUSED(op, GEMM_ERR_ALIGN, "multiple of the element size");
    op.d.offset = 192 * 16;
    /* a kernel of the 16/32-bit ladder cannot serve the wide types */
    op.kernel = strcmp(tu_backend(), "cpu") == 0 ? "cpu-naive" : "naive";
    EXPECT_REFUSED(op, GEMM_ERR_UNSUPPORTED, "cannot serve");
    op.kernel = strcmp(tu_backend(), "cpu") == 0 ? "openblas" : "cublas";
    gemm_timings t;
    int rv = gemm_run(g_client, &op, &t);
    cr_expect_eq(rv, GEMM_OK, "the reference by name: %s",
                 gemm_last_error_message());
    cr_expect_str_eq(t.kernel, op.kernel);
    gemm_buffer_free(buf);
}

/* A client that leaves scalars64 off: the float alpha and beta apply. */
Test(gemm64, float_scalars_of_older_clients)
{
    gemm_op op;
    gemm_buffer *buf = small_op(&op, GEMM_FP64);
    op.alpha = 2.0f;
    op.beta = -0.5f;
    double *p = gemm_buffer_data(buf);
    double want[64];
    for (int i = 0; i < 8; i++)
        for (int q = 0; q < 8; q++) {
            long double acc = 0;
            for (int l = 0; l < 8; l++)
                acc += (long double)p[i * 8 + l] * p[64 + l * 8 + q];
            want[i * 8 + q] = (double)(2.0L * acc - 0.5L * p[128 + i * 8 + q]);
        }
    int rv = gemm_run(g_client, &op, NULL);
    cr_assert_eq(rv, GEMM_OK, "%s", gemm_last_error_message());
    for (int i = 0; i < 64; i++)
        cr_expect(fabs(p[192 + i] - want[i]) <= 1e-14 * (1 + fabs(want[i])),
                  "D[%d] = %.17g, want %.17g", i, p[192 + i], want[i]);
    gemm_buffer_free(buf);
}

/* A resident complex128 B: the same result as from the buffer. */
Test(gemm64, resident_complex_operand)
{
    gemm_op op;
    gemm_buffer *buf = small_op(&op, GEMM_COMPLEX128);
    op.trans_b = op.conj_b = true;
    gemm_op_set_scalars(&op, 0.5, -1.0, 0.0, 0.0);
    int rv = gemm_run(g_client, &op, NULL);
    cr_assert_eq(rv, GEMM_OK, "%s", gemm_last_error_message());
    double want[128];
    memcpy(want, (char *)gemm_buffer_data(buf) + op.d.offset, sizeof(want));
    uint64_t tid = 0;
    rv = gemm_tensor_upload(g_client, &op.b, 8, 8, GEMM_COMPLEX128, &tid);
    cr_assert_eq(rv, GEMM_OK, "upload: %s", gemm_last_error_message());
    memset((char *)gemm_buffer_data(buf) + op.b.offset, 0xff, 64 * 16);
    memset((char *)gemm_buffer_data(buf) + op.d.offset, 0, 64 * 16);
    op.b = (gemm_matrix){.tensor = tid};
    rv = gemm_run(g_client, &op, NULL);
    cr_assert_eq(rv, GEMM_OK, "%s", gemm_last_error_message());
    const double *got =
        (const double *)((char *)gemm_buffer_data(buf) + op.d.offset);
    for (int i = 0; i < 128; i++)
        cr_expect(fabs(got[i] - want[i]) <= 1e-14 * (1 + fabs(want[i])),
                  "resident B: D part %d = %.17g, from the buffer %.17g", i,
                  got[i], want[i]);
    cr_expect_eq(gemm_tensor_free(g_client, tid), GEMM_OK);
    gemm_buffer_free(buf);
}
