"""A large GEMM of copied operands run as panels of D's rows, so that our
staging copies overlap gemmd's work.

An unsplit call copies A (and C) into shared memory, waits for gemmd, then
copies D out into ``out``: the copies and gemmd's work take turns. Here the
problem is cut along M into P panels. B is staged once (and, where gemmd
takes it, uploaded once as a resident tensor, so that no panel sends it to
the device again); then for each panel its rows of A (and of C) are copied,
the panel is submitted, at most IN_FLIGHT panels are in gemmd at a time,
and each panel's rows of D are copied into ``out`` as soon as it completes,
while the next one runs. Every copy is _copy's, on several threads.

Which calls: a 2-D GEMM (no stack) of at least 2 * MIN_PANEL_BYTES of
copies that scale with M (A's rows, C's rows, D's rows when out= is not
gemmd memory), with A an array (not a resident tensor) and C not a
tensor; P is the client's ``panels`` (gemmd.connect(panels=), default
$GEMMD_PANELS, else PANELS), fewer when the panels would be smaller than
MIN_PANEL_BYTES ($GEMMD_PANEL_MIN_BYTES). panels=1 turns it off;
$GEMMD_PANEL_RESIDENT_B=0 keeps B in shared memory (each panel then sends
it to the device again).

Results: each panel is exactly the GEMM of its rows sent alone. gemmd's
kernel choice (tile shape, split-K, stream-K on the GPU; OpenBLAS's
blocking for float32 and float64 on the CPU) depends on M, so a panel may
accumulate in another order than the whole would: results agree with the
unsplit call within the dtype's rounding, not bit for bit. A panel of
fewer rows is accepted where the whole might be refused for its M alone
(gemmd's --max-dim).

Failures: the first failing panel's error is raised, the same typed
exception the unsplit call would raise; no panel is sent once it is seen,
and the panels already in gemmd (at most IN_FLIGHT - 1 after the failed
one) are waited for. ``out`` is then defined panel
by panel: the rows of every panel that completed hold the result, the rows
of the failed panel and of panels never sent are as they were, except
that a panel that failed after it started (a timeout, a lost connection)
may leave its rows partly written when out is gemmd memory, as an unsplit
call would. The client's timeout bounds the whole call: each panel is
sent with the time left as its start deadline (gemm_op.timeout_ms), none
is sent once that is spent (Timeout), and a panel already running is
waited for as long as the client's timeout, as any request is.
"""
from __future__ import annotations

import copy as _pycopy
import ctypes
import time

import numpy as np

from . import _copy
from ._conn import _Conn, _Lost, _buffer_of, _OK, _ERR_CLOSED
from ._errors import error_for
from ._env import env_int
from ._gemm import _MAYBE_RUNNING, _Call, _Plan, _column_ordered, _locate
from ._tensor import Tensor, _TensorHandle

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing costs a fresh process ~4 ms: checkers only
    from typing import Any, Callable, List, Optional, Tuple


PANELS = env_int("GEMMD_PANELS", 1)  # panels of a large copied GEMM
MIN_PANEL_BYTES = env_int("GEMMD_PANEL_MIN_BYTES", 8 << 20)  # copies/panel
IN_FLIGHT = 2  # panels in gemmd at a time
RESIDENT_B = env_int("GEMMD_PANEL_RESIDENT_B", 1) != 0  # B as a tensor

_GEMM_ERR_TIMEOUT = 4

# Test hook: called with (panel index, gemm_op) just before each panel is
# submitted (the tests make one panel fail this way). None in use.
_before_submit: Optional[Callable[[int, Any], None]] = None


