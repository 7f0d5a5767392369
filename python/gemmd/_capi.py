"""The ctypes mirror of libgemmclient's public API (client/include/gemm/gemm.h)
and the code that finds and loads the library.

Everything the package knows about the C ABI lives here: the structs
(gemm_matrix, gemm_op, gemm_timings, ...), the enum values and the function
prototypes. tests/test_capi.py compiles a small C program against gemm.h
that prints sizeof and offsetof of every mirrored struct and field and the
enum values, and compares them with this file, so the mirror cannot drift
from the header silently.

Finding the library, in order:
  1. the paths recorded at build time: CMake writes them, one a line, into
     ``_libpath.txt`` beside this file in the staged copy of the package
     (build/python/pkg), the build tree's library first and the install
     location second;
  2. ``$GEMMD_CLIENT_LIB`` (a path);
  3. the system's loader: ``libgemmclient.so.0`` (LD_LIBRARY_PATH, the ld.so
     cache), then ctypes.util.find_library("gemmclient").

Fork: nng, under libgemmclient, refuses to run in a child after fork once
the parent used it (it panics, which aborts the process). A child therefore
loads its own copy of libgemmclient, and of nng under it, in a new link-map
namespace with dlmopen(LM_ID_NEWLM) (glibc). Each _Lib records the process
that owns it; lib_for_connection() hands a child a fresh one.

Calls through ctypes release the GIL, so gemm_run and gemm_wait block only
their own thread. Thread-safe.
"""
from __future__ import annotations

import ctypes
import os
import threading

from ._errors import LibraryNotFound

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing costs a fresh process ~4 ms: checkers only
    from typing import Any, Dict, List, Optional, Sequence, Tuple

# ---- enums ------------------------------------------------------------

GEMM_BF16 = 1
GEMM_FP16 = 2
GEMM_FP32 = 3
GEMM_FP64 = 4
GEMM_COMPLEX64 = 5
GEMM_COMPLEX128 = 6
GEMM_INT8 = 7
GEMM_INT32 = 8

GEMM_PRECISION_DEFAULT = 0
GEMM_PRECISION_TF32 = 1
GEMM_PRECISION_FP32 = 2

GEMM_KERNEL_NAME_MAX = 31

GEMM_OZ_MODULI_MIN = 2
GEMM_OZ_MODULI_MAX = 20

# Whether gemm_op has the double/complex scalars and conj flags (gemm.h
# after 0.1.0); the dtype table serves float64/complex only when it does.
HAS_WIDE_SCALARS = True

# ---- structs ------------------------------------------------------------

c_enum = ctypes.c_int  # gemm_dtype, gemm_precision: int-sized, values >= 0


class GemmMatrix(ctypes.Structure):
    """gemm_matrix: a buffer region (buf, byte offset, ld in elements) or a
    resident tensor (tensor != 0)."""

    _fields_ = [
        ("buf", ctypes.c_void_p),
        ("offset", ctypes.c_uint64),
        ("ld", ctypes.c_uint64),
        ("tensor", ctypes.c_uint64),
    ]


class GemmOp(ctypes.Structure):
    """gemm_op: D = alpha * op(A) * op(B) + beta * C (row-major)."""

    _fields_ = [
        ("m", ctypes.c_uint64),
        ("n", ctypes.c_uint64),
        ("k", ctypes.c_uint64),
        ("ab_type", c_enum),
        ("cd_type", c_enum),
        ("trans_a", ctypes.c_bool),
        ("trans_b", ctypes.c_bool),
        ("alpha", ctypes.c_float),
        ("beta", ctypes.c_float),
        ("a", GemmMatrix),
        ("b", GemmMatrix),
        ("c", GemmMatrix),
        ("d", GemmMatrix),
        ("timeout_ms", ctypes.c_uint32),
        ("precision", c_enum),
        ("kernel", ctypes.c_char_p),
        # appended after 0.1.0: conjugate transposes (complex), and double
        # or complex scalars used instead of alpha/beta when scalars64
        ("conj_a", ctypes.c_bool),
        ("conj_b", ctypes.c_bool),
        ("scalars64", ctypes.c_bool),
        ("alpha_re", ctypes.c_double),
        ("alpha_im", ctypes.c_double),
        ("beta_re", ctypes.c_double),
        ("beta_im", ctypes.c_double),
        # fp64: the Ozaki-II modulus count (0 = the daemon picks)
        ("moduli", ctypes.c_uint32),
    ]


