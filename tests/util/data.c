/*
 * data.c: conversions, random fills, the fp64 reference GEMM and the
 * tolerances used by the integration tests (see data.h). The conversions
 * are written from the formats' definitions with libm, not copied from the
 * client library, so that the tests check the library's too.
 */
#include "util/data.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A binary floating-point format with 1 sign, ebits exponent and mbits
 * mantissa bits, rounded to nearest even (fenv default). */
static uint16_t encode16(double x, int ebits, int mbits)
{
    int bias = (1 << (ebits - 1)) - 1;
    int emin = 1 - bias;
    uint16_t emax = (uint16_t)((1u << ebits) - 1);
    uint16_t sign = signbit(x) ? (uint16_t)(1u << (ebits + mbits)) : 0;
    double ax = fabs(x);

    if (isnan(x))
        return (uint16_t)(sign | (emax << mbits) | (1u << (mbits - 1)));
    if (isinf(x))
        return (uint16_t)(sign | (emax << mbits));
    if (ax < ldexp(1.0, emin)) { /* subnormal (may round up to normal) */
        double q = nearbyint(ldexp(ax, mbits - emin));
        return (uint16_t)(sign | (uint16_t)q);
    }
    int ex;
    frexp(ax, &ex);
    int e = ex - 1; /* ax in [2^e, 2^(e+1)) */
    double q = nearbyint(ldexp(ax, mbits - e));
    if (q >= ldexp(1.0, mbits + 1)) {
        e++;
        q = ldexp(1.0, mbits);
    }
    if (e + bias >= emax)
        return (uint16_t)(sign | (emax << mbits));
    return (uint16_t)(sign | ((uint16_t)(e + bias) << mbits) |
                      ((uint16_t)q - (1u << mbits)));
}

static double decode16(uint16_t h, int ebits, int mbits)
{
    int bias = (1 << (ebits - 1)) - 1;
    unsigned emax = (1u << ebits) - 1;
    unsigned e = (h >> mbits) & emax;
    unsigned m = h & ((1u << mbits) - 1);
    double s = (h >> (ebits + mbits)) & 1 ? -1.0 : 1.0;

    if (e == 0)
        return s * ldexp((double)m, 1 - bias - mbits);
    if (e == emax)
        return m ? NAN : s * INFINITY;
    return s * ldexp((double)(m | (1u << mbits)), (int)e - bias - mbits);
}

uint16_t tu_f32_to_bf16(float f)
{
    return encode16(f, 8, 7);
}
uint16_t tu_f32_to_fp16(float f)
{
    return encode16(f, 5, 10);
}
double tu_bf16_to_f64(uint16_t h)
{
    return decode16(h, 8, 7);
}
double tu_fp16_to_f64(uint16_t h)
{
    return decode16(h, 5, 10);
}

double tu_load(const void *base, gemm_dtype t, size_t i)
{
    switch (t) {
    case GEMM_BF16:
        return tu_bf16_to_f64(((const uint16_t *)base)[i]);
    case GEMM_FP16:
        return tu_fp16_to_f64(((const uint16_t *)base)[i]);
    case GEMM_FP32:
        return ((const float *)base)[i];
    case GEMM_FP64:
        return ((const double *)base)[i];
    default: /* complex: the wide tests have their own (gemm64_test.c) */
        break;
    }
    abort();
}

void tu_store(void *base, gemm_dtype t, size_t i, float v)
{
    switch (t) {
    case GEMM_BF16:
        ((uint16_t *)base)[i] = tu_f32_to_bf16(v);
        return;
    case GEMM_FP16:
        ((uint16_t *)base)[i] = tu_f32_to_fp16(v);
        return;
    case GEMM_FP32:
        ((float *)base)[i] = v;
        return;
    case GEMM_FP64:
        ((double *)base)[i] = v;
        return;
    default:
        break;
    }
    abort();
}

uint64_t tu_rand(uint64_t *s)
{
    uint64_t x = *s;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    *s = x;
    return x * 0x2545F4914F6CDD1DULL;
}

double tu_rand_uniform(uint64_t *s)
{
    return (double)(tu_rand(s) >> 11) * 0x1p-52 - 1.0;
}

void tu_fill(void *base, gemm_dtype t, size_t rows, size_t cols, size_t ld,
             uint64_t *s)
{
    for (size_t r = 0; r < rows; r++) {
        for (size_t c = 0; c < cols; c++) {
            size_t i = r * ld + c;
            do {
                tu_store(base, t, i, (float)tu_rand_uniform(s));
            } while (tu_load(base, t, i) == 0.0);
        }
    }
}

size_t tu_extent(size_t rows, size_t cols, size_t ld)
{
    return rows == 0 ? 0 : (rows - 1) * ld + cols;
}

void tu_shape(const gemm_op *op, char which, size_t *rows, size_t *cols,
              size_t *ld)
{
    size_t r, c, l;
    switch (which) {
    case 'a':
        r = op->trans_a ? op->k : op->m;
        c = op->trans_a ? op->m : op->k;
        l = op->a.ld;
        break;
    case 'b':
        r = op->trans_b ? op->n : op->k;
        c = op->trans_b ? op->k : op->n;
        l = op->b.ld;
        break;
    case 'c':
        r = op->m;
        c = op->n;
        l = op->c.ld;
        break;
    default:
        r = op->m;
        c = op->n;
        l = op->d.ld;
        break;
    }
    *rows = r;
    *cols = c;
    *ld = l ? l : c;
}

static double op_a(const gemm_op *op, const void *a, size_t lda, size_t i,
                   size_t l)
{
    return tu_load(a, op->ab_type, op->trans_a ? l * lda + i : i * lda + l);
}

