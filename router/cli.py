"""The ``switchboard`` command: run the server, and manage a running one's catalog.

``switchboard serve`` runs Switchboard; ``agents`` and ``search`` talk to a running server's
admin API (``--server`` or ``SWITCHBOARD_URL``, token from ``--token`` or the
``SWITCHBOARD_ADMIN_TOKEN`` / ``SWITCHBOARD_READ_TOKEN`` environment variables).
Exit status: 0 success, 1 the server refused or could not be reached, 2 bad usage.
"""

from __future__ import annotations

import argparse
import ipaddress
import json
import logging
import os
import sys
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import AsyncIterator, Sequence
from importlib import resources
from pathlib import Path
from typing import Any

from aiohttp import web
from pydantic import ValidationError

from registry.settings import Settings

DEFAULT_SERVER = "http://127.0.0.1:8080"
_SEARCH_FILTERS = ("skill", "input_mode", "output_mode", "protocol_version")


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``switchboard`` console script."""
    parser = _parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        return args.func(args)
    except CliError as exc:
        print(f"switchboard: {exc}", file=sys.stderr)
        return exc.status


class CliError(Exception):
    """A failure to report in one line, with the exit status to use."""

    def __init__(self, message: str, status: int = 1) -> None:
        super().__init__(message)
        self.status = status


# --- argument parsing ------------------------------------------------------------------------


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="switchboard", description="Registry and router for A2A agents."
    )
    commands = parser.add_subparsers(title="commands")

    serve = commands.add_parser("serve", help="run Switchboard")
    serve.add_argument("--host", help="address to bind (SWITCHBOARD_HOST, default 127.0.0.1)")
    serve.add_argument("--port", type=int, help="port to bind (SWITCHBOARD_PORT, default 8080)")
    serve.add_argument("--database-url", help="SWITCHBOARD_DATABASE_URL")
    serve.add_argument("--seeds", action="append", help="seed file to load (repeatable)")
    serve.add_argument("--admin-token", help="SWITCHBOARD_ADMIN_TOKEN")
    serve.add_argument("--read-token", help="SWITCHBOARD_READ_TOKEN")
    serve.add_argument("--allow-networks", help="SWITCHBOARD_ALLOW_NETWORKS (CIDRs)")
    serve.add_argument(
        "--demo", action="store_true", help="also start the demo agents and register them"
    )
    serve.add_argument("--log-level", default="INFO", help="DEBUG, INFO, WARNING, ERROR")
    serve.set_defaults(func=cmd_serve)

    agents = commands.add_parser("agents", help="manage registered agents").add_subparsers(
        title="agent commands"
    )
    add = _client(agents.add_parser("add", help="register an agent by URL or card file"))
    add.add_argument("url", nargs="?", help="agent base URL or card URL")
    add.add_argument("--card", type=Path, help="push a card from this JSON file instead")
    add.add_argument("--id", help="agent id to use (default: from the name)")
    add.set_defaults(func=cmd_add)

    listing = _client(agents.add_parser("list", help="list agents (same filters as search)"))
    _filters(listing)
    listing.set_defaults(func=cmd_list)

    for name, func, text in (
        ("show", cmd_show, "show one agent"),
        ("remove", cmd_remove, "remove an agent"),
        ("refresh", cmd_refresh, "fetch an agent's card again"),
    ):
        sub = _client(agents.add_parser(name, help=text))
        sub.add_argument("id", help="agent id")
        sub.set_defaults(func=func)

    search = _client(commands.add_parser("search", help="search agents or skills"))
    search.add_argument("q", nargs="?", help="free text")
    _filters(search)
    search.add_argument("--skills", action="store_true", help="list matching skills instead")
    search.set_defaults(func=cmd_search)
    return parser


def _client(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    parser.add_argument("--server", help=f"Switchboard URL (SWITCHBOARD_URL, {DEFAULT_SERVER})")
    parser.add_argument("--token", help="bearer token (default: SWITCHBOARD_ADMIN_TOKEN)")
    parser.add_argument("--json", action="store_true", help="print the API's JSON")
    return parser


def _filters(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--skill", help="skill id")
    parser.add_argument("--tag", action="append", help="skill tag (repeatable)")
    parser.add_argument("--input-mode", help="accepted media type, e.g. image/*")
    parser.add_argument("--output-mode", help="produced media type")
    parser.add_argument("--protocol-version", help="e.g. 0.3 or 1.0")
    parser.add_argument("--streaming", action=argparse.BooleanOptionalAction, default=None)
    parser.add_argument("--limit", type=int, help="at most this many")


# --- serve -----------------------------------------------------------------------------------


def cmd_serve(args: argparse.Namespace) -> int:
    """Run the server until interrupted."""
    from router.app import create_app  # the server's imports are only needed here

    logging.basicConfig(
        level=args.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    overrides: dict[str, Any] = {
        key: value
        for key, value in (
            ("host", args.host),
            ("port", args.port),
            ("database_url", args.database_url),
            ("admin_token", args.admin_token),
            ("read_token", args.read_token),
            ("allow_networks", args.allow_networks),
        )
        if value is not None
    }
    try:
        settings = Settings(**overrides)
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors())
        raise CliError(f"invalid settings: {problems}", status=2) from None
    if args.seeds:
        settings = settings.model_copy(update={"seeds": [*settings.seeds, *args.seeds]})
    if args.demo:
        settings = _demo_settings(settings)
    app = create_app(settings)
    if args.demo:
        app.cleanup_ctx.insert(0, _demo_agents)
    if not settings.admin_token:
        logging.getLogger("switchboard").warning(
            "SWITCHBOARD_ADMIN_TOKEN is not set: the admin API is read-only"
        )
    log = logging.getLogger("switchboard")
    web.run_app(
        app,
        host=settings.host,
        port=settings.port,
        print=lambda text: log.info(text.splitlines()[0].strip("= ")),
        access_log=logging.getLogger("switchboard.access"),
    )
    return 0


def _demo_settings(settings: Settings) -> Settings:
    """Settings for ``--demo``: loopback allowed, the packaged demo seed file loaded first."""
    loopback = ipaddress.ip_network("127.0.0.0/8")
    networks = list(settings.allow_networks)
    if loopback not in networks:
        networks.append(loopback)
    demo_seeds = str(resources.files("seeds") / "demo.toml")
    return settings.model_copy(
        update={"allow_networks": networks, "seeds": [demo_seeds, *settings.seeds]}
    )


async def _demo_agents(_app: web.Application) -> AsyncIterator[None]:
    """Run the demo agents for the app's lifetime (started before the seeds are loaded)."""
    from seeds.demo_agents import start_demo_agents

    agents = await start_demo_agents()
    for name, url in agents.urls.items():
        logging.getLogger("switchboard.demo").info("demo agent %s at %s", name, url)
    try:
        yield
    finally:
        await agents.close()


