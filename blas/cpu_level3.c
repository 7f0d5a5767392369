/*
 * cpu_level3.c: symm, hemm, syrk, herk, syr2k, her2k, trmm and trsm in
 * plain loops, for a call no CPU BLAS can make (level3.c: none loaded, or
 * the one loaded lacks the routine). One implementation of each serves
 * the four types: an element is read into a double complex, computed
 * with in double precision, and rounded to the type when stored (as
 * cpu_gemm.c's plain-loop GEMM). The loops are netlib's reference BLAS
 * (BLAS/SRC/z*.f), in its order and with its special cases, so the
 * results are the reference's: only the referenced triangle of A (and of
 * C for the rank updates) is read and only the referenced part of the
 * output written; herk and her2k read and write only the real part of
 * C's diagonal (its imaginary part becomes 0); a unit diagonal (diag 'U')
 * is never read; alpha = 0 and beta = 0 write zeros without reading the
 * output, and the quick returns leave it untouched. trmm and trsm follow
 * the current reference, which multiplies by an element even when it is
 * zero (an Inf or NaN elsewhere propagates, as in a GEMM).
 */
#include "gemmblas.h"

#include <complex.h>

/* A column-major matrix of the call: element (i, j), 0-based, at
 * p + (i + j * ld) * es. */
typedef struct mat {
    gb_type t;
    char *p;
    int64_t ld;
} mat;

static mat mk(gb_type t, const void *p, int64_t ld)
{
    return (mat){.t = t, .p = (char *)p, .ld = ld};
}

static double complex at(const mat *x, int64_t i, int64_t j)
{
    size_t k = (size_t)(i + j * x->ld);
    switch (x->t) {
    case GB_S:
        return ((const float *)x->p)[k];
    case GB_D:
        return ((const double *)x->p)[k];
    case GB_C:
        return CMPLX(((const float *)x->p)[2 * k],
                     ((const float *)x->p)[2 * k + 1]);
    default:
        return CMPLX(((const double *)x->p)[2 * k],
                     ((const double *)x->p)[2 * k + 1]);
    }
}

static void set(const mat *x, int64_t i, int64_t j, double complex v)
{
    size_t k = (size_t)(i + j * x->ld);
    switch (x->t) {
    case GB_S:
        ((float *)x->p)[k] = (float)creal(v);
        break;
    case GB_D:
        ((double *)x->p)[k] = creal(v);
        break;
    case GB_C:
        ((float *)x->p)[2 * k] = (float)creal(v);
        ((float *)x->p)[2 * k + 1] = (float)cimag(v);
        break;
    default:
        ((double *)x->p)[2 * k] = creal(v);
        ((double *)x->p)[2 * k + 1] = cimag(v);
    }
}

/* A scalar of the call: one element of t, or (re) one real of t's
 * precision (herk's alpha and beta, her2k's beta). */
static double complex scalar(gb_type t, const void *s, bool re)
{
    if (t == GB_S || (t == GB_C && re))
        return *(const float *)s;
    if (t == GB_D || re)
        return *(const double *)s;
    return t == GB_C ? CMPLX(((const float *)s)[0], ((const float *)s)[1])
                     : CMPLX(((const double *)s)[0], ((const double *)s)[1]);
}

/* conj(z) when c, else z; the real part of z as a double complex. */
static double complex cj(bool c, double complex z)
{
    return c ? conj(z) : z;
}

static double complex re(double complex z)
{
    return creal(z);
}

/* symm, hemm (her): C = alpha A B + beta C (side L) or alpha B A + beta C
 * (R), A symmetric (Hermitian) and only its uplo triangle read. */
