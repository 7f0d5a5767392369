/*
 * catalog_test.c: the kernel catalog as the host sees it (no GPU needed):
 * the listing (unique names, every ladder rung from 1 up present once and
 * in order, sane descriptors, find() agrees with the listing, "auto" and
 * the one cuBLAS reference present, only request types listed) and
 * gemmk_check's answers (unknown names, unclaimed types, transposes and
 * precisions refused with a reason; claimed ones accepted).
 */
#include <criterion/criterion.h>
#include <string.h>

#include "gemm_kernels.h"

#define ALL_TYPES ((1u << GEMM_BF16) | (1u << GEMM_FP16) | (1u << GEMM_FP32))
/* fp64, complex64, complex128 (cuBLAS, and the fp64 kernels) */
#define EXTRA_TYPES GEMMK_WIDE_TYPES
/* int8 inputs (the int8 kernels and "auto"), int32 outputs */
#define S8_TYPES  (1u << GEMM_INT8)
#define S32_TYPES (1u << GEMM_INT32)
#define ALL_PRECS                                                              \
    ((1u << GEMM_PRECISION_DEFAULT) | (1u << GEMM_PRECISION_TF32) |            \
     (1u << GEMM_PRECISION_FP32))

static gemmk_problem problem(gemm_dtype ab, gemm_dtype cd, int ta, int tb,
                             gemm_precision prec)
{
    gemmk_problem p;
    memset(&p, 0, sizeof(p));
    p.m = p.n = p.k = 64;
    p.ab_type = ab;
    p.cd_type = cd;
    p.trans_a = ta;
    p.trans_b = tb;
    p.precision = prec;
    p.lda = p.ldb = p.ldc = p.ldd = 64;
    p.alpha = 1.0f;
    return p;
}

/* What desc claims for one combination (DEFAULT precision = FP32). */
static int claims(const gemmk_kernel_desc *d, gemm_dtype ab, gemm_dtype cd,
                  int t, gemm_precision prec)
{
    if (!(d->ab_types & (1u << ab)) || !(d->cd_types & (1u << cd)))
        return 0;
    if (ab == GEMM_FP32) {
        gemm_precision pr =
            prec == GEMM_PRECISION_DEFAULT ? GEMM_PRECISION_FP32 : prec;
        if (!(d->precisions & (1u << pr)))
            return 0;
    }
    return (d->transposes >> t) & 1u;
}

