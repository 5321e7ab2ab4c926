"""``switchboard status``: a one-screen summary of a running Switchboard, from
``GET /api/v1/status`` (:mod:`router.observe.status`): the replica that answered and the
refresh lease holder, agents by health and verification, the latest refresh failures, and the
routing decisions of the last minutes by tier and agent (``--minutes``, default 15)."""

from __future__ import annotations

import argparse
from typing import Any

from router.cli.client import client_options, emit, request

__all__ = ["add_commands", "cmd_status", "status_lines"]

_ROWS = 8  # decision rows shown (the rest summed in one line)


def add_commands(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``status`` to the top-level ``commands``."""
    status = client_options(commands.add_parser("status", help="a summary of a running server"))
    status.add_argument(
        "--minutes", type=int, default=15, help="decisions of the last N minutes (1-60)"
    )
    status.set_defaults(func=cmd_status)


def cmd_status(args: argparse.Namespace) -> int:
    """Print the summary (or the API's JSON with ``--json``)."""
    data = request(args, "GET", f"/api/v1/status?minutes={args.minutes}")
    emit(args, data, lambda: print("\n".join(status_lines(data))))
    return 0


def status_lines(data: dict[str, Any]) -> list[str]:
    """The summary as lines for a terminal."""
    replica, agents, decisions = data["replica"], data["agents"], data["decisions"]
    holder = replica.get("lease_holder") or "nobody (refresh off, or the lease expired)"
    lines = [
        f"Switchboard {data.get('version', '?')}",
        f"replica      {replica.get('name') or '?'}"
        + ("  (holds the refresh lease)" if replica.get("holds_lease") else ""),
        f"lease holder {holder}",
        "",
        f"agents       {agents['total']} ({agents['routable']} routable)",
        f"  health       {_counts(agents['by_health'])}",
        f"  verification {_counts(agents['by_verification'])}",
        "",
    ]
    failures = data.get("refresh_failures") or []
    lines.append(f"refresh failures ({len(failures)})" if failures else "refresh failures: none")
    for failure in failures:
        error = (failure.get("last_error") or "").splitlines()[0:1]
        lines.append(
            f"  {failure['agent_id']:<20} {failure['health']:<11} "
            f"x{failure['consecutive_failures']:<3} {failure.get('last_failure') or '-':<20} "
            f"{_cut(error[0] if error else '', 60)}"
        )
    lines.append("")
    window = f"last {decisions['minutes']} min"
    if not decisions.get("complete", True):
        window += ", only the latest 10000 kept"
    lines.append(f"routing decisions ({window}): {decisions['total']}")
    if decisions["total"]:
        lines.append(f"  by tier      {_counts(decisions['by_tier'])}")
        rows = decisions["rows"]
        for row in rows[:_ROWS]:
            agent = row["agent"] or "(refused)"
            lines.append(f"  {row['tier']:<10} {agent:<24} {row['count']}")
        if len(rows) > _ROWS:
            rest = sum(row["count"] for row in rows[_ROWS:])
            lines.append(f"  ... {len(rows) - _ROWS} more rows, {rest} decisions")
    return lines


def _counts(counts: dict[str, int]) -> str:
    return ", ".join(f"{name} {count}" for name, count in counts.items()) or "-"


def _cut(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"
