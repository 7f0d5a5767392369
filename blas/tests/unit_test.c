/*
 * unit_test.c: libgemmblas's pure pieces, linked from its objects: the
 * reference argument checks (gb_check_f77, gb_check_cblas) against the
 * reference BLAS rules written out independently here over a grid of
 * arguments, and the operand swap (gb_from_colmajor): which memory
 * becomes the row-major A and B, with which operator and leading
 * dimension.
 */
#include "gemmblas.h"

#include <criterion/criterion.h>

/* The reference rules, restated: the first illegal argument's position. */
static int ref_check(char ta, char tb, int m, int n, int k, int lda, int ldb,
                     int ldc)
{
    bool nota = ta == 'N' || ta == 'n', notb = tb == 'N' || tb == 'n';
    bool oka = nota || ta == 'T' || ta == 't' || ta == 'C' || ta == 'c';
    bool okb = notb || tb == 'T' || tb == 't' || tb == 'C' || tb == 'c';
    int nrowa = nota ? m : k, nrowb = notb ? k : n;
    if (!oka)
        return 1;
    if (!okb)
        return 2;
    if (m < 0)
        return 3;
    if (n < 0)
        return 4;
    if (k < 0)
        return 5;
    if (lda < (nrowa > 1 ? nrowa : 1))
        return 8;
    if (ldb < (nrowb > 1 ? nrowb : 1))
        return 10;
    if (ldc < (m > 1 ? m : 1))
        return 13;
    return 0;
}

Test(blas_unit, f77_checks_match_the_reference_rules)
{
    static const char ops[] = "NnTtCcX/";
    static const int dims[] = {-1, 0, 1, 2, 3};
    static const int lds[] = {0, 1, 2, 3, 4};
    int cases = 0;
    for (int a = 0; ops[a]; a++)
        for (int b = 0; ops[b]; b++)
            for (int m = 0; m < 5; m++)
                for (int n = 0; n < 5; n++)
                    for (int k = 0; k < 5; k++)
                        for (int la = 0; la < 5; la++)
                            for (int lb = 0; lb < 5; lb += 2)
                                for (int lc = 0; lc < 5; lc += 2) {
                                    int want = ref_check(
                                        ops[a], ops[b], dims[m], dims[n],
                                        dims[k], lds[la], lds[lb], lds[lc]);
                                    int got = gb_check_f77(
                                        ops[a], ops[b], dims[m], dims[n],
                                        dims[k], lds[la], lds[lb], lds[lc]);
                                    cr_assert_eq(got, want,
                                                 "%c%c m%d n%d k%d lda%d "
                                                 "ldb%d ldc%d",
                                                 ops[a], ops[b], dims[m],
                                                 dims[n], dims[k], lds[la],
                                                 lds[lb], lds[lc]);
                                    cases++;
                                }
    cr_log_info("%d argument combinations", cases);
}

Test(blas_unit, cblas_checks_are_the_swapped_fortran_ones)
{
    static const int ops[] = {GB_NO_TRANS, GB_TRANS, GB_CONJ_TRANS};
    static const char ch[] = "NTC";
    cr_expect_eq(
        gb_check_cblas(100, GB_NO_TRANS, GB_NO_TRANS, 1, 1, 1, 1, 1, 1), 1);
    cr_expect_eq(
        gb_check_cblas(GB_ROW_MAJOR, 110, GB_NO_TRANS, -1, 1, 1, 1, 1, 1), 2,
        "TransA before M");
    cr_expect_eq(gb_check_cblas(GB_COL_MAJOR, GB_TRANS, 114, 1, 1, 1, 1, 1, 1),
                 3);
    for (int a = 0; a < 3; a++)
        for (int b = 0; b < 3; b++)
            for (int m = -1; m < 3; m++)
                for (int n = -1; n < 3; n++)
                    for (int lda = 0; lda < 3; lda++)
                        for (int ldb = 0; ldb < 3; ldb++) {
                            int k = 2, ldc = 2;
                            int col =
                                ref_check(ch[a], ch[b], m, n, k, lda, ldb, ldc);
                            int row =
                                ref_check(ch[b], ch[a], n, m, k, ldb, lda, ldc);
                            cr_assert_eq(gb_check_cblas(GB_COL_MAJOR, ops[a],
                                                        ops[b], m, n, k, lda,
                                                        ldb, ldc),
                                         col ? col + 1 : 0);
                            cr_assert_eq(gb_check_cblas(GB_ROW_MAJOR, ops[a],
                                                        ops[b], m, n, k, lda,
                                                        ldb, ldc),
                                         row ? row + 1 : 0);
                        }
}

