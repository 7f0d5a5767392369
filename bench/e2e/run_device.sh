#!/bin/bash
# run_device.sh: the end-to-end benchmark of issue 4 (point 8 and its
# targets) in one device call, under 8 minutes. For every part it starts a
# fresh gemmd on a private socket (so the daemon's per-stage means cover that
# part only), runs it, saves `gemmctl status --json`, and stops the daemon:
#
#   stream    4096^3 bf16, every operand from shm, 4 procs x 2 in flight and
#             2 procs x 4: % of the PCIe floor
#   unaligned 8191^3 bf16 end to end (the daemon pads to a 16-byte pitch);
#             its kernel stage against cuBLAS on the same problem
#             (fresh_cublas --repeat, CUDA events)
#   latency   64^3 one at a time against a bare ping (gemm_ping)
#   resident  B resident, M=4096 N=K=8192: e2e TFLOP/s against the daemon's
#             kernel-stage TFLOP/s (and cuBLAS for reference)
#   oneshot   compare.sh: `gemmctl mm` 4096^3 bf16 vs fresh_cublas, whole
#             processes
#
# Binaries come prebuilt in $E2E_DIR/bin (default .gpu-e2e/bin: gemmd,
# gemmctl, gemm_e2e, fresh_cublas), their libraries in $E2E_DIR/lib; the CUDA
# runtime and cuBLAS from /usr/local/cuda/lib64. Logs and CSVs go to $OUT;
# one summary table is printed last.
#
# Environment: BACKEND (default cuda), SECS (timed seconds per streaming
# run, default 8), QUICK=1 (tiny shapes, for a dry run on the CPU backend),
# GEMMD_ARGS (extra gemmd options), TOTAL_S (time budget, default 450 s:
# every step's timeout is cut to what is left of it).
set -uo pipefail
E2E_DIR=${E2E_DIR:-.gpu-e2e}
BIN=$E2E_DIR/bin
OUT=${OUT:-/tmp/out}
BACKEND=${BACKEND:-cuda}
SECS=${SECS:-8}
GEMMD_ARGS=${GEMMD_ARGS:-}
HERE=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$OUT"
export LD_LIBRARY_PATH=$E2E_DIR/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
sockdir=$(mktemp -d /tmp/gemm-e2e.XXXXXX)
URL=ipc://$sockdir/gemmd.sock
t_begin=$(date +%s)
TOTAL_S=${TOTAL_S:-450} # every step's timeout is cut to fit in this
# tmo N: N seconds, or what is left of TOTAL_S (at least 5)
tmo() {
  local left=$((TOTAL_S - ($(date +%s) - t_begin)))
  ((left < 5)) && left=5
  echo $(($1 < left ? $1 : left))
}

if [[ ${QUICK:-0} == 1 ]]; then
  D=256 BIG=255 RM=128 RNK=256 LAT=64 CMP=256 CHECK_EVERY=20
else
  D=4096 BIG=8191 RM=4096 RNK=8192 LAT=64 CMP=4096 CHECK_EVERY=0
fi
every=()
((CHECK_EVERY > 0)) && every=(--check-every "$CHECK_EVERY")

nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm,power.draw,temperature.gpu \
  --format=csv,noheader 2>/dev/null || echo "(no nvidia-smi)"
"$BIN/gemmd" --version 2>/dev/null | head -1

