/*
 * batch_test.c: batched GEMM (gemm_batch_run) against a long double
 * reference. Random grouped batches of every type combination with
 * problems of M = 0 mixed in, transposes, leading-dimension padding,
 * per-problem scalars and C in place; strided batches with a shared
 * (stride 0) operand and a resident tensor, fp32 and the wide types
 * (dense, so the CUDA backend runs one strided cuBLAS call, and padded);
 * every refusal names the right
 * problem (gemm_last_error_problem) and writes nothing, and the daemon
 * stays healthy after each, and the reply lists every bad problem; a
 * batch canceled in the queue writes nothing, one canceled while it runs
 * stops between problems;
 * a client that leaves with a batch queued harms nobody. The buffer is
 * poisoned with 0xff (NaN in every type) before each batch, so padding
 * read or a byte written outside the Ds shows.
 */
#include "util/daemon.h"
#include "util/data.h"
#include "util/hold.h"
#include "util/raw.h"

#include <criterion/criterion.h>

#include <math.h>
#include <pthread.h>
#include <stdint.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <stddef.h>
#include <string.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

TestSuite(batch, .fini = fixture_teardown, .timeout = 120);

#define BUF_BYTES (8u << 20)

typedef struct lcx {
    long double re, im;
} lcx;

static bool is_complex(gemm_dtype t)
{
    return t == GEMM_COMPLEX64 || t == GEMM_COMPLEX128;
}

static lcx get(const void *p, gemm_dtype t, size_t i)
{
    if (t == GEMM_COMPLEX64) {
        const float *f = p;
        return (lcx){f[2 * i], f[2 * i + 1]};
    }
    if (t == GEMM_COMPLEX128) {
        const double *f = p;
        return (lcx){f[2 * i], f[2 * i + 1]};
    }
    return (lcx){tu_load(p, t, i), 0};
}

/* Fills the rows x cols elements of a matrix (ld elements) at p. */
static void fill(void *p, gemm_dtype t, size_t rows, size_t cols, size_t ld,
                 uint64_t *seed)
{
    if (!is_complex(t)) {
        tu_fill(p, t, rows, cols, ld, seed);
        return;
    }
    for (size_t i = 0; i < rows; i++)
        for (size_t j = 0; j < cols; j++) {
            size_t e = i * ld + j;
            double re = tu_rand_uniform(seed), im = tu_rand_uniform(seed);
            if (t == GEMM_COMPLEX64) {
                ((float *)p)[2 * e] = (float)re;
                ((float *)p)[2 * e + 1] = (float)im;
            } else {
                ((double *)p)[2 * e] = re;
                ((double *)p)[2 * e + 1] = im;
            }
        }
}

/* ---- a batch laid out in one buffer ---- */

/* One problem as the reference sees it: its operands in the buffer (a
 * tensor operand's host copy included) and its scalars. */
typedef struct view {
    uint64_t m, n, k;
    bool ta, tb;
    uint64_t a, b, c, d;         /* byte offsets */
    uint64_t lda, ldb, ldc, ldd; /* elements, as stored */
    bool has_c;
    lcx alpha, beta;
} view;

typedef struct layout {
    gemm_buffer *buf;
    uint8_t *base;
    size_t used;
    gemm_dtype ab, cd;
    view *v;
    size_t nv;        /* problems checked */
    size_t cap;       /* problems laid out (their references freed) */
    uint8_t *snap;    /* the buffer before the run */
    uint8_t *written; /* per byte: inside some D's elements */
    lcx **ref;        /* per problem: m*n expected */
    long double **scale;
} layout;

static void layout_init(layout *l, gemm_client *c, gemm_dtype ab, gemm_dtype cd,
                        size_t nproblems)
{
    memset(l, 0, sizeof(*l));
    int rv = gemm_buffer_alloc(c, BUF_BYTES, &l->buf);
    cr_assert_eq(rv, GEMM_OK, "alloc: %s", gemm_strerror(rv));
    l->base = gemm_buffer_data(l->buf);
    memset(l->base, 0xff, BUF_BYTES);
    l->ab = ab;
    l->cd = cd;
    l->cap = nproblems;
    l->v = calloc(nproblems, sizeof(*l->v));
    l->ref = calloc(nproblems, sizeof(*l->ref));
    l->scale = calloc(nproblems, sizeof(*l->scale));
    cr_assert(l->v && l->ref && l->scale);
}

static void layout_free(layout *l)
{
    for (size_t i = 0; i < l->cap; i++) {
        free(l->ref[i]);
        free(l->scale[i]);
    }
    free(l->ref);
    free(l->scale);
    free(l->v);
    free(l->snap);
    free(l->written);
    gemm_buffer_free(l->buf);
}

/* Room for a rows x cols matrix of t with ld: its byte offset. */
static uint64_t place(layout *l, gemm_dtype t, size_t rows, size_t cols,
                      size_t ld)
{
    uint64_t off = (l->used + 63) & ~(uint64_t)63;
    size_t bytes = tu_extent(rows, cols, ld) * gemm_dtype_size(t);
    cr_assert(off + bytes <= BUF_BYTES, "the test's buffer is too small");
    l->used = off + bytes;
    return off;
}

/* Lays out problem v (shape, transposes, scalars set; pads: ld = cols +
 * pad, or tight when pad < 0) with random inputs; c_inplace: C is D. */
