"""Fixtures for the gemmd package's tests: a real gemmd on a private socket.

As tests/util/daemon.c does for the C suite: a private directory
(mkdtemp, under $TMPDIR when its path is short), gemmd listening on
ipc://DIR/gemmd.sock with its log in DIR/gemmd.log, started with
--backend $GEMM_TEST_BACKEND (cpu by default) and --threads 2, ready when a
ping answers; stopped with SIGTERM and required to exit 0.

Environment: GEMM_TEST_GEMMD (the gemmd binary; required),
GEMM_TEST_BACKEND (cpu or cuda), GEMM_TEST_KEEP=1 (keep the directories
and their logs).

Fixtures: ``daemon`` (one per session), ``client`` (a new connection to it
per test), ``make_daemon(*extra_args, hold=False)`` (a private daemon for
one test, with options such as --max-queue; with hold=True and the cpu
backend, ``d.hold`` is the test hold, else None).

The test hold (tests/util/hold.h): gemmd_test, the gemmd the ctest runs,
has on the CPU backend a kernel "test-hold" (Hold.KERNEL) that blocks the
worker until the test releases it, so a test keeps a GEMM running (and
those behind it queued) exactly as long as it needs, on any host.
"""
from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import tempfile
import time
from typing import Any, Callable, Dict, Iterator, List, Optional, Sequence

import numpy as np
import pytest

import gemmd

BACKEND = os.environ.get("GEMM_TEST_BACKEND") or "cpu"


def gemmd_path() -> str:
    path = os.environ.get("GEMM_TEST_GEMMD")
    if not path:
        pytest.exit("GEMM_TEST_GEMMD must name the gemmd binary "
                    "(tests/run.sh sets it)", returncode=2)
    return path


def require(tool: str) -> bool:
    """Whether $GEMM_REQUIRE (.ci/run: "all") says this host has tool, so
    that a test needing it fails rather than skips when it is missing."""
    words = os.environ.get("GEMM_REQUIRE", "").replace(",", " ").split()
    return "all" in words or tool in words


class Hold:
    """The test's end of the CPU backend's test hold: gemmd gets the other
    end of a socket pair (GEMMD_TEST_HOLD_FD); a GEMM with kernel=KERNEL
    writes one byte when the worker takes it (wait()) and runs once
    release() writes one back; close() releases every hold for good."""

    KERNEL = "test-hold"

    def __init__(self) -> None:
        self.ours, self.theirs = socket.socketpair()

    def wait(self, timeout: float = 10.0) -> None:
        """Returns once a held GEMM runs; fails after timeout seconds."""
        self.ours.settimeout(timeout)
        try:
            got = self.ours.recv(1)
        except socket.timeout:
            raise AssertionError("no held GEMM reached the worker within "
                                 "%g s" % timeout) from None
        assert got == b"h", "the hold socket closed (gemmd gone?)"

    def release(self) -> None:
        """Lets one held GEMM go on."""
        self.ours.send(b"r")

    def close(self) -> None:
        self.ours.close()
        self.theirs.close()


