"""Every error class, provoked for real: mistakes caught before sending
(numpy's wording), the daemon's refusals (each with its code and message),
a missing daemon, a daemon killed or restarted under a client, timeouts
(the late result never lands in a reused buffer), shutdown."""
from __future__ import annotations

import os
import pickle
import signal
from typing import Any

import numpy as np
import pytest

import gemmd
from gemmd._conn import _buffer_of
from conftest import BACKEND, Hold, eventually, f64, rand, rel_err


def test_every_code_has_a_class() -> None:
    want = {1: gemmd.InvalidArgument, 2: gemmd.OutOfMemory,
            3: gemmd.DaemonNotRunning, 4: gemmd.Timeout,
            5: gemmd.ConnectionClosed, 8: gemmd.Limit, 9: gemmd.Busy,
            10: gemmd.ShuttingDown, 11: gemmd.InvalidArgument,
            13: gemmd.InvalidArgument, 14: gemmd.ShapeError,
            15: gemmd.InvalidArgument, 16: gemmd.InvalidArgument,
            17: gemmd.DTypeError, 20: gemmd.Limit, 22: gemmd.Unsupported,
            25: gemmd.OutOfMemory, 27: gemmd.Abandoned,
            12: gemmd.PermissionDenied, 28: gemmd.DaemonNotAnswering}
    for code, (name, msg, _) in gemmd.ERRORS.items():
        e = gemmd.error_for(code, "")
        assert isinstance(e, gemmd.GemmError) and e.code == code
        assert e.name == name and str(e) == msg
        assert type(e) is want.get(code, gemmd.GemmError), name
        e2 = pickle.loads(pickle.dumps(gemmd.error_for(code, "why")))
        assert type(e2) is type(e) and e2.code == code and e2.message == "why"
    assert type(gemmd.error_for(999, "new")) is gemmd.GemmError
    assert gemmd.CODES["BUSY"] == 9
    # the built-in classes a numpy user catches
    assert issubclass(gemmd.ShapeError, ValueError)
    assert issubclass(gemmd.DTypeError, TypeError)
    assert issubclass(gemmd.Timeout, TimeoutError)
    assert issubclass(gemmd.DaemonNotRunning, ConnectionError)
    assert issubclass(gemmd.OutOfMemory, MemoryError)
    assert issubclass(gemmd.ClientClosed, gemmd.ConnectionClosed)
    assert issubclass(gemmd.Abandoned, gemmd.Timeout)


def test_daemon_not_running(tmp_path: Any) -> None:
    url = "ipc://%s/gemmd.sock" % tmp_path
    with pytest.raises(gemmd.DaemonNotRunning) as ei:
        gemmd.connect(url)
    assert ei.value.code == 3
    assert "no socket" in ei.value.message and str(tmp_path) in ei.value.message
    with pytest.raises(ConnectionError):
        gemmd.connect(url)
    with pytest.raises(gemmd.InvalidArgument):
        gemmd.connect("bogus://x")


def test_shape_errors_before_sending(client: gemmd.Client) -> None:
    a = np.ones((3, 4), np.float32)
    cases = [
        ((a, a), "Input operand 1 has a mismatch in its core dimension 0"),
        ((np.float32(1), a), "Input operand 0 does not have enough dim"),
        ((np.ones((2, 3, 4), np.float32), np.ones((3, 4, 5), np.float32)),
         "could not be broadcast together"),
    ]
    for args, words in cases:
        with pytest.raises(gemmd.ShapeError, match=words) as ei:
            client.matmul(*args)
        assert ei.value.code == 14
        with pytest.raises(ValueError):  # numpy raises ValueError too
            client.matmul(*args)
    with pytest.raises(ValueError) as np_err:
        np.matmul(a, a)  # the same words as numpy's
    assert "mismatch in its core dimension 0" in str(np_err.value)
    with pytest.raises(gemmd.ShapeError, match="Output operand 0"):
        client.matmul(a, a.T, out=np.empty((3, 4), np.float32))
    with pytest.raises(gemmd.ShapeError, match="broadcast"):
        client.matmul(a, a.T, c=np.ones((4, 4)), beta=1.0)


def test_shape_refused_by_gemmd(make_daemon: Any) -> None:
    d = make_daemon("--max-dim", "64")
    with gemmd.connect(d.url) as c:
        with pytest.raises(gemmd.ShapeError) as ei:
            c.matmul(np.ones((65, 8), np.float32), np.ones((8, 8), np.float32))
        assert "64" in ei.value.message
        c.matmul(np.ones((64, 8), np.float32), np.ones((8, 8), np.float32))


