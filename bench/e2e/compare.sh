#!/bin/bash
# compare.sh URL [RUNS]: a one-shot `gemmctl mm` through a running gemmd
# against fresh_cublas (a fresh process with its own context and cuBLAS
# handle, copying from pageable memory), each timed as a whole process with
# date +%s%N, RUNS times each (default 5, interleaved, after one untimed run
# of each). Prints every time, the medians and their ratio; the target is
# gemmctl >= 3x sooner. Exit status 0 when both ran, 1 otherwise.
#
# Environment: GEMMCTL, FRESH_CUBLAS (default: from PATH, else next to this
# script's build tree), M N K (default 4096), DTYPE (default bf16), LOG
# (a file for the programs' own output; default /dev/null).
set -uo pipefail
url=${1:?usage: compare.sh URL [RUNS]}
runs=${2:-5}
M=${M:-4096} N=${N:-4096} K=${K:-4096} DTYPE=${DTYPE:-bf16}
LOG=${LOG:-/dev/null}
GEMMCTL=${GEMMCTL:-$(command -v gemmctl || echo gemmctl)}
FRESH_CUBLAS=${FRESH_CUBLAS:-$(command -v fresh_cublas || echo fresh_cublas)}

ctl=("$GEMMCTL" --url "$url" mm -m "$M" -n "$N" -k "$K" --dtype "$DTYPE")
fresh=("$FRESH_CUBLAS" -m "$M" -n "$N" -k "$K" --dtype "$DTYPE")

# Runs the command, prints its wall time in ms; returns its status.
timed() {
  local t0 t1 rc
  t0=$(date +%s%N)
  "$@" >>"$LOG" 2>&1
  rc=$?
  t1=$(date +%s%N)
  echo $(( (t1 - t0) / 1000 ))
  return $rc
}

median() { sort -n | awk '{v[NR]=$1} END {if (NR==0) print "nan";
  else if (NR%2) print v[(NR+1)/2]; else print (v[NR/2]+v[NR/2+1])/2}'; }

fail=0
echo "== warm-up (untimed): page cache, binaries, libraries" >>"$LOG"
timed "${ctl[@]}" >/dev/null || { echo "compare.sh: gemmctl failed (see $LOG)"; fail=1; }
timed "${fresh[@]}" >/dev/null || { echo "compare.sh: fresh_cublas failed (see $LOG)"; fail=1; }
tc=() tf=()
for ((i = 0; i < runs; i++)); do
  us=$(timed "${ctl[@]}") || fail=1
  tc+=("$us")
  us=$(timed "${fresh[@]}") || fail=1
  tf+=("$us")
done
mc=$(printf "%s\n" "${tc[@]}" | median)
mf=$(printf "%s\n" "${tf[@]}" | median)
ratio=$(awk -v a="$mf" -v b="$mc" 'BEGIN {if (b > 0) printf "%.2f", a / b; else print "nan"}')
verdict=$(awk -v r="$ratio" 'BEGIN {print (r + 0 >= 3) ? "meets" : "misses"}')
echo "gemmctl mm      ${M}x${N}x${K} $DTYPE, us: ${tc[*]}"
echo "fresh_cublas    ${M}x${N}x${K} $DTYPE, us: ${tf[*]}"
echo "| one-shot ${M}x${N}x${K} $DTYPE | median ms | runs |"
echo "|---|---|---|"
awk -v c="$mc" -v f="$mf" -v n="$runs" 'BEGIN {
  printf "| gemmctl mm (gemmd running) | %.1f | %d |\n", c / 1000, n
  printf "| fresh_cublas (own context) | %.1f | %d |\n", f / 1000, n }'
if ((fail)); then
  echo "ratio fresh/gemmctl: ${ratio}x, NOT VALID: a program failed (see $LOG)"
else
  echo "ratio fresh/gemmctl: ${ratio}x ($verdict the 3x target)"
fi
echo "compare: gemmctl_ms=$(awk -v c="$mc" 'BEGIN{printf "%.1f", c/1000}') fresh_ms=$(awk -v f="$mf" 'BEGIN{printf "%.1f", f/1000}') ratio=$ratio"
exit $fail
