"""Grouped matmul: lists of products of different shapes (a
mixture-of-experts layer: one product per expert, M tokens each, M = 0
for an expert with none) in one batch request.

GroupPlan checks every problem as a single matmul does (_gemm._Plan),
with one multiply type and one result type for all; an error names the
problem (``.problem``). Problems with nothing to compute (M, N or K of 0)
are answered here, after the request succeeded, and are not sent.
GroupCall places the operands on a connection: in place when they are
its memory, else copied into one staging buffer; results without ``out``
are carved from one buffer (views of it).
"""
from __future__ import annotations

import functools
from typing import (TYPE_CHECKING, Any, Dict, List, Optional, Sequence,
                    Tuple, Union)

import numpy as np

from . import _copy, _dtypes
from ._batch import BatchCall, Request, _Slot, carve, in_place, stage, \
    staged_shape, tensor_slot
from ._conn import _Conn
from ._errors import DTypeError, GemmError, InvalidArgument, ShapeError
from ._gemm import _Plan, fill_op
from ._tensor import Tensor

if TYPE_CHECKING:
    from ._gemm import DTypeLike
    from ._tensor import _Owner


def _per_problem(x: Any, n: int, what: str) -> Tuple[List[Any], bool]:
    """x as one value per problem, and whether it was given per problem
    (a sequence) rather than once (a scalar)."""
    if np.ndim(x) == 0:
        return [x] * n, False
    xs = list(x)
    if len(xs) != n:
        raise InvalidArgument(
            "matmul_grouped: %s has %d values for %d problems (give one "
            "per problem, or one number for all)" % (what, len(xs), n))
    return xs, True


def _list(x: Any, n: int, what: str) -> List[Any]:
    if x is None:
        return [None] * n
    if isinstance(x, np.ndarray):
        raise InvalidArgument(
            "matmul_grouped: %s must be a list with one array (or None) "
            "per problem, not an array" % what)
    xs = list(x)
    if len(xs) != n:
        raise InvalidArgument(
            "matmul_grouped: %s has %d entries for %d problems" %
            (what, len(xs), n))
    return xs


def _common_dtype(xs: Sequence[Any]) -> np.dtype:
    dts = [np.dtype(x.dtype) for x in xs]
    return functools.reduce(_dtypes.promote, dts)


class GroupPlan:
    """The problems of a grouped matmul, checked before anything is sent:
    ``plans`` (one _Plan each), ``live`` (the indexes of those gemmd
    computes), ``scalars`` (per-problem alpha/beta, or None)."""

    def __init__(self, As: Sequence[Any], Bs: Sequence[Any], out: Any,
                 c: Any, alpha: Any, beta: Any, dtype: Optional[DTypeLike],
                 out_dtype: Optional[DTypeLike],
                 precision: Optional[Union[str, int]],
                 kernel: Optional[str], client: _Owner) -> None:
        if isinstance(As, np.ndarray) or isinstance(Bs, np.ndarray):
            raise InvalidArgument(
                "matmul_grouped: a and b must be lists of matrices (one "
                "per problem); for a stack in one array use matmul")
        As = [x if isinstance(x, (np.ndarray, Tensor)) else np.asarray(x)
              for x in As]
        Bs = [x if isinstance(x, (np.ndarray, Tensor)) else np.asarray(x)
              for x in Bs]
        n = len(As)
        if len(Bs) != n:
            raise InvalidArgument(
                "matmul_grouped: %d a's and %d b's (one b per a)" %
                (n, len(Bs)))
        outs = _list(out, n, "out")
        cs = _list(c, n, "c")
        alphas, pa = _per_problem(alpha, n, "alpha")
        betas, pb = _per_problem(beta, n, "beta")
        for i, x in enumerate(As + Bs):
            if x.ndim > 2:
                raise ShapeError(
                    "matmul_grouped: problem %d: %s has shape %s: each "
                    "problem is one product of matrices (2-D) or vectors; "
                    "multiply stacks with matmul" %
                    (i % n, "a" if i < n else "b", x.shape), problem=i % n)
        if dtype is None and n:
            try:
                dtype = _dtypes.require(_common_dtype(As + Bs),
                                        "matmul_grouped").name
            except DTypeError as e:
                raise DTypeError(
                    "%s; pass dtype= (e.g. dtype='float32') to convert the "
                    "inputs" % e.message) from None
        self.plans: List[_Plan] = []
        for i in range(n):
            try:
                p = _Plan(As[i], Bs[i], outs[i], cs[i], alphas[i], betas[i],
                          dtype, out_dtype, precision, kernel, client)
            except GemmError as e:
                msg = e.message.replace("matmul: ", "", 1)
                raise type(e)("matmul_grouped: problem %d: %s" % (i, msg),
                              e.code, i) from None
            self.plans.append(p)
        if self.plans and self.plans[0].moduli:
            raise InvalidArgument(
                "matmul_grouped: precision=%d (Ozaki-II moduli) applies to "
                "single float64 products; a grouped request takes no "
                "modulus count: call matmul per problem, or leave precision "
                "out" % self.plans[0].moduli)
        self.live = [i for i, p in enumerate(self.plans) if not p.empty]
        cds = {p.cd.name for p in self.plans}
        if len(cds) > 1:
            first = self.plans[0].cd.name
            j = next(i for i, p in enumerate(self.plans)
                     if p.cd.name != first)
            raise DTypeError(
                "matmul_grouped: problem 0 gives %s, problem %d %s: one "
                "request has one result type (pass out_dtype=, or out "
                "arrays of one type)" % (first, j, self.plans[j].cd.name),
                problem=j)
        self.scalars: Optional[Dict[str, np.ndarray]] = None
        if (pa or pb) and self.live:
            al = np.array([complex(self.plans[i].alpha) for i in self.live])
            be = np.array([complex(self.plans[i].beta) for i in self.live])
            self.scalars = {"alpha_re": al.real, "alpha_im": al.imag,
                            "beta_re": be.real, "beta_im": be.imag}


