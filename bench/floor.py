"""The relay floor: an aiohttp server that relays each POST to the agent and does nothing else.

``python -m bench.floor --port P --upstream http://127.0.0.1:A`` runs one process on uvloop,
as ``switchboard serve`` does, with the router's own upstream client
(:class:`router.forward.h1client.H1Pool`) and no access log: the request's body is sent to
the agent at the same path, the agent's status and body come back unread. Whatever a routed
call costs above this contestant is Switchboard's own work (parsing and checking the call,
choosing the agent, rewriting and sealing the IDs, the log lines, metrics); what this costs
above ``direct`` is aiohttp's server, the client and a second hop on the machine, which no
change inside Switchboard's handler can remove.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import sys
from collections.abc import AsyncIterator
from pathlib import Path

import uvloop
from aiohttp import web
from yarl import URL

from bench.procs import free_port, process
from router.forward.h1client import H1Pool

_PASSED = ("Content-Type", "A2A-Version")


def make_app(upstream: str) -> web.Application:
    """The relay in front of ``upstream`` (a base URL)."""
    base = URL(upstream)
    pool = H1Pool(connect_timeout=5, read_timeout=60, pool_timeout=5, max_body_bytes=1 << 24)

    async def relay(request: web.Request) -> web.Response:
        body = await request.read()
        headers = [(name, request.headers[name]) for name in _PASSED if name in request.headers]
        answer = await pool.post(base.with_path(request.path), headers, body)
        return web.Response(
            status=answer.status,
            body=answer.body,
            content_type=answer.headers.get("Content-Type", "application/json").split(";")[0],
        )

    async def ready(_request: web.Request) -> web.Response:
        return web.json_response({"name": "relay floor"})

    async def close(_app: web.Application) -> None:
        await pool.close()

    app = web.Application()
    app.router.add_get("/.well-known/agent-card.json", ready)
    app.router.add_post("/{tail:.*}", relay)
    app.on_cleanup.append(close)
    return app


async def _serve(port: int, upstream: str) -> None:
    runner = web.AppRunner(make_app(upstream), access_log=None)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", port, backlog=4096).start()
    try:
        await asyncio.Event().wait()
    finally:
        await runner.cleanup()


@contextlib.asynccontextmanager
async def relay_floor(upstream: str, tmp: Path) -> AsyncIterator[str]:
    """Run the floor in front of ``upstream`` (a base URL); yields its base URL."""
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    args = [sys.executable, "-m", "bench.floor", "--port", str(port), "--upstream", upstream]
    async with process(args, f"{base}/.well-known/agent-card.json", tmp / "floor.log"):
        yield base


def main() -> None:
    """Command line: ``--port`` and ``--upstream``."""
    parser = argparse.ArgumentParser(description="A do-nothing aiohttp relay (the floor).")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--upstream", required=True, help="the agent's base URL")
    args = parser.parse_args()
    uvloop.run(_serve(args.port, args.upstream))


if __name__ == "__main__":
    main()