def test_dtype_errors(client: gemmd.Client) -> None:
    i32 = np.ones((4, 4), np.int32)
    f32 = np.ones((4, 4), np.float32)
    with pytest.raises(gemmd.DTypeError, match="int32") as ei:
        client.matmul(i32, i32)
    assert ei.value.code == 17 and isinstance(ei.value, TypeError)
    with pytest.raises(gemmd.DTypeError, match="int64"):
        client.matmul(np.ones((4, 4), np.int64), np.ones((4, 4), np.int64))
    with pytest.raises(gemmd.DTypeError, match="bfloat16"):
        client.matmul(f32, f32, dtype="bfloat16", out_dtype="float64")
    with pytest.raises(gemmd.DTypeError, match="cannot write a float16"):
        client.matmul(f32, f32, out_dtype="float16")
    with pytest.raises(gemmd.DTypeError, match="out has dtype"):
        client.matmul(f32, f32, out=np.empty((4, 4), np.float16),
                      out_dtype="float32")
    with pytest.raises(gemmd.DTypeError, match="not understood"):
        client.matmul(f32, f32, dtype="no-such-type")
    with pytest.raises(gemmd.DTypeError):
        client.matmul(f32, f32, alpha=1j)
    with pytest.raises(TypeError):
        client.matmul(f32, f32, out=[[0.0] * 4] * 4)
    assert client.matmul(i32, i32, dtype="float32")[0, 0] == 4


def test_invalid_arguments(client: gemmd.Client) -> None:
    f32 = np.ones((4, 4), np.float32)
    bf = client.asarray(f32, "bfloat16")
    with pytest.raises(gemmd.InvalidArgument, match="applies to float32"):
        client.matmul(bf, bf, precision="tf32")
    with pytest.raises(gemmd.InvalidArgument, match="not one of"):
        client.matmul(f32, f32, precision="fp8")
    with pytest.raises(gemmd.InvalidArgument, match="longer than 31"):
        client.matmul(f32, f32, kernel="k" * 32)
    with pytest.raises(gemmd.InvalidArgument, match="needs c="):
        client.matmul(f32, f32, beta=1.0)
    with pytest.raises(gemmd.InvalidArgument, match="read-only"):
        ro = np.zeros((4, 4), np.float32)
        ro.flags.writeable = False
        client.matmul(f32, f32, out=ro)
    # refused by gemmd itself (a kernel name of the wrong form)
    with pytest.raises(gemmd.InvalidArgument) as ei:
        client.matmul(f32, f32, kernel="bad name!")
    assert ei.value.code == 1 and "kernel name" in ei.value.message
    with pytest.raises(gemmd.InvalidArgument):
        gemmd.connect(client.url, timeout=0)


def test_unsupported(client: gemmd.Client) -> None:
    with pytest.raises(gemmd.Unsupported) as ei:
        client.matmul(np.ones((4, 4), np.float32), np.ones((4, 4), np.float32),
                      kernel="no-such-kernel")
    assert ei.value.code == 22 and "no-such-kernel" in ei.value.message


def test_busy(make_daemon: Any) -> None:
    d = make_daemon("--threads", "1", "--max-queue", "2")
    with gemmd.connect(d.url) as c:
        (a, _), kw = _slow_gemm(c, 512 if BACKEND == "cpu" else 1024)
        futs = [c.submit(a, a, **kw) for _ in range(24)]
        busy = ok = 0
        for f in futs:
            e = f.exception(120)
            if e is None:
                ok += 1
                assert rel_err(f.result(), f64(a) @ f64(a)) < 1e-2
            else:
                assert isinstance(e, gemmd.Busy), repr(e)
                assert e.code == 9 and e.message
                busy += 1
        assert busy > 0 and ok > 0, (busy, ok)
        c.matmul(a, a)  # served again


def test_limit(make_daemon: Any) -> None:
    d = make_daemon("--client-buffers", "2")
    with gemmd.connect(d.url, pool_bytes=0) as c:
        x = c.empty(16)
        y = c.empty(16)
        with pytest.raises(gemmd.Limit) as ei:
            c.empty(16)
        assert ei.value.code == 20 and ei.value.message
        del x
        z = c.empty(16)  # a slot is free again
        del y, z
    d2 = make_daemon("--client-buffers", "3")
    with gemmd.connect(d2.url) as c:  # idle pooled buffers are given up
        keep = [c.matmul(np.ones((8, 8), np.float32),
                         np.ones((8, 8), np.float32))]
        for _ in range(6):
            keep.append(c.empty(1 << 20))
            keep.pop(0)
        with pytest.raises(gemmd.Limit):
            keep += [c.empty(16) for _ in range(4)]


