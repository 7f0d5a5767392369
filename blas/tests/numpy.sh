#!/bin/sh
# numpy.sh: Debian's numpy (python3-numpy, /usr/bin/python3) multiplies
# float32, float64, complex64 and complex128 matrices through libgemmblas
# (LD_PRELOAD, GEMMBLAS_MIN_FLOPS=0) against a private gemmd, and the
# products match those numpy computes without it (numpy_check.py); gemmd's
# served counter proves the calls went there.
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
