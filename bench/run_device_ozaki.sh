#!/bin/bash
# run_device_ozaki.sh: the device driver of the int8 / Ozaki-II work
# (issue 14; docs/ozaki-notes.md). Copy it beside bins.tar.xz (stripped
# kernels_ozaki_gpu_test and bench_gemm) into a carried .gpu-* folder; it
# unpacks the binaries and runs the steps named on the command line, each
# under its own timeout; logs (and CSVs with CSV=1) in $OUT.
set -uo pipefail
cd "$(dirname "$0")"
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
tar xJf bins.tar.xz || exit 1
NCU=$(command -v ncu || ls /usr/local/cuda/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
csv() { if [[ ${CSV:-0} == 1 ]]; then echo "--csv $OUT/$1.csv"; else echo "--csv /tmp/$1.csv"; fi; }
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,power.draw,temperature.gpu --format=csv,noheader
for step in "$@"; do
  t0=$(date +%s)
  case $step in
  s8) timeout 100 ./kernels_ozaki_gpu_test --s8 > "$OUT/s8.log" 2>&1; rc=$?
      grep -E "^FAIL" "$OUT/s8.log" | head -8; tail -1 "$OUT/s8.log" ;;
  f64) timeout 180 ./kernels_ozaki_gpu_test --f64 > "$OUT/f64.log" 2>&1; rc=$?
      grep -E "^FAIL" "$OUT/f64.log" | head -12; grep -E "phi|auto |huge" "$OUT/f64.log" | cut -c1-200 | head -16; tail -1 "$OUT/f64.log" ;;
  int8) timeout 90 ./bench_gemm --type int8 --set ${I8SET:-int8quick} --reps 20 $(csv int8) > "$OUT/int8.log" 2>&1; rc=$?
      sed -n '/^| shape/,$p' "$OUT/int8.log" ;;
  var) timeout 150 ./bench_gemm --type fp64 --set fp64quick --kernel ${VARK:-oz2-bytes,oz2-unfused,oz2-prep} --reps 10 $(csv var) > "$OUT/var.log" 2>&1; rc=$?
      sed -n '/^| shape/,$p' "$OUT/var.log" ;;
  varnopp) GEMMK_OZ_PP=0 timeout 100 ./bench_gemm --type fp64 --set fp64quick --kernel oz2-bytes --reps 10 > "$OUT/varnopp.log" 2>&1; rc=$?
      sed -n '/^| shape/,$p' "$OUT/varnopp.log" ;;
  cal) timeout 120 ./bench_gemm --type fp64 --set fp64cal $(csv cal) > "$OUT/cal.log" 2>&1; rc=$?
      cut -c1-250 "$OUT/cal.log" ;;
  ksweep) timeout 240 ./bench_gemm --type fp64 --set fp64ksweep --kernel ${KSK:-oz2-bytes} --reps 6 $(csv ksweep) > "$OUT/ksweep.log" 2>&1; rc=$?
      sed -n '/^| shape/,$p' "$OUT/ksweep.log" ;;
  fp64) timeout 400 ./bench_gemm --type fp64 --set ${F64SET:-fp64} --kernel ${F64K:-auto} --reps 12 $(csv fp64) > "$OUT/fp64.log" 2>&1; rc=$?
      sed -n '/^| shape/,$p' "$OUT/fp64.log" ;;
  prepncu) timeout 150 $NCU --metrics gpu__time_duration.sum --print-summary per-kernel ./bench_gemm --type fp64 --set fp64quick --kernel oz2-prep --reps 2 > "$OUT/prepncu.log" 2>&1; rc=$?
      grep -E "^  [a-zA-Z_].*\(|gpu__time_duration" "$OUT/prepncu.log" | sed 's/(long long.*//' | cut -c1-150 | head -40 ;;
  byncu) timeout 150 $NCU --metrics gpu__time_duration.sum --print-summary per-kernel ./bench_gemm --type fp64 --set fp64quick --kernel oz2-bytes --reps 2 > "$OUT/byncu.log" 2>&1; rc=$?
      grep -E "^  [a-zA-Z_].*\(|gpu__time_duration" "$OUT/byncu.log" | grep -v xmma -A1 | grep -v "^--" | sed 's/(const.*//;s/(long long.*//' | cut -c1-110 | head -40 ;;
  *) echo "unknown step $step"; rc=2 ;;
  esac
  echo "== $step rc=$rc $(( $(date +%s) - t0 ))s"
done
