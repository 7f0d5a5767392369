/*
 * ozaki_test.c: the Ozaki-II arithmetic of kernels/src/ozaki.h (the code
 * the GPU kernels run) against exact 128-bit integer arithmetic: the
 * moduli and their CRT constants, the magic-number division, scaling a
 * double to an integer, residues (exact on the fp32 pipe), the exact
 * reconstruction of products from their residues, the bit budget, the
 * choice of moduli and fallbacks, and whole small GEMMs emulated on the
 * host: random ones against a long double reference, integer ones (and
 * small integers times powers of two, sparse 0/1) exactly. Runs on any
 * CPU (CI).
 */
#include <criterion/criterion.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "ozaki.h"

typedef __int128 i128;
typedef unsigned __int128 u128;

static uint64_t rng_state = 0x9E3779B97F4A7C15ull;
static uint64_t rnd64(void)
{
    uint64_t x = (rng_state += 0x9E3779B97F4A7C15ull);
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}
static double rnd_unit(void) /* [-1, 1), 53 random bits */
{
    return (double)(rnd64() >> 11) * 0x1p-53 * 2.0 - 1.0;
}

static i128 mod_sym(i128 x, int p) /* symmetric residue as gemmk_oz_residue */
{
    i128 r = x % p;
    if (r < 0)
        r += p;
    int hmax = p == 256 ? 127 : (p - 1) / 2;
    if (r > hmax)
        r -= p;
    return r;
}

/* the exact value of round(a j/8 2^s) (half to even), |.| < 2^100 */
static i128 exact_scale(double a, int s, int jm)
{
    int e;
    double f = frexp(fabs(a), &e); /* |a| = f 2^e, f in [0.5, 1) */
    if (a == 0)
        return 0;
    i128 m = (i128)ldexp(f, 53) * jm; /* 57-bit integer */
    int t = e - 53 + s - 3;           /* |a| j/8 2^s = m 2^t */
    i128 v;
    if (t >= 0) {
        v = m << t;
    } else if (t < -64) {
        v = 0;
    } else {
        i128 q = m >> (-t);
        i128 rem = m - (q << (-t));
        i128 half = (i128)1 << (-t - 1);
        if (rem > half || (rem == half && (q & 1)))
            q++;
        v = q;
    }
    return a < 0 ? -v : v;
}

static i128 scaled_value(double a, int s, int jm)
{
    uint64_t hi, lo;
    int neg = gemmk_oz_scale(a, s, jm, &hi, &lo);
    i128 v = (i128)(((unsigned __int128)hi << 64) | lo);
    return neg ? -v : v;
}

static i128 limbs_value(const float *f, int nl, int lb)
{
    i128 v = 0;
    for (int j = nl - 1; j >= 0; j--)
        v = v * ((i128)1 << lb) + (i128)f[j];
    return v;
}

static i128 flimbs_value(const float *f, int nl)
{
    return limbs_value(f, nl, 13);
}

/* gemmk_oz_residue64 of x as the split kernel calls it */
static uint32_t residue64_of(int64_t x, const gemmk_oz_mod *m)
{
    const int32_t xh = (int32_t)(x >> 32);
    const uint32_t xl = (uint32_t)x;
    return gemmk_oz_residue64(xh, xl, (double)xh, (double)xl, m->p, m->c32,
                              m->dc32, m->dinv);
}

Test(ozaki, moduli_pairwise_coprime)
{
    static const int mods[] = GEMMK_OZ_MODULI;
    for (int i = 0; i < GEMMK_OZ_MAX; i++) {
        cr_assert(mods[i] >= 2 && mods[i] <= 256, "modulus %d", mods[i]);
        if (i)
            cr_assert_lt(mods[i], mods[i - 1], "not decreasing");
        for (int j = 0; j < i; j++) {
            int a = mods[i], b = mods[j];
            while (b) {
                int t = a % b;
                a = b;
                b = t;
            }
            cr_assert_eq(a, 1, "%d and %d share %d", mods[i], mods[j], a);
        }
    }
}

