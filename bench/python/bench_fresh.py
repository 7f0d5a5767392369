#!/usr/bin/env python3
"""bench_fresh.py: a fresh Python process from start to its first GEMM
result from two .npy files, phase by phase, against `gemmctl mm` and plain
numpy on the same files (issue 21, item 5). Runs on any backend; gemmd
must be running at --url.

Each contender runs --runs times as a new process (after one warm-up run
that is not counted), in turn (A B C A B C ...) so that a drifting machine
moves them alike; every figure is the median of its runs:

  python      `python -c` reading the clock: interpreter start-up (site)
  import      python, then `import numpy`: the floor of any numpy program
  np.load     python: import numpy and gemmd, np.load A and B, connect,
              client.matmul(a, b): staging copies into shared memory
  load        python: import numpy and gemmd, connect, client.load A and
              B (read straight into shared memory), client.matmul
              (skipped when the package has no Client.load)
  numpy       python: import numpy, np.load A and B, A @ B in-process
  gemmctl     `gemmctl mm --a A --b B --out D` (C; writes D too)
  np.load/base  with --baseline DIR: np.load again, the gemmd package
              taken from DIR (PYTHONPATH), e.g. an older build's
              build/python/pkg: before and after in one interleaved run

Timestamps are CLOCK_MONOTONIC in parent and child (time.monotonic), so
"start" is from spawning the process to the child's first line.
"compute" is the daemon's: the growth of its devices' busy_s (the time
its workers spent in jobs) over the run, read with status() before and
after; "beside" = to result - compute: what the process adds to the GEMM.
"cpu" is the child's user + system time (os.wait4), which a busy machine
disturbs less than wall time.

--dtype bf16: the files hold float32; gemmd multiplies in bfloat16 with a
float32 result (np.load path: dtype=..., load path: load(dtype=...),
gemmctl: --dtype bf16 --cd-dtype fp32); numpy multiplies float32.

Each result is checked (sampled rows against an fp64 reference; fp32
1e-5, bf16 1e-2, as gemmctl --check). Tables are printed last.

Usage: bench_fresh.py [--url URL] [--a A.npy --b B.npy | --n 2048]
  [--dtype fp32|bf16] [--runs 7] [--gemmctl PATH] [--contenders
  python,import,np.load,load,numpy,gemmctl] [--baseline DIR]
  [--python EXE] [--csv FILE]
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
from typing import Any, Dict, List

import numpy as np

TOL = {"fp32": 1e-5, "bf16": 1e-2}
SAMPLE = 8  # rows checked

# Children: argv = A B URL DTYPE OUT; print one JSON line of
# [(phase, monotonic, process_time), ...] after saving sampled rows of D.
HEAD = """import time, sys
_T = [("start", time.monotonic(), time.process_time())]
def mark(name):
    _T.append((name, time.monotonic(), time.process_time()))
"""
TAIL = """
mark("result")
import json
np.save(sys.argv[5], np.asarray(d[:%d], dtype=np.float32))
print(json.dumps(_T), flush=True)
""" % SAMPLE

CHILD = {
    "python": HEAD + """
import json
print(json.dumps(_T), flush=True)
""",
    "import": HEAD + """
import numpy as np
mark("import numpy")
import json
print(json.dumps(_T), flush=True)
""",
    "np.load": HEAD + """
import numpy as np
mark("import numpy")
import gemmd
mark("import gemmd")
a = np.load(sys.argv[1]); b = np.load(sys.argv[2])
mark("load")
c = gemmd.connect(sys.argv[3])
mark("connect")
kw = {"dtype": "bfloat16", "out_dtype": "float32"} \\
    if sys.argv[4] == "bf16" else {}
d = c.matmul(a, b, **kw)
""" + TAIL,
    "load": HEAD + """
import numpy as np
mark("import numpy")
import gemmd
mark("import gemmd")
c = gemmd.connect(sys.argv[3])
mark("connect")
dt = "bfloat16" if sys.argv[4] == "bf16" else None
a = c.load(sys.argv[1], dtype=dt); b = c.load(sys.argv[2], dtype=dt)
mark("load")
kw = {"out_dtype": "float32"} if sys.argv[4] == "bf16" else {}
d = c.matmul(a, b, **kw)
""" + TAIL,
    "numpy": HEAD + """