daemon_pid=
start_daemon() { # NAME
  "$BIN/gemmd" --listen "$URL" --backend "$BACKEND" --log-level notice \
    $GEMMD_ARGS >"$OUT/gemmd-$1.log" 2>&1 &
  daemon_pid=$!
  for ((i = 0; i < 300; i++)); do
    timeout 10 "$BIN/gemmctl" --url "$URL" ping >/dev/null 2>&1 && return 0
    kill -0 "$daemon_pid" 2>/dev/null || break
    sleep 0.1
  done
  echo "run_device: gemmd ($1) did not come up; its log:"
  tail -20 "$OUT/gemmd-$1.log"
  return 1
}
stop_daemon() { # NAME
  timeout 10 "$BIN/gemmctl" --url "$URL" status --json >"$OUT/status-$1.json" 2>&1
  kill -TERM "$daemon_pid" 2>/dev/null
  for ((i = 0; i < 400; i++)); do
    kill -0 "$daemon_pid" 2>/dev/null || break
    sleep 0.1
  done
  kill -KILL "$daemon_pid" 2>/dev/null
  wait "$daemon_pid" 2>/dev/null
  echo "gemmd ($1) exit status $?" >>"$OUT/gemmd-$1.log"
}
# csv FILE PHASE COLUMN: one value from gemm_e2e's CSV
csv() {
  [[ -f $1 ]] || { echo nan; return; }
  awk -F, -v ph="$2" -v col="$3" 'NR == 1 {for (i = 1; i <= NF; i++)
    if ($i == col) c = i; next} $2 == ph {print $c; exit}' "$1"
}
# cublas_tflops LOG: the warm gemm rate fresh_cublas printed
cublas_tflops() {
  sed -n 's/^| gemm .*= \([0-9.]*\) TFLOP\/s.*/\1/p' "$1" 2>/dev/null | head -1
}
e2e() { # NAME ARGS...: gemm_e2e, logged, table rows echoed
  local name=$1; shift
  timeout "$(tmo 150)" "$BIN/gemm_e2e" --url "$URL" --label "$name" \
    --csv "$OUT/$name.csv" "$@" >"$OUT/$name.log" 2>&1
  local rc=$?
  grep -E "^\| $name|^daemon,|^round trip|^gemm_e2e: client|unavailable" \
    "$OUT/$name.log"
  echo "($name: exit $rc)"
  return $rc
}

echo "==== stream ${D}^3 bf16, all operands from shm"
if start_daemon stream; then
  e2e stream-p4q2 --procs 4 --inflight 2 --seconds "$SECS" -m $D -n $D -k $D \
    --dtype bf16 --check "${every[@]}"
  e2e stream-p2q4 --procs 2 --inflight 4 --seconds "$SECS" -m $D -n $D -k $D \
    --dtype bf16 --check "${every[@]}"
  stop_daemon stream
fi

echo "==== unaligned ${BIG}^3 bf16 end to end"
if start_daemon unaligned; then
  e2e unaligned --procs 1 --inflight 2 --requests 12 -m $BIG -n $BIG -k $BIG \
    --dtype bf16 --check --check-rows 4
  stop_daemon unaligned
fi
timeout "$(tmo 120)" "$BIN/fresh_cublas" -m $BIG -n $BIG -k $BIG --dtype bf16 \
  --repeat 6 >"$OUT/cublas-unaligned.log" 2>&1
echo "(fresh_cublas ${BIG}^3: exit $?)"
grep -E '^\| (gemm|total)' "$OUT/cublas-unaligned.log"

echo "==== latency ${LAT}^3 vs ping"
if start_daemon latency; then
  e2e latency --latency --procs 1 --seconds 5 -m $LAT -n $LAT -k $LAT --check
  stop_daemon latency
fi

echo "==== resident B, M=$RM N=K=$RNK bf16"
resident_rc=0
if start_daemon resident; then
  e2e resident --resident-b --procs 2 --inflight 2 --seconds "$SECS" \
    -m $RM -n $RNK -k $RNK --dtype bf16 --check "${every[@]}"
  resident_rc=$?
  stop_daemon resident
fi
timeout "$(tmo 120)" "$BIN/fresh_cublas" -m $RM -n $RNK -k $RNK --dtype bf16 \
  --repeat 6 >"$OUT/cublas-resident.log" 2>&1
echo "(fresh_cublas ${RM}x${RNK}x${RNK}: exit $?)"
grep -E '^\| gemm' "$OUT/cublas-resident.log"

echo "==== one-shot gemmctl mm vs fresh_cublas, ${CMP}^3 bf16"
if start_daemon oneshot; then
  GEMMCTL=$BIN/gemmctl FRESH_CUBLAS=$BIN/fresh_cublas LOG=$OUT/compare.log \
    M=$CMP N=$CMP K=$CMP DTYPE=bf16 timeout "$(tmo 150)" "$HERE/compare.sh" "$URL" 5 \
    | tee "$OUT/compare.out"
  echo "(compare.sh: exit ${PIPESTATUS[0]})"
  stop_daemon oneshot
fi
rm -rf "$sockdir"

