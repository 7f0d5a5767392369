/*
 * wheel.c: numpy's own BLAS. numpy from pip or conda carries a renamed
 * 64-bit-integer OpenBLAS (numpy.libs/libscipy_openblas64_-*.so) and calls
 * it by its own names (scipy_cblas_dgemm64_, ...), never the standard ones
 * libgemmblas exports. Two things live here:
 *
 * - Its four CBLAS GEMMs, scipy_cblas_?gemm64_: libgemmblas exports them
 *   too, so a preloaded libgemmblas is found first (the global scope comes
 *   before the extension module's own) and sends the GEMMs the policy
 *   sends to gemmd; everything else (below GEMMBLAS_MIN_FLOPS, argument
 *   errors, any failure) goes on to the wheel's function itself, found in
 *   the loaded library (dl_iterate_phdr, then dlopen RTLD_NOLOAD).
 *   numpy's other routines (syrk for a @ a.T, gemv, dot) stay in its BLAS.
 * - A notice at exit, once, when such a library was loaded (a
 *   libscipy_openblas*, or a libopenblas* under site-packages,
 *   dist-packages or a wheel's *.libs directory). One with names that
 *   libgemmblas does not take (an older wheel's cblas_dgemm64_, say) is
 *   always reported, with what to use instead (the gemmd Python package,
 *   or Debian's numpy); for one whose GEMMs came here, GEMMBLAS_VERBOSE=1
 *   says how many went to gemmd. numpy loads its BLAS after libgemmblas,
 *   so exit is the first moment it can be told for sure.
 */
#include "gemmblas.h"

#include <dlfcn.h>
#include <limits.h>
#include <link.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static pthread_once_t wheel_once = PTHREAD_ONCE_INIT;
static void *wheel_h;            /* the wheel's BLAS; NULL if none */
static atomic_ulong wheel_calls; /* its GEMMs that came here */
static atomic_ulong wheel_sent;  /* of them, run by gemmd */

/* Whether path names a BLAS that a wheel or conda package brought. */
static bool wheel_blas(const char *path)
{
    const char *base = strrchr(path, '/');
    base = base != NULL ? base + 1 : path;
    if (strncmp(base, "libscipy_openblas", 17) == 0)
        return true;
    if (strncmp(base, "libopenblas", 11) != 0)
        return false;
    return strstr(path, "/site-packages/") != NULL ||
           strstr(path, "/dist-packages/") != NULL ||
           strstr(path, ".libs/") != NULL;
}

/* dl_iterate_phdr callback: copies the first such path into data (a
 * PATH_MAX buffer) and stops. */
static int find_wheel_blas(struct dl_phdr_info *info, size_t size, void *data)
{
    (void)size;
    if (info->dlpi_name == NULL || !wheel_blas(info->dlpi_name))
        return 0;
    snprintf(data, PATH_MAX, "%s", info->dlpi_name);
    return 1;
}

static void wheel_open(void)
{
    char path[PATH_MAX] = "";
    dl_iterate_phdr(find_wheel_blas, path);
    if (path[0] != '\0')
        wheel_h = dlopen(path, RTLD_LAZY | RTLD_NOLOAD);
}

/* The wheel's own function `name`, or NULL when no wheel BLAS is loaded
 * (or it lacks it). Any thread. */
static void *wheel_sym(const char *name)
{
    pthread_once(&wheel_once, wheel_open);
    return wheel_h != NULL ? dlsym(wheel_h, name) : NULL;
}

/*
 * Sends one of the wheel's CBLAS GEMMs to gemmd when the policy says so.
 * Returns true when C holds the result; false (C untouched) when the
 * wheel's own function must run: an argument error (it reports it), no
 * product to compute, below the threshold or any failure. Any thread.
 */
static bool wheel_offload(gb_type t, int layout, int ta, int tb, int64_t m,
                          int64_t n, int64_t k, const void *alpha,
                          const void *a, int64_t lda, const void *b,
                          int64_t ldb, const void *beta, void *c, int64_t ldc)
{
    atomic_fetch_add(&wheel_calls, 1);
    if (gb_check_cblas(layout, ta, tb, m, n, k, lda, ldb, ldc) != 0)
        return false;
    if (m == 0 || n == 0 || k == 0 || gb_is_zero(t, alpha))
        return false;
    gb_gemm g;
    gb_from_cblas(&g, t, layout, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta,
                  c, ldc);
    if (!gb_offload(&g))
        return false;
    atomic_fetch_add(&wheel_sent, 1);
    return true;
}

/* Without the wheel's function (not expected: only its callers call
 * these names), a checked call still computes, here. */
static void wheel_fallback(gb_type t, int layout, int ta, int tb, int64_t m,
                           int64_t n, int64_t k, const void *alpha,
                           const void *a, int64_t lda, const void *b,
                           int64_t ldb, const void *beta, void *c, int64_t ldc)
{
    if (gb_check_cblas(layout, ta, tb, m, n, k, lda, ldb, ldc) != 0)
        return;
    gb_gemm g;
    gb_from_cblas(&g, t, layout, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta,
                  c, ldc);
    gb_run(&g);
}

typedef void (*wheel_sgemm)(int, int, int, int64_t, int64_t, int64_t, float,
                            const float *, int64_t, const float *, int64_t,
                            float, float *, int64_t);
typedef void (*wheel_dgemm)(int, int, int, int64_t, int64_t, int64_t, double,
                            const double *, int64_t, const double *, int64_t,
                            double, double *, int64_t);
typedef void (*wheel_zgemm)(int, int, int, int64_t, int64_t, int64_t,
                            const void *, const void *, int64_t, const void *,
                            int64_t, const void *, void *, int64_t);