class GemmOpBox(ctypes.Structure):
    """A gemm_op with zeroed room after it. gemm_op grows by appending
    fields whose zero value keeps the old behaviour; a libgemmclient newer
    than this mirror then reads zeros there, not whatever follows."""

    _fields_ = [("op", GemmOp), ("_room", ctypes.c_char * 256)]


class GemmTimings(ctypes.Structure):
    """gemm_timings: where the time of one GEMM went."""

    _fields_ = [
        ("queued_us", ctypes.c_uint64),
        ("compute_us", ctypes.c_uint64),
        ("total_us", ctypes.c_uint64),
        ("round_trip_us", ctypes.c_uint64),
        ("kernel", ctypes.c_char * (GEMM_KERNEL_NAME_MAX + 1)),
        ("kernel_ns", ctypes.c_uint64),
        ("moduli", ctypes.c_uint32),  # fp64: the moduli used; 0 = native
    ]


class GemmServerInfo(ctypes.Structure):
    """gemm_server_info: the answer to a ping."""

    _fields_ = [
        ("protocol_version", ctypes.c_uint32),
        ("server_version", ctypes.c_char * 32),
        ("backend", ctypes.c_char * 16),
        ("device", ctypes.c_char * 128),
    ]


class GemmStatus(ctypes.Structure):
    """gemm_status: the daemon's counters."""

    _fields_ = [
        ("uptime_s", ctypes.c_double),
        ("backend", ctypes.c_char * 16),
        ("device", ctypes.c_char * 128),
        ("requests_served", ctypes.c_uint64),
        ("requests_failed", ctypes.c_uint64),
        ("queue_depth", ctypes.c_uint32),
        ("queue_capacity", ctypes.c_uint32),
        ("buffers", ctypes.c_uint32),
        ("buffer_bytes", ctypes.c_uint64),
        ("clients", ctypes.c_uint32),
        ("threads", ctypes.c_uint32),
        ("latency_p50_us", ctypes.c_double),
        ("latency_p90_us", ctypes.c_double),
        ("latency_p99_us", ctypes.c_double),
        ("latency_max_us", ctypes.c_double),
        ("gemm_flops", ctypes.c_uint64),
        ("tensors", ctypes.c_uint32),
        ("tensor_bytes", ctypes.c_uint64),
        ("pinned_bytes", ctypes.c_uint64),
        ("device_bytes", ctypes.c_uint64),
        ("tmap_hits", ctypes.c_uint64),
        ("tmap_misses", ctypes.c_uint64),
        ("stage_queue_us", ctypes.c_double),
        ("stage_h2d_us", ctypes.c_double),
        ("stage_kernel_us", ctypes.c_double),
        ("stage_d2h_us", ctypes.c_double),
        ("connections", ctypes.c_uint32),
        ("users", ctypes.c_uint32),
        ("memory_budget", ctypes.c_uint64),
        ("memory_used", ctypes.c_uint64),
        ("gemms_served", ctypes.c_uint64),
        ("gemms_failed", ctypes.c_uint64),
        ("routine_served", ctypes.c_uint64 * 9),
        ("batches_served", ctypes.c_uint64),
        ("batch_problems", ctypes.c_uint64),
        ("pins_pending", ctypes.c_uint32),
        ("pins_done", ctypes.c_uint64),
        ("pins_failed", ctypes.c_uint64),
        ("pin_seconds", ctypes.c_double),
        ("pin_bytes", ctypes.c_uint64),
        ("spares_ready", ctypes.c_uint32),
        ("spare_bytes", ctypes.c_uint64),
        ("spares_lent", ctypes.c_uint64),
        ("spares_none", ctypes.c_uint64),
        ("spares_made", ctypes.c_uint64),
        ("spares_failed", ctypes.c_uint64),
    ]


