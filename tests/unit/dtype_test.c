/*
 * dtype_test.c: gemm_convert() between bf16, fp16 and fp32: exact values,
 * round-to-nearest-even, subnormals, overflow to infinity, NaN kept, and a
 * sweep of every 16-bit pattern through fp32 and back; fp64 and the
 * complex types (one rounding from fp64 to 16 bits, complex64 <->
 * complex128, real <-> complex refused); the precision names.
 */
#include <gemm/types.h>

#include <criterion/criterion.h>
#include <math.h>
#include <stdint.h>
#include <string.h>

static uint16_t to16(float f, gemm_dtype t)
{
    uint16_t h;
    cr_assert_eq(gemm_convert(&h, t, &f, GEMM_FP32, 1), GEMM_OK);
    return h;
}

static float from16(uint16_t h, gemm_dtype t)
{
    float f;
    cr_assert_eq(gemm_convert(&f, GEMM_FP32, &h, t, 1), GEMM_OK);
    return f;
}

Test(dtype, sizes_names_parse)
{
    cr_expect_eq(gemm_dtype_size(GEMM_BF16), 2);
    cr_expect_eq(gemm_dtype_size(GEMM_FP32), 4);
    cr_expect_eq(gemm_dtype_size((gemm_dtype)9), 0);
    cr_expect_eq(gemm_dtype_size((gemm_dtype)0), 0);
    cr_expect_str_eq(gemm_dtype_name(GEMM_FP16), "fp16");
    gemm_dtype t;
    cr_expect_eq(gemm_dtype_parse("half", &t), GEMM_OK);
    cr_expect_eq(t, GEMM_FP16);
    cr_expect_eq(gemm_dtype_parse("BF16", &t), GEMM_OK);
    cr_expect_eq(t, GEMM_BF16);
    cr_expect_eq(gemm_dtype_parse("int16", &t), GEMM_ERR_DTYPE);
    cr_expect_eq(gemm_dtype_parse("uint8", &t), GEMM_ERR_DTYPE);
}

Test(dtype, known_values)
{
    cr_expect_eq(to16(1.0f, GEMM_FP16), 0x3c00);
    cr_expect_eq(to16(-2.0f, GEMM_FP16), 0xc000);
    cr_expect_eq(to16(65504.0f, GEMM_FP16), 0x7bff);
    cr_expect_eq(to16(65520.0f, GEMM_FP16), 0x7c00, "rounds to inf");
    cr_expect_eq(to16(0x1p-24f, GEMM_FP16), 0x0001, "smallest subnormal");
    cr_expect_eq(to16(0x1p-25f, GEMM_FP16), 0x0000, "ties to even (0)");
    cr_expect_eq(to16(3 * 0x1p-25f, GEMM_FP16), 0x0002, "ties to even (2)");
    cr_expect_eq(to16(1.0f + 0x1p-11f, GEMM_FP16), 0x3c00, "tie to even");
    cr_expect_eq(to16(1.0f + 3 * 0x1p-11f, GEMM_FP16), 0x3c02);
    cr_expect_eq(to16(1.0f, GEMM_BF16), 0x3f80);
    cr_expect_eq(to16(1.0f + 0x1p-8f, GEMM_BF16), 0x3f80, "tie to even");
    cr_expect_eq(to16(1.0f + 3 * 0x1p-8f, GEMM_BF16), 0x3f82);
    cr_expect(isnan(from16(to16(NAN, GEMM_BF16), GEMM_BF16)));
    cr_expect(isnan(from16(to16(NAN, GEMM_FP16), GEMM_FP16)));
    cr_expect(isinf(from16(to16(INFINITY, GEMM_FP16), GEMM_FP16)));
    cr_expect_eq(from16(0x0001, GEMM_FP16), 0x1p-24f);
    cr_expect_eq(from16(0x3555, GEMM_FP16), 0.33325195f);
}

/* Every 16-bit pattern widens and narrows back to itself (NaNs stay NaN). */
Test(dtype, round_trip_all_patterns)
{
    gemm_dtype ts[] = {GEMM_BF16, GEMM_FP16};
    for (int t = 0; t < 2; t++) {
        for (uint32_t u = 0; u < 65536; u++) {
            float f = from16((uint16_t)u, ts[t]);
            uint16_t back = to16(f, ts[t]);
            if (isnan(f))
                cr_assert(isnan(from16(back, ts[t])));
            else
                cr_assert_eq(back, (uint16_t)u, "%s 0x%04x -> %a -> 0x%04x",
                             gemm_dtype_name(ts[t]), u, (double)f, back);
        }
    }
}

