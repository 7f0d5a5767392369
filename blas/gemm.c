/*
 * gemm.c: libgemmblas's own entry points: the Fortran sgemm_ dgemm_
 * cgemm_ zgemm_ and cblas_sgemm .. cblas_zgemm. Each checks its arguments
 * as reference BLAS does (same order, same position numbers, xerbla_ or
 * cblas_xerbla called by name so a program's own handler is the one
 * called), restates the call row-major (gb_gemm) and runs it: the cases
 * reference BLAS settles without multiplying are settled here (m or n 0;
 * alpha or k 0 only scale C, and beta 0 never reads C), the rest goes to
 * gemmd when the policy says so (offload.c), else to the CPU
 * (cpu_gemm.c): the caller always gets the product.
 */
#include "gemmblas.h"

#include <complex.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

/* The error handlers, by name: the program's own win over ours (xerbla.c)
 * through ordinary symbol interposition. */
void xerbla_(const char *srname, const int *info, size_t len);
void cblas_xerbla(int info, const char *rout, const char *form, ...);
extern int RowMajorStrg;

static char upper(char c)
{
    return c >= 'a' && c <= 'z' ? (char)(c - 'a' + 'A') : c;
}

static int64_t max1(int64_t x)
{
    return x > 1 ? x : 1;
}

int gb_check_f77(char ta, char tb, int64_t m, int64_t n, int64_t k, int64_t lda,
                 int64_t ldb, int64_t ldc)
{
    ta = upper(ta);
    tb = upper(tb);
    bool nota = ta == 'N', notb = tb == 'N';
    int64_t nrowa = nota ? m : k, nrowb = notb ? k : n;
    if (!nota && ta != 'C' && ta != 'T')
        return 1;
    if (!notb && tb != 'C' && tb != 'T')
        return 2;
    if (m < 0)
        return 3;
    if (n < 0)
        return 4;
    if (k < 0)
        return 5;
    if (lda < max1(nrowa))
        return 8;
    if (ldb < max1(nrowb))
        return 10;
    if (ldc < max1(m))
        return 13;
    return 0;
}

/* CBLAS's transpose value as the Fortran character; 0 if invalid. */
static char cblas_op(int t)
{
    return t == GB_NO_TRANS     ? 'N'
           : t == GB_TRANS      ? 'T'
           : t == GB_CONJ_TRANS ? 'C'
                                : 0;
}

int gb_check_cblas(int layout, int ta, int tb, int64_t m, int64_t n, int64_t k,
                   int64_t lda, int64_t ldb, int64_t ldc)
{
    if (layout != GB_ROW_MAJOR && layout != GB_COL_MAJOR)
        return 1;
    if (cblas_op(ta) == 0)
        return 2;
    if (cblas_op(tb) == 0)
        return 3;
    int info =
        layout == GB_COL_MAJOR
            ? gb_check_f77(cblas_op(ta), cblas_op(tb), m, n, k, lda, ldb, ldc)
            : gb_check_f77(cblas_op(tb), cblas_op(ta), n, m, k, ldb, lda, ldc);
    return info != 0 ? info + 1 : 0;
}

/* 'N', 'T' or 'C' for op character c of type t ('C' on a real type is
 * 'T', as reference BLAS reads it). */
static char norm_op(gb_type t, char c)
{
    c = upper(c);
    return c == 'C' && (t == GB_S || t == GB_D) ? 'T' : c;
}

void gb_from_colmajor(gb_gemm *g, gb_type t, char ta, char tb, int64_t m,
                      int64_t n, int64_t k, const void *alpha, const void *a,
                      int64_t lda, const void *b, int64_t ldb, const void *beta,
                      void *c, int64_t ldc)
{
    *g = (gb_gemm){
        .t = t,
        .m = n,
        .n = m,
        .k = k,
        .opa = norm_op(t, tb),
        .opb = norm_op(t, ta),
        .a = b,
        .lda = ldb,
        .b = a,
        .ldb = lda,
        .c = c,
        .ldc = ldc,
        .alpha = alpha,
        .beta = beta,
    };
}

void gb_run(const gb_gemm *g)
{
    if (g->m == 0 || g->n == 0)
        return;
    bool no_product = g->k == 0 || gb_is_zero(g->t, g->alpha);
    if (no_product) {
        if (!gb_is_one(g->t, g->beta))
            gb_scale_c(g);
        return;
    }
    if (gb_offload(g))
        return;
    gb_cpu_gemm(g);
}

/* ---- the Fortran interface ---- */

/* Arguments by reference; the trailing hidden lengths of TRANSA/TRANSB
 * are not read (C callers often leave them out). */
static void f77(gb_type t, const char *name, const char *ta, const char *tb,
                const int *m, const int *n, const int *k, const void *alpha,
                const void *a, const int *lda, const void *b, const int *ldb,
                const void *beta, void *c, const int *ldc)
{
    int info = gb_check_f77(*ta, *tb, *m, *n, *k, *lda, *ldb, *ldc);
    if (info != 0) {
        xerbla_(name, &info, 6);
        return;
    }
    gb_gemm g;
    gb_from_colmajor(&g, t, *ta, *tb, *m, *n, *k, alpha, a, *lda, b, *ldb, beta,
                     c, *ldc);
    gb_run(&g);
}

