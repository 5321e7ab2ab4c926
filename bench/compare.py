"""``python -m bench.compare BEFORE [AFTER]``: two versions of Switchboard side by side.

The scenarios of ``python -m bench`` measure one version at a time, a few seconds per
contestant. On a small shared machine their figures move by a fifth from one run to the
next, which hides most single changes. This comparison runs both versions at once, in front
of one echo agent (answering with a Task), and alternates between them: at each concurrency,
``--pairs`` pairs of wrk runs, the side that goes first alternating, each run after a warm-up.
Drift of the machine then falls on both sides alike, and the medians of the pairs compare.

With ``--distinct``, each side also holds the routing evaluation's 42 cards (all answered by
the echo agent) and every request is a message no earlier one was (:mod:`bench.catalog`): the
router embeds each message, as real traffic makes it do.

``--workers N`` runs each side as ``serve --workers N``.

Per run it records wrk's requests/s and p50, and the CPU time the Switchboard process (and
its workers) used per request (user + system, all threads, from ``/proc/<pid>/stat``): the
figure least moved by the load generator and the agent sharing the cores.

``BEFORE`` and ``AFTER`` are git revisions of this repository (checked out into temporary
worktrees, removed at the end) or directories holding a checkout; ``AFTER`` defaults to this
checkout as it is. Both run on this environment's installed packages. Linux and wrk only.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

from bench.catalog import distinct_bodies, register_catalog
from bench.procs import echo_agent, register, switchboard
from bench.run import machine
from bench.scenarios.unary import body
from bench.wrk import find, run_unary

ROOT = Path(__file__).resolve().parent.parent
_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def cpu_seconds(pid: int) -> float:
    """User plus system CPU time of process ``pid`` (all its threads) and of its children
    now alive (the workers of ``serve --workers``), so far, in seconds."""
    total = 0.0
    for one in [pid, *_children(pid)]:
        try:
            fields = Path(f"/proc/{one}/stat").read_text().rpartition(")")[2].split()
        except OSError:  # ended meanwhile
            continue
        total += (int(fields[11]) + int(fields[12])) / _TICKS
    return total


def _children(pid: int) -> list[int]:
    """The pids of the children of ``pid`` (Linux ``/proc/<pid>/task/*/children``)."""
    found: list[int] = []
    for task in Path(f"/proc/{pid}/task").glob("*"):
        with contextlib.suppress(OSError):
            found += [int(child) for child in (task / "children").read_text().split()]
    return found


@contextlib.contextmanager
def checkout(what: str | None) -> Iterator[Path]:
    """The directory of ``what``: this checkout (None), a directory, or a git revision
    checked out into a temporary worktree (removed afterwards)."""
    if what is None:
        yield ROOT
        return
    if Path(what).is_dir():
        yield Path(what).resolve()
        return
    where = Path(tempfile.mkdtemp(prefix="switchboard-compare-"))
    shutil.rmtree(where)
    subprocess.run(
        ["git", "-C", str(ROOT), "worktree", "add", "--detach", "-q", str(where), what],
        check=True,
    )
    try:
        yield where
    finally:
        subprocess.run(
            ["git", "-C", str(ROOT), "worktree", "remove", "--force", str(where)], check=False
        )


async def _run(spec: dict[str, Any], pid: int, seconds: float) -> dict[str, float]:
    """One measured wrk run after a warm-up: requests/s, p50 and CPU ms per request."""
    await run_unary({**spec, "rounds": 0, "warmup": 1.0})
    started = cpu_seconds(pid)
    rounds = (await run_unary({**spec, "rounds": 1, "round": seconds, "warmup": 0}))["rounds"]
    used = cpu_seconds(pid) - started
    done = rounds[0]
    if done["errors"]:
        raise RuntimeError(f"{spec['url']}: {done['errors']} errors under load")
    return {
        "rps": done["rps"],
        "p50_ms": done["p50_ms"],
        "cpu_ms": 1000 * used / max(done["requests"], 1),
    }


@contextlib.asynccontextmanager
async def sides(
    sources: dict[str, Path], tmp: Path, catalog: bool = False, workers: int = 1
) -> AsyncIterator[tuple[dict[str, tuple[str, int]], str]]:
    """The echo agent and one Switchboard (of ``workers`` worker processes) per source, the
    agent registered on each (and with ``catalog`` the evaluation's cards,
    :func:`bench.catalog.register_catalog`): the base URL and pid of each side, and the
    agent's URL."""
    async with contextlib.AsyncExitStack() as stack:
        agent, _ = await stack.enter_async_context(echo_agent(tmp, answer="task"))
        started = {}
        for name, source in sources.items():
            base, proc = await stack.enter_async_context(
                switchboard(tmp, source=source, workers=str(workers))
            )
            await register(base, {"url": agent, "id": "echo"})
            if catalog:
                await register_catalog(base, agent)
            started[name] = (base, proc.pid)
        yield started, agent


async def compare(
    sources: dict[str, Path],
    path: str,
    levels: list[int],
    pairs: int,
    seconds: float,
    distinct: bool = False,
    workers: int = 1,
) -> dict[int, dict[str, list[dict[str, float]]]]:
    """Every run of every side at every concurrency level (see the module docs)."""
    results: dict[int, dict[str, list[dict[str, float]]]] = {}
    with tempfile.TemporaryDirectory(prefix="switchboard-compare-") as tmp:
        async with sides(sources, Path(tmp), distinct, workers) as (started, _agent):
            spec = {
                "kind": "unary",
                "headers": {"A2A-Version": "1.0"},
                "body": body("SendMessage"),
            }
            if distinct:
                spec["bodies_file"] = str(distinct_bodies(Path(tmp) / "bodies.jsonl"))
            names = list(sources)
            for level in levels:
                runs: dict[str, list[dict[str, float]]] = {name: [] for name in names}
                for pair in range(pairs):
                    for name in names if pair % 2 == 0 else reversed(names):
                        base, pid = started[name]
                        load = {**spec, "url": f"{base}{path}", "concurrency": level}
                        runs[name].append(await _run(load, pid, seconds))
                results[level] = runs
    return results


def report(results: dict[int, dict[str, list[dict[str, float]]]]) -> str:
    """The medians per side and level, then after / before: the median of the pairs' own
    ratios (each pair ran back to back, so the machine's drift cancels) and their range."""
    lines = [
        "medians of the runs; after/before: median of the pairs' ratios [lowest, highest]",
        f"{'side':<8} {'conc':>4} {'req/s':>8} {'p50 ms':>8} {'CPU ms/req':>11} {'runs':>5}",
    ]
    for level, runs in results.items():
        for name, values in runs.items():
            m = {k: statistics.median(v[k] for v in values) for k in values[0]}
            lines.append(
                f"{name:<8} {level:>4} {m['rps']:>8.1f} {m['p50_ms']:>8.3f} "
                f"{m['cpu_ms']:>11.3f} {len(values):>5}"
            )
        pairs = list(zip(runs["before"], runs["after"], strict=True))
        cells = []
        for key in ("rps", "p50_ms", "cpu_ms"):
            ratios = [after[key] / before[key] for before, after in pairs]
            cells.append(
                f"{key.removesuffix('_ms')} {statistics.median(ratios):.3f} "
                f"[{min(ratios):.3f}, {max(ratios):.3f}]"
            )
        lines.append(f"after/before {level:>4}: " + ", ".join(cells))
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    """Parse arguments, compare, print (and write ``--json``)."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("before", help="git revision or directory")
    parser.add_argument("after", nargs="?", help="git revision or directory (default: here)")
    parser.add_argument("--path", default="/agents/echo", help="endpoint (default: pinned)")
    parser.add_argument("--concurrency", default="1,64", help="levels (default 1,64)")
    parser.add_argument("--pairs", type=int, default=6, help="pairs of runs per level")
    parser.add_argument("--seconds", type=float, default=3.0, help="length of a run")
    parser.add_argument("--json", type=Path, help="also write every run here")
    parser.add_argument(
        "--distinct",
        action="store_true",
        help="the evaluation's 42 cards and a new message per request (bench.catalog)",
    )
    parser.add_argument("--workers", type=int, default=1, help="serve --workers (default 1)")
    args = parser.parse_args(argv)
    if find() is None:
        parser.error("wrk is not installed (apt-get install wrk)")
    levels = [int(x) for x in args.concurrency.split(",")]
    load = os.getloadavg()
    with checkout(args.before) as before, checkout(args.after) as after:
        sources = {"before": before, "after": after}
        revisions = {name: _revision(where) for name, where in sources.items()}
        results = asyncio.run(
            compare(
                sources, args.path, levels, args.pairs, args.seconds, args.distinct, args.workers
            )
        )
    print(report(results))
    if args.json:
        meta = {
            "argv": sys.argv[1:] if argv is None else list(argv),
            "revisions": revisions,
            "machine": machine(),
            "load_average_start": load,
            "load_average_end": os.getloadavg(),
        }
        runs = {str(k): v for k, v in results.items()}
        args.json.write_text(json.dumps({"meta": meta, "levels": runs}, indent=1) + "\n")
    return 0


def _revision(where: Path) -> str:
    """The commit checked out at ``where`` (``+`` when its files differ from it)."""
    head = subprocess.run(
        ["git", "-C", str(where), "rev-parse", "--short", "HEAD"], capture_output=True, text=True
    ).stdout.strip()
    dirty = subprocess.run(
        ["git", "-C", str(where), "status", "--porcelain", "--untracked-files=no"],
        capture_output=True,
        text=True,
    ).stdout.strip()
    return head + ("+" if dirty else "")


if __name__ == "__main__":
    raise SystemExit(main())
