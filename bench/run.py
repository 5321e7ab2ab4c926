"""``python -m bench [--quick] [--only unary,streaming,...]``: run scenarios, print, save JSON."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import importlib
import os
import platform
import sys
import tempfile
import time
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path

from bench.options import Options
from bench.report import Section, write

SCENARIOS = (
    "unary",
    "streaming",
    "routing",
    "crawl",
    "streams",
    "accuracy",
    "reload",
    "writes",
    "search",
)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m bench", description=__doc__)
    parser.add_argument("--quick", action="store_true", help="tiny sizes (a smoke test)")
    parser.add_argument(
        "--only", help=f"comma-separated scenarios to run (default all: {','.join(SCENARIOS)})"
    )
    parser.add_argument("--rounds", type=int, help="timed rounds per measurement (default 3)")
    parser.add_argument("--round-seconds", type=float, help="length of a round (default 1.5)")
    parser.add_argument("--nginx", help="nginx executable (default: nginx on PATH)")
    parser.add_argument(
        "--postgres",
        default=os.environ.get("BENCH_POSTGRES_URL", "postgresql://postgres@127.0.0.1:5432/test"),
        help="PostgreSQL server for the routing scenario (a scratch database is created and "
        "dropped); 'none' to skip (default $BENCH_POSTGRES_URL or %(default)s)",
    )
    parser.add_argument("--no-save", action="store_true", help="do not write bench/results/")
    return parser


async def _run(names: Sequence[str], opts: Options) -> list[Section]:
    sections = []
    for name in names:
        module = importlib.import_module(f"bench.scenarios.{name}")
        start = time.perf_counter()
        section: Section = await module.run(opts)
        section.notes.append(f"scenario took {time.perf_counter() - start:.1f} s")
        print(section.render() + "\n", flush=True)
        sections.append(section)
    return sections


def machine() -> dict[str, object]:
    """What the numbers were measured on: CPU model, the CPUs this process may use (what
    ``serve`` starts as many workers as), memory, kernel, the unary load generator."""
    from bench.wrk import generator
    from router.cpus import available_cpus

    def first(path: str, key: str) -> str | None:
        with contextlib.suppress(OSError):
            for line in Path(path).read_text().splitlines():
                if line.startswith(key):
                    return line.split(":", 1)[1].strip()
        return None

    return {
        "cpu_model": first("/proc/cpuinfo", "model name") or platform.processor(),
        "cpus_online": os.cpu_count(),
        "cpus_available": available_cpus(),
        "memory": first("/proc/meminfo", "MemTotal"),
        "kernel": platform.release(),
        "unary_load_generator": generator(),
    }


def main(argv: Sequence[str] | None = None) -> int:
    """Run the chosen scenarios; exit status 0 even when a target is missed."""
    args = _parser().parse_args(argv)
    names = [n.strip() for n in args.only.split(",")] if args.only else list(SCENARIOS)
    unknown = [n for n in names if n not in SCENARIOS]
    if unknown:
        print(f"unknown scenario(s) {', '.join(unknown)}; choose from {', '.join(SCENARIOS)}")
        return 2
    with tempfile.TemporaryDirectory(prefix="switchboard-bench-") as tmp:
        opts = Options(
            tmp=Path(tmp),
            quick=args.quick,
            rounds=args.rounds or (2 if args.quick else 3),
            round_seconds=args.round_seconds or (0.3 if args.quick else 1.5),
            warmup_seconds=0.2 if args.quick else 0.5,
            nginx=args.nginx,
            postgres=None if args.postgres == "none" else args.postgres,
        )
        load = os.getloadavg()
        print(
            f"switchboard bench: {', '.join(names)}{' (quick)' if args.quick else ''}; "
            f"{os.cpu_count()} CPUs, load average {load[0]:.2f} at start\n",
            flush=True,
        )
        sections = asyncio.run(_run(names, opts))
    meta = {
        "started": datetime.now(UTC).isoformat(),
        "argv": sys.argv[1:] if argv is None else list(argv),
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "cpus": os.cpu_count(),
        "machine": machine(),
        "load_average_start": load,
        "load_average_end": os.getloadavg(),
    }
    if not args.no_save:
        print(f"results written to {write(sections, meta)}")
    return 0
