#!/bin/sh
# kernels_wgmma_generated: kernels/src/wgmma_gen.cuh is what its generator
# (kernels/tools/gen_wgmma.py) writes today. Regenerates it into a
# temporary file and compares; on a difference, prints the diff and the
# command that updates the committed file.
# Usage: wgmma_gen_check.sh SOURCE_DIR
set -eu
src=$1
if ! command -v python3 >/dev/null 2>&1; then
    case " ${GEMM_REQUIRE:-} " in
    *" all "* | *" python3 "*)
        echo "python3 not found, and GEMM_REQUIRE names it" >&2
        exit 1 ;;
    esac
    echo "skipped: python3 not found (install the python3 package)"
    exit 77
fi
tmp=$(mktemp)
trap 'rm -f "$tmp"' EXIT
python3 "$src/kernels/tools/gen_wgmma.py" "$tmp"
if ! cmp -s "$tmp" "$src/kernels/src/wgmma_gen.cuh"; then
    diff -u "$src/kernels/src/wgmma_gen.cuh" "$tmp" | head -40 || true
    echo "kernels/src/wgmma_gen.cuh differs from its generator's output;" \
         "regenerate it: python3 kernels/tools/gen_wgmma.py" \
         "kernels/src/wgmma_gen.cuh" >&2
    exit 1
fi
echo "kernels/src/wgmma_gen.cuh matches kernels/tools/gen_wgmma.py"
