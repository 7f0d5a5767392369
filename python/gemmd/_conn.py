"""One connection to gemmd and the shared memory that lives on it.

- A _Conn is one gemm_client of libgemmclient in this process: its use
  count (``active``: close() waits for the calls in flight, so
  gemm_client_close never races a request), its pool of idle buffers and
  the waiter threads that call gemm_wait for submitted requests (a few per
  connection, not a thread per request).
- A _Buffer is one gemm_buffer. Arrays over it have a _Lease as their
  ``.base`` (directly, or through one numpy view for ml_dtypes types);
  when the last array goes, the lease gives the buffer back to its _Conn,
  which keeps it for the next staging copy or result (a registration, and
  on the GPU a cudaHostRegister, is not paid again) or frees it. After
  close() buffers stay mapped until their arrays die.
- After fork the child never calls into the parent's connection: its
  buffers are unmapped with munmap when their arrays go.

Thread-safe: any thread may use a _Conn; buffers come back from whichever
thread drops the last array.
"""
from __future__ import annotations

import atexit
import collections
import ctypes
import os
import re
import threading

import numpy as np

from . import _capi
from ._errors import ClientClosed, GemmError, error_for

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing costs a fresh process ~4 ms: checkers only
    from concurrent.futures import Future
    from typing import Any, List, Optional, Protocol, Tuple

    class _Pending(Protocol):
        """What post() needs of a submitted request (_gemm's _Call is
        one): the waiter thread calls failed(rv) and raises error(rv) when
        gemm_wait reports an error, else finish() for the result, then
        release() either way."""

        def failed(self, rv: int) -> None: ...

        def error(self, rv: int) -> BaseException: ...

        def finish(self) -> Any: ...

        def release(self) -> None: ...


_OK = 0
_ERR_CLOSED = 5
_ERR_DIMS = 14
_ERR_LIMIT = 20
# gemmd's words for a dimension past --max-dim: "each must be in 1..N"
_DIMS_LIMIT = re.compile(r"each must be in 1\.\.(\d+)")
CONNECT_TIMEOUT_MS = 2000  # GEMM_CONNECT_TIMEOUT_MS of gemm.h

_exiting = False


def exiting() -> bool:
    """True once the interpreter is exiting: finalizers then leave
    libgemmclient alone (the daemon drops the connection with the process)."""
    return _exiting


def _at_exit() -> None:
    global _exiting
    _exiting = True


atexit.register(_at_exit)


class _Lost(Exception):
    """Internal: the connection is gone; retry the call on a new one."""


# ---- buffers ------------------------------------------------------------


class _Buffer:
    """One gemm_buffer: registered on conn, mapped at addr."""

    __slots__ = ("conn", "ptr", "addr", "size", "fresh", "tainted")

    def __init__(self, conn: "_Conn", ptr: int, addr: int, size: int):
        self.conn = conn
        self.ptr = ptr  # gemm_buffer *
        self.addr = addr  # gemm_buffer_data()
        self.size = size  # gemm_buffer_size(): mapped bytes
        self.fresh = True  # zero-filled, never leased
        self.tainted = False  # gemmd may still write it: never reuse


class _Lease:
    """The ``.base`` of the arrays over one buffer (numpy keeps it alive
    through __array_interface__). When the last array goes, the buffer goes
    back to its connection."""

    def __init__(self, buf: _Buffer, shape: Tuple[int, ...],
                 dtype: np.dtype) -> None:
        self.buf: Optional[_Buffer] = buf
        if dtype.isbuiltin == 1:
            self.__array_interface__ = {
                "version": 3, "shape": shape, "typestr": dtype.str,
                "data": (buf.addr, False)}
        else:  # ml_dtypes: bytes here, viewed as the type by _lease_array
            nbytes = dtype.itemsize
            for s in shape:
                nbytes *= s
            self.__array_interface__ = {
                "version": 3, "shape": (nbytes,), "typestr": "|u1",
                "data": (buf.addr, False)}

    def __del__(self) -> None:
        buf, self.buf = self.buf, None
        if buf is not None and not _exiting:
            buf.conn.give_back(buf)


def _lease_array(buf: _Buffer, shape: Tuple[int, ...],
                 dtype: np.dtype) -> np.ndarray:
    """A new C-ordered array of shape and dtype at the start of buf."""
    arr = np.asarray(_Lease(buf, shape, dtype))
    if dtype.isbuiltin != 1:
        arr = arr.view(dtype).reshape(shape)
    return arr


def _lease_of(arr: np.ndarray) -> Optional[_Lease]:
    b = arr.base
    while isinstance(b, np.ndarray):
        b = b.base
    return b if type(b) is _Lease else None


def _buffer_of(arr: Any) -> Optional[_Buffer]:
    """The gemmd buffer under a numpy array, or None."""
    if not isinstance(arr, np.ndarray):
        return None
    lease = _lease_of(arr)
    return lease.buf if lease is not None else None


# ---- one connection -----------------------------------------------------

