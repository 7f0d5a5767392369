"""The shapes and layouts of stacked matmuls (gemmd._stack), against
numpy's own matmul: result shapes, broadcasting and its errors, out's
shape rules, per-problem offsets of broadcast and strided views, the
strided/grouped decision and the matrix layouts. Pure functions: no
daemon."""
from __future__ import annotations

import itertools
from typing import Optional, Tuple

import numpy as np
import pytest

import gemmd
from gemmd import _stack

SHAPES = [(3,), (2, 3), (4, 2, 3), (1, 2, 3), (5, 1, 2, 3), (0, 2, 3),
          (3, 1), (2, 4), (4, 3, 4), (1, 3, 4), (2, 1, 3, 4), (5, 4, 3, 4),
          (4,), (3, 0), (0, 3), (4, 0, 3, 2)]


def numpy_shape(a: Tuple[int, ...], b: Tuple[int, ...],
                out: Optional[Tuple[int, ...]] = None
                ) -> Tuple[Optional[Tuple[int, ...]], str]:
    """numpy's result shape for these operand shapes, or None and its
    error message."""
    try:
        kw = {} if out is None else {"out": np.zeros(out)}
        return np.matmul(np.zeros(a), np.zeros(b), **kw).shape, ""
    except ValueError as e:
        return None, str(e)


@pytest.mark.parametrize("a,b", list(itertools.product(SHAPES, SHAPES)))
def test_shapes_match_numpy(a: Tuple[int, ...], b: Tuple[int, ...]) -> None:
    want, err = numpy_shape(a, b)
    if want is None:
        with pytest.raises(gemmd.ShapeError) as ei:
            _stack.Shapes(a, b)
        assert isinstance(ei.value, ValueError)
        # the same words as numpy (numpy's broadcast message has no
        # "matmul: " prefix; ours neither)
        assert ei.value.message.replace("matmul: ", "") == \
            err.replace("matmul: ", "")
        return
    sh = _stack.Shapes(a, b)
    assert sh.shape == want
    assert sh.count == int(np.prod(sh.batch))
    assert sh.batch == want[:len(want) - (len(a) > 1) - (len(b) > 1)]


@pytest.mark.parametrize("out", [(4, 2, 4), (2, 4), (1, 4, 2, 4),
                                 (3, 4, 2, 4), (4, 2, 5), (4, 3, 4), (2, 2, 4),
                                 (4,), (1, 2, 4), (4, 1, 4)])
def test_out_shapes_match_numpy(out: Tuple[int, ...]) -> None:
    a, b = (4, 2, 3), (3, 4)
    want, err = numpy_shape(a, b, out)
    if want is None:
        with pytest.raises(gemmd.ShapeError):
            _stack.Shapes(a, b, out)
        return
    sh = _stack.Shapes(a, b, out)
    assert sh.shape == want == out


def test_broadcast_error_words() -> None:
    with pytest.raises(gemmd.ShapeError) as ei:
        _stack.Shapes((2, 3, 4), (3, 4, 5))
    assert ei.value.message == (
        "operands could not be broadcast together with remapped shapes "
        "[original->remapped]: (2,3,4)->(2,newaxis,newaxis) "
        "(3,4,5)->(3,newaxis,newaxis)  and requested shape (3,5)")
    with pytest.raises(gemmd.ShapeError, match="mismatch in its core "
                       "dimension 0"):
        _stack.Shapes((2, 3, 4), (2, 5, 5))
    with pytest.raises(gemmd.ShapeError, match="does not have enough"):
        _stack.Shapes((), (3, 4))


def offsets_by_hand(arr: np.ndarray, batch: Tuple[int, ...]) -> np.ndarray:
    """Each problem's matrix offset from arr's first, by indexing numpy's
    broadcast view (the reference for batch_offsets)."""
    view = np.broadcast_to(arr, batch + arr.shape[-2:])
    base = arr.__array_interface__["data"][0]
    return np.array([view[idx].__array_interface__["data"][0] - base
                     for idx in np.ndindex(*batch)], np.int64)


@pytest.mark.parametrize("make,batch,stride", [
    (lambda: np.zeros((4, 3, 2)), (4,), 48),
    (lambda: np.zeros((1, 3, 2)), (4,), 0),
    (lambda: np.zeros((3, 2)), (2, 4), 0),
    (lambda: np.zeros((2, 4, 3, 2)), (2, 4), 48),
    (lambda: np.zeros((2, 1, 3, 2)), (2, 4), None),
    (lambda: np.zeros((1, 4, 3, 2)), (2, 4), None),
    (lambda: np.zeros((4, 3, 2))[::2], (2,), 96),
    (lambda: np.zeros((4, 3, 2))[::-1], (4,), None),
    (lambda: np.zeros((3, 4, 2)).transpose(1, 0, 2), (4,), 16),
    (lambda: np.zeros((2, 3, 4, 2)).transpose(1, 0, 2, 3)[:, :, 1:],
     (3, 2), None),
    (lambda: np.broadcast_to(np.zeros((3, 2)), (5, 3, 2)), (5,), 0),
    (lambda: np.zeros((0, 3, 2)), (0,), 0),
])
def test_batch_offsets(make, batch: Tuple[int, ...],
                       stride: Optional[int]) -> None:
    arr = make()
    offs = _stack.batch_offsets(arr.shape[:-2], arr.strides[:-2], batch)
    assert offs.shape == (int(np.prod(batch)),)
    assert np.array_equal(offs, offsets_by_hand(arr, batch))
    assert _stack.single_stride(offs) == stride


@pytest.mark.parametrize("rows,cols,order,want", [
    (3, 4, "c", (False, 4)), (3, 4, "f", (True, 3)), (1, 4, "c", (False, 4)),
    (3, 1, "c", (False, 1)), (1, 1, "c", (False, 1)),
    (3, 4, "slice", (False, 9)), (3, 4, "tslice", (True, 9)),
    (3, 4, "every2", None),
])
def test_core_layout(rows: int, cols: int, order: str, want) -> None:
    isz = 4
    if order == "c":
        arr = np.zeros((rows, cols), np.float32)
    elif order == "f":
        arr = np.zeros((rows, cols), np.float32, order="F")
    elif order == "slice":
        arr = np.zeros((rows, 9), np.float32)[:, 2:2 + cols]
    elif order == "tslice":
        arr = np.zeros((cols, 9), np.float32)[:, 1:1 + rows].T
    else:
        arr = np.zeros((rows, cols * 2), np.float32)[:, ::2]
    got = _stack.core_layout(rows, cols, arr.strides[0], arr.strides[1], isz)
    assert got == want


def test_squeeze_repeats_and_disjoint() -> None:
    x = np.broadcast_to(np.arange(6.0).reshape(1, 2, 3), (4, 2, 3))
    y = _stack.squeeze_repeats(x, 1)
    assert y.shape == (1, 2, 3) and np.array_equal(y[0], x[3])
    z = np.zeros((4, 2, 3))
    assert _stack.squeeze_repeats(z, 1) is z
    assert _stack.disjoint(np.array([0, 24, 48]), 24)
    assert not _stack.disjoint(np.array([0, 20, 48]), 24)
    assert not _stack.disjoint(np.array([0, 0]), 24)
