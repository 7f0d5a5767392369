#!/bin/bash
# blas-run.sh DIR [PARTS...]: on the GPU host, from a bundle made by
# scripts/gpu/blas.sh (DIR, or DIR.tar.gz, unpacked to /tmp): checks and
# measures libgemmblas against gemmd's cuda backend. PARTS (default all;
# each fits the device tool's 10 minutes alone, all together about 6):
#   smoke      gemmctl mm fp64/c64/c128 (ops N/T/C, complex scalars) with
#              --check on the GPU, and integration_gemm64 (GEMM_TEST_BACKEND
#              =cuda: the wide types through cuBLAS, every op pair)
#   suites     integration_gemm, _fill, _cuda, _batch, _moduli and _int8
#              against the backend (the GEMM path: fill and drain, the
#              pipeline, batches, the fp64 emulation, int8), and netlib.sh fill for xblat3d and xdcblat3
#              (every call filled by parts and drained)
#   testers    netlib's xblat3{s,d,c,z} and x{s,d,c,z}cblat3 through
#              libgemmblas (LD_PRELOAD, GEMMBLAS_MIN_FLOPS=0) against a
#              private gemmd --backend cuda; served counters checked
#   bench      bench_blas: dgemm/sgemm 1024..8192 through the bundled
#              OpenBLAS, the host's NVBLAS and libgemmblas (first call,
#              steady state, 4 processes), ratios and the issue's targets
#   crossover  bench_blas --crossover: where gemmd beats in-process
#              OpenBLAS (GEMMBLAS_MIN_FLOPS)
# OpenBLAS's core type comes from the CPU's model name (coretype.sh).
# Logs and CSVs go to $OUT (default /tmp/out); a summary is printed last.
# BACKEND=cpu (default cuda) and BENCH_ARGS (extra bench_blas options,
# e.g. "--sizes 256,512") make a dry run possible on a host without a GPU;
# GEMMD_LOG_LEVEL (default info) is gemmd's --log-level; GEMMD_ARGS are
# more options for it (e.g. "--spare-bytes none").
set -uo pipefail
src=${1:-.gpu-blas}
shift || true
parts=${*:-smoke testers bench crossover}
if [ -f "$src" ] || [ -f "$src.tar.gz" ]; then
    tgz=$src
    [ -f "$tgz" ] || tgz=$src.tar.gz
    mkdir -p /tmp/gpu-blas && tar -C /tmp/gpu-blas -xzf "$tgz"
    src=/tmp/gpu-blas/$(tar -tzf "$tgz" | head -1 | cut -d/ -f1)
fi
D=$(cd "$src" && pwd)
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
export LD_LIBRARY_PATH=$D/lib:/usr/local/cuda/lib64:${LD_LIBRARY_PATH:-}
export GEMMD=$D/bin/gemmd GEMMCTL=$D/bin/gemmctl
export GEMMBLAS_LIB=$D/lib/libgemmblas.so.0 GEMMBLAS_LIB3=$D/lib/lib3
export GEMMBLAS_CPU_BLAS=$D/lib/libblas.so.3
BACKEND=${BACKEND:-cuda}
export GEMMBLAS_TEST_BACKEND=$BACKEND BLAS_TESTER_DIR=$D/share/blas
summary=""
note() { summary+="$*"$'\n'; echo "== $*"; }

nvidia-smi --query-gpu=name,driver_version,clocks.sm,power.draw \
    --format=csv,noheader 2>/dev/null || echo "no nvidia-smi"
nproc; grep -m1 "model name" /proc/cpuinfo
. "$D/coretype.sh"

# the testers' inputs sit beside their copies, which bundle.sh put in bin/
for f in "$D"/bin/xblat3? "$D"/bin/x?cblat3; do
    ln -sf "$f" "$D/share/blas/$(basename "$f")"
done

start() { # a private gemmd on the GPU for the smoke and the bench
    sock=$(mktemp -d /tmp/gemmd-blas.XXXXXX)/gemmd.sock
    export GEMM_URL=ipc://$sock
    "$GEMMD" --backend "$BACKEND" --listen "$GEMM_URL" \
        --log-level "${GEMMD_LOG_LEVEL:-info}" ${GEMMD_ARGS:-} \
        </dev/null 2>"$OUT/gemmd-$1.log" &
    gpid=$!
    for i in $(seq 200); do
        "$GEMMCTL" ping >/dev/null 2>&1 && return 0
        sleep 0.1
    done
    echo "gemmd did not start: $(tail -5 "$OUT/gemmd-$1.log")"
    return 1
}
stop() { kill "$gpid" 2>/dev/null; wait "$gpid" 2>/dev/null; }

