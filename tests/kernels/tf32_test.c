/*
 * tf32_test.c: the tf32 rounding and 3xTF32 split of kernels/src/tf32.h
 * (the code the GPU pre-pass runs): cvt.rna semantics on ties, carries,
 * max finite, infinities, NaN and subnormals, and how closely big + small
 * reconstructs a; and the TMA unit's rounding (ties to even) that
 * gemmk_tf32_round_even_bits models. Runs on any CPU; the GPU tests
 * compare the first with the hardware's cvt.rna.tf32.f32 and the second,
 * through K = 1 products, with what the kernels read.
 */
#include <criterion/criterion.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>

#include "tf32.h"

static uint32_t rb(uint32_t u)
{
    return gemmk_tf32_round_bits(u);
}

Test(tf32, exact_values_unchanged)
{
    /* low 13 bits zero: already tf32 */
    const uint32_t v[] = {0x00000000u, 0x80000000u, 0x3f800000u, 0xbf802000u,
                          0x7f7fe000u, 0x00002000u, 0x00800000u};
    for (size_t i = 0; i < sizeof(v) / sizeof(v[0]); i++)
        cr_assert_eq(rb(v[i]), v[i], "0x%08x -> 0x%08x", v[i], rb(v[i]));
}

Test(tf32, round_to_nearest)
{
    cr_assert_eq(rb(0x3f800fffu), 0x3f800000u); /* below half: down */
    cr_assert_eq(rb(0x3f801001u), 0x3f802000u); /* above half: up */
    cr_assert_eq(rb(0x3f801fffu), 0x3f802000u);
    cr_assert_eq(rb(0xbf800fffu), 0xbf800000u); /* sign symmetric */
    cr_assert_eq(rb(0xbf801001u), 0xbf802000u);
}

Test(tf32, ties_away_from_zero)
{
    /* exactly half an ulp: away from zero, for even and odd mantissas */
    cr_assert_eq(rb(0x3f801000u), 0x3f802000u); /* 1 + 2^-11 -> 1 + 2^-10 */
    cr_assert_eq(rb(0x3f803000u), 0x3f804000u);
    cr_assert_eq(rb(0xbf801000u), 0xbf802000u);
    cr_assert_eq(rb(0xbf803000u), 0xbf804000u);
}

Test(tf32, carry_into_exponent)
{
    cr_assert_eq(rb(0x3fffffffu), 0x40000000u); /* 2 - 2^-23 -> 2 */
    cr_assert_eq(rb(0x3ffff000u), 0x40000000u); /* tie at the top */
}

Test(tf32, max_finite_and_infinity)
{
    cr_assert_eq(rb(0x7f7fe000u), 0x7f7fe000u); /* largest tf32 */
    cr_assert_eq(rb(0x7f7fefffu), 0x7f7fe000u); /* below half: stays */
    cr_assert_eq(rb(0x7f7ff000u), 0x7f800000u); /* tie: to infinity */
    cr_assert_eq(rb(0x7f7fffffu), 0x7f800000u); /* FLT_MAX -> inf */
    cr_assert_eq(rb(0xff7fffffu), 0xff800000u);
    cr_assert_eq(rb(0x7f800000u), 0x7f800000u); /* inf stays */
    cr_assert_eq(rb(0xff800000u), 0xff800000u);
}

Test(tf32, nan_stays_nan)
{
    /* a NaN whose payload lies only in the low 13 bits must not become inf */
    const uint32_t v[] = {0x7f800001u, 0x7fc00000u, 0xff800fffu, 0x7fffffffu};
    for (size_t i = 0; i < sizeof(v) / sizeof(v[0]); i++) {
        float f = gemmk_bits_f32(rb(v[i]));
        cr_assert(isnan(f), "0x%08x -> 0x%08x", v[i], rb(v[i]));
        cr_assert_eq(rb(v[i]) & 0x80000000u, v[i] & 0x80000000u);
        cr_assert_eq(rb(v[i]) & 0x1fffu, 0u);
    }
}

Test(tf32, subnormals)
{
    cr_assert_eq(rb(0x00000001u), 0x00000000u); /* tiniest: to zero */
    cr_assert_eq(rb(0x00001000u), 0x00002000u); /* tie: away */
    cr_assert_eq(rb(0x80001000u), 0x80002000u);
    cr_assert_eq(rb(0x007ff000u), 0x00800000u); /* to the smallest normal */
    cr_assert_eq(rb(0x00400fffu), 0x00400000u);
}

/* The TMA unit's rounding, as measured on the H200 (kernel-notes v20,
 * 2^20 random patterns and these, bit for bit) */
