"""The exceptions of the gemmd package and the table that maps every
gemm_error code of libgemmclient to one of them.

The table mirrors GEMM_ERROR_MAP in client/include/gemm/gemm.h (name, number,
message); tests/test_capi.py expands that X-macro with a C compiler and
checks that this copy has every code with the same number and message, so a
code added there fails the test until it gets its line here. A code this
table does not know (a newer daemon) still raises GemmError with its number.

Every error is a GemmError with ``.code`` (the gemm_error number) and
``.message`` (the daemon's words, or ours for mistakes caught before
anything is sent). The subclasses also derive from the built-in exception a
numpy user would catch: InvalidArgument is a ValueError, DTypeError a
TypeError, Timeout a TimeoutError, the connection errors ConnectionError,
PermissionDenied a PermissionError, OutOfMemory a MemoryError.

This module imports nothing heavy: ``import gemmd`` stays cheap.
"""
from __future__ import annotations

TYPE_CHECKING = False  # typing costs ~7 ms to import: only for checkers
if TYPE_CHECKING:
    from typing import Dict, Optional, Tuple, Type


class GemmError(Exception):
    """A gemmd failure: ``code`` is the gemm_error number (gemm.h),
    ``message`` says what went wrong (the daemon's message when the daemon
    refused the request), ``problem`` the index of the problem at fault in
    a stacked or grouped matmul (the flat index into the stack's batch
    dimensions, or the index in the lists), None otherwise."""

    code: int = 23  # GEMM_ERR_INTERNAL unless a subclass or caller says
    problem: Optional[int] = None

    def __init__(self, message: str, code: Optional[int] = None,
                 problem: Optional[int] = None) -> None:
        super().__init__(message)
        self.message: str = message
        if code is not None:
            self.code = code
        if problem is not None:
            self.problem = problem

    @property
    def name(self) -> str:
        """The C name of the code, e.g. ``"GEMM_ERR_BUSY"``."""
        row = ERRORS.get(self.code)
        return row[0] if row is not None else "GEMM_ERR_%d" % self.code

    def __reduce__(self):  # picklable across processes (futures, pools)
        return (_rebuild, (type(self), self.message, self.code,
                           self.problem))


def _rebuild(cls: type, message: str, code: int,
             problem: Optional[int] = None) -> "GemmError":
    return cls(message, code, problem)


class DaemonNotRunning(GemmError, ConnectionError):
    """No gemmd listens at the URL (GEMM_ERR_CONNECT)."""

    code = 3


class DaemonNotAnswering(DaemonNotRunning, TimeoutError):
    """gemmd accepted the connection but did not answer its handshake in
    time: it is stopped (SIGSTOP, a debugger) or hung
    (GEMM_ERR_NOT_ANSWERING). A DaemonNotRunning too, for code that falls
    back to the CPU when gemmd cannot be used."""

    code = 28


class PermissionDenied(GemmError, PermissionError):
    """This user may not use gemmd's socket (the message names the group
    that grants it and the command that joins it), or a request touched
    something of another client's (GEMM_ERR_PERMISSION)."""

    code = 12


class ConnectionClosed(GemmError, ConnectionError):
    """The connection to gemmd went away while a request was in flight
    (gemmd exited or restarted), or something that lived on it (a resident
    tensor) is gone (GEMM_ERR_CLOSED). The client reconnects on its next
    request."""

    code = 5


class ClientClosed(ConnectionClosed):
    """The Client was closed with close() (or its ``with`` block ended)."""


class ShuttingDown(GemmError):
    """gemmd is draining after SIGTERM and takes no new work
    (GEMM_ERR_SHUTDOWN)."""

    code = 10


class InvalidArgument(GemmError, ValueError):
    """A bad argument (GEMM_ERR_INVALID, and the operand layout codes
    NO_BUFFER, BOUNDS, LD, ALIGN)."""

    code = 1


class ShapeError(InvalidArgument):
    """Shapes that do not fit (GEMM_ERR_DIMS): caught before sending, with
    numpy's wording, or refused by gemmd (e.g. past its --max-dim)."""

    code = 14


class DTypeError(InvalidArgument, TypeError):
    """An element type or type combination gemmd does not multiply
    (GEMM_ERR_DTYPE)."""

    code = 17


class Busy(GemmError):
    """gemmd's queue is full (GEMM_ERR_BUSY): try again later."""

    code = 9


class Limit(GemmError):
    """A per-client cap of gemmd was reached: buffers, bytes or requests in
    flight (GEMM_ERR_LIMIT), or a message too large (GEMM_ERR_TOO_LARGE)."""

    code = 20


