"""A stand-in for gemmd's batch handler, in Python: reads the gemm_batch
the package sends and computes every problem with numpy straight in the
shared-memory buffers (in float64 / complex128, rounded to the result
type). Installed on one client's library with ``emulate(client,
monkeypatch)``, so the package's encoding of stacks and groups (offsets,
strides, leading dimensions, transposes, strided or grouped) is checked
against numpy whatever the daemon serves. Resident tensors are not
emulated. ``sent`` records each request: ("strided", count) or
("grouped", nproblems).
"""
from __future__ import annotations

import ctypes
from typing import Any, List, Tuple

import numpy as np

from gemmd import _capi, _dtypes


class Emulator:
    def __init__(self, lib: Any) -> None:
        self.lib = lib
        self.real_wait = lib.gemm_wait
        self.sent: List[Tuple[str, int]] = []
        self.token = 0x7e57

    def _matrix(self, m: Any, rows: int, cols: int, trans: bool,
                dt: np.dtype) -> np.ndarray:
        """op(X) of a gemm_matrix, a view of the mapped buffer."""
        addr = self.lib.gemm_buffer_data(m.buf)
        size = self.lib.gemm_buffer_size(m.buf)
        raw = np.ctypeslib.as_array((ctypes.c_char * size).from_address(addr))
        r, c = (cols, rows) if trans else (rows, cols)
        ld = m.ld or c
        isz = dt.itemsize
        end = m.offset + ((r - 1) * ld + c) * isz
        assert m.tensor == 0, "the emulator has no resident tensors"
        assert m.offset % isz == 0 and end <= size, "out of bounds"
        flat = raw.view(np.uint8)[m.offset:end].view(dt)
        v = np.lib.stride_tricks.as_strided(flat, (r, c), (ld * isz, isz))
        return v.T if trans else v

    def _one(self, op: Any, m: int, n: int, k: int, ta: bool, tb: bool,
             a: Any, b: Any, c: Any, d: Any, scal: Tuple[complex, complex]
             ) -> None:
        ab = _dtypes.BY_CODE[op.ab_type].np
        cd = _dtypes.BY_CODE[op.cd_type].np
        wide = np.complex128 if np.issubdtype(cd, np.complexfloating) \
            else np.float64
        if m == 0 or n == 0:
            return
        alpha, beta = scal
        if not np.issubdtype(cd, np.complexfloating):
            alpha, beta = alpha.real, beta.real
        A = self._matrix(a, m, k, ta, ab).astype(wide)
        B = self._matrix(b, k, n, tb, ab).astype(wide)
        res = alpha * (A @ B)
        if beta != 0:
            res = res + beta * self._matrix(c, m, n, False, cd).astype(wide)
        self._matrix(d, m, n, False, cd)[...] = res.astype(cd)

    def submit(self, h: Any, bp: Any, reqp: Any) -> int:
        b = bp._obj if hasattr(bp, "_obj") else bp.contents
        op = b.op
        if op.scalars64:
            scal = (complex(op.alpha_re, op.alpha_im),
                    complex(op.beta_re, op.beta_im))
        else:
            scal = (complex(op.alpha), complex(op.beta))
        if b.count > 0:
            self.sent.append(("strided", b.count))
            for i in range(b.count):
                mats = []
                for x in "abcd":
                    g = getattr(op, x)
                    mats.append(_capi.GemmMatrix(
                        g.buf, g.offset + i * getattr(b, "stride_" + x),
                        g.ld, g.tensor))
                self._one(op, op.m, op.n, op.k, op.trans_a, op.trans_b,
                          *mats, scal)
        else:
            self.sent.append(("grouped", b.nproblems))
            for i in range(b.nproblems):
                p = b.problems[i]
                s = ((complex(p.alpha_re, p.alpha_im),
                      complex(p.beta_re, p.beta_im)) if p.scalars else scal)
                self._one(op, p.m, p.n, p.k, p.trans_a, p.trans_b, p.a, p.b,
                          p.c, p.d, s)
        reqp._obj.value = self.token
        return 0

    def wait(self, req: Any, t: Any) -> int:
        if req == self.token:
            return 0
        return self.real_wait(req, t)


def emulate(client: Any, monkeypatch: Any) -> Emulator:
    """Routes client's batch requests to an Emulator (for this test)."""
    conn = client._live()
    em = Emulator(conn.lib)
    monkeypatch.setattr(conn.lib, "gemm_batch_submit", em.submit,
                        raising=False)
    monkeypatch.setattr(conn.lib, "gemm_wait", em.wait)
    return em
