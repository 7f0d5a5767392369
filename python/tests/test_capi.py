"""The package against the C library: the ctypes mirror of gemm.h's structs,
enums and error table (a C program compiled against the header prints
what the compiler makes of them), the library search order, import cost
and that no CUDA library is ever loaded."""
from __future__ import annotations

import ctypes
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Dict, Tuple

import numpy as np
import pytest
from conftest import require

import gemmd
from gemmd import _capi

REPO = Path(__file__).resolve().parents[2]
HEADER_DIR = REPO / "client" / "include"
TYPES_DIR = REPO / "common" / "include"  # gemm/types.h, which gemm.h includes
PKG_SRC = REPO / "python"


def _cc() -> str:
    cc = os.environ.get("CC") or shutil.which("cc") or shutil.which("gcc")
    if not cc:
        assert not require("cc"), ("no C compiler (cc), and GEMM_REQUIRE says "
                                   "this host has one")
        pytest.skip("skipped: no C compiler (cc) to check the ctypes mirror")
    if not (HEADER_DIR / "gemm" / "gemm.h").exists():
        pytest.skip("skipped: gemm.h not found at %s" % HEADER_DIR)
    return cc


@pytest.fixture(scope="module")
def c_facts(tmp_path_factory: pytest.TempPathFactory) -> Dict[str, str]:
    """name -> value printed by a C program compiled against gemm.h:
    sizeof/offsetof/field sizes of every mirrored struct, the mirrored
    enum values, and GEMM_ERROR_MAP expanded."""
    cc = _cc()
    lines = ["#include <gemm/gemm.h>", "#include <stddef.h>",
             "#include <stdio.h>", "int main(void) {"]
    for cname, st in _capi.STRUCTS.items():
        lines.append('printf("sizeof %s %%zu\\n", sizeof(%s));' %
                     (cname, cname))
        for f, _ in st._fields_:
            lines.append('printf("offsetof %s.%s %%zu\\n", offsetof(%s, %s));'
                         % (cname, f, cname, f))
            lines.append('printf("fsize %s.%s %%zu\\n", sizeof(((%s *)0)->%s));'
                         % (cname, f, cname, f))
    for name in _capi.ENUMS:
        lines.append('printf("enum %s %%d\\n", (int)%s);' % (name, name))
    lines.append('#define P(name, num, msg) printf("error %d %s %s\\n", '
                 'num, #name, msg);')
    lines.append("GEMM_ERROR_MAP(P)")
    lines.append("return 0; }")
    d = tmp_path_factory.mktemp("capi")
    src = d / "layout.c"
    src.write_text("\n".join(lines) + "\n")
    exe = d / "layout"
    r = subprocess.run([cc, "-std=c11", "-I", str(HEADER_DIR), "-I",
                        str(TYPES_DIR), "-o", str(exe), str(src)],
                       capture_output=True, text=True)
    assert r.returncode == 0, "compiling the layout probe failed:\n" + r.stderr
    out = subprocess.run([str(exe)], capture_output=True, text=True,
                         check=True).stdout
    facts: Dict[str, str] = {}
    for ln in out.splitlines():
        kind, key, rest = (ln.split(" ", 2) + [""])[:3]
        facts["%s %s" % (kind, key)] = rest
    return facts


@pytest.mark.parametrize("cname", sorted(_capi.STRUCTS))
def test_struct_layout_matches_header(c_facts: Dict[str, str],
                                      cname: str) -> None:
    st = _capi.STRUCTS[cname]
    assert int(c_facts["sizeof " + cname]) == ctypes.sizeof(st), (
        "sizeof(%s): C %s, ctypes %d: gemm.h changed; update _capi.py" %
        (cname, c_facts["sizeof " + cname], ctypes.sizeof(st)))
    for f, _ in st._fields_:
        desc = getattr(st, f)
        assert int(c_facts["offsetof %s.%s" % (cname, f)]) == desc.offset, (
            "offsetof(%s, %s)" % (cname, f))
        assert int(c_facts["fsize %s.%s" % (cname, f)]) == desc.size, (
            "sizeof(%s.%s)" % (cname, f))


def test_enums_match_header(c_facts: Dict[str, str]) -> None:
    for name, value in _capi.ENUMS.items():
        assert c_facts["enum " + name] == str(value), name


def test_error_table_matches_header(c_facts: Dict[str, str]) -> None:
    c_errors: Dict[int, Tuple[str, str]] = {}
    for key, rest in c_facts.items():
        if key.startswith("error "):
            name, msg = rest.split(" ", 1)
            c_errors[int(key.split()[1])] = (name, msg)
    assert c_errors, "GEMM_ERROR_MAP printed nothing"
    for num, (name, msg) in c_errors.items():
        assert num in gemmd.ERRORS, (
            "gemm.h has %s = %d, gemmd._errors.ERRORS lacks it" % (name, num))
        assert gemmd.ERRORS[num][:2] == (name, msg), num
    assert set(gemmd.ERRORS) == set(c_errors), "codes only in the package"


