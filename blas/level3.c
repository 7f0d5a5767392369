/*
 * level3.c: libgemmblas's own symm, hemm, syrk, herk, syr2k, her2k, trmm
 * and trsm, Fortran (?symm_ ..) and CBLAS (cblas_?symm ..). Each call is
 * restated as the Fortran routine sees it (gb_l3; a row-major CBLAS call
 * as the column-major call reference CBLAS makes of it) and checked by
 * the reference's rules; a legal call with a product to do goes to gemmd
 * when its routine's threshold says so (level3_offload.c). Everything
 * else, an illegal argument included, is the CPU BLAS's call with the
 * caller's own arguments: its xerbla (the program's, by symbol
 * interposition, as for every forwarded name), its quick returns and the
 * alpha = 0 scalings, exactly as before these routines were ours; and the
 * CPU BLAS computes whatever gemmd does not. Where no CPU BLAS has the
 * routine (none loaded, or one without it), the reference's behaviour is
 * made here instead: an illegal argument goes to xerbla_ (Fortran) or
 * cblas_xerbla (CBLAS, numbered as reference CBLAS numbers it), by name as
 * gemm.c does, and the rest runs in plain loops (cpu_level3.c). Never an
 * abort: the library lives in someone else's program.
 */
#include "gemmblas.h"

#include <stdio.h>
#include <string.h>

/* The error handlers, by name: the program's own win over ours (xerbla.c)
 * through ordinary symbol interposition. */
void xerbla_(const char *srname, const int *info, size_t len);
void cblas_xerbla(int info, const char *rout, const char *form, ...);
extern int RowMajorStrg;

static char up(char c)
{
    return c >= 'a' && c <= 'z' ? (char)(c - 'a' + 'A') : c;
}

static int64_t max1(int64_t x)
{
    return x > 1 ? x : 1;
}

static bool lr(char c)
{
    return c == 'L' || c == 'R';
}

static bool ul(char c)
{
    return c == 'U' || c == 'L';
}

int gb_l3_check(const gb_l3 *p)
{
    bool cplx = p->t >= GB_C;
    int64_t nrowa;
    switch (p->r) {
    case GB_SYMM:
    case GB_HEMM:
        nrowa = p->side == 'L' ? p->m : p->n;
        if (!lr(p->side))
            return 1;
        if (!ul(p->uplo))
            return 2;
        if (p->m < 0)
            return 3;
        if (p->n < 0)
            return 4;
        if (p->lda < max1(nrowa))
            return 7;
        if (p->ldb < max1(p->m))
            return 9;
        if (p->ldc < max1(p->m))
            return 12;
        return 0;
    case GB_SYRK:
    case GB_HERK:
    case GB_SYR2K:
    case GB_HER2K: {
        bool her = p->r == GB_HERK || p->r == GB_HER2K;
        bool two = p->r == GB_SYR2K || p->r == GB_HER2K;
        char t = p->trans;
        bool legal = t == 'N' || (her    ? t == 'C'
                                  : cplx ? t == 'T'
                                         : t == 'T' || t == 'C');
        nrowa = t == 'N' ? p->n : p->k;
        if (!ul(p->uplo))
            return 1;
        if (!legal)
            return 2;
        if (p->n < 0)
            return 3;
        if (p->k < 0)
            return 4;
        if (p->lda < max1(nrowa))
            return 7;
        if (two && p->ldb < max1(nrowa))
            return 9;
        if (p->ldc < max1(p->n))
            return two ? 12 : 10;
        return 0;
    }
    case GB_TRMM:
    case GB_TRSM:
        nrowa = p->side == 'L' ? p->m : p->n;
        if (!lr(p->side))
            return 1;
        if (!ul(p->uplo))
            return 2;
        if (p->trans != 'N' && p->trans != 'T' && p->trans != 'C')
            return 3;
        if (p->diag != 'U' && p->diag != 'N')
            return 4;
        if (p->m < 0)
            return 5;
        if (p->n < 0)
            return 6;
        if (p->lda < max1(nrowa))
            return 9;
        if (p->ldc < max1(p->m)) /* B, the output */
            return 11;
        return 0;
    }
    return -1;
}