static void symm(const gb_l3 *p, bool her)
{
    double complex alpha = scalar(p->t, p->alpha, false);
    double complex beta = scalar(p->t, p->beta, false);
    mat a = mk(p->t, p->a, p->lda), b = mk(p->t, p->b, p->ldb);
    mat c = mk(p->t, p->c, p->ldc);
    int64_t m = p->m, n = p->n;
    bool upper = p->uplo == 'U';
    if (m == 0 || n == 0 || (alpha == 0 && beta == 1))
        return;
    if (alpha == 0) {
        for (int64_t j = 0; j < n; j++)
            for (int64_t i = 0; i < m; i++)
                set(&c, i, j, beta == 0 ? 0 : beta * at(&c, i, j));
        return;
    }
    if (p->side == 'L') {
        /* row i of C: A's column i above (upper) or below the diagonal,
         * the rows before it (after it, lower) updated on the way */
        for (int64_t j = 0; j < n; j++)
            for (int64_t s = 0; s < m; s++) {
                int64_t i = upper ? s : m - 1 - s;
                int64_t k0 = upper ? 0 : i + 1, k1 = upper ? i : m;
                double complex t1 = alpha * at(&b, i, j), t2 = 0;
                for (int64_t k = k0; k < k1; k++) {
                    double complex aki = at(&a, k, i);
                    set(&c, k, j, at(&c, k, j) + t1 * aki);
                    t2 += at(&b, k, j) * cj(her, aki);
                }
                double complex aii = at(&a, i, i);
                double complex v = t1 * (her ? re(aii) : aii) + alpha * t2;
                set(&c, i, j, beta == 0 ? v : beta * at(&c, i, j) + v);
            }
        return;
    }
    for (int64_t j = 0; j < n; j++) {
        double complex ajj = at(&a, j, j);
        double complex t1 = alpha * (her ? re(ajj) : ajj);
        for (int64_t i = 0; i < m; i++) {
            double complex v = t1 * at(&b, i, j);
            set(&c, i, j, beta == 0 ? v : beta * at(&c, i, j) + v);
        }
        for (int64_t k = 0; k < n; k++) {
            if (k == j)
                continue;
            /* A(k, j) from the stored triangle: A(j, k) conjugated
             * (hemm) when it is the other one */
            bool stored = upper ? k < j : k > j;
            t1 = alpha * (stored ? at(&a, k, j) : cj(her, at(&a, j, k)));
            for (int64_t i = 0; i < m; i++)
                set(&c, i, j, at(&c, i, j) + t1 * at(&b, i, k));
        }
    }
}

/* The rows of column j in C's referenced triangle: [*i0, *i1). */
static void tri(bool upper, int64_t n, int64_t j, int64_t *i0, int64_t *i1)
{
    *i0 = upper ? 0 : j;
    *i1 = upper ? j + 1 : n;
}

/* C = beta C over C's triangle (herk, her2k: the diagonal's real part);
 * beta 0 writes zeros without reading C. The alpha = 0 case of the rank
 * updates, and the first step of their trans 'N' loops per column. */
static void scale_tri_col(const mat *c, bool upper, bool her, int64_t n,
                          int64_t j, double complex beta)
{
    int64_t i0, i1;
    tri(upper, n, j, &i0, &i1);
    for (int64_t i = i0; i < i1; i++) {
        if (beta == 0) {
            set(c, i, j, 0);
            continue;
        }
        double complex x = at(c, i, j);
        set(c, i, j, beta * (her && i == j ? re(x) : x));
    }
}

/* The rank updates' quick return and alpha = 0 case (C's triangle
 * scaled by beta); true when nothing is left to do. */
static bool rank_trivial(const mat *c, bool upper, bool her, int64_t n,
                         int64_t k, double complex alpha, double complex beta)
{
    if (n == 0 || ((alpha == 0 || k == 0) && beta == 1))
        return true;
    if (alpha != 0)
        return false;
    for (int64_t j = 0; j < n; j++)
        scale_tri_col(c, upper, her, n, j, beta);
    return true;
}

/* Column j of a trans 'N' rank update before its sums: C's triangle
 * scaled by beta (herk, her2k: the diagonal made real, beta 1 included). */
static void rank_col_start(const mat *c, bool upper, bool her, int64_t n,
                           int64_t j, double complex beta)
{
    if (beta != 1)
        scale_tri_col(c, upper, her, n, j, beta);
    else if (her)
        set(c, j, j, re(at(c, j, j)));
}

