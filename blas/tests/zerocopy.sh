#!/bin/sh
# zerocopy.sh MODE PROBE: the zero-copy mode (GEMMBLAS_ZEROCOPY=1) through
# zerocopy_probe (a program linked with libgemmblas) against a private
# gemmd, every GEMM sent there. MODE gemm, alloc, fork: the probe's own
# checks, and gemmd's served counter grew. fdlimit: the probe under a
# descriptor limit of 64. abandon: gemmd stopped under a request (it is
# abandoned: the output's region detached, the CPU computes), then
# continued: its late write must not reach the program. rmw: gemmd
# killed while it writes a dtrsm's B in place (B backed up): B put back,
# the CPU solves. restart: the probe runs a
# dgemm in place, gemmd is killed (the next call computes on the CPU),
# then started again (old regions are staged, new ones in place). Exits
# 77 when the mode cannot be on (an ASan build: ASan's malloc is the
# program's).
set -eu
. "$(dirname "$0")/lib.sh"
mode=$1 probe=$2
start_gemmd
cd "$T"
export GEMMBLAS_MIN_FLOPS=0 GEMMBLAS_VERBOSE=1 GEMMBLAS_ZEROCOPY=1
export GEMMBLAS_ZEROCOPY_MIN_BYTES=65536
before=$(counter requests_served)
# wait_ping: a restarted gemmd answers (polled, 10 s at most)
wait_ping() {
    i=0
    until "$GEMMCTL" ping >/dev/null 2>&1; do
        i=$((i + 1))
        [ $i -lt 100 ] || fail "gemmd did not start again"
        sleep 0.1
    done
}
# wait_line WORD PID: the probe (PID) printed WORD (polled, 30 s at most)
wait_line() {
    i=0
    until grep -q "$1" out.txt 2>/dev/null; do
        i=$((i + 1))
        if ! kill -0 "$2" 2>/dev/null; then
            rc=0
            wait "$2" || rc=$?
            cat out.txt err.txt
            [ $rc -ne 77 ] || exit 77
            fail "the probe exited ($rc) before $1"
        fi
        [ $i -lt 600 ] || fail "the probe never said $1"
        sleep 0.05
    done
}
run() {
    rc=0
    LD_PRELOAD=$(preload) "$probe" "$@" >out.txt 2>err.txt || rc=$?
    cat out.txt err.txt
    [ $rc -ne 77 ] || exit 77
    [ $rc -eq 0 ] || fail "zerocopy_probe $* exited $rc"
}
case $mode in
gemm | alloc | fork)
    # fork: below the 32 KiB that opendir() takes in libgemmblas's own
    # fork handler, so a handler's allocation is a region too
    [ "$mode" != fork ] || GEMMBLAS_ZEROCOPY_MIN_BYTES=4096
    run "$mode"
    grep -q "GEMMBLAS_ZEROCOPY=1: allocations of $GEMMBLAS_ZEROCOPY_MIN_BYTES bytes" err.txt ||
        fail "GEMMBLAS_VERBOSE=1 did not log the mode's settings"
    grep -q "zero-copy: .* regions (.*), [1-9][0-9]* registered" err.txt ||
        fail "no exit summary with registered regions"
    expect_served "$before" 1
    ;;
fdlimit)
    # each region holds a descriptor: a quarter of the limit at most
    (ulimit -n 64 && LD_PRELOAD=$(preload) "$probe" fdlimit) >out.txt 2>err.txt || rc=$?
    cat out.txt err.txt
    [ "${rc:-0}" -ne 77 ] || exit 77
    [ "${rc:-0}" -eq 0 ] || fail "zerocopy_probe fdlimit exited $rc"
    ;;
