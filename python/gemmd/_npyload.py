""".npy files read straight into gemmd's shared memory (Client.load).

np.load reads a file into new private memory, and a GEMM on that array
then copies it into a staging buffer: two passes over the data, the page
faults of both, and a staging buffer per operand. Reading the file's bytes
directly into an array of the client's (with os.preadv, which releases the
GIL, split by rows over _copy's worker threads when large) makes one pass,
and the GEMM then uses the array in place.

The header is numpy's (numpy.lib.format: versions 1, 2 and 3). A C-ordered
file becomes a C-ordered array; a Fortran-ordered one is read as its
transpose and returned as a transposed view, which a GEMM takes as the
transpose flag, without a copy. A bfloat16 file as ml_dtypes saves it
(descr '<V2') is read as bfloat16, as gemmctl reads it. When the caller
asks for another type (or the file is not in native byte order), the file
is read in pieces of READ_CHUNK bytes into a scratch array and cast into
the result, never held whole in private memory.

Thread-safe: each call opens its own file.
"""
from __future__ import annotations

import os

import numpy as np

from . import _copy

TYPE_CHECKING = False
if TYPE_CHECKING:  # typing costs a fresh process ~4 ms: checkers only
    from typing import Callable, Optional, Tuple

# Bytes read into the scratch array before each cast when converting.
READ_CHUNK = 4 << 20


class Header:
    """What a .npy header says: shape, dtype (as stored), Fortran order,
    and where the data starts."""

    __slots__ = ("shape", "dtype", "fortran", "offset")

    def __init__(self, shape: Tuple[int, ...], dtype: np.dtype,
                 fortran: bool, offset: int) -> None:
        self.shape = shape
        self.dtype = dtype
        self.fortran = fortran
        self.offset = offset

    @property
    def nbytes(self) -> int:
        n = self.dtype.itemsize
        for s in self.shape:
            n *= s
        return n


def _read_header_3_0(f, path: str, npf):
    """(shape, fortran_order, dtype) from a version 3.0 header at f: a
    4-byte little-endian length, then a Python dict literal in utf-8."""
    import ast
    import struct

    raw = f.read(4)
    if len(raw) != 4:
        raise ValueError("%s: the .npy header is cut short" % path)
    (hlen,) = struct.unpack("<I", raw)
    text = f.read(hlen)
    if len(text) != hlen:
        raise ValueError("%s: the .npy header is cut short" % path)
    try:
        d = ast.literal_eval(text.decode("utf-8"))
    except (ValueError, SyntaxError, UnicodeDecodeError) as e:
        raise ValueError("%s: unreadable .npy header (%s)" % (path, e)) from None
    if (not isinstance(d, dict) or
            sorted(d) != ["descr", "fortran_order", "shape"] or
            not isinstance(d["shape"], tuple) or
            not all(isinstance(x, int) and x >= 0 for x in d["shape"]) or
            not isinstance(d["fortran_order"], bool)):
        raise ValueError("%s: the .npy header is not numpy's (descr, "
                         "fortran_order, shape)" % path)
    return d["shape"], d["fortran_order"], npf.descr_to_dtype(d["descr"])


def read_header(path: str) -> Header:
    """The header of the .npy file at path. Raises OSError when it cannot
    be read, ValueError when it is not a .npy file or holds Python
    objects."""
    from numpy.lib import format as npf

    with open(path, "rb") as f:
        try:
            version = npf.read_magic(f)
        except ValueError as e:
            raise ValueError("%s: not a .npy file (%s); load reads the .npy "
                             "format only (np.save)" % (path, e)) from None
        if version == (1, 0):
            shape, fortran, dtype = npf.read_array_header_1_0(f)
        elif version == (2, 0):
            shape, fortran, dtype = npf.read_array_header_2_0(f)
        else:  # (3, 0): a utf-8 header; numpy has no public reader
            shape, fortran, dtype = _read_header_3_0(f, path, npf)
        offset = f.tell()
    if dtype.hasobject:
        raise ValueError("%s holds Python objects (a pickle): gemmd arrays "
                         "hold numbers; use np.load(allow_pickle=True)" % path)
    if dtype.kind == "V" and dtype.itemsize == 2 and dtype.names is None:
        import ml_dtypes  # how ml_dtypes saves bfloat16

        dtype = np.dtype(ml_dtypes.bfloat16)
    return Header(tuple(int(s) for s in shape), dtype, bool(fortran), offset)


