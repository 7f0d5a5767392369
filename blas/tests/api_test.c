/*
 * api_test.c: libgemmblas's GEMM entry points, called as a program calls
 * them (this executable links libgemmblas.so.0 and defines its own
 * xerbla_ and cblas_xerbla, which must be the ones called):
 *  - the reference argument checks of sgemm_ .. zgemm_ and cblas_?gemm,
 *    position by position, row-major numbering included, C untouched;
 *  - the cases settled without a product (m or n 0, alpha or k 0; beta 0
 *    never reads C, alpha 0 never reads A or B, here NULL);
 *  - results against long double for the four types, both interfaces,
 *    both layouts, every op pair (N, T, C), odd shapes and padded leading
 *    dimensions, through gemmd (GEMMBLAS_MIN_FLOPS=0, its served counter
 *    checked) and through the CPU BLAS;
 *  - beta 0 with NaN in C, on both paths;
 *  - many threads at once; fork (a child of a process using nng computes
 *    on the CPU, a child of one that never did offloads); a daemon
 *    restart; no daemon (fast, correct, one line with GEMMBLAS_VERBOSE);
 *    a stopped daemon (bounded by GEMMBLAS_TIMEOUT_MS).
 * Each Criterion test is its own process: the library reads its
 * environment at the first call, so each test sets it first.
 */
#include "util/daemon.h"

#include <criterion/criterion.h>

#include <complex.h>
#include <math.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

/* ---- libgemmblas's exports ---- */
void sgemm_(const char *, const char *, const int *, const int *, const int *,
            const void *, const void *, const int *, const void *, const int *,
            const void *, void *, const int *);
void dgemm_(const char *, const char *, const int *, const int *, const int *,
            const void *, const void *, const int *, const void *, const int *,
            const void *, void *, const int *);
void cgemm_(const char *, const char *, const int *, const int *, const int *,
            const void *, const void *, const int *, const void *, const int *,
            const void *, void *, const int *);
void zgemm_(const char *, const char *, const int *, const int *, const int *,
            const void *, const void *, const int *, const void *, const int *,
            const void *, void *, const int *);
void cblas_sgemm(int, int, int, int, int, int, float, const float *, int,
                 const float *, int, float, float *, int);
void cblas_dgemm(int, int, int, int, int, int, double, const double *, int,
                 const double *, int, double, double *, int);
void cblas_cgemm(int, int, int, int, int, int, const void *, const void *, int,
                 const void *, int, const void *, void *, int);
void cblas_zgemm(int, int, int, int, int, int, const void *, const void *, int,
                 const void *, int, const void *, void *, int);
extern int RowMajorStrg;
double ddot_(const int *, const double *, const int *, const double *,
             const int *);

enum { ROW = 101, COL = 102, NT = 111, TR = 112, CT = 113 };

/* ---- our error handlers (they win over the library's) ---- */
static char got_name[32];
static int got_info, got_calls, got_rowmajor;

void xerbla_(const char *srname, const int *info, size_t len)
{
    snprintf(got_name, sizeof(got_name), "%.*s", (int)(len < 31 ? len : 31),
             srname);
    got_info = *info;
    got_calls++;
}

void cblas_xerbla(int info, const char *rout, const char *form, ...)
{
    (void)form;
    snprintf(got_name, sizeof(got_name), "%s", rout);
    got_info = info;
    got_calls++;
    got_rowmajor = RowMajorStrg;
}

static void clear_err(void)
{
    got_name[0] = '\0';
    got_info = got_calls = got_rowmajor = 0;
}

/* ---- a GEMM of any type through any interface ---- */

enum { S, D, C, Z };
static const size_t esz[] = {4, 8, 8, 16};

typedef struct call {
    int t;       /* S, D, C, Z */
    bool cblas;  /* cblas_?gemm, else ?gemm_ */
    int layout;  /* ROW or COL (COL for Fortran) */
    char ta, tb; /* 'N', 'T', 'C' */
    int m, n, k;
    int lda, ldb, ldc;
    double complex alpha, beta;
    void *a, *b, *c;
} call;

static int cbop(char t)
{
    return t == 'N' ? NT : t == 'T' ? TR : CT;
}

static void run(const call *x)
{
    float fa[2] = {(float)creal(x->alpha), (float)cimag(x->alpha)};
    float fb[2] = {(float)creal(x->beta), (float)cimag(x->beta)};
    double da[2] = {creal(x->alpha), cimag(x->alpha)};
    double db[2] = {creal(x->beta), cimag(x->beta)};
    if (!x->cblas) {
        const char ta[2] = {x->ta, 0}, tb[2] = {x->tb, 0};
        switch (x->t) {
        case S:
            sgemm_(ta, tb, &x->m, &x->n, &x->k, fa, x->a, &x->lda, x->b,
                   &x->ldb, fb, x->c, &x->ldc);
            break;
        case D:
            dgemm_(ta, tb, &x->m, &x->n, &x->k, da, x->a, &x->lda, x->b,
                   &x->ldb, db, x->c, &x->ldc);
            break;
        case C:
            cgemm_(ta, tb, &x->m, &x->n, &x->k, fa, x->a, &x->lda, x->b,
                   &x->ldb, fb, x->c, &x->ldc);
            break;
        default:
            zgemm_(ta, tb, &x->m, &x->n, &x->k, da, x->a, &x->lda, x->b,
                   &x->ldb, db, x->c, &x->ldc);
        }
        return;
    }
    int ta = cbop(x->ta), tb = cbop(x->tb);
    switch (x->t) {
    case S:
        cblas_sgemm(x->layout, ta, tb, x->m, x->n, x->k, fa[0], x->a, x->lda,
                    x->b, x->ldb, fb[0], x->c, x->ldc);
        break;
    case D:
        cblas_dgemm(x->layout, ta, tb, x->m, x->n, x->k, da[0], x->a, x->lda,
                    x->b, x->ldb, db[0], x->c, x->ldc);
        break;
    case C:
        cblas_cgemm(x->layout, ta, tb, x->m, x->n, x->k, fa, x->a, x->lda, x->b,
                    x->ldb, fb, x->c, x->ldc);
        break;
    default:
        cblas_zgemm(x->layout, ta, tb, x->m, x->n, x->k, da, x->a, x->lda, x->b,
                    x->ldb, db, x->c, x->ldc);
    }
}

static long double complex get(int t, const void *p, size_t i)
{
    switch (t) {
    case S:
        return ((const float *)p)[i];
    case D:
        return ((const double *)p)[i];
    case C:
        return ((const float *)p)[2 * i] +
               (long double)((const float *)p)[2 * i + 1] * I;
    default:
        return ((const double *)p)[2 * i] +
               (long double)((const double *)p)[2 * i + 1] * I;
    }
}

static void put(int t, void *p, size_t i, double complex v)
{
    switch (t) {
    case S:
        ((float *)p)[i] = (float)creal(v);
        break;
    case D:
        ((double *)p)[i] = creal(v);
        break;
    case C:
        ((float *)p)[2 * i] = (float)creal(v);
        ((float *)p)[2 * i + 1] = (float)cimag(v);
        break;
    default:
        ((double *)p)[2 * i] = creal(v);
        ((double *)p)[2 * i + 1] = cimag(v);
    }
}

/* Element (i, j) of a matrix in x's layout: column-major index j*ld+i. */
static size_t at(const call *x, int i, int j, int ld)
{
    return x->layout == COL ? (size_t)j * ld + i : (size_t)i * ld + j;
}

/* op(X)(i, l) for X of op t stored in x's layout. */
static long double complex op_at(const call *x, const void *p, char t, int ld,
                                 int i, int l)
{
    long double complex v = t == 'N' ? get(x->t, p, at(x, i, l, ld))
                                     : get(x->t, p, at(x, l, i, ld));
    return t == 'C' ? conjl(v) : v;
}

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static double uni(void)
{
    rng ^= rng >> 12, rng ^= rng << 25, rng ^= rng >> 27;
    return (double)((rng * 0x2545F4914F6CDD1Dull) >> 11) * 0x1p-53 * 2 - 1;
}