/* C(i, j) += v; on herk's and her2k's diagonal only the real parts. */
static void rank_add(const mat *c, bool her, int64_t i, int64_t j,
                     double complex v)
{
    if (her && i == j)
        set(c, j, j, re(at(c, j, j)) + re(v));
    else
        set(c, i, j, at(c, i, j) + v);
}

/* syrk, herk (her): C = alpha A A^T + beta C (A A^H), trans 'N', or
 * alpha A^T A + beta C (A^H A), over C's uplo triangle. */
static void syrk(const gb_l3 *p, bool her)
{
    double complex alpha = scalar(p->t, p->alpha, her);
    double complex beta = scalar(p->t, p->beta, her);
    mat a = mk(p->t, p->a, p->lda), c = mk(p->t, p->c, p->ldc);
    int64_t n = p->n, k = p->k;
    bool upper = p->uplo == 'U';
    if (rank_trivial(&c, upper, her, n, k, alpha, beta))
        return;
    int64_t i0, i1;
    if (p->trans == 'N') {
        for (int64_t j = 0; j < n; j++) {
            tri(upper, n, j, &i0, &i1);
            rank_col_start(&c, upper, her, n, j, beta);
            for (int64_t l = 0; l < k; l++) {
                double complex ajl = at(&a, j, l);
                if (ajl == 0)
                    continue;
                double complex t = alpha * cj(her, ajl);
                for (int64_t i = i0; i < i1; i++)
                    rank_add(&c, her, i, j, t * at(&a, i, l));
            }
        }
        return;
    }
    for (int64_t j = 0; j < n; j++) {
        tri(upper, n, j, &i0, &i1);
        for (int64_t i = i0; i < i1; i++) {
            double complex t = 0;
            for (int64_t l = 0; l < k; l++)
                t += cj(her, at(&a, l, i)) * at(&a, l, j);
            bool diag = her && i == j;
            if (diag)
                t = re(t);
            double complex x = 0;
            if (beta != 0)
                x = at(&c, i, j);
            if (diag)
                x = re(x);
            set(&c, i, j, beta == 0 ? alpha * t : alpha * t + beta * x);
        }
    }
}

/* syr2k, her2k (her): C = alpha A B^T + alpha B A^T + beta C (her2k:
 * alpha A B^H + conj(alpha) B A^H), trans 'N', or the same of A^T B and
 * B^T A (A^H B, B^H A), over C's uplo triangle. */
static void syr2k(const gb_l3 *p, bool her)
{
    double complex alpha = scalar(p->t, p->alpha, false);
    double complex beta = scalar(p->t, p->beta, her);
    mat a = mk(p->t, p->a, p->lda), b = mk(p->t, p->b, p->ldb);
    mat c = mk(p->t, p->c, p->ldc);
    int64_t n = p->n, k = p->k;
    bool upper = p->uplo == 'U';
    if (rank_trivial(&c, upper, her, n, k, alpha, beta))
        return;
    int64_t i0, i1;
    if (p->trans == 'N') {
        for (int64_t j = 0; j < n; j++) {
            tri(upper, n, j, &i0, &i1);
            rank_col_start(&c, upper, her, n, j, beta);
            for (int64_t l = 0; l < k; l++) {
                double complex ajl = at(&a, j, l), bjl = at(&b, j, l);
                if (ajl == 0 && bjl == 0)
                    continue;
                double complex t1 = alpha * cj(her, bjl);
                double complex t2 = cj(her, alpha * ajl);
                for (int64_t i = i0; i < i1; i++)
                    rank_add(&c, her, i, j,
                             at(&a, i, l) * t1 + at(&b, i, l) * t2);
            }
        }
        return;
    }
    double complex alpha2 = cj(her, alpha);
    for (int64_t j = 0; j < n; j++) {
        tri(upper, n, j, &i0, &i1);
        for (int64_t i = i0; i < i1; i++) {
            double complex t1 = 0, t2 = 0;
            for (int64_t l = 0; l < k; l++) {
                t1 += cj(her, at(&a, l, i)) * at(&b, l, j);
                t2 += cj(her, at(&b, l, i)) * at(&a, l, j);
            }
            bool diag = her && i == j;
            double complex v = alpha * t1 + alpha2 * t2;
            if (diag)
                v = re(v);
            if (beta != 0) {
                double complex x = at(&c, i, j);
                v = beta * (diag ? re(x) : x) + v;
            }
            set(&c, i, j, v);
        }
    }
}

