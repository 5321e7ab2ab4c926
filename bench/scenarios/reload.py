"""Scenario 7, reloads under load: the calls lost while ``serve --workers 2`` reloads.

The echo agent (answering with a Task) behind ``switchboard serve --workers 2``. Clients in
the harness process call the pinned endpoint one call after another: half open a new
connection for each call, half keep their connection alive between calls (aiohttp's client;
neither retries a ``POST``). Meanwhile the harness sends ``SIGHUP`` every 2 s: the supervisor
replaces each worker by a new one and stops the old one once its replacement is ready.
Reported: the calls answered and failed, by kind of connection, and the errors. Target: none
lost. This is about correctness, not speed: the Python clients share the cores with the rest.
"""

from __future__ import annotations

import asyncio
import signal
import subprocess
from collections import Counter
from dataclasses import dataclass, field

import aiohttp

from bench.options import Options
from bench.procs import echo_agent, switchboard
from bench.report import Check, Section, Table
from bench.scenarios.unary import body

KINDS = ("new connection per call", "keep-alive")


@dataclass
class Tally:
    """The calls of one kind of client: answered, failed, and the failures by error."""

    answered: int = 0
    failed: int = 0
    errors: Counter[str] = field(default_factory=Counter)


async def _calls(
    session: aiohttp.ClientSession, url: str, tally: Tally, done: asyncio.Event
) -> None:
    """One client: calls one after another until ``done``."""
    data = body("SendMessage")
    headers = {"Content-Type": "application/json", "A2A-Version": "1.0"}
    while not done.is_set():
        try:
            async with session.post(url, data=data, headers=headers) as resp:
                answer = await resp.json()
                if resp.status != 200 or "result" not in answer:
                    raise ValueError(f"HTTP {resp.status}: {str(answer)[:80]}")
            tally.answered += 1
        except (aiohttp.ClientError, ValueError) as error:
            tally.failed += 1
            tally.errors[f"{type(error).__name__}: {str(error)[:80]}"] += 1


async def _reloads(
    proc: subprocess.Popen[bytes], url: str, clients: int, reloads: int, interval: float
) -> dict[str, Tally]:
    """Call ``url`` from ``clients`` clients of each kind while ``proc`` reloads."""
    tallies = {kind: Tally() for kind in KINDS}
    done = asyncio.Event()
    async with (
        aiohttp.ClientSession(connector=aiohttp.TCPConnector(force_close=True)) as fresh,
        aiohttp.ClientSession(connector=aiohttp.TCPConnector(limit=clients)) as pooled,
    ):
        sessions = dict(zip(KINDS, (fresh, pooled), strict=True))
        tasks = [
            asyncio.create_task(_calls(sessions[kind], url, tallies[kind], done))
            for kind in KINDS
            for _ in range(clients)
        ]
        try:
            for _ in range(reloads):
                await asyncio.sleep(interval)  # a harness's pace, not a wait for an event
                proc.send_signal(signal.SIGHUP)
            await asyncio.sleep(interval)
        finally:
            done.set()
            await asyncio.gather(*tasks)
    return tallies


async def run(opts: Options) -> Section:
    """Reload ``serve --workers 2`` under load; count the calls lost."""
    clients = 2 if opts.quick else 8
    reloads = 2 if opts.quick else 8
    interval = 1.0 if opts.quick else 2.0
    section = Section("7. reloads under load (serve --workers 2, SIGHUP)")
    seeds = opts.tmp / "reload-seeds.toml"
    async with echo_agent(opts.tmp, answer="task") as (agent, _agent_proc):
        seeds.write_text(f'[[agents]]\nid = "echo"\nurl = "{agent}"\n')  # known to each worker
        async with switchboard(opts.tmp, workers="2", seeds=str(seeds)) as (router, proc):
            tallies = await _reloads(proc, f"{router}/agents/echo", clients, reloads, interval)
    table = f"{router}/agents/echo"
    table = Table(
        f"{clients} clients of each kind, {reloads} reloads {interval:g} s apart",
        ["connection", "answered", "failed", "errors"],
    )
    for kind, tally in tallies.items():
        errors = "; ".join(f"{n} x {e}" for e, n in tally.errors.most_common(3)) or "-"
        table.rows.append([kind, tally.answered, tally.failed, errors])
    section.tables.append(table)
    lost = sum(t.failed for t in tallies.values())
    section.checks.append(Check("calls lost during reloads", lost, 0, "calls"))
    section.data = {
        "clients_per_kind": clients,
        "reloads": reloads,
        "interval_s": interval,
        "calls": {
            kind: {"answered": t.answered, "failed": t.failed, "errors": dict(t.errors)}
            for kind, t in tallies.items()
        },
    }
    return section
