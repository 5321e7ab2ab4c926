"""Scenario 5, open streams: 1,000 concurrent idle SSE streams through the router.

The echo agent answers ``SendStreamingMessage`` with a Task event and then stays idle. A
separate load process opens the streams through Switchboard's ``POST /`` (skill matched),
waits for each stream's first event, and holds them. Switchboard's resident memory
(``VmRSS``) is read before (after a warm-up of a few streams) and while they are open:
the difference divided by the number of streams is the memory per idle stream. The agent's
growth is shown for reference (aiohttp serving the same streams directly, no proxying).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import sys
from typing import Any

from bench.options import Options
from bench.procs import echo_agents, register, rss_kib, switchboard
from bench.report import Check, Section, Table
from bench.scenarios.unary import body


async def hold_streams(spec: dict[str, Any]) -> tuple[asyncio.subprocess.Process, float, int]:
    """Start an ``idle`` load process; return it once its streams are open, how long opening
    took (s) and how many opened."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "bench.load",
        json.dumps(spec),
        stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE,
    )
    assert proc.stdout is not None
    line = (await proc.stdout.readline()).decode()
    if not line.startswith("OPEN "):
        await proc.wait()
        raise RuntimeError(f"the load process could not open the streams: {line!r}")
    return proc, float(line.split()[2]), int(line.split()[1])


async def release(proc: asyncio.subprocess.Process) -> dict[str, Any]:
    """Tell an ``idle`` load process to close its streams; its result."""
    out, _ = await proc.communicate(b"\n")
    result: dict[str, Any] = json.loads(out.splitlines()[-1])
    return result


async def _measure(opts: Options, count: int, agents: int, spec: dict[str, Any]) -> dict[str, Any]:
    """Open ``count`` idle streams over ``agents`` echo agents (pinned routes when more than
    one); RSS of Switchboard and of the agents before and while open."""
    async with contextlib.AsyncExitStack() as stack:
        bases, agent_proc = await stack.enter_async_context(echo_agents(opts.tmp, agents))
        router, router_proc = await stack.enter_async_context(
            switchboard(opts.tmp, max_streams=str(count * 2 + 100))
        )
        for n, base in enumerate(bases):
            await register(router, {"url": base, "id": f"echo-{n}"})
        urls = (
            [f"{router}/"] if agents == 1 else [f"{router}/agents/echo-{n}" for n in range(agents)]
        )
        spec = {**spec, "urls": urls, "settle": 1.0 if opts.quick else 3.0}
        warm, _, _ = await hold_streams({**spec, "concurrency": min(count, 20)})
        await release(warm)
        await asyncio.sleep(0.5)
        before = rss_kib(router_proc.pid), rss_kib(agent_proc.pid)
        proc, opening, opened = await hold_streams({**spec, "concurrency": count})
        await asyncio.sleep(1.0)
        during = rss_kib(router_proc.pid), rss_kib(agent_proc.pid)
        result = await release(proc)
    return {
        "streams": count,
        "agents": agents,
        "opened": opened,
        "open_seconds": opening,
        "router_rss_kib": {"before": before[0], "open": during[0]},
        "agent_rss_kib": {"before": before[1], "open": during[1]},
        "per_stream_kib": (during[0] - before[0]) / max(opened, 1),
        "agent_per_stream_kib": (during[1] - before[1]) / max(opened, 1),
        "failed": result["failed"],
    }


async def run(opts: Options) -> Section:
    """Open the streams two ways: all to one agent (skill matched), spread over 32 agents."""
    section = Section("5. open idle streams through the router")
    count = 50 if opts.quick else 1000
    spec: dict[str, Any] = {
        "kind": "idle",
        "headers": {"A2A-Version": "1.0"},
        "body": body("SendStreamingMessage", metadata={"bench": {"idle": True}}),
    }
    rows = {
        "POST / (skill matched), 1 agent": await _measure(opts, count, 1, spec),
        "POST /agents/{id}, 32 agents": await _measure(opts, count, 32, spec),
    }
    table = Table(
        f"{count} idle streams requested at once (RSS in KiB; per stream = growth / opened, "
        "per client = growth / requested)",
        [
            "route",
            "opened",
            "RSS before",
            "RSS open",
            "KiB per stream",
            "KiB per client",
            "agent KiB per stream",
            "open s",
            "failed",
        ],
    )
    for label, r in rows.items():
        table.rows.append(
            [
                label,
                r["opened"],
                r["router_rss_kib"]["before"],
                r["router_rss_kib"]["open"],
                r["per_stream_kib"],
                (r["router_rss_kib"]["open"] - r["router_rss_kib"]["before"]) / r["streams"],
                r["agent_per_stream_kib"],
                r["open_seconds"],
                r["failed"],
            ]
        )
    section.tables.append(table)
    section.data = {"rows": rows}
    best = max(rows.values(), key=lambda r: r["opened"])
    section.checks.append(
        Check("streams open at once through Switchboard", best["opened"], count, "", True)
    )
    section.checks.append(
        Check("Switchboard RSS per open idle stream", best["per_stream_kib"], 30.0, "KiB")
    )
    if best["opened"] < count:
        section.notes.append(
            "streams beyond the router's upstream connection pool (router/forward/upstream.py: "
            "32 per "
            "agent, 512 in all, not configurable) wait for a free connection and never see "
            "their first event; their client connections still count in the RSS growth"
        )
    return section