_OPEN, _CLOSING, _CLOSED = 0, 1, 2
MAX_WAITERS = 4


class _Conn:
    """One gemm_client (connection) of this process, its pooled buffers and
    the waiter threads of its submitted requests."""

    def __init__(self, url: str, timeout_ms: int, pool_limit: int) -> None:
        lib = _capi.lib_for_connection()
        h = ctypes.c_void_p()
        # The handshake waits at most the request timeout, and at most
        # CONNECT_TIMEOUT_MS: a stopped gemmd is reported in that time.
        connect_ms = (CONNECT_TIMEOUT_MS if timeout_ms < 0 else
                      min(timeout_ms, CONNECT_TIMEOUT_MS))
        rv = lib.gemm_client_open_timeout(ctypes.byref(h), url.encode(),
                                          connect_ms)
        if rv != _OK:
            raise error_for(rv, lib.error_message())
        self.lib = lib
        self.h: int = h.value  # type: ignore[assignment]
        self.pid = os.getpid()
        self.url = url
        lib.gemm_client_set_timeout(self.h, timeout_ms)
        # Re-entrant: a lease collected by the garbage collector while this
        # thread holds the lock gives its buffer back through it.
        self.lock = threading.RLock()
        self.idle = threading.Condition(self.lock)  # active reached 0
        self.state = _OPEN
        self.closed_by_user = False
        self.active = 0  # calls using the gemm_client now
        self.lost = False  # a request said GEMM_ERR_CLOSED
        self.features: Optional[int] = None  # the hello's (_fill.features)
        self.pool: List[_Buffer] = []  # idle buffers
        self.pool_bytes = 0
        self.pool_limit = pool_limit
        self.orphans: List[_Buffer] = []  # given back while closing
        self._wq: collections.deque = collections.deque()
        self._wcv = threading.Condition(threading.Lock())
        self._waiters = 0
        self._idle_waiters = 0

    # -- use counting --

    def enter(self) -> None:
        """Counts a call that will use the gemm_client; ClientClosed after
        close(), _Lost when the connection was retired (lost)."""
        with self.lock:
            if self.state != _OPEN:
                if self.closed_by_user:
                    raise ClientClosed("gemmd client is closed (%s)" %
                                       self.url)
                raise _Lost()
            self.active += 1

    def exit(self) -> None:
        """Ends a call counted by enter(); the last one closes a retired
        connection."""
        finish = False
        with self.lock:
            self.active -= 1
            if self.active == 0 and self.state == _CLOSING:
                self.idle.notify_all()
                finish = not self.closed_by_user
        if finish:
            self._finish_close()

    def check(self, rv: int) -> None:
        """Raises the error for rv (with this thread's message); a
        GEMM_ERR_CLOSED marks the connection lost."""
        if rv != _OK:
            raise self.error(rv)

    def error(self, rv: int) -> GemmError:
        """The exception for a failed call's rv, with this thread's
        message (reworded); a GEMM_ERR_CLOSED marks the connection
        lost."""
        return error_for(rv, self.reword(rv, self.lib.error_message()))

    def reword(self, rv: int, msg: str) -> str:
        """libgemmclient's message for rv as this package's user needs it:
        a lost connection (marked lost here) is reopened by the next call,
        not by the caller; a dimension past gemmd's limit names the
        option that sets it."""
        if rv == _ERR_CLOSED:
            self.lost = True
            msg = msg.replace("reopen the client",
                              "the next call reconnects")
        elif rv == _ERR_DIMS:
            m = _DIMS_LIMIT.search(msg)
            if m is not None:
                msg += ("; %s is gemmd's --max-dim (the largest m, n or k "
                        "it takes): split the multiply, or start gemmd "
                        "with a larger --max-dim" % m.group(1))
        elif rv == _ERR_LIMIT and "buffers" in msg:
            msg += ("; every array gemmd returns (and every client.empty "
                    "array) holds one buffer until it is freed: keep fewer "
                    "alive (del them, or copy small results with "
                    "np.array), reuse one with out=, or start gemmd with a "
                    "larger --client-buffers")
        return msg

    # -- closing --

    def close(self, by_user: bool) -> None:
        """Closes the connection: new calls are refused at once; by_user
        waits for the calls in flight, otherwise (a lost connection) the
        last of them closes it. Buffers in live arrays stay mapped."""
        with self.lock:
            if by_user:
                self.closed_by_user = True
            if self.state == _OPEN:
                self.state = _CLOSING
            if self.state == _CLOSED:
                return
            if by_user:
                while self.active > 0:
                    self.idle.wait()
            elif self.active > 0:
                return  # the last exit() finishes
        self._finish_close()

    def _finish_close(self) -> None:
        with self.lock:
            if self.state == _CLOSED:
                return
            self.state = _CLOSED
            bufs = self.pool + self.orphans
            self.pool, self.orphans, self.pool_bytes = [], [], 0
        self.lib.gemm_client_close(self.h)
        for b in bufs:  # unmap only: the client is gone
            self.lib.gemm_buffer_free(b.ptr)

    def abandon(self) -> None:
        """In a forked child: forget the parent's connection without
        calling into its copy of libgemmclient; unmap its idle buffers."""
        bufs, self.pool, self.pool_bytes = self.pool, [], 0
        for b in bufs:
            _capi.munmap(b.addr, b.size)

    def __del__(self) -> None:
        if _exiting or getattr(self, "pid", None) != os.getpid():
            return  # never opened, or inherited through fork
        try:
            if self.state == _OPEN and self.active == 0:
                self.close(by_user=False)
        except Exception:
            pass

    # -- buffers --

    def take(self, nbytes: int) -> _Buffer:
        """A buffer of at least nbytes: an idle one of up to twice the size,
        else a new one (after emptying the pool if gemmd's per-client caps
        or /dev/shm refuse). The caller holds enter()."""
        with self.lock:
            best = None
            for b in self.pool:
                if nbytes <= b.size <= 2 * nbytes + 65536 and (
                        best is None or b.size < best.size):
                    best = b
            if best is not None:
                self.pool.remove(best)
                self.pool_bytes -= best.size
                return best
        try:
            return self._alloc(nbytes)
        except GemmError as e:
            if e.code == _ERR_CLOSED or not self.trim():
                raise
        return self._alloc(nbytes)

    def _alloc(self, nbytes: int) -> _Buffer:
        ptr = ctypes.c_void_p()
        rv = self.lib.gemm_buffer_alloc(self.h, nbytes, ctypes.byref(ptr))
        if rv == _ERR_CLOSED:  # an allocation is safe to retry elsewhere
            self.lost = True
            raise _Lost()
        self.check(rv)
        p = ptr.value
        return _Buffer(self, p, self.lib.gemm_buffer_data(p),
                       self.lib.gemm_buffer_size(p))

    def trim(self) -> bool:
        """Frees the idle pooled buffers; True if there were any."""
        with self.lock:
            bufs, self.pool, self.pool_bytes = self.pool, [], 0
            if not bufs:
                return False
            counted = self.state == _OPEN
            if counted:
                self.active += 1
            else:
                self.orphans.extend(bufs)
                return True
        try:
            for b in bufs:
                self.lib.gemm_buffer_free(b.ptr)
        finally:
            self.exit()
        return True

    def give_back(self, buf: _Buffer) -> None:
        """A buffer whose last array went away: pooled, or freed. Runs in
        whichever thread dropped the array."""
        if self.pid != os.getpid():  # inherited through fork
            _capi.munmap(buf.addr, buf.size)
            return
        with self.lock:
            if self.state == _OPEN:
                if (not buf.tainted and not self.lost and
                        self.pool_bytes + buf.size <= self.pool_limit):
                    self.pool.append(buf)
                    self.pool_bytes += buf.size
                    return
                self.active += 1
                counted = True
            elif self.state == _CLOSING:
                self.orphans.append(buf)
                return
            else:
                counted = False
        try:
            self.lib.gemm_buffer_free(buf.ptr)
        finally:
            if counted:
                self.exit()

    def array(self, shape: Tuple[int, ...], dtype: np.dtype,
              zero: bool = False) -> np.ndarray:
        """A new C-ordered array in a (pooled) buffer of this connection,
        zero-filled if zero. The caller holds enter()."""
        nbytes = dtype.itemsize
        for s in shape:
            nbytes *= s
        buf = self.take(max(nbytes, 1))
        arr = _lease_array(buf, shape, dtype)
        if zero and not buf.fresh:
            arr.view(np.uint8)[...] = 0
        buf.fresh = False
        return arr

    # -- futures --

    def post(self, req: int, call: _Pending, fut: "Future") -> None:
        """Hands a submitted request to the waiter threads."""
        with self._wcv:
            self._wq.append((req, call, fut))
            if self._idle_waiters > 0:
                self._wcv.notify()
                return
            if self._waiters >= MAX_WAITERS:
                return
            self._waiters += 1
        t = threading.Thread(target=self._waiter, name="gemmd-wait",
                             daemon=True)
        t.start()

    def _waiter(self) -> None:
        while True:
            with self._wcv:
                while not self._wq:
                    self._idle_waiters += 1
                    woke = self._wcv.wait(5.0)
                    self._idle_waiters -= 1
                    if not self._wq and not woke:
                        self._waiters -= 1
                        return
                req, call, fut = self._wq.popleft()
            self._complete(req, call, fut)

    def _complete(self, req: int, call: _Pending, fut: "Future") -> None:
        err: Optional[BaseException] = None
        result = None
        try:
            rv = self.lib.gemm_wait(req, None)
            if rv != _OK:
                call.failed(rv)
                raise call.error(rv)
            result = call.finish()
        except BaseException as e:  # noqa: B902 - handed to the future
            err = e
        finally:
            self.exit()
        call.release()
        if err is not None:
            fut.set_exception(err)
        else:
            fut.set_result(result)
