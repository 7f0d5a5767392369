#!/bin/bash
# zerocopy-run.sh DIR: on the GPU host, from a bundle of
# scripts/gpu/zerocopy.sh: libgemmblas's zero-copy mode against gemmd's
# cuda backend, in one call of the device tool (about 3 minutes):
#   1. blas_zerocopy_probe gemm, alloc and fork (the ctest probe) against a
#      private gemmd --backend cuda: dgemm, sgemm, zgemm, cblas, dsyrk,
#      dtrsm and zhemm in place and right, allocator semantics, fork
#   2. bench_blas --variants openblas,gemmblas,gemmblas-zc: dgemm and
#      sgemm at 4096 and 8192 (first call, steady state as the median of
#      CALLS calls), zero-copy against the copying path and the host's
#      OpenBLAS in the same run, with the calls in place and the bytes
#      still staged per call, and the issue's 8192 targets
# OpenBLAS's core type is set from the CPU's model name (the VM hides its
# flags): OPENBLAS_CORETYPE, unless set already. Logs go to $OUT (default
# /tmp/out); a summary is printed last. BACKEND=cpu and BENCH_ARGS (e.g.
# "--sizes 512,1024") make a dry run on a host without a GPU; SIZES,
# TYPES and CALLS (default 4096,8192, d,s and 5) the bench's.
set -uo pipefail
D=$(cd "${1:-/tmp/zc}" && pwd)
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
export LD_LIBRARY_PATH=$D/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
GEMMD=$D/bin/gemmd GEMMCTL=$D/bin/gemmctl
export GEMMBLAS_CPU_BLAS=$D/lib/libblas.so.3
BACKEND=${BACKEND:-cuda}
summary=""
note() { summary+="$*"$'\n'; echo "== $*"; }
T0=$(date +%s)
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null
nproc; grep -m1 "model name" /proc/cpuinfo
. "$D/coretype.sh"

sock=$(mktemp -d /tmp/gemmd-zc.XXXXXX)/gemmd.sock
export GEMM_URL=ipc://$sock
"$GEMMD" --backend "$BACKEND" --listen "$GEMM_URL" --log-level info \
    </dev/null 2>"$OUT/gemmd-zc.log" &
gpid=$!
for i in $(seq 300); do
    "$GEMMCTL" ping >/dev/null 2>&1 && break
    sleep 0.1
done
"$GEMMCTL" ping || { echo "gemmd did not start: $(tail -5 "$OUT/gemmd-zc.log")"; exit 1; }

# 1. the probe: correctness in place on this backend
for mode in gemm alloc fork; do
    GEMMBLAS_MIN_FLOPS=0 GEMMBLAS_VERBOSE=1 GEMMBLAS_ZEROCOPY=1 \
        GEMMBLAS_ZEROCOPY_MIN_BYTES=65536 timeout 120 \
        "$D/bin/blas_zerocopy_probe" $mode >"$OUT/probe-$mode.log" 2>&1
    note "probe $mode ($BACKEND) rc=$? $(grep -E '^(gemm|alloc|fork):|FAIL|zero-copy:' "$OUT/probe-$mode.log" | tr '\n' ' ')"
done
echo "   (probe: $(($(date +%s) - T0)) s)"

# 2. the benchmark
timeout 480 "$D/bin/bench_blas" --openblas "$D/lib/libblas.so.3" \
    --gemmblas "$D/lib/libgemmblas.so.0" \
    --variants openblas,gemmblas,gemmblas-zc --procs 0 \
    --sizes "${SIZES:-4096,8192}" --types "${TYPES:-d,s}" \
    --calls "${CALLS:-5}" --csv "$OUT/bench_zerocopy.csv" ${BENCH_ARGS:-} \
    >"$OUT/bench_zerocopy.txt" 2>"$OUT/bench_zerocopy.err"
rc=$?
"$GEMMCTL" status >"$OUT/status.txt" 2>&1
kill "$gpid" 2>/dev/null
wait "$gpid" 2>/dev/null
cat "$OUT/bench_zerocopy.txt"
grep -E "zero-copy:|gemmblas\[" "$OUT/bench_zerocopy.err" | sort | uniq -c | sort -rn | head -8
note "bench rc=$rc ($(grep -c MET "$OUT/bench_zerocopy.txt") targets met, $(grep -c MISSED "$OUT/bench_zerocopy.txt") missed; $(grep -c -E 'WRONG|FAILED' "$OUT/bench_zerocopy.txt" "$OUT/bench_zerocopy.err" | awk -F: '{s+=$2} END {print s}') wrong/failed)"
echo "   (total: $(($(date +%s) - T0)) s)"
echo
echo "summary:"
printf "%s" "$summary"
