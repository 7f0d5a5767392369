"""The level-3 routines besides GEMM (client.symm .. client.trsm and
client.blas3) against numpy references: every routine, type, side,
triangle and trans; the triangle a rank update does not write keeps c's
values; only a's named triangle is read (the other holds NaN); numpy-worded
errors before anything is sent."""
from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import gemmd

TYPES = ["float32", "float64", "complex64", "complex128"]
TOL = {"float32": 2e-4, "complex64": 2e-4, "float64": 1e-11,
       "complex128": 1e-11}


def rnd(shape: Any, dt: str, seed: int) -> np.ndarray:
    g = np.random.default_rng(seed)
    x = g.uniform(-1, 1, shape)
    if dt.startswith("complex"):
        x = x + 1j * g.uniform(-1, 1, shape)
    return x.astype(dt)


def full(a: np.ndarray, lower: bool, kind: str, unit: bool = False
         ) -> np.ndarray:
    """The matrix a's triangle stands for: symmetric, Hermitian or
    triangular."""
    t = np.tril(a) if lower else np.triu(a)
    if kind == "tri":
        if unit:
            t = t - np.diag(np.diag(t)) + np.eye(len(a))
        return t
    off = np.tril(a, -1) if lower else np.triu(a, 1)
    d = np.diag(np.diag(a))
    if kind == "her":
        d = d.real.astype(a.dtype)
        return d + off + off.conj().T
    return d + off + off.T


def poison(a: np.ndarray, lower: bool) -> np.ndarray:
    """a with NaN in the triangle that must not be read."""
    a = a.copy()
    mask = np.triu(np.ones(a.shape, bool), 1) if lower else \
        np.tril(np.ones(a.shape, bool), -1)
    a[mask] = np.nan
    return a


def op(x: np.ndarray, t: str) -> np.ndarray:
    return x if t == "N" else x.T if t == "T" else x.conj().T


def close(got: np.ndarray, ref: np.ndarray, dt: str) -> None:
    assert got.shape == ref.shape
    err = np.max(np.abs(got - ref)) / max(1.0, np.max(np.abs(ref)))
    assert err <= TOL[dt], err


@pytest.mark.parametrize("dt", TYPES)
@pytest.mark.parametrize("side", ["left", "right"])
@pytest.mark.parametrize("uplo", ["lower", "upper"])
def test_symm_hemm(client: gemmd.Client, dt: str, side: str,
                   uplo: str) -> None:
    m, n = 37, 29
    ka = n if side == "right" else m
    lower = uplo == "lower"
    kinds = ["sym", "her"] if dt.startswith("complex") else ["sym"]
    for kind in kinds:
        a = rnd((ka, ka), dt, 1)
        b = rnd((m, n), dt, 2)
        c = rnd((m, n), dt, 3)
        A = full(a, lower, kind)
        fn = client.symm if kind == "sym" else client.hemm
        got = fn(poison(a, lower), b, c, side=side, uplo=uplo, alpha=0.5,
                 beta=2.0)
        ref = 0.5 * (b @ A if side == "right" else A @ b) + 2.0 * c
        close(got, ref, dt)


@pytest.mark.parametrize("dt", TYPES)
@pytest.mark.parametrize("uplo", ["lower", "upper"])
@pytest.mark.parametrize("trans", ["N", "T"])
def test_rank_updates(client: gemmd.Client, dt: str, uplo: str,
                      trans: str) -> None:
    n, k = 33, 21
    lower = uplo == "lower"
    cplx = dt.startswith("complex")
    shape = (n, k) if trans == "N" else (k, n)
    a, b = rnd(shape, dt, 4), rnd(shape, dt, 5)
    c = rnd((n, n), dt, 6)
    keep = np.triu(np.ones((n, n), bool), 1) if lower else \
        np.tril(np.ones((n, n), bool), -1)
    tri = np.tril if lower else np.triu
    P, Q = op(a, trans), op(b, trans)

    got = client.syrk(a, c, uplo=uplo, trans=trans, alpha=0.5, beta=2.0)
    close(tri(got), tri(0.5 * P @ P.T + 2.0 * c), dt)
    assert np.array_equal(got[keep], c[keep])  # the other triangle kept
    got = client.syr2k(a, b, c, uplo=uplo, trans=trans, alpha=0.5, beta=2.0)
    close(tri(got), tri(0.5 * (P @ Q.T + Q @ P.T) + 2.0 * c), dt)
    assert np.array_equal(got[keep], c[keep])
    got = client.syrk(a, uplo=uplo, trans=trans)  # no c: zero
    assert not np.any(got[keep])
    if cplx:
        th = "C" if trans == "T" else "N"
        P, Q = op(a, th), op(b, th)
        al = 0.5 + 0.25j
        got = client.herk(a, c, uplo=uplo, trans=th, alpha=0.5, beta=2.0)
        ref = 0.5 * P @ P.conj().T + 2.0 * c
        ref[np.diag_indices(n)] = ref.diagonal().real
        close(tri(got), tri(ref), dt)
        got = client.her2k(a, b, c, uplo=uplo, trans=th, alpha=al, beta=2.0)
        ref = al * P @ Q.conj().T + np.conj(al) * Q @ P.conj().T + 2.0 * c
        ref[np.diag_indices(n)] = ref.diagonal().real
        close(tri(got), tri(ref), dt)


