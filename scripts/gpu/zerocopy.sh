#!/bin/bash
# zerocopy.sh [DIR]: builds with CUDA (here: nvcc, no GPU) and bundles what
# the GPU host needs to check and measure libgemmblas's zero-copy mode
# (GEMMBLAS_ZEROCOPY=1) against its copying path and the host's OpenBLAS
# into DIR (default .gpu-pack/zc, git-ignored), packed as DIR.tar.xz:
# gemmd (cuda backend), gemmctl, libgemmblas, blas_zerocopy_probe (the
# ctest probe, linked with libgemmblas), bench_blas, Debian's OpenBLAS (the
# CPU BLAS) and every library they need that a bare Ubuntu host lacks.
# cuBLAS and the CUDA runtime come from the host's /usr/local/cuda.
#
# On the GPU host, one call of the device tool (carry .gpu-pack/zc.tar.xz
# alone: the unpacked DIR is 76 MiB, over carry's 64; about 3 minutes,
# well inside 10):
#   tar -C /tmp -xJf .gpu-pack/zc.tar.xz && /tmp/zc/zerocopy-run.sh /tmp/zc
# A dry run here: BACKEND=cpu SIZES=1024,2048 with the same two commands.
set -euo pipefail
cd "$(dirname "$0")/../.."
build=${BUILD_DIR:-build-gpu}
out=${1:-.gpu-pack/zc}
cmake -S . -B "$build" -DGEMM_TESTS=ON -DGEMM_BENCH=ON -DGEMM_WITH_CUDA=ON \
    >/dev/null
cmake --build "$build" -j "$(nproc)" --target gemmd gemmctl gemmblas \
    bench_blas blas_zerocopy_probe >/dev/null
rm -rf "$out"
# the GPU host's bundler beside the checkout (a worktree's one level up)
bundle=../shared/gpu-host/bundle.sh
[ -f "$bundle" ] || bundle=../../shared/gpu-host/bundle.sh
bash "$bundle" "$out" "$build/daemon/gemmd" "$build/client/gemmctl" \
    "$build/blas/tests/blas_zerocopy_probe" >/dev/null
# bench_blas needs nothing beyond libc (bundle.sh, under pipefail, stops
# at a program with no library to copy); the probe's libgemmblas.so.0 is
# in lib/ already (bundle.sh copied it as the probe's library)
cp "$build/bench/blas/bench_blas" "$out/bin/"
cp -L "$build/blas/libgemmblas.so.0" "$out/lib/"
ob=/usr/lib/x86_64-linux-gnu/openblas-pthread
cp -Lf "$ob/libblas.so.3" "$ob/libopenblas.so.0" "$out/lib/"
strip "$out"/bin/gemmd "$out"/bin/gemmctl "$out"/bin/bench_blas \
    "$out"/bin/blas_zerocopy_probe "$out"/lib/libgemmblas.so.0 2>/dev/null || true
rm -f "$out"/lib/libcublas* "$out"/lib/libcudart*
cp scripts/gpu/zerocopy-run.sh scripts/gpu/coretype.sh "$out/"
tar -C "$(dirname "$out")" -cJf "$out.tar.xz" "$(basename "$out")"
echo "bundle: $(du -sh "$out" | cut -f1) in $out, $(du -h "$out.tar.xz" | cut -f1) packed ($out.tar.xz)"