/* Whether alpha (as routine r of type t takes it) is zero. */
static bool alpha_zero(const gb_l3 *p)
{
    if (p->r == GB_HERK)
        return p->t == GB_C ? *(const float *)p->alpha == 0.0f
                            : *(const double *)p->alpha == 0.0;
    return gb_is_zero(p->t, p->alpha);
}

/* Runs p through gemmd when it is legal and has a product to do; false:
 * the CPU BLAS (without one, the plain loops) must make the call. */
static bool offloaded(const gb_l3 *p)
{
    if (gb_l3_check(p) != 0)
        return false; /* the CPU BLAS's xerbla says which */
    bool rank = p->r >= GB_SYRK && p->r <= GB_HER2K;
    if (p->n == 0 || (rank ? p->k == 0 : p->m == 0) || alpha_zero(p))
        return false; /* quick returns and scalings: the CPU BLAS's */
    return gb_offload3(p);
}

/* The CPU BLAS's name, looked up once per call site; NULL when no CPU
 * BLAS has it (said once per call site with GEMMBLAS_VERBOSE: the plain
 * loops make those calls). */
static void *real(void **cache, const char *name)
{
    static char none; /* what a cache holds for a name no CPU BLAS has */
    void *f = __atomic_load_n(cache, __ATOMIC_ACQUIRE);
    if (f == NULL) {
        if ((f = gb_real_sym(name)) == NULL) {
            gb_log(1, "%s: not provided by the CPU BLAS: plain loops run it",
                   name);
            f = &none;
        }
        __atomic_store_n(cache, f, __ATOMIC_RELEASE);
    }
    return f == &none ? NULL : f;
}

/* A Fortran call no CPU BLAS can make, as the reference routine makes it:
 * an illegal argument goes to xerbla_ with the routine's name ("DSYMM ")
 * and the argument's position; anything else runs in plain loops. */
static void f77_cpu(const gb_l3 *p)
{
    static const char *const rname[GB_NROUTINES] = {"",      "SYMM ", "HEMM ",
                                                    "SYRK ", "HERK ", "SYR2K",
                                                    "HER2K", "TRMM ", "TRSM "};
    int info = gb_l3_check(p);
    if (info == 0) {
        gb_cpu_l3(p);
        return;
    }
    char name[7] = {"SDCZ"[p->t]};
    memcpy(name + 1, rname[p->r], 6);
    xerbla_(name, &info, 6);
}

/* ---- the Fortran interface (hidden string lengths: passed as 1) ---- */

typedef void (*f_symm)(const char *, const char *, const int *, const int *,
                       const void *, const void *, const int *, const void *,
                       const int *, const void *, void *, const int *, size_t,
                       size_t);
typedef void (*f_syrk)(const char *, const char *, const int *, const int *,
                       const void *, const void *, const int *, const void *,
                       void *, const int *, size_t, size_t);
typedef void (*f_syr2k)(const char *, const char *, const int *, const int *,
                        const void *, const void *, const int *, const void *,
                        const int *, const void *, void *, const int *, size_t,
                        size_t);
typedef void (*f_trmm)(const char *, const char *, const char *, const char *,
                       const int *, const int *, const void *, const void *,
                       const int *, void *, const int *, size_t, size_t, size_t,
                       size_t);

