#!/bin/bash
# suite.sh [DIR [SUITES]]: on the GPU host, from a bundle made by
# scripts/gpu/bundle.sh: a smoke test through gemmctl (kernels, mm over the
# dtypes and fp32 precisions, a small ladder bench whose CSV lands in $OUT),
# then the integration suites against gemmd's CUDA backend
# (GEMM_TEST_BACKEND=cuda): every one, or those named in SUITES (e.g.
# "cuda selection gemmctl gemm"). Logs go to $OUT; a summary last.
# TOTAL_S: seconds for the whole run (suites that no longer fit are
# listed as not run). BUNDLE_COPY: where the readable copy goes (default /tmp/gemmd-bundle;
# two runs side by side need two).
set -uo pipefail
SUITES=${2:-}
TOTAL_S=${TOTAL_S:-100000}
t_begin=$(date +%s)
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
# The suite runs gemmd as nobody (as root, the fixture's default): the
# bundle moves to a directory every user can read
D=${BUNDLE_COPY:-/tmp/gemmd-bundle}
rm -rf $D && cp -r "${1:-.gpu-svc}" $D && chmod -R a+rX $D
export LD_LIBRARY_PATH=$D/lib:/usr/local/cuda/lib64
export GEMM_TEST_GEMMD=$D/bin/gemmd GEMM_TEST_BACKEND=cuda
export GEMM_TEST_FAULT_PROBE=$D/bin/fault_probe
export GEMM_TEST_ACCESS_PROBE=$D/bin/access_probe
export GEMM_TEST_GEMMCTL=$D/bin/gemmctl
ls -l /dev/nvidia* | head -3
nvidia-smi --query-gpu=name,clocks.sm,power.draw --format=csv,noheader
sock=/tmp/gemmd-smoke-$$.sock
$D/bin/gemmd --backend cuda --listen ipc://$sock --log-level info \
    2> "$OUT/gemmd-smoke.log" &
pid=$!
for i in $(seq 100); do
    $D/bin/gemmctl --url ipc://$sock ping >/dev/null 2>&1 && break
    sleep 0.1
done
summary=""
{
    $D/bin/gemmctl --url ipc://$sock ping
    $D/bin/gemmctl --url ipc://$sock mm -m 4096 -n 4096 -k 4096 \
        --dtype bf16 --repeat 5 --check
    $D/bin/gemmctl --url ipc://$sock mm -m 8191 -n 8191 -k 8191 \
        --dtype bf16 --repeat 3 --check
    $D/bin/gemmctl --url ipc://$sock mm -m 300 -n 200 -k 100 --dtype fp32 \
        --check
    $D/bin/gemmctl --url ipc://$sock kernels
    for p in tf32 fp32; do
        $D/bin/gemmctl --url ipc://$sock mm -m 4096 -n 4096 -k 4096 \
            --dtype fp32 --precision $p --repeat 5 --check
    done
    $D/bin/gemmctl --url ipc://$sock bench --ladder --sizes 512,1024 \
        --repeat 3 --csv "$OUT/bench-ladder.csv"
    $D/bin/gemmctl --url ipc://$sock bench --dtype fp32 --precision tf32 \
        --sizes 1024 --repeat 3
    $D/bin/gemmctl --url ipc://$sock status
} > "$OUT/smoke.log" 2>&1
summary+="smoke rc=$?"$'\n'
kill $pid; wait $pid
summary+="gemmd exit=$?"$'\n'
for t in $D/bin/integration_*; do
    n=$(basename "$t")
    if [ -n "$SUITES" ] && ! [[ " $SUITES " == *" ${n#integration_} "* ]]; then
        continue
    fi
    l=$((TOTAL_S - ($(date +%s) - t_begin)))
    if ((l < 15)); then
        summary+="$n not run: out of time"$'\n'
        continue
    fi
    timeout $((l < 400 ? l - 5 : 400)) "$t" --verbose=0 -j1 > "$OUT/$n.log" 2>&1
    rc=$?
    summary+="$n rc=$rc $(grep -a Synthesis "$OUT/$n.log" | tail -1)"$'\n'
done
grep -aE "check|rate|time|stages|tensor maps|memory|kernel|skipped|^[a-z0-9-]+ +([0-9]+|ref|-) " \
    "$OUT/smoke.log"
echo "==== summary"
printf "%s" "$summary"
