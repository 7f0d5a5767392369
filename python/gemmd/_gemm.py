"""One GEMM: its plan (shapes, types, options checked before anything is
sent, with numpy's wording) and its call on a connection (operands in
place or copied into staging buffers, the gemm_op, what happens when it
completes).

An operand already in a buffer of the connection is used in place: a
transposed view becomes the transpose flag, a row stride the leading
dimension. Anything else is copied into a pooled staging buffer (a
column-ordered array as its transpose, so the copy runs along rows). D is
the caller's ``out`` in place when it can be, else a buffer of ours that
becomes the result (or is copied into ``out``).

Imports flow one way: _conn <- _tensor <- _gemm <- _batch <- _stackcall,
_grouped <- _client (_stack, pure shape planning, below them all). A
_Call is what _conn's waiters complete (its _Pending); the client is
only an _Owner (_tensor) here. Stacks (operands of more than two
dimensions) are planned here and run by _stackcall.
"""
from __future__ import annotations

import ctypes

import numpy as np

from . import _capi, _copy, _dtypes, _fill, _stack
from ._capi import GemmMatrix, GemmOp, GemmOpBox
from ._conn import _Buffer, _Conn, _Lost, _buffer_of, _OK, _ERR_CLOSED
from ._errors import (ConnectionClosed, DTypeError, InvalidArgument,
                      ShapeError)
from ._tensor import Tensor

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing costs a fresh process ~4 ms: checkers only
    from typing import Any, List, Optional, Tuple, Union

    from ._tensor import _Owner

    ArrayLike = Any  # numpy array, or anything np.asarray takes
    Operand = Any  # Tensor or ArrayLike
    DTypeLike = Any  # numpy dtype, type, name ("bfloat16", "fp16", ...)

# Failures after which the daemon may still write the request's D.
# TIMEOUT, CLOSED, PROTOCOL, IO, INTERNAL, ABANDONED (TIMEOUT means "not
# started" since timeouts cancel; kept here for older libraries).
_MAYBE_RUNNING = {4, 5, 6, 21, 23, 27}

_PRECISIONS = {None: 0, "default": 0, "tf32": 1, "fp32": 2}


# ---- planning a GEMM ----------------------------------------------------


