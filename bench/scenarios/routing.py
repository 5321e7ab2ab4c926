"""Scenario 3, routing at scale: a synthetic catalog of 10,000 agents / 100,000 skills.

The catalog is written to the database in bulk (the store's own row mapping, in batches),
loaded the way ``switchboard serve`` loads it (``Registry.load``), then measured in
process: ``Matcher.choose`` (the router's decision for a ``SendMessage``) and catalog
searches by skill id, tag, free text and media type. Every query differs from the previous
ones and runs on the snapshot directly, so the catalog's per-version result cache (which
makes repeated queries free) never answers. Runs on SQLite, and on PostgreSQL when reachable
(a scratch database, dropped afterwards).
"""

from __future__ import annotations

import contextlib
import random
import time
import uuid
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any

from sqlalchemy import insert

from bench.load import percentile
from bench.options import Options
from bench.report import Check, Section, Table
from registry.cards import parse_card
from registry.catalog import Query
from registry.crawler import Crawler
from registry.records import AgentRecord, utcnow
from registry.rows import agent_values, child_values, revision_values
from registry.service import Registry
from registry.settings import Settings
from registry.store import Store, bump
from registry.tables import AgentRow, CardRevisionRow
from router.app import freeze_long_lived
from router.choose.matcher import Matcher
from router.protocol.versions import Op
from router.tables import SCHEMA

VERBS = (
    "convert translate caption summarize forecast schedule search book classify detect "
    "transcribe generate extract answer review plan compare track estimate draft"
).split()
NOUNS = (
    "currency text image document weather invoice meeting flights hotel email fraud audio "
    "chart tables questions contract recipe route budget code ticket order shipment song "
    "photo report resume lease claim"
).split()
MODES = ("text/plain", "application/json", "image/png", "image/jpeg", "application/pdf")
SKILLS_PER_AGENT = 10


def synthetic_card(n: int, rng: random.Random) -> dict[str, Any]:
    """A 1.0 card with ten skills: two words from small vocabularies plus a rarer topic word."""
    skills = []
    for k in range(SKILLS_PER_AGENT):
        verb, noun = rng.choice(VERBS), rng.choice(NOUNS)
        topic = f"topic{rng.randrange(5000)}"
        skills.append(
            {
                "id": f"{verb}-{noun}-{n % 1000}-{k}",
                "name": f"{verb} {noun}".title(),
                "description": f"Can {verb} any {noun} about {topic}.",
                "tags": [verb, noun, topic],
                "examples": [f"please {verb} this {noun}"],
                "inputModes": [MODES[(n + k) % len(MODES)], "text/plain"],
                "outputModes": [MODES[(n + 2 * k) % len(MODES)]],
            }
        )
    return {
        "name": f"Agent {n}",
        "description": f"Synthetic agent number {n}.",
        "version": "1.0.0",
        "supportedInterfaces": [
            {
                "url": f"https://agent-{n}.example/a2a",
                "protocolBinding": "JSONRPC",
                "protocolVersion": "1.0",
            }
        ],
        "capabilities": {"streaming": bool(n % 3)},
        "defaultInputModes": ["text/plain"],
        "defaultOutputModes": ["text/plain"],
        "skills": skills,
    }


def records(count: int) -> Iterator[AgentRecord]:
    """``count`` synthetic agents, deterministic."""
    rng, now = random.Random(7), utcnow()
    for n in range(count):
        card = parse_card(synthetic_card(n, rng))
        yield AgentRecord(
            id=f"agent-{n:05d}",
            card=card,
            source="push",
            card_sha256=f"{n:064x}",
            created_at=now,
            updated_at=now,
            fetched_at=now,
        )


_AGENTS: Any = AgentRow.__table__  # type: ignore[attr-defined]
_REVISIONS: Any = CardRevisionRow.__table__  # type: ignore[attr-defined]


async def bulk_insert(store: Store, agents: list[AgentRecord], batch: int = 1000) -> None:
    """Write ``agents`` with their index rows (the store's row mapping, executemany inserts),
    ``batch`` agents per transaction."""
    await store.create_schema()
    for start in range(0, len(agents), batch):
        chunk = agents[start : start + batch]
        tables: dict[Any, list[dict[str, Any]]] = {}
        for record in chunk:
            tables.setdefault(_AGENTS, []).append(agent_values(record, b"{}"))
            tables.setdefault(_REVISIONS, []).append(revision_values(record, b"{}", None))
            for table, values in child_values(record).items():
                tables.setdefault(table, []).extend(values)
        async with store.session() as session, session.begin():
            for table, values in tables.items():
                if values:
                    await session.execute(insert(table), values)
            await bump(session)