static void layout_problem(layout *l, view *v, int pad, bool c_inplace,
                           uint64_t *seed)
{
    if (v->m == 0 || v->n == 0)
        return;
    size_t ar = v->ta ? v->k : v->m, ac = v->ta ? v->m : v->k;
    size_t br = v->tb ? v->n : v->k, bc = v->tb ? v->k : v->n;
    size_t p = pad < 0 ? 0 : (size_t)pad;
    v->lda = ac + p;
    v->ldb = bc + p;
    v->ldd = v->n + p;
    v->a = place(l, l->ab, ar, ac, v->lda);
    v->b = place(l, l->ab, br, bc, v->ldb);
    v->d = place(l, l->cd, v->m, v->n, v->ldd);
    fill(l->base + v->a, l->ab, ar, ac, v->lda, seed);
    fill(l->base + v->b, l->ab, br, bc, v->ldb, seed);
    if (!v->has_c)
        return;
    if (c_inplace) {
        v->c = v->d;
        v->ldc = v->ldd;
    } else {
        v->ldc = v->n + p;
        v->c = place(l, l->cd, v->m, v->n, v->ldc);
    }
    fill(l->base + v->c, l->cd, v->m, v->n, v->ldc, seed);
}

/* The reference of every problem over the buffer as it is now, and the
 * snapshot and mask of what the batch may write. */
static void layout_reference(layout *l)
{
    l->snap = malloc(BUF_BYTES);
    l->written = calloc(BUF_BYTES, 1);
    cr_assert(l->snap && l->written);
    memcpy(l->snap, l->base, BUF_BYTES);
    for (size_t p = 0; p < l->nv; p++) {
        const view *v = &l->v[p];
        if (v->m == 0 || v->n == 0)
            continue;
        l->ref[p] = calloc(v->m * v->n, sizeof(lcx));
        l->scale[p] = calloc(v->m * v->n, sizeof(long double));
        cr_assert(l->ref[p] && l->scale[p]);
        const uint8_t *A = l->base + v->a, *B = l->base + v->b;
        for (size_t i = 0; i < v->m; i++)
            for (size_t j = 0; j < v->n; j++) {
                lcx s = {0, 0};
                long double mag = 0;
                for (size_t q = 0; q < v->k; q++) {
                    lcx x =
                        get(A, l->ab, v->ta ? q * v->lda + i : i * v->lda + q);
                    lcx y =
                        get(B, l->ab, v->tb ? j * v->ldb + q : q * v->ldb + j);
                    s.re += x.re * y.re - x.im * y.im;
                    s.im += x.re * y.im + x.im * y.re;
                    mag += hypotl(x.re, x.im) * hypotl(y.re, y.im);
                }
                lcx r = {v->alpha.re * s.re - v->alpha.im * s.im,
                         v->alpha.re * s.im + v->alpha.im * s.re};
                mag *= hypotl(v->alpha.re, v->alpha.im);
                if (v->has_c) {
                    lcx c = get(l->base + v->c, l->cd, i * v->ldc + j);
                    r.re += v->beta.re * c.re - v->beta.im * c.im;
                    r.im += v->beta.re * c.im + v->beta.im * c.re;
                    mag += hypotl(v->beta.re, v->beta.im) * hypotl(c.re, c.im);
                }
                l->ref[p][i * v->n + j] = r;
                l->scale[p][i * v->n + j] = mag;
                size_t off = v->d + (i * v->ldd + j) * gemm_dtype_size(l->cd);
                memset(l->written + off, 1, gemm_dtype_size(l->cd));
            }
    }
}

/* Unit roundoff of the result's type and of the accumulation. */
static void tolerance(const layout *l, uint64_t k, long double *rel)
{
    long double out = l->cd == GEMM_BF16   ? 0x1p-8L
                      : l->cd == GEMM_FP16 ? 0x1p-11L
                      : l->cd == GEMM_FP32 || l->cd == GEMM_COMPLEX64
                          ? 0x1p-24L
                          : 0x1p-53L;
    long double acc =
        l->ab == GEMM_FP64 || l->ab == GEMM_COMPLEX128 ? 0x1p-53L : 0x1p-24L;
    *rel = 2 * out + 4 * (long double)k * acc;
}

/* After a successful batch: every D right, nothing else changed. */
static void layout_verify(const layout *l, const char *who)
{
    for (size_t p = 0; p < l->nv; p++) {
        const view *v = &l->v[p];
        if (v->m == 0 || v->n == 0)
            continue;
        long double rel;
        tolerance(l, v->k, &rel);
        for (size_t i = 0; i < v->m; i++)
            for (size_t j = 0; j < v->n; j++) {
                lcx got = get(l->base + v->d, l->cd, i * v->ldd + j);
                lcx want = l->ref[p][i * v->n + j];
                long double err = hypotl(got.re - want.re, got.im - want.im);
                long double tol = rel * l->scale[p][i * v->n + j] + 1e-30L;
                cr_assert(err <= tol,
                          "%s: problem %zu (%llux%llux%llu, %c%c) D[%zu][%zu] "
                          "= %Lg%+Lgi, want %Lg%+Lgi (error %Lg > %Lg)",
                          who, p, (unsigned long long)v->m,
                          (unsigned long long)v->n, (unsigned long long)v->k,
                          v->ta ? 'T' : 'N', v->tb ? 'T' : 'N', i, j, got.re,
                          got.im, want.re, want.im, err, tol);
            }
    }
    for (size_t x = 0; x < BUF_BYTES; x++)
        cr_assert(l->written[x] || l->base[x] == l->snap[x],
                  "%s: byte %zu outside every D changed", who, x);
}

/* After a refused or canceled batch: nothing changed. */
static void layout_untouched(const layout *l, const char *who)
{
    if (l->snap == NULL)
        return;
    cr_assert(memcmp(l->base, l->snap, BUF_BYTES) == 0,
              "%s: the buffer changed although the batch did not run", who);
}

static gemm_matrix mat(const layout *l, uint64_t off, uint64_t ld)
{
    return (gemm_matrix){l->buf, off, ld, 0};
}

