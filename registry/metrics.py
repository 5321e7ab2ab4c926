"""The process's Prometheus metrics registry, and the registry wing's own metrics.

:data:`METRICS` holds every metric Switchboard defines (the router's are in
:mod:`router.observe.metrics`) and the standard process, platform and garbage collector
collectors. Each worker process is its own exporter (there is one server process per replica).
What the catalog holds (agents by health and verification, skills, the lease) is read at scrape
time by :class:`router.observe.collector.CatalogCollector`, not counted here.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Awaitable, Callable, Iterator
from typing import Any, ParamSpec, Protocol, TypeVar

from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client.gc_collector import GCCollector
from prometheus_client.platform_collector import PlatformCollector
from prometheus_client.process_collector import ProcessCollector

__all__ = [
    "CARD_CHANGES",
    "CRAWLS",
    "DB_SECONDS",
    "METRICS",
    "REFRESHES",
    "VERIFICATION_FAILURES",
    "counted_check",
    "counted_crawl",
    "counted_verification",
]

METRICS = CollectorRegistry()
"""Every metric of this process (exposed by ``GET /metrics``)."""
ProcessCollector(registry=METRICS)
PlatformCollector(registry=METRICS)
GCCollector(registry=METRICS)

REFRESHES = Counter(
    "switchboard_refreshes",
    "Scheduled and operator-started checks of an agent (card and health), by outcome: "
    "unchanged, changed, failed, skipped (claimed by another replica), removed",
    ["outcome"],
    registry=METRICS,
)

CRAWLS = Counter(
    "switchboard_crawls",
    "Card fetches at registration (POST /api/v1/agents with a URL), by outcome: ok, or the "
    "error code (card_not_found, connect_failed, timeout, ...); refreshes are "
    "switchboard_refreshes_total",
    ["outcome"],
    registry=METRICS,
)
CARD_CHANGES = Counter(
    "switchboard_card_changes",
    "New card revisions of registered agents (the card history), by change: card (new card "
    "bytes), reverified (same bytes, the verification changed after a change of keys), "
    "same_meaning (new bytes that index the same agent)",
    ["change"],
    registry=METRICS,
)
VERIFICATION_FAILURES = Counter(
    "switchboard_verification_failures",
    "Card signature checks that failed, by reason: invalid (a bad or unreadable signature), "
    "untrusted-key (a good signature by a key not trusted)",
    ["reason"],
    registry=METRICS,
)
DB_SECONDS = Histogram(
    "switchboard_db_operation_seconds",
    "Time of each database statement, by kind: select, insert, update, delete, other",
    ["operation"],
    buckets=(0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 5.0),
    registry=METRICS,
)

P = ParamSpec("P")


class _Report(Protocol):
    checked: list[str]
    changed: list[str]
    failed: dict[str, str]
    skipped: list[str]


def counted_check(
    check: Callable[P, Awaitable[_Report]],
) -> Callable[P, Awaitable[_Report]]:
    """Count each check of :meth:`registry.refresh.Refresher._check` (``check(self,
    agent_id, report, ...)``) by what it added to its report."""

    @functools.wraps(check)
    async def counted(*args: P.args, **kwargs: P.kwargs) -> _Report:
        agent_id: Any = args[1]
        report = await check(*args, **kwargs)
        REFRESHES.labels(_outcome(report, agent_id)).inc()
        return report

    return counted


def _outcome(report: _Report, agent_id: str) -> str:
    if agent_id in report.failed:
        return "failed"
    if agent_id in report.changed:
        return "changed"
    if agent_id in report.skipped:
        return "skipped"
    return "unchanged" if agent_id in report.checked else "removed"


@contextlib.contextmanager
def counted_crawl() -> Iterator[None]:
    """Count the card fetch in the ``with`` block (at registration): ``ok``, or the code of
    the :class:`registry.errors.RegistryError` it raised (``error`` for anything else)."""
    try:
        yield
    except Exception as exc:
        code = getattr(exc, "code", None)
        CRAWLS.labels(code if isinstance(code, str) else "error").inc()
        raise
    CRAWLS.labels("ok").inc()


class _Verified(Protocol):
    status: str


T = TypeVar("T")
R = TypeVar("R", bound=_Verified)


def counted_verification(
    check: Callable[P, Awaitable[tuple[T, R]]],
) -> Callable[P, Awaitable[tuple[T, R]]]:
    """Count the failures of :meth:`registry.verification.Verifier.check` (it returns the
    card and its verification record) by status: ``invalid``, ``untrusted-key``."""

    @functools.wraps(check)
    async def counted(*args: P.args, **kwargs: P.kwargs) -> tuple[T, R]:
        card, verification = await check(*args, **kwargs)
        if verification.status in ("invalid", "untrusted-key"):
            VERIFICATION_FAILURES.labels(verification.status).inc()
        return card, verification

    return counted
