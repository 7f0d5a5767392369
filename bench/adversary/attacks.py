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

Attacks of the second round (issue 24; --round2, or by name), each kept
up while the honest client measures what it needs, then stopped: the
table gives the honest client's refusals and worst latency during the
attack and right after it.
  tickets    /dev/null passed again and again, 16 per descriptor channel,
             each channel closed (unused tickets); honest: registrations
  fdhold     256 channels each sending the first byte of a message with 8
             descriptors, then nothing; honest: registrations
  leave      a large fp32 GEMM (--big, default 4096^3) submitted, the
             client gone 0.3 s later, again and again; honest: 64^3 GEMMs
  bigjob     the same GEMMs one after another, the client staying;
             honest: 64^3 GEMMs
  metrics    40 connections to --metrics HOST:PORT sending a request line
             and never the blank line, re-opened when closed; honest:
             scrapes
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


# ---- the second round: protobuf and descriptor passing by hand ----

REGISTER, GEMM, CANCEL = 12, 14, 18
FD_HDR = bytes([0, ord('G'), ord('F'), ord('D'), 0, 1, 0, 0])
FD_PASS = struct.pack('<II', 1, 0)


def pb_int(num, v):
    return varint(num << 3) + varint(v)


def pb_bytes(num, b):
    return varint(num << 3 | 2) + varint(len(b)) + b


def envelope(rid, body_num, body):
    return b'\x08\x01' + pb_int(2, rid) + pb_bytes(body_num, body)


def pb_parse(buf):
    """Top-level fields of a protobuf message: {number: [values]}
    (varints as ints, length-delimited as bytes)."""
    out, i = {}, 0
    while i < len(buf):
        key, i = _varint_at(buf, i)
        num, wt = key >> 3, key & 7
        if wt == 0:
            v, i = _varint_at(buf, i)
        elif wt == 2:
            n, i = _varint_at(buf, i)
            v, i = buf[i:i + n], i + n
        elif wt == 1:
            v, i = buf[i:i + 8], i + 8
        elif wt == 5:
            v, i = buf[i:i + 4], i + 4
        else:
            raise ValueError('bad wire type')
        out.setdefault(num, []).append(v)
    return out


def _varint_at(buf, i):
    v = shift = 0
    while True:
        b = buf[i]
        i += 1
        v |= (b & 0x7F) << shift
        shift += 7
        if not b & 0x80:
            return v, i


def status_of(reply):
    return pb_parse(reply).get(3, [0])[0]


def memfd(size):
    fd = os.memfd_create('adversary', os.MFD_ALLOW_SEALING | os.MFD_CLOEXEC)
    os.ftruncate(fd, size)
    os.posix_fallocate(fd, 0, size)
    return fd


class Chan:
    """A descriptor channel."""

    def __init__(self, path, timeout=2.0):
        self.s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.s.settimeout(timeout)
        self.s.connect(path)
        got = b''
        while len(got) < 8:
            chunk = self.s.recv(8 - len(got))
            if not chunk:
                raise ConnectionError('closed during the greeting')
            got += chunk
        self.s.sendall(FD_HDR)

    def pass_fd(self, fd):
        """(status, ticket) for fd."""
        socket.send_fds(self.s, [FD_PASS], [fd])
        ans = b''
        while len(ans) < 16:
            chunk = self.s.recv(16 - len(ans))
            if not chunk:
                raise ConnectionError('channel closed')
            ans += chunk
        st, _, ticket = struct.unpack('<iIQ', ans)
        return st, ticket

    def close(self):
        self.s.close()


