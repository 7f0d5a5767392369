#!/bin/sh
# netlib.sh MODE TESTER INPUT: one of netlib's level-3 testers (Debian's
# libblas-test) through libgemmblas against a private gemmd, every GEMM
# sent there (GEMMBLAS_MIN_FLOPS=0). MODE says how the program finds
# libgemmblas: preload (LD_PRELOAD=libgemmblas.so.0), path
# (LD_LIBRARY_PATH to the directory where it is libblas.so.3) or
# panels (preloaded, every GEMM cut into 3 row panels: GEMMBLAS_PANELS),
# fill (preloaded, every level-3 call sent before its operands are
# staged and filled in 3 parts while gemmd works:
# GEMMBLAS_FILL_PARTS, GEMMBLAS_FILL_MIN_BYTES=0; a CPU gemmd checks the
# order: GEMMD_TEST_FILL_ORDER),
# zerocopy (preloaded, GEMMBLAS_ZEROCOPY=1, a threshold of 256 bytes, so
# that the CBLAS testers' row-major copies are regions: some calls must
# run with every operand in place), or
# alternative (gemmblas-alternative registers it in a private
# alternatives tree, GEMMBLAS_ALT_ROOT, whose libblas.so.3 link the
# program then loads; the library and script as `cmake --install` puts
# them in a private prefix). Passes when every routine of the tester PASSED, no
# line says FAIL, gemmd's served counter grew by the tester's calls, and
# the served counter of every level-3 routine it tests grew.
# Two modes run with no CPU BLAS at all (GEMMBLAS_CPU_BLAS names a library
# that is not one, and the program finds libgemmblas as libblas.so.3, so
# no other BLAS is in the process): nocpu, without gemmd (GEMM_URL names
# no socket, GEMMBLAS_MIN_FLOPS=never): every call runs in libgemmblas's
# plain loops (cpu_gemm.c, cpu_level3.c) and its own argument checks;
# nocpu-gemmd, with gemmd and every call with a product sent there: the
# plain loops make the rest (quick returns, alpha = 0, illegal arguments).
# Both also pass only when every level-3 routine the tester calls said
# it ran in plain loops.
set -eu
. "$(dirname "$0")/lib.sh"
mode=$1 tester=$2 input=$3
dir=${BLAS_TESTER_DIR:-/usr/lib/x86_64-linux-gnu/blas} # testers, inputs
need "$dir/$tester" libblas-test
need "$dir/$input" libblas-test
# the CPU backend checks libgemmblas's order of filling (fill_check.h)
[ "$mode" = fill ] && export GEMMD_TEST_FILL_ORDER=1
if [ "$mode" = nocpu ]; then
    scratch
    GEMM_URL="ipc://$T/no-gemmd.sock"
    export GEMM_URL
else
    start_gemmd
    before=$(counter requests_served)
    routines_snapshot "$T/routines.before"
fi
cd "$T"
export GEMMBLAS_MIN_FLOPS=0 GEMMBLAS_VERBOSE=1
case $mode in
nocpu | nocpu-gemmd)
    [ "$mode" = nocpu ] && GEMMBLAS_MIN_FLOPS=never
    # libm: loads, but has no dgemm_, so real.c takes no CPU BLAS (and
    # then no netlib spare either)
    export GEMMBLAS_CPU_BLAS=libm.so.6
    LD_TRACE_LOADED_OBJECTS=1 LD_PRELOAD=$(preload) \
        LD_LIBRARY_PATH=$GEMMBLAS_LIB3 "$dir/$tester" >libs.txt 2>&1 ||
        { cat libs.txt; fail "cannot list $tester's libraries"; }
    grep -q "libblas.so.3 => $GEMMBLAS_LIB3/libblas.so.3" libs.txt ||
        { cat libs.txt; fail "$tester does not load libgemmblas as libblas.so.3"; }
    if grep -i -E "openblas|blis|atlas|/blas/libblas" libs.txt; then
        fail "$tester loads another BLAS (above)"
    fi
    LD_PRELOAD=$(preload) LD_LIBRARY_PATH=$GEMMBLAS_LIB3 "$dir/$tester" <"$dir/$input" >out.txt 2>err.txt ||
        { cat out.txt err.txt; fail "$tester exited $?"; }
    grep -q "GEMMBLAS_CPU_BLAS=libm.so.6 cannot serve as the CPU BLAS" err.txt ||
        { cat err.txt; fail "libgemmblas did not report that it has no CPU BLAS"; }
    if grep "^gemmblas\[[0-9]*\]: CPU BLAS: " err.txt; then
        fail "libgemmblas loaded a CPU BLAS (above)"
    fi
    ;;
