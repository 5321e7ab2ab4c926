"""Scenario 8, writes: what a script that registers and then routes sees, and how soon another
replica sees a write.

1. **Register then route** (``serve --workers 2``, SQLite, the embedding model): one keep-alive
   connection held by each worker. A round pushes the card of a new agent (a currency skill)
   through one worker, then at once sends, through the other worker, a message that shares no
   word with the skill ("how many yen would I get for fifty bucks": only its vectors can route
   it), then deletes the agent through that worker and sends the message again through the
   first (it must be refused). Counted: rounds routed right, refusals right, and the time each
   registration took with its vectors stored and every worker told.
2. **Registrations with their vectors**: 1,000 cards (quick: 50) registered by URL by 16
   concurrent admin clients, as scenario 4, and one at a time (100; quick: 10): cards/s, and
   the time of each.
3. **Replicas** (PostgreSQL, ``--postgres``): two ``serve``s on one database, each answering
   100 requests/s (catalog searches); 1,000 writes (quick: 50) at 10 a second alternate a
   registration and a deletion on the first; after each, the second is asked on a new
   connection every 2 ms until it shows the write. Reported: p50, p99 and the longest time
   from the write's answer to the first answer of the other replica that shows it.
"""

from __future__ import annotations

import asyncio
import contextlib
import statistics
import time
from collections.abc import AsyncIterator
from typing import Any

import aiohttp

from bench.options import Options
from bench.pathagents import PathAgents, path_agents, path_card
from bench.procs import TOKEN, switchboard
from bench.report import Check, Section, Table
from bench.scenarios.crawl import WORKERS, card_server
from bench.scenarios.routing import scratch_postgres

ADMIN = {"Authorization": f"Bearer {TOKEN}"}
FX = {
    "id": "fx",
    "name": "Currency conversion",
    "description": "Converts amounts of money between currencies at today's exchange rates.",
    "tags": ["currency", "exchange", "money"],
    "examples": ["How much is 100 USD in EUR?"],
}
QUESTION = "how many yen would I get for fifty bucks"


def _message(text: str) -> dict[str, Any]:
    return {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "SendMessage",
        "params": {"message": {"role": "ROLE_USER", "messageId": "m", "parts": [{"text": text}]}},
    }


def _pct(values: list[float], q: float) -> float:
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


@contextlib.asynccontextmanager
async def pinned(base: str, workers: int) -> AsyncIterator[list[aiohttp.ClientSession]]:
    """One session per worker, each holding one connection the kernel gave to that worker."""
    found: dict[str, aiohttp.ClientSession] = {}
    try:
        for _ in range(200):
            session = aiohttp.ClientSession(
                base, connector=aiohttp.TCPConnector(limit=1), headers=ADMIN
            )
            async with session.get("/api/v1/status") as resp:
                name = (await resp.json())["replica"]["name"]
            if name in found:
                await session.close()
            else:
                found[name] = session
            if len(found) == workers:
                break
        if len(found) < workers:
            raise RuntimeError(f"reached {len(found)} of {workers} workers")
        yield list(found.values())
    finally:
        for session in found.values():
            await session.close()


async def register_then_route(opts: Options, agents: PathAgents) -> dict[str, Any]:
    """Part 1 (see the module docs)."""
    rounds = 10 if opts.quick else 100
    routed = refused = 0
    times: list[float] = []
    async with (
        switchboard(opts.tmp, workers="2", catalog_sync_interval="60") as (base, _proc),
        pinned(base, 2) as (one, two),
    ):
        for n in range(rounds):
            writer, reader = (one, two) if n % 2 == 0 else (two, one)
            name = f"fx{n}"
            card = path_card(agents.url(name), f"Money desk {n}", FX)
            start = time.perf_counter()
            async with writer.post("/api/v1/agents", json={"card": card, "id": name}) as resp:
                ok = resp.status == 201 and (await resp.json()).get("vectors") == "ready"
            times.append((time.perf_counter() - start) * 1000)
            if not ok:
                raise RuntimeError(f"registration {n} failed: {resp.status}")
            async with reader.post("/", json=_message(QUESTION), headers=_V1) as resp:
                answer = await resp.json()
            parts = answer.get("result", {}).get("message", {}).get("parts")
            routed += parts == [{"text": f"{name}: {QUESTION}"}]
            async with reader.delete(f"/api/v1/agents/{name}") as resp:
                assert resp.status == 204
            async with writer.post("/", json=_message(QUESTION), headers=_V1) as resp:
                refused += (await resp.json()).get("error", {}).get("code") == -32050
    return {"rounds": rounds, "routed": routed, "refused": refused, "register_ms": times}


_V1 = {"A2A-Version": "1.0"}


