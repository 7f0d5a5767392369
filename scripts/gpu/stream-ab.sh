#!/bin/bash
# stream-ab.sh BUNDLE ROUNDS SETTING...: on the GPU host, streaming
# 4096^3 bf16 (run_device.sh's stream part: every operand in shm, 4
# processes x 2 in flight, SECS seconds, default 6) against gemmd under
# each SETTING, alternating, ROUNDS times, a fresh gemmd each run. A
# SETTING is LABEL=GEMMD[,OPTION...]: the label, the gemmd program (a
# path) and its options, comma-separated (e.g. "base=old/gemmd"
# "nopanels=.gpu-svc/bin/gemmd,--gemm-panels,0"). Prints one row a run
# (TFLOP/s, share of the PCIe floor, p50) and the medians a setting;
# logs and CSVs in $OUT. Clients come from BUNDLE (scripts/gpu/bundle.sh).
# E2E_ARGS replaces the stream's gemm_e2e options (e.g. resident B: "--procs
# 2 --inflight 2 -m 4096 -n 8192 -k 8192 --dtype bf16 --resident-b").
set -uo pipefail
b=${1:?usage: stream-ab.sh BUNDLE ROUNDS SETTING...}
rounds=${2:?rounds}
shift 2
OUT=${OUT:-/tmp/out}
SECS=${SECS:-6}
e2e=${E2E_ARGS:---procs 4 --inflight 2 -m 4096 -n 4096 -k 4096 --dtype bf16}
mkdir -p "$OUT"
export LD_LIBRARY_PATH=$b/lib:/usr/local/cuda/lib64
sock=/tmp/gemmd-ab-$$.sock
url=ipc://$sock
col() { # FILE COLUMN: the gemm row's value
    awk -F, -v c="$2" 'NR == 1 {for (i = 1; i <= NF; i++) if ($i == c) k = i;
        next} $2 == "gemm" {print $k; exit}' "$1" 2>/dev/null
}
echo "| setting | round | TFLOP/s | PCIe floor | p50 ms |"
echo "|---|---|---|---|---|"
declare -A all
for r in $(seq "$rounds"); do
    for s in "$@"; do
        label=${s%%=*}
        IFS=, read -r -a cmd <<<"${s#*=}"
        rm -f "$sock"
        "${cmd[@]}" --backend cuda --listen "$url" --log-level notice \
            2>"$OUT/gemmd-$label-$r.log" &
        pid=$!
        for _ in $(seq 300); do
            "$b/bin/gemmctl" --url "$url" ping >/dev/null 2>&1 && break
            sleep 0.1
        done
        f=$OUT/$label-$r.csv
        timeout $((SECS + 60)) "$b/bin/gemm_e2e" --url "$url" \
            --seconds "$SECS" $e2e --check --label "$label" --csv "$f" \
            >"$OUT/$label-$r.log" 2>&1 || echo "$label $r: gemm_e2e rc=$?"
        kill -TERM $pid
        wait $pid
        t=$(col "$f" tflops) fl=$(col "$f" pcie_floor_pct) p=$(col "$f" p50_us)
        echo "| $label | $r | $t | $fl | $(awk -v p="$p" 'BEGIN {printf "%.2f", p / 1000}') |"
        all[$label]+="$t "
    done
done
for s in "$@"; do
    label=${s%%=*}
    echo "$label median TFLOP/s: $(echo ${all[$label]} | tr ' ' '\n' | sort -g |
        awk '{v[NR] = $1} END {print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2}')"
done