@pytest.mark.parametrize("dt", TYPES)
@pytest.mark.parametrize("side", ["left", "right"])
@pytest.mark.parametrize("uplo", ["lower", "upper"])
@pytest.mark.parametrize("trans", ["N", "T", "C"])
def test_trmm_trsm(client: gemmd.Client, dt: str, side: str, uplo: str,
                   trans: str) -> None:
    m, n = 31, 23
    ka = n if side == "right" else m
    lower = uplo == "lower"
    a = rnd((ka, ka), dt, 7) + ka * np.eye(ka, dtype=dt)  # well conditioned
    b = rnd((m, n), dt, 8)
    for unit in (False, True):
        diag = "unit" if unit else "non-unit"
        T = op(full(a, lower, "tri", unit), trans)
        got = client.trmm(poison(a, lower), b, side=side, uplo=uplo,
                          trans=trans, diag=diag, alpha=2.0)
        close(got, 2.0 * (b @ T if side == "right" else T @ b), dt)
        x = client.trsm(poison(a, lower), b, side=side, uplo=uplo,
                        trans=trans, diag=diag, alpha=2.0)
        back = x @ T if side == "right" else T @ x
        close(back, 2.0 * b, dt)


def test_blas3_by_name(client: gemmd.Client) -> None:
    a = rnd((8, 5), "float64", 9)
    got = client.blas3("syrk", a, uplo="lower")
    close(np.tril(got), np.tril(a @ a.T), "float64")
    with pytest.raises(gemmd.InvalidArgument, match="routine must be one"):
        client.blas3("gemv", a)


def test_errors(client: gemmd.Client) -> None:
    sq = rnd((4, 4), "float64", 10)
    with pytest.raises(gemmd.ShapeError, match="must be square"):
        client.trsm(rnd((4, 5), "float64", 1), sq)
    with pytest.raises(gemmd.ShapeError, match="two-dimensional"):
        client.syrk(np.ones(3))
    with pytest.raises(gemmd.ShapeError, match="could not be broadcast"):
        client.symm(sq, rnd((5, 3), "float64", 2))
    with pytest.raises(gemmd.ShapeError, match="could not be broadcast"):
        client.syrk(sq, rnd((3, 3), "float64", 2))
    with pytest.raises(gemmd.DTypeError, match="needs complex"):
        client.herk(sq)
    with pytest.raises(gemmd.DTypeError, match="not supported"):
        client.syrk(sq.astype(np.float16))
    with pytest.raises(gemmd.InvalidArgument, match="side must be"):
        client.symm(sq, sq, side="middle")
    with pytest.raises(gemmd.InvalidArgument, match="trans must be"):
        client.herk(sq.astype(complex), trans="T")
    with pytest.raises(gemmd.InvalidArgument, match="'N', 'T', 'C'"):
        client.trsm(sq, sq, trans="X")
    with pytest.raises(gemmd.InvalidArgument, match="alpha must be real"):
        client.herk(sq.astype(complex), alpha=1j)
    # a ValueError for code that catches numpy's
    with pytest.raises(ValueError):
        client.trmm(sq, rnd((3, 3), "float64", 2))
