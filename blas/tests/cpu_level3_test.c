/*
 * cpu_level3_test.c: cpu_level3.c's plain loops (gb_cpu_l3) against the
 * routines' definitions written out independently here (full matrices
 * built from the stored triangle, products and a dense solve in double
 * complex), for every routine and type, every side, uplo, trans and diag
 * the routine takes, alpha and beta 0, 1 and a general value, and small
 * shapes (0 included), with leading dimensions larger than the rows.
 * What a routine must not read holds NaN: A's other triangle, a unit
 * diagonal, the imaginary part of hemm's A diagonal and of herk's and
 * her2k's C diagonal, C when beta is 0, A and B when alpha is 0, and all
 * padding; a NaN that reached a result fails the comparison. What it must
 * not write (C's other triangle, padding, everything on a quick return)
 * is compared bit for bit with what was there.
 */
#include "gemmblas.h"

#include <criterion/criterion.h>

#include <complex.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { MAXD = 4, PAD = 2, LDMAX = MAXD + PAD, NEL = LDMAX * MAXD + 1 };

/* One matrix: column-major, ld = rows + PAD, elements of type t. */
typedef struct tmat {
    gb_type t;
    int64_t rows, cols, ld;
    unsigned char p[NEL * 16];
    unsigned char orig[NEL * 16];
} tmat;

static size_t esz(gb_type t)
{
    return t == GB_S ? 4 : t == GB_D || t == GB_C ? 8 : 16;
}

static double complex get(const tmat *x, const unsigned char *base, int64_t i,
                          int64_t j)
{
    size_t k = (size_t)(i + j * x->ld);
    const float *f = (const float *)base;
    const double *d = (const double *)base;
    switch (x->t) {
    case GB_S:
        return f[k];
    case GB_D:
        return d[k];
    case GB_C:
        return CMPLX(f[2 * k], f[2 * k + 1]);
    default:
        return CMPLX(d[2 * k], d[2 * k + 1]);
    }
}

static void put(tmat *x, int64_t i, int64_t j, double complex v)
{
    size_t k = (size_t)(i + j * x->ld);
    float *f = (float *)x->p;
    double *d = (double *)x->p;
    switch (x->t) {
    case GB_S:
        f[k] = (float)creal(v);
        break;
    case GB_D:
        d[k] = creal(v);
        break;
    case GB_C:
        f[2 * k] = (float)creal(v);
        f[2 * k + 1] = (float)cimag(v);
        break;
    default:
        d[2 * k] = creal(v);
        d[2 * k + 1] = cimag(v);
    }
}

/* x: rows x cols, every element (padding included) NaN. */
static void init(tmat *x, gb_type t, int64_t rows, int64_t cols)
{
    x->t = t;
    x->rows = rows;
    x->cols = cols;
    x->ld = rows + PAD;
    for (size_t k = 0; k < NEL * esz(t) / 4; k++)
        ((float *)x->p)[k] = NAN;
    if (t == GB_D || t == GB_Z)
        for (size_t k = 0; k < NEL * esz(t) / 8; k++)
            ((double *)x->p)[k] = NAN;
}

static void keep(tmat *x)
{
    memcpy(x->orig, x->p, sizeof(x->p));
}

static bool cplx(gb_type t)
{
    return t == GB_C || t == GB_Z;
}

/* A deterministic value in [-1, 1) (complex for c, z). */
static unsigned rng_state = 12345;
static double rnd1(void)
{
    rng_state = rng_state * 1103515245u + 12345u;
    return (double)((rng_state >> 8) & 0xffff) / 32768.0 - 1.0;
}
static double complex rnd(gb_type t)
{
    double re = rnd1();
    return cplx(t) ? CMPLX(re, rnd1()) : re;
}

/* Sets x's element to a random value, keeping the imaginary part NaN when
 * nan_im (a part that must not be read). */
static void put_rnd(tmat *x, int64_t i, int64_t j, bool nan_im)
{
    double complex v = rnd(x->t);
    put(x, i, j, nan_im && cplx(x->t) ? CMPLX(creal(v), NAN) : v);
}

