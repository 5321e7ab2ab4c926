"""Agent health and the refresh schedule, as pure rules on plain values.

An agent's health follows checks of its endpoint (scheduled, see :mod:`registry.refresh`)
and what the router sees when it calls the agent (passive health):

- ``healthy``: the last check or call succeeded;
- ``degraded``: 1 to ``unreachable_after - 1`` consecutive failures; still routed;
- ``unreachable``: ``unreachable_after`` or more consecutive failures; out of matching until
  the first success;
- ``unknown``: a pushed agent nothing has talked to yet.

Two times per agent: the next card fetch, one card interval after the last (the agent's own
interval if an operator set one, else the card response's ``Cache-Control: max-age``
clamped to the configured bounds, else ``SWITCHBOARD_REFRESH_INTERVAL``), and the next check,
one health interval after a success (or sooner, when the card is due) and an exponential
backoff from ``retry_base`` up to ``retry_max`` after a failure. Each wait has a random jitter
so that agents registered together do not all refresh in the same second.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Literal

from pydantic import BaseModel

from registry.records import as_utc, iso, utcnow

MIN_REFRESH_INTERVAL = 1
"""The shortest per-agent ``refresh_interval`` an operator may set, in seconds."""
MAX_REFRESH_INTERVAL = 30 * 86400
"""The longest per-agent ``refresh_interval`` (30 days), in seconds."""

HealthStatus = Literal["unknown", "healthy", "degraded", "unreachable"]
Clock = Callable[[], datetime]

MAX_ERROR_CHARS = 500  # longest last_error kept


class Health(BaseModel):
    """One agent's health as stored and shown."""

    status: HealthStatus = "unknown"
    consecutive_failures: int = 0
    last_error: str | None = None
    last_success: datetime | None = None
    last_failure: datetime | None = None
    last_checked: datetime | None = None
    next_check_at: datetime | None = None
    next_card_at: datetime | None = None
    interval: float | None = None
    card_error: str | None = None
    revision: int = 0  # the database's health_version of this state (newer ones win)

    @property
    def routable(self) -> bool:
        """Whether routing may choose the agent (every status but ``unreachable``)."""
        return self.status != "unreachable"

    def to_api(self) -> dict[str, Any]:
        """The admin API's view (``"health"`` of an agent)."""
        return {
            "status": self.status,
            "last_error": self.last_error,
            "last_success": _iso(self.last_success),
            "last_failure": _iso(self.last_failure),
            "last_checked": _iso(self.last_checked),
            "consecutive_failures": self.consecutive_failures,
            "next_check_at": _iso(self.next_check_at),
            "next_card_at": _iso(self.next_card_at),
            "refresh_interval": self.interval,
            "card_error": self.card_error,
        }


def _iso(value: datetime | None) -> str | None:
    return iso(value) if value is not None else None


@dataclass
class RefreshPolicy:
    """When to check an agent next and what a failure does to its health."""

    interval: float = 300.0
    health_interval: float = 60.0
    min_interval: float = 30.0
    max_interval: float = 86400.0
    jitter: float = 0.1
    retry_base: float = 5.0
    retry_max: float = 600.0
    unreachable_after: int = 3
    clock: Clock = utcnow
    rng: random.Random = field(default_factory=random.Random)

    def now(self) -> datetime:
        """The policy clock's current time (tests inject their own clock)."""
        return self.clock()

    def interval_for(self, override: float | None, max_age: int | None) -> float:
        """The refresh interval in seconds (before jitter)."""
        if override is not None:
            return override
        if max_age is not None:
            return min(max(float(max_age), self.min_interval), self.max_interval)
        return self.interval

    def _jittered(self, seconds: float) -> timedelta:
        spread = seconds * self.jitter
        return timedelta(seconds=max(0.0, seconds + self.rng.uniform(-spread, spread)))

    def after_success(self, now: datetime, override: float | None, max_age: int | None) -> datetime:
        """The next card fetch after a successful one at ``now``."""
        return now + self._jittered(self.interval_for(override, max_age))

    def next_probe(self, now: datetime, next_card: datetime | None) -> datetime:
        """The next check after a successful one at ``now``: within the health interval, and
        no later than the next card fetch."""
        probe = now + self._jittered(self.health_interval)
        return probe if next_card is None else min(probe, as_utc(next_card))

    def after_failure(self, now: datetime, failures: int) -> datetime:
        """The next try after the ``failures``-th consecutive failure at ``now``."""
        backoff = min(self.retry_base * 2 ** max(0, min(failures - 1, 32)), self.retry_max)
        return now + self._jittered(backoff)

    def status_after(self, failures: int) -> HealthStatus:
        """The status after ``failures`` consecutive failures (0: healthy)."""
        if failures <= 0:
            return "healthy"
        return "unreachable" if failures >= self.unreachable_after else "degraded"