class Client(Sp):
    """An SP client with a descriptor channel: registers buffers and runs
    fp32 GEMMs in them."""

    def __init__(self, path, timeout=2.0):
        super().__init__(path, timeout)
        self.handshake()
        self.path = path
        self.chan = None

    def call(self, body_num, body, timeout=None):
        if timeout is not None:
            self.s.settimeout(timeout)
        self.send(envelope(self.next, body_num, body))
        return self.recv()[4:]  # past the request id

    def register(self, fd, size):
        """The buffer id, or raises RuntimeError with the status."""
        if self.chan is None:
            self.chan = Chan(self.path)
        st, ticket = self.chan.pass_fd(fd)
        if st != 0:
            raise RuntimeError(f'descriptor refused: status {st}')
        rep = self.call(REGISTER, pb_int(2, size) + pb_int(3, ticket))
        if status_of(rep) != 0:
            raise RuntimeError(f'register: status {status_of(rep)}')
        body = pb_parse(pb_parse(rep)[12][0])
        return body.get(1, [0])[0]

    @staticmethod
    def gemm_body(bid, n, dtype=3, kernel=None):
        """An n^3 GEMM of dtype (3: fp32, 4: fp64) in buffer bid: A, B, D
        one after another."""
        es = 8 if dtype == 4 else 4

        def op(off):
            return pb_int(1, bid) + pb_int(2, off)
        body = (pb_int(1, n) + pb_int(2, n) + pb_int(3, n) +
                pb_int(4, dtype) + pb_int(5, dtype) + pb_bytes(10, op(0)) +
                pb_bytes(11, op(n * n * es)) +
                pb_bytes(13, op(2 * n * n * es)))
        if kernel:
            body += pb_bytes(16, kernel.encode())
        return body

    def gemm(self, bid, n, timeout=30.0, dtype=3, kernel=None):
        return status_of(self.call(GEMM, self.gemm_body(bid, n, dtype, kernel),
                                   timeout))

    def queue_depth(self):
        rep = pb_parse(self.call(STATUS, b''))
        return pb_parse(rep[11][0]).get(6, [0])[0] if 11 in rep else 0

    def close(self):
        if self.chan is not None:
            self.chan.close()
        super().close()


def honest_register(path):
    """A fresh client registers a 64 KiB buffer: seconds, or None."""
    t0 = time.monotonic()
    fd = memfd(65536)
    try:
        c = Client(path)
        try:
            c.register(fd, 65536)
        finally:
            c.close()
        return time.monotonic() - t0
    except (OSError, ConnectionError, RuntimeError, IndexError):
        return None
    finally:
        os.close(fd)


def honest_scrape(hostport, timeout=1.0):
    host, port = hostport.rsplit(':', 1)
    t0 = time.monotonic()
    try:
        s = socket.create_connection((host, int(port)), timeout=timeout)
        s.sendall(b'GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n')
        head = s.recv(16)
        s.close()
        if not head.startswith(b'HTTP/1.0 200'):
            return None
        return time.monotonic() - t0
    except OSError:
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


# ---- second-round attacks: each runs until stop() is true ----

def attack_tickets(path, stop, args):
    null = os.open('/dev/null', os.O_RDONLY)
    got = refused = 0
    while not stop():
        try:
            ch = Chan(path)
            for _ in range(16):
                st, _ = ch.pass_fd(null)
                got += st == 0
                refused += st != 0
            ch.close()
        except (OSError, ConnectionError):
            pass
    return f'{got} tickets, {refused} refused'


def attack_fdhold(path, stop, args):
    null = os.open('/dev/null', os.O_RDONLY)
    held = []
    for _ in range(256):
        try:
            ch = Chan(path)
            socket.send_fds(ch.s, [FD_PASS[:1]], [null] * 8)
            held.append(ch)
        except (OSError, ConnectionError):
            break
    n = len(held)
    closed = 0
    while not stop():
        time.sleep(0.05)
    for ch in held:
        try:
            ch.s.setblocking(False)
            closed += ch.s.recv(1) == b''
        except BlockingIOError:
            pass
        except OSError:
            closed += 1
        ch.close()
    return f'{n} channels x 8 descriptors; {closed} closed by gemmd'


def big_buffer(path, n):
    size = 3 * n * n * 4
    return memfd(size), size


def attack_leave(path, stop, args):
    n = args.big
    sent = 0
    while not stop():
        fd, size = big_buffer(path, n)  # registered ones are sealed
        try:
            c = Client(path)
            bid = c.register(fd, size)
            c.send(envelope(c.next, GEMM, Client.gemm_body(bid, n)))
            sent += 1
            time.sleep(0.3)
            c.close()  # gone with the GEMM running
        except (OSError, ConnectionError, RuntimeError, IndexError):
            time.sleep(0.05)
        os.close(fd)
    return f'{sent} {n}^3 fp32 GEMMs submitted and left'


def attack_bigjob(path, stop, args):
    n = args.big
    fd, size = big_buffer(path, n)
    done = 0
    try:
        c = Client(path)
        bid = c.register(fd, size)
        while not stop():
            done += c.gemm(bid, n, timeout=120.0) == 0
    except (OSError, ConnectionError, RuntimeError, IndexError):
        pass
    return f'{done} {n}^3 fp32 GEMMs, one after another'