/* One call: the routine, its characters, shape and scalars. */
typedef struct tcase {
    gb_type t;
    int r;
    char side, uplo, trans, diag;
    int64_t m, n, k;
    double complex alpha, beta;
} tcase;

static bool rank_update(int r)
{
    return r >= GB_SYRK && r <= GB_HER2K;
}

/* The scalars as the routine takes them, in s (two elements' room). */
static void scalar_store(gb_type t, bool real, double complex v, void *s)
{
    if (t == GB_S || (t == GB_C && real)) {
        *(float *)s = (float)creal(v);
    } else if (t == GB_D || real) {
        *(double *)s = creal(v);
    } else if (t == GB_C) {
        ((float *)s)[0] = (float)creal(v);
        ((float *)s)[1] = (float)cimag(v);
    } else {
        ((double *)s)[0] = creal(v);
        ((double *)s)[1] = cimag(v);
    }
}

static char desc[160];

static const char *describe(const tcase *c)
{
    static const char *const names[] = {
        "", "symm", "hemm", "syrk", "herk", "syr2k", "her2k", "trmm", "trsm"};
    snprintf(desc, sizeof(desc),
             "%c%s side %c uplo %c trans %c diag %c m %lld n %lld k %lld "
             "alpha (%g,%g) beta (%g,%g)",
             "sdcz"[c->t], names[c->r], c -> side, c -> uplo, c -> trans,
             c -> diag, (long long)c -> m, (long long)c -> n, (long long)c -> k,
             creal(c->alpha), cimag(c->alpha), creal(c->beta), cimag(c->beta));
    return desc;
}

/* A(i, j) of a symmetric (hermitian: her) or triangular matrix stored in
 * the uplo triangle of a; tri: triangular, the other triangle 0 and a
 * unit diagonal 1. */
static double complex full(const tmat *a, char uplo, bool her, bool tri,
                           bool unit, int64_t i, int64_t j)
{
    bool stored = uplo == 'U' ? i <= j : i >= j;
    if (i == j) {
        if (unit)
            return 1;
        double complex d = get(a, a->p, i, i);
        return her ? creal(d) : d;
    }
    if (stored)
        return get(a, a->p, i, j);
    if (tri)
        return 0;
    double complex v = get(a, a->p, j, i);
    return her ? conj(v) : v;
}

/* op(X)(i, j) for op N, T or C of a general stored matrix. */
static double complex opx(const tmat *x, char op, int64_t i, int64_t j)
{
    if (op == 'N')
        return get(x, x->p, i, j);
    double complex v = get(x, x->p, j, i);
    return op == 'C' ? conj(v) : v;
}

/* Solves M x = y (M n x n, row-major in m, no pivoting: M is triangular
 * with a nonzero diagonal), overwriting y. */
static void solve(double complex *m, double complex *y, int64_t n)
{
    for (int64_t c = 0; c < n; c++)
        for (int64_t r = c + 1; r < n; r++) {
            double complex f = m[r * n + c] / m[c * n + c];
            for (int64_t q = c; q < n; q++)
                m[r * n + q] -= f * m[c * n + q];
            y[r] -= f * y[c];
        }
    for (int64_t r = n - 1; r >= 0; r--) {
        double complex s = y[r];
        for (int64_t q = r + 1; q < n; q++)
            s -= m[r * n + q] * y[q];
        y[r] = s / m[r * n + r];
    }
}

static long n_cases, n_checked;

/* The call's matrices: A, B (when used) and the output C (trmm's and
 * trsm's B). */
static tmat a, b, c;

static bool her_of(int r)
{
    return r == GB_HEMM || r == GB_HERK || r == GB_HER2K;
}

static bool tri_of(int r)
{
    return r == GB_TRMM || r == GB_TRSM;
}

/* Whether C(i, j) is in the output: all of C, or the rank updates' uplo
 * triangle. */
static bool in_out(const tcase *tc, int64_t i, int64_t j)
{
    return !rank_update(tc->r) || (tc->uplo == 'U' ? i <= j : i >= j);
}

