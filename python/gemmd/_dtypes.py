"""The element types gemmd multiplies and how they map to numpy.

One row per type: the numpy name, libgemmclient's gemm_dtype number, the
C/D types gemmd writes for it as A/B (gemm.h's combinations; none: a
result type only, as int32), whether fp32-style precisions apply, and
whether it needs the double/complex scalars of gemm_op (``wide``: float64,
complex64, complex128, and int8, whose integer alpha and beta travel
exactly as doubles; served when _capi.HAS_WIDE_SCALARS). int8 inputs give
int32 results (exact, wrapping modulo 2^32), not numpy's int8. bfloat16 is
ml_dtypes.bfloat16 (imported only when a bfloat16 is asked for). Adding a
type is a row here.
"""
from __future__ import annotations

import numpy as np

from . import _capi
from ._errors import DTypeError

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing costs a fresh process ~4 ms: checkers only
    from typing import Any, Dict, Optional, Tuple


class DType:
    """One element type gemmd knows."""

    __slots__ = ("name", "short", "code", "size", "outs", "precision",
                 "wide", "complex", "integer", "_np")

    def __init__(self, name: str, short: str, code: int, size: int,
                 outs: Tuple[str, ...], precision: bool = False,
                 wide: bool = False, complex_: bool = False,
                 integer: bool = False) -> None:
        self.name = name  # numpy's name
        self.short = short  # gemm.h's name (gemm_dtype_name)
        self.code = code  # gemm_dtype
        self.size = size  # bytes per element
        self.outs = outs  # C/D types for this type as A/B
        self.precision = precision  # precision= applies (fp32 inputs)
        self.wide = wide  # needs the fp64/complex API (branch blas)
        self.complex = complex_
        self.integer = integer  # int8, int32: scalars are integers
        self._np: Optional[np.dtype] = None

    @property
    def np(self) -> np.dtype:
        """The numpy dtype (importing ml_dtypes for bfloat16)."""
        if self._np is None:
            if self.name == "bfloat16":
                import ml_dtypes

                self._np = np.dtype(ml_dtypes.bfloat16)
            else:
                self._np = np.dtype(self.name)
        return self._np

    @property
    def available(self) -> bool:
        """Whether this libgemmclient can send the type."""
        return not self.wide or _capi.HAS_WIDE_SCALARS

    def __repr__(self) -> str:
        return "gemmd dtype %s (%s)" % (self.name, self.short)


_16 = ("bfloat16", "float16", "float32")
TABLE: Dict[str, DType] = {
    r.name: r
    for r in (
        DType("bfloat16", "bf16", 1, 2, _16),
        DType("float16", "fp16", 2, 2, _16),
        DType("float32", "fp32", 3, 4, ("float32",), precision=True),
        DType("float64", "fp64", 4, 8, ("float64",), wide=True),
        DType("complex64", "complex64", 5, 8, ("complex64",), wide=True,
              complex_=True),
        DType("complex128", "complex128", 6, 16, ("complex128",), wide=True,
              complex_=True),
        DType("int8", "int8", 7, 1, ("int32",), wide=True, integer=True),
        DType("int32", "int32", 8, 4, (), integer=True),
    )
}
BY_CODE: Dict[int, DType] = {r.code: r for r in TABLE.values()}

# Other spellings accepted for dtype=: gemm.h's names and a few common ones.
ALIASES: Dict[str, str] = {
    "bf16": "bfloat16", "fp16": "float16", "f16": "float16",
    "half": "float16", "fp32": "float32", "f32": "float32",
    "single": "float32", "fp64": "float64", "f64": "float64",
    "double": "float64", "c64": "complex64", "c128": "complex128",
    "i8": "int8", "s8": "int8", "i32": "int32", "s32": "int32",
}


def served_names() -> str:
    """'bfloat16, float16, float32' (and the wide types and int8 when
    available): the input types."""
    return ", ".join(r.name for r in TABLE.values()
                     if r.available and r.outs)


_BY_NP: Dict[np.dtype, Optional[DType]] = {}  # cache: dtype.name is slow


def lookup(spec: Any) -> Optional[DType]:
    """The row for a dtype spec (a name, a numpy dtype or type,
    ml_dtypes.bfloat16), or None if gemmd does not know the type. Raises
    TypeError for a spec numpy does not understand."""
    if isinstance(spec, str):
        key = ALIASES.get(spec.lower(), spec.lower())
        if key in TABLE:
            return TABLE[key]
    dt = spec if isinstance(spec, np.dtype) else np.dtype(spec)
    try:
        return _BY_NP[dt]
    except KeyError:
        row = _BY_NP[dt] = TABLE.get(dt.name)
        return row


def require(spec: Any, what: str) -> DType:
    """The row for spec, or DTypeError naming what the type was for."""
    try:
        row = lookup(spec)
    except TypeError:
        # numpy's own words ("data type 'float8' not understood") say no
        # more than these
        raise DTypeError("%s: data type %r not understood (gemmd "
                         "multiplies %s)" % (what, spec, served_names())) \
            from None
    if row is None:
        raise DTypeError(
            "%s: gemmd does not multiply %s (it multiplies %s)" %
            (what, np.dtype(spec).name, served_names()))
    if not row.available:
        raise DTypeError(
            "%s: %s needs a libgemmclient and gemmd that serve it (this "
            "one multiplies %s); pass dtype='float32' to convert" %
            (what, row.name, served_names()))
    return row


def promote(x: np.dtype, y: np.dtype) -> np.dtype:
    """numpy's result type of two operand types; bfloat16 with float16
    (which numpy cannot promote) gives float32."""
    if x == y:
        return x
    try:
        return np.result_type(x, y)
    except TypeError:
        if {x.name, y.name} == {"bfloat16", "float16"}:
            return np.dtype(np.float32)
        raise DTypeError(
            "matmul: no common data type for %s and %s" % (x, y)) from None
