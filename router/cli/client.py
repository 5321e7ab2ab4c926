"""Client commands against a running server's admin API: ``agents ...`` and ``search``.

Also the HTTP helpers the other client commands (``keys add/list/remove``) use: the server
comes from ``--server`` or ``SWITCHBOARD_URL``, the token from ``--token`` or the
``SWITCHBOARD_ADMIN_TOKEN`` / ``SWITCHBOARD_READ_TOKEN`` environment variables. ``agents list``
and ``search`` print one page unless ``--all`` (a note on stderr says when results were cut).
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import shlex
import sys
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

from registry.cards import canonical_version, canonical_versions
from router.cli.errors import CliError

DEFAULT_SERVER = "http://127.0.0.1:8080"
_SEARCH_FILTERS = ("skill", "input_mode", "output_mode", "protocol_version")
_BOOLEAN_FILTERS = ("streaming", "push", "verified")


def add_commands(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``agents ...`` and ``search`` to the top-level ``commands``."""
    group = commands.add_parser("agents", help="manage registered agents")
    group.set_defaults(group_parser=group)
    agents = group.add_subparsers(title="agent commands")
    add = client_options(agents.add_parser("add", help="register an agent by URL or card file"))
    add.add_argument("url", nargs="?", help="agent base URL or card URL")
    add.add_argument("--card", type=Path, help="push a card from this JSON file instead")
    add.add_argument("--id", help="agent id to use (default: from the name)")
    add.add_argument("--tenant", help="register the agent as this tenant's (default: shared)")
    add.set_defaults(func=cmd_add)

    listing = client_options(agents.add_parser("list", help="list agents (same filters as search)"))
    _filters(listing)
    _paging(listing)
    listing.set_defaults(func=cmd_list)

    for name, func, text in (
        ("show", cmd_show, "show one agent"),
        ("remove", cmd_remove, "remove an agent"),
        ("refresh", cmd_refresh, "fetch an agent's card again"),
        ("history", cmd_history, "show an agent's card revisions and what changed"),
    ):
        sub = client_options(agents.add_parser(name, help=text))
        sub.add_argument("id", help="agent id")
        sub.set_defaults(func=func)

    every = client_options(
        agents.add_parser("refresh-all", help="check every agent now (or only those due)")
    )
    every.add_argument("--due", action="store_true", help="only the checks that are due now")
    every.set_defaults(func=cmd_refresh_all)

    search = client_options(commands.add_parser("search", help="search agents or skills"))
    search.add_argument("q", nargs="?", help="free text")
    _filters(search)
    search.add_argument("--skills", action="store_true", help="list matching skills instead")
    search.add_argument(
        "--match",
        choices=("semantic", "lexical"),
        help="rank the text by meaning or by words (default: the server's matcher)",
    )
    _paging(search)
    search.set_defaults(func=cmd_search)