class Timeout(GemmError, TimeoutError):
    """No reply within the client's timeout and the request was cancelled
    before it started (nothing was written), or its deadline passed in
    gemmd's queue (GEMM_ERR_TIMEOUT)."""

    code = 4


class Abandoned(Timeout):
    """No reply within the timeout and gemmd did not confirm a cancel: the
    request may still run and write its output later (GEMM_ERR_ABANDONED).
    Do not reuse that output array until the client is closed."""

    code = 27


class Unsupported(GemmError):
    """gemmd cannot do this: e.g. a kernel that is missing or cannot serve
    the request (GEMM_ERR_UNSUPPORTED)."""

    code = 22


class OutOfMemory(GemmError, MemoryError):
    """Out of memory: host (GEMM_ERR_NOMEM) or GPU (GEMM_ERR_DEVICE_MEMORY,
    e.g. past gemmd's --max-device-bytes)."""

    code = 2


class LibraryNotFound(GemmError, OSError):
    """libgemmclient could not be loaded (the message lists where it was
    looked for)."""

    code = 21


# GEMM_ERROR_MAP of gemm.h: number -> (name, message, class).
ERRORS: Dict[int, Tuple[str, str, Type[GemmError]]] = {
    0: ("GEMM_OK", "success", GemmError),
    1: ("GEMM_ERR_INVALID", "invalid argument", InvalidArgument),
    2: ("GEMM_ERR_NOMEM", "out of memory", OutOfMemory),
    3: ("GEMM_ERR_CONNECT", "cannot connect to gemmd (is it running?)",
        DaemonNotRunning),
    4: ("GEMM_ERR_TIMEOUT", "timed out", Timeout),
    5: ("GEMM_ERR_CLOSED", "connection closed", ConnectionClosed),
    6: ("GEMM_ERR_PROTOCOL", "malformed or undecodable message", GemmError),
    7: ("GEMM_ERR_VERSION", "protocol version mismatch", GemmError),
    8: ("GEMM_ERR_TOO_LARGE", "message too large", Limit),
    9: ("GEMM_ERR_BUSY", "server busy: queue full", Busy),
    10: ("GEMM_ERR_SHUTDOWN", "server shutting down", ShuttingDown),
    11: ("GEMM_ERR_NO_BUFFER", "unknown buffer id", InvalidArgument),
    12: ("GEMM_ERR_PERMISSION", "permission denied", PermissionDenied),
    13: ("GEMM_ERR_BOUNDS", "operand extends beyond its buffer",
         InvalidArgument),
    14: ("GEMM_ERR_DIMS", "invalid dimensions", ShapeError),
    15: ("GEMM_ERR_LD", "leading dimension too small", InvalidArgument),
    16: ("GEMM_ERR_ALIGN", "misaligned operand offset", InvalidArgument),
    17: ("GEMM_ERR_DTYPE", "unsupported data type combination", DTypeError),
    18: ("GEMM_ERR_SHM", "shared memory error", GemmError),
    19: ("GEMM_ERR_BACKEND", "backend failure", GemmError),
    20: ("GEMM_ERR_LIMIT", "resource limit reached", Limit),
    21: ("GEMM_ERR_IO", "i/o error", GemmError),
    22: ("GEMM_ERR_UNSUPPORTED", "operation not supported", Unsupported),
    23: ("GEMM_ERR_INTERNAL", "internal error", GemmError),
    24: ("GEMM_ERR_DEVICE", "GPU error", GemmError),
    25: ("GEMM_ERR_DEVICE_MEMORY", "out of GPU memory", OutOfMemory),
    26: ("GEMM_ERR_BUFFER_FAULT",
         "buffer truncated or unmapped under a request", GemmError),
    27: ("GEMM_ERR_ABANDONED",
         "gave up waiting: the request may still run and write its output",
         Abandoned),
    28: ("GEMM_ERR_NOT_ANSWERING",
         "gemmd accepted the connection but does not answer (stopped or "
         "hung?)", DaemonNotAnswering),
}

# Codes by C name without the prefix: CODES["BUSY"] == 9.
CODES: Dict[str, int] = {
    row[0].replace("GEMM_ERR_", "").replace("GEMM_", ""): num
    for num, row in ERRORS.items()
}


def error_for(code: int, message: str) -> GemmError:
    """The exception for a gemm_error code (GemmError for an unknown one),
    carrying message (the table's words if message is empty)."""
    row = ERRORS.get(code)
    if row is None:
        return GemmError(message or "gemm error %d" % code, code)
    return row[2](message or row[1], code)
