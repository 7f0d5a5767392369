"""A 2-D matmul of copied operands sent before they are copied, and filled
by parts while gemmd works (gemmd/_fill.py; proto's Fill on a
GemmRequest). The size thresholds are lowered here (MIN_BYTES and
PART_BYTES 0) so that small problems take the path on the CPU backend,
whose gemmd checks the order of the fill (GEMMD_TEST_FILL_ORDER: a part
written after the counter passed it fails the request); Fill.run is
wrapped to count the fills. Every result is checked against an fp64 numpy
reference.
"""
from __future__ import annotations

from typing import Any, Iterator, List

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import gemmd
from conftest import Daemon, bound_err, f64, operand, rel_err, tolerance
from gemmd import _fill
from test_matmul import npdt

SETTINGS = settings(max_examples=40, deadline=None, database=None,
                    derandomize=True,
                    suppress_health_check=[HealthCheck.function_scoped_fixture,
                                           HealthCheck.too_slow])
DTYPES = ["bfloat16", "float32", "float64", "complex64"]
LAYOUTS = ["c", "f", "t-view", "strided", "gemmd"]


@pytest.fixture(scope="module")
def fill_daemon() -> Iterator[Daemon]:
    d = Daemon(env={"GEMMD_TEST_FILL_ORDER": "1"})
    yield d
    d.stop_checked()


class Fills:
    """Lowers the thresholds and records each fill's parts."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.parts: List[int] = []
        monkeypatch.setattr(_fill, "MIN_BYTES", 0)
        monkeypatch.setattr(_fill, "PART_BYTES", 0)
        run = _fill.Fill.run

        def counted(f: Any) -> None:
            self.parts.append(f.parts)
            run(f)

        monkeypatch.setattr(_fill.Fill, "run", counted)


@pytest.fixture
def fills(monkeypatch: pytest.MonkeyPatch) -> Fills:
    return Fills(monkeypatch)


@pytest.fixture
def fclient(fill_daemon: Daemon) -> Iterator[gemmd.Client]:
    with gemmd.connect(fill_daemon.url, timeout=60.0) as c:
        yield c


@given(m=st.integers(1, 90), n=st.integers(1, 70), k=st.integers(1, 80),
       dt=st.sampled_from(DTYPES), la=st.sampled_from(LAYOUTS),
       lb=st.sampled_from(LAYOUTS), seed=st.integers(0, 2**31))
@SETTINGS
def test_filled_matches_numpy(fclient: gemmd.Client, fills: Fills, m: int,
                              n: int, k: int, dt: str, la: str, lb: str,
                              seed: int) -> None:
    rng = np.random.default_rng(seed)
    a = operand(fclient, rng, m, k, npdt(dt), la)
    b = operand(fclient, rng, k, n, npdt(dt), lb)
    before = len(fills.parts)
    got = fclient.matmul(a, b)
    # each element against its own rounding scale: a one-element result
    # that cancels to near 0 has no norm-wise error to speak of
    assert bound_err(got, a, b) <= tolerance(dt), (m, n, k, dt, la, lb)
    copied = la != "gemmd" or lb != "gemmd"
    assert len(fills.parts) - before == (1 if copied else 0)
    if copied:
        assert fills.parts[-1] % 2 == 0
        assert 2 <= fills.parts[-1] <= _fill.FILL_PARTS


def test_parts_are_whole_numbers_of_part_bytes(fclient: gemmd.Client,
                                               fills: Fills,
                                               monkeypatch: pytest.MonkeyPatch
                                               ) -> None:
    """Parts of PART_BYTES or more (two at least, FILL_PARTS at most),
    MIN_BYTES the floor."""
    monkeypatch.setattr(_fill, "FILL_PARTS", 16)
    rng = np.random.default_rng(7)
    a = rng.standard_normal((256, 512)).astype(np.float32)
    b = rng.standard_normal((512, 128)).astype(np.float32)
    monkeypatch.setattr(_fill, "PART_BYTES", (a.nbytes + b.nbytes) // 6)
    np.testing.assert_allclose(fclient.matmul(a, b), a @ b, rtol=1e-4,
                               atol=1e-3)
    assert fills.parts == [6]
    monkeypatch.setattr(_fill, "MIN_BYTES", a.nbytes + b.nbytes + 1)
    fclient.matmul(a, b)
    assert fills.parts == [6]  # below the floor: copied first, not filled


def test_without_the_library_symbol_copies_first(fclient: gemmd.Client,
                                                 fills: Fills,
                                                 monkeypatch: pytest.MonkeyPatch
                                                 ) -> None:
    """An older libgemmclient (no gemm_submit_overlapped): copied whole
    first, the same result."""
    rng = np.random.default_rng(3)
    a = rng.standard_normal((40, 30))
    b = rng.standard_normal((30, 20))
    conn = fclient._live()  # type: ignore[attr-defined]
    monkeypatch.setattr(conn.lib, "gemm_submit_overlapped", None)
    np.testing.assert_allclose(fclient.matmul(a, b), a @ b, rtol=1e-12)
    assert fills.parts == []


@pytest.mark.parametrize("parts", [2, 16])
def test_large_enough_for_the_pipeline(fclient: gemmd.Client, fills: Fills,
                                       monkeypatch: pytest.MonkeyPatch,
                                       parts: int) -> None:
    """On the cuda backend a GEMM this large runs in blocks whose copies
    of B and A wait on the GPU for their parts: with 2 parts each cut has
    one, with 16 eight."""
    monkeypatch.setattr(_fill, "FILL_PARTS", 16)
    rng = np.random.default_rng(11)
    a = rng.standard_normal((2048, 1024)).astype(np.float32)
    b = rng.standard_normal((1024, 2048)).astype(np.float32)
    monkeypatch.setattr(_fill, "PART_BYTES", (a.nbytes + b.nbytes) // parts)
    got = fclient.matmul(a, b)
    assert fills.parts == [parts]
    assert rel_err(got, f64(a) @ f64(b)) <= tolerance("float32")