/* Allocates and fills x's A, B, C (C with a margin of NaN-free guard
 * values past its last column); returns the element count of C's
 * allocation. */
static size_t setup(call *x)
{
    bool cpx = x->t == C || x->t == Z;
    int ra = x->ta == 'N' ? x->m : x->k, ca = x->ta == 'N' ? x->k : x->m;
    int rb = x->tb == 'N' ? x->k : x->n, cb = x->tb == 'N' ? x->n : x->k;
    /* the stored rows x cols in the call's layout: ld spans the rows in
     * column-major, the columns in row-major */
    size_t na = (size_t)(x->layout == COL ? ca : ra) * x->lda;
    size_t nb = (size_t)(x->layout == COL ? cb : rb) * x->ldb;
    size_t nc = (size_t)(x->layout == COL ? x->n : x->m) * x->ldc;
    x->a = malloc(na * esz[x->t] + 16);
    x->b = malloc(nb * esz[x->t] + 16);
    x->c = malloc(nc * esz[x->t] + 16);
    cr_assert(x->a && x->b && x->c);
    for (size_t i = 0; i < na; i++)
        put(x->t, x->a, i, uni() + (cpx ? uni() * I : 0));
    for (size_t i = 0; i < nb; i++)
        put(x->t, x->b, i, uni() + (cpx ? uni() * I : 0));
    for (size_t i = 0; i < nc; i++)
        put(x->t, x->c, i, uni() + (cpx ? uni() * I : 0));
    return nc;
}

/* Runs x and checks C against long double, and that C's padding (rows
 * or columns past m/n within ld) is untouched. */
static void run_checked(call *x, const char *what)
{
    size_t nc = setup(x);
    void *c0 = malloc(nc * esz[x->t] + 16);
    memcpy(c0, x->c, nc * esz[x->t]);
    run(x);
    long double eps = x->t == S || x->t == C ? 0x1p-24L : 0x1p-53L;
    for (int i = 0; i < x->m; i++)
        for (int j = 0; j < x->n; j++) {
            long double complex acc = 0;
            long double sc = 0;
            for (int l = 0; l < x->k; l++) {
                long double complex p = op_at(x, x->a, x->ta, x->lda, i, l) *
                                        op_at(x, x->b, x->tb, x->ldb, l, j);
                acc += p;
                sc += cabsl(op_at(x, x->a, x->ta, x->lda, i, l)) *
                      cabsl(op_at(x, x->b, x->tb, x->ldb, l, j));
            }
            long double complex c = get(x->t, c0, at(x, i, j, x->ldc));
            long double complex want = x->alpha * acc + x->beta * c;
            sc = sc * cabsl(x->alpha) + cabsl(x->beta) * cabsl(c);
            long double complex got = get(x->t, x->c, at(x, i, j, x->ldc));
            long double err = cabsl(got - want);
            cr_assert(err <= 8 * (x->k + 2) * eps * sc + 1e-30L,
                      "%s: C(%d,%d) = %.9Lg%+.9Lgi, want %.9Lg%+.9Lgi", what, i,
                      j, creall(got), cimagl(got), creall(want), cimagl(want));
        }
    /* ld padding: untouched */
    int outer = x->layout == COL ? x->n : x->m;
    int inner = x->layout == COL ? x->m : x->n;
    for (int o = 0; o < outer; o++)
        for (int q = inner; q < x->ldc; q++) {
            size_t idx = (size_t)o * x->ldc + q;
            cr_assert(memcmp((char *)x->c + idx * esz[x->t],
                             (char *)c0 + idx * esz[x->t], esz[x->t]) == 0,
                      "%s: padding element %zu of C changed", what, idx);
        }
    free(c0);
    free(x->a);
    free(x->b);
    free(x->c);
}

/* ---- fixtures ---- */

static void env(const char *min_flops)
{
    setenv("GEMMBLAS_MIN_FLOPS", min_flops, 1);
    setenv("GEMMBLAS_RETRY_MS", "0", 1);
}

/* Requests gemmd served (GEMMs, libgemmblas's buffer registrations),
 * not counting our own Status requests: each counts once it is
 * answered. */
static uint64_t served(void)
{
    static uint64_t status_calls;
    gemm_status st;
    cr_assert_eq(gemm_get_status(g_client, &st), GEMM_OK);
    return st.requests_served - status_calls++;
}

/* A daemon; the library finds it through GEMM_URL. */
static void with_daemon(void)
{
    fixture_start(NULL);
    setenv("GEMM_URL", g_gemmd.url, 1);
}

static void no_daemon(void)
{
    setenv("GEMM_URL", "ipc:///nonexistent/gemmblas-test.sock", 1);
}

TestSuite(blas_api, .timeout = 120);

/* ---- argument checks ---- */

/* One bad Fortran call: the handler saw NAME and INFO, C unchanged. */
static void bad_f77(int t, const char *name, char ta, char tb, int m, int n,
                    int k, int lda, int ldb, int ldc, int want)
{
    double c[4] = {1, 2, 3, 4}, a[4] = {0}, b[4] = {0};
    call x = {.t = t,
              .layout = COL,
              .ta = ta,
              .tb = tb,
              .m = m,
              .n = n,
              .k = k,
              .lda = lda,
              .ldb = ldb,
              .ldc = ldc,
              .alpha = 1,
              .beta = 1,
              .a = a,
              .b = b,
              .c = c};
    clear_err();
    run(&x);
    cr_expect_eq(got_calls, 1, "%s %c%c m%d n%d k%d: xerbla_ called %d times",
                 name, ta, tb, m, n, k, got_calls);
    cr_expect_str_eq(got_name, name);
    cr_expect_eq(got_info, want, "%s %c%c m%d n%d k%d lda%d ldb%d ldc%d", name,
                 ta, tb, m, n, k, lda, ldb, ldc);
    cr_expect(c[0] == 1 && c[1] == 2 && c[2] == 3 && c[3] == 4,
              "C changed by a refused call");
}

Test(blas_api, fortran_argument_checks)
{
    no_daemon();
    env("0");
    static const char *const names[] = {"SGEMM ", "DGEMM ", "CGEMM ", "ZGEMM "};
    for (int t = 0; t < 4; t++) {
        const char *nm = names[t];
        bad_f77(t, nm, 'X', 'N', 0, 0, 0, 1, 1, 1, 1);
        bad_f77(t, nm, 'N', '/', 0, 0, 0, 1, 1, 1, 2);
        bad_f77(t, nm, 'N', 'N', -1, 0, 0, 1, 1, 1, 3);
        bad_f77(t, nm, 'T', 'N', 0, -1, 0, 1, 1, 1, 4);
        bad_f77(t, nm, 'N', 'T', 0, 0, -1, 1, 1, 1, 5);
        bad_f77(t, nm, 'N', 'N', 2, 0, 0, 1, 1, 2, 8);  /* lda < m */
        bad_f77(t, nm, 'T', 'N', 0, 0, 2, 1, 2, 1, 8);  /* lda < k */
        bad_f77(t, nm, 'N', 'N', 0, 0, 2, 1, 1, 1, 10); /* ldb < k */
        bad_f77(t, nm, 'N', 'C', 0, 2, 0, 1, 1, 1, 10); /* ldb < n */
        bad_f77(t, nm, 'N', 'N', 2, 0, 0, 2, 1, 1, 13); /* ldc < m */
        /* the first bad one wins, in the reference order */
        bad_f77(t, nm, 'N', 'N', -1, -1, -1, 0, 0, 0, 3);
        bad_f77(t, nm, 'Q', 'Q', -1, 0, 0, 1, 1, 1, 1);
        /* lower case and 'C' on real types are legal */
        clear_err();
        double c[1] = {5}, a[1] = {2}, b[1] = {3};
        call x = {.t = t,
                  .layout = COL,
                  .ta = 'c',
                  .tb = 't',
                  .m = 1,
                  .n = 1,
                  .k = 1,
                  .lda = 1,
                  .ldb = 1,
                  .ldc = 1,
                  .alpha = 0,
                  .beta = 2,
                  .a = a,
                  .b = b,
                  .c = c};
        run(&x);
        cr_expect_eq(got_calls, 0, "lower-case c/t refused (%d)", got_info);
    }
}

