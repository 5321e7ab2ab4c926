"""Run the official A2A conformance suite (a2a-tck) directly and through Switchboard.

``python -m bench.conformance --tck DIR [--tck-python PY] [--transport jsonrpc|rest|grpc]
[--agent 1.0|both] [--out FILE]`` starts an a2a-sdk 1.x agent (:mod:`bench.tckagent`: the test
suite's task-echo agent, JSON-RPC at its base URL plus the binding under test, serving A2A
1.0, or 1.0 and 0.3: by default what the suite's version needs), Switchboard in front of it
(SQLite in a temporary directory, the agent registered as ``echo``, the default route pointing
at it, its gRPC port on for ``grpc``), and runs the suite three times on that one binding:

- ``direct``: against the agent itself;
- ``per-agent``: against ``/agents/echo`` (the card at ``/agents/echo/.well-known/...``);
- ``root``: against the router's skill-routed root, with ``SWITCHBOARD_DEFAULT_AGENT=echo``.

The suite picks each binding's URL from the card it fetches at the SUT URL, and runs only the
chosen binding: the 1.0 suite with ``--transport=jsonrpc|http_json|grpc``, the 0.3 suite with
``--transports=jsonrpc|rest`` and the matching ``--transport-strategy=prefer_...``. gRPC is
run with the 1.0 suite only (the router serves 1.0's gRPC service, not 0.3's).

``DIR`` is a checkout of ``github.com/a2aproject/a2a-tck`` (branch ``1.0-dev`` for A2A 1.0,
``0.3.x`` for 0.3), with its dependencies installed in ``PY`` (default ``DIR/.venv/bin/python``:
``python3 -m venv DIR/.venv && DIR/.venv/bin/pip install -e DIR``). The suite is not on PyPI,
so CI cannot run it; rerun this whenever the router's protocol surface changes and update
``docs/conformance.md``. It prints, per run, the tests passed, failed, skipped and expected
failures, and the tests whose outcome differs from the direct run; ``--out`` writes them as
JSON.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET
from collections import Counter
from pathlib import Path
from typing import Any

import aiohttp
from aiohttp import web

from registry.api import REGISTRY
from registry.settings import Settings
from router.app import create_app


def outcomes(junit: Path) -> dict[str, str]:
    """Test id -> passed / failed / skipped / xfailed / error, from a JUnit XML report."""
    tree = ET.parse(junit)
    out: dict[str, str] = {}
    for case in tree.iter("testcase"):
        name = f"{case.get('classname')}::{case.get('name')}"
        outcome = "passed"
        for child in case:
            if child.tag in ("failure", "error"):
                outcome = "failed" if child.tag == "failure" else "error"
            elif child.tag == "skipped":
                kind = (child.get("type") or "") + (child.get("message") or "")
                outcome = "xfailed" if "xfail" in kind.lower() else "skipped"
        out[name] = outcome
    return out


def levels(report: Path, transport: str = "jsonrpc") -> dict[str, dict[str, int]]:
    """Per requirement level (MUST, SHOULD, MAY): how many requirements have each status on
    ``transport`` (the suite's name: ``jsonrpc``, ``http_json``, ``grpc``), from the 1.0
    suite's compatibility report."""
    found: dict[str, Counter[str]] = {}
    data = json.loads(report.read_text())
    for requirement in data.get("per_requirement", {}).values():
        status = requirement.get("transports", {}).get(transport)
        if status is not None:
            found.setdefault(str(requirement.get("level")), Counter())[str(status)] += 1
    return {level: dict(counts) for level, counts in sorted(found.items())}


SUITE_TRANSPORT = {
    "1.0": {"jsonrpc": "jsonrpc", "rest": "http_json", "grpc": "grpc"},
    "0.3": {"jsonrpc": "jsonrpc", "rest": "rest"},
}
"""Per suite version, the runner's ``--transport`` -> the suite's name for that binding."""


def run_suite(
    tck: Path, python: Path, sut: str, label: str, transport: str = "jsonrpc"
) -> tuple[dict[str, str], dict[str, dict[str, int]]]:
    """Run the suite against ``sut`` on ``transport`` (``jsonrpc``, ``rest``, ``grpc``); the
    outcome of every test, and the requirements' statuses per level (1.0 suite only)."""
    reports = Path(tempfile.mkdtemp(prefix=f"tck-{label}-"))
    junit = reports / "junit.xml"
    compatibility = reports / "compatibility"
    version = suite_version(tck)
    name = SUITE_TRANSPORT[version][transport]
    if version == "1.0":  # branch 1.0-dev
        target = [
            "tests/compatibility",
            f"--sut-host={sut}",
            f"--transport={name}",
            f"--compatibility-report={compatibility}",
        ]
    else:  # branch 0.3.x
        target = [
            "tests/mandatory",
            "tests/optional",
            f"--sut-url={sut}",
            "--test-scope=all",
            f"--transports={name}",
            f"--transport-strategy=prefer_{name}",
        ]
    command = [
        str(python),
        "-m",
        "pytest",
        *target,
        "-q",
        "-p",
        "no:cacheprovider",
        f"--junitxml={junit}",
    ]
    print(f"[{label}] {sut} ({name})", flush=True)
    done = subprocess.run(command, cwd=tck, check=False, capture_output=True, text=True)
    (reports / "output.txt").write_text(done.stdout + done.stderr)
    print(f"[{label}] the suite's output: {reports / 'output.txt'}", flush=True)
    report = compatibility.with_suffix(".json")
    return (
        outcomes(junit) if junit.exists() else {},
        levels(report, name) if report.exists() else {},
    )


BINDINGS = {"jsonrpc": "JSONRPC", "rest": "HTTP+JSON", "grpc": "GRPC"}
"""The runner's ``--transport`` -> the binding's name in agent cards."""


def offers(card: dict[str, Any], transport: str) -> bool:
    """Whether ``card`` lists an interface of ``transport`` (1.0 ``supportedInterfaces``, or
    0.3 ``preferredTransport`` / ``additionalInterfaces``): the suite needs one to run."""
    binding = BINDINGS[transport]
    found = [i.get("protocolBinding") for i in card.get("supportedInterfaces") or []]
    found += [i.get("transport") for i in card.get("additionalInterfaces") or []]
    found.append(card.get("preferredTransport"))
    return binding in found


async def card_offers(sut: str, transport: str, version: str) -> bool:
    """Whether the card at ``sut`` (fetched as the suite fetches it) lists ``transport``."""
    headers = {"A2A-Version": "1.0"} if version == "1.0" else {}
    url = f"{sut}/.well-known/agent-card.json"
    async with aiohttp.ClientSession() as session, session.get(url, headers=headers) as answer:
        return answer.status == 200 and offers(await answer.json(), transport)


def suite_version(tck: Path) -> str:
    """The A2A version a checkout of the suite tests: 1.0 (branch ``1.0-dev``), else 0.3."""
    return "1.0" if (tck / "tests" / "compatibility").is_dir() else "0.3"


async def _serve(app: web.Application) -> tuple[web.AppRunner, str]:
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    return runner, f"http://127.0.0.1:{port}"


async def main_async(
    tck: Path, python: Path, *, compat: bool, transport: str = "jsonrpc"
) -> dict[str, Any]:
    """The three runs on ``transport`` (see the module docs); ``compat``: the agent serves
    0.3 too."""
    from bench.tckagent import serve_tck_agent

    results: dict[str, dict[str, str]] = {}
    by_level: dict[str, dict[str, dict[str, int]]] = {}
    not_offered: list[str] = []
    with tempfile.TemporaryDirectory() as tmp:
        async with serve_tck_agent(transport, compat=compat) as agent:
            settings = Settings(
                database_url=f"sqlite:///{tmp}/switchboard.db",
                data_dir=tmp,
                matcher="lexical",
                default_agent="echo",
                refresh=False,
                allow_networks=["127.0.0.0/8"],
                seeds=[],
                grpc_port=0 if transport == "grpc" else None,  # 0: a free port
            )
            runner, router = await _serve(create_app(settings))
            try:
                await runner.app[REGISTRY].register_url(agent, "echo")
                runs = {"direct": agent, "per-agent": f"{router}/agents/echo", "root": router}
                for label, sut in runs.items():
                    if not await card_offers(sut, transport, suite_version(tck)):
                        print(f"[{label}] {sut}: its card lists no {BINDINGS[transport]}")
                        not_offered.append(label)  # the suite would only fail to start
                        continue
                    found = await asyncio.to_thread(run_suite, tck, python, sut, label, transport)
                    results[label], by_level[label] = found
            finally:
                await runner.cleanup()
    return {
        "transport": transport,
        "not_offered": not_offered,
        "runs": results,
        "levels": by_level,
        "summary": summarize(results),
    }


def category(test: str) -> str:
    """A test's category: its folder in the suite (``mandatory/jsonrpc``, ``agent_card``)."""
    parts = test.split("::", 1)[0].split(".")
    return "/".join(parts[1:3]) if parts[1:2] != ["compatibility"] else parts[2]


def summarize(results: dict[str, dict[str, str]]) -> dict[str, Any]:
    """Counts per run and per category, and the tests whose outcome differs from direct."""
    direct = results.get("direct", {})
    summary: dict[str, Any] = {}
    for label, found in results.items():
        differs = {
            name: {"direct": direct.get(name), label: outcome}
            for name, outcome in sorted(found.items())
            if label != "direct" and direct.get(name) != outcome
        }
        by_category: dict[str, Counter[str]] = {}
        for name, outcome in found.items():
            by_category.setdefault(category(name), Counter())[outcome] += 1
        summary[label] = {
            "counts": dict(Counter(found.values())),
            "categories": {k: dict(v) for k, v in sorted(by_category.items())},
            "differs": differs,
        }
    return summary


def table(summary: dict[str, Any]) -> str:
    """The Markdown table of ``summary``: passed / failed (errors count as failed) per
    category and run, as docs/conformance.md shows them."""
    labels = list(summary)
    names = sorted({name for part in summary.values() for name in part["categories"]})

    def cell(found: dict[str, int] | None) -> tuple[int, int]:
        found = found or {}
        return found.get("passed", 0), found.get("failed", 0) + found.get("error", 0)

    lines = ["| Category | " + " | ".join(labels) + " |", "|---" * (len(labels) + 1) + "|"]
    for name in names:
        cells = [cell(summary[label]["categories"].get(name)) for label in labels]
        if any(passed or failed for passed, failed in cells):  # categories that ran somewhere
            lines.append(f"| {name} | " + " | ".join(f"{p} / {f}" for p, f in cells) + " |")
    totals = [cell(summary[label]["counts"]) for label in labels]
    lines.append("| **all** | " + " | ".join(f"**{p} / {f}**" for p, f in totals) + " |")
    return "\n".join(lines)


def main() -> None:
    """The command line (see the module docs)."""
    parser = argparse.ArgumentParser(prog="python -m bench.conformance", description=__doc__)
    parser.add_argument("--tck", type=Path, required=True, help="an a2a-tck checkout")
    parser.add_argument("--tck-python", type=Path, help="the suite's Python (default: its .venv)")
    parser.add_argument("--out", type=Path, help="write the outcomes as JSON")
    parser.add_argument(
        "--transport",
        choices=("jsonrpc", "rest", "grpc"),
        default="jsonrpc",
        help="the binding tested (default jsonrpc; grpc with the 1.0 suite only)",
    )
    parser.add_argument(
        "--agent",
        choices=("1.0", "both"),
        help="the versions the agent serves (default: 1.0 for the 1.0 suite, both for 0.3; "
        "'--agent 1.0' with the 0.3 suite runs a 0.3 client in front of a 1.0-only agent)",
    )
    args = parser.parse_args()
    for noisy in ("a2a", "opentelemetry", "asyncio"):  # the agent's logs of the suite's probes
        logging.getLogger(noisy).setLevel(logging.CRITICAL)
    python = args.tck_python or args.tck / ".venv" / "bin" / "python"
    version = suite_version(args.tck)
    if args.transport not in SUITE_TRANSPORT[version]:
        parser.error(f"--transport {args.transport} needs the 1.0 suite (branch 1.0-dev)")
    compat = (args.agent or ("both" if version == "0.3" else "1.0")) == "both"
    report = asyncio.run(
        main_async(args.tck.resolve(), python, compat=compat, transport=args.transport)
    )
    for label, part in report["summary"].items():
        counts = ", ".join(f"{k} {v}" for k, v in sorted(part["counts"].items()))
        print(f"{label}: {counts}")
        for name, found in part["categories"].items():
            failed = found.get("failed", 0) + found.get("error", 0)
            print(f"  [{name}] passed {found.get('passed', 0)}, failed {failed}")
        for level, found in report["levels"].get(label, {}).items():
            print(f"  requirements {level}: {found}")
        for name, what in part["differs"].items():
            print(f"  {name}: direct {what['direct']}, {label} {what[label]}")
    for label in report["not_offered"]:
        print(f"{label}: not run, its card lists no {BINDINGS[args.transport]} interface")
    print(table(report["summary"]))
    if args.out:
        args.out.write_text(json.dumps(report, indent=2) + "\n")
    sys.exit(0)


if __name__ == "__main__":
    main()