import numpy as np
mark("import numpy")
a = np.load(sys.argv[1]); b = np.load(sys.argv[2])
mark("load")
d = a @ b
""" + TAIL,
}

GEMMD_CHILDREN = ("np.load", "load", "np.load/base")


def busy(client: Any) -> float:
    """The daemon's devices' busy_s, summed."""
    return sum(d["busy_s"] for d in client.status()["devices"])


def run_one(name: str, args: argparse.Namespace, work: str,
            client: Any) -> Dict[str, Any]:
    """One fresh process of contender name: its phases, wall, cpu and
    the daemon's compute. Raises RuntimeError when it fails."""
    out = os.path.join(work, "D-%s.npy" % name.replace("/", "-"))
    if name == "gemmctl":
        d_full = os.path.join(work, "D-gemmctl-full.npy")
        cmd = [args.gemmctl, "--url", args.url, "mm", "--a", args.a, "--b",
               args.b, "--out", d_full]
        if args.dtype == "bf16":
            cmd += ["--dtype", "bf16", "--cd-dtype", "fp32"]
    else:
        cmd = [args.python, "-c", CHILD[name.split("/")[0]], args.a, args.b,
               args.url, args.dtype, out]
    env = None
    if name.endswith("/base"):
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(
            [args.baseline] + ([env["PYTHONPATH"]] if env.get("PYTHONPATH")
                               else []))
    uses_daemon = name in GEMMD_CHILDREN or name == "gemmctl"
    b0 = busy(client) if uses_daemon else 0.0
    with tempfile.TemporaryFile("w+") as fo, \
            tempfile.TemporaryFile("w+") as fe:
        t0 = time.monotonic()
        p = subprocess.Popen(cmd, stdout=fo, stderr=fe, text=True, env=env)
        _, status, ru = os.wait4(p.pid, 0)
        t_end = time.monotonic()
        p.returncode = os.waitstatus_to_exitcode(status)
        fo.seek(0)
        fe.seek(0)
        stdout, stderr = fo.read(), fe.read()
    rc = p.returncode
    if rc != 0:
        raise RuntimeError("%s: exit %s: %s" % (
            name, rc, (stderr.strip().splitlines() or ["?"])[-1]))
    compute = busy(client) - b0 if uses_daemon else 0.0
    r: Dict[str, Any] = {"wall": t_end - t0, "compute": compute,
                         "phases": {}}
    r["cpu"] = ru.ru_utime + ru.ru_stime
    if name == "gemmctl":
        r["result"] = r["wall"]
        d = np.load(d_full, mmap_mode="r")
        np.save(out, np.asarray(d[:SAMPLE], dtype=np.float32))
        del d
        os.unlink(d_full)
    else:
        marks = json.loads(stdout.strip().splitlines()[-1])
        prev_t, prev_c = t0, None
        for ph, t, c in marks:
            r["phases"][ph] = (t - prev_t,
                               c - prev_c if prev_c is not None else c)
            prev_t, prev_c = t, c
        r["result"] = marks[-1][1] - t0
        r["exit_cpu"] = r["cpu"] - marks[-1][2]
    if name not in ("python", "import"):
        r["err"] = check(out, args)
    return r


_ref: Dict[str, np.ndarray] = {}


def check(path: str, args: argparse.Namespace) -> float:
    """Relative Frobenius error of the sampled rows in path."""
    if "ref" not in _ref:
        a = np.load(args.a, mmap_mode="r")[:SAMPLE]
        b = np.load(args.b)
        if args.dtype == "bf16":
            import ml_dtypes

            a = np.asarray(a).astype(ml_dtypes.bfloat16)
            b = b.astype(ml_dtypes.bfloat16)
        _ref["ref"] = np.asarray(a, np.float64) @ b.astype(np.float64)
    got = np.load(path).astype(np.float64)
    ref = _ref["ref"]
    return float(np.linalg.norm(got - ref) / np.linalg.norm(ref))


