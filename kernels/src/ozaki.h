/*
 * ozaki.h: the arithmetic of the Ozaki-II fp64 emulation, as
 * plain C shared by the GPU kernels (ozaki.cu, gemm_s8.cuh) and the CPU
 * unit test (tests/kernels/ozaki_test.c), so the host checks, against
 * exact 128-bit integer arithmetic, the very code the GPU runs.
 *
 * The scheme. Row i of op(A) is scaled by 2^s_i and column j of op(B) by
 * 2^t_j and rounded to integers A', B' (gemmk_oz_scale64 below 2^60,
 * else gemmk_oz_scale, gemmk_oz_flimbs). Their product X = A'B' is an
 * integer matrix; it is computed exactly modulo each of n pairwise
 * coprime moduli p_l <= 256 by an int8 GEMM of the residues
 * (gemmk_oz_residue64 on the fp64 and integer pipes, or
 * gemmk_oz_fresidue on the fp32 pipe: symmetric residues fit int8, exact)
 * with int32 accumulation. The Chinese remainder
 * theorem gives X back when |X| < P/2, P = prod p_l; then C = X 2^(-s_i - t_j).
 *
 * Reconstruction in exact integer arithmetic: with c_l = (P/p_l)^-1 mod
 * p_l and W_l = c_l P / p_l (an integer below P), S = sum_l r_l W_l is X
 * modulo P for residues r_l = X mod p_l in [0, p_l). S is summed in
 * gemmk_oz_nw (at most five) 64-bit columns of 32-bit limbs
 * (gemmk_oz_sadd_nw: one 32 x 32 -> 64-bit multiply-add per modulus and
 * limb, no carries until the end; the GPU's main reconstruction makes the
 * same integers as a u8 product of the residues and W's bytes on the
 * tensor pipe, oz_recon_mma.cuh), reduced
 * to X = S - round(S / P) P in (-P/2, P/2) and converted to a double
 * once, rounded to nearest (gemmk_oz_value). So X is exact, the result is
 * X correctly rounded, and where the exact product of the scaled inputs
 * is representable (integer inputs of modest size, sparse 0/1 matrices,
 * small integers times powers of two) the result is exact.
 *
 * Scaling (gemmk_oz_choose, gemmk_oz_rowscale): row i of A is multiplied
 * by mu_i 2^(beta_a - E_i), mu_i = j_i / 8 in [1, 2), so that its 2-norm
 * lies in (7/8, 1] 2^beta_a; likewise for B. Then |X_ij| <= ||A'_i||
 * ||B'_j|| < 2^(beta_a+beta_b) (1 + tiny) < P/2 by Cauchy-Schwarz. The
 * emulation's error comes from rounding A and B to those integers: |dC_ij| <=
 * 2^(-s_i-1) ||b_j||_1 + 2^(-t_j-1) ||a_i||_1 (+ the tiny reconstruction and
 * final roundings), typically ~0.3 * 2^-beta ||a_i|| ||b_j|| per side.
 */
#ifndef GEMMK_OZAKI_H
#define GEMMK_OZAKI_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#ifdef __CUDACC__
#define GEMMK_OZ_HD     __host__ __device__ __forceinline__
#define GEMMK_OZ_H      static inline __host__
#define GEMMK_OZ_UNROLL _Pragma("unroll")
#else
#define GEMMK_OZ_HD static inline
#define GEMMK_OZ_H  static inline
#define GEMMK_OZ_UNROLL
#endif

#define GEMMK_OZ_MAX      20  /* moduli at most */
#define GEMMK_OZ_MIN      2   /* moduli at least (explicit requests) */
#define GEMMK_OZ_BETA_MAX 80  /* scaled integers stay below 2^84 (4 limbs) */
#define GEMMK_OZ_KB       128 /* int8 k-block (bytes of a 128B-swizzled row) */
/* k-blocks between flushes of the int32 accumulators into Z: 65536 terms
 * of at most 128 * 128 = 2^14 stay below 2^30 */
#define GEMMK_OZ_FLUSH_KB 512

#define GEMMK_OZ_NL 7 /* 13-bit limbs of a scaled integer (< 2^91) */
/* The largest beta whose scaled integers the split makes as signed 64-bit
 * integers (below 2^60: every plan of at most 15 moduli) and reduces on
 * the fp64 and integer pipes (gemmk_oz_scale64, gemmk_oz_residue64);
 * beyond, 13-bit limbs on the fp32 pipe. */
