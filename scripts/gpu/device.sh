#!/bin/bash
# device.sh WHAT...: one device call over the packed bundles in .gpu-pack/
# (made here by `scripts/gpu/bundle.sh .gpu-svc && tar cJf
# .gpu-pack/svc.tar.xz .gpu-svc`). WHAT: suite [SUITES] (the integration
# suites on the cuda backend, gemmd as nobody: scripts/gpu/suite.sh),
# python (scripts/gpu/python.sh), blas (scripts/gpu/blas-run.sh). Logs go
# to /tmp/logs and come back as one $OUT/logs.tar.gz (the device returns 8
# files at most); each part's summary is printed last.
set -uo pipefail
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT" /tmp/logs
for p in .gpu-pack/*.tar.xz; do tar xJf "$p"; done
for p in .gpu-pack/*.tar.gz; do [ -f "$p" ] && tar xzf "$p"; done
what=${1:-suite}
shift || true
case $what in
suite)
    OUT=/tmp/logs/suite bash scripts/gpu/suite.sh .gpu-svc "$*" ;;
python)
    OUT=/tmp/logs/python bash scripts/gpu/python.sh .gpu-svc ;;
blas)
    OUT=/tmp/logs/blas bash scripts/gpu/blas-run.sh "$@" ;;
esac
rc=$?
tar czf "$OUT/logs.tar.gz" -C /tmp logs
exit $rc
