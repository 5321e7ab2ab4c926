"""The CPUs this process may use, and how the work that needs them divides them.

``switchboard serve`` runs a worker process per CPU by default (:mod:`router.cli.workers`),
and each process embeds messages in as many threads as its share of the CPUs
(:func:`embedding_threads`).
"""

from __future__ import annotations

import math
import os
from pathlib import Path

__all__ = ["available_cpus", "embedding_threads"]


def available_cpus(cgroup: Path = Path("/sys/fs/cgroup")) -> int:
    """The CPUs this process may use: its affinity mask, capped by the cgroup's CPU quota
    (v2 ``cpu.max`` or v1 ``cpu.cfs_quota_us``; a fractional quota is rounded up)."""
    try:
        count = len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        count = os.cpu_count() or 1
    quota = _cpu_quota(cgroup)
    if quota is not None:
        count = min(count, max(1, math.ceil(quota)))
    return max(1, count)


def _cpu_quota(cgroup: Path) -> float | None:
    """The cgroup's CPU quota in CPUs, None when unlimited or unknown."""
    try:
        text = (cgroup / "cpu.max").read_text().split()
        if len(text) == 2 and text[0] != "max":
            return int(text[0]) / int(text[1])
        return None
    except (OSError, ValueError):
        pass
    try:
        quota = int((cgroup / "cpu" / "cpu.cfs_quota_us").read_text())
        period = int((cgroup / "cpu" / "cpu.cfs_period_us").read_text())
    except (OSError, ValueError):
        return None
    return quota / period if quota > 0 and period > 0 else None


def embedding_threads(workers: int | None, cgroup: Path = Path("/sys/fs/cgroup")) -> int:
    """Threads one of ``workers`` processes (None: one) embeds messages in: its share of the
    CPUs available, at least one."""
    return max(1, available_cpus(cgroup) // max(1, workers or 1))
