/*
 * fill_test.c: GEMMs filled by parts (proto's Fill on a GemmRequest,
 * gemm_submit_filled) through a real gemmd (the CPU backend in CI;
 * GEMM_TEST_BACKEND=cuda on a GPU host, where a large one runs in the
 * pipeline whose copies of B and A wait on the GPU for each part). Every
 * operand is NaN when the request goes out; C is written, the counter
 * raised to 1, then B and A part by part in common/fill.h's order with
 * the counter raised after each: a daemon that reads anything early
 * computes NaN. Integer-valued operands make every result exact. The
 * fixture's gemmd checks the order too (GEMMD_TEST_FILL_ORDER on the CPU
 * backend: daemon/fill_check.h). Then a counter that stops short, a
 * client that gives up mid-fill, and the argument rules.
 */
#include "util/daemon.h"

#include <fill.h>

#include <criterion/criterion.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void setup(void)
{
    setenv("GEMMD_TEST_FILL_ORDER", "1", 1);
    fixture_setup();
}

TestSuite(gemm_fill, .init = setup, .fini = fixture_teardown, .timeout = 150);

static uint64_t rng = 0x2545F4914F6CDD1Dull;
static int small_int(void) /* -4 .. 4 */
{
    rng = rng * 6364136223846793005ull + 1442695040888963407ull;
    return (int)((rng >> 33) % 9) - 4;
}

/* Small integers are exact in every type; bf16 is fp32's top half. */
static void put(char *p, gemm_dtype t, size_t i, double v)
{
    float f = (float)v;
    uint32_t u;
    switch (t) {
    case GEMM_BF16:
        memcpy(&u, &f, 4);
        ((uint16_t *)(void *)p)[i] = (uint16_t)(u >> 16);
        break;
    case GEMM_FP32:
        ((float *)(void *)p)[i] = f;
        break;
    default:
        ((double *)(void *)p)[i] = v;
    }
}

static double get(const char *p, gemm_dtype t, size_t i)
{
    return t == GEMM_FP32 ? ((const float *)(const void *)p)[i]
                          : ((const double *)(const void *)p)[i];
}

/* One GEMM: shape, types, transposes, how C is given (0: beta 0, 1: C
 * apart from D, 2: C is D) and the parts A is filled in. */
typedef struct fcase {
    uint64_t m, n, k;
    gemm_dtype ab, cd;
    bool ta, tb;
    int cmode;
    unsigned parts;
} fcase;

/* Where each operand lies in the buffer (bytes), stored shapes, lds. */
typedef struct flayout {
    size_t oa, ob, oc, od, ctr, size;
    size_t ar, ac, lda, br, bc, ldb, ldc, ldd;
} flayout;

static flayout lay_out(const fcase *k)
{
    flayout l;
    size_t es = gemm_dtype_size(k->ab), cs = gemm_dtype_size(k->cd);
    l.ar = k->ta ? k->k : k->m;
    l.ac = k->ta ? k->m : k->k;
    l.br = k->tb ? k->n : k->k;
    l.bc = k->tb ? k->k : k->n;
    l.lda = l.ac + 8; /* padded: the parts are strided */
    l.ldb = l.bc + 8;
    l.ldc = l.ldd = k->n + 8;
    l.oa = 0;
    l.ob = (l.oa + l.ar * l.lda * es + 255) / 256 * 256;
    l.oc = (l.ob + l.br * l.ldb * es + 255) / 256 * 256;
    l.od = k->cmode == 2 ? l.oc : (l.oc + k->m * l.ldc * cs + 255) / 256 * 256;
    l.ctr = (l.od + k->m * l.ldd * cs + 255) / 256 * 256;
    l.size = l.ctr + 64;
    return l;
}

/* The request's part q (B's parts along K, then A's along op(A)'s rows)
 * from src into dst. */
