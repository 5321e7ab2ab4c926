"""The unary load generator in C: wrk (Debian package ``wrk``) when it is on ``PATH``.

A Python load generator (:mod:`bench.load`) needs about a core to keep 64 connections busy,
and on a small machine takes it from the contestants, which flatters the slower one. wrk
(one thread, closed loop, keep-alive) needs a fraction of that. It sends the same JSON-RPC
POST as :mod:`bench.load` (the body and headers go to ``bench/wrk_post.lua`` through the
environment; wrk counts whole seconds: a round lasts the spec's ``round`` rounded, at least
1 s) and its results have the same keys: per round ``requests``, ``errors``
(socket errors and non-2xx answers), ``seconds``, ``rps``, ``p50_ms``, ``p99_ms``. A spec's
``bodies_file`` (request texts, one per line) is sent in turn, a line per request, each run
starting where the last run from that file stopped.
Answers with a JSON-RPC error are not counted by wrk: the scenario checks one answer first.
Streaming stays on the Python generator (wrk does not read SSE events).
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

from bench.load import bodies_offset, bodies_sent, run_load

SCRIPT = Path(__file__).with_name("wrk_post.lua")


def find() -> str | None:
    """The wrk executable on ``PATH``, or None."""
    return shutil.which("wrk")


def generator() -> str:
    """What :func:`run_unary` uses here: ``wrk X.Y`` or ``python (bench.load)``."""
    executable = find()
    if executable is None:
        return "python (bench.load): wrk is not installed"
    return f"wrk ({executable})"


async def run_unary(spec: dict[str, Any]) -> dict[str, Any]:
    """Run a ``unary`` load spec (:mod:`bench.load`) with wrk when installed, else with the
    Python generator; ``{"rounds": [...]}``."""
    executable = find()
    if executable is None:
        return await run_load(spec)
    with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as body:
        body.write(spec["body"])
    try:
        env = {
            **os.environ,
            "BENCH_WRK_BODY": body.name,
            "BENCH_WRK_HEADERS": "".join(f"{k}: {v}\n" for k, v in spec["headers"].items()),
            "BENCH_WRK_BODIES": spec.get("bodies_file") or "",
        }
        warmup = float(spec.get("warmup", 1.0))
        if warmup > 0:  # 0: none (the caller warmed up)
            await _wrk(executable, spec, warmup, env)
        rounds = [
            await _wrk(executable, spec, float(spec.get("round", 2.0)), env)
            for _ in range(int(spec.get("rounds", 3)))
        ]
    finally:
        os.unlink(body.name)
    return {"rounds": rounds}


async def _wrk(
    executable: str, spec: dict[str, Any], seconds: float, env: dict[str, str]
) -> dict[str, Any]:
    connections = int(spec["concurrency"])
    env = {**env, "BENCH_WRK_OFFSET": str(bodies_offset(spec))}
    proc = await asyncio.create_subprocess_exec(
        executable,
        *("-t", "1", "-c", str(connections), "-d", f"{max(1, round(seconds))}s"),
        *("--timeout", "30s", "-s", str(SCRIPT), spec["url"]),
        env=env,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    out, _ = await proc.communicate()
    text = out.decode(errors="replace")
    lines = [line for line in text.splitlines() if line.startswith("BENCH ")]
    if proc.returncode != 0 or not lines:
        raise RuntimeError(f"wrk failed ({proc.returncode}) for {spec['url']}:\n{text}")
    raw = json.loads(lines[-1].removeprefix("BENCH "))
    bodies_sent(spec, raw["requests"] + connections)  # those in flight at the end were sent
    wall = raw["duration_us"] / 1e6
    ok = raw["requests"] - raw["status_errors"]
    return {
        "requests": raw["requests"],
        "errors": raw["status_errors"] + raw["socket_errors"],
        "seconds": wall,
        "rps": ok / wall if wall else 0.0,
        "p50_ms": raw["p50_us"] / 1000,
        "p99_ms": raw["p99_us"] / 1000,
    }