def test_error_table_matches_library() -> None:
    lib = _capi.lib()
    for num, (name, msg, _) in gemmd.ERRORS.items():
        assert lib.gemm_strerror(num).decode() == msg, name


def test_dtype_table_matches_library() -> None:
    from gemmd import _dtypes

    lib = _capi.lib()
    for row in _dtypes.TABLE.values():
        if row.available:
            assert lib.gemm_dtype_size(row.code) == row.size, row.name
            assert row.np.itemsize == row.size, row.name


def _py(code: str, env: Dict[str, str], cwd: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code], capture_output=True,
                          text=True, env=env, cwd=cwd, timeout=60)


def test_library_search_order(tmp_path: Path) -> None:
    """Recorded path first, then $GEMMD_CLIENT_LIB, then the loader; a
    clear LibraryNotFound when none loads."""
    built = _capi.lib().path
    src = tmp_path / "src"  # a source copy: nothing recorded
    shutil.copytree(PKG_SRC / "gemmd", src / "gemmd",
                    ignore=shutil.ignore_patterns("_libpath.txt",
                                                  "__pycache__"))
    # LD_LIBRARY_PATH stays: a bundled library needs it for its own
    # dependencies (nng, protobuf-c) on a host without them
    env = dict(os.environ, PYTHONPATH=str(src))
    code = "import gemmd, gemmd._capi as c; print(c.lib().how, c.lib().path)"

    env["GEMMD_CLIENT_LIB"] = built
    r = _py(code, env, str(tmp_path))
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["GEMMD_CLIENT_LIB", built]

    env["GEMMD_CLIENT_LIB"] = str(tmp_path / "nope.so")
    r = _py("import gemmd, gemmd._capi as c\ntry:\n"
            " print('LOADED', c.lib().how, c.lib().path)\n"
            "except gemmd.LibraryNotFound as e:\n"
            " print('LNF', e.code, isinstance(e, OSError), e)\n",
            env, str(tmp_path))
    assert r.returncode == 0, r.stderr
    if r.stdout.startswith("LOADED"):  # an installed libgemmclient
        assert r.stdout.split()[1] == "system", r.stdout
    else:
        assert r.stdout.startswith("LNF 21 True"), r.stdout
        assert "nope.so" in r.stdout and "GEMMD_CLIENT_LIB" in r.stdout

    # recorded wins over the environment
    (src / "gemmd" / "_libpath.txt").write_text(
        "# test\n%s\n" % built)
    env["GEMMD_CLIENT_LIB"] = str(tmp_path / "nope.so")
    r = _py(code, env, str(tmp_path))
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["recorded", built]

    # a recorded path that is gone is skipped, then the environment
    (src / "gemmd" / "_libpath.txt").write_text(
        "%s\n" % (tmp_path / "gone.so"))
    env["GEMMD_CLIENT_LIB"] = built
    r = _py(code, env, str(tmp_path))
    assert r.stdout.split() == ["GEMMD_CLIENT_LIB", built], r.stderr


def test_import_is_cheap_and_lazy(tmp_path: Path) -> None:
    """import gemmd loads neither numpy nor ctypes nor libgemmclient, and
    costs well under 100 ms (python -X importtime, cumulative)."""
    r = subprocess.run(
        [sys.executable, "-X", "importtime", "-c",
         "import sys, gemmd; print(sorted(m for m in ('numpy', 'ctypes', "
         "'gemmd._capi', 'gemmd._client') if m in sys.modules))"],
        capture_output=True, text=True, cwd=str(tmp_path), timeout=60)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "[]", r.stdout
    us = [int(m.group(1)) for m in re.finditer(
        r"import time:\s+\d+ \|\s+(\d+) \| gemmd$", r.stderr, re.M)]
    assert us, r.stderr[-2000:]
    print("import gemmd: %.1f ms cumulative" % (us[0] / 1000))
    assert us[0] < 100_000, "import gemmd took %d us" % us[0]


def test_never_loads_cuda(client: "gemmd.Client") -> None:
    a = np.ones((64, 64), np.float32)
    client.matmul(a, a)
    client.kernels()
    with open("/proc/self/maps") as f:
        maps = f.read()
    for lib in ("libcuda.so", "libcudart", "libcublas", "libnvidia"):
        assert lib not in maps, "%s is mapped in the client process" % lib


def test_version() -> None:
    assert _capi.lib().gemm_version_string().decode() == gemmd.__version__
