"""A 2-D matmul whose operands are copied into shared memory, sent before
they are (proto/gemm.proto's Fill on a GemmRequest): gemmd copies each
part to the GPU as soon as the counter says it is written, so the staging
copies overlap gemmd's transfers instead of preceding them.

The cut is common/fill.h's: B along K in the first half of the parts
(rows of B as staged, or columns when it is sent transposed), then A
along op(A)'s rows (rows, or columns when transposed), each range
ceil(extent / the cut's parts) long. The counter is a uint64 in a small
array of this connection's; 1 once C is written (it is, before the
request), 2 + p once part p is. numpy copies release the GIL and finish
(all their threads joined) before the counter's store, and x86-64 keeps
stores in order, which is the release the protocol asks for.

Used for requests whose copied inputs are GEMMD_FILL_MIN_BYTES or more,
in up to GEMMD_FILL_PARTS (4) parts of PART_BYTES or more (fewer, larger
parts measured faster from Python than libgemmblas's 16: each copy
hands out to the copy threads), when gemmd names
the feature and libgemmclient has gemm_submit_overlapped.
"""
from __future__ import annotations

import ctypes

import numpy as np

from . import _copy
from ._capi import GemmOverlap, GemmServerInfo
from ._conn import _buffer_of
from ._env import env_int

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing costs a fresh process ~4 ms: checkers only
    from typing import Any, Optional, Tuple

FEATURE_FILL_GEMM = 2  # GEMM_FEATURE_FILL_GEMM (gemm/types.h)
FILL_PARTS = env_int("GEMMD_FILL_PARTS", 4)  # 0 or 1: off
MIN_BYTES = env_int("GEMMD_FILL_MIN_BYTES", 32 << 20)
PART_BYTES = 32 << 20  # a smaller part's copy gets few threads


class Pending:
    """A staging copy not yet made: st (gemmd memory, as sent) from src."""

    def __init__(self, st: np.ndarray, src: np.ndarray) -> None:
        self.st = st
        self.src = src

    def copy(self) -> None:
        _copy.copy(self.st, self.src)

    def copy_range(self, cols: bool, lo: int, hi: int) -> None:
        if hi <= lo:
            return
        if cols:
            _copy.copy(self.st[:, lo:hi], self.src[:, lo:hi])
        else:
            _copy.copy(self.st[lo:hi], self.src[lo:hi])


def _range(extent: int, parts: int, p: int) -> Tuple[int, int]:
    size = max(1, -(-extent // parts))
    return min(p * size, extent), min((p + 1) * size, extent)


class Fill:
    """The counter and the order of one filled request."""

    def __init__(self, conn: Any, m: int, k: int, trans_a: bool,
                 trans_b: bool, a: Optional[Pending], b: Optional[Pending],
                 parts: int) -> None:
        self.m, self.k = m, k
        self.trans_a, self.trans_b = trans_a, trans_b
        self.a, self.b = a, b
        self.parts = parts
        self.ctr = conn.array((8,), np.dtype(np.uint64))
        self.ctr[0] = 1  # C (when read) was written before the request
        base = self.ctr.__array_interface__["data"][0]
        buf = _buffer_of(self.ctr)
        assert buf is not None
        self.ov = GemmOverlap()
        self.ov.buf = buf.ptr
        self.ov.fill_parts = parts
        self.ov.fill_offset = base - buf.addr

    def run(self) -> None:
        """Writes the parts in order, raising the counter after each."""
        pb = self.parts // 2
        for q in range(self.parts):
            if q < pb:
                lo, hi = _range(self.k, pb, q)
                if self.b is not None:
                    self.b.copy_range(self.trans_b, lo, hi)
            else:
                lo, hi = _range(self.m, self.parts - pb, q - pb)
                if self.a is not None:
                    self.a.copy_range(self.trans_a, lo, hi)
            self.ctr[0] = 2 + q


def features(conn: Any) -> int:
    """The features conn's gemmd named in its hello (one ping per
    connection, the first time; 0 when the ping fails)."""
    if conn.features is None:
        info = GemmServerInfo()
        ok = conn.lib.gemm_ping(conn.h, ctypes.byref(info)) == 0
        conn.features = conn.lib.gemm_server_features(conn.h) if ok else 0
    return int(conn.features)


def plan(conn: Any, m: int, k: int, trans_a: bool, trans_b: bool,
         a: Optional[Pending], b: Optional[Pending]) -> Optional[Fill]:
    """A Fill for these pending copies, or None (then copy them first)."""
    lib = conn.lib
    if FILL_PARTS < 2 or (a is None and b is None):
        return None
    if getattr(lib, "gemm_submit_overlapped", None) is None or \
            getattr(lib, "gemm_server_features", None) is None:
        return None
    nbytes = sum(x.st.nbytes for x in (a, b) if x is not None)
    if nbytes < MIN_BYTES:
        return None
    if not features(conn) & FEATURE_FILL_GEMM:
        return None
    parts = min(FILL_PARTS, 64) // 2 * 2
    while parts > 2 and nbytes / parts < PART_BYTES:
        parts -= 2
    return Fill(conn, m, k, trans_a, trans_b, a, b, parts)


def submit(conn: Any, op: Any, f: Fill, req: ctypes.c_void_p) -> int:
    """Sends op with f's counter; the caller then runs f."""
    return conn.lib.gemm_submit_overlapped(conn.h, ctypes.byref(op),
                                           ctypes.byref(f.ov),
                                           ctypes.byref(req))