/* The grouped problem of view v, operands in l's buffer. */
static gemm_problem problem_of(const layout *l, const view *v, bool own)
{
    gemm_problem p = {.m = v->m, .n = v->n, .k = v->k};
    p.trans_a = v->ta;
    p.trans_b = v->tb;
    if (v->m != 0 && v->n != 0) {
        p.a = mat(l, v->a, v->lda);
        p.b = mat(l, v->b, v->ldb);
        p.d = mat(l, v->d, v->ldd);
        if (v->has_c)
            p.c = mat(l, v->c, v->ldc);
    }
    p.scalars = own;
    p.alpha_re = (double)v->alpha.re;
    p.alpha_im = (double)v->alpha.im;
    p.beta_re = (double)v->beta.re;
    p.beta_im = (double)v->beta.im;
    return p;
}

static gemm_timings run_ok(gemm_client *c, const gemm_batch *b, const char *who)
{
    gemm_timings t;
    int rv = gemm_batch_run(c, b, &t);
    cr_assert_eq(rv, GEMM_OK, "%s: %s (%s; problem %lld)", who,
                 gemm_strerror(rv), gemm_last_error_message(),
                 (long long)gemm_last_error_problem());
    cr_assert_eq(gemm_last_error_problem(), -1);
    return t;
}

/* ---- grouped batches of every type ---- */

static const struct {
    gemm_dtype ab, cd;
} combos[] = {
    {GEMM_BF16, GEMM_BF16},           {GEMM_BF16, GEMM_FP32},
    {GEMM_BF16, GEMM_FP16},           {GEMM_FP16, GEMM_FP16},
    {GEMM_FP16, GEMM_FP32},           {GEMM_FP16, GEMM_BF16},
    {GEMM_FP32, GEMM_FP32},           {GEMM_FP64, GEMM_FP64},
    {GEMM_COMPLEX64, GEMM_COMPLEX64}, {GEMM_COMPLEX128, GEMM_COMPLEX128},
};

/* A random grouped batch of np problems of (ab, cd): one in five with
 * M = 0, random transposes and padding, half with their own scalars, C
 * separate, in place or absent. */
static void grouped_case(gemm_dtype ab, gemm_dtype cd, size_t np,
                         uint64_t *seed)
{
    layout l;
    layout_init(&l, g_client, ab, cd, np);
    bool cplx = is_complex(ab);
    gemm_op op;
    gemm_op_init(&op, 0, 0, 0, ab, cd);
    gemm_op_set_scalars(&op, 1.25, cplx ? 0.5 : 0.0, 0.5, cplx ? -0.25 : 0.0);
    gemm_problem *ps = calloc(np, sizeof(*ps));
    cr_assert(ps);
    for (size_t i = 0; i < np; i++) {
        view *v = &l.v[i];
        v->m = tu_rand(seed) % 5 == 0 ? 0 : 1 + tu_rand(seed) % 40;
        v->n = 1 + tu_rand(seed) % 40;
        v->k = 1 + tu_rand(seed) % 40;
        v->ta = tu_rand(seed) & 1;
        v->tb = tu_rand(seed) & 1;
        bool own = tu_rand(seed) & 1;
        if (own) {
            v->alpha = (lcx){tu_rand_uniform(seed) * 2,
                             cplx ? tu_rand_uniform(seed) : 0};
            v->beta = tu_rand(seed) % 3 == 0
                          ? (lcx){0, 0}
                          : (lcx){tu_rand_uniform(seed),
                                  cplx ? tu_rand_uniform(seed) : 0};
        } else {
            v->alpha = (lcx){op.alpha_re, op.alpha_im};
            v->beta = (lcx){op.beta_re, op.beta_im};
        }
        v->has_c = v->beta.re != 0 || v->beta.im != 0;
        int pad = (int)(tu_rand(seed) % 5) - 1; /* -1: tight */
        layout_problem(&l, v, pad, tu_rand(seed) & 1, seed);
        ps[i] = problem_of(&l, v, own);
    }
    l.nv = np;
    layout_reference(&l);
    gemm_batch b;
    gemm_batch_init(&b, &op);
    b.problems = ps;
    b.nproblems = np;
    char who[96];
    snprintf(who, sizeof(who), "grouped %s -> %s", gemm_dtype_name(ab),
             gemm_dtype_name(cd));
    run_ok(g_client, &b, who);
    layout_verify(&l, who);
    free(ps);
    layout_free(&l);
}

Test(batch, grouped_every_type)
{
    fixture_start(NULL);
    uint64_t seed = 26;
    for (size_t t = 0; t < sizeof(combos) / sizeof(combos[0]); t++)
        for (int rep = 0; rep < 3; rep++)
            grouped_case(combos[t].ab, combos[t].cd, 1 + tu_rand(&seed) % 24,
                         &seed);
    /* Status counts them, on the wire and through gemm_get_status */
    tu_raw r;
    cr_assert_eq(tu_raw_open(&r, g_gemmd.url, 10000), 0);
    Gemm__Request req = GEMM__REQUEST__INIT;
    req.has_version = true;
    req.version = GEMM_PROTOCOL_VERSION;
    Gemm__StatusRequest sr = GEMM__STATUS_REQUEST__INIT;
    Gemm__Reply *rep = NULL;
    req.body_case = GEMM__REQUEST__BODY_STATUS;
    req.status = &sr;
    cr_assert_eq(tu_raw_call(&r, &req, &rep), 0);
    cr_assert_eq(rep->body_case, GEMM__REPLY__BODY_STATUS_REPLY);
    const Gemm__StatusReply *st = rep->status_reply;
    cr_assert(st->has_batches_served && st->has_batch_problems);
    cr_assert_eq(st->batches_served, 3 * sizeof(combos) / sizeof(combos[0]),
                 "batches_served %llu", (unsigned long long)st->batches_served);
    cr_assert_geq(st->batch_problems, st->batches_served);
    gemm_status gs;
    cr_assert_eq(gemm_get_status(g_client, &gs), GEMM_OK);
    cr_assert_eq(gs.batches_served, st->batches_served);
    cr_assert_eq(gs.batch_problems, st->batch_problems);
    gemm__reply__free_unpacked(rep, NULL);
    tu_raw_close(&r);

    /* The function of the old name (what a program built before the
     * batch counters calls) writes nothing past routine_served; a size
     * of 0 is refused */
    memset(&gs, 0xA5, sizeof(gs));
    cr_assert_eq((gemm_get_status)(g_client, &gs), GEMM_OK);
    cr_assert_eq(gs.routine_served[0], gs.gemms_served);
    const unsigned char *tail = (const unsigned char *)&gs.batches_served;
    for (size_t i = 0; i < sizeof(gs) - offsetof(gemm_status, batches_served);
         i++)
        cr_assert_eq(tail[i], 0xA5, "byte %zu past routine_served written", i);
    cr_assert_eq(gemm_get_status_sized(g_client, &gs, 0), GEMM_ERR_INVALID);
    tu_assert_healthy(g_client);
}

