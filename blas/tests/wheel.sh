#!/bin/sh
# wheel.sh: libgemmblas notices a BLAS that a numpy wheel brought. A
# program with libgemmblas preloaded dlopens a stand-in for numpy's
# renamed OpenBLAS (a small shared object named
# site-packages/numpy.libs/libscipy_openblas64_-test.so): at exit one
# stderr line names it and points at the gemmd package and Debian's numpy.
# The same program loading a libopenblas.so.0 from an ordinary directory
# (as Debian's numpy does through libblas.so.3) gets no such line. Needs a
# C compiler.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib.sh"
command -v cc >/dev/null || { echo "skipped: no C compiler (cc)"; exit 77; }
T=$(cd "$(mktemp -d "${TMPDIR:-/tmp}/gemmblas-wheel.XXXXXX")" && pwd -P)
trap 'rm -rf "$T"' EXIT
GEMM_URL="ipc://$T/none.sock"
export GEMM_URL
mkdir -p "$T/site-packages/numpy.libs" "$T/plain"
echo 'int scipy_dgemm_64_(void) { return 0; }' >"$T/fake.c"
cc -shared -fPIC -o "$T/site-packages/numpy.libs/libscipy_openblas64_-test.so" \
    "$T/fake.c" || fail "cc -shared"
cp "$T/site-packages/numpy.libs/libscipy_openblas64_-test.so" \
    "$T/plain/libopenblas.so.0"
cat >"$T/prog.c" <<'C'
#include <dlfcn.h>
#include <stdio.h>
int main(int argc, char **argv)
{
    void *h = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
    if (h == NULL) {
        fprintf(stderr, "%s\n", dlerror());
        return 1;
    }
    return argc > 2;
}
C
cc -o "$T/prog" "$T/prog.c" -ldl || fail "cc prog.c"
LD_PRELOAD=$(preload "$GEMMBLAS_LIB") "$T/prog" \
    "$T/site-packages/numpy.libs/libscipy_openblas64_-test.so" 2>"$T/err" ||
    { cat "$T/err"; fail "the program failed"; }
cat "$T/err"
n=$(grep -c "gemmblas: this process loaded a BLAS of its own, $T/site-packages/numpy.libs/libscipy_openblas64_-test.so" "$T/err" || true)
[ "$n" = 1 ] || fail "$n notices of the wheel's BLAS, not 1"
grep -q "gemmd Python package" "$T/err" && grep -q "python3-numpy" "$T/err" ||
    fail "the notice does not say what to use instead"
LD_PRELOAD=$(preload "$GEMMBLAS_LIB") "$T/prog" "$T/plain/libopenblas.so.0" \
    2>"$T/err2" || { cat "$T/err2"; fail "the program failed"; }
! grep -q "BLAS of its own" "$T/err2" ||
    { cat "$T/err2"; fail "a libopenblas outside any package was taken for a wheel's"; }
echo "wheel.sh: a wheel's BLAS is named once at exit; a system one is not"
