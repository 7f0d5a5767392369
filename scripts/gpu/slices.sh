#!/bin/bash
# slices.sh [DIR]: on the GPU host, from a bundle made by
# scripts/gpu/bundle.sh (with bench/adversary/attacks.py and
# scripts/gpu/slices.py copied into it): slices.py's measurements
# (stopping, exactness, throughput with and without slices), then the
# integration suites that concern stopping work and isolation (faults,
# shutdown, isolation) on the CUDA backend. $OUT gets slices.txt, the
# suites' summary and every log in logs.tgz.
set -uo pipefail
DIR=${1:-.gpu-svc}
OUT=${OUT:-/tmp/out}
W=/tmp/slices-out
B=/tmp/gemmd-bundle
rm -rf $W $B && mkdir -p $W/suite $W/slices "$OUT"
cp -r "$DIR" $B && chmod -R a+rX $B
export LD_LIBRARY_PATH=$B/lib:/usr/local/cuda/lib64
nvidia-smi --query-gpu=name,clocks.sm,power.draw --format=csv,noheader \
    > "$OUT/slices.txt"
OUT=$W/slices timeout 240 python3 $B/slices.py $B >> "$OUT/slices.txt" 2>&1
OUT=$W/suite timeout 170 bash "$DIR/suite.sh" "$DIR" \
    "faults shutdown isolation" > $W/suite.txt 2>&1
tail -20 $W/suite.txt > "$OUT/suite-summary.txt"
tar czf "$OUT/logs.tgz" -C $W .
