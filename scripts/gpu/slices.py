#!/usr/bin/env python3
"""slices.py DIR: the CUDA backend's slices, measured on a GPU host from a
bundle (scripts/gpu/bundle.sh; run by scripts/gpu/sec2.sh).

1. Stopping: a client submits a large GEMM (fp32 8192^3 on the slowest
   kernel, "naive", ~2 s: the production kernels finish any GEMM that
   fits in host memory in well under a second) and hangs up 0.3 s later,
   or sends Cancel; the table gives how long until the
   daemon's queue is empty and the worst latency of a 64^3 GEMM of
   another client right after, with --slice-ms 50 (the default) and 0
   (whole GEMMs, as before).
2. Exactness: D of 4096^3 bf16 and fp64 GEMMs with slices of 1 ms equals
   D without slices, bit for bit (gemmctl mm --out, numpy).
3. Throughput: gemmctl mm 8192^3 bf16 and fp64, --repeat 10, with
   --slice-ms 50, 2 and 0.
"""
import os
import re
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from attacks import CANCEL, GEMM, Client, envelope, memfd, pb_int  # noqa

D = sys.argv[1] if len(sys.argv) > 1 else '/tmp/gemmd-bundle'
OUT = os.environ.get('OUT', '/tmp/out')
GEMMD, GEMMCTL = f'{D}/bin/gemmd', f'{D}/bin/gemmctl'
# smaller runs elsewhere (a check of this script on the cpu backend)
BACKEND = os.environ.get('SLICES_BACKEND', 'cuda')
BIG = int(os.environ.get('SLICES_BIG', '8192'))
EXACT_N = int(os.environ.get('SLICES_EXACT_N', '4096'))
TPUT_N = os.environ.get('SLICES_TPUT_N', '8192')


RUNNING = []


def start(slice_ms, tag):
    sock = f'/tmp/slices-{tag}.sock'
    log = open(f'{OUT}/gemmd-{tag}.log', 'w')
    p = subprocess.Popen([GEMMD, '--backend', BACKEND, '--listen',
                          f'ipc://{sock}', '--slice-ms', str(slice_ms),
                          '--log-level', 'debug'], stderr=log,
                         stdout=subprocess.DEVNULL)
    RUNNING.append(p)
    for _ in range(300):
        if subprocess.run([GEMMCTL, '--url', f'ipc://{sock}', 'ping'],
                          capture_output=True).returncode == 0:
            break
        time.sleep(0.1)
    return p, sock


def stop(p):
    p.terminate()
    p.wait(60)
    RUNNING.remove(p)


def small_latency(sock, c, bid, n=5):
    worst = 0
    for _ in range(n):
        t0 = time.monotonic()
        st = c.gemm(bid, 64, timeout=60)
        worst = max(worst, time.monotonic() - t0)
        assert st == 0, st
    return worst


def stopping(slice_ms):
    p, sock = start(slice_ms, f'stop{slice_ms}')
    rows = []
    honest = Client(sock)
    hfd = memfd(3 * 64 * 64 * 4)
    hbid = honest.register(hfd, 3 * 64 * 64 * 4)
    small_latency(sock, honest, hbid)
    kernel = 'naive' if BACKEND == 'cuda' else 'cpu-naive'
    for what, n, dtype in (('fp32 naive', BIG, 3),):
        es = 8 if dtype == 4 else 4
        size = 3 * n * n * es
        for how in ('close', 'cancel'):
            fd = memfd(size)  # a registered memfd is sealed: a new one
            c = Client(sock, timeout=120)
            bid = c.register(fd, size)
            t_sub = time.monotonic()
            c.send(envelope(c.next, GEMM, Client.gemm_body(bid, n, dtype,
                                                           kernel)))
            gid = c.next - 1
            time.sleep(0.3)
            t0 = time.monotonic()
            if how == 'close':
                c.close()
            else:
                c.send(envelope(c.next, CANCEL, pb_int(1, gid)))
            lat = small_latency(sock, honest, hbid, 1)
            while honest.queue_depth() != 0:
                time.sleep(0.001)
            gone = time.monotonic() - t0
            if how == 'cancel':
                c.s.settimeout(120)
                c.recv()  # the GEMM's own reply (its status)
                c.recv()  # the Cancel's
                c.close()
            rows.append((slice_ms, f'{what} {n}^3', how,
                         f'{gone * 1e3:.1f}', f'{lat * 1e3:.1f}',
                         f'{(t0 - t_sub) * 1e3:.0f}'))
            os.close(fd)
    honest.close()
    os.close(hfd)
    stop(p)
    return rows


