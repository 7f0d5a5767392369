#!/bin/bash
# blas.sh [DIR]: builds with CUDA (here: nvcc, no GPU) and bundles what the
# GPU host needs to check and measure libgemmblas (issue 11) into DIR
# (default .gpu-blas, git-ignored as .gpu*): gemmd (cuda backend), gemmctl,
# libgemmblas (libgemmblas.so.0 and lib3/libblas.so.3), bench_blas,
# integration_gemm64, netlib's level-3 testers with their inputs
# (Debian's libblas-test) and every shared library they need that a bare
# Ubuntu host lacks: Debian's OpenBLAS (the CPU BLAS for all three
# variants), libgfortran, nng, protobuf-c, Criterion. cuBLAS, the CUDA
# runtime and NVBLAS come from the host's /usr/local/cuda. Then it packs
# DIR into DIR.tar.gz and prints both sizes.
#
# On the GPU host (device tool: carry DIR; the working tree has this
# script): scripts/gpu/blas-run.sh DIR [all|smoke|testers|bench|crossover]
set -euo pipefail
cd "$(dirname "$0")/../.."
build=${BUILD_DIR:-build-gpu}
out=${1:-.gpu-blas}
tdir=/usr/lib/x86_64-linux-gnu/blas
for f in xblat3d xdcblat3 dblat3.in din3; do
    [ -e "$tdir/$f" ] || { echo "blas.sh: $tdir/$f missing: apt-get install libblas-test" >&2; exit 1; }
done
cmake -S . -B "$build" -DGEMM_TESTS=ON -DGEMM_BENCH=ON -DGEMM_WITH_CUDA=ON \
    >/dev/null
cmake --build "$build" -j "$(nproc)" --target gemmd gemmctl gemmblas \
    gemmblas_blas3 bench_blas integration_gemm64 integration_gemm \
    integration_fill integration_cuda integration_batch integration_moduli \
    integration_int8 >/dev/null
rm -rf "$out"
testers=""
for p in s d c z; do testers="$testers $tdir/xblat3$p $tdir/x${p}cblat3"; done
../shared/gpu-host/bundle.sh "$out" "$build/daemon/gemmd" \
    "$build/client/gemmctl" "$build/tests/integration_gemm64" \
    "$build/tests/integration_gemm" "$build/tests/integration_fill" \
    "$build/tests/integration_cuda" "$build/tests/integration_batch" \
    "$build/tests/integration_moduli" "$build/tests/integration_int8" $testers \
    "$build/blas/libgemmblas.so.0" >/dev/null
# bench_blas needs nothing beyond libc (and bundle.sh, under pipefail,
# stops at a program with no library to copy)
cp "$build/bench/blas/bench_blas" "$out/bin/"
# the libraries themselves go to lib/ (bundle.sh put them in bin/)
mv "$out/bin/libgemmblas.so.0" "$out/lib/"
mkdir -p "$out/lib/lib3" "$out/share/blas"
cp -L "$build/blas/lib3/libblas.so.3" "$out/lib/lib3/"
cp "$tdir"/?blat3.in "$tdir"/?in3 "$out/share/blas/"
# the testers' libblas.so.3 and the CPU BLAS of every variant: Debian's
# OpenBLAS (its thin libblas.so.3 over libopenblas.so.0), whatever this
# host's alternative points at
ob=/usr/lib/x86_64-linux-gnu/openblas-pthread
cp -Lf "$ob/libblas.so.3" "$ob/libopenblas.so.0" "$out/lib/"
strip "$out"/bin/gemmd "$out"/bin/gemmctl "$out"/bin/bench_blas \
    "$out"/lib/libgemmblas.so.0 "$out"/lib/lib3/libblas.so.3 2>/dev/null || true
rm -f "$out"/lib/libcublas* "$out"/lib/libcudart*
cp scripts/gpu/blas-run.sh scripts/gpu/coretype.sh blas/tests/lib.sh blas/tests/netlib.sh "$out/"
tar -C "$(dirname "$out")" -czf "$out.tar.gz" "$(basename "$out")"
echo "bundle: $(du -sh "$out" | cut -f1) in $out, $(du -h "$out.tar.gz" | cut -f1) compressed ($out.tar.gz)"
