#!/bin/sh
# lapack.sh PROBE: Debian's reference LAPACK (liblapack3) over libgemmblas
# (LD_PRELOAD, GEMMBLAS_MIN_FLOPS=0) against a private gemmd: lapack_probe
# solves (dgesv: dgetrf's dtrsm and dgemm) and factorizes (dpotrf: dsyrk,
# dtrsm, dgemm) and checks the results; gemmd's gemm, syrk and trsm
# counters must grow. LAPACK (the file) overrides where the library is
# (the GPU host has no Debian packages: scripts/gpu/blas3.sh bundles it).
set -eu
. "$(dirname "$0")/lib.sh"
probe=$1
lapack=${LAPACK:-/usr/lib/x86_64-linux-gnu/lapack/liblapack.so.3}
need "$lapack" liblapack3
start_gemmd
routines_snapshot "$T/before"
GEMMBLAS_MIN_FLOPS=0 GEMMBLAS_VERBOSE=1 \
    LD_PRELOAD="$(preload "$GEMMBLAS_LIB")" "$probe" "$lapack" "${LAPACK_N:-600}"
expect_routines "$T/before" gemm syrk trsm
