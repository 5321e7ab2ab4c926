"""Recent routing decisions in memory, for ``GET /api/v1/status`` and ``switchboard status``.

:data:`RECENT` is a bounded ring (the last :data:`CAPACITY` decisions of this process, each a
time, tier and agent id: nothing of the message) filled by
:func:`router.observe.metrics.observed_choice`. :meth:`RecentDecisions.counts` sums those
within a window. The process-wide counters (``switchboard_routing_decisions_total``) count
since start; this answers "what happened in the last minutes" without Prometheus.
"""

from __future__ import annotations

import time
from collections import Counter, deque
from dataclasses import dataclass

__all__ = ["CAPACITY", "RECENT", "RecentCounts", "RecentDecisions"]

CAPACITY = 10_000


@dataclass(frozen=True)
class RecentCounts:
    """The decisions of a window: by (tier, agent), and whether the ring held fewer than the
    window's (``complete`` False: the oldest kept decision is younger than the window)."""

    by_tier_and_agent: dict[tuple[str, str], int]
    complete: bool


class RecentDecisions:
    """The last ``capacity`` decisions (monotonic time, tier, agent id)."""

    def __init__(self, capacity: int = CAPACITY) -> None:
        self._ring: deque[tuple[float, str, str]] = deque(maxlen=capacity)

    def record(self, tier: str, agent: str) -> None:
        """Remember one decision (``agent`` empty when refused)."""
        self._ring.append((time.monotonic(), tier, agent))

    def counts(self, window: float) -> RecentCounts:
        """The decisions of the last ``window`` seconds."""
        since = time.monotonic() - window
        counts: Counter[tuple[str, str]] = Counter()
        for at, tier, agent in reversed(self._ring):
            if at < since:
                return RecentCounts(dict(counts), complete=True)
            counts[tier, agent] += 1
        full = len(self._ring) == self._ring.maxlen
        return RecentCounts(dict(counts), complete=not full)


RECENT = RecentDecisions()
"""This process's recent decisions."""
