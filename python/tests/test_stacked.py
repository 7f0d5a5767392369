"""Stacked matmul (operands of more than two dimensions) against numpy's
matmul in fp64: property tests over batch shapes and their broadcasting
(size-1 and missing dimensions), 1-D operands, every dtype, layouts (C
order, transposed views, strided and reversed batches, broadcast views,
in gemmd memory or not), out= (gemmd memory or not, other types), zero
sizes; then what is used in place, alpha/beta/c, resident tensors, and
the errors."""
from __future__ import annotations

from typing import Any, Tuple

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import gemmd
from conftest import bound_err, f64, rand, rel_err, tolerance
from test_matmul import CopyCounter, npdt

SETTINGS = settings(max_examples=150, deadline=None, database=None,
                    suppress_health_check=[HealthCheck.function_scoped_fixture,
                                           HealthCheck.too_slow])
DTYPES = ["float64", "float32", "float16", "bfloat16", "complex64",
          "complex128"]
LAYOUTS = ["c", "t-view", "batch-step", "reversed", "broadcast", "gemmd",
           "gemmd-t", "gemmd-slice", "gemmd-batch-t"]


def make(client: gemmd.Client, rng: np.random.Generator,
         shape: Tuple[int, ...], dt: np.dtype, layout: str) -> np.ndarray:
    """An array of shape and dt in the given layout, uniform in [-1, 1)."""
    def r(s: Any) -> np.ndarray:
        return rand(rng, s, dt)
    if len(shape) < 2 and layout not in ("c", "gemmd"):
        layout = "c"
    if layout == "c":
        return r(shape)
    if layout == "t-view":
        return np.swapaxes(r(shape[:-2] + shape[:-3:-1]), -1, -2)
    if layout == "batch-step":  # every other matrix of a larger stack
        if len(shape) < 3:
            return r(shape)
        return r((shape[0] * 2,) + shape[1:])[::2]
    if layout == "reversed":
        return r(shape)[::-1]
    if layout == "broadcast":  # one matrix repeated (stride 0)
        return np.broadcast_to(r(shape[-2:]), shape)
    if layout == "gemmd":
        return client.asarray(r(shape))
    if layout == "gemmd-t":
        return np.swapaxes(client.asarray(r(shape[:-2] + shape[:-3:-1])),
                           -1, -2)
    if layout == "gemmd-slice":
        big = client.asarray(r(shape[:-2] + (shape[-2] + 1,
                                             shape[-1] + 3)))
        return big[..., 1:, 2:2 + shape[-1]]
    # gemmd-batch-t: batch dimension inside the rows (batch stride < ld)
    if len(shape) < 3:
        return client.asarray(r(shape))
    x = client.asarray(r((shape[-2], shape[0]) + shape[1:-2] +
                         (shape[-1],)))
    return np.moveaxis(x, 0, -2)


@st.composite
def stacks(draw: Any) -> Tuple[Tuple[int, ...], Tuple[int, ...]]:
    """Two operand shapes numpy's matmul takes: a common batch shape of
    0-3 dimensions, each operand a suffix of it with some dimensions 1,
    or a 1-D operand."""
    batch = draw(st.lists(st.integers(1, 3), min_size=0, max_size=3))
    if draw(st.integers(0, 9)) == 0 and batch:
        batch[draw(st.integers(0, len(batch) - 1))] = 0
    m, n, k = (draw(st.integers(1, 9)) for _ in range(3))
    if draw(st.integers(0, 14)) == 0:
        m = 0

    def operand(core: Tuple[int, ...]) -> Tuple[int, ...]:
        drop = draw(st.integers(0, len(batch)))
        own = [1 if draw(st.integers(0, 3)) == 0 else d
               for d in batch[drop:]]
        return tuple(own) + core

    a1 = draw(st.integers(0, 5)) == 0
    b1 = draw(st.integers(0, 5)) == 0
    a = (k,) if a1 else operand((m, k))
    b = (k,) if b1 else operand((k, n))
    if len(a) <= 2 and len(b) <= 2:  # at least one stack
        a = tuple(batch or [2]) + (m, k)
    return a, b