#define GEMMK_OZ_X64_MAX 59
#define GEMMK_OZ_NW      5 /* 32-bit limbs of P and W_l (P < 2^160) */

/* Stats flags (gemmk_oz_stats.flags, per row in the stats pass). */
#define GEMMK_OZ_NONFINITE 1u /* an inf or NaN */
#define GEMMK_OZ_DENORMAL  2u /* a subnormal */

/* The moduli, largest first: pairwise coprime, at most 256 (int8
 * symmetric residues: [-128, 127] for 256, [-(p-1)/2, (p-1)/2] else). */
#define GEMMK_OZ_MODULI                                                        \
    {                                                                          \
        256, 255, 253, 251, 247, 241, 239, 233, 229, 227, 223, 217, 211, 199,  \
            197, 193, 191, 181, 179, 173                                       \
    }

/* One modulus' constants (computed on the host, read by the kernels). */
typedef struct gemmk_oz_mod {
    uint32_t p;     /* the modulus */
    uint32_t magic; /* ceil(2^39 / p): v / p == (v * magic) >> 39 */
    int32_t hmax;   /* symmetric residues lie in [hmax - p + 1, hmax] */
    uint32_t w[GEMMK_OZ_NW]; /* W = c P / p, c = (P/p)^-1 mod p: limbs */
    float fp, finv;          /* p and 1/p (rounded) as floats */
    float fc[GEMMK_OZ_NL];   /* 2^(13 j) mod p, symmetric, as floats */
    int32_t c32;             /* 2^32 mod p, symmetric */
    double dc32, dinv;       /* c32 as a double; 1/p rounded */
} gemmk_oz_mod;

/* A set of n moduli. */
typedef struct gemmk_oz_set {
    int n;
    int pad;
    double log2p;             /* log2 P */
    double pinv;              /* 1 / P, rounded */
    uint32_t pw[GEMMK_OZ_NW]; /* P: 32-bit limbs, least significant first */
    gemmk_oz_mod mod[GEMMK_OZ_MAX];
} gemmk_oz_set;

/* --- scaling and residues (GPU split kernel) ----------------------------- */

/*
 * |round(a mu 2^s)| as a 128-bit integer hi:lo (rounding half to even),
 * mu = j / 8 with j in 8..15 (the row's fractional scale, see
 * gemmk_oz_rowscale); returns 1 when a < 0. Zero, and values that round
 * to zero, give zero. The caller keeps |a| mu 2^s < 2^84 (scaling by the
 * row norm guarantees it; beyond, the value is wrong but nothing is
 * undefined). a must be finite.
 */
GEMMK_OZ_HD int gemmk_oz_scale(double a, int s, int j, uint64_t *hi,
                               uint64_t *lo)
{
    uint64_t u;
    memcpy(&u, &a, sizeof(u));
    const int neg = (int)(u >> 63);
    const int ex = (int)((u >> 52) & 0x7ff);
    uint64_t m = u & ((1ull << 52) - 1);
    int e2; /* |a| = m 2^e2 */
    if (ex == 0) {
        e2 = -1074;
    } else {
        m |= 1ull << 52;
        e2 = ex - 1075;
    }
    m *= (uint64_t)j;   /* < 2^57 */
    int t = e2 + s - 3; /* |a| mu 2^s = m 2^t */
    if (m == 0 || t < -58) {
        *lo = *hi = 0;
    } else if (t < 0) {
        const int sh = -t; /* 1..58 */
        uint64_t q = m >> sh;
        const uint64_t rem = m & ((1ull << sh) - 1);
        const uint64_t half = 1ull << (sh - 1);
        q += (rem > half || (rem == half && (q & 1))) ? 1 : 0;
        *lo = q;
        *hi = 0;
    } else if (t < 64) {
        *lo = m << t;
        *hi = t ? m >> (64 - t) : 0;
    } else { /* a subnormal's short mantissa shifted far */
        *lo = 0;
        *hi = m << (t > 83 ? 19 : t - 64);
    }
    return neg;
}

/* A row's scale as the kernels store it: 2^E mu, packed as 16 E + (j - 8)
 * (mu = j / 8). */
GEMMK_OZ_HD int gemmk_oz_rowscale_E(int packed)
{
    return packed >> 4; /* arithmetic shift: E may be negative */
}
GEMMK_OZ_HD int gemmk_oz_rowscale_j(int packed)
{
    return (packed & 15) + 8;
}

