#!/bin/sh
# systemd_install_prefix: `cmake --install BUILD --prefix P` into a fresh
# directory gives a unit whose ExecStart= and Documentation= name P's files
# (and README.md is there), a Python package whose _libpath.txt names P's
# libgemmclient (and which loads it, where Debian's numpy is installed), and
# a unit that systemd-analyze verify accepts as installed. Usage: install_prefix.sh BUILD_DIR
set -eu
build=$1
p=$(mktemp -d)
trap 'rm -rf "$p"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }
cmake --install "$build" --prefix "$p" >"$p.log" 2>&1 || {
    cat "$p.log"; rm -f "$p.log"; fail "cmake --install failed"; }
rm -f "$p.log"
unit=$p/lib/systemd/system/gemmd.service
[ -f "$unit" ] || fail "no unit at $unit"
exec_line=$(grep '^ExecStart=' "$unit")
case $exec_line in
"ExecStart=$p/bin/gemmd "*) ;;
*) fail "unit says '$exec_line', not ExecStart=$p/bin/gemmd" ;;
esac
[ -x "$p/bin/gemmd" ] || fail "ExecStart names $p/bin/gemmd, not installed"
doc=$(sed -n 's|^Documentation=file://||p' "$unit")
[ "$doc" = "$p/share/doc/gemmd/README.md" ] ||
    fail "Documentation= names '$doc', not $p/share/doc/gemmd/README.md"
[ -f "$doc" ] || fail "Documentation= names $doc, which was not installed"
libpath=$p/share/gemmd/python/gemmd/_libpath.txt
[ -f "$libpath" ] || fail "no $libpath"
lib=$(grep -v '^#' "$libpath" | sed -n '/./{p;q}')
case $lib in
"$p"/lib*/libgemmclient.so.0) ;;
*) fail "_libpath.txt names '$lib', not P's lib directory ($p)" ;;
esac
[ -e "$lib" ] || fail "_libpath.txt names $lib, which was not installed"
# the installed package, as it is, loads that library (Debian's numpy)
if /usr/bin/python3 -c "import numpy" 2>/dev/null; then
    # an ASan build's library needs its runtime first (GEMM_ASAN_RUNTIME)
    got=$(cd "$p" && env -u GEMMD_CLIENT_LIB PYTHONPATH="$p/share/gemmd/python" \
        ${GEMM_ASAN_RUNTIME:+LD_PRELOAD=$GEMM_ASAN_RUNTIME} \
        ${GEMM_ASAN_RUNTIME:+ASAN_OPTIONS=detect_leaks=0} \
        /usr/bin/python3 -c "import gemmd; print(gemmd.library_path())") ||
        fail "the installed gemmd package does not load"
    [ "$got" = "$lib" ] ||
        fail "the installed gemmd package loads '$got', not $lib"
fi
if command -v systemd-analyze >/dev/null 2>&1; then
    out=$(systemd-analyze verify "$unit" 2>&1) || {
        echo "$out"; fail "systemd-analyze verify refused the installed unit"; }
    [ -z "$out" ] || { echo "$out"; fail "systemd-analyze verify complained"; }
fi
echo "install --prefix $p: unit, README and _libpath.txt follow the prefix"
