"""The process's Prometheus metrics registry, and the registry wing's own metrics.

:data:`METRICS` holds every metric Switchboard defines (the router's are in
:mod:`router.observe.metrics`) and the standard process, platform and garbage collector
collectors. Each worker process is its own exporter (there is one server process per replica).
What the catalog holds (agents by health and verification, skills, the lease) is read at scrape
time by :class:`router.observe.collector.CatalogCollector`, not counted here.
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable
from typing import Any, ParamSpec, Protocol

from prometheus_client import CollectorRegistry, Counter
from prometheus_client.gc_collector import GCCollector
from prometheus_client.platform_collector import PlatformCollector
from prometheus_client.process_collector import ProcessCollector

__all__ = ["METRICS", "REFRESHES", "counted_check"]

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