/*
 * The scale of a row of 2-norm nu = sqrt(ssq) 2^emax (ssq in [1, 4k]):
 * the smallest E with 2^E > nu (1 + 2^-20) (the margin covers the sum's
 * rounding) and the largest j in 8..15 with (j / 8) nu (1 + 2^-20) <=
 * 2^E, so the row scaled by 2^(beta - E) j / 8 has a 2-norm at most
 * 2^beta and above 2^beta 7/8: powers of two alone would waste half a bit
 * a side on average. Returns the packed form (gemmk_oz_rowscale_E, _j).
 */
GEMMK_OZ_HD int gemmk_oz_rowscale(double ssq, int emax)
{
    int ee;
    const double f = frexp(sqrt(ssq) * (1.0 + 0x1p-20), &ee); /* [.5, 1) */
    int j = (int)floor(8.0 / f);
    if (j > 15)
        j = 15;
    if (j < 8)
        j = 8;
    return 16 * (emax + ee) + (j - 8);
}

/* v (< 2^23) as a float, exactly, from its bits: the integer-to-float
 * conversion runs at a sixteenth of the fp32 rate on the GPU. */
GEMMK_OZ_HD float gemmk_oz_u2f(uint32_t v)
{
    const uint32_t b = 0x4B000000u | v; /* 2^23 + v */
    float f;
    memcpy(&f, &b, sizeof(f));
    return f - 8388608.0f;
}

/*
 * round(a mu 2^s) (mu = j / 8) as nl signed 13-bit limbs held in floats
 * (exact): the integer is sum_i f[i] 2^(13 i), every f[i] of a's sign;
 * GEMMK_OZ_NL at most (5 cover integers < 2^65).
 */
GEMMK_OZ_HD void gemmk_oz_flimbs(double a, int s, int j, int nl, float *f)
{
    uint64_t hi, lo;
    const int neg = gemmk_oz_scale(a, s, j, &hi, &lo);
    for (int i = 0; i < nl; i++) {
        const int b = 13 * i;
        uint32_t v;
        if (b + 13 <= 64)
            v = (uint32_t)(lo >> b) & 8191u;
        else if (b < 64)
            v = (uint32_t)((lo >> b) | (hi << (64 - b))) & 8191u;
        else
            v = (uint32_t)(hi >> (b - 64)) & 8191u;
        const float x = gemmk_oz_u2f(v);
        f[i] = neg ? -x : x;
    }
}

/*
 * round(a mu 2^s) (mu = j / 8, half to even) as a signed 64-bit integer,
 * with no branch, for a finite a whose scaled magnitude is below 2^62
 * (rows scaled to beta <= GEMMK_OZ_X64_MAX; beyond, the value is wrong
 * but nothing is undefined); gemmk_oz_scale's value there. The
 * significand m (53 bits, the implicit one set for a normal a) times 64 j
 * is below 2^63, and |a| mu 2^s = 64 j m 2^-sh: a right shift by sh
 * rounds half to even by adding 2^(sh-1) - 1 and the lowest bit kept;
 * past 63 the value is below a half (0); a negative sh (a subnormal a
 * scaled far) is a left shift.
 */
GEMMK_OZ_HD int64_t gemmk_oz_scale64(double a, int s, int j)
{
    uint64_t u;
    memcpy(&u, &a, sizeof(u));
    const int ex = (int)((u >> 52) & 0x7ff);
    const uint64_t m = (u & ((1ull << 52) - 1)) | ((uint64_t)(ex != 0) << 52);
    /* |a| = m 2^(max(ex, 1) - 1075) */
    const int sh = 1084 - (ex > 1 ? ex : 1) - s;
    const uint64_t n =
        sh > 63 ? 0 : (m * (uint64_t)(64 * j)) << (sh < 0 ? (-sh & 63) : 0);
    const int r = sh < 0 ? 0 : sh > 63 ? 63 : sh;
    const uint64_t keep = (n >> r) & (uint64_t)(r != 0);
    const uint64_t x = (n + (((1ull << r) - 1) >> 1) + keep) >> r;
    const uint64_t neg = u >> 63;
    return (int64_t)((x ^ (0 - neg)) + neg);
}