class GemmDeviceStatus(ctypes.Structure):
    """gemm_device_status: one device object of the daemon."""

    _fields_ = [
        ("index", ctypes.c_uint32),
        ("name", ctypes.c_char * 128),
        ("placed", ctypes.c_bool),
        ("running", ctypes.c_uint32),
        ("queued", ctypes.c_uint32),
        ("jobs", ctypes.c_uint64),
        ("failed", ctypes.c_uint64),
        ("panels", ctypes.c_uint64),
        ("busy_s", ctypes.c_double),
        ("memory_bytes", ctypes.c_uint64),
        ("pinned_bytes", ctypes.c_uint64),
        ("tensors", ctypes.c_uint32),
        ("migrations", ctypes.c_uint64),
        ("tmap_hits", ctypes.c_uint64),
        ("tmap_misses", ctypes.c_uint64),
    ]


class GemmKernelInfo(ctypes.Structure):
    """gemm_kernel_info: one kernel of the backend's catalog."""

    _fields_ = [
        ("name", ctypes.c_char * (GEMM_KERNEL_NAME_MAX + 1)),
        ("ladder", ctypes.c_uint),
        ("reference", ctypes.c_bool),
        ("summary", ctypes.c_char * 128),
        ("ab_types", ctypes.c_uint32),
        ("cd_types", ctypes.c_uint32),
        ("precisions", ctypes.c_uint32),
        ("transposes", ctypes.c_uint32),
    ]


class GemmProblem(ctypes.Structure):
    """gemm_problem: one GEMM of a grouped batch (its own shape, transposes,
    operands and, when scalars, alpha/beta)."""

    _fields_ = [
        ("m", ctypes.c_uint64),
        ("n", ctypes.c_uint64),
        ("k", ctypes.c_uint64),
        ("trans_a", ctypes.c_bool),
        ("trans_b", ctypes.c_bool),
        ("a", GemmMatrix),
        ("b", GemmMatrix),
        ("c", GemmMatrix),
        ("d", GemmMatrix),
        ("scalars", ctypes.c_bool),
        ("alpha_re", ctypes.c_double),
        ("alpha_im", ctypes.c_double),
        ("beta_re", ctypes.c_double),
        ("beta_im", ctypes.c_double),
    ]


class GemmBatch(ctypes.Structure):
    """gemm_batch: many GEMMs in one request. Strided (count > 0: op's
    shape for all, problem i's X at op.X.offset + i * stride_X) or grouped
    (count == 0: problems[0..nproblems), op gives types, scalars,
    precision, kernel and timeout)."""

    _fields_ = [
        ("op", GemmOp),
        ("count", ctypes.c_uint64),
        ("stride_a", ctypes.c_uint64),
        ("stride_b", ctypes.c_uint64),
        ("stride_c", ctypes.c_uint64),
        ("stride_d", ctypes.c_uint64),
        ("problems", ctypes.POINTER(GemmProblem)),
        ("nproblems", ctypes.c_size_t),
    ]


class GemmOverlap(ctypes.Structure):
    """gemm_overlap: the counters of a GEMM filled by parts / drained."""

    _fields_ = [
        ("buf", ctypes.c_void_p),
        ("fill_parts", ctypes.c_uint32),
        ("fill_offset", ctypes.c_uint64),
        ("drain", ctypes.c_bool),
        ("drain_offset", ctypes.c_uint64),
    ]


class GemmBatchBox(ctypes.Structure):
    """A gemm_batch with zeroed room after it (see GemmOpBox)."""

    _fields_ = [("batch", GemmBatch), ("_room", ctypes.c_char * 256)]


# The structs the layout test checks, by their C names.
STRUCTS: Dict[str, type] = {
    "gemm_matrix": GemmMatrix,
    "gemm_op": GemmOp,
    "gemm_timings": GemmTimings,
    "gemm_server_info": GemmServerInfo,
    "gemm_status": GemmStatus,
    "gemm_device_status": GemmDeviceStatus,
    "gemm_kernel_info": GemmKernelInfo,
    "gemm_problem": GemmProblem,
    "gemm_batch": GemmBatch,
    "gemm_overlap": GemmOverlap,
}

