"""gemmd.dask: dask.array matrix products through each node's gemmd.

    import dask.array as da
    from gemmd.dask import matmul
    c = matmul(a, b)            # a: (m, k), b: (k, n) dask arrays
    c.compute()                 # each output block is one GEMM, run by the
                                # gemmd of the host its Dask worker is on

gemmd is the node-local engine under Dask: one daemon per host owns its
GPUs, and every worker process on that host sends its blocks to it (the
URL is $GEMM_URL on the worker, else the default socket, or the ``url``
given here). Output block (i, j) is computed as one GEMM of A's i-th row
panel (all of K) and B's j-th column panel (blockwise with
concatenate=True), so Dask moves the panels between nodes and gemmd
multiplies them where they land. Blocks come back as plain numpy arrays.

Each worker process keeps one connection per URL, opened on first use.
Importing this module imports dask.array (it is optional for the rest of
the package).
"""
from __future__ import annotations

import threading
from typing import Any, Dict, Optional, Union

import numpy as np

import dask.array as da

__all__ = ["matmul", "block_matmul"]

_clients: Dict[Optional[str], Any] = {}
_lock = threading.Lock()


def _client(url: Optional[str]) -> Any:
    """This process's connection to the gemmd at url (None: the
    default URL), opened on first use or after it was closed."""
    import gemmd

    cl = _clients.get(url)
    if cl is not None and not cl.closed:
        return cl
    with _lock:
        cl = _clients.get(url)
        if cl is None or cl.closed:
            cl = gemmd.connect(url)
            _clients[url] = cl
        return cl


def block_matmul(a: np.ndarray, b: np.ndarray, url: Optional[str] = None,
                 out_dtype: Optional[Any] = None,
                 precision: Optional[Union[str, int]] = None
                 ) -> np.ndarray:
    """a @ b by the gemmd at url, as a plain numpy array: what each block
    of matmul() runs. Usable by hand in map_blocks/blockwise too."""
    d = _client(url).matmul(a, b, out_dtype=out_dtype, precision=precision)
    return np.array(d, copy=True)  # free of the client's shared memory


def matmul(a: Any, b: Any, url: Optional[str] = None,
           out_dtype: Optional[Any] = None,
           precision: Optional[Union[str, int]] = None) -> Any:
    """a @ b for 2-D dask arrays (or arrays dask.array.asarray takes), each
    output block one GEMM on its worker's gemmd: A's row panel times B's
    column panel (a's column chunks are made to match b's row chunks).
    url: the gemmd every worker uses (default: its own host's, from
    $GEMM_URL or the default socket). out_dtype: the result's type
    (default: the inputs'; bfloat16 and float16 inputs may give float32).
    precision: 'tf32' or 'fp32' for float32 inputs, the number of Ozaki-II
    moduli (2..20) for float64 inputs (as Client.matmul). Returns a lazy
    dask array."""
    a = da.asarray(a)
    b = da.asarray(b)
    if a.ndim != 2 or b.ndim != 2:
        raise ValueError("gemmd.dask.matmul takes 2-D arrays, got %d-D and "
                         "%d-D" % (a.ndim, b.ndim))
    if a.shape[1] != b.shape[0]:
        raise ValueError("shapes %s and %s do not multiply" %
                         (a.shape, b.shape))
    b = b.rechunk({0: a.chunks[1]})
    dtype = np.dtype(out_dtype) if out_dtype is not None else \
        np.result_type(a.dtype, b.dtype)
    return da.blockwise(block_matmul, "ij", a, "ik", b, "kj",
                        concatenate=True, dtype=dtype, url=url,
                        out_dtype=out_dtype, precision=precision)
