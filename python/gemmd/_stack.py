"""Shapes and layouts of stacked matmuls, as numpy's ``matmul`` defines
them: pure functions of shapes and strides, no connection, no daemon.

numpy multiplies the last two dimensions of each operand (a 1-D operand
gets a 1 prepended (a) or appended (b), removed again from the result)
and broadcasts the leading ones, the batch dimensions. A stack becomes
one batch request: every problem's operand X starts at a byte offset
from X's first matrix; ``batch_offsets`` gives those offsets (0 along a
broadcast dimension) and ``single_stride`` says whether they form one
stride (a strided batch) or must be listed (a grouped batch).

Errors are ShapeError with numpy's words, raised before anything is sent.
"""
from __future__ import annotations

import math

import numpy as np

from ._errors import ShapeError

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing costs a fresh process ~4 ms: checkers only
    from typing import Optional, Sequence, Tuple

    Shape = Tuple[int, ...]

SIG = "(n?,k),(k,m?)->(n?,m?)"


def core_mismatch(kind: str, i: int, dim: int, got: int,
                  want: int) -> ShapeError:
    """numpy's error for a core dimension that does not fit."""
    return ShapeError(
        "matmul: %s operand %d has a mismatch in its core dimension %d, "
        "with gufunc signature %s (size %d is different from %d)" %
        (kind, i, dim, SIG, got, want))


def broadcast(shapes: Sequence[Shape]) -> Optional[Shape]:
    """numpy's broadcast of batch shapes, or None if they do not
    broadcast."""
    nd = max((len(s) for s in shapes), default=0)
    out = [1] * nd
    for s in shapes:
        for j, d in enumerate(s, nd - len(s)):
            if d != 1:
                if out[j] not in (1, d):
                    return None
                out[j] = d
    return tuple(out)


def _fmt(shape: Sequence[object]) -> str:
    return "(" + ",".join(str(d) for d in shape) + ")"


def _remapped(shape: Shape, ncore: int) -> str:
    batch = shape[:len(shape) - ncore]
    return "%s->%s" % (_fmt(shape), _fmt(list(batch) +
                                         ["newaxis"] * ncore))


class Shapes:
    """The shapes of one matmul: a of a_shape times b of b_shape (out of
    out_shape when given). m, n, k: the core; a_batch, b_batch: the
    operands' batch shapes; batch: the result's batch shape (numpy's:
    the broadcast of the operands', or out's when out adds leading
    dimensions); shape: the result's shape; count: the number of
    problems. Raises ShapeError with numpy's words."""

    def __init__(self, a_shape: Shape, b_shape: Shape,
                 out_shape: Optional[Shape] = None) -> None:
        for i, s in enumerate((a_shape, b_shape)):
            if len(s) == 0:
                raise ShapeError(
                    "matmul: Input operand %d does not have enough "
                    "dimensions (has 0, gufunc core with signature %s "
                    "requires 1)" % (i, SIG))
        self.sq_m = len(a_shape) == 1  # a 1-D: no m in the result
        self.sq_n = len(b_shape) == 1  # b 1-D: no n in the result
        a_core = (1,) + a_shape if self.sq_m else a_shape[-2:]
        b_core = b_shape + (1,) if self.sq_n else b_shape[-2:]
        self.m, self.k = a_core
        k2, self.n = b_core
        if k2 != self.k:
            raise core_mismatch("Input", 1, 0, k2, self.k)
        self.a_batch: Shape = tuple(a_shape[:-2])
        self.b_batch: Shape = tuple(b_shape[:-2])
        core: Shape = (((self.m,) if not self.sq_m else ()) +
                       ((self.n,) if not self.sq_n else ()))
        shapes = [self.a_batch, self.b_batch]
        if out_shape is not None:
            oc = len(core)
            if len(out_shape) < oc:
                raise ShapeError(
                    "matmul: Output operand 0 does not have enough "
                    "dimensions (has %d, gufunc core with signature %s "
                    "requires %d)" % (len(out_shape), SIG, oc))
            for d, (g, w) in enumerate(zip(out_shape[len(out_shape) - oc:],
                                           core)):
                if g != w:
                    raise core_mismatch("Output", 0, d, g, w)
            shapes.append(tuple(out_shape[:len(out_shape) - oc]))
        batch = broadcast(shapes)
        if batch is None:
            nc = [1 if self.sq_m else 2, 1 if self.sq_n else 2]
            parts = [_remapped(a_shape, nc[0]), _remapped(b_shape, nc[1])]
            if out_shape is not None:
                parts.append(_remapped(out_shape, len(core)))
            raise ShapeError(
                "operands could not be broadcast together with remapped "
                "shapes [original->remapped]: %s  and requested shape %s" %
                (" ".join(parts), _fmt(core)))
        if out_shape is not None and batch != shapes[2]:
            raise ShapeError(
                "matmul: non-broadcastable output operand with shape %s "
                "doesn't match the broadcast shape %s" %
                (_fmt(out_shape), _fmt(batch + core)))
        self.batch: Shape = batch
        self.shape: Shape = batch + core
        self.count = math.prod(batch)