static void put_part(char *dst, const char *src, const flayout *l,
                     const gemm_fill_cut *cb, const gemm_fill_cut *ca,
                     unsigned q, size_t es)
{
    bool is_b = q < cb->parts;
    const gemm_fill_cut *c = is_b ? cb : ca;
    size_t off = is_b ? l->ob : l->oa, ld = is_b ? l->ldb : l->lda;
    size_t rows = is_b ? l->br : l->ar, cols = is_b ? l->bc : l->ac;
    uint64_t lo, hi;
    gemm_fill_range(c, q - c->first, &lo, &hi);
    for (size_t i = 0; i < rows; i++)
        for (size_t j = 0; j < cols; j++) {
            size_t x = c->cols ? j : i;
            if (x >= lo && x < hi)
                memcpy(dst + off + (i * ld + j) * es,
                       src + off + (i * ld + j) * es, es);
        }
}

static void run_case(const fcase *k)
{
    flayout l = lay_out(k);
    size_t es = gemm_dtype_size(k->ab), cs = gemm_dtype_size(k->cd);
    gemm_buffer *buf;
    cr_assert_eq(gemm_buffer_alloc(g_client, l.size, &buf), GEMM_OK, "%s",
                 gemm_last_error_message());
    char *base = gemm_buffer_data(buf);
    char *full = calloc(1, l.size);
    double *va = malloc(l.ar * l.ac * sizeof(double));
    double *vb = malloc(l.br * l.bc * sizeof(double));
    double *vc = calloc(k->m * k->n, sizeof(double));
    double *want = malloc(k->m * k->n * sizeof(double));
    cr_assert(full != NULL && va != NULL && vb != NULL && vc != NULL &&
              want != NULL);
    for (size_t i = 0; i < l.ar; i++)
        for (size_t j = 0; j < l.ac; j++)
            put(full + l.oa, k->ab, i * l.lda + j,
                va[i * l.ac + j] = small_int());
    for (size_t i = 0; i < l.br; i++)
        for (size_t j = 0; j < l.bc; j++)
            put(full + l.ob, k->ab, i * l.ldb + j,
                vb[i * l.bc + j] = small_int());
    if (k->cmode != 0)
        for (size_t i = 0; i < k->m; i++)
            for (size_t j = 0; j < k->n; j++)
                put(full + l.oc, k->cd, i * l.ldc + j,
                    vc[i * k->n + j] = small_int());
    /* the reference: alpha 2, beta -3 (exact in every type), of every
     * row of a small problem and of a row in every 64 (each part of A
     * among them) of a large one, whose every element is checked for
     * NaN below instead (an early read of B or of a part of A gives NaN) */
    const size_t step = k->m * k->n * k->k > (1u << 24) ? 64 : 1;
    for (size_t i = 0; i < k->m; i += step)
        for (size_t j = 0; j < k->n; j++) {
            double s = 0;
            for (size_t p = 0; p < k->k; p++)
                s += (k->ta ? va[p * l.ac + i] : va[i * l.ac + p]) *
                     (k->tb ? vb[j * l.bc + p] : vb[p * l.bc + j]);
            want[i * k->n + j] = 2 * s - 3 * vc[i * k->n + j];
        }
    free(va);
    free(vb);
    free(vc);

    gemm_op op;
    gemm_op_init(&op, k->m, k->n, k->k, k->ab, k->cd);
    op.trans_a = k->ta;
    op.trans_b = k->tb;
    gemm_op_set_scalars(&op, 2, 0, k->cmode != 0 ? -3 : 0, 0);
    op.a = (gemm_matrix){buf, l.oa, l.lda, 0};
    op.b = (gemm_matrix){buf, l.ob, l.ldb, 0};
    op.d = (gemm_matrix){buf, l.od, l.ldd, 0};
    if (k->cmode != 0)
        op.c = (gemm_matrix){buf, l.oc, l.ldc, 0};
    gemm_fill_cut ca =
        gemm_fill_cut_of(0, false, false, k->ta, k->m, k->n, k->parts);
    gemm_fill_cut cb = gemm_fill_cut_gemm_b(k->tb, k->k, k->parts);
    uint64_t *word = (uint64_t *)(void *)(base + l.ctr);
    memset(base, 0xff, l.ctr); /* NaN: nothing is final */
    __atomic_store_n(word, 0, __ATOMIC_RELEASE);
    gemm_request *rq;
    gemm_overlap ov = {
        .buf = buf, .fill_parts = k->parts, .fill_offset = l.ctr};
    int rv = gemm_submit_overlapped(g_client, &op, &ov, &rq);
    cr_assert_eq(rv, GEMM_OK, "%s", gemm_last_error_message());
    /* nothing is written before gemmd holds the job (it cannot end
     * before the counter does) */
    gemm_status st;
    double end = tu_now() + 10;
    do
        cr_assert_eq(gemm_get_status(g_client, &st), GEMM_OK);
    while (st.queue_depth == 0 && tu_now() < end);
    cr_assert_gt(st.queue_depth, 0, "gemmd did not take the request");
    if (k->cmode != 0)
        memcpy(base + l.oc, full + l.oc, k->m * l.ldc * cs);
    if (cb.parts == 0) /* one part: B is not cut, final at 1 */
        memcpy(base + l.ob, full + l.ob, l.oc - l.ob);
    __atomic_store_n(word, 1, __ATOMIC_RELEASE);
    for (unsigned p = 0; p < k->parts; p++) {
        put_part(base, full, &l, &cb, &ca, p, es);
        __atomic_store_n(word, 2 + (uint64_t)p, __ATOMIC_RELEASE);
    }
    gemm_timings tm;
    rv = gemm_wait(rq, &tm);
    cr_assert_eq(rv, GEMM_OK, "%llux%llux%llu: %s: %s",
                 (unsigned long long)k->m, (unsigned long long)k->n,
                 (unsigned long long)k->k, gemm_strerror(rv),
                 gemm_last_error_message());
    for (size_t i = 0; i < k->m; i++)
        for (size_t j = 0; j < k->n; j++) {
            double got = get(base + l.od, k->cd, i * l.ldd + j);
            cr_assert(!isnan(got), "D(%zu,%zu) is NaN (%s, %u parts)", i, j,
                      tm.kernel, k->parts);
            if (i % step != 0)
                continue;
            double w = want[i * k->n + j];
            cr_assert(fabs(got - w) <= 1e-9 * (1 + fabs(w)),
                      "%llux%llux%llu type %d op %c%c C mode %d, %u parts "
                      "(%s): D(%zu,%zu) = %g, want %g",
                      (unsigned long long)k->m, (unsigned long long)k->n,
                      (unsigned long long)k->k, (int)k->ab, k->ta ? 'T' : 'N',
                      k->tb ? 'T' : 'N', k->cmode, k->parts, tm.kernel, i, j,
                      got, w);
        }
    free(want);
    free(full);
    gemm_buffer_free(buf);
}

