"""What a numpy user meets in the first hour: resident tensors read back
(numpy(), np.asarray) and multiply with ``@`` in gemmd; out= of a wider
type is cast into as numpy casts (same_kind); messages that say what is
true (a lost connection is reopened by the next call) once, and that name
gemmd's --max-dim when a shape passes it."""
from __future__ import annotations

import os
import signal

import ml_dtypes
import numpy as np
import pytest

import gemmd

from conftest import rel_err


@pytest.mark.parametrize("dt", ["float32", "float64", "bfloat16",
                                "complex64"])
def test_tensor_reads_back(client, dt):
    rng = np.random.default_rng(3)
    npdt = ml_dtypes.bfloat16 if dt == "bfloat16" else np.dtype(dt)
    x = rng.standard_normal((5, 7)).astype(npdt)
    if dt.startswith("complex"):
        x = x + 1j * rng.standard_normal((5, 7)).astype(npdt)
    x[0, 0] = 0
    t = client.upload(x)
    got = t.numpy()
    assert got.dtype == x.dtype and got.shape == (5, 7)
    np.testing.assert_array_equal(got, x)
    np.testing.assert_array_equal(np.asarray(t), x)
    np.testing.assert_array_equal(np.asarray(t.T), x.T)
    np.testing.assert_array_equal(t.H.numpy(), x.conj().T)
    assert np.asarray(t, dtype=np.complex128).dtype == np.complex128
    t.free()
    with pytest.raises(gemmd.InvalidArgument, match="freed"):
        t.numpy()


def test_tensor_matmul_operator_runs_in_gemmd(client):
    rng = np.random.default_rng(4)
    w = rng.standard_normal((6, 4)).astype(np.float32)
    x = rng.standard_normal((3, 6)).astype(np.float32)
    t = client.upload(w)
    before = client.status()["gemm_flops"]
    d = x @ t
    assert isinstance(d, np.ndarray) and d.shape == (3, 4)
    assert rel_err(d, x.astype(np.float64) @ w) < 1e-5
    d2 = t.T @ x.T
    assert rel_err(d2, (x.astype(np.float64) @ w).T) < 1e-5
    assert client.status()["gemm_flops"] >= before + 2 * 2 * 3 * 4 * 6
    with pytest.raises(TypeError):
        np.add(t, 1)


def test_out_of_a_wider_dtype_is_cast_into(client):
    rng = np.random.default_rng(5)
    a = rng.standard_normal((4, 3)).astype(np.float32)
    b = rng.standard_normal((3, 5)).astype(np.float32)
    out = np.zeros((4, 5), np.float64)
    d = client.matmul(a, b, out=out)
    assert d is out
    np.testing.assert_allclose(out, np.matmul(a, b), rtol=1e-6)
    # numpy does the same: float32 result, cast into float64
    ref = np.zeros((4, 5), np.float64)
    np.matmul(a, b, out=ref)
    np.testing.assert_allclose(out, ref, rtol=1e-6)
    # accumulating into it (out is C)
    client.matmul(a, b, out=out, beta=1.0)
    np.testing.assert_allclose(out, 2 * ref, rtol=1e-6)
    # a kind numpy does not cast into: numpy's words
    with pytest.raises(TypeError, match="same_kind") as ei:
        client.matmul(a, b, out=np.zeros((4, 5), np.int32))
    with pytest.raises(TypeError, match="same_kind"):
        np.matmul(a, b, out=np.zeros((4, 5), np.int32))
    assert isinstance(ei.value, gemmd.DTypeError)


def test_dtype_not_understood_said_once(client):
    a = np.ones((2, 2), np.float32)
    with pytest.raises(gemmd.DTypeError) as ei:
        client.matmul(a, a, dtype="float8")
    msg = str(ei.value)
    assert msg.count("not understood") == 1, msg
    assert "float8" in msg and "bfloat16" in msg, msg


def test_shape_past_max_dim_names_the_limit(make_daemon):
    d = make_daemon("--max-dim", "64")
    with gemmd.connect(d.url, timeout=30.0) as c:
        a = np.ones((65, 8), np.float32)
        with pytest.raises(gemmd.ShapeError, match="--max-dim") as ei:
            c.matmul(a, np.ones((8, 4), np.float32))
        assert "64" in str(ei.value)


def test_connection_closed_says_the_next_call_reconnects(make_daemon):
    d = make_daemon()
    with gemmd.connect(d.url, timeout=30.0) as c:
        a = c.asarray(np.ones((4, 4), np.float32))
        out = c.empty((4, 4), np.float32)
        c.matmul(a, a, out=out)
        # a request in flight when gemmd dies: sent to a stopped gemmd,
        # which is then killed
        os.kill(d.proc.pid, signal.SIGSTOP)
        fut = c.submit(a, a, out=out)
        os.kill(d.proc.pid, signal.SIGKILL)
        d.proc.wait()
        with pytest.raises(gemmd.ConnectionClosed) as ei:
            fut.result(30)
        msg = str(ei.value)
        assert "reopen" not in msg, msg
        assert "the next call reconnects" in msg, msg
        # and it does, once gemmd is back
        d.start()
        assert c.ping()["backend"]
        np.testing.assert_array_equal(c.matmul(a, a), np.full((4, 4), 4.0))