/* Fills a, b and c for tc: random values where the routine reads, NaN
 * everywhere else; keeps a copy of each. */
static void fill(const tcase *tc)
{
    gb_type t = tc->t;
    int r = tc->r;
    bool rank = rank_update(r), tri = tri_of(r);
    bool azero = tc->alpha == 0;
    int64_t m = tc->m, n = tc->n, k = tc->k;
    /* A: na x ka (the rank updates: n x k, trans N, or k x n) */
    int64_t na = rank ? (tc->trans == 'N' ? n : k) : (tc->side == 'L' ? m : n);
    int64_t ka = rank ? (tc->trans == 'N' ? k : n) : na;
    init(&a, t, na, ka);
    for (int64_t j = 0; j < ka && !azero; j++)
        for (int64_t i = 0; i < na; i++) {
            bool stored = tc->uplo == 'U' ? i <= j : i >= j;
            if (rank)
                put_rnd(&a, i, j, false);
            else if (!stored || (i == j && tri && tc->diag == 'U'))
                continue;
            else if (i == j && tri) /* a diagonal away from 0 */
                put(&a, i, i, 2 + 0.5 * rnd(t));
            else if (tri)
                put(&a, i, j, 0.4 * rnd(t));
            else
                put_rnd(&a, i, j, i == j && r == GB_HEMM);
        }
    keep(&a);
    /* B: symm, hemm m x n; the rank-2k updates A's shape */
    bool uses_b = !tri && r != GB_SYRK && r != GB_HERK;
    init(&b, t, rank ? na : m, rank ? ka : n);
    for (int64_t j = 0; j < b.cols && uses_b && !azero; j++)
        for (int64_t i = 0; i < b.rows; i++)
            put_rnd(&b, i, j, false);
    keep(&b);
    /* C: m x n (the rank updates: n x n) */
    init(&c, t, rank ? n : m, n);
    bool read_c = tri ? !azero : tc->beta != 0;
    for (int64_t j = 0; j < c.cols && read_c; j++)
        for (int64_t i = 0; i < c.rows; i++)
            if (in_out(tc, i, j))
                put_rnd(&c, i, j, rank && her_of(r) && i == j);
    keep(&c);
}

/* op(T)(i, j) of trmm's and trsm's triangular A. */
static double complex op_tri(const tcase *tc, int64_t i, int64_t j)
{
    bool unit = tc->diag == 'U';
    if (tc->trans == 'N')
        return full(&a, tc->uplo, false, true, unit, i, j);
    double complex x = full(&a, tc->uplo, false, true, unit, j, i);
    return tc->trans == 'C' ? conj(x) : x;
}

/* X(i, l) of a rank update's X = op(A) (or op(B)), n x k: A itself
 * (trans N), else A^T (A^H for herk and her2k). */
static double complex op_rank(const tcase *tc, const tmat *x, int64_t i,
                              int64_t l)
{
    return opx(x, tc->trans == 'N' ? 'N' : her_of(tc->r) ? 'C' : 'T', i, l);
}

/* trsm's result: op(T) X = alpha B (side L) or X op(T) = alpha B (R),
 * the latter solved as op(T)^T X^T = alpha B^T, a row at a time. */
static void want_trsm(const tcase *tc, double complex want[MAXD][MAXD])
{
    bool left = tc->side == 'L';
    int64_t nt = left ? tc->m : tc->n, nv = left ? tc->n : tc->m;
    for (int64_t v = 0; v < nv; v++) {
        double complex mm[MAXD * MAXD], y[MAXD];
        for (int64_t i = 0; i < nt; i++) {
            for (int64_t j = 0; j < nt; j++)
                mm[i * nt + j] = left ? op_tri(tc, i, j) : op_tri(tc, j, i);
            y[i] = tc->alpha *
                   (left ? get(&c, c.orig, i, v) : get(&c, c.orig, v, i));
        }
        solve(mm, y, nt);
        for (int64_t i = 0; i < nt; i++)
            if (left)
                want[i][v] = y[i];
            else
                want[v][i] = y[i];
    }
}