Test(ozaki, crt_constants_exact)
{
    for (int n = 1; n <= GEMMK_OZ_MAX; n++) {
        gemmk_oz_set s;
        cr_assert_eq(gemmk_oz_set_init(&s, n), 0);
        double l2 = 0;
        long double pl = 1;
        for (int i = 0; i < n; i++) {
            const gemmk_oz_mod *m = &s.mod[i];
            uint32_t p = m->p;
            l2 += log2((double)p);
            pl *= p;
            /* W_l = c_l P / p_l: 1 modulo p_l, 0 modulo the others */
            for (int j = 0; j < n; j++) {
                uint32_t pj = s.mod[j].p, r = 0;
                for (int w = GEMMK_OZ_NW - 1; w >= 0; w--)
                    r = (uint32_t)((((uint64_t)r << 32) | m->w[w]) % pj);
                cr_assert_eq(r, j == i ? 1 % pj : 0, "n %d W_%d mod %u: %u", n,
                             i, pj, r);
            }
            for (int j = 0; j < GEMMK_OZ_NL; j++) {
                i128 want = mod_sym((i128)1 << (13 * j), (int)p);
                cr_assert_eq((i128)m->fc[j], want, "2^%d mod %u", 13 * j, p);
            }
            /* the 64-bit residues' constants: 2^32 mod p, 1/p */
            cr_assert_eq((i128)m->c32, mod_sym((i128)1 << 32, (int)p),
                         "2^32 mod %u", p);
            cr_assert_eq(m->dc32, (double)m->c32);
            cr_assert_eq(m->dinv, 1.0 / (double)p);
            cr_assert_eq(m->fp, (float)p);
        }
        cr_assert_float_eq(s.log2p, l2, 1e-12);
        /* pw = P, pinv = 1 / P to double precision; W_l < P */
        long double pw = 0;
        for (int w = GEMMK_OZ_NW - 1; w >= 0; w--)
            pw = pw * 4294967296.0L + s.pw[w];
        cr_assert_leq(fabsl(pw - pl) / pl, 0x1p-60L, "n %d P", n);
        cr_assert_leq(fabsl((long double)s.pinv * pl - 1), 0x1p-52L, "n %d", n);
        for (int i = 0; i < n; i++) {
            long double w = 0;
            for (int k = GEMMK_OZ_NW - 1; k >= 0; k--)
                w = w * 4294967296.0L + s.mod[i].w[k];
            cr_assert_lt(w, pl, "n %d W_%d >= P", n, i);
        }
    }
}

Test(ozaki, magic_division_exact)
{
    gemmk_oz_set s;
    gemmk_oz_set_init(&s, GEMMK_OZ_MAX);
    for (int i = 0; i < GEMMK_OZ_MAX; i++) {
        const gemmk_oz_mod *m = &s.mod[i];
        uint32_t edge[] = {0,
                           1,
                           m->p - 1,
                           m->p,
                           m->p + 1,
                           0x7fffffffu,
                           0x7ffffffeu,
                           0x40000000u,
                           0x3fffffffu,
                           (0x7fffffffu / m->p) * m->p,
                           (0x7fffffffu / m->p) * m->p - 1};
        for (size_t e = 0; e < sizeof(edge) / sizeof(edge[0]); e++) {
            uint32_t v = edge[e];
            uint32_t q = (uint32_t)(((uint64_t)v * m->magic) >> 39);
            cr_assert_eq(q, v / m->p, "v %u / %u", v, m->p);
        }
        for (int t = 0; t < 200000; t++) {
            uint32_t v = (uint32_t)(rnd64() >> 33); /* < 2^31 */
            uint32_t q = (uint32_t)(((uint64_t)v * m->magic) >> 39);
            cr_assert_eq(q, v / m->p, "v %u / %u", v, m->p);
        }
    }
}