/* Every transpose and C mode, fp32 and fp64, parts from 1 to more than
 * A has rows (empty parts), and bf16 in and fp32 out. */
Test(gemm_fill, parts)
{
    cr_assert_eq(gemm_ping(g_client, NULL), GEMM_OK);
    cr_assert(gemm_server_features(g_client) & GEMM_FEATURE_FILL_GEMM,
              "gemmd does not say it takes GEMMs filled by parts");
    const gemm_dtype types[][2] = {
        {GEMM_FP32, GEMM_FP32}, {GEMM_FP64, GEMM_FP64}, {GEMM_BF16, GEMM_FP32}};
    const unsigned parts[] = {1, 3, 64};
    int n = 0;
    for (int t = 0; t < 3; t++)
        for (int tr = 0; tr < 4; tr++)
            for (int cm = 0; cm < 3; cm++) {
                fcase k = {.m = 70 + (uint64_t)tr,
                           .n = 48,
                           .k = 33,
                           .ab = types[t][0],
                           .cd = types[t][1],
                           .ta = tr & 1,
                           .tb = tr >> 1,
                           .cmode = cm,
                           .parts = parts[(t + tr + cm) % 3]};
                run_case(&k);
                n++;
            }
    cr_assert_eq(n, 36);
}

/* Large enough for the cuda backend's pipeline (its copies of B and A
 * gated part by part on the GPU), in both layouts of A and B, with 16
 * parts and with 2 (one part of B, one of A: each a cut of one). */
