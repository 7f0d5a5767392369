"""Client.load and gemmd.load: .npy files read straight into gemmd memory
(the same array np.load gives, with no staging copy when a GEMM uses it),
conversions while reading, the header versions and orders numpy writes,
files split over the copy threads, and the errors for files that are not
.npy arrays of numbers."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any, List

import ml_dtypes
import numpy as np
import pytest

import gemmd
from gemmd import _copy, _npyload
from conftest import rand, rel_err


def save(path: Path, arr: np.ndarray, version: Any = None) -> str:
    with open(path, "wb") as f:
        np.lib.format.write_array(f, arr, version=version)
    return str(path)


class CopyCounter:
    """Counts the staging copies matmul makes (gemmd._copy.copy)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.calls: List[tuple] = []
        real = _copy.copy

        def counting(dst: np.ndarray, src: Any) -> None:
            self.calls.append((dst.shape, np.shape(src)))
            real(dst, src)

        monkeypatch.setattr(_copy, "copy", counting)


@pytest.mark.parametrize("dtype", [np.float32, np.float16, np.float64,
                                   np.complex64, np.int8, ml_dtypes.bfloat16])
def test_same_array_as_np_load(client: gemmd.Client, tmp_path: Path,
                               dtype: Any) -> None:
    rng = np.random.default_rng(5)
    src = rand(rng, (37, 29), dtype)
    f = save(tmp_path / "x.npy", src)
    got = client.load(f)
    assert client.is_gemmd_array(got)
    assert got.dtype == np.dtype(dtype) and got.shape == src.shape
    assert got.flags.c_contiguous
    assert np.array_equal(got.view(np.uint8), src.view(np.uint8))


def test_gemm_on_loaded_arrays_copies_nothing(
        client: gemmd.Client, tmp_path: Path,
        monkeypatch: pytest.MonkeyPatch) -> None:
    rng = np.random.default_rng(6)
    a, b = rand(rng, (70, 40)), rand(rng, (40, 50))
    fa, fb = save(tmp_path / "a.npy", a), save(tmp_path / "b.npy", b)
    # B stored in Fortran order: loaded as a transposed view
    fbt = save(tmp_path / "bt.npy", np.asfortranarray(b))
    ref = a.astype(np.float64) @ b.astype(np.float64)
    la, lb, lbt = client.load(fa), client.load(fb), client.load(fbt)
    assert lbt.flags.f_contiguous and not lbt.flags.c_contiguous
    assert np.array_equal(lbt, b) and client.is_gemmd_array(lbt)
    counter = CopyCounter(monkeypatch)
    for x in (lb, lbt):
        d = client.matmul(la, x)
        assert rel_err(d, ref) < 1e-5
    assert counter.calls == [], counter.calls


@pytest.mark.parametrize("src_dt,dt", [
    (np.float32, "bfloat16"), (np.float64, "float32"),
    (np.float32, np.float16), (">f4", None), (">f8", "float32")])
@pytest.mark.parametrize("shape", [(33, 17), (1100, 1000)])
def test_converts_while_reading(client: gemmd.Client, tmp_path: Path,
                                monkeypatch: pytest.MonkeyPatch, src_dt: Any,
                                dt: Any, shape: Any) -> None:
    # small pieces: the large shape takes several per thread
    monkeypatch.setattr(_npyload, "READ_CHUNK", 64 << 10)
    rng = np.random.default_rng(7)
    src = rand(rng, shape, np.float64).astype(src_dt)
    f = save(tmp_path / "x.npy", src)
    got = client.load(f, dtype=dt)
    want_dt = (np.dtype(src_dt).newbyteorder("=") if dt is None else
               np.dtype(ml_dtypes.bfloat16) if dt == "bfloat16" else
               np.dtype(dt))
    assert got.dtype == want_dt and got.dtype.isnative
    assert client.is_gemmd_array(got)
    want = src.astype(want_dt)
    assert np.array_equal(got.view(np.uint8), want.view(np.uint8))


def test_large_file_split_over_threads(client: gemmd.Client,
                                       tmp_path: Path) -> None:
    """A file of several PARALLEL_BYTES is read by rows on the copy
    threads; rows that do not divide evenly end up in the last part."""
    rows = 4 * _copy.PARALLEL_BYTES // (4 * 1001) + 3
    src = np.arange(rows * 1001, dtype=np.float32).reshape(rows, 1001)
    f = save(tmp_path / "big.npy", src)
    got = client.load(f)
    assert np.array_equal(got, src)
    got = client.load(f, dtype="float64")
    assert np.array_equal(got, src)


@pytest.mark.parametrize("version", [(1, 0), (2, 0), (3, 0)])
def test_header_versions(client: gemmd.Client, tmp_path: Path,
                         version: Any) -> None:
    src = np.arange(12, dtype=np.float32).reshape(3, 4)
    got = client.load(save(tmp_path / "v.npy", src, version))
    assert np.array_equal(got, src)


@pytest.mark.parametrize("shape", [(5,), (), (2, 3, 4), (0, 5)])
def test_other_shapes(client: gemmd.Client, tmp_path: Path,
                      shape: Any) -> None:
    src = np.arange(int(np.prod(shape)), dtype=np.float32).reshape(shape)
    got = client.load(save(tmp_path / "s.npy", src))
    assert got.shape == src.shape and np.array_equal(got, src)
    fsrc = np.asfortranarray(src)  # at least 1-d
    got = client.load(save(tmp_path / "f.npy", fsrc))
    assert got.shape == fsrc.shape and np.array_equal(got, fsrc)


def test_errors(client: gemmd.Client, tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError):
        client.load(tmp_path / "missing.npy")
    (tmp_path / "text.npy").write_text("not numpy\n")
    with pytest.raises(ValueError, match="not a .npy file"):
        client.load(tmp_path / "text.npy")
    f = save(tmp_path / "obj.npy", np.array([1, "x"], dtype=object))
    with pytest.raises(ValueError, match="Python objects"):
        client.load(f)
    f = save(tmp_path / "cut.npy", np.ones((64, 64), np.float32))
    with open(f, "r+b") as fh:
        fh.truncate(os.path.getsize(f) - 100)
    with pytest.raises(ValueError, match="truncated"):
        client.load(f)


def test_module_level_load(daemon: Any, tmp_path: Path,
                           monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GEMM_URL", daemon.url)
    monkeypatch.setattr(gemmd, "_default", None)
    src = np.arange(6, dtype=np.float32).reshape(2, 3)
    got = gemmd.load(save(tmp_path / "m.npy", src))
    assert np.array_equal(got, src)
    assert gemmd.default_client().is_gemmd_array(got)
    gemmd.default_client().close()


def test_first_matmul_imports_only_its_own_path(daemon: Any,
                                                tmp_path: Path) -> None:
    """A fresh process's connect and plain matmul leave the modules of
    stacks, grouped requests, batches and level-3 routines unloaded."""
    code = ("import sys, numpy as np, gemmd\n"
            "c = gemmd.connect(sys.argv[1])\n"
            "a = np.ones((8, 8), np.float32)\n"
            "assert (c.matmul(a, a) == 8).all()\n"
            "print(sorted(m for m in ('gemmd._stackcall', 'gemmd._grouped', "
            "'gemmd._batch', 'gemmd._blas3', 'concurrent.futures') "
            "if m in sys.modules))\n")
    r = subprocess.run([sys.executable, "-c", code, daemon.url],
                       capture_output=True, text=True, cwd=str(tmp_path),
                       timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "[]", r.stdout
