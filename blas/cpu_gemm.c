/*
 * cpu_gemm.c: a GEMM on the CPU, for every path that does not end in
 * gemmd (gemm.c's calls below the threshold or refused, the rows of
 * panels.c's calls that gemmd did not compute): the real BLAS (C zeroed
 * first when beta is 0, so a NaN there cannot propagate whatever that
 * BLAS does), or plain loops when there is none.
 */
#include "gemmblas.h"

#include <complex.h>
#include <string.h>

/* C = beta C over the m x n row-major C; beta 0 writes zeros without
 * reading C (reference BLAS's alpha = 0 and k = 0 cases). */
void gb_scale_c(const gb_gemm *g)
{
    bool zero = gb_is_zero(g->t, g->beta);
    size_t es = gb_esize(g->t);
    for (int64_t i = 0; i < g->m; i++) {
        char *row = (char *)g->c + (size_t)(i * g->ldc) * es;
        if (zero) {
            memset(row, 0, (size_t)g->n * es);
            continue;
        }
        for (int64_t j = 0; j < g->n; j++) {
            switch (g->t) {
            case GB_S:
                ((float *)row)[j] *= *(const float *)g->beta;
                break;
            case GB_D:
                ((double *)row)[j] *= *(const double *)g->beta;
                break;
            case GB_C: {
                float complex *x = (float complex *)row + j;
                const float *bt = g->beta;
                *x = (bt[0] + bt[1] * I) * *x;
                break;
            }
            default: {
                double complex *x = (double complex *)row + j;
                const double *bt = g->beta;
                *x = (bt[0] + bt[1] * I) * *x;
            }
            }
        }
    }
}

/* op(X)[i][l] of a row-major X stored with leading dimension ld, as a
 * double complex (the plain-loop fallback only). */
static double complex elem(gb_type t, const void *x, char op, int64_t ld,
                           int64_t i, int64_t l)
{
    size_t at = (size_t)(op == 'N' ? i * ld + l : l * ld + i);
    double complex z;
    switch (t) {
    case GB_S:
        z = ((const float *)x)[at];
        break;
    case GB_D:
        z = ((const double *)x)[at];
        break;
    case GB_C:
        z = ((const float *)x)[2 * at] + ((const float *)x)[2 * at + 1] * I;
        break;
    default:
        z = ((const double *)x)[2 * at] + ((const double *)x)[2 * at + 1] * I;
    }
    return op == 'C' ? conj(z) : z;
}

/* With no CPU BLAS anywhere: the product in plain loops (slow, correct),
 * accumulated in double precision. C already scaled to beta C. */
static void naive_gemm(const gb_gemm *g)
{
    size_t es = gb_esize(g->t);
    double complex alpha =
        g->t == GB_S   ? *(const float *)g->alpha
        : g->t == GB_D ? *(const double *)g->alpha
        : g->t == GB_C
            ? ((const float *)g->alpha)[0] + ((const float *)g->alpha)[1] * I
            : ((const double *)g->alpha)[0] + ((const double *)g->alpha)[1] * I;
    for (int64_t i = 0; i < g->m; i++)
        for (int64_t j = 0; j < g->n; j++) {
            double complex acc = 0;
            for (int64_t l = 0; l < g->k; l++)
                acc += elem(g->t, g->a, g->opa, g->lda, i, l) *
                       elem(g->t, g->b, g->opb, g->ldb, l, j);
            acc *= alpha;
            char *p = (char *)g->c + (size_t)(i * g->ldc + j) * es;
            switch (g->t) {
            case GB_S:
                *(float *)p += (float)creal(acc);
                break;
            case GB_D:
                *(double *)p += creal(acc);
                break;
            case GB_C:
                ((float *)p)[0] += (float)creal(acc);
                ((float *)p)[1] += (float)cimag(acc);
                break;
            default:
                ((double *)p)[0] += creal(acc);
                ((double *)p)[1] += cimag(acc);
            }
        }
}

/* The CPU BLAS computes g (given back its column-major form). */
void gb_cpu_gemm(const gb_gemm *g)
{
    if (gb_is_zero(g->t, g->beta))
        gb_scale_c(g); /* zeros: the BLAS below then never sees a NaN */
    gb_f77_gemm f = gb_real_gemm(g->t);
    if (f == NULL) {
        if (!gb_is_zero(g->t, g->beta))
            gb_scale_c(g);
        naive_gemm(g);
        return;
    }
    int m = (int)g->n, n = (int)g->m, k = (int)g->k;
    int lda = (int)g->ldb, ldb = (int)g->lda, ldc = (int)g->ldc;
    char ta = g->opb, tb = g->opa;
    f(&ta, &tb, &m, &n, &k, g->alpha, g->b, &lda, g->a, &ldb, g->beta, g->c,
      &ldc, 1, 1);
}
