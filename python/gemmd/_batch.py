"""Many GEMMs in one batch request: where each problem's operands are
(slots), the gemm_batch that carries them, and its call on a connection
(submitted, waited for, its refusal raised with the bad problem's index).

A _Slot is one operand (A, B, C or D) across the problems: a buffer and
a byte offset per problem (or a resident tensor), a leading dimension
and a transpose flag. When every slot has one buffer, one leading
dimension, one transpose and offsets a single stride apart (0 for an
operand shared by all problems), the request is a strided batch;
otherwise a grouped one listing every problem (a numpy structured array
laid out as gemm_problem[], filled column by column).

Used by _stackcall (numpy's stacked matmul) and _grouped (lists of
products). Below _client; above _gemm.
"""
from __future__ import annotations

import ctypes
import math
import re
from typing import Any, Callable, Dict, List, Optional, Sequence

import numpy as np

from . import _stack
from ._capi import GemmBatchBox, GemmMatrix, GemmProblem
from ._conn import _Conn, _Lost, _buffer_of, _OK, _ERR_CLOSED
from ._errors import Unsupported
from ._gemm import _MAYBE_RUNNING, tensor_id
from ._tensor import Tensor

_PROBLEM = re.compile(r"\bproblem (\d+)")

ColumnLike = Any  # a scalar, or an array of one value per problem


class _Slot:
    """One operand of every problem of a batch. Each field is one value
    for all problems or an array of one per problem."""

    __slots__ = ("ptr", "offs", "ld", "trans", "tensor", "conj")

    def __init__(self, ptr: ColumnLike, offs: np.ndarray, ld: ColumnLike,
                 trans: ColumnLike = False, tensor: ColumnLike = 0,
                 conj: ColumnLike = False) -> None:
        self.ptr = ptr  # gemm_buffer * (int; uint64 array), None/0: tensor
        self.offs = offs  # int64 byte offsets, one per problem
        self.ld = ld  # elements
        self.trans = trans
        self.tensor = tensor  # resident tensor id, 0 for a buffer
        self.conj = conj  # conjugate transpose (complex tensors)


def tensor_slot(t: Tensor, conn: _Conn, count: int) -> _Slot:
    """A resident tensor shared by count problems. Raises as a single
    GEMM does for a freed tensor or one of another connection."""
    return _Slot(None, np.zeros(count, np.int64), 0, t.trans,
                 tensor_id(t, conn), t.conj)


def in_place(arr: np.ndarray, conn: _Conn, dt: np.dtype,
             batch: _stack.Shape, trans_ok: bool = True) -> Optional[_Slot]:
    """arr (batch dimensions, then the matrix) as a slot over batch
    without a copy, when it is conn's memory of type dt laid out as rows
    or columns with a stride (columns only if trans_ok) and every
    problem's matrix lies inside its buffer; None otherwise."""
    if arr.dtype != dt:
        return None
    buf = _buffer_of(arr)
    if buf is None or buf.conn is not conn:
        return None
    rows, cols = arr.shape[-2:]
    isz = dt.itemsize
    lay = _stack.core_layout(rows, cols, arr.strides[-2], arr.strides[-1],
                             isz)
    if lay is None or (lay[0] and not trans_ok):
        return None
    trans, ld = lay
    base = arr.__array_interface__["data"][0] - buf.addr
    ext = _stack.extent(rows, cols, ld, trans, isz)
    if not batch:  # one matrix (a grouped problem): no arrays to scan
        if base < 0 or base % isz or base + ext > buf.size:
            return None
        return _Slot(buf.ptr, np.array([base], np.int64), ld, trans)
    offs = base + _stack.batch_offsets(arr.shape[:-2], arr.strides[:-2],
                                       batch)
    if offs.size and (offs.min() < 0 or np.any(offs % isz) or
                      offs.max() + ext > buf.size):
        return None
    return _Slot(buf.ptr, offs, ld, trans)


def staged_shape(arr: np.ndarray) -> Sequence[int]:
    """The shape of arr's staging copy: its distinct matrices (repeats
    along stride-0 batch dimensions dropped), each transposed when arr's
    matrices are column-ordered (the copy then runs along rows)."""
    src = _stack.squeeze_repeats(arr, arr.ndim - 2)
    if _column_ordered(src):
        return src.shape[:-2] + (src.shape[-1], src.shape[-2])
    return src.shape