preload)
    LD_PRELOAD=$(preload "$GEMMBLAS_LIB") "$dir/$tester" <"$dir/$input" >out.txt 2>err.txt ||
        { cat out.txt err.txt; fail "$tester exited $?"; }
    ;;
zerocopy)
    # GEMMBLAS_ZEROCOPY=1 with a threshold below the row-major copies the
    # CBLAS testers' C wrappers malloc: those calls run in place
    if [ -n "${GEMMBLAS_ASAN_RUNTIME:-}" ]; then
        echo "skipped: the zero-copy mode cannot be on under ASan (its malloc is the program's)"
        exit 77
    fi
    GEMMBLAS_ZEROCOPY=1 GEMMBLAS_ZEROCOPY_MIN_BYTES=256 \
        LD_PRELOAD=$(preload "$GEMMBLAS_LIB") "$dir/$tester" <"$dir/$input" >out.txt 2>err.txt ||
        { cat out.txt err.txt; fail "$tester exited $?"; }
    if grep -q "GEMMBLAS_ZEROCOPY=1 has no effect" err.txt; then
        grep "GEMMBLAS_ZEROCOPY" err.txt
        echo "skipped: the zero-copy mode cannot be on here (see above)"
        exit 77
    fi
    inplace=$(sed -n 's/.*zero-copy: .* calls, \([0-9]*\) with every operand in place.*/\1/p' err.txt)
    [ "${inplace:-0}" -gt 0 ] ||
        { cat err.txt; fail "$tester: no call ran with its operands in place"; }
    ;;
panels)
    # every GEMM with 3 rows or more in 3 row panels, 2 in flight
    GEMMBLAS_PANELS=3 GEMMBLAS_PANELS_INFLIGHT=2 GEMMBLAS_PANEL_MIN_FLOPS=0 \
        GEMMBLAS_VERBOSE=2 LD_PRELOAD=$(preload "$GEMMBLAS_LIB") "$dir/$tester" <"$dir/$input" >out.txt 2>err.txt ||
        { cat out.txt err.txt; fail "$tester exited $?"; }
    grep -q "panels: 3 (on)" err.txt || { cat err.txt; fail "panels not on"; }
    grep -q "gemmd, 3 panels (2 in flight), B uploaded once" err.txt ||
        { tail -50 err.txt; fail "no GEMM ran in panels"; }
    # the per-call lines (verbose 2) are not printed below
    grep -v "^gemmblas\[[0-9]*\]: [sdcz][a-z0-9]* [0-9mnk=x]*[ :]" err.txt |
        grep -v "connected to gemmd" >err1.txt || true
    grep "on the CPU" err.txt >>err1.txt || true
    mv err1.txt err.txt
    ;;
fill)
    GEMMBLAS_FILL_PARTS=3 GEMMBLAS_FILL_MIN_BYTES=0 GEMMBLAS_VERBOSE=2 \
        LD_PRELOAD=$(preload "$GEMMBLAS_LIB") "$dir/$tester" <"$dir/$input" >out.txt 2>err.txt ||
        { cat out.txt err.txt; fail "$tester exited $?"; }
    grep -q "filled by parts while gemmd works: 3 parts (on, ?gemm too)" err.txt ||
        { cat err.txt; fail "filling by parts not on"; }
    case $tester in
    *zcblat3) ;; # its calls: gemm only
    *) grep -q "(by parts, beside gemmd)" err.txt ||
        { tail -50 err.txt; fail "no level-3 call was filled by parts"; } ;;
    esac
    grep -q "B and A filled by parts beside gemmd" err.txt ||
        { tail -50 err.txt; fail "no gemm was filled by parts"; }
    # a call the daemon's order check refused ran on the CPU instead
    if grep "fill order" err.txt; then
        fail "gemmd saw a part written after the counter passed it (above)"
    fi
    grep -v "^gemmblas\[[0-9]*\]: [sdcz][a-z0-9]* [0-9mnk=x]*[ :]" err.txt |
        grep -v "connected to gemmd" >err1.txt || true
    grep "on the CPU" err.txt >>err1.txt || true
    mv err1.txt err.txt
    ;;