static double op_b(const gemm_op *op, const void *b, size_t ldb, size_t l,
                   size_t j)
{
    return tu_load(b, op->ab_type, op->trans_b ? j * ldb + l : l * ldb + j);
}

void tu_ref_gemm(const gemm_op *op, const void *a, const void *b, const void *c,
                 double *ref, double *scale)
{
    size_t m = op->m, n = op->n, k = op->k, r, cc, lda, ldb, ldc;
    tu_shape(op, 'a', &r, &cc, &lda);
    tu_shape(op, 'b', &r, &cc, &ldb);
    tu_shape(op, 'c', &r, &cc, &ldc);
    double *ad = malloc(m * k * sizeof(double));
    double *bd = malloc(k * n * sizeof(double));
    if (ad == NULL || bd == NULL)
        abort();
    for (size_t i = 0; i < m; i++)
        for (size_t l = 0; l < k; l++)
            ad[i * k + l] = op_a(op, a, lda, i, l);
    for (size_t l = 0; l < k; l++)
        for (size_t j = 0; j < n; j++)
            bd[l * n + j] = op_b(op, b, ldb, l, j);
    for (size_t i = 0; i < m; i++) {
        double *acc = ref + i * n, *sc = scale + i * n;
        for (size_t j = 0; j < n; j++)
            acc[j] = sc[j] = 0.0;
        for (size_t l = 0; l < k; l++) {
            double x = ad[i * k + l], ax = fabs(x);
            const double *brow = bd + l * n;
            for (size_t j = 0; j < n; j++) {
                acc[j] += x * brow[j];
                sc[j] += ax * fabs(brow[j]);
            }
        }
        for (size_t j = 0; j < n; j++) {
            acc[j] *= op->alpha;
            sc[j] *= fabs(op->alpha);
            if (op->beta != 0.0f) {
                double cv = tu_load(c, op->cd_type, i * ldc + j);
                acc[j] += (double)op->beta * cv;
                sc[j] += fabs((double)op->beta * cv);
            }
        }
    }
    free(ad);
    free(bd);
}

void tu_ref_elem(const gemm_op *op, const void *a, const void *b, const void *c,
                 size_t i, size_t j, double *ref, double *scale)
{
    size_t r, cc, lda, ldb, ldc;
    tu_shape(op, 'a', &r, &cc, &lda);
    tu_shape(op, 'b', &r, &cc, &ldb);
    tu_shape(op, 'c', &r, &cc, &ldc);
    double acc = 0, sc = 0;
    for (size_t l = 0; l < op->k; l++) {
        double p = op_a(op, a, lda, i, l) * op_b(op, b, ldb, l, j);
        acc += p;
        sc += fabs(p);
    }
    acc *= op->alpha;
    sc *= fabs(op->alpha);
    if (op->beta != 0.0f) {
        double cv = tu_load(c, op->cd_type, i * ldc + j);
        acc += (double)op->beta * cv;
        sc += fabs((double)op->beta * cv);
    }
    *ref = acc;
    *scale = sc;
}

void tu_tolerance(const gemm_op *op, double *tol_rel, double *tol_abs)
{
    /* fp32 accumulation over k products plus alpha/beta: a generous
     * (k + 4) * 2^-23 relative to the sum of absolute values; the output
     * type's rounding adds its epsilon (and fp16's subnormal spacing). */
    double rel = ((double)op->k + 4.0) * 0x1p-23, abs_ = 1e-30;
    /* fp32 inputs: tf32 rounds (or truncates) each input to 10 mantissa
     * bits, up to 2^-9 per product; the fp32 precision is 3xTF32 on the
     * GPU, whose split leaves a few 2^-21 per product. */
    if (op->ab_type == GEMM_FP32)
        rel += op->precision == GEMM_PRECISION_TF32 ? 0x1p-9 : 0x1p-17;
    if (op->cd_type == GEMM_BF16)
        rel += 0x1p-8;
    else if (op->cd_type == GEMM_FP16) {
        rel += 0x1p-11;
        abs_ = 0x1p-24;
    }
    *tol_rel = rel;
    *tol_abs = abs_;
}

bool tu_compare(const gemm_op *op, const void *d, const double *ref,
                const double *scale, char *why, size_t whylen)
{
    size_t r, c, ldd;
    double tr, ta, worst = 0;
    size_t wi = 0, wj = 0;
    bool ok = true;
    tu_shape(op, 'd', &r, &c, &ldd);
    tu_tolerance(op, &tr, &ta);
    for (size_t i = 0; i < op->m; i++) {
        for (size_t j = 0; j < op->n; j++) {
            double got = tu_load(d, op->cd_type, i * ldd + j);
            double want = ref[i * op->n + j];
            double bound = tr * scale[i * op->n + j] + ta;
            double ratio = fabs(got - want) / bound;
            if (isnan(got) || isnan(ratio))
                ratio = INFINITY;
            if (ratio > 1.0)
                ok = false;
            if (ratio > worst ||
                (ok == false && wi == 0 && wj == 0 && worst == 0)) {
                worst = ratio;
                wi = i;
                wj = j;
            }
        }
    }
    if (!ok && why != NULL) {
        snprintf(why, whylen,
                 "D[%zu][%zu] = %.9g, reference %.9g (error %.3g x the "
                 "tolerance; m=%llu n=%llu k=%llu %s->%s ta=%d tb=%d "
                 "alpha=%g beta=%g)",
                 wi, wj, tu_load(d, op->cd_type, wi * ldd + wj),
                 ref[wi * op->n + wj], worst, (unsigned long long)op->m,
                 (unsigned long long)op->n, (unsigned long long)op->k,
                 gemm_dtype_name(op->ab_type), gemm_dtype_name(op->cd_type),
                 op->trans_a, op->trans_b, op->alpha, op->beta);
    }
    return ok;
}