def med(xs: List[float]) -> float:
    return statistics.median(xs) if xs else float("nan")


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--url", default=os.environ.get("GEMM_URL"))
    p.add_argument("--a")
    p.add_argument("--b")
    p.add_argument("--n", type=int, default=2048)
    p.add_argument("--dtype", default="fp32", choices=["fp32", "bf16"])
    p.add_argument("--runs", type=int, default=7)
    p.add_argument("--gemmctl", default=None)
    p.add_argument("--contenders",
                   default="python,import,np.load,load,numpy,gemmctl")
    p.add_argument("--baseline", default=None)
    p.add_argument("--python", default=sys.executable)
    p.add_argument("--csv", default=None)
    args = p.parse_args()
    import gemmd

    client = gemmd.connect(args.url, timeout=600)
    args.url = client.url
    info = client.ping()
    work = tempfile.mkdtemp(prefix="bench-fresh-")
    try:
        if not args.a:
            rng = np.random.default_rng(1234)
            args.a = os.path.join(work, "A.npy")
            args.b = os.path.join(work, "B.npy")
            for f in (args.a, args.b):
                np.save(f, rng.random((args.n, args.n), np.float32) * 2 - 1)
        shape = (np.load(args.a, mmap_mode="r").shape,
                 np.load(args.b, mmap_mode="r").shape)
        names = [c for c in args.contenders.split(",") if c]
        if "gemmctl" in names and not args.gemmctl:
            names.remove("gemmctl")
        if args.baseline:
            names.insert(names.index("np.load") + 1 if "np.load" in names
                         else len(names), "np.load/base")
        if "load" in names:
            probe = subprocess.run(
                [args.python, "-c",
                 "import gemmd, sys; sys.exit(0 if hasattr(gemmd.Client, "
                 "'load') else 1)"], capture_output=True)
            if probe.returncode != 0:
                print("load: this gemmd package has no Client.load; "
                      "skipped")
                names.remove("load")
        runs: Dict[str, List[Dict[str, Any]]] = {n: [] for n in names}
        for i in range(args.runs + 1):
            for name in names:
                r = run_one(name, args, work, client)
                if i > 0:
                    runs[name].append(r)
                print("run %d %-8s to result %.3f s, wall %.3f s, compute "
                      "%.3f s%s" % (i, name, r["result"], r["wall"],
                                    r["compute"],
                                    " (warm-up)" if i == 0 else ""),
                      flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)

    bad = False
    probe = subprocess.run(
        [args.python, "-c", "import os, importlib.util, gemmd._client as m; "
         "print(os.path.exists(importlib.util.cache_from_source("
         "m.__file__)))"], capture_output=True, text=True)
    if probe.stdout.strip() != "True":
        print("\nnote: gemmd's modules have no cached bytecode, so every "
              "fresh process compiles them (PYTHONDONTWRITEBYTECODE, or a "
              "read-only directory): run `python -m compileall` on the "
              "package first (pip install does)")
    print("\ngemmd %s, backend %s, device %s; A %s, B %s, %s; python %s; "
          "median of %d fresh processes each" % (
              info["server_version"], info["backend"], info["device"],
              "x".join(map(str, shape[0])), "x".join(map(str, shape[1])),
              args.dtype, sys.version.split()[0], args.runs))
    print("\n%-13s %10s %10s %10s %10s %8s %9s %s" % (
        "who", "result s", "compute s", "beside s", "process s", "cpu s",
        "error", "check"))
    rows = []
    for name in names:
        rs = runs[name]
        err = max((r.get("err", 0.0) for r in rs), default=0.0)
        ok = "ok" if err <= TOL[args.dtype] else "FAIL"
        if name in ("python", "import"):
            ok = "-"
        bad |= ok == "FAIL"
        row = [name, med([r["result"] for r in rs]),
               med([r["compute"] for r in rs]),
               med([r["result"] - r["compute"] for r in rs]),
               med([r["wall"] for r in rs]), med([r["cpu"] for r in rs]),
               err, ok]
        rows.append(row)
        print("%-13s %10.3f %10.3f %10.3f %10.3f %8.3f %9.1e %s" %
              tuple(row))
    phased = [n for n in names if n != "gemmctl"]
    order: List[str] = []
    for n in phased:
        for ph in runs[n][0]["phases"] if runs[n] else []:
            if ph not in order:
                order.append(ph)
    print("\nphases, wall ms (cpu ms): the time from the previous mark; "
          "'start' is from spawning the process; the GEMM's phase "
          "includes the daemon's compute, shown apart; 'exit' from the "
          "result to the process reaped (its cpu: the whole process's "
          "less the child's own clock at the result)")
    print("%-14s" % "phase" + "".join("%18s" % n for n in phased))
    for ph in order + ["compute", "exit"]:
        cells = []
        for n in phased:
            rs = runs[n]
            if ph == "compute":
                v = [r["compute"] for r in rs] if n in GEMMD_CHILDREN else []
                cells.append("%18s" % ("%.1f" % (med(v) * 1e3) if v else ""))
                continue
            if ph == "exit":
                v = [r["wall"] - r["result"] for r in rs]
                c = [r["exit_cpu"] for r in rs]
                cells.append("%18s" % ("%.1f (%.1f)" % (med(v) * 1e3,
                                                        med(c) * 1e3)))
                continue
            w = [r["phases"][ph][0] for r in rs if ph in r["phases"]]
            c = [r["phases"][ph][1] for r in rs if ph in r["phases"]]
            cells.append("%18s" % ("%.1f (%.1f)" % (med(w) * 1e3,
                                                    med(c) * 1e3)
                                   if w else ""))
        print("%-14s" % ph + "".join(cells))
    if args.csv:
        with open(args.csv, "w") as f:
            f.write("who,dtype,result_s,compute_s,beside_s,process_s,cpu_s,"
                    "error\n")
            for r in rows:
                f.write("%s,%s,%.4f,%.4f,%.4f,%.4f,%.4f,%.3e\n" %
                        (r[0], args.dtype, *r[1:7]))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
