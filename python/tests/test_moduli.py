"""precision= as the Ozaki-II modulus count of a float64 or float32
multiply (``client.matmul(a, b, precision=14)``): the result against
numpy's within the type's tolerance (the cpu backend computes natively; on cuda the
emulation runs), through matmul, submit and gemmd memory operands; the
count reaching gemmd through the ctypes mirror of gemm_op; and every
misuse refused before anything is sent, with a message naming the fix."""
from __future__ import annotations

import numpy as np
import pytest

import gemmd
from gemmd import _capi
from conftest import rand, rel_err


def test_float64_precision_int_matches_numpy(client: gemmd.Client) -> None:
    rng = np.random.default_rng(61)
    for m, n, k in ((64, 48, 40), (33, 17, 129), (1, 1, 1)):
        a = rand(rng, (m, k), np.float64)
        b = rand(rng, (k, n), np.float64)
        for p in (14, 20, np.int64(16), 2):
            d = client.matmul(a, b, precision=p)
            assert d.dtype == np.float64 and d.shape == (m, n)
            assert np.isfinite(d).all()
            if p >= 14:  # fewer moduli keep fewer bits (on cuda)
                assert rel_err(d, a @ b) < 1e-12, (m, n, k, p)


def test_float32_precision_int_matches_numpy(client: gemmd.Client) -> None:
    """float32 with a modulus count: the emulation on cuda (the cpu
    backend computes natively), within float32's tolerance from 7
    moduli on, against a float64 reference."""
    rng = np.random.default_rng(63)
    for m, n, k in ((64, 48, 40), (33, 17, 129), (1, 1, 1)):
        a = rand(rng, (m, k), np.float32)
        b = rand(rng, (k, n), np.float32)
        ref = a.astype(np.float64) @ b.astype(np.float64)
        for p in (7, 12, np.int64(9), 3):
            d = client.matmul(a, b, precision=p)
            assert d.dtype == np.float32 and d.shape == (m, n)
            assert np.isfinite(d).all()
            if p >= 7:
                assert rel_err(d, ref) < 1e-5, (m, n, k, p)


def test_float64_precision_int_in_place_and_submit(
        client: gemmd.Client) -> None:
    rng = np.random.default_rng(62)
    a = client.asarray(rand(rng, (96, 80), np.float64))
    b = client.asarray(rand(rng, (80, 72), np.float64))
    ref = np.asarray(a) @ np.asarray(b)
    assert rel_err(client.matmul(a, b.T.T, precision=14), ref) < 1e-12
    assert rel_err(client.matmul(b.T, a.T, precision=15), ref.T) < 1e-12
    fut = client.submit(a, b, precision=14)
    assert rel_err(fut.result(timeout=60), ref) < 1e-12


def test_count_reaches_gemmd(client: gemmd.Client,
                             monkeypatch: pytest.MonkeyPatch) -> None:
    """With the package's own range check widened, a count out of range
    travels in gemm_op.moduli and gemmd refuses it: the mirror's field is
    where libgemmclient reads it."""
    monkeypatch.setattr(_capi, "GEMM_OZ_MODULI_MAX", 64)
    a = np.ones((8, 8))
    with pytest.raises(gemmd.InvalidArgument, match=r"moduli 21 .*2\.\.20"):
        client.matmul(a, a, precision=21)
    assert client.matmul(a, a, precision=14)[0, 0] == 8.0


def test_misuse_names_the_fix(client: gemmd.Client) -> None:
    f64 = np.ones((4, 4))
    f32 = np.ones((4, 4), np.float32)
    for bad in (0, 1, 21, -3):
        with pytest.raises(ValueError, match=r"2\.\.20 Ozaki-II moduli"):
            client.matmul(f64, f64, precision=bad)
    with pytest.raises(ValueError, match=r"for float64 give the number of "
                       r"Ozaki-II moduli, e\.g\. precision=14"):
        client.matmul(f64, f64, precision="tf32")
    with pytest.raises(ValueError, match="or a number of moduli"):
        client.matmul(f64, f64, precision="fp64")
    with pytest.raises(ValueError, match=r"a float32 multiply takes 2\.\.20"):
        client.matmul(f32, f32, precision=21)
    with pytest.raises(gemmd.InvalidArgument, match="dtype='float64'"):
        client.matmul(f32.astype(np.float16), f32.astype(np.float16),
                      precision=14)
    with pytest.raises(gemmd.InvalidArgument, match="dtype='float64'"):
        client.matmul(np.ones((4, 4), np.int8), np.ones((4, 4), np.int8),
                      precision=14)
    for wrong in (True, 14.0, [14]):
        with pytest.raises(TypeError, match="an int"):
            client.matmul(f64, f64, precision=wrong)
    # a stack or a grouped request is one batch: no modulus count
    with pytest.raises(ValueError, match="one by one"):
        client.matmul(np.ones((3, 4, 4)), f64, precision=14)
    with pytest.raises(ValueError, match="call matmul per problem"):
        client.matmul_grouped([f64, f64], [f64, f64], precision=14)
    # None and "default" still mean: gemmd picks
    assert client.matmul(f64, f64, precision="default")[0, 0] == 4.0
    assert client.matmul(f64, f64, precision=None)[0, 0] == 4.0
    # the connection is fine after the refusals
    assert client.matmul(f64, f64, precision=14)[0, 0] == 4.0
