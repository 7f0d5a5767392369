"""Resident tensors: upload, use as A, B (and transposed) and C, free
(twice, after close, by garbage collection), and the refusals."""
from __future__ import annotations

import gc
from typing import Any

import numpy as np
import pytest

import gemmd
from conftest import eventually, f64, rand, rel_err, tolerance
from test_matmul import npdt


def tensors(c: gemmd.Client) -> int:
    return int(c.status()["tensors"])


@pytest.mark.parametrize("dt", ["bfloat16", "float16", "float32"])
def test_tensor_as_a_b_and_c(client: gemmd.Client, dt: str) -> None:
    rng = np.random.default_rng(5)
    w = rand(rng, (24, 16), npdt(dt))
    x = rand(rng, (10, 24), npdt(dt))
    t = client.upload(w)
    assert t.shape == (24, 16) and t.dtype == npdt(dt) and t.T.shape == (16, 24)
    tol = tolerance(dt)
    assert rel_err(client.matmul(x, t, out_dtype="float32"),
                   f64(x) @ f64(w)) <= tol
    assert rel_err(client.matmul(t.T, x.T, out_dtype="float32"),
                   f64(w).T @ f64(x).T) <= tol
    y = rand(rng, (16, 5), npdt(dt))
    assert rel_err(client.matmul(t, y, out_dtype="float32"),
                   f64(w) @ f64(y)) <= tol
    s = rand(rng, (16, 16), npdt(dt))
    sq = client.upload(s, dtype=dt)  # both operands resident
    assert rel_err(client.matmul(t, sq, out_dtype="float32"),
                   f64(w) @ f64(s)) <= tol
    t.free()
    sq.free()


def test_tensor_as_c(client: gemmd.Client) -> None:
    rng = np.random.default_rng(6)
    a, b, c = rand(rng, (8, 6)), rand(rng, (6, 4)), rand(rng, (8, 4))
    tc = client.upload(c)
    d = client.matmul(a, b, c=tc, beta=0.5)
    assert rel_err(d, f64(a) @ f64(b) + 0.5 * f64(c)) < 1e-5
    with pytest.raises(gemmd.ShapeError):
        client.matmul(a.T @ a, a.T, c=tc, beta=1.0)  # 6x8, C is 8x4


def test_upload_from_gemmd_memory_and_conversion(client: gemmd.Client) -> None:
    rng = np.random.default_rng(7)
    big = client.asarray(rand(rng, (20, 30)))
    t = client.upload(big[2:12, 5:25])  # in place: offset + row stride
    x = rand(rng, (3, 10))
    assert rel_err(client.matmul(x, t), f64(x) @ f64(big[2:12, 5:25])) < 1e-5
    tb = client.upload(np.asarray(big), dtype="bfloat16")
    assert tb.dtype == npdt("bfloat16")


def test_free_twice_use_after_free(make_daemon: Any) -> None:
    client = gemmd.connect(make_daemon().url)  # counts of its own
    n0 = tensors(client)
    t = client.upload(np.ones((4, 4), np.float32))
    assert tensors(client) == n0 + 1
    t.free()
    assert t.freed and tensors(client) == n0
    t.free()
    with pytest.raises(gemmd.InvalidArgument, match="freed"):
        client.matmul(np.ones((2, 4), np.float32), t)
    with pytest.raises(gemmd.InvalidArgument, match="freed"):
        client.matmul(np.ones((2, 4), np.float32), t.T)
    client.close()


def test_collected_tensor_is_freed(make_daemon: Any) -> None:
    client = gemmd.connect(make_daemon().url)
    n0 = tensors(client)
    t = client.upload(np.ones((8, 8), np.float32))
    tt = t.T
    del t
    gc.collect()
    assert tensors(client) == n0 + 1  # the view keeps it
    del tt
    gc.collect()
    assert tensors(client) == n0
    client.close()


def test_tensor_refusals(client: gemmd.Client, daemon: Any) -> None:
    t = client.upload(np.ones((4, 4), np.float32))
    with pytest.raises(gemmd.DTypeError):
        client.matmul(np.ones((2, 4), np.float16), t, dtype="float16")
    with pytest.raises(gemmd.ShapeError):
        client.matmul(np.ones((2, 3), np.float32), t)
    with pytest.raises(gemmd.ShapeError):
        client.upload(np.ones(4, np.float32))
    with pytest.raises(gemmd.DTypeError):
        client.upload(np.ones((2, 2), np.int16))
    with gemmd.connect(daemon.url) as other:
        with pytest.raises(gemmd.InvalidArgument, match="another client"):
            other.matmul(np.ones((2, 4), np.float32), t)
    t.free()


def test_tensor_after_close(daemon: Any) -> None:
    c = gemmd.connect(daemon.url)
    t = c.upload(np.ones((4, 4), np.float32))
    c.close()
    t.free()  # nothing: gemmd freed it with the connection
    with pytest.raises(gemmd.ClientClosed):
        c.matmul(np.ones((4, 4), np.float32), t)
    with gemmd.connect(daemon.url) as c2:  # gemmd drops them asynchronously
        assert eventually(lambda: tensors(c2) == 0), tensors(c2)


@pytest.mark.parametrize("dt", ["complex64", "complex128", "float64"])
def test_conjugate_transposed_tensor(client: gemmd.Client, dt: str) -> None:
    rng = np.random.default_rng(8)
    w = rand(rng, (12, 9), npdt(dt))
    x = rand(rng, (5, 12), npdt(dt))
    t = client.upload(w)
    d = client.matmul(t.H, x.T)  # (9x12)^H-free: w^H @ x^T
    assert rel_err(d, f64(w).conj().T @ f64(x).T) <= tolerance(dt)
    d = client.matmul(x, t.H.H)  # .H.H is the tensor itself
    assert rel_err(d, f64(x) @ f64(w)) <= tolerance(dt)
    if dt.startswith("complex"):
        with pytest.raises(gemmd.InvalidArgument):
            t.H.T
    t.free()