/* C(i, j) as the routine's definition has it (for (i, j) in the output
 * and no quick return). */
static double complex want_elem(const tcase *tc, int64_t i, int64_t j)
{
    int r = tc->r;
    bool her = her_of(r), left = tc->side == 'L';
    double complex alpha = tc->alpha, s = 0, s2 = 0;
    if (alpha != 0 && r == GB_TRMM) {
        for (int64_t l = 0; l < (left ? tc->m : tc->n); l++)
            s += left ? op_tri(tc, i, l) * get(&c, c.orig, l, j)
                      : get(&c, c.orig, i, l) * op_tri(tc, l, j);
        return alpha * s;
    }
    if (alpha != 0 && !rank_update(r)) {
        for (int64_t l = 0; l < (left ? tc->m : tc->n); l++)
            s += left ? full(&a, tc->uplo, her, false, false, i, l) *
                            get(&b, b.p, l, j)
                      : get(&b, b.p, i, l) *
                            full(&a, tc->uplo, her, false, false, l, j);
    } else if (alpha != 0) {
        /* alpha X X^T (X X^H); alpha X Y^T + alpha Y X^T (alpha X Y^H +
         * conj(alpha) Y X^H) */
        for (int64_t l = 0; l < tc->k; l++) {
            double complex xi = op_rank(tc, &a, i, l);
            double complex xj = op_rank(tc, &a, j, l);
            if (r == GB_SYRK || r == GB_HERK) {
                s += xi * (her ? conj(xj) : xj);
                continue;
            }
            double complex yi = op_rank(tc, &b, i, l);
            double complex yj = op_rank(tc, &b, j, l);
            s += xi * (her ? conj(yj) : yj);
            s2 += yi * (her ? conj(xj) : xj);
        }
    }
    bool hdiag = rank_update(r) && her && i == j;
    double complex v = alpha * s + (r == GB_HER2K ? conj(alpha) : alpha) * s2;
    if (tc->beta != 0) {
        double complex x = get(&c, c.orig, i, j);
        v += tc->beta * (hdiag ? creal(x) : x);
    }
    return hdiag ? creal(v) : v;
}

/* Runs one case through gb_cpu_l3 and checks it against the definition. */
static void run_case(const tcase *tc)
{
    gb_type t = tc->t;
    int r = tc->r;
    bool rank = rank_update(r), tri = tri_of(r);
    int64_t m = tc->m, n = tc->n, k = tc->k;
    fill(tc);

    bool quick;
    if (tri)
        quick = m == 0 || n == 0;
    else if (rank)
        quick = n == 0 || ((tc->alpha == 0 || k == 0) && tc->beta == 1);
    else
        quick = m == 0 || n == 0 || (tc->alpha == 0 && tc->beta == 1);
    static double complex want[MAXD][MAXD];
    if (!quick && r == GB_TRSM && tc->alpha != 0)
        want_trsm(tc, want);
    else if (!quick)
        for (int64_t j = 0; j < c.cols; j++)
            for (int64_t i = 0; i < c.rows; i++)
                if (in_out(tc, i, j))
                    want[i][j] = want_elem(tc, i, j);

    unsigned char as[16], bs[16];
    scalar_store(t, r == GB_HERK, tc->alpha, as);
    scalar_store(t, r == GB_HERK || r == GB_HER2K, tc->beta, bs);
    gb_l3 p = {.t = t,
               .r = r,
               .side = tc->side,
               .uplo = tc->uplo,
               .trans = tc->trans,
               .diag = tc->diag,
               .m = m,
               .n = n,
               .k = k,
               .alpha = as,
               .beta = tri ? NULL : bs,
               .a = a.p,
               .b = b.p,
               .c = c.p,
               .lda = a.ld,
               .ldb = b.ld,
               .ldc = c.ld};
    gb_cpu_l3(&p);
    n_cases++;

    cr_assert(memcmp(a.p, a.orig, sizeof(a.p)) == 0, "A written: %s",
              describe(tc));
    cr_assert(memcmp(b.p, b.orig, sizeof(b.p)) == 0, "B written: %s",
              describe(tc));
    double eps = t == GB_S || t == GB_C ? 1e-5 : 1e-13;
    size_t es = esz(t);
    for (int64_t e = 0; e < NEL; e++) {
        int64_t i = e % c.ld, j = e / c.ld;
        size_t off = (size_t)e * es;
        if (quick || i >= c.rows || j >= c.cols || !in_out(tc, i, j)) {
            cr_assert(memcmp(c.p + off, c.orig + off, es) == 0,
                      "C(%lld, %lld) written (outside the output, or a "
                      "quick return): %s",
                      (long long)i, (long long)j, describe(tc));
            continue;
        }
        double complex got = get(&c, c.p, i, j), w = want[i][j];
        cr_assert(cabs(got - w) <=
                      eps * (1 + cabs(w)) * (double)(k + n + m + 1),
                  "C(%lld, %lld) = (%g, %g), want (%g, %g): %s", (long long)i,
                  (long long)j, creal(got), cimag(got), creal(w), cimag(w),
                  describe(tc));
        if (rank && her_of(r) && i == j)
            cr_assert(cimag(got) == 0,
                      "the diagonal's imaginary part is %g: %s", cimag(got),
                      describe(tc));
        n_checked++;
    }
}