# --- client commands -------------------------------------------------------------------------


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
    agent = _request(args, "POST", "/api/v1/agents", body)
    _emit(args, agent, lambda: print(f"registered {agent['id']}: {agent['name']}"))
    return 0


def cmd_list(args: argparse.Namespace) -> int:
    """``agents list``."""
    return _search(args, skills=False)


def cmd_search(args: argparse.Namespace) -> int:
    """``search``."""
    return _search(args, skills=args.skills)


def cmd_show(args: argparse.Namespace) -> int:
    """``agents show``."""
    agent = _request(args, "GET", f"/api/v1/agents/{_quote(args.id)}")
    _emit(args, agent, lambda: _print_agent(agent))
    return 0


def cmd_remove(args: argparse.Namespace) -> int:
    """``agents remove``."""
    _request(args, "DELETE", f"/api/v1/agents/{_quote(args.id)}")
    if not args.json:
        print(f"removed {args.id}")
    return 0


def cmd_refresh(args: argparse.Namespace) -> int:
    """``agents refresh``."""
    result = _request(args, "POST", f"/api/v1/agents/{_quote(args.id)}/refresh")
    state = "changed" if result["changed"] else "unchanged"
    _emit(args, result, lambda: print(f"refreshed {args.id}: card {state}"))
    return 0


