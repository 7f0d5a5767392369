"""matmul against an fp64 reference: shapes (1 and odd sizes included),
every dtype and result type, operands in gemmd memory used in place
(transposed views, row strides, offsets: no copy) and other layouts
copied, out=, alpha/beta with c, vectors, zero dimensions, precisions,
kernels by name, the module-level gemmd.matmul."""
from __future__ import annotations

from typing import Any, List, Optional

import numpy as np
import pytest

import gemmd
from gemmd import _copy
from conftest import f64, rand, rel_err, tolerance

DTYPES = ["bfloat16", "float16", "float32"]
WIDE = ["float64", "complex64", "complex128"]


def npdt(name: str) -> np.dtype:
    from gemmd import _dtypes

    return _dtypes.TABLE[name].np


def reference(a: Any, b: Any, dt: str, alpha: float = 1.0, beta: float = 0.0,
              c: Any = None, cd: Optional[str] = None) -> np.ndarray:
    """alpha * A @ B + beta * C in fp64 from the inputs as gemmd sees them
    (rounded to dt, C to cd)."""
    A = f64(np.asarray(a).astype(npdt(dt)))
    B = f64(np.asarray(b).astype(npdt(dt)))
    d = alpha * (A @ B)
    if beta != 0.0:
        d = d + beta * f64(np.asarray(c).astype(npdt(cd or dt)))
    return d


def assert_close(got: Any, ref: np.ndarray, *types: str) -> None:
    assert np.shape(got) == np.shape(ref), (np.shape(got), np.shape(ref))
    err = rel_err(got, ref)
    tol = tolerance(*types)
    assert err <= tol, "relative error %.3g > %.3g (%s)" % (err, tol, types)