Test(ozaki, scale_and_residues_exact)
{
    gemmk_oz_set s;
    gemmk_oz_set_init(&s, GEMMK_OZ_MAX);
    for (int t = 0; t < 200000; t++) {
        double a;
        int kind = t % 7;
        if (kind == 0)
            a = 0.0;
        else if (kind == 1) /* subnormals */
            a = ldexp(rnd_unit(), -1030 - (int)(rnd64() % 40));
        else if (kind == 2) /* huge */
            a = ldexp(rnd_unit(), 900 + (int)(rnd64() % 120));
        else
            a = ldexp(rnd_unit(), (int)(rnd64() % 200) - 100);
        if (t % 11 == 0) /* exact halves: ties to even */
            a = ldexp((double)((int64_t)(rnd64() % 2000) - 1000) + 0.5,
                      -(int)(rnd64() % 3));
        int e;
        frexp(a, &e);
        /* any shift that keeps |a| 2^s < 2^80 */
        int s_ = 80 - e - (int)(rnd64() % 140);
        if (a == 0)
            s_ = (int)(rnd64() % 100);
        const int jm = 8 + (int)(rnd64() % 8);
        if (s_ > -1000)
            s_ -= 1; /* room for mu < 2 */
        i128 want = exact_scale(a, s_, jm);
        i128 got = scaled_value(a, s_, jm);
        cr_assert(got == want, "a %a s %d j %d: %.17g vs %.17g", a, s_, jm,
                  (double)got, (double)want);
        float f[GEMMK_OZ_NL];
        gemmk_oz_flimbs(a, s_, jm, GEMMK_OZ_NL, f);
        cr_assert(flimbs_value(f, GEMMK_OZ_NL) == want, "limbs of %a", a);
        for (int j = 0; j < GEMMK_OZ_NL; j++)
            cr_assert(fabsf(f[j]) < 8192.0f &&
                      (f[j] == 0 || (f[j] < 0) == (a < 0)));
        /* below 2^62: the 64-bit integer and its residues, the same */
        if (want < ((i128)1 << 62) && want > -((i128)1 << 62)) {
            const int64_t x = gemmk_oz_scale64(a, s_, jm);
            cr_assert(x == want, "scale64 a %a s %d j %d: %lld vs %.17g", a, s_,
                      jm, (long long)x, (double)want);
            for (int i = 0; i < GEMMK_OZ_MAX; i++) {
                const gemmk_oz_mod *m = &s.mod[i];
                const uint32_t b = residue64_of(x, m) & 0xffu;
                cr_assert_eq(b, (uint32_t)mod_sym(want, (int)m->p) & 0xffu,
                             "a %a p %u: 64-bit residue %u", a, m->p, b);
            }
        }
        /* 5 limbs when the integer is below 2^65 */
        int nl = (want < ((i128)1 << 65) && want > -((i128)1 << 65)) ? 5 : 7;
        for (int i = 0; i < GEMMK_OZ_MAX; i++) {
            const gemmk_oz_mod *m = &s.mod[i];
            int r = gemmk_oz_fresidue(f, nl, m->fc, m->fp, m->finv);
            uint32_t b = gemmk_oz_fresidue_byte(f, nl, m->fc, m->fp, m->finv);
            cr_assert_eq(b, (uint32_t)r & 0xffu);
            int p = (int)m->p;
            cr_assert(((i128)r - want) % p == 0, "a %a s %d p %d: %d", a, s_, p,
                      r);
            if (p != 256)
                cr_assert(r == (int)mod_sym(want, p), "a %a p %d: %d", a, p, r);
            else
                cr_assert(r >= -128 && r <= 128);
        }
    }
}

/* nl limbs of lb bits at their extremes (or random) against every
 * modulus: the limb sum stays an exact float, the quotient rounds right,
 * and the residue is the symmetric one, its byte the same as its low
 * byte. */
static void residue_worst_cases(int nl, int lb)
{
    gemmk_oz_set s;
    gemmk_oz_set_init(&s, GEMMK_OZ_MAX);
    const uint32_t top = (1u << lb) - 1;
    for (int t = 0; t < 400000; t++) {
        float f[GEMMK_OZ_NL];
        int sign = (t & 1) ? -1 : 1;
        for (int j = 0; j < nl; j++) {
            uint32_t v = (t % 3 == 0) ? top : (uint32_t)(rnd64() % (top + 1));
            f[j] = (float)(sign * (int)v);
        }
        i128 want = limbs_value(f, nl, lb);
        const gemmk_oz_mod *m = &s.mod[t % GEMMK_OZ_MAX];
        const float *c = m->fc;
        int r = gemmk_oz_fresidue(f, nl, c, m->fp, m->finv);
        uint32_t b = gemmk_oz_fresidue_byte(f, nl, c, m->fp, m->finv);
        cr_assert_eq(b, (uint32_t)r & 0xffu);
        cr_assert(((i128)r - want) % (int)m->p == 0, "p %u: %d", m->p, r);
        cr_assert(r >= -128 && r <= 128);
        if (m->p != 256)
            cr_assert(r == (int)mod_sym(want, (int)m->p), "p %u: %d", m->p, r);
    }
}

Test(ozaki, fp32_residue_worst_cases)
{
    residue_worst_cases(GEMMK_OZ_NL, 13);
}

/* The 64-bit residues at the extremes of x (every bit pattern of the
 * words' ends, +-2^62, multiples of p and halfway points) and at random
 * against the symmetric residue of every modulus. */
