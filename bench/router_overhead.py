"""What the router costs: the same A2A calls sent straight to an agent and through Switchboard.

Starts the demo agents and Switchboard in this process (SQLite in a temporary directory),
then sends N ``SendMessage`` calls (A2A 1.0) and N ``message/stream`` calls (A2A 0.3) to the
currency agent, first directly, then through the router's ``POST /``, sequentially and with
a given concurrency. Prints median and p95 latency and the router/direct ratio.

    .venv/bin/python bench/router_overhead.py [--requests 300] [--concurrency 16]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import aiohttp
from aiohttp import web

from registry.api import REGISTRY
from registry.settings import Settings
from router.app import create_app
from seeds.demo_agents import start_demo_agents


def send_1_0(text: str) -> tuple[dict[str, str], dict[str, Any]]:
    """Headers and body of a 1.0 SendMessage."""
    message = {"role": "ROLE_USER", "messageId": str(uuid.uuid4()), "parts": [{"text": text}]}
    body = {"jsonrpc": "2.0", "id": 1, "method": "SendMessage", "params": {"message": message}}
    return {"A2A-Version": "1.0"}, body


def stream_0_3(text: str) -> tuple[dict[str, str], dict[str, Any]]:
    """Headers and body of a 0.3 message/stream."""
    message = {
        "role": "user",
        "messageId": str(uuid.uuid4()),
        "parts": [{"kind": "text", "text": text}],
    }
    body = {"jsonrpc": "2.0", "id": 1, "method": "message/stream", "params": {"message": message}}
    return {}, body


async def one(http: aiohttp.ClientSession, url: str, make: Any) -> float:
    """Seconds for one call, reading the whole answer (every event of a stream)."""
    headers, body = make("convert 100 USD to EUR")
    start = time.perf_counter()
    async with http.post(url, json=body, headers=headers) as resp:
        await resp.read()
        assert resp.status == 200, resp.status
    return time.perf_counter() - start


async def run(http: aiohttp.ClientSession, url: str, make: Any, count: int, workers: int) -> Any:
    """Latencies of ``count`` calls made by ``workers`` concurrent loops, and the wall time."""
    samples: list[float] = []
    remaining = count

    async def worker() -> None:
        nonlocal remaining
        while remaining > 0:
            remaining -= 1
            samples.append(await one(http, url, make))

    start = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(workers)))
    return samples, time.perf_counter() - start


def row(label: str, direct: Any, routed: Any) -> str:
    (d, d_wall), (r, r_wall) = direct, routed
    dm, rm = statistics.median(d), statistics.median(r)
    rp95 = sorted(r)[int(len(r) * 0.95) - 1]
    return (
        f"{label:<36}{dm * 1000:>9.2f}{rm * 1000:>9.2f}{rp95 * 1000:>9.2f}"
        f"{rm / dm:>8.2f}{len(r) / r_wall:>9.0f}{(len(r) / r_wall) / (len(d) / d_wall):>8.2f}"
    )


async def main(requests: int, concurrency: int) -> None:
    agents = await start_demo_agents(ports={"currency": 0, "translate": 0, "caption": 0})
    with tempfile.TemporaryDirectory() as tmp:
        settings = Settings(
            database_url=f"sqlite:///{Path(tmp) / 'bench.db'}",
            seeds=[],
            allow_networks=["127.0.0.1/32"],  # the demo agents run on loopback
        )
        app = create_app(settings)
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        router = f"http://127.0.0.1:{port}/"
        direct = agents.urls["currency"] + "/"
        try:
            await app[REGISTRY].register_url(agents.urls["currency"], "currency")
            connector = aiohttp.TCPConnector(limit=concurrency * 2)
            async with aiohttp.ClientSession(connector=connector) as http:
                for make in (send_1_0, stream_0_3):  # warm up pools and caches
                    await run(http, direct, make, 20, 4)
                    await run(http, router, make, 20, 4)
                print(
                    f"{'call':<36}{'direct':>9}{'router':>9}{'p95':>9}{'ratio':>8}"
                    f"{'req/s':>9}{'ratio':>8}"
                )
                print(f"{'':<36}{'ms':>9}{'ms':>9}{'ms':>9}{'':>8}{'router':>9}{'':>8}")
                for label, make in (
                    ("SendMessage 1.0", send_1_0),
                    ("message/stream 0.3", stream_0_3),
                ):
                    for workers in (1, concurrency):
                        d = await run(http, direct, make, requests, workers)
                        r = await run(http, router, make, requests, workers)
                        print(row(f"{label}, {workers} at a time", d, r))
        finally:
            await runner.cleanup()
            await agents.close()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=300)
    parser.add_argument("--concurrency", type=int, default=16)
    args = parser.parse_args()
    asyncio.run(main(args.requests, args.concurrency))
