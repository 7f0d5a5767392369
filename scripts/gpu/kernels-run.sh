#!/bin/bash
# kernels-run.sh: on the GPU host, from the pack scripts/gpu/kernels.sh
# made (carry .gpu-kern-pack; run `bash .gpu-kern-pack/kernels-run.sh`
# from the repository root): the kernel tests named in TESTS (default
# "gpu ozaki"; also "catalog", several minutes, and "memcheck",
# "racecheck" and "synccheck": compute-sanitizer on kernels_gpu_test
# --quick, our kernels only, run last, after the benchmarks, in the time
# left; racecheck stops with an internal error of its own on some cases,
# listed in kernel-notes v28), then
# bench_gemm for each entry of SETS (default "all fp32"):
#   all, quick, squares, skinny, decode, mid  16-bit rows, bf16 and fp16
#   fp32, tf32                                --type fp32 (tf32: the four
#                                             transposes)
#   fp64, int8, z128, c64                     --type fp64 / int8 sets
# Each step is bounded so that the whole fits TOTAL_S (default 570);
# a step left without time is listed as not run. Logs: $OUT/kernels.tgz
# and $OUT/summary.txt (each step's exit status and last table line).
set -uo pipefail
OUT=${OUT:-/tmp/out}
TOTAL_S=${TOTAL_S:-570}
TESTS=${TESTS:-gpu ozaki}
SETS=${SETS:-all fp32}
here=$(cd "$(dirname "$0")" && pwd)
D=/tmp/gemm-kern
L=/tmp/gemm-kern-logs
rm -rf $D $L && mkdir -p $D $L "$OUT"
tar xJf "$here/kern.tar.xz" -C $D
export LD_LIBRARY_PATH=$D/lib:/usr/local/cuda/lib64
t0=$(date +%s)
left() { echo $((TOTAL_S - ($(date +%s) - t0))); }
sum=$OUT/summary.txt
nvidia-smi --query-gpu=name,clocks.sm,power.draw,temperature.gpu \
    --format=csv,noheader >"$sum" 2>&1
step() { # step NAME COMMAND...: run it in the time left, note the result
    local name=$1 l
    shift
    l=$(($(left) - 5))
    if ((l < 10)); then
        echo "$name: not run, out of time" >>"$sum"
        return
    fi
    timeout $l "$@" >$L/$name.log 2>&1
    local rc=$?
    echo "$name: rc=$rc $(grep -aE 'geomean|passed|failed|skipped|SUMMARY' \
        $L/$name.log | tail -1) ($(($(date +%s) - t0)) s)" >>"$sum"
}
for t in $TESTS; do
    case $t in
    gpu) step test-gpu $D/bin/kernels_gpu_test ;;
    memcheck | racecheck | synccheck) ;; # after the benchmarks: slow, bounded
    *) step "test-$t" $D/bin/kernels_${t}_gpu_test ;;
    esac
done
B=$D/bin/bench_gemm
for s in $SETS; do
    case $s in
    fp32) step bench-fp32 $B --type fp32 ;;
    tf32) step bench-tf32 $B --type fp32 --set tf32 ;;
    fp64) step bench-fp64 $B --type fp64 --set fp64 --kernel auto --reps 6 ;;
    int8) step bench-int8 $B --type int8 --set int8 ;;
    z128 | c64) step bench-$s $B --type fp64 --set $s ;;
    *) step bench-$s $B --set $s --type both ;;
    esac
done
for t in $TESTS; do
    case $t in
    memcheck | racecheck | synccheck) # ours (not cuBLAS, the reference)
        step "test-$t" /usr/local/cuda/bin/compute-sanitizer --tool $t \
            --kernel-name kns=gemmk --error-exitcode 9 \
            $D/bin/kernels_gpu_test --quick
        ;;
    esac
done
tar czf "$OUT/kernels.tgz" -C /tmp gemm-kern-logs
cat "$sum"