/*
 * The residue of x = xh 2^32 + xl (xl in [0, 2^32)) modulo p, symmetric
 * as gemmk_oz_fresidue's, in the low byte of the word returned (two's
 * complement int8); xhd and xld are xh and xl as doubles, c = 2^32 mod p
 * (symmetric, |c| <= 128) and dc the same as a double, dinv = 1/p
 * rounded. v = xh c + xl is below 2^39, exact in double; q = round(v /
 * p) comes from one fma with 1/p into the low word of q + 1.5 2^52 (the
 * error |v / p| 2^-53 < 2^-22 is far under the 1/(2p) that v / p keeps
 * from a half-integer when p is odd; for 256 it is exact); v - q p,
 * whose low byte is the residue, from two integer multiply-adds modulo
 * 2^32. Two fp64 and two integer instructions a residue, on two pipes.
 */
GEMMK_OZ_HD uint32_t gemmk_oz_residue64(int32_t xh, uint32_t xl, double xhd,
                                        double xld, uint32_t p, int32_t c,
                                        double dc, double dinv)
{
    const double v = fma(xhd, dc, xld);
    const double q = fma(v, dinv, 6755399441055744.0); /* + 1.5 2^52 */
    uint64_t qb;
    memcpy(&qb, &q, sizeof(qb));
    const uint32_t vl = (uint32_t)xh * (uint32_t)c + xl;
    return vl - (uint32_t)qb * p;
}

/*
 * The residue of sum_j f[j] 2^(13 j) modulo m->p (c[j] = 2^(13 j) mod p,
 * m->fc), in [-(p-1)/2, (p-1)/2]
 * for odd p and [-128, 128] for p = 256 (128 is stored as the byte 0x80,
 * -128, which is the same residue), all in fp32 arithmetic, exact:
 * v = sum f[j] c[j] with |c[j]| <= 128 stays below 2^13 (1 + 6 * 128) <
 * 2^23, so every partial sum is an exact float; q =
 * round(v / p) comes from one fma with the rounded 1/p (its error |v / p|
 * 2^-24 < 1/(2p) is under the distance of v / p from a half-integer when
 * p is odd; for 256 it is exact) and v - q p is exact. Returns the
 * residue as an int.
 */
GEMMK_OZ_HD int gemmk_oz_fresidue(const float *f, int nl, const float *c,
                                  float p, float invp)
{
    float v = f[0];
    for (int j = 1; j < nl; j++)
        v = fmaf(f[j], c[j], v);
    const float magic = 12582912.0f; /* 1.5 * 2^23: rounds to integers */
    const float q = fmaf(v, invp, magic) - magic;
    return (int)fmaf(-q, p, v);
}

/* The same residue as the bits of r + 1.5 * 2^23 (exact), whose low byte
 * is r as two's complement int8: no float-to-int conversion, which the
 * GPU runs at a fraction of the fp32 rate. */
GEMMK_OZ_HD uint32_t gemmk_oz_fresidue_bits(const float *f, int nl,
                                            const float *c, float p, float invp)
{
    float v = f[0];
    for (int j = 1; j < nl; j++)
        v = fmaf(f[j], c[j], v);
    const float magic = 12582912.0f;
    const float q = fmaf(v, invp, magic) - magic;
    const float rb = fmaf(-q, p, v) + magic;
    uint32_t bits;
    memcpy(&bits, &rb, sizeof(bits));
    return bits;
}

/* The residue as a byte (two's complement int8). */
GEMMK_OZ_HD uint32_t gemmk_oz_fresidue_byte(const float *f, int nl,
                                            const float *c, float p, float invp)
{
    return gemmk_oz_fresidue_bits(f, nl, c, p, invp) & 0xffu;
}

/* --- reconstruction (GPU GEMM epilogue) ---------------------------------- */

/*
 * The reconstruction works on nw 32-bit columns (GEMMK_OZ_NW at most),
 * one per limb of P and the W_l, so a set needs P < 2^(32 nw):
 * gemmk_oz_nw gives 2 for P < 2^64 (up to 8 moduli: fp32's 7), 4 for P <
 * 2^128 (up to 16: fp64's 15), else GEMMK_OZ_NW; the kernels are
 * instantiated for those three. The plain names take GEMMK_OZ_NW.
 */
GEMMK_OZ_HD int gemmk_oz_nw(double log2p)
{
    return log2p < 64.0 ? 2 : log2p < 128.0 ? 4 : GEMMK_OZ_NW;
}

/* s += r W_l: one column per 32-bit limb of W_l (r < 2^8: 20 terms stay
 * below 2^45 a column). */
GEMMK_OZ_HD void gemmk_oz_sadd_nw(uint64_t *s, uint32_t r, const uint32_t *w,
                                  int nw)
{
    for (int i = 0; i < nw; i++)
        s[i] += (uint64_t)r * w[i];
}