/* Narrowing rounds to the nearest representable value. */
Test(dtype, narrowing_is_nearest)
{
    uint32_t seed = 12345;
    for (int i = 0; i < 100000; i++) {
        seed = seed * 1664525u + 1013904223u;
        float f = ((float)(seed >> 8) / (1 << 24) - 0.5f) * 200.0f;
        gemm_dtype ts[] = {GEMM_BF16, GEMM_FP16};
        for (int t = 0; t < 2; t++) {
            uint16_t h = to16(f, ts[t]);
            float r = from16(h, ts[t]);
            float up = from16((uint16_t)(h + 1), ts[t]);
            float dn = from16((uint16_t)(h - 1), ts[t]);
            cr_assert(
                fabsf(r - f) <= fabsf(up - f) && fabsf(r - f) <= fabsf(dn - f),
                "%s: %a -> %a", gemm_dtype_name(ts[t]), (double)f, (double)r);
        }
    }
}

Test(dtype, bulk_and_errors)
{
    float in[5] = {0.5f, -1.25f, 3.0f, 1e-3f, 1024.0f};
    uint16_t mid[5];
    float out[5];
    cr_assert_eq(gemm_convert(mid, GEMM_FP16, in, GEMM_FP32, 5), GEMM_OK);
    /* fp16 -> bf16 in place (same size) */
    cr_assert_eq(gemm_convert(mid, GEMM_BF16, mid, GEMM_FP16, 5), GEMM_OK);
    cr_assert_eq(gemm_convert(out, GEMM_FP32, mid, GEMM_BF16, 5), GEMM_OK);
    for (int i = 0; i < 5; i++)
        cr_expect_float_eq(out[i], in[i], fabsf(in[i]) * 0x1p-8f, "%d", i);
    cr_expect_eq(gemm_convert(out, (gemm_dtype)9, in, GEMM_FP32, 1),
                 GEMM_ERR_DTYPE);
    cr_expect_eq(gemm_convert(NULL, GEMM_FP32, in, GEMM_FP32, 1),
                 GEMM_ERR_INVALID);
}

Test(dtype, precision_names_parse)
{
    gemm_precision p;
    cr_expect_str_eq(gemm_precision_name(GEMM_PRECISION_DEFAULT), "default");
    cr_expect_str_eq(gemm_precision_name(GEMM_PRECISION_TF32), "tf32");
    cr_expect_str_eq(gemm_precision_name(GEMM_PRECISION_FP32), "fp32");
    cr_expect_str_eq(gemm_precision_name((gemm_precision)9), "?");
    cr_expect_eq(gemm_precision_parse("tf32", &p), GEMM_OK);
    cr_expect_eq(p, GEMM_PRECISION_TF32);
    cr_expect_eq(gemm_precision_parse("FP32", &p), GEMM_OK);
    cr_expect_eq(p, GEMM_PRECISION_FP32);
    cr_expect_eq(gemm_precision_parse("default", &p), GEMM_OK);
    cr_expect_eq(p, GEMM_PRECISION_DEFAULT);
    p = GEMM_PRECISION_TF32;
    cr_expect_eq(gemm_precision_parse("tf16", &p), GEMM_ERR_INVALID);
    cr_expect_eq(gemm_precision_parse("", &p), GEMM_ERR_INVALID);
    cr_expect_eq(gemm_precision_parse(NULL, &p), GEMM_ERR_INVALID);
    cr_expect_eq(gemm_precision_parse("fp32", NULL), GEMM_ERR_INVALID);
    cr_expect_eq(p, GEMM_PRECISION_TF32, "untouched on failure");
}