/* Only M = 0 problems, without operands: nothing to do, OK. */
Test(batch, all_problems_empty)
{
    fixture_start(NULL);
    gemm_op op;
    gemm_op_init(&op, 0, 0, 0, GEMM_FP32, GEMM_FP32);
    gemm_problem ps[3] = {{.m = 0, .n = 8, .k = 8},
                          {.m = 4, .n = 0, .k = 8},
                          {.m = 0, .n = 0, .k = 0}};
    gemm_batch b;
    gemm_batch_init(&b, &op);
    b.problems = ps;
    b.nproblems = 3;
    run_ok(g_client, &b, "empty problems");
    tu_assert_healthy(g_client);
}

/* ---- strided batches ---- */

/* count problems of m x n x k of type t (transposes ta, tb): A strided,
 * B shared (stride 0) or a resident tensor, C strided with beta, D
 * strided. Padded leading dimensions and a gap between Ds, or (tight)
 * every operand dense and the strides their sizes, so the daemon stages
 * each operand block whole and the library sees a strided batch. */
static void strided_case(gemm_dtype t, bool tight, uint64_t count, uint64_t m,
                         uint64_t n, uint64_t k, bool ta, bool tb,
                         bool b_tensor, uint64_t *seed)
{
    layout l;
    layout_init(&l, g_client, t, t, count);
    const size_t es = gemm_dtype_size(t);
    const int pad = tight ? 0 : 1;
    size_t ar = ta ? k : m, ac = ta ? m : k;
    size_t br = tb ? n : k, bc = tb ? k : n;
    uint64_t lda = ac + pad, ldb = bc + 2 * pad, ldc = n + 3 * pad, ldd = n;
    size_t sa = tu_extent(ar, ac, lda) * es, sc = tu_extent(m, n, ldc) * es;
    size_t sd = tu_extent(m, n, ldd) * es + (tight ? 0 : 8);
    uint64_t a0 = place(&l, t, count * ar, ac, lda);
    uint64_t b0 = place(&l, t, br, bc, ldb);
    uint64_t c0 = place(&l, t, count * m, n, ldc);
    uint64_t d0 = place(&l, t, count * m, n + 2, n + 2);
    const lcx alpha = {0.75, is_complex(t) ? 0.25 : 0};
    const lcx beta = {-0.5, is_complex(t) ? 0.125 : 0};
    fill(l.base + b0, t, br, bc, ldb, seed);
    for (uint64_t i = 0; i < count; i++) {
        view *v = &l.v[i];
        *v = (view){.m = m, .n = n, .k = k, .ta = ta, .tb = tb};
        v->a = a0 + i * sa;
        v->b = b0;
        v->c = c0 + i * sc;
        v->d = d0 + i * sd;
        v->lda = lda;
        v->ldb = ldb;
        v->ldc = ldc;
        v->ldd = ldd;
        v->has_c = true;
        v->alpha = alpha;
        v->beta = beta;
        fill(l.base + v->a, t, ar, ac, lda, seed);
        fill(l.base + v->c, t, m, n, ldc, seed);
    }
    l.nv = count;
    uint64_t tid = 0;
    if (b_tensor) {
        gemm_matrix src = mat(&l, b0, ldb);
        int rv = gemm_tensor_upload(g_client, &src, br, bc, t, &tid);
        cr_assert_eq(rv, GEMM_OK, "upload: %s (%s)", gemm_strerror(rv),
                     gemm_last_error_message());
    }
    layout_reference(&l);
    gemm_op op;
    gemm_op_init(&op, m, n, k, t, t);
    op.trans_a = ta;
    op.trans_b = tb;
    op.alpha = 0.75f;
    op.beta = -0.5f;
    if (t != GEMM_FP32)
        gemm_op_set_scalars(&op, (double)alpha.re, (double)alpha.im,
                            (double)beta.re, (double)beta.im);
    op.a = mat(&l, a0, lda);
    op.b = b_tensor ? (gemm_matrix){.tensor = tid} : mat(&l, b0, ldb);
    op.c = mat(&l, c0, ldc);
    op.d = mat(&l, d0, ldd);
    gemm_batch b;
    gemm_batch_init(&b, &op);
    b.count = count;
    b.stride_a = sa;
    b.stride_b = 0;
    b.stride_c = sc;
    b.stride_d = sd;
    char who[96];
    snprintf(who, sizeof(who), "strided %s%s %llu x %llux%llux%llu %c%c%s",
             gemm_dtype_name(t), tight ? " tight" : "",
             (unsigned long long)count, (unsigned long long)m,
             (unsigned long long)n, (unsigned long long)k, ta ? 'T' : 'N',
             tb ? 'T' : 'N', b_tensor ? " B resident" : "");
    run_ok(g_client, &b, who);
    layout_verify(&l, who);
    if (b_tensor)
        cr_assert_eq(gemm_tensor_free(g_client, tid), GEMM_OK);
    layout_free(&l);
}

