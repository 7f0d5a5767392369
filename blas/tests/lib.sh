# lib.sh: what the libgemmblas test scripts share (sourced, POSIX sh).
# A private gemmd (the CPU backend, the one just built: $GEMMD) on a
# socket in a fresh temporary directory, its counters through $GEMMCTL,
# and honest skips: a missing tool or package makes the test exit 77
# (ctest: skipped) naming the package, or fail where $GEMM_REQUIRE names
# the package or is "all" (.ci/run: CI installs them all through
# scripts/install-deps.sh).
#
# The test's environment (set by CMake): GEMMD, GEMMCTL, GEMMBLAS_LIB
# (libgemmblas.so.0), GEMMBLAS_LIB3 (the directory of lib3/libblas.so.3),
# GEMMBLAS_TEST_BACKEND (gemmd's backend, default cpu; scripts/gpu/blas.sh
# sets cuda), and in an ASan build GEMMBLAS_ASAN_RUNTIME (libasan.so, which an
# uninstrumented program must load before the instrumented library; their
# own leaks are not ours to report, so LeakSanitizer is off for them).
if [ -n "${GEMMBLAS_ASAN_RUNTIME:-}" ]; then
    ASAN_OPTIONS="${ASAN_OPTIONS:-}:detect_leaks=0"
    export ASAN_OPTIONS
fi

# preload [LIB]: the LD_PRELOAD value for a foreign program: the ASan
# runtime (ASan builds) and LIB.
preload() {
    echo "${GEMMBLAS_ASAN_RUNTIME:-}${GEMMBLAS_ASAN_RUNTIME:+${1:+ }}${1:-}"
}

fail() {
    echo "FAIL: $*" >&2
    exit 1
}

# missing WHAT PACKAGE: WHAT is not on this host: skip (exit 77) naming
# PACKAGE, or fail when $GEMM_REQUIRE names PACKAGE or is "all".
missing() {
    case " $(echo "${GEMM_REQUIRE:-}" | tr , ' ') " in
    *" all "* | *" $2 "*)
        fail "$1 is missing, and GEMM_REQUIRE says this host has it: install the Debian package $2 (scripts/install-deps.sh does)" ;;
    esac
    echo "skipped: $1 is missing (install the Debian package $2; scripts/install-deps.sh does)"
    exit 77
}

# need FILE PACKAGE: FILE must exist, else missing FILE PACKAGE.
need() {
    [ -e "$1" ] || missing "$1" "$2"
}

# scratch: sets T, a fresh directory for the test's files, removed at exit.
scratch() {
    T=$(mktemp -d "${TMPDIR:-/tmp}/gemmblas-test.XXXXXX")
    trap 'stop_gemmd' EXIT
}

# start_gemmd [gemmd options]: a private gemmd; sets T (its directory, also
# the test's scratch space), GEMM_URL (exported) and GEMMD_PID; removed at
# exit.
start_gemmd() {
    scratch
    GEMM_URL="ipc://$T/gemmd.sock"
    export GEMM_URL
    "$GEMMD" --backend "${GEMMBLAS_TEST_BACKEND:-cpu}" --threads 2 \
        --listen "$GEMM_URL" \
        --log-level warning "$@" </dev/null >"$T/gemmd.out" 2>"$T/gemmd.log" &
    GEMMD_PID=$!
    i=0
    until "$GEMMCTL" ping >/dev/null 2>&1; do
        i=$((i + 1))
        [ $i -lt 100 ] || { cat "$T/gemmd.log" >&2; fail "gemmd did not start"; }
        kill -0 "$GEMMD_PID" 2>/dev/null || { cat "$T/gemmd.log" >&2; fail "gemmd exited"; }
        sleep 0.1
    done
}

stop_gemmd() {
    if [ -n "${GEMMD_PID:-}" ]; then
        kill "$GEMMD_PID" 2>/dev/null && wait "$GEMMD_PID" 2>/dev/null
        GEMMD_PID=
    fi
    [ -n "${T:-}" ] && [ -z "${GEMM_TEST_KEEP:-}" ] && rm -rf "$T"
    T=
}

# counter NAME: a number from gemmctl status --json (requests_served,
# gemm_flops, ...).
counter() {
    "$GEMMCTL" status --json | sed -n "s/.*\"$1\": \([0-9]*\).*/\1/p"
}

# routines_snapshot FILE: every routine's served counter (gemm, symm, ..
# trsm: gemmctl status --json's served_*) into FILE, one "name count" a
# line.
routines_snapshot() {
    "$GEMMCTL" status --json | tr ',' '\n' |
        sed -n 's/.*"served_\([a-z0-9]*\)": \([0-9]*\).*/\1 \2/p' >"$1"
}

# expect_routines FILE ROUTINE...: each ROUTINE's served counter grew
# since routines_snapshot FILE (so every one of them went through gemmd).
expect_routines() {
    snap=$1
    shift
    routines_snapshot "$snap.now"
    for r in "$@"; do
        b=$(sed -n "s/^$r //p" "$snap")
        a=$(sed -n "s/^$r //p" "$snap.now")
        [ -n "$a" ] && [ -n "$b" ] || fail "no served_$r counter from gemmctl status --json"
        [ "$a" -gt "$b" ] || fail "gemmd served no $r: the calls did not go through gemmd"
        printf "%s %d  " "$r" $((a - b))
    done
    echo
}

# expect_served BEFORE MIN: requests_served grew by at least MIN since
# BEFORE (so the GEMMs really went through gemmd).
expect_served() {
    now=$(counter requests_served)
    [ -n "$now" ] || fail "no requests_served from gemmctl status"
    grew=$((now - $1))
    [ "$grew" -ge "$2" ] ||
        fail "gemmd served $grew requests, expected at least $2: the calls did not go through gemmd"
    echo "gemmd served $grew requests"
}

# zerocopy_run CMD...: CMD (a program that preloads libgemmblas) with
# GEMMBLAS_ZEROCOPY=1 and a threshold of 64 KiB, its stderr shown and
# kept; then at least one of its calls must have run with every operand in
# place (libgemmblas's exit summary, GEMMBLAS_VERBOSE=1). Where the mode
# cannot be on (an ASan build: ASan's malloc is the program's) the run
# must still succeed, and the in-place check is left out (said so).
zerocopy_run() {
    GEMMBLAS_ZEROCOPY=1 GEMMBLAS_ZEROCOPY_MIN_BYTES=65536 GEMMBLAS_VERBOSE=1 \
        "$@" 2>"$T/zc.err" || { cat "$T/zc.err" >&2; fail "$1 with GEMMBLAS_ZEROCOPY=1"; }
    cat "$T/zc.err" >&2
    if grep -q "GEMMBLAS_ZEROCOPY=1 has no effect" "$T/zc.err"; then
        echo "zero-copy: the mode cannot be on here (see above); not checked"
        return 0
    fi
    n=$(sed -n 's/.*zero-copy: .* calls, \([0-9]*\) with every operand in place.*/\1/p' "$T/zc.err" | sort -n | tail -1)
    [ "${n:-0}" -gt 0 ] || fail "$1 with GEMMBLAS_ZEROCOPY=1: no call ran in place"
    echo "zero-copy: $n calls with every operand in place"
}