Test(catalog, listing_is_sane)
{
    int n = gemmk_catalog_size();
    cr_assert_gt(n, 7, "the catalog lists %d entries", n);
    cr_assert_null(gemmk_catalog_entry(-1));
    cr_assert_null(gemmk_catalog_entry(n));
    int refs = 0, have_auto = 0, max_rung = 0;
    for (int i = 0; i < n; i++) {
        const gemmk_kernel_desc *d = gemmk_catalog_entry(i);
        cr_assert_not_null(d, "entry %d", i);
        cr_assert_not_null(d->name, "entry %d has no name", i);
        cr_assert_gt(strlen(d->name), 0);
        cr_assert_not_null(d->summary, "%s has no summary", d->name);
        cr_assert_gt(strlen(d->summary), 0, "%s", d->name);
        cr_assert_eq(gemmk_catalog_find(d->name), d, "find(%s)", d->name);
        for (int j = 0; j < i; j++)
            cr_assert_str_neq(gemmk_catalog_entry(j)->name, d->name,
                              "name %s listed twice", d->name);
        cr_assert(d->ab_types != 0 && (d->ab_types & ~(ALL_TYPES | EXTRA_TYPES |
                                                       S8_TYPES)) == 0,
                  "%s: ab_types 0x%x", d->name, d->ab_types);
        cr_assert(d->cd_types != 0 && (d->cd_types & ~(ALL_TYPES | EXTRA_TYPES |
                                                       S32_TYPES)) == 0,
                  "%s: cd_types 0x%x", d->name, d->cd_types);
        /* int8 inputs go with int32 outputs, and only they */
        cr_assert_eq(!(d->ab_types & S8_TYPES), !(d->cd_types & S32_TYPES),
                     "%s: int8 in without int32 out or the reverse", d->name);
        /* an entry serves one family: the 16/32-bit types, the wide ones
         * or int8; "auto" serves all, the reference (cuBLAS) the first
         * two */
        int fams = !!(d->ab_types & ALL_TYPES) + !!(d->ab_types & EXTRA_TYPES) +
                   !!(d->ab_types & S8_TYPES);
        if (strcmp(d->name, "auto") == 0)
            cr_assert_eq(fams, 3, "auto serves %d families", fams);
        else if (d->reference)
            cr_assert(fams == 2 && !(d->ab_types & S8_TYPES), "%s", d->name);
        else
            cr_assert_eq(fams, 1, "%s mixes type families", d->name);
        cr_assert(d->transposes != 0 && (d->transposes & ~GEMMK_TRANS_ALL) == 0,
                  "%s: transposes 0x%x", d->name, d->transposes);
        cr_assert_eq(d->precisions & ~ALL_PRECS, 0, "%s", d->name);
        /* fp32 inputs need a precision to serve; 16-bit-only entries may
         * list none. */
        if (d->ab_types & (1u << GEMM_FP32))
            cr_assert(d->precisions & ((1u << GEMM_PRECISION_TF32) |
                                       (1u << GEMM_PRECISION_FP32)),
                      "%s serves fp32 inputs at no precision", d->name);
        cr_assert(d->ladder >= 0, "%s: rung %d", d->name, d->ladder);
        cr_assert(d->reference == 0 || d->reference == 1, "%s", d->name);
        if (d->reference) {
            refs++;
            cr_assert_eq(d->ladder, 0, "the reference is not a rung");
        }
        if (strcmp(d->name, "auto") == 0)
            have_auto = 1;
        if (d->ladder > max_rung)
            max_rung = d->ladder;
    }
    cr_assert_eq(refs, 1, "%d reference entries", refs);
    cr_assert(have_auto, "no \"auto\" entry");
    const gemmk_kernel_desc *cb = gemmk_catalog_find("cublas");
    cr_assert_not_null(cb);
    cr_assert(cb->reference);
    cr_assert_eq(cb->ab_types, ALL_TYPES | EXTRA_TYPES);
    cr_assert_eq(cb->cd_types, ALL_TYPES | EXTRA_TYPES);
    cr_assert_eq(cb->transposes, GEMMK_TRANS_ALL);

    /* Rungs 1..max each once, listed in rung order. */
    cr_assert_geq(max_rung, 6, "the ladder stops at rung %d", max_rung);
    int last = 0;
    for (int r = 1; r <= max_rung; r++) {
        int count = 0;
        for (int i = 0; i < n; i++)
            if (gemmk_catalog_entry(i)->ladder == r) {
                count++;
                cr_assert_gt(i, last, "rung %d listed before rung %d", r,
                             r - 1);
                last = i;
            }
        cr_assert_eq(count, 1, "rung %d: %d entries", r, count);
    }
    const char *rungs[] = {"naive",      "smem-tiled",  "reg-tiled-2d",
                           "warp-tiled", "wgmma-basic", "wgmma-ws-tf32"};
    for (int r = 0; r < 6; r++) {
        const gemmk_kernel_desc *d = gemmk_catalog_find(rungs[r]);
        cr_assert_not_null(d, "%s missing", rungs[r]);
        cr_assert_eq(d->ladder, r + 1, "%s is rung %d", rungs[r], d->ladder);
    }
}

Test(catalog, ladder_claims)
{
    /* The CUDA-core rungs serve everything in true fp32 (no tf32). */
    const char *fma[] = {"naive", "smem-tiled", "reg-tiled-2d", "warp-tiled"};
    for (int i = 0; i < 4; i++) {
        const gemmk_kernel_desc *d = gemmk_catalog_find(fma[i]);
        cr_assert_not_null(d, "%s", fma[i]);
        cr_assert_eq(d->ab_types, ALL_TYPES, "%s", fma[i]);
        cr_assert_eq(d->cd_types, ALL_TYPES, "%s", fma[i]);
        cr_assert_eq(d->transposes, GEMMK_TRANS_ALL, "%s", fma[i]);
        cr_assert(d->precisions & (1u << GEMM_PRECISION_FP32), "%s", fma[i]);
        cr_assert_not(d->precisions & (1u << GEMM_PRECISION_TF32), "%s",
                      fma[i]);
    }
    const gemmk_kernel_desc *w = gemmk_catalog_find("wgmma-basic");
    cr_assert_not_null(w);
    cr_assert_eq(w->ab_types, (1u << GEMM_BF16) | (1u << GEMM_FP16));
}