/* B = alpha B with alpha 0: zeros, B not read (trmm's and trsm's). */
static void zero_out(const mat *b, int64_t m, int64_t n)
{
    for (int64_t j = 0; j < n; j++)
        for (int64_t i = 0; i < m; i++)
            set(b, i, j, 0);
}

/* trmm: B = alpha op(A) B (side L) or alpha B op(A) (R), A triangular
 * (uplo), op N, T or C, a unit diagonal (diag 'U') not read. */
static void trmm(const gb_l3 *p)
{
    double complex alpha = scalar(p->t, p->alpha, false);
    mat a = mk(p->t, p->a, p->lda), b = mk(p->t, p->c, p->ldc);
    int64_t m = p->m, n = p->n;
    bool upper = p->uplo == 'U', nounit = p->diag == 'N';
    bool conj_a = p->trans == 'C';
    if (m == 0 || n == 0)
        return;
    if (alpha == 0) {
        zero_out(&b, m, n);
        return;
    }
    if (p->side == 'L' && p->trans == 'N') {
        for (int64_t j = 0; j < n; j++)
            for (int64_t s = 0; s < m; s++) {
                int64_t k = upper ? s : m - 1 - s;
                int64_t i0 = upper ? 0 : k + 1, i1 = upper ? k : m;
                double complex t = alpha * at(&b, k, j);
                for (int64_t i = i0; i < i1; i++)
                    set(&b, i, j, at(&b, i, j) + t * at(&a, i, k));
                set(&b, k, j, nounit ? t * at(&a, k, k) : t);
            }
    } else if (p->side == 'L') {
        for (int64_t j = 0; j < n; j++)
            for (int64_t s = 0; s < m; s++) {
                int64_t i = upper ? m - 1 - s : s;
                int64_t k0 = upper ? 0 : i + 1, k1 = upper ? i : m;
                double complex t = at(&b, i, j);
                if (nounit)
                    t *= cj(conj_a, at(&a, i, i));
                for (int64_t k = k0; k < k1; k++)
                    t += cj(conj_a, at(&a, k, i)) * at(&b, k, j);
                set(&b, i, j, alpha * t);
            }
    } else if (p->trans == 'N') {
        for (int64_t s = 0; s < n; s++) {
            int64_t j = upper ? n - 1 - s : s;
            int64_t k0 = upper ? 0 : j + 1, k1 = upper ? j : n;
            double complex t = alpha;
            if (nounit)
                t *= at(&a, j, j);
            for (int64_t i = 0; i < m; i++)
                set(&b, i, j, t * at(&b, i, j));
            for (int64_t k = k0; k < k1; k++) {
                t = alpha * at(&a, k, j);
                for (int64_t i = 0; i < m; i++)
                    set(&b, i, j, at(&b, i, j) + t * at(&b, i, k));
            }
        }
    } else {
        for (int64_t s = 0; s < n; s++) {
            int64_t k = upper ? s : n - 1 - s;
            int64_t j0 = upper ? 0 : k + 1, j1 = upper ? k : n;
            for (int64_t j = j0; j < j1; j++) {
                double complex t = alpha * cj(conj_a, at(&a, j, k));
                for (int64_t i = 0; i < m; i++)
                    set(&b, i, j, at(&b, i, j) + t * at(&b, i, k));
            }
            double complex t = alpha;
            if (nounit)
                t *= cj(conj_a, at(&a, k, k));
            if (t != 1)
                for (int64_t i = 0; i < m; i++)
                    set(&b, i, k, t * at(&b, i, k));
        }
    }
}

