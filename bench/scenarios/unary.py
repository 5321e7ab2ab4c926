"""Scenario 1, unary proxy: ``SendMessage`` to the echo agent directly and through proxies.

The agent answers with a Task (a new task ID each time, a context ID: what most agents do, so
Switchboard rewrites IDs). The load comes from wrk when it is installed (:mod:`bench.wrk`),
else from the Python generator (:mod:`bench.load`); the section says which.

Contestants, each its own process on 127.0.0.1, measured one after another at each
concurrency level by a separate load process (closed loop, keep-alive): direct to the agent;
Switchboard's ``POST /`` (skill matched); Switchboard's pinned ``POST /agents/{id}``;
nginx ``proxy_pass`` when installed; (unary only) ``floor``, an aiohttp relay on the
router's upstream client that does nothing else (:mod:`bench.floor`: what any relay on this
stack costs, so that the router's own work is the difference); and (unary only) ``POST /``
of a Switchboard with client authentication on, called with an API key (``router+key``: the
cost of checking the key, one database read per request, and of the caller's own task
scope); and (unary only)
``POST /`` of a Switchboard with ``SWITCHBOARD_METRICS=off`` (``router-metrics-off``: no
``/metrics`` endpoint; compare with ``router`` for the cost of serving metrics); and
``router-2-workers``: ``POST /`` of ``switchboard serve --workers 2`` (every other contestant
runs one process); and ``router-gc-5000``: ``POST /`` of a Switchboard with
``SWITCHBOARD_GC_THRESHOLD=5000`` (the garbage collector's youngest generation collected
less often: compare with ``router`` for what the collector costs under load); and
``router-42-distinct``: ``POST /`` of a Switchboard that also holds the routing evaluation's
42 cards (all answered by the echo agent), sent a message no earlier call sent
(:mod:`bench.catalog`): every other contestant is sent one text over and over, whose vector
the router embeds once and then finds in its cache; real traffic makes it embed each message;
and ``router-2-workers-42-distinct``, the same with ``--workers 2``.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import time
from pathlib import Path
from typing import Any

import aiohttp

from bench import nginx as nginx_mod
from bench.catalog import distinct_bodies, first_body, register_catalog
from bench.floor import relay_floor
from bench.options import Options
from bench.procs import client_key, echo_agent, register, switchboard
from bench.report import Check, Section, Table, median, ratio
from bench.wrk import generator, run_unary

TEXT = "echo hello benchmark"


def body(method: str, text: str = TEXT, metadata: dict[str, Any] | None = None) -> str:
    """A 1.0 JSON-RPC request carrying one user text message."""
    message: dict[str, Any] = {"role": "ROLE_USER", "messageId": "m1", "parts": [{"text": text}]}
    if metadata:
        message["metadata"] = metadata
    rpc = {"jsonrpc": "2.0", "id": 1, "method": method, "params": {"message": message}}
    return json.dumps(rpc)


async def contestants(
    opts: Options, stack: contextlib.AsyncExitStack, notes: list[str]
) -> dict[str, str]:
    """Start the agent, Switchboard (and nginx); the URL of each contestant's endpoint."""
    agent, _agent_proc = await stack.enter_async_context(echo_agent(opts.tmp, answer="task"))
    router, _proc = await stack.enter_async_context(switchboard(opts.tmp))
    await register(router, {"url": agent, "id": "echo"})
    urls = {"direct": f"{agent}/", "router": f"{router}/", "pinned": f"{router}/agents/echo"}
    executable = nginx_mod.find(opts.nginx)
    if executable:
        urls["nginx"] = (
            f"{await stack.enter_async_context(nginx_mod.nginx(executable, agent, opts.tmp))}/"
        )
    else:
        notes.append(nginx_mod.SKIPPED)
    return urls


async def variant(
    opts: Options, stack: contextlib.AsyncExitStack, agent: str, **settings: str
) -> str:
    """A Switchboard with ``settings`` (``SWITCHBOARD_<NAME>``) in front of ``agent``,
    registered as ``echo``: its base URL."""
    router, _proc = await stack.enter_async_context(switchboard(opts.tmp, **settings))
    await register(router, {"url": agent, "id": "echo"})
    return router


async def authenticated(
    opts: Options, stack: contextlib.AsyncExitStack, agent: str
) -> tuple[str, dict[str, str]]:
    """A Switchboard with ``SWITCHBOARD_CLIENT_AUTH=api-key`` in front of ``agent``: its
    endpoint and the headers of a client with a key."""
    router = await variant(opts, stack, agent, client_auth="api-key")
    return f"{router}/", {"X-API-Key": await client_key(router)}


async def _probe(url: str, headers: dict[str, str], body: str, seconds: float = 60) -> None:
    """Calls before the load, each on a new connection, until 8 in a row answer with a Task
    (wrk does not read answers; with several workers, each must have read the new agent and
    its vectors from the database): RuntimeError after ``seconds``."""
    headers = {"Content-Type": "application/json", **headers}
    deadline, streak = time.monotonic() + seconds, 0
    while streak < 8:
        async with (
            aiohttp.ClientSession() as http,
            http.post(url, data=body, headers=headers) as resp,
        ):
            answer = await resp.json(content_type=None)
        ok = resp.status == 200 and "task" in (answer.get("result") or {})
        streak = streak + 1 if ok else 0
        if not ok and time.monotonic() > deadline:
            raise RuntimeError(f"{url} did not answer with a task: {resp.status} {answer}")
        if not ok:
            await asyncio.sleep(0.1)  # polling: the other workers catch up within 2 s