Test(gemm_fill, pipelined)
{
    cr_assert_eq(gemm_ping(g_client, NULL), GEMM_OK);
    for (int round = 0; round < 4; round++) {
        int ta = round & 1;
        fcase k = {.m = 2048,
                   .n = 1536,
                   .k = 1024,
                   .ab = ta ? GEMM_BF16 : GEMM_FP32,
                   .cd = GEMM_FP32,
                   .ta = ta,
                   .tb = !ta,
                   .cmode = ta ? 0 : 1,
                   .parts = round < 2 ? 16 : 2};
        run_case(&k);
    }
}

/* D drained (proto's Drain): while the request runs, every row the word
 * says is final is copied aside; each must equal D's row after the
 * reply. The word only grows, never past m; the CPU backend says m when
 * D is done (the cuda backend as each row of a pipelined GEMM's blocks
 * lands, when its buffer is pinned; else it may stay 0). Filled by parts
 * at once, as libgemmblas does. */
Test(gemm_fill, drained)
{
    cr_assert_eq(gemm_ping(g_client, NULL), GEMM_OK);
    cr_assert(gemm_server_features(g_client) & GEMM_FEATURE_DRAIN);
    const uint64_t m = 2048, n = 1536, k = 1024;
    size_t a = m * k * 4, b = k * n * 4, d = m * n * 4, ctr = a + b + d;
    gemm_buffer *buf;
    cr_assert_eq(gemm_buffer_alloc(g_client, ctr + 64, &buf), GEMM_OK);
    char *base = gemm_buffer_data(buf);
    for (int round = 0; round < 3; round++) { /* later rounds: pinned */
        for (size_t i = 0; i < (a + b) / 4; i++)
            ((float *)(void *)base)[i] = (float)small_int();
        memset(base + a + b, 0xff, d); /* NaN until written */
        float *seen = malloc(d);
        cr_assert_not_null(seen);
        memset(seen, 0xff, d);
        uint64_t *word = (uint64_t *)(void *)(base + ctr + 8);
        __atomic_store_n((uint64_t *)(void *)(base + ctr), 5, __ATOMIC_RELEASE);
        __atomic_store_n(word, 0, __ATOMIC_RELEASE);
        gemm_op op;
        gemm_op_init(&op, m, n, k, GEMM_FP32, GEMM_FP32);
        op.a = (gemm_matrix){buf, 0, 0, 0};
        op.b = (gemm_matrix){buf, a, 0, 0};
        op.d = (gemm_matrix){buf, a + b, 0, 0};
        gemm_overlap ov = {.buf = buf,
                           .fill_parts = 4,
                           .fill_offset = ctr,
                           .drain = true,
                           .drain_offset = ctr + 8};
        gemm_request *rq;
        cr_assert_eq(gemm_submit_overlapped(g_client, &op, &ov, &rq), GEMM_OK,
                     "%s", gemm_last_error_message());
        uint64_t last = 0;
        unsigned steps = 0;
        while (!gemm_request_done(rq)) {
            uint64_t v = __atomic_load_n(word, __ATOMIC_ACQUIRE);
            cr_assert(v >= last && v <= m, "the drain word went %llu -> %llu",
                      (unsigned long long)last, (unsigned long long)v);
            if (v > last) {
                memcpy((char *)seen + last * n * 4, base + a + b + last * n * 4,
                       (v - last) * n * 4);
                last = v;
                steps++;
            }
        }
        gemm_timings tm;
        int rv = gemm_wait(rq, &tm);
        cr_assert_eq(rv, GEMM_OK, "%s", gemm_last_error_message());
        uint64_t v = __atomic_load_n(word, __ATOMIC_ACQUIRE);
        cr_assert(v >= last && v <= m);
        if (strcmp(tu_backend(), "cpu") == 0)
            cr_assert_eq(v, m, "the cpu backend said %llu rows of %llu",
                         (unsigned long long)v, (unsigned long long)m);
        cr_assert(memcmp(seen, base + a + b, last * n * 4) == 0,
                  "a row said final before the reply changed after it");
        for (size_t i = 0; i < m * n; i += 4099)
            cr_assert(!isnan(((float *)(void *)(base + a + b))[i]));
        cr_log_info("round %d (%s): %u steps before the reply, %llu rows, "
                    "then %llu",
                    round, tm.kernel, steps, (unsigned long long)last,
                    (unsigned long long)v);
        free(seen);
    }
    gemm_buffer_free(buf);
}