static void bad_cblas(int t, const char *name, int layout, int ta, int tb,
                      int m, int n, int k, int lda, int ldb, int ldc, int want)
{
    double c[4] = {1, 2, 3, 4}, a[4] = {0}, b[4] = {0};
    float one[2] = {1, 0};
    double done[2] = {1, 0};
    clear_err();
    switch (t) {
    case S:
        cblas_sgemm(layout, ta, tb, m, n, k, 1, (float *)a, lda, (float *)b,
                    ldb, 1, (float *)c, ldc);
        break;
    case D:
        cblas_dgemm(layout, ta, tb, m, n, k, 1, a, lda, b, ldb, 1, c, ldc);
        break;
    case C:
        cblas_cgemm(layout, ta, tb, m, n, k, one, a, lda, b, ldb, one, c, ldc);
        break;
    default:
        cblas_zgemm(layout, ta, tb, m, n, k, done, a, lda, b, ldb, done, c,
                    ldc);
    }
    cr_expect_eq(got_calls, 1, "%s: cblas_xerbla called %d times", name,
                 got_calls);
    cr_expect_str_eq(got_name, name);
    cr_expect_eq(got_info, want,
                 "%s layout %d ta %d tb %d m%d n%d k%d lda%d ldb%d ldc%d: "
                 "info %d, want %d",
                 name, layout, ta, tb, m, n, k, lda, ldb, ldc, got_info, want);
    cr_expect_eq(got_rowmajor, layout == ROW, "RowMajorStrg during the call");
    cr_expect_eq(RowMajorStrg, 0, "RowMajorStrg after the call");
    cr_expect(c[0] == 1 && c[1] == 2 && c[2] == 3 && c[3] == 4,
              "C changed by a refused call");
}

Test(blas_api, cblas_argument_checks)
{
    no_daemon();
    env("0");
    static const char *const names[] = {"cblas_sgemm", "cblas_dgemm",
                                        "cblas_cgemm", "cblas_zgemm"};
    for (int t = 0; t < 4; t++) {
        const char *nm = names[t];
        bad_cblas(t, nm, 0, NT, NT, 0, 0, 0, 1, 1, 1, 1);
        bad_cblas(t, nm, COL, 0, NT, 0, 0, 0, 1, 1, 1, 2);
        bad_cblas(t, nm, ROW, NT, 99, 0, 0, 0, 1, 1, 1, 3);
        bad_cblas(t, nm, COL, NT, NT, -1, 0, 0, 1, 1, 1, 4);
        bad_cblas(t, nm, COL, NT, NT, 0, -1, 0, 1, 1, 1, 5);
        bad_cblas(t, nm, COL, NT, NT, 0, 0, -1, 1, 1, 1, 6);
        bad_cblas(t, nm, COL, NT, NT, 2, 0, 0, 1, 1, 2, 9);
        bad_cblas(t, nm, COL, NT, NT, 0, 0, 2, 1, 1, 1, 11);
        bad_cblas(t, nm, COL, NT, NT, 2, 0, 0, 2, 1, 1, 14);
        /* row-major: as reference CBLAS numbers them (it calls Fortran
         * with A and B, M and N swapped): M -> 5, N -> 4, lda -> 11,
         * ldb -> 9, which the testers' cblas_xerbla maps back */
        bad_cblas(t, nm, ROW, NT, NT, -1, 0, 0, 1, 1, 1, 5);
        bad_cblas(t, nm, ROW, NT, NT, 0, -1, 0, 1, 1, 1, 4);
        bad_cblas(t, nm, ROW, NT, NT, 0, 0, -1, 1, 1, 1, 6);
        bad_cblas(t, nm, ROW, NT, NT, 0, 0, 2, 1, 1, 1, 11); /* lda < k */
        bad_cblas(t, nm, ROW, NT, NT, 0, 2, 0, 1, 1, 2, 9);  /* ldb < n */
        bad_cblas(t, nm, ROW, NT, NT, 0, 2, 0, 1, 2, 1, 14); /* ldc < n */
    }
}

/* ---- what is settled without a product ---- */

Test(blas_api, quick_returns_read_nothing_needless)
{
    no_daemon();
    env("0");
    double nan = NAN, zero = 0, one = 1, two = 2;
    int m = 3, n = 2, k = 4, z = 0, ld = 3;
    double c[6];
    /* m or n 0: nothing is touched (A, B and C NULL) */
    dgemm_("N", "N", &z, &n, &k, &one, NULL, &ld, NULL, &k, &one, NULL, &ld);
    dgemm_("N", "N", &m, &z, &k, &one, NULL, &ld, NULL, &k, &one, NULL, &ld);
    /* alpha 0, beta 0: C zeroed without being read (NaN there), A and B
     * not read (NULL) */
    for (int i = 0; i < 6; i++)
        c[i] = nan;
    dgemm_("N", "N", &m, &n, &k, &zero, NULL, &ld, NULL, &k, &zero, c, &ld);
    for (int i = 0; i < 6; i++)
        cr_expect_eq(c[i], 0.0, "c[%d] = %g", i, c[i]);
    /* alpha 0, beta 1: C untouched (NaN stays) */
    for (int i = 0; i < 6; i++)
        c[i] = nan;
    dgemm_("N", "N", &m, &n, &k, &zero, NULL, &ld, NULL, &k, &one, c, &ld);
    for (int i = 0; i < 6; i++)
        cr_expect(isnan(c[i]));
    /* k 0, beta 2: C doubled, A and B not read */
    for (int i = 0; i < 6; i++)
        c[i] = i;
    dgemm_("N", "N", &m, &n, &z, &one, NULL, &ld, NULL, &ld, &two, c, &ld);
    for (int i = 0; i < 6; i++)
        cr_expect_eq(c[i], 2.0 * i);
    /* complex alpha 0, beta i: C = i C */
    double complex cz[6], bi = I, az = 0;
    for (int i = 0; i < 6; i++)
        cz[i] = i + 1 - I;
    cblas_zgemm(ROW, NT, CT, 2, 3, 4, &az, NULL, 4, NULL, 4, &bi, cz, 3);
    for (int i = 0; i < 6; i++)
        cr_expect(cz[i] == I * (i + 1 - I), "cz[%d]", i);
    cr_expect_eq(got_calls, 0);
}

/* beta 0 with NaN in C: C is written, never read. */
static void beta0_nan(void)
{
    for (int t = 0; t < 4; t++)
        for (int layout = 0; layout < 2; layout++) {
            call x = {.t = t,
                      .cblas = layout == 1,
                      .layout = layout ? ROW : COL,
                      .ta = 'N',
                      .tb = t >= C ? 'C' : 'T',
                      .m = 9,
                      .n = 7,
                      .k = 5,
                      .lda = 9,
                      .ldb = 7,
                      .ldc = 11,
                      .alpha = 1.5,
                      .beta = 0};
            if (x.layout == ROW)
                x.lda = 5, x.ldb = 5, x.ldc = 8;
            size_t nc = setup(&x);
            for (size_t i = 0; i < nc; i++)
                put(t, x.c, i, NAN);
            run(&x);
            for (int i = 0; i < x.m; i++)
                for (int j = 0; j < x.n; j++) {
                    long double complex v = get(t, x.c, at(&x, i, j, x.ldc));
                    cr_assert(isfinite(creall(v)) && isfinite(cimagl(v)),
                              "type %d layout %d: C(%d,%d) is not finite", t,
                              layout, i, j);
                }
            free(x.a);
            free(x.b);
            free(x.c);
        }
}