Test(catalog, check_unknown_and_null)
{
    gemmk_problem p =
        problem(GEMM_BF16, GEMM_BF16, 0, 0, GEMM_PRECISION_DEFAULT);
    const char *why = NULL;
    cr_assert_eq(gemmk_check("no-such-kernel", &p, &why), GEMM_ERR_UNSUPPORTED);
    cr_assert_not_null(why);
    cr_assert_null(gemmk_catalog_find("no-such-kernel"));
    cr_assert_null(gemmk_catalog_find(NULL));
    cr_assert_eq(gemmk_check("", &p, NULL), GEMM_ERR_UNSUPPORTED);
    cr_assert_neq(gemmk_check("naive", NULL, &why), GEMM_OK);
    /* NULL and "auto" are the same request. */
    cr_assert_eq(gemmk_check(NULL, &p, NULL), GEMM_OK);
    cr_assert_eq(gemmk_check("auto", &p, NULL), GEMM_OK);
    /* A precision on 16-bit inputs is malformed, whatever the kernel. */
    p.precision = GEMM_PRECISION_TF32;
    cr_assert_neq(gemmk_check("naive", &p, NULL), GEMM_OK);
}

Test(catalog, check_matches_every_claim)
{
    const gemm_dtype types[3] = {GEMM_BF16, GEMM_FP16, GEMM_FP32};
    int refused = 0;
    for (int i = 0; i < gemmk_catalog_size(); i++) {
        const gemmk_kernel_desc *d = gemmk_catalog_entry(i);
        for (int a = 0; a < 3; a++)
            for (int c = 0; c < 3; c++)
                for (int t = 0; t < 4; t++)
                    for (int pr = 0; pr < 3; pr++) {
                        if (types[a] != GEMM_FP32 && pr != 0)
                            continue;
                        gemmk_problem p = problem(types[a], types[c], t & 1,
                                                  t >> 1, (gemm_precision)pr);
                        const char *why = NULL;
                        gemm_error rv = gemmk_check(d->name, &p, &why);
                        if (claims(d, types[a], types[c], t,
                                   (gemm_precision)pr)) {
                            cr_assert_eq(rv, GEMM_OK,
                                         "%s refuses a claimed combination "
                                         "(ab %d cd %d t %d prec %d): %s",
                                         d->name, types[a], types[c], t, pr,
                                         why ? why : "");
                        } else {
                            refused++;
                            cr_assert_eq(rv, GEMM_ERR_UNSUPPORTED,
                                         "%s: ab %d cd %d t %d prec %d -> %d",
                                         d->name, types[a], types[c], t, pr,
                                         rv);
                            cr_assert_not_null(why, "%s gives no reason",
                                               d->name);
                        }
                    }
    }
    cr_assert_gt(refused, 0, "nothing is ever refused");
}

Test(catalog, refusals_say_why)
{
    const char *why = NULL;
    /* fp32 inputs on the 16-bit tensor-core rung. */
    gemmk_problem p = problem(GEMM_FP32, GEMM_FP32, 0, 1, GEMM_PRECISION_TF32);
    cr_assert_eq(gemmk_check("wgmma-basic", &p, &why), GEMM_ERR_UNSUPPORTED);
    cr_assert_not_null(why);
    /* tf32 on a true-fp32 CUDA-core rung. */
    why = NULL;
    cr_assert_eq(gemmk_check("warp-tiled", &p, &why), GEMM_ERR_UNSUPPORTED);
    cr_assert_not_null(why);
    /* ...which serves fp32 precision, and DEFAULT as fp32. */
    p.precision = GEMM_PRECISION_FP32;
    cr_assert_eq(gemmk_check("warp-tiled", &p, NULL), GEMM_OK);
    p.precision = GEMM_PRECISION_DEFAULT;
    cr_assert_eq(gemmk_check("warp-tiled", &p, NULL), GEMM_OK);
    /* cuBLAS serves both precisions. */
    cr_assert_eq(gemmk_check("cublas", &p, NULL), GEMM_OK);
    p.precision = GEMM_PRECISION_TF32;
    cr_assert_eq(gemmk_check("cublas", &p, NULL), GEMM_OK);
}