def batch_offsets(shape: Shape, strides: Sequence[int],
                  batch: Shape) -> np.ndarray:
    """The byte offset of each problem's matrix from the first, for an
    operand whose batch dimensions have this shape and these strides,
    broadcast to batch (size-1 and missing dimensions repeat: offset 0);
    problems in C order of batch. An int64 array of prod(batch)."""
    nd = len(batch)
    if nd == 0:
        return np.zeros(1, np.int64)
    off = np.zeros((), np.int64)
    for j in range(nd):
        jj = j - (nd - len(shape))
        s = strides[jj] if jj >= 0 and shape[jj] != 1 else 0
        off = np.add.outer(off, np.arange(batch[j], dtype=np.int64) * s)
    return off.reshape(-1)


def single_stride(offs: np.ndarray) -> Optional[int]:
    """s >= 0 when offs[i] == offs[0] + i * s for every i (one stride: a
    strided batch), else None."""
    if offs.size <= 1:
        return 0
    s = int(offs[1] - offs[0])
    if s < 0:
        return None
    want = offs[0] + s * np.arange(offs.size, dtype=np.int64)
    return s if np.array_equal(offs, want) else None


def core_layout(rows: int, cols: int, s0: int, s1: int,
                isz: int) -> Optional[Tuple[bool, int]]:
    """A rows x cols matrix of isz-byte elements with byte strides s0, s1
    as a GEMM operand: (transposed, leading dimension in elements) when
    its elements lie in rows or in columns with a stride, None when
    neither (it must be copied)."""
    if (cols == 1 or s1 == isz) and (rows == 1 or (s0 > 0 and s0 % isz == 0
                                                   and s0 // isz >= cols)):
        return False, (s0 // isz if rows > 1 else cols)
    if (rows == 1 or s0 == isz) and (cols == 1 or (s1 > 0 and s1 % isz == 0
                                                   and s1 // isz >= rows)):
        return True, (s1 // isz if cols > 1 else rows)
    return None


def extent(rows: int, cols: int, ld: int, trans: bool, isz: int) -> int:
    """Bytes from a matrix's first element to past its last, as gemmd
    counts them (stored rows x cols, or cols x rows when transposed)."""
    r, c = (cols, rows) if trans else (rows, cols)
    return ((r - 1) * ld + c) * isz


def squeeze_repeats(arr: np.ndarray, nb: int) -> np.ndarray:
    """arr with each of its first nb (batch) dimensions whose stride is 0
    cut to size 1: the same matrices without the repeats (a copy of it
    then holds each distinct matrix once)."""
    idx = tuple(slice(0, 1) if arr.strides[j] == 0 and arr.shape[j] > 1
                else slice(None) for j in range(nb))
    return arr[idx] if any(s != slice(None) for s in idx) else arr


def disjoint(offs: np.ndarray, ext: int) -> bool:
    """Whether matrices of ext bytes at these offsets never overlap (a
    result's problems must not write each other's elements)."""
    if offs.size <= 1:
        return True
    s = np.sort(offs)
    return bool(np.all(np.diff(s) >= ext))
