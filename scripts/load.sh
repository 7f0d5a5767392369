#!/bin/sh
# The short form of the load harness for CI: builds gemmd and gemm_load into
# build-load/ (CPU backend, no CUDA) and runs 16 clients x 100 mixed GEMMs
# against a private gemmd --backend cpu --threads 2, every reply checked.
# Exits non-zero on any lost, failed, duplicated or wrong reply, or if the
# daemon's RSS or mappings grew. Extra arguments go to gemm_load, e.g.
# scripts/load.sh -n 1000 (the full run) or scripts/load.sh --seconds 300
# (a soak).
set -eu
cd "$(dirname "$0")/.."
build="${LOAD_BUILD_DIR:-build-load}"
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DGEMM_BENCH=ON \
    -DGEMM_WITH_CUDA=OFF -DGEMM_TESTS=OFF >/dev/null
cmake --build "$build" -j"$(nproc)" --target gemmd gemm_load
exec "$build/bench/load/gemm_load" --clients 16 --requests 100 --threads 2 "$@"