Test(ozaki, residue64_worst_cases)
{
    gemmk_oz_set s;
    gemmk_oz_set_init(&s, GEMMK_OZ_MAX);
    for (int i = 0; i < GEMMK_OZ_MAX; i++) {
        const gemmk_oz_mod *m = &s.mod[i];
        const int64_t p = (int64_t)m->p;
        const int64_t lim = ((int64_t)1 << 62) - 1;
        const int64_t edge[] = {0,
                                1,
                                -1,
                                lim,
                                -lim,
                                (lim / p) * p,
                                (lim / p) * p + p / 2,
                                (lim / p) * p - p / 2 - 1,
                                -(lim / p) * p - p / 2,
                                ((int64_t)1 << 32) - 1,
                                (int64_t)1 << 32,
                                -((int64_t)1 << 32),
                                ((int64_t)1 << 62) - ((int64_t)1 << 32),
                                (int64_t)0x7fffffff << 31};
        for (int t = 0; t < 200000; t++) {
            int64_t x;
            if (t < (int)(sizeof(edge) / sizeof(edge[0])))
                x = edge[t];
            else if (t % 3 == 0) /* near a multiple of p, either side */
                x = ((int64_t)(rnd64() >> 2) / p) * p + (int64_t)(rnd64() % 5) -
                    2 + (t % 2 ? p / 2 : 0);
            else
                x = (int64_t)(rnd64() >> (2 + rnd64() % 60));
            if (t % 2)
                x = -x;
            if (x > lim || x < -lim)
                continue;
            const uint32_t b = residue64_of(x, m) & 0xffu;
            cr_assert_eq(b, (uint32_t)mod_sym(x, (int)p) & 0xffu,
                         "x %lld p %u: %u", (long long)x, m->p, b);
        }
    }
}

/* The 64-bit scaling at its edges: values rounding to 0 or 1 from far
 * below the row's scale, halfway cases at every shift, the largest
 * magnitudes, subnormal inputs scaled up. */
Test(ozaki, scale64_edges)
{
    for (int t = 0; t < 300000; t++) {
        const int jm = 8 + (int)(rnd64() % 8);
        double a;
        int s_;
        switch (t % 4) {
        case 0: /* anywhere from below a half to 2^61 */
            a = ldexp(rnd_unit(), (int)(rnd64() % 2000) - 1000);
            s_ = 58 - ilogb(a) - (int)(rnd64() % 124);
            break;
        case 1: { /* exact halves at shift sh */
            const int sh = 1 + (int)(rnd64() % 50);
            a = ldexp((double)(int64_t)(rnd64() >> 12) + 0.5, -sh);
            a = t % 8 == 1 ? -a : a;
            s_ = 3 + (int)(rnd64() % 4);
            break;
        }
        case 2: /* subnormal inputs, scaled up to below 2^61 */
            a = ldexp(rnd_unit(), -1030 - (int)(rnd64() % 40));
            s_ = 1140 - (int)(rnd64() % 200);
            break;
        default: /* the largest magnitudes the contract allows */
            a = rnd_unit();
            s_ = 60 - ilogb(a) - 1;
            break;
        }
        if (a == 0)
            continue;
        const i128 want = exact_scale(a, s_, jm);
        if (want >= ((i128)1 << 62) || want <= -((i128)1 << 62))
            continue;
        const int64_t x = gemmk_oz_scale64(a, s_, jm);
        cr_assert(x == want, "a %a s %d j %d: %lld vs %.17g", a, s_, jm,
                  (long long)x, (double)want);
    }
}

/* S = sum_l (X mod p_l) W_l for an exact X. */
static void s_of(i128 x, const gemmk_oz_set *s, uint64_t *sum)
{
    memset(sum, 0, GEMMK_OZ_NW * sizeof(*sum));
    for (int i = 0; i < s->n; i++) {
        int p = (int)s->mod[i].p;
        i128 r = x % p;
        if (r < 0)
            r += p;
        gemmk_oz_sadd(sum, (uint32_t)r, s->mod[i].w);
    }
}

/* X back from its residues, correctly rounded to a double (GCC's
 * __int128 conversion rounds to nearest), for every magnitude below P/2
 * and the moduli counts whose P fits an i128. */
