"""How much of a long sweep a run covers: the default run a fixed sample, a thorough run all.

``SWITCHBOARD_TEST_THOROUGH=1`` (``.ci/run`` sets it for its second run) runs every round of
the read-your-writes test and every message of the evaluation-set sweeps, and the tests
marked ``bench`` (the benchmark harness's smoke tests), which the default run deselects.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import TypeVar

__all__ = ["THOROUGH", "rounds", "sample"]

T = TypeVar("T")

THOROUGH = os.environ.get("SWITCHBOARD_TEST_THOROUGH", "") not in ("", "0")
"""Whether this is a thorough run."""


def rounds(full: int, quick: int) -> int:
    """``full`` in a thorough run, else ``quick``."""
    return full if THOROUGH else quick


def sample(items: Sequence[T], step: int) -> list[T]:
    """Every item in a thorough run, else every ``step``-th (the same ones every run)."""
    return list(items) if THOROUGH else list(items[::step])