class Daemon:
    """One gemmd process on a private socket."""

    def __init__(self, extra: Sequence[str] = (), hold: bool = False,
                 env: Optional[Dict[str, str]] = None) -> None:
        tmp = os.environ.get("TMPDIR")
        if not tmp or len(tmp) > 60:
            tmp = "/tmp"
        self.dir = tempfile.mkdtemp(prefix="gemmd-py-", dir=tmp)
        self.sock = os.path.join(self.dir, "gemmd.sock")
        self.url = "ipc://" + self.sock
        self.log = os.path.join(self.dir, "gemmd.log")
        self.extra = list(extra)
        self.env = dict(env or {})  # added to gemmd's environment
        self.proc: Optional[subprocess.Popen] = None
        self.hold: Optional[Hold] = Hold() if hold and BACKEND == "cpu" \
            else None
        self.start()

    def argv(self) -> List[str]:
        args = [gemmd_path(), "--listen", self.url]
        if "--backend" not in self.extra:
            args += ["--backend", BACKEND]
        if "--threads" not in self.extra:
            args += ["--threads", "2"]
        if "--log-level" not in self.extra:
            args += ["--log-level", "info"]
        args += self.extra
        # never outlive the test process
        if shutil.which("setpriv"):
            args = ["setpriv", "--pdeathsig", "KILL", "--"] + args
        return args

    def start(self) -> None:
        """Starts gemmd and waits (10 s at most) until it answers a ping."""
        env, fds = dict(os.environ, **self.env), ()
        if self.hold is not None:
            fd = self.hold.theirs.fileno()
            env["GEMMD_TEST_HOLD_FD"] = str(fd)
            fds = (fd,)
        with open(self.log, "ab") as log:
            self.proc = subprocess.Popen(self.argv(), stdin=subprocess.DEVNULL,
                                         stdout=log, stderr=log, env=env,
                                         pass_fds=fds)
        until = time.monotonic() + 10
        last: Exception = RuntimeError("no attempt")
        while time.monotonic() < until:
            if self.proc.poll() is not None:
                raise RuntimeError("gemmd exited during start-up (status %s)"
                                   ":\n%s" % (self.proc.returncode,
                                              self.log_tail()))
            try:
                with gemmd.connect(self.url, timeout=1.0) as c:
                    c.ping()
                    if self.hold is not None and Hold.KERNEL not in [
                            k["name"] for k in c.kernels()]:
                        # not a gemmd_test build: no hold to be had
                        self.hold.close()
                        self.hold = None
                return
            except gemmd.GemmError as e:
                last = e
                time.sleep(0.01)
        self.kill()
        raise RuntimeError("gemmd did not answer a ping within 10 s: %s\n%s"
                           % (last, self.log_tail()))

    def log_tail(self, n: int = 4000) -> str:
        try:
            with open(self.log, "rb") as f:
                data = f.read()
        except OSError:
            return ""
        return data[-n:].decode(errors="replace")

    def log_has(self, needle: str, timeout: float = 10.0) -> bool:
        """Polls the log until a line contains needle (for what only the
        log shows, such as a handled signal); whether one did."""
        return eventually(lambda: needle in self.log_tail(1 << 20), timeout)

    def stop(self, timeout: float = 20.0) -> Optional[int]:
        """Releases the hold for good, SIGTERM; the exit status, or None if
        it had to be killed."""
        if self.hold is not None:
            self.hold.close()
            self.hold = None
        if self.proc is None or self.proc.poll() is not None:
            return self.proc.returncode if self.proc else None
        self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            return None

    def kill(self) -> None:
        """SIGKILL, then the hold closed: a held GEMM never gets to run
        (and answer) between the two. A gemmd still there 30 s after
        SIGKILL (stuck in the kernel, e.g. in the GPU driver) fails the
        test saying so instead of hanging the suite."""
        stuck = None
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                stuck = self.proc.pid
        if self.hold is not None:
            self.hold.close()
            self.hold = None
        if stuck is not None:
            raise RuntimeError("gemmd (pid %d) still running 30 s after "
                               "SIGKILL (stuck in the kernel?); its log:\n%s"
                               % (stuck, self.log_tail()))

    def destroy(self) -> None:
        self.kill()
        if os.environ.get("GEMM_TEST_KEEP", "0") not in ("", "0"):
            print("kept %s (GEMM_TEST_KEEP)" % self.dir)
        else:
            shutil.rmtree(self.dir, ignore_errors=True)

    def stop_checked(self) -> None:
        """Stops gemmd and fails the test unless it exits 0."""
        try:
            st = self.stop()
            assert st == 0, ("gemmd did not exit 0 after SIGTERM (status "
                             "%s):\n%s" % (st, self.log_tail()))
        finally:
            self.destroy()


def pytest_report_header(config: object) -> List[str]:
    from gemmd import _capi

    return ["gemmd package: %s" % os.path.dirname(gemmd.__file__),
            "libgemmclient: %s (%s)" % (_capi.lib().path, _capi.lib().how),
            "gemmd: %s --backend %s" % (os.environ.get("GEMM_TEST_GEMMD"),
                                        BACKEND)]


@pytest.fixture(scope="session")
def daemon() -> Iterator[Daemon]:
    d = Daemon()
    yield d
    d.stop_checked()


@pytest.fixture
def client(daemon: Daemon) -> Iterator["gemmd.Client"]:
    with gemmd.connect(daemon.url, timeout=120.0) as c:
        yield c


@pytest.fixture
def make_daemon() -> Iterator[Callable[..., Daemon]]:
    made: List[Daemon] = []

    def make(*extra: str, hold: bool = False) -> Daemon:
        d = Daemon(extra, hold)
        made.append(d)
        return d

    yield make
    for d in made:
        if d.proc is not None and d.proc.poll() is None:
            d.stop_checked()
        else:
            d.destroy()


def eventually(fn: Callable[[], bool], timeout: float = 10.0) -> bool:
    """Polls fn until it is true (True) or timeout seconds pass (False):
    for what gemmd does asynchronously, such as dropping a closed
    connection's buffers and tensors."""
    until = time.monotonic() + timeout
    while not fn():
        if time.monotonic() > until:
            return False
        time.sleep(0.01)
    return True


# ---- numerical checks ---------------------------------------------------

