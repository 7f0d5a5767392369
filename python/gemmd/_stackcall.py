"""numpy's stacked matmul as one batch request: a _Plan with batch
dimensions made concrete on a connection.

Each operand is used in place when it is this connection's memory (its
batch dimensions become per-problem offsets, a broadcast dimension offset
0, a transposed view the transpose flag, a row stride the leading
dimension) and copied otherwise, each distinct matrix once (a broadcast
operand is not repeated in the copy). D is ``out`` in place when it can
be, else a new C-ordered array that is the result or is copied into
``out``. C follows the single GEMM's rules (_gemm._Call).
"""
from __future__ import annotations

from typing import Any, Optional

import numpy as np

from . import _copy, _stack
from ._batch import BatchCall, Request, _Slot, in_place, stage, \
    staged_shape, tensor_slot
from ._conn import _Conn
from ._gemm import _Plan, fill_op
from ._tensor import Tensor


def _same(x: _Slot, y: _Slot) -> bool:
    return (x.ptr == y.ptr and x.ld == y.ld and
            np.array_equal(x.offs, y.offs))


class StackCall(BatchCall):
    """One stacked matmul on conn (the caller holds conn.enter())."""

    def __init__(self, conn: _Conn, plan: _Plan) -> None:
        super().__init__(conn)
        self.plan = plan
        batch, count = plan.batch, plan.count
        ab, cd = plan.ab.np, plan.cd.np
        req = self.req = Request(count)
        fill_op(req.op, plan)
        a = self._input(plan.A, ab)
        b = self._input(plan.B, ab)

        # D: out in place, else an array of ours
        self.d_direct = False
        self.d_arr: Optional[np.ndarray] = None
        d: Optional[_Slot] = None
        out = plan.out2
        if out is not None:
            d = in_place(out, conn, cd, batch, trans_ok=False)
            isz = cd.itemsize
            if d is not None and (
                    not _stack.disjoint(d.offs, _stack.extent(
                        plan.m, plan.n, d.ld, False, isz)) or
                    any(s.ptr == d.ptr and np.may_share_memory(out, x)
                        for s, x in ((a, plan.A), (b, plan.B))
                        if s.tensor == 0)):
                d = None
            self.d_direct = d is not None
        if d is None:
            self.d_arr = conn.array(plan.full, cd)
            self.ours.append(self.d_arr)
            d = in_place(self.d_arr, conn, cd, batch)

        # C (read when beta != 0)
        c: Optional[_Slot] = None
        C = plan.C
        if C is None:
            pass
        elif isinstance(C, Tensor):
            c = tensor_slot(C, conn, count)
        elif plan.c_is_out and self.d_direct:
            c = d
        else:
            c = in_place(C, conn, cd, batch, trans_ok=False)
            if c is not None and self.d_direct and c.ptr == d.ptr and \
                    np.may_share_memory(C, out) and not _same(c, d):
                c = None
            if c is None and not self.d_direct:
                _copy.copy(self.d_arr, C)  # C in D's own memory
                c = d
            elif c is None:
                cs = conn.array(plan.full, cd)
                _copy.copy(cs, C)
                self.keep.append(cs)
                c = in_place(cs, conn, cd, batch)
        req.build(plan.m, plan.n, plan.k, {"a": a, "b": b, "c": c, "d": d})

    def _input(self, x: Any, dt: np.dtype) -> _Slot:
        """A or B over the batch: a tensor, in place, or a copy."""
        p = self.plan
        if isinstance(x, Tensor):
            return tensor_slot(x, self.conn, p.count)
        s = in_place(x, self.conn, dt, p.batch)
        if s is not None:
            return s
        st = self.conn.array(tuple(staged_shape(x)), dt)
        self.keep.append(st)
        return stage(x, st, p.batch, _copy.copy)

    def describe(self, i: int) -> str:
        idx = np.unravel_index(i, self.plan.batch)
        return "problem %d (batch index %s)" % (
            i, tuple(int(j) for j in idx))

    def finish(self) -> Any:
        """The result after success: out (filled), or the new array."""
        p = self.plan
        if p.out is not None:
            if not self.d_direct:
                _copy.copy(p.out2, self.d_arr)
            return p.out
        return self.d_arr.reshape(p.shape)

    def release(self) -> None:
        super().release()
        self.d_arr = None
        self.ours = []


def run(conn: _Conn, plan: _Plan) -> Any:
    """One stacked matmul on conn, waiting for it (caller holds
    conn.enter())."""
    return StackCall(conn, plan).run()

