#!/usr/bin/env python3
"""bench_python.py: the gemmd Python package against torch and cupy, in one
run, on the GPU host with gemmd running (issue 12's targets).

1. Time to first result in a fresh Python process: import, connect, load
   A.npy and B.npy (4096 x 4096, random), one multiply, D as a numpy array.
   Each contender runs --fresh-runs times in a new interpreter; the time is
   from spawning the process to the moment the child holds D (both read
   CLOCK_MONOTONIC), median of the runs; the process's whole life is shown
   too. Contenders: gemmd (np.load, then gemmd.connect().matmul),
   gemmd-load (client.load reads the files straight into gemmd's shared
   memory, then client.matmul: no staging copy), torch
   (torch.from_numpy(a).cuda() @ ..., .cpu().numpy()), cupy (cp.asarray,
   cp.matmul, cp.asnumpy) and, with --gemmctl, `gemmctl mm` (C, for
   reference). --fresh-dtype fp16: the files hold float16 and everyone
   multiplies fp16 -> fp16; bf16: the files hold float32, converted to
   bfloat16 after loading (cupy has no bfloat16 matmul and is left out).
2. Steady state, numpy in and numpy out, in this process: for each size and
   dtype, the same random numpy arrays A and B multiplied --repeat times
   (after --warmup) by
     torch:          (torch.from_numpy(a).cuda() @ torch.from_numpy(b)
                      .cuda()).cpu().numpy()  (bf16 through int16 views)
     gemmd staged:   client.matmul(a, b) on the plain numpy arrays, the
                     result an array in gemmd memory (one request:
                     client.panels = 1)
     gemmd staged, no fill: the same with the operands copied whole
                     before the request (gemmd._fill.FILL_PARTS = 0; by
                     default a large call is sent first and its copies
                     fill it by parts beside gemmd)
     gemmd staged pP: the same cut into P panels of D's rows
                     (client.panels = P for each P of --panels but 1),
                     the staging copies overlapping gemmd's work
     gemmd np-out pP: client.matmul(a, b, out=o), o a plain numpy array
                     (the result copied out too), for each P of --panels
                     (p1: unsplit); --no-np-out leaves these out
     gemmd zero-copy: client.matmul(ae, be), ae/be made once by
                      client.asarray (arrays in gemmd shared memory)
   The median time of a multiply, TFLOP/s, and the ratio to torch's time
   (>1: faster than torch).

Every result is checked against an fp64 reference of sampled rows
(relative Frobenius error, bounds as gemmctl --check: fp32 1e-5, fp16
2e-3, bf16 1e-2); a failed check marks the row FAIL and the exit status 1.
The tables are printed last.

Usage: bench_python.py [--url URL] [--sizes 4096,8192] [--dtypes bf16,fp16,
fp32] [--repeat 10] [--warmup 3] [--fresh-runs 3] [--fresh-dtype fp16]
[--fresh-n 4096] [--contenders gemmd,gemmd-load,torch,cupy] [--gemmctl PATH]
[--panels 1,4] [--no-np-out] [--skip-fresh] [--skip-steady] [--workdir DIR]
[--csv FILE]
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Any, Dict, List, Optional, Tuple

import numpy as np

TOL = {"fp32": 1e-5, "fp16": 2e-3, "bf16": 1e-2}
SAMPLE_ROWS = 16

# ---- the fresh-process programs (run with python3 -c CODE ...) ----------

PROLOGUE = "import time; import sys; T0 = time.monotonic()\n"
EPILOGUE = """
T1 = time.monotonic()
import numpy as _np, json as _json
_np.save(sys.argv[3], _np.asarray(d[ROWS], dtype=_np.float32))
print(_json.dumps({"t_result": T1, "t_start": T0}), flush=True)
"""

FRESH = {
    "gemmd": """
import numpy as np, gemmd
a = np.load(sys.argv[1]); b = np.load(sys.argv[2])
kw = {"dtype": "bfloat16", "out_dtype": "float32"} if DT == "bf16" else {}
d = gemmd.connect(URL).matmul(a, b, **kw)
""",
    "gemmd-load": """
import numpy as np, gemmd
c = gemmd.connect(URL)
dt = "bfloat16" if DT == "bf16" else None
a = c.load(sys.argv[1], dtype=dt); b = c.load(sys.argv[2], dtype=dt)
kw = {"out_dtype": "float32"} if DT == "bf16" else {}
d = c.matmul(a, b, **kw)
""",
    "torch": """
