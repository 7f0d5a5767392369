/*
 * blas3_test.c: the other level-3 routines (symm, hemm, syrk, herk,
 * syr2k, her2k, trmm, trsm) through a real gemmd (the CPU backend in CI;
 * GEMM_TEST_BACKEND=cuda on a GPU host), every type each takes, every
 * side, triangle, op and diagonal flag, against a long double reference
 * of the row-major (CBLAS) meaning. Padded leading dimensions; the whole
 * buffer is poisoned with 0xff bytes (NaN) first, and so are the parts of
 * A a routine must not read (the other triangle, a unit diagonal): a
 * daemon that reads them gives NaN. Every byte outside what the routine
 * writes (C's other triangle for the rank updates, padding) must be
 * unchanged afterwards. Then the argument rules over the wire (each error
 * typed and naming the reference argument) and the per-routine counters.
 */
#include "util/daemon.h"

#include <fill.h>

#include <criterion/criterion.h>

#include <complex.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* gemmd checks the order in which clients fill by parts (its CPU
 * backend: daemon/fill_check.h), then starts as every suite's does */
static void setup(void)
{
    setenv("GEMMD_TEST_FILL_ORDER", "1", 1);
    fixture_setup();
}

TestSuite(blas3, .init = setup, .fini = fixture_teardown, .timeout = 120);

typedef long double complex lcx;

static uint64_t rng = 0x9E3779B97F4A7C15ull;
static double rnd(void) /* [-1, 1), never 0 */
{
    rng = rng * 6364136223846793005ull + 1442695040888963407ull;
    return ((double)(rng >> 11) + 0.5) * 0x1p-52 - 1.0;
}

static bool cplx(gemm_dtype t)
{
    return t == GEMM_COMPLEX64 || t == GEMM_COMPLEX128;
}

static lcx get(const char *p, gemm_dtype t, size_t i)
{
    switch (t) {
    case GEMM_FP32:
        return ((const float *)p)[i];
    case GEMM_FP64:
        return ((const double *)p)[i];
    case GEMM_COMPLEX64:
        return ((const float *)p)[2 * i] +
               ((const float *)p)[2 * i + 1] * (long double complex)I;
    default:
        return ((const double *)p)[2 * i] +
               ((const double *)p)[2 * i + 1] * (long double complex)I;
    }
}

