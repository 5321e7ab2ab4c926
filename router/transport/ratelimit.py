"""Per-caller limits: requests per second (a token bucket) and concurrent streams.

:class:`CallerLimits` keeps its counts **in this process's memory**: with several replicas
(or workers) each enforces the limits on its own, so a caller spread over ``n`` processes
may send up to ``n`` times the rate (``SWITCHBOARD_RATE_LIMIT_*`` in docs/configuration.md).
It is pure (no aiohttp, no I/O, no awaiting): the transport asks it before it serves a
request or opens a stream, and answers HTTP 429 with ``Retry-After``
(:func:`retry_after`) when refused. The key is the caller's identity (for instance
``Principal.scope``'s owner string, or a label of it).

Memory is bounded: at most ``max_callers`` buckets, the least recently used dropped first
(such a caller starts again with a full bucket); stream counts live only while a stream is
open.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable

from registry.access.throttle import TokenBuckets, retry_after
from registry.settings import Settings

__all__ = ["MAX_CALLERS", "CallerLimits", "retry_after"]

MAX_CALLERS = 100_000  # buckets kept at most (about 100 bytes each)


class CallerLimits:
    """The request rate and open streams of each caller (by key), in this process.

    ``rps``: requests per second, refilling a bucket of ``burst`` tokens (default
    ``ceil(rps)``); None: no rate limit. ``streams``: streams a caller may hold open at once;
    None: no limit. ``clock``: monotonic seconds (tests move it by hand).
    """

    def __init__(
        self,
        rps: float | None,
        burst: int | None,
        streams: int | None,
        *,
        clock: Callable[[], float] = time.monotonic,
        max_callers: int = MAX_CALLERS,
    ) -> None:
        if rps is not None and not (rps > 0 and math.isfinite(rps)):
            raise ValueError(f"rps must be a positive number, not {rps!r}")
        if burst is not None and burst < 1:
            raise ValueError(f"burst must be at least 1, not {burst!r}")
        if streams is not None and streams < 1:
            raise ValueError(f"streams must be at least 1, not {streams!r}")
        if max_callers < 1:
            raise ValueError(f"max_callers must be at least 1, not {max_callers!r}")
        self.rps = rps
        self.burst = burst if burst is not None else max(1, math.ceil(rps or 1))
        self.streams = streams
        self._buckets = (
            TokenBuckets(rps, self.burst, clock=clock, max_keys=max_callers)
            if rps is not None
            else None
        )
        self._open: dict[str, int] = {}

    @classmethod
    def from_settings(
        cls, settings: Settings, *, clock: Callable[[], float] = time.monotonic
    ) -> CallerLimits:
        """The limits of ``SWITCHBOARD_RATE_LIMIT_RPS``, ``_BURST`` and ``_STREAMS``."""
        return cls(
            settings.rate_limit_rps,
            settings.rate_limit_burst,
            settings.rate_limit_streams,
            clock=clock,
        )

    @property
    def limits_requests(self) -> bool:
        """Whether requests are limited at all (a rate is set)."""
        return self.rps is not None

    @property
    def limits_streams(self) -> bool:
        """Whether open streams are limited at all."""
        return self.streams is not None

    def take(self, key: str) -> float | None:
        """Take one request of ``key``: None if allowed, else the seconds until one would be
        (nothing is taken then)."""
        return None if self._buckets is None else self._buckets.take(key)

    def open_stream(self, key: str) -> bool:
        """Count a stream of ``key`` as open if it may hold one more: True, and then
        :meth:`close_stream` must be called once when it ends; else False."""
        if self.streams is None:
            return True
        held = self._open.get(key, 0)
        if held >= self.streams:
            return False
        self._open[key] = held + 1
        return True

    def close_stream(self, key: str) -> None:
        """A stream :meth:`open_stream` allowed has ended (a key with none open: ignored)."""
        held = self._open.get(key, 0)
        if held <= 1:
            self._open.pop(key, None)
        else:
            self._open[key] = held - 1

    def open_streams(self, key: str) -> int:
        """How many streams of ``key`` are open (counted only while streams are limited)."""
        return self._open.get(key, 0)

    def callers(self) -> int:
        """How many callers' buckets are kept (at most ``max_callers``)."""
        return 0 if self._buckets is None else len(self._buckets)