/* A 512^3 fp64 GEMM on a new buffer *buf of cl whose fill counter stays
 * at `stop`, with timeout_ms; it must fail with TIMEOUT (the message
 * containing needle). Returns the seconds that took. */
static double fill_stuck(gemm_client *cl, uint64_t stop, uint32_t timeout_ms,
                         const char *needle, gemm_buffer **buf)
{
    size_t n = 512, mat = n * n * 8, ctr = 3 * mat;
    cr_assert_eq(gemm_buffer_alloc(cl, ctr + 8, buf), GEMM_OK);
    char *base = gemm_buffer_data(*buf);
    for (size_t i = 0; i < 2 * n * n; i++)
        ((double *)(void *)base)[i] = 0.5;
    __atomic_store_n((uint64_t *)(void *)(base + ctr), stop, __ATOMIC_RELEASE);
    gemm_op op;
    gemm_op_init(&op, n, n, n, GEMM_FP64, GEMM_FP64);
    op.a = (gemm_matrix){*buf, 0, 0, 0};
    op.b = (gemm_matrix){*buf, mat, 0, 0};
    op.d = (gemm_matrix){*buf, 2 * mat, 0, 0};
    op.timeout_ms = timeout_ms;
    gemm_request *rq;
    gemm_overlap ov = {.buf = *buf, .fill_parts = 4, .fill_offset = ctr};
    cr_assert_eq(gemm_submit_overlapped(cl, &op, &ov, &rq), GEMM_OK, "%s",
                 gemm_last_error_message());
    return tu_wait_timeout(rq, needle);
}

/* A counter that stops short fails its request with TIMEOUT at the
 * request's timeout_ms, naming the counter; the daemon serves the same
 * client next. */
Test(gemm_fill, stalled)
{
    cr_assert_eq(gemm_ping(g_client, NULL), GEMM_OK);
    gemm_buffer *buf;
    double s = fill_stuck(g_client, 3, 300, "not filled in time", &buf);
    cr_assert(s < 20, "the stalled fill held its request %.1f s", s);
    gemm_buffer_free(buf);
    tu_assert_healthy(g_client);
}

/* A client that gives up mid-fill (its own timeout cancels the request):
 * the job ends well before the fill limit and the others are served. */
Test(gemm_fill, canceled)
{
    gemm_client *cl = tu_client(&g_gemmd, 10000);
    cr_assert_not_null(cl);
    cr_assert_eq(gemm_ping(cl, NULL), GEMM_OK);
    cr_assert_eq(gemm_client_set_timeout(cl, 500), GEMM_OK);
    gemm_buffer *buf;
    double s = fill_stuck(cl, 1, 0, "", &buf);
    cr_assert(s < 5, "the cancel took %.1f s", s);
    tu_assert_queue_drains(g_client, 5); /* half the 10 s fill limit */
    gemm_buffer_free(buf);
    gemm_client_close(cl);
    tu_assert_healthy(g_client);
}

/* o filled by parts with its counter at off of buf: refused with rv, the
 * message containing needle. */