class _Plan:
    """A GEMM's shapes, types and options, checked before anything is sent;
    independent of the connection it will run on.

    Operands of more than two dimensions are stacks (numpy's matmul):
    ``batch`` is the result's batch shape, ``count`` the number of
    problems, A and B keep their batch dimensions (a 1-D a as (1, k), a
    1-D b as (k, 1)), ``out2`` and ``C`` are batch + (m, n) views. A
    stack of one problem is planned as one GEMM (batch ()).
    """

    def __init__(self, a: Operand, b: Operand, out: Optional[np.ndarray],
                 c: Optional[Operand], alpha: float, beta: float,
                 dtype: Optional[DTypeLike], out_dtype: Optional[DTypeLike],
                 precision: Optional[Union[str, int]],
                 kernel: Optional[str], client: _Owner) -> None:
        A = self._input(a, 0, client)
        B = self._input(b, 1, client)
        shapes = (A.shape, B.shape)
        sh = _stack.Shapes(*shapes)
        self.A = A.reshape(1, -1) if A.ndim == 1 else A
        self.B = B.reshape(-1, 1) if B.ndim == 1 else B
        self.m, self.n, self.k = sh.m, sh.n, sh.k
        self._shapes(sh)

        # types
        ta = self.A.dtype if isinstance(self.A, Tensor) else None
        tb = self.B.dtype if isinstance(self.B, Tensor) else None
        if dtype is not None:
            self.ab = _dtypes.require(dtype, "matmul: dtype")
        else:
            spec = _dtypes.promote(np.dtype(self.A.dtype),
                                   np.dtype(self.B.dtype))
            try:
                self.ab = _dtypes.require(spec, "matmul")
            except DTypeError as e:
                raise DTypeError(
                    "%s; pass dtype= (e.g. dtype='float32') to convert the "
                    "inputs" % e.message) from None
        if not self.ab.outs:
            raise DTypeError(
                "matmul: gemmd does not multiply %s inputs (%s is the "
                "result type of int8 inputs); pass dtype='int8' when the "
                "values fit in -128..127, else dtype='float64'" %
                (self.ab.name, self.ab.name))
        if self.ab.integer:
            for x, i in ((self.A, 0), (self.B, 1)):
                if not isinstance(x, Tensor) and \
                        np.dtype(x.dtype).kind not in "biu":
                    raise DTypeError(
                        "matmul: operand %d is %s and the multiply is in "
                        "%s: gemmd does not round floats into integers "
                        "(as numpy's matmul, casting='same_kind'); convert "
                        "it yourself, e.g. np.rint(a).astype(np.int8), or "
                        "pass dtype='float32'" %
                        (i, np.dtype(x.dtype).name, self.ab.name))
        for t, i in ((ta, 0), (tb, 1)):
            if t is not None and t != self.ab.np:
                raise DTypeError(
                    "matmul: resident tensor operand %d holds %s, the "
                    "multiply is in %s (tensors are not converted)" %
                    (i, t, self.ab.name))
        if out is not None and not isinstance(out, np.ndarray):
            raise TypeError("matmul: out must be a numpy array, not %s" %
                            type(out).__name__)
        natural = (self.ab if self.ab.name in self.ab.outs else
                   _dtypes.TABLE[self.ab.outs[0]])
        self.cd = natural
        if out_dtype is not None:
            self.cd = _dtypes.require(out_dtype, "matmul: out_dtype")
        elif out is not None:
            # out's type when gemmd writes it; else gemmd's result cast
            # into out as numpy casts (same_kind: float32 into float64)
            row = _dtypes.lookup(out.dtype)
            if row is not None and row.available and row.name in self.ab.outs:
                self.cd = row
            elif not np.can_cast(natural.np, out.dtype, "same_kind"):
                raise DTypeError(
                    "matmul: Cannot cast ufunc 'matmul' output from %r to "
                    "%r with casting rule 'same_kind'" %
                    (natural.np, out.dtype))
        if self.cd.name not in self.ab.outs:
            raise DTypeError(
                "matmul: gemmd cannot write a %s result from %s inputs "
                "(it writes %s)" %
                (self.cd.name, self.ab.name, ", ".join(self.ab.outs)))
        if (out is not None and out.dtype != self.cd.np and
                out_dtype is not None):
            raise DTypeError(
                "matmul: out has dtype %s but the result is %s (pass "
                "out_dtype=%r)" % (out.dtype, self.cd.name, out.dtype.name))

        # options
        self.precision, self.moduli = _precision(precision, self.ab)
        self.kernel: Optional[bytes] = None
        if kernel is not None:
            if not isinstance(kernel, str):
                raise InvalidArgument("matmul: kernel must be a string, not "
                                      "%s" % type(kernel).__name__)
            kb = kernel.encode()
            if len(kb) > _capi.GEMM_KERNEL_NAME_MAX:
                raise InvalidArgument(
                    "matmul: kernel name %r is longer than %d bytes" %
                    (kernel, _capi.GEMM_KERNEL_NAME_MAX))
            self.kernel = kb
        try:
            if self.ab.complex:
                self.alpha: Any = complex(alpha)
                self.beta: Any = complex(beta)
            elif self.ab.integer:
                self.alpha = _int32_scalar("alpha", alpha)
                self.beta = _int32_scalar("beta", beta)
            else:
                self.alpha = float(alpha)
                self.beta = float(beta)
        except TypeError:
            raise DTypeError("matmul: alpha and beta must be real numbers "
                             "for %s (got %r, %r)" %
                             (self.ab.name, alpha, beta)) from None

        # out, then C (beta != 0: c, else out itself)
        self.out = out
        self.out2: Optional[np.ndarray] = None
        if out is not None:
            if out.shape != self.shape:  # out may add leading dimensions
                self._shapes(_stack.Shapes(*shapes, out_shape=out.shape))
            if not out.flags.writeable:
                raise InvalidArgument("matmul: output array is read-only")
            self.out2 = out.reshape(self.full)  # a view: same size
        self.C: Optional[Any] = None
        self.c_is_out = False
        if self.beta != 0.0:
            if c is None and out is None:
                raise InvalidArgument(
                    "matmul: beta=%s needs c= (or out=, which is then C)" %
                    self.beta)
            if c is None:
                self.C, self.c_is_out = self.out2, True
            elif isinstance(c, Tensor):
                if c.client is not client:
                    raise InvalidArgument("matmul: tensor c belongs to "
                                          "another client")
                if c.shape != (self.m, self.n) or c.trans or c.conj:
                    raise ShapeError(
                        "matmul: tensor c is %s, C must be %dx%d as stored" %
                        ("x".join(map(str, c.shape)), self.m, self.n))
                if c.dtype != self.cd.np:
                    raise DTypeError(
                        "matmul: tensor c holds %s, C is %s" %
                        (c.dtype, self.cd.name))
                self.C = c
            else:
                carr = np.asarray(c)
                try:
                    cb = np.broadcast_to(carr, self.shape)
                except ValueError:
                    raise ShapeError(
                        "matmul: c of shape %s cannot be broadcast to the "
                        "result's shape %s" % (carr.shape, self.shape)) \
                        from None
                self.C = cb.reshape(self.full)
        if self.moduli and self.batch:
            raise InvalidArgument(
                "matmul: precision=%d (Ozaki-II moduli) applies to one "
                "float64 product of matrices; a stack goes to gemmd as one "
                "batch request, which takes no modulus count: multiply the "
                "matrices one by one, or leave precision out" % self.moduli)

    def _shapes(self, sh: "_stack.Shapes") -> None:
        """Takes the result's shape from sh; a stack of one problem
        becomes one GEMM (its size-1 batch dimensions dropped)."""
        self.shape: Tuple[int, ...] = sh.shape
        self.count = sh.count
        self.batch: Tuple[int, ...] = sh.batch
        if sh.count == 1 and sh.batch:
            self.batch = ()
            for x in ("A", "B"):
                v = getattr(self, x)
                if v.ndim > 2:
                    setattr(self, x, v.reshape(v.shape[-2:]))
        self.full: Tuple[int, ...] = self.batch + (self.m, self.n)

    def _input(self, x: Operand, i: int, client: _Owner) -> Any:
        if isinstance(x, Tensor):
            if x.client is not client:
                raise InvalidArgument("matmul: tensor operand %d belongs to "
                                      "another client" % i)
            return x
        return x if isinstance(x, np.ndarray) else np.asarray(x)

    @property
    def empty(self) -> bool:
        """True when there is nothing for gemmd to compute."""
        return (self.m == 0 or self.n == 0 or self.k == 0 or
                self.count == 0)

    def local_result(self) -> Any:
        """The result of a GEMM with a zero dimension, computed here:
        zeros, or beta * C when k is 0 (numpy's answer)."""
        d = np.zeros(self.full, self.cd.np)
        if self.k == 0 and self.C is not None:
            if isinstance(self.C, Tensor):
                raise InvalidArgument("matmul: k = 0 with a resident "
                                      "tensor as C is not supported")
            if self.cd.integer:  # int64 wraps as int32 would, modulo 2^32
                d[...] = (np.int64(self.beta) *
                          self.C.astype(np.int64)).astype(self.cd.np)
            else:
                wide = np.complex128 if self.cd.complex else np.float64
                d[...] = (self.beta *
                          self.C.astype(wide)).astype(self.cd.np)
        if self.out is not None:
            np.copyto(self.out2, d, casting="unsafe")
            return self.out
        return d.reshape(self.shape) if self.shape else d[0, 0]


