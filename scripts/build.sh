#!/bin/sh
# Configures and builds gemmd, libgemmclient, gemmctl, tests and benchmarks
# into ${BUILD_DIR:-build}. Extra arguments go to cmake's configure step.
set -eu
cd "$(dirname "$0")/.."
build=${BUILD_DIR:-build}
cmake -S . -B "$build" "$@" >/dev/null
cmake --build "$build" -j "$(nproc)"
