#!/bin/bash
# blas3.sh [DIR]: builds with CUDA (here: nvcc, no GPU) and bundles what
# the GPU host needs to check and measure the level-3 routines besides
# GEMM (symm .. trsm) into DIR (default .gpu-pack/l3, git-ignored), packed
# as DIR.tar.xz: gemmd (cuda backend), gemmctl, integration_blas3,
# libgemmblas, netlib's level-3 testers with their inputs (Debian's
# libblas-test), the reference LAPACK probe with Debian's liblapack3,
# bench_blas3, Debian's OpenBLAS (the CPU BLAS, and
# NVBLAS's) and every library they need that a bare Ubuntu host lacks.
# cuBLAS, the CUDA runtime and NVBLAS come from the host's /usr/local/cuda.
#
# On the GPU host (device tool: carry .gpu-pack):
#   tar -C /tmp -xJf .gpu-pack/l3.tar.xz && /tmp/l3/blas3-run.sh /tmp/l3
set -euo pipefail
cd "$(dirname "$0")/../.."
build=${BUILD_DIR:-build-gpu}
out=${1:-.gpu-pack/l3}
tdir=/usr/lib/x86_64-linux-gnu/blas
lapack=/usr/lib/x86_64-linux-gnu/lapack/liblapack.so.3
[ -e "$lapack" ] || { echo "blas3.sh: $lapack missing: apt-get install liblapack3" >&2; exit 1; }
for f in xblat3d xdcblat3 dblat3.in din3; do
    [ -e "$tdir/$f" ] || { echo "blas3.sh: $tdir/$f missing: apt-get install libblas-test" >&2; exit 1; }
done
cmake -S . -B "$build" -DGEMM_TESTS=ON -DGEMM_BENCH=ON -DGEMM_WITH_CUDA=ON \
    >/dev/null
cmake --build "$build" -j "$(nproc)" --target gemmd gemmctl gemmblas \
    gemmblas_blas3 bench_blas3 integration_blas3 gemmd_test \
    blas_lapack_probe >/dev/null
rm -rf "$out"
testers=""
for p in s d c z; do testers="$testers $tdir/xblat3$p $tdir/x${p}cblat3"; done
# the GPU host's bundler beside the checkout (a worktree's one level up)
bundle=../shared/gpu-host/bundle.sh
[ -f "$bundle" ] || bundle=../../shared/gpu-host/bundle.sh
bash "$bundle" "$out" "$build/daemon/gemmd" \
    "$build/client/gemmctl" "$build/tests/integration_blas3" $testers \
    "$build/blas/libgemmblas.so.0" >/dev/null
# (the probe needs only the C library: the bundler wants at least one
# library to copy)
cp "$build/bench/blas/bench_blas3" "$build/blas/tests/blas_lapack_probe" \
    "$out/bin/"
mv "$out/bin/libgemmblas.so.0" "$out/lib/"
mkdir -p "$out/share/blas"
cp "$tdir"/?blat3.in "$tdir"/?in3 "$out/share/blas/"
ob=/usr/lib/x86_64-linux-gnu/openblas-pthread
cp -Lf "$ob/libblas.so.3" "$ob/libopenblas.so.0" "$out/lib/"
mkdir -p "$out/lib/lapack"
cp -Lf "$lapack" "$out/lib/lapack/"
strip "$out"/bin/gemmd "$out"/bin/gemmctl "$out"/bin/bench_blas3 \
    "$out"/bin/integration_blas3 "$out"/lib/libgemmblas.so.0 2>/dev/null || true
rm -f "$out"/lib/libcublas* "$out"/lib/libcudart*
cp scripts/gpu/blas3-run.sh scripts/gpu/coretype.sh blas/tests/lib.sh \
    blas/tests/netlib.sh blas/tests/lapack.sh "$out/"
tar -C "$(dirname "$out")" -cJf "$out.tar.xz" "$(basename "$out")"
echo "bundle: $(du -sh "$out" | cut -f1) in $out, $(du -h "$out.tar.xz" | cut -f1) packed ($out.tar.xz)"
