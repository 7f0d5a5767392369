/*
 * dtype.c: element types and conversions between bf16, fp16, fp32 and
 * fp64 (and between complex64 and complex128, part by part),
 * round-to-nearest-even, NaN preserved, and from int8 and int32 to the
 * wider types; the names of the precisions.
 * Shared by the client library (to fill buffers, gemmctl's .npy files) and
 * the daemon's CPU backend.
 */
#include <gemm/types.h>

#include <string.h>
#include <strings.h>

GEMM_API size_t gemm_dtype_size(gemm_dtype t)
{
    switch (t) {
    case GEMM_INT8:
        return 1;
    case GEMM_BF16:
    case GEMM_FP16:
        return 2;
    case GEMM_FP32:
    case GEMM_INT32:
        return 4;
    case GEMM_FP64:
    case GEMM_COMPLEX64:
        return 8;
    case GEMM_COMPLEX128:
        return 16;
    }
    return 0;
}

GEMM_API bool gemm_dtype_is_complex(gemm_dtype t)
{
    return t == GEMM_COMPLEX64 || t == GEMM_COMPLEX128;
}

GEMM_API bool gemm_dtype_is_integer(gemm_dtype t)
{
    return t == GEMM_INT8 || t == GEMM_INT32;
}

GEMM_API const char *gemm_dtype_name(gemm_dtype t)
{
    switch (t) {
    case GEMM_BF16:
        return "bf16";
    case GEMM_FP16:
        return "fp16";
    case GEMM_FP32:
        return "fp32";
    case GEMM_FP64:
        return "fp64";
    case GEMM_COMPLEX64:
        return "c64";
    case GEMM_COMPLEX128:
        return "c128";
    case GEMM_INT8:
        return "int8";
    case GEMM_INT32:
        return "int32";
    }
    return "?";
}

GEMM_API int gemm_dtype_parse(const char *s, gemm_dtype *out)
{
    static const struct {
        const char *name;
        gemm_dtype t;
    } names[] = {
        {"bf16", GEMM_BF16},       {"bfloat16", GEMM_BF16},
        {"fp16", GEMM_FP16},       {"f16", GEMM_FP16},
        {"half", GEMM_FP16},       {"float16", GEMM_FP16},
        {"fp32", GEMM_FP32},       {"f32", GEMM_FP32},
        {"float", GEMM_FP32},      {"float32", GEMM_FP32},
        {"fp64", GEMM_FP64},       {"f64", GEMM_FP64},
        {"double", GEMM_FP64},     {"float64", GEMM_FP64},
        {"c64", GEMM_COMPLEX64},   {"complex64", GEMM_COMPLEX64},
        {"c128", GEMM_COMPLEX128}, {"complex128", GEMM_COMPLEX128},
        {"int8", GEMM_INT8},       {"i8", GEMM_INT8},
        {"s8", GEMM_INT8},         {"int32", GEMM_INT32},
        {"i32", GEMM_INT32},       {"s32", GEMM_INT32},
    };
    if (s == NULL || out == NULL)
        return GEMM_ERR_INVALID;
    for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
        if (strcasecmp(s, names[i].name) == 0) {
            *out = names[i].t;
            return GEMM_OK;
        }
    }
    return GEMM_ERR_DTYPE;
}

GEMM_API const char *gemm_precision_name(gemm_precision p)
{
    switch (p) {
    case GEMM_PRECISION_DEFAULT:
        return "default";
    case GEMM_PRECISION_TF32:
        return "tf32";
    case GEMM_PRECISION_FP32:
        return "fp32";
    }
    return "?";
}

GEMM_API int gemm_precision_parse(const char *s, gemm_precision *out)
{
    static const gemm_precision all[] = {
        GEMM_PRECISION_DEFAULT, GEMM_PRECISION_TF32, GEMM_PRECISION_FP32};
    if (s == NULL || out == NULL)
        return GEMM_ERR_INVALID;
    for (size_t i = 0; i < sizeof(all) / sizeof(all[0]); i++) {
        if (strcasecmp(s, gemm_precision_name(all[i])) == 0) {
            *out = all[i];
            return GEMM_OK;
        }
    }
    return GEMM_ERR_INVALID;
}

static inline uint32_t f32_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

static inline float bits_f32(uint32_t u)
{
    float f;
    memcpy(&f, &u, 4);
    return f;
}

static inline uint16_t f32_to_bf16(float f)
{
    uint32_t u = f32_bits(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) /* NaN: keep it quiet and NaN */
        return (uint16_t)((u >> 16) | 0x0040u);
    u += 0x7fffu + ((u >> 16) & 1u); /* round to nearest even */
    return (uint16_t)(u >> 16);
}

