#!/bin/bash
# measure.sh: the benchmarks of one device call, one after another on GPU
# 0 (each alone, so that its rates mean something), from the bundles made
# here by scripts/gpu/bundle.sh (.gpu-svc) and scripts/gpu/blas.sh
# (.gpu-blas):
#   pipeline  bench/e2e/pipeline.sh: one request at a time, --gemm-panels
#             16 (the default) against 0
#   latency   gemm_e2e --latency: 64^3 and 8^3 one at a time against a
#             bare ping
#   int8      gemmctl mm --dtype int8 (int32 out) 4096^3 and 8192^3,
#             checked, with the kernel's rate
#   python    scripts/gpu/python.sh: pytest on cuda, bench_python (fresh
#             processes, numpy in/out against torch)
#   stacked   bench_stacked at 64 x 1024^3 with 8 experts over 4096
#             tokens, 1024 x 64^3, 16 x 2048^3 with 64 experts over 16384
#             tokens
#   fresh     bench_fresh.py at 4096^2
#   grouped   bench_grouped (the bundle's, when there): the grouped kernel
#             against a loop of single GEMMs and cuBLAS's batched calls
#   pin       bench/e2e/pin.sh (bench_pin, when in the bundle): pinning
#             cost per GB up to PIN_MAX_MIB (default 4096), and a fresh
#             buffer's first GEMM while gemmd pins it in the background
#   blas      scripts/gpu/blas-run.sh bench: bench_blas in the time left
# PARTS (default pipeline latency int8 python stacked fresh) picks; TOTAL_S
# (default 580) bounds the whole (blas gets what is left). Logs: $OUT/logs.tar.gz, the
# summary in $OUT/summary.txt.
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
OUT=${OUT:-/tmp/out}
TOTAL_S=${TOTAL_S:-580}
PARTS=" ${PARTS:-pipeline latency int8 python stacked fresh} "
L=/tmp/measure-logs
rm -rf $L && mkdir -p $L "$OUT"
t0=$(date +%s)
left() { echo $((TOTAL_S - ($(date +%s) - t0))); }
# cap S: S seconds, or what is left of TOTAL_S less 10 when that is less
cap() { local l=$(($(left) - 10)); echo $((l < $1 ? (l > 1 ? l : 1) : $1)); }
export CUDA_VISIBLE_DEVICES=0
S=$ROOT/.gpu-svc
nvidia-smi --query-gpu=name,clocks.sm,power.draw --format=csv,noheader
export LD_LIBRARY_PATH=$S/lib:/usr/local/cuda/lib64
sock=/tmp/gemmd-measure-$$.sock
URL=ipc://$sock
start() { # NAME [ARGS]
    local name=$1
    shift
    rm -f $sock
    $S/bin/gemmd --backend ${BACKEND:-cuda} --listen $URL --log-level info "$@" \
        2>"$L/gemmd-$name.log" &
    pid=$!
    for i in $(seq 300); do
        $S/bin/gemmctl --url $URL ping >/dev/null 2>&1 && return 0
        sleep 0.1
    done
    return 1
}
stop() {
    kill -TERM $pid
    wait $pid
}
has() { [[ $PARTS == *" $1 "* ]]; }

if has pipeline; then
    echo "==== pipeline ($(left) s left)"
    OUT=$L/pipeline timeout $(cap 150) bash "$S/pipeline.sh" "$S" 2>&1 |
        tee $L/pipeline.txt | grep -E '^\|'
fi
if has latency; then
    echo "==== latency ($(left) s left)"
    start latency
    for n in 64 8; do
        timeout 30 $S/bin/gemm_e2e --url $URL --latency --ping-baseline \
            --procs 1 --seconds 4 -m $n -n $n -k $n --check \
            --label lat$n --csv $L/lat$n.csv >$L/lat$n.log 2>&1
        grep -E '^\| (lat|ping)' $L/lat$n.log
    done
    stop
fi
if has int8; then
    echo "==== int8 ($(left) s left)"
    start int8
    for n in 4096 8192; do
        timeout 60 $S/bin/gemmctl --url $URL mm -m $n -n $n -k $n \
            --dtype int8 --repeat 10 --check 2>&1 | grep -E "kernel|rate|check"
    done
    for n in 4096 8192; do
        timeout 60 $S/bin/gemmctl --url $URL mm -m $n -n $n -k $n \
            --dtype bf16 --repeat 10 2>&1 | grep -E "kernel"
    done
    stop
fi
if has python; then
    echo "==== python ($(left) s left)"
    OUT=$L/python timeout $(cap 240) \
        bash "$ROOT/scripts/gpu/python.sh" "$S" >$L/python.txt 2>&1
    sed -n '/==== summary/,$p' $L/python.txt
    grep -A40 "^== " $L/python.txt | head -80
fi
if has stacked; then
    echo "==== stacked ($(left) s left)"
    start stacked
    cd "$ROOT"
    export GEMMD_CLIENT_LIB=$S/lib/libgemmclient.so.0 PYTHONPATH=$ROOT/python
    timeout $(cap 60) python3 bench/python/bench_stacked.py --url $URL \
        --experts 8:4096 >$L/stacked-64x1024.log 2>&1
    sed -n '/^== /,$p' $L/stacked-64x1024.log
    timeout $(cap 60) python3 bench/python/bench_stacked.py --url $URL \
        --batch 1024 --n 64 --repeat 10 >$L/stacked-1024x64.log 2>&1
    sed -n '/^== /,$p' $L/stacked-1024x64.log
    timeout $(cap 90) python3 bench/python/bench_stacked.py --url $URL \
        --batch 16 --n 2048 --repeat 5 --experts 64:16384 \
        >$L/stacked-16x2048.log 2>&1
    sed -n '/^== /,$p' $L/stacked-16x2048.log
    stop
fi
if has fresh; then
    echo "==== fresh ($(left) s left)"
    start fresh
    timeout $(cap 60) python3 bench/python/bench_fresh.py --url $URL \
        --n 4096 --runs 5 --gemmctl $S/bin/gemmctl >$L/fresh.log 2>&1
    tail -25 $L/fresh.log
    stop
fi
if has grouped && [ -x $S/bin/bench_grouped ]; then
    echo "==== grouped ($(left) s left)"
    timeout $(cap 90) $S/bin/bench_grouped >$L/grouped.txt 2>&1
    echo "bench_grouped rc=$?"
    cat $L/grouped.txt | tail -40
fi
if has pin && [ -x $S/bin/bench_pin ]; then
    echo "==== pin ($(left) s left)"
    E2E_DIR=$S OUT=$L/pin MAX_MIB=${PIN_MAX_MIB:-4096} timeout $(cap 120) \
        bash $S/pin.sh >$L/pin.txt 2>&1
    echo "pin.sh rc=$?"
    tail -40 $L/pin.txt
fi
if has blas; then
    l=$(left)
    echo "==== blas ($l s left)"
    if ((l > 60)); then
        OUT=$L/blas BENCH_ARGS="--budget-s $((l - 30))" timeout $((l - 10)) \
            bash "$ROOT/.gpu-blas/blas-run.sh" "$ROOT/.gpu-blas" bench \
            >$L/blas.txt 2>&1
        sed -n '/== bench/,$p' $L/blas.txt | tail -60
        grep -E "^\|" $L/blas.txt | tail -40
    fi
fi
echo "==== done in $(($(date +%s) - t0)) s"
tar czf "$OUT/logs.tar.gz" -C /tmp measure-logs