async def registrations(opts: Options) -> dict[str, Any]:
    """Part 2 (see the module docs)."""
    count = 50 if opts.quick else 1000
    alone = 10 if opts.quick else 100
    out: dict[str, Any] = {}
    async with (
        card_server(count + alone) as (bases, jwk),
        switchboard(opts.tmp) as (router, _proc),
        aiohttp.ClientSession(headers=ADMIN) as http,
    ):
        async with http.post(f"{router}/api/v1/keys", json={"jwk": jwk}) as resp:
            if resp.status != 201:
                raise RuntimeError(f"trusting the key failed: {resp.status}")
        queue = list(reversed(bases[:count]))
        vectors: dict[str, int] = {}

        async def worker() -> None:
            while queue:
                async with http.post(f"{router}/api/v1/agents", json={"url": queue.pop()}) as r:
                    state = (await r.json()).get("vectors", "none") if r.status == 201 else "?"
                vectors[state] = vectors.get(state, 0) + 1

        start = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(WORKERS)))
        out["concurrent"] = {"cards": count, "wall_s": time.perf_counter() - start}
        out["concurrent"]["vectors"] = vectors
        one_by_one = []
        for url in bases[count:]:
            start = time.perf_counter()
            async with http.post(f"{router}/api/v1/agents", json={"url": url}) as resp:
                await resp.read()
            one_by_one.append((time.perf_counter() - start) * 1000)
        out["alone_ms"] = one_by_one
    return out


async def replicas(opts: Options, url: str) -> dict[str, Any]:
    """Part 3 (see the module docs)."""
    writes = 50 if opts.quick else 1000
    delays: list[float] = []
    async with (
        switchboard(opts.tmp, database_url=url) as (first, _p1),
        switchboard(opts.tmp, database_url=url) as (second, _p2),
        aiohttp.ClientSession(headers=ADMIN) as http,
    ):
        stop = asyncio.Event()

        async def load(base: str) -> None:  # 100 requests/s on a replica
            while not stop.is_set():
                async with http.get(f"{base}/api/v1/agents?q=currency") as resp:
                    await resp.read()
                await asyncio.sleep(0.01)

        background = [asyncio.create_task(load(b)) for b in (first, second)]
        try:
            for n in range(writes):
                began = time.perf_counter()
                name = f"r{n // 2}"
                if n % 2 == 0:
                    card = path_card(f"http://127.0.0.1:9/r/{name}", f"Replica {n}", FX)
                    body = {"card": card, "id": name}
                    async with http.post(f"{first}/api/v1/agents", json=body) as resp:
                        assert resp.status == 201, await resp.text()
                    wanted = 200
                else:
                    async with http.delete(f"{first}/api/v1/agents/{name}") as resp:
                        assert resp.status == 204
                    wanted = 404
                answered = time.perf_counter()
                while True:
                    async with (
                        aiohttp.ClientSession(headers=ADMIN) as fresh,  # a new connection
                        fresh.get(f"{second}/api/v1/agents/{name}") as resp,
                    ):
                        if resp.status == wanted:
                            break
                    await asyncio.sleep(0.002)
                delays.append((time.perf_counter() - answered) * 1000)
                await asyncio.sleep(max(0.0, 0.1 - (time.perf_counter() - began)))  # 10/s
        finally:
            stop.set()
            await asyncio.gather(*background)
    return {"writes": writes, "seen_ms": delays}


async def run(opts: Options) -> Section:
    """The three parts (the third only with PostgreSQL)."""
    section = Section("8. writes: register then route, registrations, replicas")
    async with path_agents() as agents:
        first = await register_then_route(opts, agents)
    ms = first["register_ms"]
    section.tables.append(
        Table(
            "register, then route by meaning through the other worker (serve --workers 2)",
            ["rounds", "routed right", "refused after delete", "register p50 ms", "p95 ms"],
            [[first["rounds"], first["routed"], first["refused"], _pct(ms, 0.5), _pct(ms, 0.95)]],
        )
    )
    second = await registrations(opts)
    wall = second["concurrent"]["wall_s"]
    cards = second["concurrent"]["cards"]
    alone = second["alone_ms"]
    section.tables.append(
        Table(
            "registrations by URL with their vectors (one worker)",
            ["concurrency", "cards", "wall s", "cards/s", "p50 ms", "vectors"],
            [
                [WORKERS, cards, wall, cards / wall, wall / cards * 1000 * WORKERS,
                 str(second["concurrent"]["vectors"])],
                [1, len(alone), sum(alone) / 1000, len(alone) / (sum(alone) / 1000),
                 statistics.median(alone), "-"],
            ],
        )
    )  # fmt: skip
    data: dict[str, Any] = {"register_then_route": first, "registrations": second}
    if opts.postgres:
        try:
            async with scratch_postgres(opts.postgres) as url:
                third = await replicas(opts, url)
        except OSError as exc:
            section.notes.append(f"PostgreSQL at {opts.postgres} not usable ({exc}): skipped")
        else:
            seen = third["seen_ms"]
            section.tables.append(
                Table(
                    "a write on one replica, seen by the other (PostgreSQL)",
                    ["writes", "p50 ms", "p99 ms", "max ms"],
                    [[third["writes"], _pct(seen, 0.5), _pct(seen, 0.99), max(seen)]],
                )
            )
            data["replicas"] = third
            section.checks.append(Check("replica sees a write, p99", _pct(seen, 0.99), 100, "ms"))
    else:
        section.notes.append("replicas: skipped (--postgres none)")
    section.checks.append(
        Check("register then route: right", first["routed"] / first["rounds"], 1.0, "", True)
    )
    section.checks.append(Check("registrations with vectors", cards / wall, 136, "cards/s", True))
    section.data = data
    return section