#define F77_SYMM(name, T, R)                                                   \
    void name##_(const char *side, const char *uplo, const int *m,             \
                 const int *n, const void *alpha, const void *a,               \
                 const int *lda, const void *b, const int *ldb,                \
                 const void *beta, void *c, const int *ldc);                   \
    void name##_(const char *side, const char *uplo, const int *m,             \
                 const int *n, const void *alpha, const void *a,               \
                 const int *lda, const void *b, const int *ldb,                \
                 const void *beta, void *c, const int *ldc)                    \
    {                                                                          \
        static void *cache;                                                    \
        gb_l3 p = {.t = T,                                                     \
                   .r = R,                                                     \
                   .side = up(*side),                                          \
                   .uplo = up(*uplo),                                          \
                   .trans = 'N',                                               \
                   .diag = 'N',                                                \
                   .m = *m,                                                    \
                   .n = *n,                                                    \
                   .alpha = alpha,                                             \
                   .beta = beta,                                               \
                   .a = a,                                                     \
                   .b = b,                                                     \
                   .c = c,                                                     \
                   .lda = *lda,                                                \
                   .ldb = *ldb,                                                \
                   .ldc = *ldc};                                               \
        if (offloaded(&p))                                                     \
            return;                                                            \
        f_symm f = (f_symm)real(&cache, #name "_");                            \
        if (f == NULL)                                                         \
            f77_cpu(&p);                                                       \
        else                                                                   \
            f(side, uplo, m, n, alpha, a, lda, b, ldb, beta, c, ldc, 1, 1);    \
    }

#define F77_SYRK(name, T, R)                                                   \
    void name##_(const char *uplo, const char *trans, const int *n,            \
                 const int *k, const void *alpha, const void *a,               \
                 const int *lda, const void *beta, void *c, const int *ldc);   \
    void name##_(const char *uplo, const char *trans, const int *n,            \
                 const int *k, const void *alpha, const void *a,               \
                 const int *lda, const void *beta, void *c, const int *ldc)    \
    {                                                                          \
        static void *cache;                                                    \
        gb_l3 p = {.t = T,                                                     \
                   .r = R,                                                     \
                   .side = 'L',                                                \
                   .uplo = up(*uplo),                                          \
                   .trans = up(*trans),                                        \
                   .diag = 'N',                                                \
                   .n = *n,                                                    \
                   .k = *k,                                                    \
                   .alpha = alpha,                                             \
                   .beta = beta,                                               \
                   .a = a,                                                     \
                   .c = c,                                                     \
                   .lda = *lda,                                                \
                   .ldc = *ldc};                                               \
        if (offloaded(&p))                                                     \
            return;                                                            \
        f_syrk f = (f_syrk)real(&cache, #name "_");                            \
        if (f == NULL)                                                         \
            f77_cpu(&p);                                                       \
        else                                                                   \
            f(uplo, trans, n, k, alpha, a, lda, beta, c, ldc, 1, 1);           \
    }

#define F77_SYR2K(name, T, R)                                                  \
    void name##_(const char *uplo, const char *trans, const int *n,            \
                 const int *k, const void *alpha, const void *a,               \
                 const int *lda, const void *b, const int *ldb,                \
                 const void *beta, void *c, const int *ldc);                   \
    void name##_(const char *uplo, const char *trans, const int *n,            \
                 const int *k, const void *alpha, const void *a,               \
                 const int *lda, const void *b, const int *ldb,                \
                 const void *beta, void *c, const int *ldc)                    \
    {                                                                          \
        static void *cache;                                                    \
        gb_l3 p = {.t = T,                                                     \
                   .r = R,                                                     \
                   .side = 'L',                                                \
                   .uplo = up(*uplo),                                          \
                   .trans = up(*trans),                                        \
                   .diag = 'N',                                                \
                   .n = *n,                                                    \
                   .k = *k,                                                    \
                   .alpha = alpha,                                             \
                   .beta = beta,                                               \
                   .a = a,                                                     \
                   .b = b,                                                     \
                   .c = c,                                                     \
                   .lda = *lda,                                                \
                   .ldb = *ldb,                                                \
                   .ldc = *ldc};                                               \
        if (offloaded(&p))                                                     \
            return;                                                            \
        f_syr2k f = (f_syr2k)real(&cache, #name "_");                          \
        if (f == NULL)                                                         \
            f77_cpu(&p);                                                       \
        else                                                                   \
            f(uplo, trans, n, k, alpha, a, lda, b, ldb, beta, c, ldc, 1, 1);   \
    }

#define F77_TRMM(name, T, R)                                                   \
    void name##_(const char *side, const char *uplo, const char *transa,       \
                 const char *diag, const int *m, const int *n,                 \
                 const void *alpha, const void *a, const int *lda, void *b,    \
                 const int *ldb);                                              \
    void name##_(const char *side, const char *uplo, const char *transa,       \
                 const char *diag, const int *m, const int *n,                 \
                 const void *alpha, const void *a, const int *lda, void *b,    \
                 const int *ldb)                                               \
    {                                                                          \
        static void *cache;                                                    \
        gb_l3 p = {.t = T,                                                     \
                   .r = R,                                                     \
                   .side = up(*side),                                          \
                   .uplo = up(*uplo),                                          \
                   .trans = up(*transa),                                       \
                   .diag = up(*diag),                                          \
                   .m = *m,                                                    \
                   .n = *n,                                                    \
                   .alpha = alpha,                                             \
                   .a = a,                                                     \
                   .c = b,                                                     \
                   .lda = *lda,                                                \
                   .ldc = *ldb};                                               \
        if (offloaded(&p))                                                     \
            return;                                                            \
        f_trmm f = (f_trmm)real(&cache, #name "_");                            \
        if (f == NULL)                                                         \
            f77_cpu(&p);                                                       \
        else                                                                   \
            f(side, uplo, transa, diag, m, n, alpha, a, lda, b, ldb, 1, 1, 1,  \
              1);                                                              \
    }

F77_SYMM(ssymm, GB_S, GB_SYMM)
F77_SYMM(dsymm, GB_D, GB_SYMM)
F77_SYMM(csymm, GB_C, GB_SYMM)
F77_SYMM(zsymm, GB_Z, GB_SYMM)
F77_SYMM(chemm, GB_C, GB_HEMM)
F77_SYMM(zhemm, GB_Z, GB_HEMM)
F77_SYRK(ssyrk, GB_S, GB_SYRK)
F77_SYRK(dsyrk, GB_D, GB_SYRK)
F77_SYRK(csyrk, GB_C, GB_SYRK)
F77_SYRK(zsyrk, GB_Z, GB_SYRK)
F77_SYRK(cherk, GB_C, GB_HERK)
F77_SYRK(zherk, GB_Z, GB_HERK)
F77_SYR2K(ssyr2k, GB_S, GB_SYR2K)
F77_SYR2K(dsyr2k, GB_D, GB_SYR2K)
F77_SYR2K(csyr2k, GB_C, GB_SYR2K)
F77_SYR2K(zsyr2k, GB_Z, GB_SYR2K)
F77_SYR2K(cher2k, GB_C, GB_HER2K)
F77_SYR2K(zher2k, GB_Z, GB_HER2K)
F77_TRMM(strmm, GB_S, GB_TRMM)
F77_TRMM(dtrmm, GB_D, GB_TRMM)
F77_TRMM(ctrmm, GB_C, GB_TRMM)
F77_TRMM(ztrmm, GB_Z, GB_TRMM)
F77_TRMM(strsm, GB_S, GB_TRSM)
F77_TRMM(dtrsm, GB_D, GB_TRSM)
F77_TRMM(ctrsm, GB_C, GB_TRSM)
F77_TRMM(ztrsm, GB_Z, GB_TRSM)

/* ---- the CBLAS interface ---- */

/* CBLAS's enumerations as the Fortran characters; 0 when invalid. */
static char c_side(int s)
{
    return s == 141 ? 'L' : s == 142 ? 'R' : 0;
}
static char c_uplo(int u)
{
    return u == 121 ? 'U' : u == 122 ? 'L' : 0;
}
static char c_trans(int t)
{
    return t == GB_NO_TRANS     ? 'N'
           : t == GB_TRANS      ? 'T'
           : t == GB_CONJ_TRANS ? 'C'
                                : 0;
}
static char c_diag(int d)
{
    return d == 131 ? 'N' : d == 132 ? 'U' : 0;
}
/* The other side (L, R) or the other triangle (U, L): the row-major
 * view's. */
static char flip_side(char s)
{
    return s == 'L' ? 'R' : 'L';
}
static char flip_uplo(char u)
{
    return u == 'U' ? 'L' : 'U';
}

/* The Fortran call of a CBLAS symm/hemm/trmm/trsm (reference CBLAS's:
 * row-major flips SIDE and UPLO and swaps M and N). Returns 0, or the
 * position reference CBLAS reports for the first illegal enumeration:
 * layout (1), side (2), uplo (3); p is then not filled. */
static int cb_side_call(gb_l3 *p, int layout, int side, int uplo, int m, int n)
{
    char s = c_side(side), u = c_uplo(uplo);
    if (layout != GB_ROW_MAJOR && layout != GB_COL_MAJOR)
        return 1;
    if (!s)
        return 2;
    if (!u)
        return 3;
    bool row = layout == GB_ROW_MAJOR;
    p->side = row ? flip_side(s) : s;
    p->uplo = row ? flip_uplo(u) : u;
    p->m = row ? n : m;
    p->n = row ? m : n;
    return 0;
}

/* The Fortran call of a CBLAS rank update: row-major flips UPLO, and
 * TRANS N becomes T (C for herk/her2k), T and C become N, except where
 * reference CBLAS refuses them: T for herk/her2k and C for complex
 * syrk/syr2k (column-major hands them on, for the Fortran routine's
 * check to refuse). Returns 0, or the position of the first illegal
 * enumeration: layout (1), uplo (2), trans (3); p is then not filled. */
static int cb_rank_call(gb_l3 *p, int layout, int uplo, int trans, int n, int k)
{
    char u = c_uplo(uplo), t = c_trans(trans);
    bool her = p->r == GB_HERK || p->r == GB_HER2K;
    if (layout != GB_ROW_MAJOR && layout != GB_COL_MAJOR)
        return 1;
    if (!u)
        return 2;
    if (!t)
        return 3;
    bool row = layout == GB_ROW_MAJOR;
    if (row && t == 'N')
        t = her ? 'C' : 'T';
    else if (row && ((her && t == 'T') || (!her && p->t >= GB_C && t == 'C')))
        return 3;
    else if (row)
        t = 'N';
    p->uplo = row ? flip_uplo(u) : u;
    p->trans = t;
    p->n = n;
    p->k = k;
    return 0;
}

/* The enumerations of the CBLAS forms by position (layout is 1). */
static const char *const side_args[] = {"layout", "Side", "Uplo", "Trans",
                                        "Diag"};
static const char *const rank_args[] = {"layout", "Uplo", "Trans"};

/* A CBLAS call no CPU BLAS can make, as reference CBLAS makes it. bad: 0,
 * or the position of the illegal enumeration (cb_side_call,
 * cb_rank_call), reported to cblas_xerbla as reference CBLAS does
 * ("Illegal Side setting, %d" with what[bad - 1] and val[bad - 1]); else
 * an illegal argument of the Fortran call p goes to cblas_xerbla one
 * position further on (as reference CBLAS's xerbla_ passes it on: the
 * layout comes first), and a legal p runs in plain loops. RowMajorStrg
 * is set around cblas_xerbla as reference CBLAS sets it (the testers'
 * handlers read it). */
static void cb_cpu(const gb_l3 *p, const char *name, int layout, int bad,
                   const char *const *what, const int *val)
{
    int info = bad != 0 ? bad : gb_l3_check(p);
    if (info == 0) {
        gb_cpu_l3(p);
        return;
    }
    RowMajorStrg = layout == GB_ROW_MAJOR;
    if (bad != 0) {
        char form[32];
        snprintf(form, sizeof(form), "Illegal %s setting, %%d\n",
                 what[bad - 1]);
        cblas_xerbla(bad, name, form, val[bad - 1]);
    } else {
        cblas_xerbla(info + 1, name, "");
    }
    RowMajorStrg = 0;
}

/* T: the element's part type (real types: the element); the scalars of
 * real routines come by value, of complex ones by pointer. */
#define CB_SYMM_REAL(name, T, GT)                                              \
    void name(int layout, int side, int uplo, int m, int n, T alpha,           \
              const T *a, int lda, const T *b, int ldb, T beta, T *c,          \
              int ldc);                                                        \
    void name(int layout, int side, int uplo, int m, int n, T alpha,           \
              const T *a, int lda, const T *b, int ldb, T beta, T *c, int ldc) \
    {                                                                          \
        static void *cache;                                                    \
        gb_l3 p = {.t = GT,                                                    \
                   .r = GB_SYMM,                                               \
                   .trans = 'N',                                               \
                   .diag = 'N',                                                \
                   .alpha = &alpha,                                            \
                   .beta = &beta,                                              \
                   .a = a,                                                     \
                   .b = b,                                                     \
                   .c = c,                                                     \
                   .lda = lda,                                                 \
                   .ldb = ldb,                                                 \
                   .ldc = ldc};                                                \
        int bad = cb_side_call(&p, layout, side, uplo, m, n);                  \
        if (bad == 0 && offloaded(&p))                                         \
            return;                                                            \
        void (*f)(int, int, int, int, int, T, const T *, int, const T *, int,  \
                  T, T *, int) = real(&cache, #name);                          \
        if (f == NULL)                                                         \
            cb_cpu(&p, #name, layout, bad, side_args,                          \
                   (const int[]){layout, side, uplo});                         \
        else                                                                   \
            f(layout, side, uplo, m, n, alpha, a, lda, b, ldb, beta, c, ldc);  \
    }

#define CB_SYMM_CPLX(name, GT, R)                                              \
    void name(int layout, int side, int uplo, int m, int n, const void *alpha, \
              const void *a, int lda, const void *b, int ldb,                  \
              const void *beta, void *c, int ldc);                             \
    void name(int layout, int side, int uplo, int m, int n, const void *alpha, \
              const void *a, int lda, const void *b, int ldb,                  \
              const void *beta, void *c, int ldc)                              \
    {                                                                          \
        static void *cache;                                                    \
        gb_l3 p = {.t = GT,                                                    \
                   .r = R,                                                     \
                   .trans = 'N',                                               \
                   .diag = 'N',                                                \
                   .alpha = alpha,                                             \
                   .beta = beta,                                               \
                   .a = a,                                                     \
                   .b = b,                                                     \
                   .c = c,                                                     \
                   .lda = lda,                                                 \
                   .ldb = ldb,                                                 \
                   .ldc = ldc};                                                \
        int bad = cb_side_call(&p, layout, side, uplo, m, n);                  \
        if (bad == 0 && offloaded(&p))                                         \
            return;                                                            \
        void (*f)(int, int, int, int, int, const void *, const void *, int,    \
                  const void *, int, const void *, void *, int) =              \
            real(&cache, #name);                                               \
        if (f == NULL)                                                         \
            cb_cpu(&p, #name, layout, bad, side_args,                          \
                   (const int[]){layout, side, uplo});                         \
        else                                                                   \
            f(layout, side, uplo, m, n, alpha, a, lda, b, ldb, beta, c, ldc);  \
    }

/* syrk of any type and herk: alpha and beta by value (AT, BT) or by
 * pointer (the complex syrk: AT and BT are const void *, A_ and B_ pass
 * them as they are). */
#define CB_SYRK(name, GT, R, AT, BT, AP, BP)                                   \
    void name(int layout, int uplo, int trans, int n, int k, AT alpha,         \
              const void *a, int lda, BT beta, void *c, int ldc);              \
    void name(int layout, int uplo, int trans, int n, int k, AT alpha,         \
              const void *a, int lda, BT beta, void *c, int ldc)               \
    {                                                                          \
        static void *cache;                                                    \
        gb_l3 p = {.t = GT,                                                    \
                   .r = R,                                                     \
                   .side = 'L',                                                \
                   .diag = 'N',                                                \
                   .alpha = AP,                                                \
                   .beta = BP,                                                 \
                   .a = a,                                                     \
                   .c = c,                                                     \
                   .lda = lda,                                                 \
                   .ldc = ldc};                                                \
        int bad = cb_rank_call(&p, layout, uplo, trans, n, k);                 \
        if (bad == 0 && offloaded(&p))                                         \
            return;                                                            \
        void (*f)(int, int, int, int, int, AT, const void *, int, BT, void *,  \
                  int) = real(&cache, #name);                                  \
        if (f == NULL)                                                         \
            cb_cpu(&p, #name, layout, bad, rank_args,                          \
                   (const int[]){layout, uplo, trans});                        \
        else                                                                   \
            f(layout, uplo, trans, n, k, alpha, a, lda, beta, c, ldc);         \
    }

#define CB_SYR2K(name, GT, R, AT, BT, AP, BP)                                  \
    void name(int layout, int uplo, int trans, int n, int k, AT alpha,         \
              const void *a, int lda, const void *b, int ldb, BT beta,         \
              void *c, int ldc);                                               \
    void name(int layout, int uplo, int trans, int n, int k, AT alpha,         \
              const void *a, int lda, const void *b, int ldb, BT beta,         \
              void *c, int ldc)                                                \
    {                                                                          \
        static void *cache;                                                    \
        double store[2]; /* her2k's row-major conj(alpha) */                   \
        gb_l3 p = {.t = GT,                                                    \
                   .r = R,                                                     \
                   .side = 'L',                                                \
                   .diag = 'N',                                                \
                   .alpha = AP,                                                \
                   .beta = BP,                                                 \
                   .a = a,                                                     \
                   .b = b,                                                     \
                   .c = c,                                                     \
                   .lda = lda,                                                 \
                   .ldb = ldb,                                                 \
                   .ldc = ldc};                                                \
        int bad = cb_rank_call(&p, layout, uplo, trans, n, k);                 \
        if (bad == 0)                                                          \
            her2k_row_alpha(&p, layout, store);                                \
        if (bad == 0 && offloaded(&p))                                         \
            return;                                                            \
        void (*f)(int, int, int, int, int, AT, const void *, int,              \
                  const void *, int, BT, void *, int) = real(&cache, #name);   \
        if (f == NULL)                                                         \
            cb_cpu(&p, #name, layout, bad, rank_args,                          \
                   (const int[]){layout, uplo, trans});                        \
        else                                                                   \
            f(layout, uplo, trans, n, k, alpha, a, lda, b, ldb, beta, c, ldc); \
    }

/* Reference CBLAS calls a row-major her2k with conj(alpha): p takes the
 * conjugate (in store, two parts of p's type). */
static void her2k_row_alpha(gb_l3 *p, int layout, double store[2])
{
    if (p->r != GB_HER2K || layout != GB_ROW_MAJOR)
        return;
    if (p->t == GB_C) {
        float *f = (float *)store;
        f[0] = ((const float *)p->alpha)[0];
        f[1] = -((const float *)p->alpha)[1];
    } else {
        store[0] = ((const double *)p->alpha)[0];
        store[1] = -((const double *)p->alpha)[1];
    }
    p->alpha = store;
}

#define CB_TRMM(name, GT, R, AT, AP)                                           \
    void name(int layout, int side, int uplo, int transa, int diag, int m,     \
              int n, AT alpha, const void *a, int lda, void *b, int ldb);      \
    void name(int layout, int side, int uplo, int transa, int diag, int m,     \
              int n, AT alpha, const void *a, int lda, void *b, int ldb)       \
    {                                                                          \
        static void *cache;                                                    \
        gb_l3 p = {.t = GT,                                                    \
                   .r = R,                                                     \
                   .trans = c_trans(transa),                                   \
                   .diag = c_diag(diag),                                       \
                   .alpha = AP,                                                \
                   .a = a,                                                     \
                   .c = b,                                                     \
                   .lda = lda,                                                 \
                   .ldc = ldb};                                                \
        int bad = cb_side_call(&p, layout, side, uplo, m, n);                  \
        if (bad == 0 && !p.trans)                                              \
            bad = 4;                                                           \
        if (bad == 0 && !p.diag)                                               \
            bad = 5;                                                           \
        if (bad == 0 && offloaded(&p))                                         \
            return;                                                            \
        void (*f)(int, int, int, int, int, int, int, AT, const void *, int,    \
                  void *, int) = real(&cache, #name);                          \
        if (f == NULL)                                                         \
            cb_cpu(&p, #name, layout, bad, side_args,                          \
                   (const int[]){layout, side, uplo, transa, diag});           \
        else                                                                   \
            f(layout, side, uplo, transa, diag, m, n, alpha, a, lda, b, ldb);  \
    }

CB_SYMM_REAL(cblas_ssymm, float, GB_S)
CB_SYMM_REAL(cblas_dsymm, double, GB_D)
CB_SYMM_CPLX(cblas_csymm, GB_C, GB_SYMM)
CB_SYMM_CPLX(cblas_zsymm, GB_Z, GB_SYMM)
CB_SYMM_CPLX(cblas_chemm, GB_C, GB_HEMM)
CB_SYMM_CPLX(cblas_zhemm, GB_Z, GB_HEMM)

#define SCAL_V(x) &x /* a scalar passed by value: its address */

CB_SYRK(cblas_ssyrk, GB_S, GB_SYRK, float, float, SCAL_V(alpha), SCAL_V(beta))
CB_SYRK(cblas_dsyrk, GB_D, GB_SYRK, double, double, SCAL_V(alpha), SCAL_V(beta))
CB_SYRK(cblas_csyrk, GB_C, GB_SYRK, const void *, const void *, alpha, beta)
CB_SYRK(cblas_zsyrk, GB_Z, GB_SYRK, const void *, const void *, alpha, beta)
CB_SYRK(cblas_cherk, GB_C, GB_HERK, float, float, SCAL_V(alpha), SCAL_V(beta))
CB_SYRK(cblas_zherk, GB_Z, GB_HERK, double, double, SCAL_V(alpha), SCAL_V(beta))
CB_SYR2K(cblas_ssyr2k, GB_S, GB_SYR2K, float, float, SCAL_V(alpha),
         SCAL_V(beta))
CB_SYR2K(cblas_dsyr2k, GB_D, GB_SYR2K, double, double, SCAL_V(alpha),
         SCAL_V(beta))
CB_SYR2K(cblas_csyr2k, GB_C, GB_SYR2K, const void *, const void *, alpha, beta)
CB_SYR2K(cblas_zsyr2k, GB_Z, GB_SYR2K, const void *, const void *, alpha, beta)
CB_SYR2K(cblas_cher2k, GB_C, GB_HER2K, const void *, float, alpha, SCAL_V(beta))
CB_SYR2K(cblas_zher2k, GB_Z, GB_HER2K, const void *, double, alpha,
         SCAL_V(beta))
CB_TRMM(cblas_strmm, GB_S, GB_TRMM, float, SCAL_V(alpha))
CB_TRMM(cblas_dtrmm, GB_D, GB_TRMM, double, SCAL_V(alpha))
CB_TRMM(cblas_ctrmm, GB_C, GB_TRMM, const void *, alpha)
CB_TRMM(cblas_ztrmm, GB_Z, GB_TRMM, const void *, alpha)
CB_TRMM(cblas_strsm, GB_S, GB_TRSM, float, SCAL_V(alpha))
CB_TRMM(cblas_dtrsm, GB_D, GB_TRSM, double, SCAL_V(alpha))
CB_TRMM(cblas_ctrsm, GB_C, GB_TRSM, const void *, alpha)
CB_TRMM(cblas_ztrsm, GB_Z, GB_TRSM, const void *, alpha)
