"""Futures (many in flight, errors through the future), 16 threads on one
client, and fork: a child gets its own connection on first use, with the
parent's arrays usable there, also while the parent's threads are busy."""
from __future__ import annotations

import json
import multiprocessing
import os
import threading
from typing import Any, List

import numpy as np
import pytest

import gemmd
from conftest import f64, rand, rel_err, tolerance
from test_matmul import npdt


def test_many_futures(client: gemmd.Client) -> None:
    rng = np.random.default_rng(1)
    jobs = []
    for i in range(64):
        m, n, k = (int(x) for x in rng.integers(1, 90, 3))
        dt = ("bfloat16", "float16", "float32")[i % 3]
        a = rand(rng, (m, k), npdt(dt))
        b = rand(rng, (k, n), npdt(dt))
        jobs.append((client.submit(a, b, alpha=0.5 + i, out_dtype="float32"),
                     a, b, 0.5 + i, dt))
    for fut, a, b, alpha, dt in jobs:
        d = fut.result(timeout=120)
        assert d.dtype == np.float32
        assert rel_err(d, alpha * (f64(a) @ f64(b))) <= tolerance(dt)
    assert all(f.done() for f, *_ in jobs)


def test_future_with_out_and_errors(client: gemmd.Client) -> None:
    rng = np.random.default_rng(2)
    a = client.asarray(rand(rng, (30, 20)))
    b = client.asarray(rand(rng, (20, 10)))
    out = client.empty((30, 10))
    f = client.submit(a, b.T.T, out=out, c=np.ones((30, 10), np.float32),
                      beta=1.0)
    assert f.result(60) is out
    assert rel_err(out, f64(a) @ f64(b) + 1) < 1e-5
    plain_out = np.zeros((30, 10), np.float32)
    assert client.submit(a, b, out=plain_out).result(60) is plain_out
    assert rel_err(plain_out, f64(a) @ f64(b)) < 1e-5
    bad = client.submit(a, b, kernel="no-such-kernel")
    assert isinstance(bad.exception(60), gemmd.Unsupported)
    with pytest.raises(gemmd.Unsupported):
        bad.result()
    with pytest.raises(gemmd.ShapeError):  # caught before sending
        client.submit(a, a)
    assert not bad.cancel()


def _worker(client: gemmd.Client, seed: int, errors: List[str]) -> None:
    rng = np.random.default_rng(seed)
    try:
        for j in range(25):
            m, n, k = (int(x) for x in rng.integers(1, 70, 3))
            dt = ("bfloat16", "float16", "float32")[(seed + j) % 3]
            a = rand(rng, (m, k), npdt(dt))
            b = rand(rng, (k, n), npdt(dt))
            if j % 4 == 1:
                a = client.asarray(a)
            if j % 4 == 2:
                b = client.asarray(b.T.copy()).T
            if j % 5 == 0:
                d = client.submit(a, b, out_dtype="float32").result(120)
            else:
                d = client.matmul(a, b, out_dtype="float32")
            err = rel_err(d, f64(a) @ f64(b))
            if err > tolerance(dt):
                errors.append("thread %d call %d (%s %dx%dx%d): error %g" %
                              (seed, j, dt, m, n, k, err))
    except Exception as e:  # reported by the test
        errors.append("thread %d: %r" % (seed, e))


def test_16_threads_one_client(client: gemmd.Client) -> None:
    errors: List[str] = []
    threads = [threading.Thread(target=_worker, args=(client, i, errors))
               for i in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(300)
    assert not any(t.is_alive() for t in threads), "a thread hung"
    assert errors == []


def _child_check(client: gemmd.Client, ga: np.ndarray, w: int) -> dict:
    """In a forked child: matmuls on the inherited client (its own
    connection now), with the parent's gemmd arrays; returns a report."""
    b = np.eye(ga.shape[1], dtype=np.float32) * 2
    d1 = client.matmul(ga, b)
    d2 = client.submit(np.ones((3, 3), np.float32),
                       np.ones((3, 3), np.float32)).result(60)
    return {"ok1": bool(np.allclose(d1, 2 * ga)),
            "ok2": bool(np.array_equal(d2, np.full((3, 3), 3.0))),
            "pid": os.getpid(), "w": w,
            "lib": gemmd._capi.lib().how}  # type: ignore[attr-defined]


def _fork_run(fn: Any) -> dict:
    """Runs fn() in a forked child; its dict comes back through a pipe."""
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        code = 0
        try:
            out = fn()
        except BaseException as e:  # reported to the parent
            out, code = {"error": repr(e)}, 1
        os.write(w, json.dumps(out).encode())
        os._exit(code)
    os.close(w)
    data = b""
    while True:
        chunk = os.read(r, 65536)
        if not chunk:
            break
        data += chunk
    os.close(r)
    _, st = os.waitpid(pid, 0)
    out = json.loads(data.decode() or "{}")
    assert os.WIFEXITED(st) and os.WEXITSTATUS(st) == 0, (st, out)
    return out


def test_fork_child_gets_its_own_connection(client: gemmd.Client) -> None:
    ga = client.asarray(np.arange(12, dtype=np.float32).reshape(3, 4))
    assert client.matmul(ga, np.eye(4, dtype=np.float32))[2, 3] == 11

    def child() -> dict:
        rep = _child_check(client, ga, 0)
        rep["grandchild"] = _fork_run(lambda: _child_check(client, ga, 1))
        return rep

    rep = _fork_run(child)
    assert rep["ok1"] and rep["ok2"], rep
    assert rep["lib"] == "dlmopen", rep  # its own copy of libgemmclient
    assert rep["grandchild"]["ok1"] and rep["grandchild"]["ok2"], rep
    # the parent's connection is untouched
    assert client.matmul(ga, np.eye(4, dtype=np.float32))[2, 3] == 11


def test_fork_while_threads_are_busy(client: gemmd.Client) -> None:
    stop = threading.Event()
    errors: List[str] = []

    def busy(seed: int) -> None:
        rng = np.random.default_rng(seed)
        while not stop.is_set():
            a = rand(rng, (48, 40))
            b = rand(rng, (40, 32))
            if rel_err(client.matmul(a, b), f64(a) @ f64(b)) > 1e-5:
                errors.append("busy thread %d: wrong result" % seed)
    threads = [threading.Thread(target=busy, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    try:
        for i in range(4):
            ga = client.asarray(np.full((8, 8), float(i), np.float32))
            rep = _fork_run(lambda: _child_check(client, ga, i))
            assert rep["ok1"] and rep["ok2"], rep
    finally:
        stop.set()
        for t in threads:
            t.join(60)
    assert errors == []


def _mp_task(args: Any) -> float:
    url, seed = args
    rng = np.random.default_rng(seed)
    a, b = rand(rng, (20, 30)), rand(rng, (30, 10))
    with gemmd.connect(url) as c:
        d = c.matmul(a, b)
    return rel_err(d, f64(a) @ f64(b))


def test_multiprocessing_fork_pool(client: gemmd.Client, daemon: Any) -> None:
    client.ping()  # nng is initialised in this process
    ctx = multiprocessing.get_context("fork")
    with ctx.Pool(3) as pool:
        errs = pool.map(_mp_task, [(daemon.url, s) for s in range(6)])
    assert max(errs) < 1e-5
