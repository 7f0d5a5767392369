#!/bin/sh
# verbose.sh: what GEMMBLAS_VERBOSE says about the CPU path. A GEMM kept on
# the CPU for its size gets one line at level 2 ("below
# GEMMBLAS_MIN_FLOPS") and none at level 1; the "CPU BLAS:" line names the
# file the loaded library resolves to, not a link to it (with the link
# named as "loaded as"). No gemmd is needed: nothing reaches the
# threshold. Needs a C compiler (the program calls dgemm_ from
# libgemmblas.so.0, $GEMMBLAS_LIB).
set -eu
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib.sh"
command -v cc >/dev/null || { echo "skipped: no C compiler (cc)"; exit 77; }
T=$(mktemp -d "${TMPDIR:-/tmp}/gemmblas-verbose.XXXXXX")
trap 'rm -rf "$T"' EXIT
GEMM_URL="ipc://$T/none.sock"
export GEMM_URL
cat >"$T/prog.c" <<'C'
#include <stdio.h>
void dgemm_(const char *, const char *, const int *, const int *, const int *,
            const double *, const double *, const int *, const double *,
            const int *, const double *, double *, const int *);
int main(void)
{
    int n = 8;
    double one = 1, zero = 0, a[64], b[64], c[64];
    for (int i = 0; i < 64; i++)
        a[i] = b[i] = i % 5;
    dgemm_("N", "N", &n, &n, &n, &one, a, &n, b, &n, &zero, c, &n);
    dgemm_("T", "N", &n, &n, &n, &one, a, &n, b, &n, &zero, c, &n);
    printf("%g\n", c[9]);
    return 0;
}
C
cc -o "$T/prog" "$T/prog.c" "$GEMMBLAS_LIB" \
    -Wl,-rpath,"$(dirname "$GEMMBLAS_LIB")" || fail "cc prog.c"
run() { LD_PRELOAD=$(preload) GEMMBLAS_MIN_FLOPS=1e9 "$T/prog" >/dev/null; }

GEMMBLAS_VERBOSE=2 run 2>"$T/v2"
cat "$T/v2"
n=$(grep -c 'dgemm 8x8x8 on the CPU: 1.02e+03 flops, below GEMMBLAS_MIN_FLOPS (1e+09)' "$T/v2" || true)
[ "$n" = 2 ] || fail "GEMMBLAS_VERBOSE=2: $n lines for the two GEMMs kept on the CPU, not 2"
GEMMBLAS_VERBOSE=1 run 2>"$T/v1"
! grep -q 'below GEMMBLAS_MIN_FLOPS' "$T/v1" ||
    fail "GEMMBLAS_VERBOSE=1 talks about GEMMs kept on the CPU for size"

# the CPU BLAS line: a file, not a link
path=$(sed -n 's/.*CPU BLAS: \([^ ]*\).*/\1/p' "$T/v1")
[ -n "$path" ] || { cat "$T/v1"; fail "no 'CPU BLAS:' line at GEMMBLAS_VERBOSE=1"; }
[ -f "$path" ] && [ ! -L "$path" ] || fail "'CPU BLAS: $path' names a link, not the file"
# loaded through a link: the file, and the link it was loaded as
ln -s "$path" "$T/libblas.so.3"
GEMMBLAS_CPU_BLAS=$T/libblas.so.3 GEMMBLAS_VERBOSE=1 run 2>"$T/link"
grep -q "CPU BLAS: $path (loaded as $T/libblas.so.3)" "$T/link" ||
    { cat "$T/link"; fail "through a link, 'CPU BLAS:' does not name $path"; }
echo "verbose.sh: the size line at level 2 only, the CPU BLAS by its file"
