#!/bin/bash
# multi.sh [DIR]: the several-devices check on a one-GPU host, in one
# device call, from a bundle made by scripts/gpu/bundle.sh (which adds
# gemmd_test, gemmd with the test hooks):
#
#   devices   integration_devices on cuda with three device objects on
#             GPU 0 (--devices 0,0,0), against gemmd_test (its forced
#             fault needs the hooks)
#   e2e       gemm_e2e, each with one device object (--devices 0) and with
#             two on the same GPU (--devices 0,0): 4096^3 bf16 streamed
#             (4 processes x 2 in flight, every operand from shm), and
#             16384^3 bf16 one request at a time: whole (one panel per
#             GPU: the objects share GPU 0) and, with --split-same-gpu,
#             split by panels of D across the two objects
#   suite     every integration suite on cuda with GEMM_TEST_GEMMD_ARGS=
#             "--devices 0,0" (two device objects on GPU 0), in the time
#             left of TOTAL_S
#
# Logs, CSVs and status JSON go to $OUT (and all of them in $OUT/logs.tar.gz
# first: the device tool brings back 8 files); a summary is printed last.
# Environment: TOTAL_S (default 400), SECS (streaming seconds, default 6),
# SPLIT_REQS (16384^3 requests per run, default 4), TWO (the two-device
# list, default 0,0; 0,1 on a host of two GPUs), THREE (the tests' list,
# default 0,0,0).
set -uo pipefail
OUT=${OUT:-/tmp/out}
TOTAL_S=${TOTAL_S:-400}
SECS=${SECS:-6}
SPLIT_REQS=${SPLIT_REQS:-4}
TWO=${TWO:-0,0}
THREE=${THREE:-0,0,0}
PARTS=" ${PARTS:-devices e2e suite} "
TAG=${TAG:-}
mkdir -p "$OUT"
t_begin=$(date +%s)
left() { echo $((TOTAL_S - ($(date +%s) - t_begin))); }
# the suites run gemmd as nobody (as root): a bundle every user can read
D=${BUNDLE_COPY:-/tmp/gemmd-multi-bundle}
rm -rf $D && cp -r "${1:-.gpu-multi}" $D && chmod -R a+rX $D
export LD_LIBRARY_PATH=$D/lib:/usr/local/cuda/lib64
export GEMM_TEST_BACKEND=cuda
export GEMM_TEST_FAULT_PROBE=$D/bin/fault_probe
export GEMM_TEST_ACCESS_PROBE=$D/bin/access_probe
export GEMM_TEST_GEMMCTL=$D/bin/gemmctl
nvidia-smi --query-gpu=name,clocks.sm,power.draw --format=csv,noheader
summary=""

if [[ $PARTS == *" devices "* ]]; then
    echo "==== devices: integration_devices, --devices $THREE"
    GEMM_TEST_GEMMD=$D/bin/gemmd_test GEMM_TEST_DEVICES=$THREE \
        timeout 120 $D/bin/integration_devices --verbose=0 -j1 \
        >"$OUT/integration_devices.log" 2>&1
    rc=$?
    summary+="integration_devices ($THREE) rc=$rc $(grep -a Synthesis "$OUT/integration_devices.log" | tail -1)"$'\n'
    grep -aE "FAIL|Assert|differs|SKIP" "$OUT/integration_devices.log" | head -20
fi

sock=/tmp/gemmd-multi-$$.sock
URL=ipc://$sock
pid=
start() { # NAME DEVICES
    rm -f $sock
    $D/bin/gemmd --backend cuda --listen $URL --devices "$2" \
        --log-level info ${GEMMD_EXTRA:-} 2>"$OUT/gemmd-$1.log" &
    pid=$!
    for i in $(seq 300); do
        $D/bin/gemmctl --url $URL ping >/dev/null 2>&1 && return 0
        kill -0 $pid 2>/dev/null || break
        sleep 0.1
    done
    echo "gemmd ($1) did not come up"; tail -5 "$OUT/gemmd-$1.log"
    return 1
}
stop() { # NAME
    $D/bin/gemmctl --url $URL status --json >"$OUT/status-$1.json" 2>&1
    $D/bin/gemmctl --url $URL status >"$OUT/status-$1.txt" 2>&1
    kill -TERM $pid; wait $pid
    echo "gemmd ($1) exit $?" >>"$OUT/gemmd-$1.log"
}
# csv FILE COLUMN: gemm_e2e's gemm row
csv() {
    [[ -f $1 ]] || { echo nan; return; }
    awk -F, -v col="$2" 'NR == 1 {for (i = 1; i <= NF; i++)
      if ($i == col) c = i; next} $2 == "gemm" {print $c; exit}' "$1"
}
e2e() { # NAME DEVICES ARGS...
    local name=$1 devs=$2
    shift 2
    start "$name" "$devs" || return 1
    timeout 150 $D/bin/gemm_e2e --url $URL --label "$name" \
        --csv "$OUT/$name.csv" "$@" >"$OUT/$name.log" 2>&1
    local rc=$?
    stop "$name"
    grep -E "^\| $name" "$OUT/$name.log"
    summary+="$name (--devices $devs) rc=$rc: $(csv "$OUT/$name.csv" tflops) TFLOP/s, p50 $(csv "$OUT/$name.csv" p50_us) us, errors $(csv "$OUT/$name.csv" errors)"$'\n'
}
if [[ $PARTS == *" e2e "* ]]; then
    echo "==== e2e"
    S="-m 4096 -n 4096 -k 4096 --dtype bf16 --check"
    e2e stream-1dev$TAG 0 --procs 4 --inflight 2 --seconds "$SECS" $S
    e2e stream-2dev$TAG "$TWO" --procs 4 --inflight 2 --seconds "$SECS" $S
    B="-m 16384 -n 16384 -k 16384 --dtype bf16 --check --check-rows 2"
    e2e split-1dev$TAG 0 --procs 1 --inflight 1 --requests "$SPLIT_REQS" --warmup 1 $B
    e2e split-2dev$TAG "$TWO" --procs 1 --inflight 1 --requests "$SPLIT_REQS" --warmup 1 $B
    GEMMD_EXTRA=--split-same-gpu e2e split-2dev-same$TAG "$TWO" --procs 1 --inflight 1 \
        --requests "$SPLIT_REQS" --warmup 1 $B
    grep -h '"panels"' "$OUT"/status-split-2dev$TAG.json | head -2
    cat "$OUT/status-split-2dev$TAG.txt" | tail -4
fi

if [[ $PARTS == *" suite "* ]]; then
    echo "==== suite: every integration suite, GEMM_TEST_GEMMD_ARGS=--devices $TWO"
    export GEMM_TEST_GEMMD=$D/bin/gemmd GEMM_TEST_GEMMD_ARGS="--devices $TWO"
    for t in $D/bin/integration_*; do
        n=$(basename "$t")
        [[ $n == integration_devices ]] && continue
        l=$(left)
        if ((l < 15)); then
            summary+="$n not run: out of time"$'\n'
            continue
        fi
        timeout $((l - 5)) "$t" --verbose=0 -j1 >"$OUT/$n.log" 2>&1
        rc=$?
        summary+="$n rc=$rc $(grep -a Synthesis "$OUT/$n.log" | tail -1)"$'\n'
    done
fi
echo "==== summary ($(($(date +%s) - t_begin)) s)"
printf "%s" "$summary" | tee "$OUT/summary.txt"
# one file back: the device tool returns at most 8
(cd "$OUT" && tar czf /tmp/multi-logs.tar.gz . && rm -rf ./* &&
    mv /tmp/multi-logs.tar.gz logs.tar.gz)
