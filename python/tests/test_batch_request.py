"""The batch requests the package sends for stacks and groups, read back
by tests/batch_emulator.py: strided when every operand's matrices are
one stride apart (0 for a broadcast one), grouped otherwise, and what
they compute (numpy's answer) whatever the daemon serves."""
from __future__ import annotations

import numpy as np
import pytest

import gemmd
from batch_emulator import emulate
from conftest import f64, rand, rel_err


@pytest.mark.parametrize("how,kind", [
    ("contiguous", "strided"), ("broadcast-b", "strided"),
    ("missing-dim", "strided"), ("batch-step", "strided"),
    ("outer", "grouped"), ("reversed", "grouped"),
])
def test_strided_or_grouped(client: gemmd.Client,
                            monkeypatch: pytest.MonkeyPatch, how: str,
                            kind: str) -> None:
    em = emulate(client, monkeypatch)
    rng = np.random.default_rng(0)
    a = client.asarray(rand(rng, (6, 4, 5)))
    b = client.asarray(rand(rng, (6, 5, 3)))
    x, y = {
        "contiguous": (a, b),
        "broadcast-b": (a, b[:1]),
        "missing-dim": (a, b[0]),
        "batch-step": (a[::2], b[1::2]),
        "outer": (a[:, None], b[None, :]),
        "reversed": (a[::-1], b),
    }[how]
    d = client.matmul(x, y)
    assert em.sent == [(kind, int(np.prod(d.shape[:-2])))]
    assert rel_err(d, np.matmul(f64(x), f64(y))) <= 1e-5


def test_grouped_call_of_equal_shapes_is_strided(
        client: gemmd.Client, monkeypatch: pytest.MonkeyPatch) -> None:
    """Equal problems evenly spaced in one buffer go as a strided batch."""
    em = emulate(client, monkeypatch)
    rng = np.random.default_rng(1)
    a = client.asarray(rand(rng, (5, 4, 8)))
    w = client.asarray(rand(rng, (8, 8)))
    got = client.matmul_grouped(list(a), [w] * 5)
    assert em.sent == [("strided", 5)]
    for g, x in zip(got, a):
        assert rel_err(g, f64(x) @ f64(w)) <= 1e-5
    got = client.matmul_grouped([a[0], a[1][:2]], [w, w])
    assert em.sent[-1] == ("grouped", 2)

