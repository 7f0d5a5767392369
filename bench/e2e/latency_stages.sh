#!/bin/bash
# latency_stages.sh: where a small request's time goes. For each --spin-us
# value given, starts a fresh gemmd built with -DGEMM_TRACE=ON on a private
# socket, runs `gemm_e2e --latency` against it (an M^3 GEMM one at a time
# and a bare ping, --ping-baseline), stops it and prints gemm_e2e's rows
# followed by the daemon's per-stage p50/p99/mean (daemon/trace.h: "trace
# kind 1" is the ping's Hello, "trace kind 5" the GEMM).
#
# Usage: latency_stages.sh GEMMD GEMM_E2E [SPIN_US ...]   (default: 0 200)
# Environment: BACKEND (default cpu), M (default 64), SECS (timed seconds
# per phase, default 5), RUNS (runs per setting, default 1), GEMMD_ARGS
# (extra gemmd options), PRIO (when set, both processes run under
# `chrt -f PRIO`, which keeps other load on a small host off the numbers;
# not with a spin above 0 on a host with few cores: spinners at real-time
# priority starve the client).
# Exit status: 0, or 1 when a run failed or the daemon logged no stages
# (not built with -DGEMM_TRACE=ON).
set -uo pipefail
if [ $# -lt 2 ]; then
  echo "usage: $0 GEMMD GEMM_E2E [SPIN_US ...]" >&2
  exit 2
fi
gemmd=$1 e2e=$2
shift 2
spins=("$@")
[ ${#spins[@]} -eq 0 ] && spins=(0 200)
BACKEND=${BACKEND:-cpu} M=${M:-64} SECS=${SECS:-5} RUNS=${RUNS:-1}
rt=()
[ -n "${PRIO:-}" ] && rt=(chrt -f "$PRIO")
dir=$(mktemp -d /tmp/latency-stages-XXXXXX)
trap 'rm -rf "$dir"' EXIT
rc=0
for spin in "${spins[@]}"; do
  for run in $(seq "$RUNS"); do
    sock=$dir/gemmd.sock
    rm -f "$sock"
    # shellcheck disable=SC2086
    "${rt[@]}" "$gemmd" --backend "$BACKEND" --listen "ipc://$sock" \
      --spin-us "$spin" --log-level notice --stats-interval 0 \
      ${GEMMD_ARGS:-} 2>"$dir/gemmd.log" &
    pid=$!
    for _ in $(seq 200); do
      [ -S "$sock" ] && break
      kill -0 "$pid" 2>/dev/null || break
      sleep 0.05
    done
    echo "==== --spin-us $spin, ${M}^3, run $run"
    if ! "${rt[@]}" "$e2e" --url "ipc://$sock" --latency --ping-baseline \
      -m "$M" -n "$M" -k "$M" --seconds "$SECS" >"$dir/e2e.out" 2>&1; then
      echo "gemm_e2e failed:"
      rc=1
    fi
    grep -E '^\| latency|over a bare ping' "$dir/e2e.out"
    kill -TERM "$pid" 2>/dev/null
    wait "$pid"
    if ! grep -q 'trace kind' "$dir/gemmd.log"; then
      echo "the daemon logged no stages: build it with -DGEMM_TRACE=ON"
      rc=1
    fi
    grep -E 'trace kind (1|5):' "$dir/gemmd.log" | sed 's/.*trace kind/kind/'
  done
done
exit $rc