/* Request types are listed with the API's numbers: the int8 kernels as
 * int8 -> int32 (GEMM_INT8, GEMM_INT32), every transpose; the fp64
 * kernels list fp64; "auto" lists the wide types and int8 it serves. */
Test(catalog, lists_request_types_only)
{
    cr_assert_eq(GEMMK_TYPE_S8, GEMM_INT8);
    cr_assert_eq(GEMMK_TYPE_S32, GEMM_INT32);
    const char *s8[] = {"ws-s8", "pp-s8", "ws-s8x256", "ws-s8x128"};
    for (int i = 0; i < 4; i++) {
        const gemmk_kernel_desc *d = gemmk_catalog_find(s8[i]);
        cr_assert_not_null(d, "%s is not listed", s8[i]);
        cr_assert_eq(d->ab_types, S8_TYPES, "%s", s8[i]);
        cr_assert_eq(d->cd_types, S32_TYPES, "%s", s8[i]);
        cr_assert_eq(d->transposes, GEMMK_TRANS_ALL, "%s", s8[i]);
        for (int t = 0; t < 4; t++) {
            gemmk_problem p = problem(GEMM_INT8, GEMM_INT32, t & 1, t >> 1,
                                      GEMM_PRECISION_DEFAULT);
            const char *why = NULL;
            cr_assert_eq(gemmk_check(s8[i], &p, &why), GEMM_OK, "%s t %d: %s",
                         s8[i], t, why ? why : "");
            cr_assert_eq(gemmk_check(NULL, &p, &why), GEMM_OK, "auto t %d", t);
        }
        gemmk_problem p =
            problem(GEMM_BF16, GEMM_FP32, 0, 0, GEMM_PRECISION_DEFAULT);
        const char *why = NULL;
        cr_assert_eq(gemmk_check(s8[i], &p, &why), GEMM_ERR_UNSUPPORTED);
        cr_assert_not_null(why);
    }
    /* int8 needs int32 C and D; int32 is no input type */
    gemmk_problem q =
        problem(GEMM_INT8, GEMM_FP32, 0, 0, GEMM_PRECISION_DEFAULT);
    cr_assert_eq(gemmk_check(NULL, &q, NULL), GEMM_ERR_DTYPE);
    q = problem(GEMM_INT32, GEMM_INT32, 0, 0, GEMM_PRECISION_DEFAULT);
    cr_assert_eq(gemmk_check("pp-s8", &q, NULL), GEMM_ERR_DTYPE);
    q = problem(GEMM_FP32, GEMM_INT32, 0, 0, GEMM_PRECISION_DEFAULT);
    cr_assert_eq(gemmk_check(NULL, &q, NULL), GEMM_ERR_DTYPE);
    /* int8 on a 16-bit kernel or cuBLAS: refused with a reason */
    q = problem(GEMM_INT8, GEMM_INT32, 0, 1, GEMM_PRECISION_DEFAULT);
    const char *why8 = NULL;
    cr_assert_eq(gemmk_check("ws128x256", &q, &why8), GEMM_ERR_UNSUPPORTED);
    cr_assert_not_null(why8);
    why8 = NULL;
    cr_assert_eq(gemmk_check("cublas", &q, &why8), GEMM_ERR_UNSUPPORTED);
    cr_assert_not_null(why8);
    const char *f64[] = {"oz2-bytes", "oz2-unfused", "cublas-dgemm"};
    for (int i = 0; i < 3; i++) {
        const gemmk_kernel_desc *d = gemmk_catalog_find(f64[i]);
        cr_assert_not_null(d, "%s", f64[i]);
        cr_assert_eq(d->ab_types, 1u << GEMM_FP64, "%s", f64[i]);
        cr_assert_eq(d->cd_types, 1u << GEMM_FP64, "%s", f64[i]);
    }
    const gemmk_kernel_desc *a = gemmk_catalog_find("auto");
    cr_assert_eq(a->ab_types & EXTRA_TYPES, EXTRA_TYPES);
    cr_assert_eq(a->cd_types & EXTRA_TYPES, EXTRA_TYPES);
    cr_assert_eq(a->ab_types & S8_TYPES, S8_TYPES);
    cr_assert_eq(a->cd_types & S32_TYPES, S32_TYPES);

    /* complex with a conjugate transpose: auto and cuBLAS only */
    gemmk_problem p =
        problem(GEMM_COMPLEX64, GEMM_COMPLEX64, 1, 0, GEMM_PRECISION_DEFAULT);
    p.conj_a = 1;
    const char *why = NULL;
    cr_assert_eq(gemmk_check(NULL, &p, NULL), GEMM_OK);
    cr_assert_eq(gemmk_check("cublas", &p, NULL), GEMM_OK);
    cr_assert_eq(gemmk_check("oz2-bytes", &p, &why), GEMM_ERR_UNSUPPORTED);
    cr_assert_not_null(why);
    /* fp64 on an Ozaki-II kernel; not on a 16-bit one */
    p = problem(GEMM_FP64, GEMM_FP64, 0, 1, GEMM_PRECISION_DEFAULT);
    cr_assert_eq(gemmk_check("oz2-bytes", &p, NULL), GEMM_OK);
    cr_assert_eq(gemmk_check("ws128x256", &p, &why), GEMM_ERR_UNSUPPORTED);
    /* the wide types need C and D of their own type */
    p.cd_type = GEMM_FP32;
    cr_assert_eq(gemmk_check(NULL, &p, NULL), GEMM_ERR_DTYPE);
}