import numpy as np, torch
a = np.load(sys.argv[1]); b = np.load(sys.argv[2])
ta = torch.from_numpy(a).cuda(); tb = torch.from_numpy(b).cuda()
if DT == "bf16":
    d = (ta.bfloat16() @ tb.bfloat16()).float().cpu().numpy()
else:
    d = (ta @ tb).cpu().numpy()
""",
    "cupy": """
import numpy as np, cupy as cp
a = np.load(sys.argv[1]); b = np.load(sys.argv[2])
d = cp.asnumpy(cp.matmul(cp.asarray(a), cp.asarray(b)))
""",
}


def run_fresh(name: str, code: str, a_path: str, b_path: str, out_path: str,
              env: Dict[str, str]) -> Tuple[float, float, str]:
    """One fresh interpreter; (time to result, process wall, error)."""
    t0 = time.monotonic()
    r = subprocess.run([sys.executable, "-c", code, a_path, b_path, out_path],
                       capture_output=True, text=True, env=env, timeout=300)
    wall = time.monotonic() - t0
    if r.returncode != 0:
        return float("nan"), wall, (r.stderr.strip().splitlines() or
                                    ["exit %d" % r.returncode])[-1]
    info = json.loads(r.stdout.strip().splitlines()[-1])
    return info["t_result"] - t0, wall, ""


def run_gemmctl(gemmctl: str, url: str, a_path: str, b_path: str,
                out_path: str, dt: str) -> Tuple[float, float, str]:
    d_path = out_path + ".full.npy"
    args = [gemmctl, "--url", url, "mm", "--a", a_path, "--b", b_path,
            "--out", d_path, "--dtype", dt]
    if dt == "bf16":
        args += ["--cd-dtype", "fp32"]
    t0 = time.monotonic()
    r = subprocess.run(args, capture_output=True, text=True, timeout=300)
    wall = time.monotonic() - t0
    if r.returncode != 0:
        return float("nan"), wall, r.stderr.strip()[-200:]
    d = np.load(d_path, mmap_mode="r")
    np.save(out_path, np.asarray(d[:SAMPLE_ROWS], dtype=np.float32))
    os.unlink(d_path)
    return wall, wall, ""


def rel_err(got: np.ndarray, ref: np.ndarray) -> float:
    got = np.asarray(got, np.float64)
    return float(np.linalg.norm(got - ref) / np.linalg.norm(ref))


def fresh_section(args: argparse.Namespace, work: str) -> List[List[Any]]:
    n, dt = args.fresh_n, args.fresh_dtype
    rng = np.random.default_rng(1234)
    file_dt = np.float16 if dt == "fp16" else np.float32
    a = (rng.random((n, n), np.float32) * 2 - 1).astype(file_dt)
    b = (rng.random((n, n), np.float32) * 2 - 1).astype(file_dt)
    a_path, b_path = os.path.join(work, "A.npy"), os.path.join(work, "B.npy")
    np.save(a_path, a)
    np.save(b_path, b)
    if dt == "bf16":
        import ml_dtypes

        a_in = a.astype(ml_dtypes.bfloat16).astype(np.float64)
        b_in = b.astype(ml_dtypes.bfloat16).astype(np.float64)
    else:
        a_in, b_in = a.astype(np.float64), b.astype(np.float64)
    ref = a_in[:SAMPLE_ROWS] @ b_in
    del a, b
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    contenders = [c for c in args.contenders if c != "cupy" or dt == "fp16"]
    if args.gemmctl:
        contenders.append("gemmctl")
    rows = []
    for name in contenders:
        times, walls, errs, err_msg = [], [], [], ""
        for i in range(args.fresh_runs):
            out_path = os.path.join(work, "D-%s-%d.npy" % (name, i))
            # drop the files from nobody's page cache: all read them warm
            if name == "gemmctl":
                t, w, msg = run_gemmctl(args.gemmctl, args.url, a_path, b_path,
                                        out_path, dt)
            else:
                code = (PROLOGUE + "URL = %r; DT = %r; ROWS = slice(0, %d)\n" %
                        (args.url, dt, SAMPLE_ROWS) + FRESH[name] + EPILOGUE)
                t, w, msg = run_fresh(name, code, a_path, b_path, out_path,
                                      env)
            if msg:
                err_msg = msg
                break
            times.append(t)
            walls.append(w)
            errs.append(rel_err(np.load(out_path), ref))
        if err_msg:
            print("fresh %s: failed: %s" % (name, err_msg), flush=True)
            rows.append([name, dt, float("nan"), float("nan"), float("nan"),
                         "ERROR"])
            continue
        err = max(errs)
        ok = err <= TOL[dt]
        rows.append([name, dt, statistics.median(times),
                     statistics.median(walls), err, "ok" if ok else "FAIL"])
        print("fresh %-8s %s: to result %s s, process %s s, error %.2e" %
              (name, dt, " ".join("%.3f" % t for t in times),
               " ".join("%.3f" % w for w in walls), err), flush=True)
    return rows


# ---- steady state ---------------------------------------------------------


def np_dtype(dt: str) -> Any:
    if dt == "bf16":
        import ml_dtypes

        return ml_dtypes.bfloat16
    return {"fp16": np.float16, "fp32": np.float32}[dt]


def timed(fn: Any, warmup: int, repeat: int) -> Tuple[float, Any]:
    for _ in range(warmup):
        out = fn()
    ts = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn()
        ts.append(time.perf_counter() - t0)
    return statistics.median(ts), out


def steady_section(args: argparse.Namespace) -> List[List[Any]]:
    import gemmd

    client = gemmd.connect(args.url, timeout=600)
    info = client.ping()
    print("gemmd %s, backend %s, device %s" % (info["server_version"],
                                              info["backend"], info["device"]))
    torch = None
    if "torch" in args.contenders:
        try:
            import torch as _torch

            torch = _torch
            print("torch %s, %s, allow_tf32=%s" % (
                torch.__version__, torch.cuda.get_device_name(0),
                torch.backends.cuda.matmul.allow_tf32))
        except Exception as e:  # reported, the gemmd rows still run
            print("torch unavailable: %s" % e)
    rows = []
    for n in args.sizes:
        for dt in args.dtypes:
            ndt = np_dtype(dt)
            rng = np.random.default_rng(n + len(dt))
            a = (rng.random((n, n), np.float32) * 2 - 1).astype(ndt)
            b = (rng.random((n, n), np.float32) * 2 - 1).astype(ndt)
            ref = a[:SAMPLE_ROWS].astype(np.float64) @ b.astype(np.float64)
            flop = 2.0 * n * n * n
            results: Dict[str, Tuple[float, float]] = {}

            if torch is not None:
                if dt == "bf16":
                    def fn() -> np.ndarray:
                        ta = torch.from_numpy(a.view(np.int16)).cuda() \
                            .view(torch.bfloat16)
                        tb = torch.from_numpy(b.view(np.int16)).cuda() \
                            .view(torch.bfloat16)
                        return (ta @ tb).cpu().view(torch.int16).numpy() \
                            .view(ndt)
                else:
                    def fn() -> np.ndarray:
                        return (torch.from_numpy(a).cuda() @
                                torch.from_numpy(b).cuda()).cpu().numpy()
                t, d = timed(fn, args.warmup, args.repeat)
                results["torch"] = (t, rel_err(d[:SAMPLE_ROWS], ref))
                del d
                torch.cuda.empty_cache()

            for pn in args.panels:
                client.panels = pn
                tag = "" if pn == 1 else " p%d" % pn
                t, d = timed(lambda: client.matmul(a, b), args.warmup,
                             args.repeat)
                results["gemmd staged" + tag] = (
                    t, rel_err(d[:SAMPLE_ROWS], ref))
                del d
            # the same staged call with its operands copied whole before
            # the request (the default fills them by parts beside gemmd)
            client.panels = 1
            parts = gemmd._fill.FILL_PARTS
            gemmd._fill.FILL_PARTS = 0
            try:
                t, d = timed(lambda: client.matmul(a, b), args.warmup,
                             args.repeat)
            finally:
                gemmd._fill.FILL_PARTS = parts
            results["gemmd staged, no fill"] = (
                t, rel_err(d[:SAMPLE_ROWS], ref))
            del d
            if args.np_out:
                o = np.empty((n, n), ndt)
                o[...] = 0  # touched: no first-write page faults timed
                for pn in args.panels:
                    client.panels = pn
                    t, d = timed(lambda: client.matmul(a, b, out=o),
                                 args.warmup, args.repeat)
                    results["gemmd np-out p%d" % pn] = (
                        t, rel_err(d[:SAMPLE_ROWS], ref))
                    del d
                del o
            client.panels = 1
            ae, be = client.asarray(a), client.asarray(b)
            t, d = timed(lambda: client.matmul(ae, be), args.warmup,
                         args.repeat)
            results["gemmd zero-copy"] = (t, rel_err(d[:SAMPLE_ROWS], ref))
            del d, ae, be
            client.trim()

            base = results.get("torch", (float("nan"), 0.0))[0]
            for path, (t, err) in results.items():
                ok = err <= TOL[dt]
                rows.append([n, dt, path, t * 1e3, flop / t / 1e12,
                             base / t if path != "torch" else 1.0, err,
                             "ok" if ok else "FAIL"])
                print("steady %5d %s %-18s %9.2f ms  %7.1f TFLOP/s  x%.2f "
                      "vs torch  err %.1e %s" % tuple(rows[-1]), flush=True)
    client.close()
    return rows


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--url", default=os.environ.get("GEMM_URL"))
    p.add_argument("--sizes", default="4096,8192")
    p.add_argument("--dtypes", default="bf16,fp16,fp32")
    p.add_argument("--repeat", type=int, default=10)
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--fresh-runs", type=int, default=3)
    p.add_argument("--fresh-dtype", default="fp16", choices=["fp16", "bf16"])
    p.add_argument("--fresh-n", type=int, default=4096)
    p.add_argument("--contenders", default="gemmd,gemmd-load,torch,cupy")
    p.add_argument("--gemmctl", default=None)
    p.add_argument("--panels", default="1,4",
                   help="panel counts of the staged rows (1: unsplit)")
    p.add_argument("--no-np-out", dest="np_out", action="store_false")
    p.add_argument("--skip-fresh", action="store_true")
    p.add_argument("--skip-steady", action="store_true")
    p.add_argument("--workdir", default=None)
    p.add_argument("--csv", default=None)
    args = p.parse_args()
    args.sizes = [int(s) for s in args.sizes.split(",") if s]
    args.dtypes = [d for d in args.dtypes.split(",") if d]
    args.contenders = [c for c in args.contenders.split(",") if c]
    args.panels = [int(x) for x in args.panels.split(",") if x]
    if args.url is None:
        import gemmd

        args.url = gemmd.connect().url
    work = args.workdir or tempfile.mkdtemp(prefix="bench-python-")
    os.makedirs(work, exist_ok=True)
    fresh: List[List[Any]] = []
    steady: List[List[Any]] = []
    try:
        if not args.skip_fresh:
            fresh = fresh_section(args, work)
        if not args.skip_steady:
            steady = steady_section(args)
    finally:
        if args.workdir is None:
            shutil.rmtree(work, ignore_errors=True)

    bad = False
    if fresh:
        print("\n== fresh process: import, connect, load A.npy and B.npy "
              "(%d^2), one multiply, D in numpy (median of %d)" %
              (args.fresh_n, args.fresh_runs))
        g = next((r[2] for r in fresh if r[0] == "gemmd"), float("nan"))
        print("%-10s %-5s %12s %12s %12s %10s %s" % (
            "who", "dtype", "to result s", "process s", "vs gemmd",
            "error", "check"))
        for r in fresh:
            print("%-10s %-5s %12.3f %12.3f %11.1fx %10.1e %s" % (  # x: its time / gemmd's
                r[0], r[1], r[2], r[3], r[2] / g, r[4], r[5]))
            bad |= r[5] != "ok"
    if steady:
        print("\n== steady state, numpy in and numpy out (median of %d after "
              "%d warm-up)" % (args.repeat, args.warmup))
        print("%6s %-5s %-18s %10s %9s %10s %9s %s" % (
            "n", "dtype", "path", "ms", "TFLOP/s", "vs torch", "error",
            "check"))
        for r in steady:
            print("%6d %-5s %-18s %10.2f %9.1f %9.2fx %9.1e %s" % tuple(r))
            bad |= r[7] != "ok"
    if args.csv:
        with open(args.csv, "w") as f:
            f.write("section,who,n,dtype,ms,tflops,ratio_vs_torch,error\n")
            for r in fresh:
                f.write("fresh,%s,%d,%s,%.3f,,%.3f,%.3e\n" % (
                    r[0], args.fresh_n, r[1], r[2] * 1e3,
                    (next((x[2] for x in fresh if x[0] == "torch"),
                          float("nan")) / r[2]), r[4]))
            for r in steady:
                f.write("steady,%s,%d,%s,%.3f,%.2f,%.3f,%.3e\n" % (
                    r[2], r[0], r[1], r[3], r[4], r[5], r[6]))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