Test(ozaki, crt_reconstruction)
{
    for (int n = 2; n <= 16; n++) { /* P < 2^126 */
        gemmk_oz_set s;
        gemmk_oz_set_init(&s, n);
        i128 P = 1;
        for (int i = 0; i < n; i++)
            P *= s.mod[i].p;
        for (int t = 0; t < 20000; t++) {
            i128 x = (i128)(((u128)rnd64() << 64) | rnd64());
            int sh = (int)(rnd64() % 128);
            x >>= sh;
            /* the budget keeps |X| under P/2 by 0.01 bit (gemmk_oz_budget):
             * test up to P/2 (1 - 2^-10) */
            i128 lim = P / 2 - P / 1024;
            x %= lim;
            if (t < 5)
                x = t == 0   ? 0
                    : t == 1 ? lim - 1
                    : t == 2 ? -(lim - 1)
                    : t == 3 ? 1
                             : -1;
            uint64_t sum[GEMMK_OZ_NW];
            s_of(x, &s, sum);
            double got = gemmk_oz_value(sum, s.pw, s.pinv, 0);
            cr_assert_eq(got, (double)x, "n %d x %.20Lg got %.20g", n,
                         (long double)x, got);
            /* and scaled by a power of two exactly */
            cr_assert_eq(gemmk_oz_value(sum, s.pw, s.pinv, -70),
                         ldexp((double)x, -70));
            /* the set's own column count (gemmk_oz_nw) gives the same,
             * at every scale (subnormal and overflowing results too) */
            const int nw = gemmk_oz_nw(s.log2p);
            uint64_t sn[GEMMK_OZ_NW] = {0};
            for (int i = 0; i < n; i++) {
                i128 r = x % (int)s.mod[i].p;
                if (r < 0)
                    r += s.mod[i].p;
                gemmk_oz_sadd_nw(sn, (uint32_t)r, s.mod[i].w, nw);
            }
            const int es[] = {0, -70, -1100, -1140, 900};
            for (size_t k = 0; k < sizeof(es) / sizeof(es[0]); k++)
                cr_assert_eq(gemmk_oz_value_nw(sn, s.pw, s.pinv, es[k], nw),
                             ldexp((double)x, es[k]),
                             "n %d x %.20Lg (%d limbs, 2^%d)", n,
                             (long double)x, nw, es[k]);
        }
    }
}

/* The reconstruction's division by j_i j_j (gemmk_oz_div: no division
 * instruction) equals the division, for every pair of scales and values
 * of every magnitude it meets (0, or 1 <= |x| < 2^64), many of them
 * integers (where the quotient is often exact). */
Test(ozaki, division_by_scales)
{
    for (int ji = 8; ji <= 15; ji++)
        for (int jj = 8; jj <= 15; jj++) {
            const double d = (double)(ji * jj), rd = 1.0 / d;
            cr_assert_eq(gemmk_oz_div(0.0, d, rd), 0.0);
            for (int t = 0; t < 40000; t++) {
                const uint64_t m = rnd64();
                double x;
                if (t % 4 == 0) /* a 64-bit integer, rounded */
                    x = (double)(m >> (rnd64() % 64));
                else if (t % 4 == 1) /* a multiple of d: exact quotient */
                    x = d * (double)(m >> 12 >> (rnd64() % 52));
                else /* any double in [1, 2^64) */
                    x = ldexp(1.0 + (double)(m >> 12) * 0x1p-52,
                              (int)(rnd64() % 64));
                if (x < 1.0)
                    x = 1.0;
                if (t & 8)
                    x = -x;
                const double got = gemmk_oz_div(x, d, rd);
                cr_assert_eq(got, x / d, "%.17g / %g: %.17g", x, d, got);
            }
        }
}

/* The table of divisors the reconstruction kernels keep: every pair of
 * packed scales (exponents of either sign) indexes the entry that holds
 * its divisor. */
Test(ozaki, divisor_table)
{
    for (int ei = -1100; ei <= 1100; ei += 275)
        for (int ji = 8; ji <= 15; ji++)
            for (int ej = -1100; ej <= 1100; ej += 275)
                for (int jj = 8; jj <= 15; jj++) {
                    const int a = 16 * ei + ji - 8, b = 16 * ej + jj - 8;
                    const int x = gemmk_oz_divisor_index(a, b);
                    cr_assert(x >= 0 && x < 64, "index %d", x);
                    cr_assert_eq(gemmk_oz_divisor_at(x), gemmk_oz_divisor(a, b),
                                 "scales %d %d", a, b);
                    cr_assert_eq(gemmk_oz_divisor(a, b), (double)(ji * jj));
                }
}

/* The column counts: two up to 8 moduli (P < 2^64), four up to 16 (P <
 * 2^128), else GEMMK_OZ_NW; P's limbs above them are zero. */
Test(ozaki, column_counts)
{
    for (int n = 1; n <= GEMMK_OZ_MAX; n++) {
        gemmk_oz_set s;
        gemmk_oz_set_init(&s, n);
        const int nw = gemmk_oz_nw(s.log2p);
        cr_assert_eq(nw, n <= 8 ? 2 : n <= 16 ? 4 : GEMMK_OZ_NW, "n %d", n);
        for (int i = nw; i < GEMMK_OZ_NW; i++)
            cr_assert(s.pw[i] == 0, "n %d limb %d", n, i);
    }
}

/* The largest counts (P up to 2^156): integers of a few significant bits
 * at every magnitude come back exact. */
