"""The load generator, run in its own process: ``python -m bench.load '<json spec>'``.

Spec keys: ``kind`` (``unary``, ``stream`` or ``idle``), ``url``, ``headers``, ``body`` (the
JSON-RPC request text), ``concurrency``, and for unary/stream ``warmup`` and ``round``
(seconds) and ``rounds``; a unary spec's ``bodies_file`` (request texts, one per line) is
sent in turn, a line per request, instead of ``body``, from the line after those earlier runs
from that file sent (:func:`run_load` and :mod:`bench.wrk` keep count: ``bodies_offset``).
Closed loop: ``concurrency`` workers on one keep-alive connector, each sending its next
request when the previous answer is complete.

- ``unary``: per round, requests/s and latency p50/p99 (ms), errors.
- ``stream``: per round, SSE ``data:`` events/s over all streams and time to first event.
- ``idle``: opens ``concurrency`` streams (round-robin over ``urls`` if given), waits for
  the first event of each (or until none arrived for ``settle`` s), prints ``OPEN <opened>
  <seconds>``, holds them until a line arrives on stdin, then closes them.

A round lasts ``round`` seconds; what is still in flight then is cancelled: a stream's
events so far count, an unfinished call does not. Prints one JSON object
(``{"rounds": [...]}``) on the last line of stdout.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import aiohttp

from bench.echo_agent import raise_nofile


def percentile(values: list[float], q: float) -> float:
    """The ``q`` quantile (0..1) of ``values``, nearest rank; NaN when empty."""
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * len(ordered)) - 1))]


class _Shot:
    """One request: latency, time to first event, events so far, whether it ended or failed."""

    __slots__ = ("done", "events", "failed", "first", "latency")

    def __init__(self) -> None:
        self.latency = 0.0
        self.first = 0.0
        self.events = 0
        self.done = False
        self.failed = False


def _sender(
    http: aiohttp.ClientSession, spec: dict[str, Any], sent: itertools.count[int]
) -> Callable[[list[_Shot]], Awaitable[None]]:
    """The coroutine function that sends one request; ``sent`` counts them."""
    url, headers = spec["url"], {"Content-Type": "application/json", **spec.get("headers", {})}
    lines = [spec["body"].encode()]
    if spec.get("bodies_file"):
        lines = Path(spec["bodies_file"]).read_bytes().splitlines()
        start = int(spec.get("bodies_offset", 0)) % len(lines)
        lines = lines[start:] + lines[:start]
    bodies = itertools.cycle(lines)
    streaming = spec["kind"] == "stream"

    async def send(shots: list[_Shot]) -> None:
        shot = _Shot()
        shots.append(shot)  # counted even if the round ends while it is in flight
        start = time.perf_counter()
        try:
            next(sent)
            async with http.post(url, data=next(bodies), headers=headers) as resp:
                if streaming:
                    errors = 0
                    async for chunk in resp.content.iter_any():
                        if not shot.events and b"data:" in chunk:
                            shot.first = time.perf_counter() - start
                        shot.events += chunk.count(b"data:")
                        errors += chunk.count(b'"error"')
                    shot.failed = resp.status != 200 or errors > 0
                else:
                    data = await resp.read()
                    shot.failed = resp.status != 200 or b'"error"' in data
        except (aiohttp.ClientError, OSError):
            shot.failed = True
        shot.latency = time.perf_counter() - start
        shot.done = True

    return send


async def _round(
    send: Callable[[list[_Shot]], Awaitable[None]], workers: int, seconds: float
) -> tuple[list[_Shot], float]:
    """``workers`` closed loops for ``seconds``; requests still in flight then are cancelled
    (a stream's events so far count, an unfinished call does not)."""
    shots: list[_Shot] = []

    async def worker() -> None:
        while True:
            await send(shots)

    start = time.perf_counter()
    tasks = [asyncio.create_task(worker()) for _ in range(workers)]
    await asyncio.sleep(seconds)
    wall = time.perf_counter() - start
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    return shots, wall


def _summary(kind: str, shots: list[_Shot], wall: float) -> dict[str, Any]:
    done = [s for s in shots if s.done]
    ok = [s for s in done if not s.failed]
    row: dict[str, Any] = {"requests": len(done), "errors": len(done) - len(ok), "seconds": wall}
    if kind == "stream":
        started = [s for s in shots if s.events and not s.failed]
        row["events_per_s"] = sum(s.events for s in started) / wall
        row["ttfe_p50_ms"] = percentile([s.first * 1000 for s in started], 0.5)
        row["ttfe_p99_ms"] = percentile([s.first * 1000 for s in started], 0.99)
    else:
        row["rps"] = len(ok) / wall
        row["p50_ms"] = percentile([s.latency * 1000 for s in ok], 0.5)
        row["p99_ms"] = percentile([s.latency * 1000 for s in ok], 0.99)
    return row


async def _timed(spec: dict[str, Any]) -> dict[str, Any]:
    workers = int(spec["concurrency"])
    connector = aiohttp.TCPConnector(limit=workers, limit_per_host=workers)
    timeout = aiohttp.ClientTimeout(total=None, sock_read=60)
    async with aiohttp.ClientSession(connector=connector, timeout=timeout) as http:
        sent = itertools.count()
        send = _sender(http, spec, sent)
        await _round(send, workers, float(spec.get("warmup", 1.0)))
        rounds = []
        for _ in range(int(spec.get("rounds", 3))):
            shots, wall = await _round(send, workers, float(spec.get("round", 2.0)))
            rounds.append(_summary(spec["kind"], shots, wall))
    return {"rounds": rounds, "sent": next(sent)}


async def _idle(spec: dict[str, Any]) -> dict[str, Any]:
    count = int(spec["concurrency"])
    urls = spec.get("urls") or [spec["url"]]
    settle = float(spec.get("settle", 3.0))
    headers = {"Content-Type": "application/json", **spec.get("headers", {})}
    connector = aiohttp.TCPConnector(limit=0)
    timeout = aiohttp.ClientTimeout(total=None, sock_read=None)
    async with aiohttp.ClientSession(connector=connector, timeout=timeout) as http:
        got: set[int] = set()
        release = asyncio.Event()

        async def hold(n: int) -> bool:
            url = urls[n % len(urls)]
            async with http.post(url, data=spec["body"].encode(), headers=headers) as resp:
                first = b""
                async for chunk in resp.content.iter_any():
                    first += chunk
                    if b"data:" in first:
                        break
                ok = resp.status == 200 and b'"error"' not in first
                if ok:
                    got.add(n)
                await release.wait()
                return ok

        start = time.perf_counter()
        tasks = [asyncio.create_task(hold(n)) for n in range(count)]
        seen, quiet = 0, time.perf_counter()
        while len(got) < count and time.perf_counter() - quiet < settle:
            await asyncio.sleep(0.05)
            if len(got) != seen:
                seen, quiet = len(got), time.perf_counter()
        opened = len(got)
        print(f"OPEN {opened} {time.perf_counter() - start:.3f}", flush=True)
        await asyncio.get_running_loop().run_in_executor(None, sys.stdin.readline)
        for n, task in enumerate(tasks):
            if n not in got:
                task.cancel()  # still waiting for its first event
        release.set()
        results = await asyncio.gather(*tasks, return_exceptions=True)
    failed = sum(r is False or isinstance(r, Exception) for r in results)
    return {"opened": opened, "not_opened": count - opened, "failed": failed}


def main() -> None:
    """Run the spec given as the first argument; print the JSON result."""
    raise_nofile()
    spec = json.loads(sys.argv[1])
    run = _idle if spec["kind"] == "idle" else _timed
    print(json.dumps(asyncio.run(run(spec))), flush=True)


if __name__ == "__main__":
    main()


# --- the parent's side --------------------------------------------------------------------------


_SENT: dict[str, int] = {}  # bodies file -> lines sent from it so far: where a run starts


def bodies_offset(spec: dict[str, Any]) -> int:
    """Where a run of ``spec`` starts in its ``bodies_file``: after the lines earlier runs
    sent (0 without a file)."""
    return _SENT.get(spec.get("bodies_file") or "", 0)


def bodies_sent(spec: dict[str, Any], count: int) -> None:
    """Note that a run of ``spec`` sent ``count`` lines of its ``bodies_file``."""
    if spec.get("bodies_file"):
        _SENT[spec["bodies_file"]] = bodies_offset(spec) + count


async def run_load(spec: dict[str, Any]) -> dict[str, Any]:
    """Run a ``unary`` or ``stream`` spec in a new load process; its result."""
    spec = {**spec, "bodies_offset": bodies_offset(spec)}
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "bench.load", json.dumps(spec), stdout=asyncio.subprocess.PIPE
    )
    out, _ = await proc.communicate()
    if proc.returncode != 0:
        raise RuntimeError(f"load generator failed ({proc.returncode}) for {spec['url']}")
    result: dict[str, Any] = json.loads(out.splitlines()[-1])
    bodies_sent(spec, int(result.get("sent", 0)))
    return result
