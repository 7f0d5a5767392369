#!/bin/bash
# run_device.sh [tests|sanitize|bench SET|all SET]: what one device call runs.
# Binaries come prebuilt in .gpu-kernels/ (carried); cuBLAS from the device's
# CUDA toolkit. Logs go to $OUT; a short summary is printed last.
set -uo pipefail
B=.gpu-kernels
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
export LD_LIBRARY_PATH=/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
export PATH=/usr/local/cuda/bin:$PATH
what=${1:-all}
set_=${2:-quick}
nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,power.draw,temperature.gpu --format=csv,noheader
summary=""
if [[ $what == tests || $what == all ]]; then
  timeout 300 $B/kernels_gpu_test > "$OUT/gpu_test.log" 2>&1
  rc=$?
  grep -E "FAIL" "$OUT/gpu_test.log" | head -20
  summary+="gpu_test rc=$rc: $(tail -1 "$OUT/gpu_test.log")"$'\n'
fi
if [[ $what == sanitize || $what == all ]]; then
  for tool in memcheck racecheck; do
    timeout 240 compute-sanitizer --tool $tool --error-exitcode 9 \
      $B/kernels_gpu_test --quick > "$OUT/$tool.log" 2>&1
    rc=$?
    summary+="$tool rc=$rc: $(grep -E "ERROR SUMMARY|RACECHECK SUMMARY|Hazard" "$OUT/$tool.log" | tail -1) / $(grep "gpu tests" "$OUT/$tool.log")"$'\n'
  done
fi
if [[ $what == bench || $what == all ]]; then
  timeout 400 $B/bench_gemm --set "$set_" --csv "$OUT/bench.csv" > "$OUT/bench.log" 2>&1
  summary+="bench rc=$?"$'\n'
  sed -n '/^| shape/,$p' "$OUT/bench.log"
fi
echo "==== summary"
printf "%s" "$summary"