Test(ozaki, crt_exact_large_moduli_counts)
{
    for (int n = 17; n <= GEMMK_OZ_MAX; n++) {
        gemmk_oz_set s;
        gemmk_oz_set_init(&s, n);
        for (int t = 0; t < 20000; t++) {
            /* x = m 2^e, |m| < 2^40, |x| < 2^(log2 P - 2) */
            int64_t m = (int64_t)(rnd64() >> 24) - (1ll << 39);
            int e = (int)(rnd64() % (unsigned)(s.log2p - 42));
            uint64_t sum[GEMMK_OZ_NW];
            memset(sum, 0, sizeof(sum));
            for (int i = 0; i < n; i++) {
                const int64_t p = s.mod[i].p;
                int64_t r = m % p, pw2 = 1 % p;
                for (int b = 0; b < e; b++)
                    pw2 = pw2 * 2 % p;
                r = (r * pw2) % p;
                if (r < 0)
                    r += p;
                gemmk_oz_sadd(sum, (uint32_t)r, s.mod[i].w);
            }
            cr_assert_eq(gemmk_oz_value(sum, s.pw, s.pinv, 0),
                         ldexp((double)m, e), "n %d: %lld 2^%d", n,
                         (long long)m, e);
        }
    }
}

Test(ozaki, budget_keeps_products_unique)
{
    const int64_t ks[] = {1, 7, 128, 4096, 65536, 1 << 20, 2147483647ll};
    for (int n = GEMMK_OZ_MIN; n <= GEMMK_OZ_MAX; n++) {
        gemmk_oz_set s;
        gemmk_oz_set_init(&s, n);
        for (size_t i = 0; i < sizeof(ks) / sizeof(ks[0]); i++) {
            int b = gemmk_oz_budget(&s, ks[i]);
            if (b < 0)
                continue;
            long double h = 0.5L * sqrtl((long double)ks[i]);
            long double ba = ldexpl(1.0L, (b + 1) / 2) + h;
            long double bb = ldexpl(1.0L, b / 2) + h;
            long double P = ldexpl(1.0L, 0);
            for (int j = 0; j < n; j++)
                P *= s.mod[j].p;
            cr_assert_lt(ba * bb, P / 2, "n %d k %lld b %d", n,
                         (long long)ks[i], b);
            /* and it is the largest such (one more bit breaks it) */
            long double ba1 = ldexpl(1.0L, (b + 2) / 2) + h;
            long double bb1 = ldexpl(1.0L, (b + 1) / 2) + h;
            cr_assert_geq(ba1 * bb1 * 1.01L, P / 2 * 0.99L, "n %d k %lld", n,
                          (long long)ks[i]);
        }
    }
}

Test(ozaki, choose_plans_and_fallbacks)
{
    gemmk_oz_stats a = {0, 1, 3.0}, b = {0, 1, 3.0};
    int n = 0, ba = 0, bb = 0;
    cr_assert_null(gemmk_oz_choose(&a, &b, 8192, 0, &n, &ba, &bb));
    cr_assert(n >= 13 && n <= 16, "n %d", n);
    cr_assert_geq(ba, GEMMK_OZ_BETA0);
    cr_assert_geq(bb, GEMMK_OZ_BETA0);
    /* wider spread: never fewer moduli */
    int n2 = 0;
    gemmk_oz_stats a2 = {0, 1, 12.0}, b2 = {0, 1, 12.0};
    cr_assert_null(gemmk_oz_choose(&a2, &b2, 8192, 0, &n2, &ba, &bb));
    cr_assert_geq(n2, n);
    /* huge spread, inf/NaN, subnormals: native */
    gemmk_oz_stats wide = {0, 1, 60.0};
    cr_assert_not_null(gemmk_oz_choose(&wide, &wide, 8192, 0, &n, &ba, &bb));
    gemmk_oz_stats bad = {GEMMK_OZ_NONFINITE, 1, 0.0};
    cr_assert_not_null(gemmk_oz_choose(&bad, &b, 64, 0, &n, &ba, &bb));
    cr_assert_not_null(gemmk_oz_choose(&a, &bad, 64, 9, &n, &ba, &bb));
    gemmk_oz_stats sub = {GEMMK_OZ_DENORMAL, 1, 0.0};
    cr_assert_not_null(gemmk_oz_choose(&sub, &b, 64, 0, &n, &ba, &bb));
    /* explicit moduli: taken as asked, subnormals allowed */
    cr_assert_null(gemmk_oz_choose(&sub, &b, 64, 9, &n, &ba, &bb));
    cr_assert_eq(n, 9);
    cr_assert_not_null(gemmk_oz_choose(&a, &b, 64, 1, &n, &ba, &bb));
    cr_assert_not_null(gemmk_oz_choose(&a, &b, 64, 21, &n, &ba, &bb));
}

/* fp32 inputs: 26 bits a side (SGEMM's accuracy) take 7 moduli up to
 * K = 2^14 on inputs of small spread, fewer bits need never more moduli,
 * and the 3-limb residues (integers below 2^39) cover what 7 moduli
 * give. */
