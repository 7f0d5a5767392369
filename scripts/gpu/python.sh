#!/bin/bash
# python.sh [BUNDLE]: on the GPU host, from the repository root, with a
# bundle made by scripts/gpu/bundle.sh (default .gpu-svc: gemmd, gemmctl and
# the shared libraries, libgemmclient among them): the gemmd Python package
# (python/, used in place through PYTHONPATH, libgemmclient through
# GEMMD_CLIENT_LIB) against gemmd's cuda backend.
#   1. the pytest suite (python/tests) with GEMM_TEST_BACKEND=cuda: each test
#      starts its own gemmd from the bundle, as the C integration suites do;
#   2. bench/python/bench_python.py against a gemmd on the cuda backend:
#      fresh-process time to first result (fp16: gemmd, torch, cupy,
#      gemmctl; then bf16: gemmd, torch, gemmctl) and steady-state numpy
#      in/out at 4096^2 and 8192^2 (bf16, fp16, fp32) against torch;
#   3. with PY_STACKED=1, bench/python/bench_stacked.py on the same gemmd:
#      the stacked matmul 64 x 1024^3 bf16 from client.empty arrays and a
#      grouped 8-expert layer (4096 tokens) against torch, numpy in/out
#      (its log is one more file in $OUT: add PY_BENCH=0 to stay at 8).
# Logs and CSVs go to $OUT (default /tmp/out; 8 files, the device's limit);
# the tables and a summary are printed last.
#
# Python packages: the GPU host's python3 has numpy, ml_dtypes, pytest,
# hypothesis, torch and cupy. If one is missing and a folder .whl (wheels
# for Python 3.12, see the device notes) is carried, they are installed
# from it into /tmp/site first.
#
# Environment: PY_TESTS=0 skips 1, PY_BENCH=0 skips 2, PY_STACKED=1 runs
# 3, PY_BENCH_ARGS adds
# arguments to the benchmark, GEMM_TEST_BACKEND (default cuda; cpu runs the
# same on a host without a GPU, to try the script).
set -uo pipefail
B=$(cd "${1:-.gpu-svc}" && pwd)
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
OUT=${OUT:-/tmp/out}
BACKEND=${GEMM_TEST_BACKEND:-cuda}
mkdir -p "$OUT"
cd "$ROOT"

export LD_LIBRARY_PATH=$B/lib:/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export GEMMD_CLIENT_LIB=$B/lib/libgemmclient.so.0
export PYTHONPATH=$ROOT/python${PYTHONPATH:+:$PYTHONPATH}
export PYTHONUNBUFFERED=1
PY=${PYTHON:-python3}
summary=""

if ! [ -f "$GEMMD_CLIENT_LIB" ]; then
    echo "python.sh: $GEMMD_CLIENT_LIB missing: make the bundle with" \
        "scripts/gpu/bundle.sh" >&2
    exit 2
fi
if ! $PY -c 'import numpy, ml_dtypes, pytest, hypothesis' 2>/dev/null; then
    if ls .whl/*.whl >/dev/null 2>&1; then
        $PY -m pip install -q --no-index --no-deps --no-compile \
            --no-cache-dir --upgrade --target /tmp/site .whl/*.whl || exit 2
        export PYTHONPATH=$PYTHONPATH:/tmp/site
    fi
fi
$PY - <<'EOF'
import importlib, sys
print("python", sys.version.split()[0])
for m in ("numpy", "ml_dtypes", "pytest", "hypothesis", "torch", "cupy"):
    try:
        print("  %-10s %s" % (m, importlib.import_module(m).__version__))
    except Exception as e:
        print("  %-10s MISSING (%s)" % (m, e))
EOF
nvidia-smi --query-gpu=name,clocks.sm,power.draw --format=csv,noheader 2>/dev/null
$PY -X importtime -c 'import gemmd' 2> "$OUT/importtime.txt"
grep -E '\| gemmd$' "$OUT/importtime.txt"

if [ "${PY_TESTS:-1}" != 0 ]; then
    GEMM_TEST_GEMMD=$B/bin/gemmd GEMM_TEST_BACKEND=$BACKEND \
        timeout 280 $PY -m pytest -p no:cacheprovider -rs -q python/tests \
        > "$OUT/pytest-python.log" 2>&1
    rc=$?
    tail -25 "$OUT/pytest-python.log"
    summary+="pytest ($BACKEND) rc=$rc: $(tail -1 "$OUT/pytest-python.log")"$'\n'
fi

if [ "${PY_BENCH:-1}" != 0 ] || [ "${PY_STACKED:-0}" != 0 ]; then
    sock=/tmp/gemmd-py-bench.sock
    rm -f "$sock"
    "$B/bin/gemmd" --backend "$BACKEND" --listen "ipc://$sock" \
        --log-level info 2> "$OUT/gemmd-bench.log" &
    pid=$!
    for _ in $(seq 100); do
        "$B/bin/gemmctl" --url "ipc://$sock" ping >/dev/null 2>&1 && break
        sleep 0.1
    done
    "$B/bin/gemmctl" --url "ipc://$sock" ping
    if [ "${PY_BENCH:-1}" != 0 ]; then
        # shellcheck disable=SC2086
        timeout 200 $PY bench/python/bench_python.py --url "ipc://$sock" \
            --gemmctl "$B/bin/gemmctl" --csv "$OUT/bench-python.csv" \
            ${PY_BENCH_ARGS:-} > "$OUT/bench-python.log" 2>&1
        rc1=$?
        # shellcheck disable=SC2086
        timeout 100 $PY bench/python/bench_python.py --url "ipc://$sock" \
            --gemmctl "$B/bin/gemmctl" --fresh-dtype bf16 --skip-steady \
            --csv "$OUT/bench-python-bf16.csv" ${PY_BENCH_ARGS:-} \
            > "$OUT/bench-python-bf16.log" 2>&1
        rc2=$?
        summary+="bench fp16 rc=$rc1, bench bf16 rc=$rc2"$'\n'
    fi
    if [ "${PY_STACKED:-0}" != 0 ]; then
        # shellcheck disable=SC2086
        timeout 200 $PY bench/python/bench_stacked.py --url "ipc://$sock" \
            --experts 8:4096 > "$OUT/bench-stacked.log" 2>&1
        summary+="bench stacked rc=$?"$'\n'
    fi
    "$B/bin/gemmctl" --url "ipc://$sock" status > "$OUT/gemmd-bench-status.txt"
    kill "$pid"
    wait "$pid"
    summary+="gemmd exit=$?"$'\n'
    for f in bench-python bench-python-bf16 bench-stacked; do
        [ -f "$OUT/$f.log" ] && sed -n '/^== /,$p' "$OUT/$f.log"
    done
fi
echo "==== summary"
printf "%s" "$summary"
