"""Grouped matmul (Client.matmul_grouped): lists of products of different
shapes in one request, as a mixture-of-experts layer sends them (M per
expert, 0 for some), against numpy in fp64; per-problem alpha/beta, out
and c; errors carrying the bad problem's index, and a refused request
writing nothing."""
from __future__ import annotations

from typing import Any, List

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import gemmd
from conftest import bound_err, f64, rand, rel_err, tolerance
from test_matmul import CopyCounter, npdt

SETTINGS = settings(max_examples=60, deadline=None, database=None,
                    suppress_health_check=[HealthCheck.function_scoped_fixture,
                                           HealthCheck.too_slow])


@SETTINGS
@given(ms=st.lists(st.integers(0, 20), min_size=1, max_size=9),
       n=st.integers(1, 16), k=st.integers(1, 16),
       dt=st.sampled_from(["float32", "float16", "bfloat16", "float64",
                           "complex64", "complex128"]),
       gemmd_mem=st.booleans(), shared_w=st.booleans(),
       seed=st.integers(0, 2**31 - 1))
def test_experts_match_numpy(bclient: gemmd.Client, ms: List[int], n: int,
                             k: int, dt: str, gemmd_mem: bool,
                             shared_w: bool, seed: int) -> None:
    """One product per expert: tokens (M x K, M from the list, 0
    included) times the expert's weights (K x N, or one shared)."""
    rng = np.random.default_rng(seed)
    t = npdt(dt)
    xs = [rand(rng, (m, k), t) for m in ms]
    ws = [rand(rng, (k, n), t)] * len(ms) if shared_w else \
        [rand(rng, (k, n), t) for _ in ms]
    if gemmd_mem:
        xs = [bclient.asarray(x) if x.size else x for x in xs]
        ws = [bclient.asarray(w) for w in ws]
    got = bclient.matmul_grouped(xs, ws)
    assert len(got) == len(ms)
    for g, x, w in zip(got, xs, ws):
        assert g.shape == (x.shape[0], n) and g.dtype == t
        assert bound_err(g, x, w) <= tolerance(dt)


def test_shapes_layouts_and_vectors(bclient: gemmd.Client) -> None:
    """Different M, N and K per problem, transposed views, slices, 1-D
    operands, zero sizes, in gemmd memory or not."""
    rng = np.random.default_rng(1)
    big = bclient.asarray(rand(rng, (40, 40)))
    As = [rand(rng, (5, 7)), big[:9, 3:14], big[2:13, :6].T, rand(rng, (4,)),
          rand(rng, (3, 0)), rand(rng, (6, 5)), np.asfortranarray(
              rand(rng, (8, 3)))]
    Bs = [rand(rng, (7, 2)), big[20:31, 30:39], rand(rng, (11, 4)),
          rand(rng, (4, 6)), rand(rng, (0, 5)), rand(rng, (5,)),
          rand(rng, (3, 1))]
    got = bclient.matmul_grouped(As, Bs)
    for g, a, b in zip(got, As, Bs):
        want = np.matmul(f64(a), f64(b))
        assert np.shape(g) == want.shape
        assert rel_err(g, want) <= 1e-5


def test_in_place_and_one_staging_buffer(bclient: gemmd.Client,
                                         monkeypatch: pytest.MonkeyPatch
                                         ) -> None:
    rng = np.random.default_rng(2)
    xs = [bclient.asarray(rand(rng, (m, 16))) for m in (3, 9, 1)]
    ws = [bclient.asarray(rand(rng, (16, 8))) for _ in xs]
    outs = [bclient.empty((x.shape[0], 8), np.float32) for x in xs]
    cc = CopyCounter(monkeypatch)
    got = bclient.matmul_grouped(xs, ws, outs)
    assert cc.calls == []
    assert all(g is o for g, o in zip(got, outs))
    for o, x, w in zip(outs, xs, ws):
        assert rel_err(o, f64(x) @ f64(w)) <= 1e-5


@pytest.mark.parametrize("dt", ["float64", "float32", "bfloat16",
                                "complex128"])