Test(blas_api, beta0_never_reads_c_offloaded, .init = with_daemon,
     .fini = fixture_stop)
{
    env("0");
    uint64_t before = served();
    beta0_nan();
    cr_expect_geq(served() - before, 8, "the GEMMs went through gemmd");
}

Test(blas_api, beta0_never_reads_c_cpu)
{
    no_daemon();
    env("-1");
    beta0_nan();
}

/* ---- results, both paths ---- */

static const int shapes[][3] = {{1, 1, 1},  {1, 7, 3},   {5, 1, 2},
                                {3, 4, 1},  {17, 9, 13}, {33, 31, 29},
                                {64, 3, 70}};

/* Every type, interface, layout, op pair and shape; returns the number
 * of calls. */
/* The call of type t through interface api (0 f77, 1 cblas column-major,
 * 2 cblas row-major), ops "NTC"[oa], "NTC"[ob], of shape sh (m, n, k),
 * beta 0 or not; every stored operand padded by 1..3 (variant s). */
static call make_call(int t, int api, int oa, int ob, const int sh[3], size_t s,
                      bool with_beta)
{
    static const char ops[] = "NTC";
    call x = {.t = t,
              .cblas = api > 0,
              .layout = api == 2 ? ROW : COL,
              .ta = ops[oa],
              .tb = ops[ob],
              .m = sh[0],
              .n = sh[1],
              .k = sh[2],
              .alpha = t >= C ? 0.5 - 1.25 * I : -0.75,
              .beta = with_beta ? (t >= C ? 2 + I : 2.0) : 0};
    /* stored rows (col-major) or columns (row-major) of each operand */
    bool col = x.layout == COL;
    int ra = x.ta == 'N' ? x.m : x.k;
    int ca = x.ta == 'N' ? x.k : x.m;
    int rb = x.tb == 'N' ? x.k : x.n;
    int cb = x.tb == 'N' ? x.n : x.k;
    x.lda = (col ? ra : ca) + (int)(s % 3);
    x.ldb = (col ? rb : cb) + (int)((s + 1) % 3);
    x.ldc = (col ? x.m : x.n) + (int)((s + 2) % 4);
    return x;
}

static int sweep(void)
{
    int calls = 0;
    for (int t = 0; t < 4; t++)
        for (int api = 0; api < 3; api++) /* f77, cblas col, cblas row */
            for (int oa = 0; oa < 3; oa++)
                for (int ob = 0; ob < 3; ob++)
                    for (size_t s = 0; s < sizeof(shapes) / sizeof(shapes[0]);
                         s++) {
                        if ((t == S || t == D) && (oa == 2 || ob == 2) && s > 2)
                            continue; /* 'C' is 'T' on real types */
                        call x =
                            make_call(t, api, oa, ob, shapes[s], s, s % 2 != 0);
                        char what[96];
                        snprintf(what, sizeof(what),
                                 "%c api %d op %c%c %dx%dx%d", "sdcz"[t], api,
                                 x.ta, x.tb, x.m, x.n, x.k);
                        run_checked(&x, what);
                        calls++;
                    }
    return calls;
}

Test(blas_api, results_offloaded, .init = with_daemon, .fini = fixture_stop)
{
    env("0");
    uint64_t before = served();
    int calls = sweep();
    cr_expect_geq(served() - before, (uint64_t)calls,
                  "gemmd served %llu of %d GEMMs",
                  (unsigned long long)(served() - before), calls);
}

Test(blas_api, results_cpu)
{
    no_daemon();
    env("-1");
    sweep();
}

/* ---- row panels (GEMMBLAS_PANELS) ---- */

/* Shapes whose row-major m (the caller's n in column-major) is no
 * multiple of 3 or 4. */
static const int pshapes[][3] = {{37, 29, 13}, {29, 38, 8}, {50, 41, 17}};

/* Every type, interface, layout and op pair on pshapes, beta 0 and not,
 * cut into panels; returns the number of calls. */
static int panel_sweep(void)
{
    int calls = 0;
    for (int t = 0; t < 4; t++)
        for (int api = 0; api < 3; api++)
            for (int oa = 0; oa < 3; oa++)
                for (int ob = 0; ob < 3; ob++)
                    for (size_t s = 0; s < 3; s++)
                        for (int b = 0; b < 2; b++) {
                            if ((t == S || t == D) && (oa == 2 || ob == 2))
                                continue; /* 'C' is 'T' on real types */
                            call x =
                                make_call(t, api, oa, ob, pshapes[s], s, b);
                            char what[96];
                            snprintf(what, sizeof(what),
                                     "panels: %c api %d op %c%c %dx%dx%d b%d",
                                     "sdcz"[t], api, x.ta, x.tb, x.m, x.n, x.k,
                                     b);
                            run_checked(&x, what);
                            calls++;
                        }
    return calls;
}

static void panels_env(const char *panels, const char *inflight)
{
    env("0");
    setenv("GEMMBLAS_PANELS", panels, 1);
    setenv("GEMMBLAS_PANELS_INFLIGHT", inflight, 1);
    setenv("GEMMBLAS_PANEL_MIN_FLOPS", "0", 1);
}

/* Three panels, two in flight: each call is at least 3 GEMMs on gemmd. */
Test(blas_api, panels_results, .init = with_daemon, .fini = fixture_stop)
{
    panels_env("3", "2");
    gemm_status st0, st1;
    cr_assert_eq(gemm_get_status(g_client, &st0), GEMM_OK);
    int calls = panel_sweep();
    cr_assert_eq(gemm_get_status(g_client, &st1), GEMM_OK);
    cr_expect_geq(st1.gemms_served - st0.gemms_served, 3 * (uint64_t)calls,
                  "gemmd served %llu GEMMs for %d calls in 3 panels",
                  (unsigned long long)(st1.gemms_served - st0.gemms_served),
                  calls);
}

/* Four panels, three in flight (slots reused out of step with P). */
Test(blas_api, panels_results_more_in_flight, .init = with_daemon,
     .fini = fixture_stop)
{
    panels_env("4", "3");
    panel_sweep();
}

/* stderr captured into a temporary file while a call runs. */
typedef struct captured {
    char path[64];
    int fd, saved;
} captured;

static void capture_start(captured *cp)
{
    snprintf(cp->path, sizeof(cp->path), "/tmp/gemmblas-stderr-XXXXXX");
    cp->fd = mkstemp(cp->path);
    cr_assert_geq(cp->fd, 0);
    fflush(stderr);
    cp->saved = dup(2);
    dup2(cp->fd, 2);
}

/* Restores stderr; text gets what was written (truncated to len). */
static void capture_end(captured *cp, char *text, size_t len)
{
    fflush(stderr);
    dup2(cp->saved, 2);
    close(cp->saved);
    lseek(cp->fd, 0, SEEK_SET);
    ssize_t n = read(cp->fd, text, len - 1);
    text[n > 0 ? n : 0] = '\0';
    close(cp->fd);
    unlink(cp->path);
}

/* A column-major dgemm C = A B^T + C of n x n small integers (exact in
 * double): returns the number of wrong elements of C. */
typedef struct big_dgemm {
    int n;
    double *a, *b, *c, *want;
    int wrong;
} big_dgemm;

