#!/bin/bash
# pipeline.sh [DIR]: one request at a time, copies overlapped with compute
# (--gemm-panels 16, the default) against copies then compute
# (--gemm-panels 0), in the same call (PANELS: the settings, default
# "0 8"; with more, a p50 table of them all follows): gemm_e2e with one
# process and one request in flight, every operand in shm, sampled rows checked. Shapes:
# 8192^3 and 4096^3 bf16, 16384x16384x4096 bf16, 8192^3 fp32 (tf32) and
# fp64, 2048x16384x8192 bf16 (panels of columns), 4096x8192x8192 bf16 with
# B resident. The table: TFLOP/s, p50, share of the PCIe floor and the
# ratio of the two settings. From a bundle of scripts/gpu/bundle.sh (DIR,
# default .gpu-svc); logs and CSVs in $OUT.
set -uo pipefail
D=${1:-.gpu-svc}
OUT=${OUT:-/tmp/out}
REQS=${REQS:-6}
PANELS=${PANELS:-0 16} # the settings; the table compares the first two
LOG_LEVEL=${LOG_LEVEL:-info} # gemmd's (debug: every block's timeline)
mkdir -p "$OUT"
export LD_LIBRARY_PATH=$D/lib:/usr/local/cuda/lib64
sock=/tmp/gemmd-pipe-$$.sock
URL=ipc://$sock
# csv FILE COLUMN: gemm_e2e's gemm row
csv() {
    [[ -f $1 ]] || { echo nan; return; }
    awk -F, -v col="$2" 'NR == 1 {for (i = 1; i <= NF; i++)
      if ($i == col) c = i; next} $2 == "gemm" {print $c; exit}' "$1"
}
shapes=(
    "bf16-8192 -m 8192 -n 8192 -k 8192 --dtype bf16"
    "bf16-4096 -m 4096 -n 4096 -k 4096 --dtype bf16"
    "bf16-16k-16k-4k -m 16384 -n 16384 -k 4096 --dtype bf16"
    "bf16-cols -m 2048 -n 16384 -k 8192 --dtype bf16"
    "bf16-resB -m 4096 -n 8192 -k 8192 --dtype bf16 --resident-b"
    "fp32-8192 -m 8192 -n 8192 -k 8192 --dtype fp32"
    "fp64-8192 -m 8192 -n 8192 -k 8192 --dtype fp64"
)
declare -A tf p50 floor
for panels in $PANELS; do
    rm -f $sock
    $D/bin/gemmd --backend cuda --listen $URL --gemm-panels $panels \
        --log-level $LOG_LEVEL 2>"$OUT/gemmd-panels$panels.log" &
    pid=$!
    for i in $(seq 300); do
        $D/bin/gemmctl --url $URL ping >/dev/null 2>&1 && break
        sleep 0.1
    done
    for s in "${shapes[@]}"; do
        set -- $s
        name=$1
        shift
        f=$OUT/$name-p$panels.csv
        timeout 120 $D/bin/gemm_e2e --url $URL --procs 1 --inflight 1 \
            --requests "$REQS" --warmup 2 --check --check-rows 2 \
            --label "$name-p$panels" --csv "$f" "$@" \
            >"$OUT/$name-p$panels.log" 2>&1 ||
            echo "$name panels $panels: gemm_e2e rc=$?"
        tf[$name-$panels]=$(csv "$f" tflops)
        p50[$name-$panels]=$(csv "$f" p50_us)
        floor[$name-$panels]=$(csv "$f" pcie_floor_pct)
    done
    kill -TERM $pid
    wait $pid
done
set -- $PANELS
p0=$1 p1=${2:-$1}
echo "| request | panels $p0: TFLOP/s | p50 ms | PCIe floor | panels $p1: TFLOP/s | p50 ms | PCIe floor | p50 ratio ($p0 / $p1) |"
echo "|---|---|---|---|---|---|---|---|"
for s in "${shapes[@]}"; do
    set -- $s
    n=$1
    awk -v n="$n" -v t0="${tf[$n-$p0]}" -v p0="${p50[$n-$p0]}" \
        -v f0="${floor[$n-$p0]}" -v t8="${tf[$n-$p1]}" -v p8="${p50[$n-$p1]}" \
        -v f8="${floor[$n-$p1]}" 'BEGIN {
        printf "| %s | %s | %.2f | %s | %s | %.2f | %s | %.2f |\n", n, t0,
            p0 / 1000, f0, t8, p8 / 1000, f8, (p8 > 0 ? p0 / p8 : 0) }'
done
if (($(echo $PANELS | wc -w) > 2)); then
    echo "| request | $(for p in $PANELS; do printf 'panels %s p50 ms | ' $p; done)"
    for s in "${shapes[@]}"; do
        set -- $s
        n=$1
        printf "| %s |" "$n"
        for p in $PANELS; do
            awk -v x="${p50[$n-$p]}" 'BEGIN {printf " %.2f |", x / 1000}'
        done
        echo
    done
fi
grep -h "errors\|wrong" "$OUT"/*-p*.log | grep -v " 0 wrong\|errors 0" | head -5