async def run(opts: Options) -> Section:
    """Measure every contestant at each concurrency level."""
    section = Section("1. unary proxy (SendMessage answered with a Task, A2A 1.0)")
    section.notes.append(f"load generator: {generator()}")
    levels = (1, 4) if opts.quick else (1, 16, 64)
    async with contextlib.AsyncExitStack() as stack:
        urls = await contestants(opts, stack, section.notes)
        agent = urls["direct"].rstrip("/")
        # reads each answer whole: a unary relay only (not a contestant of the streaming one)
        urls["floor"] = f"{await stack.enter_async_context(relay_floor(agent, opts.tmp))}/"
        keyed_url, keyed = await authenticated(opts, stack, agent)
        urls["router+key"] = keyed_url
        for name, settings in (
            ("router-metrics-off", {"metrics": "off"}),
            ("router-2-workers", {"workers": "2"}),
            ("router-gc-5000", {"gc_threshold": "5000"}),
        ):
            urls[name] = f"{await variant(opts, stack, agent, **settings)}/"
        bodies = {}
        if opts.quick:  # embedding the 42 cards' texts takes half a minute
            section.notes.append("router-42-distinct: not in --quick")
        else:
            path = str(distinct_bodies(opts.tmp / "distinct.jsonl"))
            for name, settings in (
                ("router-42-distinct", {}),
                ("router-2-workers-42-distinct", {"workers": "2"}),
            ):
                distinct = await variant(opts, stack, agent, **settings)
                await register_catalog(distinct, agent)
                urls[name], bodies[name] = f"{distinct}/", path
        extra = {"router+key": keyed}
        spec = {
            "kind": "unary",
            "headers": {"A2A-Version": "1.0"},
            "body": body("SendMessage"),
            **opts.timing(),
        }
        for name, url in urls.items():
            probe = first_body(Path(bodies[name])) if name in bodies else spec["body"]
            await _probe(url, {**spec["headers"], **extra.get(name, {})}, probe)
        results: dict[int, dict[str, dict[str, float]]] = {}
        for level in levels:
            row = results[level] = {}
            for name, url in urls.items():
                headers = {**spec["headers"], **extra.get(name, {})}
                load = {**spec, "url": url, "concurrency": level, "headers": headers}
                if name in bodies:
                    load["bodies_file"] = bodies[name]
                out = await run_unary(load)
                rounds = out["rounds"]
                row[name] = {k: median(rounds, k) for k in ("rps", "p50_ms", "p99_ms", "errors")}
    table = Table(
        "medians of rounds; added = p50 - direct p50",
        [
            "contestant",
            "conc",
            "req/s",
            "p50 ms",
            "p99 ms",
            "added ms",
            "req/s / direct",
            "added / nginx added",
            "errors",
        ],
    )
    for level, row in results.items():
        direct = row["direct"]
        nginx_added = row["nginx"]["p50_ms"] - direct["p50_ms"] if "nginx" in row else None
        for name, m in row.items():
            added = m["p50_ms"] - direct["p50_ms"]
            table.rows.append(
                [
                    name,
                    level,
                    m["rps"],
                    m["p50_ms"],
                    m["p99_ms"],
                    added,
                    ratio(m["rps"], direct["rps"]),
                    ratio(added, nginx_added)
                    if nginx_added and nginx_added > 0 and name != "direct"
                    else float("nan"),
                    int(m["errors"]),
                ]
            )
    section.tables.append(table)
    section.data = {"levels": {str(k): v for k, v in results.items()}}
    low, high = results[levels[0]], results[levels[-1]]
    added_1 = low["router"]["p50_ms"] - low["direct"]["p50_ms"]
    section.checks.append(Check("router added p50 at concurrency 1", added_1, 0.3, "ms"))
    floor_added = low["floor"]["p50_ms"] - low["direct"]["p50_ms"]
    section.notes.append(
        f"floor (a relay doing nothing else) adds {floor_added:.3f} ms at p50 at concurrency "
        f"{levels[0]} and carries {ratio(high['floor']['rps'], high['direct']['rps']):.3f} of "
        f"direct's req/s at {levels[-1]}; the router's own work adds "
        f"{added_1 - floor_added:.3f} ms above it"
    )
    section.checks.append(
        Check(
            f"router throughput / direct at concurrency {levels[-1]}",
            ratio(high["router"]["rps"], high["direct"]["rps"]),
            0.4,
            "",
            higher_is_better=True,
        )
    )
    section.checks.append(
        Check(
            f"2 workers / 1 worker throughput at concurrency {levels[-1]}",
            ratio(high["router-2-workers"]["rps"], high["router"]["rps"]),
            1.0,
            "x",
            higher_is_better=True,
        )
    )
    if "nginx" in low:
        nginx_added = low["nginx"]["p50_ms"] - low["direct"]["p50_ms"]
        section.checks.append(
            Check(
                "router added p50 / nginx added p50 at concurrency 1",
                ratio(added_1, nginx_added) if nginx_added > 0 else float("nan"),
                1.5,
                "x",
            )
        )
    return section