Test(blas_unit, colmajor_swaps_operands_not_data)
{
    double alpha = 2, beta = 3, a[1] = {0}, b[1] = {0}, c[1] = {0};
    gb_gemm g;
    gb_from_colmajor(&g, GB_Z, 'c', 't', 5, 7, 9, &alpha, a, 11, b, 13, &beta,
                     c, 17);
    cr_expect_eq(g.m, 7, "row-major m is the column-major n");
    cr_expect_eq(g.n, 5);
    cr_expect_eq(g.k, 9);
    cr_expect_eq(g.a, (const void *)b, "B's memory is the row-major A");
    cr_expect_eq(g.b, (const void *)a);
    cr_expect_eq(g.lda, 13);
    cr_expect_eq(g.ldb, 11);
    cr_expect_eq(g.opa, 'T', "op(B) stays T");
    cr_expect_eq(g.opb, 'C', "op(A) stays C (conjugate transpose)");
    cr_expect_eq(g.c, (void *)c);
    cr_expect_eq(g.ldc, 17);
    cr_expect_eq(g.alpha, (const void *)&alpha);
    cr_expect_eq(g.beta, (const void *)&beta);
    gb_from_colmajor(&g, GB_D, 'C', 'n', 1, 2, 3, &alpha, a, 1, b, 1, &beta, c,
                     1);
    cr_expect_eq(g.opb, 'T', "'C' on a real type is 'T'");
    cr_expect_eq(g.opa, 'N');
}

Test(blas_unit, scalar_tests)
{
    float fz[2] = {0, 0}, fo[2] = {1, 0}, fi[2] = {0, 1};
    double dz[2] = {0, -0.0}, dn[2] = {1, 1e-300};
    cr_expect(gb_is_zero(GB_C, fz));
    cr_expect(gb_is_one(GB_C, fo));
    cr_expect(!gb_is_zero(GB_C, fi) && !gb_is_one(GB_C, fi));
    cr_expect(gb_is_zero(GB_Z, dz), "-0 is zero");
    cr_expect(!gb_is_one(GB_Z, dn), "1 + tiny i is not one");
    cr_expect(gb_is_one(GB_D, dn), "a real type reads the first part");
    cr_expect_eq(gb_esize(GB_S), 4);
    cr_expect_eq(gb_esize(GB_Z), 16);
}

/* One level-3 call as the Fortran routine sees it, and the position the
 * reference's XERBLA would report (0: legal), written from the reference
 * routines' argument checks. */
typedef struct l3check {
    gb_type t;
    int r;
    char side, uplo, trans, diag;
    int m, n, k, lda, ldb, ldc;
    int want;
} l3check;