def test_per_problem_alpha_beta_c(bclient: gemmd.Client, dt: str) -> None:
    rng = np.random.default_rng(3)
    t = npdt(dt)
    As = [rand(rng, (m, 6), t) for m in (4, 0, 7, 5)]
    Bs = [rand(rng, (6, 3), t) for _ in As]
    Cs = [rand(rng, (3,), t), None, rand(rng, (7, 3), t), None]
    alphas, betas = [2.0, 3.0, -1.0, 0.5], [0.5, 0.0, 2.0, 0.0]
    got = bclient.matmul_grouped(As, Bs, c=Cs, alpha=alphas, beta=betas)
    for g, a, b, c, al, be in zip(got, As, Bs, Cs, alphas, betas):
        want = al * (f64(a) @ f64(b)) + (be * f64(c) if c is not None
                                         else 0)
        assert g.dtype == t and g.shape == want.shape
        assert rel_err(g, want) <= tolerance(dt)
    with pytest.raises(gemmd.InvalidArgument, match="alpha has 2 values"):
        bclient.matmul_grouped(As, Bs, alpha=[1.0, 2.0])


def test_module_level(bclient: gemmd.Client,
                      monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(gemmd, "default_client", lambda: bclient)
    a, b = np.ones((2, 3), np.float32), np.ones((3, 4), np.float32)
    r = gemmd.matmul_grouped([a, a[:0]], [b, b])
    assert r[0].shape == (2, 4) and r[0][0, 0] == 3 and r[1].shape == (0, 4)


def test_errors_name_the_problem(bclient: gemmd.Client) -> None:
    """Mistakes found before sending carry the problem's index."""
    a, b = np.ones((2, 3), np.float32), np.ones((3, 4), np.float32)
    with pytest.raises(gemmd.ShapeError) as ei:
        bclient.matmul_grouped([a, a, a], [b, b, b.T])
    assert ei.value.problem == 2 and "problem 2" in ei.value.message
    assert "core dimension 0" in ei.value.message
    with pytest.raises(gemmd.ShapeError, match="multiply stacks with "
                       "matmul") as ei:
        bclient.matmul_grouped([a, a[None]], [b, b])
    assert ei.value.problem == 1
    with pytest.raises(gemmd.InvalidArgument, match="one b per a"):
        bclient.matmul_grouped([a, a], [b])
    with pytest.raises(gemmd.DTypeError, match="problem 1") as ei:
        bclient.matmul_grouped([a, a], [b, b],
                               out=[np.empty((2, 4), np.float32),
                                    np.empty((2, 4), np.int32)])
    assert ei.value.problem == 1
    assert bclient.matmul_grouped([], []) == []


def test_refused_problem_index_and_nothing_written(make_daemon: Any) -> None:
    """gemmd refuses a request with one problem past --max-dim: the error
    is the request's, its index the caller's (the empty problem before it
    is not sent), and no output is written."""
    d = make_daemon("--max-dim", "64")
    with gemmd.connect(d.url) as c:
        if c._live().lib.gemm_batch_submit is None:
            pytest.skip("skipped: libgemmclient has no batch API")
        rng = np.random.default_rng(4)
        ms = [8, 0, 16, 65, 4]
        xs = [c.asarray(rand(rng, (m, 32))) if m else
              np.zeros((0, 32), np.float32) for m in ms]
        ws = [c.asarray(rand(rng, (32, 16))) for _ in ms]
        outs = [c.empty((m, 16), np.float32) for m in ms]
        for o in outs:
            o[...] = 42
        with pytest.raises(gemmd.ShapeError) as ei:
            c.matmul_grouped(xs, ws, outs)
        assert ei.value.problem == 3, ei.value.message
        assert "problem 3" in ei.value.message
        assert all(np.all(o == 42) for o in outs)
        # the same through a stack: problem 0 of a batch of 2
        x = c.asarray(rand(rng, (2, 65, 8)))
        o = c.empty((2, 65, 8), np.float32)
        o[...] = 42
        with pytest.raises(gemmd.ShapeError) as ei:
            c.matmul(x, c.asarray(rand(rng, (8, 8))), out=o)
        assert ei.value.problem == 0 and np.all(o == 42)
        got = c.matmul_grouped(xs[:3], ws[:3])
        assert rel_err(got[2], f64(xs[2]) @ f64(ws[2])) <= 1e-5
