/*
 * dtype.c: element types and conversions between bf16, fp16 and fp32,
 * round-to-nearest-even, NaN preserved; the names of the precisions. Shared by
 * the client library (to fill buffers, gemmctl's .npy files) and the daemon's
 * CPU backend.
 */
#include <gemm/gemm.h>

#include <string.h>
#include <strings.h>

GEMM_API size_t gemm_dtype_size(gemm_dtype t)
{
    switch (t) {
    case GEMM_BF16:
    case GEMM_FP16:
        return 2;
    case GEMM_FP32:
        return 4;
    }
    return 0;
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
    }
    return "?";
}

GEMM_API int gemm_dtype_parse(const char *s, gemm_dtype *out)
{
    static const struct {
        const char *name;
        gemm_dtype t;
    } names[] = {
        {"bf16", GEMM_BF16},    {"bfloat16", GEMM_BF16}, {"fp16", GEMM_FP16},
        {"f16", GEMM_FP16},     {"half", GEMM_FP16},     {"float16", GEMM_FP16},
        {"fp32", GEMM_FP32},    {"f32", GEMM_FP32},      {"float", GEMM_FP32},
        {"float32", GEMM_FP32},
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

static inline float load_f32(const void *p, gemm_dtype t, size_t i)
{
    switch (t) {
    case GEMM_BF16:
        return bf16_to_f32(((const uint16_t *)p)[i]);
    case GEMM_FP16:
        return fp16_to_f32(((const uint16_t *)p)[i]);
    case GEMM_FP32:
        return ((const float *)p)[i];
    }
    return 0.0f;
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
    }
    return GEMM_OK;
}