/* the exported names (numpy's scipy-openblas64 interface) */
void scipy_cblas_sgemm64_(int layout, int ta, int tb, int64_t m, int64_t n,
                          int64_t k, float alpha, const float *a, int64_t lda,
                          const float *b, int64_t ldb, float beta, float *c,
                          int64_t ldc);
void scipy_cblas_dgemm64_(int layout, int ta, int tb, int64_t m, int64_t n,
                          int64_t k, double alpha, const double *a, int64_t lda,
                          const double *b, int64_t ldb, double beta, double *c,
                          int64_t ldc);
void scipy_cblas_cgemm64_(int layout, int ta, int tb, int64_t m, int64_t n,
                          int64_t k, const void *alpha, const void *a,
                          int64_t lda, const void *b, int64_t ldb,
                          const void *beta, void *c, int64_t ldc);
void scipy_cblas_zgemm64_(int layout, int ta, int tb, int64_t m, int64_t n,
                          int64_t k, const void *alpha, const void *a,
                          int64_t lda, const void *b, int64_t ldb,
                          const void *beta, void *c, int64_t ldc);

void scipy_cblas_sgemm64_(int layout, int ta, int tb, int64_t m, int64_t n,
                          int64_t k, float alpha, const float *a, int64_t lda,
                          const float *b, int64_t ldb, float beta, float *c,
                          int64_t ldc)
{
    if (wheel_offload(GB_S, layout, ta, tb, m, n, k, &alpha, a, lda, b, ldb,
                      &beta, c, ldc))
        return;
    wheel_sgemm f = (wheel_sgemm)wheel_sym("scipy_cblas_sgemm64_");
    if (f != NULL)
        f(layout, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
    else
        wheel_fallback(GB_S, layout, ta, tb, m, n, k, &alpha, a, lda, b, ldb,
                       &beta, c, ldc);
}

void scipy_cblas_dgemm64_(int layout, int ta, int tb, int64_t m, int64_t n,
                          int64_t k, double alpha, const double *a, int64_t lda,
                          const double *b, int64_t ldb, double beta, double *c,
                          int64_t ldc)
{
    if (wheel_offload(GB_D, layout, ta, tb, m, n, k, &alpha, a, lda, b, ldb,
                      &beta, c, ldc))
        return;
    wheel_dgemm f = (wheel_dgemm)wheel_sym("scipy_cblas_dgemm64_");
    if (f != NULL)
        f(layout, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
    else
        wheel_fallback(GB_D, layout, ta, tb, m, n, k, &alpha, a, lda, b, ldb,
                       &beta, c, ldc);
}

void scipy_cblas_cgemm64_(int layout, int ta, int tb, int64_t m, int64_t n,
                          int64_t k, const void *alpha, const void *a,
                          int64_t lda, const void *b, int64_t ldb,
                          const void *beta, void *c, int64_t ldc)
{
    if (wheel_offload(GB_C, layout, ta, tb, m, n, k, alpha, a, lda, b, ldb,
                      beta, c, ldc))
        return;
    wheel_zgemm f = (wheel_zgemm)wheel_sym("scipy_cblas_cgemm64_");
    if (f != NULL)
        f(layout, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
    else
        wheel_fallback(GB_C, layout, ta, tb, m, n, k, alpha, a, lda, b, ldb,
                       beta, c, ldc);
}

void scipy_cblas_zgemm64_(int layout, int ta, int tb, int64_t m, int64_t n,
                          int64_t k, const void *alpha, const void *a,
                          int64_t lda, const void *b, int64_t ldb,
                          const void *beta, void *c, int64_t ldc)
{
    if (wheel_offload(GB_Z, layout, ta, tb, m, n, k, alpha, a, lda, b, ldb,
                      beta, c, ldc))
        return;
    wheel_zgemm f = (wheel_zgemm)wheel_sym("scipy_cblas_zgemm64_");
    if (f != NULL)
        f(layout, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
    else
        wheel_fallback(GB_Z, layout, ta, tb, m, n, k, alpha, a, lda, b, ldb,
                       beta, c, ldc);
}

/* At exit (the library is never unloaded), once: at GEMMBLAS_VERBOSE=1
 * what came of a wheel BLAS whose GEMMs libgemmblas takes; always, that
 * one whose names it does not have was loaded (nothing of it reached
 * gemmd). Runs on the exiting thread. */
__attribute__((destructor)) static void gb_wheel_notice(void)
{
    char found[PATH_MAX] = "";
    dl_iterate_phdr(find_wheel_blas, found);
    if (found[0] == '\0')
        return;
    char file[PATH_MAX]; /* numpy loads it as numpy/_core/../../numpy.libs/ */
    if (realpath(found, file) == NULL)
        snprintf(file, sizeof(file), "%s", found);
    if (wheel_sym("scipy_cblas_dgemm64_") != NULL) {
        gb_log(1,
               "numpy's own BLAS (%s): %lu of the %lu GEMMs it was asked for "
               "went to gemmd; its other routines (syrk for a @ a.T, gemv) "
               "ran in it",
               file, (unsigned long)atomic_load(&wheel_sent),
               (unsigned long)atomic_load(&wheel_calls));
        return;
    }
    fprintf(stderr,
            "gemmblas: numpy's own BLAS is in this process (%s, from a pip "
            "or conda numpy), under names libgemmblas does not take: none of "
            "its products went to gemmd. Use the gemmd Python package "
            "(gemmd.matmul; python/README.md), or Debian's numpy (apt "
            "install python3-numpy, run by /usr/bin/python3), whose BLAS "
            "libgemmblas reaches\n",
            file);
}