def _search(args: argparse.Namespace, *, skills: bool) -> int:
    params: list[tuple[str, str]] = []
    if getattr(args, "q", None):
        params.append(("q", args.q))
    for name in _SEARCH_FILTERS:
        value = getattr(args, name)
        if value:
            params.append((name, value))
    params += [("tag", tag) for tag in args.tag or []]
    if args.streaming is not None:
        params.append(("streaming", str(args.streaming).lower()))
    if args.limit:
        params.append(("limit", str(args.limit)))
    path = "/api/v1/skills" if skills else "/api/v1/agents"
    result = _request(args, "GET", f"{path}?{urllib.parse.urlencode(params)}")
    if skills:
        _emit(args, result, lambda: _print_skills(result["skills"]))
    else:
        _emit(args, result, lambda: _print_agents(result["agents"]))
    return 0


def _quote(agent_id: str) -> str:
    return urllib.parse.quote(agent_id, safe="")


def _emit(args: argparse.Namespace, data: Any, text: Any) -> None:
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
        versions = ",".join(agent["protocol_versions"])
        skills = ", ".join(s["id"] for s in agent["skills"])
        print(f"{agent['id']:<{width}}  {agent['name']}  [A2A {versions}]  skills: {skills}")


def _print_skills(skills: list[dict[str, Any]]) -> None:
    if not skills:
        print("no skills found")
        return
    for skill in skills:
        modes = f"{','.join(skill['input_modes'])} -> {','.join(skill['output_modes'])}"
        print(f"{skill['agent']['id']}/{skill['id']}  {skill['name']}  ({modes})")


def _print_agent(agent: dict[str, Any]) -> None:
    print(f"{agent['id']}: {agent['name']} (version {agent['version'] or '-'})")
    if agent["description"]:
        print(f"  {agent['description']}")
    for interface in agent["interfaces"]:
        print(
            f"  interface: {interface['url']} "
            f"({interface['binding']}, A2A {interface['protocol_version']})"
        )
    caps = [name for name, on in agent["capabilities"].items() if on is True]
    print(f"  capabilities: {', '.join(caps) or 'none'}")
    for skill in agent["skills"]:
        tags = ", ".join(skill["tags"])
        print(f"  skill {skill['id']}: {skill['name']} [{tags}]")
        print(f"    in: {', '.join(skill['input_modes'])}  out: {', '.join(skill['output_modes'])}")


def _request(args: argparse.Namespace, method: str, path: str, body: Any = None) -> dict[str, Any]:
    server = (args.server or os.environ.get("SWITCHBOARD_URL") or DEFAULT_SERVER).rstrip("/")
    token = (
        args.token
        or os.environ.get("SWITCHBOARD_ADMIN_TOKEN")
        or os.environ.get("SWITCHBOARD_READ_TOKEN")
    )
    headers = {"Accept": "application/json"}
    data = None
    if body is not None:
        data = json.dumps(body).encode()
        headers["Content-Type"] = "application/json"
    if token:
        headers["Authorization"] = f"Bearer {token}"
    request = urllib.request.Request(server + path, data=data, method=method, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=60) as response:
            payload = response.read()
    except urllib.error.HTTPError as exc:
        raise CliError(_api_error(exc)) from None
    except (urllib.error.URLError, OSError) as exc:
        reason = getattr(exc, "reason", exc)
        raise CliError(f"cannot reach Switchboard at {server}: {reason}") from None
    return json.loads(payload) if payload else {}


def _api_error(exc: urllib.error.HTTPError) -> str:
    try:
        error = json.loads(exc.read())["error"]
    except (ValueError, KeyError, TypeError):
        return f"HTTP {exc.code} {exc.reason}"
    message = f"{error['message']} ({error['code']}, HTTP {exc.code})"
    details = error.get("details")
    if isinstance(details, list):
        message += "".join(
            f"\n  {d.get('field', '')}: {d.get('problem', '')}"
            for d in details
            if isinstance(d, dict)
        )
    return message


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
