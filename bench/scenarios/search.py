"""Scenario 9, catalog search by meaning: what one ``GET /api/v1/agents?q=`` costs the server,
by meaning (``match=semantic``: the text embedded once, every skill scored as routing scores
it) and by words (``match=lexical``, BM25), every text new (nothing cached).

``switchboard serve`` (one process, the real model, SQLite) with the evaluation set's 42 cards
(``bench/routing_eval``), then with the same cards 24 times over under other ids (1,008
agents: their texts, hence their vectors, are shared, but every skill is a row that is
scored). The harness sends the searches one after another, each the text of an evaluation
message with a reference number (a text no earlier search had, so the router's
message-vector cache never answers), 20 results a page (the console's), and reads the
server's CPU time (user + system, /proc) before and after: CPU per search, the idle
process's CPU over the same time taken off. The wall time of each search (p50, p99) is the
harness's. Then the embedding alone, in the harness, for the same kind of texts (the numpy
model in one BLAS thread, as the server runs it).
"""

from __future__ import annotations

import asyncio
import copy
import itertools
import time
from collections.abc import Iterator
from typing import Any

import aiohttp
from threadpoolctl import threadpool_limits

from bench.catalog import embedded, register_catalog
from bench.compare import cpu_seconds
from bench.load import percentile
from bench.options import Options
from bench.procs import TOKEN, switchboard
from bench.report import Section, Table
from bench.routing_eval.dataset import cards, messages
from registry.embedding.fetch import fetch_model
from router.choose.models import data_dir, local_embedder

COPIES = 24
"""The larger catalog: each evaluation card this many times over (1,008 agents)."""
NOWHERE = "http://127.0.0.1:9"  # the agents' interfaces: nothing is routed here


def _texts(words: int | None = None) -> Iterator[str]:
    """Search texts: the evaluation messages' texts in turn (their first ``words`` words
    when given), the n-th with `` (ref n)``; n counts on across all the texts made."""
    pool = [" ".join(m.text.split()[:words]) for m in messages() if m.text]
    while True:
        n = next(_COUNT)
        yield f"{pool[n % len(pool)]} (ref {n})"


_COUNT = itertools.count()
SHORT = 3
"""Words of a short search text (the start of an evaluation message)."""


def _mean_words(words: int | None) -> float:
    texts = [m.text.split()[:words] for m in messages() if m.text]
    return sum(map(len, texts)) / len(texts)


async def _copies(http: aiohttp.ClientSession, base: str, copies: int) -> int:
    """Register each evaluation card ``copies - 1`` more times (ids ``<id>-c<k>``), 8 at once."""
    bodies = []
    for agent_id, found in cards().items():
        for k in range(1, copies):
            card = copy.deepcopy(found)
            for key in ("url", "preferredTransport", "protocolVersion", "additionalInterfaces"):
                card.pop(key, None)
            url = f"{NOWHERE}/agents/{agent_id}-c{k}"
            card["supportedInterfaces"] = [
                {"url": url, "protocolBinding": "JSONRPC", "protocolVersion": "1.0"}
            ]
            bodies.append({"card": card, "id": f"{agent_id}-c{k}"})
    gate = asyncio.Semaphore(8)

    async def one(body: dict[str, Any]) -> None:
        async with gate, http.post(f"{base}/api/v1/agents", json=body) as resp:
            if resp.status != 201:
                raise RuntimeError(f"registering {body['id']}: {resp.status}")

    await asyncio.gather(*map(one, bodies))
    await embedded(http, base)
    return len(bodies)


async def _searches(
    http: aiohttp.ClientSession, base: str, pid: int, texts: Iterator[str], match: str, n: int
) -> dict[str, float]:
    """``n`` searches of new texts in mode ``match``: server CPU per search, wall p50/p99, the
    agents found per search (at most 20)."""
    walls: list[float] = []
    found = 0
    cpu, start = cpu_seconds(pid), time.perf_counter()
    for _ in range(n):
        began = time.perf_counter()
        params = {"q": next(texts), "match": match, "limit": "20"}
        async with http.get(f"{base}/api/v1/agents", params=params) as resp:
            answer = await resp.json()
            if resp.status != 200 or answer.get("match") != match:
                raise RuntimeError(f"search {params}: {resp.status} {str(answer)[:200]}")
        walls.append((time.perf_counter() - began) * 1000)
        found += len(answer["agents"])
    return {
        "cpu_s": cpu_seconds(pid) - cpu,
        "wall_s": time.perf_counter() - start,
        "searches": n,
        "p50_ms": percentile(walls, 0.5),
        "p99_ms": percentile(walls, 0.99),
        "found": found / n,
    }


async def _idle_cpu(pid: int, seconds: float) -> float:
    """The server's CPU seconds per second while nothing is asked of it."""
    before = cpu_seconds(pid)
    await asyncio.sleep(seconds)
    return (cpu_seconds(pid) - before) / seconds


def _embedding_ms(directory: Any, texts: Iterator[str], n: int) -> tuple[float, float]:
    """The CPU and wall milliseconds of embedding one new text, in this process (one BLAS
    thread, one text at a time)."""
    model = local_embedder(directory)
    with threadpool_limits(limits=1, user_api="blas"):
        model.embed(["warm up"])
        cpu, wall = time.process_time(), time.perf_counter()
        for _ in range(n):
            model.embed([next(texts)])
        return (time.process_time() - cpu) * 1000 / n, (time.perf_counter() - wall) * 1000 / n


async def run(opts: Options) -> Section:
    """Scenario 9."""
    section = Section("9. catalog search by meaning")
    n, copies = (20, 2) if opts.quick else (300, COPIES)
    directory = fetch_model(data_dir(), log=lambda line: section.notes.append(line))
    kinds = {
        f"messages ({_mean_words(None):.0f} words)": _texts(),
        f"{SHORT} words": _texts(SHORT),
    }
    table = Table(
        "GET /api/v1/agents?q=<new text>&limit=20, one after another (server CPU per search)",
        ["catalog", "match", "texts", "searches", "CPU ms/search", "p50 ms", "p99 ms", "found"],
    )
    headers = {"Authorization": f"Bearer {TOKEN}"}
    async with (
        switchboard(opts.tmp, matcher="semantic", embedding_model=str(directory)) as (base, proc),
        aiohttp.ClientSession(headers=headers) as http,
    ):
        size = await register_catalog(base, NOWHERE)
        for label in (f"{size} agents", None):
            if label is None:
                size += await _copies(http, base, copies)
                label = f"{size} agents"
            idle = await _idle_cpu(proc.pid, 1.0)
            for match, kind in itertools.product(("semantic", "lexical"), kinds):
                texts = kinds[kind]
                await _searches(http, base, proc.pid, texts, match, 5)  # warm up
                got = await _searches(http, base, proc.pid, texts, match, n)
                per = (got["cpu_s"] - idle * got["wall_s"]) * 1000 / got["searches"]
                row = [label, match, kind, n, per, got["p50_ms"], got["p99_ms"], got["found"]]
                table.rows.append(row)
                section.data[f"{label} {match} {kind}"] = {**got, "idle_cpu_per_s": idle}
    section.tables.append(table)
    for kind, texts in kinds.items():
        cpu, wall = _embedding_ms(directory, texts, n)
        section.data[f"embedding {kind}"] = {"cpu_ms": cpu, "wall_ms": wall}
        section.notes.append(
            f"the embedding of one new text alone ({kind}), in the harness: {cpu:.1f} ms CPU, "
            f"{wall:.1f} ms wall (one BLAS thread)"
        )
    return section
