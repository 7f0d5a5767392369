"""gemmd under Dask (gemmd.dask): a LocalCluster of several worker
processes, all sharing one gemmd (of several devices: --devices 3 on the
CPU backend, two device objects on GPU 0 on cuda), computes dask.array
products equal to numpy's; every output block is one GEMM the daemon
served. Skipped when python3-dask/python3-distributed are missing (failed
when $GEMM_REQUIRE says the host has them)."""
from __future__ import annotations

import numpy as np
import pytest
from conftest import BACKEND, Daemon, rand, rel_err, require

import gemmd


def _need_dask() -> None:
    try:
        import dask.array  # noqa: F401
        import distributed  # noqa: F401
    except ImportError as e:
        assert not require("dask"), ("dask is missing (%s) and GEMM_REQUIRE "
                                     "says this host has it" % e)
        pytest.skip("skipped: no dask/distributed (apt install python3-dask "
                    "python3-distributed)")


@pytest.fixture(scope="module")
def cluster():  # type: ignore[no-untyped-def]
    _need_dask()
    from distributed import Client, LocalCluster

    with LocalCluster(n_workers=3, threads_per_worker=1, processes=True,
                      dashboard_address=None) as lc, Client(lc) as dc:
        yield dc


@pytest.fixture(scope="module")
def shared_daemon():  # type: ignore[no-untyped-def]
    devs = "0,0" if BACKEND == "cuda" else "3"
    d = Daemon(["--devices", devs])
    yield d
    d.stop_checked()


@pytest.mark.parametrize("dtype,out_dtype,tol", [
    (np.float32, None, 1e-5),
    (np.float64, None, 1e-12),
    ("bfloat16", np.float32, 1e-2),
])
def test_dask_matmul_equals_numpy(cluster, shared_daemon: Daemon,  # type: ignore[no-untyped-def]
                                  dtype: object, out_dtype: object,
                                  tol: float) -> None:
    import dask.array as da

    from gemmd.dask import matmul

    rng = np.random.default_rng(5)
    import ml_dtypes  # noqa: F401  (bfloat16 as a numpy dtype)
    a = rand(rng, (301, 203), np.float32).astype(dtype)
    b = rand(rng, (203, 157), np.float32).astype(dtype)
    A = da.from_array(a, chunks=(101, 70))
    B = da.from_array(b, chunks=(60, 80))
    with gemmd.connect(shared_daemon.url) as c:
        before = c.status()["gemms_served"]
        C = matmul(A, B, url=shared_daemon.url, out_dtype=out_dtype)
        got = C.compute()
        served = c.status()["gemms_served"] - before
        devices = c.status()["devices"]
    ref = a.astype(np.float64) @ b.astype(np.float64)
    assert got.shape == ref.shape
    assert rel_err(got, ref) <= tol, rel_err(got, ref)
    blocks = len(C.chunks[0]) * len(C.chunks[1])
    assert served == blocks, (served, blocks)
    assert len(devices) == (2 if BACKEND == "cuda" else 3)


def test_workers_are_separate_processes_on_one_daemon(
        cluster, shared_daemon: Daemon) -> None:  # type: ignore[no-untyped-def]
    import os

    url = shared_daemon.url  # the closure is pickled: a string only

    def run(seed: int) -> tuple:
        from gemmd.dask import block_matmul

        rng = np.random.default_rng(seed)
        x = rng.random((64, 48), dtype=np.float32)
        y = rng.random((48, 32), dtype=np.float32)
        d = block_matmul(x, y, url=url)
        return os.getpid(), float(np.abs(d - x @ y).max())

    futures = [cluster.submit(run, s, pure=False) for s in range(12)]
    results = cluster.gather(futures)
    pids = {p for p, _ in results}
    assert len(pids) >= 2, "every block ran in one worker process"
    assert max(err for _, err in results) < 1e-4
    assert os.getpid() not in pids
