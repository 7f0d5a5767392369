#!/bin/bash
# verify.sh [DIR]: every correctness check of main's head on the GPU host
# in one device call, from a bundle made by scripts/gpu/bundle.sh (default
# .gpu-svc), on a host of one GPU or of two:
#
#   1. side by side (two GPUs: one each; one GPU: both on it):
#      GPU 0  suite.sh (every integration suite on cuda, gemmd as nobody),
#             then the kernel tests (kernels_gpu_test,
#             kernels_catalog_gpu_test with its int8 rows,
#             kernels_ozaki_gpu_test)
#      GPU 1  multi.sh's devices and suite parts (two device objects on
#             one GPU: --devices 0,0 and 0,0,0), then python.sh's pytest
#   2. alone, so that the rates mean something: multi.sh's e2e rows with
#      one and two device objects on GPU 0, bench/e2e/pipeline.sh (one
#      request at a time, --gemm-panels 0 against 16), and on a host of two
#      GPUs multi.sh's e2e rows and integration_devices across both
#      (--devices 0,1)
#
# Logs come back as $OUT/logs.tar.gz with the summaries in $OUT/summary.txt.
# Environment: TOTAL_S (default 580) bounds the whole; step 1 gets
# STEP1_S of it (default TOTAL_S - 200). SUITES: the integration suites
# of step 1 (default all); MULTI=0 leaves out multi.sh's parts on GPU 1;
# KERNEL_TESTS (default every kernels_*gpu_test of the bundle); STEP2
# (default "e2e pipeline two"; "measure" runs scripts/gpu/measure.sh
# with PARTS=$MEASURE_PARTS in the time left); KERNELS_GPU=1 runs the
# kernel tests on GPU 1 before its other work (default 0: after the
# suites on GPU 0).
set -uo pipefail
B=$(cd "${1:-.gpu-svc}" && pwd)
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
OUT=${OUT:-/tmp/out}
TOTAL_S=${TOTAL_S:-580}
STEP1_S=${STEP1_S:-$((TOTAL_S - 200))}
SUITES=${SUITES:-}
MULTI=${MULTI:-1}
KERNELS_GPU=${KERNELS_GPU:-0}
STEP2=${STEP2:-e2e pipeline two}
MEASURE_PARTS=${MEASURE_PARTS:-}
KERNEL_TESTS=${KERNEL_TESTS:-$(cd "$B/bin" && ls kernels_*gpu_test 2>/dev/null | tr '\n' ' ')}
L=/tmp/verify-logs
rm -rf $L && mkdir -p $L "$OUT"
t0=$(date +%s)
ngpu=$(nvidia-smi -L | wc -l)
nvidia-smi -L
second=$((ngpu > 1 ? 1 : 0))

kernel_tests() {
    for k in $KERNEL_TESTS; do
        [ -x "$B/bin/$k" ] || { echo "$k: not in the bundle"; continue; }
        l=$((STEP1_S - ($(date +%s) - t0)))
        ((l > 10)) || { echo "$k: not run (out of time)"; continue; }
        LD_LIBRARY_PATH=$B/lib:/usr/local/cuda/lib64 timeout $((l - 5)) \
            "$B/bin/$k" >$L/$k.log 2>&1
        echo "$k rc=$? $(tail -1 $L/$k.log)"
    done >$L/kernels.txt 2>&1
}
gpu0() {
    export CUDA_VISIBLE_DEVICES=0
    OUT=$L/suite TOTAL_S=$((STEP1_S - 60)) BUNDLE_COPY=/tmp/gemmd-b0 \
        bash "$B/suite.sh" "$B" "$SUITES" >$L/suite.txt 2>&1
    [ "$KERNELS_GPU" = 0 ] && kernel_tests
}
gpu1() {
    export CUDA_VISIBLE_DEVICES=$second
    [ "$KERNELS_GPU" = 1 ] && kernel_tests
    if [ "$MULTI" != 0 ]; then
        OUT=$L/multi-same PARTS="devices suite" TOTAL_S=$((STEP1_S - 100)) \
            BUNDLE_COPY=/tmp/gemmd-b1 bash "$B/multi.sh" "$B" \
            >$L/multi-same.txt 2>&1
    fi
    l=$((STEP1_S - ($(date +%s) - t0)))
    if ((l > 30)); then
        OUT=$L/python PY_BENCH=0 timeout $((l - 5)) \
            bash "$ROOT/scripts/gpu/python.sh" "$B" >$L/python.txt 2>&1
        echo "python.sh rc=$?" >>$L/python.txt
    else
        echo "python.sh: not run (out of time)" >$L/python.txt
    fi
}
gpu0 & p0=$!
gpu1 & p1=$!
wait $p0 $p1
echo "==== step 1 done at $(($(date +%s) - t0)) s"

left() { echo $((TOTAL_S - ($(date +%s) - t0))); }
has() { [[ " $STEP2 " == *" $1 "* ]]; }
if has e2e; then
    CUDA_VISIBLE_DEVICES=0 OUT=$L/e2e-same PARTS=e2e TAG=-same \
        BUNDLE_COPY=/tmp/gemmd-b0 timeout $(($(left) / 3)) \
        bash "$B/multi.sh" "$B" >$L/e2e-same.txt 2>&1
fi
if has pipeline; then
    CUDA_VISIBLE_DEVICES=0 OUT=$L/pipeline timeout $(($(left) / 2)) \
        bash "$B/pipeline.sh" "$B" >$L/pipeline.txt 2>&1
fi
if has measure; then
    OUT=$L/measure PARTS="$MEASURE_PARTS" TOTAL_S=$(($(left) - 10)) \
        bash "$ROOT/scripts/gpu/measure.sh" >$L/measure.txt 2>&1
fi
if has two && ((ngpu > 1)); then
    CUDA_VISIBLE_DEVICES=0,1 OUT=$L/e2e-two PARTS="devices e2e" TAG=-two \
        TWO=0,1 THREE=0,1,1 BUNDLE_COPY=/tmp/gemmd-b0 \
        timeout $(($(left) - 5)) bash "$B/multi.sh" "$B" >$L/e2e-two.txt 2>&1
fi
{
    echo "==== $(($(date +%s) - t0)) s, $ngpu GPU(s)"
    for f in suite.txt kernels.txt multi-same.txt python.txt e2e-same.txt pipeline.txt e2e-two.txt measure.txt; do
        [ -f $L/$f ] || continue
        echo "==== $f"
        sed -n '/==== summary/,$p' $L/$f
        case $f in kernels.txt) cat $L/$f ;; python.txt) tail -3 $L/$f ;;
            e2e-*) grep -E '^\| ' $L/$f ;; pipeline.txt | measure.txt) cat $L/$f ;; esac
    done
} | tee "$OUT/summary.txt"
tar czf "$OUT/logs.tar.gz" -C /tmp verify-logs
