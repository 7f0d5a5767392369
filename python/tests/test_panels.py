"""The panelled path (gemmd/_panels.py): a large 2-D matmul of copied
operands run as panels of D's rows. The size threshold is lowered here
(MIN_PANEL_BYTES = 1) so that small problems take the path on the CPU
backend; the hook _before_submit records each panel as it is sent.

Every panelled result is checked bit for bit against the unsplit calls of
its panels' rows (the same GEMMs, what the path promises) on the CPU
backend, against the unsplit call of the whole within the dtype's
rounding, and against an fp64 numpy reference.
"""
from __future__ import annotations

from typing import Any, Callable, Iterator, List, Optional, Tuple

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import gemmd
from conftest import (BACKEND, Hold, bound_err, eventually, f64, operand,
                      rand, rel_err, tolerance)
from gemmd import _panels
from test_matmul import npdt

SETTINGS = settings(max_examples=60, deadline=None, database=None,
                    derandomize=True,
                    suppress_health_check=[HealthCheck.function_scoped_fixture,
                                           HealthCheck.too_slow])
DTYPES = ["bfloat16", "float16", "float32", "float64", "complex64",
          "complex128", "int8"]
LAYOUTS = ["c", "f", "t-view", "strided", "gemmd", "gemmd-t"]


class Panels:
    """Lowers the size threshold and records the panels sent: rows[i] is
    panel i's M, in the order sent."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.rows: List[int] = []
        self.fail_at: Optional[int] = None
        monkeypatch.setattr(_panels, "MIN_PANEL_BYTES", 1)
        monkeypatch.setattr(_panels, "_before_submit", self._hook)

    def _hook(self, i: int, op: Any) -> None:
        self.rows.append(op.m)
        if i == self.fail_at:  # a real refusal by gemmd, this panel only
            op.kernel = b"no-such-kernel"

    def bounds(self) -> List[Tuple[int, int]]:
        out, lo = [], 0
        for r in self.rows:
            out.append((lo, lo + r))
            lo += r
        return out


@pytest.fixture
def panels(monkeypatch: pytest.MonkeyPatch) -> Iterator[Panels]:
    yield Panels(monkeypatch)


@pytest.fixture
def unsplit(daemon: Any) -> Iterator[gemmd.Client]:
    with gemmd.connect(daemon.url, timeout=120.0, panels=1) as c:
        yield c


def result_type(dt: str, out32: bool) -> str:
    if dt == "int8":
        return "int32"
    return "float32" if out32 and dt in ("float16", "bfloat16") else dt


def check(got: np.ndarray, whole: np.ndarray, pieces: np.ndarray,
          ref: Callable[[np.ndarray], float], cd: str) -> None:
    """got (panelled) against the panels' unsplit calls (bit for bit on
    the CPU backend), and both it and the unsplit whole against an fp64
    reference (ref(x): x's error, conftest.bound_err)."""
    if cd == "int32":  # exact, wrapping as int32 does
        assert np.array_equal(got, whole) and np.array_equal(got, pieces)
        return
    if BACKEND == "cpu":
        assert np.array_equal(got, pieces, equal_nan=True), \
            "a panel differs from the same GEMM sent unsplit"
    tol = tolerance(cd)
    assert ref(whole) <= tol
    assert ref(got) <= tol


@SETTINGS
@given(m=st.integers(2, 61), n=st.integers(1, 33), k=st.integers(1, 33),
       p=st.integers(2, 7), dt=st.sampled_from(DTYPES),
       la=st.sampled_from(LAYOUTS), lb=st.sampled_from(LAYOUTS),
       outk=st.sampled_from(["none", "numpy", "gemmd"]),
       ck=st.sampled_from(["none", "c", "row", "out"]),
       out32=st.booleans(), seed=st.integers(0, 2**31 - 1))
def test_panels_match_unsplit(client: gemmd.Client, unsplit: gemmd.Client,
                              panels: Panels, m: int, n: int, k: int, p: int,
                              dt: str, la: str, lb: str, outk: str, ck: str,
                              out32: bool, seed: int) -> None:
    rng = np.random.default_rng(seed)
    cd = result_type(dt, out32)
    a = operand(client, rng, m, k, npdt(dt), la)
    b = operand(client, rng, k, n, npdt(dt), lb)
    if ck == "out" and outk == "none":
        ck = "c"
    integer = dt == "int8"
    alpha, beta = (3, -2) if integer else (0.75, 0.0 if ck == "none" else
                                           -1.5)
    if integer and ck == "none":
        beta = 0
    c0: Optional[np.ndarray] = None
    if ck != "none":
        shape = (m, n) if ck != "row" else (n,)
        c0 = operand(client, rng, *(shape if len(shape) == 2 else (1, n)),
                     npdt("int8" if integer else cd), "c").astype(npdt(cd))
        if ck == "row":
            c0 = c0.reshape(n)

    def out_array() -> Optional[np.ndarray]:
        if outk == "none":
            return None
        o = (np.empty((m, n), npdt(cd)) if outk != "gemmd" else
             client.empty((m, n), npdt(cd)))
        o[...] = c0 if ck == "out" else 7
        return o

    def kw(lo: int = 0, hi: int = m) -> Any:
        x = {"alpha": alpha, "beta": beta, "out_dtype": cd}
        if integer:
            x["dtype"] = "int8"
        if ck in ("c", "row") and c0 is not None:
            x["c"] = c0 if ck == "row" else c0[lo:hi]
        return x

    client.panels = p
    out = out_array()
    got = client.matmul(a, b, out, **kw())
    if out is not None:
        assert got is out
    assert got.shape == (m, n)
    copied = (la not in ("gemmd", "gemmd-t") or outk == "numpy" or
              ck in ("c", "row"))
    if not copied:  # nothing to overlap: one request
        assert panels.rows == []
        panels.rows.append(m)
    assert len(panels.rows) == (min(p, m) if copied else 1), panels.rows
    assert sum(panels.rows) == m, panels.rows
    sent = panels.bounds()
    panels.rows.clear()

    out_w = out_array()
    whole = unsplit.matmul(a, b, out_w, **kw())
    pieces = np.empty_like(np.asarray(whole))
    for lo, hi in sent:
        o = None if out_w is None else out_array()
        piece = unsplit.matmul(a[lo:hi], b, None if o is None else o[lo:hi],
                               **kw(lo, hi))
        pieces[lo:hi] = piece
    assert panels.rows == [], "an unsplit call went through the panels"
    cref = None if ck == "none" else np.broadcast_to(c0, (m, n))
    check(np.asarray(got), np.asarray(whole), pieces,
          lambda x: bound_err(x, a, b, alpha, beta, cref), cd)


def test_panels_match_unsplit_n1_transposed_b_with_c(
        client: gemmd.Client, unsplit: gemmd.Client, panels: Panels) -> None:
    """The example hypothesis found: B one column, a transposed view of
    gemmd memory of the other connection, with a C. The panels read it in
    place as a column (core_layout), the unsplit calls copied it as its
    transpose, and OpenBLAS's two N = 1 paths round beta * C apart in the
    last bit; a copied row or column now goes as it is, as in place."""
    test_panels_match_unsplit.hypothesis.inner_test(
        client, unsplit, panels, m=3, n=1, k=3, p=2, dt="bfloat16", la="c",
        lb="gemmd-t", outk="none", ck="c", out32=True, seed=0)


def test_small_calls_stay_one_request(client: gemmd.Client,
                                      monkeypatch: pytest.MonkeyPatch
                                      ) -> None:
    """At the default threshold a small matmul is one request; at one
    panel's worth of copies less than two panels, too."""
    sent: List[int] = []
    monkeypatch.setattr(_panels, "_before_submit",
                        lambda i, op: sent.append(op.m))
    a = np.ones((64, 64), np.float32)
    assert np.all(client.matmul(a, a) == 64)
    assert sent == []
    # A is 256 x 64 float32 = 64 KiB: two panels need 32 KiB each
    monkeypatch.setattr(_panels, "MIN_PANEL_BYTES", 32 << 10)
    a = np.ones((256, 64), np.float32)
    client.panels = 8
    assert np.all(client.matmul(a, a.T[:64, :64]) == 64)
    assert sent == [128, 128]
    sent.clear()
    monkeypatch.setattr(_panels, "MIN_PANEL_BYTES", (32 << 10) + 1)
    assert np.all(client.matmul(a, a.T[:64, :64]) == 64)
    assert sent == [], "panels smaller than MIN_PANEL_BYTES were made"
    # nothing copied (A and out in gemmd memory): nothing to overlap
    monkeypatch.setattr(_panels, "MIN_PANEL_BYTES", 1)
    ae = client.asarray(a)
    assert np.all(client.matmul(ae, a[:64].T) == 64)
    assert sent == []


def test_panels_knob(daemon: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_panels, "PANELS", 3)
    with gemmd.connect(daemon.url) as c:
        assert c.panels == 3
        c.panels = 1
        assert c.panels == 1
        c.panels = None
        assert c.panels == 3
        for bad in (0, -2, 2.5, "4", True):
            with pytest.raises(gemmd.InvalidArgument):
                c.panels = bad
    with gemmd.connect(daemon.url, panels=6) as c:
        assert c.panels == 6


@pytest.mark.parametrize("where", ["numpy", "gemmd", "none"])
@pytest.mark.parametrize("bad", [0, 2, 4])
def test_refused_panel(client: gemmd.Client, unsplit: gemmd.Client,
                       panels: Panels, where: str, bad: int) -> None:
    """gemmd refuses one panel (its op names no kernel gemmd has): the
    unsplit call's exception; out holds the result in the rows of the
    panels that completed and 7 (as before) elsewhere, the refused
    panel's rows among them. The connection and its buffers stay
    usable."""
    rng = np.random.default_rng(bad)
    m, n, k = 53, 17, 29
    a = rand(rng, (m, k))
    b = rand(rng, (k, n))
    with pytest.raises(gemmd.GemmError) as want:
        unsplit.matmul(a, b, kernel="no-such-kernel")
    whole = unsplit.matmul(a, b)
    out = None
    if where != "none":
        out = (np.full((m, n), 7.0, np.float32) if where == "numpy" else
               client.empty((m, n), np.float32))
        out[...] = 7.0
    client.panels = 5
    panels.fail_at = bad
    with pytest.raises(gemmd.GemmError) as got:
        client.matmul(a, b, out)
    assert type(got.value) is type(want.value)
    assert got.value.code == want.value.code
    assert "no-such-kernel" in got.value.message
    sent = panels.bounds()
    assert len(sent) > bad
    # no panel is sent after the refusal is seen: at most IN_FLIGHT - 1
    assert len(sent) <= bad + _panels.IN_FLIGHT
    if out is not None:
        for i, (lo, hi) in enumerate(sent + [(sent[-1][1], m)]):
            rows = out[lo:hi]
            if i == bad or i >= len(sent):
                assert np.all(rows == 7.0), "rows of panel %d written" % i
            else:
                assert np.array_equal(rows, whole[lo:hi]) or \
                    rel_err(rows, whole[lo:hi]) <= tolerance("float32"), \
                    "panel %d's rows are neither the result nor as " \
                    "before" % i
        for i in range(bad):
            lo, hi = sent[i]
            assert not np.all(out[lo:hi] == 7.0), \
                "panel %d completed before the refusal but is not " \
                "written" % i
    panels.fail_at = None
    panels.rows.clear()
    d = client.matmul(a, b)
    assert rel_err(d, whole) <= tolerance("float32")
    assert len(panels.rows) == 5


def test_timeout_bounds_the_whole_call(client: gemmd.Client,
                                       panels: Panels,
                                       monkeypatch: pytest.MonkeyPatch
                                       ) -> None:
    """Once the client's timeout is spent (a clock that jumps past it
    after panel 1 is sent) no later panel is sent: Timeout, the rows of
    the panels sent are the result, the others as before."""
    class Clock:
        now = 0.0

        def monotonic(self) -> float:
            return self.now

    clock = Clock()
    monkeypatch.setattr(_panels, "time", clock)

    def hook(i: int, op: Any) -> None:
        panels.rows.append(op.m)
        assert 0 < op.timeout_ms <= 5000, "panel sent without its deadline"
        if i == 1:
            clock.now = 6.0

    monkeypatch.setattr(_panels, "_before_submit", hook)
    rng = np.random.default_rng(3)
    a = rand(rng, (40, 24))
    b = rand(rng, (24, 16))
    out = np.full((40, 16), 7.0, np.float32)
    client.panels = 4
    client.set_timeout(5.0)
    with pytest.raises(gemmd.Timeout) as ei:
        client.matmul(a, b, out)
    assert type(ei.value) is gemmd.Timeout and ei.value.code == 4
    assert "timeout" in ei.value.message
    assert panels.rows == [10, 10]
    ref = f64(a) @ f64(b)
    assert rel_err(out[:20], ref[:20]) <= tolerance("float32")
    assert np.all(out[20:] == 7.0)


def test_queued_panel_times_out(make_daemon: Any,
                                monkeypatch: pytest.MonkeyPatch) -> None:
    """Panels queued behind a held GEMM until the client's timeout pass
    are dropped by gemmd unstarted: Timeout, out untouched."""
    d = make_daemon("--threads", "1", hold=True)
    if d.hold is None:
        pytest.skip("skipped: needs the CPU backend's test hold (the "
                    "test-hold kernel of gemmd_test); GEMM_TEST_BACKEND=%s"
                    % BACKEND)
    monkeypatch.setattr(_panels, "MIN_PANEL_BYTES", 1)
    with gemmd.connect(d.url, timeout=120) as busy, \
            gemmd.connect(d.url, timeout=120, panels=4) as c:
        x = busy.asarray(np.ones((64, 64), np.float32))
        held = busy.submit(x, x, kernel=Hold.KERNEL)
        d.hold.wait()
        a = np.ones((64, 64), np.float32)
        out = np.full((64, 64), 7.0, np.float32)
        c.set_timeout(0.05)
        with pytest.raises(gemmd.Timeout):
            c.matmul(a, a, out)
        assert np.all(out == 7.0), "a dropped panel wrote its rows"
        d.hold.release()
        assert np.all(held.result(120) == 64)
        c.set_timeout(120)
        assert np.all(c.matmul(a, a, out) == 64)


def test_b_staged_once(client: gemmd.Client, panels: Panels,
                       monkeypatch: pytest.MonkeyPatch) -> None:
    """B is staged once for all panels: as a resident tensor (freed when
    the call returns) or, with RESIDENT_B off, from shared memory; the
    same result either way (bit for bit on the CPU backend)."""
    rng = np.random.default_rng(5)
    a = rand(rng, (45, 31))
    b = np.asfortranarray(rand(rng, (31, 22)))  # staged as its transpose
    client.panels = 3

    def tensors() -> int:
        st = client.status()
        return int(st.get("tensors", 0)) + sum(
            int(d.get("tensors", 0)) for d in st["devices"])

    before = tensors()
    uploads: List[int] = []
    real = _panels._stage_b

    def counting(conn: Any, plan: Any) -> Any:
        got = real(conn, plan)
        uploads.append(isinstance(got[0], gemmd.Tensor))
        return got

    monkeypatch.setattr(_panels, "_stage_b", counting)
    x = client.matmul(a, b)
    assert uploads == [True] and len(panels.rows) == 3
    assert eventually(lambda: tensors() == before), \
        "the resident B of the panels was not freed"
    monkeypatch.setattr(_panels, "RESIDENT_B", False)
    y = client.matmul(a, b)
    assert uploads == [True, False] and len(panels.rows) == 6
    if BACKEND == "cpu":
        assert np.array_equal(x, y)
    assert rel_err(x, y) <= tolerance("float32")
    assert rel_err(x, f64(a) @ f64(b)) <= tolerance("float32")


def test_panelled_calls_from_threads(client: gemmd.Client,
                                     panels: Panels) -> None:
    """Panelled matmuls from several threads on one client: each gets its
    own result (staging buffers, resident B and D rows kept apart)."""
    import threading

    rng = np.random.default_rng(9)
    jobs = [(rand(rng, (33 + i, 20)), rand(rng, (20, 11 + i)))
            for i in range(6)]
    results: List[Any] = [None] * len(jobs)
    client.panels = 4

    def work(i: int) -> None:
        a, b = jobs[i]
        for _ in range(3):
            out = np.full((a.shape[0], b.shape[1]), 7.0, np.float32)
            client.matmul(a, b, out)
            results[i] = out

    ts = [threading.Thread(target=work, args=(i,)) for i in range(len(jobs))]
    for t in ts:
        t.start()
    for t in ts:
        t.join(120)
        assert not t.is_alive(), "a panelled matmul did not return"
    assert len(panels.rows) == 4 * 3 * len(jobs)
    for (a, b), got in zip(jobs, results):
        assert rel_err(got, f64(a) @ f64(b)) <= tolerance("float32")