def _precision(precision: Any, ab: "_dtypes.DType") -> Tuple[int, int]:
    """precision= as (gemm_precision, moduli) for inputs of type ab:
    None, or for float32 'default', 'tf32', 'fp32'; for float64 and
    float32 an int, the Ozaki-II emulation's modulus count (2..20), or
    None / 'default' (gemmd picks). InvalidArgument (a ValueError;
    DTypeError, also a TypeError, for a value of the wrong type) naming
    the fix otherwise."""
    fp64 = ab.name == "float64"
    lo, hi = _capi.GEMM_OZ_MODULI_MIN, _capi.GEMM_OZ_MODULI_MAX
    if isinstance(precision, (int, np.integer)) and \
            not isinstance(precision, (bool, np.bool_)):
        n = int(precision)
        if not fp64 and ab.name != "float32":
            raise InvalidArgument(
                "matmul: precision=%d is a modulus count of the Ozaki-II "
                "emulation, for float64 and float32 inputs; these are %s "
                "(pass dtype='float64' or dtype='float32' to multiply in "
                "that type, or leave precision out)" % (n, ab.name))
        if not lo <= n <= hi:
            raise InvalidArgument(
                "matmul: precision=%d: a %s multiply takes %d..%d Ozaki-II "
                "moduli (fewer: faster, less accurate; ~15 match DGEMM, ~7 "
                "SGEMM), or leave precision out to let gemmd pick" %
                (n, ab.name, lo, hi))
        return 0, n
    if precision is not None and not isinstance(precision, str):
        raise DTypeError(
            "matmul: precision must be a string ('default', 'tf32', "
            "'fp32' for float32 inputs), an int (2..20 Ozaki-II moduli, "
            "for float64 and float32 inputs) or None, not %s" %
            type(precision).__name__)
    p = precision.lower() if precision is not None else None
    if p not in _PRECISIONS:
        raise InvalidArgument(
            "matmul: precision=%r is not one of 'default', 'tf32', 'fp32'%s" %
            (precision, " or a number of moduli (2..20)"
             if fp64 or ab.name == "float32" else ""))
    code = _PRECISIONS[p]
    if code != 0 and fp64:
        raise InvalidArgument(
            "matmul: precision=%r applies to float32 inputs; for float64 "
            "give the number of Ozaki-II moduli, e.g. precision=14 (%d..%d; "
            "fewer: faster, less accurate), or leave it out" %
            (precision, lo, hi))
    if code != 0 and not ab.precision:
        raise InvalidArgument(
            "matmul: precision=%r applies to float32 inputs; these are "
            "%s" % (precision, ab.name))
    return code, 0


