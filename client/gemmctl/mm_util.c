/*
 * mm_util.c: what both halves of `gemmctl mm` use, one GEMM (mm.c) and a
 * stack of them (mm_stack.c): buffers, loading .npy inputs into a
 * request's type, the default type of file inputs, --check's tolerances
 * and the report on stderr.
 */
#include "mm.h"

#include <stdarg.h>
#include <stdbool.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

/* fp64 and the complex types: computed in their own type, checked in long
 * double. */
bool mm_wide_type(gemm_dtype t)
{
    return t == GEMM_FP64 || gemm_dtype_is_complex(t);
}

gemm_dtype mm_cd_default(gemm_dtype ab)
{
    return ab == GEMM_INT8 ? GEMM_INT32 : ab;
}

gemm_dtype mm_out_default(gemm_dtype cd)
{
    return cd == GEMM_FP16 || cd == GEMM_INT32 || mm_wide_type(cd) ? cd
                                                                   : GEMM_FP32;
}

bool mm_scalars64(gemm_dtype ab)
{
    return mm_wide_type(ab) || ab == GEMM_INT8;
}

int mm_check_out_type(gemm_dtype outt, gemm_dtype cd)
{
    if (gemm_dtype_is_complex(outt) != gemm_dtype_is_complex(cd))
        return ctl_error(EXIT_USAGE,
                         "mm: --out-dtype %s for a %s D: a complex D is "
                         "written as c64 or c128, a real one as a real type",
                         gemm_dtype_name(outt), gemm_dtype_name(cd));
    if (gemm_dtype_is_integer(outt) && outt != cd)
        return ctl_error(EXIT_USAGE,
                         "mm: --out-dtype %s for a %s D: only an int32 D is "
                         "written as int32 (gemmctl does not round into "
                         "integers)",
                         gemm_dtype_name(outt), gemm_dtype_name(cd));
    return EXIT_OK;
}

uint64_t mm_s8_mismatches(const int8_t *A, const int8_t *B, const int32_t *C,
                          const int32_t *D, uint64_t m, uint64_t n, uint64_t k,
                          bool ta, bool tb, int32_t alpha, int32_t beta,
                          uint64_t row_step, uint64_t *checked)
{
    uint64_t bad = 0, seen = 0;
    if (row_step == 0)
        row_step = 1;
    for (uint64_t i = 0; i < m; i += row_step)
        for (uint64_t q = 0; q < n; q++, seen++) {
            int64_t acc = 0;
            for (uint64_t l = 0; l < k; l++)
                acc += (int64_t)(ta ? A[l * m + i] : A[i * k + l]) *
                       (tb ? B[q * k + l] : B[l * n + q]);
            /* uint64 wraps: the same residue modulo 2^32 as int32 */
            uint64_t r = (uint64_t)(int64_t)alpha * (uint64_t)acc;
            if (C != NULL)
                r += (uint64_t)(int64_t)beta * (uint64_t)(int64_t)C[i * n + q];
            if (D[i * n + q] != (int32_t)(uint32_t)r)
                bad++;
        }
    *checked = seen;
    return bad;
}

/* Allocates a buffer for count elements of type t. */
int mm_alloc(gemm_client *c, size_t count, gemm_dtype t, const char *name,
             gemm_buffer **out)
{
    size_t esize = gemm_dtype_size(t);
    if (count > SIZE_MAX / esize)
        return ctl_error(EXIT_RUNTIME, "mm: %s is too large", name);
    int rv = gemm_buffer_alloc(c, count * esize, out);
    if (rv != GEMM_OK) {
        char what[64];
        snprintf(what, sizeof(what), "mm: buffer for %s", name);
        return ctl_fail(rv, what);
    }
    return EXIT_OK;
}

/* The --check tolerance of a GEMM and the name of what sets it. fp64
 * through the Ozaki-II emulation with fewer moduli than the ~15 that
 * match DGEMM: each modulus (about 8 bits of the product's range, split
 * between A and B) fewer keeps about 4 bits less of every input, so the
 * tolerance grows 16x per modulus (an estimate from the method, not a
 * bound). */
