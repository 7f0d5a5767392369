"""The Client: a connection to gemmd (reopened after gemmd restarts and in a
forked child), numpy arrays in its shared memory, matmul (stacks included)
and matmul_grouped, futures, resident tensors, ping/status/kernels.

What lives on a connection does not carry over to the next one: arrays
over its buffers stay readable and are copied (staged) when used, tensors
raise ConnectionClosed. A request is sent again on a new connection only
when it cannot have reached the old one (it failed at send).

The top of the package's layers (_conn <- _tensor <- _gemm <- _batch <-
_stackcall, _grouped, _panels <- _client): nothing below imports it. A
large 2-D matmul of copied operands runs as panels (_panels). Stacks,
grouped requests and the level-3 routines (_stackcall, _grouped, _blas3
and _batch under them) are imported by the first call that needs them:
a fresh process's first plain matmul does not pay for them.

Thread-safe: every public method may be called from any thread.
"""
from __future__ import annotations

import ctypes
import os
import threading
import time
import weakref

import numpy as np

from . import _capi, _copy, _dtypes, _npyload, _panels
from ._capi import GemmMatrix
from ._conn import _Conn, _Lost, _buffer_of, _OK, _ERR_CLOSED
from ._errors import (ClientClosed, ConnectionClosed, GemmError,
                      InvalidArgument, ShapeError, error_for)
from ._gemm import _Call, _Plan, _locate, _run
from ._tensor import Tensor, _TensorHandle

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing costs a fresh process ~4 ms: checkers only
    from concurrent.futures import Future
    from typing import (Any, Callable, Dict, List, Optional, Sequence,
                        Tuple, Union)

    from ._gemm import ArrayLike, DTypeLike, Operand

__all__ = ["Client", "Tensor"]


# ---- the client ---------------------------------------------------------

_clients: "weakref.WeakSet[Client]" = weakref.WeakSet()


def _resolve_dtype(spec: DTypeLike) -> np.dtype:
    """numpy dtype for a spec; gemmd's names ("bf16", "bfloat16") too."""
    if isinstance(spec, str):
        row = _dtypes.lookup(spec)
        if row is not None:
            return row.np
    dt = np.dtype(spec)
    if dt.hasobject:
        raise TypeError("gemmd arrays cannot hold Python objects")
    return dt


def _shape_of(shape: Any) -> Tuple[int, ...]:
    if isinstance(shape, (int, np.integer)):
        shape = (shape,)
    shape = tuple(int(s) for s in shape)
    if any(s < 0 for s in shape):
        raise ValueError("negative dimensions are not allowed")
    return shape


