#!/bin/sh
# Builds the libFuzzer targets (clang; the whole project instrumented with
# fuzzer-no-link + ASan + UBSan) into build-fuzz/, replays the committed
# regressions, then fuzzes each target for SECONDS (default 25) starting
# from fuzz/corpus/. Any crash, leak, timeout or sanitizer report fails the
# script; the offending input is left in $FUZZ_OUT (default
# build-fuzz/fuzz-out/). Usage: scripts/fuzz.sh [SECONDS_PER_TARGET]
set -eu
cd "$(dirname "$0")/.."
secs="${1:-25}"
build="${FUZZ_BUILD_DIR:-build-fuzz}"
out="${FUZZ_OUT:-$build/fuzz-out}"
flags="-fsanitize=fuzzer-no-link,address,undefined"
flags="$flags -fno-sanitize-recover=undefined -fno-omit-frame-pointer -g"

CC="${CC:-clang}" cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DGEMM_FUZZ=ON -DGEMM_WITH_CUDA=OFF -DGEMM_TESTS=OFF -DGEMM_BENCH=OFF \
    -DCMAKE_C_FLAGS="$flags" \
    -DCMAKE_EXE_LINKER_FLAGS="-fsanitize=address,undefined" \
    -DCMAKE_SHARED_LINKER_FLAGS="-fsanitize=address,undefined" >/dev/null
cmake --build "$build" -j"$(nproc)" --target fuzz_targets

export ASAN_OPTIONS="detect_leaks=1:abort_on_error=1:${ASAN_OPTIONS:-}"
export UBSAN_OPTIONS="halt_on_error=1:print_stacktrace=1:${UBSAN_OPTIONS:-}"
rm -rf "$out"
mkdir -p "$out"
for t in $(cat "$build/fuzz/targets.txt"); do
    bin="$build/fuzz/$t"
    if ls fuzz/regressions/"$t"-* >/dev/null 2>&1; then
        echo "== $t: replaying fuzz/regressions/$t-*"
        "$bin" fuzz/regressions/"$t"-* 2>"$out/$t-regressions.log" || {
            tail -40 "$out/$t-regressions.log"
            echo "FAIL: $t on a committed regression" >&2
            exit 1
        }
    fi
    echo "== $t: fuzzing for ${secs}s"
    mkdir -p "$out/$t-corpus"
    if ! "$bin" -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 \
            -print_final_stats=1 -artifact_prefix="$out/$t-" \
            "$out/$t-corpus" fuzz/corpus >"$out/$t.log" 2>&1; then
        tail -60 "$out/$t.log"
        echo "FAIL: $t; input(s): $(ls "$out/$t"-crash-* "$out/$t"-leak-* \
            "$out/$t"-timeout-* "$out/$t"-oom-* 2>/dev/null)" >&2
        exit 1
    fi
    grep -E "^#[0-9]+.*DONE|stat::number_of_executed_units" "$out/$t.log"
done
echo "fuzz: all targets clean"