def _int32_scalar(what: str, v: Any) -> int:
    """v as an int when it is an integer in int32's range (what int8
    GEMMs scale by); InvalidArgument naming the fix otherwise."""
    if isinstance(v, (complex, np.complexfloating)):
        raise TypeError(what)
    x = float(v)
    if not (x == x and -2 ** 31 <= x <= 2 ** 31 - 1 and x == int(x)):
        raise InvalidArgument(
            "matmul: %s=%r: int8 inputs are scaled in int32 arithmetic, so "
            "alpha and beta must be integers in -2147483648..2147483647 "
            "(scale the int32 result yourself, or pass dtype='float32' for "
            "a fractional scale)" % (what, v))
    return int(x)


# ---- one GEMM on one connection ------------------------------------------


def _column_ordered(x: np.ndarray) -> bool:
    """Whether a 2-D array to be copied goes as its transpose: its
    elements lie in columns (x.T of a C array) and it is neither one row
    nor one column."""
    return x.strides[0] < x.strides[1] and x.shape[0] > 1 and x.shape[1] > 1


def _locate(arr: np.ndarray, conn: _Conn, dt: np.dtype
            ) -> Optional[Tuple[_Buffer, int, int, bool]]:
    """Where a 2-D array sits in one of conn's buffers as a GEMM operand:
    (buffer, byte offset, ld, transposed), or None when it must be copied
    (another type, not gemmd memory of this connection, a layout that is
    neither rows nor columns with a stride)."""
    if arr.dtype != dt:
        return None
    buf = _buffer_of(arr)
    if buf is None or buf.conn is not conn:
        return None
    r, c = arr.shape
    isz = dt.itemsize
    lay = _stack.core_layout(r, c, arr.strides[0], arr.strides[1], isz)
    if lay is None:
        return None
    trans, ld = lay
    off = arr.__array_interface__["data"][0] - buf.addr
    if off < 0 or off % isz != 0:
        return None
    if off + _stack.extent(r, c, ld, trans, isz) > buf.size:
        return None
    return buf, off, ld, trans