def _slow_gemm(c: gemmd.Client, n: int = 0) -> tuple:
    """(a, b), kwargs of a GEMM that takes a while on this backend: fp32
    OpenBLAS on the cpu backend, the ladder's first rung on the GPU."""
    rng = np.random.default_rng(2)
    if BACKEND == "cpu":
        return (c.asarray(rand(rng, (n or 2048,) * 2)),) * 2, {}
    slow = [k["name"] for k in c.kernels() if k["ladder"] == 1]
    a = c.asarray(rand(rng, (n or 4096,) * 2), "bfloat16")
    return (a, a), {"kernel": slow[0]} if slow else {}


def _need_hold(d: Any) -> Hold:
    """d's test hold, or a skip saying why there is none."""
    if d.hold is None:
        pytest.skip("skipped: needs the CPU backend's test hold (the "
                    "test-hold kernel of gemmd_test); GEMM_TEST_BACKEND=%s, "
                    "GEMM_TEST_GEMMD=%s"
                    % (BACKEND, os.environ.get("GEMM_TEST_GEMMD")))
    return d.hold


def test_timeout_cancels_a_queued_gemm(make_daemon: Any) -> None:
    """A GEMM still queued when its timeout passes is cancelled: Timeout,
    and its output untouched. The GEMM ahead of it is held (the test hold)
    until the Timeout is in, whatever the host's speed."""
    d = make_daemon("--threads", "1", hold=True)
    hold = _need_hold(d)
    with gemmd.connect(d.url, timeout=120) as busy, \
            gemmd.connect(d.url, timeout=120) as c:
        a = busy.asarray(np.ones((64, 64), np.float32))
        x = c.asarray(np.ones((64, 64), np.float32))
        out = c.asarray(np.full((64, 64), 7.0, np.float32))
        held = busy.submit(a, a, kernel=Hold.KERNEL)
        hold.wait()  # running: whatever comes next queues behind it
        c.set_timeout(0.02)
        with pytest.raises(gemmd.Timeout) as ei:
            c.matmul(x, x, out=out)
        assert type(ei.value) is gemmd.Timeout and ei.value.code == 4
        assert isinstance(ei.value, TimeoutError)
        assert np.all(out == 7.0), "a cancelled GEMM wrote its output"
        hold.release()
        assert np.all(held.result(120) == 64)
        c.set_timeout(120)
        assert np.all(c.matmul(x, x, out=out) == 64)


def test_abandoned_output_is_never_reused(make_daemon: Any) -> None:
    """gemmd stopped (SIGSTOP) under a GEMM: no reply, no answer to the
    cancel, Abandoned. The result buffer it may still write later must
    not come back as anyone's buffer."""
    d = make_daemon()
    with gemmd.connect(d.url, timeout=120) as c:
        a = c.asarray(np.ones((256, 256), np.float32))
        r0 = c.matmul(a, a)  # its buffer goes back to the pool ...
        buf0 = _buffer_of(r0)
        lib = c._conn.lib
        id0 = lib.gemm_buffer_id(buf0.ptr)
        del r0
        assert buf0 in c._conn.pool
        os.kill(d.proc.pid, signal.SIGSTOP)
        try:
            c.set_timeout(0.05)
            with pytest.raises(gemmd.Abandoned) as ei:
                c.matmul(a, a)  # ... and is taken again here
            assert ei.value.code == 27 and isinstance(ei.value, gemmd.Timeout)
        finally:
            os.kill(d.proc.pid, signal.SIGCONT)
        c.set_timeout(120)
        assert buf0.tainted and buf0 not in c._conn.pool
        r = c.matmul(a, a)
        assert _buffer_of(r) is not buf0
        assert lib.gemm_buffer_id(_buffer_of(r).ptr) != id0
        assert np.all(r == 256)


