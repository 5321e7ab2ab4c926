"""The version of the installed Switchboard, from its package metadata."""

from __future__ import annotations

from functools import cache
from importlib import metadata

DISTRIBUTION = "a2a-switchboard"


@cache
def switchboard_version() -> str:
    """``X.Y.Z`` of the installed ``a2a-switchboard`` package; ``unknown`` when the code runs
    without being installed (e.g. from a source tree on ``PYTHONPATH`` only)."""
    try:
        return metadata.version(DISTRIBUTION)
    except metadata.PackageNotFoundError:
        return "unknown"
