#!/usr/bin/env python3
"""attacks.py: a hostile local user against a running gemmd, measured.

Each attack runs against the daemon at --url (its pid from --pid, for CPU
and memory figures) from a child process of another uid (--attacker,
default "daemon"; run as root), while an honest client (this process)
asks Hello on a fresh connection and on a connection opened before the
attack; the table says whether the honest client was served and how fast,
and what the attack cost the daemon. Standard library only: the SP wire (8-byte header, 01 + u64
length frames, the REQ backtrace) and the few protobuf bytes of Hello and
Status are spoken by hand, so the script runs against any gemmd build,
including the nng-based ones before issue 10.

    bench/adversary/attacks.py --url ipc:///tmp/x/gemmd.sock --pid PID

Attacks (issue 10):
  unread     400 Status requests on one connection, no reply ever read
  halfhs     100 rounds: keep one idle connection, send 00 'S' 'P', hang up
  idle       2000 idle connections held open
  slowmsg    200 connections each holding a frame header promising 60000
             bytes and 100 of them (a partial message each)
"""
import argparse
import os
import socket
import struct
import sys
import time

REQ_HDR = bytes([0, ord('S'), ord('P'), 0, 0, 0x30, 0, 0])


def varint(n):
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        out.append(b | (0x80 if n else 0))
        if not n:
            return bytes(out)


def request(rid, body_field):
    """A gemm.Request with version 1, id rid and an empty body field."""
    return (b'\x08\x01' + b'\x10' + varint(rid) +
            varint(body_field << 3 | 2) + b'\x00')


HELLO, STATUS = 10, 11


class Sp:
    """One SP REQ connection spoken by hand."""

    def __init__(self, path, timeout=2.0):
        self.s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.s.settimeout(timeout)
        self.s.connect(path)
        self.next = 1

    def handshake(self):
        got = b''
        while len(got) < 8:
            chunk = self.s.recv(8 - len(got))
            if not chunk:
                raise ConnectionError('closed during the handshake')
            got += chunk
        self.s.sendall(REQ_HDR)

    def send(self, body):
        rid = 0x80000000 | self.next
        self.next += 1
        payload = struct.pack('>I', rid) + body
        self.s.sendall(b'\x01' + struct.pack('>Q', len(payload)) + payload)

    def recv(self):
        head = self._read(9)
        (n,) = struct.unpack('>Q', head[1:])
        return self._read(n)

    def _read(self, n):
        got = b''
        while len(got) < n:
            chunk = self.s.recv(n - len(got))
            if not chunk:
                raise ConnectionError('closed')
            got += chunk
        return got

    def close(self):
        self.s.close()


def hello_rtt(path, conn=None, timeout=2.0):
    """Seconds for one Hello round trip (None if not served in time)."""
    t0 = time.monotonic()
    try:
        c = conn or Sp(path, timeout)
        if conn is None:
            c.handshake()
        c.s.settimeout(timeout)
        c.send(request(c.next, HELLO))
        c.recv()
        if conn is None:
            c.close()
        return time.monotonic() - t0
    except (OSError, ConnectionError):
        return None


def cpu_s(pid):
    f = open(f'/proc/{pid}/stat').read().rsplit(')', 1)[1].split()
    return (int(f[11]) + int(f[12])) / os.sysconf('SC_CLK_TCK')


def rss_kib(pid):
    for line in open(f'/proc/{pid}/status'):
        if line.startswith('VmRSS:'):
            return int(line.split()[1])
    return 0


def honest(path, old):
    """Five fresh-connection Hellos and five on an old connection."""
    fresh = [hello_rtt(path) for _ in range(5)]
    kept = [hello_rtt(path, old) for _ in range(5)] if old else []
    return fresh, kept


def fmt(rtts):
    served = [r for r in rtts if r is not None]
    if not served:
        return f'0/{len(rtts)} served'
    return (f'{len(served)}/{len(rtts)} served, max '
            f'{max(served) * 1e3:.1f} ms')


def attack_unread(path):
    a = Sp(path)
    a.s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    a.handshake()
    a.s.settimeout(0.2)
    sent = 0
    try:
        for _ in range(400):
            a.send(request(a.next, STATUS))
            sent += 1
    except OSError:
        pass
    return [a], f'{sent} requests sent, none read'


