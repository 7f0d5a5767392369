#!/bin/sh
# numpy.sh: Debian's numpy (python3-numpy, /usr/bin/python3) multiplies
# float32, float64, complex64 and complex128 matrices through libgemmblas
# (LD_PRELOAD, GEMMBLAS_MIN_FLOPS=0) against a private gemmd, and the
# products match those numpy computes without it (numpy_check.py); gemmd's
# served counter proves the calls went there. Then again with
# GEMMBLAS_ZEROCOPY=1: some calls must run with every operand in place.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib.sh"
need /usr/bin/python3 python3
/usr/bin/python3 -c "import numpy" 2>/dev/null ||
    missing "numpy for /usr/bin/python3" python3-numpy
start_gemmd
/usr/bin/python3 "$here/numpy_check.py" ref "$T"
before=$(counter requests_served)
GEMMBLAS_MIN_FLOPS=0 GEMMBLAS_VERBOSE=1 LD_PRELOAD=$(preload "$GEMMBLAS_LIB") \
    /usr/bin/python3 "$here/numpy_check.py" check "$T"
# every case with all dimensions > 1 is a GEMM (28); numpy takes the
# others (a 1 in the shape) to gemv or dot
expect_served "$before" 28

# the same with the zero-copy mode on: numpy's large arrays are regions
# (a preloaded libgemmblas's malloc is Python's), products still equal
GEMMBLAS_MIN_FLOPS=0 LD_PRELOAD=$(preload "$GEMMBLAS_LIB") \
    zerocopy_run /usr/bin/python3 "$here/numpy_check.py" check "$T"