Test(ozaki, choose_fp32_plans)
{
    gemmk_oz_stats a = {0, 1, 0.5}, b = {0, 1, 0.5};
    const int64_t ks[] = {1, 64, 1024, 8192, 16384};
    for (size_t i = 0; i < sizeof(ks) / sizeof(ks[0]); i++) {
        int n = 0, ba = 0, bb = 0, n64 = 0, b64a = 0, b64b = 0;
        cr_assert_null(gemmk_oz_choose_bits(&a, &b, ks[i], 0,
                                            GEMMK_OZ_BETA0_F32, &n, &ba, &bb));
        cr_assert_leq(n, 7, "k %lld: %d moduli", (long long)ks[i], n);
        cr_assert_geq(ba, GEMMK_OZ_BETA0_F32);
        cr_assert_geq(bb, GEMMK_OZ_BETA0_F32);
        cr_assert_leq(ba, 37, "k %lld: %d bits need 5 limbs", (long long)ks[i],
                      ba);
        cr_assert_null(gemmk_oz_choose(&a, &b, ks[i], 0, &n64, &b64a, &b64b));
        cr_assert_lt(n, n64);
    }
    int n = 0, ba = 0, bb = 0;
    cr_assert_null(gemmk_oz_choose_bits(&a, &b, 8192, 0, GEMMK_OZ_BETA0_F32, &n,
                                        &ba, &bb));
    cr_assert_eq(n, 7);
    /* a subnormal of the input type: the fallback, unless a count is
     * given */
    gemmk_oz_stats sub = {GEMMK_OZ_DENORMAL, 1, 0.0};
    cr_assert_not_null(gemmk_oz_choose_bits(&sub, &b, 64, 0, GEMMK_OZ_BETA0_F32,
                                            &n, &ba, &bb));
    cr_assert_null(gemmk_oz_choose_bits(&sub, &b, 64, 6, GEMMK_OZ_BETA0_F32, &n,
                                        &ba, &bb));
    cr_assert_eq(n, 6);
}

/*
 * C = A B (M x K times K x N, row-major) on the host through the GPU's
 * arithmetic: row and column scales from the exact 2-norms, the plan for
 * operand spreads spread_a, spread_b, residues on the fp32 pipe, int32
 * products per modulus, their residues summed into S and the value.
 * Checks on the way that the CRT gave the exact integer product back,
 * correctly rounded.
 */
static void host_gemm(int M, int N, int K, const double *A, const double *B,
                      double spread_a, double spread_b, double *C)
{
    gemmk_oz_stats sa = {0, 1, spread_a}, sb = {0, 1, spread_b};
    int n = 0, ba = 0, bb = 0;
    cr_assert_null(gemmk_oz_choose(&sa, &sb, K, 0, &n, &ba, &bb));
    gemmk_oz_set s;
    gemmk_oz_set_init(&s, n);
    int *Ra = calloc((size_t)M, sizeof(int)),
        *Rb = calloc((size_t)N, sizeof(int));
    cr_assert(Ra && Rb);
    for (int i = 0; i < M; i++) {
        long double ss = 0;
        for (int h = 0; h < K; h++)
            ss += (long double)A[i * K + h] * A[i * K + h];
        Ra[i] = ss > 0 ? gemmk_oz_rowscale((double)ss, 0) : 0;
        /* mu 2^E bounds the norm, within a factor 8/7 */
        long double nu = sqrtl(ss),
                    sc = ldexpl(gemmk_oz_rowscale_j(Ra[i]) / 8.0L,
                                -gemmk_oz_rowscale_E(Ra[i]));
        cr_assert(nu * sc <= 1.0L && (ss == 0 || nu * sc > 0.874L),
                  "row %d: %Lg", i, nu * sc);
    }
    for (int j = 0; j < N; j++) {
        long double ss = 0;
        for (int h = 0; h < K; h++)
            ss += (long double)B[h * N + j] * B[h * N + j];
        Rb[j] = ss > 0 ? gemmk_oz_rowscale((double)ss, 0) : 0;
    }
    for (int i = 0; i < M; i++) {
        const int sa_ = ba - gemmk_oz_rowscale_E(Ra[i]);
        const int ja = gemmk_oz_rowscale_j(Ra[i]);
        for (int j = 0; j < N; j++) {
            const int sb_ = bb - gemmk_oz_rowscale_E(Rb[j]);
            const int jb = gemmk_oz_rowscale_j(Rb[j]);
            uint64_t sum[GEMMK_OZ_NW] = {0};
            i128 xs = 0; /* the exact integer product */
            for (int l = 0; l < n; l++) {
                const gemmk_oz_mod *md = &s.mod[l];
                int32_t acc = 0;
                for (int h = 0; h < K; h++) {
                    float fa[GEMMK_OZ_NL], fb[GEMMK_OZ_NL];
                    gemmk_oz_flimbs(A[i * K + h], sa_, ja, 5, fa);
                    gemmk_oz_flimbs(B[h * N + j], sb_, jb, 5, fb);
                    acc += gemmk_oz_fresidue(fa, 5, md->fc, md->fp, md->finv) *
                           gemmk_oz_fresidue(fb, 5, md->fc, md->fp, md->finv);
                    if (l == 0)
                        xs += scaled_value(A[i * K + h], sa_, ja) *
                              scaled_value(B[h * N + j], sb_, jb);
                }
                int32_t r = acc % (int32_t)md->p; /* as the GEMM's epilogue */
                gemmk_oz_sadd(sum, (uint32_t)(r < 0 ? r + (int32_t)md->p : r),
                              md->w);
            }
            cr_assert_eq(gemmk_oz_value(sum, s.pw, s.pinv, 0), (double)xs,
                         "(%d,%d): the CRT missed the exact product", i, j);
            C[i * N + j] =
                gemmk_oz_result(sum, s.pw, s.pinv, Ra[i], Rb[j], -(ba + bb));
        }
    }
    free(Ra);
    free(Rb);
}