def client_options(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """Add ``--server``, ``--token`` and ``--json`` to a client command's ``parser``."""
    parser.add_argument("--server", help=f"Switchboard URL (SWITCHBOARD_URL, {DEFAULT_SERVER})")
    parser.add_argument(
        "--token",
        help="bearer token (default: SWITCHBOARD_ADMIN_TOKEN, else SWITCHBOARD_READ_TOKEN; "
        "prefer the variables: other users can see command-line arguments)",
    )
    parser.add_argument("--json", action="store_true", help="print the API's JSON")
    return parser


def _filters(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--skill", help="skill id")
    parser.add_argument("--tag", action="append", help="skill tag (repeatable)")
    parser.add_argument("--input-mode", help="accepted media type, e.g. image/*")
    parser.add_argument("--output-mode", help="produced media type")
    parser.add_argument("--protocol-version", help="e.g. 0.3 or 1.0")
    parser.add_argument(
        "--streaming",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="only agents that support streaming (--no-streaming: that do not)",
    )
    parser.add_argument(
        "--push",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="only agents that support push notifications (--no-push: that do not)",
    )
    parser.add_argument(
        "--verified",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="only agents whose card signature verified (--no-verified: all others)",
    )


def _paging(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--limit",
        type=_positive_int,
        help="page size (default: the server's, 50 unless configured)",
    )
    parser.add_argument("--all", action="store_true", help="fetch every page, not just the first")
    parser.add_argument("--cursor", help="start from this cursor (a previous next_cursor)")


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a whole number of at least 1: {text!r}")
    return value


def cmd_add(args: argparse.Namespace) -> int:
    """``agents add``."""
    if (args.url is None) == (args.card is None):
        raise CliError("give an agent URL or --card FILE (one of them)", status=2)
    body: dict[str, Any] = {}
    if args.card is not None:
        try:
            body["card"] = json.loads(args.card.read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise CliError(f"cannot read card file {args.card}: {exc}", status=2) from None
    else:
        body["url"] = args.url
    if args.id:
        body["id"] = args.id
    if args.tenant is not None:
        body["tenant"] = args.tenant
    agent = request(args, "POST", "/api/v1/agents", body)
    emit(args, agent, lambda: print(f"registered {agent['id']}: {agent['name']}"))
    return 0


def cmd_list(args: argparse.Namespace) -> int:
    """``agents list``."""
    return _search(args, skills=False)


def cmd_search(args: argparse.Namespace) -> int:
    """``search``."""
    return _search(args, skills=args.skills)


def cmd_show(args: argparse.Namespace) -> int:
    """``agents show``."""
    agent = request(args, "GET", f"/api/v1/agents/{quote(args.id)}")
    emit(args, agent, lambda: _print_agent(agent))
    return 0


def cmd_remove(args: argparse.Namespace) -> int:
    """``agents remove``."""
    request(args, "DELETE", f"/api/v1/agents/{quote(args.id)}")
    if not args.json:
        print(f"removed {args.id}")
    return 0


def cmd_refresh(args: argparse.Namespace) -> int:
    """``agents refresh``."""
    result = request(args, "POST", f"/api/v1/agents/{quote(args.id)}/refresh")
    state = "changed" if result["changed"] else "unchanged"
    emit(args, result, lambda: print(f"refreshed {args.id}: card {state}"))
    return 0


def cmd_refresh_all(args: argparse.Namespace) -> int:
    """``agents refresh-all``: exit 1 if any check failed."""
    result = request(args, "POST", "/api/v1/refresh", None if args.due else {"all": True})

    def show() -> None:
        print(f"checked {result['checked']}, changed {len(result['changed'])}", end="")
        print(f", failed {len(result['failed'])}")
        for agent_id in result["changed"]:
            print(f"  changed: {agent_id}")
        for failure in result["failed"]:
            print(f"  failed: {failure['id']}: {failure['error']}")

    emit(args, result, show)
    return 1 if result["failed"] else 0


def cmd_history(args: argparse.Namespace) -> int:
    """``agents history``: the card revisions, newest first, each with what changed."""
    result = request(args, "GET", f"/api/v1/agents/{quote(args.id)}/revisions")
    emit(args, result, lambda: _print_history(result["revisions"]))
    return 0


def _print_history(revisions: list[dict[str, Any]]) -> None:
    for revision in revisions:
        status = revision.get("verification_status") or "-"
        print(f"{revision['fetched_at']}  {revision['sha256'][:12]}  {status}")
        if revision.get("initial"):
            print("  registered")
            continue
        if revision.get("diff") is None:
            print("  (no diff: recorded by an older version)")
            continue
        for line in diff_lines(revision["diff"]) or ["same meaning (only the bytes changed)"]:
            print(f"  {line}")


def diff_lines(diff: dict[str, Any]) -> list[str]:
    """A revision's ``diff`` as short lines for people."""
    lines = [
        f"{name}: {_shown(c['from'])} -> {_shown(c['to'])}"
        for name, c in diff.get("fields", {}).items()
    ]
    skills = diff.get("skills", {})
    lines += [f"skill added: {s}" for s in skills.get("added", [])]
    lines += [f"skill removed: {s}" for s in skills.get("removed", [])]
    lines += [
        f"skill changed: {c['id']} ({', '.join(c['fields'])})" for c in skills.get("changed", [])
    ]
    interfaces = diff.get("interfaces", {})
    for verb in ("added", "removed"):
        for i in interfaces.get(verb, []):
            lines.append(
                f"interface {verb}: {i['url']} ({i['binding']}, A2A {i['protocol_version']})"
            )
    for name, c in diff.get("capabilities", {}).items():
        lines.append(f"capability {name}: {_shown(c['from'])} -> {_shown(c['to'])}")
    for key in ("default_input_modes", "default_output_modes"):
        for verb in ("added", "removed"):
            for mode in diff.get(key, {}).get(verb, []):
                lines.append(f"{key.replace('_', ' ')} {verb}: {mode}")
    if "verification" in diff:
        change = diff["verification"]
        lines.append(f"verification: {change['from']} -> {change['to']}")
    return lines


def _shown(value: Any) -> str:
    text = json.dumps(value, ensure_ascii=False)
    return text if len(text) <= 80 else text[:77] + "..."


def _search(args: argparse.Namespace, *, skills: bool) -> int:
    params: list[tuple[str, str]] = []
    if getattr(args, "q", None):
        params.append(("q", args.q))
    if getattr(args, "match", None):
        params.append(("match", args.match))
    for name in _SEARCH_FILTERS:
        value = getattr(args, name)
        if value:
            params.append((name, value))
    params += [("tag", tag) for tag in args.tag or []]
    for name in _BOOLEAN_FILTERS:
        if getattr(args, name) is not None:
            params.append((name, str(getattr(args, name)).lower()))
    if args.limit:
        params.append(("limit", str(args.limit)))
    key = "skills" if skills else "agents"
    items: list[dict[str, Any]] = []
    cursor: str | None = args.cursor
    seen: set[str] = set()
    while True:
        page_params = [*params, ("cursor", cursor)] if cursor else params
        result = request(args, "GET", f"/api/v1/{key}?{urllib.parse.urlencode(page_params)}")
        page, cursor = _page(result, key)
        items += page
        if not args.all or cursor is None:
            break
        if cursor in seen:
            raise CliError(f"the server returned the same next_cursor twice: {cursor}")
        seen.add(cursor)
    if args.all:
        result = {key: items, "next_cursor": cursor}
    emit(args, result, lambda: (_print_skills if skills else _print_agents)(items))
    if cursor is not None:
        print(f"(more results: --all, or --cursor {shlex.quote(cursor)})", file=sys.stderr)
    return 0


def _page(result: dict[str, Any], key: str) -> tuple[list[dict[str, Any]], str | None]:
    """The items and next cursor of one page of a search answer; CliError if malformed."""
    items = result.get(key)
    cursor = result.get("next_cursor")
    if not (
        isinstance(items, list)
        and all(isinstance(item, dict) for item in items)
        and (cursor is None or (isinstance(cursor, str) and cursor))
    ):
        raise CliError(
            f"unexpected answer from the server (no {key!r} list): it does not look like a "
            f"Switchboard; {_SERVER_ADVICE}"
        )
    return items, cursor


def quote(agent_id: str) -> str:
    """``agent_id`` (or any id) quoted as one URL path segment."""
    return urllib.parse.quote(agent_id, safe="")


def emit(args: argparse.Namespace, data: Any, text: Callable[[], object]) -> None:
    """Print ``data`` as JSON with ``--json``, else call ``text`` to print it for people."""
    if args.json:
        print(json.dumps(data, indent=2, ensure_ascii=False))
    else:
        text()


def _print_agents(agents: list[dict[str, Any]]) -> None:
    if not agents:
        print("no agents found")
        return
    width = max(len(a["id"]) for a in agents)
    for agent in agents:
        versions = ",".join(canonical_versions(agent["protocol_versions"]))
        skills = ", ".join(s["id"] for s in agent["skills"])
        marker = _marker(agent.get("verification"))
        print(
            f"{agent['id']:<{width}}  {agent['name']}  [A2A {versions}]{marker}  skills: {skills}"
        )


def _marker(verification: Any) -> str:
    """`` [verified]``, `` [unsigned]``... for a list line; empty if the server sent none."""
    if isinstance(verification, dict) and verification.get("status"):
        return f" [{verification['status']}]"
    return ""


def _print_skills(skills: list[dict[str, Any]]) -> None:
    if not skills:
        print("no skills found")
        return
    for skill in skills:
        modes = f"{','.join(skill['input_modes'])} -> {','.join(skill['output_modes'])}"
        marker = _marker(skill["agent"].get("verification"))
        print(f"{skill['agent']['id']}/{skill['id']}  {skill['name']}  ({modes}){marker}")


def _print_agent(agent: dict[str, Any]) -> None:
    print(f"{agent['id']}: {agent['name']} (version {agent['version'] or '-'})")
    if agent["description"]:
        print(f"  {agent['description']}")
    for interface in agent["interfaces"]:
        print(
            f"  interface: {interface['url']} "
            f"({interface['binding']}, A2A {canonical_version(interface['protocol_version'])})"
        )
    caps = [name for name, on in agent["capabilities"].items() if on is True]
    print(f"  capabilities: {', '.join(caps) or 'none'}")
    verification = agent.get("verification")
    if isinstance(verification, dict) and verification.get("status"):
        for line in verification_lines(verification):
            print(f"  {line}")
    health = agent.get("health")
    if isinstance(health, dict) and health.get("status"):
        line = f"  health: {health['status']}"
        if health.get("consecutive_failures"):
            line += f" ({health['consecutive_failures']} consecutive failures)"
        if health.get("status") != "healthy" and health.get("last_error"):
            line += f"; last error: {health['last_error']}"
        print(line)
        if health.get("card_error"):
            print(f"  card error: {health['card_error']}")
    if agent.get("routable") is False:
        unreachable = isinstance(health, dict) and health.get("status") == "unreachable"
        why = "the agent is unreachable" if unreachable else "only verified agents are routed to"
        print(f"  not routable: {why}")
    for skill in agent["skills"]:
        tags = ", ".join(skill["tags"])
        print(f"  skill {skill['id']}: {skill['name']} [{tags}]")
        print(f"    in: {', '.join(skill['input_modes'])}  out: {', '.join(skill['output_modes'])}")


def verification_lines(verification: dict[str, Any]) -> list[str]:
    """How ``agents show`` describes the API's ``verification`` object, one item a line."""
    status = verification["status"]
    if status == "verified":
        lines = [
            f"verification: verified (kid {verification.get('kid')}, "
            f"{verification.get('payload_form')})"
        ]
        if verification.get("key_source"):
            lines.append(f"  key from: {verification['key_source']}")
    elif verification.get("reason"):
        lines = [f"verification: {status}: {verification['reason']}"]
    else:
        lines = [f"verification: {status}"]
    uncovered = verification.get("uncovered_fields") or []
    if uncovered:
        lines.append(f"  not covered by the signature: {', '.join(uncovered)}")
    return lines


_TOKEN_ADVICE = (
    "set SWITCHBOARD_ADMIN_TOKEN to the server's admin token (SWITCHBOARD_READ_TOKEN is enough "
    "for reads) or pass --token"
)
_SERVER_ADVICE = "point the CLI at your Switchboard with --server URL or SWITCHBOARD_URL"


def server_of(args: argparse.Namespace) -> tuple[str, str]:
    """The server's base URL and where it came from (``--server``, ``SWITCHBOARD_URL``, the
    default), for messages."""
    if args.server:
        return args.server.rstrip("/"), "--server"
    if os.environ.get("SWITCHBOARD_URL"):
        return os.environ["SWITCHBOARD_URL"].rstrip("/"), "SWITCHBOARD_URL"
    return DEFAULT_SERVER, "the default"


def token_of(args: argparse.Namespace) -> tuple[str | None, str]:
    """The bearer token to send and where it came from (``--token`` or a variable)."""
    for value, source in (
        (args.token, "--token"),
        (os.environ.get("SWITCHBOARD_ADMIN_TOKEN"), "SWITCHBOARD_ADMIN_TOKEN"),
        (os.environ.get("SWITCHBOARD_READ_TOKEN"), "SWITCHBOARD_READ_TOKEN"),
    ):
        if value:
            return value, source
    return None, ""


def request(args: argparse.Namespace, method: str, path: str, body: Any = None) -> dict[str, Any]:
    """``method`` ``path`` on the server with ``body`` as JSON; the answer's JSON object.

    ``{}`` for an empty answer (e.g. 204). CliError: status 2 for a bad server URL or token,
    1 for an API error (its message, with what to do for 401 and 403), an unreachable server,
    or an answer that is not Switchboard's.
    """
    server, origin = server_of(args)
    token, token_source = token_of(args)
    headers = {"Accept": "application/json"}
    data = None
    if body is not None:
        data = json.dumps(body).encode()
        headers["Content-Type"] = "application/json"
    if token:
        if not token.isascii() or not token.isprintable() or " " in token:
            # http.client would raise, echoing the token: say what is wrong without it
            raise CliError(
                f"the token ({token_source}) may only contain printable ASCII without spaces",
                status=2,
            )
        headers["Authorization"] = f"Bearer {token}"
    if urllib.parse.urlsplit(server).scheme not in ("http", "https"):
        raise CliError(
            f"invalid server URL {server!r} ({origin}): expected http://HOST:PORT or https://...",
            status=2,
        )
    try:
        req = urllib.request.Request(server + path, data=data, method=method, headers=headers)
        with urllib.request.urlopen(req, timeout=60) as response:
            payload = response.read()
    except urllib.error.HTTPError as exc:
        raise CliError(_api_error(exc, server, token_source)) from None
    except (ValueError, http.client.InvalidURL) as exc:  # e.g. a port that is no number
        raise CliError(f"invalid server URL {server!r} ({origin}): {exc}", status=2) from None
    except (urllib.error.URLError, OSError, http.client.HTTPException) as exc:
        reason = getattr(exc, "reason", None) or str(exc) or type(exc).__name__
        raise CliError(
            f"cannot reach Switchboard at {server} ({origin}): {reason}; start it with "
            f"'switchboard serve', or {_SERVER_ADVICE}"
        ) from None
    if not payload:
        return {}
    try:
        result = json.loads(payload)
    except ValueError:
        result = None
    if not isinstance(result, dict):
        raise CliError(
            f"{server} does not look like a Switchboard (its answer to {path.split('?')[0]} "
            f"is not a JSON object): {_SERVER_ADVICE}"
        )
    return result


def _api_error(exc: urllib.error.HTTPError, server: str, token_source: str) -> str:
    """One line for an HTTP error: the API's message (and what to do for 401 and 403), or,
    when the answer is not Switchboard's error shape, that the server does not look like
    one."""
    try:
        error = json.loads(exc.read())["error"]
        code, text = error["code"], error["message"]
        if not (isinstance(code, str) and isinstance(text, str)):
            raise TypeError(code)
    except (ValueError, KeyError, TypeError):
        return (
            f"HTTP {exc.code} {exc.reason} from {server}, without a Switchboard error: it does "
            f"not look like a Switchboard; {_SERVER_ADVICE}"
        )
    if exc.code == 401:
        if not token_source:
            return f"this server needs a token (unauthorized, HTTP 401): {_TOKEN_ADVICE}"
        return (
            f"the server refused the token from {token_source} (unauthorized, HTTP 401): "
            f"{_TOKEN_ADVICE}"
        )
    if code == "writes_disabled":
        return (
            "this server accepts no changes (writes_disabled, HTTP 403): it was started without "
            "an admin token; restart it with SWITCHBOARD_ADMIN_TOKEN set, and set the same "
            "SWITCHBOARD_ADMIN_TOKEN here or pass --token"
        )
    if exc.code == 403 and code == "forbidden" and token_source:
        return (
            f"the token from {token_source} is valid but {text} (forbidden, HTTP 403): "
            f"{_TOKEN_ADVICE}"
        )
    if exc.code == 403:
        return f"{text} ({code}, HTTP 403): {_TOKEN_ADVICE}"
    message = f"{text} ({code}, HTTP {exc.code})"
    details = error.get("details")
    if isinstance(details, list):
        message += "".join(
            f"\n  {d.get('field', '')}: {d.get('problem', '')}"
            for d in details
            if isinstance(d, dict)
        )
    return message
