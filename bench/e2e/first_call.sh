#!/bin/bash
# first_call.sh: what a fresh daemon's first request of each type pays,
# with the kernel context warmed at start-up (the default) and without
# (GEMMK_WARM=0). For each setting a fresh gemmd starts on a private
# socket; the table shows the time from exec to the first answered ping,
# then per request (fp64 4096^3, bf16 4096^3, fp32 1024^3, c128 1024^3,
# bf16 64^3, in that order) the daemon's kernel time of the first call
# and of a second identical call (from gemmctl mm's report on stderr).
#
# Binaries from $E2E_DIR/bin (default .gpu-e2e/bin: gemmd, gemmctl), their
# libraries in $E2E_DIR/lib, CUDA from /usr/local/cuda/lib64. BACKEND
# (default cuda); logs go to $OUT.
set -uo pipefail
E2E_DIR=${E2E_DIR:-.gpu-e2e}
BIN=$E2E_DIR/bin
OUT=${OUT:-/tmp/out}
BACKEND=${BACKEND:-cuda}
mkdir -p "$OUT"
export LD_LIBRARY_PATH=$E2E_DIR/lib:/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}

now_ms() { date +%s%3N; }
# kernel time in ms from gemmctl mm's report
kernel_ms() { sed -n 's/.*kernel time \([0-9.]*\) ms.*/\1/p' | head -1; }

echo "| warm | ready ms | request | first kernel ms | second kernel ms |"
echo "|---|---|---|---|---|"
for warm in 1 0; do
    sock=/tmp/gemmd-first-$warm.sock
    t0=$(now_ms)
    GEMMK_WARM=$warm $BIN/gemmd --backend "$BACKEND" \
        --listen ipc://$sock --log-level info 2>"$OUT/first-$warm.log" &
    pid=$!
    for i in $(seq 600); do
        $BIN/gemmctl --url ipc://$sock ping >/dev/null 2>&1 && break
        sleep 0.05
    done
    ready=$(($(now_ms) - t0))
    for req in "fp64 4096" "bf16 4096" "fp32 1024" "c128 1024" "bf16 64"; do
        set -- $req
        one() {
            $BIN/gemmctl --url ipc://$sock mm -m "$2" -n "$2" -k "$2" \
                --dtype "$1" 2>&1 >/dev/null | tee -a "$OUT/first-$warm.mm" |
                kernel_ms
        }
        first=$(one "$1" "$2")
        second=$(one "$1" "$2")
        echo "| $warm | $ready | $1 $2^3 | $first | $second |"
    done
    kill -TERM $pid
    wait $pid
done
grep -h "warm" "$OUT"/first-*.log | head -4
