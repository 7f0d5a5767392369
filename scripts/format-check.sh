#!/bin/sh
# Checks that the C, C++ and CUDA sources are as clang-format (the repo's
# .clang-format) writes them: `clang-format --dry-run -Werror` over every
# tracked *.c *.h *.cc *.cpp *.hpp *.cu *.cuh file except generated ones
# (kernels/src/wgmma_gen.cuh: kernels/tools/gen_wgmma.py writes it, and
# the kernels_wgmma_generated test checks it). Prints each difference and
# fails if there is one. .ci/run calls it; `scripts/format-check.sh --fix`
# rewrites the files in place instead (whitespace only).
# Usage: scripts/format-check.sh [--fix]
set -eu
cd "$(dirname "$0")/.."
cf=${CLANG_FORMAT:-clang-format}
if ! command -v "$cf" >/dev/null 2>&1; then
    echo "format-check: $cf not found (install the clang-format package;" \
         "scripts/install-deps.sh does)" >&2
    exit 1
fi
files=$(git ls-files '*.c' '*.h' '*.cc' '*.cpp' '*.hpp' '*.cu' '*.cuh' |
        grep -v '^kernels/src/wgmma_gen\.cuh$')
if [ "${1:-}" = "--fix" ]; then
    # shellcheck disable=SC2086 # the names have no spaces (git ls-files)
    "$cf" -i $files
    exit 0
fi
# shellcheck disable=SC2086
if ! "$cf" --dry-run -Werror $files; then
    echo "format-check: the files above differ from clang-format's output;" \
         "scripts/format-check.sh --fix rewrites them" >&2
    exit 1
fi
echo "format-check: $(echo "$files" | wc -l) files as clang-format writes them"