# Relative Frobenius error allowed against an fp64 reference computed from
# the inputs as gemmd saw them (gemmctl --check's bounds): the loosest type
# of the request decides.
TOL = {"float32": 1e-5, "float16": 2e-3, "bfloat16": 1e-2, "tf32": 2e-3,
       "float64": 1e-12, "complex64": 1e-5, "complex128": 1e-12}


def tolerance(*types: str) -> float:
    return max(TOL[t] for t in types)


def rel_err(got: np.ndarray, ref: np.ndarray) -> float:
    got = f64(got)
    ref = f64(ref)
    num = np.linalg.norm((got - ref).ravel())
    den = np.linalg.norm(ref.ravel())
    return float(num / den) if den > 0 else float(num)


def bound_err(got: np.ndarray, a: np.ndarray, b: np.ndarray,
              alpha: float = 1.0, beta: float = 0.0,
              c: Optional[np.ndarray] = None) -> float:
    """The largest |got - (alpha a @ b + beta c)| of an element over its
    own rounding scale (|alpha| |a| @ |b| + |beta| |c|, stacks and c
    broadcast as numpy does): a relative error that cancellation in a
    short dot product cannot inflate, where rel_err's norm of a small
    result can be as small as one wants. An element whose scale is 0
    must be exact."""
    ref = alpha * np.matmul(f64(a), f64(b))
    scale = abs(alpha) * np.matmul(np.abs(f64(a)), np.abs(f64(b)))
    if c is not None and beta != 0:
        ref = ref + beta * f64(c)
        scale = scale + abs(beta) * np.abs(f64(c))
    err = np.abs(f64(got) - ref)
    with np.errstate(divide="ignore", invalid="ignore"):
        r = np.where(scale > 0, err / scale, np.where(err > 0, np.inf, 0.0))
    return float(r.max()) if r.size else 0.0


def rand(rng: np.random.Generator, shape: Sequence[int],
         dtype: object = np.float32) -> np.ndarray:
    """Uniform in [-1, 1), of dtype (never zeros); complex: both parts."""
    x = rng.random(shape) * 2 - 1
    if np.issubdtype(np.dtype(dtype), np.complexfloating):
        x = x + 1j * (rng.random(shape) * 2 - 1)
    return x.astype(dtype)


def operand(client: Any, rng: np.random.Generator, rows: int, cols: int,
            dtype: object, layout: str) -> np.ndarray:
    """A rows x cols array of dtype (rand's values; int8: -100..99) laid
    out as layout says: "c", "f", "t-view" (a transposed view), "strided"
    (every other row, every third column), "gemmd" (client.asarray),
    "gemmd-t" (its transposed view) or "gemmd-slice" (a slice of a larger
    one)."""
    def r(shape: Any) -> np.ndarray:
        if np.dtype(dtype) == np.int8:
            return rng.integers(-100, 100, shape).astype(np.int8)
        return rand(rng, shape, dtype)
    if layout == "c":
        return r((rows, cols))
    if layout == "f":
        return np.asfortranarray(r((rows, cols)))
    if layout == "t-view":
        return r((cols, rows)).T
    if layout == "strided":
        return r((rows * 2, cols * 3))[::2, 1::3]
    if layout == "gemmd":
        return client.asarray(r((rows, cols)))
    if layout == "gemmd-t":
        return client.asarray(r((cols, rows))).T
    assert layout == "gemmd-slice", layout
    big = client.asarray(r((rows + 2, cols + 3)))
    return big[1:1 + rows, 2:2 + cols]


def f64(a: np.ndarray) -> np.ndarray:
    """a in float64 (complex128 when complex): the reference's type."""
    a = np.asarray(a)
    if np.issubdtype(a.dtype, np.complexfloating):
        return a.astype(np.complex128)
    return a.astype(np.float64)


@pytest.fixture
def bclient(client: "gemmd.Client",
            monkeypatch: pytest.MonkeyPatch) -> "gemmd.Client":
    """client, for tests of batched requests (stacks, groups). When this
    libgemmclient has no batch API the test is skipped (failed under
    GEMM_REQUIRE), or with GEMM_TEST_BATCH_EMULATOR=1 its batches run in
    tests/batch_emulator.py (the package's side alone)."""
    lib = client._live().lib
    if os.environ.get("GEMM_TEST_BATCH_EMULATOR", "0") not in ("", "0"):
        from batch_emulator import emulate

        emulate(client, monkeypatch)
    elif lib.gemm_batch_submit is None:
        assert not require("batch"), "libgemmclient has no gemm_batch_submit"
        pytest.skip("skipped: libgemmclient %s has no batch API "
                    "(gemm_batch_submit)" % lib.path)
    return client