Test(batch, strided_shared_operand)
{
    fixture_start(NULL);
    uint64_t seed = 5;
    for (int t = 0; t < 4; t++)
        strided_case(GEMM_FP32, false, 9, 23, 17, 31, t & 1, t >> 1, false,
                     &seed);
    strided_case(GEMM_FP32, false, 1, 40, 3, 2, false, false, false, &seed);
    tu_assert_healthy(g_client);
}

/* The wide types' strided batches: tight (on cuda one strided-batched
 * cuBLAS call) and padded (pitched on the device: one pointer-array
 * call), every transpose pair, C strided beside D. */
Test(batch, strided_wide_types)
{
    fixture_start(NULL);
    uint64_t seed = 7;
    for (int t = 0; t < 4; t++)
        strided_case(GEMM_FP64, true, 12, 24, 16, 40, t & 1, t >> 1, false,
                     &seed);
    strided_case(GEMM_FP64, false, 9, 23, 17, 31, true, false, false, &seed);
    strided_case(GEMM_COMPLEX128, true, 6, 8, 16, 24, false, true, false,
                 &seed);
    strided_case(GEMM_COMPLEX64, false, 5, 13, 11, 9, true, true, false, &seed);
    tu_assert_healthy(g_client);
}

Test(batch, strided_resident_tensor)
{
    fixture_start(NULL);
    uint64_t seed = 6;
    strided_case(GEMM_FP32, false, 7, 19, 24, 13, false, false, true, &seed);
    strided_case(GEMM_FP32, false, 5, 8, 33, 21, true, true, true, &seed);
    strided_case(GEMM_BF16, true, 6, 40, 24, 16, false, false, true, &seed);
    strided_case(GEMM_FP64, true, 5, 12, 8, 16, true, false, true, &seed);
    tu_assert_healthy(g_client);
}

/* A grouped batch whose problems share a resident B of one shape. */
Test(batch, grouped_resident_tensor)
{
    fixture_start(NULL);
    uint64_t seed = 8;
    const uint64_t n = 12, k = 20, np = 6;
    layout l;
    layout_init(&l, g_client, GEMM_BF16, GEMM_FP32, np);
    uint64_t b0 = place(&l, GEMM_BF16, k, n, n);
    fill(l.base + b0, GEMM_BF16, k, n, n, &seed);
    uint64_t tid;
    gemm_matrix src = mat(&l, b0, n);
    int rv = gemm_tensor_upload(g_client, &src, k, n, GEMM_BF16, &tid);
    cr_assert_eq(rv, GEMM_OK, "upload: %s", gemm_strerror(rv));
    gemm_problem ps[6];
    for (uint64_t i = 0; i < np; i++) {
        view *v = &l.v[i];
        *v = (view){.m = i == 2 ? 0 : 3 + 5 * i, .n = n, .k = k};
        v->alpha = (lcx){1, 0};
        layout_problem(&l, v, 1, false, &seed);
        v->b = b0; /* the reference reads the tensor's source */
        v->ldb = n;
        ps[i] = problem_of(&l, v, false);
        if (v->m != 0)
            ps[i].b = (gemm_matrix){.tensor = tid};
    }
    l.nv = np;
    layout_reference(&l);
    gemm_op op;
    gemm_op_init(&op, 0, 0, 0, GEMM_BF16, GEMM_FP32);
    gemm_batch b;
    gemm_batch_init(&b, &op);
    b.problems = ps;
    b.nproblems = np;
    gemm_timings t = run_ok(g_client, &b, "grouped, B resident");
    layout_verify(&l, "grouped, B resident");
    /* on the GPU the batch runs in one grouped launch, B where it lives */
    if (strcmp(tu_backend(), "cuda") == 0)
        cr_assert(strncmp(t.kernel, "grouped", 7) == 0,
                  "a bf16 batch with a resident B ran %s, not the grouped "
                  "kernel",
                  t.kernel);
    layout_free(&l);
    tu_assert_healthy(g_client);
}

/* ---- refusals ---- */

/* A valid grouped fp32 batch of np 16x16x16 problems (C absent) laid out
 * in l; ps gets its problems. */
static void valid_batch(layout *l, gemm_problem *ps, size_t np, gemm_op *op)
{
    uint64_t seed = 99;
    layout_init(l, g_client, GEMM_FP32, GEMM_FP32, np);
    gemm_op_init(op, 0, 0, 0, GEMM_FP32, GEMM_FP32);
    for (size_t i = 0; i < np; i++) {
        view *v = &l->v[i];
        *v = (view){.m = 16, .n = 16, .k = 16, .alpha = {1, 0}};
        layout_problem(l, v, 0, false, &seed);
        ps[i] = problem_of(l, v, false);
    }
    l->nv = np;
    layout_reference(l);
}

/* Runs b, which must be refused with want naming problem bad; nothing
 * written; the daemon healthy after. */
static void refused(const layout *l, const gemm_batch *b, int want, int64_t bad,
                    const char *who)
{
    int rv = gemm_batch_run(g_client, b, NULL);
    const char *msg = gemm_last_error_message();
    cr_assert_eq(rv, want, "%s: %s, want %s (%s)", who, gemm_strerror(rv),
                 gemm_strerror(want), msg);
    cr_assert_eq(gemm_last_error_problem(), bad, "%s: problem %lld, want %lld",
                 who, (long long)gemm_last_error_problem(), (long long)bad);
    if (bad >= 0) {
        char head[32];
        snprintf(head, sizeof(head), "problem %lld: ", (long long)bad);
        cr_assert(strncmp(msg, head, strlen(head)) == 0,
                  "%s: message \"%s\" does not start with \"%s\"", who, msg,
                  head);
    }
    layout_untouched(l, who);
    tu_assert_healthy(g_client);
}