path)
    LD_PRELOAD=$(preload) LD_LIBRARY_PATH=$GEMMBLAS_LIB3 "$dir/$tester" <"$dir/$input" >out.txt 2>err.txt ||
        { cat out.txt err.txt; fail "$tester exited $?"; }
    ;;
alternative)
    # cmake --install into a private prefix, then the installed script
    # registers the installed library in a private alternatives tree
    "$CMAKE" --install "$GEMM_BUILD_DIR" --prefix "$T/inst" >inst.txt 2>&1 ||
        { cat inst.txt; fail "cmake --install"; }
    alt=$T/inst/sbin/gemmblas-alternative
    [ -x "$alt" ] || fail "cmake --install did not install $alt"
    export GEMMBLAS_ALT_ROOT="$T/alt"
    "$alt" register >alt.txt 2>&1 || { cat alt.txt; fail "$alt register"; }
    target=$(readlink -f "$T/alt/lib/libblas.so.3")
    case $target in
    "$T"/inst/*/gemmblas/libblas.so.3) ;;
    *) fail "the alternative's libblas.so.3 is $target" ;;
    esac
    LD_PRELOAD=$(preload) LD_LIBRARY_PATH=$T/alt/lib "$dir/$tester" <"$dir/$input" >out.txt 2>err.txt ||
        { cat out.txt err.txt; fail "$tester exited $?"; }
    grep -q "CPU BLAS: .*openblas\|CPU BLAS: .*blas/libblas" err.txt ||
        { cat err.txt; fail "no real CPU BLAS named"; }
    "$alt" unregister >>alt.txt 2>&1 || { cat alt.txt; fail "unregister"; }
    [ ! -e "$T/alt/lib/libblas.so.3" ] || fail "unregister left the link"
    ;;
*)
    fail "unknown mode $mode"
    ;;
esac
cat err.txt
# Fortran testers write their summary to the file their input names;
# the CBLAS ones to stdout.
summary=out.txt
case $tester in
xblat3*) summary=$(sed -n "1s/^'\([^']*\)'.*/\1/p" "$dir/$input") ;;
esac
[ -s "$summary" ] || fail "no summary file '$summary'"
if grep -E "FAIL|SUSPECT|\*\*\*\*\*" "$summary"; then
    fail "$tester: see the lines above ($summary)"
fi
passed=$(grep -c "PASSED" "$summary")
case $tester in
xblat3s | xblat3d) want=12 ;;
xblat3c | xblat3z) want=18 ;;
xscblat3 | xdcblat3) want=18 ;;
*) want=27 ;;
esac
[ "$passed" -eq "$want" ] ||
    { cat "$summary"; fail "$tester: $passed PASSED lines, expected $want"; }
grep -q "END OF TESTS" "$summary" || fail "$tester did not finish"
echo "$tester ($mode): $passed PASSED"
case $tester in
xblat3s | xblat3d | xscblat3 | xdcblat3)
    routines="symm syrk syr2k trmm trsm" ;;
*)
    routines="symm hemm syrk herk syr2k her2k trmm trsm" ;;
esac
case $mode in
nocpu | nocpu-gemmd)
    p=$(echo "$tester" | sed 's/^xblat3\(.\)$/\1/; s/^x\(.\)cblat3$/\1/')
    for r in $routines; do
        name=${p}$r
        case $tester in
        xblat3*) name=${name}_ ;;
        *) name=cblas_$name ;;
        esac
        grep -q "$name: not provided by the CPU BLAS: plain loops run it" err.txt ||
            fail "$name did not run in plain loops"
    done
    echo "plain loops ran: $routines"
    [ "$mode" = nocpu ] && exit 0
    ;;
esac
expect_served "$before" 1000
# every routine the tester exercises went through gemmd, not only gemm
# shellcheck disable=SC2086 # $routines: a list of words
expect_routines "$T/routines.before" gemm $routines
