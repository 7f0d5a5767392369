"""The other level-3 BLAS routines (symm, hemm, syrk, herk, syr2k, her2k,
trmm, trsm) on gemmd, with numpy's row-major meaning: the operands are
2-d arrays as they are, flags are words ("left"/"right", "lower"/
"upper") or BLAS letters. Shapes and types are checked here first, with
numpy's wording; the operands are copied into buffers of the connection,
the request runs there (gemm_blas3_run, waiting) and the result comes
back as a new array that lives in gemmd memory (like matmul's).

Only the triangle that ``uplo`` names of A is read (symmetric, Hermitian,
triangular A); the rank updates write only that triangle of C: the other
triangle of the result is c's (or zero when c is not given).
"""
from __future__ import annotations

import ctypes
from typing import Any, Optional

import numpy as np

from . import _dtypes
from ._capi import GemmBlas3Op, GemmMatrix
from ._conn import _Conn
from ._errors import DTypeError, InvalidArgument, ShapeError

ROUTINES = ("symm", "hemm", "syrk", "herk", "syr2k", "her2k", "trmm",
            "trsm")
_CODE = {r: i + 1 for i, r in enumerate(ROUTINES)}
_TYPES = ("float32", "float64", "complex64", "complex128")


def _flag(what: str, name: str, v: Any, words: dict) -> Any:
    """The value of flag v (a word or a BLAS letter, any case)."""
    key = v.lower() if isinstance(v, str) else None
    if key not in words:
        shown = [w for w in words if len(w) > 1] or \
            [w.upper() for w in words]
        raise InvalidArgument(
            "%s: %s must be one of %s, got %r" %
            (what, name, ", ".join(repr(w) for w in shown), v))
    return words[key]


_SIDE = {"left": False, "l": False, "right": True, "r": True}
_UPLO = {"lower": True, "l": True, "upper": False, "u": False}
_DIAG = {"unit": True, "u": True, "non-unit": False, "nonunit": False,
         "n": False}
_TRANS = {"n": b"N", "t": b"T", "c": b"C"}


def _matrix(what: str, name: str, x: Any) -> np.ndarray:
    arr = np.asarray(x)
    if arr.ndim != 2:
        raise ShapeError(
            "%s: %d-dimensional array given for %s. Array must be "
            "two-dimensional" % (what, arr.ndim, name))
    return arr


def _square(what: str, name: str, arr: np.ndarray) -> int:
    if arr.shape[0] != arr.shape[1]:
        raise ShapeError(
            "%s: last 2 dimensions of %s must be square, got %s" %
            (what, name, arr.shape))
    return int(arr.shape[0])


def _mismatch(what: str, name: str, got: Any, want: Any) -> ShapeError:
    return ShapeError(
        "%s: operands could not be broadcast together: %s has shape %s, "
        "expected %s" % (what, name, tuple(got), tuple(want)))