static void big_setup(big_dgemm *x, int n)
{
    x->n = n;
    size_t nn = (size_t)n * n;
    x->a = malloc(nn * 8), x->b = malloc(nn * 8), x->c = malloc(nn * 8);
    x->want = calloc(nn, 8);
    cr_assert(x->a && x->b && x->c && x->want);
    for (size_t i = 0; i < nn; i++) {
        x->a[i] = (double)((i * 7) % 11) - 5;
        x->b[i] = (double)((i * 5) % 13) - 6;
        x->c[i] = x->want[i] = (double)(i % 9) - 4;
    }
    /* want(i,j) += sum_l a(i,l) b(j,l), column-major */
    for (int l = 0; l < n; l++)
        for (int j = 0; j < n; j++) {
            double bj = x->b[(size_t)l * n + j];
            double *w = x->want + (size_t)j * n;
            const double *al = x->a + (size_t)l * n;
            for (int i = 0; i < n; i++)
                w[i] += al[i] * bj;
        }
}

static void *big_run(void *arg)
{
    big_dgemm *x = arg;
    double one = 1;
    dgemm_("N", "T", &x->n, &x->n, &x->n, &one, x->a, &x->n, x->b, &x->n, &one,
           x->c, &x->n);
    x->wrong = 0;
    for (size_t i = 0; i < (size_t)x->n * x->n; i++)
        x->wrong += x->c[i] != x->want[i];
    return NULL;
}

static void big_free(big_dgemm *x)
{
    free(x->a), free(x->b), free(x->c), free(x->want);
}

/* gemmd takes one request of the connection at a time (--client-inflight
 * 1): a panel sent while another runs is refused (the second, unless
 * gemmd finished the first before it read the second); the panels before
 * it are copied back and the CPU computes the others from C's rows. */
Test(blas_api, panels_refused_mid_call)
{
    const char *const extra[] = {"--client-inflight", "1", "--client-pending",
                                 "8", NULL};
    fixture_start(extra);
    setenv("GEMM_URL", g_gemmd.url, 1);
    panels_env("4", "2");
    setenv("GEMMBLAS_VERBOSE", "1", 1);
    big_dgemm x;
    big_setup(&x, 1024); /* panels of 256 rows */
    captured cp;
    capture_start(&cp);
    big_run(&x);
    char text[8192];
    capture_end(&cp, text, sizeof(text));
    cr_expect_eq(x.wrong, 0, "%d wrong elements of C", x.wrong);
    const char *at = strstr(text, "dgemm panel ");
    int refused = 0;
    cr_assert(at != NULL && sscanf(at, "dgemm panel %d of 4", &refused) == 1,
              "no panel was refused:\n%s", text);
    cr_assert_geq(refused, 2, "the first panel was refused:\n%s", text);
    char want[96];
    snprintf(want, sizeof(want), "on the CPU (gemmd wrote rows 0..%d)",
             (refused - 1) * 256 - 1);
    cr_expect(strstr(text, want) != NULL,
              "the rows before panel %d came from gemmd, the rest from the "
              "CPU:\n%s",
              refused, text);
    gemm_status st;
    cr_assert_eq(gemm_get_status(g_client, &st), GEMM_OK);
    cr_expect_geq(st.gemms_served, (uint64_t)refused - 1,
                  "gemmd computed the panels before the refused one");
    big_free(&x);
    fixture_stop();
}

/* A stopped daemon under a call in panels: it gives up within the
 * timeouts (GEMMBLAS_TIMEOUT_MS, then the client's wait for the cancel)
 * and the result is right; running again, gemmd gets the panels again. */
Test(blas_api, panels_stopped_daemon, .init = with_daemon, .fini = fixture_stop)
{
    panels_env("4", "2");
    setenv("GEMMBLAS_TIMEOUT_MS", "300", 1);
    big_dgemm x;
    big_setup(&x, 256);
    big_run(&x);
    cr_assert_eq(x.wrong, 0, "gemmd running: %d wrong", x.wrong);
    for (size_t i = 0; i < (size_t)x.n * x.n; i++)
        x.c[i] = (double)(i % 9) - 4;
    kill(g_gemmd.pid, SIGSTOP);
    double t0 = tu_now();
    big_run(&x);
    double dt = tu_now() - t0;
    kill(g_gemmd.pid, SIGCONT);
    cr_expect_eq(x.wrong, 0, "stopped gemmd: %d wrong", x.wrong);
    cr_expect_lt(dt, 5.0, "gave up after %.2f s (timeout 0.3 s)", dt);
    for (size_t i = 0; i < (size_t)x.n * x.n; i++)
        x.c[i] = (double)(i % 9) - 4;
    gemm_status st0, st1;
    cr_assert_eq(gemm_get_status(g_client, &st0), GEMM_OK);
    big_run(&x);
    cr_assert_eq(gemm_get_status(g_client, &st1), GEMM_OK);
    cr_expect_eq(x.wrong, 0, "running again: %d wrong", x.wrong);
    cr_expect_geq(st1.gemms_served - st0.gemms_served, 4,
                  "gemmd computed the panels again");
    big_free(&x);
}

/* gemmd killed while a call's panels run: the panels copied back stay,
 * the CPU computes the rest from the caller's C; the result is exact. */
Test(blas_api, panels_daemon_killed_mid_call)
{
    char why[256];
    gemmd_proc d;
    cr_assert_eq(gemmd_start(&d, NULL, why, sizeof(why)), 0, "%s", why);
    setenv("GEMM_URL", d.url, 1);
    panels_env("16", "2");
    setenv("GEMMBLAS_VERBOSE", "1", 1);
    gemm_client *c = tu_client(&d, 5000);
    big_dgemm x;
    big_setup(&x, 1024);
    captured cp;
    capture_start(&cp);
    pthread_t th;
    cr_assert_eq(pthread_create(&th, NULL, big_run, &x), 0);
    /* until gemmd finished a panel (polled, 60 s at most) */
    gemm_status st = {0};
    double deadline = tu_now() + 60;
    while (gemm_get_status(c, &st) == GEMM_OK && st.gemms_served == 0 &&
           tu_now() < deadline)
        tu_sleep_ms(1);
    uint64_t panels_done = st.gemms_served;
    kill(d.pid, SIGKILL);
    pthread_join(th, NULL);
    char text[8192];
    capture_end(&cp, text, sizeof(text));
    gemm_client_close(c);
    gemmd_destroy(&d);
    cr_assert_geq(panels_done, 1, "gemmd never finished a panel");
    cr_expect_eq(x.wrong, 0, "%d wrong elements of C", x.wrong);
    cr_expect(panels_done >= 16 ||
                  strstr(text, "on the CPU (gemmd wrote rows 0..") != NULL,
              "killed after %llu panels, yet no rows on the CPU:\n%s",
              (unsigned long long)panels_done, text);
    big_free(&x);
}

/* ---- threads ---- */

static void *thread_main(void *arg)
{
    int id = (int)(intptr_t)arg;
    for (int i = 0; i < 30; i++) {
        call x = {.t = (id + i) % 4,
                  .cblas = i % 2,
                  .layout = i % 3 ? COL : ROW,
                  .ta = "NTC"[i % 3],
                  .tb = "NTC"[(i + id) % 3],
                  .m = 20 + id,
                  .n = 13 + i % 5,
                  .k = 9 + id % 3,
                  .alpha = 1.25,
                  .beta = 0.5};
        if (!x.cblas)
            x.layout = COL;
        bool col = x.layout == COL;
        int ra = x.ta == 'N' ? x.m : x.k, ca = x.ta == 'N' ? x.k : x.m;
        int rb = x.tb == 'N' ? x.k : x.n, cb = x.tb == 'N' ? x.n : x.k;
        x.lda = col ? ra : ca;
        x.ldb = col ? rb : cb;
        x.ldc = col ? x.m : x.n;
        run_checked(&x, "thread");
    }
    return NULL;
}

Test(blas_api, many_threads, .init = with_daemon, .fini = fixture_stop)
{
    env("0");
    uint64_t before = served();
    pthread_t th[8];
    for (int i = 0; i < 8; i++)
        pthread_create(&th[i], NULL, thread_main, (void *)(intptr_t)i);
    for (int i = 0; i < 8; i++)
        pthread_join(th[i], NULL);
    cr_expect_geq(served() - before, 240, "8 threads x 30 GEMMs via gemmd");
}

