#!/bin/sh
# usage.sh LANG: runs the command lines of blas/README.md's usage block (the
# lines between "<!-- usage: begin -->" and "<!-- usage: end -->") that
# start LANG's program, exactly as written but for the prefix: the library
# comes from `cmake --install` into a private prefix in place of
# /usr/local. Each line must send the program's GEMMs to a private gemmd
# (its served counter grows by at least 3). LANG: numpy (python3 prog.py),
# r (Rscript prog.R), octave (octave-cli prog.m), c and fortran (./prog,
# linked with -lblas). Exits 77 (skipped) with the reason when LANG's
# program or compiler is not installed.
set -eu
lang=$1
here=$(cd "$(dirname "$0")" && pwd)
readme=$here/../README.md
. "$here/lib.sh"
skip() {
    echo "skipped: $*"
    exit 77
}
[ -z "${GEMMBLAS_ASAN_RUNTIME:-}" ] ||
    skip "the documented command lines preload libgemmblas alone; under ASan it needs the ASan runtime first"
case $lang in
numpy)
    /usr/bin/python3 -c "import numpy" 2>/dev/null ||
        skip "Debian's numpy is not installed (apt install python3-numpy)"
    cmd=python3 ;;
r)
    command -v Rscript >/dev/null || skip "R is not installed (apt install r-base-core)"
    cmd=Rscript ;;
octave)
    command -v octave-cli >/dev/null || skip "Octave is not installed (apt install octave)"
    cmd=octave-cli ;;
c)
    command -v cc >/dev/null || skip "no C compiler (apt install build-essential)"
    [ -e /usr/lib/x86_64-linux-gnu/libblas.so ] ||
        skip "no libblas.so to link with -lblas (apt install libblas-dev or libopenblas-dev)"
    cmd=./prog ;;
fortran)
    command -v gfortran >/dev/null || skip "gfortran is not installed (apt install gfortran)"
    [ -e /usr/lib/x86_64-linux-gnu/libblas.so ] ||
        skip "no libblas.so to link with -lblas (apt install libblas-dev or libopenblas-dev)"
    cmd=./prog ;;
*) fail "usage: usage.sh numpy|r|octave|c|fortran" ;;
esac

start_gemmd
P=$T/prefix
"$CMAKE" --install "$GEMM_BUILD_DIR" --prefix "$P" >"$T/install.txt" 2>&1 ||
    { cat "$T/install.txt"; fail "cmake --install"; }
cd "$T"

# The program: three GEMMs (two real, one complex where the language has
# them) of 200x200 matrices, each checked against a product the program
# computes without BLAS or (numpy) against einsum.
case $lang in
numpy)
    cat >prog.py <<'PY'
import numpy as np
rng = np.random.default_rng(3)
for t in (np.float64, np.float32, np.complex128):
    a = rng.standard_normal((200, 150)).astype(t)
    b = rng.standard_normal((150, 120)).astype(t)
    d = a @ b
    r = np.einsum("ik,kj->ij", a, b, optimize=False)
    err = np.abs(d - r).max() / np.abs(r).max()
    assert err < 1e-4, (t, err)
print("numpy OK")
PY
    ;;
r)
    cat >prog.R <<'RS'
set.seed(3)
check <- function(a, b) {
    options(matprod = "default"); d <- a %*% b
    options(matprod = "internal"); r <- a %*% b
    options(matprod = "default")
    if (!(max(Mod(d - r)) / max(Mod(r)) < 1e-12)) stop("product differs")
}
a <- matrix(rnorm(200 * 150), 200); b <- matrix(rnorm(150 * 120), 150)
check(a, b); check(t(b), t(a))
za <- matrix(complex(real = rnorm(4000), imaginary = rnorm(4000)), 80)
zb <- matrix(complex(real = rnorm(3000), imaginary = rnorm(3000)), 50)
check(za, zb)
cat("R OK, BLAS:", extSoftVersion()[["BLAS"]], "\n")
RS
    ;;