abandon)
    # gemmd stopped: the request times out, its cancel is never answered
    # (GEMM_ERR_ABANDONED); continued, gemmd may still run it
    mkfifo in.fifo
    GEMMBLAS_TIMEOUT_MS=300 LD_PRELOAD=$(preload) "$probe" abandon <in.fifo >out.txt 2>err.txt &
    pid=$!
    exec 3>in.fifo
    wait_line ready1 $pid
    done0=$(($(counter requests_served) + $(counter requests_failed)))
    kill -STOP "$GEMMD_PID"
    echo go >&3
    wait_line ready2 $pid
    kill -CONT "$GEMMD_PID"
    # until gemmd has dealt with the abandoned request (run or canceled)
    i=0
    until [ $(($(counter requests_served) + $(counter requests_failed))) -gt "$done0" ] &&
        [ "$(counter queue_depth)" = 0 ]; do
        i=$((i + 1))
        [ $i -lt 100 ] || fail "gemmd never dealt with the abandoned request"
        sleep 0.1
    done
    echo go >&3
    exec 3>&-
    rc=0
    wait $pid || rc=$?
    cat out.txt err.txt
    [ $rc -ne 77 ] || exit 77
    [ $rc -eq 0 ] || fail "zerocopy_probe abandon exited $rc"
    ;;
rmw)
    # the probe kills gemmd itself, as soon as B starts to change
    rc=0
    GEMMD_KILL_PID=$GEMMD_PID LD_PRELOAD=$(preload) "$probe" rmw >out.txt 2>err.txt || rc=$?
    cat out.txt err.txt
    [ $rc -ne 77 ] || exit 77 # the mode is off: gemmd still runs, the exit trap stops it
    # gone already when the probe killed it (it may have failed first)
    kill -9 "$GEMMD_PID" 2>/dev/null || true
    wait "$GEMMD_PID" 2>/dev/null || true
    GEMMD_PID=
    [ $rc -eq 0 ] || fail "zerocopy_probe rmw exited $rc"
    ;;
restart)
    # the probe waits for a line on its stdin after "ready"
    mkfifo in.fifo
    LD_PRELOAD=$(preload) "$probe" restart <in.fifo >out.txt 2>err.txt &
    pid=$!
    exec 3>in.fifo
    wait_line ready $pid
    # gemmd gone: the call computes on the CPU, right
    kill -9 "$GEMMD_PID"
    wait "$GEMMD_PID" 2>/dev/null || true
    echo go >&3
    exec 3>&-
    rc=0
    wait $pid || rc=$?
    cat out.txt err.txt
    [ $rc -ne 77 ] || exit 77
    [ $rc -eq 0 ] || fail "zerocopy_probe restart (no gemmd) exited $rc"
    grep -q "restart: right on the CPU" out.txt || fail "not on the CPU"
    # gemmd back between the calls: old regions staged, new in place
    GEMMD_PID=
    sock=${GEMM_URL#ipc://}
    rm -f "$sock"
    "$GEMMD" --backend "${GEMMBLAS_TEST_BACKEND:-cpu}" --threads 2 \
        --listen "$GEMM_URL" --log-level warning </dev/null \
        >"$T/gemmd.out" 2>"$T/gemmd2.log" &
    new_pid=$!
    wait_ping
    rm -f in.fifo out.txt
    mkfifo in.fifo
    LD_PRELOAD=$(preload) "$probe" restart <in.fifo >out.txt 2>err.txt &
    pid=$!
    exec 3>in.fifo
    wait_line ready $pid
    kill "$new_pid"
    wait "$new_pid" 2>/dev/null || true
    rm -f "$sock"
    "$GEMMD" --backend "${GEMMBLAS_TEST_BACKEND:-cpu}" --threads 2 \
        --listen "$GEMM_URL" --log-level warning </dev/null \
        >"$T/gemmd.out" 2>"$T/gemmd3.log" &
    GEMMD_PID=$!
    wait_ping
    echo go >&3
    exec 3>&-
    rc=0
    wait $pid || rc=$?
    cat out.txt err.txt
    [ $rc -eq 0 ] || fail "zerocopy_probe restart (gemmd restarted) exited $rc"
    grep -q "restart: right through the new gemmd" out.txt ||
        fail "the calls after the restart did not reach the new gemmd"
    ;;
*)
    fail "unknown mode $mode"
    ;;
esac