def _column_ordered(arr: np.ndarray) -> bool:
    return arr.shape[-2] > 1 and arr.strides[-2] < arr.strides[-1]


def stage(arr: np.ndarray, st: np.ndarray, batch: _stack.Shape,
          copy: Callable[[np.ndarray, Any], None]) -> _Slot:
    """Copies arr's distinct matrices into st (a C-ordered array of
    staged_shape(arr) in a buffer) and returns st as arr's slot over
    batch."""
    src = _stack.squeeze_repeats(arr, arr.ndim - 2)
    trans = _column_ordered(src)
    if trans:
        src = np.swapaxes(src, -1, -2)
    copy(st, src)
    buf = _buffer_of(st)
    base = st.__array_interface__["data"][0] - buf.addr
    offs = base + _stack.batch_offsets(st.shape[:-2], st.strides[:-2],
                                       batch)
    return _Slot(buf.ptr, offs, st.shape[-1], trans)


ALIGN = 256  # bytes between the pieces carved from one buffer


def carve(conn: _Conn, pieces: Sequence[Any]) -> List[np.ndarray]:
    """C-ordered arrays of the (shape, dtype) pieces, all in one new
    buffer of conn (one allocation, each piece ALIGN-aligned): the
    staging copies or the results of a grouped call. Each keeps the
    buffer alive. The caller holds conn.enter()."""
    offs, total = [], 0
    for shape, dt in pieces:
        offs.append(total)
        nb = dt.itemsize * math.prod(shape)
        total += (nb + ALIGN - 1) // ALIGN * ALIGN
    if not pieces:
        return []
    raw = conn.array((max(total, 1),), np.dtype(np.uint8))
    out = []
    for (shape, dt), o in zip(pieces, offs):
        nb = dt.itemsize * math.prod(shape)
        out.append(raw[o:o + nb].view(dt).reshape(shape))
    return out


def _uniform(x: ColumnLike) -> bool:
    """Whether x has one value for all problems."""
    return not isinstance(x, np.ndarray) or bool(np.all(x == x.flat[0]))


def _one(x: ColumnLike) -> Any:
    """x's value (the first problem's)."""
    return x.flat[0] if isinstance(x, np.ndarray) else x


class Request:
    """A gemm_batch of count problems: the shared op (types, scalars,
    precision, kernel: filled by the caller through ``op``), the slots,
    and per-problem m, n, k and scalars when they differ."""

    def __init__(self, count: int) -> None:
        self.count = count
        self.box = GemmBatchBox()  # zeroed room past the mirror
        self.op = self.box.batch.op
        self.problems: Optional[np.ndarray] = None  # gemm_problem[]

    def build(self, m: ColumnLike, n: ColumnLike, k: ColumnLike,
              slots: Dict[str, Optional[_Slot]],
              scalars: Optional[Dict[str, np.ndarray]] = None) -> None:
        """Fills the batch: strided when it can be, grouped otherwise.
        scalars: per-problem alpha_re, alpha_im, beta_re, beta_im."""
        b = self.box.batch
        strides: Dict[str, int] = {}
        ok = scalars is None and all(_uniform(v) for v in (m, n, k))
        for name, s in slots.items():
            if not ok:
                break
            if s is None:
                strides[name] = 0
                continue
            st = _stack.single_stride(s.offs)
            ok = st is not None and all(
                _uniform(v) for v in (s.ptr, s.ld, s.trans, s.tensor,
                                      s.conj))
            strides[name] = st or 0
        if ok:
            op = self.op
            op.m, op.n, op.k = int(_one(m)), int(_one(n)), int(_one(k))
            for name, s in slots.items():
                if s is None:
                    continue
                ptr = _one(s.ptr)
                setattr(op, name, GemmMatrix(int(ptr) if ptr else None,
                                             int(s.offs[0]),
                                             int(_one(s.ld)),
                                             int(_one(s.tensor))))
                if name in ("a", "b"):
                    setattr(op, "trans_" + name, bool(_one(s.trans)))
                    setattr(op, "conj_" + name, bool(_one(s.conj)))
            b.count = self.count
            b.stride_a, b.stride_b = strides["a"], strides["b"]
            b.stride_c, b.stride_d = strides.get("c", 0), strides["d"]
            return
        for name in ("a", "b"):
            if slots[name] is not None and np.any(slots[name].conj):
                raise Unsupported(
                    "matmul: a conjugate-transposed tensor (tensor.H) in a "
                    "batch whose operands are not evenly strided: gemmd "
                    "takes conjugates only in strided batches; make the "
                    "other operands C-ordered arrays (np.ascontiguousarray)"
                    " or use tensor.T on conjugated data")
        p = np.zeros(self.count, np.dtype(GemmProblem))
        p["m"], p["n"], p["k"] = m, n, k
        for name, s in slots.items():
            if s is None:
                continue
            col = p[name]
            col["buf"] = 0 if s.ptr is None else s.ptr  # 0: a tensor
            col["offset"] = s.offs
            col["ld"] = s.ld
            col["tensor"] = s.tensor
            if name in ("a", "b"):
                p["trans_" + name] = s.trans
        if scalars is not None:
            p["scalars"] = True
            for f, v in scalars.items():
                p[f] = v
        self.problems = p
        b.count = 0
        b.problems = p.ctypes.data_as(ctypes.POINTER(GemmProblem))
        b.nproblems = self.count