def exactness():
    import numpy as np
    rng = np.random.default_rng(1)
    n = EXACT_N
    a = rng.uniform(-1, 1, (n, n)).astype(np.float32)
    b = rng.uniform(-1, 1, (n, n)).astype(np.float32)
    np.save('/tmp/A.npy', a)
    np.save('/tmp/B.npy', b)
    np.save('/tmp/A64.npy', a.astype(np.float64))
    np.save('/tmp/B64.npy', b.astype(np.float64))
    outs = {}
    for ms in (1, 0):
        p, sock = start(ms, f'exact{ms}')
        for dt, an, bn in (('bf16', 'A', 'B'), ('fp64', 'A64', 'B64')):
            f = f'/tmp/D-{dt}-{ms}.npy'
            args = [GEMMCTL, '--url', f'ipc://{sock}', 'mm', '--a',
                    f'/tmp/{an}.npy', '--b', f'/tmp/{bn}.npy', '--dtype', dt,
                    '--out', f, '--quiet']
            if dt == 'bf16':
                args += ['--cd-dtype', 'fp32']
            r = subprocess.run(args, capture_output=True, text=True)
            assert r.returncode == 0, r.stderr
            outs[(dt, ms)] = np.load(f)
        stop(p)
        sliced = open(f'{OUT}/gemmd-exact{ms}.log').read().count('slices of')
        outs[('sliced', ms)] = sliced
    rows = []
    for dt in ('bf16', 'fp64'):
        x, y = outs[(dt, 1)], outs[(dt, 0)]
        rows.append((dt, str(np.array_equal(x, y)),
                     f'{float(np.max(np.abs(x - y))):.3g}'))
    return rows, outs[('sliced', 1)], outs[('sliced', 0)]


def throughput():
    rows = []
    for ms in (50, 2, 0):
        p, sock = start(ms, f'tput{ms}')
        for dt in ('bf16', 'fp64'):
            r = subprocess.run([GEMMCTL, '--url', f'ipc://{sock}', 'mm', '-m',
                                TPUT_N, '-n', TPUT_N, '-k', TPUT_N, '--dtype',
                                dt, '--repeat', '10'], capture_output=True,
                               text=True)
            txt = r.stdout + r.stderr
            tf = re.findall(r'([0-9.]+) TFLOP/s', txt)
            rows.append((ms, dt, tf[-1] if tf else txt.strip()[-120:]))
        log = open(f'{OUT}/gemmd-tput{ms}.log').read()
        m = re.findall(r'runs in (\d+) slices', log)
        rows[-1] = rows[-1] + (m[-1] if m else '1',)
        rows[-2] = rows[-2] + ((m[0] if len(m) > 1 else '1') if m else '1',)
        stop(p)
    return rows


def table(head, rows):
    print('| ' + ' | '.join(head) + ' |')
    print('|' + '---|' * len(head))
    for r in rows:
        print('| ' + ' | '.join(str(x) for x in r) + ' |')
    print()
    sys.stdout.flush()


def main():
    os.makedirs(OUT, exist_ok=True)
    rows = stopping(50) + stopping(0)
    table(('--slice-ms', 'large GEMM', 'client', 'queue empty after (ms)',
           '64^3 of another client (ms)', 'ran before (ms)'), rows)
    if os.environ.get('SLICES_SKIP_EXACT'):
        ex, s1, s0 = [], '-', '-'
    else:
        ex, s1, s0 = exactness()
    table((f'type ({EXACT_N}^3)', 'sliced == whole', 'max |diff|'), ex)
    print(f'slices logged: --slice-ms 1: {s1} GEMMs cut; 0: {s0}\n')
    table(('--slice-ms', f'type ({TPUT_N}^3)', 'TFLOP/s', 'slices'),
          throughput())


if __name__ == '__main__':
    try:
        main()
    finally:
        for p in RUNNING:
            p.kill()
