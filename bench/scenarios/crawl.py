"""Scenario 4, crawl and verify: 1,000 signed cards served locally, registered by URL.

A local aiohttp server (in the harness process) serves 1,000 distinct cards, each signed
with one ES256 key (``registry.signatures.sign_card``), at
``/agents/<n>/.well-known/agent-card.json``. Switchboard (its own process) trusts the key
(``POST /api/v1/keys``), then 16 concurrent admin clients register every agent by base URL
(``POST /api/v1/agents``): Switchboard discovers, fetches, verifies, normalizes and indexes
each card. Reported: wall time, cards/s, and how many came out ``verified``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
from aiohttp import web

from bench.catalog import embedded
from bench.echo_agent import card as echo_card
from bench.options import Options
from bench.procs import TOKEN, switchboard
from bench.report import Check, Section, Table
from registry.jwkeys import generate_key
from registry.signatures import sign_card

WORKERS = 16


@contextlib.asynccontextmanager
async def card_server(count: int) -> AsyncIterator[tuple[list[str], dict[str, Any]]]:
    """Serve ``count`` signed cards; yields their base URLs and the public JWK."""
    key = generate_key("ES256", kid="bench-key")
    cards: dict[str, bytes] = {}

    async def serve(request: web.Request) -> web.Response:
        body = cards.get(request.match_info["n"])
        if body is None:
            raise web.HTTPNotFound()
        return web.Response(body=body, content_type="application/json")

    app = web.Application()
    app.router.add_get("/agents/{n}/.well-known/agent-card.json", serve)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    bases = [f"http://127.0.0.1:{port}/agents/{n}" for n in range(count)]
    for n, base in enumerate(bases):
        card = echo_card(base)
        card["name"] = f"Bench Echo {n}"
        cards[str(n)] = json.dumps(sign_card(card, key)).encode()
    try:
        yield bases, json.loads(key.export_public())
    finally:
        await runner.cleanup()


async def run(opts: Options) -> Section:
    """Register every card by URL through the admin API; time it."""
    section = Section("4. crawl and verify (signed cards, admin API)")
    count = 50 if opts.quick else 1000
    headers = {"Authorization": f"Bearer {TOKEN}"}
    statuses: dict[str, int] = {}
    async with (
        card_server(count) as (bases, jwk),
        switchboard(opts.tmp) as (router, _proc),
        aiohttp.ClientSession(headers=headers) as http,
    ):
        async with http.post(f"{router}/api/v1/keys", json={"jwk": jwk}) as resp:
            if resp.status != 201:
                raise RuntimeError(f"trusting the key failed: {resp.status} {await resp.text()}")
        queue = list(reversed(bases))

        async def worker() -> None:
            while queue:
                base = queue.pop()
                async with http.post(f"{router}/api/v1/agents", json={"url": base}) as resp:
                    agent = await resp.json()
                status = (
                    agent["verification"]["status"] if resp.status == 201 else f"HTTP {resp.status}"
                )
                statuses[status] = statuses.get(status, 0) + 1

        start = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(WORKERS)))
        wall = time.perf_counter() - start
        await embedded(http, router)
        embedded_s = time.perf_counter() - start
    rate = count / wall
    section.tables.append(
        Table(
            f"{count} cards, {WORKERS} concurrent registrations",
            ["cards", "wall s", "cards/s", "ms per card", "all embedded s", "outcomes"],
            [
                [
                    count,
                    wall,
                    rate,
                    wall / count * 1000,
                    embedded_s,
                    json.dumps(statuses, sort_keys=True),
                ]
            ],
        )
    )
    section.notes.append(
        "wall s: until the last registration answered; all embedded s: until the skill "
        "texts embedded behind the registrations were all done (GET /api/v1/status, "
        "indexing.backlog 0; the same as wall s without an embedding model)"
    )
    section.data = {
        "cards": count,
        "workers": WORKERS,
        "wall_s": wall,
        "embedded_s": embedded_s,
        "statuses": statuses,
    }
    section.checks.append(Check("crawl + verify + index", rate, 200, "cards/s", True))
    if statuses.get("verified", 0) != count:
        section.notes.append(f"not every card was verified: {statuses}")
    return section