#define F77_GEMM(fn, t, name, T)                                               \
    void fn(const char *ta, const char *tb, const int *m, const int *n,        \
            const int *k, const T *alpha, const T *a, const int *lda,          \
            const T *b, const int *ldb, const T *beta, T *c, const int *ldc)   \
    {                                                                          \
        f77(t, name, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);    \
    }

/* the exported names; T is the element (complex: its two parts) */
void sgemm_(const char *, const char *, const int *, const int *, const int *,
            const float *, const float *, const int *, const float *,
            const int *, const float *, float *, const int *);
void dgemm_(const char *, const char *, const int *, const int *, const int *,
            const double *, const double *, const int *, const double *,
            const int *, const double *, double *, const int *);
void cgemm_(const char *, const char *, const int *, const int *, const int *,
            const float *, const float *, const int *, const float *,
            const int *, const float *, float *, const int *);
void zgemm_(const char *, const char *, const int *, const int *, const int *,
            const double *, const double *, const int *, const double *,
            const int *, const double *, double *, const int *);
F77_GEMM(sgemm_, GB_S, "SGEMM ", float)
F77_GEMM(dgemm_, GB_D, "DGEMM ", double)
F77_GEMM(cgemm_, GB_C, "CGEMM ", float)
F77_GEMM(zgemm_, GB_Z, "ZGEMM ", double)

void gb_from_cblas(gb_gemm *g, gb_type t, int layout, int ta, int tb, int64_t m,
                   int64_t n, int64_t k, const void *alpha, const void *a,
                   int64_t lda, const void *b, int64_t ldb, const void *beta,
                   void *c, int64_t ldc)
{
    if (layout == GB_COL_MAJOR) {
        gb_from_colmajor(g, t, cblas_op(ta), cblas_op(tb), m, n, k, alpha, a,
                         lda, b, ldb, beta, c, ldc);
        return;
    }
    *g = (gb_gemm){.t = t,
                   .m = m,
                   .n = n,
                   .k = k,
                   .opa = norm_op(t, cblas_op(ta)),
                   .opb = norm_op(t, cblas_op(tb)),
                   .a = a,
                   .lda = lda,
                   .b = b,
                   .ldb = ldb,
                   .c = c,
                   .ldc = ldc,
                   .alpha = alpha,
                   .beta = beta};
}

/* ---- the CBLAS interface ---- */

static void cblas(gb_type t, const char *name, int layout, int ta, int tb,
                  int m, int n, int k, const void *alpha, const void *a,
                  int lda, const void *b, int ldb, const void *beta, void *c,
                  int ldc)
{
    int info = gb_check_cblas(layout, ta, tb, m, n, k, lda, ldb, ldc);
    if (info != 0) {
        /* as reference CBLAS sets it around the call: testers read it */
        RowMajorStrg = layout == GB_ROW_MAJOR;
        if (info == 1)
            cblas_xerbla(1, name, "Illegal layout setting, %d\n", layout);
        else if (info == 2)
            cblas_xerbla(2, name, "Illegal TransA setting, %d\n", ta);
        else if (info == 3)
            cblas_xerbla(3, name, "Illegal TransB setting, %d\n", tb);
        else
            cblas_xerbla(info, name, "");
        RowMajorStrg = 0;
        return;
    }
    gb_gemm g;
    gb_from_cblas(&g, t, layout, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta,
                  c, ldc);
    gb_run(&g);
}

void cblas_sgemm(int layout, int ta, int tb, int m, int n, int k, float alpha,
                 const float *a, int lda, const float *b, int ldb, float beta,
                 float *c, int ldc);
void cblas_dgemm(int layout, int ta, int tb, int m, int n, int k, double alpha,
                 const double *a, int lda, const double *b, int ldb,
                 double beta, double *c, int ldc);
void cblas_cgemm(int layout, int ta, int tb, int m, int n, int k,
                 const void *alpha, const void *a, int lda, const void *b,
                 int ldb, const void *beta, void *c, int ldc);
void cblas_zgemm(int layout, int ta, int tb, int m, int n, int k,
                 const void *alpha, const void *a, int lda, const void *b,
                 int ldb, const void *beta, void *c, int ldc);

void cblas_sgemm(int layout, int ta, int tb, int m, int n, int k, float alpha,
                 const float *a, int lda, const float *b, int ldb, float beta,
                 float *c, int ldc)
{
    cblas(GB_S, "cblas_sgemm", layout, ta, tb, m, n, k, &alpha, a, lda, b, ldb,
          &beta, c, ldc);
}

void cblas_dgemm(int layout, int ta, int tb, int m, int n, int k, double alpha,
                 const double *a, int lda, const double *b, int ldb,
                 double beta, double *c, int ldc)
{
    cblas(GB_D, "cblas_dgemm", layout, ta, tb, m, n, k, &alpha, a, lda, b, ldb,
          &beta, c, ldc);
}

void cblas_cgemm(int layout, int ta, int tb, int m, int n, int k,
                 const void *alpha, const void *a, int lda, const void *b,
                 int ldb, const void *beta, void *c, int ldc)
{
    cblas(GB_C, "cblas_cgemm", layout, ta, tb, m, n, k, alpha, a, lda, b, ldb,
          beta, c, ldc);
}

void cblas_zgemm(int layout, int ta, int tb, int m, int n, int k,
                 const void *alpha, const void *a, int lda, const void *b,
                 int ldb, const void *beta, void *c, int ldc)
{
    cblas(GB_Z, "cblas_zgemm", layout, ta, tb, m, n, k, alpha, a, lda, b, ldb,
          beta, c, ldc);
}