def fill_op(op: GemmOp, plan: _Plan) -> None:
    """Sets op's types, alpha/beta, precision, moduli and kernel from plan
    (what a batch shares too; the caller keeps plan alive while op is
    used)."""
    op.ab_type, op.cd_type = plan.ab.code, plan.cd.code
    if plan.ab.wide:  # double (complex) scalars
        op.scalars64 = True
        a, b = complex(plan.alpha), complex(plan.beta)
        op.alpha_re, op.alpha_im = a.real, a.imag
        op.beta_re, op.beta_im = b.real, b.imag
        op.alpha, op.beta = a.real, b.real
    else:
        op.alpha, op.beta = plan.alpha, plan.beta
    op.precision = plan.precision
    op.moduli = plan.moduli
    if plan.kernel is not None:
        op.kernel = plan.kernel


def tensor_id(t: Tensor, conn: _Conn) -> int:
    """t's id in gemmd, to be sent on conn; InvalidArgument when it was
    freed, ConnectionClosed when it lives on another connection."""
    h = t._h
    if h.freed:
        raise InvalidArgument("matmul: resident tensor %#x was freed" % h.id)
    if h.conn is not conn:
        raise ConnectionClosed(
            "matmul: resident tensor %#x was lost with the connection it "
            "was uploaded on (gemmd restarted, or this is a forked child); "
            "upload it again" % h.id)
    return h.id


