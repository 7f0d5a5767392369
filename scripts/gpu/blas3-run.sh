#!/bin/bash
# blas3-run.sh DIR: on the GPU host, from a bundle of scripts/gpu/blas3.sh:
# the level-3 routines besides GEMM against gemmd's cuda backend, in one
# call of the device tool (about 5 minutes):
#   1. integration_blas3 (GEMM_TEST_BACKEND=cuda): every routine, type and
#      flag against a long double reference, triangles, argument rules
#   2. netlib's xblat3{s,d,c,z} and x{s,d,c,z}cblat3 through libgemmblas
#      (and three of them filled by parts: netlib.sh fill)
#      (LD_PRELOAD, GEMMBLAS_MIN_FLOPS=0) against a private gemmd --backend
#      cuda; every routine's served counter must grow; then Debian's
#      reference LAPACK (bundled) solving and factorizing over libgemmblas
#      (lapack.sh: the results, and the gemm, syrk, trsm counters)
#   3. bench_blas3: ?syrk, ?trsm, ?symm (d, s, z) at 4096 and 8192 through
#      libgemmblas, NVBLAS without and with autopin and the host's OpenBLAS:
#      first call, steady state (best of 3 calls), 4 processes at once
#   4. bench_blas3 --crossover: dsyrk, dtrsm, dsymm against the in-process
#      OpenBLAS from 256 to 4096, the proposed per-routine thresholds
#      (CROSSOVER_S seconds, default 120; 0 leaves it out)
# Steps 1 and 2 run with GEMMD_BLAS3_PANEL=8 (TEST_PANEL), so that every
# routine runs cut into panels; SKIP_TESTS=1 leaves them out. OpenBLAS's
# core type is set from the CPU's model name (the VM hides its flags):
# OPENBLAS_CORETYPE, unless set already.
# Logs go to $OUT (default /tmp/out), packed into $OUT/l3-logs.tar.gz; a
# summary is printed last. BACKEND=cpu and BENCH_ARGS (e.g. "--sizes 256
# --variants gemmblas,openblas") make a dry run without a GPU.
set -uo pipefail
D=$(cd "${1:-/tmp/l3}" && pwd)
OUT=${OUT:-/tmp/out}
L=/tmp/l3-logs
mkdir -p "$OUT" "$L"
export LD_LIBRARY_PATH=$D/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
export GEMMD=$D/bin/gemmd GEMMCTL=$D/bin/gemmctl
export GEMMBLAS_LIB=$D/lib/libgemmblas.so.0
export GEMMBLAS_CPU_BLAS=$D/lib/libblas.so.3
BACKEND=${BACKEND:-cuda} # cpu: a dry run on a host without a GPU
export GEMMBLAS_TEST_BACKEND=$BACKEND BLAS_TESTER_DIR=$D/share/blas
summary=""
note() { summary+="$*"$'\n'; echo "== $*"; }
T0=$(date +%s)
nvidia-smi --query-gpu=name,driver_version --format=csv,noheader 2>/dev/null
nproc; grep -m1 "model name" /proc/cpuinfo
ls /usr/local/cuda/lib64/libnvblas.so* 2>/dev/null | head -2
for f in "$D"/bin/xblat3? "$D"/bin/x?cblat3; do
    ln -sf "$f" "$D/share/blas/$(basename "$f")"
done

. "$D/coretype.sh"

if [ "${SKIP_TESTS:-0}" != 1 ]; then
export GEMMD_BLAS3_PANEL=${TEST_PANEL:-8}
# 1. the request kind on the GPU
GEMM_TEST_GEMMD=$GEMMD GEMM_TEST_BACKEND=$BACKEND timeout 120 \
    "$D/bin/integration_blas3" --verbose=0 -j2 >"$L/integration_blas3.log" 2>&1
note "integration_blas3 ($BACKEND) rc=$? $(grep -a Synthesis "$L/integration_blas3.log" | tail -1)"

# 2. netlib's testers
for p in ${TESTERS:-d s z c}; do
    for t in "xblat3$p ${p}blat3.in" "x${p}cblat3 ${p}in3"; do
        set -- $t
        timeout 90 sh "$D/netlib.sh" preload "$1" "$2" >"$L/netlib-$1.log" 2>&1
        note "netlib $1 ($BACKEND) rc=$? $(grep -E 'PASSED$|gemmd served|gemm [0-9]|FAIL' "$L/netlib-$1.log" | tr '\n' ' ')"
    done