def test_shutting_down(make_daemon: Any) -> None:
    """Work accepted before SIGTERM completes; a request after it is
    refused. The accepted GEMMs wait behind a held one until gemmd's log
    says it drains."""
    d = make_daemon("--threads", "1", hold=True)
    hold = _need_hold(d)
    with gemmd.connect(d.url, timeout=120) as c:
        a = b = c.asarray(np.ones((64, 64), np.float32))
        x, z = c.zeros((4, 4)), c.zeros((4, 4))  # no new buffer needed
        futs = [c.submit(a, b, kernel=Hold.KERNEL)]
        hold.wait()
        futs += [c.submit(a, b) for _ in range(3)]
        assert eventually(lambda: c.status()["queue_depth"] >= 4), \
            "the GEMMs never queued"
        d.proc.send_signal(signal.SIGTERM)
        assert d.log_has("SIGTERM: finishing"), "gemmd did not drain"
        with pytest.raises((gemmd.ShuttingDown, gemmd.ConnectionClosed)) as ei:
            c.matmul(x, x, out=z)
        assert type(ei.value) is gemmd.ShuttingDown, (
            "gemmd was gone before the late request: %r" % ei.value)
        assert ei.value.code == 10
        hold.release()
        for f in futs:  # accepted work still completes
            assert f.result(120).shape == (a.shape[0], b.shape[1])
    assert d.proc.wait(60) == 0


def test_out_of_memory(make_daemon: Any) -> None:
    if BACKEND != "cuda":
        pytest.skip("skipped: no CUDA device (device memory caps need the "
                    "cuda backend; GEMM_TEST_BACKEND=%s)" % BACKEND)
    d = make_daemon("--max-device-bytes", str(1 << 20))
    with gemmd.connect(d.url) as c:
        with pytest.raises(gemmd.OutOfMemory) as ei:
            c.upload(np.ones((1024, 1024), np.float32))
        assert isinstance(ei.value, MemoryError) and ei.value.message


def test_daemon_killed_under_a_request(make_daemon: Any) -> None:
    """The GEMM is still in the daemon when it dies: held by the test hold
    on the cpu backend, a slow one elsewhere."""
    d = make_daemon(hold=True)
    with gemmd.connect(d.url, timeout=120) as c:
        if d.hold is not None:
            a = b = c.asarray(np.ones((64, 64), np.float32))
            fut = c.submit(a, b, kernel=Hold.KERNEL)
            d.hold.wait()
        else:
            (a, b), kw = _slow_gemm(c)
            fut = c.submit(a, b, **kw)
            assert eventually(lambda: c.status()["queue_depth"] >= 1)
        d.kill()
        e = fut.exception(60)
        assert isinstance(e, gemmd.ConnectionClosed) and e.code == 5, repr(e)
        with pytest.raises(gemmd.DaemonNotRunning):
            c.ping()  # reconnecting finds nobody


def test_daemon_restarting_under_a_client(make_daemon: Any) -> None:
    d = make_daemon()
    rng = np.random.default_rng(3)
    c = gemmd.connect(d.url)
    x = c.asarray(rand(rng, (40, 30)))
    y = rand(rng, (30, 20))
    t = c.upload(y)
    r = c.matmul(x, t)
    ref = f64(x) @ f64(y)
    assert rel_err(r, ref) < 1e-5
    assert d.stop() == 0
    d.start()  # a new gemmd on the same socket
    got = None
    for _ in range(2):  # the first call may learn of the restart
        try:
            got = c.matmul(x, y)
            break
        except gemmd.ConnectionClosed:
            continue
    assert got is not None and rel_err(got, ref) < 1e-5
    assert rel_err(r, ref) < 1e-5  # arrays of the old connection: intact
    assert not c.is_gemmd_array(x)  # ... and copied from now on
    with pytest.raises(gemmd.ConnectionClosed, match="upload it again"):
        c.matmul(x, t)
    t.free()  # nothing to do: gone with the old connection
    assert c.ping()["backend"] == BACKEND
    t2 = c.upload(y)
    assert rel_err(c.matmul(x, t2), ref) < 1e-5
    c.close()


def test_buffer_cap_names_the_fix(make_daemon: Any) -> None:
    """Results kept alive past --client-buffers: Limit, and the message
    says what holds the buffers and the three ways out; freeing results
    lets the next call through."""
    d = make_daemon("--client-buffers", "8")
    with gemmd.connect(d.url, timeout=60) as c:
        a = np.ones((16, 16), np.float32)
        kept = []
        with pytest.raises(gemmd.Limit) as ei:
            for _ in range(16):
                kept.append(c.matmul(a, a))
        msg = str(ei.value)
        assert "8 buffers" in msg and "--client-buffers" in msg
        assert "out=" in msg
        assert all(np.all(r == 16) for r in kept)
        del kept
        c.trim()
        assert np.all(c.matmul(a, a) == 16)
