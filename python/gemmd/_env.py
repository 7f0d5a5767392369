"""The package's settings from the environment (GEMMD_PANELS, ...)."""
from __future__ import annotations

import os


def env_int(name: str, default: int) -> int:
    """$name as an integer, default when unset or empty; ValueError for
    anything else."""
    v = os.environ.get(name)
    if v is None or v == "":
        return default
    try:
        return int(v)
    except ValueError:
        raise ValueError("$%s=%r: expected an integer" % (name, v)) from None