Test(dtype, wide_sizes_names_parse)
{
    cr_expect_eq(gemm_dtype_size(GEMM_FP64), 8);
    cr_expect_eq(gemm_dtype_size(GEMM_COMPLEX64), 8);
    cr_expect_eq(gemm_dtype_size(GEMM_COMPLEX128), 16);
    cr_expect_str_eq(gemm_dtype_name(GEMM_FP64), "fp64");
    cr_expect_str_eq(gemm_dtype_name(GEMM_COMPLEX64), "c64");
    cr_expect_str_eq(gemm_dtype_name(GEMM_COMPLEX128), "c128");
    cr_expect(gemm_dtype_is_complex(GEMM_COMPLEX64));
    cr_expect(gemm_dtype_is_complex(GEMM_COMPLEX128));
    cr_expect_not(gemm_dtype_is_complex(GEMM_FP64));
    static const struct {
        const char *s;
        gemm_dtype t;
    } names[] = {
        {"fp64", GEMM_FP64},
        {"double", GEMM_FP64},
        {"Float64", GEMM_FP64},
        {"c64", GEMM_COMPLEX64},
        {"complex64", GEMM_COMPLEX64},
        {"C128", GEMM_COMPLEX128},
        {"complex128", GEMM_COMPLEX128},
    };
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
        gemm_dtype t;
        cr_expect_eq(gemm_dtype_parse(names[i].s, &t), GEMM_OK, "%s",
                     names[i].s);
        cr_expect_eq(t, names[i].t, "%s", names[i].s);
    }
}

static uint16_t d_to16(double d, gemm_dtype t)
{
    uint16_t h;
    cr_assert_eq(gemm_convert(&h, t, &d, GEMM_FP64, 1), GEMM_OK);
    return h;
}

Test(dtype, fp64_conversions)
{
    /* 1 + 2^-8 + 2^-40 is just above bf16's tie: it rounds up. Through a
     * plain fp32 rounding it would become the tie 1 + 2^-8 and round to
     * even (down): the conversion must round once. */
    cr_expect_eq(d_to16(1.0 + 0x1p-8 + 0x1p-40, GEMM_BF16), 0x3f81);
    cr_expect_eq(d_to16(1.0 + 0x1p-8, GEMM_BF16), 0x3f80, "the tie: even");
    cr_expect_eq(d_to16(1.0 + 0x1p-11 + 0x1p-45, GEMM_FP16), 0x3c01);
    cr_expect_eq(d_to16(-1.0 - 0x1p-11 - 0x1p-45, GEMM_FP16), 0xbc01);
    cr_expect_eq(d_to16(1e300, GEMM_BF16), 0x7f80, "overflow: inf");
    cr_expect_eq(d_to16(-1e300, GEMM_FP16), 0xfc00, "overflow: -inf");
    cr_expect_eq(d_to16(1e-300, GEMM_BF16), 0x0000, "underflow: 0");
    cr_expect_eq(d_to16(0x1p-24 * 1.5, GEMM_FP16), 0x0002, "tie to even");
    cr_expect_eq(d_to16(0x1p-24 * (1.5 - 0x1p-30), GEMM_FP16), 0x0001);
    cr_expect(isnan(from16(d_to16(NAN, GEMM_BF16), GEMM_BF16)));
    double d[3] = {1.0 / 3.0, -1e40, 0x1p-149};
    float f[3];
    cr_assert_eq(gemm_convert(f, GEMM_FP32, d, GEMM_FP64, 3), GEMM_OK);
    cr_expect_eq(f[0], (float)(1.0 / 3.0));
    cr_expect(isinf(f[1]) && f[1] < 0);
    cr_expect_eq(f[2], 0x1p-149f);
    uint16_t h = 0x3555; /* fp16 -> fp64 exact */
    cr_assert_eq(gemm_convert(d, GEMM_FP64, &h, GEMM_FP16, 1), GEMM_OK);
    cr_expect_eq(d[0], 0.33325195312500);
}

Test(dtype, complex_conversions)
{
    double z[4] = {1.0 / 3.0, -2.5, 1e-50, 7.0};
    float c[4];
    double back[4];
    cr_assert_eq(gemm_convert(c, GEMM_COMPLEX64, z, GEMM_COMPLEX128, 2),
                 GEMM_OK);
    cr_expect_eq(c[0], (float)(1.0 / 3.0));
    cr_expect_eq(c[1], -2.5f);
    cr_expect_eq(c[2], 0.0f);
    cr_expect_eq(c[3], 7.0f);
    cr_assert_eq(gemm_convert(back, GEMM_COMPLEX128, c, GEMM_COMPLEX64, 2),
                 GEMM_OK);
    for (int i = 0; i < 4; i++)
        cr_expect_eq(back[i], (double)c[i], "part %d", i);
    cr_expect_eq(gemm_convert(c, GEMM_FP32, z, GEMM_COMPLEX128, 2),
                 GEMM_ERR_DTYPE, "complex -> real has no meaning");
    cr_expect_eq(gemm_convert(z, GEMM_COMPLEX128, c, GEMM_FP64, 2),
                 GEMM_ERR_DTYPE, "real -> complex neither");
}

