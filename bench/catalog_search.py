"""Catalog search latency over HTTP, as a ratio to a direct call.

Starts Switchboard in-process on a temporary SQLite file, pushes N synthetic agents (default
1000, 5 skills each) through the admin API, then times each kind of catalog query against
``GET /healthz`` on the same server (the "direct call": one HTTP round trip doing no work).
A ratio of 1.5 means the query costs 50% more than a bare round trip.

    .venv/bin/python bench/catalog_search.py [--agents 1000] [--requests 200]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import aiohttp
from aiohttp import web

from registry.settings import Settings
from router.app import create_app

TOKEN = "bench-token"
WORDS = (
    "convert currency translate text caption image summarize document weather forecast "
    "invoice total schedule meeting search flights book hotel classify email detect fraud "
    "transcribe audio generate chart extract tables answer questions"
).split()
MODES = ["text/plain", "application/json", "image/png", "image/jpeg", "application/pdf"]


def synthetic_card(n: int) -> dict[str, Any]:
    """A 1.0 card with five skills whose words and modes vary with ``n``."""
    skills = []
    for k in range(5):
        words = [WORDS[(n * 7 + k * 3 + j) % len(WORDS)] for j in range(4)]
        skills.append(
            {
                "id": f"skill-{k}",
                "name": " ".join(words[:2]).title(),
                "description": "Can " + " ".join(words) + ".",
                "tags": words[2:],
                "examples": [f"please {words[0]} {words[1]}"],
                "inputModes": [MODES[(n + k) % len(MODES)]],
                "outputModes": [MODES[(n + k + 1) % len(MODES)]],
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
                "protocolVersion": "1.0" if n % 2 else "0.3",
            }
        ],
        "capabilities": {"streaming": bool(n % 3)},
        "defaultInputModes": ["text/plain"],
        "defaultOutputModes": ["text/plain"],
        "skills": skills,
    }


async def timed(http: aiohttp.ClientSession, url: str, count: int) -> list[float]:
    """Latencies (seconds) of ``count`` sequential GETs of ``url``."""
    out = []
    for _ in range(count):
        start = time.perf_counter()
        async with http.get(url) as resp:
            await resp.read()
            assert resp.status == 200, await resp.text()
        out.append(time.perf_counter() - start)
    return out


async def main(agents: int, requests: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        settings = Settings(
            database_url=f"sqlite:///{Path(tmp) / 'bench.db'}", admin_token=TOKEN, seeds=[]
        )
        runner = web.AppRunner(create_app(settings), access_log=None)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        base = f"http://127.0.0.1:{port}"
        headers = {"Authorization": f"Bearer {TOKEN}"}
        try:
            async with aiohttp.ClientSession(headers=headers) as http:
                start = time.perf_counter()
                for n in range(agents):
                    async with http.post(
                        f"{base}/api/v1/agents", json={"card": synthetic_card(n)}
                    ) as resp:
                        assert resp.status == 201, await resp.text()
                load = time.perf_counter() - start
                print(
                    f"registered {agents} agents ({agents * 5} skills) in {load:.1f} s "
                    f"({load / agents * 1000:.1f} ms each, snapshot rebuilt every time)"
                )
                queries = {
                    "direct: GET /healthz": "/healthz",
                    "one agent by id": "/api/v1/agents/agent-7",
                    "skill id": "/api/v1/agents?skill=skill-3&limit=50",
                    "tag": "/api/v1/agents?tag=weather&limit=50",
                    "input_mode image/*": "/api/v1/skills?input_mode=image/*&limit=50",
                    "free text (cold, new query each time)": None,
                    "free text (repeated, cached)": "/api/v1/agents?q=convert+currency+text",
                    "text + filters": "/api/v1/skills?q=caption+image&input_mode=image/*"
                    "&streaming=true",
                }
                baseline = statistics.median(await timed(http, f"{base}/healthz", requests))
                print(f"\n{'query':<42}{'median ms':>10}{'p95 ms':>9}{'ratio':>8}")
                for label, path in queries.items():
                    if path is None:
                        samples = []
                        for i in range(requests):
                            word = WORDS[i % len(WORDS)]
                            url = f"{base}/api/v1/agents?q={word}+{i}"
                            samples += await timed(http, url, 1)
                    else:
                        samples = await timed(http, base + path, requests)
                    median = statistics.median(samples)
                    p95 = sorted(samples)[int(len(samples) * 0.95) - 1]
                    print(
                        f"{label:<42}{median * 1000:>10.2f}{p95 * 1000:>9.2f}"
                        f"{median / baseline:>8.1f}"
                    )
        finally:
            await runner.cleanup()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--agents", type=int, default=1000)
    parser.add_argument("--requests", type=int, default=200)
    args = parser.parse_args()
    asyncio.run(main(args.agents, args.requests))