static inline float bf16_to_f32(uint16_t h)
{
    return bits_f32((uint32_t)h << 16);
}

static inline float fp16_to_f32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000u) << 16;
    uint32_t exp = (h >> 10) & 0x1fu;
    uint32_t man = h & 0x3ffu;
    if (exp == 0x1f) /* inf or NaN */
        return bits_f32(sign | 0x7f800000u | (man << 13));
    if (exp == 0) {
        if (man == 0)
            return bits_f32(sign);
        /* subnormal: value = man * 2^-24 */
        float v = (float)man * 0x1p-24f;
        return sign ? -v : v;
    }
    return bits_f32(sign | ((exp + 112u) << 23) | (man << 13));
}

static inline uint16_t f32_to_fp16(float f)
{
    uint32_t u = f32_bits(f);
    uint16_t sign = (uint16_t)((u >> 16) & 0x8000u);
    uint32_t a = u & 0x7fffffffu;
    if (a > 0x7f800000u) /* NaN */
        return sign | 0x7e00u;
    if (a >= 0x477ff000u) /* rounds to >= 65520: overflow to inf */
        return sign | 0x7c00u;
    if (a < 0x38800000u) { /* below the smallest normal half (2^-14) */
        /* subnormal half: round a/2^-24 to the nearest even integer */
        float v = bits_f32(a) * 0x1p24f;
        uint32_t i = (uint32_t)v;
        float frac = v - (float)i;
        if (frac > 0.5f || (frac == 0.5f && (i & 1u)))
            i++;
        return sign | (uint16_t)i; /* i == 0x400 becomes the smallest normal */
    }
    /* normal: rebias exponent, round mantissa 23 -> 10 bits */
    uint32_t r = a - 0x38000000u; /* exponent 127 -> 15 bias */
    r += 0xfffu + ((r >> 13) & 1u);
    return sign | (uint16_t)(r >> 13);
}

/* fp64 to fp32 rounded to odd: truncated toward zero, the last bit set
 * when inexact. Rounding that to a type of at most 22 significant bits
 * (bf16, fp16) gives the correctly rounded result: one rounding, not
 * two. */
static inline float f64_to_f32_odd(double d)
{
    float f = (float)d;
    if (d != d || (double)f == d)
        return f; /* NaN, exact (infinities included) */
    uint32_t u = f32_bits(f);
    if (!(((double)f < 0 ? -(double)f : (double)f) <= (d < 0 ? -d : d)))
        u--; /* rounded away from zero (inf too): one step back */
    return bits_f32(u | 1u);
}

static inline float load_f32(const void *p, gemm_dtype t, size_t i)
{
    switch (t) {
    case GEMM_BF16:
        return bf16_to_f32(((const uint16_t *)p)[i]);
    case GEMM_FP16:
        return fp16_to_f32(((const uint16_t *)p)[i]);
    case GEMM_FP32:
        return ((const float *)p)[i];
    case GEMM_FP64: /* rounded to odd: only for narrowing to 16 bits */
        return f64_to_f32_odd(((const double *)p)[i]);
    default:
        break;
    }
    return 0.0f;
}

/* Conversions that involve fp64 or the complex types; the caller has
 * checked the types and handled dt == st. */
static int convert_wide(void *dst, gemm_dtype dt, const void *src,
                        gemm_dtype st, size_t n)
{
    bool cs = gemm_dtype_is_complex(st), cd = gemm_dtype_is_complex(dt);
    if (cs != cd)
        return GEMM_ERR_DTYPE; /* real <-> complex: no meaning */
    if (cs) {                  /* complex64 <-> complex128: 2n parts */
        dt = dt == GEMM_COMPLEX64 ? GEMM_FP32 : GEMM_FP64;
        st = st == GEMM_COMPLEX64 ? GEMM_FP32 : GEMM_FP64;
        n *= 2;
    }
    if (dt == GEMM_FP64) { /* widening is exact */
        double *o = dst;
        for (size_t i = 0; i < n; i++)
            o[i] = (double)load_f32(src, st, i);
        return GEMM_OK;
    }
    const double *in = src; /* st == GEMM_FP64 */
    switch (dt) {
    case GEMM_FP32:
        for (size_t i = 0; i < n; i++)
            ((float *)dst)[i] = (float)in[i];
        break;
    case GEMM_BF16:
        for (size_t i = 0; i < n; i++)
            ((uint16_t *)dst)[i] = f32_to_bf16(f64_to_f32_odd(in[i]));
        break;
    case GEMM_FP16:
        for (size_t i = 0; i < n; i++)
            ((uint16_t *)dst)[i] = f32_to_fp16(f64_to_f32_odd(in[i]));
        break;
    default:
        return GEMM_ERR_DTYPE;
    }
    return GEMM_OK;
}

