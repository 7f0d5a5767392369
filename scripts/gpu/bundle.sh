#!/bin/sh
# Builds with CUDA (here: nvcc, no GPU) and bundles gemmd, gemmctl, the
# integration tests and the end-to-end benchmarks, with the shared libraries
# they need, into DIR (default .gpu-svc, git-ignored) for the device tool:
# carry DIR and run scripts/gpu/suite.sh there. cuBLAS is left out: the GPU
# host's CUDA toolkit has it.
# GEMM_BENCH=OFF leaves the benchmarks out (e.g. while theirs do not
# build).
set -eu
cd "$(dirname "$0")/../.."
build=${BUILD_DIR:-build-gpu}
out=${1:-.gpu-svc}
cmake -S . -B "$build" -DGEMM_TESTS=ON -DGEMM_BENCH="${GEMM_BENCH:-ON}" \
    -DGEMM_WITH_CUDA=ON >/dev/null
cmake --build "$build" -j "$(nproc)" >/dev/null
rm -rf "$out"
exes="$build/daemon/gemmd $build/client/gemmctl"
exes="$exes $(ls "$build"/tests/integration_* | tr '\n' ' ')"
exes="$exes $build/tests/fault_probe $build/tests/access_probe"
exes="$exes $build/tests/gemmd_test"
for e in "$build/bench/e2e/gemm_e2e" "$build/bench/e2e/fresh_cublas" \
    "$build/bench/e2e/bench_pin" "$build/bench/bench_grouped" \
    "$build"/tests/kernels_*gpu_test; do
    [ -x "$e" ] && exes="$exes $e"
done
../shared/gpu-host/bundle.sh "$out" $exes >/dev/null
strip "$out"/bin/* 2>/dev/null || true
rm -f "$out"/lib/libcublas* "$out"/lib/libcudart*
cp scripts/gpu/suite.sh scripts/gpu/multi.sh scripts/gpu/verify.sh "$out/"
[ -f bench/e2e/run_device.sh ] && cp bench/e2e/*.sh "$out/" || true
du -sh "$out"