double mm_tolerance(gemm_dtype ab, gemm_dtype cd, gemm_precision p,
                    unsigned moduli, const char **what)
{
    if (ab == GEMM_INT8)
        return *what = "int8, exact", 0.0;
    if (ab == GEMM_FP64 && moduli != 0 && moduli < 15)
        return *what = "fp64 emulated with fewer moduli",
               fmin(1e-12 * pow(16.0, 15.0 - (double)moduli), 1.0);
    if (ab == GEMM_FP32 && moduli != 0 && moduli < 7)
        return *what = "fp32 emulated with fewer moduli",
               fmin(1e-5 * pow(16.0, 7.0 - (double)moduli), 1.0);
    if (ab == GEMM_FP64 || ab == GEMM_COMPLEX128)
        return *what = gemm_dtype_name(ab), 1e-12;
    if (ab == GEMM_COMPLEX64)
        return *what = "c64", 1e-5;
    if (ab == GEMM_BF16 || cd == GEMM_BF16)
        return *what = "bf16", 1e-2;
    if (ab == GEMM_FP16 || cd == GEMM_FP16)
        return *what = "fp16", 2e-3;
    if (p == GEMM_PRECISION_TF32)
        return *what = "tf32", 2e-3;
    return *what = "fp32", 1e-5;
}

/* Copies count elements of a file's type st into a buffer of type dt: as
 * gemm_convert, and real files into complex buffers (imaginary 0). A
 * complex file for a real type, or a file that would have to be rounded
 * into an integer type, is an error (message printed). */
int mm_load_input(const char *name, void *dst, gemm_dtype dt,
                  const npy_matrix *f, size_t count)
{
    bool cd = gemm_dtype_is_complex(dt), cs = gemm_dtype_is_complex(f->dtype);
    if (cs && !cd)
        return ctl_error(EXIT_USAGE,
                         "mm: %s is complex (%s) but the GEMM is %s: give "
                         "--dtype c64 or c128",
                         name, f->descr, gemm_dtype_name(dt));
    if (cd && !cs) { /* real parts, then spread out with imaginary 0 */
        gemm_dtype part = dt == GEMM_COMPLEX64 ? GEMM_FP32 : GEMM_FP64;
        size_t ps = gemm_dtype_size(part);
        char *p = dst;
        gemm_convert(p + count * ps, part, f->data, f->dtype, count);
        for (size_t i = 0; i < count; i++) {
            memmove(p + 2 * i * ps, p + (count + i) * ps, ps);
            memset(p + (2 * i + 1) * ps, 0, ps);
        }
        return EXIT_OK;
    }
    if (gemm_convert(dst, dt, f->data, f->dtype, count) != GEMM_OK)
        return ctl_error(EXIT_USAGE,
                         "mm: %s is %s but the GEMM's %s operands are %s: "
                         "gemmctl does not round or narrow into integers "
                         "(save it as int8, e.g. a.astype(numpy.int8), or "
                         "give --dtype fp32)",
                         name, npy_type_name(f->dtype), name,
                         gemm_dtype_name(dt));
    return EXIT_OK;
}

/* The default A/B type of file inputs: complex if one is (complex128 if
 * one is double precision), fp16, bf16 or int8 if both are float16, both
 * bfloat16 or both int8, fp64 if both are float64, else fp32. */
gemm_dtype mm_file_type(const npy_matrix *A, const npy_matrix *B)
{
    bool cplx =
        gemm_dtype_is_complex(A->dtype) || gemm_dtype_is_complex(B->dtype);
    bool dbl = A->dtype == GEMM_FP64 || A->dtype == GEMM_COMPLEX128 ||
               B->dtype == GEMM_FP64 || B->dtype == GEMM_COMPLEX128;
    if (cplx)
        return dbl ? GEMM_COMPLEX128 : GEMM_COMPLEX64;
    if (A->dtype == B->dtype &&
        (A->dtype == GEMM_FP16 || A->dtype == GEMM_BF16 ||
         A->dtype == GEMM_INT8 || dbl))
        return A->dtype;
    return GEMM_FP32;
}

/* The report (what ran, times, rates, where D went): on stderr, so that
 * stdout carries only D (and --check's verdict); nothing with --quiet. */
void mm_note(const struct mm_args *a, const char *fmt, ...)
{
    va_list ap;
    if (a->quiet)
        return;
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
}
