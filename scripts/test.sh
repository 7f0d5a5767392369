#!/bin/sh
# README's second command: build everything and run every test through
# ctest (unit, integration against a real gemmd, kernel host tests; GPU
# tests report "skipped: no CUDA device" where there is none).
set -eu
cd "$(dirname "$0")/.."
./scripts/install-deps.sh
./scripts/build.sh -DGEMM_TESTS=ON
cd "${BUILD_DIR:-build}"
ctest --output-on-failure --timeout 600
