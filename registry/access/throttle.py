"""The failed-authentication throttle (``SWITCHBOARD_RATE_LIMIT_AUTH_FAILURES``): how many
requests whose credentials fail (missing, malformed, unknown, revoked, expired, bad
signature) each client address may send per second, in this process.

Each address has a token bucket: ``rate`` tokens a second, at most ``burst``. A failing
request takes a token and is answered 401 as before; a failing request that finds the bucket
empty is answered 429 with ``Retry-After`` instead. Requests whose credentials are valid are
never counted nor refused, however much their address failed: the throttle is asked only
after the credentials were checked and found wanting. Memory is bounded: at most
``max_clients`` buckets, the least recently used dropped first (that address starts again
with a full bucket). No aiohttp, no I/O.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass

from cachetools import LRUCache

__all__ = [
    "BURST_SECONDS",
    "DEFAULT_RATE",
    "MAX_CLIENTS",
    "FailureThrottle",
    "TokenBuckets",
    "retry_after",
]

DEFAULT_RATE = 5.0
"""Failures a second per address by default (docs/security.md says why)."""
BURST_SECONDS = 4
"""The bucket holds this many seconds of failures: ``burst = ceil(rate * BURST_SECONDS)``."""
MAX_CLIENTS = 100_000
_EPSILON = 1e-9


@dataclass
class _Bucket:
    tokens: float
    updated: float


class TokenBuckets:
    """A token bucket per key: ``rate`` tokens a second (positive), at most ``burst``
    (at least 1); at most ``max_keys`` buckets, the least recently used dropped first (that
    key starts again with a full bucket). ``clock``: monotonic seconds."""

    def __init__(
        self, rate: float, burst: int, *, clock: Callable[[], float], max_keys: int
    ) -> None:
        if not (rate > 0 and math.isfinite(rate)):
            raise ValueError(f"rate must be a positive number, not {rate!r}")
        if burst < 1:
            raise ValueError(f"burst must be at least 1, not {burst!r}")
        self.rate = rate
        self.burst = burst
        self._clock = clock
        self._buckets: LRUCache[str, _Bucket] = LRUCache(max_keys)

    def take(self, key: str) -> float | None:
        """Take one token of ``key``: None if there was one, else the seconds until there
        would be (nothing is taken then)."""
        now = self._clock()
        bucket = self._buckets.get(key)
        if bucket is None:
            bucket = _Bucket(float(self.burst), now)
        else:
            elapsed = max(0.0, now - bucket.updated)
            bucket.tokens = min(float(self.burst), bucket.tokens + elapsed * self.rate)
            bucket.updated = now
        self._buckets[key] = bucket  # also marks it the most recently used
        if bucket.tokens + _EPSILON >= 1.0:
            bucket.tokens = max(0.0, bucket.tokens - 1.0)
            return None
        return (1.0 - bucket.tokens) / self.rate

    def __len__(self) -> int:
        """How many keys' buckets are kept."""
        return len(self._buckets)


class FailureThrottle:
    """Failed authentications per client address (see the module docstring). ``rate``:
    failures per second (positive); ``burst``: the bucket's size (default ``ceil(rate *
    BURST_SECONDS)``); ``clock``: monotonic seconds."""

    def __init__(
        self,
        rate: float,
        burst: int | None = None,
        *,
        clock: Callable[[], float] = time.monotonic,
        max_clients: int = MAX_CLIENTS,
    ) -> None:
        if not (rate > 0 and math.isfinite(rate)):
            raise ValueError(f"rate must be a positive number, not {rate!r}")
        size = burst if burst is not None else max(1, math.ceil(rate * BURST_SECONDS))
        self._buckets = TokenBuckets(rate, size, clock=clock, max_keys=max_clients)
        self.rate = rate
        self.burst = size

    def failed(self, address: str | None) -> float | None:
        """Count a failed authentication from ``address`` (None: an address unknown, one
        bucket for all such): None when it may be answered as a failure (401), else the
        seconds until the next would be (answer 429; nothing is taken)."""
        return self._buckets.take(address or "")

    def clients(self) -> int:
        """How many addresses' buckets are kept."""
        return len(self._buckets)


def retry_after(seconds: float) -> int:
    """``seconds`` as a ``Retry-After`` value: whole seconds, rounded up, at least 1."""
    return max(1, math.ceil(seconds))