done
# 2a. filled by parts: every level-3 call sent before its operands are
# staged, gemmd's copies waiting on the GPU for each part
for t in ${FILL_TESTERS:-"xblat3d dblat3.in" "xblat3c cblat3.in" "xzcblat3 zin3"}; do
    set -- $t
    timeout 90 sh "$D/netlib.sh" fill "$1" "$2" >"$L/netlib-fill-$1.log" 2>&1
    note "netlib fill $1 ($BACKEND) rc=$? $(grep -E 'PASSED$|gemmd served|FAIL' "$L/netlib-fill-$1.log" | tr '\n' ' ')"
done
# 2b. a reference LAPACK's solve and Cholesky over libgemmblas
LAPACK=$D/lib/lapack/liblapack.so.3 LAPACK_N=${LAPACK_N:-2000} timeout 120 \
    sh "$D/lapack.sh" "$D/bin/blas_lapack_probe" >"$L/lapack.log" 2>&1
note "lapack ($BACKEND) rc=$? $(grep -E 'residual|error|gemm [0-9]' "$L/lapack.log" | tr '\n' ' ')"
echo "   (tests: $(($(date +%s) - T0)) s)"
unset GEMMD_BLAS3_PANEL
fi

# 3. the benchmark, gemmd on the GPU
sock=$(mktemp -d /tmp/gemmd-l3.XXXXXX)/gemmd.sock
export GEMM_URL=ipc://$sock
"$GEMMD" --backend "$BACKEND" --listen "$GEMM_URL" --log-level info \
    </dev/null 2>"$L/gemmd-bench.log" &
gpid=$!
for i in $(seq 200); do
    "$GEMMCTL" ping >/dev/null 2>&1 && break
    sleep 0.1
done
left=$((${LIMIT:-380} - ($(date +%s) - T0)))
[ "$left" -gt 60 ] || left=60
timeout "$left" "$D/bin/bench_blas3" --openblas "$D/lib/libblas.so.3" \
    --budget-s $((left - 30)) \
    --gemmblas "$GEMMBLAS_LIB" --csv "$L/bench_blas3.csv" \
    ${BENCH_ARGS:-} >"$L/bench_blas3.txt" 2>"$L/bench_blas3.err"
rc=$?
# 4. per-routine crossovers against the in-process OpenBLAS, in what is
# left of the call (CROSSOVER_S, default 120 s; 0: not run)
cs=${CROSSOVER_S:-120}
if [ "$cs" -gt 0 ]; then
    timeout $((cs + 30)) "$D/bin/bench_blas3" --crossover --budget-s "$cs" \
        --openblas "$D/lib/libblas.so.3" --gemmblas "$GEMMBLAS_LIB" \
        --routines "${CROSSOVER_ROUTINES:-dsyrk,dtrsm,dsymm}" \
        --csv "$L/bench_blas3_crossover.csv" \
        >"$L/bench_blas3_crossover.txt" 2>"$L/bench_blas3_crossover.err"
    cat "$L/bench_blas3_crossover.txt"
    note "crossover rc=$?: $(grep proposed "$L/bench_blas3_crossover.txt" | tr '\n' ' ')"
fi
"$GEMMCTL" status >"$L/bench-status.txt" 2>&1
kill "$gpid" 2>/dev/null
wait "$gpid" 2>/dev/null
cat "$L/bench_blas3.txt"
grep -a "copies in" "$L/bench_blas3.err" | grep -v " n=[0-9]\{1,3\}:" | tail -40
tail -5 "$L/bench_blas3.err"
note "bench_blas3 rc=$rc (limit ${left}s): $(tail -1 "$L/bench_blas3.txt")"
cp /tmp/bench_blas3_nvblas_*.log "$L/" 2>/dev/null
tar -C /tmp -czf "$OUT/l3-logs.tar.gz" l3-logs
echo "==== summary ($(($(date +%s) - T0)) s)"
printf "%s" "$summary"
