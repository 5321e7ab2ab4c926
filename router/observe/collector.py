"""The catalog's metrics, read at scrape time from the current snapshot (no bookkeeping).

:class:`CatalogCollector` reports the agents by health and verification status, the catalog's
size (agents, skills), how many agents routing may choose, and whether this process holds the
refresh lease.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator

from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from registry.refresh import Refresher
from registry.service import Registry

__all__ = ["CatalogCollector"]


class CatalogCollector(Collector):
    """The catalog of ``registry`` (and the lease of ``refresher``) as gauges."""

    def __init__(self, registry: Registry, refresher: Refresher | None = None) -> None:
        self.registry = registry
        self.refresher = refresher

    def collect(self) -> Iterator[Metric]:
        """The gauges, from the snapshot as it is now."""
        registry = self.registry
        agents = list(registry.catalog.snapshot.agents.values())
        by_status: Counter[tuple[str, str]] = Counter(
            (registry.health_of(a.id).status, a.verification.status) for a in agents
        )
        status = GaugeMetricFamily(
            "switchboard_agents",
            "Registered agents, by health and card verification status",
            labels=["health", "verification"],
        )
        for (health, verification), count in sorted(by_status.items()):
            status.add_metric([health, verification], count)
        yield status
        yield GaugeMetricFamily(
            "switchboard_catalog_agents", "Agents in the catalog", value=len(agents)
        )
        yield GaugeMetricFamily(
            "switchboard_catalog_skills",
            "Skills in the catalog (of every agent)",
            value=sum(len(a.card.skills) for a in agents),
        )
        yield GaugeMetricFamily(
            "switchboard_routable_agents",
            "Agents routing may choose (signature policy and health allow them)",
            value=sum(1 for a in agents if registry.routable(a)),
        )
        if self.refresher is not None:
            yield GaugeMetricFamily(
                "switchboard_refresh_lease_holder",
                "1 when this process holds the refresh lease (runs the scheduled checks)",
                value=1 if self.refresher.holds_lease() else 0,
            )
