"""Arrays in gemmd memory: empty/zeros/asarray, their buffers' lifetime
(kept by any view, pooled or released when the last array goes), and
arrays that outlive close() or their Client object."""
from __future__ import annotations

import gc
from typing import Any

import numpy as np
import pytest

import gemmd
from conftest import eventually, rand, rel_err


def registered(client: gemmd.Client) -> int:
    return int(client.status()["buffers"])


@pytest.mark.parametrize("dtype", ["bfloat16", "float16", "float32",
                                   np.float32, "int8", np.complex64])
def test_empty_zeros_asarray(client: gemmd.Client, dtype: Any) -> None:
    e = client.empty((7, 5), dtype)
    assert e.shape == (7, 5) and e.flags.c_contiguous and e.flags.writeable
    assert client.is_gemmd_array(e)
    z = client.zeros((3, 4, 2), dtype)
    assert z.shape == (3, 4, 2) and not np.abs(z.astype(np.complex128)).any()
    src = np.arange(35).reshape(7, 5)
    a = client.asarray(src, dtype)
    assert np.array_equal(a.astype(np.complex128), src.astype(np.complex128))
    assert client.is_gemmd_array(a)
    assert client.asarray(a) is a  # already this client's memory


def test_zeros_on_a_reused_buffer(client: gemmd.Client) -> None:
    x = client.empty((256, 256))
    addr = x.__array_interface__["data"][0]
    x[...] = 7
    del x
    z = client.zeros((256, 256))
    assert z.__array_interface__["data"][0] == addr  # the pooled buffer
    assert not z.any()


def test_odd_shapes(client: gemmd.Client) -> None:
    assert client.empty(5).shape == (5,)
    assert client.empty(()).shape == ()
    e = client.empty((0, 3))
    assert e.shape == (0, 3)  # no elements: a plain array
    with pytest.raises(ValueError):
        client.empty((-1, 2))
    with pytest.raises(TypeError):
        client.empty((2, 2), object)


def test_base_keeps_the_buffer(client: gemmd.Client) -> None:
    x = client.asarray(np.arange(64, dtype=np.float32).reshape(8, 8))
    b = x.base
    while isinstance(b, np.ndarray):
        b = b.base
    assert type(b).__name__ == "_Lease"
    v = x[2:5, 1::2].T
    del x
    gc.collect()
    assert client.is_gemmd_array(v)
    assert np.array_equal(v, np.arange(64, dtype=np.float32)
                          .reshape(8, 8)[2:5, 1::2].T)
    y = client.empty((8, 8))  # must not get v's buffer
    y[...] = -1
    assert v.min() >= 0


def test_released_when_the_last_array_goes(make_daemon: Any) -> None:
    d = make_daemon()
    with gemmd.connect(d.url, pool_bytes=0) as c:  # no pool: release now
        assert registered(c) == 0
        x = c.empty((100, 100))
        v = x[10:20]
        assert registered(c) == 1
        del x
        assert registered(c) == 1  # v keeps it
        del v
        assert registered(c) == 0
        a = c.matmul(np.ones((4, 4), np.float32), np.ones((4, 4), np.float32))
        assert registered(c) == 1  # the result; the staging went back
        del a
        assert registered(c) == 0


def test_pool_reuse_and_trim(make_daemon: Any) -> None:
    d = make_daemon()
    with gemmd.connect(d.url) as c:
        a = np.ones((64, 64), np.float32)
        for _ in range(5):
            r = c.matmul(a, a)
        n = registered(c)
        assert n <= 4, "%d buffers for a loop of one matmul" % n
        del r
        c.trim()
        assert registered(c) == 0


def test_arrays_outlive_close(make_daemon: Any) -> None:
    d = make_daemon()
    c = gemmd.connect(d.url)
    x = c.asarray(np.eye(16, dtype=np.float32))
    y = c.matmul(x, x)
    c.close()
    c.close()  # twice: nothing
    assert c.closed
    assert np.array_equal(y, np.eye(16))  # still mapped, readable
    x[0, 0] = 5  # and writable
    with pytest.raises(gemmd.ClientClosed) as ei:
        c.matmul(x, x)
    assert isinstance(ei.value, gemmd.ConnectionClosed)
    with pytest.raises(gemmd.ClientClosed):
        c.empty(3)
    with gemmd.connect(d.url) as c2:  # another client copies them
        r = c2.matmul(x, y)
        assert r[0, 0] == 5
    with gemmd.connect(d.url) as c3:  # gemmd drops them with the connection
        assert eventually(lambda: registered(c3) == 0), registered(c3)
    del x, y
    gc.collect()


def test_arrays_outlive_the_client_object(daemon: Any) -> None:
    c = gemmd.connect(daemon.url)
    x = c.asarray(np.full((32, 32), 2.0, np.float32))
    del c
    gc.collect()
    assert x.sum() == 2 * 32 * 32
    del x
    gc.collect()


def test_pool_byte_limit_and_reuse_across_dtypes(client: gemmd.Client) -> None:
    rng = np.random.default_rng(3)
    a = rand(rng, (200, 100))
    b = rand(rng, (100, 50))
    ref = a.astype(np.float64) @ b.astype(np.float64)
    for dt in ("float32", "bfloat16", "float16", "float32"):
        d = client.matmul(a, b, dtype=dt, out_dtype="float32")
        assert rel_err(d, ref) < 2e-2