def reference(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    return np.matmul(f64(a), f64(b))


@SETTINGS
@given(shapes=stacks(), dt=st.sampled_from(DTYPES),
       la=st.sampled_from(LAYOUTS), lb=st.sampled_from(LAYOUTS),
       out=st.sampled_from([None, "numpy", "gemmd"]),
       seed=st.integers(0, 2**31 - 1))
def test_stacked_matches_numpy(bclient: gemmd.Client, shapes: Any, dt: str,
                               la: str, lb: str, out: Any,
                               seed: int) -> None:
    rng = np.random.default_rng(seed)
    a = make(bclient, rng, shapes[0], npdt(dt), la)
    b = make(bclient, rng, shapes[1], npdt(dt), lb)
    want = reference(a, b)
    o = None
    if out == "numpy":
        o = np.full(want.shape, 7, npdt(dt))
    elif out == "gemmd":
        o = bclient.zeros(want.shape, npdt(dt))
    d = bclient.matmul(a, b, out=o)
    if o is not None:
        assert d is o
    assert np.shape(d) == want.shape and d.dtype == npdt(dt)
    assert bound_err(d, a, b) <= tolerance(dt)


@SETTINGS
@given(shapes=stacks(), ab=st.sampled_from(["float16", "bfloat16"]),
       la=st.sampled_from(LAYOUTS), lb=st.sampled_from(LAYOUTS),
       seed=st.integers(0, 2**31 - 1))
def test_stacked_16bit_to_float32(bclient: gemmd.Client, shapes: Any,
                                  ab: str, la: str, lb: str,
                                  seed: int) -> None:
    rng = np.random.default_rng(seed)
    a = make(bclient, rng, shapes[0], npdt(ab), la)
    b = make(bclient, rng, shapes[1], npdt(ab), lb)
    d = bclient.matmul(a, b, out_dtype="float32")
    assert d.dtype == np.float32
    assert bound_err(d, a, b) <= tolerance(ab, "float32")


def test_in_place_no_copies(bclient: gemmd.Client,
                            monkeypatch: pytest.MonkeyPatch) -> None:
    """Stacks in gemmd memory (transposed, sliced, broadcast, out) are
    used where they lie: no staging copy."""
    rng = np.random.default_rng(1)
    a = bclient.asarray(rand(rng, (6, 5, 7, 9)))
    b = bclient.asarray(rand(rng, (5, 11, 9)))
    w = bclient.asarray(rand(rng, (1, 9, 4)))
    out = bclient.empty((6, 5, 7, 11), np.float32)
    out2 = bclient.empty((6, 5, 7, 4), np.float32)
    cc = CopyCounter(monkeypatch)
    d1 = bclient.matmul(a, np.swapaxes(b, -1, -2), out=out)
    d2 = bclient.matmul(a[:, :, :, :], w, out=out2)
    d3 = bclient.matmul(a[::2, 1:], np.swapaxes(b, -1, -2)[1:])
    assert cc.calls == []
    assert d1 is out and d2 is out2 and bclient.is_gemmd_array(d3)
    bt = np.swapaxes(f64(b), -1, -2)
    assert rel_err(d1, f64(a) @ bt) <= 1e-5
    assert rel_err(d2, f64(a) @ f64(w)) <= 1e-5
    assert rel_err(d3, f64(a)[::2, 1:] @ bt[1:]) <= 1e-5


def test_status_counts_batches(bclient: gemmd.Client) -> None:
    """A stacked matmul is one batch request of all its problems, and
    status() counts both."""
    rng = np.random.default_rng(7)
    before = bclient.status()
    bclient.matmul(rand(rng, (3, 4, 5, 6)), rand(rng, (6, 2)))
    after = bclient.status()
    assert after["batches_served"] == before["batches_served"] + 1
    assert after["batch_problems"] == before["batch_problems"] + 12


def test_broadcast_operand_copied_once(bclient: gemmd.Client,
                                       monkeypatch: pytest.MonkeyPatch
                                       ) -> None:
    """A plain numpy operand broadcast over the batch is copied once,
    not once per problem."""
    rng = np.random.default_rng(2)
    a = bclient.asarray(rand(rng, (16, 8, 8)))
    w = rand(rng, (8, 8))
    cc = CopyCounter(monkeypatch)
    d = bclient.matmul(a, np.broadcast_to(w, (16, 8, 8)))
    assert [s for s, _ in cc.calls] == [(1, 8, 8)]
    assert rel_err(d, f64(a) @ f64(w)) <= 1e-5


@pytest.mark.parametrize("a,b", [((3,), (4, 3, 2)), ((2, 5, 3), (3,)),
                                 ((1, 3), (2, 3, 4)), ((2, 1, 3, 4), (4, 5)),
                                 ((0, 3, 4), (4, 5)), ((2, 3, 0), (2, 0, 5)),
                                 ((2, 0, 4), (4, 5)), ((3, 2, 4), (4, 0))])
def test_vectors_and_zero_sizes(bclient: gemmd.Client, a: Tuple[int, ...],
                                b: Tuple[int, ...]) -> None:
    rng = np.random.default_rng(3)
    x, y = rand(rng, a), rand(rng, b)
    want = np.matmul(x, y)
    d = bclient.matmul(x, y)
    assert d.shape == want.shape and d.dtype == np.float32
    assert rel_err(d, want) <= 1e-5
    out = np.full(want.shape, 5, np.float32)
    assert bclient.matmul(x, y, out=out) is out
    assert rel_err(out, want) <= 1e-5


@pytest.mark.parametrize("c_shape", [None, (4, 3, 5), (3, 5), (5,),
                                     (4, 1, 5), "out"])
def test_alpha_beta_c(bclient: gemmd.Client, c_shape: Any) -> None:
    rng = np.random.default_rng(4)
    a = bclient.asarray(rand(rng, (4, 3, 6), np.float64))
    b = rand(rng, (6, 5), np.float64)
    out = bclient.asarray(rand(rng, (4, 3, 5), np.float64))
    if c_shape is None:
        c, cref, beta = None, 0.0, 0.0
    elif c_shape == "out":
        c, cref, beta = None, out.copy(), -0.5
    else:
        c = rand(rng, c_shape, np.float64)
        cref, beta = np.broadcast_to(c, (4, 3, 5)), 1.5
    d = bclient.matmul(a, b, out=out, c=c, alpha=2.0, beta=beta)
    assert d is out
    want = 2.0 * (a @ b) + beta * cref
    assert np.allclose(out, want, rtol=1e-12, atol=1e-12)


def test_out_cast_and_not_gemmd_types(bclient: gemmd.Client) -> None:
    """An out of another type gets the result cast in as numpy casts."""
    rng = np.random.default_rng(5)
    a, b = rand(rng, (3, 4, 5)), rand(rng, (3, 5, 2))
    out = np.zeros((3, 4, 2), np.float64)
    assert bclient.matmul(a, b, out=out) is out
    assert rel_err(out, f64(a) @ f64(b)) <= 1e-5
    with pytest.raises(gemmd.DTypeError, match="Cannot cast"):
        bclient.matmul(a, b, out=np.zeros((3, 4, 2), np.int32))


def test_out_may_add_leading_dimensions(bclient: gemmd.Client) -> None:
    """numpy lets out have more leading dimensions than the operands'
    broadcast (each slice gets the same product); so does gemmd."""
    rng = np.random.default_rng(6)
    a, b = rand(rng, (2, 3, 4)), rand(rng, (4, 5))
    out = np.zeros((3, 2, 3, 5), np.float32)
    want = np.matmul(a, b, out=np.zeros((3, 2, 3, 5), np.float32))
    assert bclient.matmul(a, b, out=out) is out
    assert rel_err(out, want) <= 1e-5


def test_tensor_shared_by_a_stack(bclient: gemmd.Client) -> None:
    """A resident weight multiplies every matrix of a stack (stride 0),
    either side, transposed or not."""
    rng = np.random.default_rng(7)
    x = bclient.asarray(rand(rng, (8, 16, 32)))
    wn = rand(rng, (32, 24))
    w = bclient.upload(wn)
    try:
        assert rel_err(bclient.matmul(x, w), f64(x) @ f64(wn)) <= 1e-5
        assert rel_err(w.T @ np.swapaxes(x, -1, -2)[:, :, :5],
                       f64(wn).T @ np.swapaxes(f64(x), -1, -2)[:, :, :5]
                       ) <= 1e-5
    finally:
        w.free()


def test_submit_a_stack(bclient: gemmd.Client) -> None:
    rng = np.random.default_rng(8)
    a, b = rand(rng, (5, 7, 3)), rand(rng, (5, 3, 2))
    futs = [bclient.submit(a, b) for _ in range(4)]
    for f in futs:
        assert rel_err(f.result(60), f64(a) @ f64(b)) <= 1e-5


def test_shape_errors(bclient: gemmd.Client) -> None:
    f = np.ones((2, 3, 4), np.float32)
    with pytest.raises(gemmd.ShapeError, match="could not be broadcast"):
        bclient.matmul(f, np.ones((3, 4, 5), np.float32))
    with pytest.raises(gemmd.ShapeError, match="core dimension 0"):
        bclient.matmul(f, np.ones((2, 5, 5), np.float32))
    with pytest.raises(gemmd.ShapeError, match="Output operand 0"):
        bclient.matmul(f, np.ones((4, 5), np.float32),
                       out=np.empty((2, 3, 6), np.float32))
    with pytest.raises(gemmd.ShapeError, match="non-broadcastable output"):
        bclient.matmul(f, np.ones((4, 5), np.float32),
                       out=np.empty((1, 3, 5), np.float32))
    with pytest.raises(gemmd.InvalidArgument, match="read-only"):
        bclient.matmul(f, np.ones((4, 5), np.float32),
                       out=np.broadcast_to(np.empty((3, 5), np.float32),
                                           (2, 3, 5)))


def test_old_library_unsupported(client: gemmd.Client,
                                 monkeypatch: pytest.MonkeyPatch) -> None:
    """A libgemmclient without the batch API: stacks raise Unsupported
    naming the fix; single products still work."""
    lib = client._live().lib
    monkeypatch.setattr(lib, "gemm_batch_submit", None)
    a = np.ones((2, 3, 4), np.float32)
    with pytest.raises(gemmd.Unsupported, match="newer gemmd"):
        client.matmul(a, np.ones((4, 5), np.float32))
    assert client.matmul(a[0], np.ones((4, 5), np.float32))[0, 0] == 4
    assert client.matmul(a[:1], np.ones((4, 5), np.float32)).shape == \
        (1, 3, 5)