/* Random inputs: within the error bound against long double. */
Test(ozaki, host_emulated_gemm)
{
    enum { M = 9, N = 7, K = 300 };
    static double A[M * K], B[K * N], C[M * N];
    for (int i = 0; i < M; i++)
        for (int h = 0; h < K; h++)
            A[i * K + h] = ldexp(rnd_unit(), (int)(rnd64() % 9) - 4);
    for (int h = 0; h < K * N; h++)
        B[h] = rnd_unit();
    A[3 * K + 5] = 0; /* zeros, and a zero row */
    for (int h = 0; h < K; h++)
        A[6 * K + h] = 0;
    host_gemm(M, N, K, A, B, 4.0, 2.0, C);
    for (int i = 0; i < M; i++) {
        long double na = 0;
        for (int h = 0; h < K; h++)
            na += fabsl((long double)A[i * K + h]);
        for (int j = 0; j < N; j++) {
            long double ref = 0, nb = 0;
            for (int h = 0; h < K; h++) {
                ref += (long double)A[i * K + h] * B[h * N + j];
                nb += fabsl((long double)B[h * N + j]);
            }
            /* ~2^-55 of the 1-norms a side, and the final roundings */
            long double tol =
                (na + nb) * 0x1p-50L + fabsl(ref) * 0x1p-50L + 1e-300L;
            cr_assert_leq(fabsl((long double)C[i * N + j] - ref), tol,
                          "(%d,%d): %.17g vs %.20Lg", i, j, C[i * N + j], ref);
            if (i == 6)
                cr_assert_eq(C[i * N + j], 0.0);
        }
    }
}

/* Where every product and partial sum is exact in fp64, so is the
 * emulation: integers, small integers times powers of two, sparse 0/1. */
Test(ozaki, host_emulated_gemm_exact)
{
    enum { M = 6, N = 5, K = 257 };
    static double A[M * K], B[K * N], C[M * N];
    for (int kind = 0; kind < 3; kind++) {
        for (int h = 0; h < M * K; h++) {
            const int v = (int)(rnd64() % 1999) - 999;
            A[h] = kind == 0   ? v
                   : kind == 1 ? ldexp(v % 16, (int)(rnd64() % 17) - 8)
                               : (double)(rnd64() % 7 == 0);
        }
        for (int h = 0; h < K * N; h++) {
            const int v = (int)(rnd64() % 1999) - 999;
            B[h] = kind == 0   ? v
                   : kind == 1 ? ldexp(v % 16, (int)(rnd64() % 17) - 8)
                               : (double)(rnd64() % 5 == 0);
        }
        host_gemm(M, N, K, A, B, kind == 1 ? 8.0 : 3.0, kind == 1 ? 8.0 : 3.0,
                  C);
        for (int i = 0; i < M; i++)
            for (int j = 0; j < N; j++) {
                /* exact: every term is an integer times 2^-16 */
                i128 x = 0;
                for (int h = 0; h < K; h++)
                    x += (i128)ldexp(A[i * K + h], 8) *
                         (i128)ldexp(B[h * N + j], 8);
                const double want = ldexp((double)x, -16);
                cr_assert_eq(C[i * N + j], want,
                             "kind %d (%d,%d): %.17g vs %.17g", kind, i, j,
                             C[i * N + j], want);
            }
    }
}