class BatchCall:
    """A batch request in flight on one connection, with what it needs
    kept alive and what to do when it completes (the _Pending of
    _conn.post). Subclasses fill req and implement finish()."""

    def __init__(self, conn: _Conn) -> None:
        self.conn = conn
        self.req: Optional[Request] = None
        self.keep: List[Any] = []  # staging arrays: alive until done
        self.ours: List[np.ndarray] = []  # D buffers of ours

    def problem_index(self, i: int) -> int:
        """The caller's index of the request's problem i."""
        return i

    def describe(self, i: int) -> str:
        """How the caller would name its problem i in a message."""
        return "problem %d" % i

    def error(self, rv: int) -> BaseException:
        """The exception for a failure: the daemon's words, with the
        caller's index of the bad problem in them and in ``.problem``."""
        e = self.conn.error(rv)
        fn = self.conn.lib.gemm_last_error_problem
        idx = fn() if fn is not None else -1
        if idx < 0:
            m = _PROBLEM.search(e.message)
            idx = int(m.group(1)) if m else -1
        if idx >= 0 and (self.req is None or idx < self.req.count):
            mine = self.problem_index(idx)
            msg = _PROBLEM.sub(lambda _: self.describe(mine), e.message, 1)
            if msg == e.message:
                msg = "%s: %s" % (self.describe(mine), e.message)
            e = type(e)(msg, e.code, mine)
        return e

    def submit(self) -> int:
        """Sends the request; its gemm_request *. Raises _Lost when it was
        not sent because the connection is gone (safe to send again)."""
        lib = self.conn.lib
        if lib.gemm_batch_submit is None:
            raise Unsupported(
                "matmul: this libgemmclient (%s) has no batched GEMM "
                "(gemm_batch_submit): install a newer gemmd, or multiply "
                "the matrices of the stack one by one" % lib.path)
        req = ctypes.c_void_p()
        rv = lib.gemm_batch_submit(self.conn.h,
                                   ctypes.byref(self.req.box.batch),
                                   ctypes.byref(req))
        if rv == _ERR_CLOSED:
            self.conn.lost = True
            raise _Lost()
        if rv != _OK:
            raise self.error(rv)
        return req.value

    def run(self) -> Any:
        """Submits the request and waits for it (caller holds
        conn.enter()): the result, or the failure raised."""
        try:
            req = self.submit()
            rv = self.conn.lib.gemm_wait(req, None)
            if rv != _OK:
                self.failed(rv)
                raise self.error(rv)
            return self.finish()
        finally:
            self.release()

    def failed(self, rv: int) -> None:
        """After a failure that may leave the request running in gemmd:
        our D buffers must never be handed out again."""
        if rv in _MAYBE_RUNNING:
            for d in self.ours:
                buf = _buffer_of(d)
                if buf is not None:
                    buf.tainted = True

    def finish(self) -> Any:
        raise NotImplementedError

    def release(self) -> None:
        """Drops the staging arrays (their buffers return to the pool)."""
        self.keep = []
        self.req = None