Test(tf32, tma_ties_to_even)
{
    static const uint32_t io[][2] = {
        {0x3f801000u, 0x3f800000u}, /* 1 + 2^-11: tie, even below */
        {0x3f803000u, 0x3f804000u}, /* tie, odd below: up */
        {0xbf801000u, 0xbf800000u}, {0xbf803000u, 0xbf804000u},
        {0x3f800fffu, 0x3f800000u}, {0x3f801001u, 0x3f802000u},
        {0x3ffff000u, 0x40000000u}, /* carry into the exponent */
        {0x00001000u, 0x00000000u}, /* subnormals rounded, not flushed */
        {0x00003000u, 0x00004000u}, {0x00003123u, 0x00004000u},
        {0x80003000u, 0x80004000u}, {0x007ff000u, 0x00800000u},
        {0x7f7fe800u, 0x7f7fe000u}, {0x7f7fd000u, 0x7f7fc000u},
        {0x7f7ff000u, 0x7f800000u}, /* tie above the largest: inf */
        {0x7f800000u, 0x7f800000u}, {0xff800000u, 0xff800000u},
        {0x7f800001u, 0x7fffe000u}, /* every NaN: the quiet 0x7fffe000 */
        {0xffc00001u, 0x7fffe000u}, {0x7fc00000u, 0x7fffe000u}};
    for (size_t i = 0; i < sizeof(io) / sizeof(io[0]); i++) {
        uint32_t got = gemmk_tf32_round_even_bits(io[i][0]);
        cr_assert_eq(got, io[i][1], "0x%08x -> 0x%08x, want 0x%08x", io[i][0],
                     got, io[i][1]);
    }
}

/* xorshift: deterministic values over many binades */
static uint32_t rng = 0x9e3779b9u;
static uint32_t next(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 17;
    rng ^= rng << 5;
    return rng;
}

Test(tf32, random_against_double_rounding)
{
    /* for normal inputs whose rounding stays finite, the result is the
     * nearest tf32 value (ties away; the TMA's: ties to even), computed
     * independently in double */
    for (int i = 0; i < 200000; i++) {
        uint32_t u = next();
        uint32_t e = (u >> 23) & 0xff;
        if (e == 0 || e >= 0xfe)
            continue;
        float x = gemmk_bits_f32(u);
        double ulp = ldexp(1.0, (int)e - 127 - 10);
        double lo = floor(fabs((double)x) / ulp) * ulp;
        double rem = fabs((double)x) - lo;
        double want = rem >= ulp / 2 ? lo + ulp : lo;
        if (x < 0)
            want = -want;
        float got = gemmk_tf32_round(x);
        cr_assert_eq((double)got, want, "x=%a got=%a want=%a", x, got, want);
        cr_assert_eq(gemmk_f32_bits(got) & 0x1fffu, 0u);
        double even = rint(fabs((double)x) / ulp) * ulp;
        float tma = gemmk_bits_f32(gemmk_tf32_round_even_bits(u));
        cr_assert_eq((double)tma, x < 0 ? -even : even, "x=%a tma=%a", x, tma);
    }
}

Test(tf32, split_reconstructs)
{
    for (int i = 0; i < 200000; i++) {
        uint32_t u = next();
        uint32_t e = (u >> 23) & 0xff;
        if (e < 30 || e == 0xff) /* normal, and small stays normal */
            continue;
        float a = gemmk_bits_f32(u), big, small;
        gemmk_tf32_split(a, &big, &small);
        cr_assert_eq(gemmk_f32_bits(big) & 0x1fffu, 0u);
        cr_assert_eq(gemmk_f32_bits(small) & 0x1fffu, 0u);
        cr_assert(isfinite(big) && isfinite(small), "a=%a", a);
        double err = fabs((double)a - ((double)big + (double)small));
        cr_assert(err <= ldexp(fabs((double)a), -22), "a=%a big=%a small=%a", a,
                  big, small);
        cr_assert(fabs((double)small) <= ldexp(fabs((double)a), -11));
        /* tf32 alone is 2^11 times coarser */
        double err1 = fabs((double)a - (double)big);
        cr_assert(err1 <= ldexp(fabs((double)a), -11));
    }
}

Test(tf32, split_edges)
{
    float big, small;
    gemmk_tf32_split(3.4028234663852886e38f, &big, &small); /* FLT_MAX */
    cr_assert(isfinite(big) && isfinite(small));
    cr_assert(fabs((double)big + (double)small - 3.4028234663852886e38) <=
              ldexp(3.4028234663852886e38, -22));
    gemmk_tf32_split(INFINITY, &big, &small);
    cr_assert(isinf(big) && big > 0 && small == 0.f);
    gemmk_tf32_split(-INFINITY, &big, &small);
    cr_assert(isinf(big) && big < 0 && small == 0.f);
    gemmk_tf32_split(NAN, &big, &small);
    cr_assert(isnan(big));
    gemmk_tf32_split(0.f, &big, &small);
    cr_assert(big == 0.f && small == 0.f);
    gemmk_tf32_split(1.0f + 0x1p-23f, &big, &small); /* 1 + 1 ulp */
    cr_assert_eq(big, 1.0f);
    cr_assert_eq(small, 0x1p-23f);
}
