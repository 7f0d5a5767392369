#!/bin/sh
# README's first command: install the packages, build, start gemmd on a
# private socket, and multiply two random matrices through gemmctl, checked
# against an fp64 reference. gemmd keeps running; `kill $(cat build/gemmd.pid)`
# stops it.
set -eu
cd "$(dirname "$0")/.."
./scripts/install-deps.sh
./scripts/build.sh
sock="$PWD/build/gemmd.sock"
export GEMM_URL="ipc://$sock"
if [ -f build/gemmd.pid ] && kill -0 "$(cat build/gemmd.pid)" 2>/dev/null; then
    kill "$(cat build/gemmd.pid)"; sleep 0.5
fi
# the daemon keeps none of this script's streams (a pipe reading them
# would wait for it otherwise)
./build/daemon/gemmd --listen "$GEMM_URL" --log-level notice \
    </dev/null >build/gemmd.out 2>build/gemmd.log &
echo $! > build/gemmd.pid
for i in $(seq 50); do
    ./build/client/gemmctl ping >/dev/null 2>&1 && break
    sleep 0.1
done
./build/client/gemmctl ping
./build/client/gemmctl mm -m 512 -n 384 -k 256 --dtype bf16 --check
python3 - <<'PY'
import struct
def npy(path, rows, cols, vals):
    hdr = "{'descr': '<f4', 'fortran_order': False, 'shape': (%d, %d), }" % (rows, cols)
    hdr += " " * (63 - (10 + len(hdr)) % 64) + "\n"
    with open(path, "wb") as f:
        f.write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(hdr)) + hdr.encode())
        f.write(struct.pack("<%df" % len(vals), *vals))
npy("build/A.npy", 2, 3, [1, 2, 3, 4, 5, 6])
npy("build/B.npy", 3, 2, [7, 8, 9, 10, 11, 12])
PY
./build/client/gemmctl mm --a build/A.npy --b build/B.npy --check
echo "gemmd is running (pid $(cat build/gemmd.pid)) at $GEMM_URL"
