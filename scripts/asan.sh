#!/bin/sh
# Builds the project and its whole test suite with AddressSanitizer, LeakSan
# and UBSan (GEMM_ASAN=ON) into build-asan/ and runs it through ctest.
# Every process writes its sanitizer reports into one directory under /tmp
# (Criterion's workers and the gemmd each integration test starts included;
# gemmd runs as nobody when the suite runs as root, so the directory and
# the suppression files must be within its reach, not in a 0700 clone), so
# a report fails the script even where the test itself passed.
# Usage: scripts/asan.sh [extra ctest arguments]
set -eu
cd "$(dirname "$0")/.."
build="${ASAN_BUILD_DIR:-build-asan}"
jobs="${JOBS:-$(nproc)}"

cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DGEMM_ASAN=ON \
    -DGEMM_WITH_CUDA=OFF -DGEMM_TESTS=ON -DGEMM_BENCH=OFF >/dev/null
cmake --build "$build" -j"$jobs"

logs="$(mktemp -d /tmp/gemmd-sanitizer-XXXXXX)"
chmod 1777 "$logs"
cp scripts/lsan.supp "$logs/"
chmod 644 "$logs"/*.supp
# abort_on_error: a report kills the process (a failed test, not a message);
# log_path: one file per reporting process, checked below.
export ASAN_OPTIONS="detect_leaks=1:abort_on_error=1:halt_on_error=1:\
detect_stack_use_after_return=1:check_initialization_order=1:\
strict_string_checks=1:log_path=$logs/asan:${ASAN_OPTIONS:-}"
export LSAN_OPTIONS="suppressions=$logs/lsan.supp:${LSAN_OPTIONS:-}"
export UBSAN_OPTIONS="halt_on_error=1:abort_on_error=1:print_stacktrace=1:\
log_path=$logs/ubsan:${UBSAN_OPTIONS:-}"

rc=0
(cd "$build" && ctest --output-on-failure -j"$jobs" --timeout 900 "$@") ||
    rc=$?
# A log that only lists the suppressions used is not a report.
reports=$(grep -lE "ERROR: |runtime error|SUMMARY: " "$logs"/asan* \
          "$logs"/ubsan* 2>/dev/null || true)
if [ -n "$reports" ]; then
    for f in $reports; do
        echo "==== sanitizer report: $f"
        cat "$f"
    done
    echo "asan: sanitizer reports found (above)" >&2
    rc=1
fi
[ "$rc" -eq 0 ] && rm -rf "$logs" &&
    echo "asan: suite clean under ASan + LSan + UBSan"
exit "$rc"
