"""``switchboard serve``: check the configuration, then run the server until interrupted."""

from __future__ import annotations

import argparse
import asyncio
import ipaddress
import logging
import os
import re
import socket
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from aiohttp import web
from pydantic import ValidationError

from registry.api import SETTINGS
from registry.errors import RegistryError
from registry.settings import CONFIG_VARIABLE, ConfigFileError, Settings
from router.cli.demo import DEMO_NAMES, DEMO_URLS, demo_agents, parse_demo_ports, ready_lines
from router.cli.errors import CliError
from router.cli.logs import LOG_LEVELS, configure_logging
from router.cli.shutdown import log_draining, log_stopped
from router.observe.logformat import RequestAccessLogger

_DATABASES = ("sqlite", "postgresql")
_SQLALCHEMY_LINK = re.compile(r"\(Background on this error at: [^)]*\)")


def add_commands(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add ``serve`` to the top-level ``commands``."""
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
    serve.add_argument(
        "--demo-ports",
        help="with --demo: the demo agents' ports A,B,C (currency, translate, caption) or a "
        "start port (default: free ports)",
    )
    serve.add_argument("--log-level", default="INFO", help="DEBUG, INFO (default), WARNING, ERROR")
    serve.set_defaults(func=cmd_serve)


def _configure_tracing() -> None:
    """Install the OpenTelemetry SDK when the ``OTEL_*`` variables ask for it; exit status
    2 with one line when they ask for what cannot be done."""
    from router.tracing.setup import TracingConfigError, configure

    try:
        configure()
    except TracingConfigError as error:
        raise CliError(f"cannot export traces: {error}", status=2) from None


def cmd_serve(args: argparse.Namespace) -> int:
    """Run the server until interrupted.

    Everything that can be checked without starting (settings, log level, seed files, the
    database URL and driver) is checked first: exit status 2 with one line. Failures that only
    show at startup (database unreachable, port in use) give exit status 1 with one line.
    """
    # the server's imports are only needed here
    from sqlalchemy.exc import SQLAlchemyError

    from router.app import create_app
    from router.transport.routes import ROUTER

    level = args.log_level.upper()
    if level not in LOG_LEVELS:
        raise CliError(
            f"invalid --log-level {args.log_level!r}: use one of {', '.join(LOG_LEVELS)}",
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
    settings = load_settings(overrides)
    demo_ports = parse_demo_ports(args.demo_ports) if args.demo_ports else {}
    if args.demo_ports and not args.demo:
        raise CliError("--demo-ports needs --demo", status=2)
    if args.seeds:
        settings = settings.model_copy(update={"seeds": [*settings.seeds, *args.seeds]})
    if args.demo:
        settings = _demo_settings(settings)
    _check_seed_files(settings.seeds)
    _check_database_url(settings.database_url)
    _configure_tracing()  # OTEL_EXPORTER_OTLP_ENDPOINT: traces exported (docs/tracing.md)
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
        app.cleanup_ctx.append(demo_agents({n: 0 for n in DEMO_NAMES} | demo_ports))
    log_draining(app, app[ROUTER].relay, settings.shutdown_grace)

    configure_logging(level, settings.log_format)
    log = logging.getLogger("switchboard")
    if not settings.admin_token and settings.client_auth == "none":
        log.warning("SWITCHBOARD_ADMIN_TOKEN is not set: the admin API is read-only")
    if settings.client_auth == "none" and not _loopback(settings.host):
        log.warning(
            "!!! SWITCHBOARD_CLIENT_AUTH=none while listening on %s: anyone who reaches this "
            "port may call every agent and read every task; set SWITCHBOARD_CLIENT_AUTH "
            "(docs/security.md) !!!",
            settings.host,
        )
    _use_uvloop(log)
    try:
        web.run_app(
            app,
            host=settings.host,
            port=settings.port,
            print=lambda text: _ready(app, text, log),
            access_log=logging.getLogger("switchboard.access"),
            access_log_class=RequestAccessLogger,  # the request's id on its access log line
            handler_cancellation=True,  # a client that goes away closes its upstream stream
            shutdown_timeout=settings.shutdown_grace,  # open streams' time to finish
        )
    except SQLAlchemyError as exc:
        raise CliError(
            f"cannot start: database {_safe_url(settings.database_url)}: {_reason(exc)}"
        ) from None
    except socket.gaierror as exc:
        raise CliError(f"cannot start: host {settings.host!r}: {_reason(exc)}") from None
    except (OSError, RegistryError) as exc:
        raise CliError(f"cannot start: {_reason(exc)}") from None
    log_stopped()
    return 0


def _ready(app: web.Application, text: str, log: logging.Logger) -> None:
    """Once the server accepts requests: log aiohttp's line, print the URLs to use."""
    line = text.splitlines()[0].strip("= ")
    log.info(line)
    url = re.search(r"https?://\S+", line)
    if url is None:
        return
    base, console = url.group(0).rstrip("/"), app[SETTINGS].ui
    for shown in ready_lines(base, app.get(DEMO_URLS, {}), console=console):
        print(shown, flush=True)


def load_settings(overrides: dict[str, Any] | None = None) -> Settings:
    """The settings: ``overrides`` (flags) over ``SWITCHBOARD_*`` variables over the
    ``SWITCHBOARD_CONFIG`` file. CliError (status 2, one line) for a bad file or value."""
    try:
        return Settings(**(overrides or {}))
    except ConfigFileError as exc:
        raise CliError(str(exc), status=2) from None
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(map(str, e['loc']))}: {e['msg']}" if e["loc"] else e["msg"]
            for e in exc.errors()
        )
        config = os.environ.get(CONFIG_VARIABLE)
        source = f" (flags, SWITCHBOARD_* variables, config file {config})" if config else ""
        raise CliError(f"invalid settings{source}: {problems}", status=2) from None


def _use_uvloop(log: logging.Logger) -> None:
    """Run the server on uvloop when it is installed (a dependency on CPython, not Windows):
    a faster event loop for the router's many small reads and writes."""
    try:
        import uvloop
    except ImportError:
        log.info("event loop: asyncio (uvloop is not installed)")
        return
    asyncio.set_event_loop_policy(uvloop.EventLoopPolicy())
    log.info("event loop: uvloop %s", uvloop.__version__)


def _check_seed_files(paths: Sequence[str]) -> None:
    """Read and validate every seed file now, so a bad one stops ``serve`` before it starts."""
    from registry.seedfile import load_seed_file

    for path in paths:
        try:
            load_seed_file(path)
        except RegistryError as exc:
            raise CliError(str(exc), status=2) from None


def _check_database_url(url: str) -> None:
    """Parse the database URL and check that it names a supported database."""
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import ArgumentError

    from registry.engine import async_url

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


def _loopback(host: str) -> bool:
    """Whether ``host`` (the bind address) only listens on the loopback interface."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


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
    """Settings for ``--demo``: 127.0.0.1 allowed, the embedding model fetched at start if it
    is missing (routing by meaning, no extra step). The demo agents are registered from the
    packaged ``seeds/demo.toml`` at their actual URLs (:mod:`router.cli.demo`)."""
    loopback = ipaddress.ip_network("127.0.0.1/32")  # the demo agents' address, nothing more
    networks = list(settings.allow_networks)
    if loopback not in networks:
        networks.append(loopback)
    return settings.model_copy(update={"allow_networks": networks, "model_fetch": True})