GEMMK_OZ_HD void gemmk_oz_sadd(uint64_t *s, uint32_t r, const uint32_t *w)
{
    gemmk_oz_sadd_nw(s, r, w, GEMMK_OZ_NW);
}

/* Redundant sign bits of t: 63 for 0 and -1, 0 when bit 62 differs from
 * the sign. */
GEMMK_OZ_HD int gemmk_oz_rsb64(int64_t t)
{
    const uint64_t v = (uint64_t)(t ^ (t >> 63));
#ifdef __CUDA_ARCH__
    return __clzll((long long)v) - 1;
#else
    return v ? __builtin_clzll(v) - 1 : 63;
#endif
}

/* u < 2^52 as a double, exactly, from its bits (2^52 + u, less 2^52): no
 * conversion instruction. */
GEMMK_OZ_HD double gemmk_oz_u52(uint64_t u)
{
    const uint64_t b = u | 0x4330000000000000ull;
    double d;
    memcpy(&d, &b, sizeof(d));
    return d - 4503599627370496.0;
}

/* 2^k for k in [-1022, 1023], from its bits */
GEMMK_OZ_HD double gemmk_oz_pow2(int k)
{
    const uint64_t b = (uint64_t)(k + 1023) << 52;
    double p;
    memcpy(&p, &b, sizeof(p));
    return p;
}

/* x 2^k: one multiply by 2^k built from its bits where that is a normal
 * double (the product rounds once, as scalbn does), else scalbn. */
GEMMK_OZ_HD double gemmk_oz_ldexp(double x, int k)
{
    if (k < -1022 || k > 1023)
        return scalbn(x, k);
    return x * gemmk_oz_pow2(k);
}

/* x 2^k for x = 0 or 2^-9 <= |x| < 2^64, with no branch: x 2^k1 (k1 =
 * k within [-1000, 1000]) is normal, so exact, and times 2^(k - k1) the
 * product rounds once, as scalbn does (k beyond [-2022, 2023] gives 0 or
 * inf either way). */
GEMMK_OZ_HD double gemmk_oz_ldexp_mid(double x, int k)
{
    k = k < -2022 ? -2022 : k > 2023 ? 2023 : k;
    const int k1 = k < -1000 ? -1000 : k > 1000 ? 1000 : k;
    return x * gemmk_oz_pow2(k1) * gemmk_oz_pow2(k - k1);
}

/* x / d rounded to nearest, for d an integer in 64..225 and rd = 1/d
 * rounded, |x| < 2^64 (nothing underflows), with no division and no
 * branch: q = x rd is within an ulp of x / d, r = x - q d is exact (one
 * fma), and q + r rd is the correctly rounded quotient (Markstein's
 * correction; the CPU test compares it with the division for every d). */
GEMMK_OZ_HD double gemmk_oz_div(double x, double d, double rd)
{
    const double q = x * rd;
    const double r = fma(-q, d, x);
    return fma(r, rd, q);
}

/*
 * X = S centred modulo P (|X| < P / 2) as x 2^k, x a double rounded to
 * nearest once (|x| < 2^64; 0, or at least 1). q = round(S / P) from S as
 * a double (the columns, each below 2^45, are exact doubles; Horner is
 * off by a few 2^-53 relative, far less than the margin P / 2 - |X| that
 * gemmk_oz_budget leaves); then X = S - q P as a two's complement integer
 * of nw limbs (one signed carry chain); its top 64 significant bits as a
 * signed integer, with a sticky bit for the rest (a nonnegative fraction
 * below it, so the rounding is that of X, either sign), converted once.
 * No branch: every limb index is a constant once nw is (the limbs stay
 * in registers) and the window is chosen by selects, so a thread's
 * outputs interleave.
 */