def parts(conn: _Conn, plan: _Plan, panels: int) -> int:
    """How many panels plan runs as on conn (1: unsplit)."""
    if panels < 2 or plan.batch or plan.m < 2:
        return 1
    ab, cd = plan.ab.np, plan.cd.np
    most = (plan.k * ab.itemsize + 2 * plan.n * cd.itemsize) * plan.m
    if most < 2 * MIN_PANEL_BYTES:  # small: not worth a look
        return 1
    if isinstance(plan.A, Tensor) or isinstance(plan.C, Tensor):
        return 1
    row = 0  # bytes copied per row of D
    if _locate(plan.A, conn, ab) is None:
        row += plan.k * ab.itemsize
    out = plan.out2
    out_copied = out is not None and (_locate(out, conn, cd) is None or
                                      out.strides[0] < out.strides[1])
    if out_copied:
        row += plan.n * cd.itemsize
    if plan.C is not None and not (plan.c_is_out and not out_copied) and \
            _locate(plan.C, conn, cd) is None:
        row += plan.n * cd.itemsize
    total = row * plan.m
    return max(1, min(panels, plan.m, total // max(1, MIN_PANEL_BYTES)))


def _stage_b(conn: _Conn, plan: _Plan) -> Tuple[Any, Any]:
    """B for every panel: in place when it is gemmd memory, else one
    staged copy (a column-ordered B as its transpose), uploaded as a
    resident tensor where gemmd takes it. Returns (operand, keep): keep
    holds the staging array and tensor alive until the panels are done."""
    B, dt = plan.B, plan.ab.np
    if isinstance(B, Tensor) or _locate(B, conn, dt) is not None:
        return B, None
    trans = _column_ordered(B)
    src = B.T if trans else B
    st = conn.array(src.shape, dt)
    _copy.copy(st, src)
    view = st.T if trans else st
    if not RESIDENT_B:
        return view, st
    tid = ctypes.c_uint64()
    m = _capi_matrix(st)
    rv = conn.lib.gemm_tensor_upload(conn.h, ctypes.byref(m), st.shape[0],
                                     st.shape[1], plan.ab.code,
                                     ctypes.byref(tid))
    if rv != _OK:  # caps, memory, an old gemmd: B from shared memory
        if rv == _ERR_CLOSED:
            conn.lost = True
            raise _Lost()
        return view, st
    h = _TensorHandle(conn, tid.value, st.shape, dt)
    # no client: only _Call reads this tensor, never its matmul
    return Tensor(h, None, trans), (st, h)


def _capi_matrix(st: np.ndarray) -> Any:
    from ._capi import GemmMatrix

    return GemmMatrix(_buffer_of(st).ptr, 0, st.shape[1], 0)


def _panel_plan(plan: _Plan, lo: int, hi: int, B: Any,
                d: Optional[np.ndarray]) -> _Plan:
    """plan restricted to D's rows lo:hi, with B staged and D the rows of
    out (or of d, the result array, when there is no out)."""
    p = _pycopy.copy(plan)
    p.A = plan.A[lo:hi]
    p.B = B
    p.m = hi - lo
    p.shape = p.full = (hi - lo, plan.n)
    rows = plan.out2[lo:hi] if plan.out2 is not None else d[lo:hi]
    p.out = p.out2 = rows
    if plan.c_is_out:
        p.C = rows
    elif plan.C is not None:
        p.C = plan.C[lo:hi]
    return p


class _Panel:
    __slots__ = ("index", "call", "req")

    def __init__(self, index: int, call: _Call, req: int) -> None:
        self.index = index
        self.call = call
        self.req = req


def run(conn: _Conn, plan: _Plan, nparts: int, timeout_ms: int) -> Any:
    """plan as nparts panels on conn, waiting for them (caller holds
    conn.enter()). Returns what the unsplit call would."""
    t0 = time.monotonic()
    deadline = None if timeout_ms < 0 else t0 + timeout_ms / 1000.0
    m, n = plan.m, plan.n
    bounds = [m * i // nparts for i in range(nparts + 1)]
    keep_b: Any = None
    d: Optional[np.ndarray] = None
    pending: List[_Panel] = []
    err: Optional[BaseException] = None
    sent = 0
    try:
        B, keep_b = _stage_b(conn, plan)
        if plan.out2 is None:
            d = conn.array((m, n), plan.cd.np)
        for i in range(nparts):
            lo, hi = bounds[i], bounds[i + 1]
            left_ms = 0
            if deadline is not None:
                left = deadline - time.monotonic()
                if left <= 0 and i > 0:
                    err = error_for(_GEMM_ERR_TIMEOUT, (
                        "matmul: %dx%dx%d as %d panels: rows %d:%d not "
                        "sent, the client's timeout of %g s was spent on "
                        "the panels before (nothing is written there); "
                        "raise it (gemmd.connect(timeout=), "
                        "client.set_timeout)" %
                        (m, n, plan.k, nparts, lo, m, timeout_ms / 1000.0)))
                    break
                left_ms = max(1, int(left * 1000))
            call = _Call(conn, _panel_plan(plan, lo, hi, B, d))
            if deadline is not None:
                call.op.timeout_ms = left_ms
            if _before_submit is not None:
                _before_submit(i, call.op)
            req = ctypes.c_void_p()
            rv = conn.lib.gemm_submit(conn.h, ctypes.byref(call.op),
                                      ctypes.byref(req))
            if rv != _OK:
                call.release()
                if rv == _ERR_CLOSED and sent == 0:
                    conn.lost = True  # nothing reached gemmd: retry
                    raise _Lost()
                err = conn.error(rv)
                break
            sent += 1
            pending.append(_Panel(i, call, req.value))
            if len(pending) >= IN_FLIGHT:
                err = _complete(conn, pending.pop(0), d)
                if err is not None:
                    break
    finally:
        # Every panel sent is waited for, whatever happened: its buffers
        # must outlive it. Later successes are finished (out written).
        while pending:
            e = _complete(conn, pending.pop(0), d)
            if err is None:
                err = e
        _free_b(keep_b)
    if err is not None:
        raise err
    if plan.out is not None:
        return plan.out
    return d.reshape(plan.shape) if plan.shape else d[0, 0]


def _complete(conn: _Conn, p: _Panel, d: Optional[np.ndarray]
              ) -> Optional[BaseException]:
    """Waits for one panel; on success copies its D rows out (finish).
    Returns the exception of a failure (made here: the message is this
    thread's), else None. After a failure that may leave the panel
    running, d (our result array, whose rows it writes) is never reused."""
    call = p.call
    try:
        rv = conn.lib.gemm_wait(p.req, None)
        if rv != _OK:
            call.failed(rv)
            if rv in _MAYBE_RUNNING and d is not None:
                buf = _buffer_of(d)
                if buf is not None:
                    buf.tainted = True
            return call.error(rv)
        call.finish()
        return None
    finally:
        call.release()


def _free_b(keep: Any) -> None:
    if isinstance(keep, tuple):
        keep[1].free(quiet=True)  # queued users (none left) finish first