# Enum constants the layout test checks against the header.
ENUMS: Dict[str, int] = {
    "GEMM_BF16": GEMM_BF16,
    "GEMM_FP16": GEMM_FP16,
    "GEMM_FP32": GEMM_FP32,
    "GEMM_FP64": GEMM_FP64,
    "GEMM_COMPLEX64": GEMM_COMPLEX64,
    "GEMM_COMPLEX128": GEMM_COMPLEX128,
    "GEMM_INT8": GEMM_INT8,
    "GEMM_INT32": GEMM_INT32,
    "GEMM_PRECISION_DEFAULT": GEMM_PRECISION_DEFAULT,
    "GEMM_PRECISION_TF32": GEMM_PRECISION_TF32,
    "GEMM_PRECISION_FP32": GEMM_PRECISION_FP32,
    "GEMM_KERNEL_NAME_MAX": GEMM_KERNEL_NAME_MAX,
    "GEMM_OZ_MODULI_MIN": GEMM_OZ_MODULI_MIN,
    "GEMM_OZ_MODULI_MAX": GEMM_OZ_MODULI_MAX,
}

# ---- functions ----------------------------------------------------------

_p = ctypes.c_void_p
_P = ctypes.POINTER
_int = ctypes.c_int
_sz = ctypes.c_size_t
_u64 = ctypes.c_uint64

class GemmBlas3Op(ctypes.Structure):
    """gemm_blas3_op: one of symm .. trsm, row-major (gemm.h)."""

    _fields_ = [
        ("routine", c_enum),
        ("dtype", c_enum),
        ("right", ctypes.c_bool),
        ("lower", ctypes.c_bool),
        ("trans", ctypes.c_char),
        ("unit_diag", ctypes.c_bool),
        ("m", ctypes.c_uint64),
        ("n", ctypes.c_uint64),
        ("k", ctypes.c_uint64),
        ("alpha_re", ctypes.c_double),
        ("alpha_im", ctypes.c_double),
        ("beta_re", ctypes.c_double),
        ("beta_im", ctypes.c_double),
        ("a", GemmMatrix),
        ("b", GemmMatrix),
        ("c", GemmMatrix),
        ("timeout_ms", ctypes.c_uint32),
    ]


# name -> (restype, argtypes)
PROTOTYPES: Dict[str, Tuple[Any, Sequence[Any]]] = {
    "gemm_strerror": (ctypes.c_char_p, [_int]),
    "gemm_version_string": (ctypes.c_char_p, []),
    "gemm_last_error_message": (ctypes.c_char_p, []),
    "gemm_default_url": (_int, [ctypes.c_char_p, _sz]),
    "gemm_dtype_size": (_sz, [c_enum]),
    "gemm_convert": (_int, [_p, c_enum, _p, c_enum, _sz]),
    "gemm_client_open": (_int, [_P(_p), ctypes.c_char_p]),
    "gemm_client_open_timeout": (_int, [_P(_p), ctypes.c_char_p, _int]),
    "gemm_client_close": (None, [_p]),
    "gemm_client_set_timeout": (_int, [_p, _int]),
    "gemm_ping": (_int, [_p, _P(GemmServerInfo)]),
    "gemm_get_status_sized": (_int, [_p, _P(GemmStatus), _sz]),
    "gemm_get_devices": (_int, [_p, _P(GemmDeviceStatus), ctypes.c_size_t,
                                _P(ctypes.c_size_t)]),
    "gemm_buffer_alloc": (_int, [_p, _sz, _P(_p)]),
    "gemm_buffer_free": (None, [_p]),
    "gemm_buffer_data": (_p, [_p]),
    "gemm_buffer_size": (_sz, [_p]),
    "gemm_buffer_id": (_u64, [_p]),
    "gemm_run": (_int, [_p, _P(GemmOp), _P(GemmTimings)]),
    "gemm_submit": (_int, [_p, _P(GemmOp), _P(_p)]),
    "gemm_blas3_run": (_int, [_p, _P(GemmBlas3Op), _P(GemmTimings)]),
    "gemm_wait": (_int, [_p, _P(GemmTimings)]),
    "gemm_list_kernels": (_int, [_p, _P(_P(GemmKernelInfo)), _P(_sz)]),
    "gemm_kernel_info_free": (None, [_P(GemmKernelInfo)]),
    "gemm_tensor_upload": (_int, [_p, _P(GemmMatrix), _u64, _u64, c_enum,
                                  _P(_u64)]),
    "gemm_tensor_free": (_int, [_p, _u64]),
}