/* ---- fork ---- */

/* A dgemm checked in this process; exits non-zero from a child on a
 * wrong result. */
static int child_dgemm(void)
{
    int n = 40;
    double *a = malloc(sizeof(double) * n * n), *c = calloc(n * n, 8);
    for (int i = 0; i < n * n; i++)
        a[i] = (i % 7) - 3;
    double one = 1, zero = 0;
    dgemm_("N", "T", &n, &n, &n, &one, a, &n, a, &n, &zero, c, &n);
    int bad = 0;
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++) {
            double s = 0;
            for (int l = 0; l < n; l++)
                s += a[l * n + i] * a[l * n + j];
            bad |= c[j * n + i] != s;
        }
    free(a);
    free(c);
    return bad;
}

static int wait_child(pid_t pid)
{
    int st;
    cr_assert_eq(waitpid(pid, &st, 0), pid);
    cr_assert(WIFEXITED(st),
              "child died (signal %d): libgemmblas must not "
              "abort a forked child",
              WIFSIGNALED(st) ? WTERMSIG(st) : 0);
    return WEXITSTATUS(st);
}

/* The parent uses gemmd (nng up), then forks: the child computes on the
 * CPU, correctly, without touching nng (which would abort it). */
Test(blas_api, fork_after_use_computes_on_cpu, .init = with_daemon,
     .fini = fixture_stop)
{
    env("0");
    cr_assert_eq(child_dgemm(), 0, "parent");
    uint64_t before = served();
    pid_t pid = fork();
    if (pid == 0)
        _exit(child_dgemm() + 10 * child_dgemm());
    cr_expect_eq(wait_child(pid), 0, "the child's results");
    cr_expect_eq(served() - before, 0, "the child sent nothing to gemmd");
    cr_assert_eq(child_dgemm(), 0, "parent after the fork");
    cr_expect_geq(served() - before, 1, "the parent still offloads");
}

/* Runs fork_probe MODE (a plain program: this one has nng running,
 * started by Criterion) against the fixture's daemon; returns gemmd's
 * served requests during the run. */
static uint64_t fork_probe(const char *mode)
{
    uint64_t before = served();
    pid_t pid = fork();
    if (pid == 0) {
        execl(FORK_PROBE, FORK_PROBE, mode, (char *)NULL);
        _exit(127);
    }
    cr_expect_eq(wait_child(pid), 0, "fork_probe %s", mode);
    return served() - before;
}

/* Each process that offloads costs gemmd a ping, a buffer registration
 * and its GEMMs. A process that never used nng forks: the child offloads
 * too (3 + 3 requests). The same with nng in use before the fork: the
 * parent's ping, registration and 2 GEMMs, nothing from the child (4). */
Test(blas_api, fork_probe_counts, .init = with_daemon, .fini = fixture_stop)
{
    env("0");
    uint64_t n = fork_probe("before");
    cr_expect_eq(n, 6,
                 "fork before any use: %llu requests, want 6 (the child "
                 "offloads)",
                 (unsigned long long)n);
    n = fork_probe("after");
    cr_expect_eq(n, 4,
                 "fork after use: %llu requests, want 4 (the child "
                 "computes on the CPU)",
                 (unsigned long long)n);
}

/* ---- the daemon goes and comes ---- */

/* The library's URL names a symlink to the daemon's socket, so a second
 * daemon (its own directory) can take the first one's place. */
static void point(const char *link, const gemmd_proc *d)
{
    unlink(link);
    cr_assert_eq(symlink(d->sock, link), 0, "symlink %s", link);
}

Test(blas_api, daemon_restart_reconnects)
{
    env("0");
    char dir[] = "/tmp/gemmblas-restart-XXXXXX", link[128], url[160];
    char why[256];
    cr_assert_not_null(mkdtemp(dir));
    snprintf(link, sizeof(link), "%s/gemmd.sock", dir);
    snprintf(url, sizeof(url), "ipc://%s", link);
    setenv("GEMM_URL", url, 1);
    gemmd_proc d1, d2;
    cr_assert_eq(gemmd_start(&d1, NULL, why, sizeof(why)), 0, "%s", why);
    point(link, &d1);
    cr_assert_eq(child_dgemm(), 0, "first daemon");
    gemm_client *c = tu_client(&d1, 5000);
    gemm_status st;
    cr_assert_eq(gemm_get_status(c, &st), GEMM_OK);
    cr_expect_geq(st.gemm_flops, 2 * 40 * 40 * 40, "served by the first");
    gemm_client_close(c);
    cr_assert_eq(gemmd_stop(&d1, 20), 0);
    double t0 = tu_now();
    cr_assert_eq(child_dgemm(), 0, "no daemon: the CPU");
    cr_expect_lt(tu_now() - t0, 2.0, "no daemon: no wait");
    cr_assert_eq(gemmd_start(&d2, NULL, why, sizeof(why)), 0, "%s", why);
    point(link, &d2);
    cr_assert_eq(child_dgemm(), 0, "second daemon");
    c = tu_client(&d2, 5000);
    cr_assert_eq(gemm_get_status(c, &st), GEMM_OK);
    cr_expect_geq(st.gemm_flops, 2 * 40 * 40 * 40,
                  "the library reconnected to the new daemon");
    gemm_client_close(c);
    gemmd_stop(&d2, 20);
    unlink(link);
    rmdir(dir);
}

/* No daemon: every call computes at once on the CPU; with
 * GEMMBLAS_VERBOSE one line says why (not one per call). */
Test(blas_api, no_daemon_fast_and_one_line)
{
    no_daemon();
    env("0");
    setenv("GEMMBLAS_RETRY_MS", "60000", 1);
    setenv("GEMMBLAS_VERBOSE", "1", 1);
    char path[] = "/tmp/gemmblas-stderr-XXXXXX";
    int fd = mkstemp(path);
    cr_assert_geq(fd, 0);
    int saved = dup(2);
    dup2(fd, 2);
    double t0 = tu_now();
    for (int i = 0; i < 50; i++)
        cr_assert_eq(child_dgemm(), 0);
    double dt = tu_now() - t0;
    dup2(saved, 2);
    close(saved);
    char text[4096] = "";
    lseek(fd, 0, SEEK_SET);
    ssize_t n = read(fd, text, sizeof(text) - 1);
    text[n > 0 ? n : 0] = '\0';
    close(fd);
    unlink(path);
    cr_expect_lt(dt, 5.0, "50 small GEMMs took %.2f s without a daemon", dt);
    int lines = 0;
    for (const char *p = text; (p = strstr(p, "no gemmd")) != NULL; p++)
        lines++;
    cr_expect_eq(lines, 1, "one 'no gemmd' line, got:\n%s", text);
}

/* A stopped daemon: the call gives up after GEMMBLAS_TIMEOUT_MS and the
 * CPU computes; once the daemon runs again, calls go there again. */
Test(blas_api, stopped_daemon_times_out, .init = with_daemon,
     .fini = fixture_stop)
{
    env("0");
    setenv("GEMMBLAS_TIMEOUT_MS", "300", 1);
    cr_assert_eq(child_dgemm(), 0);
    kill(g_gemmd.pid, SIGSTOP);
    double t0 = tu_now();
    cr_assert_eq(child_dgemm(), 0, "stopped daemon: the CPU");
    double dt = tu_now() - t0;
    kill(g_gemmd.pid, SIGCONT);
    cr_expect_lt(dt, 3.0, "gave up after %.2f s (timeout 0.3 s)", dt);
    uint64_t before = served();
    cr_assert_eq(child_dgemm(), 0, "running again");
    cr_expect_geq(served() - before, 1, "offloaded again");
}

/* A daemon stopped before the first call: the connect gives up after
 * GEMMBLAS_CONNECT_TIMEOUT_MS (not nng's 10 s dial) and the CPU computes. */
