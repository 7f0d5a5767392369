#!/bin/bash
# fresh-spares.sh BUNDLE FRESH_CUBLAS [ROUNDS]: on the GPU host, fresh
# processes against a gemmd with spares and its device pool on (the
# defaults) and off (--spare-bytes none --device-warm-bytes 0),
# alternating, ROUNDS times each (default 2), a fresh gemmd each time
# (waited for until its spares are ready): bench/e2e/compare.sh (one-shot
# `gemmctl mm` 4096^3 bf16 against a fresh cuBLAS process, 5 runs) and
# bench/python/bench_fresh.py (a fresh Python process to its first
# 4096^2 result, 5 runs). BUNDLE is scripts/gpu/blas.sh's (.tar.gz or
# directory); logs under $OUT.
set -uo pipefail
src=$1
fc=$(cd "$(dirname "$2")" && pwd)/$(basename "$2")
rounds=${3:-2}
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
OUT=${OUT:-/tmp/out}
mkdir -p "$OUT"
if [ -f "$src" ]; then
    mkdir -p /tmp/fresh-spares && tar -C /tmp/fresh-spares -xzf "$src"
    src=/tmp/fresh-spares/$(tar -tzf "$src" | head -1 | cut -d/ -f1)
fi
B=$(cd "$src" && pwd)
export LD_LIBRARY_PATH=$B/lib:/usr/local/cuda/lib64
export GEMMD_CLIENT_LIB=$B/lib/libgemmclient.so.0 PYTHONPATH=$ROOT/python
for r in $(seq "$rounds"); do
    for mode in on off; do
        args="" want=5
        [ "$mode" = off ] && args="--spare-bytes none --device-warm-bytes 0" want=0
        sock=$(mktemp -d /tmp/gemmd-fresh.XXXXXX)/gemmd.sock
        url=ipc://$sock
        "$B/bin/gemmd" --backend cuda --listen "$url" $args \
            2>"$OUT/gemmd-$mode-$r.log" &
        pid=$!
        for i in $(seq 300); do
            n=$("$B/bin/gemmctl" --url "$url" status --json 2>/dev/null |
                sed -n 's/.*"spares_ready": \([0-9]*\).*/\1/p')
            [ -n "$n" ] && [ "$n" -ge "$want" ] && break
            sleep 0.05
        done
        echo "== $mode $r: spares ready ${n:-?} after $((i * 50)) ms"
        GEMMCTL=$B/bin/gemmctl FRESH_CUBLAS=$fc LOG=$OUT/cmp-$mode-$r.log \
            bash "$ROOT/bench/e2e/compare.sh" "$url" 5 2>&1 | tail -4
        python3 "$ROOT/bench/python/bench_fresh.py" --url "$url" --n 4096 \
            --runs 5 --gemmctl "$B/bin/gemmctl" >"$OUT/fresh-$mode-$r.txt" 2>&1
        tail -14 "$OUT/fresh-$mode-$r.txt"
        "$B/bin/gemmctl" --url "$url" status | grep -E '^spares' || true
        kill "$pid"
        wait "$pid"
    done
done
