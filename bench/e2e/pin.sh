#!/bin/bash
# pin.sh: what pinning client memory costs (issue 21, point 2), in one
# device call of about two minutes:
#
#   1. bench_pin table: cudaHostRegister / cudaHostUnregister of memfd
#      MAP_SHARED buffers, 64 MiB .. MAX_MIB (default 8192), pages touched
#      first and only allocated: seconds, GB/s and s/GB.
#   2. bench_pin first-gemm against a fresh gemmd: a 1 GiB buffer's
#      registration time, its first GEMM (4096^3 bf16) while the daemon
#      pins it in the background, the second, and one after the pin; the
#      daemon's own pin seconds and bytes (Status pin_seconds, pin_bytes).
#      Twice: a fresh daemon each time.
#
# Binaries from $E2E_DIR/bin (default .gpu-e2e/bin: gemmd, gemmctl,
# bench_pin), their libraries in $E2E_DIR/lib, CUDA from
# /usr/local/cuda/lib64. BACKEND (default cuda), MAX_MIB, MIB (the first-
# gemm buffer, default 1024); logs go to $OUT.
set -uo pipefail
E2E_DIR=${E2E_DIR:-.gpu-e2e}
BIN=$E2E_DIR/bin
OUT=${OUT:-/tmp/out}
BACKEND=${BACKEND:-cuda}
MAX_MIB=${MAX_MIB:-8192}
MIB=${MIB:-1024}
mkdir -p "$OUT"
export LD_LIBRARY_PATH=$E2E_DIR/lib:/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
rc=0

echo "== cudaHostRegister cost (bench_pin table --max-mib $MAX_MIB)"
timeout 100 "$BIN/bench_pin" table --max-mib "$MAX_MIB" || rc=1

for run in 1 2; do
    sock=$(mktemp -u /tmp/gemmd-pin.XXXXXX).sock
    "$BIN/gemmd" --backend "$BACKEND" --listen "ipc://$sock" \
        --log-level info 2>"$OUT/pin-gemmd-$run.log" &
    pid=$!
    up=0
    for i in $(seq 600); do # up to 30 s for the daemon to answer
        "$BIN/gemmctl" --url "ipc://$sock" ping >/dev/null 2>&1 && {
            up=1
            break
        }
        sleep 0.05
    done
    if [ $up = 1 ]; then
        echo "== first GEMM on a fresh $MIB MiB buffer (run $run)"
        timeout 120 "$BIN/bench_pin" first-gemm --url "ipc://$sock" \
            --mib "$MIB" || rc=1
        "$BIN/gemmctl" --url "ipc://$sock" status --json \
            >"$OUT/pin-status-$run.json" 2>&1
    else
        echo "gemmd did not answer; see $OUT/pin-gemmd-$run.log"
        rc=1
    fi
    kill -TERM $pid 2>/dev/null
    wait $pid
done
exit $rc