# Functions an older library lacks: bound when present, else None (the
# batch calls then raise Unsupported, naming the fix; a matmul is not
# filled by parts).
OPTIONAL: Dict[str, Tuple[Any, Sequence[Any]]] = {
    "gemm_batch_submit": (_int, [_p, _P(GemmBatch), _P(_p)]),
    "gemm_batch_run": (_int, [_p, _P(GemmBatch), _P(GemmTimings)]),
    "gemm_last_error_problem": (ctypes.c_int64, []),
    "gemm_server_features": (ctypes.c_uint32, [_p]),
    "gemm_submit_overlapped": (_int, [_p, _P(GemmOp), _P(GemmOverlap),
                                      _P(_p)]),
    "gemm_request_done": (ctypes.c_bool, [_p]),
}

SONAME = "libgemmclient.so.0"
RTLD_NOW = 2
RTLD_LOCAL = 0
LM_ID_NEWLM = -1


class _Lib:
    """One loaded copy of libgemmclient: its functions as attributes.

    ``owner`` is the pid of the process that may open connections with it;
    ``used`` turns true once a connection was opened (nng is initialised
    from then on, and a forked child must load its own copy)."""

    def __init__(self, path: str, funcs: Dict[str, Any], how: str) -> None:
        self.path = path
        self.how = how  # "recorded", "GEMMD_CLIENT_LIB", "system", "dlmopen"
        self.owner = os.getpid()
        self.used = False
        for name, fn in funcs.items():
            setattr(self, name, fn)

    def error_message(self) -> str:
        """The calling thread's last error message of this copy."""
        msg = self.gemm_last_error_message()  # type: ignore[attr-defined]
        return msg.decode("utf-8", "replace") if msg else ""


def _bind_cdll(dll: ctypes.CDLL) -> Dict[str, Any]:
    funcs = {}
    for name, (res, args) in PROTOTYPES.items():
        fn = getattr(dll, name)
        fn.restype = res
        fn.argtypes = list(args)
        funcs[name] = fn
    for name, (res, args) in OPTIONAL.items():
        fn = getattr(dll, name, None)
        if fn is not None:
            fn.restype = res
            fn.argtypes = list(args)
        funcs[name] = fn
    return funcs


def _recorded_paths() -> List[str]:
    """The paths CMake recorded beside this file (none in a source copy)."""
    f = os.path.join(os.path.dirname(os.path.abspath(__file__)),
                     "_libpath.txt")
    try:
        with open(f, encoding="utf-8") as fh:
            return [ln.strip() for ln in fh
                    if ln.strip() and not ln.startswith("#")]
    except OSError:
        return []


def _load() -> _Lib:
    """Loads libgemmclient by the search order above; LibraryNotFound with
    every place tried if none loads."""
    tried: List[str] = []
    for path in _recorded_paths():
        if os.path.exists(path):
            try:
                return _Lib(path, _bind_cdll(ctypes.CDLL(path)), "recorded")
            except OSError as e:
                tried.append("%s (recorded at build time): %s" % (path, e))
        else:
            tried.append("%s (recorded at build time): no such file" % path)
    env = os.environ.get("GEMMD_CLIENT_LIB")
    if env:
        try:
            return _Lib(env, _bind_cdll(ctypes.CDLL(env)), "GEMMD_CLIENT_LIB")
        except OSError as e:
            tried.append("%s ($GEMMD_CLIENT_LIB): %s" % (env, e))
    else:
        tried.append("$GEMMD_CLIENT_LIB: not set")
    try:
        return _Lib(SONAME, _bind_cdll(ctypes.CDLL(SONAME)), "system")
    except OSError as e:
        tried.append("%s (system loader): %s" % (SONAME, e))
    from ctypes import util as ctypes_util

    found = ctypes_util.find_library("gemmclient")
    if found:
        try:
            return _Lib(found, _bind_cdll(ctypes.CDLL(found)), "system")
        except OSError as e:
            tried.append("%s (find_library): %s" % (found, e))
    raise LibraryNotFound(
        "cannot load libgemmclient; tried:\n  " + "\n  ".join(tried) +
        "\n(install gemmd, pip install the package staged by the build in "
        "build/python/pkg, or set GEMMD_CLIENT_LIB to the library)")


