"""Connecting: a stopped gemmd costs no more than the caller's timeout and is
reported as not answering (DaemonNotAnswering), a user outside the socket's
group gets a PermissionError that names the group and the command that
grants it, and a plain path is answered with the ipc:// URL."""
from __future__ import annotations

import os
import pwd
import shutil
import signal
import subprocess
import sys
import tempfile
import time

import numpy
import pytest

import gemmd
from gemmd import _capi


def test_stopped_daemon_is_not_answering_within_the_timeout(make_daemon):
    d = make_daemon()
    os.kill(d.proc.pid, signal.SIGSTOP)
    try:
        t0 = time.monotonic()
        with pytest.raises(gemmd.DaemonNotAnswering) as ei:
            gemmd.connect(d.url, timeout=0.5)
        dt = time.monotonic() - t0
        assert 0.4 <= dt < 3.0, "connect took %.2f s for timeout=0.5" % dt
        assert "did not answer" in str(ei.value)
        assert "running" not in str(ei.value)
        # a Timeout, and still a DaemonNotRunning for code that falls back
        assert isinstance(ei.value, TimeoutError)
        assert isinstance(ei.value, gemmd.DaemonNotRunning)
        assert ei.value.code == gemmd.CODES["NOT_ANSWERING"]
        # the default timeout (60 s per request) connects within 2 s
        t0 = time.monotonic()
        with pytest.raises(gemmd.DaemonNotAnswering):
            gemmd.connect(d.url)
        assert time.monotonic() - t0 < 5.0
    finally:
        os.kill(d.proc.pid, signal.SIGCONT)
    with gemmd.connect(d.url, timeout=10.0) as c:
        c.ping()


def test_missing_socket_is_not_running(tmp_path):
    t0 = time.monotonic()
    with pytest.raises(gemmd.DaemonNotRunning) as ei:
        gemmd.connect("ipc://%s/gemmd.sock" % tmp_path, timeout=30.0)
    assert time.monotonic() - t0 < 2.0
    assert not isinstance(ei.value, gemmd.DaemonNotAnswering)


def test_plain_path_suggests_the_ipc_url():
    with pytest.raises(gemmd.InvalidArgument,
                       match="ipc:///run/gemmd/gemmd.sock"):
        gemmd.connect("/run/gemmd/gemmd.sock")


_PROBE = r"""
import sys, gemmd
try:
    gemmd.connect(sys.argv[1], timeout=5.0)
except PermissionError as e:
    print(type(e).__name__, e.code, e)
    sys.exit(0)
except Exception as e:
    print("not a PermissionError:", type(e).__name__, e)
    sys.exit(1)
print("connected")
sys.exit(1)
"""


def test_user_outside_the_group_gets_permission_error(make_daemon):
    if os.geteuid() != 0:
        pytest.skip("needs root to become another user")
    try:
        other = pwd.getpwnam("daemon")
    except KeyError:
        pytest.skip("needs the user 'daemon'")
    d = make_daemon()
    os.chmod(d.dir, 0o755)  # the socket (0660), not its directory, stops it
    st = os.stat(d.sock)
    assert st.st_gid != other.pw_gid
    import grp
    group = grp.getgrgid(st.st_gid).gr_name

    def become() -> None:
        os.setgroups([])
        os.setgid(other.pw_gid)
        os.setuid(other.pw_uid)

    # the other user may not reach the build tree (a clone in a 0700 home
    # directory): it runs a copy of the package and library it can read
    with tempfile.TemporaryDirectory() as pub:
        os.chmod(pub, 0o755)
        shutil.copytree(os.path.dirname(os.path.abspath(gemmd.__file__)),
                        os.path.join(pub, "gemmd"),
                        ignore=shutil.ignore_patterns("__pycache__"))
        libcopy = os.path.join(pub, "libgemmclient.so.0")
        shutil.copy(_capi.lib().path, libcopy)
        for root, dirs, files in os.walk(pub):
            for n in dirs + files:
                os.chmod(os.path.join(root, n), 0o755)
        site = os.path.dirname(os.path.dirname(os.path.abspath(
            numpy.__file__)))
        env = dict(os.environ, PYTHONPATH=pub + os.pathsep + site,
                   GEMMD_CLIENT_LIB=libcopy)
        r = subprocess.run([os.path.realpath(sys.executable), "-c", _PROBE,
                            d.url], preexec_fn=become, capture_output=True,
                           text=True, timeout=60, env=env, cwd=pub)
    out = r.stdout + r.stderr
    if "No module named 'numpy'" in out:
        pytest.skip("numpy is installed where user daemon cannot read it "
                    "(%s)" % site)
    assert r.returncode == 0, out
    assert out.startswith("PermissionDenied 12 "), out
    assert "user daemon is not in group %s" % group in out, out
    assert "sudo usermod -aG %s daemon" % group in out, out
    assert "newgrp %s" % group in out, out