def attack_halfhs(path):
    """Each round waits (up to 2 s) until a fresh connection is served
    again, so that a daemon that recovers (the nng-era watchdog re-created
    a wedged listener in ~0.5 s) is wedged anew each round."""
    held, slow, dead = [], 0, 0
    for _ in range(100):
        try:
            held.append(Sp(path))
            h = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            h.connect(path)
            h.send(b'\x00SP')
            h.close()
        except OSError:
            pass
        t0 = time.monotonic()
        while hello_rtt(path, timeout=0.5) is None:
            if time.monotonic() - t0 > 2.0:
                dead += 1
                break
        else:
            slow += time.monotonic() - t0 > 0.1
    return held, (f'100 rounds; {slow} needed > 0.1 s to recover, {dead} '
                  f'did not within 2 s')


def attack_idle(path):
    held = []
    for _ in range(2000):
        try:
            held.append(Sp(path))
        except OSError:
            break
    return held, f'{len(held)} connections held'


def attack_slowmsg(path):
    held = []
    for _ in range(200):
        try:
            c = Sp(path)
            c.handshake()
            c.s.sendall(b'\x01' + struct.pack('>Q', 60000) + b'\x80' * 100)
            held.append(c)
        except OSError:
            break
    return held, f'{len(held)} partial messages held'


ATTACKS = {'unread': attack_unread, 'halfhs': attack_halfhs,
           'idle': attack_idle, 'slowmsg': attack_slowmsg}


def attacker(name, path, uid, gid):
    """Forks the attacker as uid:gid; returns (pid, what, release): the
    attack holds its connections until release() is called."""
    r, w = os.pipe()
    r2, w2 = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(r)
        os.close(w2)
        if uid is not None:
            os.setgroups([gid])
            os.setgid(gid)
            os.setuid(uid)
        held, what = ATTACKS[name](path)
        os.write(w, what.encode() + b'\n')
        os.read(r2, 1)
        for c in held:
            c.close()
        os._exit(0)
    os.close(w)
    os.close(r2)
    what = b''
    while not what.endswith(b'\n'):
        chunk = os.read(r, 512)
        if not chunk:
            break
        what += chunk

    def release():
        os.write(w2, b'x')
        os.waitpid(pid, 0)
    return what.decode().strip(), release


def main():
    ap = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    ap.add_argument('--url', required=True)
    ap.add_argument('--pid', type=int, required=True)
    ap.add_argument('--attacks', default=','.join(ATTACKS))
    ap.add_argument('--attacker', default='daemon',
                    help='user the attacks run as (root only); "" = ours')
    ap.add_argument('--group', default=None,
                    help="the socket's group, given to the attacker")
    ap.add_argument('--settle', type=float, default=1.0,
                    help='seconds between the attack and the measurement')
    args = ap.parse_args()
    path = args.url[len('ipc://'):]
    uid = gid = None
    if args.attacker and os.geteuid() == 0:
        import grp
        import pwd
        uid = pwd.getpwnam(args.attacker).pw_uid
        gid = (grp.getgrnam(args.group).gr_gid if args.group
               else os.stat(path).st_gid)
    rows = []
    for name in args.attacks.split(','):
        old = Sp(path)
        old.handshake()
        rss0 = rss_kib(args.pid)
        what, release = attacker(name, path, uid, gid)
        time.sleep(args.settle)
        c1, t1 = cpu_s(args.pid), time.monotonic()
        time.sleep(1.0)
        idle = (cpu_s(args.pid) - c1) / (time.monotonic() - t1)
        fresh, kept = honest(path, old)
        rss1 = rss_kib(args.pid)
        release()
        old.close()
        time.sleep(0.5)
        after = [hello_rtt(path) for _ in range(3)]
        rows.append((name, what, fmt(fresh), fmt(kept), f'{idle * 100:.0f}%',
                     f'{rss1 - rss0:+d}', fmt(after)))
    head = ('attack', 'what', 'new client during', 'old client during',
            'daemon CPU (1 s)', 'RSS KiB', 'new client after')
    print('| ' + ' | '.join(head) + ' |')
    print('|' + '---|' * len(head))
    for r in rows:
        print('| ' + ' | '.join(r) + ' |')


if __name__ == '__main__':
    sys.exit(main())