/* gemmk_prepass: which operands a kernel rewrites before its main loop
 * (the daemon's panels never repeat that work per panel). */
Test(catalog, prepass_names_the_rewritten_operands)
{
    static _Alignas(256) char mem[3][64 * 64 * 8];
    const unsigned A = GEMMK_PREPASS_A, B = GEMMK_PREPASS_B;
    struct {
        gemm_dtype ab, cd;
        int ta, tb;
        gemm_precision prec;
        const char *kernel;
        unsigned want;
    } cases[] = {
        {GEMM_BF16, GEMM_BF16, 0, 0, GEMM_PRECISION_DEFAULT, NULL, 0},
        {GEMM_FP16, GEMM_FP32, 1, 0, GEMM_PRECISION_DEFAULT, NULL, 0},
        {GEMM_INT8, GEMM_INT32, 0, 0, GEMM_PRECISION_DEFAULT, NULL, B},
        {GEMM_INT8, GEMM_INT32, 0, 1, GEMM_PRECISION_DEFAULT, NULL, 0},
        {GEMM_INT8, GEMM_INT32, 1, 1, GEMM_PRECISION_DEFAULT, NULL, A},
        {GEMM_INT8, GEMM_INT32, 1, 0, GEMM_PRECISION_DEFAULT, "pp-s8", A | B},
        {GEMM_FP32, GEMM_FP32, 0, 0, GEMM_PRECISION_TF32, NULL, B},
        {GEMM_FP32, GEMM_FP32, 1, 1, GEMM_PRECISION_TF32, NULL, A},
        {GEMM_FP32, GEMM_FP32, 0, 1, GEMM_PRECISION_DEFAULT, NULL, A | B},
        {GEMM_FP32, GEMM_FP32, 0, 1, GEMM_PRECISION_FP32, NULL, A | B},
        {GEMM_FP64, GEMM_FP64, 0, 0, GEMM_PRECISION_DEFAULT, NULL, 0},
        {GEMM_FP64, GEMM_FP64, 0, 1, GEMM_PRECISION_DEFAULT, "oz2-bytes",
         A | B},
        {GEMM_COMPLEX64, GEMM_COMPLEX64, 0, 0, GEMM_PRECISION_DEFAULT, NULL, 0},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        gemmk_problem p = problem(cases[i].ab, cases[i].cd, cases[i].ta,
                                  cases[i].tb, cases[i].prec);
        p.a = mem[0];
        p.b = mem[1];
        p.d = mem[2];
        if (cases[i].ab == GEMM_INT8)
            p.zalpha[0] = 1;
        if (cases[i].ab == GEMM_FP64 || cases[i].ab == GEMM_COMPLEX64)
            p.zalpha[0] = 1;
        cr_expect_eq(gemmk_prepass(&p, cases[i].kernel), cases[i].want,
                     "case %zu: prepass %u, want %u", i,
                     gemmk_prepass(&p, cases[i].kernel), cases[i].want);
    }
    gemmk_problem bad =
        problem(GEMM_FP32, GEMM_INT32, 0, 0, GEMM_PRECISION_DEFAULT);
    cr_expect_eq(gemmk_prepass(&bad, NULL), 0u);
    cr_expect_eq(gemmk_prepass(NULL, NULL), 0u);
}