# ---- the summary: one row per target ----
pct() { awk -v a="$1" -v b="$2" 'BEGIN {if (b + 0 > 0 && a != "nan")
  printf "%.1f", 100 * a / b; else print "nan"}'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN {if (b + 0 > 0 && a != "nan" && a != "")
  printf "%.2f", a / b; else print "nan"}'; }
verdict() { # VALUE OP GOAL
  awk -v v="$1" -v op="$2" -v g="$3" 'BEGIN {
    if (v == "nan" || v == "") {print "n/a"; exit}
    ok = (op == ">=") ? (v + 0 >= g + 0) : (v + 0 <= g + 0)
    print ok ? "meets" : "MISSES" }'; }

f1=$(csv "$OUT/stream-p4q2.csv" gemm pcie_floor_pct)
f2=$(csv "$OUT/stream-p2q4.csv" gemm pcie_floor_pct)
floor_best=$(printf "%s\n%s\n" "$f1" "$f2" | grep -v nan | sort -g | tail -1)
floor_best=${floor_best:-nan}
s1=$(csv "$OUT/stream-p4q2.csv" gemm tflops)
h1=$(csv "$OUT/stream-p4q2.csv" gemm h2d_gbs)
d1=$(csv "$OUT/stream-p4q2.csv" gemm d2h_gbs)

u_tf=$(csv "$OUT/unaligned.csv" gemm tflops)
u_k=$(csv "$OUT/unaligned.csv" gemm kernel_tflops)
u_cb=$(cublas_tflops "$OUT/cublas-unaligned.log")
u_ratio=$(ratio "$u_k" "${u_cb:-nan}")

p_gemm=$(csv "$OUT/latency.csv" gemm p50_us)
p_ping=$(csv "$OUT/latency.csv" ping p50_us)
p_diff=$(awk -v a="$p_gemm" -v b="$p_ping" 'BEGIN {if (a != "nan" && b != "nan")
  printf "%.1f", a - b; else print "nan"}')

if ((resident_rc == 3)); then
  r_tf=nan r_k=nan r_pct=nan r_note="mode unavailable in this build"
else
  r_tf=$(csv "$OUT/resident.csv" gemm tflops)
  r_k=$(csv "$OUT/resident.csv" gemm kernel_tflops)
  r_pct=$(pct "$r_tf" "$r_k")
  r_note="e2e $r_tf / kernel $r_k TFLOP/s; cuBLAS $(cublas_tflops "$OUT/cublas-resident.log")"
fi

c_line=$(grep '^compare:' "$OUT/compare.out" 2>/dev/null)
c_ratio=$(sed -n 's/.*ratio=\([0-9.na]*\).*/\1/p' <<<"$c_line")
grep -q 'NOT VALID' "$OUT/compare.out" 2>/dev/null && c_ratio=nan

echo
echo "==== summary (logs and CSVs in $OUT; $(($(date +%s) - t_begin)) s)"
echo "| target | measured | goal | verdict | detail |"
echo "|---|---|---|---|---|"
echo "| stream ${D}^3 bf16, % of PCIe floor (best of P4Q2, P2Q4) | ${floor_best}% | >= 90% | $(verdict "$floor_best" ">=" 90) | P4Q2: $f1%, $s1 TFLOP/s, H2D $h1 / D2H $d1 GB/s; P2Q4: $f2% |"
echo "| resident B ${RM}x${RNK}x${RNK}, e2e / kernel TFLOP/s | ${r_pct}% | >= 85% | $(verdict "$r_pct" ">=" 85) | $r_note |"
echo "| ${LAT}^3 p50 minus bare ping p50 | ${p_diff} us | <= 60 us | $(verdict "$p_diff" "<=" 60) | gemm p50 $p_gemm us, ping p50 $p_ping us |"
echo "| one-shot ${CMP}^3: fresh_cublas / gemmctl mm wall | ${c_ratio}x | >= 3x | $(verdict "$c_ratio" ">=" 3) | ${c_line#compare: } |"
echo "| ${BIG}^3 kernel TFLOP/s / cuBLAS's | ${u_ratio}x | >= 3x | $(verdict "$u_ratio" ">=" 3) | daemon kernel stage $u_k, cuBLAS ${u_cb:-nan} TFLOP/s; e2e $u_tf TFLOP/s |"
