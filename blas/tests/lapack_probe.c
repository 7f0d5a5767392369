/*
 * lapack_probe.c: a solve and a Cholesky factorization through a
 * reference LAPACK (dlopened: Debian's liblapack3), whose blocked
 * routines call the BLAS's dgemm, dtrsm and dsyrk: with libgemmblas
 * preloaded those are libgemmblas's, so lapack.sh can check gemmd's
 * counters after this program's own checks of the results.
 *
 *   lapack_probe LIBLAPACK [N]
 *
 * dgesv on A = R + N I (R uniform in [-1, 1)) with b = 1: max |A x - 1|
 * must be below 1e-9; dpotrf on S = A + A^T (diagonally dominant, so
 * positive definite), lower: 64 sampled entries of L L^T against S
 * within 1e-12 relative. Exit 0 when both hold, 1 otherwise, 2 on usage.
 */
#include <dlfcn.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

typedef void (*dgesv_fn)(const int *, const int *, double *, const int *, int *,
                         double *, const int *, int *);
typedef void (*dpotrf_fn)(const char *, const int *, double *, const int *,
                          int *);

static double uniform(uint64_t *s)
{
    *s = *s * 6364136223846793005ull + 1442695040888963407ull;
    return ((double)(*s >> 11) + 0.5) * 0x1p-52 - 1.0;
}

int main(int argc, char **argv)
{
    if (argc < 2)
        return 2;
    int n = argc > 2 ? atoi(argv[2]) : 1000, one = 1, info = -1;
    void *h = dlopen(argv[1], RTLD_NOW | RTLD_GLOBAL);
    if (h == NULL) {
        fprintf(stderr, "lapack_probe: %s\n", dlerror());
        return 1;
    }
    dgesv_fn gesv = (dgesv_fn)dlsym(h, "dgesv_");
    dpotrf_fn potrf = (dpotrf_fn)dlsym(h, "dpotrf_");
    size_t nn = (size_t)n * n;
    double *a = malloc(nn * 8), *a0 = malloc(nn * 8),
           *x = malloc((size_t)n * 8);
    int *piv = malloc((size_t)n * sizeof(int));
    if (gesv == NULL || potrf == NULL || a == NULL || a0 == NULL || x == NULL ||
        piv == NULL) {
        fprintf(stderr, "lapack_probe: no dgesv_/dpotrf_ or no memory\n");
        return 1;
    }
    uint64_t s = 7;
    for (size_t i = 0; i < nn; i++)
        a[i] = a0[i] = uniform(&s) + (i % (n + 1) == 0 ? n : 0);
    for (int i = 0; i < n; i++)
        x[i] = 1;
    gesv(&n, &one, a, &n, piv, x, &n, &info);
    double res = info == 0 ? 0 : INFINITY;
    for (int i = 0; i < n && info == 0; i++) {
        double r = -1;
        for (int j = 0; j < n; j++)
            r += a0[(size_t)j * n + i] * x[j];
        res = fmax(res, fabs(r));
    }
    printf("dgesv n=%d info=%d residual %.3g\n", n, info, res);
    /* S = A + A^T: diagonal 2 (r_ii + n), off the diagonal at most 2 in
     * magnitude, so diagonally dominant and positive definite */
    for (int j = 0; j < n; j++)
        for (int i = 0; i < n; i++)
            a[(size_t)j * n + i] =
                a0[(size_t)j * n + i] + a0[(size_t)i * n + j];
    for (size_t i = 0; i < nn; i++)
        a0[i] = a[i];
    potrf("L", &n, a, &n, &info);
    double err = info == 0 ? 0 : INFINITY, mag = 0;
    for (int t = 0; t < 64 && info == 0; t++) {
        int i = (int)((t * 7919u + 3) % (unsigned)n);
        int j = (int)((t * 104729u + 11) % (unsigned)n);
        if (i < j) {
            int k = i;
            i = j;
            j = k;
        }
        double llt = 0; /* (L L^T)(i, j) = sum_k L(i,k) L(j,k), k <= j */
        for (int k = 0; k <= j; k++)
            llt += a[(size_t)k * n + i] * a[(size_t)k * n + j];
        double want = a0[(size_t)j * n + i];
        err = fmax(err, fabs(llt - want));
        mag = fmax(mag, fabs(want));
    }
    err /= mag > 0 ? mag : 1;
    printf("dpotrf n=%d info=%d max relative error %.3g\n", n, info, err);
    int ok = res < 1e-9 && err < 1e-12;
    printf("%s\n", ok ? "LAPACK OK" : "LAPACK WRONG");
    return ok ? 0 : 1;
}