static void put(char *p, gemm_dtype t, size_t i, double re, double im)
{
    switch (t) {
    case GEMM_FP32:
        ((float *)p)[i] = (float)re;
        return;
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

/* One case: the op, and where its operands lie in the buffer. */
typedef struct l3case {
    gemm_blas3_op op;
    size_t ar, ac, br, bc, cr, cc; /* stored shapes (br = 0: no B) */
    size_t lda, ldb, ldc;
    size_t oa, ob, oc; /* byte offsets */
    double off_scale;  /* A's entries off the diagonal times this (0: 1),
                          so that a large triangle stays well-conditioned */
    bool a_tensor;     /* A from a resident tensor of its stored shape */
} l3case;

static bool is_rank(gemm_routine r)
{
    return r >= GEMM_ROUTINE_SYRK && r <= GEMM_ROUTINE_HER2K;
}
static bool is_tri(gemm_routine r)
{
    return r == GEMM_ROUTINE_TRMM || r == GEMM_ROUTINE_TRSM;
}
static bool is_her(gemm_routine r)
{
    return r == GEMM_ROUTINE_HEMM || r == GEMM_ROUTINE_HERK ||
           r == GEMM_ROUTINE_HER2K;
}

/* Whether A's element (i, j) is read: the triangle `lower` names (and,
 * for a unit triangular A, not its diagonal); all of A for the rank
 * updates. */
static bool a_read(const l3case *k, size_t i, size_t j)
{
    const gemm_blas3_op *o = &k->op;
    if (is_rank(o->routine))
        return true;
    if (i == j)
        return !(is_tri(o->routine) && o->unit_diag);
    return o->lower ? i > j : i < j;
}

/* Whether the output's element (i, j) is written. */
static bool c_written(const l3case *k, size_t i, size_t j)
{
    if (!is_rank(k->op.routine))
        return true;
    return k->op.lower ? i >= j : i <= j;
}

/* The full matrix A stands for, ka x ka (symmetric, Hermitian or
 * triangular completion of the read triangle). */
static lcx a_full(const l3case *k, const char *a, size_t i, size_t j)
{
    const gemm_blas3_op *o = &k->op;
    gemm_dtype t = o->dtype;
    bool in = o->lower ? i >= j : i <= j;
    if (is_tri(o->routine)) {
        if (i == j && o->unit_diag)
            return 1;
        return in ? get(a, t, i * k->lda + j) : 0;
    }
    if (i == j && o->routine == GEMM_ROUTINE_HEMM)
        return creall(get(a, t, i * k->lda + i));
    if (in)
        return get(a, t, i * k->lda + j);
    lcx x = get(a, t, j * k->lda + i);
    return o->routine == GEMM_ROUTINE_HEMM ? conjl(x) : x;
}

/* op(X)(i, l) of a stored rank-update operand (n x k as op'd). */
static lcx opx(const l3case *k, const char *x, size_t ld, size_t i, size_t l)
{
    char tr = k->op.trans;
    lcx v = get(x, k->op.dtype, tr == 'N' ? i * ld + l : l * ld + i);
    return tr == 'C' ? conjl(v) : v;
}

/* Solves M X = R in place (R is n x nr, row-major, dense), M n x n
 * triangular with a nonzero diagonal: Gaussian elimination. */
static void solve(lcx *M, lcx *R, size_t n, size_t nr)
{
    for (size_t p = 0; p < n; p++) {
        size_t piv = p;
        for (size_t r = p; r < n; r++)
            if (cabsl(M[r * n + p]) > cabsl(M[piv * n + p]))
                piv = r;
        for (size_t c = 0; c < n; c++) {
            lcx x = M[p * n + c];
            M[p * n + c] = M[piv * n + c];
            M[piv * n + c] = x;
        }
        for (size_t c = 0; c < nr; c++) {
            lcx x = R[p * nr + c];
            R[p * nr + c] = R[piv * nr + c];
            R[piv * nr + c] = x;
        }
        for (size_t r = 0; r < n; r++) {
            if (r == p)
                continue;
            lcx f = M[r * n + p] / M[p * n + p];
            for (size_t c = 0; c < n; c++)
                M[r * n + c] -= f * M[p * n + c];
            for (size_t c = 0; c < nr; c++)
                R[r * nr + c] -= f * R[p * nr + c];
        }
    }
    for (size_t r = 0; r < n; r++)
        for (size_t c = 0; c < nr; c++)
            R[r * nr + c] /= M[r * n + r];
}

/* The expected output (cr x cc, dense) from the operands in buf. */
static void reference(const l3case *k, const char *buf, lcx *out)
{
    const gemm_blas3_op *o = &k->op;
    gemm_dtype t = o->dtype;
    const char *a = buf + k->oa, *b = buf + k->ob, *c = buf + k->oc;
    lcx al = o->alpha_re + o->alpha_im * (long double complex)I;
    lcx be = o->beta_re + o->beta_im * (long double complex)I;
    size_t m = k->cr, n = k->cc;
    if (is_tri(o->routine)) {
        size_t ka = o->right ? n : m;
        lcx *T = calloc(ka * ka, sizeof(lcx)); /* op(A) */
        for (size_t i = 0; i < ka; i++)
            for (size_t j = 0; j < ka; j++) {
                lcx x =
                    o->trans == 'N' ? a_full(k, a, i, j) : a_full(k, a, j, i);
                T[i * ka + j] = o->trans == 'C' ? conjl(x) : x;
            }
        if (o->routine == GEMM_ROUTINE_TRMM) {
            for (size_t i = 0; i < m; i++)
                for (size_t j = 0; j < n; j++) {
                    lcx s = 0;
                    for (size_t l = 0; l < ka; l++)
                        s += o->right
                                 ? get(c, t, i * k->ldc + l) * T[l * ka + j]
                                 : T[i * ka + l] * get(c, t, l * k->ldc + j);
                    out[i * n + j] = al * s;
                }
        } else if (!o->right) { /* op(A) X = alpha B */
            for (size_t i = 0; i < m; i++)
                for (size_t j = 0; j < n; j++)
                    out[i * n + j] = al * get(c, t, i * k->ldc + j);
            solve(T, out, m, n);
        } else { /* X op(A) = alpha B: op(A)^T X^T = alpha B^T */
            lcx *Tt = calloc(ka * ka, sizeof(lcx)),
                *R = calloc(m * n, sizeof(lcx));
            for (size_t i = 0; i < ka; i++)
                for (size_t j = 0; j < ka; j++)
                    Tt[i * ka + j] = T[j * ka + i];
            for (size_t i = 0; i < m; i++)
                for (size_t j = 0; j < n; j++)
                    R[j * m + i] = al * get(c, t, i * k->ldc + j);
            solve(Tt, R, n, m);
            for (size_t i = 0; i < m; i++)
                for (size_t j = 0; j < n; j++)
                    out[i * n + j] = R[j * m + i];
            free(Tt);
            free(R);
        }
        free(T);
        return;
    }
    for (size_t i = 0; i < m; i++)
        for (size_t j = 0; j < n; j++) {
            lcx s = 0, cij = get(c, t, i * k->ldc + j);
            if (o->routine == GEMM_ROUTINE_SYMM ||
                o->routine == GEMM_ROUTINE_HEMM) {
                size_t ka = o->right ? n : m;
                for (size_t l = 0; l < ka; l++)
                    s += o->right
                             ? get(b, t, i * k->ldb + l) * a_full(k, a, l, j)
                             : a_full(k, a, i, l) * get(b, t, l * k->ldb + j);
                out[i * n + j] = al * s + be * cij;
                continue;
            }
            size_t kk = o->k;
            bool her = is_her(o->routine);
            for (size_t l = 0; l < kk; l++) {
                lcx ail = opx(k, a, k->lda, i, l),
                    ajl = opx(k, a, k->lda, j, l);
                if (o->routine == GEMM_ROUTINE_SYRK ||
                    o->routine == GEMM_ROUTINE_HERK) {
                    s += ail * (her ? conjl(ajl) : ajl);
                } else {
                    lcx bil = opx(k, b, k->ldb, i, l),
                        bjl = opx(k, b, k->ldb, j, l);
                    s += her ? al * ail * conjl(bjl) +
                                   conjl(al) * bil * conjl(ajl)
                             : al * (ail * bjl + bil * ajl);
                }
            }
            if (o->routine == GEMM_ROUTINE_SYRK ||
                o->routine == GEMM_ROUTINE_HERK)
                s *= al;
            if (her && i == j) /* C's diagonal is real, and stays real */
                out[i * n + j] = creall(s) + creall(be) * creall(cij);
            else
                out[i * n + j] = s + be * cij;
        }
}

/* Lays out k's operands from offset 0 of a buffer of *size bytes. */
static void layout(l3case *k, size_t pad, size_t *size)
{
    gemm_blas3_op *o = &k->op;
    size_t es = gemm_dtype_size(o->dtype);
    if (is_rank(o->routine)) {
        bool nt = o->trans == 'N';
        k->ar = nt ? o->n : o->k;
        k->ac = nt ? o->k : o->n;
        if (o->routine == GEMM_ROUTINE_SYR2K ||
            o->routine == GEMM_ROUTINE_HER2K)
            k->br = k->ar, k->bc = k->ac;
        k->cr = k->cc = o->n;
    } else {
        k->ar = k->ac = o->right ? o->n : o->m;
        k->cr = o->m;
        k->cc = o->n;
        if (!is_tri(o->routine))
            k->br = k->cr, k->bc = k->cc;
    }
    k->lda = k->ac + pad;
    k->ldb = k->bc + pad;
    k->ldc = k->cc + pad;
    k->oa = es * 3; /* offsets need only be element multiples */
    k->ob = k->oa + (k->ar * k->lda + 5) * es;
    k->oc = k->ob + (k->br * k->ldb + 5) * es;
    *size = k->oc + (k->cr * k->ldc + 5) * es;
}

/* What the last run_case ran (the reply's kernel name). */
static char last_ran[64];

/* > 0: run_case submits its cases filled by parts (proto's Fill): every
 * operand NaN at first, then written back (the operands not cut, then
 * each part in common/fill.h's order) while the request is in flight,
 * the counter raised after each; the daemon must read nothing early. */
static unsigned fill_parts;

/* Bytes [lo, hi) of the operand at off (rows x cols, ld) that part
 * `part` of cut c covers, from src back into dst. */
static void put_part(char *dst, const char *src, size_t off, size_t ld,
                     size_t rows, size_t cols, size_t es,
                     const gemm_fill_cut *c, unsigned part)
{
    uint64_t lo, hi;
    gemm_fill_range(c, part, &lo, &hi);
    for (size_t i = 0; i < rows; i++)
        for (size_t j = 0; j < cols; j++) {
            size_t x = c->cols ? j : i;
            if (x >= lo && x < hi)
                memcpy(dst + off + (i * ld + j) * es,
                       src + off + (i * ld + j) * es, es);
        }
}

/* Submits o filled by parts (fill_parts) from the buffer's final bytes
 * `full` (size bytes, the counter at ctr), and waits. */
static int run_filled(gemm_client *cl, const l3case *k, gemm_buffer *buf,
                      const char *full, size_t size, size_t ctr,
                      gemm_timings *tm)
{
    const gemm_blas3_op *o = &k->op;
    size_t es = gemm_dtype_size(o->dtype);
    char *base = gemm_buffer_data(buf);
    uint64_t *word = (uint64_t *)(void *)(base + ctr);
    int trans = o->trans == 'T' ? 1 : o->trans == 'C' ? 2 : 0;
    gemm_fill_cut c = gemm_fill_cut_of((int)o->routine, o->right, o->lower,
                                       trans, o->m, o->n, fill_parts);
    bool tri = is_tri(o->routine);
    /* the three operands: which fill bit each is, and where */
    struct {
        unsigned bit;
        size_t off, ld, rows, cols;
    } ops[3] = {
        {GEMM_FILL_A, k->oa, k->lda, k->ar, k->ac},
        {GEMM_FILL_B, k->ob, k->ldb, k->br, k->bc},
        {tri ? GEMM_FILL_B : GEMM_FILL_C, k->oc, k->ldc, k->cr, k->cc},
    };
    memset(base, 0xff, ctr); /* NaN: nothing is final */
    __atomic_store_n(word, 0, __ATOMIC_RELEASE);
    gemm_request *rq;
    int rv = gemm_blas3_submit_filled(cl, o, buf, ctr, fill_parts, &rq);
    if (rv != GEMM_OK)
        return rv;
    for (int i = 0; i < 3; i++)
        if (!(c.operands & ops[i].bit) && ops[i].rows > 0)
            memcpy(base + ops[i].off, full + ops[i].off,
                   ((ops[i].rows - 1) * ops[i].ld + ops[i].cols) * es);
    __atomic_store_n(word, 1, __ATOMIC_RELEASE);
    for (unsigned p = 0; p < fill_parts; p++) {
        for (int i = 0; i < 3; i++)
            if ((c.operands & ops[i].bit) && ops[i].rows > 0)
                put_part(base, full, ops[i].off, ops[i].ld, ops[i].rows,
                         ops[i].cols, es, &c, p);
        __atomic_store_n(word, 2 + (uint64_t)p, __ATOMIC_RELEASE);
    }
    (void)size;
    return gemm_wait(rq, tm);
}

/* Runs k through gemmd and checks it. */
static void run_case(gemm_client *cl, l3case *k, const char *what)
{
    gemm_blas3_op *o = &k->op;
    gemm_dtype t = o->dtype;
    size_t size, es = gemm_dtype_size(t);
    layout(k, 2, &size);
    size_t ctr = (size + 7) / 8 * 8; /* the fill counter, past the rest */
    gemm_buffer *buf;
    int rv = gemm_buffer_alloc(cl, ctr + 8, &buf);
    cr_assert_eq(rv, GEMM_OK, "%s", gemm_last_error_message());
    char *base = gemm_buffer_data(buf);
    memset(base, 0xff, size);
    bool tri = is_tri(o->routine);
    for (size_t i = 0; i < k->ar; i++)
        for (size_t j = 0; j < k->ac; j++) {
            if (!a_read(k, i, j))
                continue; /* stays NaN: must not be read */
            double re = rnd(), im = cplx(t) ? rnd() : 0;
            if (i != j && k->off_scale != 0)
                re *= k->off_scale, im *= k->off_scale;
            if (i == j && tri)
                re += 4; /* a well-conditioned triangle */
            if (i == j && o->routine == GEMM_ROUTINE_HEMM)
                im = 0;
            put(base + k->oa, t, i * k->lda + j, re, im);
        }
    for (size_t i = 0; i < k->br; i++)
        for (size_t j = 0; j < k->bc; j++)
            put(base + k->ob, t, i * k->ldb + j, rnd(), cplx(t) ? rnd() : 0);
    for (size_t i = 0; i < k->cr; i++)
        for (size_t j = 0; j < k->cc; j++)
            put(base + k->oc, t, i * k->ldc + j, rnd(), cplx(t) ? rnd() : 0);
    char *before = malloc(size);
    memcpy(before, base, size);
    lcx *want = calloc(k->cr * k->cc, sizeof(lcx));
    reference(k, base, want);
    o->a = (gemm_matrix){buf, k->oa, k->lda, 0};
    uint64_t tid = 0;
    if (k->a_tensor) { /* its unread triangle NaN as in the buffer */
        rv = gemm_tensor_upload(cl, &o->a, k->ar, k->ac, t, &tid);
        cr_assert_eq(rv, GEMM_OK, "%s: upload: %s: %s", what, gemm_strerror(rv),
                     gemm_last_error_message());
        o->a = (gemm_matrix){.tensor = tid};
    }
    gemm_matrix out = {buf, k->oc, k->ldc, 0};
    if (k->br)
        o->b = (gemm_matrix){buf, k->ob, k->ldb, 0};
    if (tri)
        o->b = out;
    else
        o->c = out;
    gemm_timings tm;
    rv = fill_parts > 0 ? run_filled(cl, k, buf, before, size, ctr, &tm)
                        : gemm_blas3_run(cl, o, &tm);
    cr_assert_eq(rv, GEMM_OK, "%s%s: %s: %s", what,
                 fill_parts > 0 ? " (filled by parts)" : "", gemm_strerror(rv),
                 gemm_last_error_message());
    snprintf(last_ran, sizeof(last_ran), "%s", tm.kernel);
    double tol = t == GEMM_FP32 || t == GEMM_COMPLEX64 ? 2e-5 : 1e-12;
    for (size_t i = 0; i < k->cr; i++)
        for (size_t j = 0; j < k->cc; j++) {
            size_t at = k->oc + (i * k->ldc + j) * es;
            if (!c_written(k, i, j)) {
                cr_assert(memcmp(base + at, before + at, es) == 0,
                          "%s: C(%zu,%zu) outside the triangle was written",
                          what, i, j);
                continue;
            }
            lcx got = get(base + k->oc, t, i * k->ldc + j);
            long double err = cabsl(got - want[i * k->cc + j]);
            long double mag = 1 + cabsl(want[i * k->cc + j]);
            cr_assert(err <= tol * mag * (1 + o->n + o->m + o->k),
                      "%s: C(%zu,%zu) = %Lg%+Lgi, want %Lg%+Lgi", what, i, j,
                      creall(got), cimagl(got), creall(want[i * k->cc + j]),
                      cimagl(want[i * k->cc + j]));
            memcpy(before + at, base + at, es); /* written: as computed */
        }
    cr_assert(memcmp(base, before, size) == 0,
              "%s: a byte outside the output changed", what);
    free(before);
    free(want);
    if (tid != 0)
        cr_assert_eq(gemm_tensor_free(cl, tid), GEMM_OK, "%s", what);
    gemm_buffer_free(buf);
}

static const gemm_dtype types[] = {GEMM_FP32, GEMM_FP64, GEMM_COMPLEX64,
                                   GEMM_COMPLEX128};

/* Every flag combination of routine r over the four types. */
static void sweep(gemm_routine r)
{
    int cases = 0;
    for (int ti = 0; ti < 4; ti++) {
        gemm_dtype t = types[ti];
        if (is_her(r) && !cplx(t))
            continue;
        const char *ops = is_rank(r)  ? (is_her(r) ? "NC" : "NT")
                          : is_tri(r) ? (cplx(t) ? "NTC" : "NT")
                                      : "N";
        for (int side = 0; side < 2; side++)
            for (int lower = 0; lower < 2; lower++)
                for (const char *op = ops; *op; op++)
                    for (int unit = 0; unit < (is_tri(r) ? 2 : 1); unit++)
                        for (int beta = 0; beta < (is_tri(r) ? 1 : 2); beta++) {
                            if (is_rank(r) && side)
                                continue;
                            l3case k = {0};
                            gemm_blas3_init(&k.op, r, t);
                            k.op.right = side;
                            k.op.lower = lower;
                            k.op.trans = *op;
                            k.op.unit_diag = unit;
                            k.op.m = 5;
                            k.op.n = 7;
                            k.op.k = 3;
                            k.op.alpha_re = 0.75;
                            k.op.alpha_im =
                                cplx(t) && r != GEMM_ROUTINE_HERK ? -0.5 : 0;
                            k.op.beta_re = beta ? -1.25 : 0;
                            k.op.beta_im =
                                beta && cplx(t) && !is_her(r) ? 0.5 : 0;
                            char what[96];
                            snprintf(what, sizeof(what),
                                     "%s %s side %c uplo %c op %c diag %c "
                                     "beta %d",
                                     gemm_routine_name(r), gemm_dtype_name(t),
                                     side ? 'R' : 'L', lower ? 'L' : 'U', *op,
                                     unit ? 'U' : 'N', beta);
                            run_case(g_client, &k, what);
                            cases++;
                        }
    }
    cr_assert_gt(cases, 0);
}

Test(blas3, symm)
{
    sweep(GEMM_ROUTINE_SYMM);
}
Test(blas3, hemm)
{
    sweep(GEMM_ROUTINE_HEMM);
}
Test(blas3, syrk)
{
    sweep(GEMM_ROUTINE_SYRK);
}
Test(blas3, herk)
{
    sweep(GEMM_ROUTINE_HERK);
}
Test(blas3, syr2k)
{
    sweep(GEMM_ROUTINE_SYR2K);
}
Test(blas3, her2k)
{
    sweep(GEMM_ROUTINE_HER2K);
}
Test(blas3, trmm)
{
    sweep(GEMM_ROUTINE_TRMM);
}
Test(blas3, trsm)
{
    sweep(GEMM_ROUTINE_TRSM);
}

/* blocks_case's A: from a resident tensor (resident_a), else the buffer. */
static bool blocks_a_tensor;

/* One case of the tests by blocks: routine r in types[ti], the flags
 * given, B (or C) m x n, A's off-diagonal entries scaled by 1/16 (a
 * well-conditioned triangle), alpha 0.75 (- 0.5i), beta -1.25 (+ 0.5i)
 * where the routine has one; runs and checks it, its name in what. */
static void blocks_case(gemm_routine r, int ti, int side, int lower, char op,
                        int unit, int m, int n, char *what, size_t wl)
{
    gemm_dtype t = types[ti];
    l3case k = {.a_tensor = blocks_a_tensor};
    gemm_blas3_init(&k.op, r, t);
    k.op.right = side;
    k.op.lower = lower;
    k.op.trans = op;
    k.op.unit_diag = unit;
    k.op.m = m;
    k.op.n = n;
    k.op.alpha_re = 0.75;
    k.op.alpha_im = cplx(t) ? -0.5 : 0;
    k.op.beta_re = is_tri(r) ? 0 : -1.25;
    k.op.beta_im = is_tri(r) || !cplx(t) ? 0 : 0.5;
    k.off_scale = 1.0 / 16;
    snprintf(what, wl, "%c%s %dx%d side %c uplo %c op %c diag %c%s", "sdcz"[ti],
             gemm_routine_name(r), m, n, side ? 'R' : 'L', lower ? 'L' : 'U',
             op, unit ? 'U' : 'N', k.a_tensor ? " (A resident)" : "");
    run_case(g_client, &k, what);
}

/* trsm large enough to be solved by blocks on the cuda backend (the
 * daemon's staging_blas3.c: GEMM updates, the routine on the diagonal
 * blocks), in every type: every side, triangle, op and diagonal, each
 * walking its blocks its own way. With gemmd's blocks small
 * (GEMMD_BLAS3_PANEL <= 40: the suite's GPU run sets 8) on cuda, the
 * reply must name both kernels ("trsm+gemm"). */
Test(blas3, trsm_blocks)
{
    const char *pb = getenv("GEMMD_BLAS3_PANEL");
    bool blocked = strcmp(tu_backend(), "cuda") == 0 && pb != NULL &&
                   atoi(pb) > 0 && atoi(pb) <= 40;
    for (int ti = 0; ti < 4; ti++)
        for (int side = 0; side < 2; side++)
            for (int lower = 0; lower < 2; lower++)
                for (const char *op = cplx(types[ti]) ? "NTC" : "NT"; *op; op++)
                    for (int unit = 0; unit < 2; unit++) {
                        char what[96];
                        blocks_case(GEMM_ROUTINE_TRSM, ti, side, lower, *op,
                                    unit, side ? 96 : 80, side ? 80 : 96, what,
                                    sizeof(what));
                        if (blocked)
                            cr_assert(strchr(last_ran, '+') != NULL,
                                      "%s ran %s, not by blocks", what,
                                      last_ran);
                    }
}

/* symm, hemm and trmm over several of gemmd's 32 x 32 tiles of A, in
 * every type, side, triangle, op and diagonal: on cuda, symm and hemm in
 * fp32 and complex64 run as GEMMs on A made whole (the reply names
 * "whole+"), the other triangle mirrored or conjugated across tiles, and
 * trmm by blocks where gemmd's blocks are small (GEMMD_BLAS3_PANEL <= 40:
 * "trmm+gemm"); the reference's NaNs outside the triangle must not reach
 * the result. */
Test(blas3, side_blocks)
{
    bool cuda = strcmp(tu_backend(), "cuda") == 0;
    const char *pb = getenv("GEMMD_BLAS3_PANEL");
    bool blocked = cuda && pb != NULL && atoi(pb) > 0 && atoi(pb) <= 40;
    bool by_type = cuda && getenv("GEMMK_BLAS3_WHOLE") == NULL;
    const gemm_routine rs[] = {GEMM_ROUTINE_SYMM, GEMM_ROUTINE_HEMM,
                               GEMM_ROUTINE_TRMM};
    for (int ri = 0; ri < 3; ri++)
        for (int ti = 0; ti < 4; ti++) {
            gemm_routine r = rs[ri];
            gemm_dtype t = types[ti];
            if (r == GEMM_ROUTINE_HEMM && !cplx(t))
                continue;
            const char *ops = !is_tri(r) ? "N" : cplx(t) ? "NTC" : "NT";
            for (int side = 0; side < 2; side++)
                for (int lower = 0; lower < 2; lower++)
                    for (const char *op = ops; *op; op++)
                        for (int unit = 0; unit < (is_tri(r) ? 2 : 1); unit++) {
                            char what[96];
                            blocks_case(r, ti, side, lower, *op, unit,
                                        side ? 72 : 97, side ? 97 : 72, what,
                                        sizeof(what));
                            bool whole = t == GEMM_FP32 || t == GEMM_COMPLEX64;
                            if (is_tri(r) && blocked)
                                cr_assert(strchr(last_ran, '+') != NULL,
                                          "%s ran %s, not by blocks", what,
                                          last_ran);
                            else if (!is_tri(r) && by_type)
                                cr_assert_eq(
                                    strncmp(last_ran, "whole+", 6) == 0, whole,
                                    "%s ran %s", what, last_ran);
                        }
        }
}

/* A from a resident tensor (on cuda read where it lies; symm and hemm
 * in fp32 and complex64 make their whole A from it in memory of their
 * own): symm, hemm, trmm and trsm, every type, both sides and
 * triangles, against the reference. */
Test(blas3, resident_a)
{
    bool whole_by_type = strcmp(tu_backend(), "cuda") == 0 &&
                         getenv("GEMMK_BLAS3_WHOLE") == NULL;
    const gemm_routine rs[] = {GEMM_ROUTINE_SYMM, GEMM_ROUTINE_HEMM,
                               GEMM_ROUTINE_TRMM, GEMM_ROUTINE_TRSM};
    blocks_a_tensor = true;
    for (int ri = 0; ri < 4; ri++)
        for (int ti = 0; ti < 4; ti++) {
            gemm_routine r = rs[ri];
            gemm_dtype t = types[ti];
            if (r == GEMM_ROUTINE_HEMM && !cplx(t))
                continue;
            for (int side = 0; side < 2; side++)
                for (int lower = 0; lower < 2; lower++) {
                    char op = is_tri(r) && cplx(t) ? 'C'
                              : is_tri(r)          ? 'T'
                                                   : 'N';
                    char what[96];
                    blocks_case(r, ti, side, lower, op, 0, side ? 40 : 67,
                                side ? 67 : 40, what, sizeof(what));
                    if (!is_tri(r) && whole_by_type)
                        cr_assert_eq(strncmp(last_ran, "whole+", 6) == 0,
                                     t == GEMM_FP32 || t == GEMM_COMPLEX64,
                                     "%s ran %s", what, last_ran);
                }
        }
    blocks_a_tensor = false;
}

/* Every routine filled by parts (3 parts, proto's Fill) in fp64 and
 * complex64, over each side and triangle and a transposed op: the
 * operands are NaN when the request goes and written back part by part
 * while it is in flight, so a part read before the counter passed it
 * spoils the result. Sizes cut into several of gemmd's blocks on cuda
 * (GEMMD_BLAS3_PANEL <= 40), where each part's copies wait on the GPU. */
Test(blas3, fill_parts)
{
    cr_assert_eq(gemm_ping(g_client, NULL), GEMM_OK);
    cr_assert(gemm_server_features(g_client) & GEMM_FEATURE_FILL,
              "gemmd does not say it takes operands filled by parts");
    fill_parts = 3;
    int cases = 0;
    for (int r = GEMM_ROUTINE_SYMM; r <= GEMM_ROUTINE_TRSM; r++)
        for (int ti = 1; ti <= 2; ti++)
            for (int side = 0; side < (is_rank(r) ? 1 : 2); side++)
                for (int lower = 0; lower < 2; lower++)
                    for (int o = 0; o < 2; o++) {
                        gemm_dtype t = types[ti];
                        if (is_her(r) && !cplx(t))
                            continue;
                        bool sym =
                            r == GEMM_ROUTINE_SYMM || r == GEMM_ROUTINE_HEMM;
                        if (sym && o == 1)
                            continue;
                        char op = o == 0                   ? 'N'
                                  : is_her(r)              ? 'C'
                                  : is_rank(r) || !cplx(t) ? 'T'
                                                           : 'C';
                        l3case k = {0};
                        gemm_blas3_init(&k.op, (gemm_routine)r, t);
                        k.op.right = side;
                        k.op.lower = lower;
                        k.op.trans = op;
                        k.op.m = side ? 72 : 97;
                        k.op.n = side ? 97 : 72;
                        k.op.k = 40;
                        k.op.alpha_re = 0.75;
                        k.op.alpha_im =
                            cplx(t) && r != GEMM_ROUTINE_HERK ? -0.5 : 0;
                        k.op.beta_re = is_tri(r) ? 0 : -1.25;
                        k.op.beta_im =
                            is_tri(r) || !cplx(t) || is_her(r) ? 0 : 0.5;
                        k.off_scale = 1.0 / 16;
                        char what[96];
                        snprintf(what, sizeof(what),
                                 "%c%s side %c uplo %c op %c filled by parts",
                                 "sdcz"[ti], gemm_routine_name((gemm_routine)r),
                                 side ? 'R' : 'L', lower ? 'L' : 'U', op);
                        run_case(g_client, &k, what);
                        cases++;
                    }
    fill_parts = 0;
    cr_assert_gt(cases, 40);
}

/* Submits a trsm of 300 x 300 (fp64) on a new buffer *buf of cl whose
 * fill counter stays at `stop`, with timeout_ms, and waits for it: it
 * must fail with TIMEOUT (the message containing needle). Returns the
 * seconds that took. */
static double fill_stuck(gemm_client *cl, uint64_t stop, uint32_t timeout_ms,
                         const char *needle, gemm_buffer **buf)
{
    size_t n = 300, ctr = 2 * n * n * 8;
    cr_assert_eq(gemm_buffer_alloc(cl, ctr + 8, buf), GEMM_OK);
    char *base = gemm_buffer_data(*buf);
    for (size_t i = 0; i < 2 * n * n; i++)
        ((double *)(void *)base)[i] = (i % (n + 1)) == 0 ? 4.0 : 0.25;
    __atomic_store_n((uint64_t *)(void *)(base + ctr), stop, __ATOMIC_RELEASE);
    gemm_blas3_op o;
    gemm_blas3_init(&o, GEMM_ROUTINE_TRSM, GEMM_FP64);
    o.m = o.n = n;
    o.a = (gemm_matrix){*buf, 0, 0, 0};
    o.b = (gemm_matrix){*buf, n * n * 8, 0, 0};
    o.timeout_ms = timeout_ms;
    gemm_request *rq;
    cr_assert_eq(gemm_blas3_submit_filled(cl, &o, *buf, ctr, 4, &rq), GEMM_OK,
                 "%s", gemm_last_error_message());
    return tu_wait_timeout(rq, needle);
}

/* A counter that stops short fails its request with TIMEOUT at the
 * request's timeout_ms, naming the counter; the daemon serves the same
 * client next. */
Test(blas3, fill_stalled)
{
    cr_assert_eq(gemm_ping(g_client, NULL), GEMM_OK);
    gemm_buffer *buf;
    double s = fill_stuck(g_client, 2, 300, "not filled in time", &buf);
    cr_assert(s < 20, "the stalled fill held its request %.1f s", s);
    gemm_buffer_free(buf);
    tu_assert_healthy(g_client);
}

/* A client that gives up mid-fill (its own timeout: it asks gemmd to
 * cancel, which stops a running job as a closed connection does): the
 * job ends well before the fill limit, its queue empties, and the
 * others are served. */
Test(blas3, fill_canceled)
{
    gemm_client *cl = tu_client(&g_gemmd, 10000);
    cr_assert_not_null(cl);
    cr_assert_eq(gemm_ping(cl, NULL), GEMM_OK);
    cr_assert_eq(gemm_client_set_timeout(cl, 500), GEMM_OK);
    gemm_buffer *buf;
    double s = fill_stuck(cl, 0, 0, "", &buf);
    cr_assert(s < 5, "the cancel took %.1f s", s);
    tu_assert_queue_drains(g_client, 5); /* half the 10 s fill limit */
    gemm_buffer_free(buf);
    gemm_client_close(cl);
    tu_assert_healthy(g_client);
}

/* A request expected to fail with rv, its message containing needle. */
static void refused(const gemm_blas3_op *o, int rv, const char *needle)
{
    int got = gemm_blas3_run(g_client, o, NULL);
    const char *msg = gemm_last_error_message();
    cr_assert_eq(got, rv, "want %s, got %s: %s", gemm_strerror(rv),
                 gemm_strerror(got), msg);
    cr_assert(strstr(msg, needle) != NULL, "message '%s' lacks '%s'", msg,
              needle);
}

/* The same for o filled by parts with its counter at off of buf. */
static void refused_fill(const gemm_blas3_op *o, gemm_buffer *buf, size_t off,
                         uint32_t parts, int rv, const char *needle)
{
    gemm_request *rq;
    int got = gemm_blas3_submit_filled(g_client, o, buf, off, parts, &rq);
    if (got == GEMM_OK)
        got = gemm_wait(rq, NULL);
    const char *msg = gemm_last_error_message();
    cr_assert_eq(got, rv, "want %s, got %s: %s", gemm_strerror(rv),
                 gemm_strerror(got), msg);
    cr_assert(strstr(msg, needle) != NULL, "message '%s' lacks '%s'", msg,
              needle);
}

Test(blas3, argument_rules)
{
    gemm_buffer *buf;
    cr_assert_eq(gemm_buffer_alloc(g_client, 1 << 16, &buf), GEMM_OK);
    gemm_blas3_op o;
    /* herk of a real type: DTYPE naming the routine */
    gemm_blas3_init(&o, GEMM_ROUTINE_HERK, GEMM_FP64);
    o.n = o.k = 4;
    o.a = (gemm_matrix){buf, 0, 0, 0};
    o.c = (gemm_matrix){buf, 4096, 0, 0};
    refused(&o, GEMM_ERR_DTYPE, "DHERK");
    /* complex syrk takes N or T, herk N or C */
    gemm_blas3_init(&o, GEMM_ROUTINE_SYRK, GEMM_COMPLEX64);
    o.n = o.k = 4;
    o.trans = 'C';
    o.a = (gemm_matrix){buf, 0, 0, 0};
    o.c = (gemm_matrix){buf, 4096, 0, 0};
    refused(&o, GEMM_ERR_INVALID, "CSYRK: parameter 2 (TRANS)");
    o.routine = GEMM_ROUTINE_HERK;
    o.trans = 'T';
    refused(&o, GEMM_ERR_INVALID, "CHERK: parameter 2 (TRANS)");
    /* op C on a real type */
    gemm_blas3_init(&o, GEMM_ROUTINE_TRMM, GEMM_FP32);
    o.m = o.n = 4;
    o.trans = 'C';
    o.a = (gemm_matrix){buf, 0, 0, 0};
    o.b = (gemm_matrix){buf, 4096, 0, 0};
    refused(&o, GEMM_ERR_INVALID, "STRMM: parameter 3 (TRANSA)");
    /* leading dimensions: the reference's positions */
    gemm_blas3_init(&o, GEMM_ROUTINE_SYMM, GEMM_FP64);
    o.m = 4;
    o.n = 6;
    o.a = (gemm_matrix){buf, 0, 3, 0};
    o.b = (gemm_matrix){buf, 1024, 0, 0};
    o.c = (gemm_matrix){buf, 4096, 0, 0};
    refused(&o, GEMM_ERR_LD, "DSYMM: parameter 7 (LDA)");
    o.a.ld = 0;
    o.b.ld = 5;
    refused(&o, GEMM_ERR_LD, "parameter 9 (LDB)");
    o.b.ld = 0;
    o.c.ld = 2;
    refused(&o, GEMM_ERR_LD, "parameter 12 (LDC)");
    gemm_blas3_init(&o, GEMM_ROUTINE_TRSM, GEMM_COMPLEX128);
    o.m = o.n = 4;
    o.a = (gemm_matrix){buf, 0, 2, 0};
    o.b = (gemm_matrix){buf, 4096, 0, 0};
    refused(&o, GEMM_ERR_LD, "ZTRSM: parameter 9 (LDA)");
    /* dimensions */
    gemm_blas3_init(&o, GEMM_ROUTINE_SYRK, GEMM_FP32);
    o.n = 0;
    o.k = 3;
    o.a = (gemm_matrix){buf, 0, 0, 0};
    o.c = (gemm_matrix){buf, 4096, 0, 0};
    refused(&o, GEMM_ERR_DIMS, "SSYRK: parameter 3 (N)");
    /* scalars */
    gemm_blas3_init(&o, GEMM_ROUTINE_HERK, GEMM_COMPLEX64);
    o.n = o.k = 4;
    o.alpha_im = 1;
    o.a = (gemm_matrix){buf, 0, 0, 0};
    o.c = (gemm_matrix){buf, 4096, 0, 0};
    refused(&o, GEMM_ERR_INVALID, "alpha of a Hermitian");
    gemm_blas3_init(&o, GEMM_ROUTINE_TRSM, GEMM_FP64);
    o.m = o.n = 4;
    o.beta_re = 1;
    o.a = (gemm_matrix){buf, 0, 0, 0};
    o.b = (gemm_matrix){buf, 4096, 0, 0};
    refused(&o, GEMM_ERR_INVALID, "no beta");
    /* flags a routine does not take */
    gemm_blas3_init(&o, GEMM_ROUTINE_SYMM, GEMM_FP64);
    o.m = o.n = 4;
    o.trans = 'T';
    o.a = (gemm_matrix){buf, 0, 0, 0};
    o.b = (gemm_matrix){buf, 1024, 0, 0};
    o.c = (gemm_matrix){buf, 4096, 0, 0};
    refused(&o, GEMM_ERR_INVALID, "takes no TRANS");
    /* the output overlapping an input */
    o.trans = 'N';
    o.c = (gemm_matrix){buf, 64, 0, 0};
    refused(&o, GEMM_ERR_INVALID, "overlaps A");
    /* an unknown routine, an operand missing, bounds */
    gemm_blas3_init(&o, (gemm_routine)9, GEMM_FP64);
    o.m = o.n = o.k = 4;
    refused(&o, GEMM_ERR_UNSUPPORTED, "unknown routine");
    gemm_blas3_init(&o, GEMM_ROUTINE_SYRK, GEMM_FP64);
    o.n = o.k = 4;
    o.a = (gemm_matrix){buf, 0, 0, 0};
    refused(&o, GEMM_ERR_INVALID, "operand C is missing");
    o.c = (gemm_matrix){buf, (1 << 16) - 8, 0, 0};
    refused(&o, GEMM_ERR_BOUNDS, "beyond");
    /* the fill counter: parts, alignment, overlap, bounds */
    cr_assert_eq(gemm_ping(g_client, NULL), GEMM_OK);
    gemm_blas3_init(&o, GEMM_ROUTINE_TRSM, GEMM_FP64);
    o.m = o.n = 4;
    o.a = (gemm_matrix){buf, 0, 0, 0};
    o.b = (gemm_matrix){buf, 4096, 0, 0};
    refused_fill(&o, buf, 8192, 0, GEMM_ERR_INVALID, "fill parts is 0");
    refused_fill(&o, buf, 8192, 65, GEMM_ERR_INVALID, "fill parts is 65");
    refused_fill(&o, buf, 8196, 2, GEMM_ERR_ALIGN,
                 "fill counter: offset 8196 is not a multiple");
    refused_fill(&o, buf, 4096 + 8, 2, GEMM_ERR_INVALID,
                 "fill counter overlaps B");
    refused_fill(&o, buf, 64, 2, GEMM_ERR_INVALID, "fill counter overlaps A");
    refused_fill(&o, buf, 1 << 16, 2, GEMM_ERR_BOUNDS, "fill counter");
    gemm_buffer_free(buf);
    tu_assert_healthy(g_client);
}

Test(blas3, counters)
{
    gemm_status before, after;
    cr_assert_eq(gemm_get_status(g_client, &before), GEMM_OK);
    for (int r = GEMM_ROUTINE_SYMM; r <= GEMM_ROUTINE_TRSM; r++) {
        l3case k = {0};
        gemm_blas3_init(&k.op, (gemm_routine)r, GEMM_COMPLEX128);
        k.op.m = 3;
        k.op.n = 4;
        k.op.k = 2;
        run_case(g_client, &k, gemm_routine_name((gemm_routine)r));
    }
    cr_assert_eq(gemm_get_status(g_client, &after), GEMM_OK);
    for (int r = GEMM_ROUTINE_SYMM; r <= GEMM_ROUTINE_TRSM; r++)
        cr_assert_eq(after.routine_served[r], before.routine_served[r] + 1,
                     "%s: served %llu -> %llu",
                     gemm_routine_name((gemm_routine)r),
                     (unsigned long long)before.routine_served[r],
                     (unsigned long long)after.routine_served[r]);
    cr_assert_eq(after.routine_served[0], before.routine_served[0]);
}
