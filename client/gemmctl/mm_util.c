/*
 * mm_util.c: what both halves of `gemmctl mm` use, one GEMM (mm.c) and a
 * stack of them (mm_stack.c): buffers, loading .npy inputs into a
 * request's type, the default type of file inputs, --check's tolerances
 * and the report on stderr.
 */
#include "mm.h"

#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

/* fp64 and the complex types: computed in their own type, checked in long
 * double. */
bool mm_wide_type(gemm_dtype t)
{
    return t == GEMM_FP64 || gemm_dtype_is_complex(t);
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

/* The --check tolerance of a GEMM and the name of what sets it. */
double mm_tolerance(gemm_dtype ab, gemm_dtype cd, gemm_precision p,
                    const char **what)
{
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
 * complex file for a real type is an error (message printed). */
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
    gemm_convert(dst, dt, f->data, f->dtype, count);
    return EXIT_OK;
}

/* The default A/B type of file inputs: complex if one is (complex128 if
 * one is double precision), fp16 or bf16 if both are float16 or both
 * bfloat16, fp64 if both are float64, else fp32. */
gemm_dtype mm_file_type(const npy_matrix *A, const npy_matrix *B)
{
    bool cplx =
        gemm_dtype_is_complex(A->dtype) || gemm_dtype_is_complex(B->dtype);
    bool dbl = A->dtype == GEMM_FP64 || A->dtype == GEMM_COMPLEX128 ||
               B->dtype == GEMM_FP64 || B->dtype == GEMM_COMPLEX128;
    if (cplx)
        return dbl ? GEMM_COMPLEX128 : GEMM_COMPLEX64;
    if (A->dtype == B->dtype &&
        (A->dtype == GEMM_FP16 || A->dtype == GEMM_BF16 || dbl))
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