def _pread_into(fd: int, mv: memoryview, offset: int, path: str) -> None:
    """Fills mv from fd at offset; ValueError when the file ends first."""
    done = 0
    while done < len(mv):
        n = os.preadv(fd, [mv[done:]], offset + done)
        if n == 0:
            raise ValueError("%s: the file ends %d bytes before the data its "
                             "header promises" % (path, len(mv) - done))
        done += n


def read_into(path: str, hdr: Header, dst: np.ndarray) -> None:
    """Reads the data of the .npy file at path, whose header is hdr, into
    dst: a C-ordered array of the file's shape (its transpose for a
    Fortran-ordered file), converted to dst's type when that is not the
    file's. Large files are read by rows on several threads. Raises
    OSError, or ValueError for a short file."""
    shape = hdr.shape[::-1] if hdr.fortran else hdr.shape
    flat = dst.reshape(-1)  # a view: dst is C-ordered
    rows = shape[0] if len(shape) >= 1 else 1
    row_items = flat.size // rows if rows > 0 else 0
    src_isz = hdr.dtype.itemsize
    direct = dst.dtype == hdr.dtype
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
    try:
        if flat.size == 0:
            return
        size = os.fstat(fd).st_size
        if size < hdr.offset + hdr.nbytes:
            raise ValueError(
                "%s: the header promises %d bytes of data, the file holds "
                "%d (truncated?)" % (path, hdr.nbytes,
                                     max(0, size - hdr.offset)))

        def part(lo: int, hi: int) -> Callable[[], None]:
            a, b = lo * row_items, hi * row_items  # elements
            if direct:
                def run() -> None:
                    mv = memoryview(flat[a:b].view(np.uint8))
                    _pread_into(fd, mv, hdr.offset + a * src_isz, path)
                return run

            def convert() -> None:
                step = max(1, READ_CHUNK // src_isz)
                scratch = np.empty(min(step, b - a), hdr.dtype)
                for x in range(a, b, step):
                    n = min(step, b - x)
                    s = scratch[:n]
                    _pread_into(fd, memoryview(s.view(np.uint8)),
                                hdr.offset + x * src_isz, path)
                    np.copyto(flat[x:x + n], s, casting="unsafe")
            return convert

        nparts = min(_copy.THREADS, hdr.nbytes // (_copy.PARALLEL_BYTES // 2),
                     rows)
        if nparts < 2:
            part(0, rows)()
            return
        step = (rows + nparts - 1) // nparts
        _copy.run_parallel([part(lo, min(lo + step, rows))
                            for lo in range(0, rows, step)])
    finally:
        os.close(fd)


def result_view(arr: np.ndarray, hdr: Header) -> np.ndarray:
    """The array the caller gets: arr, or for a Fortran-ordered file its
    transpose (arr holds the data as stored)."""
    return arr.T if hdr.fortran else arr


def storage_shape(hdr: Header) -> Tuple[int, ...]:
    """The C-ordered shape the data is read into."""
    return hdr.shape[::-1] if hdr.fortran else hdr.shape


def target_dtype(hdr: Header, dtype: Optional[np.dtype]) -> np.dtype:
    """The result's type: dtype when given, else the file's in native
    byte order."""
    if dtype is not None:
        return dtype
    dt = hdr.dtype
    return dt.newbyteorder("=") if not dt.isnative else dt