octave)
    cat >prog.m <<'OC'
rand("seed", 3);
a = rand(200, 150); b = rand(150, 120);
d = a * b; r = zeros(200, 120);
for k = 1:150
  r += a(:, k) * b(k, :);
end
assert(max(abs(d(:) - r(:))) / max(abs(r(:))) < 1e-12);
d = b' * a'; assert(max(max(abs(d - r'))) / max(abs(r(:))) < 1e-12);
za = a + 1i * rand(200, 150); zb = b - 1i * rand(150, 120);
zd = za * zb; assert(all(isfinite(zd(:))));
disp("Octave OK");
OC
    ;;
c)
    cat >prog.c <<'C'
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
void dgemm_(const char *ta, const char *tb, const int *m, const int *n,
            const int *k, const double *alpha, const double *a,
            const int *lda, const double *b, const int *ldb,
            const double *beta, double *c, const int *ldc);
int main(void)
{
    int m = 200, n = 120, k = 150;
    double one = 1, zero = 0;
    double *a = malloc(sizeof(double) * m * k);
    double *b = malloc(sizeof(double) * k * n);
    double *c = malloc(sizeof(double) * m * n);
    for (int i = 0; i < m * k; i++) a[i] = (double)(i % 17) - 8;
    for (int i = 0; i < k * n; i++) b[i] = (double)(i % 13) - 6;
    for (int round = 0; round < 3; round++) {
        dgemm_("N", "N", &m, &n, &k, &one, a, &m, b, &k, &zero, c, &m);
        for (int j = 0; j < n; j++)
            for (int i = 0; i < m; i++) {
                double r = 0;
                for (int p = 0; p < k; p++) r += a[i + p * m] * b[p + j * k];
                if (fabs(c[i + j * m] - r) > 1e-9) {
                    printf("C(%d,%d) = %g, not %g\n", i, j, c[i + j * m], r);
                    return 1;
                }
            }
    }
    puts("C OK");
    return 0;
}
C
    cc -o prog prog.c -lblas -lm || fail "cc prog.c -lblas"
    ;;
fortran)
    cat >prog.f90 <<'F'
program prog
  implicit none
  integer, parameter :: m = 200, n = 120, k = 150
  double precision :: a(m, k), b(k, n), c(m, n), r(m, n)
  integer :: i, round
  do i = 1, m * k
    a(mod(i - 1, m) + 1, (i - 1) / m + 1) = dble(mod(i, 17) - 8)
  end do
  do i = 1, k * n
    b(mod(i - 1, k) + 1, (i - 1) / k + 1) = dble(mod(i, 13) - 6)
  end do
  r = matmul(a, b)
  do round = 1, 3
    call dgemm('N', 'N', m, n, k, 1d0, a, m, b, k, 0d0, c, m)
    if (maxval(abs(c - r)) > 1d-9) stop 1
  end do
  print *, 'Fortran OK'
end program prog
F
    gfortran -fno-external-blas -o prog prog.f90 -lblas ||
        fail "gfortran prog.f90 -lblas"
    ;;
esac

lines=$(sed -n '/<!-- usage: begin -->/,/<!-- usage: end -->/p' "$readme" |
    grep -E "^[A-Z_]+=[^ ]+ $cmd " || true)
[ -n "$lines" ] || fail "blas/README.md's usage block has no line for $cmd"
echo "$lines" | while IFS= read -r line; do
    run=$(echo "$line" | sed -e 's/ *#.*$//' -e "s|/usr/local/|$P/|g")
    echo "README: $line"
    before=$(counter requests_served)
    # python3: Debian's, whose numpy uses the system BLAS
    PATH=/usr/bin:$PATH GEMMBLAS_MIN_FLOPS=0 sh -c "$run" ||
        fail "'$run' failed"
    expect_served "$before" 3
done
echo "usage.sh $lang: every documented form sent its GEMMs to gemmd"