static void refused(const gemm_op *o, gemm_buffer *buf, size_t off,
                    uint32_t parts, int rv, const char *needle)
{
    gemm_request *rq;
    gemm_overlap ov = {.buf = buf, .fill_parts = parts, .fill_offset = off};
    if (parts == 0) /* the drain word at off instead */
        ov = (gemm_overlap){.buf = buf, .drain = true, .drain_offset = off};
    int got = gemm_submit_overlapped(g_client, o, &ov, &rq);
    if (got == GEMM_OK)
        got = gemm_wait(rq, NULL);
    const char *msg = gemm_last_error_message();
    cr_assert_eq(got, rv, "want %s, got %s: %s", gemm_strerror(rv),
                 gemm_strerror(got), msg);
    cr_assert(strstr(msg, needle) != NULL, "message '%s' lacks '%s'", msg,
              needle);
}

/* The counter's rules (parts, alignment, outside every operand, bounds);
 * the daemon goes on. */
Test(gemm_fill, argument_rules)
{
    cr_assert_eq(gemm_ping(g_client, NULL), GEMM_OK);
    gemm_buffer *buf;
    cr_assert_eq(gemm_buffer_alloc(g_client, 1 << 16, &buf), GEMM_OK);
    /* 32 x 32 fp64: A at 0, B at 8192, C at 16384, D at 24576 */
    gemm_op o;
    gemm_op_init(&o, 32, 32, 32, GEMM_FP64, GEMM_FP64);
    gemm_op_set_scalars(&o, 1, 0, 1, 0);
    o.a = (gemm_matrix){buf, 0, 0, 0};
    o.b = (gemm_matrix){buf, 8192, 0, 0};
    o.c = (gemm_matrix){buf, 16384, 0, 0};
    o.d = (gemm_matrix){buf, 24576, 0, 0};
    __atomic_store_n(
        (uint64_t *)(void *)((char *)gemm_buffer_data(buf) + 32768), 0,
        __ATOMIC_RELEASE);
    refused(&o, buf, 32768, 65, GEMM_ERR_INVALID, "fill parts is 65");
    refused(&o, buf, 32772, 2, GEMM_ERR_ALIGN,
            "fill counter: offset 32772 is not a multiple");
    refused(&o, buf, 8, 2, GEMM_ERR_INVALID, "fill counter overlaps A");
    refused(&o, buf, 8192 + 64, 2, GEMM_ERR_INVALID, "fill counter overlaps B");
    refused(&o, buf, 24576 + 64, 2, GEMM_ERR_INVALID,
            "fill counter overlaps D");
    refused(&o, buf, 16384 + 64, 2, GEMM_ERR_INVALID,
            "fill counter overlaps C");
    refused(&o, buf, 1 << 16, 2, GEMM_ERR_BOUNDS, "fill counter");
    /* the drain word: alignment, outside every operand, bounds */
    refused(&o, buf, 32772, 0, GEMM_ERR_ALIGN,
            "drain counter: offset 32772 is not a multiple");
    refused(&o, buf, 24576 + 8, 0, GEMM_ERR_INVALID,
            "drain counter overlaps D");
    refused(&o, buf, 16, 0, GEMM_ERR_INVALID, "drain counter overlaps A");
    refused(&o, buf, 1 << 16, 0, GEMM_ERR_BOUNDS, "drain counter");
    /* both on one word */
    gemm_request *rq;
    gemm_overlap ov = {.buf = buf,
                       .fill_parts = 2,
                       .fill_offset = 32768,
                       .drain = true,
                       .drain_offset = 32768};
    int got = gemm_submit_overlapped(g_client, &o, &ov, &rq);
    if (got == GEMM_OK)
        got = gemm_wait(rq, NULL);
    cr_assert_eq(got, GEMM_ERR_INVALID, "%s", gemm_last_error_message());
    cr_assert(strstr(gemm_last_error_message(),
                     "drain counter overlaps the fill counter") != NULL,
              "%s", gemm_last_error_message());
    /* no buffer for the counters: refused by the library */
    ov = (gemm_overlap){.fill_parts = 2};
    cr_assert_eq(gemm_submit_overlapped(g_client, &o, &ov, &rq),
                 GEMM_ERR_INVALID);
    gemm_buffer_free(buf);
    tu_assert_healthy(g_client);
}