def plan(routine: str, a: Any, b: Any, c: Any, side: Any, uplo: Any,
         trans: Any, diag: Any, alpha: Any, beta: Any) -> dict:
    """The request of one call, checked: a dict with the op's fields, the
    operands as arrays of the common dtype, and the result's shape.
    Raises ShapeError, DTypeError or InvalidArgument."""
    what = str(routine).lower()
    if what not in _CODE:
        raise InvalidArgument("routine must be one of %s, got %r" %
                              (", ".join(ROUTINES), routine))
    rank = what in ("syrk", "herk", "syr2k", "her2k")
    tri = what in ("trmm", "trsm")
    her = what in ("hemm", "herk", "her2k")
    two = what in ("symm", "hemm", "syr2k", "her2k", "trmm", "trsm")
    A = _matrix(what, "a", a)
    if two and b is None:
        raise InvalidArgument("%s: b is required" % what)
    if not two and b is not None:
        raise InvalidArgument("%s takes no b" % what)
    B = _matrix(what, "b", b) if two else None
    C = _matrix(what, "c", c) if c is not None else None
    if tri and c is not None:
        raise InvalidArgument("%s takes no c (its result replaces b)" % what)
    dts = [x.dtype for x in (A, B, C) if x is not None]
    dt = np.result_type(*dts)
    if dt.kind in "biu":
        dt = np.dtype(np.float64)
    if dt.name not in _TYPES:
        raise DTypeError("%s: dtype %s is not supported (use float32, "
                         "float64, complex64 or complex128)" %
                         (what, dt.name))
    if her and dt.kind != "c":
        raise DTypeError("%s: a Hermitian routine needs complex operands, "
                         "got %s (use %s for real ones)" %
                         (what, dt.name, what.replace("he", "sy", 1)))
    right = _flag(what, "side", side, _SIDE)
    lower = _flag(what, "uplo", uplo, _UPLO)
    t = _flag(what, "trans", trans, _TRANS)
    unit = _flag(what, "diag", diag, _DIAG)
    if rank:
        allowed = (b"N", b"C") if her else (b"N", b"T")
        if dt.kind != "c" and not her and t == b"C":
            t = b"T"
        if t not in allowed:
            raise InvalidArgument("%s: trans must be %s, got %r" %
                                  (what, " or ".join(repr(x.decode())
                                                     for x in allowed),
                                   trans))
        n, k = (A.shape if t == b"N" else A.shape[::-1])
        if B is not None and B.shape != A.shape:
            raise _mismatch(what, "b", B.shape, A.shape)
        out = (n, n)
        m = n
    else:
        if t == b"C" and dt.kind != "c":
            t = b"T"
        if what in ("symm", "hemm") and t != b"N":
            raise InvalidArgument("%s takes no trans" % what)
        ka = _square(what, "a", A)
        m, n = B.shape
        if ka != (n if right else m):
            raise _mismatch(what, "b", B.shape,
                            (m, ka) if right else (ka, n))
        out = (m, n)
        k = ka
    if C is not None and C.shape != out:
        raise _mismatch(what, "c", C.shape, out)
    al = complex(alpha)
    be = complex(beta)
    if what == "herk" and al.imag != 0:
        raise InvalidArgument("herk: alpha must be real, got %r" % alpha)
    if what in ("herk", "her2k") and be.imag != 0:
        raise InvalidArgument("%s: beta must be real, got %r" % (what, beta))
    if dt.kind != "c" and (al.imag != 0 or be.imag != 0):
        raise InvalidArgument("%s: complex alpha or beta with %s operands" %
                              (what, dt.name))
    return dict(routine=what, code=_CODE[what], dtype=dt, A=A, B=B, C=C,
                right=right, lower=lower, trans=t, unit=unit, m=m, n=n,
                k=k, alpha=al, beta=be if C is not None else 0j, out=out,
                tri=tri, rank=rank)


def _stage(conn: _Conn, x: np.ndarray, dt: np.dtype) -> Any:
    """x copied into a new array in a buffer of conn, and its matrix."""
    from ._conn import _buffer_of

    arr = conn.array(x.shape, dt)
    arr[...] = x
    buf = _buffer_of(arr)
    return arr, GemmMatrix(buf.ptr, 0, 0, 0)


def run(conn: _Conn, p: dict) -> np.ndarray:
    """Runs a plan on conn (held by the caller's enter()): returns the
    result array (gemmd memory). Raises the typed error of a failure."""
    dt = p["dtype"]
    row = _dtypes.require(dt, p["routine"])
    op = GemmBlas3Op()
    op.routine = p["code"]
    op.dtype = row.code
    op.right = p["right"]
    op.lower = p["lower"]
    op.trans = p["trans"]
    op.unit_diag = p["unit"]
    op.m, op.n, op.k = p["m"], p["n"], p["k"]
    op.alpha_re, op.alpha_im = p["alpha"].real, p["alpha"].imag
    op.beta_re, op.beta_im = p["beta"].real, p["beta"].imag
    keep = []
    a, op.a = _stage(conn, p["A"], dt)
    keep.append(a)
    if p["tri"]:
        out, op.b = _stage(conn, p["B"], dt)
    else:
        if p["B"] is not None:
            b, op.b = _stage(conn, p["B"], dt)
            keep.append(b)
        if p["C"] is not None:
            out, op.c = _stage(conn, p["C"], dt)
        else:
            out = conn.array(p["out"], dt, zero=True)
            from ._conn import _buffer_of

            op.c = GemmMatrix(_buffer_of(out).ptr, 0, 0, 0)
    rv = conn.lib.gemm_blas3_run(conn.h, ctypes.byref(op), None)
    conn.check(rv)
    del keep
    return out


__all__ = ["ROUTINES", "plan", "run"]
