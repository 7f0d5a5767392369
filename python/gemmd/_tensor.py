"""Resident tensors: matrices gemmd keeps in its memory (the GPU's on the
cuda backend), made by Client.upload() and used in place of arrays in
matmul.

A _TensorHandle is the tensor in gemmd, shared by a Tensor and its ``.T``
views; it is freed by free() or when the last view is collected. It lives
on the connection it was uploaded on: after gemmd restarted (or in a
forked child) using it raises ConnectionClosed. Thread-safe.

Below _gemm and _client: the client that made a tensor is known only as
an _Owner, whatever has matmul.
"""
from __future__ import annotations

import os
import threading

import numpy as np

from . import _conn
from ._conn import _Conn, _Lost, _OK, _ERR_CLOSED
from ._errors import GemmError, InvalidArgument, ShapeError

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing costs a fresh process ~4 ms: checkers only
    from typing import Any, Protocol, Tuple

    class _Owner(Protocol):
        """What a Tensor needs of the client that made it (_client's
        Client is one): matmul, which ``@`` and numpy() run through."""

        def matmul(self, a: Any, b: Any, *args: Any, **kw: Any) -> Any: ...


# ---- resident tensors ---------------------------------------------------


class _TensorHandle:
    """A resident tensor in gemmd, shared by a Tensor and its .T views."""

    def __init__(self, conn: _Conn, tid: int, shape: Tuple[int, int],
                 dtype: np.dtype) -> None:
        self.conn = conn
        self.id = tid
        self.shape = shape  # as stored (rows, cols)
        self.dtype = dtype
        self.freed = False
        self.lock = threading.Lock()

    def free(self, quiet: bool) -> None:
        with self.lock:
            if self.freed:
                return
            self.freed = True
        conn = self.conn
        if _conn.exiting() or conn.pid != os.getpid() or conn.lost:
            return  # gone with its connection
        try:
            conn.enter()
        except (GemmError, _Lost):
            return
        try:
            rv = conn.lib.gemm_tensor_free(conn.h, self.id)
            if rv not in (_OK, _ERR_CLOSED) and not quiet:
                conn.check(rv)
        finally:
            conn.exit()

    def __del__(self) -> None:
        try:
            self.free(quiet=True)
        except Exception:
            pass


class Tensor:
    """A matrix kept resident in gemmd (in GPU memory on the cuda backend),
    made by Client.upload(). Use it in place of an array in matmul (``.T``
    for its transpose), or with ``@`` (``t @ x`` and ``x @ t`` run in
    gemmd); ``numpy()`` or ``np.asarray(t)`` reads its values back; free
    it with free() or let it be collected. It lives on its connection:
    after gemmd restarts, using it raises ConnectionClosed."""

    __slots__ = ("_h", "client", "trans", "conj")

    def __init__(self, handle: _TensorHandle, client: _Owner,
                 trans: bool = False, conj: bool = False) -> None:
        self._h = handle
        self.client = client
        self.trans = trans  # this view is the stored matrix transposed
        self.conj = conj  # ... and conjugated (complex; with trans only)

    @property
    def id(self) -> int:
        """gemmd's tensor id."""
        return self._h.id

    @property
    def shape(self) -> Tuple[int, int]:
        """The shape as this view presents it."""
        r, c = self._h.shape
        return (c, r) if self.trans else (r, c)

    @property
    def dtype(self) -> np.dtype:
        """The element type (numpy dtype)."""
        return self._h.dtype

    @property
    def ndim(self) -> int:
        return 2

    @property
    def T(self) -> "Tensor":
        """The transposed view (no copy: a transpose flag in the GEMM)."""
        if self.conj:
            raise InvalidArgument("tensor.H.T (a conjugate without a "
                                  "transpose) is not a GEMM operand")
        return Tensor(self._h, self.client, not self.trans)

    @property
    def H(self) -> "Tensor":
        """The conjugate transpose (for real types the transpose): the
        GEMM's transpose and conjugate flags, no copy."""
        if not np.issubdtype(self._h.dtype, np.complexfloating):
            return self.T
        if self.trans != self.conj:
            raise InvalidArgument("tensor.T.H (a conjugate without a "
                                  "transpose) is not a GEMM operand")
        return Tensor(self._h, self.client, not self.trans, not self.conj)

    @property
    def freed(self) -> bool:
        """Whether free() was called."""
        return self._h.freed

    def free(self) -> None:
        """Frees the tensor in gemmd (GEMMs already queued that use it
        finish first). Freeing twice, or after the client closed, does
        nothing."""
        self._h.free(quiet=False)

    def numpy(self) -> np.ndarray:
        """A copy of the values as a new numpy array (in gemmd memory) of
        this view's shape. gemmd computes it as 0 * A @ B + 1 * C with this
        tensor as C (A and B zeros, k = 1): the tensor's values exactly
        where they are finite. One GEMM: cheap, but not free."""
        r, c = self._h.shape
        dt = self._h.dtype
        stored = Tensor(self._h, self.client)
        d = self.client.matmul(np.zeros((r, 1), dt), np.zeros((1, c), dt),
                               c=stored, alpha=0.0, beta=1.0, dtype=dt,
                               out_dtype=dt)
        if self.conj:
            np.conjugate(d, out=d)
        return d.T if self.trans else d

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        """np.asarray(tensor): its values (numpy()), converted to dtype."""
        a = self.numpy()
        return a if dtype is None else a.astype(dtype, copy=False)

    # Not an array for numpy's ufuncs: x @ tensor comes to __rmatmul__
    # (gemmd), np.add(tensor, 1) raises TypeError; np.asarray() reads the
    # values back.
    __array_ufunc__ = None

    def __matmul__(self, other: Any) -> Any:
        """tensor @ x: client.matmul(tensor, x), computed by gemmd."""
        return self.client.matmul(self, other)

    def __rmatmul__(self, other: Any) -> Any:
        """x @ tensor: client.matmul(x, tensor), computed by gemmd."""
        return self.client.matmul(other, self)

    def reshape(self, *shape: Any) -> "Tensor":
        want = tuple(shape[0]) if len(shape) == 1 and isinstance(
            shape[0], (tuple, list)) else tuple(shape)
        if want != self.shape:
            raise ShapeError("a resident tensor cannot be reshaped")
        return self

    def __repr__(self) -> str:
        return "<gemmd.Tensor %#x %s %s%s%s>" % (
            self._h.id, "x".join(map(str, self.shape)), self.dtype.name,
            " (conjugate transposed view)" if self.conj else
            " (transposed view)" if self.trans else "",
            " freed" if self._h.freed else "")
