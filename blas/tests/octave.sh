#!/bin/sh
# octave.sh: Octave (the Debian package octave) multiplies through
# libgemmblas (LD_PRELOAD, GEMMBLAS_MIN_FLOPS=0; Octave calls dgemm_ and
# zgemm_) against a private gemmd; the products equal those of the same
# Octave without libgemmblas (saved to a file first); gemmd's served
# counter proves they went there; then again with GEMMBLAS_ZEROCOPY=1,
# some of them in place.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib.sh"
command -v octave-cli >/dev/null ||
    missing octave-cli octave
start_gemmd
cat >"$T/prod.m" <<'OM'
rand("seed", 7); randn("seed", 7);
A = randn(310, 170); B = randn(170, 90);
Z = complex(randn(80, 60), randn(80, 60)); W = complex(randn(60, 50), randn(60, 50));
D = A * B; E = A' * A(:, 1:40); F = Z * W; G = Z' * Z;
OM
cat >"$T/ref.m" <<OM
source("$T/prod.m"); save("-binary", "$T/ref.bin", "D", "E", "F", "G");
OM
cat >"$T/check.m" <<OM
source("$T/prod.m"); R = load("$T/ref.bin");
names = {"D", "E", "F", "G"}; vals = {D, E, F, G};
for i = 1:4
  r = R.(names{i}); e = norm(vals{i} - r, "fro") / norm(r, "fro");
  printf("%s relative error %.3g\n", names{i}, e);
  if !(e <= 1e-12) error("%s differs", names{i}); end
end
printf("Octave OK\n");
OM
octave-cli --no-gui --quiet --no-window-system "$T/ref.m"
before=$(counter requests_served)
GEMMBLAS_MIN_FLOPS=0 GEMMBLAS_VERBOSE=1 LD_PRELOAD=$(preload "$GEMMBLAS_LIB") \
    octave-cli --no-gui --quiet --no-window-system "$T/check.m"
expect_served "$before" 4

# the same products with the zero-copy mode on (Octave's large matrices
# are regions, its products run in place), equal to the reference
GEMMBLAS_MIN_FLOPS=0 LD_PRELOAD=$(preload "$GEMMBLAS_LIB") \
    zerocopy_run octave-cli --no-gui --quiet --no-window-system "$T/check.m"
