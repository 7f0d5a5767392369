"""numpy_check.py MODE DIR: matrix products of Debian's numpy (which calls
cblas_sgemm .. cblas_zgemm of libblas.so.3) for blas/tests/numpy.sh.

MODE ref writes each product to DIR/ref_N.npy (run without libgemmblas);
MODE check computes the same products (run under LD_PRELOAD, every GEMM
sent to gemmd) and compares each with its reference: relative Frobenius
error at most 1e-5 for float32/complex64, 1e-12 for float64/complex128.
Cases: float32, float64, complex64, complex128; C-contiguous operands,
transposed views (numpy passes the transpose flags), conjugated and
sliced operands (a leading dimension larger than the row), one shape with
1s. Prints one line per case; exit status 1 on any mismatch.
"""
import sys

import numpy as np

TOL = {np.float32: 1e-5, np.complex64: 1e-5, np.float64: 1e-12,
       np.complex128: 1e-12}


def operands(rng, dt, m, k, n):
    def mat(r, c):
        x = rng.standard_normal((r, c))
        if np.issubdtype(dt, np.complexfloating):
            x = x + 1j * rng.standard_normal((r, c))
        return x.astype(dt)
    return mat(m, k), mat(k, n), mat(k + 3, n + 5)


def cases():
    rng = np.random.default_rng(20240611)
    for dt in (np.float32, np.float64, np.complex64, np.complex128):
        for (m, k, n) in ((300, 200, 100), (257, 129, 311), (1, 64, 1),
                          (64, 1, 70)):
            a, b, big = operands(rng, dt, m, k, n)
            yield f"{dt.__name__} {m}x{k}x{n} a@b", dt, lambda a=a, b=b: a @ b
            yield (f"{dt.__name__} {m}x{k}x{n} a@(b.T).T", dt,
                   lambda a=a, b=b: a @ np.ascontiguousarray(b.T).T)
            sl = big[:k, :n]  # a view: leading dimension k + 5
            yield f"{dt.__name__} {m}x{k}x{n} a@slice", dt, lambda a=a, s=sl: a @ s
            if np.issubdtype(dt, np.complexfloating):
                yield (f"{dt.__name__} {m}x{k}x{n} conj(a^T)^T@b", dt,
                       lambda a=a, b=b: np.ascontiguousarray(a.T).conj().T @ b)


def main():
    mode, d = sys.argv[1], sys.argv[2]
    bad = 0
    for i, (name, dt, f) in enumerate(cases()):
        got = f()
        path = f"{d}/ref_{i}.npy"
        if mode == "ref":
            np.save(path, got)
            continue
        ref = np.load(path)
        den = np.linalg.norm(ref)
        err = np.linalg.norm(got - ref) / (den if den else 1.0)
        ok = got.dtype == ref.dtype and got.shape == ref.shape and err <= TOL[dt]
        print(f"{'ok  ' if ok else 'FAIL'} {name}: relative error {err:.3g}")
        bad += not ok
    if mode == "check":
        print(f"numpy_check: {bad} mismatches")
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
