#!/bin/sh
# wheel.sh: numpy's own BLAS (a pip wheel's renamed OpenBLAS), with
# stand-ins built here. A program linked against
# site-packages/numpy.libs/libscipy_openblas64_-test.so (numpy 2's names:
# scipy_cblas_dgemm64_) with libgemmblas preloaded: from
# GEMMBLAS_MIN_FLOPS up its GEMM runs in gemmd (the stand-in is not
# called, gemmd's counter grows, GEMMBLAS_VERBOSE=1 says so at exit);
# below it the stand-in computes; either way the product is right and
# nothing is printed at level 0. A wheel BLAS under names libgemmblas does
# not take (libopenblas64_p-r0-*.so with cblas_dgemm64_) is named at exit,
# once, with what to use instead; a libopenblas.so.0 outside any package
# is not. Needs a C compiler.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib.sh"
command -v cc >/dev/null || { echo "skipped: no C compiler (cc)"; exit 77; }
start_gemmd
T=$(cd "$T" && pwd -P)
W=$T/site-packages/numpy.libs
mkdir -p "$W" "$T/plain"

# the stand-ins: a row-major, no-transpose dgemm that counts its calls
cat >"$T/fake.c" <<'C'
#include <stdint.h>
int fake_calls;
void scipy_cblas_dgemm64_(int layout, int ta, int tb, int64_t m, int64_t n,
                          int64_t k, double alpha, const double *a,
                          int64_t lda, const double *b, int64_t ldb,
                          double beta, double *c, int64_t ldc)
{
    (void)layout, (void)ta, (void)tb;
    fake_calls++;
    for (int64_t i = 0; i < m; i++)
        for (int64_t j = 0; j < n; j++) {
            double s = 0;
            for (int64_t p = 0; p < k; p++)
                s += a[i * lda + p] * b[p * ldb + j];
            c[i * ldc + j] = alpha * s + (beta != 0 ? beta * c[i * ldc + j] : 0);
        }
}
C
cc -shared -fPIC -o "$W/libscipy_openblas64_-test.so" "$T/fake.c" ||
    fail "cc -shared"
echo 'void cblas_dgemm64_(void) {}' >"$T/old.c"
cc -shared -fPIC -o "$W/libopenblas64_p-r0-test.so" "$T/old.c" ||
    fail "cc -shared"
cp "$W/libopenblas64_p-r0-test.so" "$T/plain/libopenblas.so.0"

# gemm: one 40x30x20 scipy_cblas_dgemm64_, checked; prints the stand-in's
# calls. load PATH: dlopens PATH.
cat >"$T/prog.c" <<'C'
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#ifdef NO_WHEEL
int fake_calls;
#define scipy_cblas_dgemm64_(...) (void)0
#else
extern int fake_calls;
void scipy_cblas_dgemm64_(int, int, int, int64_t, int64_t, int64_t, double,
                          const double *, int64_t, const double *, int64_t,
                          double, double *, int64_t);
#endif
int main(int argc, char **argv)
{
    if (argc > 2 && strcmp(argv[1], "load") == 0) {
        if (dlopen(argv[2], RTLD_NOW | RTLD_LOCAL) == NULL) {
            fprintf(stderr, "%s\n", dlerror());
            return 1;
        }
        return 0;
    }
    enum { M = 40, N = 30, K = 20 };
    static double a[M * K], b[K * N], c[M * N];
    for (int i = 0; i < M * K; i++) a[i] = i % 7 - 3;
    for (int i = 0; i < K * N; i++) b[i] = i % 5 - 2;
    scipy_cblas_dgemm64_(101, 111, 111, M, N, K, 1.0, a, K, b, N, 0.0, c, N);
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) {
            double s = 0;
            for (int p = 0; p < K; p++) s += a[i * K + p] * b[p * N + j];
            if (c[i * N + j] != s) {
                printf("C(%d,%d) = %g, not %g\n", i, j, c[i * N + j], s);
                return 1;
            }
        }
    printf("%d\n", fake_calls);
    return 0;
}
C
cc -o "$T/prog" "$T/prog.c" -L"$W" -l:libscipy_openblas64_-test.so \
    -Wl,-rpath,"$W" -ldl || fail "cc prog.c"
# the same program with no wheel BLAS linked in, for "load"
cc -o "$T/loader" -DNO_WHEEL "$T/prog.c" -ldl || fail "cc prog.c"
pre=$(preload "$GEMMBLAS_LIB")

before=$(counter requests_served)
calls=$(GEMMBLAS_MIN_FLOPS=0 GEMMBLAS_VERBOSE=1 LD_PRELOAD=$pre "$T/prog" 2>"$T/err") ||
    { cat "$T/err"; fail "the program failed (product wrong?)"; }
cat "$T/err"
[ "$calls" = 0 ] || fail "the wheel's dgemm ran $calls times; it should have gone to gemmd"
expect_served "$before" 2
grep -q "numpy's own BLAS ($W/libscipy_openblas64_-test.so): 1 of the 1 GEMMs it was asked for went to gemmd" "$T/err" ||
    fail "GEMMBLAS_VERBOSE=1 does not say that the wheel's GEMM went to gemmd"

calls=$(GEMMBLAS_MIN_FLOPS=never LD_PRELOAD=$pre "$T/prog" 2>"$T/err") ||
    { cat "$T/err"; fail "the program failed (product wrong?)"; }
[ "$calls" = 1 ] || fail "below the threshold the wheel's dgemm ran $calls times, not once"
[ ! -s "$T/err" ] || { cat "$T/err"; fail "level 0 printed something"; }

LD_PRELOAD=$pre "$T/loader" load "$W/libopenblas64_p-r0-test.so" 2>"$T/err" ||
    { cat "$T/err"; fail "the program failed"; }
cat "$T/err"
n=$(grep -c "gemmblas: numpy's own BLAS is in this process ($W/libopenblas64_p-r0-test.so, from a pip or conda numpy), under names libgemmblas does not take" "$T/err" || true)
[ "$n" = 1 ] || fail "$n notices of a wheel BLAS libgemmblas cannot reach, not 1"
grep -q "gemmd Python package" "$T/err" && grep -q "python3-numpy" "$T/err" ||
    fail "the notice does not say what to use instead"

LD_PRELOAD=$pre "$T/loader" load "$T/plain/libopenblas.so.0" 2>"$T/err" ||
    { cat "$T/err"; fail "the program failed"; }
[ ! -s "$T/err" ] ||
    { cat "$T/err"; fail "a libopenblas outside any package was taken for a wheel's"; }
echo "wheel.sh: the wheel's GEMMs go to gemmd; a wheel BLAS out of reach is named"