GEMMK_OZ_HD double gemmk_oz_centred(const uint64_t *s, const uint32_t *pw,
                                    double pinv, int nw, int *k)
{
    double sd = gemmk_oz_u52(s[nw - 1]);
    GEMMK_OZ_UNROLL
    for (int i = nw - 2; i >= 0; i--)
        sd = fma(sd, 4294967296.0, gemmk_oz_u52(s[i]));
#ifdef __CUDA_ARCH__
    const uint32_t q = (uint32_t)__double2int_rn(sd * pinv); /* < 2^14 */
#else
    const uint32_t q = (uint32_t)(int32_t)rint(sd * pinv);
#endif
    uint32_t u[GEMMK_OZ_NW];
    int64_t c = 0;
    GEMMK_OZ_UNROLL
    for (int i = 0; i < nw; i++) {
        c += (int64_t)(s[i] - (uint64_t)q * pw[i]); /* |.| < 2^46 */
        u[i] = (uint32_t)c;
        c >>= 32; /* arithmetic: the floor */
    }
    /* the top window of two limbs that holds X's significant bits: the
     * highest t whose window has under 32 redundant sign bits, else t =
     * 1, the whole of X */
    int t = nw - 1;
    int64_t w = (int64_t)(((uint64_t)u[nw - 1] << 32) | u[nw - 2]);
    int r = gemmk_oz_rsb64(w);
    uint32_t next = nw > 2 ? u[nw - 3] : 0;
    GEMMK_OZ_UNROLL
    for (int j = nw - 2; j >= 1; j--) {
        if (r >= 32) {
            t = j;
            w = (int64_t)(((uint64_t)u[j] << 32) | u[j - 1]);
            r = gemmk_oz_rsb64(w);
            next = j >= 2 ? u[j - 2] : 0;
        }
    }
    /* t > 1 (so r <= 31): shift in r bits of the next limb, the rest
     * sticky; t == 1: X itself (next is 0) */
    const int sh = t == 1 ? 0 : r;
    const uint64_t wide = (uint64_t)next << sh;
    const uint64_t top = ((uint64_t)w << sh) | (wide >> 32);
    uint32_t below = (uint32_t)wide;
    GEMMK_OZ_UNROLL
    for (int i = 0; i < nw - 3; i++)
        if (i < t - 2)
            below |= u[i];
    *k = 32 * (t - 1) - sh;
    return (double)(int64_t)(top | (below != 0));
}

/* X 2^e, rounded to nearest once (see gemmk_oz_centred). */
GEMMK_OZ_HD double gemmk_oz_value_nw(const uint64_t *s, const uint32_t *pw,
                                     double pinv, int e, int nw)
{
    int k;
    const double x = gemmk_oz_centred(s, pw, pinv, nw, &k);
    return gemmk_oz_ldexp_mid(x, k + e);
}

GEMMK_OZ_HD double gemmk_oz_value(const uint64_t *s, const uint32_t *pw,
                                  double pinv, int e)
{
    return gemmk_oz_value_nw(s, pw, pinv, e, GEMMK_OZ_NW);
}

/* The divisor j_i j_j of a product's scales (mu_i mu_j = j_i j_j / 64),
 * 64..225, as a double. */
GEMMK_OZ_HD double gemmk_oz_divisor(int rs_i, int rs_j)
{
    return gemmk_oz_u52(
        (uint64_t)(gemmk_oz_rowscale_j(rs_i) * gemmk_oz_rowscale_j(rs_j)));
}

/* The 64 divisors as a table (the reconstruction kernels keep their
 * reciprocals): the index of a pair of scales, 8 (j_i - 8) + j_j - 8, and
 * the divisor at an index. */
GEMMK_OZ_HD int gemmk_oz_divisor_index(int rs_i, int rs_j)
{
    return 8 * (gemmk_oz_rowscale_j(rs_i) - 8) + gemmk_oz_rowscale_j(rs_j) - 8;
}
GEMMK_OZ_HD double gemmk_oz_divisor_at(int index)
{
    return gemmk_oz_u52((uint64_t)((index / 8 + 8) * (index % 8 + 8)));
}

/* The product back in the inputs' units from the packed row and column
 * scales: X 2^(E_i + E_j - beta_a - beta_b) / (mu_i mu_j), x / (j_i j_j)
 * rounded once more (exact when the quotient is a double), then scaled
 * (which rounds only where the result is subnormal). rd = 1 / (j_i j_j)
 * rounded (the kernels keep a table of the 64). */
GEMMK_OZ_HD double gemmk_oz_result_rd(const uint64_t *s, const uint32_t *pw,
                                      double pinv, int rs_i, int rs_j,
                                      int ebias, int nw, double rd)
{
    int k;
    const double x = gemmk_oz_centred(s, pw, pinv, nw, &k);
    return gemmk_oz_ldexp_mid(gemmk_oz_div(x, gemmk_oz_divisor(rs_i, rs_j), rd),
                              k + gemmk_oz_rowscale_E(rs_i) +
                                  gemmk_oz_rowscale_E(rs_j) + ebias + 6);
}

