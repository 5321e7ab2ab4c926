"""Scenario 2, streaming: the echo agent streams N artifact events as fast as it can.

``SendStreamingMessage`` directly, through Switchboard's skill-matched ``POST /`` (and nginx
when installed), at 1 and 100 concurrent streams; events/s over all streams and time to the
first event (the agent's Task event). Rounds are twice as long as the unary ones.

Time to first event is also measured on short streams, one at a time (the Task and the
final status, nothing behind them), through ``POST /`` and the per-agent endpoint: that is
the latency target's measure. Behind the first event of a 1,000-event stream the agent, the
router and the load generator all want a core at once on a 2-core machine, so that column
says more about the scheduler than about the relay (see docs/benchmarks.md).
"""

from __future__ import annotations

import contextlib
from typing import Any

from bench.load import run_load
from bench.options import Options
from bench.report import Check, Section, Table, median, ratio
from bench.scenarios.unary import body, contestants


async def run(opts: Options) -> Section:
    """Measure each contestant at each number of concurrent streams."""
    section = Section("2. streaming (SendStreamingMessage, A2A 1.0)")
    levels = (1, 10) if opts.quick else (1, 100)
    events = 20 if opts.quick else 1000
    async with contextlib.AsyncExitStack() as stack:
        urls = await contestants(opts, stack, section.notes)
        pinned = urls.pop("pinned")
        spec = {
            "kind": "stream",
            "headers": {"A2A-Version": "1.0"},
            "body": body("SendStreamingMessage", metadata={"bench": {"events": events}}),
            **opts.timing(),
            # streams start slower than calls: longer rounds, so that a round is not mostly
            # the start-up of streams cancelled at its end
            "round": 2 * opts.round_seconds,
            "warmup": 2 * opts.warmup_seconds,
        }
        results: dict[int, dict[str, dict[str, float]]] = {}
        for level in levels:
            row = results[level] = {}
            for name, url in urls.items():
                out = await run_load({**spec, "url": url, "concurrency": level})
                rounds = out["rounds"]
                keys = ("events_per_s", "ttfe_p50_ms", "ttfe_p99_ms", "requests", "errors")
                row[name] = {k: median(rounds, k) for k in keys}
        short = await _short_streams(opts, spec, {**urls, "pinned": pinned})
    table = Table(
        f"medians of rounds; {events} artifact events per stream (+ task and status events)",
        [
            "contestant",
            "streams",
            "events/s",
            "/ direct",
            "first event p50 ms",
            "p99 ms",
            "+ over direct ms",
            "streams done",
            "errors",
        ],
    )
    for level, row in results.items():
        direct = row["direct"]
        for name, m in row.items():
            table.rows.append(
                [
                    name,
                    level,
                    m["events_per_s"],
                    ratio(m["events_per_s"], direct["events_per_s"]),
                    m["ttfe_p50_ms"],
                    m["ttfe_p99_ms"],
                    m["ttfe_p50_ms"] - direct["ttfe_p50_ms"],
                    int(m["requests"]),
                    int(m["errors"]),
                ]
            )
    section.tables.append(table)
    section.data = {"events_per_stream": events, "levels": {str(k): v for k, v in results.items()}}
    for level, row in results.items():
        r, d = row["router"], row["direct"]
        section.checks.append(
            Check(
                f"router events/s / direct, {level} streams",
                ratio(r["events_per_s"], d["events_per_s"]),
                0.5,  # issue 19
                "",
                higher_is_better=True,
            )
        )
    section.tables.append(
        Table(
            "time to first event, short streams (the Task and the final status) one at a time",
            ["contestant", "first event p50 ms", "p99 ms", "+ over direct ms", "streams"],
            [
                [
                    name,
                    m["ttfe_p50_ms"],
                    m["ttfe_p99_ms"],
                    m["ttfe_p50_ms"] - short["direct"]["ttfe_p50_ms"],
                    int(m["requests"]),
                ]
                for name, m in short.items()
            ],
        )
    )
    section.data["short_streams"] = short
    for name in ("router", "pinned"):
        section.checks.append(
            Check(
                f"{name} first event - direct, short streams",
                short[name]["ttfe_p50_ms"] - short["direct"]["ttfe_p50_ms"],
                1.0,  # issue 19
                "ms",
            )
        )
    return section


async def _short_streams(
    opts: Options, spec: dict[str, Any], urls: dict[str, str]
) -> dict[str, dict[str, float]]:
    """Time to first event of short streams, one at a time, per contestant: medians of rounds."""
    short = {**spec, "body": body("SendStreamingMessage", metadata={"bench": {"events": 0}})}
    results = {}
    for name, url in urls.items():
        out = await run_load({**short, "url": url, "concurrency": 1})
        keys = ("ttfe_p50_ms", "ttfe_p99_ms", "requests")
        results[name] = {k: median(out["rounds"], k) for k in keys}
    return results
