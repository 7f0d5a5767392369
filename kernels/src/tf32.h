/*
 * tf32.h: fp32 -> tf32 rounding and the 3xTF32 split, as plain C shared by
 * the device pre-pass (tf32_prep.cu) and the CPU unit test
 * (tests/kernels/tf32_test.c), so the host checks the very code the GPU runs.
 *
 * tf32 keeps fp32's sign and 8-bit exponent and the top 10 of its 23
 * mantissa bits; the tensor cores read an fp32 word and ignore the low 13
 * bits (truncation). gemmk_tf32_round is PTX's cvt.rna.tf32.f32: round to
 * nearest, ties away from zero, done on the bit pattern (so subnormals are
 * rounded like normals, never flushed); finite values at or above
 * 0x7f7ff000 in magnitude round to infinity; infinities stay; a NaN stays a
 * NaN (quiet bit set, sign kept). The result is an fp32 word whose low 13
 * bits are zero, so the tensor cores read it exactly. One deliberate
 * difference: the H100's cvt.rna.tf32.f32 turns a NaN whose payload lies
 * only in the low 13 bits into an infinity (measured, gpu_test); here it
 * stays a NaN so that NaN inputs give NaN results.
 * gemmk_tf32_round_even_bits is what the TMA unit writes when it loads
 * fp32 through a TFLOAT32 tensor map (the kernels' in-place operands):
 * nearest, ties to even.
 *
 * 3xTF32: a = big + small + r with big = tf32(a), small = tf32(a - big);
 * a - big is exact in fp32, |small| <= 2^-11 |a| and |r| <= 2^-22 |a| for
 * normal a (subnormal a keep an absolute error below 2^-149 ... 2^-136).
 * Then A*B ~ A_small*B_big + A_big*B_small + A_big*B_big, dropping
 * A_small*B_small (~2^-22 relative) and the r terms.
 */
#ifndef GEMMK_TF32_H
#define GEMMK_TF32_H

#include <stdint.h>
#include <string.h>

#ifdef __CUDACC__
#define GEMMK_TF32_HD __host__ __device__ __forceinline__
#else
#define GEMMK_TF32_HD static inline
#endif

/* gemmk_tf32_round_bits for a finite u: adding half an ulp of tf32 to
 * the magnitude bits and truncating is round-half-away; a carry out of
 * the mantissa bumps the exponent (subnormal -> normal, max finite -> inf)
 * as IEEE rounding does. */
GEMMK_TF32_HD uint32_t gemmk_tf32_round_finite_bits(uint32_t u)
{
    return (u + 0x00001000u) & 0xffffe000u;
}

/* cvt.rna.tf32.f32 on the bit pattern u of an fp32 value. */
GEMMK_TF32_HD uint32_t gemmk_tf32_round_bits(uint32_t u)
{
    if ((u & 0x7f800000u) == 0x7f800000u) {
        if (u & 0x007fffffu) /* NaN: quiet, keep the sign */
            return (u | 0x00400000u) & 0xffffe000u;
        return u; /* +-inf */
    }
    return gemmk_tf32_round_finite_bits(u);
}

/* The TMA unit's rounding of a TFLOAT32 tensor map (measured on the
 * H200 bit for bit, kernel-notes v20): to nearest, ties to even, on the
 * bit pattern like gemmk_tf32_round_bits; a NaN becomes the quiet NaN
 * 0x7fffe000, infinities stay. */
GEMMK_TF32_HD uint32_t gemmk_tf32_round_even_bits(uint32_t u)
{
    if ((u & 0x7f800000u) == 0x7f800000u)
        return (u & 0x007fffffu) ? 0x7fffe000u : u;
    return (u + 0x00000fffu + ((u >> 13) & 1u)) & 0xffffe000u;
}

GEMMK_TF32_HD uint32_t gemmk_f32_bits(float x)
{
    uint32_t u;
    memcpy(&u, &x, sizeof(u));
    return u;
}

GEMMK_TF32_HD float gemmk_bits_f32(uint32_t u)
{
    float x;
    memcpy(&x, &u, sizeof(x));
    return x;
}

/* tf32(x), returned as an fp32 value (low 13 mantissa bits zero). */
GEMMK_TF32_HD float gemmk_tf32_round(float x)
{
    return gemmk_bits_f32(gemmk_tf32_round_bits(gemmk_f32_bits(x)));
}

/* The 3xTF32 split: *big = tf32(a), *small = tf32(a - *big). A finite a
 * that rounds to infinity (|a| >= 0x7f7ff000) takes the truncation as big
 * instead, so big + small stays finite and close to a. For a non-finite a,
 * *big is a (NaN quieted) and *small is 0 (inf - inf would be a NaN where
 * the product should stay infinite). */
GEMMK_TF32_HD void gemmk_tf32_split(float a, float *big, float *small)
{
    uint32_t ua = gemmk_f32_bits(a);
    uint32_t ub = gemmk_tf32_round_bits(ua);
    if ((ua & 0x7f800000u) != 0x7f800000u && (ub & 0x7f800000u) == 0x7f800000u)
        ub = ua & 0xffffe000u;
    float b = gemmk_bits_f32(ub);
    float r = a - b;
    if ((ub & 0x7f800000u) == 0x7f800000u)
        r = 0.f;
    *big = b;
    *small = gemmk_tf32_round(r);
}

#endif /* GEMMK_TF32_H */