class CopyCounter:
    """Counts the staging copies matmul makes (gemmd._copy.copy)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.calls: List[tuple] = []
        real = _copy.copy

        def counting(dst: np.ndarray, src: Any) -> None:
            self.calls.append((dst.shape, np.shape(src)))
            real(dst, src)

        monkeypatch.setattr(_copy, "copy", counting)


@pytest.mark.parametrize("dt", DTYPES + WIDE)
@pytest.mark.parametrize("m,n,k", [(1, 1, 1), (1, 7, 5), (7, 1, 5),
                                   (5, 7, 1), (17, 13, 9), (64, 64, 64),
                                   (127, 65, 33), (300, 200, 100)])
def test_shapes_and_dtypes(client: gemmd.Client, dt: str, m: int, n: int,
                           k: int) -> None:
    rng = np.random.default_rng(m * 10007 + n * 101 + k)
    a = rand(rng, (m, k), npdt(dt))
    b = rand(rng, (k, n), npdt(dt))
    d = client.matmul(a, b)
    assert d.dtype == npdt(dt) and d.shape == (m, n)
    assert_close(d, reference(a, b, dt), dt)
    assert client.is_gemmd_array(d)


@pytest.mark.parametrize("ab", ["bfloat16", "float16"])
@pytest.mark.parametrize("cd", DTYPES)
def test_result_types(client: gemmd.Client, ab: str, cd: str) -> None:
    rng = np.random.default_rng(7)
    a = rand(rng, (33, 21), npdt(ab))
    b = rand(rng, (21, 45), npdt(ab))
    d = client.matmul(a, b, out_dtype=cd)
    assert d.dtype == npdt(cd)
    assert_close(d, reference(a, b, ab), ab, cd)


def test_dtype_converts(client: gemmd.Client) -> None:
    rng = np.random.default_rng(8)
    a = rng.random((40, 30))  # float64
    b = rng.random((30, 20))
    d = client.matmul(a, b, dtype="bfloat16", out_dtype="float32")
    assert d.dtype == np.float32
    assert_close(d, reference(a, b, "bfloat16"), "bfloat16")
    d = client.matmul(a.tolist(), b.tolist(), dtype="fp32")  # lists too
    assert_close(d, reference(a, b, "float32"), "float32")


def test_promotion(client: gemmd.Client) -> None:
    rng = np.random.default_rng(9)
    a16 = rand(rng, (20, 10), np.float16)
    b32 = rand(rng, (10, 30), np.float32)
    d = client.matmul(a16, b32)
    assert d.dtype == np.float32  # numpy's promotion
    assert_close(d, reference(a16, b32, "float32"), "float32")
    bf = rand(rng, (10, 30), npdt("bfloat16"))
    d = client.matmul(a16, bf)  # numpy cannot promote these: float32
    assert d.dtype == np.float32
    assert_close(d, reference(a16, bf, "float32"), "float32")


def _views(client: gemmd.Client, rng: np.random.Generator, rows: int,
           cols: int, dt: np.dtype) -> List[tuple]:
    """(name, array) pairs of logical shape rows x cols in gemmd memory,
    each a layout gemmd takes in place."""
    out = []
    x = client.asarray(rand(rng, (rows, cols), dt))
    out.append(("C-order", x))
    xt = client.asarray(rand(rng, (cols, rows), dt))
    out.append(("transposed view", xt.T))
    big = client.asarray(rand(rng, (rows + 3, cols + 5), dt))
    out.append(("offset + row stride", big[2:2 + rows, 3:3 + cols]))
    bigt = client.asarray(rand(rng, (cols + 4, rows + 2), dt))
    out.append(("transposed, offset + stride", bigt[1:1 + cols, :rows].T))
    return out


@pytest.mark.parametrize("dt", DTYPES + WIDE)
def test_gemmd_memory_in_place(client: gemmd.Client, dt: str,
                               monkeypatch: pytest.MonkeyPatch) -> None:
    rng = np.random.default_rng(11)
    m, n, k = 37, 29, 19
    A = _views(client, rng, m, k, npdt(dt))
    B = _views(client, rng, k, n, npdt(dt))
    out = client.empty((m, n), dt)
    counter = CopyCounter(monkeypatch)
    for an, a in A:
        for bn, b in B:
            d = client.matmul(a, b, out=out)
            assert d is out
            assert_close(out, reference(a, b, dt), dt)
    assert counter.calls == [], "gemmd memory was copied: %s" % counter.calls


def test_out_view_in_place(client: gemmd.Client,
                           monkeypatch: pytest.MonkeyPatch) -> None:
    rng = np.random.default_rng(12)
    a = client.asarray(rand(rng, (20, 10)))
    b = client.asarray(rand(rng, (10, 15)))
    big = client.zeros((30, 40))
    counter = CopyCounter(monkeypatch)
    view = big[5:25, 7:22]
    assert client.matmul(a, b, out=view) is view
    assert counter.calls == []
    assert_close(big[5:25, 7:22], reference(a, b, "float32"), "float32")
    assert not big[:5].any() and not big[25:].any()
    assert not big[:, :7].any() and not big[:, 22:].any()


@pytest.mark.parametrize("layout", ["fortran", "transposed", "strided",
                                    "negative", "broadcast", "gemmd-other"])
def test_other_layouts_are_copied(client: gemmd.Client, layout: str) -> None:
    rng = np.random.default_rng(13)
    m, n, k = 23, 17, 11
    base = rand(rng, (m, k))
    if layout == "fortran":
        a = np.asfortranarray(base)
    elif layout == "transposed":
        a = base.T.copy().T
    elif layout == "strided":
        a = rand(rng, (2 * m, 3 * k))[::2, ::3]
    elif layout == "negative":
        a = base[::-1, ::-1]
    elif layout == "broadcast":
        a = np.broadcast_to(base[:1], (m, k))
    else:  # gemmd memory, but neither rows nor columns
        a = client.asarray(rand(rng, (2 * m, 2 * k)))[::2, ::2]
    b = rand(rng, (k, n))
    d = client.matmul(a, b)
    assert_close(d, reference(a, b, "float32"), "float32")
    d2 = client.matmul(b.T, a.T)
    assert_close(d2, reference(b.T, a.T, "float32"), "float32")


def test_out_plain_numpy(client: gemmd.Client) -> None:
    rng = np.random.default_rng(14)
    a, b = rand(rng, (12, 8)), rand(rng, (8, 6))
    out = np.full((12, 6), np.nan, np.float32)
    assert client.matmul(a, b, out=out) is out
    assert_close(out, reference(a, b, "float32"), "float32")
    outf = np.asfortranarray(out)
    outf[...] = np.nan
    assert client.matmul(a, b, out=outf) is outf
    assert_close(outf, reference(a, b, "float32"), "float32")
    big = np.zeros((24, 20), np.float32)
    client.matmul(a, b, out=big[::2, 1:13:2])
    assert_close(big[::2, 1:13:2], reference(a, b, "float32"), "float32")
    assert not big[1::2].any()


def test_out_aliases_input(client: gemmd.Client) -> None:
    rng = np.random.default_rng(15)
    a = client.asarray(rand(rng, (16, 16)))
    b = rand(rng, (16, 16))
    ref = reference(a, b, "float32")
    client.matmul(a, b, out=a)  # numpy allows out to be an input
    assert_close(a, ref, "float32")


@pytest.mark.parametrize("where", ["plain", "gemmd"])
def test_alpha_beta_c(client: gemmd.Client, where: str) -> None:
    rng = np.random.default_rng(16)
    mk = client.asarray if where == "gemmd" else np.asarray
    a = mk(rand(rng, (31, 17)))
    b = mk(rand(rng, (17, 23)))
    c = mk(rand(rng, (31, 23)))
    d = client.matmul(a, b, c=c, alpha=1.5, beta=-0.5)
    assert_close(d, reference(a, b, "float32", 1.5, -0.5, c), "float32")
    # C transposed (a view of gemmd memory in column order): copied
    ct = mk(rand(rng, (23, 31)))
    d = client.matmul(a, b, c=ct.T, beta=2.0)
    assert_close(d, reference(a, b, "float32", 1.0, 2.0, ct.T), "float32")
    # beta = 0: c is not read
    d = client.matmul(a, b, c=np.full((31, 23), np.nan, np.float32), beta=0)
    assert_close(d, reference(a, b, "float32"), "float32")


def test_beta_accumulates_into_out(client: gemmd.Client) -> None:
    rng = np.random.default_rng(17)
    a, b = rand(rng, (19, 7)), rand(rng, (7, 11))
    for mk in (np.array, client.asarray):
        out = mk(rand(rng, (19, 11)))
        ref = reference(a, b, "float32", 2.0, 1.0, out)
        assert client.matmul(a, b, out=out, alpha=2.0, beta=1.0) is out
        assert_close(out, ref, "float32")


def test_c_broadcast_bias(client: gemmd.Client) -> None:
    rng = np.random.default_rng(18)
    a, b = rand(rng, (9, 5), np.float16), rand(rng, (5, 7), np.float16)
    bias = rand(rng, (7,))
    d = client.matmul(a, b, c=bias, beta=1.0, out_dtype="float32")
    ref = reference(a, b, "float16") + f64(bias)[None, :]
    assert_close(d, ref, "float16", "float32")


def test_c_with_16bit_output(client: gemmd.Client) -> None:
    rng = np.random.default_rng(19)
    a = rand(rng, (24, 16), npdt("bfloat16"))
    b = rand(rng, (16, 8), npdt("bfloat16"))
    c = rand(rng, (24, 8), npdt("bfloat16"))
    d = client.matmul(a, b, c=c, beta=0.25)
    assert d.dtype == npdt("bfloat16")
    assert_close(d, reference(a, b, "bfloat16", 1.0, 0.25, c), "bfloat16")


def test_vectors(client: gemmd.Client) -> None:
    rng = np.random.default_rng(20)
    a = rand(rng, (6, 4))
    v = rand(rng, (4,))
    w = rand(rng, (6,))
    for x, y in ((a, v), (w, a), (v, v), (w[:4], a[:4])):
        got = client.matmul(x, y)
        want = f64(x) @ f64(y)
        assert np.shape(got) == np.shape(want)
        assert_close(np.asarray(got), np.asarray(want), "float32")
    out = np.zeros(6, np.float32)
    assert client.matmul(a, v, out=out) is out
    assert_close(out, f64(a) @ f64(v), "float32")


def test_zero_dimensions(client: gemmd.Client) -> None:
    a = np.ones((0, 5), np.float32)
    b = np.ones((5, 3), np.float32)
    assert client.matmul(a, b).shape == (0, 3)
    assert client.matmul(b.T, a.T).shape == (3, 0)
    z = client.matmul(np.ones((4, 0), np.float32), np.ones((0, 3), np.float32))
    assert z.shape == (4, 3) and not z.any()  # numpy: zeros
    c = np.full((4, 3), 2.0, np.float32)
    z = client.matmul(np.ones((4, 0), np.float32), np.ones((0, 3), np.float32),
                      c=c, beta=0.5)
    assert np.array_equal(z, np.full((4, 3), 1.0, np.float32))


def test_precisions(client: gemmd.Client) -> None:
    rng = np.random.default_rng(21)
    a, b = rand(rng, (64, 48)), rand(rng, (48, 32))
    for p, tol in (("fp32", "float32"), ("default", "float32"),
                   ("tf32", "tf32")):
        d = client.matmul(a, b, precision=p)
        assert_close(d, reference(a, b, "float32"), tol)


def test_every_kernel(client: gemmd.Client) -> None:
    ks = client.kernels()
    assert ks and all(isinstance(k["name"], str) for k in ks)
    assert any(k["reference"] for k in ks)
    rng = np.random.default_rng(22)
    a = rand(rng, (64, 64), npdt("bfloat16"))
    b = rand(rng, (64, 64), npdt("bfloat16"))
    ran = 0
    for k in ks:
        if "bfloat16" not in k["ab_types"] or "float32" not in k["cd_types"]:
            continue
        if "nn" not in k["transposes"]:
            continue
        try:
            d = client.matmul(a, b, out_dtype="float32", kernel=k["name"])
        except gemmd.Unsupported:
            continue  # e.g. a kernel for other shapes
        assert_close(d, reference(a, b, "bfloat16"), "bfloat16", "float32")
        ran += 1
    assert ran >= 1, "no kernel of %s ran a 64^3 bf16 GEMM" % ks


def test_module_level_matmul(daemon: Any,
                             monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("GEMM_URL", daemon.url)
    monkeypatch.setattr(gemmd, "_default", None)
    rng = np.random.default_rng(23)
    a, b = rand(rng, (8, 5)), rand(rng, (5, 9))
    d = gemmd.matmul(a, b)
    assert_close(d, reference(a, b, "float32"), "float32")
    cl = gemmd.default_client()
    assert cl.url == daemon.url and gemmd.default_client() is cl
    cl.close()
    d = gemmd.matmul(a, b, alpha=2.0)  # a closed default is replaced
    assert_close(d, reference(a, b, "float32", 2.0), "float32")
    gemmd.default_client().close()


def test_result_reuses_buffers(client: gemmd.Client) -> None:
    """Results and staging buffers come back to the pool: a loop of
    matmuls does not register new buffers each time."""
    rng = np.random.default_rng(24)
    a, b = rand(rng, (128, 128)), rand(rng, (128, 128))
    for _ in range(3):
        d = client.matmul(a, b)
    before = client.status()["buffers"]
    for _ in range(20):
        d = client.matmul(a, b)
    del d
    assert client.status()["buffers"] <= before


def test_large_copies_run_on_several_threads(client: gemmd.Client,
                                             monkeypatch: pytest.MonkeyPatch
                                             ) -> None:
    """Staging copies past _copy.PARALLEL_BYTES are split over threads:
    plain, converting (fp32 -> bf16) and from a transposed view."""
    monkeypatch.setattr(_copy, "THREADS", 4)
    rng = np.random.default_rng(25)
    a = rand(rng, (1536, 1536))  # 9 MiB
    b = rand(rng, (1536, 16))
    for x, dt in ((a, "float32"), (a, "bfloat16"), (a.T, "float32")):
        d = client.matmul(x, b, dtype=dt, out_dtype="float32")
        assert_close(d, reference(x, b, dt), dt)
    out = np.empty((1536, 1536), np.float32)  # the copy back, too
    e = rand(rng, (1536, 1))
    client.matmul(e, e.T, out=out)
    assert_close(out, reference(e, e.T, "float32"), "float32")


@pytest.mark.parametrize("dt", WIDE)
def test_wide_types_alpha_beta_c(client: gemmd.Client, dt: str) -> None:
    """float64 and complex with double (complex) alpha and beta."""
    rng = np.random.default_rng(26)
    a = rand(rng, (21, 13), npdt(dt))
    b = client.asarray(rand(rng, (17, 13), npdt(dt))).T  # in place, T
    c = rand(rng, (21, 17), npdt(dt))
    cplx = dt.startswith("complex")
    alpha = (1.25 - 0.5j) if cplx else 1.0 / 3.0
    beta = (-0.75 + 2j) if cplx else -2.0 / 7.0
    d = client.matmul(a, b, c=c, alpha=alpha, beta=beta)
    assert d.dtype == npdt(dt)
    ref = alpha * (f64(a) @ f64(b)) + beta * f64(c)
    assert rel_err(d, ref) <= tolerance(dt)
    assert np.asarray(client.matmul(a[0], b[:, 0])).dtype == npdt(dt)
    if not cplx:
        with pytest.raises(gemmd.DTypeError):
            client.matmul(a, b, alpha=1j)
    with pytest.raises(gemmd.DTypeError):
        client.matmul(a, b, out_dtype="float32")


def test_default_dtype_float64(client: gemmd.Client) -> None:
    """Plain float64 numpy arrays are multiplied in float64 (numpy's type),
    lists too."""
    rng = np.random.default_rng(27)
    a, b = rng.random((30, 20)), rng.random((20, 10))
    d = client.matmul(a, b)
    assert d.dtype == np.float64
    assert rel_err(d, a @ b) <= tolerance("float64")
    d = client.matmul(a.tolist(), b.tolist())
    assert rel_err(d, a @ b) <= tolerance("float64")
