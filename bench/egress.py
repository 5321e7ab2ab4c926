"""``python -m bench.egress``: the client CPU of a call to an agent, direct and through an
outbound proxy (``SWITCHBOARD_OUTBOUND_PROXY``), for each upstream client.

The echo agent (:mod:`bench.echo_agent`) and a forward proxy (the tests' stdlib one,
``tests/support/proxy.py``, which keeps a client's connection while answers carry a
``Content-Length``) run in their own processes; this process runs only the router's
:class:`~router.forward.upstream.Upstream` on uvloop, ``--concurrency`` calls at a time for
``--seconds`` per round, and reads its own CPU time (user + system): what a router process
spends per call in the client, the proxy's and the agent's work left out. Rounds alternate
between the four contestants (lean or aiohttp, direct or proxied), ``--rounds`` each; the
medians are printed.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import resource
import statistics
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from pathlib import Path

from bench.procs import echo_agent
from registry.egress import OutboundProxy
from router.choose.choice import Target
from router.forward.upstream import Upstream

ROOT = Path(__file__).resolve().parent.parent
PARAMS = {"message": {"role": "ROLE_USER", "messageId": "m", "parts": [{"text": "hi"}]}}


def _cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


@contextlib.asynccontextmanager
async def _proxy(tmp: Path) -> AsyncIterator[str]:
    """The tests' forward proxy as a process; its URL."""
    command = [sys.executable, "-m", "tests.support.proxy", "--log", str(tmp / "proxy.log")]
    process = await asyncio.create_subprocess_exec(
        *command, cwd=str(ROOT), stdout=asyncio.subprocess.PIPE
    )
    try:
        assert process.stdout is not None
        line = (await process.stdout.readline()).decode()
        yield "http://" + line.removeprefix("listening on ").strip()
    finally:
        process.terminate()
        await process.wait()


async def _round(up: Upstream, target: Target, seconds: float, concurrency: int) -> float:
    """Calls for ``seconds``; the CPU seconds per call of this process (microseconds)."""
    calls = 0
    stop = time.monotonic() + seconds

    async def caller() -> None:
        nonlocal calls
        while time.monotonic() < stop:
            await up.call(target, "SendMessage", PARAMS, request_id=1, headers={})
            calls += 1

    before = _cpu()
    await asyncio.gather(*(caller() for _ in range(concurrency)))
    return (_cpu() - before) / max(calls, 1) * 1e6


async def measure(seconds: float, rounds: int, concurrency: int) -> dict[str, float]:
    """The median client CPU per call (µs) of each contestant."""
    with tempfile.TemporaryDirectory() as tmp:
        async with echo_agent(Path(tmp)) as (base, _agent), _proxy(Path(tmp)) as proxy_url:
            proxy = OutboundProxy.parse(proxy_url)
            target = Target("echo", base + "/", "1.0")
            contestants: dict[str, Upstream] = {}
            for client in ("lean", "aiohttp"):
                for way, via in (("direct", None), ("proxied", proxy)):
                    contestants[f"{client} {way}"] = Upstream(
                        connect_timeout=5, read_timeout=30, lean_calls=client == "lean",
                        per_agent_limit=concurrency, proxy=via,
                    )  # fmt: skip
            results: dict[str, list[float]] = {name: [] for name in contestants}
            try:
                for up in contestants.values():
                    await up.start()
                    await _round(up, target, 0.3, concurrency)  # warm-up: connections made
                for n in range(rounds):
                    order = list(contestants.items())
                    for name, up in order if n % 2 == 0 else reversed(order):
                        results[name].append(await _round(up, target, seconds, concurrency))
            finally:
                for up in contestants.values():
                    await up.close()
    return {name: statistics.median(values) for name, values in results.items()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=2.0)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--concurrency", type=int, default=16)
    args = parser.parse_args(argv)
    try:
        import uvloop

        runner = uvloop.run
    except ImportError:  # pragma: no cover - uvloop is a dependency on CPython
        runner = asyncio.run
    medians = runner(measure(args.seconds, args.rounds, args.concurrency))
    for name, value in medians.items():
        print(f"{name:16} {value:7.1f} µs of client CPU per call")
    for client in ("lean", "aiohttp"):
        extra = medians[f"{client} proxied"] / medians[f"{client} direct"] - 1
        print(f"{client}: through the proxy {extra:+.0%} of its direct cost")
    lean, aio = medians["lean proxied"], medians["aiohttp proxied"]
    print(f"proxied: lean {lean:.1f} µs, aiohttp {aio:.1f} µs ({lean / aio - 1:+.0%})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