@contextlib.asynccontextmanager
async def scratch_postgres(server: str) -> AsyncIterator[str]:
    """A new, randomly named database on ``server`` (dropped afterwards); yields its URL."""
    import psycopg

    name = f"switchboard_bench_{uuid.uuid4().hex[:10]}"
    async with await psycopg.AsyncConnection.connect(server, autocommit=True) as conn:
        await conn.execute(f'CREATE DATABASE "{name}"')
    try:
        yield server.rsplit("/", 1)[0] + "/" + name
    finally:
        async with await psycopg.AsyncConnection.connect(server, autocommit=True) as conn:
            await conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def timed(
    calls: int, make: Callable[[int], Callable[[], object]], budget: float = 2.5, least: int = 8
) -> list[float]:
    """Milliseconds of up to ``calls`` calls, the i-th being ``make(i)()`` (made outside the
    timer); stops early once ``budget`` seconds have passed and ``least`` calls were made."""
    out: list[float] = []
    deadline = time.perf_counter() + budget
    for i in range(calls):
        if len(out) >= least and time.perf_counter() > deadline:
            break
        call = make(i)
        start = time.perf_counter()
        call()
        out.append((time.perf_counter() - start) * 1000)
    return out


def _text(i: int) -> str:
    rng = random.Random(i)
    return f"please {rng.choice(VERBS)} my {rng.choice(NOUNS)} about topic{rng.randrange(5000)}"