Test(dtype, integer_sizes_names_parse)
{
    cr_expect_eq(gemm_dtype_size(GEMM_INT8), 1);
    cr_expect_eq(gemm_dtype_size(GEMM_INT32), 4);
    cr_expect_str_eq(gemm_dtype_name(GEMM_INT8), "int8");
    cr_expect_str_eq(gemm_dtype_name(GEMM_INT32), "int32");
    cr_expect(gemm_dtype_is_integer(GEMM_INT8));
    cr_expect(gemm_dtype_is_integer(GEMM_INT32));
    cr_expect_not(gemm_dtype_is_integer(GEMM_FP32));
    cr_expect_not(gemm_dtype_is_complex(GEMM_INT8));
    const struct {
        const char *s;
        gemm_dtype t;
    } names[] = {{"int8", GEMM_INT8}, {"I8", GEMM_INT8},
                 {"s8", GEMM_INT8},   {"int32", GEMM_INT32},
                 {"i32", GEMM_INT32}, {"S32", GEMM_INT32}};
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
        gemm_dtype t = GEMM_BF16;
        cr_expect_eq(gemm_dtype_parse(names[i].s, &t), GEMM_OK, "%s",
                     names[i].s);
        cr_expect_eq(t, names[i].t, "%s", names[i].s);
    }
}

Test(dtype, integer_conversions)
{
    int8_t s8[4] = {-128, -1, 0, 127};
    int32_t s32[4];
    cr_assert_eq(gemm_convert(s32, GEMM_INT32, s8, GEMM_INT8, 4), GEMM_OK);
    for (int i = 0; i < 4; i++)
        cr_expect_eq(s32[i], s8[i], "%d", i);
    int32_t big[3] = {INT32_MIN, INT32_MAX, 16777217};
    double d[3];
    float f[4];
    cr_assert_eq(gemm_convert(d, GEMM_FP64, big, GEMM_INT32, 3), GEMM_OK);
    cr_expect_eq(d[0], -2147483648.0);
    cr_expect_eq(d[1], 2147483647.0, "exact in fp64");
    cr_assert_eq(gemm_convert(f, GEMM_FP32, big, GEMM_INT32, 3), GEMM_OK);
    cr_expect_eq(f[1], 2147483648.0f, "rounded to nearest in fp32");
    cr_expect_eq(f[2], 16777216.0f, "2^24 + 1: the tie goes to even");
    cr_assert_eq(gemm_convert(f, GEMM_FP32, s8, GEMM_INT8, 4), GEMM_OK);
    cr_expect_eq(f[0], -128.0f);
    uint16_t h[4];
    cr_assert_eq(gemm_convert(h, GEMM_BF16, s8, GEMM_INT8, 4), GEMM_OK);
    cr_expect_eq(from16(h[3], GEMM_BF16), 127.0f);
    cr_assert_eq(gemm_convert(h, GEMM_FP16, big, GEMM_INT32, 1), GEMM_OK);
    cr_expect(isinf(from16(h[0], GEMM_FP16)), "-2^31 overflows fp16");
    /* no rounding rule into the integers, no narrowing between them */
    cr_expect_eq(gemm_convert(s8, GEMM_INT8, f, GEMM_FP32, 1), GEMM_ERR_DTYPE);
    cr_expect_eq(gemm_convert(s32, GEMM_INT32, d, GEMM_FP64, 1),
                 GEMM_ERR_DTYPE);
    cr_expect_eq(gemm_convert(s8, GEMM_INT8, s32, GEMM_INT32, 1),
                 GEMM_ERR_DTYPE);
    cr_expect_eq(gemm_convert(d, GEMM_COMPLEX64, s8, GEMM_INT8, 1),
                 GEMM_ERR_DTYPE);
    cr_expect_eq(gemm_convert(s32, GEMM_INT32, s32, GEMM_INT8, 1),
                 GEMM_ERR_INVALID, "widening in place");
}
