#!/bin/sh
# run.sh BUILD_PY_DIR GEMMD [pytest args]: the ctest "python". Makes a venv
# in BUILD_PY_DIR/venv from Debian's python3 (with the system's site
# packages: python3-numpy, python3-pytest, python3-hypothesis), installs
# ml_dtypes from PyPI and the package staged in BUILD_PY_DIR/pkg, then runs
# the pytest suite against GEMMD ($GEMM_TEST_BACKEND, default cpu).
# $GEMM_PYTHON picks another interpreter.
set -eu
dir=$1
gemmd=$2
shift 2
here=$(cd "$(dirname "$0")" && pwd)
py=${GEMM_PYTHON:-}
if [ -z "$py" ]; then
    if [ -x /usr/bin/python3 ]; then py=/usr/bin/python3; else py=python3; fi
fi
venv=$dir/venv
if ! [ -x "$venv/bin/python" ]; then
    "$py" -m venv --system-site-packages "$venv" || {
        echo "run.sh: cannot make a venv with $py (apt install python3-venv)" >&2
        exit 1
    }
fi
pip() { "$venv/bin/python" -m pip -q --disable-pip-version-check "$@"; }
# numpy 1.x (Debian 12) needs ml_dtypes < 0.6
"$venv/bin/python" -c 'import ml_dtypes' 2>/dev/null ||
    pip install "ml_dtypes>=0.2,<0.6" || {
        echo "run.sh: cannot install ml_dtypes from PyPI" >&2
        exit 1
    }
pip install --no-deps --no-build-isolation --force-reinstall "$dir/pkg"
export GEMM_TEST_GEMMD="${GEMM_TEST_GEMMD:-$gemmd}"
cd "$dir"
exec "$venv/bin/python" -m pytest -p no:cacheprovider -rs -q "$here" "$@"
