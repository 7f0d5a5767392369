#!/bin/bash
# first-call.sh BUNDLE [ROUNDS]: on the GPU host, libgemmblas's first call
# in a fresh process with gemmd's spares and device pool on (the defaults)
# and off (--spare-bytes none --device-warm-bytes 0), alternating, ROUNDS
# times each (default 3), a fresh gemmd per run: blas-run.sh's bench part
# with FIRST_ARGS (default: dgemm and sgemm 4096, NVBLAS with autopin and
# libgemmblas, 3 steady calls). Prints each run's rows, prefixed "on R" or
# "off R", and gemmd's spare counters; logs under $OUT/{on,off}-R.
set -uo pipefail
b=$1
rounds=${2:-3}
here=$(cd "$(dirname "$0")" && pwd)
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
args=${FIRST_ARGS:---types d,s --sizes 4096 --variants nvblas-pin,gemmblas --procs 0 --calls 3}
for r in $(seq "$rounds"); do
    for mode in on off; do
        g=""
        [ "$mode" = off ] && g="--spare-bytes none --device-warm-bytes 0"
        o=$OUT/$mode-$r
        OUT=$o GEMMD_ARGS="$g" BENCH_ARGS="$args" \
            bash "$here/blas-run.sh" "$b" bench >"$o.log" 2>&1
        grep -E '^[dszc] +[0-9]+ ' "$o/bench_blas.txt" | sed "s/^/$mode $r  /"
        grep -E '^spares' "$o/bench-status.txt" | sed "s/^/$mode $r  /"
    done
done