Test(blas_api, stopped_daemon_connect_times_out, .init = with_daemon,
     .fini = fixture_stop)
{
    env("0");
    setenv("GEMMBLAS_CONNECT_TIMEOUT_MS", "500", 1);
    kill(g_gemmd.pid, SIGSTOP);
    double t0 = tu_now();
    int bad = child_dgemm();
    double dt = tu_now() - t0;
    kill(g_gemmd.pid, SIGCONT);
    cr_assert_eq(bad, 0, "stopped daemon: the CPU computes");
    cr_expect_lt(dt, 2.0, "gave up after %.2f s (connect timeout 0.5 s)", dt);
}

/* A forwarded function (ddot_ is not ours): reaches the CPU BLAS. */
Test(blas_api, forwarded_function)
{
    no_daemon();
    double x[5] = {1, 2, 3, 4, 5}, y[5] = {2, 2, 2, 2, 2};
    int n = 5, one = 1;
    cr_expect_eq(ddot_(&n, x, &one, y, &one), 30.0);
}

/* ---- the other level-3 routines ---- */

void dsyrk_(const char *, const char *, const int *, const int *,
            const double *, const double *, const int *, const double *,
            double *, const int *);
void dtrsm_(const char *, const char *, const char *, const char *, const int *,
            const int *, const double *, const double *, const int *, double *,
            const int *);
void cblas_zherk(int, int, int, int, int, double, const void *, int, double,
                 void *, int);
void ssyrk_(const char *, const char *, const int *, const int *, const float *,
            const float *, const int *, const float *, float *, const int *);

/* Routine r's served count (gemm_status.routine_served). */
static uint64_t served3(int r)
{
    gemm_status st;
    cr_assert_eq(gemm_get_status(g_client, &st), GEMM_OK);
    return st.routine_served[r];
}

/* dsyrk (lower, C = A A^T, the upper triangle untouched), dtrsm (left,
 * lower, T X = B) and a row-major cblas_zherk (upper), n x n, checked
 * exactly or by the residual; seed varies the data. Returns 0 when all
 * are right (usable from a child of fork). */
static int level3_checked(int n, int seed)
{
    size_t nn = (size_t)n * n;
    double *a = malloc(nn * 8), *c = malloc(nn * 8), *t = calloc(nn, 8);
    double *b = malloc(nn * 8), *b0 = malloc(nn * 8);
    double complex *za = malloc(nn * 16), *zc = malloc(nn * 16);
    int bad = 0;
    for (size_t i = 0; i < nn; i++) {
        a[i] = (double)((i * 7 + (size_t)seed) % 9) - 4;
        c[i] = 7;
        b[i] = b0[i] = (double)((i * 5 + (size_t)seed) % 11) - 5;
        za[i] = (double)(i % 5) - 2 + ((double)(i % 3) - 1) * I;
        zc[i] = 3 + 3 * I;
    }
    for (int j = 0; j < n; j++) /* lower triangular, column-major */
        for (int i = j; i < n; i++)
            t[(size_t)j * n + i] = i == j ? 4 : 0.125 * ((i + j + seed) % 3);
    double one = 1, zero = 0;
    dsyrk_("L", "N", &n, &n, &one, a, &n, &zero, c, &n);
    for (int j = 0; j < n; j++)
        for (int i = 0; i < n; i++) {
            double s = 0;
            for (int l = 0; l < n; l++)
                s += a[(size_t)l * n + i] * a[(size_t)l * n + j];
            double got = c[(size_t)j * n + i];
            bad |= i >= j ? got != s : got != 7; /* integers: exact */
        }
    dtrsm_("L", "L", "N", "N", &n, &n, &one, t, &n, b, &n);
    for (int j = 0; j < n; j++)
        for (int i = 0; i < n; i++) {
            double s = 0;
            for (int l = 0; l <= i; l++)
                s += t[(size_t)l * n + i] * b[(size_t)j * n + l];
            bad |= fabs(s - b0[(size_t)j * n + i]) > 1e-12;
        }
    /* row-major upper: C = A A^H, the lower triangle untouched */
    cblas_zherk(ROW, 121, NT, n, n, 1.0, za, n, 0.0, zc, n);
    for (int i = 0; i < n; i++)
        for (int j = 0; j < n; j++) {
            double complex s = 0;
            for (int l = 0; l < n; l++)
                s += za[(size_t)i * n + l] * conj(za[(size_t)j * n + l]);
            double complex got = zc[(size_t)i * n + j];
            bad |= j >= i ? cabs(got - s) > 1e-12 : got != 3 + 3 * I;
        }
    free(a);
    free(c);
    free(t);
    free(b);
    free(b0);
    free(za);
    free(zc);
    return bad;
}

/* Large contiguous operands (18 MB each: staged with streaming stores by
 * the copy threads): C = (2 I) B + C0 comes back exact. */
Test(blas_api, gemm_large_copies_exact, .init = with_daemon,
     .fini = fixture_stop)
{
    env("0");
    int n = 1536;
    size_t nn = (size_t)n * n;
    double *a = calloc(nn, 8), *b = malloc(nn * 8), *c = malloc(nn * 8);
    cr_assert(a != NULL && b != NULL && c != NULL);
    for (int i = 0; i < n; i++)
        a[(size_t)i * n + i] = 2;
    for (size_t i = 0; i < nn; i++) {
        b[i] = (double)(i % 1021) - 510;
        c[i] = (double)(i % 7);
    }
    double one = 1;
    uint64_t served = served3(GEMM_ROUTINE_GEMM);
    dgemm_("N", "N", &n, &n, &n, &one, a, &n, b, &n, &one, c, &n);
    cr_expect_eq(served3(GEMM_ROUTINE_GEMM) - served, 1, "dgemm via gemmd");
    long bad = 0;
    for (size_t i = 0; i < nn; i++)
        bad += c[i] != 2 * b[i] + (double)(i % 7);
    cr_expect_eq(bad, 0, "%ld elements wrong", bad);
    free(a);
    free(b);
    free(c);
}

/* Large triangles (a dsyrk's output, both triangles, ldc > n, beta 1)
 * are staged and copied back by the copy threads with streaming stores
 * (>= 16 MiB): the referenced triangle is exact, the other and the
 * padding beyond n untouched. A has one nonzero a row (column i % k), so
 * C = C0 + A A^T is known in O(n^2). */
Test(blas_api, level3_large_triangles, .init = with_daemon,
     .fini = fixture_stop)
{
    env("0");
    int n = 2048, k = 8, ldc = n + 5;
    double *a = calloc((size_t)n * k, 8), *c = malloc((size_t)ldc * n * 8);
    cr_assert(a != NULL && c != NULL);
    for (int i = 0; i < n; i++) /* column-major A: n x k */
        a[(size_t)(i % k) * n + i] = (double)(i % 13) - 6;
    double one = 1;
    for (int up = 0; up < 2; up++) {
        for (int j = 0; j < n; j++)
            for (int i = 0; i < ldc; i++)
                c[(size_t)j * ldc + i] = (double)(i + 2 * j);
        uint64_t syrk = served3(GEMM_ROUTINE_SYRK);
        dsyrk_(up ? "U" : "L", "N", &n, &k, &one, a, &n, &one, c, &ldc);
        cr_expect_eq(served3(GEMM_ROUTINE_SYRK) - syrk, 1, "dsyrk via gemmd");
        long bad = 0;
        for (int j = 0; j < n; j++)
            for (int i = 0; i < ldc; i++) {
                double want = (double)(i + 2 * j);
                bool ref = i < n && (up ? i <= j : i >= j);
                if (ref && i % k == j % k)
                    want += ((double)(i % 13) - 6) * ((double)(j % 13) - 6);
                bad += c[(size_t)j * ldc + i] != want;
            }
        cr_expect_eq(bad, 0, "%s: %ld elements wrong or written outside",
                     up ? "upper" : "lower", bad);
    }
    free(a);
    free(c);
}