class GroupCall(BatchCall):
    """A grouped matmul on conn (the caller holds conn.enter())."""

    def __init__(self, conn: _Conn, gp: GroupPlan) -> None:
        super().__init__(conn)
        self.gp = gp
        plans = [gp.plans[i] for i in gp.live]
        cnt = len(plans)
        p0 = plans[0]
        ab, cd = p0.ab.np, p0.cd.np
        req = self.req = Request(cnt)
        fill_op(req.op, p0)
        todo: List[Tuple[int, str, np.ndarray]] = []  # staged inputs
        slots: Dict[Tuple[int, str], _Slot] = {}
        placed: List[Tuple[_Slot, np.ndarray]] = []  # inputs in place

        # A and B: tensors, in place, or to be staged
        for j, p in enumerate(plans):
            for name, x in (("a", p.A), ("b", p.B)):
                if isinstance(x, Tensor):
                    slots[j, name] = tensor_slot(x, conn, 1)
                    continue
                s = in_place(x, conn, ab, ())
                if s is None:
                    todo.append((j, name, x))
                else:
                    slots[j, name] = s
                    placed.append((s, x))

        # D: out in place unless it overlaps an input or another D
        self.direct = [False] * cnt
        directs: List[Tuple[_Slot, np.ndarray]] = []
        for j, p in enumerate(plans):
            if p.out2 is None:
                continue
            d = in_place(p.out2, conn, cd, (), trans_ok=False)
            if d is not None and not any(
                    s.ptr == d.ptr and np.may_share_memory(p.out2, x)
                    for s, x in placed + directs):
                slots[j, "d"] = d
                directs.append((d, p.out2))
                self.direct[j] = True
        mine = [j for j in range(cnt) if not self.direct[j]]
        self.d_arrs: Dict[int, np.ndarray] = dict(zip(mine, carve(
            conn, [((plans[j].m, plans[j].n), cd) for j in mine])))
        self.ours.extend(self.d_arrs.values())
        for j, arr in self.d_arrs.items():
            slots[j, "d"] = in_place(arr, conn, cd, ())

        # C (read when beta != 0)
        into_d: List[int] = []
        for j, p in enumerate(plans):
            C = p.C
            if C is None:
                continue
            if isinstance(C, Tensor):
                slots[j, "c"] = tensor_slot(C, conn, 1)
            elif p.c_is_out and self.direct[j]:
                slots[j, "c"] = slots[j, "d"]
            else:
                s = in_place(C, conn, cd, (), trans_ok=False)
                if s is not None and not any(
                        d.ptr == s.ptr and np.may_share_memory(C, x)
                        for d, x in directs):
                    slots[j, "c"] = s
                elif not self.direct[j]:
                    into_d.append(j)
                    slots[j, "c"] = slots[j, "d"]
                else:
                    todo.append((j, "c", C))

        # the copies: inputs into one staging buffer, C into our D
        dts = {"a": ab, "b": ab, "c": cd}
        st = carve(conn, [(tuple(staged_shape(x)) if nm != "c" else
                           x.shape, dts[nm]) for _, nm, x in todo])
        self.keep.extend(st)
        for (j, nm, x), arr in zip(todo, st):
            if nm == "c":
                _copy.copy(arr, x)
                slots[j, nm] = in_place(arr, conn, cd, ())
            else:
                slots[j, nm] = stage(x, arr, (), _copy.copy)
        for j in into_d:
            _copy.copy(self.d_arrs[j], plans[j].C)

        req.build(np.array([p.m for p in plans], np.uint64),
                  np.array([p.n for p in plans], np.uint64),
                  np.array([p.k for p in plans], np.uint64),
                  {nm: _column([slots.get((j, nm)) for j in range(cnt)])
                   for nm in ("a", "b", "c", "d")},
                  gp.scalars)

    def problem_index(self, i: int) -> int:
        return self.gp.live[i]

    def finish(self) -> List[Any]:
        """The results, in the caller's order."""
        gp = self.gp
        res: List[Any] = [None] * len(gp.plans)
        for i, p in enumerate(gp.plans):
            if p.empty:
                res[i] = p.local_result()
        for j, i in enumerate(gp.live):
            p = gp.plans[i]
            if self.direct[j]:
                res[i] = p.out
                continue
            d = self.d_arrs[j]
            if p.out is not None:
                _copy.copy(p.out2, d)
                res[i] = p.out
            else:
                res[i] = d.reshape(p.shape) if p.shape else d[0, 0]
        return res

    def release(self) -> None:
        super().release()
        self.d_arrs = {}
        self.ours = []


def _column(slots: List[Optional[_Slot]]) -> Optional[_Slot]:
    """One slot of per-problem columns from one slot per problem (None
    when no problem has the operand: no C)."""
    if all(s is None for s in slots):
        return None
    z = _Slot(0, np.zeros(1, np.int64), 0)
    ss = [s if s is not None else z for s in slots]
    return _Slot(np.array([s.ptr or 0 for s in ss], np.uint64),
                 np.array([int(s.offs[0]) for s in ss], np.int64),
                 np.array([s.ld for s in ss], np.uint64),
                 np.array([bool(s.trans) for s in ss]),
                 np.array([s.tensor for s in ss], np.uint64),
                 np.array([s.conj for s in ss]))


def run(conn: _Conn, gp: GroupPlan) -> List[Any]:
    """A grouped matmul on conn, waiting for it (caller holds
    conn.enter())."""
    return GroupCall(conn, gp).run()