class _Call:
    """A _Plan made concrete on one connection: the gemm_op, the staging
    copies, and what to do when it completes. Built and sent by the caller
    holding conn.enter()."""

    def __init__(self, conn: _Conn, plan: _Plan, defer: bool = False
                 ) -> None:
        self.conn = conn
        self.plan = plan
        self.keep: List[Any] = []  # staging arrays: alive until done
        # defer: A's and B's staging copies wait in pending (run_filled)
        self.defer = defer
        self.pending: List[Optional[_fill.Pending]] = [None, None]
        self.box = GemmOpBox()  # zeroed room past the mirror
        op = self.op = self.box.op
        op.m, op.n, op.k = plan.m, plan.n, plan.k
        fill_op(op, plan)
        ab, cd = plan.ab.np, plan.cd.np
        op.a, op.trans_a, a_loc = self._input(plan.A, ab, 0)
        op.b, op.trans_b, b_loc = self._input(plan.B, ab, 1)
        op.conj_a = isinstance(plan.A, Tensor) and plan.A.conj
        op.conj_b = isinstance(plan.B, Tensor) and plan.B.conj

        # D: the caller's out in place, else a buffer of ours
        self.d_direct = False
        self.d_arr: np.ndarray
        out = plan.out2
        if out is not None:
            loc = _locate(out, conn, cd)
            if loc is not None and not loc[3] and not any(
                    x is not None and x[0] is loc[0] and
                    np.may_share_memory(out, arr)
                    for x, arr in ((a_loc, plan.A), (b_loc, plan.B))):
                self.d_direct = True
                self.d_arr = out
                op.d = GemmMatrix(loc[0].ptr, loc[1], loc[2], 0)
        if not self.d_direct:
            self.d_arr = conn.array((plan.m, plan.n), cd)
            op.d = GemmMatrix(_buffer_of(self.d_arr).ptr, 0, plan.n, 0)

        # C (read when beta != 0): in place, D's memory, or a copy
        C = plan.C
        if C is None:
            pass
        elif isinstance(C, Tensor):
            op.c = GemmMatrix(None, 0, 0, self._tensor_id(C))
        elif plan.c_is_out and self.d_direct:
            op.c = op.d  # D = alpha*A*B + beta*D, in place
        else:
            loc = _locate(C, conn, cd)
            if loc is not None and not loc[3] and not (
                    self.d_direct and loc[0].ptr == op.d.buf and
                    np.may_share_memory(C, out) and
                    (loc[1], loc[2]) != (op.d.offset, op.d.ld)):
                op.c = GemmMatrix(loc[0].ptr, loc[1], loc[2], 0)
            elif not self.d_direct:
                _copy.copy(self.d_arr, C)  # C in D's own buffer
                op.c = op.d
            else:
                cs = conn.array((plan.m, plan.n), cd)
                _copy.copy(cs, C)
                self.keep.append(cs)
                op.c = GemmMatrix(_buffer_of(cs).ptr, 0, plan.n, 0)

    def _tensor_id(self, t: "Tensor") -> int:
        return tensor_id(t, self.conn)

    def _input(self, x: Any, dt: np.dtype, which: int
               ) -> Tuple[GemmMatrix, bool, Optional[Tuple]]:
        """A or B (which 0 or 1) as a gemm_matrix and its transpose flag:
        a tensor, the array in place, or a copy in a staging buffer (made
        later when deferred)."""
        if isinstance(x, Tensor):
            return GemmMatrix(None, 0, 0, self._tensor_id(x)), x.trans, None
        loc = _locate(x, self.conn, dt)
        if loc is not None:
            buf, off, ld, trans = loc
            return GemmMatrix(buf.ptr, off, ld, 0), trans, loc
        # Copy. Column-ordered input (x.T of a C array) is copied as its
        # transpose, row by row, and sent with the transpose flag. A row
        # or a column is sent as it is, as core_layout describes one in
        # place: the same operand always reaches gemmd the same way.
        trans = _column_ordered(x)
        src = x.T if trans else x
        st = self.conn.array(src.shape, dt)
        if self.defer:
            self.pending[which] = _fill.Pending(st, src)
        else:
            _copy.copy(st, src)
        self.keep.append(st)
        return GemmMatrix(_buffer_of(st).ptr, 0, src.shape[1], 0), trans, None

    def failed(self, rv: int) -> None:
        """After a failure that may leave the request running in gemmd:
        our D buffer must never be handed out again."""
        if rv in _MAYBE_RUNNING and not self.d_direct:
            buf = _buffer_of(self.d_arr)
            if buf is not None:
                buf.tainted = True

    def error(self, rv: int) -> BaseException:
        """The exception for a failure (this thread's message)."""
        return self.conn.error(rv)

    def finish(self) -> Any:
        """The result after success: out (filled), or the new array."""
        p = self.plan
        if p.out is not None:
            if not self.d_direct:
                _copy.copy(p.out2, self.d_arr)
            return p.out
        d = self.d_arr
        return d.reshape(p.shape) if p.shape else d[0, 0]

    def release(self) -> None:
        """Drops the staging arrays (their buffers return to the pool)."""
        self.keep = []
        self.d_arr = None  # type: ignore[assignment]


def _run(conn: _Conn, plan: _Plan) -> Any:
    """One GEMM on conn, waiting for it (caller holds conn.enter()): its
    copied inputs filled by parts after it is sent when large (_fill)."""
    call = _Call(conn, plan, defer=True)
    try:
        req = ctypes.c_void_p()
        a, b = call.pending
        fill = _fill.plan(conn, plan.m, plan.k, bool(call.op.trans_a),
                          bool(call.op.trans_b), a, b)
        if fill is None:
            for x in (a, b):
                if x is not None:
                    x.copy()
            rv = conn.lib.gemm_submit(conn.h, ctypes.byref(call.op),
                                      ctypes.byref(req))
        else:
            call.keep.append(fill.ctr)
            rv = _fill.submit(conn, call.op, fill, req)
        if rv == _ERR_CLOSED:  # not sent: safe to send on a new connection
            conn.lost = True
            raise _Lost()
        conn.check(rv)
        if fill is not None:
            fill.run()
        rv = conn.lib.gemm_wait(req.value, None)
        if rv != _OK:
            call.failed(rv)
            conn.check(rv)
        return call.finish()
    finally:
        call.release()