Test(batch, refusals_name_the_problem)
{
    fixture_start(NULL);
    layout l;
    gemm_problem ps[8], bad[8];
    gemm_op op;
    valid_batch(&l, ps, 8, &op);
    gemm_batch b;
    gemm_batch_init(&b, &op);
    b.problems = bad;
    b.nproblems = 8;

    memcpy(bad, ps, sizeof(ps));
    bad[5].a.offset = BUF_BYTES - 64;
    refused(&l, &b, GEMM_ERR_BOUNDS, 5, "A out of bounds");

    memcpy(bad, ps, sizeof(ps));
    bad[3].d.ld = 15;
    refused(&l, &b, GEMM_ERR_LD, 3, "ld of D below n");

    memcpy(bad, ps, sizeof(ps));
    bad[4].d = ps[1].a; /* writes problem 1's input */
    refused(&l, &b, GEMM_ERR_INVALID, 4, "D on another problem's A");

    memcpy(bad, ps, sizeof(ps));
    bad[1].d = ps[6].b;
    refused(&l, &b, GEMM_ERR_INVALID, 1, "D on a later problem's B");

    memcpy(bad, ps, sizeof(ps));
    bad[6].d = ps[2].d;
    refused(&l, &b, GEMM_ERR_INVALID, 6, "two problems with one D");

    memcpy(bad, ps, sizeof(ps));
    bad[7].d.offset = ps[0].d.offset + 4 * 17; /* overlaps D 0 partly */
    refused(&l, &b, GEMM_ERR_INVALID, 7, "D overlapping another D");

    memcpy(bad, ps, sizeof(ps));
    bad[2].k = 0;
    refused(&l, &b, GEMM_ERR_DIMS, 2, "k 0 with m*n > 0");

    memcpy(bad, ps, sizeof(ps));
    bad[0].b = (gemm_matrix){.tensor = 12345};
    refused(&l, &b, GEMM_ERR_NO_BUFFER, 0, "an unknown tensor");

    /* several bad: the first one is named */
    memcpy(bad, ps, sizeof(ps));
    bad[6].d.ld = 3;
    bad[2].a.offset = BUF_BYTES;
    refused(&l, &b, GEMM_ERR_BOUNDS, 2, "two bad problems");

    /* the batch itself: no problem to name */
    gemm_batch wrong = b;
    memcpy(bad, ps, sizeof(ps));
    wrong.op.cd_type = GEMM_FP64;
    refused(&l, &wrong, GEMM_ERR_DTYPE, -1, "types");
    wrong = b;
    wrong.nproblems = 0;
    refused(&l, &wrong, GEMM_ERR_INVALID, -1, "an empty batch");

    /* strided: D shared by all problems */
    gemm_op sop = op;
    sop.m = sop.n = sop.k = 16;
    sop.a = ps[0].a;
    sop.b = ps[0].b;
    sop.d = ps[0].d;
    gemm_batch s;
    gemm_batch_init(&s, &sop);
    s.count = 3;
    refused(&l, &s, GEMM_ERR_INVALID, 1, "strided with stride_d 0");
    /* strided past the buffer's end at problem 2 */
    s.stride_d = BUF_BYTES / 2 - 1024;
    s.stride_d -= s.stride_d % 4;
    refused(&l, &s, GEMM_ERR_BOUNDS, 2, "strided out of bounds");

    /* and with the good problems it runs */
    b.problems = ps;
    run_ok(g_client, &b, "the valid batch");
    layout_verify(&l, "the valid batch after refusals");
    layout_free(&l);
}

/* On the wire: the reply lists every bad problem (index, status,
 * message), the lowest BATCH_ERRORS_MAX (64) of them, and counts all. */
Test(batch, reply_lists_bad_problems)
{
    fixture_start(NULL);
    tu_raw r;
    tu_shm shm;
    uint64_t bid;
    cr_assert_eq(tu_raw_open(&r, g_gemmd.url, 10000), 0);
    cr_assert_eq(tu_raw_buffer(&r, &shm, 1 << 20, &bid), GEMM_OK);
    enum { NP = 100 };
    static Gemm__BatchProblem p[NP], *pp[NP];
    static Gemm__Operand o[NP][4];
    Gemm__GemmRequest op = GEMM__GEMM_REQUEST__INIT;
    op.has_ab_type = op.has_cd_type = true;
    op.ab_type = op.cd_type = GEMM__DTYPE__FP32;
    for (int i = 0; i < NP; i++) {
        gemm__batch_problem__init(&p[i]);
        p[i].has_m = p[i].has_n = p[i].has_k = true;
        p[i].m = p[i].n = p[i].k = 8;
        for (int x = 0; x < 4; x++) {
            gemm__operand__init(&o[i][x]);
            o[i][x].has_buffer_id = o[i][x].has_offset = true;
            o[i][x].buffer_id = bid;
            o[i][x].offset = (uint64_t)(i * 4 + x) * 256;
        }
        p[i].a = &o[i][0];
        p[i].b = &o[i][1];
        p[i].d = &o[i][3];
        pp[i] = &p[i];
    }
    /* three bad: 7 out of bounds, 4 with a bad ld, 1 of k 0 */
    o[7][0].offset = 1 << 20;
    o[4][3].has_ld = true;
    o[4][3].ld = 2;
    p[1].k = 0;
    Gemm__BatchRequest b = GEMM__BATCH_REQUEST__INIT;
    b.op = &op;
    b.n_problems = 9;
    b.problems = pp;
    Gemm__Request req = GEMM__REQUEST__INIT;
    req.has_version = true;
    req.version = GEMM_PROTOCOL_VERSION;
    req.body_case = GEMM__REQUEST__BODY_BATCH;
    req.batch = &b;
    Gemm__Reply *rep = NULL;
    cr_assert_eq(tu_raw_call(&r, &req, &rep), 0);
    cr_assert_eq(tu_reply_status(rep), GEMM_ERR_DIMS);
    cr_assert(strncmp(rep->message, "problem 1: ", 11) == 0, "%s",
              rep->message);
    cr_assert_eq(rep->body_case, GEMM__REPLY__BODY_BATCH);
    const Gemm__BatchReply *br = rep->batch;
    cr_assert_eq(br->problems, 9);
    cr_assert_eq(br->ran, 0);
    cr_assert_eq(br->bad_problems, 3);
    cr_assert_eq(br->n_errors, 3);
    static const uint64_t idx[3] = {1, 4, 7};
    static const int sts[3] = {GEMM_ERR_DIMS, GEMM_ERR_LD, GEMM_ERR_BOUNDS};
    for (int i = 0; i < 3; i++) {
        cr_assert_eq(br->errors[i]->index, idx[i]);
        cr_assert_eq(br->errors[i]->status, sts[i], "problem %llu: %d (%s)",
                     (unsigned long long)idx[i], br->errors[i]->status,
                     br->errors[i]->message);
    }
    gemm__reply__free_unpacked(rep, NULL);
    /* all 100 bad (k 0): the 64 lowest listed, 100 counted */
    for (int i = 0; i < NP; i++)
        p[i].k = 0;
    b.n_problems = NP;
    cr_assert_eq(tu_raw_call(&r, &req, &rep), 0);
    cr_assert_eq(rep->body_case, GEMM__REPLY__BODY_BATCH);
    cr_assert_eq(rep->batch->bad_problems, NP);
    cr_assert_eq(rep->batch->n_errors, 64);
    for (int i = 0; i < 64; i++)
        cr_assert_eq(rep->batch->errors[i]->index, (uint64_t)i);
    gemm__reply__free_unpacked(rep, NULL);
    tu_raw_close(&r);
    tu_shm_destroy(&shm);
    tu_assert_healthy(g_client);
}

