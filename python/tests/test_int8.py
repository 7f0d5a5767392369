"""int8 inputs, int32 results: matmul of two int8 arrays gives int32 (not
numpy's wrapping int8), compared exactly with numpy computed in int64 and
cast to int32 (modulo 2^32, as gemmd's int32 arithmetic wraps): shapes
with 1 and odd sizes, every transpose (views of gemmd memory used in
place and copies), stacks, alpha/beta with c and out, zero dimensions,
resident tensors, grouped problems; the refusals name the fix."""
from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import gemmd

SHAPES = [(1, 1, 1), (1, 7, 1), (5, 1, 3), (7, 5, 3), (17, 33, 9),
          (64, 127, 65), (100, 37, 129), (13, 17, 513)]


def i8(rng: np.random.Generator, *shape: int) -> np.ndarray:
    """Every int8 value, -128 and 127 included."""
    return rng.integers(-128, 128, size=shape, dtype=np.int8)


def ref(a: Any, b: Any, alpha: int = 1, beta: int = 0,
        c: Any = None) -> np.ndarray:
    """alpha * a @ b + beta * c in int64 (numpy's int64 wraps modulo 2^64,
    which reduces to the same residue modulo 2^32), cast to int32."""
    d = np.int64(alpha) * (np.asarray(a).astype(np.int64) @
                           np.asarray(b).astype(np.int64))
    if beta != 0:
        d = d + np.int64(beta) * np.asarray(c).astype(np.int64)
    return d.astype(np.int32)


@pytest.mark.parametrize("m,n,k", SHAPES)
@pytest.mark.parametrize("ta,tb", [(0, 0), (1, 0), (0, 1), (1, 1)])
def test_int8_gives_exact_int32(client: gemmd.Client, m: int, n: int, k: int,
                                ta: int, tb: int) -> None:
    rng = np.random.default_rng(m * 1000 + n * 10 + k + ta * 3 + tb)
    a = i8(rng, k, m).T if ta else i8(rng, m, k)  # a transposed view
    b = i8(rng, n, k).T if tb else i8(rng, k, n)
    d = client.matmul(a, b)
    assert d.dtype == np.int32
    np.testing.assert_array_equal(d, ref(a, b))
    # the same operands in gemmd memory: views used in place
    ga = client.asarray(a.T).T if ta else client.asarray(a)
    gb = client.asarray(b.T).T if tb else client.asarray(b)
    np.testing.assert_array_equal(client.matmul(ga, gb), ref(a, b))


def test_wraps_modulo_2_32(client: gemmd.Client) -> None:
    k = 140000  # 127 * 127 * k passes 2^31
    a = np.full((1, k), 127, np.int8)
    b = np.full((k, 2), 127, np.int8)
    d = client.matmul(a, b)
    want = ref(a, b)
    assert int(want[0, 0]) != 16129 * k  # it did wrap
    np.testing.assert_array_equal(d, want)
    c = np.array([[2 ** 31 - 1, -2 ** 31]], np.int32)
    d = client.matmul(a, b, c=c, alpha=-3, beta=2 ** 31 - 1)
    np.testing.assert_array_equal(d, ref(a, b, -3, 2 ** 31 - 1, c))


@pytest.mark.parametrize("alpha,beta", [(1, 1), (-7, 3), (0, -1),
                                        (2 ** 31 - 1, -2 ** 31), (2.0, 5)])
def test_alpha_beta_c_and_out(client: gemmd.Client, alpha: Any,
                              beta: Any) -> None:
    rng = np.random.default_rng(7)
    a, b = i8(rng, 9, 21), i8(rng, 21, 6)
    c = rng.integers(-2 ** 31, 2 ** 31, size=(9, 6), dtype=np.int32)
    want = ref(a, b, int(alpha), int(beta), c)
    np.testing.assert_array_equal(
        client.matmul(a, b, c=c, alpha=alpha, beta=beta), want)
    out = client.empty((9, 6), np.int32)  # gemmd memory: C in place
    out[...] = c
    r = client.matmul(a, b, out, alpha=alpha, beta=beta)
    assert r is out
    np.testing.assert_array_equal(out, want)
    o64 = np.zeros((9, 6), np.float64)  # cast as numpy casts
    client.matmul(a, b, o64, c=c, alpha=alpha, beta=beta)
    np.testing.assert_array_equal(o64, want.astype(np.float64))