Test(blas_unit, level3_checks_match_the_reference_rules)
{
    static const l3check cases[] = {
        /* ?SYMM/?HEMM(SIDE, UPLO, M, N, .., LDA 7, .., LDB 9, .., LDC 12) */
        {GB_D, GB_SYMM, 'L', 'U', 'N', 'N', 3, 5, 0, 3, 3, 3, 0},
        {GB_D, GB_SYMM, 'R', 'L', 'N', 'N', 3, 5, 0, 5, 3, 3, 0},
        {GB_D, GB_SYMM, 'R', 'L', 'N', 'N', 3, 5, 0, 4, 3, 3, 7},
        {GB_D, GB_SYMM, 'X', 'L', 'N', 'N', 3, 5, 0, 5, 3, 3, 1},
        {GB_Z, GB_HEMM, 'L', 'X', 'N', 'N', 3, 5, 0, 3, 3, 3, 2},
        {GB_Z, GB_HEMM, 'L', 'U', 'N', 'N', -1, 5, 0, 3, 3, 3, 3},
        {GB_Z, GB_HEMM, 'L', 'U', 'N', 'N', 3, -1, 0, 3, 3, 3, 4},
        {GB_C, GB_SYMM, 'L', 'U', 'N', 'N', 3, 5, 0, 3, 2, 3, 9},
        {GB_C, GB_SYMM, 'L', 'U', 'N', 'N', 3, 5, 0, 3, 3, 2, 12},
        {GB_S, GB_SYMM, 'L', 'U', 'N', 'N', 0, 0, 0, 1, 1, 1, 0},
        /* ?SYRK(UPLO, TRANS, N, K, .., LDA 7, .., LDC 10) */
        {GB_D, GB_SYRK, 'L', 'L', 'N', 'N', 0, 4, 2, 4, 0, 4, 0},
        {GB_D, GB_SYRK, 'L', 'L', 'T', 'N', 0, 4, 2, 2, 0, 4, 0},
        {GB_D, GB_SYRK, 'L', 'L', 'C', 'N', 0, 4, 2, 2, 0, 4, 0},
        {GB_C, GB_SYRK, 'L', 'L', 'C', 'N', 0, 4, 2, 2, 0, 4, 2},
        {GB_Z, GB_HERK, 'L', 'U', 'T', 'N', 0, 4, 2, 2, 0, 4, 2},
        {GB_Z, GB_HERK, 'L', 'U', 'C', 'N', 0, 4, 2, 2, 0, 4, 0},
        {GB_Z, GB_HERK, 'L', 'Q', 'C', 'N', 0, 4, 2, 2, 0, 4, 1},
        {GB_D, GB_SYRK, 'L', 'L', 'N', 'N', 0, -1, 2, 4, 0, 4, 3},
        {GB_D, GB_SYRK, 'L', 'L', 'N', 'N', 0, 4, -2, 4, 0, 4, 4},
        {GB_D, GB_SYRK, 'L', 'L', 'N', 'N', 0, 4, 2, 3, 0, 4, 7},
        {GB_D, GB_SYRK, 'L', 'L', 'N', 'N', 0, 4, 2, 4, 0, 3, 10},
        /* ?SYR2K(UPLO, TRANS, N, K, .., LDA 7, .., LDB 9, .., LDC 12) */
        {GB_S, GB_SYR2K, 'L', 'U', 'N', 'N', 0, 4, 2, 4, 4, 4, 0},
        {GB_S, GB_SYR2K, 'L', 'U', 'N', 'N', 0, 4, 2, 4, 3, 4, 9},
        {GB_S, GB_SYR2K, 'L', 'U', 'N', 'N', 0, 4, 2, 4, 4, 3, 12},
        {GB_C, GB_HER2K, 'L', 'U', 'T', 'N', 0, 4, 2, 2, 2, 4, 2},
        {GB_C, GB_HER2K, 'L', 'U', 'C', 'N', 0, 4, 2, 2, 2, 4, 0},
        /* ?TRMM/?TRSM(SIDE, UPLO, TRANSA, DIAG, M, N, .., LDA 9, .., LDB 11);
         * B, the output, is c here */
        {GB_D, GB_TRSM, 'L', 'L', 'N', 'N', 4, 3, 0, 4, 0, 4, 0},
        {GB_D, GB_TRSM, 'R', 'L', 'C', 'U', 4, 3, 0, 3, 0, 4, 0},
        {GB_D, GB_TRSM, 'R', 'L', 'X', 'U', 4, 3, 0, 3, 0, 4, 3},
        {GB_D, GB_TRSM, 'R', 'L', 'N', 'X', 4, 3, 0, 3, 0, 4, 4},
        {GB_Z, GB_TRMM, 'L', 'U', 'C', 'N', -4, 3, 0, 4, 0, 4, 5},
        {GB_Z, GB_TRMM, 'L', 'U', 'C', 'N', 4, -3, 0, 4, 0, 4, 6},
        {GB_Z, GB_TRMM, 'L', 'U', 'C', 'N', 4, 3, 0, 3, 0, 4, 9},
        {GB_Z, GB_TRMM, 'L', 'U', 'C', 'N', 4, 3, 0, 4, 0, 3, 11},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        const l3check *c = &cases[i];
        gb_l3 p = {.t = c->t,
                   .r = c->r,
                   .side = c->side,
                   .uplo = c->uplo,
                   .trans = c->trans,
                   .diag = c->diag,
                   .m = c->m,
                   .n = c->n,
                   .k = c->k,
                   .lda = c->lda,
                   .ldb = c->ldb,
                   .ldc = c->ldc};
        cr_assert_eq(gb_l3_check(&p), c->want, "case %zu: got %d, want %d", i,
                     gb_l3_check(&p), c->want);
    }
}