/* Conversions from int8 or int32 (st): to int32 (widening) or to a real
 * float type, exact in fp64 and rounded to nearest even below it. The
 * caller has checked the types and handled dt == st. */
static int convert_int(void *dst, gemm_dtype dt, const void *src, gemm_dtype st,
                       size_t n)
{
    const int8_t *s8 = src;
    const int32_t *s32 = src;
    if (dst == src && gemm_dtype_size(dt) > gemm_dtype_size(st))
        return GEMM_ERR_INVALID; /* would overwrite what it reads next */
    switch (dt) {
    case GEMM_INT32: /* st == GEMM_INT8 */
        for (size_t i = 0; i < n; i++)
            ((int32_t *)dst)[i] = s8[i];
        return GEMM_OK;
    case GEMM_FP64:
        for (size_t i = 0; i < n; i++)
            ((double *)dst)[i] = st == GEMM_INT8 ? s8[i] : s32[i];
        return GEMM_OK;
    case GEMM_FP32: /* rounded to nearest even above 2^24 */
        for (size_t i = 0; i < n; i++)
            ((float *)dst)[i] = st == GEMM_INT8 ? (float)s8[i] : (float)s32[i];
        return GEMM_OK;
    case GEMM_BF16:
    case GEMM_FP16:
        for (size_t i = 0; i < n; i++) {
            double v = st == GEMM_INT8 ? s8[i] : s32[i];
            uint16_t h = dt == GEMM_BF16 ? f32_to_bf16(f64_to_f32_odd(v))
                                         : f32_to_fp16(f64_to_f32_odd(v));
            memcpy((char *)dst + 2 * i, &h, 2);
        }
        return GEMM_OK;
    default:
        return GEMM_ERR_DTYPE;
    }
}

GEMM_API int gemm_convert(void *dst, gemm_dtype dt, const void *src,
                          gemm_dtype st, size_t n)
{
    if (gemm_dtype_size(dt) == 0 || gemm_dtype_size(st) == 0)
        return GEMM_ERR_DTYPE;
    if (n == 0)
        return GEMM_OK;
    if (dst == NULL || src == NULL)
        return GEMM_ERR_INVALID;
    if (dt == st) {
        if (dst != src)
            memmove(dst, src, n * gemm_dtype_size(dt));
        return GEMM_OK;
    }
    if (gemm_dtype_is_integer(dt) || gemm_dtype_is_integer(st))
        return gemm_dtype_is_integer(st) ? convert_int(dst, dt, src, st, n)
                                         : GEMM_ERR_DTYPE;
    if (gemm_dtype_size(dt) > 4 || gemm_dtype_size(st) > 4)
        return convert_wide(dst, dt, src, st, n);
    /* fp32 <-> 16-bit, the common pairs, as plain loops the compiler
     * vectorizes (load_f32's per-element switch kept it from that: ~8 ns
     * an element); the 16-bit <-> 16-bit pairs go through fp32 */
    if (st == GEMM_FP32 && dt == GEMM_BF16) {
        const float *f = src;
        uint16_t *h = dst;
        for (size_t i = 0; i < n; i++)
            h[i] = f32_to_bf16(f[i]);
        return GEMM_OK;
    }
    if (st == GEMM_BF16 && dt == GEMM_FP32) {
        const uint16_t *h = src;
        float *f = dst;
        for (size_t i = 0; i < n; i++)
            f[i] = bf16_to_f32(h[i]);
        return GEMM_OK;
    }
    if (st == GEMM_FP32 && dt == GEMM_FP16) {
        const float *f = src;
        uint16_t *h = dst;
        for (size_t i = 0; i < n; i++)
            h[i] = f32_to_fp16(f[i]);
        return GEMM_OK;
    }
    switch (dt) {
    case GEMM_FP32:
        for (size_t i = 0; i < n; i++)
            ((float *)dst)[i] = load_f32(src, st, i);
        break;
    case GEMM_BF16:
        for (size_t i = 0; i < n; i++)
            ((uint16_t *)dst)[i] = f32_to_bf16(load_f32(src, st, i));
        break;
    case GEMM_FP16:
        for (size_t i = 0; i < n; i++)
            ((uint16_t *)dst)[i] = f32_to_fp16(load_f32(src, st, i));
        break;
    default:
        return GEMM_ERR_DTYPE;
    }
    return GEMM_OK;
}
