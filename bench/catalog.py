"""The routing evaluation's catalog and messages as a load: what a routed call costs when
every message is new.

A router that embeds messages caches each text's vector, so a load that sends one text over
and over (``bench.scenarios.unary.body``) pays for the embedding once. People do not write
the same message twice: :func:`distinct_bodies` writes ``SendMessage`` requests carrying the
evaluation set's in-domain messages (``bench/routing_eval``, both halves: this is load, not a
fit), each with a reference number that makes it a text no earlier request had, so the
router embeds every one. :func:`register_catalog` pushes the evaluation's 42 cards to a
Switchboard with one A2A 1.0 interface each, all on one echo agent (``/agents/<id>`` on it),
so that whatever agent a message is routed to answers with a Task, and waits until their
skills are embedded.
"""

from __future__ import annotations

import asyncio
import copy
import json
from pathlib import Path
from typing import Any

import aiohttp

from bench.procs import TOKEN
from bench.routing_eval.dataset import cards, messages

COUNT = 20_000
"""Distinct requests written by default: more than the router's cache of message vectors
(4,096) and than a run sends at the rates seen here, so that no text comes back cached."""


def distinct_bodies(path: Path, count: int = COUNT) -> Path:
    """Write ``count`` distinct ``SendMessage`` requests (A2A 1.0 JSON-RPC), one per line,
    to ``path``: the in-domain evaluation messages in turn, the n-th with `` (ref n)`` after
    its text. Returns ``path``."""
    pool = [m for m in messages() if m.in_domain and m.text]
    with path.open("w") as out:
        for n in range(count):
            params: dict[str, Any] = pool[n % len(pool)].params()
            message = params["message"]
            message["messageId"] = f"m{n}"
            message["parts"][0]["text"] += f" (ref {n})"
            rpc = {"jsonrpc": "2.0", "id": n, "method": "SendMessage", "params": params}
            out.write(json.dumps(rpc) + "\n")
    return path


def first_body(path: Path) -> str:
    """The first request of a file :func:`distinct_bodies` wrote."""
    with path.open() as f:
        return f.readline().strip()


async def register_catalog(base: str, agent: str) -> int:
    """Push every evaluation card to the Switchboard at ``base`` with its interfaces at
    ``agent``/agents/<id>, then wait until no skill waits for its vector; how many were
    registered."""
    headers = {"Authorization": f"Bearer {TOKEN}"}
    catalog = cards()
    async with aiohttp.ClientSession(headers=headers) as http:
        for agent_id, found in catalog.items():
            card = copy.deepcopy(found)
            for key in ("url", "preferredTransport", "protocolVersion", "additionalInterfaces"):
                card.pop(key, None)  # a 0.3 card's interface: the echo agent speaks 1.0
            card["supportedInterfaces"] = [
                {
                    "url": f"{agent}/agents/{agent_id}",
                    "protocolBinding": "JSONRPC",
                    "protocolVersion": "1.0",
                }
            ]
            body = {"card": card, "id": agent_id}
            async with http.post(f"{base}/api/v1/agents", json=body) as resp:
                if resp.status != 201:
                    raise RuntimeError(f"registering {agent_id}: {resp.status} {await resp.text()}")
        await embedded(http, base)
    return len(catalog)


async def embedded(http: aiohttp.ClientSession, router: str) -> None:
    """Return once the router's background embedding has no backlog (polled: the benchmark
    watches from outside the process)."""
    while True:
        async with http.get(f"{router}/api/v1/status") as resp:
            indexing = (await resp.json()).get("indexing") or {}
        if not indexing.get("backlog"):
            return
        await asyncio.sleep(0.02)
