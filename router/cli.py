"""The ``switchboard`` command: run the server, and manage a running one's catalog.

``switchboard serve`` runs Switchboard; ``agents`` and ``search`` talk to a running server's
admin API (``--server`` or ``SWITCHBOARD_URL``, token from ``--token`` or the
``SWITCHBOARD_ADMIN_TOKEN`` / ``SWITCHBOARD_READ_TOKEN`` environment variables).
``agents list`` and ``search`` print one page unless ``--all`` (a note on stderr says when
results were cut). Exit status: 0 success, 1 the server refused or could not be reached (or
``serve`` could not start), 2 bad usage or configuration; errors are one ``switchboard:`` line.
"""

from __future__ import annotations

import argparse
import http.client
import ipaddress
import json
import logging
import os
import re
import shlex
import socket
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

from registry.errors import RegistryError
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
    except KeyboardInterrupt:
        print("switchboard: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # stdout was closed early (e.g. piped into ``head``): not an error worth a traceback;
        # point stdout at /dev/null so the interpreter's final flush does not fail again
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 1


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
    serve.add_argument(
        "--admin-token",
        help="SWITCHBOARD_ADMIN_TOKEN; prefer the variable: other users can see "
        "command-line arguments (ps)",
    )
    serve.add_argument(
        "--read-token",
        help="SWITCHBOARD_READ_TOKEN; prefer the variable: other users can see "
        "command-line arguments (ps)",
    )
    serve.add_argument("--allow-networks", help="SWITCHBOARD_ALLOW_NETWORKS (CIDRs)")
    serve.add_argument(
        "--demo", action="store_true", help="also start the demo agents and register them"
    )
    serve.add_argument("--log-level", default="INFO", help="DEBUG, INFO (default), WARNING, ERROR")
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
    _paging(listing)
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
    _paging(search)
    search.set_defaults(func=cmd_search)
    return parser


def _client(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
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


# --- serve -----------------------------------------------------------------------------------

_LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR")
_DATABASES = ("sqlite", "postgresql")
_SQLALCHEMY_LINK = re.compile(r"\(Background on this error at: [^)]*\)")


def cmd_serve(args: argparse.Namespace) -> int:
    """Run the server until interrupted.

    Everything that can be checked without starting (settings, log level, seed files, the
    database URL and driver) is checked first: exit status 2 with one line. Failures that only
    show at startup (database unreachable, port in use) give exit status 1 with one line.
    """
    # the server's imports are only needed here
    from sqlalchemy.exc import SQLAlchemyError

    from router.app import create_app

    level = args.log_level.upper()
    if level not in _LOG_LEVELS:
        raise CliError(
            f"invalid --log-level {args.log_level!r}: use one of {', '.join(_LOG_LEVELS)}",
            status=2,
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
        problems = "; ".join(
            f"{'.'.join(map(str, e['loc']))}: {e['msg']}" if e["loc"] else e["msg"]
            for e in exc.errors()
        )
        raise CliError(f"invalid settings: {problems}", status=2) from None
    if args.seeds:
        settings = settings.model_copy(update={"seeds": [*settings.seeds, *args.seeds]})
    if args.demo:
        settings = _demo_settings(settings)
    _check_seed_files(settings.seeds)
    _check_database_url(settings.database_url)
    try:
        app = create_app(settings)  # creates the database engine (driver import, SQLite dir)
    except OSError as exc:  # the SQLite file's directory could not be created
        raise CliError(
            f"cannot use database {_safe_url(settings.database_url)}: "
            f"cannot create directory {_reason(exc)}",
            status=2,
        ) from None
    except (SQLAlchemyError, ImportError) as exc:
        raise CliError(
            f"cannot use database {_safe_url(settings.database_url)}: {_reason(exc)}", status=2
        ) from None
    _check_sqlite_file(settings.database_url)
    if args.demo:
        app.cleanup_ctx.insert(0, _demo_agents)

    logging.basicConfig(level=level, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    log = logging.getLogger("switchboard")
    if not settings.admin_token:
        log.warning("SWITCHBOARD_ADMIN_TOKEN is not set: the admin API is read-only")
    try:
        web.run_app(
            app,
            host=settings.host,
            port=settings.port,
            print=lambda text: log.info(text.splitlines()[0].strip("= ")),
            access_log=logging.getLogger("switchboard.access"),
        )
    except SQLAlchemyError as exc:
        raise CliError(
            f"cannot start: database {_safe_url(settings.database_url)}: {_reason(exc)}"
        ) from None
    except socket.gaierror as exc:
        raise CliError(f"cannot start: host {settings.host!r}: {_reason(exc)}") from None
    except (OSError, RegistryError) as exc:
        raise CliError(f"cannot start: {_reason(exc)}") from None
    return 0


def _check_seed_files(paths: Sequence[str]) -> None:
    """Read and validate every seed file now, so a bad one stops ``serve`` before it starts."""
    from registry.seeds import load_seed_file

    for path in paths:
        try:
            load_seed_file(path)
        except RegistryError as exc:
            raise CliError(str(exc), status=2) from None


def _check_database_url(url: str) -> None:
    """Parse the database URL and check that it names a supported database."""
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import ArgumentError

    from registry.store import async_url

    try:
        backend = make_url(async_url(url)).get_backend_name()
    except (ArgumentError, ValueError):
        raise CliError(
            "invalid database URL (SWITCHBOARD_DATABASE_URL or --database-url): expected e.g. "
            "sqlite:///./switchboard.db or postgresql://user:pass@host:5432/db",
            status=2,
        ) from None
    if backend not in _DATABASES:
        raise CliError(
            f"unsupported database {backend!r} in {_safe_url(url)}: "
            "use sqlite:///PATH or postgresql://...",
            status=2,
        )


def _check_sqlite_file(url: str) -> None:
    """Open a SQLite database file once with the standard library before starting.

    A file that cannot be opened or is no database is then a configuration error (status 2)
    instead of a startup failure; and aiosqlite, when its connection fails while the server
    stops, can print a traceback from its worker thread.
    """
    import sqlite3

    from sqlalchemy.engine import make_url

    parsed = make_url(url)
    database = parsed.database
    if parsed.get_backend_name() != "sqlite" or not database or database == ":memory:":
        return
    if database.startswith("file:") or parsed.query.get("uri"):
        return  # a SQLite URI filename: leave it to the server
    path = Path(database)
    try:
        connection = sqlite3.connect(path, timeout=5)
        try:
            connection.execute("PRAGMA schema_version").fetchone()
        finally:
            connection.close()
    except sqlite3.Error as exc:
        raise CliError(
            f"cannot open SQLite database {database}: {_reason(exc)}", status=2
        ) from None
    if not os.access(path, os.W_OK) or not os.access(path.parent, os.W_OK):
        raise CliError(
            f"cannot write SQLite database {database}: no write permission on the file or its "
            "directory",
            status=2,
        )


def _safe_url(url: str) -> str:
    """``url`` with its password masked, for messages."""
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import ArgumentError

    try:
        return make_url(url).render_as_string(hide_password=True)
    except (ArgumentError, ValueError):
        return "(unparsable URL)"


def _reason(exc: BaseException) -> str:
    """A one-line description of ``exc`` (the driver's own message for database errors)."""
    from sqlalchemy.exc import DBAPIError, SQLAlchemyError

    if isinstance(exc, DBAPIError) and exc.orig is not None:
        exc = exc.orig
    if isinstance(exc, ImportError):
        text = f"database driver not installed ({exc})"
    elif isinstance(exc, OSError) and exc.strerror:
        text = f"{exc.filename}: {exc.strerror}" if exc.filename else exc.strerror
    elif isinstance(exc, SQLAlchemyError):
        text = _SQLALCHEMY_LINK.sub("", str(exc)) or type(exc).__name__
    else:
        text = str(exc) or type(exc).__name__
    return " ".join(text.split())


def _demo_settings(settings: Settings) -> Settings:
    """Settings for ``--demo``: 127.0.0.1 allowed, the packaged demo seed file loaded first."""
    loopback = ipaddress.ip_network("127.0.0.1/32")  # the demo agents' address, nothing more
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
    for name in ("streaming", "push"):
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
        result = _request(args, "GET", f"/api/v1/{key}?{urllib.parse.urlencode(page_params)}")
        page, cursor = _page(result, key)
        items += page
        if not args.all or cursor is None:
            break
        if cursor in seen:
            raise CliError(f"the server returned the same next_cursor twice: {cursor}")
        seen.add(cursor)
    if args.all:
        result = {key: items, "next_cursor": cursor}
    _emit(args, result, lambda: (_print_skills if skills else _print_agents)(items))
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
        raise CliError(f"unexpected answer from the server (no {key!r} list): is it Switchboard?")
    return items, cursor


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
        if not token.isascii() or not token.isprintable() or " " in token:
            # http.client would raise, echoing the token: say what is wrong without it
            raise CliError("the token may only contain printable ASCII without spaces", status=2)
        headers["Authorization"] = f"Bearer {token}"
    if urllib.parse.urlsplit(server).scheme not in ("http", "https"):
        raise CliError(
            f"invalid server URL {server!r}: expected http://HOST:PORT or https://...", status=2
        )
    try:
        request = urllib.request.Request(server + path, data=data, method=method, headers=headers)
        with urllib.request.urlopen(request, timeout=60) as response:
            payload = response.read()
    except urllib.error.HTTPError as exc:
        raise CliError(_api_error(exc)) from None
    except (ValueError, http.client.InvalidURL) as exc:  # e.g. a port that is no number
        raise CliError(f"invalid server URL {server!r}: {exc}", status=2) from None
    except (urllib.error.URLError, OSError, http.client.HTTPException) as exc:
        reason = getattr(exc, "reason", None) or str(exc) or type(exc).__name__
        raise CliError(f"cannot reach Switchboard at {server}: {reason}") from None
    if not payload:
        return {}
    try:
        result = json.loads(payload)
    except ValueError:
        result = None
    if not isinstance(result, dict):
        raise CliError(f"unexpected answer from {server} (not a JSON object): is it Switchboard?")
    return result


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