async def measure(url: str, agents: list[AgentRecord], calls: int) -> dict[str, Any]:
    """Load ``agents`` into the database at ``url``; latencies of each kind of decision/query."""
    store = Store(url, SCHEMA)
    registry = Registry(store, Crawler(Settings(database_url=url)))
    try:
        start = time.perf_counter()
        await bulk_insert(store, agents)
        written = time.perf_counter() - start
        start = time.perf_counter()
        await registry.load()
        loaded = time.perf_counter() - start
    finally:
        await store.close()
    matcher = Matcher(registry, threshold=0.5)

    def decide(i: int) -> Callable[[], object]:
        params = {"message": {"role": "ROLE_USER", "messageId": "m", "parts": [{"text": _text(i)}]}}
        return lambda: matcher.choose("1.0", Op.SEND, params)

    def explain(i: int) -> Callable[[], object]:
        params = {"message": {"role": "ROLE_USER", "messageId": "m", "parts": [{"text": _text(i)}]}}
        return lambda: matcher.decide("1.0", Op.SEND, params, complete=True)

    snapshot = registry.catalog.snapshot
    skill_ids = [s.id for a in agents[:: max(1, len(agents) // 200)] for s in a.card.skills]
    queries: dict[str, Callable[[int], Callable[[], object]]] = {
        "match decision (Matcher.choose)": decide,
        "match explain's listing (Matcher.decide, every candidate)": explain,
        "agents by skill id": lambda i: (
            lambda: snapshot.agents_for(Query(skill=skill_ids[i % len(skill_ids)]))
        ),
        "agents by tag": lambda i: lambda: snapshot.agents_for(Query(tags=(f"topic{i % 5000}",))),
        "agents by text (full list)": lambda i: lambda: snapshot.agents_for(Query(q=_text(i))),
        # what GET /api/v1/agents?q= computes: its first page of 50, walked best first
        "agents by text (API page)": lambda i: (
            lambda: snapshot.ranked_agents(Query(q=_text(i)), 50)
        ),
        "skills by text (full list)": lambda i: lambda: snapshot.skills(Query(q=_text(i))),
        # what GET /api/v1/skills?q= computes: its first page of 50, walked best first
        "skills by text (API page)": lambda i: (
            lambda: snapshot.ranked_skills(Query(q=_text(i)), 50)
        ),
        "skills by input type image/*": lambda i: (
            lambda: snapshot.skills(Query(input_mode="image/*", tags=(VERBS[i % len(VERBS)],)))
        ),
        "skills by output type application/pdf": lambda i: (
            lambda: snapshot.skills(
                Query(output_mode="application/pdf", tags=(NOUNS[i % len(NOUNS)],))
            )
        ),
    }
    start = time.perf_counter()
    decide(0)()  # the first decision builds the matcher's index for this snapshot
    index = time.perf_counter() - start
    await freeze_long_lived()  # as switchboard serve does once started
    results: dict[str, Any] = {
        "write_s": written,
        "load_s": loaded,
        "index_s": index,
        "queries": {},
    }
    for label, make in queries.items():
        samples = timed(calls, make)
        results["queries"][label] = {
            "p50_ms": percentile(samples, 0.5),
            "p99_ms": percentile(samples, 0.99),
            "calls": len(samples),
        }
    return results


async def run(opts: Options) -> Section:
    """Measure on SQLite, then on PostgreSQL when reachable."""
    section = Section("3. routing at scale (in process)")
    count = 300 if opts.quick else 10_000
    calls = 50 if opts.quick else 500
    agents = list(records(count))
    backends: dict[str, Any] = {}
    backends["sqlite"] = await measure(f"sqlite:///{opts.tmp / 'routing.db'}", agents, calls)
    if opts.postgres:
        try:
            async with scratch_postgres(opts.postgres) as url:
                backends["postgresql"] = await measure(url, agents, calls)
        except Exception as exc:
            section.notes.append(f"PostgreSQL at {opts.postgres} not usable ({exc}): skipped")
    else:
        section.notes.append("PostgreSQL: skipped (--postgres none)")
    section.data = {"agents": count, "skills": count * SKILLS_PER_AGENT, "backends": backends}
    table = Table(
        f"{count:,} agents / {count * SKILLS_PER_AGENT:,} skills; up to {calls} distinct "
        "queries each (fewer when 2.5 s ran out)",
        ["query", *[f"{b} {p}" for b in backends for p in ("p50 ms", "p99 ms", "n")]],
    )
    for label in backends["sqlite"]["queries"]:
        cells: list[Any] = [label]
        for result in backends.values():
            q = result["queries"][label]
            cells += [q["p50_ms"], q["p99_ms"], q["calls"]]
        table.rows.append(cells)
    section.tables.append(table)
    loads = Table(
        "building the index",
        ["backend", "bulk write s", "Registry.load s", "matcher index s"],
        [[b, r["write_s"], r["load_s"], r["index_s"]] for b, r in backends.items()],
    )
    section.tables.append(loads)
    await _semantic(section, opts, agents)
    for backend, result in backends.items():
        q = result["queries"]
        section.checks.append(
            Check(
                f"match decision p99 ({backend}, {count:,} agents)",
                q["match decision (Matcher.choose)"]["p99_ms"],
                1.0,
                "ms",
            )
        )
        # what the API computes per request: a text search alone serves one page, walked best
        # first; the full sorted lists are shown for reference (text with other filters)
        worst = max(
            v["p99_ms"]
            for k, v in q.items()
            if not k.startswith("match") and "(full list)" not in k
        )
        section.checks.append(Check(f"worst catalog search p99 ({backend})", worst, 20.0, "ms"))
    return section


async def _semantic(section: Section, opts: Options, agents: list[AgentRecord]) -> None:
    """The decision with the semantic tier on (see :mod:`bench.semantic_scale`), on SQLite,
    at 1,000 and 10,000 agents (30 and 300 with --quick)."""
    from bench.semantic_scale import measure_semantic
    from registry.embedding.fetch import fetch_model
    from router.choose.models import data_dir, local_embedder

    directory = fetch_model(data_dir(), log=section.notes.append)
    embedder = local_embedder(directory)
    sizes = (30, 300) if opts.quick else (1_000, 10_000)
    table = Table(
        "routing by meaning: Chooser.choose, the message embedded each time (real texts of "
        "bench/routing_eval; synthetic catalog vectors)",
        ["agents", "skills", "vectors", "index s", "p50 ms", "p99 ms", "n"],
    )
    for size in sizes:
        url = f"sqlite:///{opts.tmp / f'semantic-{size}.db'}"
        store = Store(url, SCHEMA)
        registry = Registry(store, Crawler(Settings(database_url=url)))
        try:
            await bulk_insert(store, agents[:size])
            await registry.load()
            r = await measure_semantic(
                registry, agents[:size], embedder, 200 if opts.quick else 1000
            )
        finally:
            await store.close()
        table.rows.append(
            [
                r["agents"],
                r["skills"],
                r["vectors"],
                r["index_s"],
                r["p50_ms"],
                r["p99_ms"],
                r["calls"],
            ]
        )
        section.data.setdefault("semantic", []).append(r)
        if size == sizes[0]:
            section.checks.append(
                Check(
                    f"semantic decision p99 ({size:,} agents, embedding included)",
                    r["p99_ms"],
                    10.0,
                    "ms",
                )
            )
    section.tables.append(table)
