"""gemmd: matrix multiplies on the GPU through the gemmd daemon, from numpy.

    import gemmd
    with gemmd.connect() as client:        # GEMM_URL or the default socket
        a = client.empty((4096, 4096), "bfloat16")   # in shared memory
        b = client.asarray(np.random.rand(4096, 4096), "bfloat16")
        w = client.load("W.npy")           # a .npy file, read into it
        a[...] = ...
        d = client.matmul(a, b.T, out_dtype="float32")   # no copies
    d = gemmd.matmul(x, y)                 # any arrays, a default client

The daemon owns the GPU; this process loads no CUDA, only libgemmclient
(through ctypes). Arrays made by a client live in shared memory that gemmd
maps too, so GEMMs read and write them in place; other arrays are copied
into reused staging buffers (load() reads a .npy file into gemmd memory
directly, so a GEMM on it copies nothing). Errors are GemmError subclasses.

Importing this module is cheap: numpy and libgemmclient are loaded on first
use (PEP 562 module attributes).
"""
from __future__ import annotations

import _thread  # builtin: threading and typing cost ~10 ms to import
import os as _os

from ._errors import (GemmError, DaemonNotRunning, DaemonNotAnswering,
                      PermissionDenied, ConnectionClosed,
                      ClientClosed, ShuttingDown, InvalidArgument, ShapeError,
                      DTypeError, Busy, Limit, Timeout, Abandoned,
                      Unsupported,
                      OutOfMemory, LibraryNotFound, ERRORS, CODES, error_for)

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Optional

    from ._client import Client, Tensor

__version__ = "0.1.0"

__all__ = [
    "connect", "Client", "Tensor", "matmul", "matmul_grouped", "load",
    "default_client",
    "GemmError", "DaemonNotRunning", "DaemonNotAnswering", "PermissionDenied",
    "ConnectionClosed", "ClientClosed",
    "ShuttingDown", "InvalidArgument", "ShapeError", "DTypeError", "Busy",
    "Limit", "Timeout", "Abandoned", "Unsupported", "OutOfMemory",
    "LibraryNotFound",
    "ERRORS", "CODES", "error_for", "library_path", "__version__",
]


def connect(url: Optional[str] = None, *, timeout: Optional[float] = 60.0,
            pool_bytes: int = 2 << 30,
            panels: Optional[int] = None) -> "Client":
    """Connects to gemmd at url (None: $GEMM_URL, else
    ipc://$XDG_RUNTIME_DIR/gemmd.sock if that socket exists, else
    ipc:///run/gemmd/gemmd.sock) and returns a Client. timeout: seconds a
    request may wait for its reply (None: forever). pool_bytes: idle shared
    memory kept for reuse. panels: how many panels of D's rows a large
    matmul of copied operands runs as (None: $GEMMD_PANELS, else 1:
    off). Raises DaemonNotRunning when nothing listens
    there, DaemonNotAnswering when gemmd accepts but does not answer within
    min(timeout, 2 s) (stopped or hung), PermissionDenied when this user
    may not use its socket, LibraryNotFound when libgemmclient cannot be
    loaded."""
    from ._client import Client

    return Client(url, timeout=timeout, pool_bytes=pool_bytes,
                  panels=panels)


_default: Optional["Client"] = None
_default_lock = _thread.allocate_lock()


def default_client() -> "Client":
    """The client gemmd.matmul uses: connected to the default URL on first
    use (again if it was closed). Thread-safe."""
    global _default
    cl = _default
    if cl is not None and not cl.closed:
        return cl
    with _default_lock:
        if _default is None or _default.closed:
            _default = connect()
        return _default


def matmul(a: Any, b: Any, out: Any = None, **kwargs: Any) -> Any:
    """Client.matmul on the default client (see default_client()):
    alpha * a @ b + beta * c computed by gemmd."""
    return default_client().matmul(a, b, out, **kwargs)


def matmul_grouped(a: Any, b: Any, out: Any = None, **kwargs: Any) -> Any:
    """Client.matmul_grouped on the default client: a list of products
    of different shapes in one request."""
    return default_client().matmul_grouped(a, b, out, **kwargs)


def load(path: Any, dtype: Any = None) -> Any:
    """Client.load on the default client: a .npy file read straight into
    gemmd's shared memory (np.load without the staging copy a GEMM on
    its result would make)."""
    return default_client().load(path, dtype)


def library_path() -> str:
    """The libgemmclient this process loaded (loading it now if needed)."""
    from . import _capi

    return _capi.lib().path


def _after_fork_in_child() -> None:
    global _default_lock
    _default_lock = _thread.allocate_lock()


def __getattr__(name: str) -> Any:
    # Client and Tensor load numpy and libgemmclient: only when asked for.
    if name in ("Client", "Tensor"):
        from . import _client

        return getattr(_client, name)
    raise AttributeError("module 'gemmd' has no attribute %r" % name)


_os.register_at_fork(after_in_child=_after_fork_in_child)