GEMMK_OZ_HD double gemmk_oz_result(const uint64_t *s, const uint32_t *pw,
                                   double pinv, int rs_i, int rs_j, int ebias)
{
    return gemmk_oz_result_rd(s, pw, pinv, rs_i, rs_j, ebias, GEMMK_OZ_NW,
                              1.0 / gemmk_oz_divisor(rs_i, rs_j));
}

/* --- host: constants and the choice of moduli ---------------------------- */
/* (host functions: nvcc's device pass parses host code too, so these stay
 * visible to it) */

/* Fills s for the first n moduli (1..GEMMK_OZ_MAX). Returns 0, or -1 for
 * a bad n. */
GEMMK_OZ_H int gemmk_oz_set_init(gemmk_oz_set *s, int n)
{
    static const int mods[GEMMK_OZ_MAX] = GEMMK_OZ_MODULI;
    if (!s || n < 1 || n > GEMMK_OZ_MAX)
        return -1;
    memset(s, 0, sizeof(*s));
    s->n = n;
    /* P as little-endian 32-bit limbs (at most 160 bits) */
    uint32_t big[6] = {1, 0, 0, 0, 0, 0};
    double l2 = 0;
    for (int i = 0; i < n; i++) {
        uint64_t carry = 0;
        for (int w = 0; w < 6; w++) {
            uint64_t x = (uint64_t)big[w] * (uint64_t)mods[i] + carry;
            big[w] = (uint32_t)x;
            carry = x >> 32;
        }
        l2 += log2((double)mods[i]);
    }
    s->log2p = l2;
    memcpy(s->pw, big, sizeof(s->pw)); /* big[5] == 0: P < 2^156 */
    {
        long double pl = 0;
        for (int w = 5; w >= 0; w--)
            pl = pl * 4294967296.0L + (long double)big[w];
        s->pinv = (double)(1.0L / pl);
    }
    for (int i = 0; i < n; i++) {
        const uint32_t p = (uint32_t)mods[i];
        gemmk_oz_mod *m = &s->mod[i];
        m->p = p;
        m->magic = (uint32_t)(((1ull << 39) + p - 1) / p);
        m->hmax = p == 256 ? 127 : (int32_t)(p - 1) / 2;
        m->fp = (float)p;
        m->finv = 1.0f / (float)p;
        for (int j = 0; j < GEMMK_OZ_NL; j++) {
            /* 2^(13 j) mod p, then symmetric */
            uint32_t c = 1 % p;
            for (int b = 0; b < 13 * j; b++)
                c = (c * 2) % p;
            int cs = (int)c > m->hmax ? (int)c - (int)p : (int)c;
            m->fc[j] = (float)cs;
        }
        {
            const uint32_t c = (uint32_t)((1ull << 32) % p);
            m->c32 = (int)c > m->hmax ? (int32_t)c - (int32_t)p : (int32_t)c;
            m->dc32 = (double)m->c32;
            m->dinv = 1.0 / (double)p;
        }
        uint32_t q = 1 % p; /* (P / p) mod p */
        for (int j = 0; j < n; j++)
            if (j != i)
                q = (uint32_t)((q * (uint32_t)mods[j]) % p);
        uint32_t c = n == 1 ? 1 : 0;
        for (uint32_t x = 1; x < p && !c; x++)
            if ((q * x) % p == 1)
                c = x;
        if (c == 0)
            return -1; /* not coprime: cannot happen for GEMMK_OZ_MODULI */
        /* W = c (P / p): P / p by long division, then times c < p */
        uint32_t quo[6];
        uint64_t rem = 0;
        for (int w = 5; w >= 0; w--) {
            const uint64_t cur = (rem << 32) | big[w];
            quo[w] = (uint32_t)(cur / p);
            rem = cur % p;
        }
        uint64_t carry = 0;
        for (int w = 0; w < GEMMK_OZ_NW; w++) {
            const uint64_t x = (uint64_t)quo[w] * c + carry;
            m->w[w] = (uint32_t)x;
            carry = x >> 32;
        }
    }
    return 0;
}

/*
 * Largest beta_a + beta_b (split as beta_a = ceil(b/2), beta_b = floor)
 * that keeps |X| <= ||A'_i|| ||B'_j|| < P / 2 for depth k: each rounded
 * row has ||A'_i|| <= 2^beta_a + sqrt(k) / 2, so (2^beta_a + sqrt(k)/2)
 * (2^beta_b + sqrt(k)/2) must stay under 2^(log2 P - 1); 0.01 bit more
 * covers the rounding of log2 P itself. Returns -1 if none fits.
 */