/* trsm: solves op(A) X = alpha B (side L) or X op(A) = alpha B (R) for
 * X, written over B; A as trmm's. */
static void trsm(const gb_l3 *p)
{
    double complex alpha = scalar(p->t, p->alpha, false);
    mat a = mk(p->t, p->a, p->lda), b = mk(p->t, p->c, p->ldc);
    int64_t m = p->m, n = p->n;
    bool upper = p->uplo == 'U', nounit = p->diag == 'N';
    bool conj_a = p->trans == 'C';
    if (m == 0 || n == 0)
        return;
    if (alpha == 0) {
        zero_out(&b, m, n);
        return;
    }
    if (p->side == 'L' && p->trans == 'N') {
        for (int64_t j = 0; j < n; j++) {
            for (int64_t i = 0; i < m; i++)
                set(&b, i, j, alpha * at(&b, i, j));
            for (int64_t s = 0; s < m; s++) {
                int64_t k = upper ? m - 1 - s : s;
                int64_t i0 = upper ? 0 : k + 1, i1 = upper ? k : m;
                if (nounit)
                    set(&b, k, j, at(&b, k, j) / at(&a, k, k));
                double complex bkj = at(&b, k, j);
                for (int64_t i = i0; i < i1; i++)
                    set(&b, i, j, at(&b, i, j) - bkj * at(&a, i, k));
            }
        }
    } else if (p->side == 'L') {
        for (int64_t j = 0; j < n; j++)
            for (int64_t s = 0; s < m; s++) {
                int64_t i = upper ? s : m - 1 - s;
                int64_t k0 = upper ? 0 : i + 1, k1 = upper ? i : m;
                double complex t = alpha * at(&b, i, j);
                for (int64_t k = k0; k < k1; k++)
                    t -= cj(conj_a, at(&a, k, i)) * at(&b, k, j);
                if (nounit)
                    t /= cj(conj_a, at(&a, i, i));
                set(&b, i, j, t);
            }
    } else if (p->trans == 'N') {
        for (int64_t s = 0; s < n; s++) {
            int64_t j = upper ? s : n - 1 - s;
            int64_t k0 = upper ? 0 : j + 1, k1 = upper ? j : n;
            for (int64_t i = 0; i < m; i++)
                set(&b, i, j, alpha * at(&b, i, j));
            for (int64_t k = k0; k < k1; k++) {
                double complex akj = at(&a, k, j);
                for (int64_t i = 0; i < m; i++)
                    set(&b, i, j, at(&b, i, j) - akj * at(&b, i, k));
            }
            if (nounit) {
                double complex ajj = at(&a, j, j);
                for (int64_t i = 0; i < m; i++)
                    set(&b, i, j, at(&b, i, j) / ajj);
            }
        }
    } else {
        for (int64_t s = 0; s < n; s++) {
            int64_t k = upper ? n - 1 - s : s;
            int64_t j0 = upper ? 0 : k + 1, j1 = upper ? k : n;
            if (nounit) {
                double complex akk = cj(conj_a, at(&a, k, k));
                for (int64_t i = 0; i < m; i++)
                    set(&b, i, k, at(&b, i, k) / akk);
            }
            for (int64_t j = j0; j < j1; j++) {
                double complex t = cj(conj_a, at(&a, j, k));
                for (int64_t i = 0; i < m; i++)
                    set(&b, i, j, at(&b, i, j) - t * at(&b, i, k));
            }
            for (int64_t i = 0; i < m; i++)
                set(&b, i, k, alpha * at(&b, i, k));
        }
    }
}

void gb_cpu_l3(const gb_l3 *p)
{
    switch (p->r) {
    case GB_SYMM:
    case GB_HEMM:
        symm(p, p->r == GB_HEMM);
        break;
    case GB_SYRK:
    case GB_HERK:
        syrk(p, p->r == GB_HERK);
        break;
    case GB_SYR2K:
    case GB_HER2K:
        syr2k(p, p->r == GB_HER2K);
        break;
    case GB_TRMM:
        trmm(p);
        break;
    case GB_TRSM:
        trsm(p);
        break;
    }
}
