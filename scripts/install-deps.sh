#!/bin/sh
# Installs the Debian packages gemmd builds and tests with. CUDA is optional
# and comes from the CUDA Toolkit under /usr/local/cuda when present.
set -eu
pkgs="build-essential cmake pkg-config libuv1-dev libnng-dev libprotobuf-c-dev
protobuf-c-compiler libcriterion-dev libopenblas-dev python3 systemd prometheus
clang libclang-rt-dev gnuplot-nox"
missing=""
for p in $pkgs; do dpkg -s "$p" >/dev/null 2>&1 || missing="$missing $p"; done
if [ -n "$missing" ]; then
    SUDO=""
    [ "$(id -u)" -eq 0 ] || SUDO=sudo
    $SUDO apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq $missing
fi