def attack_metrics(path, stop, args):
    host, port = args.metrics.rsplit(':', 1)
    held, opened = [], 0
    while not stop():
        held = [h for h in held if h.fileno() >= 0]
        alive = []
        for h in held:
            try:
                h.setblocking(False)
                if h.recv(1) == b'':
                    h.close()
                    continue
            except BlockingIOError:
                pass
            except OSError:
                h.close()
                continue
            alive.append(h)
        held = alive
        while len(held) < 40:
            try:
                h = socket.create_connection((host, int(port)), timeout=1.0)
                h.sendall(b'GET /metrics HTTP/1.1\r\n')
                held.append(h)
                opened += 1
            except OSError:
                break
        time.sleep(0.01)
    for h in held:
        h.close()
    return f'{opened} half requests opened'


ROUND2 = {'tickets': (attack_tickets, 'register'),
          'fdhold': (attack_fdhold, 'register'),
          'leave': (attack_leave, 'gemm'),
          'bigjob': (attack_bigjob, 'gemm'),
          'metrics': (attack_metrics, 'scrape')}


def attacker2(name, path, uid, gid, args):
    """Forks second-round attack name as uid:gid; returns stop(), which
    ends it and returns what it did."""
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
        import select

        def stop():
            return bool(select.select([r2], [], [], 0)[0])
        os.write(w, b'started\n')
        what = ROUND2[name][0](path, stop, args)
        os.write(w, what.encode() + b'\n')
        os._exit(0)
    os.close(w)
    os.close(r2)
    os.read(r, 8)

    def stop():
        os.write(w2, b'x')
        what = b''
        while True:
            chunk = os.read(r, 512)
            if not chunk:
                break
            what += chunk
        os.waitpid(pid, 0)
        return what.decode().strip()
    return stop


def honest_op(kind, path, args, client):
    if kind == 'register':
        return honest_register(path)
    if kind == 'scrape':
        return honest_scrape(args.metrics)
    t0 = time.monotonic()
    try:
        if client.gemm(client.bid, 64, timeout=30.0) != 0:
            return None
        return time.monotonic() - t0
    except (OSError, ConnectionError):
        return None


def fmt2(rtts):
    served = [r for r in rtts if r is not None]
    worst = f'{max(served) * 1e3:.1f} ms' if served else '-'
    return f'{len(rtts) - len(served)}/{len(rtts)}', worst


def round2(names, path, uid, gid, args):
    """Runs second-round attacks; returns table rows."""
    rows = []
    for name in names:
        kind = ROUND2[name][1]
        client = None
        if kind == 'gemm':
            client = Client(path)
            fd = memfd(3 * 64 * 64 * 4)
            client.bid = client.register(fd, 3 * 64 * 64 * 4)
            os.close(fd)
        idle = [honest_op(kind, path, args, client) for _ in range(5)]
        stop = attacker2(name, path, uid, gid, args)
        time.sleep(args.settle)
        during = []
        t_end = time.monotonic() + args.during
        while time.monotonic() < t_end or len(during) < 5:
            during.append(honest_op(kind, path, args, client))
        what = stop()
        after = [honest_op(kind, path, args, client) for _ in range(10)]
        if client is not None:
            client.close()
        rows.append((name, what, kind, fmt2(idle)[1], *fmt2(during),
                     *fmt2(after)))
    return rows


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
    ap.add_argument('--round2', action='store_true',
                    help='the second round of attacks (issue 24)')
    ap.add_argument('--during', type=float, default=5.0,
                    help='round 2: seconds the honest client measures '
                    'during each attack')
    ap.add_argument('--big', type=int, default=4096,
                    help='round 2: n of the n^3 fp32 GEMMs of leave, bigjob')
    ap.add_argument('--metrics', default='',
                    help="round 2: gemmd's --metrics-listen HOST:PORT")
    args = ap.parse_args()
    if args.round2 and args.attacks == ','.join(ATTACKS):
        args.attacks = ','.join(n for n in ROUND2
                                if n != 'metrics' or args.metrics)
    path = args.url[len('ipc://'):]
    uid = gid = None
    if args.attacker and os.geteuid() == 0:
        import grp
        import pwd
        uid = pwd.getpwnam(args.attacker).pw_uid
        gid = (grp.getgrnam(args.group).gr_gid if args.group
               else os.stat(path).st_gid)
    names = args.attacks.split(',')
    r2 = [n for n in names if n in ROUND2]
    if r2:
        rows2 = round2(r2, path, uid, gid, args)
        head = ('attack', 'what', 'honest op', 'idle worst',
                'refused during', 'worst during', 'refused after',
                'worst after')
        print('| ' + ' | '.join(head) + ' |')
        print('|' + '---|' * len(head))
        for r in rows2:
            print('| ' + ' | '.join(r) + ' |')
    names = [n for n in names if n in ATTACKS]
    if not names:
        return 0
    rows = []
    for name in names:
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