for part in $parts; do
    t0=$(date +%s)
    case $part in
    smoke)
        start smoke || { note "smoke: no gemmd"; continue; }
        {
            "$GEMMCTL" ping
            "$GEMMCTL" kernels
            "$GEMMCTL" mm -m 4096 -n 4096 -k 4096 --dtype fp64 --repeat 5 --check
            "$GEMMCTL" mm -m 8192 -n 8192 -k 8192 --dtype fp64 --repeat 3 --check
            "$GEMMCTL" mm -m 3001 -n 2003 -k 1007 --dtype c64 --op-a C \
                --op-b T --alpha 0.5 --alpha-im -1 --beta 2 --beta-im 0.5 --check
            "$GEMMCTL" mm -m 2048 -n 2048 -k 2048 --dtype c128 --op-a T \
                --op-b C --repeat 3 --check
            "$GEMMCTL" status
        } >"$OUT/smoke.log" 2>&1
        rc=$?
        stop
        note "smoke gemmctl rc=$rc: $(grep -c PASS "$OUT/smoke.log") PASS, $(grep -c FAIL "$OUT/smoke.log") FAIL"
        GEMM_TEST_GEMMD=$GEMMD GEMM_TEST_BACKEND=$BACKEND timeout 500 \
            "$D/bin/integration_gemm64" --verbose=0 -j1 \
            >"$OUT/integration_gemm64.log" 2>&1
        note "integration_gemm64 ($BACKEND) rc=$? $(grep -a Synthesis "$OUT/integration_gemm64.log" | tail -1)"
        ;;
    suites)
        for t in gemm fill cuda batch moduli int8; do
            GEMM_TEST_GEMMD=$GEMMD GEMM_TEST_BACKEND=$BACKEND timeout 300 \
                "$D/bin/integration_$t" --verbose=0 -j1 \
                >"$OUT/integration_$t.log" 2>&1
            note "integration_$t ($BACKEND) rc=$? $(grep -a Synthesis "$OUT/integration_$t.log" | tail -1)"
        done
        for t in "xblat3d dblat3.in" "xdcblat3 din3"; do
            set -- $t
            timeout 300 sh "$D/netlib.sh" fill "$1" "$2" \
                >"$OUT/netlib-fill-$1.log" 2>&1
            note "netlib fill $1 ($BACKEND) rc=$? $(grep -E 'PASSED$|gemmd served' "$OUT/netlib-fill-$1.log" | tr '\n' ' ')"
        done
        ;;
    testers)
        for p in s d c z; do
            for t in "xblat3$p ${p}blat3.in" "x${p}cblat3 ${p}in3"; do
                set -- $t
                timeout 300 sh "$D/netlib.sh" preload "$1" "$2" \
                    >"$OUT/netlib-$1.log" 2>&1
                note "netlib $1 ($BACKEND) rc=$? $(grep -E 'PASSED$|gemmd served' "$OUT/netlib-$1.log" | tr '\n' ' ')"
            done
        done
        ;;
    bench)
        start bench || { note "bench: no gemmd"; continue; }
        timeout 540 "$D/bin/bench_blas" --openblas "$D/lib/libblas.so.3" \
            --gemmblas "$GEMMBLAS_LIB" --csv "$OUT/bench_blas.csv" \
            ${BENCH_ARGS:-} \
            >"$OUT/bench_blas.txt" 2>"$OUT/bench_blas.err"
        rc=$?
        "$GEMMCTL" status >"$OUT/bench-status.txt" 2>&1
        stop
        cat "$OUT/bench_blas.txt"
        note "bench rc=$rc ($(grep -c MET "$OUT/bench_blas.txt") targets met, $(grep -c MISSED "$OUT/bench_blas.txt") missed; $(grep -c -E 'WRONG|FAILED' "$OUT/bench_blas.txt" "$OUT/bench_blas.err" | awk -F: '{s+=$2} END {print s}') wrong/failed)"
        ;;
    crossover)
        start crossover || { note "crossover: no gemmd"; continue; }
        timeout 540 "$D/bin/bench_blas" --crossover \
            --openblas "$D/lib/libblas.so.3" --gemmblas "$GEMMBLAS_LIB" \
            --csv "$OUT/bench_crossover.csv" ${BENCH_ARGS:-} \
            >"$OUT/bench_crossover.txt" 2>"$OUT/bench_crossover.err"
        rc=$?
        stop
        cat "$OUT/bench_crossover.txt"
        note "crossover rc=$rc: $(grep proposed "$OUT/bench_crossover.txt")"
        ;;
    *)
        note "unknown part $part"
        ;;
    esac
    echo "   ($part: $(($(date +%s) - t0)) s)"
done
echo "==== summary"
printf "%s" "$summary"