class Client:
    """A connection to gemmd. Thread-safe; a context manager (close() on
    exit). Made by gemmd.connect().

    url: the daemon's address (None: $GEMM_URL, else
    ipc://$XDG_RUNTIME_DIR/gemmd.sock if that socket exists, else
    ipc:///run/gemmd/gemmd.sock). timeout: seconds a request may wait for
    its reply (None: forever). pool_bytes: how much idle shared memory to
    keep for reuse as staging buffers and results. panels: how many
    panels of D's rows a large matmul of copied operands runs as, so that
    the copies overlap gemmd's work (None: $GEMMD_PANELS, else 1: off;
    see matmul).

    Raises DaemonNotRunning when nothing listens at url.
    """

    def __init__(self, url: Optional[str] = None, *,
                 timeout: Optional[float] = 60.0,
                 pool_bytes: int = 2 << 30,
                 panels: Optional[int] = None) -> None:
        if url is None:
            lib = _capi.lib()
            buf = ctypes.create_string_buffer(1024)
            rv = lib.gemm_default_url(buf, len(buf))
            if rv != _OK:
                raise error_for(rv, "cannot form the default URL")
            url = buf.value.decode()
        if timeout is None:
            self._timeout_ms = -1
        else:
            if timeout <= 0:
                raise InvalidArgument("timeout must be > 0 seconds or None")
            self._timeout_ms = max(1, int(round(timeout * 1000)))
        self.url: str = url
        self.panels = panels
        self._pool_limit = int(pool_bytes)
        self._lock = threading.Lock()
        self._closed = False
        self._conn: Optional[_Conn] = _Conn(url, self._timeout_ms,
                                            self._pool_limit)
        _clients.add(self)

    # -- connection management --

    def _live(self) -> _Conn:
        """The connection to use now: the current one, or a new one after
        gemmd went away or in a forked child. ClientClosed after close()."""
        conn = self._conn
        if conn is not None and not conn.lost and conn.pid == os.getpid():
            return conn
        with self._lock:
            if self._closed:
                raise ClientClosed("gemmd client is closed (%s)" % self.url)
            conn = self._conn
            if conn is None or conn.lost or conn.pid != os.getpid():
                if conn is not None:
                    if conn.pid != os.getpid():
                        conn.abandon()
                    else:
                        conn.close(by_user=False)
                self._conn = None
                self._conn = conn = _Conn(self.url, self._timeout_ms,
                                          self._pool_limit)
            return conn

    def _with_conn(self, fn: Callable[[_Conn], Any],
                   idempotent: bool = False) -> Any:
        """Runs fn(conn) holding conn.enter(); again on a new connection
        if the first was lost before fn's request could have had an effect
        (fn raises _Lost, or the connection is found lost at enter), or
        after any GEMM_ERR_CLOSED when fn is idempotent."""
        for _ in range(3):
            conn = self._live()
            try:
                conn.enter()
            except _Lost:
                continue
            try:
                return fn(conn)
            except _Lost:
                continue
            except GemmError as e:
                if e.code == _ERR_CLOSED and idempotent:
                    continue
                raise
            finally:
                conn.exit()
        raise ConnectionClosed(
            "lost the connection to gemmd at %s again and again" % self.url)

    def close(self) -> None:
        """Closes the connection (waiting for requests in flight). Arrays
        made by this client stay valid numpy arrays until they are
        collected; GEMMs on a closed client raise ClientClosed. Closing
        twice does nothing."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            conn, self._conn = self._conn, None
        if conn is not None:
            if conn.pid != os.getpid():
                conn.abandon()
            else:
                conn.close(by_user=True)

    def set_timeout(self, timeout: Optional[float]) -> None:
        """How long requests started from now on wait for their reply, in
        seconds (None: forever)."""
        if timeout is not None and timeout <= 0:
            raise InvalidArgument("timeout must be > 0 seconds or None")
        ms = -1 if timeout is None else max(1, int(round(timeout * 1000)))
        self._timeout_ms = ms
        conn = self._conn
        if conn is not None and conn.pid == os.getpid():
            conn.lib.gemm_client_set_timeout(conn.h, ms)

    @property
    def panels(self) -> int:
        """How many panels a large matmul of copied operands is cut into
        (1: none); settable (None: $GEMMD_PANELS, else 1: off)."""
        return self._panels

    @panels.setter
    def panels(self, n: Optional[int]) -> None:
        if n is None:
            n = _panels.PANELS
        if isinstance(n, bool) or not isinstance(n, (int, np.integer)) \
                or n < 1:
            raise InvalidArgument("panels must be an integer >= 1 (1: "
                                  "off) or None, not %r" % (n,))
        self._panels = int(n)

    @property
    def closed(self) -> bool:
        """Whether close() was called."""
        return self._closed

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __repr__(self) -> str:
        return "<gemmd.Client %s%s>" % (self.url,
                                        " closed" if self._closed else "")

    # -- daemon information --

    def ping(self) -> Dict[str, Any]:
        """One round trip: {'protocol_version', 'server_version', 'backend',
        'device', 'round_trip_us'}."""
        def fn(conn: _Conn) -> Dict[str, Any]:
            info = _capi.GemmServerInfo()
            t0 = time.perf_counter()
            conn.check(conn.lib.gemm_ping(conn.h, ctypes.byref(info)))
            rtt = (time.perf_counter() - t0) * 1e6
            return {
                "protocol_version": info.protocol_version,
                "server_version": info.server_version.decode(),
                "backend": info.backend.decode(),
                "device": info.device.decode(),
                "round_trip_us": rtt,
            }
        return self._with_conn(fn, idempotent=True)

    def status(self) -> Dict[str, Any]:
        """The daemon's counters (gemm_status of gemm.h) as a dict:
        uptime_s, backend, device, requests_served, queue_depth, latency
        percentiles, pinned_bytes, ... (the totals), routine_served (a
        list: requests served per level-3 routine, GEMM first, then symm
        .. trsm), batches_served and batch_problems (batch requests
        answered OK and the problems they held), pins_pending,
        pins_done, pins_failed, pin_seconds and pin_bytes (large buffers
        pinned in the background), spares_ready, spare_bytes,
        spares_lent, spares_none, spares_made and spares_failed (memfds
        gemmd made and pinned ahead, lent to new buffers), and
        "devices": one
        dict per device object (gemm_device_status: index, name, placed,
        running, queued, jobs, failed, panels, busy_s, memory_bytes,
        pinned_bytes, tensors, migrations, tmap_hits, tmap_misses)."""
        def fn(conn: _Conn) -> Dict[str, Any]:
            st = _capi.GemmStatus()
            conn.check(conn.lib.gemm_get_status_sized(
                conn.h, ctypes.byref(st), ctypes.sizeof(st)))
            out: Dict[str, Any] = _fields_dict(st)
            devs = (_capi.GemmDeviceStatus * 16)()
            n = ctypes.c_size_t()
            conn.check(conn.lib.gemm_get_devices(conn.h, devs, 16,
                                                 ctypes.byref(n)))
            out["devices"] = [_fields_dict(devs[i])
                              for i in range(min(n.value, 16))]
            return out
        return self._with_conn(fn, idempotent=True)

    def kernels(self) -> List[Dict[str, Any]]:
        """The backend's kernel catalog: one dict per kernel with name,
        ladder (rung, 0 = off the ladder), reference, summary, ab_types and
        cd_types (dtype names), precisions and transposes ('nn', 'tn',
        'nt', 'tt'; t = that operand transposed)."""
        def fn(conn: _Conn) -> List[Dict[str, Any]]:
            arr = ctypes.POINTER(_capi.GemmKernelInfo)()
            n = ctypes.c_size_t()
            conn.check(conn.lib.gemm_list_kernels(
                conn.h, ctypes.byref(arr), ctypes.byref(n)))
            try:
                return [_kernel_dict(arr[i]) for i in range(n.value)]
            finally:
                conn.lib.gemm_kernel_info_free(arr)
        return self._with_conn(fn, idempotent=True)

    # -- arrays in gemmd memory --

    def empty(self, shape: Any, dtype: DTypeLike = np.float32) -> np.ndarray:
        """A new uninitialised C-ordered array in gemmd's shared memory:
        GEMMs read and write it in place. Its buffer is released (or kept
        for reuse) when the last array over it goes away. (An array of no
        elements is a plain numpy array.)"""
        return self._new(shape, dtype, False)

    def zeros(self, shape: Any, dtype: DTypeLike = np.float32) -> np.ndarray:
        """Like empty(), filled with zeros."""
        return self._new(shape, dtype, True)

    def _new(self, shape: Any, dtype: DTypeLike, zero: bool) -> np.ndarray:
        shape = _shape_of(shape)
        dt = _resolve_dtype(dtype)
        if int(np.prod(shape, dtype=np.int64)) == 0:
            return np.zeros(shape, dt)
        return self._with_conn(lambda conn: conn.array(shape, dt, zero),
                               idempotent=True)

    def asarray(self, a: ArrayLike, dtype: Optional[DTypeLike] = None
                ) -> np.ndarray:
        """a in gemmd's shared memory: a itself if it already is this
        client's memory of that dtype, else a C-ordered copy (converted to
        dtype when given)."""
        arr = a if isinstance(a, np.ndarray) else np.asarray(a)
        dt = _resolve_dtype(dtype) if dtype is not None else arr.dtype
        buf = _buffer_of(arr)
        conn = self._conn
        if buf is not None and buf.conn is conn and arr.dtype == dt and \
                conn is not None and conn.pid == os.getpid():
            return arr
        out = self.empty(arr.shape, dt)
        _copy.copy(out, arr)
        return out

    def load(self, path: Any, dtype: Optional[DTypeLike] = None
             ) -> np.ndarray:
        """np.load(path) for a .npy file (path: a file name, str or
        os.PathLike; not an open file), read straight into gemmd's shared
        memory: one pass over the file and no staging copy when a GEMM
        uses the array (np.load, then matmul, reads the data twice).
        dtype: convert to this type while reading (e.g. "bfloat16" from a
        float32 file), piece by piece. A Fortran-ordered file gives a
        transposed view (used in place, as the transpose flag); a
        bfloat16 file saved by ml_dtypes (descr '<V2') gives bfloat16.
        Raises OSError when the file cannot be read, ValueError when it
        is not a .npy file of numbers or is shorter than its header
        says."""
        path = os.fspath(path)
        hdr = _npyload.read_header(path)
        dt = _npyload.target_dtype(
            hdr, _resolve_dtype(dtype) if dtype is not None else None)
        arr = self.empty(_npyload.storage_shape(hdr), dt)
        _npyload.read_into(path, hdr, arr)
        return _npyload.result_view(arr, hdr)

    def trim(self) -> None:
        """Frees the idle shared-memory buffers kept for reuse."""
        conn = self._conn
        if conn is not None and conn.pid == os.getpid():
            conn.trim()

    def is_gemmd_array(self, a: Any) -> bool:
        """Whether a lives in a buffer of this client's current connection
        (so GEMMs use it in place)."""
        buf = _buffer_of(a)
        return buf is not None and buf.conn is self._conn

    # -- GEMM --

    def matmul(self, a: Operand, b: Operand,
               out: Optional[np.ndarray] = None, *,
               c: Optional[Operand] = None, alpha: float = 1.0,
               beta: float = 0.0, dtype: Optional[DTypeLike] = None,
               out_dtype: Optional[DTypeLike] = None,
               precision: Optional[Union[str, int]] = None,
               kernel: Optional[str] = None) -> Any:
        """alpha * a @ b + beta * c, computed by gemmd; numpy's matmul
        (stacks of matrices included).

        a, b: numpy arrays (anything np.asarray takes) or resident Tensors.
        Operands of more than two dimensions are stacks of matrices whose
        leading (batch) dimensions broadcast as numpy's do; the whole
        stack is one request to gemmd (a 1-D operand is a vector, as in
        numpy).
        Arrays in this client's memory (empty/zeros/asarray, results of
        matmul) are used in place, transposed views and row strides
        included; other arrays are copied into shared memory first.
        out: the result array (the result's shape, dtype out_dtype),
        written in place when it is gemmd memory. c: C, broadcast to the
        result's shape, read when beta != 0 (default: out itself). dtype:
        the type a and b are multiplied in (default: numpy's promotion of
        theirs; bfloat16, float16, float32, float64, complex64,
        complex128, int8). out_dtype: the result's type (default
        dtype; 16-bit inputs may give float32; int8 inputs give int32,
        exact and wrapping modulo 2^32, where numpy's matmul gives int8;
        alpha and beta are then integers in int32's range). precision: for float32
        inputs, 'tf32' (fast) or 'fp32' (the default: float32 accuracy);
        for float64 inputs, and float32 ones with a float32 result, an
        int: the number of moduli of the Ozaki-II emulation (2..20;
        fewer: faster, less accurate, ~15 match DGEMM, ~7 SGEMM;
        default: gemmd picks native DGEMM, for float32 3xTF32, or the
        emulation at their accuracy; the cpu backend always computes
        natively), for single 2-D products only (not stacks). kernel: a kernel name from
        kernels() (default: gemmd picks).

        A large 2-D multiply whose operands or result are copied (plain
        numpy arrays) runs as ``panels`` requests of D's rows, so that
        the copies of one overlap gemmd's work on another: the same
        result within the dtype's rounding (gemmd may pick another kernel
        for fewer rows). A failure raises the same exception; out then
        holds the result in the rows of the panels that completed and is
        unchanged in the others (see _panels.py).

        Returns out, or a new array in gemmd memory. Raises ShapeError and
        DTypeError (before sending anything) and the GemmError of a
        refusal (for a stack, ``.problem`` is the flat index of the bad
        problem in the batch dimensions; nothing is written).
        """
        plan = _Plan(a, b, out, c, alpha, beta, dtype, out_dtype, precision,
                     kernel, self)
        if plan.empty:
            return plan.local_result()
        if plan.batch:
            from . import _stackcall

            return self._with_conn(lambda conn: _stackcall.run(conn, plan))
        return self._with_conn(lambda conn: self._gemm(conn, plan))

    def _gemm(self, conn: _Conn, plan: _Plan) -> Any:
        """One 2-D GEMM on conn: unsplit, or as panels when large and
        copied (caller holds conn.enter())."""
        n = _panels.parts(conn, plan, self._panels)
        if n < 2:
            return _run(conn, plan)
        return _panels.run(conn, plan, n, self._timeout_ms)

    def matmul_grouped(self, a: Sequence[Operand], b: Sequence[Operand],
                       out: Optional[Sequence[Optional[np.ndarray]]] = None,
                       *, c: Optional[Sequence[Optional[Operand]]] = None,
                       alpha: Any = 1.0, beta: Any = 0.0,
                       dtype: Optional[DTypeLike] = None,
                       out_dtype: Optional[DTypeLike] = None,
                       precision: Optional[Union[str, int]] = None,
                       kernel: Optional[str] = None) -> List[Any]:
        """[alpha[i] * a[i] @ b[i] + beta[i] * c[i] for each i] in one
        request: products of different shapes (a mixture-of-experts layer:
        a[i] is expert i's tokens, M rows, 0 for an expert with none).

        a, b: lists of matrices (2-D or 1-D arrays, or Tensors), one pair
        per problem. out, c: None or lists with one array (or None) per
        problem. alpha, beta: one number for all, or one per problem.
        dtype, out_dtype, precision, kernel: as for matmul(), one for all
        problems (dtype default: numpy's promotion of every operand's
        type; no float64 modulus count: that is for single products).
        Problems with a dimension of 0 are answered here.

        Returns the list of results (out[i], or new arrays in gemmd
        memory, views of one buffer). Raises as matmul() does; an error
        about one problem names it and carries its index in
        ``.problem``; a refused request writes nothing.
        """
        from . import _grouped

        gp = _grouped.GroupPlan(a, b, out, c, alpha, beta, dtype, out_dtype,
                                precision, kernel, self)
        if not gp.live:
            return [p.local_result() for p in gp.plans]
        return self._with_conn(lambda conn: _grouped.run(conn, gp))

    def submit(self, a: Operand, b: Operand,
               out: Optional[np.ndarray] = None, *,
               c: Optional[Operand] = None, alpha: float = 1.0,
               beta: float = 0.0, dtype: Optional[DTypeLike] = None,
               out_dtype: Optional[DTypeLike] = None,
               precision: Optional[Union[str, int]] = None,
               kernel: Optional[str] = None) -> "Future":
        """matmul() without waiting: returns a concurrent.futures.Future of
        its result. Inputs that are not gemmd memory are copied before
        submit() returns; gemmd memory is read in place, so leave it alone
        until the future is done. Many may be in flight."""
        from concurrent.futures import Future

        plan = _Plan(a, b, out, c, alpha, beta, dtype, out_dtype, precision,
                     kernel, self)
        fut: Future = Future()
        fut.set_running_or_notify_cancel()
        if plan.empty:
            fut.set_result(plan.local_result())
            return fut
        for _ in range(3):
            conn = self._live()
            try:
                conn.enter()
            except _Lost:
                continue
            try:
                if plan.batch:
                    from . import _stackcall

                    call: Any = _stackcall.StackCall(conn, plan)
                    req = ctypes.c_void_p(call.submit())
                else:
                    call = _Call(conn, plan)
                    req = ctypes.c_void_p()
                    rv = conn.lib.gemm_submit(conn.h, ctypes.byref(call.op),
                                              ctypes.byref(req))
                    if rv == _ERR_CLOSED:
                        conn.lost = True
                        raise _Lost()
                    conn.check(rv)
            except _Lost:
                conn.exit()
                continue
            except BaseException:
                conn.exit()
                raise
            conn.post(req.value, call, fut)  # the waiter calls conn.exit()
            return fut
        raise ConnectionClosed(
            "lost the connection to gemmd at %s again and again" % self.url)

    # -- the other level-3 routines --

    def blas3(self, routine: str, a: ArrayLike, b: Optional[ArrayLike] = None,
              c: Optional[ArrayLike] = None, *, side: str = "left",
              uplo: str = "upper", trans: str = "N", diag: str = "non-unit",
              alpha: complex = 1.0, beta: complex = 0.0) -> np.ndarray:
        """One of the level-3 routines by name ("symm", "hemm", "syrk",
        "herk", "syr2k", "her2k", "trmm", "trsm") on 2-d arrays, row-major
        as numpy stores them (CBLAS's CblasRowMajor meaning). Returns a new
        array: C for symm .. her2k, the product or solution for trmm/trsm
        (b is not changed). Only the triangle uplo names of a is read; the
        rank updates write only that triangle (the other is c's, or zero).
        side: "left"/"right"; uplo: "upper"/"lower"; trans: "N", "T" or
        "C"; diag: "non-unit"/"unit". Raises ShapeError, DTypeError or
        InvalidArgument (numpy's wording) before anything is sent."""
        from . import _blas3

        p = _blas3.plan(routine, a, b, c, side, uplo, trans, diag, alpha,
                        beta)
        return self._with_conn(lambda conn: _blas3.run(conn, p))

    def symm(self, a: ArrayLike, b: ArrayLike, c: Optional[ArrayLike] = None,
             *, side: str = "left", uplo: str = "upper", alpha: complex = 1.0,
             beta: complex = 0.0) -> np.ndarray:
        """alpha A b + beta c (side "right": alpha b A + beta c), A the
        symmetric matrix whose uplo triangle a holds."""
        return self.blas3("symm", a, b, c, side=side, uplo=uplo, alpha=alpha,
                          beta=beta)

    def hemm(self, a: ArrayLike, b: ArrayLike, c: Optional[ArrayLike] = None,
             *, side: str = "left", uplo: str = "upper", alpha: complex = 1.0,
             beta: complex = 0.0) -> np.ndarray:
        """symm with A Hermitian (complex)."""
        return self.blas3("hemm", a, b, c, side=side, uplo=uplo, alpha=alpha,
                          beta=beta)

    def syrk(self, a: ArrayLike, c: Optional[ArrayLike] = None, *,
             uplo: str = "upper", trans: str = "N", alpha: complex = 1.0,
             beta: complex = 0.0) -> np.ndarray:
        """The uplo triangle of alpha a a^T + beta c (trans "T": a^T a)."""
        return self.blas3("syrk", a, None, c, uplo=uplo, trans=trans,
                          alpha=alpha, beta=beta)

    def herk(self, a: ArrayLike, c: Optional[ArrayLike] = None, *,
             uplo: str = "upper", trans: str = "N", alpha: float = 1.0,
             beta: float = 0.0) -> np.ndarray:
        """The uplo triangle of alpha a a^H + beta c (trans "C": a^H a);
        alpha and beta real."""
        return self.blas3("herk", a, None, c, uplo=uplo, trans=trans,
                          alpha=alpha, beta=beta)

    def syr2k(self, a: ArrayLike, b: ArrayLike,
              c: Optional[ArrayLike] = None, *, uplo: str = "upper",
              trans: str = "N", alpha: complex = 1.0,
              beta: complex = 0.0) -> np.ndarray:
        """The uplo triangle of alpha (a b^T + b a^T) + beta c."""
        return self.blas3("syr2k", a, b, c, uplo=uplo, trans=trans,
                          alpha=alpha, beta=beta)

    def her2k(self, a: ArrayLike, b: ArrayLike,
              c: Optional[ArrayLike] = None, *, uplo: str = "upper",
              trans: str = "N", alpha: complex = 1.0,
              beta: float = 0.0) -> np.ndarray:
        """The uplo triangle of alpha a b^H + conj(alpha) b a^H + beta c."""
        return self.blas3("her2k", a, b, c, uplo=uplo, trans=trans,
                          alpha=alpha, beta=beta)

    def trmm(self, a: ArrayLike, b: ArrayLike, *, side: str = "left",
             uplo: str = "upper", trans: str = "N", diag: str = "non-unit",
             alpha: complex = 1.0) -> np.ndarray:
        """alpha op(A) b (side "right": alpha b op(A)), A triangular."""
        return self.blas3("trmm", a, b, side=side, uplo=uplo, trans=trans,
                          diag=diag, alpha=alpha)

    def trsm(self, a: ArrayLike, b: ArrayLike, *, side: str = "left",
             uplo: str = "upper", trans: str = "N", diag: str = "non-unit",
             alpha: complex = 1.0) -> np.ndarray:
        """X with op(A) X = alpha b (side "right": X op(A) = alpha b), A
        triangular."""
        return self.blas3("trsm", a, b, side=side, uplo=uplo, trans=trans,
                          diag=diag, alpha=alpha)

    # -- resident tensors --

    def upload(self, a: ArrayLike, dtype: Optional[DTypeLike] = None
               ) -> Tensor:
        """Copies the 2-D array a into gemmd's memory (the GPU's on the
        cuda backend) and keeps it there: a Tensor, usable in place of an
        array in matmul, whose copy is then skipped."""
        arr = a if isinstance(a, np.ndarray) else np.asarray(a)
        if arr.ndim != 2:
            raise ShapeError("upload: a must be 2-D, not of shape %s" %
                             (arr.shape,))
        row = _dtypes.require(dtype if dtype is not None else arr.dtype,
                              "upload")
        if arr.size == 0:
            raise ShapeError("upload: a has no elements (shape %s)" %
                             (arr.shape,))

        def fn(conn: _Conn) -> Tensor:
            loc = _locate(arr, conn, row.np)
            keep = None
            if loc is None or loc[3]:
                keep = conn.array(arr.shape, row.np)
                _copy.copy(keep, arr)
                m = GemmMatrix(_buffer_of(keep).ptr, 0, arr.shape[1], 0)
            else:
                m = GemmMatrix(loc[0].ptr, loc[1], loc[2], 0)
            tid = ctypes.c_uint64()
            conn.check(conn.lib.gemm_tensor_upload(
                conn.h, ctypes.byref(m), arr.shape[0], arr.shape[1],
                row.code, ctypes.byref(tid)))
            del keep
            return Tensor(_TensorHandle(conn, tid.value,
                                        (arr.shape[0], arr.shape[1]),
                                        row.np), self)
        return self._with_conn(fn, idempotent=True)


def _bits(mask: int, names: Callable[[int], str]) -> List[str]:
    return [names(i) for i in range(32) if mask & (1 << i)]


def _fields_dict(st: ctypes.Structure) -> Dict[str, Any]:
    """A ctypes struct's fields as a dict (char arrays decoded)."""
    out: Dict[str, Any] = {}
    for name, _ in st._fields_:
        v = getattr(st, name)
        if isinstance(v, ctypes.Array) and not isinstance(v, bytes):
            v = list(v)  # e.g. routine_served
        out[name] = v.decode() if isinstance(v, bytes) else v
    return out


def _kernel_dict(k: _capi.GemmKernelInfo) -> Dict[str, Any]:
    def dname(code: int) -> str:
        row = _dtypes.BY_CODE.get(code)
        return row.name if row is not None else "dtype%d" % code

    prec = {0: "default", 1: "tf32", 2: "fp32"}
    return {
        "name": k.name.decode(),
        "ladder": k.ladder,
        "reference": bool(k.reference),
        "summary": k.summary.decode(errors="replace"),
        "ab_types": _bits(k.ab_types, dname),
        "cd_types": _bits(k.cd_types, dname),
        "precisions": _bits(k.precisions, lambda i: prec.get(i, str(i))),
        "transposes": _bits(k.transposes,
                            lambda i: ("n" if i & 1 == 0 else "t") +
                            ("n" if i & 2 == 0 else "t")),
    }


# ---- fork ---------------------------------------------------------------


def _after_fork_in_child() -> None:
    # Locks another thread of the parent held at fork would stay locked.
    for cl in list(_clients):
        cl._lock = threading.Lock()


os.register_at_fork(after_in_child=_after_fork_in_child)