Test(batch, limits)
{
    static const char *const args[] = {"--max-batch", "8", "--max-gemm-flops",
                                       "40000", NULL};
    fixture_start(args);
    layout l;
    gemm_problem ps[9];
    gemm_op op;
    valid_batch(&l, ps, 9, &op);
    gemm_batch b;
    gemm_batch_init(&b, &op);
    b.problems = ps;
    b.nproblems = 9;
    refused(&l, &b, GEMM_ERR_LIMIT, 8, "nine problems past --max-batch 8");
    /* 2*16^3 = 8192 flops each: the fifth passes 40000 */
    b.nproblems = 8;
    refused(&l, &b, GEMM_ERR_LIMIT, 4, "summed flops past the cap");
    b.nproblems = 4;
    run_ok(g_client, &b, "four problems within the caps");
    l.nv = 4;
    layout_verify(&l, "four problems within the caps");
    layout_free(&l);
}

/* ---- cancel and disconnect ---- */

/* A batch queued behind a held GEMM, canceled by the client's timeout,
 * writes nothing, ever. */
Test(batch, canceled_in_queue_writes_nothing)
{
    static const char *const args[] = {"--threads", "1", NULL};
    tu_hold_setup();
    fixture_start(args);
    tu_hold_need();
    gemm_client *c2 = tu_client(&g_gemmd, 30000);
    gemm_buffer *hbuf;
    gemm_op held;
    gemm_request *rh;
    tu_held_op(g_client, &hbuf, &held);
    int rv = gemm_submit(g_client, &held, &rh);
    cr_assert_eq(rv, GEMM_OK, "held: %s", gemm_strerror(rv));
    tu_hold_wait(10.0);

    layout l;
    gemm_problem ps[4];
    gemm_op op;
    gemm_client *keep = g_client;
    g_client = c2; /* the batch is c2's */
    valid_batch(&l, ps, 4, &op);
    gemm_batch b;
    gemm_batch_init(&b, &op);
    b.problems = ps;
    b.nproblems = 4;
    cr_assert_eq(gemm_client_set_timeout(c2, 20), GEMM_OK);
    rv = gemm_batch_run(c2, &b, NULL);
    cr_assert_eq(rv, GEMM_ERR_TIMEOUT, "batch behind a held GEMM: %s (%s)",
                 gemm_strerror(rv), gemm_last_error_message());
    cr_assert(strstr(gemm_last_error_message(), "nothing was written"), "%s",
              gemm_last_error_message());
    tu_hold_release();
    rv = gemm_wait(rh, NULL);
    cr_assert_eq(rv, GEMM_OK, "held: %s", gemm_strerror(rv));
    cr_assert_eq(gemm_client_set_timeout(c2, 30000), GEMM_OK);
    /* one worker, in order: c2's next GEMM ran after anything left of
     * the canceled batch */
    tu_assert_healthy(c2);
    layout_untouched(&l, "canceled batch");
    layout_free(&l);
    g_client = keep;
    gemm_buffer_free(hbuf);
    gemm_client_close(c2);
}

/* Releases the hold once the daemon logged the Cancel of a running job
 * (arg: the count of such lines before). */
static void *release_after_cancel(void *arg)
{
    int before = (int)(intptr_t)arg;
    tu_log_wait(&g_gemmd, "cancel asked while it runs", before, 20.0);
    tu_hold_release();
    return NULL;
}

/* A running batch canceled by the client's timeout stops before its next
 * problem: the call returns TIMEOUT saying how many ran; the first
 * problem's D is written and right, the others' untouched. */
