#!/bin/sh
# Installs the Debian packages gemmd builds and tests with. CUDA is optional
# and comes from the CUDA Toolkit under /usr/local/cuda when present.
# libgemmblas's tests (blas/tests) need netlib's testers (libblas-test),
# Debian's reference LAPACK (liblapack3), numpy, R and Octave: measured
# here, apt-get installs r-base-core in 11 s and octave in 23 s.
set -eu
pkgs="build-essential cmake pkg-config libuv1-dev libnng-dev libprotobuf-c-dev
protobuf-c-compiler libcriterion-dev libopenblas-dev python3 systemd prometheus
clang clang-format libclang-rt-dev gnuplot-nox
libblas-test liblapack3 python3-numpy r-base-core octave
python3-venv python3-pytest python3-hypothesis python3-setuptools
python3-dask python3-distributed"
missing=""
for p in $pkgs; do dpkg -s "$p" >/dev/null 2>&1 || missing="$missing $p"; done
if [ -n "$missing" ]; then
    SUDO=""
    [ "$(id -u)" -eq 0 ] || SUDO=sudo
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq $missing
fi
