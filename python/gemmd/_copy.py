"""Copies between numpy arrays and gemmd's shared-memory buffers, split
across a few threads when large.

numpy releases the GIL while it copies or casts built-in types (and
ml_dtypes' bfloat16), so a copy of tens of MiB into a staging buffer runs on
several cores at once. The worker threads are started on first use (a small
pool of our own: concurrent.futures would cost a fresh process ~15 ms of
imports before its first result) and again in a child after fork, where the
parent's threads do not exist.
"""
from __future__ import annotations

import collections
import os
import threading

import numpy as np

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing costs a fresh process ~4 ms: checkers only
    from typing import Any, Callable, List, Optional

# Below this many bytes a copy runs in the calling thread alone.
PARALLEL_BYTES = 8 << 20
THREADS = max(1, min(8, os.cpu_count() or 1))


class _Workers:
    """THREADS - 1 daemon threads running callables from a queue."""

    def __init__(self, n: int) -> None:
        self.q: collections.deque = collections.deque()
        self.cv = threading.Condition(threading.Lock())
        for i in range(n):
            threading.Thread(target=self._loop, name="gemmd-copy-%d" % i,
                             daemon=True).start()

    def _loop(self) -> None:
        while True:
            with self.cv:
                while not self.q:
                    self.cv.wait()
                fn = self.q.popleft()
            fn()

    def run(self, fns: List[Callable[[], None]]) -> None:
        """Runs fns[1:] on the workers and fns[0] here; returns when all
        are done, raising the first exception."""
        done = threading.Semaphore(0)
        errors: List[BaseException] = []

        def wrap(fn: Callable[[], None]) -> Callable[[], None]:
            def task() -> None:
                try:
                    fn()
                except BaseException as e:  # re-raised in the caller
                    errors.append(e)
                finally:
                    done.release()
            return task

        with self.cv:
            self.q.extend(wrap(f) for f in fns[1:])
            self.cv.notify(len(fns) - 1)
        wrap(fns[0])()
        for _ in fns:
            done.acquire()
        if errors:
            raise errors[0]


_workers: Optional[_Workers] = None
_lock = threading.Lock()


def _get_workers() -> _Workers:
    global _workers
    if _workers is None:
        with _lock:
            if _workers is None:
                _workers = _Workers(THREADS - 1)
    return _workers


def _after_fork_in_child() -> None:
    global _workers, _lock
    _workers = None
    _lock = threading.Lock()


os.register_at_fork(after_in_child=_after_fork_in_child)


def run_parallel(fns: List[Callable[[], None]]) -> None:
    """Runs fns at once: the first in the calling thread, the others on
    the worker threads; returns when all are done, raising the first
    exception. Any thread."""
    _get_workers().run(fns)


def copy(dst: np.ndarray, src: Any) -> None:
    """dst[...] = src, converting the element type as needed (casting
    'unsafe': the caller chose the types). Large copies are split by rows
    over THREADS threads, the caller's included. Any thread."""
    parts = min(THREADS, dst.nbytes // (PARALLEL_BYTES // 2))
    if parts < 2 or dst.ndim == 0 or dst.shape[0] < parts:
        np.copyto(dst, src, casting="unsafe")
        return
    src = np.asarray(src)
    if src.shape != dst.shape:
        src = np.broadcast_to(src, dst.shape)
    rows = dst.shape[0]
    step = (rows + parts - 1) // parts

    def part(lo: int) -> Callable[[], None]:
        return lambda: np.copyto(dst[lo:lo + step], src[lo:lo + step],
                                 casting="unsafe")

    _get_workers().run([part(lo) for lo in range(0, rows, step)])