def _load_fresh(path: str) -> _Lib:
    """A new copy of libgemmclient (and nng) in a new link-map namespace,
    for a forked child whose parent used the library."""
    libc = ctypes.CDLL(None, use_errno=True)
    try:
        dlmopen = libc.dlmopen
    except AttributeError:
        try:
            dlmopen = ctypes.CDLL("libdl.so.2").dlmopen
        except (OSError, AttributeError):
            raise LibraryNotFound(
                "gemmd in a child after fork needs its own copy of "
                "libgemmclient (nng cannot be used again after fork), and "
                "this C library has no dlmopen: start the child with "
                "multiprocessing's 'spawn' or 'forkserver' method") from None
    dlmopen.restype = ctypes.c_void_p
    dlmopen.argtypes = [ctypes.c_long, ctypes.c_char_p, ctypes.c_int]
    dlsym = libc.dlsym
    dlsym.restype = ctypes.c_void_p
    dlsym.argtypes = [ctypes.c_void_p, ctypes.c_char_p]
    dlerror = libc.dlerror
    dlerror.restype = ctypes.c_char_p
    h = dlmopen(LM_ID_NEWLM, path.encode(), RTLD_NOW | RTLD_LOCAL)
    if not h:
        err = dlerror()
        raise LibraryNotFound(
            "cannot load a fresh copy of %s for this forked child: %s (glibc "
            "allows 16 link-map namespaces; each generation of forked "
            "children that uses gemmd takes one)" %
            (path, err.decode(errors="replace") if err else "dlmopen failed"))
    funcs = {}
    for name, (res, args) in PROTOTYPES.items():
        addr = dlsym(h, name.encode())
        if not addr:
            raise LibraryNotFound("%s has no %s" % (path, name))
        funcs[name] = ctypes.CFUNCTYPE(res, *args)(addr)
    for name, (res, args) in OPTIONAL.items():
        addr = dlsym(h, name.encode())
        funcs[name] = ctypes.CFUNCTYPE(res, *args)(addr) if addr else None
    return _Lib(path, funcs, "dlmopen")


_lock = threading.Lock()
_current: Optional[_Lib] = None


def lib() -> _Lib:
    """The loaded library (loading it on first use), for calls that need no
    connection (strerror, convert, default URL). Thread-safe."""
    cur = _current
    if cur is not None:
        return cur
    with _lock:
        return _lib_locked()


def _lib_locked() -> _Lib:
    global _current
    if _current is None:
        _current = _load()
    return _current


def lib_for_connection() -> _Lib:
    """The copy of the library this process opens connections with: the
    loaded one, or in a forked child of a process that used it, a fresh
    copy (dlmopen). Marks it used. Thread-safe."""
    global _current
    with _lock:
        cur = _lib_locked()
        pid = os.getpid()
        if cur.owner != pid:
            if cur.used:
                cur = _load_fresh(cur.path)
            cur.owner = pid
            _current = cur
        cur.used = True
        return cur


def _after_fork_in_child() -> None:
    global _lock
    _lock = threading.Lock()


os.register_at_fork(after_in_child=_after_fork_in_child)

_libc: Optional[ctypes.CDLL] = None


def munmap(addr: int, size: int) -> None:
    """Unmaps a buffer mapping inherited through fork (the child must not
    call into the parent's copy of libgemmclient)."""
    global _libc
    if _libc is None:
        _libc = ctypes.CDLL(None)
        _libc.munmap.restype = ctypes.c_int
        _libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
    _libc.munmap(addr, size)
