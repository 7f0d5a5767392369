"""Copies between numpy arrays and gemmd's shared-memory buffers, split
across a few threads when large.

numpy releases the GIL while it copies or casts built-in types (and
ml_dtypes' bfloat16), so a copy of tens of MiB into a staging buffer runs on
several cores at once. The thread pool is made on first use and made again
in a child after fork (the parent's threads do not exist there).
"""
from __future__ import annotations

import os
import threading
from typing import Any, List, Optional

import numpy as np

# Below this many bytes a copy runs in the calling thread alone.
PARALLEL_BYTES = 8 << 20
THREADS = max(1, min(8, os.cpu_count() or 1))

_pool: Optional[Any] = None
_pool_lock = threading.Lock()


def _get_pool() -> Any:
    global _pool
    if _pool is None:
        with _pool_lock:
            if _pool is None:
                from concurrent.futures import ThreadPoolExecutor

                _pool = ThreadPoolExecutor(THREADS - 1,
                                           thread_name_prefix="gemmd-copy")
    return _pool


def _after_fork_in_child() -> None:
    global _pool, _pool_lock
    _pool = None
    _pool_lock = threading.Lock()


os.register_at_fork(after_in_child=_after_fork_in_child)


def copy(dst: np.ndarray, src: Any) -> None:
    """dst[...] = src, converting the element type as needed (casting
    'unsafe': the caller chose the types). Large copies are split by rows
    over THREADS threads, the caller's included. Any thread."""
    nbytes = dst.nbytes
    parts = min(THREADS, nbytes // (PARALLEL_BYTES // 2))
    if parts < 2 or dst.ndim == 0 or dst.shape[0] < parts:
        np.copyto(dst, src, casting="unsafe")
        return
    src = np.asarray(src)
    if src.shape != dst.shape:
        src = np.broadcast_to(src, dst.shape)
    rows = dst.shape[0]
    step = (rows + parts - 1) // parts
    pool = _get_pool()
    futs: List[Any] = []
    for lo in range(step, rows, step):
        futs.append(pool.submit(np.copyto, dst[lo:lo + step],
                                src[lo:lo + step], casting="unsafe"))
    np.copyto(dst[:step], src[:step], casting="unsafe")
    for f in futs:
        f.result()
