"""``GET /api/v1/status``: a one-screen summary of this Switchboard for operators (the data of
``switchboard status``).

What it says: the replica that answers (its name, whether it holds the refresh lease) and the
lease holder the database names; the agents by health and verification; the latest refresh
failures (from the health state in memory); the routing decisions of the last minutes by tier
and agent (this replica's, from :data:`router.observe.recent.RECENT`). Replicas share only the
database and keep no list of each other: the lease holder is the one other replica named.
A read of the admin API (the read token when set); with client authentication on, it needs
the reader or admin role, as ``/metrics`` does (it names every agent).
"""

from __future__ import annotations

from collections import Counter
from datetime import datetime

from aiohttp import web
from pydantic import BaseModel, ConfigDict, Field

from registry.apiauth import usable_for
from registry.apimodels import ApiModel
from registry.appkeys import REFRESHER, REGISTRY
from registry.errors import RegistryError
from registry.health import Health
from registry.openapi import PREFIX, documented
from registry.queryparams import read_query
from registry.records import as_utc, iso
from registry.refresh import LEASE
from registry.version import switchboard_version
from router.coherence.appkey import COHERENCE
from router.coherence.sync import Coherence
from router.observe.recent import RECENT

__all__ = ["Indexing", "Status", "StatusQuery", "add_status_route", "get_status"]

FAILURES_SHOWN = 10


class StatusQuery(BaseModel):
    """How far back the decisions go."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    minutes: int = Field(15, ge=1, le=60, description="The decisions of the last N minutes.")


class Replica(ApiModel):
    """The replica that answered, and who holds the refresh lease."""

    name: str | None = Field(description="This replica's name (host, pid, suffix).")
    holds_lease: bool = Field(description="Whether this replica runs the scheduled refreshes.")
    lease_holder: str | None = Field(
        description="The replica holding the refresh lease (the database's view); null: none."
    )


class AgentCounts(ApiModel):
    """The catalog by health and card verification."""

    total: int
    routable: int = Field(description="Agents routing may choose (signature policy, health).")
    by_health: dict[str, int]
    by_verification: dict[str, int]


class RefreshFailure(ApiModel):
    """An agent whose last check failed."""

    agent_id: str
    health: str
    consecutive_failures: int
    last_failure: str | None
    last_error: str | None


class Decision(ApiModel):
    """How many messages a tier sent to an agent (``agent`` empty: refused)."""

    tier: str
    agent: str
    count: int


class Decisions(ApiModel):
    """This replica's routing decisions of the last minutes."""

    minutes: int
    total: int
    complete: bool = Field(
        description="False when more decisions were made than this replica keeps (10,000)."
    )
    by_tier: dict[str, int]
    by_agent: dict[str, int]
    rows: list[Decision] = Field(description="By tier and agent, most first.")


class Indexing(ApiModel):
    """The catalog's background indexing (the embedding of new skill texts)."""

    catalog_version: int = Field(description="This replica's catalog version.")
    indexed_version: int = Field(
        description="The catalog version whose texts are all embedded (-1: none since start)."
    )
    backlog: int = Field(
        description="Catalog versions still to embed (0: idle, or no embedding model)."
    )


class Writes(ApiModel):
    """Where this worker stands in the writes (read your writes: operations.md)."""

    generation: int | None = Field(
        description="Writes acknowledged by this serve's workers so far (null: one process)."
    )
    applied: int | None = Field(
        description="Of those, the ones this worker has applied (null: one process)."
    )
    workers: dict[str, int] = Field(
        description="Each live worker of this serve (pid) and the writes it has applied."
    )
    syncs: int = Field(description="Times this process read what others wrote.")
    sync_failure: str | None = Field(description="Why the last of those failed, if it did.")


class Status(ApiModel):
    """The one-screen summary."""

    replica: Replica
    agents: AgentCounts
    indexing: Indexing
    writes: Writes
    refresh_failures: list[RefreshFailure] = Field(
        description=f"The latest {FAILURES_SHOWN} agents whose last check failed, newest first."
    )
    decisions: Decisions
    version: str


def add_status_route(app: web.Application) -> None:
    """Register ``GET /api/v1/status`` on ``app``."""
    app.router.add_get(f"{PREFIX}/status", get_status)


@documented("A summary for operators: lease, agents, failures, decisions", "status", answer=Status,
            query=StatusQuery, errors=(400, 401))  # fmt: skip
async def get_status(request: web.Request) -> web.Response:
    """The summary (module docstring)."""
    if usable_for(request) is not None:
        raise RegistryError(
            "the status needs the reader or admin role", code="forbidden", status=403
        )
    query = read_query(StatusQuery, request.query, max_page_size=1)
    registry, refresher = request.app[REGISTRY], request.app.get(REFRESHER)
    holder = None
    if refresher is not None:
        holder = await registry.store.lease_holder(LEASE, refresher.clock_now)
    agents = list(registry.catalog.snapshot.agents.values())
    health = {a.id: registry.health_of(a.id) for a in agents}
    failing = [(i, h) for i, h in health.items() if h.consecutive_failures or h.card_error]
    failing.sort(key=lambda item: _when(item[1].last_failure), reverse=True)
    status = Status(
        replica=Replica(
            name=refresher.holder if refresher else None,
            holds_lease=bool(refresher and refresher.holds_lease()),
            lease_holder=holder,
        ),
        agents=AgentCounts(
            total=len(agents),
            routable=sum(1 for a in agents if registry.routable(a)),
            by_health=dict(sorted(Counter(h.status for h in health.values()).items())),
            by_verification=dict(sorted(Counter(a.verification.status for a in agents).items())),
        ),
        indexing=Indexing(
            catalog_version=registry.catalog.snapshot.version,
            indexed_version=registry.indexing.version,
            backlog=registry.indexing.backlog,
        ),
        writes=_writes(request.app[COHERENCE]),
        refresh_failures=[_failure(i, h) for i, h in failing[:FAILURES_SHOWN]],
        decisions=_decisions(query.minutes),
        version=switchboard_version(),
    )
    return web.json_response(status.model_dump())


def _writes(coherence: Coherence) -> Writes:
    board = coherence.board
    return Writes(
        generation=board.generation if board is not None else None,
        applied=coherence.applied if board is not None else None,
        workers={str(pid): n for pid, n in sorted(board.workers().items())} if board else {},
        syncs=coherence.syncs,
        sync_failure=coherence.failure,
    )


def _when(value: datetime | None) -> float:
    return as_utc(value).timestamp() if value is not None else 0.0


def _failure(agent_id: str, health: Health) -> RefreshFailure:
    return RefreshFailure(
        agent_id=agent_id,
        health=health.status,
        consecutive_failures=health.consecutive_failures,
        last_failure=iso(health.last_failure) if health.last_failure else None,
        last_error=health.last_error or health.card_error,
    )


def _decisions(minutes: int) -> Decisions:
    recent = RECENT.counts(minutes * 60.0)
    tiers: Counter[str] = Counter()
    agents: Counter[str] = Counter()
    for (tier, agent), count in recent.by_tier_and_agent.items():
        tiers[tier] += count
        if agent:
            agents[agent] += count
    rows = sorted(recent.by_tier_and_agent.items(), key=lambda item: (-item[1], item[0]))
    return Decisions(
        minutes=minutes,
        total=sum(tiers.values()),
        complete=recent.complete,
        by_tier=dict(tiers.most_common()),
        by_agent=dict(agents.most_common()),
        rows=[Decision(tier=t, agent=a, count=c) for (t, a), c in rows],
    )
