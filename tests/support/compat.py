"""The compatibility table of docs/routing.md, generated from the tests.

With ``SWITCHBOARD_COMPAT_RECORD=FILE`` set, a test run records every call a client makes
through a real router (:meth:`router.forward.handler.Router.handle`: the client's binding,
version or dialect, and operation) and every agent interface the router called for it
(:meth:`router.forward.upstream.Upstream.call` and ``stream``: the agent's binding and
version), including calls made by tasks the call started (a push follower). Calls of tests
that did not pass are dropped. At the end of the run the records go to ``FILE`` as JSON.

``python -m tests.support.compat`` runs the suites that drive the router with the official
SDKs, recording, and rewrites the table between the ``compat-table`` markers of
docs/routing.md: one row per client binding and version, one column per agent binding and
version, each cell the operations seen and the test files that drove them.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import defaultdict
from collections.abc import Iterable
from contextvars import ContextVar
from pathlib import Path
from typing import Any

import pytest

from router.forward.handler import Router
from router.forward.upstream import Upstream

ENV = "SWITCHBOARD_COMPAT_RECORD"
ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "routing.md"
BEGIN, END = "<!-- compat-table:begin -->", "<!-- compat-table:end -->"

BINDING_NAMES = {"JSONRPC": "JSON-RPC", "HTTP+JSON": "HTTP+JSON", "GRPC": "gRPC"}
CLIENTS = [
    ("JSONRPC", "1.0"),
    ("HTTP+JSON", "1.0"),
    ("GRPC", "1.0"),
    ("JSONRPC", "0.3"),
    ("HTTP+JSON", "0.3"),
]
"""The rows every SDK client fills; a legacy dialect seen in the tests gets a row too."""
AGENTS = [
    ("JSONRPC", "1.0"),
    ("JSONRPC", "0.3"),
    ("HTTP+JSON", "1.0"),
    ("HTTP+JSON", "0.3"),
    ("GRPC", "1.0"),
]
OPS = ["send", "stream", "get", "list", "cancel", "subscribe", "push-config"]
SUITES = ["tests/e2e", "tests/router/forward", "tests/router/transport"]

_record: ContextVar[dict[str, Any] | None] = ContextVar("compat_record", default=None)


class Recorder:
    """Wraps the router's entry and its upstream calls for one test session."""

    def __init__(self) -> None:
        self.test: str | None = None
        self.pending: list[dict[str, Any]] = []
        self.kept: list[dict[str, Any]] = []

    def install(self, monkeypatch: pytest.MonkeyPatch) -> None:
        """Wrap ``Router.handle``, ``Upstream.call`` and ``Upstream.stream``."""
        recorder = self
        handle, call, stream = Router.handle, Upstream.call, Upstream.stream

        async def recorded_handle(router: Router, c: Any) -> Any:
            entry = {
                "test": recorder.test,
                "client": [c.binding, c.rpc.dialect],
                "op": str(c.rpc.op),
                "agents": [],
            }
            recorder.pending.append(entry)
            _record.set(entry)  # not reset: the stream's events and tasks it starts run later
            return await handle(router, c)

        async def recorded_call(upstream: Upstream, target: Any, *args: Any, **kw: Any) -> Any:
            _touch(target)
            return await call(upstream, target, *args, **kw)

        def recorded_stream(upstream: Upstream, target: Any, *args: Any, **kw: Any) -> Any:
            _touch(target)
            return stream(upstream, target, *args, **kw)

        monkeypatch.setattr(Router, "handle", recorded_handle)
        monkeypatch.setattr(Upstream, "call", recorded_call)
        monkeypatch.setattr(Upstream, "stream", recorded_stream)

    def finish(self, nodeid: str, passed: bool) -> None:
        """Keep the calls of ``nodeid`` if it passed."""
        mine = [e for e in self.pending if e["test"] == nodeid]
        self.pending = [e for e in self.pending if e["test"] != nodeid]
        if passed:
            self.kept.extend(e for e in mine if e["agents"])


def _touch(target: Any) -> None:
    entry = _record.get()
    if entry is not None:
        agent = [target.binding, target.version]
        if agent not in entry["agents"]:
            entry["agents"].append(agent)


def cells(records: Iterable[dict[str, Any]]) -> dict[tuple[str, ...], dict[str, set[str]]]:
    """(client binding, client dialect, agent binding, agent version) -> ops and test files."""
    table: dict[tuple[str, ...], dict[str, set[str]]] = defaultdict(
        lambda: {"ops": set(), "files": set()}
    )
    for entry in records:
        for agent in entry["agents"]:
            cell = table[(*entry["client"], *agent)]
            cell["ops"].add(entry["op"])
            cell["files"].add(entry["test"].split("::")[0].removeprefix("tests/"))
    return table


def render(records: Iterable[dict[str, Any]]) -> str:
    """The Markdown tables of ``records``: the SDK clients', then the legacy dialects' (rows
    only for dialects seen; ``-`` where no test drove a cell)."""
    table = cells(records)
    legacy = sorted({(k[0], k[1]) for k in table} - set(CLIENTS))
    out = _table(table, CLIENTS, "Client ↓ / agent →", "none")
    if legacy:
        out += "\n\n" + _table(table, legacy, "Legacy dialect ↓ / agent →", "-")
    return out


def _table(
    table: dict[tuple[str, ...], dict[str, set[str]]],
    rows: list[tuple[str, str]],
    corner: str,
    empty: str,
) -> str:
    head = f"| {corner} | " + " | ".join(name_of(*a) for a in AGENTS) + " |"
    lines = [head, "|---" * (len(AGENTS) + 1) + "|"]
    for client in rows:
        out = []
        for agent in AGENTS:
            cell = table.get((*client, *agent))
            if cell is None:
                out.append(empty)
                continue
            ops = [op for op in OPS if op in cell["ops"]]
            ops += sorted(cell["ops"] - set(OPS))
            named = sorted(cell["files"])
            files = ", ".join(f"`{f}`" for f in named[:3])
            if len(named) > 3:
                files += f" and {len(named) - 3} more"
            out.append(f"{', '.join(ops)} ({files})")
        lines.append(f"| {name_of(*client)} | " + " | ".join(out) + " |")
    return "\n".join(lines)


DIALECT_NAMES = {"0.1": "v0.1", "1.0-prefixed": "`A2A.` prefixed (seed 002)"}


def name_of(binding: str, version: str) -> str:
    """A row's or column's name: ``JSON-RPC 1.0``, ``HTTP+JSON v0.1``, ..."""
    return f"{BINDING_NAMES.get(binding, binding)} {DIALECT_NAMES.get(version, version)}"


def rewrite(doc: Path, table: str) -> None:
    """Put ``table`` between the markers of ``doc``."""
    text = doc.read_text()
    start, end = text.index(BEGIN) + len(BEGIN), text.index(END)
    doc.write_text(text[:start] + "\n" + table + "\n" + text[end:])


def main(argv: list[str]) -> int:
    """Run the suites recording, then rewrite the table in docs/routing.md."""
    out = Path(os.environ.get("TMPDIR", "/tmp")) / f"switchboard-compat-{os.getpid()}.json"
    env = {**os.environ, ENV: str(out)}
    args = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *(argv or SUITES)]
    done = subprocess.run(args, cwd=ROOT, env=env, check=False)
    records = json.loads(out.read_text())
    out.unlink()
    rewrite(DOC, render(records))
    print(render(records))
    return done.returncode


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
