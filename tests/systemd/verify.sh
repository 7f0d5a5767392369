#!/bin/sh
# systemd_verify: systemd-analyze verify accepts gemmd.service (as CMake
# configured it, with ExecStart pointed at the gemmd just built) and the
# unit keeps its hardening. Usage: verify.sh UNIT GEMMD
# Without systemd-analyze it skips (exit 77), or fails where $GEMM_REQUIRE
# names systemd or is "all" (CI).
set -eu
unit=$1 gemmd=$2
if ! command -v systemd-analyze >/dev/null 2>&1; then
    case " $(echo "${GEMM_REQUIRE:-}" | tr , ' ') " in
    *" all "* | *" systemd "*)
        echo "systemd-analyze not found, and GEMM_REQUIRE says this host" \
             "has it (install the systemd package)" >&2
        exit 1 ;;
    esac
    echo "skipped: systemd-analyze not found (install the systemd package)"
    exit 77
fi
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
sed "s|^ExecStart=[^ ]*/gemmd |ExecStart=$gemmd |" "$unit" \
    > "$dir/gemmd.service"
out=$(systemd-analyze verify "$dir/gemmd.service" 2>&1) || {
    echo "$out"; exit 1; }
# verify prints problems without failing for some of them: none allowed
if [ -n "$out" ]; then echo "$out"; exit 1; fi
for want in Type=notify NoNewPrivileges=yes ProtectSystem=strict \
    ProtectHome=yes PrivateTmp=yes \
    "RestrictAddressFamilies=AF_UNIX AF_INET AF_INET6 AF_NETLINK" IPAddressDeny=any \
    IPAddressAllow=localhost RuntimeDirectory=gemmd User=gemmd Group=gemmd \
    SystemCallFilter=@system-service SystemCallErrorNumber=EPERM \
    ProtectProc=invisible; do
    grep -qx "$want" "$unit" || { echo "missing $want"; exit 1; }
done
if grep -q '^PrivateDevices=yes' "$unit"; then
    echo "PrivateDevices=yes would hide the NVIDIA device nodes"; exit 1
fi
if grep -q '@[A-Z_]*@' "$unit"; then
    echo "unconfigured @VARIABLE@ left in the unit:"; grep -n '@[A-Z_]*@' "$unit"
    exit 1
fi
echo "systemd-analyze verify: gemmd.service OK"