def test_stacks_vectors_and_module_matmul(client: gemmd.Client) -> None:
    rng = np.random.default_rng(3)
    a, b = i8(rng, 3, 4, 5), i8(rng, 5, 6)
    np.testing.assert_array_equal(client.matmul(a, b), ref(a, b))
    v = i8(rng, 5)
    d = client.matmul(a, v)
    assert d.dtype == np.int32 and d.shape == (3, 4)
    np.testing.assert_array_equal(d, ref(a, v))
    x, y = i8(rng, 5), i8(rng, 5)
    assert client.matmul(x, y) == int(ref(x, y))


def test_zero_dimensions(client: gemmd.Client) -> None:
    rng = np.random.default_rng(11)
    a, b = i8(rng, 4, 0), i8(rng, 0, 3)
    d = client.matmul(a, b)
    assert d.dtype == np.int32 and d.shape == (4, 3) and not d.any()
    c = rng.integers(-2 ** 31, 2 ** 31, size=(4, 3), dtype=np.int32)
    np.testing.assert_array_equal(client.matmul(a, b, c=c, beta=3),
                                  ref(a, b, 1, 3, c))
    e = client.matmul(i8(rng, 0, 5), i8(rng, 5, 2))
    assert e.dtype == np.int32 and e.shape == (0, 2)


def test_tensors_and_grouped(client: gemmd.Client) -> None:
    rng = np.random.default_rng(5)
    w = i8(rng, 40, 24)
    t = client.upload(w)
    x = i8(rng, 7, 40)
    np.testing.assert_array_equal(client.matmul(x, t), ref(x, w))
    t.free()
    As = [i8(rng, 3, 8), i8(rng, 5, 2)]
    Bs = [i8(rng, 8, 4), i8(rng, 2, 9)]
    ds = client.matmul_grouped(As, Bs, alpha=[2, -1])
    for i, (x, y) in enumerate(zip(As, Bs)):
        assert ds[i].dtype == np.int32
        np.testing.assert_array_equal(ds[i], ref(x, y, [2, -1][i]))


def test_mixed_and_explicit_types(client: gemmd.Client) -> None:
    rng = np.random.default_rng(9)
    a, b = i8(rng, 6, 5), i8(rng, 5, 4)
    f = rng.standard_normal((5, 4)).astype(np.float32)
    d = client.matmul(a, f)  # numpy promotes int8 with float32 to float32
    assert d.dtype == np.float32
    np.testing.assert_allclose(d, a.astype(np.float64) @ f, rtol=1e-5,
                               atol=1e-4)
    d = client.matmul(a.astype(np.int32), b.astype(np.int16), dtype="int8")
    np.testing.assert_array_equal(d, ref(a, b))  # values fit: exact
    d = client.matmul(a, b, dtype="float32")
    assert d.dtype == np.float32
    np.testing.assert_array_equal(d, ref(a, b).astype(np.float32))


def test_refusals_name_the_fix(client: gemmd.Client) -> None:
    rng = np.random.default_rng(1)
    a, b = i8(rng, 4, 4), i8(rng, 4, 4)
    with pytest.raises(gemmd.InvalidArgument, match="integers in"):
        client.matmul(a, b, alpha=0.5)
    with pytest.raises(gemmd.InvalidArgument, match="beta=4294967296"):
        client.matmul(a, b, c=a.astype(np.int32), beta=2 ** 32)
    with pytest.raises(gemmd.DTypeError, match="int32 is the result type"):
        client.matmul(a.astype(np.int32), b.astype(np.int32))
    with pytest.raises(gemmd.DTypeError, match="does not round floats"):
        client.matmul(a.astype(np.float32), b, dtype="int8")
    with pytest.raises(gemmd.DTypeError, match="cannot write a float32"):
        client.matmul(a, b, out_dtype="float32")
    with pytest.raises(gemmd.DTypeError, match="int16"):
        client.matmul(a, b.astype(np.uint8))  # numpy: int16
    with pytest.raises(gemmd.InvalidArgument, match="precision"):
        client.matmul(a, b, precision="tf32")
