#!/usr/bin/env python3
"""bench_stacked.py: numpy's stacked matmul through gemmd (one batch
request) against torch, numpy in and numpy out, on the GPU host with
gemmd running (issue 26's Python target: 64 x 1024^3 bf16 from
client.empty arrays >= 5x torch's numpy-in/numpy-out on the same arrays).

For a stack of --batch products of --n^3 (A: batch x n x n, B the same),
in --dtype, the same arrays (made by client.empty, filled with random
values in [-1, 1)) multiplied --repeat times after --warmup by
  torch:            torch.from_numpy(a).cuda() @ torch.from_numpy(b).cuda(),
                    .cpu().numpy()  (bf16 through int16 views)
  gemmd stack:      client.matmul(a, b): one batch request, a new result
  gemmd stack out=: client.matmul(a, b, out=d), d made by client.empty
  gemmd one by one: client.matmul(a[i], b[i], out=d[i]) for each i (one GEMM
                    request each)
and, with --experts E:T, a mixture-of-experts layer: E experts, T tokens
split over them by a skewed (Zipf-like) distribution, x_e (M_e x n) @
w_e (n x n) for each expert, by client.matmul_grouped (one request) and
by torch (one matmul per expert, numpy in and out).

Every result is checked on sampled problems against an fp64 reference
(relative Frobenius error: fp32 1e-5, fp16 2e-3, bf16 1e-2); a failed
check marks the row FAIL and the exit status 1. Without torch the torch
rows are left out (said so); without a gemmd to talk to, or a
libgemmclient without the batch API, it says why and exits 2. The table
is printed last.

Usage: bench_stacked.py [--url URL] [--batch 64] [--n 1024] [--dtype bf16]
[--repeat 10] [--warmup 3] [--experts 8:4096] [--csv FILE]
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from typing import Any, Callable, List, Optional, Tuple

import numpy as np

TOL = {"fp32": 1e-5, "fp16": 2e-3, "bf16": 1e-2}
NAMES = {"fp32": "float32", "fp16": "float16", "bf16": "bfloat16"}


def rel_err(got: Any, ref: np.ndarray) -> float:
    got = np.asarray(got).astype(np.float64)
    return float(np.linalg.norm(got - ref) / np.linalg.norm(ref))


def timed(fn: Callable[[], Any], warmup: int, repeat: int
          ) -> Tuple[float, Any]:
    """The median seconds of repeat calls after warmup, and the last
    result."""
    out = None
    for _ in range(warmup):
        out = fn()
    ts = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn()
        ts.append(time.perf_counter() - t0)
    return statistics.median(ts), out


def load_torch() -> Optional[Any]:
    try:
        import torch
    except ImportError:
        print("torch: not installed (pip install torch): torch rows left "
              "out")
        return None
    if not torch.cuda.is_available():
        print("torch %s: no CUDA device: torch rows left out" %
              torch.__version__)
        return None
    print("torch %s, %s" % (torch.__version__, torch.cuda.get_device_name(0)))
    return torch


def torch_mm(torch: Any, dt: str) -> Callable[[np.ndarray, np.ndarray],
                                              np.ndarray]:
    """numpy in, numpy out through torch on the GPU."""
    if dt == "bf16":
        def mm(a: np.ndarray, b: np.ndarray) -> np.ndarray:
            ta = torch.from_numpy(a.view(np.int16)).cuda().view(
                torch.bfloat16)
            tb = torch.from_numpy(b.view(np.int16)).cuda().view(
                torch.bfloat16)
            return (ta @ tb).cpu().view(torch.int16).numpy().view(a.dtype)
        return mm

    def mm2(a: np.ndarray, b: np.ndarray) -> np.ndarray:
        return (torch.from_numpy(a).cuda() @
                torch.from_numpy(b).cuda()).cpu().numpy()
    return mm2


def skewed(total: int, experts: int, rng: np.random.Generator) -> List[int]:
    """Tokens per expert, Zipf-like (a few experts take most), summing to
    total; some may get none."""
    w = 1.0 / np.arange(1, experts + 1) ** 1.2
    w = rng.permutation(w / w.sum())
    m = np.floor(w * total).astype(int)
    m[np.argmax(m)] += total - m.sum()
    return [int(x) for x in m]


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--url", default=os.environ.get("GEMM_URL"))
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--n", type=int, default=1024)
    p.add_argument("--dtype", default="bf16", choices=sorted(TOL))
    p.add_argument("--repeat", type=int, default=10)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--experts", default=None, help="E:T, e.g. 8:4096")
    p.add_argument("--csv", default=None)
    args = p.parse_args()

    import gemmd

    try:
        client = gemmd.connect(args.url, timeout=600)
        info = client.ping()
    except gemmd.GemmError as e:
        print("bench_stacked: cannot use gemmd: %s" % e, file=sys.stderr)
        return 2
    print("gemmd %s, backend %s, device %s" % (
        info["server_version"], info["backend"], info["device"]))
    from gemmd import _capi, _dtypes

    if _capi.lib().gemm_batch_submit is None:
        print("bench_stacked: %s has no batch API (gemm_batch_submit): "
              "build gemmd with batched GEMM" % _capi.lib().path,
              file=sys.stderr)
        return 2
    torch = load_torch()
    dt, n, nb = args.dtype, args.n, args.batch
    ndt = _dtypes.TABLE[NAMES[dt]].np
    rng = np.random.default_rng(26)
    a = client.empty((nb, n, n), ndt)
    b = client.empty((nb, n, n), ndt)
    for x in (a, b):
        for i in range(nb):
            x[i] = rng.random((n, n), np.float32) * 2 - 1
    sample = sorted({0, nb // 2, nb - 1})
    refs = {i: a[i].astype(np.float64) @ b[i].astype(np.float64)
            for i in sample}
    flop = 2.0 * nb * n ** 3
    rows: List[List[Any]] = []

    def check(name: str, t: float, d: Any, fl: float,
              refs_: Any, pick: Callable[[Any, int], Any]) -> None:
        err = max(rel_err(pick(d, i), r) for i, r in refs_.items())
        rows.append([name, t * 1e3, fl / t / 1e12, err,
                     "ok" if err <= TOL[dt] else "FAIL"])
        print("%-22s %10.2f ms %8.2f TFLOP/s err %.1e %s" %
              tuple(rows[-1]), flush=True)

    shape = "%d x %d^3 %s" % (nb, n, dt)
    if torch is not None:
        mm = torch_mm(torch, dt)
        t, d = timed(lambda: mm(a, b), args.warmup, args.repeat)
        check("torch", t, d, flop, refs, lambda d, i: d[i])
        del d
        torch.cuda.empty_cache()
    t, d = timed(lambda: client.matmul(a, b), args.warmup, args.repeat)
    check("gemmd stack", t, d, flop, refs, lambda d, i: d[i])
    del d
    out = client.empty((nb, n, n), ndt)
    t, d = timed(lambda: client.matmul(a, b, out=out), args.warmup,
                 args.repeat)
    check("gemmd stack out=", t, d, flop, refs, lambda d, i: d[i])
    # one request per product, each into its slice of out (results kept
    # alive as new arrays would hold one buffer each: --client-buffers)
    t, d = timed(lambda: [client.matmul(a[i], b[i], out=out[i])
                          for i in range(nb)], args.warmup, args.repeat)
    check("gemmd one by one", t, d, flop, refs, lambda d, i: d[i])
    del d

    moe = ""
    if args.experts:
        ne, tokens = (int(v) for v in args.experts.split(":"))
        ms = skewed(tokens, ne, rng)
        xs = [client.empty((m, n), ndt) for m in ms]
        ws = [client.empty((n, n), ndt) for _ in ms]
        for x in xs + ws:
            x[...] = rng.random(x.shape, np.float32) * 2 - 1
        big = int(np.argmax(ms))
        mref = {big: xs[big].astype(np.float64) @ ws[big].astype(np.float64)}
        mflop = 2.0 * tokens * n * n
        moe = "; experts %d, tokens %d (M per expert %s)" % (ne, tokens, ms)
        print("experts: M per expert %s" % ms)
        if torch is not None:
            mm = torch_mm(torch, dt)
            t, d = timed(lambda: [mm(x, w) for x, w in zip(xs, ws)],
                         args.warmup, args.repeat)
            check("torch experts", t, d, mflop, mref, lambda d, i: d[i])
        t, d = timed(lambda: client.matmul_grouped(xs, ws), args.warmup,
                     args.repeat)
        check("gemmd grouped", t, d, mflop, mref, lambda d, i: d[i])

    print("\n== %s, numpy in and numpy out%s (median of %d after %d "
          "warm-up)" % (shape, moe, args.repeat, args.warmup))
    print("%-22s %10s %9s %10s %9s %s" % ("path", "ms", "TFLOP/s",
                                          "vs torch", "error", "check"))
    base = {r[0]: r[1] for r in rows}
    bad = False
    for r in rows:
        ref = base.get("torch experts" if r[0] in ("torch experts",
                                                   "gemmd grouped")
                       else "torch", float("nan"))
        vs = "%9.2fx" % (ref / r[1]) if ref == ref else "%10s" % "-"
        print("%-22s %10.2f %9.2f %s %9.1e %s" % (r[0], r[1], r[2], vs,
                                                  r[3], r[4]))
        bad |= r[4] != "ok"
    if args.csv:
        with open(args.csv, "w") as f:
            f.write("path,shape,ms,tflops,error,check\n")
            for r in rows:
                f.write("%s,%s,%.3f,%.2f,%.3e,%s\n" % (r[0], shape, r[1],
                                                      r[2], r[3], r[4]))
    client.close()
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