/* Through gemmd from 8 threads at once, each routine's counter moving;
 * then the same calls on the CPU (below the threshold) agree. */
static void *level3_thread(void *arg)
{
    int id = (int)(intptr_t)arg;
    intptr_t bad = 0;
    for (int i = 0; i < 4; i++)
        bad |= level3_checked(17 + id + i, id * 4 + i);
    return (void *)bad;
}

Test(blas_api, level3_threads_offloaded, .init = with_daemon,
     .fini = fixture_stop)
{
    env("0");
    uint64_t syrk = served3(GEMM_ROUTINE_SYRK),
             trsm = served3(GEMM_ROUTINE_TRSM);
    uint64_t herk = served3(GEMM_ROUTINE_HERK);
    pthread_t th[8];
    for (int i = 0; i < 8; i++)
        pthread_create(&th[i], NULL, level3_thread, (void *)(intptr_t)i);
    for (int i = 0; i < 8; i++) {
        void *bad;
        pthread_join(th[i], &bad);
        cr_expect_null(bad, "thread %d: a wrong level-3 result", i);
    }
    cr_expect_eq(served3(GEMM_ROUTINE_SYRK) - syrk, 32, "dsyrk via gemmd");
    cr_expect_eq(served3(GEMM_ROUTINE_TRSM) - trsm, 32, "dtrsm via gemmd");
    cr_expect_eq(served3(GEMM_ROUTINE_HERK) - herk, 32, "zherk via gemmd");
}

Test(blas_api, level3_cpu_below_threshold, .init = with_daemon,
     .fini = fixture_stop)
{
    env("1e18");
    uint64_t trsm = served3(GEMM_ROUTINE_TRSM);
    cr_assert_eq(level3_checked(23, 1), 0);
    cr_expect_eq(served3(GEMM_ROUTINE_TRSM), trsm, "kept on the CPU");
}

/* Each routine has its own threshold: GEMMBLAS_MIN_FLOPS_TRSM alone. */
Test(blas_api, level3_per_routine_threshold, .init = with_daemon,
     .fini = fixture_stop)
{
    env("0");
    setenv("GEMMBLAS_MIN_FLOPS_TRSM", "never", 1);
    uint64_t syrk = served3(GEMM_ROUTINE_SYRK),
             trsm = served3(GEMM_ROUTINE_TRSM);
    cr_assert_eq(level3_checked(23, 2), 0);
    cr_expect_eq(served3(GEMM_ROUTINE_SYRK) - syrk, 1, "dsyrk via gemmd");
    cr_expect_eq(served3(GEMM_ROUTINE_TRSM), trsm, "dtrsm on the CPU");
}

/* n x n column-major operands in d and s of small integers (every
 * product and sum exact in float too), results zeroed, and no
 * GEMMBLAS_MIN_FLOPS, so that each type's default threshold applies. */
typedef struct twin {
    int n;
    double *a, *c;
    float *fa, *fc;
} twin;

static twin twin_make(int n, int mod)
{
    unsetenv("GEMMBLAS_MIN_FLOPS");
    setenv("GEMMBLAS_RETRY_MS", "0", 1);
    size_t nn = (size_t)n * n;
    twin t = {n, malloc(nn * 8), calloc(nn, 8), malloc(nn * 4), calloc(nn, 4)};
    for (size_t i = 0; i < nn; i++)
        t.fa[i] = (float)(t.a[i] = (double)((i * 5) % mod) - mod / 2);
    return t;
}

/* Wrong elements of both results, every 97th column: A A^T's lower
 * triangle (gram) or A A. */
static int twin_wrong(const twin *t, bool gram)
{
    const int n = t->n;
    int bad = 0;
    for (int j = 0; j < n; j += 97)
        for (int i = gram ? j : 0; i < n; i++) {
            double s = 0;
            for (int l = 0; l < n; l++)
                s += t->a[(size_t)l * n + i] *
                     (gram ? t->a[(size_t)l * n + j] : t->a[(size_t)j * n + l]);
            size_t at = (size_t)j * n + i;
            bad += t->c[at] != s || t->fc[at] != s;
        }
    return bad;
}

static void twin_free(twin *t)
{
    free(t->a);
    free(t->c);
    free(t->fa);
    free(t->fc);
}

/* Without GEMMBLAS_MIN_FLOPS the thresholds are each type's own: a
 * syrk of n(n+1)n = 7e8 flops (n = 888) goes to gemmd as dsyrk (from
 * 4.5e8) and stays on the CPU as ssyrk (from 1.07e9); both are right. */
Test(blas_api, level3_per_type_default, .init = with_daemon,
     .fini = fixture_stop)
{
    twin t = twin_make(888, 9);
    double one = 1, zero = 0;
    float fone = 1, fzero = 0;
    uint64_t syrk = served3(GEMM_ROUTINE_SYRK);
    dsyrk_("L", "N", &t.n, &t.n, &one, t.a, &t.n, &zero, t.c, &t.n);
    cr_expect_eq(served3(GEMM_ROUTINE_SYRK) - syrk, 1, "dsyrk via gemmd");
    ssyrk_("L", "N", &t.n, &t.n, &fone, t.fa, &t.n, &fzero, t.fc, &t.n);
    cr_expect_eq(served3(GEMM_ROUTINE_SYRK) - syrk, 1, "ssyrk on the CPU");
    int bad = twin_wrong(&t, true);
    cr_expect_eq(bad, 0, "%d wrong elements", bad);
    twin_free(&t);
}

/* The GEMM threshold too: 2 * 700^3 = 6.9e8 flops goes to gemmd as
 * dgemm (from 2.7e8) and stays on the CPU as sgemm (from 2e9). */
Test(blas_api, gemm_per_type_default, .init = with_daemon, .fini = fixture_stop)
{
    twin t = twin_make(700, 7);
    double one = 1, zero = 0;
    float fone = 1, fzero = 0;
    uint64_t gemm = served3(GEMM_ROUTINE_GEMM);
    dgemm_("N", "N", &t.n, &t.n, &t.n, &one, t.a, &t.n, t.a, &t.n, &zero, t.c,
           &t.n);
    cr_expect_eq(served3(GEMM_ROUTINE_GEMM) - gemm, 1, "dgemm via gemmd");
    sgemm_("N", "N", &t.n, &t.n, &t.n, &fone, t.fa, &t.n, t.fa, &t.n, &fzero,
           t.fc, &t.n);
    cr_expect_eq(served3(GEMM_ROUTINE_GEMM) - gemm, 1, "sgemm on the CPU");
    int bad = twin_wrong(&t, false);
    cr_expect_eq(bad, 0, "%d wrong elements", bad);
    twin_free(&t);
}

/* Forked after nng use: the child's level-3 calls compute on the CPU. */
Test(blas_api, level3_fork_after_use, .init = with_daemon, .fini = fixture_stop)
{
    env("0");
    cr_assert_eq(level3_checked(20, 3), 0, "parent");
    uint64_t before = served();
    pid_t pid = fork();
    if (pid == 0)
        _exit(level3_checked(21, 4));
    cr_expect_eq(wait_child(pid), 0, "the child's results");
    cr_expect_eq(served() - before, 0, "the child sent nothing to gemmd");
    uint64_t trsm = served3(GEMM_ROUTINE_TRSM);
    cr_assert_eq(level3_checked(22, 5), 0, "parent after the fork");
    cr_expect_eq(served3(GEMM_ROUTINE_TRSM) - trsm, 1, "still offloads");
}

/* No daemon: the CPU BLAS computes, at once. */
Test(blas_api, level3_no_daemon)
{
    no_daemon();
    env("0");
    double t0 = tu_now();
    cr_assert_eq(level3_checked(19, 6), 0);
    cr_expect_lt(tu_now() - t0, 2.0, "no daemon: no wait");
}
