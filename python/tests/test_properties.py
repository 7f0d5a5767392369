"""Property tests (hypothesis): matmul against numpy in fp64 for random
shapes, layouts (C order, Fortran order, transposed views, strided slices,
in gemmd memory or not) and every dtype; alpha, beta and C in float64,
checked element by element against a bound on the rounding error."""
from __future__ import annotations

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import gemmd
from conftest import bound_err, f64, operand, tolerance
from test_matmul import npdt

LAYOUTS = ["c", "f", "t-view", "strided", "gemmd", "gemmd-t", "gemmd-slice"]
SETTINGS = settings(max_examples=60, deadline=None, database=None,
                    suppress_health_check=[HealthCheck.function_scoped_fixture,
                                           HealthCheck.too_slow])


@SETTINGS
@given(m=st.integers(1, 48), n=st.integers(1, 48), k=st.integers(1, 48),
       la=st.sampled_from(LAYOUTS), lb=st.sampled_from(LAYOUTS),
       dt=st.sampled_from(["float64", "float32", "float16", "bfloat16",
                           "complex64", "complex128"]),
       out32=st.booleans(), seed=st.integers(0, 2**31 - 1))
def test_matmul_matches_numpy(client: gemmd.Client, m: int, n: int, k: int,
                              la: str, lb: str, dt: str, out32: bool,
                              seed: int) -> None:
    rng = np.random.default_rng(seed)
    a = operand(client, rng, m, k, npdt(dt), la)
    b = operand(client, rng, k, n, npdt(dt), lb)
    cd = "float32" if out32 and dt in ("float16", "bfloat16") else dt
    d = client.matmul(a, b, out_dtype=cd)
    assert d.shape == (m, n) and d.dtype == npdt(cd)
    # each element against the rounding bound of its own dot product
    # (a norm-wise error is ill-conditioned where one sums to near 0)
    assert bound_err(d, a, b) <= tolerance(dt, cd)


@SETTINGS
@given(m=st.integers(1, 40), n=st.integers(1, 40), k=st.integers(1, 40),
       la=st.sampled_from(LAYOUTS), lb=st.sampled_from(LAYOUTS),
       lc=st.sampled_from(LAYOUTS + ["out"]),
       alpha=st.floats(-4, 4, allow_nan=False),
       beta=st.floats(-4, 4, allow_nan=False),
       out_gemmd=st.booleans(), seed=st.integers(0, 2**31 - 1))
def test_alpha_beta_c_match_numpy(client: gemmd.Client, m: int, n: int,
                                  k: int, la: str, lb: str, lc: str,
                                  alpha: float, beta: float, out_gemmd: bool,
                                  seed: int) -> None:
    rng = np.random.default_rng(seed)
    f64t = np.dtype(np.float64)  # exact enough to check each element
    a = operand(client, rng, m, k, f64t, la)
    b = operand(client, rng, k, n, f64t, lb)
    out = operand(client, rng, m, n, f64t, "gemmd" if out_gemmd else "c")
    if lc == "out":
        c, cref = None, f64(out).copy()
    else:
        c = operand(client, rng, m, n, f64t, lc)
        cref = f64(c)
    got = client.matmul(a, b, out=out, c=c, alpha=alpha, beta=beta)
    assert got is out
    assert bound_err(out, a, b, alpha, beta, cref) <= 1e-13