/* The legal TRANS characters of routine r for type t. */
static const char *transes(gb_type t, int r)
{
    switch (r) {
    case GB_SYMM:
    case GB_HEMM:
        return "N";
    case GB_SYRK:
    case GB_SYR2K:
        return cplx(t) ? "NT" : "NTC";
    case GB_HERK:
    case GB_HER2K:
        return "NC";
    default:
        return "NTC";
    }
}

/* Runs c (routine and characters set) with every alpha, beta and shape:
 * m (symm, trmm, trsm) or k (the rank updates) and n. */
static void all_scalars_and_shapes(tcase c)
{
    static const int64_t dims[] = {0, 1, 2, 4};
    static const int64_t ks[] = {0, 1, 3};
    const double complex scal[] = {0, 1, CMPLX(0.7, -0.9)};
    bool rank = rank_update(c.r);
    bool tri = tri_of(c.r);
    /* real scalars where the routine takes them */
    bool real_alpha = !cplx(c.t) || c.r == GB_HERK;
    bool real_beta = !cplx(c.t) || c.r == GB_HERK || c.r == GB_HER2K;
    for (int ai = 0; ai < 3; ai++)
        for (int bi = 0; bi < (tri ? 1 : 3); bi++)
            for (int x = 0; x < (rank ? 3 : 4); x++)
                for (int ni = 0; ni < 4; ni++) {
                    c.alpha = real_alpha ? creal(scal[ai]) : scal[ai];
                    c.beta = real_beta ? creal(scal[bi]) : scal[bi];
                    c.m = rank ? 0 : dims[x];
                    c.k = rank ? ks[x] : 0;
                    c.n = dims[ni];
                    run_case(&c);
                }
}

Test(blas_cpu_level3, plain_loops_match_the_definitions)
{
    for (int t = GB_S; t <= GB_Z; t++)
        for (int r = GB_SYMM; r < GB_NROUTINES; r++) {
            if (her_of(r) && !cplx((gb_type)t))
                continue;
            bool tri = tri_of(r);
            for (const char *side = rank_update(r) ? "L" : "LR"; *side; side++)
                for (const char *uplo = "UL"; *uplo; uplo++)
                    for (const char *op = transes((gb_type)t, r); *op; op++)
                        for (const char *d = tri ? "NU" : "N"; *d; d++)
                            all_scalars_and_shapes((tcase){.t = (gb_type)t,
                                                           .r = r,
                                                           .side = *side,
                                                           .uplo = *uplo,
                                                           .trans = *op,
                                                           .diag = *d});
        }
    cr_log_info("%ld calls, %ld output elements checked", n_cases, n_checked);
    cr_assert(n_cases > 10000);
}