Test(batch, canceled_while_running_stops_between_problems)
{
    static const char *const args[] = {"--threads", "1", "--log-level", "debug",
                                       NULL};
    tu_hold_setup();
    fixture_start(args);
    tu_hold_need();
    layout l;
    gemm_problem ps[3];
    gemm_op op;
    valid_batch(&l, ps, 3, &op);
    op.kernel = TU_HOLD_KERNEL; /* every problem would hold the worker */
    gemm_batch b;
    gemm_batch_init(&b, &op);
    b.problems = ps;
    b.nproblems = 3;
    int before = tu_log_count(&g_gemmd, "cancel asked while it runs");
    cr_assert_eq(gemm_client_set_timeout(g_client, 50), GEMM_OK);
    gemm_request *r;
    int rv = gemm_batch_submit(g_client, &b, &r);
    cr_assert_eq(rv, GEMM_OK, "submit: %s", gemm_strerror(rv));
    tu_hold_wait(10.0); /* problem 0 runs */
    pthread_t rel;
    cr_assert_eq(pthread_create(&rel, NULL, release_after_cancel,
                                (void *)(intptr_t)before),
                 0);
    rv = gemm_wait(r, NULL);
    pthread_join(rel, NULL);
    cr_assert_eq(rv, GEMM_ERR_TIMEOUT, "%s (%s)", gemm_strerror(rv),
                 gemm_last_error_message());
    cr_assert(strstr(gemm_last_error_message(), "after 1 of 3 problems"), "%s",
              gemm_last_error_message());
    cr_assert_eq(gemm_client_set_timeout(g_client, 30000), GEMM_OK);
    l.nv = 1; /* problem 0 ran: right, and nothing else written */
    layout_verify(&l, "problem 0 of a canceled batch");
    for (int p = 1; p < 3; p++) {
        size_t bytes = tu_extent(16, 16, l.v[p].ldd) * 4;
        cr_assert(memcmp(l.base + l.v[p].d, l.snap + l.v[p].d, bytes) == 0,
                  "problem %d of the canceled batch wrote its D", p);
    }
    tu_assert_healthy(g_client);
    layout_free(&l);
}

/* Runs fault_probe's batch mode (n problems, with kernel or not) in a
 * child; returns its pid. */
static pid_t probe_batch(const char *n, const char *kernel)
{
    const char *probe = getenv("GEMM_TEST_FAULT_PROBE");
    if (probe == NULL || *probe == '\0')
        probe = FAULT_PROBE;
    char *const argv[] = {(char *)probe, (char *)"batch", g_gemmd.url,
                          (char *)n,     (char *)kernel,  NULL};
    fflush(NULL);
    pid_t pid = fork();
    cr_assert_geq(pid, 0, "fork");
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL); /* never outlives the test */
        unsetenv("BXFI_MAP"); /* the probe is not a Criterion worker */
        execv(probe, argv);   /* nng does not survive a fork: exec */
        _exit(101);
    }
    return pid;
}

static void reap_killed(pid_t pid)
{
    int st;
    cr_assert_eq(waitpid(pid, &st, 0), pid, "waitpid");
    cr_assert(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL,
              "fault_probe did not reach its SIGKILL: %s %d (exit codes: "
              "10 open, 11 alloc, 13 submit, 14 status)",
              WIFEXITED(st) ? "exit" : "signal",
              WIFEXITED(st) ? WEXITSTATUS(st) : WTERMSIG(st));
}

/* Polls until the daemon has `clients` clients and an empty queue. */
static void wait_settled(uint32_t clients)
{
    gemm_status s;
    double until = tu_now() + 10.0;
    for (;;) {
        cr_assert_eq(gemm_get_status(g_client, &s), GEMM_OK);
        if ((s.clients == clients && s.queue_depth == 0) || tu_now() > until)
            break;
        tu_sleep_ms(5);
    }
    cr_assert_eq(s.clients, clients, "clients %u", s.clients);
    cr_assert_eq(s.queue_depth, 0, "a gone client's batch stays queued");
    cr_assert_eq(s.memory_used, 0, "memory still held: %llu",
                 (unsigned long long)s.memory_used);
}

/* A client leaves with a batch queued: the batch is dropped, the daemon
 * goes on and its queue empties. */
Test(batch, client_gone_with_batch_queued)
{
    static const char *const args[] = {"--threads", "1", NULL};
    tu_hold_setup();
    fixture_start(args);
    tu_hold_need();
    gemm_buffer *hbuf;
    gemm_op held;
    gemm_request *rh;
    tu_held_op(g_client, &hbuf, &held);
    int rv = gemm_submit(g_client, &held, &rh);
    cr_assert_eq(rv, GEMM_OK, "held: %s", gemm_strerror(rv));
    tu_hold_wait(10.0);
    reap_killed(probe_batch("64", NULL)); /* it saw its batch queued */
    tu_hold_release();
    rv = gemm_wait(rh, NULL);
    cr_assert_eq(rv, GEMM_OK, "held: %s", gemm_strerror(rv));
    tu_held_check(&held, hbuf, "held GEMM");
    wait_settled(1);
    tu_assert_healthy(g_client);
    gemm_buffer_free(hbuf);
}

/* A client leaves while its batch runs (its first problem held): the
 * batch stops before its next problem (which would hold the only worker
 * again), and the daemon goes on. */
Test(batch, client_gone_with_batch_running)
{
    static const char *const args[] = {"--threads", "1", NULL};
    tu_hold_setup();
    fixture_start(args);
    tu_hold_need();
    pid_t pid = probe_batch("8", TU_HOLD_KERNEL);
    tu_hold_wait(10.0);
    kill(pid, SIGKILL);
    reap_killed(pid);
    /* the daemon has seen the connection close (and asked the batch to
     * stop) once it counts one client again */
    gemm_status s;
    double until = tu_now() + 10.0;
    do {
        cr_assert_eq(gemm_get_status(g_client, &s), GEMM_OK);
        if (s.clients != 1)
            tu_sleep_ms(5);
    } while (s.clients != 1 && tu_now() < until);
    cr_assert_eq(s.clients, 1, "the probe's connection is still counted");
    tu_hold_release(); /* problem 0 goes on; problem 1 never starts */
    wait_settled(1);
    tu_assert_healthy(g_client);
}
