#!/bin/sh
# kernels.sh: builds with CUDA (here: nvcc, no GPU) the kernel benchmark
# and the kernel tests, bundles them with the shared libraries they need
# into .gpu-kern (cuBLAS left out: the GPU host's CUDA has it) and packs
# that into .gpu-kern-pack/kern.tar.xz (about 40 MB of the device tool's
# 64 MiB). Both folders are git-ignored: carry .gpu-kern-pack and run
# `bash .gpu-kern-pack/kernels-run.sh` there (see that script).
set -eu
cd "$(dirname "$0")/../.."
build=${BUILD_DIR:-build-gpu}
exes="bench/bench_gemm tests/kernels_gpu_test tests/kernels_ozaki_gpu_test
tests/kernels_catalog_gpu_test"
cmake -S . -B "$build" -DGEMM_TESTS=ON -DGEMM_BENCH=ON \
    -DGEMM_WITH_CUDA=ON >/dev/null
cmake --build "$build" -j "$(nproc)" --target bench_gemm kernels_gpu_test \
    kernels_ozaki_gpu_test kernels_catalog_gpu_test >/dev/null
rm -rf .gpu-kern .gpu-kern-pack
../shared/gpu-host/bundle.sh .gpu-kern $(for e in $exes; do
    printf '%s/%s ' "$build" "$e"
done) >/dev/null
strip .gpu-kern/bin/* 2>/dev/null || true
rm -f .gpu-kern/lib/libcublas* .gpu-kern/lib/libcudart*
mkdir -p .gpu-kern-pack
(cd .gpu-kern && tar cf - bin lib) | xz -T0 -6 >.gpu-kern-pack/kern.tar.xz
cp scripts/gpu/kernels-run.sh .gpu-kern-pack/
du -sh .gpu-kern-pack