GEMMK_OZ_H int gemmk_oz_budget(const gemmk_oz_set *s, int64_t k)
{
    const double lim = s->log2p - 1.01;
    const double h = 0.5 * sqrt((double)(k > 1 ? k : 1));
    for (int b = (int)floor(lim); b >= 2; b--) {
        const double ba = ldexp(1.0, (b + 1) / 2), bb = ldexp(1.0, b / 2);
        if (log2(ba + h) + log2(bb + h) < lim)
            return b;
    }
    return -1;
}

/* Global statistics of one operand (the stats pass, reduced over rows). */
typedef struct gemmk_oz_stats {
    unsigned flags; /* GEMMK_OZ_NONFINITE | GEMMK_OZ_DENORMAL, any row */
    int nonzero;    /* rows with a nonzero element */
    double spread;  /* max over rows of emax - mean exponent (nonzeros) */
} gemmk_oz_stats;

/* Accuracy model constants (docs/ozaki-notes.md): bits per side that
 * match cuBLAS DGEMM's error on inputs of small exponent spread, and how
 * much more a wide spread needs. */
#define GEMMK_OZ_BETA0        55
#define GEMMK_OZ_SPREAD_SLOPE 1.0
/* The same for fp32 inputs against SGEMM (24-bit significands): 26 bits a
 * side, 7 moduli up to K = 2^14 (docs/ozaki-notes.md, "fp32"). */
#define GEMMK_OZ_BETA0_F32 26

/*
 * The emulation plan for depth k, the operands' statistics and an
 * explicit moduli count (0: choose the fewest that give beta0 bits a side,
 * more for wide exponent spreads). Writes n and the bits per side.
 * Returns NULL to emulate, or a static reason to run the fallback.
 */
GEMMK_OZ_H const char *gemmk_oz_choose_bits(const gemmk_oz_stats *a,
                                            const gemmk_oz_stats *b, int64_t k,
                                            int explicit_n, int beta0, int *n,
                                            int *beta_a, int *beta_b)
{
    if ((a->flags | b->flags) & GEMMK_OZ_NONFINITE)
        return "inf or NaN in A or B";
    gemmk_oz_set s;
    int bud = -1;
    if (explicit_n) {
        if (explicit_n < GEMMK_OZ_MIN || explicit_n > GEMMK_OZ_MAX)
            return "moduli out of range";
        *n = explicit_n;
        gemmk_oz_set_init(&s, *n);
        bud = gemmk_oz_budget(&s, k);
        if (bud < 2)
            return "too few moduli for this depth";
    } else {
        if ((a->flags | b->flags) & GEMMK_OZ_DENORMAL)
            return "subnormal in A or B";
        /* wide exponent spreads: DGEMM's error follows the products that
         * line up, the emulation's the norms; the excess of the smaller
         * spread over log2 sqrt(k) is what the norms overstate */
        double sp = a->spread < b->spread ? a->spread : b->spread;
        double excess = sp - 0.5 * log2((double)(k > 1 ? k : 1));
        int extra = excess > 0 ? (int)ceil(GEMMK_OZ_SPREAD_SLOPE * excess) : 0;
        const int need = beta0 + extra; /* per side */
        if (need > GEMMK_OZ_BETA_MAX)
            return "exponent spread too wide";
        for (int i = GEMMK_OZ_MIN; i <= GEMMK_OZ_MAX && bud < 0; i++) {
            gemmk_oz_set_init(&s, i);
            int bi = gemmk_oz_budget(&s, k);
            if (bi >= 2 * need) {
                *n = i;
                bud = bi;
            }
        }
        if (bud < 0)
            return "exponent spread too wide";
    }
    if (bud > 2 * GEMMK_OZ_BETA_MAX)
        bud = 2 * GEMMK_OZ_BETA_MAX;
    *beta_a = (bud + 1) / 2;
    *beta_b = bud / 2;
    return 0;
}

/* The plan for fp64 inputs (DGEMM's accuracy). */
GEMMK_OZ_H const char *gemmk_oz_choose(const gemmk_oz_stats *a,
                                       const gemmk_oz_stats *b, int64_t k,
                                       int explicit_n, int *n, int *beta_a,
                                       int *beta_b)
{
    return gemmk_oz_choose_bits(a, b, k, explicit_n, GEMMK_OZ_BETA0, n, beta_a,
                                beta_b);
}

#endif /* GEMMK_OZAKI_H */
